/*
 * status_json.cpp - one flag's object in the flags_status answer (docs/api.md):
 *
 *   {"name":"x","enabled":true,"rolloutPercentage":25,"segments":["beta"],
 *    "effectiveRolloutPercentage":0,"rolledBack":true,"override":null,
 *    "counters":{"evaluations":N,"enabledEvaluations":N,"errors":N},
 *    "window":{"seconds":60,"enabledEvaluations":N,"errors":N},
 *    "errorsBySource":{"reports":N,"upstream":N},
 *    "cohorts":{"on":{"evaluations":N,"errors":N,"errorPercentage":P},
 *               "off":{"evaluations":N,"errors":N,"errorPercentage":P}},
 *    "rollback":{"at":"2026-11-22T13:05:09.123Z","errors":N,
 *                "enabledEvaluations":N},
 *    "zoneFull":false}
 *
 * "enabled", "rolloutPercentage" and "segments" are the definition's;
 * everything after comes from the state snapshot.  "zoneFull" is true for a
 * flag that found no room in the shared zone (counted == 0): it is
 * evaluated but nothing is counted and it cannot roll back, so its
 * counters read 0.  "errorsBySource" splits "counters"."errors" into
 * accepted reports and upstream errors (flags_upstream_errors);
 * "cohorts" are the requests that read the flag through a variable, by
 * their answer, and their upstream errors; errorPercentage is
 * errors / evaluations in percent, rounded down to 3 decimals, null with
 * no evaluation (docs/variables.md).  Only the public project API is used.
 */

#include "flags_core.h"
#include "control.hpp"
#include "json_writer.hpp"

namespace {

/* Every fixed byte of the object (member names, punctuation, literals),
 * with room to spare: about 480 bytes, plus 12 integers of at most 20
 * digits, 4 percentages of at most 8 bytes and a 24-byte time. */
constexpr size_t fixed_bound = 1024;

/* errors / evaluations in milli-percent, rounded down, at most 100 %. */
uint32_t error_milli(uint64_t errors, uint64_t evaluations) noexcept
{
    if (errors >= evaluations) {
        return FL_MILLI_MAX;
    }
    unsigned __int128 m = static_cast<unsigned __int128>(errors) * FL_MILLI_MAX;
    return static_cast<uint32_t>(m / evaluations);
}

char *put_cohort(char *o, uint64_t evaluations, uint64_t errors) noexcept
{
    o = fl::put_lit(o, "{\"evaluations\":");
    o += fl::put_u64(evaluations, o);
    o = fl::put_lit(o, ",\"errors\":");
    o += fl::put_u64(errors, o);
    o = fl::put_lit(o, ",\"errorPercentage\":");
    if (evaluations == 0) {
        o = fl::put_lit(o, "null}");
    } else {
        o += fl_json_milli(error_milli(errors, evaluations), o);
        *o++ = '}';
    }
    return o;
}

} // namespace

extern "C" {

size_t fl_status_flag_json_bound(const fl_project_t *p, size_t i) noexcept
{
    try {
        fl_flag_info_t info;
        if (fl_project_flag_info(p, i, &info) != 0) {
            return 0;
        }
        size_t n = fixed_bound + fl::str_bound(info.name_len);
        for (size_t j = 0; j < info.nsegments; j++) {
            size_t len = 0;
            if (fl_project_flag_segment(p, i, j, &len) != nullptr) {
                n += fl::str_bound(len) + 1;        /* and a comma */
            }
        }
        return n;
    } catch (...) {
        return 0;
    }
}

size_t fl_status_flag_json(const fl_project_t *p, size_t i,
    const fl_state_snapshot_t *s, int counted, char *buf) noexcept
{
    try {
        fl_flag_info_t info;
        if (fl_project_flag_info(p, i, &info) != 0) {
            return 0;
        }
        char *o = buf;

        o = fl::put_lit(o, "{\"name\":");
        o = fl::put_str(o, info.name, info.name_len);
        o = info.enabled ? fl::put_lit(o, ",\"enabled\":true")
                         : fl::put_lit(o, ",\"enabled\":false");
        o = fl::put_lit(o, ",\"rolloutPercentage\":");
        o += fl_json_milli(info.rollout_milli, o);

        o = fl::put_lit(o, ",\"segments\":[");
        bool first = true;
        for (size_t j = 0; j < info.nsegments; j++) {
            size_t len = 0;
            const char *seg = fl_project_flag_segment(p, i, j, &len);
            if (seg == nullptr) {
                continue;
            }
            if (!first) {
                *o++ = ',';
            }
            first = false;
            o = fl::put_str(o, seg, len);
        }
        *o++ = ']';

        o = fl::put_lit(o, ",\"effectiveRolloutPercentage\":");
        o += fl_json_milli(fl::effective_milli(s->rolled_back != 0,
                                              s->override_kind,
                                              s->override_milli,
                                              info.rollout_milli), o);
        o = s->rolled_back ? fl::put_lit(o, ",\"rolledBack\":true")
                           : fl::put_lit(o, ",\"rolledBack\":false");

        o = fl::put_lit(o, ",\"override\":");
        o = fl::put_override(o, s->override_kind, s->override_milli);

        o = fl::put_lit(o, ",\"counters\":{\"evaluations\":");
        o += fl::put_u64(s->evaluations, o);
        o = fl::put_lit(o, ",\"enabledEvaluations\":");
        o += fl::put_u64(s->enabled_evaluations, o);
        o = fl::put_lit(o, ",\"errors\":");
        o += fl::put_u64(s->errors, o);

        o = fl::put_lit(o, "},\"window\":{\"seconds\":");
        o += fl::put_u64(s->window_seconds, o);
        o = fl::put_lit(o, ",\"enabledEvaluations\":");
        o += fl::put_u64(s->window_enabled, o);
        o = fl::put_lit(o, ",\"errors\":");
        o += fl::put_u64(s->window_errors, o);

        /* read apart from errors: an upstream error counted between the
         * two loads must not make the reports negative */
        uint64_t upstream = s->errors_upstream < s->errors
                            ? s->errors_upstream : s->errors;
        o = fl::put_lit(o, "},\"errorsBySource\":{\"reports\":");
        o += fl::put_u64(s->errors - upstream, o);
        o = fl::put_lit(o, ",\"upstream\":");
        o += fl::put_u64(upstream, o);
        o = fl::put_lit(o, "},\"cohorts\":{\"on\":");
        o = put_cohort(o, s->on_evaluations, s->on_errors);
        o = fl::put_lit(o, ",\"off\":");
        o = put_cohort(o, s->off_evaluations, s->off_errors);

        o = fl::put_lit(o, "},\"rollback\":");
        if (s->rolled_back) {
            o = fl::put_lit(o, "{\"at\":\"");
            o += fl_format_time_ms(s->rollback_at_ms, o);
            o = fl::put_lit(o, "\",\"errors\":");
            o += fl::put_u64(s->rollback_errors, o);
            o = fl::put_lit(o, ",\"enabledEvaluations\":");
            o += fl::put_u64(s->rollback_enabled, o);
            *o++ = '}';
        } else {
            o = fl::put_lit(o, "null");
        }
        o = counted ? fl::put_lit(o, ",\"zoneFull\":false}")
                    : fl::put_lit(o, ",\"zoneFull\":true}");
        return static_cast<size_t>(o - buf);
    } catch (...) {
        return 0;
    }
}

} // extern "C"
