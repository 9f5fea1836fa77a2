/*
 * test_override.c - the PUT body of flags_admin overrides (docs/http-api.md).
 */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "flags_core.h"

static void expect_percent(const char *body, uint32_t milli)
{
    fl_override_kind_t kind = FL_OVERRIDE_NONE;
    uint32_t m = 12345678;
    char err[256] = "";
    fl_status_t rc = fl_parse_override(body, strlen(body), &kind, &m, err, sizeof(err));
    if (rc != FL_OK || kind != FL_OVERRIDE_PERCENT || m != milli) {
        fail_msg("%s: got %d kind %d milli %u \"%s\", want %u", body, rc, kind, m, err, milli);
    }
}

static void expect_error(const char *body, fl_status_t want, const char *msg)
{
    fl_override_kind_t kind = FL_OVERRIDE_NONE;
    uint32_t m = 0;
    char err[256] = "";
    fl_status_t rc = fl_parse_override(body, strlen(body), &kind, &m, err, sizeof(err));
    if (rc != want || (msg != NULL && strcmp(err, msg) != 0)) {
        fail_msg("%s: got %d \"%s\", want %d \"%s\"", body, rc, err, want,
                 msg == NULL ? "(any)" : msg);
    }
}

#define RANGE "rolloutPercentage must be between 0 and 100"
#define DECIMALS "rolloutPercentage must have at most 3 decimals"
#define NEITHER "expected {\"enabled\": false} or {\"rolloutPercentage\": N}"

static void test_kill(void **state)
{
    (void) state;
    fl_override_kind_t kind = FL_OVERRIDE_NONE;
    uint32_t m = 7;
    char err[128];
    const char *body = " {\"enabled\": false, \"why\": [\"incident 42\"]}\n";

    assert_int_equal(fl_parse_override(body, strlen(body), &kind, &m, err, sizeof(err)), FL_OK);
    assert_int_equal(kind, FL_OVERRIDE_OFF);
    assert_int_equal(m, 0);
}

static void test_percentages(void **state)
{
    (void) state;
    expect_percent("{\"rolloutPercentage\":25}", 25000);
    expect_percent("{\"rolloutPercentage\":0}", 0);
    expect_percent("{\"rolloutPercentage\":-0}", 0);
    expect_percent("{\"rolloutPercentage\":0.000}", 0);
    expect_percent("{\"rolloutPercentage\":0e999999999999999999}", 0);
    expect_percent("{\"rolloutPercentage\":100}", 100000);
    expect_percent("{\"rolloutPercentage\":100.000}", 100000);
    expect_percent("{\"rolloutPercentage\":1e2}", 100000);
    expect_percent("{\"rolloutPercentage\":1E+2}", 100000);
    expect_percent("{\"rolloutPercentage\":12.345}", 12345);
    expect_percent("{\"rolloutPercentage\":12.5}", 12500);
    expect_percent("{\"rolloutPercentage\":1.25e1}", 12500);
    expect_percent("{\"rolloutPercentage\":1250e-2}", 12500);
    expect_percent("{\"rolloutPercentage\":0.001}", 1);
    expect_percent("{\"rolloutPercentage\":1e-3}", 1);
    expect_percent("{\"rolloutPercentage\":0.0010000}", 1);
    expect_percent("{\"rolloutPercentage\":99.999}", 99999);
    expect_percent("{\"rolloutPercentage\":0.00000000000000000000000000000001e31}", 100);
    expect_percent("{\"rolloutPercentage\":100000000000000000000000000000000e-30}", 100000);
    /* Last duplicate wins, unknown fields ignored. */
    expect_percent("{\"rolloutPercentage\":5,\"x\":{},\"rolloutPercentage\":6}", 6000);
}

static void test_percentage_errors(void **state)
{
    (void) state;
    expect_error("{\"rolloutPercentage\":100.001}", FL_ERR_FIELD, RANGE);
    expect_error("{\"rolloutPercentage\":100.0001}", FL_ERR_FIELD, RANGE);
    expect_error("{\"rolloutPercentage\":101}", FL_ERR_FIELD, RANGE);
    expect_error("{\"rolloutPercentage\":-1}", FL_ERR_FIELD, RANGE);
    expect_error("{\"rolloutPercentage\":-0.001}", FL_ERR_FIELD, RANGE);
    expect_error("{\"rolloutPercentage\":1e3}", FL_ERR_FIELD, RANGE);
    expect_error("{\"rolloutPercentage\":1e999999999999999999}", FL_ERR_FIELD, RANGE);
    expect_error("{\"rolloutPercentage\":1000000}", FL_ERR_FIELD, RANGE);
    expect_error("{\"rolloutPercentage\":12.3456}", FL_ERR_FIELD, DECIMALS);
    expect_error("{\"rolloutPercentage\":99.9995}", FL_ERR_FIELD, DECIMALS);
    expect_error("{\"rolloutPercentage\":0.0001}", FL_ERR_FIELD, DECIMALS);
    expect_error("{\"rolloutPercentage\":1e-4}", FL_ERR_FIELD, DECIMALS);
    expect_error("{\"rolloutPercentage\":1e-999999999999}", FL_ERR_FIELD, DECIMALS);
    expect_error("{\"rolloutPercentage\":\"25\"}", FL_ERR_FIELD,
                 "rolloutPercentage must be a number");
    expect_error("{\"rolloutPercentage\":true}", FL_ERR_FIELD,
                 "rolloutPercentage must be a number");
    expect_error("{\"rolloutPercentage\":[25]}", FL_ERR_FIELD,
                 "rolloutPercentage must be a number");
}

static void test_field_errors(void **state)
{
    (void) state;
    expect_error("{\"enabled\":true}", FL_ERR_FIELD,
                 "enabled can only be false; DELETE the override to remove it");
    expect_error("{\"enabled\":\"false\"}", FL_ERR_FIELD, "enabled must be false");
    expect_error("{\"enabled\":0}", FL_ERR_FIELD, "enabled must be false");
    expect_error("{\"enabled\":false,\"rolloutPercentage\":5}", FL_ERR_FIELD,
                 "give either enabled or rolloutPercentage, not both");
    expect_error("{}", FL_ERR_FIELD, NEITHER);
    expect_error("{\"Enabled\":false}", FL_ERR_FIELD, NEITHER);
    expect_error("{\"enabled\":null}", FL_ERR_FIELD, NEITHER);
    /* null reads as absent. */
    expect_error("{\"rolloutPercentage\":null,\"enabled\":false}", FL_OK, NULL);
}

static void test_json_errors(void **state)
{
    (void) state;
    expect_error("", FL_ERR_JSON, "request body is empty");
    expect_error("  \n", FL_ERR_JSON, "request body is empty");
    expect_error("[]", FL_ERR_JSON, "request body must be a JSON object");
    expect_error("false", FL_ERR_JSON, "request body must be a JSON object");
    expect_error("25", FL_ERR_JSON, "request body must be a JSON object");
    expect_error("{\"enabled\":false", FL_ERR_JSON, NULL);
    expect_error("{\"enabled\":false}}", FL_ERR_JSON, NULL);
    /* an unterminated string after the object, which yajl alone takes */
    expect_error("{\"enabled\":false}\"zz", FL_ERR_JSON,
                 "request body is not valid JSON: parse error: trailing garbage"
                 " (near byte 17)");
    expect_error("{\"enabled\":false} \"a\\\"", FL_ERR_JSON,
                 "request body is not valid JSON: parse error: trailing garbage"
                 " (near byte 18)");
    expect_error("{\"enabled\":true,}", FL_ERR_JSON, NULL);       /* JSON first */
    expect_error("{\"enabled\":false,\"x\":\"\xff\"}", FL_ERR_JSON, NULL);
    expect_error("enabled=false", FL_ERR_JSON, NULL);

    fl_override_kind_t kind;
    uint32_t m;
    char err[128];
    assert_int_equal(fl_parse_override(NULL, 0, &kind, &m, err, sizeof(err)), FL_ERR_JSON);

    size_t n = 10000;
    char *deep = malloc(n);
    assert_non_null(deep);
    memset(deep, '[', n);
    assert_int_equal(fl_parse_override(deep, n, &kind, &m, err, sizeof(err)), FL_ERR_JSON);
    assert_string_equal(err, "JSON nesting is deeper than 64 levels");
    free(deep);
}

static void test_not_nul_terminated(void **state)
{
    (void) state;
    /* The length is what counts: bytes after it are never read. */
    const char body[] = "{\"rolloutPercentage\":25}9999";
    fl_override_kind_t kind;
    uint32_t m;
    char err[128];
    assert_int_equal(fl_parse_override(body, 24, &kind, &m, err, sizeof(err)), FL_OK);
    assert_int_equal(m, 25000);
}

/* fl_parse_milli: the one percentage reader, shared with flags_rollback
 * rate= and the flags file. */
static void expect_milli(const char *s, fl_milli_status_t st, uint32_t want)
{
    uint32_t m = 4242;

    assert_int_equal(fl_parse_milli(s, strlen(s), &m), st);
    assert_int_equal(m, st == FL_MILLI_OK ? want : 4242);
}

static void test_parse_milli(void **state)
{
    (void) state;
    expect_milli("10%", FL_MILLI_OK, 10000);
    expect_milli("10", FL_MILLI_OK, 10000);
    expect_milli("12.5%", FL_MILLI_OK, 12500);
    expect_milli("0.001%", FL_MILLI_OK, 1);
    expect_milli("1.25e1%", FL_MILLI_OK, 12500);
    expect_milli("100%", FL_MILLI_OK, 100000);
    expect_milli("0%", FL_MILLI_OK, 0);
    expect_milli("101%", FL_MILLI_RANGE, 0);
    expect_milli("100.0001%", FL_MILLI_RANGE, 0);
    expect_milli("-1%", FL_MILLI_RANGE, 0);
    expect_milli("0.0001%", FL_MILLI_DECIMALS, 0);
    expect_milli("12.3456", FL_MILLI_DECIMALS, 0);
    expect_milli("", FL_MILLI_SYNTAX, 0);
    expect_milli("%", FL_MILLI_SYNTAX, 0);
    expect_milli("10%%", FL_MILLI_SYNTAX, 0);
    expect_milli("ten%", FL_MILLI_SYNTAX, 0);
    expect_milli(" 10%", FL_MILLI_SYNTAX, 0);
    assert_int_equal(fl_parse_milli(NULL, 0, NULL), FL_MILLI_SYNTAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kill),
        cmocka_unit_test(test_percentages),
        cmocka_unit_test(test_percentage_errors),
        cmocka_unit_test(test_field_errors),
        cmocka_unit_test(test_json_errors),
        cmocka_unit_test(test_not_nul_terminated),
        cmocka_unit_test(test_parse_milli),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
