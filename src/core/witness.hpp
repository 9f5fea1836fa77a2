/*
 * witness.hpp - the ramp's side of the witnesses (witness.cpp), for
 * ramp.cpp; the counting side is in flags_core.h.
 */

#ifndef FLAGS_WITNESS_HPP
#define FLAGS_WITNESS_HPP

#include "flags_core.h"

/* A tick closed with these counts: into the ring.  Returns the number of
 * distinct on witnesses of the evidence of epoch. */
uint64_t fl_witness_tick_close(fl_witness_t *w, uint64_t epoch,
    uint64_t n1, uint64_t n0, uint64_t w1, uint64_t w0) noexcept;

/* Adds the last k closed ticks (at most FL_WITNESS_RING) to *sum. */
void fl_witness_recent(const fl_witness_t *w, uint64_t k,
    fl_witness_tick_t *sum) noexcept;

#endif
