/*
 * json_writer.cpp - the exported primitives of the JSON writer
 * (json_writer.hpp): string escaping, milli-percent numbers and UTC
 * timestamps.
 *
 * None of these allocate or consult the C library's locale or time zone, so
 * they are safe on the request path and give the same bytes on every host.
 */

#include "flags_core.h"
#include "json_writer.hpp"
#include "utf8.hpp"

#include <cstring>

extern "C" {

size_t fl_json_escape_bound(size_t len) noexcept
{
    /* A control byte becomes "\u00XX" (6 bytes), an ill-formed byte or
     * run at most "\ufffd" (6); U+2028 is 3 bytes that become 6, so 6 per
     * input byte covers every case. */
    return len * 6;
}

size_t fl_json_escape(const char *s, size_t len, char *out) noexcept
{
    const unsigned char *p = reinterpret_cast<const unsigned char *>(s);
    char *o = out;
    size_t i = 0, n, bad;

    while (i < len) {
        /* copy the run of bytes that need nothing in one go: reports are
         * mostly plain text */
#if defined(__SSE2__)
        /* sixteen bytes at a time, stored whole even when the run ends
         * inside them: the output has room for 6 bytes per input byte
         * (fl_json_escape_bound), so while 16 input bytes remain there
         * are at least 16 bytes of room at o */
        const __m128i bs = _mm_set1_epi8('\\');
        const __m128i qt = _mm_set1_epi8('"');
        const __m128i sp = _mm_set1_epi8(0x20);
        unsigned stop = 0;

        while (i + 16 <= len) {
            __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p + i));
            _mm_storeu_si128(reinterpret_cast<__m128i *>(o), v);
            stop = static_cast<unsigned>(_mm_movemask_epi8(_mm_or_si128(
                       _mm_or_si128(_mm_cmpeq_epi8(v, bs), _mm_cmpeq_epi8(v, qt)),
                       _mm_cmplt_epi8(v, sp))));
            if (stop) {
                size_t run = static_cast<size_t>(__builtin_ctz(stop));
                o += run;
                i += run;
                break;
            }
            o += 16;
            i += 16;
        }
        if (stop == 0) {
            /* fewer than 16 bytes left: eight at a time, stored whole as
             * above, then byte by byte; a call to memcpy costs more */
            if (i + 8 <= len) {
                uint64_t x;
                std::memcpy(&x, p + i, 8);
                std::memcpy(o, &x, 8);
                size_t run = fl::plain_ascii_run(p + i, 8, true);
                o += run;
                i += run;
                stop = run < 8;
            }
            while (!stop && i < len && p[i] >= 0x20 && p[i] < 0x80
                   && p[i] != '"' && p[i] != '\\')
            {
                *o++ = static_cast<char>(p[i++]);
            }
        }
#else
        size_t run = i + fl::plain_ascii_run(p + i, len - i, true);
        std::memcpy(o, p + i, run - i);
        o += run - i;
        i = run;
#endif

        if (i == len) {
            break;
        }

        unsigned char c = p[i];

        switch (c) {
        case '"':  *o++ = '\\'; *o++ = '"';  break;
        case '\\': *o++ = '\\'; *o++ = '\\'; break;
        case '\n': *o++ = '\\'; *o++ = 'n';  break;
        case '\r': *o++ = '\\'; *o++ = 'r';  break;
        case '\t': *o++ = '\\'; *o++ = 't';  break;
        case '\b': *o++ = '\\'; *o++ = 'b';  break;
        case '\f': *o++ = '\\'; *o++ = 'f';  break;
        default:
            if (c < 0x80) {
                *o++ = '\\'; *o++ = 'u'; *o++ = '0'; *o++ = '0';
                *o++ = fl::hex_digits[c >> 4];
                *o++ = fl::hex_digits[c & 0xf];
                break;
            }
            n = fl::utf8_seq(p + i, len - i, &bad);
            if (n == 0) {
                /* the output must stay UTF-8 whatever came in (query
                 * trait names, operator files): one U+FFFD per maximal
                 * ill-formed subpart, as Unicode recommends */
                std::memcpy(o, "\\ufffd", 6);
                o += 6;
                i += bad;
                continue;
            }
            if (n == 3 && c == 0xe2 && p[i + 1] == 0x80
                && (p[i + 2] == 0xa8 || p[i + 2] == 0xa9))
            {
                /* U+2028 / U+2029 are valid in JSON but end a line in
                 * JavaScript: escape them for JSONP-ish readers. */
                std::memcpy(o, p[i + 2] == 0xa8 ? "\\u2028" : "\\u2029", 6);
                o += 6;
            } else {
                std::memcpy(o, p + i, n);
                o += n;
            }
            i += n;
            continue;
        }

        i++;
    }

    return static_cast<size_t>(o - out);
}

size_t fl_json_milli(uint32_t milli, char *out) noexcept
{
    /* Percentages never exceed 100 %; clamping keeps the documented
     * 8-byte bound even if a caller passes garbage. */
    if (milli > FL_MILLI_MAX) {
        milli = FL_MILLI_MAX;
    }

    size_t n = fl::put_u64(milli / 1000, out);
    uint32_t frac = milli % 1000;

    if (frac != 0) {
        char digits[3];
        size_t nd = 3;

        fl::put_padded(frac, 3, digits);
        while (digits[nd - 1] == '0') {     /* 12.500 -> 12.5 */
            nd--;
        }
        out[n++] = '.';
        std::memcpy(out + n, digits, nd);
        n += nd;
    }

    return n;
}

size_t fl_format_time_ms(uint64_t ms, char *out) noexcept
{
    /* the report log stamps many lines in one second: the calendar part
     * is worked out once per second (per thread) and copied */
    thread_local uint64_t cached_secs = UINT64_MAX;
    thread_local char cached[19];

    uint64_t secs = ms / 1000;

    if (secs == cached_secs) {
        std::memcpy(out, cached, 19);
        out[19] = '.';
        fl::put_padded(ms % 1000, 3, out + 20);
        out[23] = 'Z';
        return 24;
    }

    uint64_t days = secs / 86400;
    uint64_t sod = secs % 86400;

    /* civil_from_days (H. Hinnant), for days since 1970-01-01 >= 0. */
    uint64_t z = days + 719468;
    uint64_t era = z / 146097;
    uint64_t doe = z - era * 146097;                                /* [0, 146096] */
    uint64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    uint64_t y = yoe + era * 400;
    uint64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);        /* [0, 365] */
    uint64_t mp = (5 * doy + 2) / 153;                              /* [0, 11] */
    uint64_t d = doy - (153 * mp + 2) / 5 + 1;                      /* [1, 31] */
    uint64_t m = mp < 10 ? mp + 3 : mp - 9;                         /* [1, 12] */

    if (m <= 2) {
        y++;
    }

    /* Years past 9999 cannot be written in 4 digits; they are not
     * reachable from a real clock, so they are simply truncated. */
    fl::put_padded(y, 4, out);
    out[4] = '-';
    fl::put_padded(m, 2, out + 5);
    out[7] = '-';
    fl::put_padded(d, 2, out + 8);
    out[10] = 'T';
    fl::put_padded(sod / 3600, 2, out + 11);
    out[13] = ':';
    fl::put_padded(sod / 60 % 60, 2, out + 14);
    out[16] = ':';
    fl::put_padded(sod % 60, 2, out + 17);
    out[19] = '.';
    fl::put_padded(ms % 1000, 3, out + 20);
    out[23] = 'Z';

    std::memcpy(cached, out, 19);
    cached_secs = secs;

    return 24;
}

} // extern "C"
