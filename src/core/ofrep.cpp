/*
 * ofrep.cpp - the OpenFeature Remote Evaluation Protocol (docs/ofrep.md):
 * the caller from a POST body's "context", the answers and errors.  The
 * reason per flag is decided in evaluate.cpp, beside the value; the ETag
 * of the bulk answer is etag.cpp's.
 *
 * Decisions (docs/ofrep.md has them all):
 *  - targetingKey is the userId; every other property of the context is a
 *    trait: a string as it is, a number as its JSON text, a boolean as
 *    "true" / "false"; null is an absent trait (or no targetingKey); an
 *    object or an array is INVALID_CONTEXT naming the property.
 *  - An empty body, {} and a null context are the empty context (an
 *    anonymous caller); a context that is not an object is INVALID_CONTEXT,
 *    a body that is not a JSON object is PARSE_ERROR.
 *  - The limits of GET /flags apply to the same things, so anything one
 *    endpoint accepts the other can express: a NUL byte, an empty trait
 *    name, a name over 128 bytes, a value over 1024, more than max_traits
 *    traits are INVALID_CONTEXT.
 *  - Duplicate properties: the last one wins, for its value and its
 *    checks (JSON.parse does the same); the error reported is the first in
 *    document order among the properties that are kept.
 *  - UTF-8 is checked strictly before yajl parses (utf8.hpp), as for the
 *    error reports.
 *
 * Memory: the tree and the traits come from the caller's allocator (the
 * request pool); nothing is freed individually.
 */

#include "flags_core.h"
#include "arena.hpp"
#include "control.hpp"
#include "json_reader.hpp"
#include "json_writer.hpp"
#include "project.hpp"
#include "text.hpp"
#include "utf8.hpp"

#include <algorithm>
#include <cstring>

namespace {

/* ------------------------------------------------------------ context */

struct Prop {
    const fl::jval  *v;
    size_t           pos;           /* document order */
};

bool prop_less(const Prop &a, const Prop &b)
{
    int c = fl::bytes_cmp(a.v->key, a.v->key_len, b.v->key, b.v->key_len);
    return c != 0 ? c < 0 : a.pos < b.pos;
}

bool has_nul(const char *s, size_t n)
{
    return n != 0 && std::memchr(s, '\0', n) != nullptr;
}

/* A property name for a message: at most 64 bytes of it, never half a
 * UTF-8 sequence (the body is well-formed UTF-8; the JSON writer escapes
 * the rest). */
int echo_len(const fl::jval *v)
{
    return static_cast<int>(fl::utf8_prefix(v->key, v->key_len, 64));
}

/* The checks of one kept property, in the order of docs/ofrep.md. */
fl_status_t check_prop(const fl::jval *v, char *err, size_t err_len)
{
    static const char tk[] = "targetingKey";

    if (v->key_len == sizeof(tk) - 1
        && std::memcmp(v->key, tk, sizeof(tk) - 1) == 0)
    {
        if (v->kind == fl::J_NULL) {
            return FL_OK;
        }
        if (v->kind != fl::J_STRING) {
            fl::set_err(err, err_len, "targetingKey must be a string");
            return FL_ERR_FIELD;
        }
        if (has_nul(v->str, v->len)) {
            fl::set_err(err, err_len, "targetingKey holds a NUL byte");
            return FL_ERR_FIELD;
        }
        if (v->len > FL_MAX_VALUE_LEN) {
            fl::set_err(err, err_len, "targetingKey is longer than %u bytes",
                        FL_MAX_VALUE_LEN);
            return FL_ERR_FIELD;
        }
        return FL_OK;
    }

    if (v->key_len == 0) {
        fl::set_err(err, err_len, "a context property has an empty name");
        return FL_ERR_FIELD;
    }
    if (has_nul(v->key, v->key_len)) {
        fl::set_err(err, err_len, "a context property name holds a NUL byte");
        return FL_ERR_FIELD;
    }
    if (v->key_len > FL_MAX_TRAIT_NAME_LEN) {
        fl::set_err(err, err_len,
                    "a context property name is longer than %u bytes",
                    FL_MAX_TRAIT_NAME_LEN);
        return FL_ERR_FIELD;
    }

    switch (v->kind) {
    case fl::J_OBJECT:
    case fl::J_ARRAY:
        fl::set_err(err, err_len,
                    "context property \"%.*s\" is an %s: only strings, "
                    "numbers, booleans and null are accepted",
                    echo_len(v), v->key,
                    v->kind == fl::J_OBJECT ? "object" : "array");
        return FL_ERR_FIELD;

    case fl::J_STRING:
        if (has_nul(v->str, v->len)) {
            fl::set_err(err, err_len,
                        "context property \"%.*s\" holds a NUL byte",
                        echo_len(v), v->key);
            return FL_ERR_FIELD;
        }
        /* fall through */
    case fl::J_NUMBER:
        if (v->len > FL_MAX_VALUE_LEN) {
            fl::set_err(err, err_len,
                        "context property \"%.*s\" is longer than %u bytes",
                        echo_len(v), v->key, FL_MAX_VALUE_LEN);
            return FL_ERR_FIELD;
        }
        return FL_OK;

    default:
        return FL_OK;
    }
}

fl_status_t parse_context(const char *body, size_t len, size_t max_traits,
    const fl_alloc_t *a, fl_user_t *out, char *err, size_t err_len)
{
    size_t i = 0;
    while (i < len && fl::json_space(static_cast<unsigned char>(body[i]))) {
        i++;
    }
    if (i == len) {
        return FL_OK;                   /* no body: the empty context */
    }

    fl::Utf8JsonCheck utf8{};
    size_t ok = utf8.feed(reinterpret_cast<const unsigned char *>(body), len);
    if (ok != len || utf8.error() != fl::Utf8JsonCheck::E_NONE) {
        utf8.message(err, err_len);
        return FL_ERR_JSON;
    }

    fl::jval *root = nullptr;
    fl_status_t rc = fl::jparse(body, len, a, FL_REPORT_MAX_DEPTH,
                                "request body", &root, err, err_len);
    if (rc != FL_OK) {
        return rc;
    }
    if (root->kind != fl::J_OBJECT) {
        fl::set_err(err, err_len, "request body must be a JSON object");
        return FL_ERR_JSON;
    }

    const fl::jval *ctx = fl::jmember(root, "context", 7);
    if (ctx == nullptr || ctx->kind == fl::J_NULL) {
        return FL_OK;
    }
    if (ctx->kind != fl::J_OBJECT) {
        fl::set_err(err, err_len, "context must be an object");
        return FL_ERR_FIELD;
    }
    if (ctx->count == 0) {
        return FL_OK;
    }

    Prop *props = fl::alloc_array<Prop>(a, ctx->count);
    if (props == nullptr) {
        fl::set_err(err, err_len, "out of memory");
        return FL_ERR_NOMEM;
    }

    size_t n = 0;
    for (const fl::jval *v = ctx->first; v != nullptr; v = v->next) {
        props[n] = Prop{v, n};
        n++;
    }

    /* by (name, position); then the last of each name is kept */
    std::sort(props, props + n, prop_less);

    size_t kept = 0;
    for (size_t k = 0; k < n; k++) {
        if (k + 1 < n
            && fl::bytes_cmp(props[k].v->key, props[k].v->key_len,
                             props[k + 1].v->key, props[k + 1].v->key_len)
               == 0)
        {
            continue;
        }
        props[kept++] = props[k];
    }

    /* the first error in document order */
    const fl::jval *bad = nullptr;
    size_t bad_pos = 0;
    char first[256];
    first[0] = '\0';

    for (size_t k = 0; k < kept; k++) {
        if (bad != nullptr && props[k].pos > bad_pos) {
            continue;
        }
        char msg[256];
        if (check_prop(props[k].v, msg, sizeof(msg)) != FL_OK) {
            bad = props[k].v;
            bad_pos = props[k].pos;
            std::memcpy(first, msg, sizeof(first));
        }
    }
    if (bad != nullptr) {
        fl::set_err(err, err_len, "%s", first);
        return FL_ERR_FIELD;
    }

    /* targetingKey out; null traits dropped; the order stays sorted */
    const char *user_id = nullptr;
    size_t user_id_len = 0;
    size_t ntraits = 0;

    for (size_t k = 0; k < kept; k++) {
        const fl::jval *v = props[k].v;

        if (v->key_len == 12 && std::memcmp(v->key, "targetingKey", 12) == 0) {
            if (v->kind == fl::J_STRING && v->len != 0) {
                user_id = v->str;
                user_id_len = v->len;
            }
            continue;
        }
        if (v->kind == fl::J_NULL) {
            continue;
        }
        props[ntraits++] = props[k];
    }

    if (ntraits > max_traits) {
        fl::set_err(err, err_len, "more than %zu traits in the context",
                    max_traits);
        return FL_ERR_FIELD;
    }

    fl_trait_t *traits = nullptr;
    if (ntraits != 0) {
        traits = fl::alloc_array<fl_trait_t>(a, ntraits);
        if (traits == nullptr) {
            fl::set_err(err, err_len, "out of memory");
            return FL_ERR_NOMEM;
        }
        for (size_t k = 0; k < ntraits; k++) {
            const fl::jval *v = props[k].v;
            fl_trait_t &t = traits[k];

            t.name = v->key;
            t.name_len = v->key_len;
            switch (v->kind) {
            case fl::J_TRUE:
                t.value = "true";
                t.value_len = 4;
                break;
            case fl::J_FALSE:
                t.value = "false";
                t.value_len = 5;
                break;
            default:                    /* a string or a number's text */
                t.value = v->str;
                t.value_len = v->len;
                break;
            }
        }
    }

    out->user_id = user_id;
    out->user_id_len = user_id_len;
    out->traits = traits;
    out->ntraits = ntraits;
    return FL_OK;
}


/* ------------------------------------------------------------ answers */

const char *const reason_names[] = {
    "STATIC", "TARGETING_MATCH", "SPLIT", "DISABLED", "DEFAULT"
};

const char *reason_name(uint8_t r)
{
    return r < sizeof(reason_names) / sizeof(reason_names[0])
           ? reason_names[r] : "UNKNOWN";
}

/* The longest member list after "key" (value, reason, variant, metadata),
 * with the percentage's 8 bytes. */
constexpr size_t flag_fixed =
    sizeof("{\"key\":,\"value\":false,\"reason\":\"TARGETING_MATCH\","
           "\"variant\":\"off\",\"metadata\":{\"rolloutPercentage\":"
           ",\"rolledBack\":false,\"segmentMatched\":false"
           ",\"targeted\":true,\"ruleIndex\":}}")
    + 8 + 5;

char *put_flag(char *o, const fl::Flag &f, const fl_detail_t &d)
{
    o = fl::put_lit(o, "{\"key\":");
    std::memcpy(o, f.json_name.data(), f.json_name.size());
    o += f.json_name.size();
    o = d.enabled ? fl::put_lit(o, ",\"value\":true,\"reason\":\"")
                  : fl::put_lit(o, ",\"value\":false,\"reason\":\"");
    const char *r = reason_name(d.reason);
    size_t rl = std::strlen(r);
    std::memcpy(o, r, rl);
    o += rl;
    o = d.enabled ? fl::put_lit(o, "\",\"variant\":\"on\"")
                  : fl::put_lit(o, "\",\"variant\":\"off\"");
    o = fl::put_lit(o, ",\"metadata\":{\"rolloutPercentage\":");
    o += fl_json_milli(d.rollout_milli, o);
    o = d.rolled_back ? fl::put_lit(o, ",\"rolledBack\":true")
                      : fl::put_lit(o, ",\"rolledBack\":false");
    if (d.has_segments) {
        o = d.segment_matched ? fl::put_lit(o, ",\"segmentMatched\":true")
                              : fl::put_lit(o, ",\"segmentMatched\":false");
    }
    /* what decided a flag with rules or named users (docs/ofrep.md) */
    if (d.targeted) {
        o = fl::put_lit(o, ",\"targeted\":true");
    } else if (d.rule != 0) {
        o = fl::put_lit(o, ",\"ruleIndex\":");
        o += fl::put_u64(static_cast<uint64_t>(d.rule - 1), o);
    }
    return fl::put_lit(o, "}}");
}

/* RFC 3986: what a path segment and a query value may hold as they are;
 * everything else is %XX.  '/' is kept in the path, and only unreserved
 * characters in the token. */
bool unreserved(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
           || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_'
           || c == '~';
}

bool path_char(unsigned char c)
{
    return unreserved(c) || c == '/' || c == '!' || c == '$' || c == '&'
           || c == '\'' || c == '(' || c == ')' || c == '*' || c == '+'
           || c == ',' || c == ';' || c == '=' || c == ':' || c == '@';
}

char *put_pct(char *o, const char *s, size_t n, bool (*keep)(unsigned char))
{
    static const char hex[] = "0123456789ABCDEF";

    for (size_t i = 0; i < n; i++) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        if (keep(c)) {
            *o++ = static_cast<char>(c);
        } else {
            *o++ = '%';
            *o++ = hex[c >> 4];
            *o++ = hex[c & 0xf];
        }
    }
    return o;
}

constexpr char events_tail[] = "v1/events?token=";

/* The eventStreams member (with its leading comma); the request URI is
 * ASCII without '"' or '\\' once percent-encoded, so it needs no JSON
 * escaping. */
char *put_streams(char *o, const char *path, size_t path_len,
    const char *token, size_t token_len)
{
    o = fl::put_lit(o, ",\"eventStreams\":[{\"type\":\"sse\","
                       "\"endpoint\":{\"requestUri\":\"");
    o = put_pct(o, path, path_len, path_char);
    o = fl::put_lit(o, events_tail);
    o = put_pct(o, token, token_len, unreserved);
    return fl::put_lit(o, "\"},\"inactivityDelaySec\":120}]");
}

constexpr size_t streams_fixed =
    sizeof(",\"eventStreams\":[{\"type\":\"sse\",\"endpoint\":"
           "{\"requestUri\":\"\"},\"inactivityDelaySec\":120}]")
    + sizeof(events_tail);


/* OpenFeature's error codes are short; a longer one is cut. */
constexpr size_t max_code_len = 32;

} // namespace


extern "C" {

fl_status_t fl_ofrep_parse_context(const char *body, size_t len,
    size_t max_traits, const fl_alloc_t *a, fl_user_t *out,
    char *err, size_t err_len) noexcept
{
    if (out == nullptr) {
        return FL_ERR_INTERNAL;
    }
    *out = fl_user_t{nullptr, 0, nullptr, 0};

    if (body == nullptr || len == 0) {
        return FL_OK;
    }
    if (a == nullptr || a->alloc == nullptr) {
        return FL_ERR_INTERNAL;
    }

    try {
        fl_status_t rc = parse_context(body, len, max_traits, a, out, err,
                                       err_len);
        if (rc != FL_OK) {
            *out = fl_user_t{nullptr, 0, nullptr, 0};
        }
        return rc;
    } catch (...) {
        fl::set_err(err, err_len, "internal error while reading the context");
        *out = fl_user_t{nullptr, 0, nullptr, 0};
        return FL_ERR_INTERNAL;
    }
}

size_t fl_ofrep_flag_json_bound(const fl_project_t *p, size_t i) noexcept
{
    if (p == nullptr || i >= p->flags.size()) {
        return 0;
    }
    return fl::str_bound(p->flags[i].name.size()) + flag_fixed;
}

size_t fl_ofrep_flag_json(const fl_project_t *p, size_t i,
    const fl_detail_t *d, char *buf) noexcept
{
    if (p == nullptr || d == nullptr || i >= p->flags.size()) {
        return 0;
    }
    return static_cast<size_t>(put_flag(buf, p->flags[i], *d) - buf);
}

size_t fl_ofrep_bulk_json_bound(const fl_project_t *p, size_t path_len,
    size_t token_len) noexcept
{
    size_t n = sizeof("{\"flags\":[]}") + streams_fixed
               + 3 * path_len + 3 * token_len;

    size_t nflags = p ? p->flags.size() : 0;
    for (size_t i = 0; i < nflags; i++) {
        n += fl::str_bound(p->flags[i].name.size()) + flag_fixed + 1;
    }
    return n;
}

size_t fl_ofrep_bulk_json(const fl_project_t *p, const fl_detail_t *d,
    const char *stream_path, size_t path_len, const char *token,
    size_t token_len, char *buf) noexcept
{
    char *o = fl::put_lit(buf, "{\"flags\":[");

    size_t n = p && d ? p->flags.size() : 0;
    for (size_t i = 0; i < n; i++) {
        if (i > 0) {
            *o++ = ',';
        }
        o = put_flag(o, p->flags[i], d[i]);
    }
    *o++ = ']';

    if (stream_path != nullptr) {
        o = put_streams(o, stream_path, path_len, token ? token : "",
                        token ? token_len : 0);
    }
    *o++ = '}';
    return static_cast<size_t>(o - buf);
}

size_t fl_ofrep_error_json_bound(size_t key_len, size_t details_len) noexcept
{
    return sizeof("{\"key\":,\"errorCode\":,\"errorDetails\":}")
           + fl::str_bound(max_code_len) + fl::str_bound(key_len)
           + fl::str_bound(details_len);
}

size_t fl_ofrep_error_json(const char *key, size_t key_len, const char *code,
    const char *details, size_t details_len, char *buf) noexcept
{
    char *o = buf;

    *o++ = '{';
    if (key != nullptr) {
        o = fl::put_lit(o, "\"key\":");
        o = fl::put_str(o, key, key_len);
        *o++ = ',';
    }
    o = fl::put_lit(o, "\"errorCode\":");
    o = fl::put_str(o, code ? code : "GENERAL",
                    code ? std::min(std::strlen(code), max_code_len) : 7);
    o = fl::put_lit(o, ",\"errorDetails\":");
    o = fl::put_str(o, details ? details : "", details ? details_len : 0);
    *o++ = '}';
    return static_cast<size_t>(o - buf);
}

} // extern "C"
