/*
 * metrics.cpp - flags_metrics: the Prometheus text exposition format 0.0.4
 * (docs/metrics.md).
 *
 * The text format wants every sample of a family together, after the
 * family's one HELP and one TYPE line, so the writer goes over the flags
 * once per family.  Names follow Prometheus's conventions: counters end
 * in _total, a percentage is a ratio in [0, 1], a time is in seconds.
 * Label values are escaped (backslash, double quote, newline) although
 * project and flag names cannot hold those bytes today.  Only the public
 * project API is used; the caller sizes the buffer with fl_metrics_bound().
 */

#include "flags_core.h"
#include "control.hpp"
#include "json_writer.hpp"

#include <cstdio>
#include <cstring>

namespace {

/* The error codes of fl_refused_t, in its order. */
constexpr const char *refused_codes[FL_REFUSED_MAX] = {
    "unauthorized",
    "invalid_token",
    "method_not_allowed",
    "unsupported_media_type",
    "payload_too_large",
    "invalid_json",
    "invalid_field",
    "unknown_flag",
    "internal_error",
};

/* A family: its name, type and help, written once before its samples. */
struct family {
    const char *name;
    const char *type;
    const char *help;
};

/* Per-flag families, in the order they are written. */
enum {
    F_EVALUATIONS,
    F_ERRORS,
    F_COHORT_REQUESTS,
    F_COHORT_ERRORS,
    F_ROLLBACKS,
    F_ROLLED_BACK,
    F_ROLLBACK_TIME,
    F_ENABLED,
    F_CONFIGURED_RATIO,
    F_RATIO,
    F_OVERRIDE,
    F_OVERRIDE_RATIO,
    F_WINDOW_ENABLED,
    F_WINDOW_ERRORS,
    F_WINDOW_SOURCES,
    F_RULE_ENABLED,
    F_RULE_MIN_ERRORS,
    F_RULE_RATE,
    F_RULE_WINDOW,
    F_RULE_MIN_SOURCES,
    /* ramped flags only (docs/ramps.md) */
    F_RAMP_STAGE,
    F_RAMP_RATIO,
    F_RAMP_STATE,
    F_RAMP_EVIDENCE,
    F_RAMP_CHANGES,
    F_UNCOUNTED,
    F_REFUSED,
    F_ZONE_BYTES,
    F_PUSH,
    /* flags_sync (docs/sync.md): only when it is configured */
    F_SYNC_CONNECTED,
    F_SYNC_LAST_SUCCESS,
    F_SYNC_LAG,
    F_SYNC_FAILURES,
    F_SYNC_STALE,
    F_SYNC_INTERVAL,
    /* a project's definitions (docs/definitions.md) */
    F_DEFS_VERSION,
    F_DEFS_REJECTED,
    F_MAX
};

constexpr family families[F_MAX] = {
    {"flags_evaluations_total", "counter",
     "Evaluations of the flag, by answer (on, off)."},
    {"flags_errors_total", "counter",
     "Errors counted against the flag, by source: error reports and "
     "upstream errors of requests that read it."},
    {"flags_cohort_requests_total", "counter",
     "Evaluations of the flag on every path, by answer: its cohorts."},
    {"flags_cohort_errors_total", "counter",
     "Errors of the flag's cohorts: reports by the cohort they belong to, "
     "upstream errors by the request's answer."},
    {"flags_rollbacks_total", "counter",
     "Automatic rollbacks that took effect on this host since the zone was "
     "created, by who decided them: this host's rule or the fleet's."},
    {"flags_rolled_back", "gauge",
     "1 while the flag is rolled back, else 0."},
    {"flags_rollback_timestamp_seconds", "gauge",
     "When the flag's current rollback tripped, in seconds since the "
     "epoch; only for flags rolled back now."},
    {"flags_enabled", "gauge",
     "1 when the flags file enables the flag, 0 when it switches it off."},
    {"flags_configured_rollout_ratio", "gauge",
     "The rollout percentage of the flags file, as a ratio from 0 to 1."},
    {"flags_rollout_ratio", "gauge",
     "The effective rollout percentage (after a rollback or an override), "
     "as a ratio from 0 to 1."},
    {"flags_override", "gauge",
     "1 for the kind of override set on the flag (off, percent), else 0."},
    {"flags_override_rollout_ratio", "gauge",
     "The percentage of a percent override, as a ratio from 0 to 1; only "
     "for flags with one."},
    {"flags_window_enabled_evaluations", "gauge",
     "Evaluations that answered on within the rollback window."},
    {"flags_window_errors", "gauge",
     "Errors within the rollback window."},
    {"flags_window_sources", "gauge",
     "Distinct sources (users, else client addresses) of the errors within "
     "the rollback window, counted up to 64."},
    {"flags_rollback_rule_enabled", "gauge",
     "1 when the automatic rollback rule applies to the flag, else 0."},
    {"flags_rollback_min_errors", "gauge",
     "The rule's min_errors: errors in the window before a rollback."},
    {"flags_rollback_rate_ratio", "gauge",
     "The rule's rate: errors per enabled evaluation in the window before "
     "a rollback, as a ratio."},
    {"flags_rollback_window_seconds", "gauge",
     "The rule's window."},
    {"flags_rollback_min_sources", "gauge",
     "The rule's min_sources: distinct sources of the window's errors "
     "before a rollback."},
    {"flags_ramp_stage", "gauge",
     "The stage a ramped flag is at, counted from 0."},
    {"flags_ramp_rollout_ratio", "gauge",
     "The percentage of the ramp's stage, as a ratio from 0 to 1."},
    {"flags_ramp_state", "gauge",
     "1 for the state the ramp is in (running, holding, paused, done, "
     "rolledBack), else 0."},
    {"flags_ramp_evidence_ratio", "gauge",
     "The regression rule's evidence as a share of its bound 1/alpha: "
     "the flag is rolled back when it reaches 1."},
    {"flags_ramp_stage_changes_total", "counter",
     "Stages the ramp moved on, since it (re)started."},
    {"flags_zone_uncounted_flags", "gauge",
     "Flags that found no room in the shared zone: evaluated, never "
     "counted, never rolled back."},
    {"flags_reports_refused_total", "counter",
     "Error reports refused, by the error code of the answer."},
    {"flags_zone_bytes", "gauge",
     "Bytes of the shared zone's pages, by state (used, free)."},
    {"flags_push_connections", "gauge",
     "Open live push connections (SSE and WebSocket)."},
    {"flags_sync_connected", "gauge",
     "1 while the host's syncing worker is connected to Redis, else 0."},
    {"flags_sync_last_success_timestamp_seconds", "gauge",
     "When the host last completed a sync round with Redis, in seconds "
     "since the epoch; 0 before the first."},
    {"flags_sync_lag_seconds", "gauge",
     "Seconds since the host last completed a sync round with Redis."},
    {"flags_sync_failures_total", "counter",
     "Sync rounds and connects that failed (Redis away, slow, refusing)."},
    {"flags_sync_stale_seconds", "gauge",
     "Seconds since the host last completed a sync round with Redis, on a "
     "clock that does not step; before the first, since the host began to "
     "sync."},
    {"flags_sync_interval_seconds", "gauge",
     "The sync interval of flags_sync (interval=), in seconds."},
    {"flags_definitions_version", "gauge",
     "The version of the project's definitions this host serves (a flags "
     "file: 1)."},
    {"flags_definitions_rejected_total", "counter",
     "Versions of the project's definitions refused, by reason (invalid, "
     "too_large, conflict, signature)."},
};

const char *const defs_rejected_codes[FL_DEFS_REJECTED_MAX] = {
    "invalid", "too_large", "conflict", "signature"
};

/* The most samples a flag has in each per-flag family. */
constexpr size_t flag_samples[F_UNCOUNTED] = {
    2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 5, 1, 1
};

/* A sample line but the family's name and the two names: the most is
 * {project="",flag="",source="upstream"} VALUE\n, 40 bytes and the
 * value (a uint64, a time 18446744073709551.615, a ratio 0.12345). */
constexpr size_t sample_fixed = 48;
constexpr size_t value_max = fl::u64_digits + 4;

constexpr size_t cstr_len(const char *s)
{
    size_t n = 0;
    while (s[n] != '\0') {
        n++;
    }
    return n;
}

/* The families' names with their lengths, counted once. */
struct name_table {
    size_t len[F_MAX];
    constexpr name_table() : len()
    {
        for (int f = 0; f < F_MAX; f++) {
            len[f] = cstr_len(families[f].name);
        }
    }
};
constexpr name_table names;

char *put_cstr(char *o, const char *s)
{
    size_t n = std::strlen(s);
    std::memcpy(o, s, n);
    return o + n;
}

char *put_name(char *o, int f)
{
    std::memcpy(o, families[f].name, names.len[f]);
    return o + names.len[f];
}

/* The bytes a label value escapes: backslash, double quote, newline. */
struct escape_table {
    bool special[256];
    constexpr escape_table() : special()
    {
        special[static_cast<unsigned char>('\\')] = true;
        special[static_cast<unsigned char>('"')] = true;
        special[static_cast<unsigned char>('\n')] = true;
    }
};
constexpr escape_table escapes;

/* The length of s's leading run that needs no escaping. */
inline size_t clean_run(const char *s, size_t len)
{
    size_t i = 0;
    while (i < len && !escapes.special[static_cast<unsigned char>(s[i])]) {
        i++;
    }
    return i;
}

/* milli-percent as a ratio: 25000 -> 0.25, 100000 -> 1, 12345 -> 0.12345 */
char *put_ratio(char *o, uint32_t milli)
{
    if (milli >= FL_MILLI_MAX) {
        *o++ = '1';
        return o;
    }
    *o++ = '0';
    if (milli == 0) {
        return o;
    }
    char digits[5];
    fl::put_padded(milli, 5, digits);
    size_t n = 5;
    while (digits[n - 1] == '0') {
        n--;
    }
    *o++ = '.';
    std::memcpy(o, digits, n);
    return o + n;
}

/* ms since the epoch as seconds: 1790000000123 -> 1790000000.123 */
char *put_seconds(char *o, uint64_t ms)
{
    o += fl::put_u64(ms / 1000, o);
    *o++ = '.';
    fl::put_padded(ms % 1000, 3, o);
    return o + 3;
}

char *put_header(char *o, int f)
{
    o = fl::put_lit(o, "# HELP ");
    o = put_cstr(o, families[f].name);
    *o++ = ' ';
    o = put_cstr(o, families[f].help);
    o = fl::put_lit(o, "\n# TYPE ");
    o = put_cstr(o, families[f].name);
    *o++ = ' ';
    o = put_cstr(o, families[f].type);
    *o++ = '\n';
    return o;
}

/* One flag's label set, the sample's metric name first:
 * NAME{project="P",flag="F"   (the caller closes it) */
struct flag_ref {
    const fl_metrics_project_t *mp;
    size_t                      index;      /* of the flag in mp->project */
    fl_flag_info_t              info;
    const fl_state_snapshot_t  *s;
    bool                        counted;
    bool                        clean;      /* neither name escapes a byte */
};

char *put_labels(char *o, int f, const flag_ref &r)
{
    o = put_name(o, f);
    o = fl::put_lit(o, "{project=\"");
    if (r.clean) {
        std::memcpy(o, r.mp->name, r.mp->name_len);
        o += r.mp->name_len;
        o = fl::put_lit(o, "\",flag=\"");
        std::memcpy(o, r.info.name, r.info.name_len);
        o += r.info.name_len;
    } else {
        o += fl_prom_escape(r.mp->name, r.mp->name_len, o);
        o = fl::put_lit(o, "\",flag=\"");
        o += fl_prom_escape(r.info.name, r.info.name_len, o);
    }
    *o++ = '"';
    return o;
}

char *put_u64_sample(char *o, int f, const flag_ref &r, uint64_t v)
{
    o = put_labels(o, f, r);
    o = fl::put_lit(o, "} ");
    o += fl::put_u64(v, o);
    *o++ = '\n';
    return o;
}

/* The same with a third label: NAME{project,flag,label="value"} v */
template <size_t N, size_t M>
char *put_u64_sample3(char *o, int f, const flag_ref &r,
    const char (&label)[N], const char (&value)[M], uint64_t v)
{
    o = put_labels(o, f, r);
    *o++ = ',';
    o = fl::put_lit(o, label);
    o = fl::put_lit(o, "=\"");
    o = fl::put_lit(o, value);
    o = fl::put_lit(o, "\"} ");
    o += fl::put_u64(v, o);
    *o++ = '\n';
    return o;
}

char *put_ratio_sample(char *o, int f, const flag_ref &r, uint32_t milli)
{
    o = put_labels(o, f, r);
    o = fl::put_lit(o, "} ");
    o = put_ratio(o, milli);
    *o++ = '\n';
    return o;
}

/* A ramped flag's samples of the ramp's families; none for a flag
 * without a ramp or without room in the zone. */
char *put_ramp(char *o, int f, const flag_ref &r)
{
    const fl_ramp_def_t *d = fl_project_flag_ramp(r.mp->project, r.index);
    if (d == nullptr || r.s->ramp == nullptr) {
        return o;
    }
    fl_ramp_t st;
    fl_ramp_read(r.s->ramp, &st);
    uint64_t stage = st.stage < d->nstages ? st.stage : d->nstages - 1;
    uint64_t state = r.s->rolled_back
                     ? static_cast<uint64_t>(FL_RAMP_ROLLED_BACK) : st.state;

    switch (f) {
    case F_RAMP_STAGE:
        return put_u64_sample(o, f, r, stage);
    case F_RAMP_RATIO:
        return put_ratio_sample(o, f, r, d->stages[stage].milli);
    case F_RAMP_STATE:
        o = put_u64_sample3(o, f, r, "state", "running",
                            state == FL_RAMP_RUNNING);
        o = put_u64_sample3(o, f, r, "state", "holding",
                            state == FL_RAMP_HOLDING
                            || state == FL_RAMP_PENDING);
        o = put_u64_sample3(o, f, r, "state", "paused",
                            state == FL_RAMP_PAUSED);
        o = put_u64_sample3(o, f, r, "state", "done", state == FL_RAMP_DONE);
        return put_u64_sample3(o, f, r, "state", "rolledBack",
                               state == FL_RAMP_ROLLED_BACK);
    case F_RAMP_EVIDENCE: {
        o = put_labels(o, f, r);
        o = fl::put_lit(o, "} ");
        double v = fl_regression_ratio(&st.evidence, d->alpha_ppm / 1e6);
        int len = std::snprintf(o, 24, "%.6g", v);
        o += len > 0 && len < 24 ? len : 0;
        *o++ = '\n';
        return o;
    }
    default:
        return put_u64_sample(o, f, r, st.stage_changes);
    }
}

/* A flag's samples of family f. */
char *put_flag(char *o, int f, const flag_ref &r)
{
    const fl_state_snapshot_t &s = *r.s;
    uint64_t report;

    switch (f) {

    case F_EVALUATIONS:
        o = put_u64_sample3(o, f, r, "result", "on", s.enabled_evaluations);
        return put_u64_sample3(o, f, r, "result", "off",
                               s.evaluations >= s.enabled_evaluations
                               ? s.evaluations - s.enabled_evaluations : 0);

    case F_ERRORS:
        report = s.errors >= s.errors_upstream
                 ? s.errors - s.errors_upstream : 0;
        o = put_u64_sample3(o, f, r, "source", "report", report);
        return put_u64_sample3(o, f, r, "source", "upstream",
                               s.errors_upstream);

    case F_COHORT_REQUESTS:
        o = put_u64_sample3(o, f, r, "cohort", "on", s.on_evaluations);
        return put_u64_sample3(o, f, r, "cohort", "off", s.off_evaluations);

    case F_COHORT_ERRORS:
        o = put_u64_sample3(o, f, r, "cohort", "on", s.on_errors);
        return put_u64_sample3(o, f, r, "cohort", "off", s.off_errors);

    case F_ROLLBACKS:
        o = put_u64_sample3(o, f, r, "by", "rule",
                            s.rollbacks >= s.rollbacks_fleet
                            ? s.rollbacks - s.rollbacks_fleet : 0);
        return put_u64_sample3(o, f, r, "by", "fleet", s.rollbacks_fleet);

    case F_ROLLED_BACK:
        return put_u64_sample(o, f, r, s.rolled_back ? 1 : 0);

    case F_ROLLBACK_TIME:
        if (!s.rolled_back) {
            return o;
        }
        o = put_labels(o, f, r);
        o = fl::put_lit(o, "} ");
        o = put_seconds(o, s.rollback_at_ms);
        *o++ = '\n';
        return o;

    case F_ENABLED:
        return put_u64_sample(o, f, r, r.info.enabled ? 1 : 0);

    case F_CONFIGURED_RATIO:
        return put_ratio_sample(o, f, r, r.info.rollout_milli);

    case F_RATIO:
        return put_ratio_sample(o, f, r,
                                fl::effective_milli(s.rolled_back != 0,
                                                    s.override_kind,
                                                    s.override_milli,
                                                    s.ramp_in_force
                                                    ? s.ramp_milli
                                                    : r.info.rollout_milli));

    case F_OVERRIDE:
        o = put_u64_sample3(o, f, r, "kind", "off",
                            s.override_kind == FL_OVERRIDE_OFF ? 1 : 0);
        return put_u64_sample3(o, f, r, "kind", "percent",
                               s.override_kind == FL_OVERRIDE_PERCENT ? 1 : 0);

    case F_OVERRIDE_RATIO:
        if (s.override_kind != FL_OVERRIDE_PERCENT) {
            return o;
        }
        return put_ratio_sample(o, f, r, s.override_milli);

    case F_WINDOW_ENABLED:
        return put_u64_sample(o, f, r, s.window_enabled);

    case F_WINDOW_ERRORS:
        return put_u64_sample(o, f, r, s.window_errors);

    case F_WINDOW_SOURCES:
        return put_u64_sample(o, f, r, s.window_sources);

    case F_RULE_ENABLED:
        return put_u64_sample(o, f, r, s.policy.mode == FL_ROLLBACK_ON);

    case F_RULE_MIN_ERRORS:
        return put_u64_sample(o, f, r, s.policy.min_errors);

    case F_RULE_RATE:
        return put_ratio_sample(o, f, r, s.policy.rate_milli);

    case F_RULE_WINDOW:
        return put_u64_sample(o, f, r, s.policy.window);

    case F_RULE_MIN_SOURCES:
        return put_u64_sample(o, f, r, fl::min_sources_of(s.policy));

    case F_RAMP_STAGE:
    case F_RAMP_RATIO:
    case F_RAMP_STATE:
    case F_RAMP_EVIDENCE:
    case F_RAMP_CHANGES:
        return put_ramp(o, f, r);

    default:
        return o;
    }
}

/* Calls fn(ref) for every flag of every project; false if a flag's
 * definition cannot be read (an internal error). */
template <class F>
bool each_flag(const fl_metrics_project_t *p, size_t n, F fn)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i].project == nullptr) {
            continue;
        }
        bool clean = clean_run(p[i].name, p[i].name_len) == p[i].name_len;
        size_t nflags = fl_project_flag_count(p[i].project);
        for (size_t j = 0; j < nflags; j++) {
            flag_ref r;
            r.mp = &p[i];
            r.index = j;
            if (fl_project_flag_info(p[i].project, j, &r.info) != 0) {
                return false;
            }
            r.s = &p[i].snapshots[j];
            r.counted = p[i].counted == nullptr || p[i].counted[j] != 0;
            r.clean = clean
                      && clean_run(r.info.name, r.info.name_len)
                         == r.info.name_len;
            fn(r);
        }
    }
    return true;
}

} // namespace

extern "C" {

const char *fl_refused_code(unsigned reason) noexcept
{
    return reason < FL_REFUSED_MAX ? refused_codes[reason] : nullptr;
}

size_t fl_prom_escape(const char *s, size_t len, char *out) noexcept
{
    char *o = out;

    /* names have nothing to escape, as a rule: copy the clean run whole */
    size_t i = clean_run(s, len);
    std::memcpy(o, s, i);
    o += i;

    for ( /* void */ ; i < len; i++) {
        switch (s[i]) {
        case '\\':
            *o++ = '\\';
            *o++ = '\\';
            break;
        case '"':
            *o++ = '\\';
            *o++ = '"';
            break;
        case '\n':
            *o++ = '\\';
            *o++ = 'n';
            break;
        default:
            *o++ = s[i];
        }
    }
    return static_cast<size_t>(o - out);
}

size_t fl_metrics_bound(const fl_metrics_project_t *p, size_t n) noexcept
{
    try {
        size_t size = 0;

        for (int f = 0; f < F_MAX; f++) {
            size += sizeof("# HELP \n# TYPE  \n") + 2 * names.len[f]
                    + std::strlen(families[f].help)
                    + std::strlen(families[f].type);
        }

        /* the module's samples: reasons, zone, push, uncounted, sync */
        size += (FL_REFUSED_MAX + 10) * (64 + sample_fixed + value_max);

        /* a project's: its version, its refusals by reason */
        for (size_t i = 0; i < n; i++) {
            size += (1 + FL_DEFS_REJECTED_MAX)
                    * (names.len[F_DEFS_REJECTED] + sample_fixed + value_max
                       + 2 * p[i].name_len);
        }

        /* a flag's samples, their names and values; the two names of
         * each, escaped */
        size_t per_flag = 0, nsamples = 0;
        for (int f = 0; f < F_UNCOUNTED; f++) {
            per_flag += flag_samples[f]
                        * (names.len[f] + sample_fixed + value_max);
            nsamples += flag_samples[f];
        }

        bool ok = each_flag(p, n, [&](const flag_ref &r) {
            size += per_flag
                    + nsamples * 2 * (r.mp->name_len + r.info.name_len);
        });
        return ok ? size : 0;
    } catch (...) {
        return 0;
    }
}

size_t fl_metrics_write(const fl_metrics_project_t *p, size_t n,
    const fl_metrics_module_t *m, char *buf) noexcept
{
    try {
        char *o = buf;
        uint64_t uncounted = 0;

        for (int f = 0; f < F_UNCOUNTED; f++) {
            o = put_header(o, f);
            bool ok = each_flag(p, n, [&](const flag_ref &r) {
                o = put_flag(o, f, r);
                if (f == 0 && !r.counted) {
                    uncounted++;
                }
            });
            if (!ok) {
                return 0;
            }
        }

        o = put_header(o, F_UNCOUNTED);
        o = put_name(o, F_UNCOUNTED);
        *o++ = ' ';
        o += fl::put_u64(uncounted, o);
        *o++ = '\n';

        o = put_header(o, F_REFUSED);
        for (unsigned i = 0; i < FL_REFUSED_MAX; i++) {
            o = put_name(o, F_REFUSED);
            o = fl::put_lit(o, "{reason=\"");
            o = put_cstr(o, refused_codes[i]);
            o = fl::put_lit(o, "\"} ");
            o += fl::put_u64(m->refused[i], o);
            *o++ = '\n';
        }

        o = put_header(o, F_ZONE_BYTES);
        o = put_name(o, F_ZONE_BYTES);
        o = fl::put_lit(o, "{state=\"used\"} ");
        o += fl::put_u64(m->zone_used_bytes, o);
        *o++ = '\n';
        o = put_name(o, F_ZONE_BYTES);
        o = fl::put_lit(o, "{state=\"free\"} ");
        o += fl::put_u64(m->zone_free_bytes, o);
        *o++ = '\n';

        if (m->push_connections >= 0) {
            o = put_header(o, F_PUSH);
            o = put_name(o, F_PUSH);
            *o++ = ' ';
            o += fl::put_u64(static_cast<uint64_t>(m->push_connections), o);
            *o++ = '\n';
        }

        o = put_header(o, F_DEFS_VERSION);
        for (size_t i = 0; i < n; i++) {
            o = put_name(o, F_DEFS_VERSION);
            o = fl::put_lit(o, "{project=\"");
            o += fl_prom_escape(p[i].name, p[i].name_len, o);
            o = fl::put_lit(o, "\"} ");
            o += fl::put_u64(p[i].defs_version, o);
            *o++ = '\n';
        }

        o = put_header(o, F_DEFS_REJECTED);
        for (size_t i = 0; i < n; i++) {
            for (unsigned k = 0; k < FL_DEFS_REJECTED_MAX; k++) {
                o = put_name(o, F_DEFS_REJECTED);
                o = fl::put_lit(o, "{project=\"");
                o += fl_prom_escape(p[i].name, p[i].name_len, o);
                o = fl::put_lit(o, "\",reason=\"");
                o = put_cstr(o, defs_rejected_codes[k]);
                o = fl::put_lit(o, "\"} ");
                o += fl::put_u64(p[i].defs_rejected[k], o);
                *o++ = '\n';
            }
        }

        if (m->sync_enabled) {
            o = put_header(o, F_SYNC_CONNECTED);
            o = put_name(o, F_SYNC_CONNECTED);
            o = fl::put_lit(o, m->sync_connected ? " 1\n" : " 0\n");

            o = put_header(o, F_SYNC_LAST_SUCCESS);
            o = put_name(o, F_SYNC_LAST_SUCCESS);
            *o++ = ' ';
            o = put_seconds(o, m->sync_last_success_ms);
            *o++ = '\n';

            o = put_header(o, F_SYNC_LAG);
            o = put_name(o, F_SYNC_LAG);
            *o++ = ' ';
            o = put_seconds(o, m->sync_lag_ms);
            *o++ = '\n';

            o = put_header(o, F_SYNC_FAILURES);
            o = put_name(o, F_SYNC_FAILURES);
            *o++ = ' ';
            o += fl::put_u64(m->sync_failures, o);
            *o++ = '\n';

            o = put_header(o, F_SYNC_STALE);
            o = put_name(o, F_SYNC_STALE);
            *o++ = ' ';
            o = put_seconds(o, m->sync_stale_ms);
            *o++ = '\n';

            o = put_header(o, F_SYNC_INTERVAL);
            o = put_name(o, F_SYNC_INTERVAL);
            *o++ = ' ';
            o = put_seconds(o, m->sync_interval_ms);
            *o++ = '\n';
        }

        return static_cast<size_t>(o - buf);
    } catch (...) {
        return 0;
    }
}

} // extern "C"
