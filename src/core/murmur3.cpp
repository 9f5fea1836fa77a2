/*
 * murmur3.cpp - MurmurHash3 x86_32 and the rollout bucket
 * (docs/evaluation.md, bucketing).
 *
 * fl_bucket() hashes name ":" key without building the concatenation: the
 * hash is fed in pieces through a small streaming state, so the request
 * path never allocates whatever the key length.
 */

#include "flags_core.h"
#include "murmur3.hpp"

using fl::Murmur3;

extern "C" {

uint32_t fl_murmur3_32(const void *data, size_t len, uint32_t seed) noexcept
{
    Murmur3 m(seed);

    m.update(data, len);
    return m.final();
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
