/*
 * control.hpp - the precedence of a flag's runtime controls (internal, not
 * part of the C API), shared by fl_control_effective() on the request path
 * and the flags_status writer, which reads a snapshot.
 */

#ifndef FLAGS_CONTROL_HPP
#define FLAGS_CONTROL_HPP

#include "flags_core.h"

#include <cstring>
#include <initializer_list>

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

/* The min_sources a policy decides with: a 0 (a policy not resolved)
 * reads as 1, as flags_status and flags_metrics show it. */
inline uint32_t min_sources_of(const fl_rollback_policy_t &p) noexcept
{
    return p.min_sources == 0 ? 1 : p.min_sources;
}

/* Who decided a rollback, as flags_status and the state file write it:
 * "rule", "fleet", or nullptr (unknown: written as null, or left out). */
inline const char *decided_name(fl_decided_t by) noexcept
{
    switch (by) {
    case FL_DECIDED_RULE:
        return "rule";
    case FL_DECIDED_FLEET:
        return "fleet";
    default:
        return nullptr;
    }
}

/* The reverse, for a name read back; FL_DECIDED_UNKNOWN when it is
 * neither. */
inline fl_decided_t decided_from(const char *s, size_t len) noexcept
{
    for (fl_decided_t by : {FL_DECIDED_RULE, FL_DECIDED_FLEET}) {
        const char *name = decided_name(by);
        if (std::strlen(name) == len && std::memcmp(name, s, len) == 0) {
            return by;
        }
    }
    return FL_DECIDED_UNKNOWN;
}

} // namespace fl

#endif /* FLAGS_CONTROL_HPP */
