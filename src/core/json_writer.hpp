/*
 * json_writer.hpp - the core's JSON writer (internal, not part of the C
 * API).  Every serializer of the core (the /flags answer, flags_status,
 * the report log line, the state file) writes through these appenders
 * into a buffer sized beforehand by the matching bound; the exported
 * primitives (fl_json_escape, fl_json_milli, fl_format_time_ms) are in
 * json_writer.cpp.
 *
 * Nothing here allocates or consults the locale, so the same bytes come
 * out on every host and the request path stays allocation-free.
 */

#ifndef FLAGS_JSON_WRITER_HPP
#define FLAGS_JSON_WRITER_HPP

#include "flags_core.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace fl {

/* Decimal digits of a uint64_t, for bounds. */
constexpr size_t u64_digits = 20;

inline size_t put_u64(uint64_t v, char *out) noexcept
{
    char tmp[u64_digits];
    size_t n = 0;
    do {
        tmp[n++] = static_cast<char>('0' + v % 10);
        v /= 10;
    } while (v != 0);
    for (size_t i = 0; i < n; i++) {
        out[i] = tmp[n - 1 - i];
    }
    return n;
}

/* Writes v zero-padded to exactly width digits. */
inline void put_padded(uint64_t v, size_t width, char *out) noexcept
{
    for (size_t i = width; i > 0; i--) {
        out[i - 1] = static_cast<char>('0' + v % 10);
        v /= 10;
    }
}

constexpr char hex_digits[] = "0123456789abcdef";

/* Appends a literal without its NUL. */
template <size_t N>
inline char *put_lit(char *o, const char (&lit)[N]) noexcept
{
    std::memcpy(o, lit, N - 1);
    return o + N - 1;
}

/* Appends "escaped s" with the quotes. */
inline char *put_str(char *o, const char *s, size_t len) noexcept
{
    *o++ = '"';
    o += fl_json_escape(s, len, o);
    *o++ = '"';
    return o;
}

/* Appends "s" with the quotes, for s that is its own JSON escaping;
 * never more than put_str() would write. */
inline char *put_verbatim(char *o, const char *s, size_t len) noexcept
{
    *o++ = '"';
    std::memcpy(o, s, len);
    o += len;
    *o++ = '"';
    return o;
}

/* Bytes put_str() may write for len bytes. */
inline size_t str_bound(size_t len) noexcept
{
    return fl_json_escape_bound(len) + 2;
}

/* Appends an override as flags_status and the state file write it:
 * null, {"enabled":false} or {"rolloutPercentage":N}; at most 32 bytes. */
inline char *put_override(char *o, fl_override_kind_t kind, uint32_t milli)
    noexcept
{
    switch (kind) {
    case FL_OVERRIDE_OFF:
        return put_lit(o, "{\"enabled\":false}");
    case FL_OVERRIDE_PERCENT:
        o = put_lit(o, "{\"rolloutPercentage\":");
        o += fl_json_milli(milli, o);
        *o++ = '}';
        return o;
    default:
        return put_lit(o, "null");
    }
}

/* Appends s as a JSON string, quotes included (configuration time). */
inline void append_str(std::string &out, const char *s, size_t len)
{
    size_t at = out.size();

    out.resize(at + str_bound(len));
    out.resize(at + static_cast<size_t>(put_str(&out[at], s, len) - &out[at]));
}

} // namespace fl

#endif /* FLAGS_JSON_WRITER_HPP */
