/*
 * text.hpp - byte-string helpers of the core (internal, not part of the C
 * API): messages for a person, hex digits and the bytewise name order.
 */

#ifndef FLAGS_TEXT_HPP
#define FLAGS_TEXT_HPP

#include "utf8.hpp"

#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace fl {

/* snprintf into err; a truncated message is cut before any incomplete
 * UTF-8 sequence (messages quote client-supplied names). */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
inline void set_err(char *err, size_t err_len, const char *fmt, ...) noexcept
{
    if (err == nullptr || err_len == 0) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = std::vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
    if (n < 0) {
        err[0] = '\0';
        return;
    }
    if (static_cast<size_t>(n) >= err_len) {
        err[utf8_cut(err, err_len - 1)] = '\0';
    }
}

/* The value of a hex digit (either case), or -1. */
inline int hex_value(unsigned char c) noexcept
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    c |= 0x20;
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    return -1;
}

/* Whether n bytes (sizeof(W) to 2 * sizeof(W)) at a and at b are the
 * same: the first and the last word of each, overlapping. */
template <class W>
inline bool words_eq(const char *a, const char *b, size_t n) noexcept
{
    W a0, a1, b0, b1;
    std::memcpy(&a0, a, sizeof(W));
    std::memcpy(&b0, b, sizeof(W));
    std::memcpy(&a1, a + n - sizeof(W), sizeof(W));
    std::memcpy(&b1, b + n - sizeof(W), sizeof(W));
    return ((a0 ^ b0) | (a1 ^ b1)) == 0;
}

/* Whether n bytes at a and at b are the same.  Up to 16 bytes it reads
 * two overlapping words of each (no loop, no call); longer, memcmp.  A
 * trait name is a handful of bytes and a call to memcmp cost more than
 * the comparison. */
inline bool bytes_eq(const char *a, const char *b, size_t n) noexcept
{
    if (n >= 8 && n <= 16) {
        return words_eq<uint64_t>(a, b, n);
    }
    if (n >= 4 && n < 8) {
        return words_eq<uint32_t>(a, b, n);
    }
    if (n < 4) {
        for (size_t i = 0; i < n; i++) {
            if (a[i] != b[i]) {
                return false;
            }
        }
        return true;
    }
    return std::memcmp(a, b, n) == 0;
}

/* Bytewise order, shorter first on a common prefix: the order of trait
 * names in a fl_user_t and of report traits. */
inline int bytes_cmp(const char *a, size_t an, const char *b, size_t bn) noexcept
{
    size_t n = an < bn ? an : bn;
    /* names that differ in their first byte (most trait names do) are
     * ordered without a call to memcmp */
    if (n != 0 && a[0] != b[0]) {
        return static_cast<unsigned char>(a[0]) < static_cast<unsigned char>(b[0])
               ? -1 : 1;
    }
    int c = n ? std::memcmp(a, b, n) : 0;
    if (c != 0) {
        return c;
    }
    return an < bn ? -1 : an > bn ? 1 : 0;
}

} // namespace fl

#endif /* FLAGS_TEXT_HPP */
