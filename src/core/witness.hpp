/*
 * witness.hpp - the ramp's side of the witnesses (witness.cpp), for
 * ramp.cpp; the counting side is in flags_core.h.
 */

#ifndef FLAGS_WITNESS_HPP
#define FLAGS_WITNESS_HPP

#include "flags_core.h"

/* The backstop's last k closed ticks (at most FL_WITNESS_RING) and its
 * open one, added to *sum; 0 when its first tick has not begun. */
int fl_witness_recent(const fl_witness_t *w, const fl_ramp_input_t *in,
    uint64_t k, fl_witness_tick_t *sum) noexcept;

#endif
