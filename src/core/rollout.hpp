/*
 * rollout.hpp - the rollout rule (docs/evaluation.md), internal to the
 * core: is the caller inside a flag's percentage?  One definition for
 * the evaluation (evaluate.cpp) and the SDK answer (sdk.cpp), which
 * resolves each rollout on the server.
 */

#ifndef FLAGS_ROLLOUT_HPP
#define FLAGS_ROLLOUT_HPP

#include "flags_core.h"
#include "project.hpp"

namespace fl {

/* The request path's helpers are inlined into the evaluation loop
 * whatever the compiler thinks of their other callers. */
#if defined(__GNUC__)
#define FL_HOT_INLINE  inline __attribute__((always_inline))
#define FL_HOT_INLINE_LAMBDA  __attribute__((always_inline))
#else
#define FL_HOT_INLINE  inline
#define FL_HOT_INLINE_LAMBDA
#endif

FL_HOT_INLINE bool in_rollout(const fl::Flag &f, uint32_t p,
    const fl_user_t *u)
{
    if (p >= FL_MILLI_MAX) {
        return true;
    }
    if (p == 0 || u == nullptr) {
        return false;
    }

    const char *key;
    size_t key_len;

    if (f.stickiness.empty()) {
        key = u->user_id;
        key_len = u->user_id_len;
    } else {
        const fl_trait_t *t = fl_user_trait(u, f.stickiness.data(),
                                            f.stickiness.size());
        key = t ? t->value : nullptr;
        key_len = t ? t->value_len : 0;
    }
    /* An empty key is no key, as "userId=" is no userId: otherwise
     * every caller with an empty value would share one bucket. */
    if (key == nullptr || key_len == 0) {
        return false;
    }

    /* fl_bucket(name, key) with "name:" already hashed at load time */
    fl::Murmur3 m = f.bucket_prefix;
    m.update(key, key_len);
    return m.final() % FL_BUCKETS < p;
}

/*
 * The same bucket, cheaper when one key meets many flags: murmur3 mixes
 * each 4-byte block of its input on its own (mix_k()) before folding it
 * into the state, and the key's blocks are the same for every flag whose
 * "name:" leaves the same number of bytes waiting (its length mod 4).  So
 * an evaluation mixes the caller's blocks once for each of the 4
 * alignments, and a flag only folds them in: the published hash, its
 * vectors and every bucket are unchanged (t/unit/test_hash.c compares
 * the two for every alignment and key length).  Keys of 4 to 64 bytes;
 * others take in_rollout()'s path.
 */
struct KeyMix {
    static constexpr size_t max_len = 64;

    uint32_t  len = 0;
    uint32_t  head[4];               /* a > 0: the key's first 4 - a bytes,
                                        placed after a waiting bytes */
    uint32_t  blocks[4][max_len / 4];
    uint8_t   nblocks[4];
    uint32_t  tail[4];               /* mixed last bytes, 0: none */
    bool      has_tail[4];

    static bool fits(size_t n) { return n >= 4 && n <= max_len; }

    void prepare(const char *key, size_t n)
    {
        const unsigned char *k = reinterpret_cast<const unsigned char *>(key);

        len = static_cast<uint32_t>(n);
        for (unsigned a = 0; a < 4; a++) {
            size_t o = a == 0 ? 0 : 4 - a;
            uint32_t h = 0;
            for (size_t i = 0; i < o; i++) {
                h |= static_cast<uint32_t>(k[i]) << (8 * (a + i));
            }
            head[a] = h;

            size_t nb = (n - o) / 4;
            for (size_t j = 0; j < nb; j++) {
                blocks[a][j] = mix_k(load_le32(k + o + 4 * j));
            }
            nblocks[a] = static_cast<uint8_t>(nb);

            size_t r = (n - o) % 4;
            uint32_t t = 0;
            for (size_t i = 0; i < r; i++) {
                t |= static_cast<uint32_t>(k[o + 4 * nb + i]) << (8 * i);
            }
            has_tail[a] = r != 0;
            tail[a] = r != 0 ? mix_k(t) : 0;
        }
    }

    /* murmur3_x86_32(prefix bytes, then the key) % FL_BUCKETS */
    uint32_t bucket(const Murmur3 &prefix) const
    {
        uint32_t waiting = 0;
        for (size_t i = 0; i < prefix.ntail; i++) {
            waiting |= static_cast<uint32_t>(prefix.tail[i]) << (8 * i);
        }
        return bucket(prefix.h, static_cast<unsigned>(prefix.ntail),
                      waiting, static_cast<uint32_t>(prefix.total));
    }

    /* The same from the prefix's parts as FlagHot keeps them: state h,
     * a waiting bytes packed little-endian, total bytes hashed. */
    FL_HOT_INLINE uint32_t bucket(uint32_t h, unsigned a, uint32_t waiting,
        uint32_t total) const
    {
        if (a != 0) {
            h = fold_block(h, mix_k(head[a] | waiting));
        }
        for (unsigned j = 0; j < nblocks[a]; j++) {
            h = fold_block(h, blocks[a][j]);
        }
        if (has_tail[a]) {
            h ^= tail[a];
        }

        h ^= total + len;
        return fmix32(h) % FL_BUCKETS;
    }
};

/* in_rollout() with the caller's id mixed once (km, prepared for u's
 * userId), for a flag keyed by the userId. */
FL_HOT_INLINE bool in_rollout_mixed(const fl::Flag &f, uint32_t p,
    const fl_user_t *u, const KeyMix *km)
{
    if (km == nullptr || !f.stickiness.empty() || p >= FL_MILLI_MAX
        || p == 0)
    {
        return in_rollout(f, p, u);
    }
    return km->bucket(f.bucket_prefix) < p;
}

} // namespace fl

#endif /* FLAGS_ROLLOUT_HPP */
