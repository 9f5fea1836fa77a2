/*
 * json_scan.cpp - the one-buffer fast path in front of yajl: see
 * json_scan.hpp for what it accepts, what it declines and why that keeps
 * every outcome yajl's.
 */

#include "json_scan.hpp"
#include "arena.hpp"
#include "json_reader.hpp"
#include "text.hpp"

#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace fl {

namespace {

struct scanner {
    const unsigned char    *p;
    const unsigned char    *end;
    const yajl_callbacks   *cb;
    void                   *ctx;
    const fl_alloc_t       *alloc;
    size_t                  len;
    unsigned char          *scratch;    /* decoded strings, taken once */
};

inline void skip_space(scanner &s) noexcept
{
    while (s.p < s.end && json_space(*s.p)) {
        s.p++;
    }
}

inline bool plain_string_byte(unsigned char c) noexcept
{
    return c != '"' && c != '\\' && c >= 0x20;
}

/* Bytes of a string that need no decoding: up to a '"', a '\\' or a
 * control byte (bytes >= 0x80 are plain here). */
inline const unsigned char *string_run(const unsigned char *p,
    const unsigned char *end) noexcept
{
#if defined(__SSE2__)
    const __m128i qt = _mm_set1_epi8('"');
    const __m128i bs = _mm_set1_epi8('\\');
    const __m128i ctl = _mm_set1_epi8(0x1f);

    while (end - p >= 16) {
        __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p));
        __m128i low = _mm_cmpeq_epi8(_mm_min_epu8(v, ctl), v);   /* <= 0x1f */
        int stop = _mm_movemask_epi8(_mm_or_si128(
                       _mm_or_si128(_mm_cmpeq_epi8(v, qt), _mm_cmpeq_epi8(v, bs)),
                       low));
        if (stop) {
            return p + __builtin_ctz(static_cast<unsigned>(stop));
        }
        p += 16;
    }
#endif
    while (p < end && plain_string_byte(*p)) {
        p++;
    }
    return p;
}

bool hex4(const unsigned char *p, uint32_t *out) noexcept
{
    uint32_t v = 0;

    for (int i = 0; i < 4; i++) {
        int h = hex_value(p[i]);
        if (h < 0) {
            return false;
        }
        v = v << 4 | static_cast<uint32_t>(h);
    }
    *out = v;
    return true;
}

unsigned char *put_utf8(unsigned char *o, uint32_t cp) noexcept
{
    if (cp < 0x80) {
        *o++ = static_cast<unsigned char>(cp);
    } else if (cp < 0x800) {
        *o++ = static_cast<unsigned char>(0xc0 | cp >> 6);
        *o++ = static_cast<unsigned char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        *o++ = static_cast<unsigned char>(0xe0 | cp >> 12);
        *o++ = static_cast<unsigned char>(0x80 | (cp >> 6 & 0x3f));
        *o++ = static_cast<unsigned char>(0x80 | (cp & 0x3f));
    } else {
        *o++ = static_cast<unsigned char>(0xf0 | cp >> 18);
        *o++ = static_cast<unsigned char>(0x80 | (cp >> 12 & 0x3f));
        *o++ = static_cast<unsigned char>(0x80 | (cp >> 6 & 0x3f));
        *o++ = static_cast<unsigned char>(0x80 | (cp & 0x3f));
    }
    return o;
}

/* The string whose opening quote s.p is on: *str and *len as yajl would
 * hand them over.  False to decline. */
bool scan_string(scanner &s, const unsigned char **str, size_t *len) noexcept
{
    const unsigned char *start = ++s.p;
    const unsigned char *q = string_run(start, s.end);

    if (q < s.end && *q == '"') {
        *str = start;
        *len = static_cast<size_t>(q - start);
        s.p = q + 1;
        return true;
    }
    if (q == s.end || *q != '\\') {
        return false;               /* unterminated, or a control byte */
    }

    /* escapes: decode into the scratch buffer (never longer than the
     * text: every escape is at least as long as what it stands for) */
    if (s.scratch == nullptr) {
        s.scratch = static_cast<unsigned char *>(alloc_bytes(s.alloc, s.len));
        if (s.scratch == nullptr) {
            return false;
        }
    }
    unsigned char *o = s.scratch;
    std::memcpy(o, start, static_cast<size_t>(q - start));
    o += q - start;

    for (;;) {
        if (q == s.end) {
            return false;
        }
        unsigned char c = *q;

        if (c == '"') {
            break;
        }
        if (c != '\\') {
            if (c < 0x20) {
                return false;
            }
            const unsigned char *r = string_run(q, s.end);
            std::memcpy(o, q, static_cast<size_t>(r - q));
            o += r - q;
            q = r;
            continue;
        }
        if (s.end - q < 2) {
            return false;
        }
        switch (q[1]) {
        case '"':  *o++ = '"';  break;
        case '\\': *o++ = '\\'; break;
        case '/':  *o++ = '/';  break;
        case 'b':  *o++ = '\b'; break;
        case 'f':  *o++ = '\f'; break;
        case 'n':  *o++ = '\n'; break;
        case 'r':  *o++ = '\r'; break;
        case 't':  *o++ = '\t'; break;
        case 'u': {
            uint32_t cp, lo;
            if (s.end - q < 6 || !hex4(q + 2, &cp) || cp == 0) {
                return false;       /* \u0000: left to yajl */
            }
            if (cp >= 0xdc00 && cp <= 0xdfff) {
                return false;
            }
            if (cp >= 0xd800 && cp <= 0xdbff) {
                if (s.end - q < 12 || q[6] != '\\' || q[7] != 'u'
                    || !hex4(q + 8, &lo) || lo < 0xdc00 || lo > 0xdfff)
                {
                    return false;
                }
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                q += 6;
            }
            o = put_utf8(o, cp);
            q += 6;
            continue;
        }
        default:
            return false;
        }
        q += 2;
    }

    *str = s.scratch;
    *len = static_cast<size_t>(o - s.scratch);
    s.p = q + 1;
    return true;
}

inline bool digit(unsigned char c) noexcept
{
    return c >= '0' && c <= '9';
}

/* A number in JSON's grammar, its text as it is. */
bool scan_number(scanner &s, const unsigned char **str, size_t *len) noexcept
{
    const unsigned char *p = s.p, *e = s.end;

    if (p < e && *p == '-') {
        p++;
    }
    if (p == e || !digit(*p)) {
        return false;
    }
    if (*p == '0') {
        p++;
    } else {
        while (p < e && digit(*p)) {
            p++;
        }
    }
    if (p < e && *p == '.') {
        p++;
        if (p == e || !digit(*p)) {
            return false;
        }
        while (p < e && digit(*p)) {
            p++;
        }
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < e && (*p == '+' || *p == '-')) {
            p++;
        }
        if (p == e || !digit(*p)) {
            return false;
        }
        while (p < e && digit(*p)) {
            p++;
        }
    }
    /* "01", "1x", "-" ...: whatever follows must end the value */
    if (p < e && (digit(*p) || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')
                  || *p == '.' || *p == '+' || *p == '-'))
    {
        return false;
    }
    *str = s.p;
    *len = static_cast<size_t>(p - s.p);
    s.p = p;
    return true;
}

bool scan_literal(scanner &s, const char *lit, size_t n) noexcept
{
    if (static_cast<size_t>(s.end - s.p) < n || std::memcmp(s.p, lit, n) != 0) {
        return false;
    }
    const unsigned char *p = s.p + n;
    if (p < s.end && ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')
                      || digit(*p)))
    {
        return false;
    }
    s.p = p;
    return true;
}

} // namespace

json_scan_result json_scan(const unsigned char *d, size_t len,
    const yajl_callbacks *cb, void *ctx, const fl_alloc_t *a) noexcept
{
    enum : unsigned char { IN_OBJECT, IN_ARRAY };

    unsigned char stack[FL_REPORT_MAX_DEPTH + 1];
    size_t depth = 0;
    scanner s = { d, d + len, cb, ctx, a, len, nullptr };
    const unsigned char *str;
    size_t n;

#define CALL(fn, ...)                                                        \
    do {                                                                     \
        if (cb->fn != nullptr && !cb->fn(ctx, ##__VA_ARGS__)) {              \
            return JSON_SCAN_DECLINED;                                       \
        }                                                                    \
    } while (0)

want_value:
    skip_space(s);
    if (s.p == s.end) {
        return JSON_SCAN_DECLINED;
    }
    switch (*s.p) {
    case '{':
    case '[':
        if (depth == sizeof(stack)) {
            return JSON_SCAN_DECLINED;
        }
        if (*s.p == '{') {
            CALL(yajl_start_map);
            stack[depth++] = IN_OBJECT;
        } else {
            CALL(yajl_start_array);
            stack[depth++] = IN_ARRAY;
        }
        s.p++;
        skip_space(s);
        if (s.p < s.end && *s.p == (stack[depth - 1] == IN_OBJECT ? '}' : ']')) {
            goto close;             /* {} or [] */
        }
        if (stack[depth - 1] == IN_OBJECT) {
            goto want_key;
        }
        goto want_value;
    case '"':
        if (!scan_string(s, &str, &n)) {
            return JSON_SCAN_DECLINED;
        }
        CALL(yajl_string, str, n);
        goto after_value;
    case 't':
        if (!scan_literal(s, "true", 4)) {
            return JSON_SCAN_DECLINED;
        }
        CALL(yajl_boolean, 1);
        goto after_value;
    case 'f':
        if (!scan_literal(s, "false", 5)) {
            return JSON_SCAN_DECLINED;
        }
        CALL(yajl_boolean, 0);
        goto after_value;
    case 'n':
        if (!scan_literal(s, "null", 4)) {
            return JSON_SCAN_DECLINED;
        }
        CALL(yajl_null);
        goto after_value;
    default:
        /* only the text-passing number callback is ever set */
        if (cb->yajl_integer != nullptr || cb->yajl_double != nullptr
            || !scan_number(s, &str, &n))
        {
            return JSON_SCAN_DECLINED;
        }
        CALL(yajl_number, reinterpret_cast<const char *>(str), n);
        goto after_value;
    }

want_key:
    skip_space(s);
    if (s.p == s.end || *s.p != '"' || !scan_string(s, &str, &n)) {
        return JSON_SCAN_DECLINED;
    }
    CALL(yajl_map_key, str, n);
    skip_space(s);
    if (s.p == s.end || *s.p != ':') {
        return JSON_SCAN_DECLINED;
    }
    s.p++;
    goto want_value;

after_value:
    skip_space(s);
    if (depth == 0) {
        return s.p == s.end ? JSON_SCAN_OK : JSON_SCAN_DECLINED;
    }
    if (s.p == s.end) {
        return JSON_SCAN_DECLINED;
    }
    if (*s.p == ',') {
        s.p++;
        if (stack[depth - 1] == IN_OBJECT) {
            goto want_key;
        }
        goto want_value;
    }
    if (*s.p != (stack[depth - 1] == IN_OBJECT ? '}' : ']')) {
        return JSON_SCAN_DECLINED;
    }

close:
    s.p++;
    if (stack[--depth] == IN_OBJECT) {
        CALL(yajl_end_map);
    } else {
        CALL(yajl_end_array);
    }
    goto after_value;

#undef CALL
}

} // namespace fl
