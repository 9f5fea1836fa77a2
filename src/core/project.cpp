/*
 * project.cpp - loading and validating a flags file (docs/api.md, flags
 * file).
 *
 * The file is parsed with yajl's streaming parser into a small document
 * tree (yajl_tree would hide the byte offset of a syntax error, which the
 * "PATH:LINE:COL" message needs), then checked field by field into the
 * model of project.hpp.  Every message is one line without a trailing
 * newline; names from the file are JSON-escaped in messages so a name with
 * a line break cannot split a log line.
 *
 * Conventions of the messages: "flags[3]" is the JSON array index
 * (0-based) and is used only when the flag has no usable name; rules are
 * counted for a person, "rule 1" being the first.
 *
 * Duplicate keys in an object: the last one wins (as in JavaScript),
 * except in "segments", where a name defined twice is an error.
 *
 * Unknown fields are ignored but each is named in a warning, so
 * that a misspelt optional field ("stickyness") does not go unnoticed;
 * the warnings come in the order the loader meets them: the top level,
 * then segments, then flags.
 */

#include "project.hpp"
#include "arena.hpp"
#include "hash.hpp"
#include "json_reader.hpp"
#include "json_writer.hpp"
#include "text.hpp"
#include "utf8.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <unordered_map>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <new>
#include <unordered_set>

namespace fl {

namespace {

/* Nesting limit of the flags file: far beyond any real one. */
constexpr unsigned max_depth = 512;

/* Regex matching stops (and the rule is false) past this many steps, so a
 * catastrophic pattern cannot stall a worker on a 1 KB trait value. */
constexpr uint32_t regex_match_limit = 1000000;

constexpr size_t max_name_len = FL_MAX_TRAIT_NAME_LEN;

/* The messages below spell the limits out. */
static_assert(FL_MAX_TRAIT_NAME_LEN == 128 && FL_MAX_FLAG_NAME_LEN == 128,
              "update the messages that say 128");

std::string_view str(const jval &v)
{
    return std::string_view(v.str, v.len);
}

bool is_bool(const jval &v)
{
    return v.kind == J_TRUE || v.kind == J_FALSE;
}

std::string_view key(const jval &v)
{
    return std::string_view(v.key, v.key_len);
}

/* The last member named k, a null value included (it is then "of the
 * wrong type", not absent). */
const jval *get(const jval &obj, std::string_view k)
{
    return jmember(&obj, k.data(), k.size());
}


/* Kinds a required member may have, as a mask of 1 << jkind. */
constexpr unsigned K_STRING = 1u << J_STRING;
constexpr unsigned K_ARRAY = 1u << J_ARRAY;
constexpr unsigned K_BOOL = (1u << J_TRUE) | (1u << J_FALSE);

/* The required member k of obj, when present and of one of the kinds;
 * else nullptr, and why says "\"k\" is missing" or "\"k\" must ..." */
const jval *need(const jval &obj, const char *k, unsigned kinds,
    const char *must, std::string &why)
{
    const jval *m = get(obj, k);

    if (m == nullptr) {
        why = std::string("\"") + k + "\" is missing";
    } else if ((kinds & (1u << m->kind)) == 0) {
        why = std::string("\"") + k + "\" " + must;
        m = nullptr;
    }
    return m;
}


/* A JSON number that is a whole count in [1, limit]: 5, 5.0 and 5e0
 * alike. */
bool count_in(const jval &v, uint32_t limit, uint32_t *out)
{
    DecimalView d;
    uint64_t n;
    bool exact;

    if (v.kind != J_NUMBER || !parse_decimal(v.str, v.len, &d)
        || !decimal_scaled(d, 0, limit, &n, &exact) || !exact || n < 1)
    {
        return false;
    }
    *out = static_cast<uint32_t>(n);
    return true;
}


/* A whole number of seconds in [lo, hi], as count_in() reads counts. */
bool seconds_in(const jval &v, uint32_t lo, uint32_t hi, uint32_t *out)
{
    DecimalView d;
    uint64_t n;
    bool exact;

    if (v.kind != J_NUMBER || !parse_decimal(v.str, v.len, &d)
        || !decimal_scaled(d, 0, hi, &n, &exact) || !exact || n < lo)
    {
        return false;
    }
    *out = static_cast<uint32_t>(n);
    return true;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (the usual
 * era arithmetic: 400-year eras of 146097 days). */
int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = static_cast<unsigned>(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

/* "YYYY-MM-DDTHH:MM:SS[.fraction]Z" (RFC 3339 in UTC) as milliseconds
 * since the epoch; a fraction past milliseconds is cut.  Years 1970 to
 * 9999. */
bool parse_utc_time(std::string_view s, uint64_t *ms)
{
    auto num = [&s](size_t at, size_t n, unsigned *out) {
        unsigned v = 0;
        for (size_t k = at; k < at + n; k++) {
            if (k >= s.size() || s[k] < '0' || s[k] > '9') {
                return false;
            }
            v = v * 10 + static_cast<unsigned>(s[k] - '0');
        }
        *out = v;
        return true;
    };
    unsigned y, mo, d, h, mi, sec;
    if (s.size() < 20 || !num(0, 4, &y) || s[4] != '-' || !num(5, 2, &mo)
        || s[7] != '-' || !num(8, 2, &d) || (s[10] != 'T' && s[10] != 't')
        || !num(11, 2, &h) || s[13] != ':' || !num(14, 2, &mi)
        || s[16] != ':' || !num(17, 2, &sec))
    {
        return false;
    }
    static const unsigned mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31,
                                     30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1]
        || (mo == 2 && d == 29 && !leap) || h > 23 || mi > 59 || sec > 60)
    {
        return false;
    }
    size_t k = 19;
    unsigned frac = 0, scale = 100;
    if (s[k] == '.') {
        k++;
        size_t first = k;
        while (k < s.size() && s[k] >= '0' && s[k] <= '9') {
            frac += static_cast<unsigned>(s[k] - '0') * scale;
            scale /= 10;
            k++;
        }
        if (k == first) {
            return false;
        }
    }
    if (k + 1 != s.size() || (s[k] != 'Z' && s[k] != 'z')) {
        return false;
    }
    int64_t days = days_from_civil(y, mo, d);
    *ms = static_cast<uint64_t>(days * 86400 + h * 3600 + mi * 60
                                + (sec > 59 ? 59 : sec)) * 1000 + frac;
    return true;
}

/* ------------------------------------------------------- messages */

void append_json_string(std::string &out, std::string_view s)
{
    append_str(out, s.data(), s.size());
}

/* A name from the file, quoted and escaped for a one-line message; long
 * names are cut, on a UTF-8 character boundary. */
std::string quoted(std::string_view s)
{
    size_t cut = utf8_prefix(s.data(), s.size(), 64);

    std::string out;
    append_json_string(out, s.substr(0, cut));
    if (cut < s.size()) {
        out.insert(out.size() - 1, "...");
    }
    return out;
}

void set_error(char *err, size_t err_len, const std::string &msg) noexcept
{
    set_err(err, err_len, "%s", msg.c_str());
}


/* ------------------------------------------------------ the loader */

struct OpName {
    const char *name;
    Op          op;
};

const OpName op_names[] = {
    {"eq", Op::eq}, {"neq", Op::neq}, {"in", Op::in}, {"not_in", Op::not_in},
    {"contains", Op::contains}, {"starts_with", Op::starts_with},
    {"ends_with", Op::ends_with}, {"regex", Op::regex}, {"gt", Op::gt},
    {"gte", Op::gte}, {"lt", Op::lt}, {"lte", Op::lte},
    {"semver_eq", Op::semver_eq}, {"semver_gt", Op::semver_gt},
    {"semver_lt", Op::semver_lt}, {"exists", Op::exists},
    {"not_exists", Op::not_exists},
};

bool is_string_op(Op op)
{
    switch (op) {
    case Op::eq: case Op::neq: case Op::contains: case Op::starts_with:
    case Op::ends_with:
        return true;
    default:
        return false;
    }
}

bool is_number_op(Op op)
{
    return op == Op::gt || op == Op::gte || op == Op::lt || op == Op::lte;
}

bool is_semver_op(Op op)
{
    return op == Op::semver_eq || op == Op::semver_gt || op == Op::semver_lt;
}

bool valid_flag_name(std::string_view s)
{
    if (s.empty() || s.size() > FL_MAX_FLAG_NAME_LEN) {
        return false;
    }
    for (unsigned char c : s) {
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')
                  || (c >= '0' && c <= '9') || c == '_' || c == '.'
                  || c == ':' || c == '-';
        if (!ok) {
            return false;
        }
    }
    return true;
}

void fold_string(std::string &s)
{
    for (char &c : s) {
        c = static_cast<char>(fold(static_cast<unsigned char>(c)));
    }
}

class Loader {
public:
    Loader(const std::string &source, fl_project_s &p)
        : source_(source), p_(p) {}

    bool load(const char *data, size_t len);

    fl_status_t          status = FL_ERR_INVALID;
    std::string          error;

private:
    bool fail(const std::string &msg)
    {
        error = source_ + ": " + msg;
        return false;
    }

    void warn_unknown(const jval &obj,
        std::initializer_list<std::string_view> known,
        const std::string &where);

    bool parse_json(const char *data, size_t len, const jval **root);
    bool load_segments(const jval *segs);
    bool load_rule(const jval &v, Rule &r, std::string &why,
        const std::string &where);
    bool load_flag(const jval &v, size_t index, Flag &f);
    bool load_ramp(const jval &v, fl_ramp_def_t &rd, std::string &why,
                   const std::string &where);
    bool load_rollback(const jval &v, fl_rollback_policy_t &rb,
        std::string &why, const std::string &where);
    bool load_percent(const jval *v, uint32_t &milli, std::string &why);
    bool load_segment_list(const jval &v, std::vector<uint32_t> &out,
                           std::string &why);
    bool load_rules(const jval &v, Flag &f, std::string &why,
                    const std::string &where);
    bool load_targets(const jval &v, NamedUsers &t, std::string &why,
                      const std::string &where);
    void finish_flag(Flag &f);
    void index_named_users();
    void build_hot();
    void build_frame();
    void build_lanes();

    const std::string   &source_;
    fl_project_s        &p_;
    std::unordered_map<std::string_view, uint32_t>  segment_index_;
    bool                 any_regex_ = false;
    size_t               warnings_dropped_ = 0;
    malloc_arena         arena_;        /* the document tree */
};

/* One warning per unknown key of obj (a key written twice warns once).
 * where is "" or "flag \"x\": " and the like. */
void Loader::warn_unknown(const jval &obj,
    std::initializer_list<std::string_view> known, const std::string &where)
{
    std::unordered_set<std::string_view> seen;

    for (const jval *m = obj.first; m != nullptr; m = m->next) {
        std::string_view k = key(*m);
        if (std::find(known.begin(), known.end(), k) != known.end()
            || !seen.insert(k).second)
        {
            continue;
        }
        if (p_.warnings.size() >= FL_MAX_PROJECT_WARNINGS) {
            warnings_dropped_++;
            continue;
        }
        p_.warnings.push_back(source_ + ": " + where + "unknown field "
                              + quoted(k) + " ignored");
    }
}

/* The document tree, in arena_'s memory; a syntax error is reported as
 * "PATH:LINE:COL: invalid JSON: reason". */
bool Loader::parse_json(const char *data, size_t len, const jval **root)
{
    jval *r = nullptr;
    jread_error e;

    json_read(data, len, arena_.handle(), max_depth, &r, &e);

    if (e.kind == jread_error::NONE) {
        if (r == nullptr) {
            return fail("invalid JSON: the file is empty");
        }
        *root = r;
        return true;
    }

    if (e.kind == jread_error::NOMEM) {
        status = FL_ERR_NOMEM;
        return fail("out of memory");
    }

    std::string reason;
    if (e.kind == jread_error::TOO_DEEP) {
        reason = "nesting deeper than " + std::to_string(max_depth)
                 + " levels";
    } else {
        reason = e.why;
    }

    /* The byte at fault: yajl's own offset is sometimes after the token
     * and sometimes before it, so for a syntax error the input is fed again
     * one byte at a time and the first byte yajl refuses is the position
     * (the end of the input for a premature end).  A cancelled parse
     * (nesting too deep) stopped right after its opening bracket. */
    size_t at = e.kind == jread_error::TOO_DEEP
                ? (e.consumed > 0 ? e.consumed - 1 : 0)
                : json_error_offset(data, len);
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < len; i++) {
        if (data[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    error = source_ + ":" + std::to_string(line) + ":" + std::to_string(col)
            + ": invalid JSON: " + reason;
    return false;
}

bool Loader::load_rule(const jval &v, Rule &r, std::string &why,
    const std::string &where)
{
    if (v.kind != J_OBJECT) {
        why = "not an object";
        return false;
    }
    warn_unknown(v, {"trait", "op", "value", "values", "ignoreCase"}, where);

    const char *trait_must = "must be a non-empty string of at most 128 bytes";
    const jval *t = need(v, "trait", K_STRING, trait_must, why);
    if (t == nullptr) {
        return false;
    }
    if (t->len == 0 || t->len > max_name_len) {
        why = std::string("\"trait\" ") + trait_must;
        return false;
    }
    r.trait = str(*t);
    r.user_id = r.trait == "$userId";

    const jval *o = need(v, "op", K_STRING, "must be a string", why);
    if (o == nullptr) {
        return false;
    }
    bool known = false;
    for (const OpName &n : op_names) {
        if (str(*o) == n.name) {
            r.op = n.op;
            known = true;
            break;
        }
    }
    if (!known) {
        why = "unknown operator " + quoted(str(*o));
        return false;
    }

    const jval *ic = get(v, "ignoreCase");
    if (ic != nullptr) {
        if (!is_bool(*ic)) {
            why = "\"ignoreCase\" must be a boolean";
            return false;
        }
        /* only meaningful for the string operators and regex */
        r.ignore_case = ic->kind == J_TRUE
                        && (is_string_op(r.op) || r.op == Op::regex
                            || r.op == Op::in || r.op == Op::not_in);
    }

    if (r.op == Op::exists || r.op == Op::not_exists) {
        return true;
    }

    if (r.op == Op::in || r.op == Op::not_in) {
        const jval *vs = need(v, "values", K_ARRAY,
                              "must be an array of strings", why);
        if (vs == nullptr) {
            return false;
        }
        for (const jval &e : children(*vs)) {
            if (e.kind != J_STRING) {
                why = "\"values\" must be an array of strings";
                return false;
            }
            r.values.emplace_back(str(e));
            if (r.ignore_case) {
                fold_string(r.values.back());
            }
        }
        /* sorted and unique: evaluation does a binary search */
        std::sort(r.values.begin(), r.values.end());
        r.values.erase(std::unique(r.values.begin(), r.values.end()),
                       r.values.end());
        return true;
    }

    const jval *val = get(v, "value");
    if (val == nullptr) {
        why = "\"value\" is missing";
        return false;
    }

    if (is_number_op(r.op)) {
        DecimalView d;
        if ((val->kind != J_NUMBER && val->kind != J_STRING)
            || !parse_decimal(val->str, val->len, &d))
        {
            why = "\"value\" must be a number or a numeric string";
            return false;
        }
        r.number = Decimal::from(d);
        return true;
    }

    if (val->kind != J_STRING) {
        why = "\"value\" must be a string";
        return false;
    }
    r.value = str(*val);

    if (is_semver_op(r.op)) {
        if (!semver_parse(r.value.data(), r.value.size(), &r.semver)) {
            why = "\"value\" " + quoted(r.value)
                  + " is not a semantic version";
            return false;
        }
        return true;
    }

    if (r.op == Op::regex) {
        int code = 0;
        PCRE2_SIZE offset = 0;
        uint32_t opts = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF
                        | (r.ignore_case ? PCRE2_CASELESS : 0);

        r.re.reset(pcre2_compile(
            reinterpret_cast<PCRE2_SPTR>(r.value.data()), r.value.size(),
            opts, &code, &offset, nullptr));
        if (!r.re) {
            PCRE2_UCHAR msg[256];
            if (pcre2_get_error_message(code, msg, sizeof(msg)) < 0) {
                std::strcpy(reinterpret_cast<char *>(msg), "unknown error");
            }
            why = "invalid regex at offset " + std::to_string(offset) + ": "
                  + reinterpret_cast<char *>(msg);
            return false;
        }
#ifndef FL_NO_PCRE2_JIT
        /* JIT is only a speed-up: without it pcre2_match interprets.
         * (Its SIMD search reads whole 16-byte words past the end of a
         * subject, which valgrind reports; build with -DFL_NO_PCRE2_JIT
         * for a clean memcheck run.) */
        r.jit = pcre2_jit_compile(r.re.get(), PCRE2_JIT_COMPLETE) == 0;
#endif
        any_regex_ = true;
        return true;
    }

    if (r.ignore_case) {
        fold_string(r.value);
    }
    return true;
}

bool Loader::load_segments(const jval *segs)
{
    if (segs == nullptr) {
        return true;
    }
    if (segs->kind != J_OBJECT) {
        return fail("\"segments\" must be an object");
    }

    p_.segments.resize(segs->count);

    size_t i = 0;
    for (const jval &v : children(*segs)) {
        std::string_view name = key(v);
        Segment &s = p_.segments[i];

        if (name.empty()) {
            return fail("a segment name is empty");
        }
        std::string where = "segment " + quoted(name) + ": ";
        if (name.size() > max_name_len) {
            return fail(where + "name is longer than 128 bytes");
        }
        if (name.find('\0') != std::string_view::npos) {
            return fail(where + "name contains a NUL byte");
        }
        if (!segment_index_.emplace(name, static_cast<uint32_t>(i++)).second) {
            return fail(where + "defined twice");
        }
        s.name = name;

        if (v.kind != J_OBJECT) {
            return fail(where + "not an object");
        }
        warn_unknown(v, {"rules"}, where);
        std::string why;
        const jval *rules = need(v, "rules", K_ARRAY, "must be an array", why);
        if (rules == nullptr) {
            return fail(where + why);
        }

        s.rules.resize(rules->count);
        size_t j = 0;
        for (const jval &rv : children(*rules)) {
            std::string rule = where + "rule " + std::to_string(j + 1) + ": ";
            if (!load_rule(rv, s.rules[j], why, rule)) {
                return fail(rule + why);
            }
            j++;
        }
    }

    return true;
}

bool Loader::load_ramp(const jval &v, fl_ramp_def_t &rd, std::string &why,
    const std::string &where)
{
    rd = fl_ramp_def_t();
    rd.alpha_ppm = FL_RAMP_DEFAULT_ALPHA_PPM;
    rd.dispersion_milli = FL_RAMP_DEFAULT_DISPERSION_MILLI;
    rd.tick = FL_RAMP_DEFAULT_TICK;

    if (v.kind != J_OBJECT) {
        why = "\"ramp\" must be an object";
        return false;
    }
    warn_unknown(v, {"stages", "startAt", "maxExtend", "onInsufficient",
                     "regression"}, where + "ramp: ");

    const jval *stages = get(v, "stages");
    if (stages == nullptr || stages->kind != J_ARRAY) {
        why = "ramp: \"stages\" must be an array of 1 to "
              + std::to_string(FL_RAMP_MAX_STAGES) + " stages";
        return false;
    }
    size_t n = 0;
    for (const jval &sv : children(*stages)) {
        (void) sv;
        n++;
    }
    if (n == 0 || n > FL_RAMP_MAX_STAGES) {
        why = "ramp: \"stages\" must be an array of 1 to "
              + std::to_string(FL_RAMP_MAX_STAGES) + " stages";
        return false;
    }
    rd.nstages = static_cast<uint32_t>(n);

    size_t k = 0;
    for (const jval &sv : children(*stages)) {
        std::string at = "ramp: stage " + std::to_string(k) + ": ";
        fl_ramp_stage_t &st = rd.stages[k];
        bool last = k + 1 == n;
        if (sv.kind != J_OBJECT) {
            why = at + "not an object";
            return false;
        }
        warn_unknown(sv, {"percentage", "hold", "minRequests"}, where + at);

        const jval *pc = get(sv, "percentage");
        if (pc == nullptr || pc->kind != J_NUMBER
            || parse_milli(pc->str, pc->len, &st.milli) != FL_MILLI_OK
            || st.milli == 0)
        {
            why = at + "\"percentage\" must be a number above 0 and at most"
                  " 100, with at most 3 decimals";
            return false;
        }
        if (k > 0 && st.milli <= rd.stages[k - 1].milli) {
            why = at + "\"percentage\" must be above the stage before's";
            return false;
        }

        const jval *hold = get(sv, "hold");
        if (hold == nullptr && !last) {
            why = at + "\"hold\" is missing (only the last stage may leave"
                  " it out)";
            return false;
        }
        if (hold != nullptr
            && !seconds_in(*hold, 1, FL_RAMP_MAX_SECONDS, &st.hold))
        {
            why = at + "\"hold\" must be a whole number of seconds between 1"
                  " and " + std::to_string(FL_RAMP_MAX_SECONDS);
            return false;
        }
        if (last) {
            st.hold = 0;        /* the end: nothing to hold for */
        }

        if (const jval *mr = get(sv, "minRequests")) {
            if (!seconds_in(*mr, 0, UINT32_MAX, &st.min_requests)) {
                why = at + "\"minRequests\" must be a whole number >= 0";
                return false;
            }
        }
        k++;
    }

    if (const jval *sa = get(v, "startAt")) {
        if (sa->kind != J_STRING || !parse_utc_time(str(*sa), &rd.start_at_ms))
        {
            why = "ramp: \"startAt\" must be an RFC 3339 time in UTC, as"
                  " \"2026-12-01T09:00:00Z\"";
            return false;
        }
    }

    if (const jval *me = get(v, "maxExtend")) {
        if (!seconds_in(*me, 0, FL_RAMP_MAX_SECONDS, &rd.max_extend)) {
            why = "ramp: \"maxExtend\" must be a whole number of seconds"
                  " between 0 and " + std::to_string(FL_RAMP_MAX_SECONDS);
            return false;
        }
    }

    if (const jval *oi = get(v, "onInsufficient")) {
        std::string_view o = oi->kind == J_STRING ? str(*oi) : "";
        if (o == "hold") {
            rd.on_insufficient = FL_RAMP_INSUFFICIENT_HOLD;
        } else if (o == "rollback") {
            rd.on_insufficient = FL_RAMP_INSUFFICIENT_ROLLBACK;
        } else {
            why = "ramp: \"onInsufficient\" must be \"hold\" or \"rollback\"";
            return false;
        }
    }

    if (const jval *rg = get(v, "regression")) {
        if (rg->kind != J_OBJECT) {
            why = "ramp: \"regression\" must be an object";
            return false;
        }
        warn_unknown(*rg, {"alpha", "dispersion", "tick"},
                     where + "ramp: regression: ");
        DecimalView d;
        uint64_t x;
        bool exact;
        if (const jval *a = get(*rg, "alpha")) {
            if (a->kind != J_NUMBER || !parse_decimal(a->str, a->len, &d)
                || !decimal_scaled(d, 6, 999999, &x, &exact) || !exact
                || x == 0)
            {
                why = "ramp: regression: \"alpha\" must be a number above 0"
                      " and below 1, with at most 6 decimals";
                return false;
            }
            rd.alpha_ppm = static_cast<uint32_t>(x);
        }
        if (const jval *ph = get(*rg, "dispersion")) {
            if (ph->kind != J_NUMBER || !parse_decimal(ph->str, ph->len, &d)
                || !decimal_scaled(d, 3, 1000000, &x, &exact) || !exact
                || x < 1000)
            {
                why = "ramp: regression: \"dispersion\" must be a number from"
                      " 1 to 1000, with at most 3 decimals";
                return false;
            }
            rd.dispersion_milli = static_cast<uint32_t>(x);
        }
        if (const jval *t = get(*rg, "tick")) {
            if (!seconds_in(*t, 1, FL_RAMP_TICK_MAX, &rd.tick)) {
                why = "ramp: regression: \"tick\" must be a whole number of"
                      " seconds between 1 and "
                      + std::to_string(FL_RAMP_TICK_MAX);
                return false;
            }
        }
    }
    return true;
}

bool Loader::load_rollback(const jval &v, fl_rollback_policy_t &rb,
    std::string &why, const std::string &where)
{
    rb = fl_rollback_policy_t();

    if (is_bool(v)) {
        rb.mode = (v.kind == J_TRUE) ? FL_ROLLBACK_INHERIT : FL_ROLLBACK_OFF;
        return true;
    }
    if (v.kind != J_OBJECT) {
        why = "\"rollback\" must be an object or false";
        return false;
    }
    rb.mode = FL_ROLLBACK_ON;
    warn_unknown(v, {"minErrors", "rate", "window", "minSources"},
                 where + "rollback: ");

    if (const jval *f = get(v, "minErrors")) {
        if (!count_in(*f, UINT32_MAX, &rb.min_errors)) {
            why = "rollback: \"minErrors\" must be an integer >= 1";
            return false;
        }
    }

    if (const jval *f = get(v, "rate")) {
        fl_milli_status_t st = f->kind != J_NUMBER ? FL_MILLI_SYNTAX
                               : parse_milli(f->str, f->len, &rb.rate_milli);
        if (st == FL_MILLI_DECIMALS) {
            why = "rollback: \"rate\" has more than 3 decimals";
            return false;
        }
        if (st != FL_MILLI_OK || rb.rate_milli == 0) {
            why = "rollback: \"rate\" must be a number above 0 and at most 100";
            return false;
        }
    }

    if (const jval *f = get(v, "window")) {
        if (!count_in(*f, FL_WINDOW_MAX, &rb.window)) {
            why = "rollback: \"window\" must be an integer between 1 and "
                  + std::to_string(FL_WINDOW_MAX);
            return false;
        }
    }

    if (const jval *f = get(v, "minSources")) {
        if (!count_in(*f, FL_MIN_SOURCES_MAX, &rb.min_sources)) {
            why = "rollback: \"minSources\" must be an integer between 1 "
                  "and " + std::to_string(FL_MIN_SOURCES_MAX);
            return false;
        }
    }

    return true;
}

/* A "rolloutPercentage": 0 to 100, at most 3 decimals, in thousandths. */
bool Loader::load_percent(const jval *v, uint32_t &milli, std::string &why)
{
    if (v == nullptr) {
        why = "\"rolloutPercentage\" is missing";
        return false;
    }
    switch (v->kind != J_NUMBER ? FL_MILLI_SYNTAX
            : parse_milli(v->str, v->len, &milli))
    {
    case FL_MILLI_OK:
        return true;
    case FL_MILLI_SYNTAX:
        why = "\"rolloutPercentage\" must be a number";
        return false;
    case FL_MILLI_RANGE:
        why = "\"rolloutPercentage\" must be between 0 and 100";
        return false;
    case FL_MILLI_DECIMALS:
        why = "\"rolloutPercentage\" has more than 3 decimals";
        return false;
    }
    return false;
}

/* "segments": names of segments defined in the file, as indices. */
bool Loader::load_segment_list(const jval &v, std::vector<uint32_t> &out,
    std::string &why)
{
    if (v.kind != J_ARRAY) {
        why = "\"segments\" must be an array of strings";
        return false;
    }
    for (const jval &s : children(v)) {
        if (s.kind != J_STRING) {
            why = "\"segments\" must be an array of strings";
            return false;
        }
        auto it = segment_index_.find(str(s));
        if (it == segment_index_.end()) {
            why = "unknown segment " + quoted(str(s));
            return false;
        }
        out.push_back(it->second);
    }
    return true;
}

/* "rules": [{"segments": [...], "rolloutPercentage": P}, ...]; f.segments
 * becomes every segment they name, in order, once. */
bool Loader::load_rules(const jval &v, Flag &f, std::string &why,
    const std::string &where)
{
    if (v.kind != J_ARRAY) {
        why = "\"rules\" must be an array of objects";
        return false;
    }
    if (v.count > FL_MAX_FLAG_RULES) {
        why = "more than " + std::to_string(FL_MAX_FLAG_RULES) + " rules";
        return false;
    }

    f.has_rules = true;
    f.rules.resize(v.count);
    size_t k = 0;
    for (const jval &rv : children(v)) {
        TargetingRule &r = f.rules[k];
        std::string at = "rules[" + std::to_string(k++) + "]: ";
        if (rv.kind != J_OBJECT) {
            why = "\"rules\" must be an array of objects";
            return false;
        }
        warn_unknown(rv, {"segments", "rolloutPercentage"}, where + at);

        const jval *segs = get(rv, "segments");
        if (segs == nullptr) {
            why = at + "\"segments\" is missing";
            return false;
        }
        if (!load_segment_list(*segs, r.segments, why)
            || !load_percent(get(rv, "rolloutPercentage"), r.rollout_milli,
                             why))
        {
            why = at + why;
            return false;
        }
        for (uint32_t si : r.segments) {
            if (std::find(f.segments.begin(), f.segments.end(), si)
                == f.segments.end())
            {
                f.segments.push_back(si);
            }
        }
    }
    return true;
}

/* "targets": {"on": [ids], "off": [ids]} into the flag's table. */
bool Loader::load_targets(const jval &v, NamedUsers &t, std::string &why,
    const std::string &where)
{
    static const char shape[] = "\"targets\" must be an object with \"on\""
                                " and \"off\" lists of user ids";
    if (v.kind != J_OBJECT) {
        why = shape;
        return false;
    }
    warn_unknown(v, {"on", "off"}, where + "targets: ");

    /* id -> on, the first list an id is in */
    std::unordered_map<std::string_view, bool> ids;
    for (bool on : {true, false}) {
        const char *list = on ? "on" : "off";
        const jval *l = get(v, list);
        if (l == nullptr) {
            continue;
        }
        if (l->kind != J_ARRAY) {
            why = shape;
            return false;
        }
        size_t k = 0;
        for (const jval &id : children(*l)) {
            if (id.kind != J_STRING || id.len == 0
                || id.len > FL_MAX_VALUE_LEN)
            {
                why = std::string("targets.") + list + "["
                      + std::to_string(k) + "]: a user id must be a"
                      " non-empty string of at most "
                      + std::to_string(FL_MAX_VALUE_LEN) + " bytes";
                return false;
            }
            k++;
            auto in = ids.emplace(str(id), on);
            if (!in.second && in.first->second != on) {
                why = "user " + quoted(str(id))
                      + " is in both targets.on and targets.off";
                return false;
            }
            if (ids.size() > FL_MAX_FLAG_TARGETS) {
                why = "more than " + std::to_string(FL_MAX_FLAG_TARGETS)
                      + " named users in \"targets\"";
                return false;
            }
        }
    }

    /* sorted, so the table and the definition hash do not depend on
     * the order the file lists them */
    std::vector<std::pair<std::string_view, bool>> sorted(ids.begin(),
                                                          ids.end());
    std::sort(sorted.begin(), sorted.end());

    t.entries.reserve(sorted.size());
    for (const auto &e : sorted) {
        NamedUsers::Entry en;
        en.offset = static_cast<uint32_t>(t.bytes.size());
        en.len = static_cast<uint32_t>(e.first.size());
        en.on = e.second;
        t.bytes.append(e.first.data(), e.first.size());
        t.entries.push_back(en);
        (e.second ? t.on : t.off)++;
    }
    return true;
}

/* At most the bytes of flag f's object in an answer with its ',', whatever
 * its value and percentage (fl_project_s::json_bound). */
size_t object_bound(const Flag &f)
{
    return f.json_head.size() + sizeof("false")
           + sizeof(",\"rolloutPercentage\":") + 8 + f.json_tail.size() + 1;
}

/*
 * The copies of json_width bytes (128 at most) past an object or a piece
 * stay inside the answer's bound, which counts object_bound() a flag and
 * sizeof("{\"flags\":[]}"): 3 bytes more than the "{\"flags\":[" written
 * before the first object.  put_flag()'s copy of a whole object starts
 * after its ',' with at least two objects ahead, each bound at least 74
 * bytes (a name of one byte, "segments":[]).  A piece of the frame
 * (put_word()) starts after a flag's value, with ahead: the 3 bytes, what
 * the flag's bound leaves after its head and a value of 5 bytes (at least
 * 47), and the last flag's bound (74 at least): 124 bytes; the bound has
 * frame_slack more.
 */
constexpr size_t min_head = sizeof("{\"name\":\"x\",\"enabled\":") - 1;
constexpr size_t min_object_bound = min_head + sizeof("false")
    + sizeof(",\"rolloutPercentage\":") + 8
    + sizeof(",\"segments\":[]}") - 1 + 1;
constexpr size_t frame_slack = 8;
static_assert(min_object_bound == 74, "the shortest object's bound");
static_assert(2 * min_object_bound >= json_copy_slack + 1,
              "an object's copy stays inside the bound");
static_assert(3 + (min_object_bound - min_head - 5) + min_object_bound
              + frame_slack >= json_copy_slack,
              "a piece's copy stays inside the bound");

/* Every flag's named users into the project's index; the flags keep
 * their counts only. */
/* fl_project_s::hot, hot_segs and json from the loaded flags (the file
 * is at most FL_MAX_FLAGS_FILE_SIZE bytes, so every offset fits 32 bits) */
void Loader::build_hot()
{
    /* one slot per distinct trait name the segments' rules read */
    std::unordered_map<std::string, uint32_t> slots;
    for (Segment &s : p_.segments) {
        for (Rule &r : s.rules) {
            if (r.user_id) {
                continue;
            }
            auto it = slots.emplace(r.trait,
                                    static_cast<uint32_t>(slots.size()));
            r.slot = it.first->second;
        }
    }

    size_t nsegs = 0, bytes = 0;
    for (const Flag &f : p_.flags) {
        nsegs += f.has_rules ? 0 : f.segments.size();
        bytes += f.json_head_on.size() + f.json_head_off.size()
                 + 2 * f.json_rest.size();
    }
    p_.hot.assign(p_.flags.size(), FlagHot{});
    p_.json_pick.assign(2 * p_.flags.size(), JsonPick{});
    p_.hot_segs.clear();
    p_.hot_segs.reserve(nsegs);
    p_.json.clear();
    p_.json.reserve(bytes + json_copy_slack);

    for (size_t i = 0; i < p_.flags.size(); i++) {
        const Flag &f = p_.flags[i];
        FlagHot &h = p_.hot[i];

        h.prefix_h = f.bucket_prefix.h;
        h.prefix_total = static_cast<uint32_t>(f.bucket_prefix.total);
        h.prefix_ntail = static_cast<uint8_t>(f.bucket_prefix.ntail);
        h.prefix_tail = 0;
        for (size_t k = 0; k < f.bucket_prefix.ntail; k++) {
            h.prefix_tail |= static_cast<uint32_t>(f.bucket_prefix.tail[k])
                             << (8 * k);
        }
        h.rollout_milli = f.rollout_milli;
        h.enabled = f.enabled;
        h.simple = !f.has_rules && f.targets.empty() && f.stickiness.empty();

        h.seg_at = static_cast<uint32_t>(p_.hot_segs.size());
        if (!f.has_rules) {
            p_.hot_segs.insert(p_.hot_segs.end(), f.segments.begin(),
                               f.segments.end());
            h.nsegs = static_cast<uint32_t>(f.segments.size());
            h.seg_bits = h.nsegs != 0;
            for (uint32_t s : f.segments) {
                if (s >= 64) {
                    h.seg_bits = 0;
                    h.seg_mask = 0;
                    break;
                }
                h.seg_mask |= uint64_t(1) << s;
            }
        }

        /* the whole object with the configured percentage, on then
         * off, each where fl_project_s::json_pick says */
        JsonPick &on = p_.json_pick[2 * i + 1];
        JsonPick &off = p_.json_pick[2 * i];
        on.at = static_cast<uint32_t>(p_.json.size());
        p_.json += f.json_head_on;
        p_.json += f.json_rest;
        on.len = static_cast<uint32_t>(p_.json.size() - on.at);
        off.at = static_cast<uint32_t>(p_.json.size());
        p_.json += f.json_head_off;
        p_.json += f.json_rest;
        off.len = static_cast<uint32_t>(p_.json.size() - off.at);
    }
    p_.json.append(json_copy_slack, '\0');
    build_frame();
    build_lanes();
}

/* fl_project_s::json_frame and frame_pick from the loaded flags: each
 * flag's object without its value, the piece after flag i's value
 * running to the next flag's value. */
void Loader::build_frame()
{
    size_t n = p_.flags.size();
    size_t bytes = 0;
    for (const Flag &f : p_.flags) {
        bytes += f.json_head.size() + f.json_rest.size() + 1;
    }
    p_.json_frame.clear();
    p_.json_frame.reserve(bytes + json_copy_slack);
    p_.frame_pick.assign(n, JsonPick{});

    for (size_t i = 0; i < n; i++) {
        const Flag &f = p_.flags[i];
        if (i == 0) {
            p_.json_frame += f.json_head;
        }
        JsonPick &k = p_.frame_pick[i];
        k.at = static_cast<uint32_t>(p_.json_frame.size());
        p_.json_frame += f.json_rest;
        if (i + 1 < n) {
            p_.json_frame += ',';
            p_.json_frame += p_.flags[i + 1].json_head;
        }
        k.len = static_cast<uint32_t>(p_.json_frame.size() - k.at);
    }
    p_.json_frame.append(json_copy_slack, '\0');
}

/* fl::LaneGroup's arrays from the FlagHot just built. */
void Loader::build_lanes()
{
    size_t n = p_.flags.size();

    p_.lane_h.clear();
    p_.lane_wait.clear();
    p_.lane_total.clear();
    p_.lane_groups.clear();
    p_.lane_chunk.assign(1, 0);
    /* whole words: fl::lane_values() reads 64 at a time */
    p_.lane_slot.assign((n + 63) / 64 * 64, lane_none);

    for (size_t c = 0; c * lane_chunk_flags < n; c++) {
        size_t end = std::min(n, (c + 1) * lane_chunk_flags);
        size_t first = p_.lane_h.size();

        for (uint8_t a = 0; a < 4; a++) {
            LaneGroup g{static_cast<uint32_t>(p_.lane_h.size()), 0, a};

            for (size_t i = c * lane_chunk_flags; i < end; i++) {
                const FlagHot &h = p_.hot[i];
                if (!h.simple || !h.enabled || h.prefix_ntail != a
                    || h.rollout_milli == 0 || h.rollout_milli >= FL_MILLI_MAX)
                {
                    continue;
                }
                p_.lane_slot[i] = static_cast<uint16_t>(p_.lane_h.size()
                                                        - first);
                p_.lane_h.push_back(h.prefix_h);
                p_.lane_wait.push_back(h.prefix_tail);
                p_.lane_total.push_back(h.prefix_total);
                g.count++;
            }
            if (g.count == 0) {
                continue;
            }
            while (g.count % 8 != 0) {
                p_.lane_h.push_back(0);
                p_.lane_wait.push_back(0);
                p_.lane_total.push_back(0);
                g.count++;
            }
            p_.lane_groups.push_back(g);
        }
        p_.lane_chunk.push_back(static_cast<uint32_t>(p_.lane_groups.size()));
    }

    size_t words = (n + 63) / 64;
    p_.val_seg.assign(words * 64, 0);
    p_.val_fast.assign(words, 0);
    p_.val_enabled.assign(words, 0);
    p_.val_gated.assign(words, 0);
    p_.val_segs = 0;
    p_.val_rollout.assign(words * 64, 0);
    for (size_t i = 0; i < n; i++) {
        p_.val_rollout[i] = p_.hot[i].rollout_milli;
    }

    /* the answer's copies of the frame's pieces (all but the last, which
     * is copied by length): the width of fewest instructions, a 32-byte
     * load and store a vector for every flag, and about 40 for each piece
     * longer than the width (put_piece_apart()'s) */
    static const uint32_t widths[] = {64, 96, 128};
    size_t longer[3] = {0, 0, 0};   /* the pieces longer than each width */
    for (size_t i = 0; i + 1 < n; i++) {
        for (size_t w = 0; w < 3; w++) {
            longer[w] += p_.frame_pick[i].len > widths[w];
        }
    }
    p_.json_long.assign(words, 0);
    size_t best = SIZE_MAX;
    for (size_t w = 0; w < 3; w++) {
        size_t cost = n * (widths[w] / 32) * 2 + 40 * longer[w];
        if (cost < best) {
            best = cost;
            p_.json_width = widths[w];
        }
    }
    /* A copy writes up to json_width bytes from its start, which what
     * follows overwrites; the answer's bound has room for that near its
     * end (object_bound(), frame_slack; t/unit/test_answer.c guards the
     * bytes past the bound). */
    static_assert(json_copy_slack >= 128, "the widest copy reads past");
    for (size_t i = 0; i + 1 < n; i++) {
        if (p_.frame_pick[i].len > p_.json_width) {
            p_.json_long[i / 64] |= uint64_t(1) << (i % 64);
        }
    }

    /* per segment of the first 64: the chance that no enabled fast flag
     * naming it is inside its configured percentage (then a lazy answer
     * does not evaluate it), and the flags a lazy answer checks */
    double skip[64], checks = 0;
    std::fill(skip, skip + 64, 1.0);

    for (size_t i = 0; i < n; i++) {
        const FlagHot &h = p_.hot[i];
        uint64_t bit = uint64_t(1) << (i % 64);

        if (h.enabled) {
            p_.val_enabled[i / 64] |= bit;
        }
        if (h.simple && (h.nsegs == 0 || h.seg_bits)) {
            p_.val_fast[i / 64] |= bit;
            p_.val_seg[i] = h.seg_mask;
            p_.val_segs |= h.seg_mask;
            if (h.seg_mask != 0) {
                p_.val_gated[i / 64] |= bit;
            }
            if (h.seg_mask != 0 && h.enabled) {
                double in = h.rollout_milli >= FL_MILLI_MAX
                            ? 1.0 : h.rollout_milli / double(FL_MILLI_MAX);
                checks += in;
                for (uint64_t m = h.seg_mask; m != 0; m &= m - 1) {
                    skip[__builtin_ctzll(m)] *= 1.0 - in;
                }
            }
        }
    }

    /* Lazy where it is expected to cost less, by the configured
     * percentages (ramps, rollbacks and overrides only change which is
     * cheaper, never the answer): a segment about 80 instructions and
     * 120 a rule (250 more a regular expression), a lazy answer's check
     * of a flag inside its percentage about 10 (docs/evaluation.md). */
    double first = 0, lazy = 10 * checks;
    for (uint64_t m = p_.val_segs; m != 0; m &= m - 1) {
        unsigned si = static_cast<unsigned>(__builtin_ctzll(m));
        double cost = 80;
        for (const Rule &r : p_.segments[si].rules) {
            cost += r.op == Op::regex ? 370 : 120;
        }
        first += cost;
        lazy += cost * (1.0 - skip[si]);
    }
    p_.val_lazy = lazy < first;
}

void Loader::index_named_users()
{
    std::unordered_map<std::string_view, std::vector<uint32_t>> by_id;
    size_t total = 0;

    for (size_t i = 0; i < p_.flags.size(); i++) {
        const NamedUsers &t = p_.flags[i].targets;
        total += t.entries.size();
        for (const NamedUsers::Entry &e : t.entries) {
            by_id[std::string_view(t.bytes.data() + e.offset, e.len)]
                .push_back(static_cast<uint32_t>(i) << 1 | (e.on ? 1u : 0u));
        }
    }
    if (by_id.empty()) {
        return;
    }

    NamedIndex &x = p_.named;
    size_t nslots = 16;
    while (nslots < by_id.size() * 2) {
        nslots *= 2;
    }
    x.slots.assign(nslots, NamedIndex::Slot{0, 0});
    x.ids.reserve(by_id.size());
    x.marks.reserve(total);
    for (const auto &kv : by_id) {
        NamedIndex::Id id;
        id.offset = static_cast<uint32_t>(x.bytes.size());
        id.len = static_cast<uint32_t>(kv.first.size());
        id.first = static_cast<uint32_t>(x.marks.size());
        id.count = static_cast<uint32_t>(kv.second.size());
        x.bytes.append(kv.first.data(), kv.first.size());
        /* flags were visited in order: the marks are sorted */
        x.marks.insert(x.marks.end(), kv.second.begin(), kv.second.end());
        x.ids.push_back(id);

        uint64_t h = named_hash(kv.first.data(), kv.first.size());
        size_t mask = nslots - 1;
        size_t i = static_cast<size_t>(h) & mask;
        while (x.slots[i].id != 0) {
            i = (i + 1) & mask;
        }
        x.slots[i].tag = static_cast<uint32_t>(h >> 32);
        x.slots[i].id = static_cast<uint32_t>(x.ids.size());
    }

    for (Flag &f : p_.flags) {
        std::string().swap(f.targets.bytes);
        std::vector<NamedUsers::Entry>().swap(f.targets.entries);
    }
}

bool Loader::load_flag(const jval &v, size_t index, Flag &f)
{
    std::string where = "flags[" + std::to_string(index) + "]: ";

    if (v.kind != J_OBJECT) {
        return fail(where + "not an object");
    }

    std::string why;
    const jval *name = need(v, "name", K_STRING, "must be a string", why);
    if (name == nullptr) {
        return fail(where + why);
    }
    if (!valid_flag_name(str(*name))) {
        return fail(where + "\"name\" must match [A-Za-z0-9_.:-]{1,128}");
    }
    f.name = str(*name);
    where = "flag " + quoted(f.name) + ": ";
    warn_unknown(v, {"name", "enabled", "rolloutPercentage", "segments",
                     "rules", "targets", "stickiness", "rollback", "ramp"},
                 where);

    const jval *en = need(v, "enabled", K_BOOL, "must be a boolean", why);
    if (en == nullptr) {
        return fail(where + why);
    }
    f.enabled = (en->kind == J_TRUE);

    if (!load_percent(get(v, "rolloutPercentage"), f.rollout_milli, why)) {
        return fail(where + why);
    }

    const jval *rules = get(v, "rules");
    if (rules != nullptr && get(v, "segments") != nullptr) {
        return fail(where + "\"rules\" and \"segments\" cannot both be given"
                    " (a rule names its own segments)");
    }

    if (const jval *segs = get(v, "segments")) {
        if (!load_segment_list(*segs, f.segments, why)) {
            return fail(where + why);
        }
    }

    if (rules != nullptr) {
        if (!load_rules(*rules, f, why, where)) {
            return fail(where + why);
        }
    }

    if (const jval *t = get(v, "targets")) {
        if (!load_targets(*t, f.targets, why, where)) {
            return fail(where + why);
        }
    }

    if (const jval *st = get(v, "stickiness")) {
        if (st->kind != J_STRING || st->len == 0
            || st->len > max_name_len)
        {
            return fail(where + "\"stickiness\" must be a non-empty string"
                        " of at most 128 bytes");
        }
        if (str(*st) != "userId") {
            f.stickiness = str(*st);
        }
    }

    f.rollback = fl_rollback_policy_t();
    if (const jval *rb = get(v, "rollback")) {
        if (!load_rollback(*rb, f.rollback, why, where)) {
            return fail(where + why);
        }
    }

    if (const jval *rd = get(v, "ramp")) {
        if (rd->kind != J_NULL) {
            if (!load_ramp(*rd, f.ramp, why, where)) {
                return fail(where + why);
            }
            f.has_ramp = true;
        }
    }

    finish_flag(f);
    return true;
}

/* The definition hash and the fixed JSON fragments of a loaded flag. */
void Loader::finish_flag(Flag &f)
{
    /* Canonical: only known fields, in a fixed order, with values as the
     * evaluation sees them (defaults filled in, numbers normalized, "in"
     * lists sorted, ignoreCase values folded), so key order, unknown
     * fields and equivalent spellings do not count as a change. */
    fl::DefHasher h;
    h.str("flag/1");
    h.str(f.name);
    h.u64(f.enabled);
    h.u64(f.rollout_milli);
    h.str(f.stickiness.empty() ? std::string_view("userId") : f.stickiness);
    h.u64(f.rollback.mode);
    h.u64(f.rollback.min_errors);
    h.u64(f.rollback.rate_milli);
    h.u64(f.rollback.window);
    if (f.rollback.min_sources != 0) {
        /* hashed only when given: the definitions of earlier files keep
         * their hashes, so their saved rollbacks still apply */
        h.str("minSources");
        h.u64(f.rollback.min_sources);
    }
    if (f.has_ramp) {
        /* hashed only when present: flags without one keep their hashes */
        const fl_ramp_def_t &r = f.ramp;
        h.str("ramp/1");
        h.u64(r.nstages);
        for (uint32_t k = 0; k < r.nstages; k++) {
            h.u64(r.stages[k].milli);
            h.u64(r.stages[k].hold);
            h.u64(r.stages[k].min_requests);
        }
        h.u64(r.start_at_ms);
        h.u64(r.max_extend);
        h.u64(r.on_insufficient);
        h.u64(r.alpha_ppm);
        h.u64(r.dispersion_milli);
        h.u64(r.tick);
    }
    auto segment = [&h, this](uint32_t si) {
        const Segment &s = p_.segments[si];
        h.str(s.name);
        h.u64(s.rules.size());
        for (const Rule &r : s.rules) {
            h.str(r.trait);
            h.u64(static_cast<uint64_t>(r.op));
            h.u64(r.ignore_case);
            h.str(r.value);
            h.u64(r.values.size());
            for (const std::string &x : r.values) {
                h.str(x);
            }
            h.u64(r.number.neg);
            h.u64(static_cast<uint64_t>(r.number.exp));
            h.str(r.number.digits);
        }
    };
    h.u64(f.segments.size());
    for (uint32_t si : f.segments) {
        segment(si);
    }
    if (f.has_rules) {
        /* hashed only when present, as the ramp: a flag without rules or
         * targets keeps its hash */
        h.str("rules/1");
        h.u64(f.rules.size());
        for (const TargetingRule &r : f.rules) {
            h.u64(r.rollout_milli);
            h.u64(r.segments.size());
            for (uint32_t si : r.segments) {
                segment(si);
            }
        }
    }
    if (!f.targets.empty()) {
        /* the entries are sorted by id when loaded */
        h.str("targets/1");
        h.u64(f.targets.entries.size());
        for (const NamedUsers::Entry &e : f.targets.entries) {
            h.str(f.targets.bytes.data() + e.offset, e.len);
            h.u64(e.on);
        }
    }
    f.def_hash = h.final();

    append_json_string(f.json_name, f.name);
    f.json_head = "{\"name\":" + f.json_name;
    f.json_head += ",\"enabled\":";
    f.json_tail = ",\"segments\":[";
    for (size_t k = 0; k < f.segments.size(); k++) {
        if (k > 0) {
            f.json_tail += ',';
        }
        append_json_string(f.json_tail, p_.segments[f.segments[k]].name);
    }
    f.json_tail += "]}";

    /* The whole object but for "enabled", for the common case where the
     * effective percentage is the configured one. */
    char milli[16];
    f.json_rest = ",\"rolloutPercentage\":";
    f.json_rest.append(milli, fl_json_milli(f.rollout_milli, milli));
    f.json_rest += f.json_tail;
    f.json_head_on = f.json_head + "true";
    f.json_head_off = f.json_head + "false";

    f.bucket_prefix = Murmur3(0);
    f.bucket_prefix.update(f.name.data(), f.name.size());
    f.bucket_prefix.update(":", 1);
}

bool Loader::load(const char *data, size_t len)
{
    const jval *doc = nullptr;

    if (!parse_json(data, len, &doc)) {
        return false;
    }
    const jval &root = *doc;
    if (root.kind != J_OBJECT) {
        return fail("the top level must be an object");
    }
    warn_unknown(root, {"flags", "segments"}, "");

    std::string why;
    const jval *flags = need(root, "flags", K_ARRAY, "must be an array", why);
    if (flags == nullptr) {
        return fail(why);
    }

    if (!load_segments(get(root, "segments"))) {
        return false;
    }

    p_.flags.resize(flags->count);
    std::unordered_set<std::string_view> seen;
    size_t i = 0;
    for (const jval &fv : children(*flags)) {
        Flag &f = p_.flags[i];
        if (!load_flag(fv, i++, f)) {
            return false;
        }
        if (!seen.insert(str(*get(fv, "name"))).second) {
            return fail("flag " + quoted(f.name) + ": duplicate flag name");
        }
    }

    index_named_users();

    /* p_.flags no longer changes: the views into its names stay valid. */
    p_.by_name.reserve(p_.flags.size());
    size_t bound = sizeof("{\"flags\":[]}");
    for (size_t i = 0; i < p_.flags.size(); i++) {
        const Flag &f = p_.flags[i];
        p_.by_name.emplace(f.name, i);
        bound += object_bound(f);
    }
    /* and room for the copies of the frame's pieces past the text */
    p_.json_bound = bound + (p_.flags.empty() ? 0 : frame_slack);
    build_hot();

    if (warnings_dropped_ > 0) {
        p_.warnings.push_back(source_ + ": and "
                              + std::to_string(warnings_dropped_)
                              + " more unknown fields ignored");
    }

    if (any_regex_) {
        p_.match_data.reset(pcre2_match_data_create(1, nullptr));
        p_.match_ctx.reset(pcre2_match_context_create(nullptr));
        if (!p_.match_data || !p_.match_ctx) {
            status = FL_ERR_NOMEM;
            return fail("out of memory");
        }
        pcre2_set_match_limit(p_.match_ctx.get(), regex_match_limit);
    }

    status = FL_OK;
    return true;
}

struct FdClose {
    int fd;
    ~FdClose() { if (fd >= 0) { ::close(fd); } }
};

/*
 * The whole file into data.  O_NONBLOCK so that a FIFO named as a flags
 * file cannot hang nginx -t waiting for a writer; fstat before any read,
 * so that only a regular file of at most FL_MAX_FLAGS_FILE_SIZE bytes is
 * read (/dev/zero is refused without reading a byte).  A file that grows
 * after the fstat is still cut off at the cap.
 */
fl_status_t read_flags_file(const char *path, const std::string &source,
    std::string &data, char *err, size_t err_len)
{
    FdClose f{::open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
    if (f.fd < 0) {
        set_error(err, err_len, source + ": cannot open: " + std::strerror(errno));
        return FL_ERR_IO;
    }

    struct stat st;
    if (::fstat(f.fd, &st) != 0) {
        set_error(err, err_len, source + ": cannot stat: " + std::strerror(errno));
        return FL_ERR_IO;
    }
    if (!S_ISREG(st.st_mode)) {
        set_error(err, err_len, source + ": not a regular file");
        return FL_ERR_IO;
    }

    const std::string too_large = source + ": larger than "
                                  + std::to_string(FL_MAX_FLAGS_FILE_SIZE)
                                  + " bytes";
    if (st.st_size > static_cast<off_t>(FL_MAX_FLAGS_FILE_SIZE)) {
        set_error(err, err_len, too_large);
        return FL_ERR_IO;
    }

    data.resize(static_cast<size_t>(st.st_size) + 1);
    size_t have = 0;
    for ( ;; ) {
        if (have == data.size()) {
            if (have > FL_MAX_FLAGS_FILE_SIZE) {
                set_error(err, err_len, too_large);
                return FL_ERR_IO;
            }
            data.resize(std::min<size_t>(have * 2 + 4096,
                                         FL_MAX_FLAGS_FILE_SIZE + 1));
        }
        ssize_t n = ::read(f.fd, &data[have], data.size() - have);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            set_error(err, err_len, source + ": cannot read: " + std::strerror(errno));
            return FL_ERR_IO;
        }
        if (n == 0) {
            break;
        }
        have += static_cast<size_t>(n);
    }
    if (have > FL_MAX_FLAGS_FILE_SIZE) {
        set_error(err, err_len, too_large);
        return FL_ERR_IO;
    }
    data.resize(have);
    return FL_OK;
}

fl_status_t load_buffer(const char *data, size_t len,
    const std::string &source, fl_project_t **out, char *err, size_t err_len)
{
    std::unique_ptr<fl_project_s> p(new fl_project_s);
    Loader loader(source, *p);

    if (!loader.load(data, len)) {
        set_error(err, err_len, loader.error);
        return loader.status == FL_OK ? FL_ERR_INVALID : loader.status;
    }

    *out = p.release();
    return FL_OK;
}

/* Runs a load; no exception reaches the C caller. */
template <class F>
fl_status_t guarded_load(char *err, size_t err_len, F load) noexcept
{
    try {
        return load();
    } catch (const std::bad_alloc &) {
        set_error(err, err_len, "out of memory");
        return FL_ERR_NOMEM;
    } catch (...) {
        set_error(err, err_len, "internal error while loading flags");
        return FL_ERR_INTERNAL;
    }
}

} // namespace

} // namespace fl


extern "C" {

fl_status_t fl_project_load_buffer(const char *data, size_t len,
    const char *source_name, fl_project_t **out, char *err, size_t err_len)
    noexcept
{
    if (out == nullptr) {
        return FL_ERR_INTERNAL;
    }
    *out = nullptr;

    return fl::guarded_load(err, err_len, [&] {
        std::string source = source_name ? source_name : "(buffer)";
        return fl::load_buffer(data ? data : "", data ? len : 0, source, out,
                               err, err_len);
    });
}

fl_status_t fl_project_load(const char *path, fl_project_t **out, char *err,
    size_t err_len) noexcept
{
    if (out == nullptr || path == nullptr) {
        return FL_ERR_INTERNAL;
    }
    *out = nullptr;

    return fl::guarded_load(err, err_len, [&] {
        std::string source(path);
        std::string data;
        fl_status_t rc = fl::read_flags_file(path, source, data, err, err_len);
        if (rc != FL_OK) {
            return rc;
        }

        return fl::load_buffer(data.data(), data.size(), source, out, err,
                               err_len);
    });
}

void fl_project_free(fl_project_t *p) noexcept
{
    delete p;
}

size_t fl_project_flag_count(const fl_project_t *p) noexcept
{
    return p ? p->flags.size() : 0;
}

int fl_project_flag_info(const fl_project_t *p, size_t i,
    fl_flag_info_t *out) noexcept
{
    if (p == nullptr || out == nullptr || i >= p->flags.size()) {
        return -1;
    }
    const fl::Flag &f = p->flags[i];

    out->name = f.name.c_str();
    out->name_len = f.name.size();
    out->enabled = f.enabled;
    out->rollout_milli = f.rollout_milli;
    out->nsegments = f.segments.size();
    out->def_hash = f.def_hash;
    out->rollback = f.rollback;
    return 0;
}

const fl_ramp_def_t *fl_project_flag_ramp(const fl_project_t *p, size_t i)
    noexcept
{
    if (p == nullptr || i >= p->flags.size() || !p->flags[i].has_ramp) {
        return nullptr;
    }
    return &p->flags[i].ramp;
}

const char *fl_project_flag_segment(const fl_project_t *p, size_t i,
    size_t j, size_t *len) noexcept
{
    if (p == nullptr || i >= p->flags.size()
        || j >= p->flags[i].segments.size())
    {
        return nullptr;
    }
    const std::string &s = p->segments[p->flags[i].segments[j]].name;
    if (len) {
        *len = s.size();
    }
    return s.c_str();
}

size_t fl_project_flag_targeting_json_bound(const fl_project_t *p, size_t i)
    noexcept
{
    if (p == nullptr || i >= p->flags.size()) {
        return 0;
    }
    const fl::Flag &f = p->flags[i];
    size_t n = 0;
    if (f.has_rules) {
        n += sizeof(",\"rules\":[]");
        for (const fl::TargetingRule &r : f.rules) {
            n += sizeof("{\"segments\":[],\"rolloutPercentage\":100.000},");
            for (uint32_t si : r.segments) {
                n += fl::str_bound(p->segments[si].name.size()) + 1;
            }
        }
    }
    if (!f.targets.empty()) {
        n += sizeof(",\"targets\":{\"on\":4294967295,\"off\":4294967295}");
    }
    return n;
}

size_t fl_project_flag_targeting_json(const fl_project_t *p, size_t i,
    char *buf) noexcept
{
    if (p == nullptr || i >= p->flags.size()) {
        return 0;
    }
    const fl::Flag &f = p->flags[i];
    char *o = buf;
    if (f.has_rules) {
        o = fl::put_lit(o, ",\"rules\":[");
        for (size_t k = 0; k < f.rules.size(); k++) {
            const fl::TargetingRule &r = f.rules[k];
            if (k > 0) {
                *o++ = ',';
            }
            o = fl::put_lit(o, "{\"segments\":[");
            for (size_t j = 0; j < r.segments.size(); j++) {
                const std::string &name = p->segments[r.segments[j]].name;
                if (j > 0) {
                    *o++ = ',';
                }
                o = fl::put_str(o, name.data(), name.size());
            }
            o = fl::put_lit(o, "],\"rolloutPercentage\":");
            o += fl_json_milli(r.rollout_milli, o);
            *o++ = '}';
        }
        *o++ = ']';
    }
    if (!f.targets.empty()) {
        o = fl::put_lit(o, ",\"targets\":{\"on\":");
        o += fl::put_u64(f.targets.on, o);
        o = fl::put_lit(o, ",\"off\":");
        o += fl::put_u64(f.targets.off, o);
        *o++ = '}';
    }
    return static_cast<size_t>(o - buf);
}

size_t fl_project_warning_count(const fl_project_t *p) noexcept
{
    return p ? p->warnings.size() : 0;
}

const char *fl_project_warning(const fl_project_t *p, size_t i) noexcept
{
    if (p == nullptr || i >= p->warnings.size()) {
        return nullptr;
    }
    return p->warnings[i].c_str();
}

long fl_project_find_flag(const fl_project_t *p, const char *name,
    size_t len) noexcept
{
    if (p == nullptr || (name == nullptr && len != 0)) {
        return -1;
    }
    /* std::hash<string_view> and find() do not allocate or throw in
     * practice, but the C boundary is guarded anyway. */
    try {
        auto it = p->by_name.find(std::string_view(name ? name : "", len));
        return it == p->by_name.end() ? -1 : static_cast<long>(it->second);
    } catch (...) {
        return -1;
    }
}

} // extern "C"
