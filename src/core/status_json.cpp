/*
 * status_json.cpp - one flag's object in the flags_status answer (docs/api.md):
 *
 *   {"name":"x","enabled":true,"rolloutPercentage":25,"segments":["beta"],
 *    "rules":[...],"targets":{"on":N,"off":N},   (a flag that has them)
 *    "effectiveRolloutPercentage":0,"rolledBack":true,"override":null,
 *    "counters":{"evaluations":N,"enabledEvaluations":N,"errors":N},
 *    "window":{"seconds":60,"enabledEvaluations":N,"errors":N,"sources":N,
 *              "perSecond":[[0,N,N],[3,N,N],...]},
 *    "rollbackRule":{"enabled":true,"minErrors":20,"rate":10,"window":60,
 *                    "minSources":1,
 *                    "waitingFor":{"errors":N,"rateErrors":N,"sources":N}},
 *    "errorsBySource":{"reports":N,"upstream":N},
 *    "cohorts":{"on":{"evaluations":N,"errors":N,"errorPercentage":P},
 *               "off":{"evaluations":N,"errors":N,"errorPercentage":P}},
 *    "rollback":{"at":"2026-11-22T13:05:09.123Z","errors":N,
 *                "enabledEvaluations":N,"sources":N,"decidedBy":"rule"},
 *    "definedAt":"2026-11-22T13:00:00.000Z",   (null: unknown)
 *    "ramp":{...},                      (a ramped flag only, docs/ramps.md)
 *    "zoneFull":false}
 *
 * "enabled", "rolloutPercentage" and "segments" are the definition's;
 * everything after comes from the state snapshot.  "zoneFull" is true for a
 * flag that found no room in the shared zone (counted == 0): it is
 * evaluated but nothing is counted and it cannot roll back, so its
 * counters read 0.  "perSecond" is the window second by second, the
 * seconds with a count only, newest first: [seconds before the reading,
 * enabled evaluations, errors], over the last min(window, 60) seconds
 * (the page draws the last minute from its first reading).
 * "errorsBySource" splits "counters"."errors" into
 * accepted reports and upstream errors (flags_upstream_errors);
 * "cohorts" are every evaluation of the flag by its answer, with their
 * errors (reports by their cohort, upstream errors by the request's
 * answer); errorPercentage is
 * errors / evaluations in percent, rounded down to 3 decimals, null with
 * no evaluation (docs/http-api.md).  "rollbackRule" is the policy in
 * force and what the window still lacks before it trips ("waitingFor" is
 * null while the flag is rolled back, the rule is off or the zone was
 * full); "decidedBy" is
 * "rule" (this host), "fleet" (flags_sync) or null (restored from the
 * state file).  Only the public project API is used.
 */

#include "flags_core.h"
#include "control.hpp"
#include "json_writer.hpp"

#include <cstring>

namespace {

/* Every fixed byte of the object (member names, punctuation, literals),
 * with room to spare: about 700 bytes, plus 20 integers of at most 20
 * digits, 5 percentages of at most 8 bytes and a 24-byte time. */
constexpr size_t fixed_bound = 1536;

/* "perSecond": [59,4294967295,4294967295], a second at most */
constexpr size_t series_bound = FL_SERIES_MAX * 27 + 16;

/* errors / evaluations in milli-percent, rounded down, at most 100 %. */
uint32_t error_milli(uint64_t errors, uint64_t evaluations) noexcept
{
    if (errors >= evaluations) {
        return FL_MILLI_MAX;
    }
    unsigned __int128 m = static_cast<unsigned __int128>(errors) * FL_MILLI_MAX;
    return static_cast<uint32_t>(m / evaluations);
}

/* ,"perSecond":[[age,enabled,errors],...] newest first, busy seconds only */
char *put_series(char *o, const fl_series_t *t, uint32_t window) noexcept
{
    o = fl::put_lit(o, ",\"perSecond\":[");
    if (t != nullptr) {
        uint32_t len = window < t->seconds ? window : t->seconds;
        bool first = true;
        if (len > FL_SERIES_MAX) {
            len = FL_SERIES_MAX;
        }
        for (uint32_t k = 0; k < len; k++) {
            if (t->enabled[k] == 0 && t->errors[k] == 0) {
                continue;
            }
            o = first ? fl::put_lit(o, "[") : fl::put_lit(o, ",[");
            first = false;
            o += fl::put_u64(k, o);
            *o++ = ',';
            o += fl::put_u64(t->enabled[k], o);
            *o++ = ',';
            o += fl::put_u64(t->errors[k], o);
            *o++ = ']';
        }
    }
    *o++ = ']';
    return o;
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

/* ,"rollbackRule":{...}: the policy in force and what the window lacks
 * (fl_rollback_waiting()). */
char *put_rule(char *o, const fl_state_snapshot_t *s, bool counted) noexcept
{
    const fl_rollback_policy_t &p = s->policy;
    bool on = p.mode == FL_ROLLBACK_ON;

    o = fl::put_lit(o, ",\"rollbackRule\":{\"enabled\":");
    o = on ? fl::put_lit(o, "true") : fl::put_lit(o, "false");
    o = fl::put_lit(o, ",\"minErrors\":");
    o += fl::put_u64(p.min_errors, o);
    o = fl::put_lit(o, ",\"rate\":");
    o += fl_json_milli(p.rate_milli, o);
    o = fl::put_lit(o, ",\"window\":");
    o += fl::put_u64(p.window, o);
    o = fl::put_lit(o, ",\"minSources\":");
    o += fl::put_u64(fl::min_sources_of(p), o);
    o = fl::put_lit(o, ",\"waitingFor\":");
    if (!on || s->rolled_back || !counted) {
        return fl::put_lit(o, "null}");
    }
    fl_rollback_wait_t w;
    fl_rollback_waiting(s->window_errors, s->window_enabled, s->window_sources,
                        &p, &w);
    o = fl::put_lit(o, "{\"errors\":");
    o += fl::put_u64(w.errors, o);
    o = fl::put_lit(o, ",\"rateErrors\":");
    o += fl::put_u64(w.rate_errors, o);
    o = fl::put_lit(o, ",\"sources\":");
    o += fl::put_u64(w.sources, o);
    return fl::put_lit(o, "}}");
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
        size_t n = fixed_bound + series_bound + fl::str_bound(info.name_len);
        if (fl_project_flag_ramp(p, i) != nullptr) {
            n += FL_RAMP_JSON_BOUND;
        }
        n += fl_project_flag_targeting_json_bound(p, i);
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
        o += fl_project_flag_targeting_json(p, i, o);

        o = fl::put_lit(o, ",\"effectiveRolloutPercentage\":");
        o += fl_json_milli(fl::effective_milli(s->rolled_back != 0,
                                              s->override_kind,
                                              s->override_milli,
                                              s->ramp_in_force
                                              ? s->ramp_milli
                                              : info.rollout_milli), o);
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
        o = fl::put_lit(o, ",\"sources\":");
        o += fl::put_u64(s->window_sources, o);
        o = put_series(o, s->series, s->window_seconds);
        *o++ = '}';
        o = put_rule(o, s, counted != 0);

        /* read apart from errors: an upstream error counted between the
         * two loads must not make the reports negative */
        uint64_t upstream = s->errors_upstream < s->errors
                            ? s->errors_upstream : s->errors;
        o = fl::put_lit(o, ",\"errorsBySource\":{\"reports\":");
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
            o = fl::put_lit(o, ",\"sources\":");
            o += fl::put_u64(s->rollback_sources, o);
            o = fl::put_lit(o, ",\"decidedBy\":");
            const char *by = fl::decided_name(s->rollback_by);
            o = by != nullptr ? fl::put_str(o, by, std::strlen(by))
                              : fl::put_lit(o, "null");
            *o++ = '}';
        } else {
            o = fl::put_lit(o, "null");
        }
        o = fl::put_lit(o, ",\"definedAt\":");
        if (s->defined_ms) {
            *o++ = '"';
            o += fl_format_time_ms(s->defined_ms, o);
            *o++ = '"';
        } else {
            o = fl::put_lit(o, "null");
        }

        const fl_ramp_def_t *ramp = fl_project_flag_ramp(p, i);
        if (ramp != nullptr) {
            o = fl::put_lit(o, ",\"ramp\":");
            if (s->ramp != nullptr) {
                o += fl_ramp_status_json(ramp, s->ramp, s->now_ms,
                                         s->rolled_back, o);
            } else {
                o = fl::put_lit(o, "null");
            }
        }
        o = counted ? fl::put_lit(o, ",\"zoneFull\":false}")
                    : fl::put_lit(o, ",\"zoneFull\":true}");
        return static_cast<size_t>(o - buf);
    } catch (...) {
        return 0;
    }
}

} // extern "C"

/* ------------------------------------------------------------ events */

namespace {

const char *const event_kinds[FL_EVENT_KINDS] = {
    "rollback", "clear", "override", "overrideRemoved", "stage", "ramp",
    "definition",
};

const char *const event_by[] = {"rule", "fleet", "admin", "definition"};

/* {"seq":..,"at":"..","kind":"..","project":"..","flag":"..","by":"..",
 *  "who":".."|null,"detail":".."} without the strings */
constexpr size_t event_fixed = 160;

size_t clamp(uint32_t len, size_t max)
{
    return len < max ? len : max;
}

} // namespace

extern "C" {

size_t fl_events_json_bound(size_t n) noexcept
{
    size_t one = event_fixed
                 + fl::str_bound(FL_MAX_PROJECT_NAME_LEN)
                 + fl::str_bound(FL_MAX_FLAG_NAME_LEN)
                 + fl::str_bound(FL_EVENT_WHO_MAX)
                 + fl::str_bound(FL_EVENT_DETAIL_MAX);
    return sizeof("\"events\":[]") + n * (one + 1);
}

size_t fl_events_json(const fl_event_t *e, size_t n, char *buf) noexcept
{
    char *o = fl::put_lit(buf, "\"events\":[");
    uint64_t last = UINT64_MAX;
    bool first = true;

    /* newest first: the largest seq below the last one written, n times
     * at most (n is small) */
    for (size_t k = 0; k < n; k++) {
        const fl_event_t *best = nullptr;
        for (size_t i = 0; i < n; i++) {
            if (e[i].seq != 0 && e[i].seq < last
                && (best == nullptr || e[i].seq > best->seq))
            {
                best = &e[i];
            }
        }
        if (best == nullptr) {
            break;
        }
        last = best->seq;

        if (!first) {
            *o++ = ',';
        }
        first = false;
        o = fl::put_lit(o, "{\"seq\":");
        o += fl::put_u64(best->seq, o);
        o = fl::put_lit(o, ",\"at\":\"");
        o += fl_format_time_ms(best->at_ms, o);
        o = fl::put_lit(o, "\",\"kind\":");
        const char *kind = best->kind < FL_EVENT_KINDS
                           ? event_kinds[best->kind] : "unknown";
        o = fl::put_str(o, kind, std::strlen(kind));
        o = fl::put_lit(o, ",\"project\":");
        o = fl::put_str(o, best->project,
                        clamp(best->project_len, FL_MAX_PROJECT_NAME_LEN));
        o = fl::put_lit(o, ",\"flag\":");
        o = fl::put_str(o, best->flag,
                        clamp(best->flag_len, FL_MAX_FLAG_NAME_LEN));
        o = fl::put_lit(o, ",\"by\":");
        const char *by = best->by < 4 ? event_by[best->by] : "rule";
        o = fl::put_str(o, by, std::strlen(by));
        o = fl::put_lit(o, ",\"who\":");
        if (best->who_len) {
            o = fl::put_str(o, best->who,
                            clamp(best->who_len, FL_EVENT_WHO_MAX));
        } else {
            o = fl::put_lit(o, "null");
        }
        o = fl::put_lit(o, ",\"detail\":");
        o = fl::put_str(o, best->detail,
                        clamp(best->detail_len, FL_EVENT_DETAIL_MAX));
        *o++ = '}';
    }
    *o++ = ']';
    return static_cast<size_t>(o - buf);
}

} // extern "C"
