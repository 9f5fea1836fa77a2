/*
 * fuzz_targeting.cc - rules, named users and the fallthrough (issue 26,
 * docs/flags-file.md "rules" and "targets", docs/evaluation.md) against a
 * reference evaluator written here from the design alone.
 *
 * Every input is a program, read a byte at a time (0 once it runs out):
 * it builds a project of up to 8 flags over up to 6 top-level segments
 * (eq / in rules on three traits and on "$userId", the caller's id), each
 * flag with top-level segments or rules (up to 4, each with its own
 * percentage, naming 0..2 segments), named users on and off, a
 * stickiness (userId or a trait), then the runtime of each flag through
 * the real control block (fl_control_set_ramp, fl_control_set_override,
 * fl_control_try_rollback, read back with fl_control_switch), and
 * callers (a userId or none, traits, sometimes a trait that calls itself
 * "$userId").  The project is loaded with fl_project_load_buffer and every
 * flag evaluated with fl_evaluate_detail, fl_evaluate_values and
 * fl_evaluate_flag_detail, for each caller and for nobody.  Each value,
 * OFREP reason and OFREP metadata (ruleIndex, targeted, segmentMatched),
 * and GET /flags' enabled, rolloutPercentage and segments, must be what
 * the reference says; any disagreement aborts with the project and caller.
 *
 * The reference, first line that applies:
 *   1. off in the file, rolled back, overridden off       -> off
 *   2. overridden with P: rules: in_rollout(P) for everyone; no rules:
 *      segments gate, then in_rollout(P); named users set aside
 *   3. userId in targets.on -> on; in targets.off -> off
 *   4. rules: the first that matches (segments [] matches everyone, else
 *      ANY of its segments): in_rollout(its percentage)
 *   5. rules, none matched: in_rollout(effective) (ramp stage or the
 *      configured percentage)
 *   6. no rules: segments gate, then in_rollout(effective)
 * in_rollout(P): P = 100 % on, P = 0 off, else murmur3_32("name:key", 0)
 * % 100000 < P (P in thousandths), key = userId or the stickiness trait,
 * none or empty: off.  The murmur3 below is this file's own.
 * OFREP reasons, for a flag with rules or targets: DISABLED; override P:
 * 0 STATIC, 100 STATIC, else SPLIT; named: TARGETING_MATCH + targeted;
 * rule k: 0 < pct < 100 SPLIT else TARGETING_MATCH, + ruleIndex k;
 * fallthrough: 0 < eff < 100 SPLIT else DEFAULT.  A flag with neither:
 * the old table.  A flag with named users and no rules whose caller is
 * not named (the design leaves it open; see reference()): its segments
 * are one rule at the effective percentage (one matched and 0 < eff <
 * 100 SPLIT, else TARGETING_MATCH), without segments the fallthrough.
 * Where the design is silent, the reference reads as the core does:
 * "rules": [] is a flag with rules (everyone falls through), and targets
 * without a single id ("on": [], "off": []) are no targets.
 */

#include "fuzz_common.h"

#include <yajl/yajl_tree.h>

#include <string>
#include <vector>

namespace {

/* ------------------------------------------------------------ the input */

class Src {
public:
    Src(const uint8_t *d, size_t n) : d_(d), n_(n) {}
    uint8_t byte() { return i_ < n_ ? d_[i_++] : 0; }
    unsigned below(unsigned n) { return n ? byte() % n : 0; }
    bool bit() { return byte() & 1; }
    uint32_t u16() { uint32_t a = byte(); return a << 8 | byte(); }

    /* a percentage in thousandths of flag `name`: edges often, and
     * sometimes exactly at a pool user's bucket or one above it (where
     * "bucket < percentage" decides) */
    uint32_t milli(const std::string &name)
    {
        static const uint32_t edge[] = {0, 1, 999, 1000, 10000, 33333,
                                        50000, 99999, 100000, 100000};
        uint8_t b = byte();
        if (b < 140) {
            return edge[b % 10];
        }
        if (b < 180) {
            std::string id = "u" + std::to_string(b % 8);
            return fl_bucket(name.data(), name.size(), id.data(), id.size())
                   + ((b >> 3) & 1);
        }
        uint32_t v = (uint32_t(b) << 16 | u16()) % (FL_MILLI_MAX + 1);
        return v;
    }

private:
    const uint8_t *d_;
    size_t n_;
    size_t i_ = 0;
};

/* ---------------------------------------------------------- the project */

const char *const trait_names[] = {"plan", "country", "acct", "$userId"};
const std::vector<std::string> trait_pool[] = {
    {"free", "pro", "team"},
    {"de", "fr", "us"},
    {"a1", "a2", "a3", "a4"},
    {"u0", "u1", "u2", "u3", "u4", "u5", "u6", "u7"},
};
const std::vector<std::string> &user_pool = trait_pool[3];
constexpr unsigned n_traits = 3;            /* the caller's, without $userId */

struct SegRule {
    unsigned                  trait;        /* index into trait_names */
    bool                      in;           /* op "in", else "eq" */
    std::vector<std::string>  values;
};

struct Seg {
    std::string           name;
    std::vector<SegRule>  rules;            /* all must match */
};

struct Rule {
    std::vector<unsigned>  segs;
    uint32_t               milli;
};

struct Flag {
    std::string            name;
    bool                   enabled;
    uint32_t               milli;
    int                    stickiness;      /* -1 none, 0 "userId", else trait */
    bool                   has_rules;
    std::vector<unsigned>  segs;            /* top-level (no rules) */
    std::vector<Rule>      rules;
    bool                   has_targets;     /* named users: at least one id */
    bool                   empty_lists;     /* write "on": [] / "off": [] */
    std::vector<std::string> on, off;       /* as written (may repeat) */

    /* runtime */
    enum Cat { NONE, RAMP, ROLLED_BACK, OVERRIDE_OFF, OVERRIDE_PCT } cat;
    uint32_t               eff;             /* what the reference expects */
};

struct Caller {
    bool                      nobody;
    std::string               id;           /* "" none */
    std::vector<std::string>  traits;       /* "" absent, by trait index */
    std::string               fake_uid;     /* a trait "$userId", "" none */
};

std::string pct_text(uint32_t m)
{
    char b[32];
    if (m % 1000 == 0) {
        std::snprintf(b, sizeof(b), "%u", m / 1000);
    } else {
        std::snprintf(b, sizeof(b), "%u.%03u", m / 1000, m % 1000);
    }
    return b;
}

std::string q(const std::string &s) { return "\"" + s + "\""; }

std::string seg_list(const std::vector<Seg> &segs, const std::vector<unsigned> &v)
{
    std::string j = "[";
    for (size_t k = 0; k < v.size(); k++) {
        j += (k ? "," : "") + q(segs[v[k]].name);
    }
    return j + "]";
}

std::string project_json(const std::vector<Seg> &segs,
    const std::vector<Flag> &flags)
{
    std::string j = "{\"flags\":[";
    for (size_t i = 0; i < flags.size(); i++) {
        const Flag &f = flags[i];
        j += i ? "," : "";
        j += "{\"name\":" + q(f.name) + ",\"enabled\":"
             + (f.enabled ? "true" : "false") + ",\"rolloutPercentage\":"
             + pct_text(f.milli);
        if (f.stickiness == 0) {
            j += ",\"stickiness\":\"userId\"";
        } else if (f.stickiness > 0) {
            j += ",\"stickiness\":" + q(trait_names[f.stickiness - 1]);
        }
        if (f.has_rules) {
            j += ",\"rules\":[";
            for (size_t k = 0; k < f.rules.size(); k++) {
                j += (k ? "," : "");
                j += "{\"segments\":" + seg_list(segs, f.rules[k].segs)
                     + ",\"rolloutPercentage\":" + pct_text(f.rules[k].milli)
                     + "}";
            }
            j += "]";
        } else if (!f.segs.empty()) {
            j += ",\"segments\":" + seg_list(segs, f.segs);
        }
        if (f.has_targets || f.empty_lists) {
            j += ",\"targets\":{";
            bool comma = false;
            for (int side = 0; side < 2; side++) {
                const std::vector<std::string> &l = side ? f.off : f.on;
                if (l.empty() && !f.empty_lists) continue;
                j += comma ? "," : "";
                j += side ? "\"off\":[" : "\"on\":[";
                for (size_t k = 0; k < l.size(); k++) {
                    j += (k ? "," : "") + q(l[k]);
                }
                j += "]";
                comma = true;
            }
            j += "}";
        }
        j += "}";
    }
    j += "],\"segments\":{";
    for (size_t s = 0; s < segs.size(); s++) {
        j += (s ? "," : "") + q(segs[s].name) + ":{\"rules\":[";
        for (size_t k = 0; k < segs[s].rules.size(); k++) {
            const SegRule &r = segs[s].rules[k];
            j += (k ? "," : "");
            j += "{\"trait\":" + q(trait_names[r.trait]);
            if (r.in) {
                j += ",\"op\":\"in\",\"values\":[";
                for (size_t m = 0; m < r.values.size(); m++) {
                    j += (m ? "," : "") + q(r.values[m]);
                }
                j += "]}";
            } else {
                j += ",\"op\":\"eq\",\"value\":" + q(r.values[0]) + "}";
            }
        }
        j += "]}";
    }
    return j + "}}";
}

/* ------------------------------------------------------- the reference */

uint32_t rotl(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

/* MurmurHash3_x86_32, seed 0: the published bucket hash (docs/evaluation.md) */
uint32_t murmur3(const std::string &s)
{
    const uint32_t c1 = 0xcc9e2d51, c2 = 0x1b873593;
    const uint8_t *d = reinterpret_cast<const uint8_t *>(s.data());
    size_t n = s.size(), nb = n / 4;
    uint32_t h = 0;
    for (size_t i = 0; i < nb; i++) {
        uint32_t k = uint32_t(d[4 * i]) | uint32_t(d[4 * i + 1]) << 8
                     | uint32_t(d[4 * i + 2]) << 16 | uint32_t(d[4 * i + 3]) << 24;
        k *= c1; k = rotl(k, 15); k *= c2;
        h ^= k; h = rotl(h, 13); h = h * 5 + 0xe6546b64;
    }
    const uint8_t *t = d + 4 * nb;
    uint32_t k = 0;
    switch (n & 3) {
    case 3: k ^= uint32_t(t[2]) << 16; [[fallthrough]];
    case 2: k ^= uint32_t(t[1]) << 8; [[fallthrough]];
    case 1: k ^= t[0]; k *= c1; k = rotl(k, 15); k *= c2; h ^= k;
    }
    h ^= uint32_t(n);
    h ^= h >> 16; h *= 0x85ebca6b; h ^= h >> 13; h *= 0xc2b2ae35; h ^= h >> 16;
    return h;
}

bool in_rollout(const Flag &f, uint32_t p, const Caller &c)
{
    if (p >= FL_MILLI_MAX) return true;
    if (p == 0 || c.nobody) return false;
    const std::string &key = f.stickiness <= 0 ? c.id : c.traits[f.stickiness - 1];
    if (key.empty()) return false;
    uint32_t b = murmur3(f.name + ":" + key) % FL_BUCKETS;
    FUZZ_CHECK(b == fl_bucket(f.name.data(), f.name.size(), key.data(), key.size()),
               "fl_bucket(%s, %s) is not this file's murmur3 bucket %u",
               f.name.c_str(), key.c_str(), b);
    return b < p;
}

bool seg_matches(const Seg &s, const Caller &c)
{
    for (const SegRule &r : s.rules) {
        /* "$userId" is the caller's id, never a trait of that name */
        const std::string v = c.nobody ? std::string()
                              : r.trait == 3 ? c.id : c.traits[r.trait];
        if (v.empty()) return false;            /* absent: eq / in fail */
        bool m = false;
        for (const std::string &x : r.values) m = m || x == v;
        if (!m) return false;
    }
    return true;
}

bool any_seg(const std::vector<Seg> &segs, const std::vector<unsigned> &v,
    const Caller &c)
{
    for (unsigned s : v) {
        if (seg_matches(segs[s], c)) return true;
    }
    return false;
}

bool listed(const std::vector<std::string> &l, const Caller &c)
{
    if (c.nobody || c.id.empty()) return false;
    for (const std::string &x : l) {
        if (x == c.id) return true;
    }
    return false;
}

struct Expect {
    bool  value;
    int   reason;                           /* fl_reason_t */
    int   rule_index;                       /* -1: none */
    bool  targeted;
    bool  segment_matched;                  /* old table only */
};

const char *reason_text(int r)
{
    switch (r) {
    case FL_REASON_STATIC: return "STATIC";
    case FL_REASON_TARGETING_MATCH: return "TARGETING_MATCH";
    case FL_REASON_SPLIT: return "SPLIT";
    case FL_REASON_DISABLED: return "DISABLED";
    case FL_REASON_DEFAULT: return "DEFAULT";
    }
    return "?";
}

Expect reference(const std::vector<Seg> &segs, const Flag &f, const Caller &c)
{
    Expect e{false, FL_REASON_STATIC, -1, false, false};
    bool new_table = f.has_rules || f.has_targets;
    uint32_t eff = f.eff;

    /* top-level segments (no rules): whether one matched is OFREP's
     * segmentMatched, for a switched-on flag even when rolled back or
     * overridden (as before issue 26) */
    bool gate = true;
    if (f.enabled && !f.has_rules && !f.segs.empty()) {
        gate = e.segment_matched = any_seg(segs, f.segs, c);
    }

    if (!f.enabled || f.cat == Flag::ROLLED_BACK || f.cat == Flag::OVERRIDE_OFF) {
        e.reason = FL_REASON_DISABLED;
        return e;
    }
    auto old_table = [&] {
        bool has = !f.segs.empty();
        if (eff == 0) return int(FL_REASON_STATIC);
        if (has && !e.segment_matched) return int(FL_REASON_TARGETING_MATCH);
        if (eff < FL_MILLI_MAX) return int(FL_REASON_SPLIT);
        if (has) return int(FL_REASON_TARGETING_MATCH);
        return int(FL_REASON_STATIC);
    };
    auto fallthrough = [&] {
        return eff > 0 && eff < FL_MILLI_MAX ? int(FL_REASON_SPLIT)
                                             : int(FL_REASON_DEFAULT);
    };

    if (f.cat == Flag::OVERRIDE_PCT) {
        e.value = f.has_rules ? in_rollout(f, eff, c) : gate && in_rollout(f, eff, c);
        if (new_table) {
            e.reason = eff > 0 && eff < FL_MILLI_MAX ? FL_REASON_SPLIT
                                                     : FL_REASON_STATIC;
        } else {
            e.reason = old_table();
        }
        return e;
    }

    if (f.has_targets && (listed(f.on, c) || listed(f.off, c))) {
        e.value = listed(f.on, c);
        e.reason = FL_REASON_TARGETING_MATCH;
        e.targeted = true;
        return e;
    }

    if (f.has_rules) {
        for (size_t k = 0; k < f.rules.size(); k++) {
            const Rule &r = f.rules[k];
            if (r.segs.empty() || any_seg(segs, r.segs, c)) {
                e.value = in_rollout(f, r.milli, c);
                e.reason = r.milli > 0 && r.milli < FL_MILLI_MAX
                           ? FL_REASON_SPLIT : FL_REASON_TARGETING_MATCH;
                e.rule_index = int(k);
                return e;
            }
        }
        e.value = in_rollout(f, eff, c);
        e.reason = fallthrough();
        return e;
    }

    e.value = gate && in_rollout(f, eff, c);
#ifdef TARGETING_LITERAL_DESIGN
    /* the design's table read to the letter: a flag with targets and no
     * rules whose caller is not named gets line 5, the fallthrough's */
    e.reason = new_table ? fallthrough() : old_table();
#else
    /* The design defines the fallthrough for a flag with rules only, and
     * says nothing of a flag with named users and no rules whose caller is
     * not named.  The core (c26ad57) reads its segments as its one rule:
     * one matched and 0 < eff < 100 SPLIT, else TARGETING_MATCH (none
     * matched included); without segments its percentage is the
     * fallthrough; a flag with neither rules nor named users keeps the old
     * table.  This reference does the same (build with
     * -DTARGETING_LITERAL_DESIGN for line 5 to the letter). */
    if (!new_table) {
        e.reason = old_table();
    } else if (!f.segs.empty()) {
        e.reason = e.segment_matched && eff > 0 && eff < FL_MILLI_MAX
                   ? FL_REASON_SPLIT : FL_REASON_TARGETING_MATCH;
    } else {
        e.reason = fallthrough();
    }
#endif
    return e;
}

/* ------------------------------------------------------------ the checks */

std::string describe(const std::string &json, const Caller &c)
{
    std::string s = "project: " + json + "\ncaller: ";
    if (c.nobody) return s + "nobody";
    s += "userId=" + (c.id.empty() ? std::string("(none)") : c.id);
    for (unsigned t = 0; t < n_traits; t++) {
        if (!c.traits[t].empty()) s += " " + std::string(trait_names[t]) + "=" + c.traits[t];
    }
    if (!c.fake_uid.empty()) s += " trait \"$userId\"=" + c.fake_uid;
    return s;
}

const char *cat_name(Flag::Cat c)
{
    switch (c) {
    case Flag::NONE: return "none";
    case Flag::RAMP: return "ramp";
    case Flag::ROLLED_BACK: return "rolled back";
    case Flag::OVERRIDE_OFF: return "override off";
    case Flag::OVERRIDE_PCT: return "override percent";
    }
    return "?";
}

/* The OFREP single answer of flag i: its value, reason and metadata. */
void check_ofrep(const fl_project_t *p, size_t i, const Flag &f,
    const fl_detail_t &d, const Expect &e, const std::string &who)
{
    size_t bound = fl_ofrep_flag_json_bound(p, i);
    std::string buf(bound, '\0');
    size_t n = fl_ofrep_flag_json(p, i, &d, &buf[0]);
    FUZZ_CHECK(n <= bound, "OFREP answer %zu bytes over its bound %zu", n, bound);
    buf.resize(n);
    FUZZ_CHECK(fuzz::json_valid(buf.data(), n), "OFREP answer not JSON: %s", buf.c_str());

    std::string want_reason = std::string("\"reason\":\"") + reason_text(e.reason) + "\"";
    std::string want_value = e.value ? "\"value\":true" : "\"value\":false";
    bool has_rule = buf.find("\"ruleIndex\":") != std::string::npos;
    bool has_targeted = buf.find("\"targeted\":true") != std::string::npos;
    bool has_segm = buf.find("\"segmentMatched\"") != std::string::npos;
    std::string want_rule = "\"ruleIndex\":" + std::to_string(e.rule_index);
    bool ok = buf.find(want_reason) != std::string::npos
              && buf.find(want_value) != std::string::npos
              && has_targeted == e.targeted
              && (e.rule_index < 0 ? !has_rule
                                   : buf.find(want_rule + ",") != std::string::npos
                                     || buf.find(want_rule + "}") != std::string::npos)
              && !(f.has_rules && has_segm);
    FUZZ_CHECK(ok, "flag %s (%s): OFREP answer %s\nexpected value %d, reason %s, "
               "ruleIndex %d, targeted %d%s\n%s", f.name.c_str(), cat_name(f.cat),
               buf.c_str(), e.value, reason_text(e.reason), e.rule_index,
               e.targeted, f.has_rules ? ", no segmentMatched" : "", who.c_str());
}

/* "33.333" -> 33333; -1 when not a plain decimal of at most 3 places */
int64_t milli_of(const char *s)
{
    int64_t v = 0, frac = 0;
    int places = -1;
    for (; *s; s++) {
        if (*s == '.' && places < 0) { places = 0; continue; }
        if (*s < '0' || *s > '9' || places >= 3 || v > 1000000) return -1;
        if (places >= 0) { frac = frac * 10 + (*s - '0'); places++; }
        else v = v * 10 + (*s - '0');
    }
    if (places == 0) return -1;
    for (; places > 0 && places < 3; places++) frac *= 10;
    return v * 1000 + frac;
}

/* GET /flags: each flag's enabled, rolloutPercentage (the fallthrough's
 * effective) and segments (a flag with rules: every segment its rules
 * name, in order, no repeats). */
void check_flags_json(const fl_project_t *p, const std::vector<Seg> &segs,
    const std::vector<Flag> &flags, const fl_detail_t *d,
    const std::vector<Expect> &e, const std::string &who)
{
    fuzz::check_flags_json(p, d);
    std::string buf(fl_flags_json_bound(p), '\0');
    buf.resize(fl_flags_json(p, d, &buf[0]));
    char err[128];
    yajl_val root = yajl_tree_parse(buf.c_str(), err, sizeof(err));
    FUZZ_CHECK(root != nullptr, "GET /flags does not parse: %s", err);
    const char *path[] = {"flags", nullptr};
    yajl_val arr = yajl_tree_get(root, path, yajl_t_array);
    FUZZ_CHECK(arr != nullptr && YAJL_GET_ARRAY(arr)->len == flags.size(),
               "GET /flags: not %zu flags: %s", flags.size(), buf.c_str());
    for (size_t i = 0; i < flags.size(); i++) {
        const Flag &f = flags[i];
        yajl_val o = YAJL_GET_ARRAY(arr)->values[i];
        const char *pn[] = {"name", nullptr}, *pe[] = {"enabled", nullptr},
                   *pp[] = {"rolloutPercentage", nullptr},
                   *ps[] = {"segments", nullptr};
        yajl_val name = yajl_tree_get(o, pn, yajl_t_string);
        yajl_val en = yajl_tree_get(o, pe, yajl_t_any);
        yajl_val pct = yajl_tree_get(o, pp, yajl_t_number);
        yajl_val sg = yajl_tree_get(o, ps, yajl_t_array);
        FUZZ_CHECK(name && f.name == YAJL_GET_STRING(name), "GET /flags: flag %zu name", i);
        FUZZ_CHECK(en && (YAJL_IS_TRUE(en) || YAJL_IS_FALSE(en))
                   && YAJL_IS_TRUE(en) == e[i].value,
                   "flag %s (%s): GET /flags enabled differs, expected %d\n%s\n%s",
                   f.name.c_str(), cat_name(f.cat), e[i].value, buf.c_str(), who.c_str());
        FUZZ_CHECK(pct && milli_of(YAJL_GET_NUMBER(pct)) == int64_t(f.eff),
                   "flag %s (%s): GET /flags rolloutPercentage %s, expected %s",
                   f.name.c_str(), cat_name(f.cat), pct ? YAJL_GET_NUMBER(pct) : "(none)",
                   pct_text(f.eff).c_str());
        std::vector<unsigned> want;
        if (f.has_rules) {
            for (const Rule &r : f.rules) {
                for (unsigned s : r.segs) {
                    bool seen = false;
                    for (unsigned x : want) seen = seen || x == s;
                    if (!seen) want.push_back(s);
                }
            }
        } else {
            want = f.segs;
        }
        bool ok = want.empty() ? (sg == nullptr || YAJL_GET_ARRAY(sg)->len == 0)
                               : (sg != nullptr && YAJL_GET_ARRAY(sg)->len == want.size());
        for (size_t k = 0; ok && k < want.size(); k++) {
            yajl_val v = YAJL_GET_ARRAY(sg)->values[k];
            ok = YAJL_IS_STRING(v) && segs[want[k]].name == YAJL_GET_STRING(v);
        }
        FUZZ_CHECK(ok, "flag %s: GET /flags segments differ from %s\n%s",
                   f.name.c_str(), seg_list(segs, want).c_str(), buf.c_str());
    }
    yajl_tree_free(root);
}

void check_caller(const fl_project_t *p, const std::string &json,
    const std::vector<Seg> &segs, const std::vector<Flag> &flags,
    const uint32_t *eff, const uint8_t *sw, const Caller &c)
{
    fuzz::Arena arena;
    fl_user_t user;
    const fl_user_t *u = nullptr;
    if (!c.nobody) {
        fl_trait_t t[n_traits + 1];
        size_t nt = 0;
        for (unsigned k = 0; k < n_traits; k++) {
            t[nt++] = {trait_names[k], std::strlen(trait_names[k]),
                       c.traits[k].data(), c.traits[k].size()};
        }
        if (!c.fake_uid.empty()) {
            t[nt++] = {"$userId", 7, c.fake_uid.data(), c.fake_uid.size()};
        }
        char err[128];
        FUZZ_CHECK(fl_user_from_values(c.id.data(), c.id.size(), t, nt, 64,
                                       arena.handle(), &user, err, sizeof(err)) == FL_OK,
                   "fl_user_from_values: %s", err);
        u = &user;
    }

    std::string who = describe(json, c);
    size_t n = flags.size();
    std::vector<fl_detail_t> det(n + 1), val(n + 1);
    det[n].enabled = val[n].enabled = 0x5a;
    fl_evaluate_detail(p, u, eff, sw, det.data());
    fl_evaluate_values(p, u, eff, sw, val.data());
    FUZZ_CHECK(det[n].enabled == 0x5a && val[n].enabled == 0x5a,
               "the evaluation wrote past the last flag");

    std::vector<Expect> exp(n);
    for (size_t i = 0; i < n; i++) {
        const Flag &f = flags[i];
        exp[i] = reference(segs, f, c);
        const Expect &e = exp[i];
        fl_detail_t one;
        FUZZ_CHECK(fl_evaluate_flag_detail(p, i, u, eff[i], sw[i], &one) == 0, "flag detail");

        FUZZ_CHECK(det[i].enabled == e.value && det[i].reason == e.reason,
                   "flag %s (%s, effective %u): fl_evaluate_detail says %u %s, "
                   "the reference %d %s\n%s", f.name.c_str(), cat_name(f.cat),
                   f.eff, det[i].enabled, reason_text(det[i].reason), e.value,
                   reason_text(e.reason), who.c_str());
        FUZZ_CHECK(val[i].enabled == e.value,
                   "flag %s (%s): fl_evaluate_values says %u, the reference %d\n%s",
                   f.name.c_str(), cat_name(f.cat), val[i].enabled, e.value, who.c_str());
        FUZZ_CHECK(one.enabled == det[i].enabled && one.reason == det[i].reason,
                   "flag %s: fl_evaluate_flag_detail differs from fl_evaluate_detail\n%s",
                   f.name.c_str(), who.c_str());
        FUZZ_CHECK(det[i].targeted == e.targeted && val[i].targeted == e.targeted
                   && det[i].rule == unsigned(e.rule_index + 1)
                   && val[i].rule == unsigned(e.rule_index + 1),
                   "flag %s (%s): targeted %u / %u, rule %u / %u (1 + index), "
                   "expected %d, %d\n%s", f.name.c_str(), cat_name(f.cat),
                   det[i].targeted, val[i].targeted, det[i].rule, val[i].rule,
                   e.targeted, e.rule_index + 1, who.c_str());
        FUZZ_CHECK(det[i].sw == sw[i] && val[i].sw == sw[i], "flag %s: sw", f.name.c_str());
        FUZZ_CHECK(det[i].rollout_milli == f.eff && val[i].rollout_milli == f.eff,
                   "flag %s (%s): effective %u / %u, expected %u", f.name.c_str(),
                   cat_name(f.cat), det[i].rollout_milli, val[i].rollout_milli, f.eff);
        FUZZ_CHECK(det[i].rolled_back == (f.cat == Flag::ROLLED_BACK),
                   "flag %s: rolled_back %u", f.name.c_str(), det[i].rolled_back);
        if (!f.has_rules && !f.has_targets) {
            FUZZ_CHECK(det[i].segment_matched == e.segment_matched,
                       "flag %s: segment_matched %u, expected %d\n%s", f.name.c_str(),
                       det[i].segment_matched, e.segment_matched, who.c_str());
        }
        check_ofrep(p, i, f, det[i], e, who);
    }
    check_flags_json(p, segs, flags, val.data(), exp, who);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    Src in(data, size);

    /* segments */
    std::vector<Seg> segs(1 + in.below(6));
    for (size_t s = 0; s < segs.size(); s++) {
        segs[s].name = "s" + std::to_string(s);
        segs[s].rules.resize(1 + in.below(2));
        for (SegRule &r : segs[s].rules) {
            r.trait = in.below(4);
            r.in = in.bit();
            const std::vector<std::string> &pool = trait_pool[r.trait];
            size_t nv = r.in ? 1 + in.below(3) : 1;
            for (size_t k = 0; k < nv; k++) r.values.push_back(pool[in.below(pool.size())]);
        }
    }

    /* flags */
    std::vector<Flag> flags(1 + in.below(8));
    for (size_t i = 0; i < flags.size(); i++) {
        Flag &f = flags[i];
        char nm[32];
        std::snprintf(nm, sizeof(nm), "f%zu-%02x", i, in.byte());
        f.name = nm;
        uint8_t b = in.byte();
        f.enabled = (b & 7) != 0;
        f.stickiness = int((b >> 3) % 5) - 1;  /* -1 none, 0 userId, 1..3 trait */
        f.milli = in.milli(f.name);
        uint8_t shape = in.byte();
        f.has_rules = shape % 3 != 0;
        if (f.has_rules) {
            /* "rules": [] now and then: a flag with rules, none of which
             * can match (the core's reading: everyone gets the fallthrough) */
            f.rules.resize(((shape >> 4) & 7) == 0 ? 0 : 1 + in.below(4));
            for (Rule &r : f.rules) {
                size_t ns = in.below(3);
                for (size_t k = 0; k < ns; k++) r.segs.push_back(in.below(segs.size()));
                r.milli = in.milli(f.name);
            }
        } else {
            size_t ns = in.below(3);
            for (size_t k = 0; k < ns; k++) {
                unsigned s = in.below(segs.size());
                bool seen = false;
                for (unsigned x : f.segs) seen = seen || x == s;
                if (!seen) f.segs.push_back(s);
            }
        }
        f.has_targets = (shape >> 2) & 1;
        /* empty lists written out; without a single id ("targets": {} or
         * both lists empty) the flag has no named users, which the core
         * reads as a flag without targets, and so does the reference */
        f.empty_lists = (shape >> 5) & 1;
        if (f.has_targets) {
            uint16_t who = static_cast<uint16_t>(in.u16());
            for (size_t k = 0; k < user_pool.size(); k++) {
                unsigned side = (who >> (2 * k)) & 3;     /* 0,3 none */
                if (side == 1) f.on.push_back(user_pool[k]);
                if (side == 2) f.off.push_back(user_pool[k]);
            }
            if (f.on.empty() && f.off.empty()) f.on.push_back(user_pool[in.below(8)]);
            /* a duplicate within one list is one user */
            if ((shape >> 3) & 1) {
                std::vector<std::string> &l = f.on.empty() ? f.off : f.on;
                l.push_back(l[0]);
            }
        }
    }

    std::string json = project_json(segs, flags);
    fl_project_t *p = nullptr;
    char err[512];
    fl_status_t rc = fl_project_load_buffer(json.data(), json.size(), "fuzz_targeting",
                                            &p, err, sizeof(err));
    FUZZ_CHECK(rc == FL_OK, "a valid project was refused: %s\n%s", err, json.c_str());
    FUZZ_CHECK(fl_project_flag_count(p) == flags.size(), "flag count");

    /* the runtime of each flag, through the control block as the glue has it */
    std::vector<uint32_t> eff(flags.size());
    std::vector<uint8_t> sw(flags.size());
    for (size_t i = 0; i < flags.size(); i++) {
        Flag &f = flags[i];
        fl_control_t c;
        fl_control_init(&c, 1);
        uint8_t b = in.byte();
        bool ramp = b & 1, rb = (b & 0x0e) == 0x02;
        unsigned ov = (b >> 4) % 3;             /* none, off, percent */
        uint32_t stage = 0, pct = 0;
        if (ramp) {
            stage = in.milli(f.name);
            fl_control_set_ramp(&c, stage);
        }
        if (ov == 1) {
            fl_control_set_override(&c, FL_OVERRIDE_OFF, 0);
        } else if (ov == 2) {
            pct = in.milli(f.name);
            fl_control_set_override(&c, FL_OVERRIDE_PERCENT, pct);
        }
        if (rb) {
            FUZZ_CHECK(fl_control_try_rollback(&c, 1000, 1, 1, 0, FL_DECIDED_RULE) == 1,
                       "rollback");
        }
        f.cat = rb ? Flag::ROLLED_BACK : ov == 1 ? Flag::OVERRIDE_OFF
                : ov == 2 ? Flag::OVERRIDE_PCT : ramp ? Flag::RAMP : Flag::NONE;
        f.eff = f.cat == Flag::ROLLED_BACK || f.cat == Flag::OVERRIDE_OFF ? 0
                : f.cat == Flag::OVERRIDE_PCT ? pct
                : f.cat == Flag::RAMP ? stage : f.milli;
        eff[i] = fl_control_switch(&c, f.milli, &sw[i]);
        FUZZ_CHECK(eff[i] == f.eff, "flag %s (%s): fl_control_switch gives %u, expected %u",
                   f.name.c_str(), cat_name(f.cat), eff[i], f.eff);
    }

    /* callers: nobody, then up to four from the input */
    std::vector<Caller> callers(1 + 1 + in.below(4));
    callers[0].nobody = true;
    callers[0].traits.assign(n_traits, "");
    for (size_t k = 1; k < callers.size(); k++) {
        Caller &c = callers[k];
        c.nobody = false;
        uint8_t b = in.byte();
        c.id = b % 10 < 8 ? user_pool[b % 10] : "";
        c.traits.resize(n_traits);
        for (unsigned t = 0; t < n_traits; t++) {
            uint8_t v = in.byte();
            const std::vector<std::string> &pool = trait_pool[t];
            c.traits[t] = v % (pool.size() + 1) < pool.size() ? pool[v % (pool.size() + 1)] : "";
        }
        if (b >= 200) c.fake_uid = user_pool[b % 8];
    }

    for (const Caller &c : callers) {
        check_caller(p, json, segs, flags, eff.data(), sw.data(), c);
    }
    fl_project_free(p);
    return 0;
}
