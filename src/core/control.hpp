/*
 * control.hpp - the precedence of a flag's runtime controls (internal, not
 * part of the C API), shared by fl_control_effective() on the request path
 * and the flags_status writer, which reads a snapshot.
 */

#ifndef FLAGS_CONTROL_HPP
#define FLAGS_CONTROL_HPP

#include "flags_core.h"

namespace fl {

/* The effective percentage: 0 when rolled back (a rollback takes
 * precedence over an override) or overridden off, the override's
 * percentage when one is set, else the configured one. */
inline uint32_t effective_milli(bool rolled_back, fl_override_kind_t kind,
    uint32_t override_milli, uint32_t configured_milli) noexcept
{
    if (rolled_back) {
        return 0;
    }
    switch (kind) {
    case FL_OVERRIDE_OFF:
        return 0;
    case FL_OVERRIDE_PERCENT:
        return override_milli;
    default:
        return configured_milli;
    }
}

} // namespace fl

#endif /* FLAGS_CONTROL_HPP */
