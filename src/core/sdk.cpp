/*
 * sdk.cpp - the DeployRamp SDK API (docs/sdk.md): the caller of
 * POST {loc}flags from its JSON body, the flags array the SDK evaluates on
 * its own, the flags_refreshed message of the live channel, and the
 * messages an SDK sends on that channel.
 *
 * The SDK decides every flag itself, with a 0-99 hash of its own that has
 * nothing in common with the module's buckets.  So that a user gets the
 * same answer from the SDK as from GET /flags, the percentages are
 * resolved here for the user of the request: every rolloutPercentage the
 * SDK sees is 100 or 0.  Segment rules the SDK can check itself (exact,
 * case-sensitive equality) are sent as its conditions, so traits it adds
 * when it evaluates still count; every other rule is decided here for the
 * traits of the request and sent as a condition that is always true or
 * always false.
 *
 * Decisions (docs/sdk.md has the reasons):
 *  - "enabled" is false when the flag is off for everyone (killed in its
 *    file, rolled back, overridden off, or an effective 0 %): the SDK
 *    checks it before anything else.
 *  - Always true is {"type":"and","conditions":[]}, always false
 *    {"type":"or","conditions":[]}: the SDK's and/or over no condition.
 *  - eq without ignoreCase and with a non-empty value is a "match"; "in"
 *    without ignoreCase and without an empty value is an "or" of matches
 *    (one value: the match itself).  An empty value cannot be sent: the
 *    SDK reads a trait it lacks as "" where the module says "not sent".
 *  - A body's trait value may be a string, a number (its text as sent) or
 *    a boolean ("true"/"false"); null is the same as leaving the trait out;
 *    an object or an array is invalid_field.  Duplicate keys: the last one
 *    wins.  The limits are those of the query string (fl_parse_query).
 *
 * Nothing here allocates outside the caller's allocator, and the writers
 * never allocate at all.
 */

#include "flags_core.h"
#include "arena.hpp"
#include "json_reader.hpp"
#include "json_writer.hpp"
#include "project.hpp"
#include "rollout.hpp"
#include "text.hpp"
#include "utf8.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace {

using fl::jval;

/* ----------------------------------------------------------- reading */

/*
 * The body as one JSON object, refused like a report body: strict UTF-8
 * (an earlier syntax error is reported first, as the report parser does),
 * empty, not JSON, nesting deeper than FL_REPORT_MAX_DEPTH, not an
 * object.  subject names the input in messages.
 */
fl_status_t read_object(const char *data, size_t len, const fl_alloc_t *a,
    const char *subject, const jval **root, char *err, size_t err_len)
{
    fl::Utf8JsonCheck u{};
    size_t good = u.feed(reinterpret_cast<const unsigned char *>(data), len);

    if (good < len) {
        /* a syntax error in the bytes before the bad ones comes first */
        fl_alloc_t copy = *a;
        yajl_alloc_funcs funcs = fl::yajl_funcs(&copy);
        yajl_handle h = yajl_alloc(nullptr, &funcs, nullptr);
        if (h == nullptr) {
            fl::set_err(err, err_len, "out of memory");
            return FL_ERR_NOMEM;
        }
        bool syntax = good > 0
            && yajl_parse(h, reinterpret_cast<const unsigned char *>(data),
                          good) != yajl_status_ok;
        if (syntax) {
            char why[128];
            fl::yajl_error_text(h, why, sizeof(why));
            fl::set_err(err, err_len, "%s is not valid JSON: %s (near byte %zu)",
                        subject, why, yajl_get_bytes_consumed(h));
        } else {
            /* the check names the report's "request body" */
            char msg[160];
            u.message(msg, sizeof(msg));
            const char *rest = std::strncmp(msg, "request body", 12) == 0
                               ? msg + 12 : msg;
            fl::set_err(err, err_len, "%s%s", subject, rest);
        }
        yajl_free(h);
        return FL_ERR_JSON;
    }

    jval *r = nullptr;
    fl_status_t rc = fl::jparse(data, len, a, FL_REPORT_MAX_DEPTH, subject,
                                &r, err, err_len);
    if (rc != FL_OK) {
        return rc;
    }
    if (r->kind != fl::J_OBJECT) {
        fl::set_err(err, err_len, "%s must be a JSON object", subject);
        return FL_ERR_JSON;
    }
    *root = r;
    return FL_OK;
}

/* A trait of the body, before duplicates are dropped. */
struct entry {
    const jval  *v;             /* the member; v->key is the name */
    size_t       pos;           /* document order */
    bool         dropped;       /* a later member has the same name */
};

bool has_nul(const char *s, size_t n)
{
    return n != 0 && std::memchr(s, '\0', n) != nullptr;
}

/* "traits.NAME" for a message: at most 64 bytes of the name, escaped. */
void trait_err(char *err, size_t err_len, const char *where,
    const jval &m, const char *what)
{
    size_t shown = fl::utf8_prefix(m.key, m.key_len, 64);
    char name[64 * 6 + 1];
    size_t name_len = fl_json_escape(m.key, shown, name);

    fl::set_err(err, err_len, "%straits.%.*s%s %s", where,
                static_cast<int>(name_len), name,
                shown < m.key_len ? "..." : "", what);
}

} // namespace

/*
 * userId and traits (either may be nullptr: absent, or null) into a
 * fl_user_t with the limits of fl_parse_query.  where prefixes the field
 * names in messages ("" or "evaluations[3].").  Shared with the report's
 * cohort (report.cpp).
 */
fl_status_t fl::user_from_json(const jval *uid, const jval *traits,
    size_t max_traits, const fl_alloc_t *a, const char *where,
    fl_user_t *out, char *err, size_t err_len) noexcept
{
    *out = fl_user_t{nullptr, 0, nullptr, 0};

    if (uid != nullptr) {
        if (uid->kind != fl::J_STRING) {
            fl::set_err(err, err_len, "%suserId must be a string", where);
            return FL_ERR_FIELD;
        }
        if (uid->len > FL_MAX_VALUE_LEN) {
            fl::set_err(err, err_len, "%suserId is longer than %u bytes",
                        where, FL_MAX_VALUE_LEN);
            return FL_ERR_FIELD;
        }
        if (has_nul(uid->str, uid->len)) {
            fl::set_err(err, err_len, "%suserId holds a NUL byte", where);
            return FL_ERR_FIELD;
        }
        /* an empty userId is no userId, as in the query string */
        if (uid->len > 0) {
            out->user_id = uid->str;
            out->user_id_len = uid->len;
        }
    }

    if (traits == nullptr) {
        return FL_OK;
    }
    if (traits->kind != fl::J_OBJECT) {
        fl::set_err(err, err_len, "%straits must be an object", where);
        return FL_ERR_FIELD;
    }
    if (traits->count == 0) {
        return FL_OK;
    }

    size_t n = traits->count;
    entry *e = fl::alloc_array<entry>(a, n);
    entry **by_name = fl::alloc_array<entry *>(a, n);
    if (e == nullptr || by_name == nullptr) {
        fl::set_err(err, err_len, "out of memory");
        return FL_ERR_NOMEM;
    }

    size_t i = 0;
    for (const jval &m : fl::children(*traits)) {
        e[i] = entry{&m, i, false};
        by_name[i] = &e[i];
        i++;
    }

    /* by name, then document order: the last of each name wins */
    std::sort(by_name, by_name + n, [](const entry *x, const entry *y) {
        int c = fl::bytes_cmp(x->v->key, x->v->key_len,
                              y->v->key, y->v->key_len);
        return c != 0 ? c < 0 : x->pos < y->pos;
    });
    for (i = 0; i + 1 < n; i++) {
        if (fl::bytes_cmp(by_name[i]->v->key, by_name[i]->v->key_len,
                          by_name[i + 1]->v->key, by_name[i + 1]->v->key_len)
            == 0)
        {
            by_name[i]->dropped = true;
        }
    }

    /* checked in document order: the first member at fault is named */
    size_t count = 0;
    for (i = 0; i < n; i++) {
        if (e[i].dropped) {
            continue;
        }
        const jval &m = *e[i].v;

        if (m.key_len == 0) {
            fl::set_err(err, err_len, "%sa trait name is empty", where);
            return FL_ERR_FIELD;
        }
        if (m.key_len > FL_MAX_TRAIT_NAME_LEN) {
            fl::set_err(err, err_len,
                        "%sa trait name is longer than %u bytes", where,
                        FL_MAX_TRAIT_NAME_LEN);
            return FL_ERR_FIELD;
        }
        if (has_nul(m.key, m.key_len)) {
            fl::set_err(err, err_len, "%sa trait name holds a NUL byte",
                        where);
            return FL_ERR_FIELD;
        }
        switch (m.kind) {
        case fl::J_OBJECT:
        case fl::J_ARRAY:
            trait_err(err, err_len, where, m,
                      "must be a string, number, boolean or null");
            return FL_ERR_FIELD;
        case fl::J_STRING:
            if (m.len > FL_MAX_VALUE_LEN) {
                char what[64];
                fl::set_err(what, sizeof(what), "is longer than %u bytes",
                            FL_MAX_VALUE_LEN);
                trait_err(err, err_len, where, m, what);
                return FL_ERR_FIELD;
            }
            if (has_nul(m.str, m.len)) {
                trait_err(err, err_len, where, m, "holds a NUL byte");
                return FL_ERR_FIELD;
            }
            count++;
            break;
        case fl::J_NULL:
            break;                      /* the same as not sent */
        default:
            /* a number's text is at most a body's size: no limit above
             * the value limit can be reached by a well-formed number */
            if (m.kind == fl::J_NUMBER && m.len > FL_MAX_VALUE_LEN) {
                char what[64];
                fl::set_err(what, sizeof(what), "is longer than %u bytes",
                            FL_MAX_VALUE_LEN);
                trait_err(err, err_len, where, m, what);
                return FL_ERR_FIELD;
            }
            count++;
            break;
        }
    }

    if (count > max_traits) {
        fl::set_err(err, err_len, "%smore than %zu traits", where, max_traits);
        return FL_ERR_FIELD;
    }
    if (count == 0) {
        return FL_OK;
    }

    fl_trait_t *t = fl::alloc_array<fl_trait_t>(a, count);
    if (t == nullptr) {
        fl::set_err(err, err_len, "out of memory");
        return FL_ERR_NOMEM;
    }

    /* by_name is in the order fl_user_trait() searches */
    size_t k = 0;
    for (i = 0; i < n; i++) {
        const entry &x = *by_name[i];
        const jval &m = *x.v;
        if (x.dropped || m.kind == fl::J_NULL) {
            continue;
        }
        t[k].name = m.key;
        t[k].name_len = m.key_len;
        switch (m.kind) {
        case fl::J_TRUE:
            t[k].value = "true";
            t[k].value_len = 4;
            break;
        case fl::J_FALSE:
            t[k].value = "false";
            t[k].value_len = 5;
            break;
        default:
            t[k].value = m.str;
            t[k].value_len = m.len;
            break;
        }
        k++;
    }

    out->traits = t;
    out->ntraits = k;
    return FL_OK;
}

namespace {

/* The last element of an array member of a message, which must be an
 * object; *last is nullptr for an absent, null or empty array. */
fl_status_t last_event(const jval *root, const char *name, size_t *n,
    const jval **last, char *err, size_t err_len)
{
    const jval *arr = fl::jget(root, name);

    *n = 0;
    *last = nullptr;
    if (arr == nullptr) {
        return FL_OK;
    }
    if (arr->kind != fl::J_ARRAY) {
        fl::set_err(err, err_len, "%s must be an array", name);
        return FL_ERR_FIELD;
    }
    *n = arr->count;
    if (arr->last == nullptr) {
        return FL_OK;
    }
    if (arr->last->kind != fl::J_OBJECT) {
        fl::set_err(err, err_len, "%s[%zu] must be an object", name,
                    arr->count - 1);
        return FL_ERR_FIELD;
    }
    *last = arr->last;
    return FL_OK;
}

/* The evaluations of an evaluation_batch that say which flag and what it
 * answered: {"flagName": string, "result": boolean}; any other element is
 * skipped (it counts for nothing). */
fl_status_t batch_evaluations(const jval *arr, const fl_alloc_t *a,
    fl_sdk_message_t *out)
{
    out->evals = fl::alloc_array<fl_sdk_eval_t>(a, arr->count);
    if (out->evals == nullptr) {
        return FL_ERR_NOMEM;
    }
    for (const jval &e : fl::children(*arr)) {
        if (e.kind != fl::J_OBJECT) {
            continue;
        }
        const jval *name = fl::jget(&e, "flagName");
        const jval *result = fl::jget(&e, "result");
        if (name == nullptr || name->kind != fl::J_STRING || result == nullptr
            || (result->kind != fl::J_TRUE && result->kind != fl::J_FALSE))
        {
            continue;
        }
        fl_sdk_eval_t &v = out->evals[out->nevals++];
        v.flag_name = name->str;
        v.flag_name_len = name->len;
        v.result = result->kind == fl::J_TRUE;
    }
    return FL_OK;
}

/* ----------------------------------------------------------- writing */

constexpr char always_true[] = "{\"type\":\"and\",\"conditions\":[]}";
constexpr char always_false[] = "{\"type\":\"or\",\"conditions\":[]}";

/* How a rule reaches the SDK. */
enum class Shape { match, any_of, resolved };

Shape shape(const fl::Rule &r)
{
    /* the caller's id ("$userId") is known here, not a trait the SDK
     * holds: decided for the request's user */
    if (r.ignore_case || r.user_id) {
        return Shape::resolved;
    }
    if (r.op == fl::Op::eq && !r.value.empty()) {
        return Shape::match;
    }
    /* values are sorted: an empty one would come first */
    if (r.op == fl::Op::in && !r.values.empty() && !r.values[0].empty()) {
        return r.values.size() == 1 ? Shape::match : Shape::any_of;
    }
    return Shape::resolved;
}

const std::string &match_value(const fl::Rule &r)
{
    return r.op == fl::Op::in ? r.values[0] : r.value;
}

size_t match_bound(size_t key_len, size_t value_len)
{
    return sizeof("{\"type\":\"match\",\"traitKey\":,\"traitValue\":}")
           + fl::str_bound(key_len) + fl::str_bound(value_len);
}

char *put_match(char *o, const std::string &key, const std::string &value)
{
    o = fl::put_lit(o, "{\"type\":\"match\",\"traitKey\":");
    o = fl::put_str(o, key.data(), key.size());
    o = fl::put_lit(o, ",\"traitValue\":");
    o = fl::put_str(o, value.data(), value.size());
    *o++ = '}';
    return o;
}

size_t rule_bound(const fl::Rule &r)
{
    switch (shape(r)) {
    case Shape::match:
        return match_bound(r.trait.size(), match_value(r).size());
    case Shape::any_of: {
        size_t n = sizeof("{\"type\":\"or\",\"conditions\":[]}");
        for (const std::string &v : r.values) {
            n += match_bound(r.trait.size(), v.size()) + 1;
        }
        return n;
    }
    default:
        return 0;                       /* folded into the segment */
    }
}

char *put_rule(char *o, const fl::Rule &r)
{
    if (shape(r) == Shape::match) {
        return put_match(o, r.trait, match_value(r));
    }
    o = fl::put_lit(o, "{\"type\":\"or\",\"conditions\":[");
    for (size_t i = 0; i < r.values.size(); i++) {
        if (i > 0) {
            *o++ = ',';
        }
        o = put_match(o, r.trait, r.values[i]);
    }
    return fl::put_lit(o, "]}");
}

size_t condition_bound(const fl::Segment &s)
{
    size_t n = sizeof(always_true) + sizeof(always_false)
               + sizeof("{\"type\":\"and\",\"conditions\":[]}");
    for (const fl::Rule &r : s.rules) {
        n += rule_bound(r) + 1;
    }
    return n;
}

/*
 * A segment's condition: the "and" of its rules that the SDK can check;
 * the others are decided here for u, and one that fails makes the whole
 * segment always false (one that holds is left out).
 */
char *put_condition(char *o, const fl_project_s &p, const fl::Segment &s,
    const fl_user_t *u)
{
    size_t sent = 0;

    for (const fl::Rule &r : s.rules) {
        if (shape(r) != Shape::resolved) {
            sent++;
        } else if (!fl::rule_matches(p, r, u)) {
            return fl::put_lit(o, always_false);
        }
    }

    if (sent == 0) {
        return fl::put_lit(o, always_true);
    }
    if (sent > 1) {
        o = fl::put_lit(o, "{\"type\":\"and\",\"conditions\":[");
    }
    bool first = true;
    for (const fl::Rule &r : s.rules) {
        if (shape(r) == Shape::resolved) {
            continue;
        }
        if (!first) {
            *o++ = ',';
        }
        first = false;
        o = put_rule(o, r);
    }
    if (sent > 1) {
        o = fl::put_lit(o, "]}");
    }
    return o;
}

/* the rollout of docs/evaluation.md, on its own, without the segments */
using fl::in_rollout;

constexpr size_t segment_fixed =
    sizeof("{\"segmentId\":,\"condition\":,\"rolloutPercentage\":100,"
           "\"sticky\":false},");

size_t flag_bound(const fl_project_s &p, const fl::Flag &f)
{
    size_t n = sizeof("{\"name\":,\"enabled\":false,\"rolloutPercentage\":100,"
                      "\"value\":null,\"segments\":[],"
                      "\"stickyAssignments\":[]},")
               + fl::str_bound(f.name.size());

    auto segment = [&p](uint32_t si) {
        const fl::Segment &s = p.segments[si];
        return segment_fixed + fl::str_bound(s.name.size())
               + condition_bound(s);
    };

    if (!f.has_rules) {
        for (uint32_t si : f.segments) {
            n += segment(si);
        }
        return n;
    }
    for (const fl::TargetingRule &r : f.rules) {
        if (r.segments.empty()) {
            n += segment_fixed + sizeof("\"rules[1000]\"")
                 + sizeof(always_true);
        }
        for (uint32_t si : r.segments) {
            n += segment(si);
        }
    }
    return n;
}

size_t array_bound(const fl_project_t *p)
{
    size_t n = sizeof("[]");

    if (p != nullptr) {
        for (const fl::Flag &f : p->flags) {
            n += flag_bound(*p, f);
        }
    }
    return n;
}

char *put_segment(char *o, const char *id, size_t id_len)
{
    o = fl::put_lit(o, "{\"segmentId\":");
    o = fl::put_str(o, id, id_len);
    o = fl::put_lit(o, ",\"condition\":");
    return o;
}

char *end_segment(char *o, bool in)
{
    o = fl::put_lit(o, ",\"rolloutPercentage\":");
    o = in ? fl::put_lit(o, "100") : fl::put_lit(o, "0");
    return fl::put_lit(o, ",\"sticky\":false}");
}

/* One SDK segment for module segment s: its condition for u and the
 * percentage resolved (in: 100, else 0), after a comma unless *first. */
char *put_segment_of(char *o, const fl_project_s &p, const fl::Segment &s,
    const fl_user_t *u, bool in, bool *first)
{
    if (!*first) {
        *o++ = ',';
    }
    *first = false;
    o = put_segment(o, s.name.data(), s.name.size());
    o = put_condition(o, p, s, u);
    return end_segment(o, in);
}

/* A flag decided on the server for the POST's user: no segments, its
 * percentage 100 or 0. */
char *put_resolved(char *o, const fl::Flag &f, bool live, bool in)
{
    o = fl::put_lit(o, "{\"name\":");
    o = fl::put_str(o, f.name.data(), f.name.size());
    o = live ? fl::put_lit(o, ",\"enabled\":true")
             : fl::put_lit(o, ",\"enabled\":false");
    o = fl::put_lit(o, ",\"rolloutPercentage\":");
    o = in ? fl::put_lit(o, "100") : fl::put_lit(o, "0");
    return fl::put_lit(o, ",\"value\":null,\"segments\":[],"
                          "\"stickyAssignments\":[]}");
}

/*
 * A flag with rules (docs/sdk.md): one SDK segment a (rule, segment it
 * names), in rule order, "rules[k]" always true for a rule that names
 * none, each with the rule's percentage resolved for the POST's user; the
 * flag's own percentage is the fallthrough's, resolved the same way.  The
 * SDK tries its segments in order and falls back to the flag's
 * percentage: the module's rules, as long as each condition matches
 * when the module's segment does.
 */
char *put_rules(char *o, const fl_project_s &p, const fl::Flag &f,
    const fl_user_t *u, uint32_t eff)
{
    o = fl::put_lit(o, "{\"name\":");
    o = fl::put_str(o, f.name.data(), f.name.size());
    o = fl::put_lit(o, ",\"enabled\":true,\"rolloutPercentage\":");
    o = in_rollout(f, eff, u) ? fl::put_lit(o, "100") : fl::put_lit(o, "0");
    o = fl::put_lit(o, ",\"value\":null,\"segments\":[");

    bool first = true;
    for (size_t k = 0; k < f.rules.size(); k++) {
        const fl::TargetingRule &r = f.rules[k];
        bool in = in_rollout(f, r.rollout_milli, u);

        if (r.segments.empty()) {
            char id[32];
            int n = std::snprintf(id, sizeof(id), "rules[%zu]", k);
            if (!first) {
                *o++ = ',';
            }
            first = false;
            o = put_segment(o, id, static_cast<size_t>(n));
            o = fl::put_lit(o, always_true);
            o = end_segment(o, in);
            continue;
        }
        for (uint32_t si : r.segments) {
            o = put_segment_of(o, p, p.segments[si], u, in, &first);
        }
    }
    return fl::put_lit(o, "],\"stickyAssignments\":[]}");
}

/* 1 on, 0 off, -1 not named: whether the POST's user is named in flag
 * index and it counts (the flag live, no override's percentage), as the
 * evaluation d found, or looked up without one. */
int named_state(const fl_project_s &p, size_t index, const fl::Flag &f,
    const fl_user_t *u, bool live, uint8_t sw, const fl_detail_t *d)
{
    if (d != nullptr) {
        return d->targeted ? (d->enabled ? 1 : 0) : -1;
    }
    if (!live || sw == FL_SWITCH_OVERRIDE_PERCENT || f.targets.empty()
        || u == nullptr || u->user_id == nullptr || u->user_id_len == 0)
    {
        return -1;
    }
    return fl::named_in(p.named,
                        p.named.find(u->user_id, u->user_id_len,
                                     fl::named_hash(u->user_id,
                                                    u->user_id_len)),
                        index);
}

char *put_flag(char *o, const fl_project_s &p, size_t index,
    const fl::Flag &f, const fl_user_t *u, uint32_t eff, uint8_t sw,
    const fl_detail_t *d)
{
    if (f.has_rules || !f.targets.empty()) {
        bool live = f.enabled && sw != FL_SWITCH_ROLLED_BACK
                    && sw != FL_SWITCH_OVERRIDE_OFF;
        int named = named_state(p, index, f, u, live, sw, d);

        if (named >= 0) {
            return put_resolved(o, f, true, named == 1);
        }
        if (f.has_rules) {
            if (!live) {
                return put_resolved(o, f, false, false);
            }
            if (sw == FL_SWITCH_OVERRIDE_PERCENT) {
                return put_resolved(o, f, true, in_rollout(f, eff, u));
            }
            return put_rules(o, p, f, u, eff);
        }
        /* named users only, this user not one of them: as below */
    }

    /* off for everyone: the SDK reads "enabled" before anything else */
    bool live = f.enabled && eff > 0;
    bool in = live && in_rollout(f, eff, u);

    o = fl::put_lit(o, "{\"name\":");
    o = fl::put_str(o, f.name.data(), f.name.size());
    o = live ? fl::put_lit(o, ",\"enabled\":true")
             : fl::put_lit(o, ",\"enabled\":false");

    /* with segments, none matching is off (docs/flags-file.md): the
     * SDK falls back to the flag's own percentage then */
    o = fl::put_lit(o, ",\"rolloutPercentage\":");
    if (f.segments.empty()) {
        o = in ? fl::put_lit(o, "100") : fl::put_lit(o, "0");
    } else {
        *o++ = '0';
    }
    o = fl::put_lit(o, ",\"value\":null,\"segments\":[");

    bool first = true;
    for (uint32_t si : f.segments) {
        o = put_segment_of(o, p, p.segments[si], u, in, &first);
    }
    return fl::put_lit(o, "],\"stickyAssignments\":[]}");
}

char *put_array(char *o, const fl_project_t *p, const fl_user_t *u,
    const fl_detail_t *r)
{
    *o++ = '[';
    size_t n = p ? p->flags.size() : 0;
    for (size_t i = 0; i < n; i++) {
        const fl::Flag &f = p->flags[i];
        if (i > 0) {
            *o++ = ',';
        }
        o = put_flag(o, *p, i, f, u, r ? r[i].rollout_milli : f.rollout_milli,
                     r ? r[i].sw : uint8_t(FL_SWITCH_NONE), r ? &r[i] : nullptr);
    }
    *o++ = ']';
    return o;
}

constexpr char refresh_head[] = "{\"type\":\"flags_refreshed\",\"flags\":";

} // namespace


extern "C" {

fl_status_t fl_sdk_parse_request(const char *body, size_t len,
    size_t max_traits, const fl_alloc_t *a, fl_user_t *out, char *err,
    size_t err_len) noexcept
{
    if (out == nullptr || a == nullptr || a->alloc == nullptr) {
        fl::set_err(err, err_len, "internal error");
        return FL_ERR_INTERNAL;
    }
    *out = fl_user_t{nullptr, 0, nullptr, 0};

    try {
        const jval *root = nullptr;
        fl_status_t rc = read_object(body ? body : "", body ? len : 0, a,
                                     "request body", &root, err, err_len);
        if (rc != FL_OK) {
            return rc;
        }
        rc = fl::user_from_json(fl::jget(root, "userId"),
                                fl::jget(root, "traits"), max_traits, a, "",
                                out, err, err_len);
        if (rc != FL_OK) {
            *out = fl_user_t{nullptr, 0, nullptr, 0};
        }
        return rc;
    } catch (...) {
        fl::set_err(err, err_len, "internal error");
        return FL_ERR_INTERNAL;
    }
}

size_t fl_sdk_flags_json_bound(const fl_project_t *p) noexcept
{
    return sizeof("{\"flags\":}") + array_bound(p);
}

size_t fl_sdk_flags_json(const fl_project_t *p, const fl_user_t *u,
    const fl_detail_t *r, char *buf) noexcept
{
    char *o = fl::put_lit(buf, "{\"flags\":");
    o = put_array(o, p, u, r);
    *o++ = '}';
    return static_cast<size_t>(o - buf);
}

size_t fl_sdk_refresh_json_bound(const fl_project_t *p) noexcept
{
    return sizeof(refresh_head) + 1 + array_bound(p);
}

size_t fl_sdk_refresh_json(const fl_project_t *p, const fl_user_t *u,
    const fl_detail_t *r, char *buf) noexcept
{
    char *o = fl::put_lit(buf, refresh_head);
    o = put_array(o, p, u, r);
    *o++ = '}';
    return static_cast<size_t>(o - buf);
}

fl_status_t fl_sdk_parse_message(const char *data, size_t len,
    size_t max_traits, const fl_alloc_t *a, fl_sdk_message_t *out, char *err,
    size_t err_len) noexcept
{
    if (out == nullptr || a == nullptr || a->alloc == nullptr) {
        fl::set_err(err, err_len, "internal error");
        return FL_ERR_INTERNAL;
    }
    std::memset(out, 0, sizeof(*out));

    try {
        const jval *root = nullptr;
        fl_status_t rc = read_object(data ? data : "", data ? len : 0, a,
                                     "message", &root, err, err_len);
        if (rc != FL_OK) {
            return rc;
        }

        const jval *type = fl::jget(root, "type");
        if (type == nullptr) {
            fl::set_err(err, err_len, "type is required");
            return FL_ERR_FIELD;
        }
        if (type->kind != fl::J_STRING) {
            fl::set_err(err, err_len, "type must be a string");
            return FL_ERR_FIELD;
        }
        out->type_name = type->str;
        out->type_name_len = type->len;

        const char *events;
        if (type->len == sizeof("evaluation_batch") - 1
            && std::memcmp(type->str, "evaluation_batch", type->len) == 0)
        {
            out->type = FL_SDK_MSG_EVALUATION_BATCH;
            events = "evaluations";
        } else if (type->len == sizeof("performance_batch") - 1
                   && std::memcmp(type->str, "performance_batch",
                                  type->len) == 0)
        {
            out->type = FL_SDK_MSG_PERFORMANCE_BATCH;
            events = "performanceEvents";
        } else {
            out->type = FL_SDK_MSG_UNKNOWN;
            return FL_OK;
        }

        const jval *last = nullptr;
        rc = last_event(root, events, &out->nevents, &last, err, err_len);
        if (rc != FL_OK || last == nullptr) {
            return rc;
        }

        if (out->type == FL_SDK_MSG_EVALUATION_BATCH) {
            rc = batch_evaluations(fl::jget(root, events), a, out);
            if (rc != FL_OK) {
                fl::set_err(err, err_len, "out of memory");
                return rc;
            }
        }

        char where[48];
        fl::set_err(where, sizeof(where), "%s[%zu].", events,
                    out->nevents - 1);
        rc = fl::user_from_json(fl::jget(last, "userId"),
                                fl::jget(last, "traits"), max_traits, a,
                                where, &out->user, err, err_len);
        if (rc != FL_OK) {
            out->user = fl_user_t{nullptr, 0, nullptr, 0};
            return rc;
        }
        out->has_user = 1;
        return FL_OK;
    } catch (...) {
        fl::set_err(err, err_len, "internal error");
        return FL_ERR_INTERNAL;
    }
}

} // extern "C"
