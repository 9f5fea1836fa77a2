/*
 * evaluate.cpp - rules, segments, flags (docs/evaluation.md) and the /flags
 * answer.
 *
 * This is the request path: nothing here allocates (PCRE2 reuses the match
 * data made at load time) and nothing throws.
 *
 * Numbers of gt/gte/lt/lte are compared as exact decimals (number.cpp), not
 * as doubles or long doubles.
 */

#include "lanes.hpp"
#include "project.hpp"
#include "rollout.hpp"
#include "text.hpp"

#include <algorithm>
#include <cstring>
#include <new>

namespace fl {

namespace {

/* a == b, b already folded when ignore_case */
bool equal(const char *a, size_t an, const std::string &b, bool ic)
{
    if (an != b.size()) {
        return false;
    }
    if (!ic) {
        return fl::bytes_eq(a, b.data(), an);
    }
    for (size_t i = 0; i < an; i++) {
        if (fold(static_cast<unsigned char>(a[i]))
            != static_cast<unsigned char>(b[i]))
        {
            return false;
        }
    }
    return true;
}

/* Like memcmp of the trait value (folded when ic) against a stored value,
 * then by length: the order std::sort gave the "in" list. */
int compare(const char *a, size_t an, const std::string &b, bool ic)
{
    size_t n = an < b.size() ? an : b.size();

    for (size_t i = 0; i < n; i++) {
        unsigned char x = static_cast<unsigned char>(a[i]);
        unsigned char y = static_cast<unsigned char>(b[i]);
        if (ic) {
            x = fold(x);
        }
        if (x != y) {
            return x < y ? -1 : 1;
        }
    }
    return an < b.size() ? -1 : an > b.size() ? 1 : 0;
}

bool in_list(const char *a, size_t an, const std::vector<std::string> &v,
    bool ic)
{
    size_t lo = 0, hi = v.size();

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = compare(a, an, v[mid], ic);
        if (c == 0) {
            return true;
        }
        if (c < 0) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    return false;
}

bool equal_at(const char *a, const std::string &b, bool ic)
{
    return equal(a, b.size(), b, ic);
}

bool contains(const char *a, size_t an, const std::string &b, bool ic)
{
    size_t bn = b.size();

    if (bn == 0) {
        return true;
    }
    if (bn > an) {
        return false;
    }
    if (!ic) {
        return memmem(a, an, b.data(), bn) != nullptr;
    }
    /* Plain search with folding: values are at most 1 KB. */
    unsigned char first = static_cast<unsigned char>(b[0]);
    for (size_t i = 0; i + bn <= an; i++) {
        if (fold(static_cast<unsigned char>(a[i])) == first
            && equal_at(a + i, b, true))
        {
            return true;
        }
    }
    return false;
}

bool regex_search(const fl_project_s &p, const Rule &r, const char *a,
    size_t an)
{
    if (!r.re || !p.match_data) {
        return false;
    }
    /* "" for an empty value: PCRE2 10.42 wants a non-NULL subject. */
    PCRE2_SPTR subject = reinterpret_cast<PCRE2_SPTR>(a ? a : "");
    /* JIT code is run directly: pcre2_match() would check the subject and
     * options first, and then call the same code.  A subject that is not
     * valid UTF-8 is safe there only because every pattern is compiled
     * with PCRE2_MATCH_INVALID_UTF (project.cpp); the match limit of
     * match_ctx holds for both */
    int rc = r.jit
             ? pcre2_jit_match(r.re.get(), subject, an, 0, 0,
                               p.match_data.get(), p.match_ctx.get())
             : pcre2_match(r.re.get(), subject, an, 0, 0,
                           p.match_data.get(), p.match_ctx.get());
    /* rc == 0 means a match with too small an ovector: still a match.
     * Errors (e.g. the match limit) count as no match. */
    return rc >= 0;
}

} // namespace

/* The trait r reads of u, or nullptr; "$userId" is written into *id. */
const fl_trait_t *rule_trait(const Rule &r, const fl_user_t *u,
    fl_trait_t *id)
{
    if (r.user_id) {
        /* "$userId": the caller's id, absent when it has none */
        id->name = r.trait.data();
        id->name_len = r.trait.size();
        id->value = u ? u->user_id : nullptr;
        id->value_len = u ? u->user_id_len : 0;
        return (u != nullptr && u->user_id != nullptr) ? id : nullptr;
    }

    return fl_user_trait(u, r.trait.data(), r.trait.size());
}

bool rule_matches(const fl_project_s &p, const Rule &r, const fl_user_t *u)
{
    fl_trait_t id;

    return rule_test(p, r, rule_trait(r, u, &id));
}

/* Whether a gt/gte/lt/lte rule holds for the caller's value read as the
 * number d (nullptr: not a number). */
inline bool number_holds(const Rule &r, const DecimalView *d)
{
    if (d == nullptr) {
        return false;
    }
    int c = decimal_cmp(*d, r.number.view());
    return r.op == Op::gt ? c > 0 : r.op == Op::gte ? c >= 0
         : r.op == Op::lt ? c < 0 : c <= 0;
}

/* Whether a semver_* rule holds for the caller's value v read as the
 * version tv (nullptr: not a version); the rule's was read at load. */
inline bool semver_holds(const Rule &r, const char *v, const Semver *tv)
{
    if (tv == nullptr) {
        return false;
    }
    int c = semver_cmp(v, *tv, r.value.data(), r.semver);
    return r.op == Op::semver_eq ? c == 0
         : r.op == Op::semver_gt ? c > 0 : c < 0;
}

/* Whether the trait t (nullptr: the caller has none) passes r. */
bool rule_test(const fl_project_s &p, const Rule &r, const fl_trait_t *t)
{
    if (t == nullptr) {
        return r.op == Op::not_exists || r.op == Op::neq
               || r.op == Op::not_in;
    }

    const char *v = t->value ? t->value : "";
    size_t vn = t->value ? t->value_len : 0;
    bool ic = r.ignore_case;

    switch (r.op) {
    case Op::exists:      return true;
    case Op::not_exists:  return false;
    case Op::eq:          return equal(v, vn, r.value, ic);
    case Op::neq:         return !equal(v, vn, r.value, ic);
    case Op::in:          return in_list(v, vn, r.values, ic);
    case Op::not_in:      return !in_list(v, vn, r.values, ic);
    case Op::contains:    return contains(v, vn, r.value, ic);
    case Op::starts_with:
        return vn >= r.value.size() && equal_at(v, r.value, ic);
    case Op::ends_with:
        return vn >= r.value.size()
               && equal_at(v + vn - r.value.size(), r.value, ic);
    case Op::regex:       return regex_search(p, r, v, vn);

    case Op::gt: case Op::gte: case Op::lt: case Op::lte: {
        DecimalView d;
        return number_holds(r, parse_decimal(v, vn, &d) ? &d : nullptr);
    }

    case Op::semver_eq: case Op::semver_gt: case Op::semver_lt: {
        Semver tv;
        return semver_holds(r, v, semver_parse(v, vn, &tv) ? &tv : nullptr);
    }
    }

    return false;
}

} // namespace fl


namespace {

using fl::in_rollout;

/* Segment results are shared by the flags of one evaluation: a segment
 * is evaluated at most once per call for the first cache_size segments
 * (a stack array: no allocation), and every time beyond that.  So are
 * the caller's traits the rules read: each of the first trait_slots trait
 * names of the project (fl::Rule::slot) is looked up once. */
constexpr size_t cache_size = 1024;
constexpr size_t trait_slots = 64;
enum : uint8_t { unknown = 0, no = 1, yes = 2 };

struct EvalCache {
    uint8_t             seg[cache_size];
    /* the first 64 segments' results again as bits (seg_known: evaluated,
     * seg_yes: matched), for flags whose segments are all among them
     * (FlagHot::seg_mask): one AND decides their gate */
    uint64_t            seg_known = 0, seg_yes = 0;
    uint64_t            known = 0;          /* a bit a trait slot */
    const fl_trait_t   *trait[trait_slots];
    /* the trait of a slot read as a number and as a version, each at
     * most once (num_known, ver_known) and whether it is one (num_ok,
     * ver_ok): segments that compare one trait share the reading */
    uint64_t            num_known = 0, num_ok = 0;
    uint64_t            ver_known = 0, ver_ok = 0;
    union Num {
        Num() {}                            /* left unset until read */
        fl::DecimalView v;
    }                   num[trait_slots];
    fl::Semver          ver[trait_slots];
};

bool is_number_op(fl::Op op)
{
    return op == fl::Op::gt || op == fl::Op::gte || op == fl::Op::lt
           || op == fl::Op::lte;
}

bool is_semver_op(fl::Op op)
{
    return op == fl::Op::semver_eq || op == fl::Op::semver_gt
           || op == fl::Op::semver_lt;
}

/* rule_test() of r on the caller's trait t of slot r.slot (< trait_slots),
 * with the slot's number or version read once an evaluation. */
bool slot_test(const fl_project_s &p, const fl::Rule &r, const fl_trait_t *t,
    EvalCache *cache)
{
    uint64_t bit = uint64_t(1) << r.slot;

    if (t != nullptr && is_number_op(r.op)) {
        if (!(cache->num_known & bit)) {
            fl::DecimalView d;
            cache->num_known |= bit;
            if (fl::parse_decimal(t->value ? t->value : "",
                                  t->value ? t->value_len : 0, &d))
            {
                new (&cache->num[r.slot].v) fl::DecimalView(d);
                cache->num_ok |= bit;
            }
        }
        return fl::number_holds(r, (cache->num_ok & bit)
                                   ? &cache->num[r.slot].v : nullptr);
    }

    if (t != nullptr && is_semver_op(r.op)) {
        const char *v = t->value ? t->value : "";
        if (!(cache->ver_known & bit)) {
            cache->ver_known |= bit;
            if (fl::semver_parse(v, t->value ? t->value_len : 0,
                                 &cache->ver[r.slot]))
            {
                cache->ver_ok |= bit;
            }
        }
        return fl::semver_holds(r, v, (cache->ver_ok & bit)
                                      ? &cache->ver[r.slot] : nullptr);
    }

    return fl::rule_test(p, r, t);
}

bool segment_matches(const fl_project_s &p, const fl::Segment &s,
    const fl_user_t *u, EvalCache *cache)
{
    for (const fl::Rule &r : s.rules) {
        const fl_trait_t *t;
        fl_trait_t id;

        if (cache != nullptr && r.slot < trait_slots) {
            uint64_t bit = uint64_t(1) << r.slot;
            if (!(cache->known & bit)) {
                cache->trait[r.slot] = fl_user_trait(u, r.trait.data(),
                                                     r.trait.size());
                cache->known |= bit;
            }
            t = cache->trait[r.slot];
            if (!slot_test(p, r, t, cache)) {
                return false;
            }
            continue;
        }

        t = fl::rule_trait(r, u, &id);
        if (!fl::rule_test(p, r, t)) {
            return false;
        }
    }
    return true;
}

/* Whether one of the segments segs matches u (false for none), through
 * the cache of this evaluation when given: a flag's segments, a rule's. */
FL_HOT_INLINE bool any_of(const fl_project_s &p, const uint32_t *segs,
    size_t n, const fl_user_t *u, EvalCache *cache)
{
    for (size_t k = 0; k < n; k++) {
        uint32_t si = segs[k];
        bool m;
        if (cache != nullptr && si < cache_size
            && cache->seg[si] != unknown)
        {
            m = cache->seg[si] == yes;
        } else {
            m = segment_matches(p, p.segments[si], u, cache);
            if (cache != nullptr && si < cache_size) {
                cache->seg[si] = m ? yes : no;
            }
        }
        if (m) {
            return true;
        }
    }
    return false;
}

/* Segment si (one of the first 64) into cache's bits: evaluated once,
 * through seg[] as any_of() keeps it; whether it matches u. */
bool segment_into_bits(const fl_project_s &p, unsigned si,
    const fl_user_t *u, EvalCache *cache)
{
    uint64_t bit = uint64_t(1) << si;
    if (cache->seg[si] == unknown) {
        cache->seg[si] = segment_matches(p, p.segments[si], u, cache)
                         ? yes : no;
    }
    cache->seg_known |= bit;
    if (cache->seg[si] == yes) {
        cache->seg_yes |= bit;
        return true;
    }
    return false;
}

/* Whether one of the segments of mask not yet in cache's bits matches
 * u: they are evaluated into the bits until one does, as any_of() stops
 * at the first. */
bool segments_into_bits(const fl_project_s &p, uint64_t mask,
    const fl_user_t *u, EvalCache *cache)
{
    for (uint64_t need = mask & ~cache->seg_known; need != 0;
         need &= need - 1)
    {
        if (segment_into_bits(p, static_cast<unsigned>(__builtin_ctzll(need)),
                              u, cache))
        {
            return true;
        }
    }
    return false;
}

/* Whether one of the segments of mask (among the first 64, at least
 * one) matches u: any_of() by the cache's bits. */
FL_HOT_INLINE bool mask_gate(const fl_project_s &p, uint64_t mask,
    const fl_user_t *u, EvalCache *cache)
{
    if ((mask & cache->seg_yes) != 0) {
        return true;
    }
    return (mask & ~cache->seg_known) != 0
           && segments_into_bits(p, mask, u, cache);
}

/* Whether one of the segments of the simple flag h matches u (h has at
 * least one): any_of(), by its bits when it has them. */
FL_HOT_INLINE bool hot_gate(const fl_project_s &p, const fl::FlagHot &h,
    const fl_user_t *u, EvalCache *cache)
{
    if (cache == nullptr || !h.seg_bits) {
        return any_of(p, p.hot_segs.data() + h.seg_at, h.nsegs, u, cache);
    }
    return mask_gate(p, h.seg_mask, u, cache);
}

FL_HOT_INLINE bool any_of(const fl_project_s &p,
    const std::vector<uint32_t> &segs, const fl_user_t *u, EvalCache *cache)
{
    return any_of(p, segs.data(), segs.size(), u, cache);
}

/* Whether one of f's segments matches u (f has at least one). */
FL_HOT_INLINE bool any_segment(const fl_project_s &p, const fl::Flag &f,
    const fl_user_t *u, EvalCache *cache)
{
    return any_of(p, f.segments, u, cache);
}

/* What decided a flag for a caller, beside the value. */
struct Decision {
    bool      value;
    bool      matched;     /* no rules: one of the segments matched */
    bool      targeted;    /* a named user */
    uint16_t  rule;        /* 1 + the rule that decided; 0 none */
};

/* The caller's entry among the project's named users, looked up at most
 * once an evaluation. */
struct CallerId {
    bool                        done = false;
    const fl::NamedIndex::Id   *named = nullptr;
    /* the caller's id mixed once for the buckets of many flags
     * (fl::KeyMix), prepared at the first bucket: mix says whether this
     * evaluation has flags enough to pay for it */
    bool                        mix = false;
    bool                        km_done = false;
    bool                        km_ok = false;
    fl::KeyMix                  km;
    /* fl_flags_answer() with lanes: the current chunk's buckets
     * (lane_buckets()), found through the project's lane_slot */
    const uint32_t             *lanes = nullptr;
    const uint16_t             *lane_slot = nullptr;
};

/* Whether u is inside percentage p of f: in_rollout(), through the
 * caller's premixed id when the evaluation prepared one. */
FL_HOT_INLINE bool bucket_in(const fl::Flag &f, uint32_t p,
    const fl_user_t *u, CallerId *id)
{
    if (id == nullptr || !id->mix) {
        return in_rollout(f, p, u);
    }
    if (!id->km_done && f.stickiness.empty() && p > 0 && p < FL_MILLI_MAX) {
        id->km_done = true;
        if (u != nullptr && u->user_id != nullptr
            && fl::KeyMix::fits(u->user_id_len))
        {
            id->km.prepare(u->user_id, u->user_id_len);
            id->km_ok = true;
        }
    }
    return fl::in_rollout_mixed(f, p, u, id->km_ok ? &id->km : nullptr);
}

/* bucket_in() for a simple flag (no stickiness trait) from its FlagHot
 * alone; the caller's id unmixed, or too short or long to mix, takes
 * in_rollout()'s path through the flag. */
FL_HOT_INLINE bool hot_bucket_in(const fl_project_s &p, size_t index,
    const fl::FlagHot &h, uint32_t pct, const fl_user_t *u, CallerId *id)
{
    if (pct >= FL_MILLI_MAX) {
        return true;
    }
    if (pct == 0 || u == nullptr) {
        return false;
    }
    if (id != nullptr && id->lanes != nullptr) {
        uint16_t s = id->lane_slot[index];
        if (s != fl::lane_none) {
            return id->lanes[s] < pct;
        }
    }
    if (id != nullptr && !id->km_done && id->mix) {
        id->km_done = true;
        if (u->user_id != nullptr && fl::KeyMix::fits(u->user_id_len)) {
            id->km.prepare(u->user_id, u->user_id_len);
            id->km_ok = true;
        }
    }
    if (id != nullptr && id->km_ok) {
        return id->km.bucket(h.prefix_h, h.prefix_ntail, h.prefix_tail,
                             h.prefix_total) < pct;
    }
    return in_rollout(p.flags[index], pct, u);
}

/* Whether rule r of a flag with rules matches: one of its segments does,
 * or it names none. */
FL_HOT_INLINE bool targeting_rule_matches(const fl_project_s &p,
    const fl::TargetingRule &r, const fl_user_t *u, EvalCache *cache)
{
    return r.segments.empty() || any_of(p, r.segments, u, cache);
}

/* flag_value() of a simple flag h (index): lines 1, 2 and 6 from its 48
 * bytes: no rules, no named users, keyed by the userId (an override's
 * percentage is eff). */
FL_HOT_INLINE Decision simple_value(const fl_project_s &p, size_t index,
    const fl::FlagHot &h, uint32_t eff, uint8_t sw, const fl_user_t *u,
    EvalCache *cache, CallerId *id)
{
    Decision d{false, false, false, 0};

    if (!h.enabled || sw == FL_SWITCH_ROLLED_BACK
        || sw == FL_SWITCH_OVERRIDE_OFF)
    {
        if (h.enabled && h.nsegs != 0) {
            d.matched = hot_gate(p, h, u, cache);
        }
        return d;
    }
    bool gate = true;
    if (h.nsegs != 0) {
        gate = d.matched = hot_gate(p, h, u, cache);
    }
    d.value = gate && hot_bucket_in(p, index, h, eff, u, id);
    return d;
}

/*
 * The value of flag f for u (docs/evaluation.md), the one rule of
 * fl_evaluate_detail(), fl_evaluate_values() and fl_evaluate_flag_detail().
 * The first line that applies decides:
 *   1. off in the file, rolled back, overridden off         -> off
 *   2. overridden with a percentage: it replaces every percentage and
 *      sets the named users aside (without rules: the segments still
 *      gate, as before rules existed)
 *   3. a named user                                         -> on / off
 *   4. rules: the first that matches, with its percentage
 *   5. rules, none matched: the fallthrough, eff (a ramp's stage)
 *   6. no rules: the segments gate, then eff
 * Every percentage is tried against the flag's one bucket.
 */
FL_HOT_INLINE Decision flag_value(const fl_project_s &p, size_t index,
    const fl::Flag &f, uint32_t eff, uint8_t sw, const fl_user_t *u,
    EvalCache *cache, CallerId *id)
{
    Decision d{false, false, false, 0};
    const fl::FlagHot &h = p.hot[index];

    if (h.simple) {
        return simple_value(p, index, h, eff, sw, u, cache, id);
    }

    if (!f.enabled || sw == FL_SWITCH_ROLLED_BACK
        || sw == FL_SWITCH_OVERRIDE_OFF)
    {
        if (f.enabled && !f.has_rules && !f.segments.empty()) {
            /* as before: the match is reported, the value is off */
            d.matched = any_segment(p, f, u, cache);
        }
        return d;
    }

    if (sw != FL_SWITCH_OVERRIDE_PERCENT && !f.targets.empty()
        && u != nullptr && u->user_id != nullptr && u->user_id_len != 0)
    {
        CallerId local;
        CallerId &c = id != nullptr ? *id : local;
        if (!c.done) {
            c.named = p.named.find(u->user_id, u->user_id_len,
                                   fl::named_hash(u->user_id,
                                                  u->user_id_len));
            c.done = true;
        }
        int named = fl::named_in(p.named, c.named, index);
        if (named >= 0) {
            d.value = named == 1;
            d.targeted = true;
            return d;
        }
    }

    if (!f.has_rules) {
        bool gate = true;
        if (!f.segments.empty()) {
            gate = d.matched = any_segment(p, f, u, cache);
        }
        d.value = gate && bucket_in(f, eff, u, id);
        return d;
    }

    if (sw != FL_SWITCH_OVERRIDE_PERCENT) {
        for (size_t k = 0; k < f.rules.size(); k++) {
            const fl::TargetingRule &r = f.rules[k];
            if (targeting_rule_matches(p, r, u, cache)) {
                d.rule = static_cast<uint16_t>(k + 1);
                d.value = bucket_in(f, r.rollout_milli, u, id);
                return d;
            }
        }
    }

    d.value = bucket_in(f, eff, u, id);
    return d;
}

/*
 * OFREP's reason (docs/ofrep.md), from what decided the value.
 *
 * A flag without rules or named users, first line that applies:
 *   switched off in the file, rolled back or overridden off  -> DISABLED
 *   effective percentage 0                                   -> STATIC
 *   segments, none matched                                   -> TARGETING_MATCH
 *   0 < effective < 100                                      -> SPLIT
 *   segments, one matched (effective 100)                    -> TARGETING_MATCH
 *   otherwise (100 %, no segments)                           -> STATIC
 *
 * A flag with rules or named users:
 *   switched off in the file, rolled back or overridden off  -> DISABLED
 *   overridden with a percentage P: 0 < P < 100 SPLIT, else     STATIC
 *   a named user                                             -> TARGETING_MATCH
 *   a rule decided: 0 < its percentage < 100 SPLIT, else        TARGETING_MATCH
 *   named users and segments (no rules): the segments are one rule:
 *     one matched and 0 < effective < 100 SPLIT, else           TARGETING_MATCH
 *   the fallthrough (without rules or segments: the flag's percentage):
 *                    0 < effective < 100 SPLIT, else            DEFAULT
 */
FL_HOT_INLINE void detail_one(const fl_project_s &p, size_t index,
    const fl::Flag &f, uint32_t eff, uint8_t sw, const fl_user_t *u,
    EvalCache *cache, CallerId *id, fl_detail_t *out)
{
    Decision d = flag_value(p, index, f, eff, sw, u, cache, id);
    bool off = !f.enabled || sw == FL_SWITCH_ROLLED_BACK
               || sw == FL_SWITCH_OVERRIDE_OFF;
    bool split = eff > 0 && eff < FL_MILLI_MAX;
    uint8_t reason;

    if (!f.has_rules && f.targets.empty()) {
        bool segs = !f.segments.empty();
        if (off) {
            reason = FL_REASON_DISABLED;
        } else if (eff == 0) {
            reason = FL_REASON_STATIC;
        } else if (segs && !d.matched) {
            reason = FL_REASON_TARGETING_MATCH;
        } else if (split) {
            reason = FL_REASON_SPLIT;
        } else if (segs) {
            reason = FL_REASON_TARGETING_MATCH;
        } else {
            reason = FL_REASON_STATIC;
        }

    } else if (off) {
        reason = FL_REASON_DISABLED;
    } else if (sw == FL_SWITCH_OVERRIDE_PERCENT) {
        reason = split ? FL_REASON_SPLIT : FL_REASON_STATIC;
    } else if (d.targeted) {
        reason = FL_REASON_TARGETING_MATCH;
    } else if (d.rule != 0) {
        uint32_t rp = f.rules[d.rule - 1].rollout_milli;
        reason = rp > 0 && rp < FL_MILLI_MAX ? FL_REASON_SPLIT
                                             : FL_REASON_TARGETING_MATCH;
    } else if (!f.has_rules && !f.segments.empty()) {
        /* named users and segments: the segments are the one rule */
        reason = d.matched && split ? FL_REASON_SPLIT
                                    : FL_REASON_TARGETING_MATCH;
    } else {
        reason = split ? FL_REASON_SPLIT : FL_REASON_DEFAULT;
    }

    out->enabled = d.value;
    out->reason = reason;
    out->has_segments = !f.has_rules && !f.segments.empty();
    out->segment_matched = d.matched;
    out->rolled_back = sw == FL_SWITCH_ROLLED_BACK;
    out->sw = sw;
    out->targeted = d.targeted;
    out->rule = d.rule;
    out->rollout_milli = eff;
}

/* Every flag of p in file order with its effective percentage (the
 * configured one when effective_milli is NULL), its switch, the call's
 * cache of segment results and the caller's id hashed at most once: the
 * loop both evaluations share. */
template <class F>
FL_HOT_INLINE void each_flag(const fl_project_t *p,
    const uint32_t *effective_milli, fl_detail_t *out, F one)
{
    if (p == nullptr || out == nullptr) {
        return;
    }

    EvalCache cache;
    std::memset(cache.seg, unknown,
                p->segments.size() < cache_size ? p->segments.size()
                                                : cache_size);
    CallerId id;
    /* the id's blocks mixed once cost about four buckets */
    id.mix = p->flags.size() >= 8;

    /* the vector's size and data read once: one() writes memory the
     * compiler cannot tell apart from the vector's */
    size_t n = p->flags.size();
    const fl::Flag *flags = p->flags.data();

    for (size_t i = 0; i < n; i++) {
        const fl::Flag &f = flags[i];
        one(i, f, effective_milli ? effective_milli[i] : f.rollout_milli,
            &cache, &id);
    }
}

/* The rest of flag f's object after its value, with the percentage eff
 * instead of its configured one (Flag::json_rest). */
char *put_rest_percent(const fl::Flag &f, uint32_t eff, char *o)
{
    static const char pct[] = ",\"rolloutPercentage\":";

    std::memcpy(o, pct, sizeof(pct) - 1);
    o += sizeof(pct) - 1;
    o += fl_json_milli(eff, o);
    std::memcpy(o, f.json_tail.data(), f.json_tail.size());
    return o + f.json_tail.size();
}

/* put_flag() of a flag rolled back or overridden: the percentage differs
 * from the prebuilt object's. */
__attribute__((noinline)) char *put_flag_percent(const fl_project_s &p,
    size_t i, bool on, uint32_t eff, char *o)
{
    const fl::Flag &f = p.flags[i];
    const std::string &head = on ? f.json_head_on : f.json_head_off;

    std::memcpy(o, head.data(), head.size());
    return put_rest_percent(f, eff, o + head.size());
}

/* N bytes (a multiple of 32) from s to o.  Wide: in 32-byte vectors,
 * for the loop compiled for AVX2 (flags_answer_avx2()), one move each;
 * otherwise memcpy(), which the compiler expands in 16-byte moves (its
 * 32-byte vectors would go through the stack without AVX). */
typedef char fl_v32 __attribute__((vector_size(32), aligned(1), may_alias));

template <size_t N, bool Wide>
FL_HOT_INLINE void copy_fixed(char *o, const char *s)
{
    static_assert(N % 32 == 0, "whole vectors");
    if (!Wide) {
        std::memcpy(o, s, N);
        return;
    }
#pragma GCC unroll 4
    for (size_t k = 0; k < N; k += 32) {
        *reinterpret_cast<fl_v32 *>(o + k)
            = *reinterpret_cast<const fl_v32 *>(s + k);
    }
}

/* Flag i's object in GET /flags' answer (after its ','), with value on
 * and effective percentage eff: the writer of fl_flags_json() and of
 * fl_flags_answer() where lanes do not run (where they do, put_word()
 * writes the same bytes from the answer's frame; both write another
 * percentage with put_rest_percent()).  With the configured percentage the whole object is
 * one copy of its prebuilt text: of up to 128 bytes in one of three fixed
 * sizes the compiler copies inline (64, 96 or 128, by the longer of the
 * flag's two objects), the bytes past the object overwritten by the next
 * one, unless it is the last (fl::json_copy_slack). */
template <bool Wide = false>
FL_HOT_INLINE char *put_flag(const fl_project_s &p, size_t i,
    const fl::FlagHot &h, const char *json, bool on, uint32_t eff,
    bool last, char *o)
{
    if (eff == h.rollout_milli) {
        /* on or off chosen by an index, not a branch: on a partial
         * rollout the value is a coin toss a caller, and a branch on it
         * would be mispredicted half the time (and its random history
         * would confuse the predictor of the loop's other branches) */
        const fl::JsonPick *two = &p.json_pick[2 * i];
        const char *whole = json + two[on].at;
        size_t len = two[on].len;
        /* the copy's size by the longer of the two, the same whatever the
         * value: a branch the predictor learns flag by flag */
        size_t most = std::max(two[0].len, two[1].len);
        if (most <= 64 && !last) {
            copy_fixed<64, Wide>(o, whole);
        } else if (most <= 96 && !last) {
            copy_fixed<96, Wide>(o, whole);
        } else if (most <= fl::json_copy_slack && !last) {
            copy_fixed<fl::json_copy_slack, Wide>(o, whole);
        } else {
            std::memcpy(o, whole, len);
        }
        return o + len;
    }
    return put_flag_percent(p, i, on, eff, o);
}

/* A flag's value into the answer's frame: `true` or `false`, in one
 * store of 8 bytes whose last ones the piece after it overwrites. */
FL_HOT_INLINE char *put_value(bool on, char *o)
{
    /* the bytes of "true" and "false", little-endian */
    static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the words' bytes");
    uint64_t word = on ? 0x65757274ull : 0x65736c6166ull;

    std::memcpy(o, &word, sizeof(word));
    return o + 5 - on;
}

/* Flag i's piece of the frame (fl_project_s::frame_pick) by its length,
 * out of put_word()'s loop: a piece longer than the project's
 * json_width, the answer's last, or (eff not its configured percentage)
 * a flag rolled back or overridden, whose rest of its object is written
 * with eff before the piece's part that starts the next flag. */
__attribute__((noinline)) char *put_piece_apart(const fl_project_s &p,
    size_t i, uint32_t eff, char *o)
{
    const fl::JsonPick &k = p.frame_pick[i];
    const char *piece = p.json_frame.data() + k.at;
    size_t skip = 0;

    if (eff != p.hot[i].rollout_milli) {
        const fl::Flag &f = p.flags[i];
        o = put_rest_percent(f, eff, o);
        skip = f.json_rest.size();
    }
    std::memcpy(o, piece + skip, k.len - skip);
    return o + k.len - skip;
}

/* The values and pieces of flags [from, end) of one word, none of them
 * the answer's last: bit i % 64 of bits is flag i's value.  A flag of
 * apart (a bit a flag of the word) by put_piece_apart(); each other one
 * copy of W bytes (fl_project_s::json_width) of its piece of the frame,
 * whose bytes past the piece the next value overwrites: no percentage
 * compared, no length chosen, flag by flag. */
template <size_t W, bool Wide>
FL_HOT_INLINE char *put_word(const fl_project_s &p, size_t from, size_t end,
    uint64_t bits, uint64_t apart, const uint32_t *effective_milli, char *o)
{
    const fl::JsonPick *pick = p.frame_pick.data();
    const char *frame = p.json_frame.data();

    for (size_t i = from; i < end; i++) {
        unsigned j = static_cast<unsigned>(i % 64);

        o = put_value((bits >> j) & 1, o);
        if (__builtin_expect((apart >> j) & 1, 0)) {
            o = put_piece_apart(p, i, effective_milli[i], o);
            continue;
        }
        const fl::JsonPick &k = pick[i];
        copy_fixed<W, Wide>(o, frame + k.at);
        o += k.len;
    }
    return o;
}

/* flag_value() of a flag that is not simple, out of the loops that
 * inline the simple ones. */
__attribute__((noinline)) bool other_value(const fl_project_s &p,
    size_t index, uint32_t eff, uint8_t sw, const fl_user_t *u,
    EvalCache *cache, CallerId *id)
{
    return flag_value(p, index, p.flags[index], eff, sw, u, cache, id).value;
}

/*
 * GET /flags' answer in one pass over the flags: each flag's value as
 * fl_evaluate_values() gives it (flag_value()), then its object as
 * fl_flags_json() writes it (put_flag()), and its bit; no fl_detail_t is
 * written or read back (t/unit/test_answer.c holds the two ways to the
 * same bytes and values).  The glue always has the percentages and
 * switches in force: the loop is compiled for them, and once for either
 * missing.
 */
template <bool Given, bool Wide = false>
FL_HOT_INLINE size_t flags_answer(const fl_project_t *p, const fl_user_t *u,
    const uint32_t *effective_milli, const uint8_t *sw, uint64_t *enabled,
    char *buf)
{
    static const char open[] = "{\"flags\":";
    static const char close[] = "]}";
    size_t n = p->flags.size();
    char *o = buf;

    std::memcpy(o, open, sizeof(open) - 1);
    o += sizeof(open) - 1;

    if (n == 0) {
        *o++ = '[';
        std::memcpy(o, close, sizeof(close) - 1);
        return static_cast<size_t>(o + sizeof(close) - 1 - buf);
    }

    EvalCache cache;
    std::memset(cache.seg, unknown,
                p->segments.size() < cache_size ? p->segments.size()
                                                : cache_size);
    CallerId id;
    id.mix = n >= 8;

    /* the buckets of each chunk's simple flags 8 at a time, when the
     * caller's id can be premixed (lanes.hpp) */
    uint32_t lanes[fl::lane_chunk_slots + 1];
    bool use_lanes = id.mix && !p->lane_groups.empty() && u != nullptr
                     && u->user_id != nullptr
                     && fl::KeyMix::fits(u->user_id_len) && fl::lanes_ready();
    if (use_lanes) {
        id.km.prepare(u->user_id, u->user_id_len);
        id.km_done = id.km_ok = true;
        id.lanes = lanes;
        id.lane_slot = p->lane_slot.data();
    }

    const fl::FlagHot *hot = p->hot.data();
    const char *json = p->json.data();
    /* flag i: its value, its ',' and object (the answer's last: copied
     * by its length) */
    auto one = [&](size_t i, bool last) FL_HOT_INLINE_LAMBDA -> bool {
        const fl::FlagHot &h = hot[i];
        uint32_t eff;
        uint8_t s;

        if (Given) {
            eff = effective_milli[i];
            s = sw[i];
        } else {
            eff = effective_milli ? effective_milli[i] : h.rollout_milli;
            s = sw ? sw[i] : uint8_t(FL_SWITCH_NONE);
        }

        bool v = h.simple
                 ? simple_value(*p, i, h, eff, s, u, &cache, &id).value
                 : other_value(*p, i, eff, s, u, &cache, &id);

        *o++ = ',';
        o = put_flag<Wide>(*p, i, h, json, v, eff, last, o);
        return v;
    };

    /* Where lanes run, a word's 64 values come first, all at once
     * (lane_values(): no branch on the caller's segments or buckets), the
     * flags it cannot decide by the one evaluation; then the word's
     * values put into the answer's frame (put_word()).  A
     * segment's result does not depend on which flag asks first, so the
     * segments the word's arithmetic reads are either all evaluated up
     * front, or (lazy, fl_project_s::val_lazy: where the load found few
     * flags inside their percentage naming each segment) only for the
     * flags a bucket let on, after the arithmetic (mask_gate(), as
     * hot_gate() decides a flag: the first segment that matches opens the
     * gate). */
    bool words = Wide && Given && use_lanes;
    bool lazy = words && fl::answer_lazy(*p);
    if (words) {
        lanes[fl::lane_none] = 0;
        for (uint64_t need = lazy ? 0 : p->val_segs; need != 0;
             need &= need - 1)
        {
            segment_into_bits(*p, static_cast<unsigned>(__builtin_ctzll(need)),
                              u, &cache);
        }
    }
    auto word = [&](size_t w, uint64_t *configured) FL_HOT_INLINE_LAMBDA
        -> uint64_t {
        size_t at = w * 64, count = n - at < 64 ? n - at : 64;
        const uint32_t *e = effective_milli + at;
        const uint8_t *s = sw + at;
        uint32_t e_last[64];
        uint8_t s_last[64];

        if (count < 64) {
            /* the last word: 64 of each, the rest 0 */
            std::memset(e_last, 0, sizeof(e_last));
            std::memset(s_last, 0, sizeof(s_last));
            std::memcpy(e_last, e, count * sizeof(uint32_t));
            std::memcpy(s_last, s, count);
            e = e_last;
            s = s_last;
        }
        uint64_t redo;
        uint64_t valid = count == 64 ? ~uint64_t(0)
                                     : (uint64_t(1) << count) - 1;
        /* lazy: as if every segment matched, then the gates */
        uint64_t v = fl::lane_values(*p, w, e, s, lanes,
                                     lazy ? ~uint64_t(0) : cache.seg_yes,
                                     &redo, configured) & valid;
        redo &= valid;
        for (uint64_t gate = lazy ? v & ~redo & p->val_gated[w] : 0;
             gate != 0; gate &= gate - 1)
        {
            if (!mask_gate(*p, p->val_seg[at + static_cast<unsigned>(
                                               __builtin_ctzll(gate))],
                           u, &cache))
            {
                v &= ~(gate & (0 - gate));
            }
        }
        for (; redo != 0; redo &= redo - 1) {
            unsigned j = static_cast<unsigned>(__builtin_ctzll(redo));
            size_t i = at + j;
            const fl::FlagHot &h = hot[i];
            bool x = h.simple
                     ? simple_value(*p, i, h, effective_milli[i], sw[i], u,
                                    &cache, &id).value
                     : other_value(*p, i, effective_milli[i], sw[i], u,
                                   &cache, &id);
            v = (v & ~(uint64_t(1) << j)) | (uint64_t(x) << j);
        }
        return v;
    };

    /* the frame's start: the first flag's object up to its value */
    if (words) {
        *o++ = '[';
        std::memcpy(o, p->json_frame.data(), p->frame_pick[0].at);
        o += p->frame_pick[0].at;
    }

    /* every flag but the last, 64 to a word of bits */
    static_assert(fl::lane_chunk_flags % 64 == 0, "a chunk is whole words");
    for (size_t w = 0; w < FL_BIT_WORDS(n); w++) {
        size_t end = (w + 1) * 64 < n - 1 ? (w + 1) * 64 : n - 1;
        uint64_t bits = 0;

        if (use_lanes && w % (fl::lane_chunk_flags / 64) == 0) {
            fl::lane_buckets(*p, w / (fl::lane_chunk_flags / 64), id.km,
                             lanes);
        }

        if (words) {
            uint64_t configured;
            bits = word(w, &configured);
            uint64_t apart = ~configured | p->json_long[w];
            switch (p->json_width) {
            case 64:
                o = put_word<64, Wide>(*p, w * 64, end, bits, apart,
                                       effective_milli, o);
                break;
            case 96:
                o = put_word<96, Wide>(*p, w * 64, end, bits, apart,
                                       effective_milli, o);
                break;
            default:
                o = put_word<fl::json_copy_slack, Wide>(*p, w * 64, end, bits,
                                                        apart,
                                                        effective_milli, o);
                break;
            }
        } else {
            for (size_t i = w * 64; i < end; i++) {
                bits |= uint64_t(one(i, false)) << (i % 64);
            }
        }
        enabled[w] = bits;
    }
    if (words) {
        o = put_value((enabled[(n - 1) / 64] >> ((n - 1) % 64)) & 1, o);
        o = put_piece_apart(*p, n - 1, effective_milli[n - 1], o);
    } else {
        enabled[(n - 1) / 64] |= uint64_t(one(n - 1, true)) << ((n - 1) % 64);
    }

    buf[sizeof(open) - 1] = '[';
    std::memcpy(o, close, sizeof(close) - 1);
    return static_cast<size_t>(o + sizeof(close) - 1 - buf);
}

#ifdef FL_LANES_AVX2
/* The same loop where lanes run (lanes.hpp): compiled for AVX2, its
 * fixed-size copies take 32 bytes an instruction instead of 16. */
__attribute__((target("avx2"), noinline))
size_t flags_answer_avx2(const fl_project_t *p, const fl_user_t *u,
    const uint32_t *effective_milli, const uint8_t *sw, uint64_t *enabled,
    char *buf)
{
    return flags_answer<true, true>(p, u, effective_milli, sw, enabled, buf);
}
#endif

} // namespace


extern "C" {

size_t fl_flags_answer(const fl_project_t *p, const fl_user_t *u,
    const uint32_t *effective_milli, const uint8_t *sw, uint64_t *enabled,
    char *buf) noexcept
{
    if (p == nullptr) {
        static const char none[] = "{\"flags\":[]}";
        std::memcpy(buf, none, sizeof(none) - 1);
        return sizeof(none) - 1;
    }
    if (effective_milli != nullptr && sw != nullptr) {
#ifdef FL_LANES_AVX2
        if (fl::lanes_ready()) {
            return flags_answer_avx2(p, u, effective_milli, sw, enabled, buf);
        }
#endif
        return flags_answer<true>(p, u, effective_milli, sw, enabled, buf);
    }
    return flags_answer<false>(p, u, effective_milli, sw, enabled, buf);
}

/* The one evaluation of every flag (docs/evaluation.md), with OFREP's
 * reason.  fl_answer_etag() (etag.cpp) hashes every input read here: keep the two in
 * step. */
void fl_evaluate_detail(const fl_project_t *p, const fl_user_t *u,
    const uint32_t *effective_milli, const uint8_t *sw, fl_detail_t *out)
    noexcept
{
    each_flag(p, effective_milli, out,
        [&](size_t i, const fl::Flag &f, uint32_t eff, EvalCache *cache,
            CallerId *id) {
            detail_one(*p, i, f, eff, sw ? sw[i] : uint8_t(FL_SWITCH_NONE),
                       u, cache, id, &out[i]);
        });
}

/* The values alone: flag_value()'s value and percentage, without the
 * reason (GET /flags and the SDK's answer write no reason). */
void fl_evaluate_values(const fl_project_t *p, const fl_user_t *u,
    const uint32_t *effective_milli, const uint8_t *sw, fl_detail_t *out)
    noexcept
{
    each_flag(p, effective_milli, out,
        [&](size_t i, const fl::Flag &f, uint32_t eff, EvalCache *cache,
            CallerId *id) {
            uint8_t s = sw ? sw[i] : uint8_t(FL_SWITCH_NONE);
            Decision d = flag_value(*p, i, f, eff, s, u, cache, id);

            out[i].enabled = d.value;
            out[i].reason = FL_REASON_STATIC;
            out[i].has_segments = 0;
            out[i].segment_matched = d.matched;
            out[i].rolled_back = s == FL_SWITCH_ROLLED_BACK;
            out[i].sw = s;
            out[i].targeted = d.targeted;
            out[i].rule = d.rule;
            out[i].rollout_milli = eff;
        });
}

int fl_evaluate_flag_detail(const fl_project_t *p, size_t i,
    const fl_user_t *u, uint32_t effective_milli, uint8_t sw,
    fl_detail_t *out) noexcept
{
    if (p == nullptr || out == nullptr || i >= p->flags.size()) {
        return -1;
    }
    detail_one(*p, i, p->flags[i], effective_milli, sw, u, nullptr, nullptr,
               out);
    return 0;
}

size_t fl_flags_json_bound(const fl_project_t *p) noexcept
{
    return p ? p->json_bound : sizeof("{\"flags\":[]}");
}

size_t fl_flags_json(const fl_project_t *p, const fl_detail_t *r,
    char *buf) noexcept
{
    /* every flag is written after a ','; the first of them becomes the
     * '[' (no test a flag for "is it the first") */
    static const char open[] = "{\"flags\":";
    static const char close[] = "]}";
    char *o = buf;

    std::memcpy(o, open, sizeof(open) - 1);
    o += sizeof(open) - 1;

    size_t n = p ? p->flags.size() : 0;
    if (n == 0) {
        *o++ = '[';
    }
    const fl::FlagHot *hot = n ? p->hot.data() : nullptr;
    const char *json = n ? p->json.data() : nullptr;
    for (size_t i = 0; i < n; i++) {
        *o++ = ',';
        o = put_flag(*p, i, hot[i], json, r[i].enabled, r[i].rollout_milli,
                     i + 1 == n, o);
    }

    if (n > 0) {
        buf[sizeof(open) - 1] = '[';
    }
    std::memcpy(o, close, sizeof(close) - 1);
    o += sizeof(close) - 1;
    return static_cast<size_t>(o - buf);
}

} // extern "C"
