/*
 * query.cpp - the caller of GET /flags from its query string
 * (docs/api.md, docs/evaluation.md).
 *
 * One pass reads every parameter.  A name or value without '%', '+' or NUL
 * is its own decoding and the caller's user points into args for it (args
 * must outlive the user); the others are decoded into one buffer taken
 * from the caller's allocator at the first of them (decoding never
 * lengthens, so the rest of the query bounds it).  Trait parameters are
 * collected, sorted by (name, position) and reduced to the last occurrence
 * of each name.  That is O(n log n) in the number of
 * parameters whatever their repetition, and no memory is freed: everything
 * comes from the request pool.
 *
 * The allocator must return memory aligned for pointers (as ngx_palloc
 * does).
 */

#include "flags_core.h"
#include "text.hpp"

#include <algorithm>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace {

constexpr char trait_prefix[] = "trait_";
constexpr size_t trait_prefix_len = sizeof(trait_prefix) - 1;

/* fl_user_trait() scans up to this many traits, and halves beyond */
constexpr size_t trait_scan_max = 16;

/* parse() keeps the entries of up to this many parameters on the stack */
constexpr size_t local_entries = 16;

struct Entry {
    const char  *name;
    size_t       name_len;
    const char  *value;
    size_t       value_len;
    size_t       pos;           /* order in the query: the last one wins */
};

enum class Decode { ok, malformed, nul };

constexpr uint64_t ones = 0x0101010101010101ull;
constexpr uint64_t lows = 0x7f7f7f7f7f7f7f7full;

/* The high bit of each zero byte of x, exactly (no borrow into the next
 * byte, unlike (x - ones) & ~x). */
inline uint64_t zero_bytes(uint64_t x)
{
    return ~(((x & lows) + lows) | x | lows);
}

/* The high bit of each byte of x that is a '%', a '+' or a NUL. */
inline uint64_t special_bytes(uint64_t x)
{
    return zero_bytes(x ^ (ones * '%')) | zero_bytes(x ^ (ones * '+'))
           | zero_bytes(x);
}

/* The bytes decode() must look at: '%', '+' and NUL. */
struct Special {
    bool is[256] = {};
    constexpr Special()
    {
        is[static_cast<unsigned char>('%')] = true;
        is[static_cast<unsigned char>('+')] = true;
        is[0] = true;
    }
};
constexpr Special special{};

/* Decodes %XX and '+' from src into dst (which may hold n bytes).
 * Inlined into parse()'s two calls: most names and values are a few
 * bytes, so a call's entry and exit cost as much as the decoding. */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
inline Decode decode(const char *src, size_t n, char *dst, size_t *out_len)
{
    size_t i = 0, o = 0;

    while (i < n) {
        /* eight plain bytes at a time; o <= i, so the store stays inside
         * dst */
        if (i + 8 <= n) {
            uint64_t x;
            std::memcpy(&x, src + i, 8);
            if (special_bytes(x) == 0) {
                std::memcpy(dst + o, &x, 8);
                o += 8;
                i += 8;
                continue;
            }
        }

        /* then a byte at a time up to the next special byte or the end of
         * this word */
        size_t stop = i + 8 < n ? i + 8 : n;
        unsigned char c = static_cast<unsigned char>(src[i]);

        while (!special.is[c]) {
            dst[o++] = static_cast<char>(c);
            if (++i == stop) {
                break;
            }
            c = static_cast<unsigned char>(src[i]);
        }
        if (i == stop) {
            continue;
        }

        if (c == '%') {
            if (i + 2 >= n) {             /* "%" or "%4" at the end */
                return Decode::malformed;
            }
            int hi = fl::hex_value(static_cast<unsigned char>(src[i + 1]));
            int lo = fl::hex_value(static_cast<unsigned char>(src[i + 2]));
            if (hi < 0 || lo < 0) {
                return Decode::malformed;
            }
            c = static_cast<unsigned char>(hi << 4 | lo);
            i += 2;
        } else if (c == '+') {
            c = ' ';
        }

        if (c == '\0') {
            return Decode::nul;
        }
        dst[o++] = static_cast<char>(c);
        i++;
    }

    *out_len = o;
    return Decode::ok;
}

/* The offset of the first byte decode() changes or refuses in s[from, n),
 * or n: eight bytes a step, the exact zero-byte rule telling which. */
inline size_t first_special(const char *s, size_t from, size_t n)
{
    size_t i = from;

#if defined(__SSE2__)
    /* sixteen bytes a step where SSE2 is there (every x86-64) */
    const __m128i pct = _mm_set1_epi8('%');
    const __m128i plus = _mm_set1_epi8('+');
    const __m128i nul = _mm_setzero_si128();

    for (; i + 16 <= n; i += 16) {
        __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + i));
        int m = _mm_movemask_epi8(_mm_or_si128(
                    _mm_or_si128(_mm_cmpeq_epi8(v, pct), _mm_cmpeq_epi8(v, plus)),
                    _mm_cmpeq_epi8(v, nul)));
        if (m != 0) {
            return i + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(m)));
        }
    }
#endif
    for (; i + 8 <= n; i += 8) {
        uint64_t x;
        std::memcpy(&x, s + i, 8);
        uint64_t m = special_bytes(x);
        if (m != 0) {
            /* little-endian: the lowest set bit is the first byte */
            return i + static_cast<size_t>(__builtin_ctzll(m)) / 8;
        }
    }
    for (; i < n; i++) {
        if (special.is[static_cast<unsigned char>(s[i])]) {
            return i;
        }
    }
    return n;
}

/* The first c in s[0, n), or nullptr: memchr() inline, for the few bytes
 * of a parameter, where a call and its set-up cost more than the search. */
inline const char *find_byte(const char *s, size_t n, char c)
{
    size_t i = 0;

#if defined(__SSE2__)
    const __m128i k = _mm_set1_epi8(c);

    for (; i + 16 <= n; i += 16) {
        int m = _mm_movemask_epi8(_mm_cmpeq_epi8(
                    _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + i)), k));
        if (m != 0) {
            return s + i + __builtin_ctz(static_cast<unsigned>(m));
        }
    }
#endif
    for (; i + 8 <= n; i += 8) {
        uint64_t x;
        std::memcpy(&x, s + i, 8);
        uint64_t m = zero_bytes(x ^ (ones * static_cast<unsigned char>(c)));
        if (m != 0) {
            /* little-endian: the lowest set bit is the first byte */
            return s + i + __builtin_ctzll(m) / 8;
        }
    }
    for (; i < n; i++) {
        if (s[i] == c) {
            return s + i;
        }
    }
    return nullptr;
}

/* The number of '&' in s (n bytes): eight bytes a step. */
size_t count_amps(const char *s, size_t n)
{
    size_t count = 0, i = 0;

    for (; i + 8 <= n; i += 8) {
        uint64_t x;
        std::memcpy(&x, s + i, 8);
        /* one high bit a '&': moved to the low bit of its byte, the
         * bytes summed into the top one by the multiplication */
        count += static_cast<size_t>(
            ((zero_bytes(x ^ (ones * '&')) >> 7) * ones) >> 56);
    }
    for (; i < n; i++) {
        count += s[i] == '&';
    }
    return count;
}

/* A name is echoed in a message only when it is short printable ASCII
 * without quotes or backslashes, so the message stays one clean line. */
bool echoable(const char *s, size_t n)
{
    if (n == 0 || n > 64) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        if (c < 0x20 || c > 0x7e || c == '"' || c == '\\') {
            return false;
        }
    }
    return true;
}

fl_status_t parse(const char *args, size_t len, size_t max_traits,
    const fl_alloc_t *a, fl_user_t *out, char *err, size_t err_len)
{
    /* the entries of a usual query on the stack; the allocator's memory is
     * kept for what the caller keeps.  A query with more trait parameters
     * moves them to an array sized by the '&'s left (counted then, not
     * for every query) */
    Entry local[local_entries];
    Entry *entries = local;
    size_t cap = local_entries;

    /* decoded copies, for the names and values that need decoding alone;
     * taken at the first: the rest of the query from there bounds them */
    char *buf = nullptr;
    /* where the next byte to decode is: the pieces before it are plain
     * without a look at their bytes */
    size_t sp = first_special(args, 0, len);

    size_t nentries = 0, used = 0;
    const char *user_id = nullptr;
    size_t user_id_len = 0;

    for (size_t start = 0, pos = 0; start <= len; pos++) {
        const char *piece = args + start;
        const char *amp = find_byte(piece, len - start, '&');
        size_t plen = amp ? static_cast<size_t>(amp - piece) : len - start;
        start += plen + 1;

        if (plen == 0) {
            continue;
        }

        const char *eq = find_byte(piece, plen, '=');
        size_t raw_nlen = eq ? static_cast<size_t>(eq - piece) : plen;
        const char *raw_val = eq ? eq + 1 : piece + plen;
        size_t raw_vlen = eq ? plen - raw_nlen - 1 : 0;

        /* a plain name or value is its own decoding: it points into
         * args; the others are decoded into buf */
        const char *name = piece, *value = raw_val;
        size_t nlen = raw_nlen, vlen = raw_vlen;
        bool pname = true, pvalue = true;
        if (sp < start - 1) {
            /* this piece (it ends at start - 1) holds the first one: in
             * the name, and then the value is looked at, or in the value
             * ('=' is not one) */
            size_t at = static_cast<size_t>(piece - args);
            pname = sp >= at + raw_nlen;
            pvalue = !pname && first_special(raw_val, 0, raw_vlen) == raw_vlen;
            sp = first_special(args, start < len ? start : len, len);
        }
        Decode d = Decode::ok;
        if (!pname || !pvalue) {
            if (buf == nullptr) {
                buf = static_cast<char *>(
                    a->alloc(a->ctx, len - static_cast<size_t>(piece - args)));
                if (buf == nullptr) {
                    fl::set_err(err, err_len, "out of memory");
                    return FL_ERR_NOMEM;
                }
            }
            if (!pname) {
                name = buf + used;
                d = decode(piece, raw_nlen, buf + used, &nlen);
                used += nlen;
            }
            if (d == Decode::ok && !pvalue) {
                value = buf + used;
                d = decode(raw_val, raw_vlen, buf + used, &vlen);
                used += vlen;
            }
        }
        if (d == Decode::malformed) {
            fl::set_err(err, err_len, "malformed percent-encoding in the query");
            return FL_ERR_QUERY;
        }
        if (d == Decode::nul) {
            fl::set_err(err, err_len, "a NUL byte (%%00) in the query");
            return FL_ERR_QUERY;
        }

        if (nlen == 6 && std::memcmp(name, "userId", 6) == 0) {
            if (vlen > FL_MAX_VALUE_LEN) {
                fl::set_err(err, err_len, "userId is longer than %u bytes",
                          FL_MAX_VALUE_LEN);
                return FL_ERR_QUERY;
            }
            /* "userId=" is the same as no userId */
            user_id = vlen ? value : nullptr;
            user_id_len = vlen;

        } else if (nlen >= trait_prefix_len
                   && std::memcmp(name, trait_prefix, trait_prefix_len) == 0)
        {
            const char *tn = name + trait_prefix_len;
            size_t tlen = nlen - trait_prefix_len;

            if (tlen == 0) {
                fl::set_err(err, err_len,
                          "a trait name is empty (\"trait_\" alone)");
                return FL_ERR_QUERY;
            }
            if (tlen > FL_MAX_TRAIT_NAME_LEN) {
                fl::set_err(err, err_len, "a trait name is longer than %u bytes",
                          FL_MAX_TRAIT_NAME_LEN);
                return FL_ERR_QUERY;
            }
            if (vlen > FL_MAX_VALUE_LEN) {
                if (echoable(tn, tlen)) {
                    fl::set_err(err, err_len,
                              "trait \"%.*s\" is longer than %u bytes",
                              static_cast<int>(tlen), tn, FL_MAX_VALUE_LEN);
                } else {
                    fl::set_err(err, err_len,
                              "a trait value is longer than %u bytes",
                              FL_MAX_VALUE_LEN);
                }
                return FL_ERR_QUERY;
            }
            if (nentries == cap) {
                /* this piece and one a '&' after it, at most */
                size_t rest = len - static_cast<size_t>(piece - args);
                size_t more = 1 + count_amps(piece, rest);
                Entry *bigger = static_cast<Entry *>(
                    a->alloc(a->ctx, (cap + more) * sizeof(Entry)));
                if (bigger == nullptr) {
                    fl::set_err(err, err_len, "out of memory");
                    return FL_ERR_NOMEM;
                }
                std::memcpy(bigger, entries, nentries * sizeof(Entry));
                entries = bigger;
                cap += more;
            }
            entries[nentries++] = Entry{tn, tlen, value, vlen, pos};
        }
        /* other parameters are ignored */
    }

    /* by (name, position): a total order, positions being distinct */
    auto before = [](const Entry &x, const Entry &y) {
        int c = fl::bytes_cmp(x.name, x.name_len, y.name, y.name_len);
        return c != 0 ? c < 0 : x.pos < y.pos;
    };
    if (nentries <= local_entries) {
        /* a handful: insertion sort, without std::sort's set-up */
        for (size_t i = 1; i < nentries; i++) {
            Entry e = entries[i];
            size_t j = i;
            for (; j > 0 && before(e, entries[j - 1]); j--) {
                entries[j] = entries[j - 1];
            }
            entries[j] = e;
        }
    } else {
        std::sort(entries, entries + nentries, before);
    }

    /* keep the last entry of each run of equal names */
    size_t distinct = 0;
    for (size_t i = 0; i < nentries; i++) {
        if (i + 1 < nentries
            && fl::bytes_cmp(entries[i].name, entries[i].name_len,
                        entries[i + 1].name, entries[i + 1].name_len) == 0)
        {
            continue;
        }
        entries[distinct++] = entries[i];
    }

    if (distinct > max_traits) {
        fl::set_err(err, err_len, "more than %zu traits", max_traits);
        return FL_ERR_QUERY;
    }

    fl_trait_t *traits = nullptr;
    if (distinct > 0) {
        traits = static_cast<fl_trait_t *>(
            a->alloc(a->ctx, distinct * sizeof(fl_trait_t)));
        if (traits == nullptr) {
            fl::set_err(err, err_len, "out of memory");
            return FL_ERR_NOMEM;
        }
        for (size_t i = 0; i < distinct; i++) {
            traits[i] = fl_trait_t{entries[i].name, entries[i].name_len,
                                   entries[i].value, entries[i].value_len};
        }
    }

    out->user_id = user_id;
    out->user_id_len = user_id_len;
    out->traits = traits;
    out->ntraits = distinct;
    return FL_OK;
}

} // namespace


extern "C" {

fl_status_t fl_parse_query(const char *args, size_t len, size_t max_traits,
    const fl_alloc_t *a, fl_user_t *out, char *err, size_t err_len) noexcept
{
    if (out == nullptr) {
        return FL_ERR_INTERNAL;
    }
    *out = fl_user_t{nullptr, 0, nullptr, 0};

    if (args == nullptr || len == 0) {
        return FL_OK;
    }
    if (a == nullptr || a->alloc == nullptr) {
        return FL_ERR_INTERNAL;
    }

    try {
        fl_status_t rc = parse(args, len, max_traits, a, out, err, err_len);
        if (rc != FL_OK) {
            *out = fl_user_t{nullptr, 0, nullptr, 0};
        }
        return rc;
    } catch (...) {
        fl::set_err(err, err_len, "internal error while parsing the query");
        return FL_ERR_INTERNAL;
    }
}

const fl_trait_t *fl_user_trait(const fl_user_t *u, const char *name,
    size_t len) noexcept
{
    if (u == nullptr || u->traits == nullptr) {
        return nullptr;
    }

    /* A caller sends a handful of traits: a scan that compares a length
     * and a first byte rejects nearly every other trait, and the one that
     * passes is compared in a few words (a binary search costs a compare
     * a step); a long list is searched
     * by halves, as the traits are sorted. */
    if (u->ntraits <= trait_scan_max) {
        for (size_t i = 0; i < u->ntraits; i++) {
            const fl_trait_t &t = u->traits[i];
            if (t.name_len == len
                && (len == 0 || (t.name[0] == name[0]
                                 && fl::bytes_eq(t.name, name, len))))
            {
                return &t;
            }
        }
        return nullptr;
    }

    size_t lo = 0, hi = u->ntraits;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const fl_trait_t &t = u->traits[mid];
        int c = fl::bytes_cmp(name, len, t.name, t.name_len);
        if (c == 0) {
            return &t;
        }
        if (c < 0) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    return nullptr;
}

} // extern "C"
