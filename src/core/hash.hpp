/*
 * hash.hpp - the core's one hasher of canonical data (internal to the
 * core): a sequence of integers and byte strings, each string preceded by
 * its length, so that ("ab", "c") and ("a", "bc") differ.
 *
 * Two mixes feed it, because what each computed is kept and must never
 * change:
 *
 *   DefHasher   FNV-1a 64, a byte at a time, integers as 8 little-endian
 *               bytes: a flag's definition hash (project.cpp), kept in
 *               state files and in flags_sync's Redis keys.
 *   EtagHasher  MurmurHash3 x64's mixing, eight bytes a step, then its
 *               finaliser: the ETags (etag.cpp), computed per request.  A
 *               cache validator, not a secret: a caller who forges a
 *               collision only gets its own earlier answer back.
 *
 * (murmur3.hpp is another thing: the bucket of a user in a rollout.)
 */

#ifndef FLAGS_HASH_HPP
#define FLAGS_HASH_HPP

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace fl {

/* MurmurHash3's 64-bit finaliser: every bit of k reaches every bit */
inline uint64_t fmix64(uint64_t k) noexcept
{
    k ^= k >> 33;
    k *= UINT64_C(0xff51afd7ed558ccd);
    k ^= k >> 33;
    k *= UINT64_C(0xc4ceb9fe1a85ec53);
    k ^= k >> 33;
    return k;
}

template <class Mix>
class Hasher {
public:
    void u64(uint64_t v) noexcept
    {
        mix_.word(v);
    }

    void str(const char *s, size_t len) noexcept
    {
        mix_.word(len);
        mix_.bytes(s, len);
    }

    /* str() through Mix::bytes_inline() */
    void str_inline(const char *s, size_t len) noexcept
    {
        mix_.word(len);
        mix_.bytes_inline(s, len);
    }

    void str(std::string_view s) noexcept
    {
        str(s.data(), s.size());
    }

    uint64_t final() const noexcept
    {
        return mix_.final();
    }

    /* the state, to go on from later (a prefix hashed once) */
    Mix &mix() noexcept
    {
        return mix_;
    }

private:
    Mix mix_;
};


class Fnv1a64 {
public:
    void word(uint64_t v) noexcept
    {
        for (int i = 0; i < 8; i++) {
            byte(static_cast<unsigned char>(v >> (8 * i)));
        }
    }

    void bytes(const char *s, size_t len) noexcept
    {
        for (size_t i = 0; i < len; i++) {
            byte(static_cast<unsigned char>(s[i]));
        }
    }

    uint64_t final() const noexcept
    {
        return h_;
    }

private:
    void byte(unsigned char c) noexcept
    {
        h_ ^= c;
        h_ *= UINT64_C(0x100000001b3);
    }

    uint64_t h_ = UINT64_C(0xcbf29ce484222325);
};


class Mix64 {
public:
    void word(uint64_t k) noexcept
    {
        k *= c1;
        k = rotl(k, 31);
        k *= c2;
        h_ ^= k;
        h_ = rotl(h_, 27) * 5 + 0x52dce729;
        n_++;
    }

    /* a tail is padded with zeros, which the length before the bytes
     * makes unambiguous */
    void bytes(const char *s, size_t len) noexcept
    {
        size_t i = words(s, len);
        if (i < len) {
            uint64_t k = 0;
            std::memcpy(&k, s + i, len - i);
            word(k);
        }
    }

    /* bytes() with the tail read by tail(): the same words, without a
     * call to memcpy() */
    void bytes_inline(const char *s, size_t len) noexcept
    {
        size_t i = words(s, len);
        if (i < len) {
            word(tail(s + i, len - i));
        }
    }

    uint64_t final() const noexcept
    {
        return fmix64(h_ ^ n_);
    }

    void save(uint64_t *h, uint64_t *n) const noexcept
    {
        *h = h_;
        *n = n_;
    }

    void load(uint64_t h, uint64_t n) noexcept
    {
        h_ = h;
        n_ = n;
    }

private:
    /* The whole words of s, mixed; where the tail begins. */
    size_t words(const char *s, size_t len) noexcept
    {
        size_t i = 0;
        for (; i + 8 <= len; i += 8) {
            uint64_t k;
            std::memcpy(&k, s + i, 8);
            word(k);
        }
        return i;
    }

    /* The r (1 to 7) bytes at p as a little-endian word padded with
     * zeros, as a memcpy() into a zeroed word gives, from two overlapping
     * loads whose common bytes agree: no call to memcpy(), which made the
     * compiler keep the state in memory around it, a store and a load on
     * every word of the ETag's caller (issue 27). */
    static uint64_t tail(const char *p, size_t r) noexcept
    {
        if (r >= 4) {
            return ends<uint32_t>(p, r);
        }
        if (r >= 2) {
            return ends<uint16_t>(p, r);
        }
        return static_cast<unsigned char>(p[0]);
    }

    /* tail() of r bytes (sizeof(W) to 2 * sizeof(W)): the first and the
     * last word, the last shifted to its place */
    template <class W>
    static uint64_t ends(const char *p, size_t r) noexcept
    {
        W a, b;
        std::memcpy(&a, p, sizeof(W));
        std::memcpy(&b, p + r - sizeof(W), sizeof(W));
        return a | static_cast<uint64_t>(b) << (8 * (r - sizeof(W)));
    }

    static constexpr uint64_t c1 = UINT64_C(0x87c37b91114253d5);
    static constexpr uint64_t c2 = UINT64_C(0x4cf5ad432745937f);

    static uint64_t rotl(uint64_t x, int r) noexcept
    {
        return (x << r) | (x >> (64 - r));
    }

    uint64_t h_ = UINT64_C(0x6f66726570000001);    /* "ofrep" */
    uint64_t n_ = 0;
};


using DefHasher = Hasher<Fnv1a64>;
using EtagHasher = Hasher<Mix64>;

} // namespace fl

#endif /* FLAGS_HASH_HPP */
