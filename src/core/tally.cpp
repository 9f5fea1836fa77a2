/*
 * tally.cpp - per-flag counts of many answers' values (flags_core.h,
 * fl_tally_add()): GET /flags counts, for every flag, how many answers
 * showed it on.  An answer's values are a bit set, one bit a flag; the
 * tally keeps, for each word of 64 flags, FL_TALLY_PLANES words of which
 * plane p holds bit p of each flag's count.  Adding a bit set to a word
 * is the schoolbook addition done on 64 counters at once: the sum bit is
 * plane ^ carry, the next carry plane & carry, until no carry is left
 * (two planes on average).  A drain reads each flag's count back, bit by
 * bit of its planes, adds it to the caller's counts and starts again from
 * zero.  The caller drains before FL_TALLY_MAX additions would overflow
 * the top plane (t/unit/test_answer.c checks the counts against plain
 * increments, at that bound and across drains).
 */

#include "flags_core.h"

#include <cstring>

extern "C" {

void fl_tally_add(uint64_t *tally, const uint64_t *bits, size_t n) noexcept
{
    for (size_t w = 0; w < FL_BIT_WORDS(n); w++) {
        uint64_t carry = bits[w];
        uint64_t *plane = tally + w * FL_TALLY_PLANES;

        for (unsigned p = 0; carry != 0 && p < FL_TALLY_PLANES; p++) {
            uint64_t t = plane[p];
            plane[p] = t ^ carry;
            carry &= t;
        }
    }
}

void fl_tally_drain(uint64_t *tally, size_t n, uint32_t *counts,
    size_t stride) noexcept
{
    for (size_t w = 0; w < FL_BIT_WORDS(n); w++) {
        uint64_t *plane = tally + w * FL_TALLY_PLANES;
        uint64_t any = 0;
        unsigned top = 0;

        /* only the planes below the highest one in use: a fold after a
         * few answers reads two or three, not eight */
        for (unsigned p = 0; p < FL_TALLY_PLANES; p++) {
            any |= plane[p];
            top = plane[p] != 0 ? p + 1 : top;
        }
        for (uint64_t x = any; x != 0; x &= x - 1) {
            unsigned i = static_cast<unsigned>(__builtin_ctzll(x));
            uint32_t c = 0;

            for (unsigned p = 0; p < top; p++) {
                c |= static_cast<uint32_t>((plane[p] >> i) & 1) << p;
            }
            counts[(w * 64 + i) * stride] += c;
        }
        std::memset(plane, 0, top * sizeof(uint64_t));
    }
}

} // extern "C"
