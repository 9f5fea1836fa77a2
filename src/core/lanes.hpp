/*
 * lanes.hpp - the buckets of many flags for one caller, 8 at a time
 * (internal to the core).
 *
 * GET /flags of a large project spends most of its evaluation in
 * murmur3: one hash a flag, each a chain of multiplications that waits on
 * itself.  The flags of one alignment (fl::LaneGroup) fold the same mixed
 * blocks of the caller's id (fl::KeyMix), so 8 of them can run the same
 * instructions side by side in one AVX2 register.  The result is the
 * published bucket, bit for bit: murmur3_x86_32("name:" + userId) %
 * FL_BUCKETS (t/unit/test_answer.c compares every alignment and id length
 * with the scalar path).  Without AVX2 (another CPU, another architecture,
 * or turned off by fl_lanes_set()), lanes_ready() is false and every
 * bucket takes the scalar path.
 */

#ifndef FLAGS_LANES_HPP
#define FLAGS_LANES_HPP

#include "project.hpp"
#include "rollout.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#define FL_LANES_AVX2 1
#endif

namespace fl {

/* Whether lane_buckets() may run here: the CPU has AVX2 and no test
 * turned it off. */
bool lanes_ready() noexcept;

/* The buckets of chunk c's grouped flags for the caller km was prepared
 * for: out[slot] for each flag's fl_project_s::lane_slot (out holds
 * lane_chunk_slots).  Only when lanes_ready(). */
void lane_buckets(const fl_project_s &p, size_t c, const KeyMix &km,
    uint32_t *out) noexcept;

} // namespace fl

#endif /* FLAGS_LANES_HPP */
