/*
 * fuzz_evaluate.cc - fl_parse_query + fl_evaluate + fl_flags_json (and
 * fl_flags_answer, GET /flags' one pass) against a fixed flags project
 * that uses every operator.
 *
 * Input: a raw query string (max 64 traits).  If it contains a NUL byte,
 * the bytes after the first NUL set the effective percentages: two bytes
 * per flag, big-endian, scaled to 0..100000 (flags without bytes keep the
 * configured percentage); without a NUL the configured ones are used.
 *
 * The project is generated from the table below, loaded once on the first
 * call and never freed.  The same table drives a reference evaluator
 * written here from docs/evaluation.md (ASCII ignoreCase, exact decimals, semver via
 * fl_semver_cmp, regex via PCRE2 without JIT), and every result of
 * fl_evaluate must agree with it wherever the reference can decide.
 */

#include "fuzz_common.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <string>
#include <vector>

namespace {

/* ------------------------------------------------------------ the project */

struct RuleDef {
    const char               *trait;
    const char               *op;
    bool                      ic;
    const char               *value;        /* JSON text of "value", or NULL */
    std::vector<std::string>  values;       /* in / not_in */
};

struct SegDef {
    const char            *name;
    std::vector<RuleDef>   rules;
};

struct FlagDef {
    const char                *name;
    bool                       enabled;
    const char                *rollout;     /* JSON number text */
    std::vector<const char *>  segments;
    const char                *stickiness;  /* NULL: userId */
};

const std::vector<SegDef> &segs()
{
    static const std::vector<SegDef> s = {
        {"eq",          {{"plan", "eq", true, "\"Pro\"", {}}}},
        {"eq_cs",       {{"plan", "eq", false, "\"pro\"", {}}}},
        {"neq",         {{"plan", "neq", false, "\"free\"", {}}}},
        {"in",          {{"country", "in", true, nullptr, {"de", "AT", "ch", "De"}}}},
        {"not_in",      {{"country", "not_in", false, nullptr, {"us", "gb", ""}}}},
        {"contains",    {{"email", "contains", true, "\"@Example.\"", {}}}},
        {"starts_with", {{"email", "starts_with", false, "\"admin\"", {}}}},
        {"ends_with",   {{"email", "ends_with", true, "\".ORG\"", {}}}},
        {"regex",       {{"email", "regex", true,
                          "\"^[a-z0-9._%+-]+@([a-z0-9-]+\\\\.)+[a-z]{2,}$\"", {}}}},
        {"regex_utf8",  {{"name", "regex", false, "\"^\\\\p{Lu}\\\\w*\\u00e9\"", {}}}},
        {"regex_slow",  {{"ua", "regex", false, "\"(a+)+b\"", {}}}},
        {"gt",          {{"age", "gt", false, "17", {}}}},
        {"gte",         {{"score", "gte", false, "\"10.5\"", {}}}},
        {"lt",          {{"age", "lt", false, "1e2", {}}}},
        {"lte",         {{"score", "lte", false, "-0.001", {}}}},
        {"semver_eq",   {{"version", "semver_eq", false, "\"1.2.3\"", {}}}},
        {"semver_gt",   {{"version", "semver_gt", false, "\"v1.10.0-rc.1\"", {}}}},
        {"semver_lt",   {{"version", "semver_lt", false, "\"2\"", {}}}},
        {"exists",      {{"beta", "exists", false, nullptr, {}}}},
        {"not_exists",  {{"blocked", "not_exists", false, nullptr, {}}}},
        {"multi",       {{"plan", "in", true, nullptr, {"pro", "enterprise"}},
                         {"age", "gte", false, "18", {}},
                         {"country", "neq", true, "\"US\"", {}}}},
        {"everyone",    {}},
    };
    return s;
}

const std::vector<FlagDef> &flags()
{
    static const std::vector<FlagDef> f = [] {
        std::vector<FlagDef> v;
        static std::vector<std::string> names;
        names.reserve(64);
        /* one flag per single-rule segment, always rolled out */
        for (const SegDef &s : segs()) {
            names.push_back(std::string("op.") + s.name);
            v.push_back({names.back().c_str(), true, "100", {s.name}, nullptr});
        }
        v.push_back({"any-of", true, "100", {"eq_cs", "semver_gt", "exists"}, nullptr});
        v.push_back({"by-user", true, "33.333", {}, nullptr});
        v.push_back({"by-account", true, "50", {}, "accountId"});
        v.push_back({"by-company", true, "25", {"multi", "regex"}, "company"});
        v.push_back({"killed", false, "100", {"everyone"}, nullptr});
        v.push_back({"zero", true, "0", {}, nullptr});
        v.push_back({"tiny", true, "0.001", {}, "userId"});
        return v;
    }();
    return f;
}

std::string json_str(const std::string &s)
{
    std::string o = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') o.push_back('\\');
        o.push_back(c);
    }
    return o + "\"";
}

std::string project_json()
{
    std::string j = "{\"flags\":[\n";
    for (size_t i = 0; i < flags().size(); i++) {
        const FlagDef &f = flags()[i];
        j += i ? ",\n" : "";
        j += "{\"name\":" + json_str(f.name) + ",\"enabled\":"
             + (f.enabled ? "true" : "false") + ",\"rolloutPercentage\":"
             + f.rollout + ",\"segments\":[";
        for (size_t k = 0; k < f.segments.size(); k++) {
            j += (k ? "," : "") + json_str(f.segments[k]);
        }
        j += "]";
        if (f.stickiness) {
            j += ",\"stickiness\":" + json_str(f.stickiness);
        }
        j += "}";
    }
    j += "],\n\"segments\":{\n";
    for (size_t i = 0; i < segs().size(); i++) {
        const SegDef &s = segs()[i];
        j += (i ? ",\n" : "") + json_str(s.name) + ":{\"rules\":[";
        for (size_t k = 0; k < s.rules.size(); k++) {
            const RuleDef &r = s.rules[k];
            j += (k ? "," : "");
            j += "{\"trait\":" + json_str(r.trait) + ",\"op\":" + json_str(r.op);
            if (r.ic) j += ",\"ignoreCase\":true";
            if (r.value) j += std::string(",\"value\":") + r.value;
            if (std::string(r.op) == "in" || std::string(r.op) == "not_in") {
                j += ",\"values\":[";
                for (size_t m = 0; m < r.values.size(); m++) {
                    j += (m ? "," : "") + json_str(r.values[m]);
                }
                j += "]";
            }
            j += "}";
        }
        j += "]}";
    }
    j += "}}\n";
    return j;
}

const fl_project_t *project()
{
    static const fl_project_t *p = [] {
        std::string j = project_json();
        fl_project_t *q = nullptr;
        char err[512];
        if (fl_project_load_buffer(j.data(), j.size(), "fuzz_evaluate", &q,
                                   err, sizeof(err)) != FL_OK)
        {
            std::fprintf(stderr, "cannot load the fixed project: %s\n%s", err,
                         j.c_str());
            std::abort();
        }
        if (fl_project_flag_count(q) != flags().size()) {
            std::abort();
        }
        return q;
    }();
    return p;
}

/* -------------------------------------------------- reference evaluator */

enum Tri { NO = 0, YES = 1, UNKNOWN = 2 };

unsigned char fold(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? static_cast<unsigned char>(c + 32) : c;
}

std::string folded(std::string s)
{
    for (char &c : s) c = static_cast<char>(fold(static_cast<unsigned char>(c)));
    return s;
}

/* JSON string literal of the table -> its text (only \\ and \u00e9 used) */
std::string unquote(const char *lit)
{
    std::string s(lit + 1, std::strlen(lit) - 2), o;
    for (size_t i = 0; i < s.size(); i++) {
        if (s[i] == '\\' && s[i + 1] == '\\') {
            o.push_back('\\');
            i++;
        } else if (s[i] == '\\' && s[i + 1] == 'u') {
            o += "\xc3\xa9";                    /* only \u00e9 appears */
            i += 5;
        } else {
            o.push_back(s[i]);
        }
    }
    return o;
}

/* Exact for -?(0|[1-9][0-9]{0,8})(\.[0-9]{1,6})?: the value in millionths. */
bool simple_number(const std::string &s, int64_t *out)
{
    size_t i = 0;
    bool neg = false;
    if (i < s.size() && s[i] == '-') { neg = true; i++; }
    size_t st = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') i++;
    size_t il = i - st;
    if (il == 0 || il > 9 || (il > 1 && s[st] == '0')) return false;
    int64_t v = std::stoll(s.substr(st, il)) * 1000000;
    if (i < s.size()) {
        if (s[i] != '.') return false;
        size_t fs = ++i;
        while (i < s.size() && s[i] >= '0' && s[i] <= '9') i++;
        size_t fl = i - fs;
        if (fl == 0 || fl > 6 || i != s.size()) return false;
        int64_t f = std::stoll(s.substr(fs, fl));
        for (size_t k = fl; k < 6; k++) f *= 10;
        v += f;
    }
    *out = neg ? -v : v;
    return true;
}

int64_t rule_number(const char *lit)
{
    std::string s = lit[0] == '"' ? unquote(lit) : lit;
    if (s == "1e2") return 100 * 1000000LL;
    int64_t v = 0;
    if (!simple_number(s, &v)) std::abort();
    return v;
}

Tri regex_ref(const RuleDef &r, const std::string &v)
{
    /* compiled once per rule; plain arrays, never freed */
    static const RuleDef *owner[16];
    static pcre2_code *cache[16];
    pcre2_code *re = nullptr;
    size_t slot = 0;
    for (; slot < 16 && owner[slot] != nullptr; slot++) {
        if (owner[slot] == &r) {
            re = cache[slot];
            break;
        }
    }
    if (re == nullptr) {
        std::string src = unquote(r.value);
        int code;
        PCRE2_SIZE off;
        re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(src.data()), src.size(),
                           PCRE2_UTF | PCRE2_MATCH_INVALID_UTF
                           | (r.ic ? PCRE2_CASELESS : 0), &code, &off, nullptr);
        if (re == nullptr || slot == 16) std::abort();
#ifndef FL_NO_PCRE2_JIT
        /* as the core does: the match limit then counts JIT's steps */
        (void) pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
#endif
        owner[slot] = &r;
        cache[slot] = re;
    }
    static pcre2_match_data *md = pcre2_match_data_create(1, nullptr);
    static pcre2_match_context *mc = [] {
        pcre2_match_context *c = pcre2_match_context_create(nullptr);
        pcre2_set_match_limit(c, 1000000);
        return c;
    }();
    /* the interpreter's answer, and JIT's where the core uses JIT: a
     * subject that reaches the match limit on either (JIT counts its steps
     * otherwise) has no answer the core must give */
    int rc = pcre2_match(re, reinterpret_cast<PCRE2_SPTR>(v.data()), v.size(),
                         0, PCRE2_NO_JIT, md, mc);
    int jrc = pcre2_match(re, reinterpret_cast<PCRE2_SPTR>(v.data()), v.size(),
                          0, 0, md, mc);
    if ((rc < 0 && rc != PCRE2_ERROR_NOMATCH)
        || (jrc < 0 && jrc != PCRE2_ERROR_NOMATCH))
    {
        return UNKNOWN;                 /* match limit etc. */
    }
    if (rc >= 0) return YES;
    return NO;
}

Tri rule_ref(const RuleDef &r, const fl_user_t *u)
{
    std::string op = r.op;
    const fl_trait_t *t = nullptr;
    for (size_t i = 0; u && i < u->ntraits; i++) {
        if (u->traits[i].name_len == std::strlen(r.trait)
            && std::memcmp(u->traits[i].name, r.trait, u->traits[i].name_len) == 0)
        {
            t = &u->traits[i];
        }
    }
    if (t == nullptr) {
        return op == "not_exists" || op == "neq" || op == "not_in" ? YES : NO;
    }
    std::string v(t->value ? t->value : "", t->value_len);
    std::string a = r.ic ? folded(v) : v;
    std::string b = r.value && r.value[0] == '"' ? unquote(r.value) : "";
    if (r.ic) b = folded(b);

    if (op == "exists") return YES;
    if (op == "not_exists") return NO;
    if (op == "eq") return a == b ? YES : NO;
    if (op == "neq") return a != b ? YES : NO;
    if (op == "in" || op == "not_in") {
        bool in = false;
        for (const std::string &x : r.values) {
            if ((r.ic ? folded(x) : x) == a) in = true;
        }
        return (in == (op == "in")) ? YES : NO;
    }
    if (op == "contains") return a.find(b) != std::string::npos ? YES : NO;
    if (op == "starts_with") return a.compare(0, b.size(), b) == 0 && a.size() >= b.size() ? YES : NO;
    if (op == "ends_with")
        return a.size() >= b.size() && a.compare(a.size() - b.size(), b.size(), b) == 0 ? YES : NO;
    if (op == "regex") return regex_ref(r, v);
    if (op == "gt" || op == "gte" || op == "lt" || op == "lte") {
        int64_t x;
        if (!simple_number(v, &x)) return UNKNOWN;
        int64_t y = rule_number(r.value);
        bool m = op == "gt" ? x > y : op == "gte" ? x >= y : op == "lt" ? x < y : x <= y;
        return m ? YES : NO;
    }
    if (op == "semver_eq" || op == "semver_gt" || op == "semver_lt") {
        std::string rv = unquote(r.value);
        int ok1 = 0, ok2 = 0, ok3 = 0;
        int c = fl_semver_cmp(v.data(), v.size(), rv.data(), rv.size(), &ok1);
        int d = fl_semver_cmp(rv.data(), rv.size(), v.data(), v.size(), &ok2);
        int e = fl_semver_cmp(v.data(), v.size(), v.data(), v.size(), &ok3);
        FUZZ_CHECK(ok1 == ok2 && ok1 == ok3, "fl_semver_cmp ok differs by order");
        if (!ok1) return NO;
        FUZZ_CHECK((c < 0) == (d > 0) && (c == 0) == (d == 0),
                   "fl_semver_cmp not antisymmetric: %s vs %s", v.c_str(), rv.c_str());
        FUZZ_CHECK(e == 0, "fl_semver_cmp(x, x) != 0 for %s", v.c_str());
        bool m = op == "semver_eq" ? c == 0 : op == "semver_gt" ? c > 0 : c < 0;
        return m ? YES : NO;
    }
    std::abort();
}

Tri segment_ref(const SegDef &s, const fl_user_t *u)
{
    Tri all = YES;
    for (const RuleDef &r : s.rules) {
        Tri m = rule_ref(r, u);
        if (m == NO) return NO;
        if (m == UNKNOWN) all = UNKNOWN;
    }
    return all;
}

const SegDef &seg_named(const char *n)
{
    for (const SegDef &s : segs()) {
        if (std::strcmp(s.name, n) == 0) return s;
    }
    std::abort();
}

bool rollout_ref(const FlagDef &f, uint32_t eff, const fl_user_t *u)
{
    if (eff >= FL_MILLI_MAX) return true;
    if (eff == 0 || u == nullptr) return false;
    const char *key = nullptr;
    size_t key_len = 0;
    if (f.stickiness == nullptr || std::strcmp(f.stickiness, "userId") == 0) {
        key = u->user_id;
        key_len = u->user_id_len;
    } else {
        const fl_trait_t *t = fl_user_trait(u, f.stickiness, std::strlen(f.stickiness));
        if (t) { key = t->value; key_len = t->value_len; }
    }
    if (key == nullptr || key_len == 0) return false;

    std::string s = std::string(f.name) + ":" + std::string(key, key_len);
    uint32_t b = fl_bucket(f.name, std::strlen(f.name), key, key_len);
    FUZZ_CHECK(b == fl_murmur3_32(s.data(), s.size(), 0) % FL_BUCKETS,
               "fl_bucket is not murmur3(name \":\" key) %% 100000");
    FUZZ_CHECK(b < FL_BUCKETS, "bucket %u", b);
    return b < eff;
}

/* ----------------------------------------------------------- the check */

void check(const fl_project_t *p, const fl_user_t *u, const fl_user_t *ref_u,
    const uint32_t *eff, const fl_detail_t *out)
{
    for (size_t i = 0; i < flags().size(); i++) {
        const FlagDef &f = flags()[i];
        fl_flag_info_t info;
        FUZZ_CHECK(fl_project_flag_info(p, i, &info) == 0, "info");
        uint32_t e = eff ? eff[i] : info.rollout_milli;

        FUZZ_CHECK(out[i].rollout_milli == e, "flag %s: rollout %u, expected %u",
                   f.name, out[i].rollout_milli, e);
        FUZZ_CHECK(out[i].enabled <= 1, "flag %s: enabled = %u", f.name,
                   out[i].enabled);

        Tri seg = f.segments.empty() ? YES : NO;
        for (const char *sn : f.segments) {
            Tri m = segment_ref(seg_named(sn), ref_u);
            if (m == YES) { seg = YES; break; }
            if (m == UNKNOWN) seg = UNKNOWN;
        }
        if (seg == UNKNOWN) {
            continue;
        }
        bool expect = f.enabled && seg == YES && rollout_ref(f, e, u);
        FUZZ_CHECK(out[i].enabled == expect,
                   "flag %s: enabled %u, the reference says %d "
                   "(segments %d, effective %u)", f.name, out[i].enabled,
                   expect, seg, e);
    }
}

/* GET /flags' answer in one pass, as the glue asks for it (the
 * percentages in force and a switch for every flag, none here), against
 * fl_flags_json() of the evaluation's results r (made with the same
 * percentages): the same bytes, the same value a flag in its bits, and
 * nothing written past the bound. */
void check_answer(const fl_project_t *p, const fl_user_t *u,
    const uint32_t *eff, const fl_detail_t *r)
{
    size_t n = flags().size(), bound = fl_flags_json_bound(p);
    std::vector<uint32_t> e(n);
    std::vector<uint8_t> sw(n, FL_SWITCH_NONE);
    std::vector<uint64_t> bits(FL_BIT_WORDS(n));
    std::vector<char> want(bound), got(bound + 64, '\x5a');

    for (size_t i = 0; i < n; i++) {
        fl_flag_info_t info;
        fl_project_flag_info(p, i, &info);
        e[i] = eff ? eff[i] : info.rollout_milli;
    }
    size_t wn = fl_flags_json(p, r, want.data());
    size_t gn = fl_flags_answer(p, u, e.data(), sw.data(), bits.data(),
                                got.data());
    FUZZ_CHECK(gn == wn && std::memcmp(got.data(), want.data(), wn) == 0,
               "fl_flags_answer: %.*s, fl_flags_json: %.*s",
               static_cast<int>(gn), got.data(), static_cast<int>(wn),
               want.data());
    for (size_t i = 0; i < n; i++) {
        FUZZ_CHECK(((bits[i / 64] >> (i % 64)) & 1) == r[i].enabled,
                   "fl_flags_answer: flag %zu's bit", i);
    }
    for (size_t k = bound; k < bound + 64; k++) {
        FUZZ_CHECK(got[k] == '\x5a', "fl_flags_answer wrote past its bound");
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const fl_project_t *p = project();
    size_t nflags = flags().size();

    const uint8_t *nul = static_cast<const uint8_t *>(std::memchr(data, 0, size));
    size_t qlen = nul ? static_cast<size_t>(nul - data) : size;

    std::vector<uint32_t> eff(nflags);
    const uint32_t *effp = nullptr;
    if (nul != nullptr) {
        const uint8_t *c = nul + 1;
        size_t clen = size - qlen - 1;
        for (size_t i = 0; i < nflags; i++) {
            fl_flag_info_t info;
            fl_project_flag_info(p, i, &info);
            if (2 * i + 1 < clen) {
                uint32_t v = static_cast<uint32_t>(c[2 * i]) << 8 | c[2 * i + 1];
                eff[i] = static_cast<uint32_t>(uint64_t(v) * FL_MILLI_MAX / 0xffff);
            } else {
                eff[i] = info.rollout_milli;
            }
        }
        effp = eff.data();
    }

    fuzz::Arena arena;
    fuzz::Exact q(data, qlen);
    fl_user_t u;
    char err[256];
    fl_status_t rc = fl_parse_query(q.p, qlen, 64, arena.handle(), &u, err,
                                    sizeof(err));
    FUZZ_CHECK(rc == FL_OK || rc == FL_ERR_QUERY, "fl_parse_query: %d",
               static_cast<int>(rc));
    if (rc != FL_OK) {
        return 0;
    }

    std::vector<fl_detail_t> out(nflags + 1), again(nflags + 1);
    out[nflags].enabled = 0x5a;                     /* must stay untouched */
    fl_evaluate_detail(p, &u, effp, NULL, out.data());
    FUZZ_CHECK(out[nflags].enabled == 0x5a, "fl_evaluate wrote past the end");
    check(p, &u, &u, effp, out.data());
    fuzz::check_flags_json(p, out.data());
    check_answer(p, &u, effp, out.data());

    /* the same again: the segment cache and the shared match data must
     * not carry anything over */
    fl_evaluate_detail(p, &u, effp, NULL, again.data());
    for (size_t i = 0; i < nflags; i++) {
        FUZZ_CHECK(out[i].enabled == again[i].enabled
                   && out[i].rollout_milli == again[i].rollout_milli,
                   "second evaluation differs for flag %zu", i);
    }

    /* nobody at all */
    fl_evaluate_detail(p, nullptr, effp, NULL, again.data());
    fl_user_t empty = { nullptr, 0, nullptr, 0 };
    check(p, nullptr, &empty, effp, again.data());
    fuzz::check_flags_json(p, again.data());
    check_answer(p, nullptr, effp, again.data());
    return 0;
}
