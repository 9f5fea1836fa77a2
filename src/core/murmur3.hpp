/*
 * murmur3.hpp - streaming MurmurHash3 x86_32 (internal to the core).
 *
 * A flag keeps the state after hashing "name:" so that a bucket costs only
 * the key's bytes on the request path.
 */

#ifndef FLAGS_MURMUR3_HPP
#define FLAGS_MURMUR3_HPP

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace fl {

inline uint32_t rotl32(uint32_t x, int r)
{
    return (x << r) | (x >> (32 - r));
}

inline uint32_t load_le32(const unsigned char *p)
{
    /* Byte by byte: correct on any endianness and alignment. */
    return static_cast<uint32_t>(p[0])
           | static_cast<uint32_t>(p[1]) << 8
           | static_cast<uint32_t>(p[2]) << 16
           | static_cast<uint32_t>(p[3]) << 24;
}

constexpr uint32_t c1 = 0xcc9e2d51;
constexpr uint32_t c2 = 0x1b873593;
constexpr uint32_t n_block = 0xe6546b64;    /* added after each block */
constexpr uint32_t f1 = 0x85ebca6b;         /* the finalizer's two */
constexpr uint32_t f2 = 0xc2b2ae35;

inline uint32_t mix_k(uint32_t k)
{
    k *= c1;
    k = rotl32(k, 15);
    k *= c2;
    return k;
}

/* A mixed block folded into the state h. */
inline uint32_t fold_block(uint32_t h, uint32_t mixed)
{
    h ^= mixed;
    h = rotl32(h, 13);
    return h * 5 + n_block;
}

/* The finalizer after the length is xored in. */
inline uint32_t fmix32(uint32_t h)
{
    h ^= h >> 16;
    h *= f1;
    h ^= h >> 13;
    h *= f2;
    h ^= h >> 16;
    return h;
}

/* Streaming murmur3_x86_32: whole 4-byte blocks are mixed as they arrive,
 * up to 3 leftover bytes wait in tail[] for the next piece. */
struct Murmur3 {
    uint32_t        h = 0;
    size_t          total = 0;
    unsigned char   tail[4] = {0, 0, 0, 0};
    size_t          ntail = 0;

    Murmur3() = default;
    explicit Murmur3(uint32_t seed) : h(seed) {}

    void block(uint32_t k)
    {
        h = fold_block(h, mix_k(k));
    }

    void update(const void *data, size_t len)
    {
        const unsigned char *p = static_cast<const unsigned char *>(data);

        total += len;

        while (ntail != 0 && len != 0) {
            tail[ntail++] = *p++;
            len--;
            if (ntail == 4) {
                block(load_le32(tail));
                ntail = 0;
            }
        }

        for (; len >= 4; p += 4, len -= 4) {
            block(load_le32(p));
        }

        if (len != 0) {
            std::memcpy(tail + ntail, p, len);
            ntail += len;
        }
    }

    uint32_t final()
    {
        uint32_t k = 0;

        switch (ntail) {
        case 3: k ^= static_cast<uint32_t>(tail[2]) << 16; /* fall through */
        case 2: k ^= static_cast<uint32_t>(tail[1]) << 8;  /* fall through */
        case 1: k ^= tail[0];
                h ^= mix_k(k);
                break;
        default: break;
        }

        /* The reference takes the length as a 32-bit int. */
        h ^= static_cast<uint32_t>(total);
        return fmix32(h);
    }
};

} // namespace fl

#endif /* FLAGS_MURMUR3_HPP */
