/*
 * json_scan.hpp - the one-buffer fast path in front of yajl (internal).
 *
 * The error report is the module's hottest body, and yajl's byte-at-a-time
 * lexer costs more per report than the rest of the module together (about
 * 7k instructions for a 330-byte report).  json_scan() reads a JSON text
 * held whole in one buffer and hands it to a handler whose members stand
 * for yajl's callbacks; report.cpp's handler calls the very callbacks it
 * gives a yajl_handle, so the report's rules stay in one place.
 *
 * It handles a strict subset of what yajl accepts and declines the rest:
 * any syntax error, a control byte in a string, an escape yajl would
 * refuse, \u0000, an unpaired surrogate escape, trailing bytes, nesting
 * deeper than FL_REPORT_MAX_DEPTH, a callback that stops the parse, an
 * empty text.  On JSON_SCAN_DECLINED the caller throws away whatever the
 * callbacks built and gives the same bytes to yajl, which then decides,
 * and words any error, exactly as before.  So for every input the outcome
 * is yajl's; the fuzz target fuzz_report.cc checks that both ways agree.
 *
 * What it passes to the handler is what yajl passes its callbacks: strings
 * decoded (escapes resolved, \uD83D\uDE00 pairs as one 4-byte UTF-8
 * sequence), numbers as their text (as to yajl_number), keys apart (as to
 * yajl_map_key).  Bytes >= 0x80 are passed through unchecked: the
 * caller runs the strict UTF-8 check (utf8.hpp) over the text first.
 */

#ifndef FLAGS_JSON_SCAN_HPP
#define FLAGS_JSON_SCAN_HPP

#include "flags_core.h"
#include "json_reader.hpp"

#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace fl {

enum json_scan_result {
    JSON_SCAN_OK,
    JSON_SCAN_DECLINED
};

namespace scan_detail {

struct scanner {
    const unsigned char    *p;
    const unsigned char    *end;
    const fl_alloc_t       *alloc;
    size_t                  len;
    unsigned char          *scratch;    /* decoded strings, taken once */
};

/* Most tokens follow their predecessor without a space: one compare
 * decides that before the loop. */
inline void skip_space(scanner &s) noexcept
{
    if (s.p < s.end && *s.p > ' ') {
        return;
    }
    while (s.p < s.end && json_space(*s.p)) {
        s.p++;
    }
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
    while (p < end && *p != '"' && *p != '\\' && *p >= 0x20) {
        p++;
    }
    return p;
}

/* The rest of a string with escapes, from q (on its first '\\' or
 * control byte) on: decoded into the scratch buffer.  *plain: each of its
 * escapes is the one fl_json_escape() writes for what it stands for (\",
 * \\, \b, \f, \n, \r, \t; not \/ nor \u).  Out of line: most strings
 * have none. */
bool scan_escaped(scanner &s, const unsigned char *start,
    const unsigned char *q, const unsigned char **str, size_t *len,
    bool *plain) noexcept;

/* The string whose opening quote s.p is on: *str and *len as yajl would
 * hand them over.  *text: its text between the quotes where that is
 * written as fl_json_escape() would write the string in a text of ASCII
 * (then *text_len its length), else nullptr.  False to decline. */
inline bool scan_string(scanner &s, const unsigned char **str, size_t *len,
    const unsigned char **text, size_t *text_len) noexcept
{
    const unsigned char *start = ++s.p;
    const unsigned char *q = string_run(start, s.end);

    if (q < s.end && *q == '"') {
        *str = start;
        *len = static_cast<size_t>(q - start);
        *text = start;
        *text_len = *len;
        s.p = q + 1;
        return true;
    }
    bool plain;
    if (!scan_escaped(s, start, q, str, len, &plain)) {
        return false;
    }
    *text = plain ? start : nullptr;
    *text_len = static_cast<size_t>(s.p - 1 - start);
    return true;
}

bool scan_number(scanner &s, const unsigned char **str, size_t *len) noexcept;
bool scan_literal(scanner &s, const char *lit, size_t n) noexcept;

} // namespace scan_detail

/*
 * Scans d[0..len) as one JSON text, handing what it reads to h, whose
 * members stand for yajl's callbacks and return false to stop (and
 * decline): start_map(), end_map(), start_array(), end_array(),
 * map_key(str, n), string(str, n, text, text_n), number(text, n),
 * boolean(b), null().  string()'s text is the string as the body wrote
 * it when that is how fl_json_escape() would write it in a text of
 * ASCII (scan_string()), else nullptr.
 * A template, so that the caller's handler is called directly, not
 * through a pointer, and its small members are inlined into the scan.
 * Escaped strings are decoded into memory from a (at most len bytes,
 * taken once).
 */
template <class H>
json_scan_result json_scan(const unsigned char *d, size_t len, H &h,
    const fl_alloc_t *a) noexcept
{
    using namespace scan_detail;
    enum : unsigned char { IN_OBJECT, IN_ARRAY };

    unsigned char stack[FL_REPORT_MAX_DEPTH + 1];
    size_t depth = 0;
    scanner s = { d, d + len, a, len, nullptr };
    const unsigned char *str, *text;
    size_t n, text_n;

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
            if (!h.start_map()) {
                return JSON_SCAN_DECLINED;
            }
            stack[depth++] = IN_OBJECT;
        } else {
            if (!h.start_array()) {
                return JSON_SCAN_DECLINED;
            }
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
        if (!scan_string(s, &str, &n, &text, &text_n)
            || !h.string(str, n, text, text_n))
        {
            return JSON_SCAN_DECLINED;
        }
        goto after_value;
    case 't':
        if (!scan_literal(s, "true", 4) || !h.boolean(1)) {
            return JSON_SCAN_DECLINED;
        }
        goto after_value;
    case 'f':
        if (!scan_literal(s, "false", 5) || !h.boolean(0)) {
            return JSON_SCAN_DECLINED;
        }
        goto after_value;
    case 'n':
        if (!scan_literal(s, "null", 4) || !h.null()) {
            return JSON_SCAN_DECLINED;
        }
        goto after_value;
    default:
        if (!scan_number(s, &str, &n)
            || !h.number(reinterpret_cast<const char *>(str), n))
        {
            return JSON_SCAN_DECLINED;
        }
        goto after_value;
    }

want_key:
    skip_space(s);
    if (s.p == s.end || *s.p != '"' || !scan_string(s, &str, &n, &text, &text_n)
        || !h.map_key(str, n))
    {
        return JSON_SCAN_DECLINED;
    }
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
        if (!h.end_map()) {
            return JSON_SCAN_DECLINED;
        }
    } else if (!h.end_array()) {
        return JSON_SCAN_DECLINED;
    }
    goto after_value;
}

} // namespace fl

#endif /* FLAGS_JSON_SCAN_HPP */
