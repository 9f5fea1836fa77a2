/*
 * test_statefile.c - the flags_state_file format: writing, reading back,
 * and refusing anything malformed (the caller then ignores the file).
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

#include "unit_arena.h"

static fl_saved_flag_t entry(const char *project, const char *flag, uint64_t hash)
{
    fl_saved_flag_t e;
    memset(&e, 0, sizeof(e));
    e.project = project;
    e.project_len = strlen(project);
    e.flag = flag;
    e.flag_len = strlen(flag);
    e.def_hash = hash;
    e.override_kind = FL_OVERRIDE_NONE;
    return e;
}

/* Writes n entries into a malloc'd buffer, checking the bound. */
static char *write_file(const fl_saved_flag_t *e, size_t n, size_t *len)
{
    size_t bound = fl_state_file_bound(e, n);
    char *buf = malloc(bound);
    assert_non_null(buf);
    *len = fl_state_file_write(e, n, buf);
    assert_true(*len <= bound);
    assert_int_equal(buf[*len - 1], '\n');
    return buf;
}

static void same_entry(const fl_saved_flag_t *a, const fl_saved_flag_t *b)
{
    assert_int_equal(a->project_len, b->project_len);
    assert_memory_equal(a->project, b->project, a->project_len);
    assert_int_equal(a->flag_len, b->flag_len);
    assert_memory_equal(a->flag, b->flag, a->flag_len);
    assert_true(a->def_hash == b->def_hash);
    assert_int_equal(a->rolled_back, b->rolled_back);
    if (a->rolled_back) {
        assert_true(a->rollback_at_ms == b->rollback_at_ms);
        assert_true(a->rollback_errors == b->rollback_errors);
        assert_true(a->rollback_enabled == b->rollback_enabled);
        assert_true(a->rollback_sources == b->rollback_sources);
        assert_int_equal(a->rollback_by, b->rollback_by);
    }
    assert_int_equal(a->override_kind, b->override_kind);
    if (a->override_kind == FL_OVERRIDE_PERCENT) {
        assert_int_equal(a->override_milli, b->override_milli);
    }
}

static fl_status_t parse_str(const char *s, fl_saved_flag_t **out, size_t *n, char *err)
{
    return fl_state_file_parse(s, strlen(s), &arena, out, n, err, 256);
}


/* ---------------------------------------------------------------- tests */

static void test_exact_output(void **state)
{
    (void) state;
    fl_saved_flag_t e[3];
    e[0] = entry("shop", "new-checkout", 0x00c0ffee12345678ULL);
    e[0].rolled_back = 1;
    e[0].rollback_at_ms = 1795352709123ULL;
    e[0].rollback_errors = 25;
    e[0].rollback_enabled = 100;
    e[0].rollback_sources = 4;
    e[0].rollback_by = FL_DECIDED_RULE;
    e[1] = entry("shop", "dark-mode", UINT64_MAX);
    e[1].override_kind = FL_OVERRIDE_OFF;
    e[2] = entry("blog", "x", 0);
    e[2].override_kind = FL_OVERRIDE_PERCENT;
    e[2].override_milli = 12345;

    size_t len;
    char *buf = write_file(e, 3, &len);
    const char *want =
        "{\"version\":1,\"flags\":[\n"
        "{\"project\":\"shop\",\"flag\":\"new-checkout\",\"definitionHash\":\"00c0ffee12345678\","
        "\"rollback\":{\"at\":1795352709123,\"errors\":25,\"enabledEvaluations\":100,"
        "\"sources\":4,\"decidedBy\":\"rule\"},"
        "\"override\":null},\n"
        "{\"project\":\"shop\",\"flag\":\"dark-mode\",\"definitionHash\":\"ffffffffffffffff\","
        "\"rollback\":null,\"override\":{\"enabled\":false}},\n"
        "{\"project\":\"blog\",\"flag\":\"x\",\"definitionHash\":\"0000000000000000\","
        "\"rollback\":null,\"override\":{\"rolloutPercentage\":12.345}}\n"
        "]}\n";
    assert_int_equal(len, strlen(want));
    assert_memory_equal(buf, want, len);

    fl_saved_flag_t *out;
    size_t n;
    char err[256];
    assert_int_equal(fl_state_file_parse(buf, len, &arena, &out, &n, err, sizeof(err)), FL_OK);
    assert_int_equal(n, 3);
    for (size_t i = 0; i < 3; i++) {
        same_entry(&out[i], &e[i]);
    }
    free(buf);
}

static void test_empty_list(void **state)
{
    (void) state;
    size_t len;
    char *buf = write_file(NULL, 0, &len);
    assert_int_equal(len, strlen("{\"version\":1,\"flags\":[]}\n"));
    assert_memory_equal(buf, "{\"version\":1,\"flags\":[]}\n", len);

    fl_saved_flag_t *out = (fl_saved_flag_t *) 1;
    size_t n = 99;
    char err[256];
    assert_int_equal(fl_state_file_parse(buf, len, &arena, &out, &n, err, sizeof(err)), FL_OK);
    assert_int_equal(n, 0);
    free(buf);
}

static void test_round_trip_extremes(void **state)
{
    (void) state;
    static const char odd[] = "a\"b\\c\nd\x01\xc3\xa9\xe2\x80\xa8\0z";
    fl_saved_flag_t e[4];
    e[0] = entry("p", "f", 1);
    e[0].project = odd;
    e[0].project_len = sizeof(odd) - 1;
    e[0].flag = odd;
    e[0].flag_len = sizeof(odd) - 1;
    e[0].rolled_back = 1;
    e[0].rollback_at_ms = UINT64_MAX;
    e[0].rollback_errors = UINT64_MAX;
    e[0].rollback_enabled = 0;
    e[0].override_kind = FL_OVERRIDE_PERCENT;
    e[0].override_milli = 100000;
    e[1] = entry("", "", 0x8000000000000001ULL);
    e[1].override_kind = FL_OVERRIDE_PERCENT;
    e[1].override_milli = 0;
    e[2] = entry("p", "g", 2);
    e[2].override_kind = FL_OVERRIDE_PERCENT;
    e[2].override_milli = 1;
    e[3] = entry("p", "g", 3);          /* duplicates are kept, in order */

    size_t len;
    char *buf = write_file(e, 4, &len);
    fl_saved_flag_t *out;
    size_t n;
    char err[256];
    assert_int_equal(fl_state_file_parse(buf, len, &arena, &out, &n, err, sizeof(err)), FL_OK);
    assert_int_equal(n, 4);
    for (size_t i = 0; i < n; i++) {
        same_entry(&out[i], &e[i]);
    }
    /* Strings come back NUL-terminated as well. */
    assert_int_equal(out[0].project[out[0].project_len], '\0');
    free(buf);
}

static void test_bound_with_long_names(void **state)
{
    (void) state;
    char ctl[300];
    for (size_t i = 0; i < sizeof(ctl); i++) {
        ctl[i] = (char) (i % 32);
    }
    fl_saved_flag_t e[2];
    for (int i = 0; i < 2; i++) {
        e[i] = entry("x", "y", UINT64_MAX);
        e[i].project = ctl;
        e[i].project_len = sizeof(ctl);
        e[i].flag = ctl;
        e[i].flag_len = sizeof(ctl);
        e[i].rolled_back = 1;
        e[i].rollback_at_ms = UINT64_MAX;
        e[i].rollback_errors = UINT64_MAX;
        e[i].rollback_enabled = UINT64_MAX;
        e[i].rollback_sources = UINT64_MAX;
        e[i].rollback_by = FL_DECIDED_FLEET;
        e[i].override_kind = FL_OVERRIDE_PERCENT;
        e[i].override_milli = 99999;
    }
    size_t len;
    char *buf = write_file(e, 2, &len);
    fl_saved_flag_t *out;
    size_t n;
    char err[256];
    assert_int_equal(fl_state_file_parse(buf, len, &arena, &out, &n, err, sizeof(err)), FL_OK);
    assert_int_equal(n, 2);
    same_entry(&out[1], &e[1]);
    free(buf);
}

/* A file written before sources and decidedBy existed restores with 0
 * and unknown; a decidedBy that is neither "rule" nor "fleet" is refused. */
static void test_rollback_provenance(void **state)
{
    (void) state;
    fl_saved_flag_t *out;
    size_t n;
    char err[256];

    assert_int_equal(parse_str("{\"version\":1,\"flags\":[{\"project\":\"p\",\"flag\":\"f\","
                               "\"definitionHash\":\"0000000000000001\","
                               "\"rollback\":{\"at\":5,\"errors\":6,\"enabledEvaluations\":7}}]}",
                               &out, &n, err), FL_OK);
    assert_int_equal(n, 1);
    assert_int_equal(out[0].rollback_sources, 0);
    assert_int_equal(out[0].rollback_by, FL_DECIDED_UNKNOWN);

    assert_int_equal(parse_str("{\"version\":1,\"flags\":[{\"project\":\"p\",\"flag\":\"f\","
                               "\"definitionHash\":\"0000000000000001\","
                               "\"rollback\":{\"at\":5,\"errors\":6,\"enabledEvaluations\":7,"
                               "\"sources\":3,\"decidedBy\":\"fleet\"}}]}",
                               &out, &n, err), FL_OK);
    assert_int_equal(out[0].rollback_sources, 3);
    assert_int_equal(out[0].rollback_by, FL_DECIDED_FLEET);

    assert_int_equal(parse_str("{\"version\":1,\"flags\":[{\"project\":\"p\",\"flag\":\"f\","
                               "\"definitionHash\":\"0000000000000001\","
                               "\"rollback\":{\"at\":5,\"errors\":6,\"enabledEvaluations\":7,"
                               "\"decidedBy\":\"admin\"}}]}",
                               &out, &n, err), FL_ERR_INVALID);
    assert_string_equal(err, "state file: flags[0].rollback.decidedBy must be \"rule\" or \"fleet\"");

    assert_int_equal(parse_str("{\"version\":1,\"flags\":[{\"project\":\"p\",\"flag\":\"f\","
                               "\"definitionHash\":\"0000000000000001\","
                               "\"rollback\":{\"at\":5,\"errors\":6,\"enabledEvaluations\":7,"
                               "\"sources\":-1}}]}",
                               &out, &n, err), FL_ERR_INVALID);
    assert_string_equal(err, "state file: flags[0].rollback.sources must be a non-negative integer");
}

static void test_lenient_reading(void **state)
{
    (void) state;
    fl_saved_flag_t *out;
    size_t n;
    char err[256];

    /* Unknown fields anywhere, members in any order, rollback/override
     * absent or null, upper-case hex, whitespace. */
    const char *s =
        " {\"note\":{\"x\":[1,2]},\"flags\":[ {\"override\":{\"rolloutPercentage\":2.5e1,"
        "\"why\":\"test\"},\"definitionHash\":\"ABCDEF0123456789\",\"flag\":\"f\","
        "\"project\":\"p\",\"extra\":null},"
        "{\"project\":\"q\",\"flag\":\"g\",\"definitionHash\":\"0000000000000001\","
        "\"rollback\":null,\"override\":null}],\"version\":1}\n\n";
    assert_int_equal(parse_str(s, &out, &n, err), FL_OK);
    assert_int_equal(n, 2);
    assert_true(out[0].def_hash == 0xabcdef0123456789ULL);
    assert_int_equal(out[0].override_kind, FL_OVERRIDE_PERCENT);
    assert_int_equal(out[0].override_milli, 25000);
    assert_int_equal(out[0].rolled_back, 0);
    assert_int_equal(out[1].override_kind, FL_OVERRIDE_NONE);
    assert_int_equal(out[1].rolled_back, 0);
    assert_string_equal(out[1].project, "q");
}

static void expect_invalid(const char *s, const char *msg)
{
    fl_saved_flag_t *out = NULL;
    size_t n = 0;
    char err[256];
    fl_status_t rc = parse_str(s, &out, &n, err);
    if (rc != FL_ERR_INVALID || (msg != NULL && strcmp(err, msg) != 0)) {
        fail_msg("state file %s: got %d \"%s\", want \"%s\"", s, rc, err,
                 msg == NULL ? "(any)" : msg);
    }
    assert_null(out);
    assert_int_equal(n, 0);
}

#define HEAD "{\"version\":1,\"flags\":["
#define ENTRY(rest) "{\"project\":\"p\",\"flag\":\"f\",\"definitionHash\":\"0123456789abcdef\"" rest "}"

static void test_corrupt_inputs(void **state)
{
    (void) state;
    expect_invalid("", "state file is empty");
    expect_invalid("\n", "state file is empty");
    expect_invalid("x", NULL);
    expect_invalid("{\"version\":1,\"flags\":[]", NULL);
    expect_invalid("[]", "state file must be a JSON object");
    expect_invalid("{}", "state file version must be 1");
    expect_invalid("{\"version\":2,\"flags\":[]}", "state file version must be 1");
    expect_invalid("{\"version\":\"1\",\"flags\":[]}", "state file version must be 1");
    expect_invalid("{\"version\":1.0,\"flags\":[]}", "state file version must be 1");
    expect_invalid("{\"version\":1}", "state file: flags must be an array");
    expect_invalid("{\"version\":1,\"flags\":{}}", "state file: flags must be an array");
    expect_invalid(HEAD "1]}", "state file: flags[0] must be an object");
    expect_invalid(HEAD ENTRY("") ",null]}", "state file: flags[1] must be an object");
    expect_invalid(HEAD "{\"flag\":\"f\",\"definitionHash\":\"0123456789abcdef\"}]}",
                   "state file: flags[0].project must be a string");
    expect_invalid(HEAD "{\"project\":1,\"flag\":\"f\"}]}",
                   "state file: flags[0].project must be a string");
    expect_invalid(HEAD "{\"project\":\"p\",\"flag\":null}]}",
                   "state file: flags[0].flag must be a string");
    expect_invalid(HEAD "{\"project\":\"p\",\"flag\":\"f\"}]}",
                   "state file: flags[0].definitionHash must be a string of 16 hex digits");
    /* a name that could not be written back as it was read (fuzzing) */
    expect_invalid(HEAD "{\"project\":\"p\\udc00\",\"flag\":\"f\",\"definitionHash\":\"0123456789abcdef\"}]}",
                   "state file: flags[0]: names must be valid UTF-8");
    expect_invalid(HEAD "{\"project\":\"p\",\"flag\":\"\xc0\x80\",\"definitionHash\":\"0123456789abcdef\"}]}",
                   "state file: flags[0]: names must be valid UTF-8");
    expect_invalid(HEAD "{\"project\":\"p\",\"flag\":\"f\",\"definitionHash\":\"123\"}]}",
                   "state file: flags[0].definitionHash must be a string of 16 hex digits");
    expect_invalid(HEAD "{\"project\":\"p\",\"flag\":\"f\",\"definitionHash\":\"0123456789abcdeg\"}]}",
                   "state file: flags[0].definitionHash must be a string of 16 hex digits");
    expect_invalid(HEAD "{\"project\":\"p\",\"flag\":\"f\",\"definitionHash\":81985529216486895}]}",
                   "state file: flags[0].definitionHash must be a string of 16 hex digits");
    expect_invalid(HEAD ENTRY(",\"rollback\":true") "]}",
                   "state file: flags[0].rollback must be an object or null");
    expect_invalid(HEAD ENTRY(",\"rollback\":{\"errors\":1,\"enabledEvaluations\":2}") "]}",
                   "state file: flags[0].rollback.at must be a non-negative integer");
    expect_invalid(HEAD ENTRY(",\"rollback\":{\"at\":-1,\"errors\":1,\"enabledEvaluations\":2}") "]}",
                   "state file: flags[0].rollback.at must be a non-negative integer");
    expect_invalid(HEAD ENTRY(",\"rollback\":{\"at\":1,\"errors\":1.5,\"enabledEvaluations\":2}") "]}",
                   "state file: flags[0].rollback.errors must be a non-negative integer");
    expect_invalid(HEAD ENTRY(",\"rollback\":{\"at\":1,\"errors\":1,\"enabledEvaluations\":\"2\"}") "]}",
                   "state file: flags[0].rollback.enabledEvaluations must be a non-negative integer");
    expect_invalid(HEAD ENTRY(",\"rollback\":{\"at\":18446744073709551616,\"errors\":1,"
                              "\"enabledEvaluations\":2}") "]}",
                   "state file: flags[0].rollback.at must be a non-negative integer");
    expect_invalid(HEAD ENTRY(",\"override\":5") "]}",
                   "state file: flags[0].override must be an object or null");
    expect_invalid(HEAD ENTRY(",\"override\":{\"enabled\":true}") "]}",
                   "state file: flags[0].override: enabled can only be false; "
                   "DELETE the override to remove it");
    expect_invalid(HEAD ENTRY(",\"override\":{\"rolloutPercentage\":101}") "]}",
                   "state file: flags[0].override: rolloutPercentage must be between 0 and 100");
    expect_invalid(HEAD ENTRY(",\"override\":{}") "]}", NULL);
    expect_invalid("{\"version\":1,\"flags\":[]}\xff", NULL);
    expect_invalid("{\"version\":1,\"flags\":[],\"x\":\"\xff\"}", NULL);
}

static void test_truncated_file(void **state)
{
    (void) state;
    fl_saved_flag_t e[2];
    e[0] = entry("shop", "a", 1);
    e[0].rolled_back = 1;
    e[0].rollback_at_ms = 5;
    e[1] = entry("shop", "b", 2);
    e[1].override_kind = FL_OVERRIDE_OFF;
    size_t len;
    char *buf = write_file(e, 2, &len);

    /* Every prefix of a file cut short by a crash is refused; only the
     * final newline may be missing. */
    for (size_t cut = 0; cut < len - 1; cut++) {
        fl_saved_flag_t *out = NULL;
        size_t n = 0;
        char err[256];
        fl_status_t rc = fl_state_file_parse(buf, cut, &arena, &out, &n, err, sizeof(err));
        if (rc != FL_ERR_INVALID) {
            fail_msg("prefix of %zu bytes: got %d", cut, rc);
        }
    }
    fl_saved_flag_t *out;
    size_t n;
    assert_int_equal(fl_state_file_parse(buf, len - 1, &arena, &out, &n, NULL, 0), FL_OK);
    free(buf);
}

static void test_deep_nesting(void **state)
{
    (void) state;
    size_t n = 100000;
    char *deep = malloc(n);
    assert_non_null(deep);
    memset(deep, '[', n);
    fl_saved_flag_t *out;
    size_t cnt;
    char err[256];
    assert_int_equal(fl_state_file_parse(deep, n, &arena, &out, &cnt, err, sizeof(err)),
                     FL_ERR_INVALID);
    assert_string_equal(err, "state file: JSON nesting is deeper than 64 levels");
    free(deep);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_exact_output, arena_teardown),
        cmocka_unit_test_teardown(test_empty_list, arena_teardown),
        cmocka_unit_test_teardown(test_round_trip_extremes, arena_teardown),
        cmocka_unit_test_teardown(test_bound_with_long_names, arena_teardown),
        cmocka_unit_test_teardown(test_lenient_reading, arena_teardown),
        cmocka_unit_test_teardown(test_rollback_provenance, arena_teardown),
        cmocka_unit_test_teardown(test_corrupt_inputs, arena_teardown),
        cmocka_unit_test_teardown(test_truncated_file, arena_teardown),
        cmocka_unit_test_teardown(test_deep_nesting, arena_teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
