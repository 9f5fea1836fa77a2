/*
 * utf8.hpp - strict UTF-8 for the core (internal, not part of the C API).
 *
 * yajl's own check lets through overlong forms (C0 80, E0 80 80), encoded
 * surrogates (ED A0 80), code points above U+10FFFF (F4 90 80 80) and
 * escapes that are lone surrogates ("\ud800" becomes "?", "\udc00" raw
 * ED B0 80).  The module refuses all of these (400 invalid_json), so the report parser runs
 * every raw piece of a body through a Utf8JsonCheck before yajl sees it;
 * and the JSON escaper replaces what is not well-formed with U+FFFD.
 *
 * Well-formed means the table of the Unicode standard (3.9, table 3-7):
 *   00..7F | C2..DF 80..BF | E0 A0..BF 80..BF | E1..EC 80..BF 80..BF
 *   | ED 80..9F 80..BF | EE..EF 80..BF 80..BF | F0 90..BF 80..BF 80..BF
 *   | F1..F3 80..BF 80..BF 80..BF | F4 80..8F 80..BF 80..BF
 */

#ifndef FLAGS_UTF8_HPP
#define FLAGS_UTF8_HPP

#include <cstddef>
#include <cstring>
#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace fl {

/* For a lead byte: the number of continuation bytes it wants and the range
 * of the first one (the later ones are always 80..BF).  False for bytes
 * that cannot start a sequence: 80..BF, C0, C1, F5..FF. */
inline bool utf8_lead(unsigned char c, unsigned *need, unsigned char *lo,
    unsigned char *hi) noexcept
{
    *lo = 0x80;
    *hi = 0xbf;

    if (c < 0xc2) {
        *need = 0;
        return c < 0x80;
    }
    if (c < 0xe0) {
        *need = 1;
    } else if (c < 0xf0) {
        *need = 2;
        if (c == 0xe0) {
            *lo = 0xa0;             /* shorter forms are overlong */
        } else if (c == 0xed) {
            *hi = 0x9f;             /* ED A0.. are surrogates */
        }
    } else if (c < 0xf5) {
        *need = 3;
        if (c == 0xf0) {
            *lo = 0x90;
        } else if (c == 0xf4) {
            *hi = 0x8f;             /* past U+10FFFF */
        }
    } else {
        *need = 0;
        return false;
    }
    return true;
}

/* The length (1..4) of the well-formed sequence at s[0..n), or 0; then
 * *bad holds the length of its maximal ill-formed prefix (at least 1),
 * which is what one U+FFFD replaces (Unicode's "maximal subpart"). */
inline size_t utf8_seq(const unsigned char *s, size_t n, size_t *bad) noexcept
{
    unsigned need;
    unsigned char lo, hi;

    if (!utf8_lead(s[0], &need, &lo, &hi)) {
        *bad = 1;
        return 0;
    }
    size_t i = 1;
    for (; i <= need; i++) {
        if (i >= n || s[i] < lo || s[i] > hi) {
            *bad = i;
            return 0;
        }
        lo = 0x80;
        hi = 0xbf;
    }
    return i;
}

/*
 * The length of the run at d[0] of plain ASCII that the caller need not
 * look at byte by byte.  Always a byte >= 0x80 and '\\' end the run; for
 * the JSON escaper (escaping = true) a '"' and a byte below 0x20 do too.
 * Eight bytes a step: a byte >= 0x80 sets its high bit, a byte below 0x20
 * borrows in x - 0x20..20, and a zero byte of x ^ c in (x ^ c) - 0x01..01;
 * the first flagged byte of a little-endian word is exact.
 */
inline size_t plain_ascii_run(const unsigned char *d, size_t len,
    bool escaping) noexcept
{
    constexpr uint64_t ones = 0x0101010101010101ull;
    constexpr uint64_t highs = 0x8080808080808080ull;
    size_t i = 0;

#if defined(__SSE2__)
    /* sixteen bytes a step where SSE2 is there (every x86-64): as signed
     * bytes, those >= 0x80 are negative, so "below 0x20" takes them too */
    const __m128i bs = _mm_set1_epi8('\\');
    const __m128i qt = _mm_set1_epi8('"');
    const __m128i sp = _mm_set1_epi8(0x20);

    for ( ; i + 16 <= len; i += 16) {
        __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i *>(d + i));
        int stop;
        if (escaping) {
            stop = _mm_movemask_epi8(_mm_or_si128(
                       _mm_or_si128(_mm_cmpeq_epi8(v, bs), _mm_cmpeq_epi8(v, qt)),
                       _mm_cmplt_epi8(v, sp)));
        } else {
            stop = _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, bs), v));
        }
        if (stop) {
            return i + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(stop)));
        }
    }
#endif

    for ( ; i + 8 <= len; i += 8) {
        uint64_t x;
        std::memcpy(&x, d + i, 8);
        uint64_t b = x ^ (ones * '\\');
        uint64_t stop = x | ((b - ones) & ~b);
        if (escaping) {
            uint64_t q = x ^ (ones * '"');
            stop |= ((q - ones) & ~q) | ((x - ones * 0x20) & ~x);
        }
        stop &= highs;
        if (stop) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            return i + static_cast<size_t>(__builtin_ctzll(stop) >> 3);
#else
            break;
#endif
        }
    }
    while (i < len && d[i] < 0x80 && d[i] != '\\'
           && (!escaping || (d[i] != '"' && d[i] >= 0x20)))
    {
        i++;
    }
    return i;
}


/* Is every byte of d[0..len) below 0x80?  Sixteen bytes a step, their
 * high bits gathered and tested once at the end: a JSON body is short. */
inline bool all_ascii(const unsigned char *d, size_t len) noexcept
{
    size_t i = 0;
    unsigned char high = 0;

#if defined(__SSE2__)
    __m128i acc = _mm_setzero_si128();

    for ( ; i + 16 <= len; i += 16) {
        acc = _mm_or_si128(acc, _mm_loadu_si128(
                  reinterpret_cast<const __m128i *>(d + i)));
    }
    if (_mm_movemask_epi8(acc) != 0) {
        return false;
    }
#endif
    for ( ; i < len; i++) {
        high |= d[i];
    }
    return high < 0x80;
}


/* Is s[0..n) well-formed UTF-8 throughout? */
inline bool utf8_valid(const char *s, size_t n) noexcept
{
    const unsigned char *p = reinterpret_cast<const unsigned char *>(s);
    size_t i = 0, bad;

    while (i < n) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        size_t k = utf8_seq(p + i, n - i, &bad);
        if (k == 0) {
            return false;
        }
        i += k;
    }
    return true;
}


/* The length of the longest prefix of s[0..n) that does not end inside a
 * multi-byte sequence: a cut sequence at the end is dropped whole.  Only
 * s[0..n) is read (the byte after the cut may be gone already, as when
 * snprintf truncated). */
inline size_t utf8_cut(const char *s, size_t n) noexcept
{
    const unsigned char *p = reinterpret_cast<const unsigned char *>(s);
    size_t i = n;

    /* back over at most 3 continuation bytes to the lead of the last
     * sequence, then check it has all the bytes it wants */
    while (i > 0 && n - i < 3 && (p[i - 1] & 0xc0) == 0x80) {
        i--;
    }
    if (i == 0) {
        return n;
    }
    unsigned char lead = p[i - 1];
    size_t need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
    return n - (i - 1) < need ? i - 1 : n;
}

/* At most max bytes of s[0..len), never ending inside a UTF-8 sequence:
 * how a name is shortened for a message. */
inline size_t utf8_prefix(const char *s, size_t len, size_t max) noexcept
{
    return len <= max ? len : utf8_cut(s, max);
}

/*
 * A streaming check of a JSON text's bytes, fed in pieces of any size:
 * strict UTF-8 everywhere, and \uXXXX escapes that pair up (a high
 * surrogate escape followed at once by a low one).  It follows only
 * escapes, not string boundaries: in a valid JSON text a backslash only
 * occurs inside strings, and one outside a string is a syntax error that
 * yajl reports at the backslash, before any error this check can find
 * after it.  So the check needs to look only at backslashes and bytes
 * >= 0x80, and skips everything else eight bytes a step; quotes, the
 * most frequent byte of a report after letters, cost nothing.  After
 * something yajl is bound to refuse (a non-hex digit in \u) it stops
 * checking.  Value-initialise it; it holds no pointers.
 */
class Utf8JsonCheck {
public:
    enum error_t : uint8_t {
        E_NONE = 0,
        E_UTF8,                     /* ill-formed byte sequence */
        E_LONE_HIGH,                /* \ud800 not followed by \udc00.. */
        E_LONE_LOW                  /* \udc00 without a \ud800 before */
    };

    /* Checks d[0..len).  Returns len, or the index in d of the byte at
     * which an error became certain (the bytes before it may hold a
     * syntax error that yajl should report first).  After an error it
     * returns 0 for every call. */
    size_t feed(const unsigned char *d, size_t len) noexcept;

    /* At the end of the text: false when a sequence or escape is open.
     * A well-formed JSON text never ends so; yajl refuses it first. */
    bool complete() const noexcept
    {
        return error_ == E_NONE && need_ == 0 && !high_pending_
               && js_ == J_TEXT;
    }

    error_t error() const noexcept { return error_; }

    /* A message for a person, e.g. "request body is not valid UTF-8
     * (byte 17)", with the 0-based offset of the sequence or escape. */
    void message(char *buf, size_t len) const noexcept;

private:
    enum js_t : uint8_t { J_TEXT = 0, J_ESC, J_HEX, J_OFF };

    bool fail(error_t e, uint64_t at, uint32_t code) noexcept
    {
        error_ = e;
        error_at_ = at;
        error_code_ = code;
        return false;
    }

    bool json_byte(unsigned char c) noexcept;

    uint64_t        pos_ = 0;       /* offset of the next byte */
    uint64_t        seq_at_ = 0;    /* of the open UTF-8 sequence */
    uint64_t        esc_at_ = 0;    /* of the open \u escape */
    uint64_t        high_at_ = 0;   /* of the pending high surrogate */
    uint64_t        error_at_ = 0;
    uint32_t        code_ = 0;      /* hex digits read so far */
    uint32_t        high_code_ = 0;
    uint32_t        error_code_ = 0;
    unsigned        need_ = 0;      /* continuation bytes still wanted */
    unsigned        nhex_ = 0;
    unsigned char   lo_ = 0x80;     /* range of the next continuation */
    unsigned char   hi_ = 0xbf;
    js_t            js_ = J_TEXT;
    bool            high_pending_ = false;
    error_t         error_ = E_NONE;
};

} // namespace fl

#endif /* FLAGS_UTF8_HPP */
