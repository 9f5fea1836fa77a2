/*
 * test_loader.c - loading a flags file (docs/flags-file.md): every error message,
 * exact percentages, rollback policies, the definition hash, the accessors.
 */

#define _XOPEN_SOURCE 700      /* mkdtemp, mkfifo, ftruncate */

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "flags_core.h"
#include "unit_project.h"

static void expect_error(const char *json, const char *want)
{
    fl_project_t *p = (fl_project_t *) 1;
    char err[512];
    fl_status_t rc = fl_project_load_buffer(json, strlen(json), "f.json", &p,
                                            err, sizeof(err));
    if (rc == FL_OK) {
        fl_project_free(p);
        fail_msg("loaded, wanted \"%s\": %s", want, json);
    }
    assert_int_equal(rc, FL_ERR_INVALID);
    assert_null(p);
    assert_string_equal(err, want);
    assert_null(strchr(err, '\n'));
}

#define FLAG(x) "{\"flags\":[{\"name\":\"f\",\"enabled\":true," \
                "\"rolloutPercentage\":10" x "}]}"
#define RULE(x) "{\"flags\":[],\"segments\":{\"s\":{\"rules\":[" \
                "{\"trait\":\"a\",\"op\":\"exists\"}," x "]}}}"

/* ------------------------------------------------------- syntax errors */

static void test_syntax_errors(void **state)
{
    (void) state;
    expect_error("", "f.json:1:1: invalid JSON: parse error: premature EOF");
    expect_error("{\"flags\":[", "f.json:1:11: invalid JSON: parse error: "
                 "premature EOF");
    expect_error("{\"flags\":[}", "f.json:1:11: invalid JSON: parse error: "
                 "unallowed token at this point in JSON text");
    expect_error("{\n  \"flags\": [\n    {\"name\": x}\n  ]\n}",
                 "f.json:3:14: invalid JSON: lexical error: invalid char in "
                 "json text.");
    expect_error("{\"flags\":[]} x", "f.json:1:14: invalid JSON: parse error: "
                 "trailing garbage");
    /* an unterminated string after the object, which yajl alone takes */
    expect_error("{\"flags\":[]}\"x", "f.json:1:13: invalid JSON: parse error: "
                 "trailing garbage");
    expect_error("{\"flags\":[]}\n  \"", "f.json:2:3: invalid JSON: parse error: "
                 "trailing garbage");
    expect_error("{\"flags\":[],}", "f.json:1:13: invalid JSON: parse error: "
                 "invalid object key (must be a string)");
    expect_error("{\"flags\":[\"\xff\"]}", "f.json:1:12: invalid JSON: lexical "
                 "error: invalid bytes in UTF8 string.");
    expect_error("{\"flags\":[1.]}", "f.json:1:13: invalid JSON: lexical "
                 "error: malformed number, a digit is required after the "
                 "decimal point.");
    expect_error("// no comments\n{}", "f.json:1:1: invalid JSON: lexical "
                 "error: probable comment found in input text, comments are "
                 "not enabled.");
}

static void test_nesting_limit(void **state)
{
    (void) state;
    enum { DEPTH = 100000 };
    char *deep = malloc(DEPTH + 32);
    memcpy(deep, "{\"flags\":[], \"x\":", 17);
    memset(deep + 17, '[', DEPTH);
    deep[17 + DEPTH] = '\0';
    /* 512 levels are the object and 511 '[': the 512th '[' is refused */
    expect_error(deep, "f.json:1:529: invalid JSON: nesting deeper than 512 "
                 "levels");

    /* exactly 512 levels load */
    memset(deep + 17, '[', 511);
    memset(deep + 17 + 511, ']', 511);
    strcpy(deep + 17 + 1022, "}");
    fl_project_free(load(deep));
    free(deep);
}

/* ------------------------------------------------------- schema errors */

static void test_top_level_errors(void **state)
{
    (void) state;
    expect_error("[]", "f.json: the top level must be an object");
    expect_error("\"flags\"", "f.json: the top level must be an object");
    expect_error("{}", "f.json: \"flags\" is missing");
    expect_error("{\"flags\":{}}", "f.json: \"flags\" must be an array");
    expect_error("{\"flags\":null}", "f.json: \"flags\" must be an array");
}

static void test_flag_errors(void **state)
{
    (void) state;
    expect_error("{\"flags\":[{\"name\":\"ok\",\"enabled\":true,"
                 "\"rolloutPercentage\":1},1]}",
                 "f.json: flags[1]: not an object");
    expect_error("{\"flags\":[{}]}", "f.json: flags[0]: \"name\" is missing");
    expect_error("{\"flags\":[{\"name\":1}]}",
                 "f.json: flags[0]: \"name\" must be a string");
    expect_error("{\"flags\":[{\"name\":\"a b\"}]}",
                 "f.json: flags[0]: \"name\" must match [A-Za-z0-9_.:-]{1,128}");
    expect_error("{\"flags\":[{\"name\":\"\"}]}",
                 "f.json: flags[0]: \"name\" must match [A-Za-z0-9_.:-]{1,128}");
    expect_error("{\"flags\":[{\"name\":\"a\\u00e9\"}]}",
                 "f.json: flags[0]: \"name\" must match [A-Za-z0-9_.:-]{1,128}");

    char json[512], name[130];
    memset(name, 'n', 129);
    name[129] = '\0';
    snprintf(json, sizeof(json), "{\"flags\":[{\"name\":\"%s\"}]}", name);
    expect_error(json,
                 "f.json: flags[0]: \"name\" must match [A-Za-z0-9_.:-]{1,128}");
    name[128] = '\0';    /* 128 bytes is fine */
    snprintf(json, sizeof(json), "{\"flags\":[{\"name\":\"%s\",\"enabled\":"
             "true,\"rolloutPercentage\":0}]}", name);
    fl_project_free(load(json));

    expect_error("{\"flags\":[{\"name\":\"a\"}]}",
                 "f.json: flag \"a\": \"enabled\" is missing");
    expect_error("{\"flags\":[{\"name\":\"a\",\"enabled\":1}]}",
                 "f.json: flag \"a\": \"enabled\" must be a boolean");
    expect_error("{\"flags\":[{\"name\":\"a\",\"enabled\":\"true\"}]}",
                 "f.json: flag \"a\": \"enabled\" must be a boolean");
    expect_error("{\"flags\":[{\"name\":\"a\",\"enabled\":true}]}",
                 "f.json: flag \"a\": \"rolloutPercentage\" is missing");
    expect_error("{\"flags\":[{\"name\":\"a\",\"enabled\":true,"
                 "\"rolloutPercentage\":\"5\"}]}",
                 "f.json: flag \"a\": \"rolloutPercentage\" must be a number");
    expect_error("{\"flags\":[{\"name\":\"a\",\"enabled\":true,"
                 "\"rolloutPercentage\":null}]}",
                 "f.json: flag \"a\": \"rolloutPercentage\" must be a number");

    static const char *range[] = { "100.001", "100.0001", "-1", "-0.001", "1e400", "101",
                                   "1e3", NULL };
    for (int i = 0; range[i]; i++) {
        snprintf(json, sizeof(json), "{\"flags\":[{\"name\":\"a\",\"enabled\":"
                 "true,\"rolloutPercentage\":%s}]}", range[i]);
        expect_error(json, "f.json: flag \"a\": \"rolloutPercentage\" must be "
                     "between 0 and 100");
    }
    static const char *prec[] = { "1.2345", "0.0001", "1e-4", "99.9999",
                                  "12.3451e0", NULL };
    for (int i = 0; prec[i]; i++) {
        snprintf(json, sizeof(json), "{\"flags\":[{\"name\":\"a\",\"enabled\":"
                 "true,\"rolloutPercentage\":%s}]}", prec[i]);
        expect_error(json, "f.json: flag \"a\": \"rolloutPercentage\" has more "
                     "than 3 decimals");
    }

    expect_error(FLAG(",\"segments\":\"x\""),
                 "f.json: flag \"f\": \"segments\" must be an array of strings");
    expect_error(FLAG(",\"segments\":[1]"),
                 "f.json: flag \"f\": \"segments\" must be an array of strings");
    expect_error(FLAG(",\"segments\":[\"nope\"]"),
                 "f.json: flag \"f\": unknown segment \"nope\"");
    expect_error(FLAG(",\"stickiness\":\"\""),
                 "f.json: flag \"f\": \"stickiness\" must be a non-empty string "
                 "of at most 128 bytes");
    expect_error(FLAG(",\"stickiness\":5"),
                 "f.json: flag \"f\": \"stickiness\" must be a non-empty string "
                 "of at most 128 bytes");

    expect_error("{\"flags\":[{\"name\":\"a\",\"enabled\":true,"
                 "\"rolloutPercentage\":1},{\"name\":\"b\",\"enabled\":true,"
                 "\"rolloutPercentage\":1},{\"name\":\"a\",\"enabled\":false,"
                 "\"rolloutPercentage\":2}]}",
                 "f.json: flag \"a\": duplicate flag name");
}

static void test_rollback_errors(void **state)
{
    (void) state;
    expect_error(FLAG(",\"rollback\":5"),
                 "f.json: flag \"f\": \"rollback\" must be an object or false");
    expect_error(FLAG(",\"rollback\":null"),
                 "f.json: flag \"f\": \"rollback\" must be an object or false");
    expect_error(FLAG(",\"rollback\":[]"),
                 "f.json: flag \"f\": \"rollback\" must be an object or false");

    static const char *min[] = { "0", "1.5", "-1", "\"5\"", "4294967296",
                                 "true", NULL };
    static const char *rate[] = { "0", "100.5", "-5", "\"5\"", "1e9", NULL };
    static const char *window[] = { "0", "3601", "1.5", "\"60\"", "-60",
                                    NULL };
    char json[256];

    for (int i = 0; min[i]; i++) {
        snprintf(json, sizeof(json), FLAG(",\"rollback\":{\"minErrors\":%s}"),
                 min[i]);
        expect_error(json, "f.json: flag \"f\": rollback: \"minErrors\" must "
                     "be an integer >= 1");
    }
    for (int i = 0; rate[i]; i++) {
        snprintf(json, sizeof(json), FLAG(",\"rollback\":{\"rate\":%s}"),
                 rate[i]);
        expect_error(json, "f.json: flag \"f\": rollback: \"rate\" must be a "
                     "number above 0 and at most 100");
    }
    expect_error(FLAG(",\"rollback\":{\"rate\":0.0001}"),
                 "f.json: flag \"f\": rollback: \"rate\" has more than 3 "
                 "decimals");
    for (int i = 0; window[i]; i++) {
        snprintf(json, sizeof(json), FLAG(",\"rollback\":{\"window\":%s}"),
                 window[i]);
        expect_error(json, "f.json: flag \"f\": rollback: \"window\" must be "
                     "an integer between 1 and 3600");
    }
}

static void test_segment_errors(void **state)
{
    (void) state;
    expect_error("{\"flags\":[],\"segments\":[]}",
                 "f.json: \"segments\" must be an object");
    expect_error("{\"flags\":[],\"segments\":{\"\":{\"rules\":[]}}}",
                 "f.json: a segment name is empty");
    expect_error("{\"flags\":[],\"segments\":{\"s\":{\"rules\":[]},"
                 "\"s\":{\"rules\":[]}}}",
                 "f.json: segment \"s\": defined twice");
    expect_error("{\"flags\":[],\"segments\":{\"s\":1}}",
                 "f.json: segment \"s\": not an object");
    expect_error("{\"flags\":[],\"segments\":{\"s\":{}}}",
                 "f.json: segment \"s\": \"rules\" is missing");
    expect_error("{\"flags\":[],\"segments\":{\"s\":{\"rules\":{}}}}",
                 "f.json: segment \"s\": \"rules\" must be an array");
    expect_error("{\"flags\":[],\"segments\":{\"a\\nb\":{\"rules\":[1]}}}",
                 "f.json: segment \"a\\nb\": rule 1: not an object");

    char json[512], name[130];
    memset(name, 's', 129);
    name[129] = '\0';
    snprintf(json, sizeof(json),
             "{\"flags\":[],\"segments\":{\"%s\":{\"rules\":[]}}}", name);
    expect_error(json, "f.json: segment \"ssssssssssssssssssssssssssssssss"
                 "ssssssssssssssssssssssssssssssss...\": name is longer than "
                 "128 bytes");

    /* a long name is cut before a multi-byte character, not inside it */
    memset(name, 's', 63);
    for (int i = 63; i < 127; i += 2) {
        name[i] = '\xc3';
        name[i + 1] = '\xa9';
    }
    name[127] = '\0';
    snprintf(json, sizeof(json),
             "{\"flags\":[],\"segments\":{\"%s\":{\"rules\":[3]}}}", name);
    expect_error(json, "f.json: segment \"ssssssssssssssssssssssssssssssss"
                 "sssssssssssssssssssssssssssssss...\": rule 1: not an object");
}

static void test_rule_errors(void **state)
{
    (void) state;
    expect_error(RULE("1"), "f.json: segment \"s\": rule 2: not an object");
    expect_error(RULE("{}"), "f.json: segment \"s\": rule 2: \"trait\" is "
                 "missing");
    expect_error(RULE("{\"trait\":\"\"}"), "f.json: segment \"s\": rule 2: "
                 "\"trait\" must be a non-empty string of at most 128 bytes");
    expect_error(RULE("{\"trait\":7}"), "f.json: segment \"s\": rule 2: "
                 "\"trait\" must be a non-empty string of at most 128 bytes");
    expect_error(RULE("{\"trait\":\"a\"}"), "f.json: segment \"s\": rule 2: "
                 "\"op\" is missing");
    expect_error(RULE("{\"trait\":\"a\",\"op\":1}"), "f.json: segment \"s\": "
                 "rule 2: \"op\" must be a string");
    expect_error(RULE("{\"trait\":\"a\",\"op\":\"like\"}"), "f.json: segment "
                 "\"s\": rule 2: unknown operator \"like\"");
    expect_error(RULE("{\"trait\":\"a\",\"op\":\"EQ\",\"value\":\"x\"}"),
                 "f.json: segment \"s\": rule 2: unknown operator \"EQ\"");
    expect_error(RULE("{\"trait\":\"a\",\"op\":\"eq\"}"), "f.json: segment "
                 "\"s\": rule 2: \"value\" is missing");
    expect_error(RULE("{\"trait\":\"a\",\"op\":\"eq\",\"value\":1}"),
                 "f.json: segment \"s\": rule 2: \"value\" must be a string");
    expect_error(RULE("{\"trait\":\"a\",\"op\":\"contains\",\"value\":null}"),
                 "f.json: segment \"s\": rule 2: \"value\" must be a string");
    expect_error(RULE("{\"trait\":\"a\",\"op\":\"regex\",\"value\":5}"),
                 "f.json: segment \"s\": rule 2: \"value\" must be a string");
    expect_error(RULE("{\"trait\":\"a\",\"op\":\"in\",\"value\":\"x\"}"),
                 "f.json: segment \"s\": rule 2: \"values\" is missing");
    expect_error(RULE("{\"trait\":\"a\",\"op\":\"not_in\",\"values\":\"x\"}"),
                 "f.json: segment \"s\": rule 2: \"values\" must be an array "
                 "of strings");
    expect_error(RULE("{\"trait\":\"a\",\"op\":\"in\",\"values\":[\"a\",1]}"),
                 "f.json: segment \"s\": rule 2: \"values\" must be an array "
                 "of strings");
    expect_error(RULE("{\"trait\":\"a\",\"op\":\"gt\",\"value\":\"abc\"}"),
                 "f.json: segment \"s\": rule 2: \"value\" must be a number or "
                 "a numeric string");
    expect_error(RULE("{\"trait\":\"a\",\"op\":\"lte\",\"value\":\"01\"}"),
                 "f.json: segment \"s\": rule 2: \"value\" must be a number or "
                 "a numeric string");
    expect_error(RULE("{\"trait\":\"a\",\"op\":\"gte\",\"value\":true}"),
                 "f.json: segment \"s\": rule 2: \"value\" must be a number or "
                 "a numeric string");
    expect_error(RULE("{\"trait\":\"a\",\"op\":\"semver_gt\",\"value\":\"1.x\"}"),
                 "f.json: segment \"s\": rule 2: \"value\" \"1.x\" is not a "
                 "semantic version");
    expect_error(RULE("{\"trait\":\"a\",\"op\":\"semver_eq\",\"value\":1}"),
                 "f.json: segment \"s\": rule 2: \"value\" must be a string");
    expect_error(RULE("{\"trait\":\"a\",\"op\":\"regex\",\"value\":\"(ab\"}"),
                 "f.json: segment \"s\": rule 2: invalid regex at offset 3: "
                 "missing closing parenthesis");
    expect_error(RULE("{\"trait\":\"a\",\"op\":\"regex\",\"value\":\"a{2,1}\"}"),
                 "f.json: segment \"s\": rule 2: invalid regex at offset 5: "
                 "numbers out of order in {} quantifier");
    expect_error(RULE("{\"trait\":\"a\",\"op\":\"eq\",\"value\":\"x\","
                      "\"ignoreCase\":\"yes\"}"),
                 "f.json: segment \"s\": rule 2: \"ignoreCase\" must be a "
                 "boolean");
}

/* ------------------------------------------------------ what loads */

static uint32_t pct(const char *number)
{
    char json[256];
    fl_flag_info_t info;

    snprintf(json, sizeof(json), "{\"flags\":[{\"name\":\"a\",\"enabled\":"
             "true,\"rolloutPercentage\":%s}]}", number);
    fl_project_t *p = load(json);
    assert_int_equal(fl_project_flag_info(p, 0, &info), 0);
    fl_project_free(p);
    return info.rollout_milli;
}

static void test_percentages(void **state)
{
    (void) state;
    assert_int_equal(pct("0"), 0);
    assert_int_equal(pct("-0"), 0);
    assert_int_equal(pct("0.0"), 0);
    assert_int_equal(pct("0e5"), 0);
    assert_int_equal(pct("0.001"), 1);
    assert_int_equal(pct("1e-3"), 1);
    assert_int_equal(pct("12.345"), 12345);
    assert_int_equal(pct("1.25e1"), 12500);
    assert_int_equal(pct("2500e-2"), 25000);
    assert_int_equal(pct("1.2340"), 1234);        /* the value has 3 decimals */
    assert_int_equal(pct("99.9990"), 99999);
    assert_int_equal(pct("33.333"), 33333);
    assert_int_equal(pct("0.1"), 100);
    assert_int_equal(pct("100"), 100000);
    assert_int_equal(pct("1E2"), 100000);
    assert_int_equal(pct("100.000"), 100000);
    assert_int_equal(pct("0.00001e5"), 1000);
}

static void test_rollback_policies(void **state)
{
    (void) state;
    fl_project_t *p = load(
        "{\"flags\":["
        "{\"name\":\"a\",\"enabled\":true,\"rolloutPercentage\":1},"
        "{\"name\":\"b\",\"enabled\":true,\"rolloutPercentage\":1,"
        " \"rollback\":true},"
        "{\"name\":\"c\",\"enabled\":true,\"rolloutPercentage\":1,"
        " \"rollback\":false},"
        "{\"name\":\"d\",\"enabled\":true,\"rolloutPercentage\":1,"
        " \"rollback\":{\"minErrors\":50,\"rate\":5.5,\"window\":300,"
        "  \"other\":1}},"
        "{\"name\":\"e\",\"enabled\":true,\"rolloutPercentage\":1,"
        " \"rollback\":{\"rate\":0.001}},"
        "{\"name\":\"f\",\"enabled\":true,\"rolloutPercentage\":1,"
        " \"rollback\":{\"minErrors\":1,\"rate\":100,\"window\":3600}}"
        "]}");
    fl_flag_info_t i;

    fl_project_flag_info(p, 0, &i);
    assert_int_equal(i.rollback.mode, FL_ROLLBACK_INHERIT);
    fl_project_flag_info(p, 1, &i);
    assert_int_equal(i.rollback.mode, FL_ROLLBACK_INHERIT);
    fl_project_flag_info(p, 2, &i);
    assert_int_equal(i.rollback.mode, FL_ROLLBACK_OFF);

    fl_project_flag_info(p, 3, &i);
    assert_int_equal(i.rollback.mode, FL_ROLLBACK_ON);
    assert_int_equal(i.rollback.min_errors, 50);
    assert_int_equal(i.rollback.rate_milli, 5500);
    assert_int_equal(i.rollback.window, 300);

    /* fields not given stay 0: taken from the http-level policy */
    fl_project_flag_info(p, 4, &i);
    assert_int_equal(i.rollback.mode, FL_ROLLBACK_ON);
    assert_int_equal(i.rollback.min_errors, 0);
    assert_int_equal(i.rollback.rate_milli, 1);
    assert_int_equal(i.rollback.window, 0);

    fl_project_flag_info(p, 5, &i);
    assert_int_equal(i.rollback.min_errors, 1);
    assert_int_equal(i.rollback.rate_milli, 100000);
    assert_int_equal(i.rollback.window, 3600);
    fl_project_free(p);
}

static void test_file_and_accessors(void **state)
{
    (void) state;
    fl_project_t *p = NULL;
    char err[256];
    fl_flag_info_t i;
    size_t len;

    assert_int_equal(fl_project_load("data/shop.json", &p, err, sizeof(err)),
                     FL_OK);
    assert_int_equal(fl_project_flag_count(p), 3);

    assert_int_equal(fl_project_flag_info(p, 0, &i), 0);
    assert_string_equal(i.name, "new-checkout");
    assert_int_equal(i.name_len, 12);
    assert_int_equal(i.enabled, 1);
    assert_int_equal(i.rollout_milli, 25000);
    assert_int_equal(i.nsegments, 1);
    assert_int_equal(i.rollback.mode, FL_ROLLBACK_ON);
    assert_int_equal(i.rollback.min_errors, 50);
    assert_int_equal(i.rollback.rate_milli, 5000);
    assert_int_equal(i.rollback.window, 300);

    assert_int_equal(fl_project_flag_info(p, 1, &i), 0);
    assert_string_equal(i.name, "dark-mode");
    assert_int_equal(i.enabled, 0);
    assert_int_equal(i.rollout_milli, 12500);
    assert_int_equal(i.nsegments, 0);
    assert_int_equal(i.rollback.mode, FL_ROLLBACK_OFF);

    assert_int_equal(fl_project_flag_info(p, 3, &i), -1);
    assert_int_equal(fl_project_flag_info(NULL, 0, &i), -1);

    assert_string_equal(fl_project_flag_segment(p, 2, 0, &len), "beta");
    assert_int_equal(len, 4);
    assert_string_equal(fl_project_flag_segment(p, 2, 1, &len), "staff");
    assert_null(fl_project_flag_segment(p, 2, 2, &len));
    assert_null(fl_project_flag_segment(p, 1, 0, &len));
    assert_null(fl_project_flag_segment(p, 9, 0, &len));

    assert_int_equal(fl_project_find_flag(p, "new-checkout", 12), 0);
    assert_int_equal(fl_project_find_flag(p, "search-v2", 9), 2);
    assert_int_equal(fl_project_find_flag(p, "search-v2x", 9), 2);
    assert_int_equal(fl_project_find_flag(p, "search", 6), -1);
    assert_int_equal(fl_project_find_flag(p, "", 0), -1);
    assert_int_equal(fl_project_find_flag(NULL, "a", 1), -1);
    fl_project_free(p);

    p = (fl_project_t *) 1;
    assert_int_equal(fl_project_load("data/missing.json", &p, err,
                                     sizeof(err)), FL_ERR_IO);
    assert_null(p);
    assert_string_equal(err, "data/missing.json: cannot open: No such file "
                        "or directory");

    assert_int_equal(fl_project_load("data/broken.json", &p, err,
                                     sizeof(err)), FL_ERR_INVALID);
    assert_string_equal(err, "data/broken.json:3:33: invalid JSON: lexical "
                        "error: invalid string in json text.");

    /* a short buffer gets a truncated, terminated message; none is fine */
    char tiny[8];
    assert_int_equal(fl_project_load_buffer("{}", 2, "abcdefgh", &p, tiny,
                                            sizeof(tiny)), FL_ERR_INVALID);
    assert_string_equal(tiny, "abcdefg");
    assert_int_equal(fl_project_load_buffer("{}", 2, "x", &p, NULL, 0),
                     FL_ERR_INVALID);

    /* empty flags, unknown fields everywhere, duplicate keys: last wins */
    p = load("{\"version\":3,\"flags\":[],\"segments\":{}}");
    assert_int_equal(fl_project_flag_count(p), 0);
    fl_project_free(p);
    p = load("{\"flags\":[{\"name\":\"a\",\"enabled\":false,\"enabled\":true,"
             "\"rolloutPercentage\":5,\"x\":{\"y\":[null]},"
             "\"segments\":[\"s\"]}],"
             "\"segments\":{\"s\":{\"note\":1,\"rules\":[{\"trait\":\"t\","
             "\"op\":\"exists\",\"comment\":\"hi\"}]}},\"meta\":null}");
    fl_project_flag_info(p, 0, &i);
    assert_int_equal(i.enabled, 1);
    fl_project_free(p);
    fl_project_free(NULL);
}

/* ------------------------------------------------------ definition hash */

static uint64_t hash_of(const char *json, const char *flag)
{
    fl_project_t *p = load(json);
    fl_flag_info_t i;
    long k = fl_project_find_flag(p, flag, strlen(flag));

    assert_true(k >= 0);
    fl_project_flag_info(p, (size_t) k, &i);
    fl_project_free(p);
    return i.def_hash;
}

static const char base[] =
    "{\"flags\":[{\"name\":\"f\",\"enabled\":true,\"rolloutPercentage\":25,"
    "\"segments\":[\"beta\"],\"rollback\":{\"minErrors\":5}},"
    "{\"name\":\"g\",\"enabled\":true,\"rolloutPercentage\":25}],"
    "\"segments\":{\"beta\":{\"rules\":[{\"trait\":\"plan\",\"op\":\"in\","
    "\"values\":[\"pro\",\"ent\"]}]},\"other\":{\"rules\":[]}}}";

static void test_def_hash(void **state)
{
    (void) state;
    uint64_t h = hash_of(base, "f");
    uint64_t g = hash_of(base, "g");

    assert_true(h != g);

    /* the same definition written differently */
    static const char *same[] = {
        /* key order, whitespace, unknown fields */
        "{\"segments\":{\"other\":{\"rules\":[]},\"beta\":{\"x\":1,\"rules\":"
        "[{\"values\":[\"pro\",\"ent\"],\"op\":\"in\",\"trait\":\"plan\"}]}},"
        "\"flags\":[ {\"rollback\":{\"minErrors\":5},\"segments\":[\"beta\"],"
        "\"rolloutPercentage\":25, \"enabled\":true,\"name\":\"f\",\"u\":[]}]}",
        /* explicit defaults, number spelling, list order */
        "{\"flags\":[{\"name\":\"f\",\"enabled\":true,\"rolloutPercentage\":"
        "2.5e1,\"stickiness\":\"userId\",\"segments\":[\"beta\"],"
        "\"rollback\":{\"minErrors\":5.0}}],\"segments\":{\"beta\":{\"rules\":"
        "[{\"trait\":\"plan\",\"op\":\"in\",\"values\":[\"ent\",\"pro\"]}]}}}",
        /* another flag and an unreferenced segment changed */
        "{\"flags\":[{\"name\":\"g\",\"enabled\":false,\"rolloutPercentage\":1},"
        "{\"name\":\"f\",\"enabled\":true,\"rolloutPercentage\":25,"
        "\"segments\":[\"beta\"],\"rollback\":{\"minErrors\":5}}],"
        "\"segments\":{\"beta\":{\"rules\":[{\"trait\":\"plan\",\"op\":\"in\","
        "\"values\":[\"pro\",\"ent\"]}]},\"other\":{\"rules\":[{\"trait\":\"x\","
        "\"op\":\"exists\"}]}}}",
        NULL
    };
    for (int i = 0; same[i]; i++) {
        assert_true(hash_of(same[i], "f") == h);
    }

    /* any change of a known field or a referenced rule */
    static const char *changed[] = {
        "{\"flags\":[{\"name\":\"f\",\"enabled\":false,\"rolloutPercentage\":25,"
        "\"segments\":[\"beta\"],\"rollback\":{\"minErrors\":5}}],"
        "\"segments\":{\"beta\":{\"rules\":[{\"trait\":\"plan\",\"op\":\"in\","
        "\"values\":[\"pro\",\"ent\"]}]}}}",
        "{\"flags\":[{\"name\":\"f\",\"enabled\":true,\"rolloutPercentage\":25.001,"
        "\"segments\":[\"beta\"],\"rollback\":{\"minErrors\":5}}],"
        "\"segments\":{\"beta\":{\"rules\":[{\"trait\":\"plan\",\"op\":\"in\","
        "\"values\":[\"pro\",\"ent\"]}]}}}",
        "{\"flags\":[{\"name\":\"f\",\"enabled\":true,\"rolloutPercentage\":25,"
        "\"segments\":[],\"rollback\":{\"minErrors\":5}}],"
        "\"segments\":{\"beta\":{\"rules\":[{\"trait\":\"plan\",\"op\":\"in\","
        "\"values\":[\"pro\",\"ent\"]}]}}}",
        "{\"flags\":[{\"name\":\"f\",\"enabled\":true,\"rolloutPercentage\":25,"
        "\"segments\":[\"beta\"],\"rollback\":{\"minErrors\":6}}],"
        "\"segments\":{\"beta\":{\"rules\":[{\"trait\":\"plan\",\"op\":\"in\","
        "\"values\":[\"pro\",\"ent\"]}]}}}",
        "{\"flags\":[{\"name\":\"f\",\"enabled\":true,\"rolloutPercentage\":25,"
        "\"segments\":[\"beta\"],\"rollback\":{\"minErrors\":5,\"window\":60}}],"
        "\"segments\":{\"beta\":{\"rules\":[{\"trait\":\"plan\",\"op\":\"in\","
        "\"values\":[\"pro\",\"ent\"]}]}}}",
        "{\"flags\":[{\"name\":\"f\",\"enabled\":true,\"rolloutPercentage\":25,"
        "\"segments\":[\"beta\"]}],"
        "\"segments\":{\"beta\":{\"rules\":[{\"trait\":\"plan\",\"op\":\"in\","
        "\"values\":[\"pro\",\"ent\"]}]}}}",
        "{\"flags\":[{\"name\":\"f\",\"enabled\":true,\"rolloutPercentage\":25,"
        "\"segments\":[\"beta\"],\"rollback\":false}],"
        "\"segments\":{\"beta\":{\"rules\":[{\"trait\":\"plan\",\"op\":\"in\","
        "\"values\":[\"pro\",\"ent\"]}]}}}",
        "{\"flags\":[{\"name\":\"f\",\"enabled\":true,\"rolloutPercentage\":25,"
        "\"segments\":[\"beta\"],\"stickiness\":\"company\","
        "\"rollback\":{\"minErrors\":5}}],"
        "\"segments\":{\"beta\":{\"rules\":[{\"trait\":\"plan\",\"op\":\"in\","
        "\"values\":[\"pro\",\"ent\"]}]}}}",
        "{\"flags\":[{\"name\":\"f\",\"enabled\":true,\"rolloutPercentage\":25,"
        "\"segments\":[\"beta\"],\"rollback\":{\"minErrors\":5}}],"
        "\"segments\":{\"beta\":{\"rules\":[{\"trait\":\"plan\",\"op\":\"in\","
        "\"values\":[\"pro\",\"enterprise\"]}]}}}",
        "{\"flags\":[{\"name\":\"f\",\"enabled\":true,\"rolloutPercentage\":25,"
        "\"segments\":[\"beta\"],\"rollback\":{\"minErrors\":5}}],"
        "\"segments\":{\"beta\":{\"rules\":[{\"trait\":\"plan\",\"op\":\"not_in\","
        "\"values\":[\"pro\",\"ent\"]}]}}}",
        "{\"flags\":[{\"name\":\"f\",\"enabled\":true,\"rolloutPercentage\":25,"
        "\"segments\":[\"beta\"],\"rollback\":{\"minErrors\":5}}],"
        "\"segments\":{\"beta\":{\"rules\":[{\"trait\":\"Plan\",\"op\":\"in\","
        "\"values\":[\"pro\",\"ent\"]}]}}}",
        "{\"flags\":[{\"name\":\"f\",\"enabled\":true,\"rolloutPercentage\":25,"
        "\"segments\":[\"beta\"],\"rollback\":{\"minErrors\":5}}],"
        "\"segments\":{\"beta\":{\"rules\":[{\"trait\":\"plan\",\"op\":\"in\","
        "\"values\":[\"pro\",\"ent\"],\"ignoreCase\":true}]}}}",
        "{\"flags\":[{\"name\":\"f\",\"enabled\":true,\"rolloutPercentage\":25,"
        "\"segments\":[\"beta\"],\"rollback\":{\"minErrors\":5}}],"
        "\"segments\":{\"beta\":{\"rules\":[{\"trait\":\"plan\",\"op\":\"in\","
        "\"values\":[\"pro\",\"ent\"]},{\"trait\":\"x\",\"op\":\"exists\"}]}}}",
        /* the same rules under another segment name */
        "{\"flags\":[{\"name\":\"f\",\"enabled\":true,\"rolloutPercentage\":25,"
        "\"segments\":[\"beta2\"],\"rollback\":{\"minErrors\":5}}],"
        "\"segments\":{\"beta2\":{\"rules\":[{\"trait\":\"plan\",\"op\":\"in\","
        "\"values\":[\"pro\",\"ent\"]}]}}}",
        NULL
    };
    for (int i = 0; changed[i]; i++) {
        uint64_t c = hash_of(changed[i], "f");
        assert_true(c != h);
        for (int j = 0; j < i; j++) {
            assert_true(c != hash_of(changed[j], "f"));
        }
    }

    /* numeric rule values compare by value */
    assert_true(
        hash_of("{\"flags\":[{\"name\":\"f\",\"enabled\":true,"
                "\"rolloutPercentage\":1,\"segments\":[\"s\"]}],\"segments\":"
                "{\"s\":{\"rules\":[{\"trait\":\"a\",\"op\":\"gt\",\"value\":10}]}}}",
                "f") ==
        hash_of("{\"flags\":[{\"name\":\"f\",\"enabled\":true,"
                "\"rolloutPercentage\":1,\"segments\":[\"s\"]}],\"segments\":"
                "{\"s\":{\"rules\":[{\"trait\":\"a\",\"op\":\"gt\",\"value\":"
                "\"1.0e1\"}]}}}", "f"));
    assert_true(
        hash_of("{\"flags\":[{\"name\":\"f\",\"enabled\":true,"
                "\"rolloutPercentage\":1,\"segments\":[\"s\"]}],\"segments\":"
                "{\"s\":{\"rules\":[{\"trait\":\"a\",\"op\":\"gt\",\"value\":10}]}}}",
                "f") !=
        hash_of("{\"flags\":[{\"name\":\"f\",\"enabled\":true,"
                "\"rolloutPercentage\":1,\"segments\":[\"s\"]}],\"segments\":"
                "{\"s\":{\"rules\":[{\"trait\":\"a\",\"op\":\"gt\",\"value\":"
                "-10}]}}}", "f"));
}

/* ------------------------------------------------ unknown fields (docs/flags-file.md) */

static void expect_warnings(const char *json, const char *const *want,
                            size_t n)
{
    fl_project_t *p = load(json);
    size_t count = fl_project_warning_count(p);

    for (size_t i = 0; i < count && i < n; i++) {
        assert_string_equal(fl_project_warning(p, i), want[i]);
    }
    if (count != n) {
        fail_msg("%zu warnings, wanted %zu: %s", count, n, json);
    }
    assert_null(fl_project_warning(p, n));
    fl_project_free(p);
}

#define WARNINGS(json, ...) do { \
        static const char *const w_[] = { __VA_ARGS__ }; \
        expect_warnings(json, w_, sizeof(w_) / sizeof(w_[0])); \
    } while (0)

static void test_unknown_field_warnings(void **state)
{
    (void) state;

    expect_warnings(FLAG(",\"stickiness\":\"plan\",\"segments\":[],"
                         "\"rollback\":{\"minErrors\":1,\"rate\":5,\"window\":9}"),
                    NULL, 0);
    expect_warnings(RULE("{\"trait\":\"b\",\"op\":\"in\",\"values\":[\"x\"],"
                         "\"ignoreCase\":true,\"value\":\"y\"}"), NULL, 0);

    WARNINGS(FLAG(",\"stickyness\":\"plan\",\"segment\":[\"s\"]"),
             "t.json: flag \"f\": unknown field \"stickyness\" ignored",
             "t.json: flag \"f\": unknown field \"segment\" ignored");
    WARNINGS(FLAG(",\"rollback\":{\"minErrors\":3,\"windw\":30}"),
             "t.json: flag \"f\": rollback: unknown field \"windw\" ignored");
    WARNINGS(RULE("{\"trait\":\"b\",\"op\":\"eq\",\"value\":\"x\",\"valeu\":\"y\"}"),
             "t.json: segment \"s\": rule 2: unknown field \"valeu\" ignored");
    WARNINGS("{\"flags\":[],\"segments\":{\"s\":{\"rules\":[],\"note\":1}}}",
             "t.json: segment \"s\": unknown field \"note\" ignored");
    /* the top level first, then segments, then flags; a key written twice
     * warns once; a name with odd bytes is escaped */
    WARNINGS("{\"version\":2,\"flags\":[{\"name\":\"f\",\"enabled\":true,"
             "\"rolloutPercentage\":1,\"x\":1,\"x\":2}],\"segments\":{\"s\":"
             "{\"rules\":[],\"a\\nb\":0}},\"version\":3}",
             "t.json: unknown field \"version\" ignored",
             "t.json: segment \"s\": unknown field \"a\\nb\" ignored",
             "t.json: flag \"f\": unknown field \"x\" ignored");

    /* the file still loads with what it knows, and the definition hash
     * does not see unknown fields */
    fl_project_t *a = load(FLAG(""));
    fl_project_t *b = load(FLAG(",\"stickyness\":\"plan\""));
    fl_flag_info_t ia, ib;
    assert_int_equal(fl_project_flag_info(a, 0, &ia), 0);
    assert_int_equal(fl_project_flag_info(b, 0, &ib), 0);
    assert_true(ia.def_hash == ib.def_hash);
    assert_int_equal(fl_project_warning_count(a), 0);
    fl_project_free(a);
    fl_project_free(b);

    assert_int_equal(fl_project_warning_count(NULL), 0);
    assert_null(fl_project_warning(NULL, 0));
}

static void test_warning_cap(void **state)
{
    char json[4096];
    size_t len = 0;
    fl_project_t *p;
    (void) state;

    len += (size_t) snprintf(json + len, sizeof(json) - len,
                             "{\"flags\":[{\"name\":\"f\",\"enabled\":true,"
                             "\"rolloutPercentage\":1");
    for (int i = 0; i < 40; i++) {
        len += (size_t) snprintf(json + len, sizeof(json) - len, ",\"u%d\":%d",
                                 i, i);
    }
    snprintf(json + len, sizeof(json) - len, "}]}");

    p = load(json);
    assert_int_equal(fl_project_warning_count(p), FL_MAX_PROJECT_WARNINGS + 1);
    assert_string_equal(fl_project_warning(p, 0),
                        "t.json: flag \"f\": unknown field \"u0\" ignored");
    assert_string_equal(fl_project_warning(p, 31),
                        "t.json: flag \"f\": unknown field \"u31\" ignored");
    assert_string_equal(fl_project_warning(p, 32),
                        "t.json: and 8 more unknown fields ignored");
    assert_null(fl_project_warning(p, 33));
    fl_project_free(p);
}

/* ------------------------------------------ special and huge files */

static void expect_file_error(const char *path, const char *why)
{
    fl_project_t *p = (fl_project_t *) 1;
    char err[512], want[1024];

    snprintf(want, sizeof(want), "%s: %s", path, why);
    assert_int_equal(fl_project_load(path, &p, err, sizeof(err)), FL_ERR_IO);
    assert_null(p);
    assert_string_equal(err, want);
}

static void test_special_files(void **state)
{
    char dir[] = "/tmp/fl-loader-XXXXXX", path[256];
    fl_project_t *p = NULL;
    char err[512];
    int fd;
    (void) state;

    assert_non_null(mkdtemp(dir));

    /* a FIFO without a writer: refused at once, never waited on (a hang
     * is turned into a failure by the alarm) */
    snprintf(path, sizeof(path), "%s/fifo.json", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    alarm(10);
    expect_file_error(path, "not a regular file");
    alarm(0);
    unlink(path);

    /* endless, so it must be refused before a byte is read */
    expect_file_error("/dev/zero", "not a regular file");
    expect_file_error(dir, "not a regular file");

    /* over the cap: sparse, so it takes no disk */
    snprintf(path, sizeof(path), "%s/huge.json", dir);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t) FL_MAX_FLAGS_FILE_SIZE + 1), 0);
    close(fd);
    expect_file_error(path, "larger than 33554432 bytes");
    unlink(path);

    /* a regular file still loads through the same path */
    snprintf(path, sizeof(path), "%s/ok.json", dir);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    static const char good[] =
        "{\"flags\":[{\"name\":\"a\",\"enabled\":true,\"rolloutPercentage\":1}]}";
    assert_int_equal(write(fd, good, sizeof(good) - 1), (ssize_t) sizeof(good) - 1);
    close(fd);
    assert_int_equal(fl_project_load(path, &p, err, sizeof(err)), FL_OK);
    assert_int_equal(fl_project_flag_count(p), 1);
    fl_project_free(p);
    unlink(path);

    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_syntax_errors),
        cmocka_unit_test(test_nesting_limit),
        cmocka_unit_test(test_top_level_errors),
        cmocka_unit_test(test_flag_errors),
        cmocka_unit_test(test_rollback_errors),
        cmocka_unit_test(test_segment_errors),
        cmocka_unit_test(test_rule_errors),
        cmocka_unit_test(test_percentages),
        cmocka_unit_test(test_rollback_policies),
        cmocka_unit_test(test_file_and_accessors),
        cmocka_unit_test(test_def_hash),
        cmocka_unit_test(test_unknown_field_warnings),
        cmocka_unit_test(test_warning_cap),
        cmocka_unit_test(test_special_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
