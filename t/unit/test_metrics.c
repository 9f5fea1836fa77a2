/*
 * test_metrics.c - the Prometheus exposition of flags_metrics
 * (src/core/metrics.cpp): exact lines, HELP and TYPE once per family,
 * label escaping, ratios, the bound, and the lifetime rollback count.
 */

#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "flags_core.h"


static const char project_json[] =
    "{\"flags\":["
    "{\"name\":\"checkout\",\"enabled\":true,\"rolloutPercentage\":25},"
    "{\"name\":\"dark:mode\",\"enabled\":false,\"rolloutPercentage\":12.345},"
    "{\"name\":\"full\",\"enabled\":true,\"rolloutPercentage\":100}"
    "]}";


static fl_project_t *load(void)
{
    char err[256];
    fl_project_t *p = NULL;

    assert_int_equal(fl_project_load_buffer(project_json,
                                            sizeof(project_json) - 1,
                                            "test", &p, err, sizeof(err)),
                     FL_OK);
    return p;
}


/* Renders into a buffer of exactly the bound (plus a NUL), guarded by
 * canaries on either side. */
static char *render(const fl_metrics_project_t *mp, size_t n,
    const fl_metrics_module_t *m, size_t *len)
{
    size_t bound = fl_metrics_bound(mp, n);
    char *mem, *buf;

    assert_true(bound > 0);
    mem = malloc(bound + 33);
    assert_non_null(mem);
    memset(mem, 0x5a, bound + 33);
    buf = mem + 16;

    *len = fl_metrics_write(mp, n, m, buf);
    assert_true(*len > 0);
    assert_true(*len <= bound);

    for (int i = 0; i < 16; i++) {
        assert_int_equal((unsigned char) mem[i], 0x5a);
        assert_int_equal((unsigned char) buf[bound + 1 + i], 0x5a);
    }

    buf[*len] = '\0';
    return buf;
}


static void assert_line(const char *text, const char *line)
{
    char *want = malloc(strlen(line) + 3);
    const char *at;

    assert_non_null(want);
    sprintf(want, "\n%s\n", line);
    at = strstr(text, want);
    if (at == NULL) {
        print_error("missing line: %s\n%s\n", line, getenv("DUMP") ? text : "");
    }
    assert_non_null(at);
    free(want);
}


static void assert_no(const char *text, const char *s)
{
    if (strstr(text, s) != NULL) {
        print_error("unexpected: %s\n", s);
    }
    assert_null(strstr(text, s));
}


static size_t count(const char *text, const char *s)
{
    size_t n = 0;
    const char *p = text;

    while ((p = strstr(p, s)) != NULL) {
        n++;
        p += strlen(s);
    }
    return n;
}


static void test_exact(void **state)
{
    fl_project_t           *p = load();
    fl_state_snapshot_t     s[3];
    uint8_t                 counted[3] = { 1, 1, 0 };
    fl_metrics_project_t    mp;
    fl_metrics_module_t     m;
    size_t                  len;
    char                   *out;

    (void) state;
    memset(s, 0, sizeof(s));
    memset(&m, 0, sizeof(m));
    memset(&mp, 0, sizeof(mp));

    s[0].evaluations = 10;
    s[0].enabled_evaluations = 3;
    s[0].errors = 7;
    s[0].errors_upstream = 2;
    s[0].on_evaluations = 4;
    s[0].off_evaluations = 5;
    s[0].on_errors = 2;
    s[0].off_errors = 1;
    s[0].rollbacks = 2;
    s[0].rollbacks_fleet = 1;
    s[0].rolled_back = 1;
    s[0].window_sources = 4;
    s[0].policy.mode = FL_ROLLBACK_ON;
    s[0].policy.min_errors = 20;
    s[0].policy.rate_milli = 12500;
    s[0].policy.window = 60;
    s[0].policy.min_sources = 3;
    s[0].rollback_at_ms = 1790000000007ULL;
    s[0].window_enabled = 3;
    s[0].window_errors = 6;
    s[0].override_kind = FL_OVERRIDE_PERCENT;
    s[0].override_milli = 50000;

    s[1].override_kind = FL_OVERRIDE_OFF;

    mp.name = "shop";
    mp.name_len = 4;
    mp.project = p;
    mp.snapshots = s;
    mp.counted = counted;
    mp.defs_version = 7;
    mp.defs_rejected[3] = 2;     /* signature */

    m.refused[FL_REFUSED_INVALID_JSON] = 3;
    m.refused[FL_REFUSED_UNKNOWN_FLAG] = 1;
    m.zone_used_bytes = 40960;
    m.zone_free_bytes = 8192;
    m.push_connections = -1;

    out = render(&mp, 1, &m, &len);

    assert_true(strncmp(out, "# HELP flags_evaluations_total ", 31) == 0);
    assert_line(out, "# TYPE flags_evaluations_total counter");
    assert_line(out, "flags_evaluations_total{project=\"shop\",flag=\"checkout\",result=\"on\"} 3");
    assert_line(out, "flags_evaluations_total{project=\"shop\",flag=\"checkout\",result=\"off\"} 7");
    assert_line(out, "flags_errors_total{project=\"shop\",flag=\"checkout\",source=\"report\"} 5");
    assert_line(out, "flags_errors_total{project=\"shop\",flag=\"checkout\",source=\"upstream\"} 2");
    assert_line(out, "flags_cohort_requests_total{project=\"shop\",flag=\"checkout\",cohort=\"on\"} 4");
    assert_line(out, "flags_cohort_requests_total{project=\"shop\",flag=\"checkout\",cohort=\"off\"} 5");
    assert_line(out, "flags_cohort_errors_total{project=\"shop\",flag=\"checkout\",cohort=\"on\"} 2");
    assert_line(out, "flags_cohort_errors_total{project=\"shop\",flag=\"checkout\",cohort=\"off\"} 1");
    assert_line(out, "flags_rollbacks_total{project=\"shop\",flag=\"checkout\",by=\"rule\"} 1");
    assert_line(out, "flags_rollbacks_total{project=\"shop\",flag=\"checkout\",by=\"fleet\"} 1");
    assert_line(out, "flags_rollbacks_total{project=\"shop\",flag=\"full\",by=\"fleet\"} 0");
    assert_line(out, "flags_window_sources{project=\"shop\",flag=\"checkout\"} 4");
    assert_line(out, "flags_rollback_rule_enabled{project=\"shop\",flag=\"checkout\"} 1");
    assert_line(out, "flags_rollback_rule_enabled{project=\"shop\",flag=\"full\"} 0");
    assert_line(out, "flags_rollback_min_errors{project=\"shop\",flag=\"checkout\"} 20");
    assert_line(out, "flags_rollback_rate_ratio{project=\"shop\",flag=\"checkout\"} 0.125");
    assert_line(out, "flags_rollback_window_seconds{project=\"shop\",flag=\"checkout\"} 60");
    assert_line(out, "flags_rollback_min_sources{project=\"shop\",flag=\"checkout\"} 3");
    assert_line(out, "flags_rollback_min_sources{project=\"shop\",flag=\"full\"} 1");
    assert_line(out, "flags_rolled_back{project=\"shop\",flag=\"checkout\"} 1");
    assert_line(out, "flags_rolled_back{project=\"shop\",flag=\"dark:mode\"} 0");
    assert_line(out, "flags_rollback_timestamp_seconds{project=\"shop\",flag=\"checkout\"} 1790000000.007");
    assert_no(out, "flags_rollback_timestamp_seconds{project=\"shop\",flag=\"dark:mode\"}");
    assert_line(out, "flags_enabled{project=\"shop\",flag=\"checkout\"} 1");
    assert_line(out, "flags_enabled{project=\"shop\",flag=\"dark:mode\"} 0");
    assert_line(out, "flags_configured_rollout_ratio{project=\"shop\",flag=\"checkout\"} 0.25");
    assert_line(out, "flags_configured_rollout_ratio{project=\"shop\",flag=\"dark:mode\"} 0.12345");
    assert_line(out, "flags_configured_rollout_ratio{project=\"shop\",flag=\"full\"} 1");
    /* rolled back wins over the override; overridden off; as configured */
    assert_line(out, "flags_rollout_ratio{project=\"shop\",flag=\"checkout\"} 0");
    assert_line(out, "flags_rollout_ratio{project=\"shop\",flag=\"dark:mode\"} 0");
    assert_line(out, "flags_rollout_ratio{project=\"shop\",flag=\"full\"} 1");
    assert_line(out, "flags_override{project=\"shop\",flag=\"checkout\",kind=\"off\"} 0");
    assert_line(out, "flags_override{project=\"shop\",flag=\"checkout\",kind=\"percent\"} 1");
    assert_line(out, "flags_override{project=\"shop\",flag=\"dark:mode\",kind=\"off\"} 1");
    assert_line(out, "flags_override{project=\"shop\",flag=\"dark:mode\",kind=\"percent\"} 0");
    assert_line(out, "flags_override_rollout_ratio{project=\"shop\",flag=\"checkout\"} 0.5");
    assert_no(out, "flags_override_rollout_ratio{project=\"shop\",flag=\"full\"}");
    assert_line(out, "flags_window_enabled_evaluations{project=\"shop\",flag=\"checkout\"} 3");
    assert_line(out, "flags_window_errors{project=\"shop\",flag=\"checkout\"} 6");
    assert_line(out, "flags_zone_uncounted_flags 1");
    assert_line(out, "flags_reports_refused_total{reason=\"invalid_json\"} 3");
    assert_line(out, "flags_reports_refused_total{reason=\"unknown_flag\"} 1");
    assert_line(out, "flags_reports_refused_total{reason=\"unauthorized\"} 0");
    assert_line(out, "flags_reports_refused_total{reason=\"internal_error\"} 0");
    assert_line(out, "flags_zone_bytes{state=\"used\"} 40960");
    assert_line(out, "flags_zone_bytes{state=\"free\"} 8192");
    assert_no(out, "flags_push_connections");

    /* one HELP and one TYPE per family, and 18 samples of a family with
     * a third label for three flags (3 x 2 + ...) */
    /* a project's definitions: its version, its refusals by reason */
    assert_line(out, "flags_definitions_version{project=\"shop\"} 7");
    assert_line(out, "flags_definitions_rejected_total{project=\"shop\",reason=\"invalid\"} 0");
    assert_line(out, "flags_definitions_rejected_total{project=\"shop\",reason=\"signature\"} 2");
    assert_int_equal(count(out, "\nflags_definitions_rejected_total{"), FL_DEFS_REJECTED_MAX);

    assert_int_equal(count(out, "# HELP "), 30);
    assert_int_equal(count(out, "# TYPE "), 30);
    assert_int_equal(count(out, "# TYPE flags_rolled_back gauge\n"), 1);
    assert_int_equal(count(out, "\nflags_evaluations_total{"), 6);
    assert_int_equal(count(out, "\nflags_reports_refused_total{"),
                     FL_REFUSED_MAX);
    assert_true(out[len - 1] == '\n');
    free(out - 16);

    m.push_connections = 12;
    out = render(&mp, 1, &m, &len);
    assert_line(out, "# TYPE flags_push_connections gauge");
    assert_line(out, "flags_push_connections 12");

    free(out - 16);
    fl_project_free(p);
}


static void test_escape(void **state)
{
    char out[64];
    size_t n;
    fl_project_t *p = load();
    fl_state_snapshot_t s[3];
    fl_metrics_project_t mp;
    fl_metrics_module_t m;
    char *text;

    (void) state;

    n = fl_prom_escape("a\\b\"c\nd\te", 9, out);
    assert_int_equal(n, 12);
    assert_memory_equal(out, "a\\\\b\\\"c\\nd\te", 12);
    assert_int_equal(fl_prom_escape("", 0, out), 0);
    /* the worst case is twice the length */
    assert_int_equal(fl_prom_escape("\"\"\"\"", 4, out), 8);

    /* a project name with every byte to escape, in every label set */
    memset(s, 0, sizeof(s));
    memset(&m, 0, sizeof(m));
    memset(&mp, 0, sizeof(mp));
    m.push_connections = -1;
    mp.name = "a\"b\\c\nd";
    mp.name_len = 7;
    mp.project = p;
    mp.snapshots = s;
    mp.counted = NULL;

    text = render(&mp, 1, &m, &n);
    assert_line(text, "flags_rollbacks_total{project=\"a\\\"b\\\\c\\nd\",flag=\"checkout\",by=\"rule\"} 0");
    /* 24 a flag, and the project's definitions: 1 + 4 */
    assert_int_equal(count(text, "project=\"a\\\"b\\\\c\\nd\""), 3 * 24 + 5);
    assert_line(text, "flags_zone_uncounted_flags 0");
    free(text - 16);
    fl_project_free(p);
}


static void test_names(void **state)
{
    (void) state;
    assert_string_equal(fl_refused_code(FL_REFUSED_UNAUTHORIZED), "unauthorized");
    assert_string_equal(fl_refused_code(FL_REFUSED_INVALID_TOKEN), "invalid_token");
    assert_string_equal(fl_refused_code(FL_REFUSED_METHOD_NOT_ALLOWED), "method_not_allowed");
    assert_string_equal(fl_refused_code(FL_REFUSED_UNSUPPORTED_MEDIA_TYPE), "unsupported_media_type");
    assert_string_equal(fl_refused_code(FL_REFUSED_PAYLOAD_TOO_LARGE), "payload_too_large");
    assert_string_equal(fl_refused_code(FL_REFUSED_INVALID_JSON), "invalid_json");
    assert_string_equal(fl_refused_code(FL_REFUSED_INVALID_FIELD), "invalid_field");
    assert_string_equal(fl_refused_code(FL_REFUSED_UNKNOWN_FLAG), "unknown_flag");
    assert_string_equal(fl_refused_code(FL_REFUSED_INTERNAL_ERROR), "internal_error");
    assert_null(fl_refused_code(FL_REFUSED_MAX));
}


/* No project: the families are still there, with the module's samples. */
static void test_empty(void **state)
{
    fl_metrics_module_t m;
    size_t len;
    char *out;

    (void) state;
    memset(&m, 0, sizeof(m));
    m.push_connections = -1;

    out = render(NULL, 0, &m, &len);
    assert_line(out, "# TYPE flags_evaluations_total counter");
    assert_line(out, "flags_zone_uncounted_flags 0");
    assert_line(out, "flags_zone_bytes{state=\"free\"} 0");
    free(out - 16);
}


/* flags_sync's families, only with flags_sync: staleness and the
 * interval beside the lag, in seconds with milliseconds (docs/sync.md). */
static void test_sync(void **state)
{
    fl_metrics_module_t m;
    size_t len;
    char *out;

    (void) state;
    memset(&m, 0, sizeof(m));
    m.push_connections = -1;

    out = render(NULL, 0, &m, &len);
    assert_no(out, "flags_sync_");
    free(out - 16);

    m.sync_enabled = 1;
    m.sync_connected = 0;
    m.sync_last_success_ms = 1764300000250ULL;
    m.sync_lag_ms = 12346;
    m.sync_failures = 3;
    m.sync_stale_ms = 12345;
    m.sync_interval_ms = 200;

    out = render(NULL, 0, &m, &len);
    assert_line(out, "flags_sync_connected 0");
    assert_line(out, "flags_sync_last_success_timestamp_seconds 1764300000.250");
    assert_line(out, "flags_sync_lag_seconds 12.346");
    assert_line(out, "flags_sync_failures_total 3");
    assert_line(out, "# TYPE flags_sync_stale_seconds gauge");
    assert_line(out, "flags_sync_stale_seconds 12.345");
    assert_line(out, "# TYPE flags_sync_interval_seconds gauge");
    assert_line(out, "flags_sync_interval_seconds 0.200");
    assert_int_equal(count(out, "# HELP flags_sync_"), 6);
    assert_int_equal(count(out, "\nflags_sync_stale_seconds "), 1);
    free(out - 16);

    /* a host that just began to sync: 0, not absent */
    m.sync_stale_ms = 0;
    m.sync_interval_ms = 3600000;
    out = render(NULL, 0, &m, &len);
    assert_line(out, "flags_sync_stale_seconds 0.000");
    assert_line(out, "flags_sync_interval_seconds 3600.000");
    free(out - 16);
}


/* Long names and large values stay within the bound. */
static void test_bound(void **state)
{
    char json[4096], name[129];
    char err[256];
    fl_project_t *p = NULL;
    fl_state_snapshot_t s[2];
    fl_metrics_project_t mp[2];
    fl_metrics_module_t m;
    char pname[65], esc[129], line[1024];
    size_t len;
    char *out;

    (void) state;
    memset(name, 'x', 128);
    name[128] = '\0';
    snprintf(json, sizeof(json),
             "{\"flags\":[{\"name\":\"%s\",\"enabled\":true,"
             "\"rolloutPercentage\":33.333},{\"name\":\"y%.127s\","
             "\"enabled\":true,\"rolloutPercentage\":0}]}", name, name);
    assert_int_equal(fl_project_load_buffer(json, strlen(json), "t", &p, err,
                                            sizeof(err)), FL_OK);

    memset(s, 0xff, sizeof(s));
    for (int i = 0; i < 2; i++) {
        s[i].rolled_back = 1;
        s[i].override_kind = FL_OVERRIDE_PERCENT;
        s[i].override_milli = 33333;
        s[i].rollback_at_ms = UINT64_MAX;
        /* enums hold valid values; the widest ratio is 0.99999 */
        s[i].policy.mode = FL_ROLLBACK_ON;
        s[i].policy.rate_milli = 99999;
        s[i].rollback_by = FL_DECIDED_FLEET;
    }
    memset(&m, 0xff, sizeof(m));
    m.push_connections = INT64_MAX;

    /* a name of quotes: the worst case of escaping */
    memset(pname, '"', 64);
    pname[64] = '\0';
    for (int i = 0; i < 2; i++) {
        mp[i].name = pname;
        mp[i].name_len = 64;
        mp[i].project = p;
        mp[i].snapshots = s;
        mp[i].counted = NULL;
    }

    out = render(mp, 2, &m, &len);

    /* 64 quotes, escaped */
    for (int i = 0; i < 64; i++) {
        memcpy(esc + 2 * i, "\\\"", 2);
    }
    esc[128] = '\0';
    snprintf(line, sizeof(line), "flags_evaluations_total{project=\"%s\","
             "flag=\"%s\",result=\"on\"} 18446744073709551615", esc, name);
    assert_line(out, line);
    snprintf(line, sizeof(line), "flags_rollback_timestamp_seconds{"
             "project=\"%s\",flag=\"y%.127s\"} 18446744073709551.615",
             esc, name);
    assert_line(out, line);
    snprintf(line, sizeof(line), "flags_override_rollout_ratio{"
             "project=\"%s\",flag=\"y%.127s\"} 0.33333", esc, name);
    assert_line(out, line);
    assert_line(out, "flags_push_connections 9223372036854775807");
    free(out - 16);
    fl_project_free(p);
}


/* The lifetime rollback count of the zone's totals. */
static void test_rollback_count(void **state)
{
    fl_totals_t t;
    fl_control_t c;
    fl_state_snapshot_t s;

    (void) state;
    memset(&t, 0, sizeof(t));
    fl_control_init(&c, 1);

    fl_count_rollback(&t, FL_DECIDED_RULE);
    fl_count_rollback(&t, FL_DECIDED_FLEET);
    fl_count_rollback(&t, FL_DECIDED_RULE);
    fl_state_snapshot(&t, &c, 60, 0, 0, &s);
    assert_int_equal(s.rollbacks, 3);
    assert_int_equal(s.rollbacks_fleet, 1);

    fl_state_snapshot(NULL, &c, 60, 0, 0, &s);
    assert_int_equal(s.rollbacks, 0);
}


int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact),
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_sync),
        cmocka_unit_test(test_bound),
        cmocka_unit_test(test_rollback_count),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
