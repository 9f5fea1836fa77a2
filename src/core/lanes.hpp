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

/* Whether fl_flags_answer() evaluates p's segments lazily where lanes run
 * (fl_project_s::val_lazy, unless fl_answer_lazy_set() decided). */
bool answer_lazy(const fl_project_s &p) noexcept;

/* The buckets of chunk c's grouped flags for the caller km was prepared
 * for: out[slot] for each flag's fl_project_s::lane_slot (out holds
 * lane_chunk_slots).  Only when lanes_ready(). */
void lane_buckets(const fl_project_s &p, size_t c, const KeyMix &km,
    uint32_t *out) noexcept;

/* The values of word w's flags (64 from w * 64) for the caller whose
 * buckets lane_buckets() left in lanes (holding lane_chunk_slots + 1,
 * lanes[lane_none] == 0) and whose segments' results are seg_yes (every
 * segment of fl_project_s::val_segs evaluated): bit j is flag w * 64 + j
 * on.  eff and sw: the word's percentages in force and switches, 64 of
 * each readable.  *redo gets the flags this arithmetic cannot decide (not
 * val_fast, or a bucket outside the groups: a percentage strictly between
 * 0 and 100 for a flag out of every group); their bits are to be replaced
 * by the one evaluation's.  For the others the rule is simple_value()'s
 * (evaluate.cpp): off in the file, rolled back or overridden off -> off;
 * segments, none matched -> off; 100 % or more -> on; else the bucket
 * below the percentage.  *configured gets the flags whose percentage in
 * force is the configured one (fl_project_s::val_rollout).  Only when
 * lanes_ready(). */
uint64_t lane_values(const fl_project_s &p, size_t w, const uint32_t *eff,
    const uint8_t *sw, const uint32_t *lanes, uint64_t seg_yes,
    uint64_t *redo, uint64_t *configured) noexcept;

} // namespace fl

#endif /* FLAGS_LANES_HPP */
