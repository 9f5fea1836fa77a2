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
#else
#define FL_HOT_INLINE  inline
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

} // namespace fl

#endif /* FLAGS_ROLLOUT_HPP */
