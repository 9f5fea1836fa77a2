/*
 * sync_health.cpp - how a host stands with the fleet (docs/sync.md): how
 * stale its view of the fleet is, and how long its syncing worker waits
 * before it connects again after a failure.  The glue reads the clock and
 * draws the random number; what they mean is decided here.
 *
 * Decisions:
 *  - staleness counts from the last round completed; before the first
 *    one, from when the host began to sync, so that a host that never
 *    reached the fleet grows stale as one that lost it does, and a host
 *    that just started is fresh (flags_sync_stale_seconds);
 *  - a clock read behind the stored time (another worker's cached clock,
 *    a few milliseconds old) is no staleness, never a wrap;
 *  - the backoff doubles from one interval to the cap, and the wait is
 *    drawn in [backoff/2, backoff] ("equal jitter"): at least half the
 *    backoff, so Redis coming back is not hammered, at most the backoff,
 *    so a host is back within the cap as before.
 */

#include "flags_core.h"

#include <algorithm>


extern "C" {

uint64_t fl_sync_stale_ms(uint64_t now_ms, uint64_t last_ok_ms,
    uint64_t started_ms, int *never) noexcept
{
    uint64_t since = last_ok_ms ? last_ok_ms : started_ms;

    if (never) {
        *never = last_ok_ms == 0;
    }

    if (since == 0 || now_ms <= since) {
        return 0;
    }

    return now_ms - since;
}


uint64_t fl_sync_backoff(uint64_t *backoff_ms, uint64_t interval_ms,
    uint64_t cap_ms, uint64_t random) noexcept
{
    uint64_t b = *backoff_ms ? std::min(*backoff_ms * 2, cap_ms)
                             : interval_ms;

    /* a backoff of 0 (an interval of 0, never configured) waits 0 */
    *backoff_ms = b;

    return b - random % (b / 2 + 1);
}

} // extern "C"
