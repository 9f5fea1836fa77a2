/*
 * murmur3.cpp - MurmurHash3 x86_32 and the rollout bucket
 * (docs/evaluation.md, bucketing); fl_hash64(), the glue's hash of its
 * own tables' keys.
 *
 * fl_bucket() hashes name ":" key without building the concatenation: the
 * hash is fed in pieces through a small streaming state, so the request
 * path never allocates whatever the key length.
 */

#include "flags_core.h"
#include <cstring>

#include "hash.hpp"
#include "murmur3.hpp"

using fl::Murmur3;

extern "C" {

uint32_t fl_murmur3_32(const void *data, size_t len, uint32_t seed) noexcept
{
    Murmur3 m(seed);

    m.update(data, len);
    return m.final();
}

uint64_t fl_hash64(const void *data, size_t len, uint64_t seed) noexcept
{
    /* one multiply a word, folded with its high half (FxHash's shape),
     * then murmur3's 64-bit finaliser: a table index, not a digest */
    constexpr uint64_t k = UINT64_C(0x9e3779b97f4a7c15);
    const unsigned char *s = static_cast<const unsigned char *>(data);
    uint64_t h = seed ^ (len * k);
    size_t i = 0;

    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        std::memcpy(&w, s + i, 8);
        h = (h ^ w) * k;
        h ^= h >> 32;
    }
    if (i < len) {
        uint64_t w = 0;
        std::memcpy(&w, s + i, len - i);
        h = (h ^ w) * k;
        h ^= h >> 32;
    }

    return fl::fmix64(h);
}

uint32_t fl_bucket(const char *name, size_t name_len, const char *key,
    size_t key_len) noexcept
{
    Murmur3 m(0);

    m.update(name, name_len);
    m.update(":", 1);
    m.update(key, key_len);
    return m.final() % FL_BUCKETS;
}

} // extern "C"
