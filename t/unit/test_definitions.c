/*
 * test_definitions.c - the core of definitions=runtime (src/core/definitions.cpp,
 * docs/definitions-core.md): the difference between two versions, the
 * answer of a write, one flag put into or deleted from a document, a
 * stored version's header line and the history answer.
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
#include "unit_project.h"

static void expect_change(const fl_defs_change_t *c, fl_defs_kind_t kind,
    long old_idx, long new_idx)
{
    assert_int_equal(c->kind, kind);
    assert_int_equal(c->old_idx, old_idx);
    assert_int_equal(c->new_idx, new_idx);
}

/* ---------------------------------------------------------------- diff */

#define OLD3 "{\"flags\":[" \
    "{\"name\":\"a\",\"enabled\":true,\"rolloutPercentage\":10}," \
    "{\"name\":\"b\",\"enabled\":true,\"rolloutPercentage\":20}," \
    "{\"name\":\"c\",\"enabled\":true,\"rolloutPercentage\":30}]}"

static void test_diff_kinds(void **state)
{
    (void) state;
    fl_project_t *old = load(OLD3);
    /* c changed (first in the new order), a the same, d added, b removed */
    fl_project_t *nw = load("{\"flags\":["
        "{\"name\":\"c\",\"enabled\":true,\"rolloutPercentage\":31},"
        "{\"name\":\"a\",\"enabled\":true,\"rolloutPercentage\":10},"
        "{\"name\":\"d\",\"enabled\":false,\"rolloutPercentage\":0}]}");
    fl_defs_change_t c[6];

    assert_int_equal(fl_defs_diff(old, nw, c, 6), 4);
    expect_change(&c[0], FL_DEFS_CHANGED, 2, 0);
    expect_change(&c[1], FL_DEFS_SAME, 0, 1);
    expect_change(&c[2], FL_DEFS_ADDED, -1, 2);
    expect_change(&c[3], FL_DEFS_REMOVED, 1, -1);

    /* too little room: the count all the same, only max written */
    fl_defs_change_t d[3];
    memset(d, 0x5a, sizeof(d));
    assert_int_equal(fl_defs_diff(old, nw, d, 2), 4);
    expect_change(&d[0], FL_DEFS_CHANGED, 2, 0);
    expect_change(&d[1], FL_DEFS_SAME, 0, 1);
    assert_int_equal(d[2].old_idx, (long) 0x5a5a5a5a5a5a5a5aULL);
    assert_int_equal(fl_defs_diff(old, nw, NULL, 0), 4);

    /* no old project: every flag added; nothing against nothing */
    assert_int_equal(fl_defs_diff(NULL, nw, c, 6), 3);
    expect_change(&c[0], FL_DEFS_ADDED, -1, 0);
    expect_change(&c[1], FL_DEFS_ADDED, -1, 1);
    expect_change(&c[2], FL_DEFS_ADDED, -1, 2);
    assert_int_equal(fl_defs_diff(NULL, NULL, c, 6), 0);

    /* every flag removed */
    fl_project_t *none = load("{\"flags\":[]}");
    assert_int_equal(fl_defs_diff(old, none, c, 6), 3);
    expect_change(&c[0], FL_DEFS_REMOVED, 0, -1);
    expect_change(&c[1], FL_DEFS_REMOVED, 1, -1);
    expect_change(&c[2], FL_DEFS_REMOVED, 2, -1);

    fl_project_free(none);
    fl_project_free(nw);
    fl_project_free(old);
}

static void test_diff_segment(void **state)
{
    (void) state;
    fl_project_t *old = load("{\"flags\":["
        "{\"name\":\"a\",\"enabled\":true,\"rolloutPercentage\":10,\"segments\":[\"beta\"]},"
        "{\"name\":\"b\",\"enabled\":true,\"rolloutPercentage\":10,\"segments\":[\"staff\"]},"
        "{\"name\":\"c\",\"enabled\":true,\"rolloutPercentage\":10,\"segments\":[\"staff\",\"beta\"]}],"
        "\"segments\":{\"beta\":{\"rules\":[{\"trait\":\"plan\",\"op\":\"eq\",\"value\":\"pro\"}]},"
        "\"staff\":{\"rules\":[]}}}");
    /* only beta's rule differs */
    fl_project_t *nw = load("{\"flags\":["
        "{\"name\":\"a\",\"enabled\":true,\"rolloutPercentage\":10,\"segments\":[\"beta\"]},"
        "{\"name\":\"b\",\"enabled\":true,\"rolloutPercentage\":10,\"segments\":[\"staff\"]},"
        "{\"name\":\"c\",\"enabled\":true,\"rolloutPercentage\":10,\"segments\":[\"staff\",\"beta\"]}],"
        "\"segments\":{\"beta\":{\"rules\":[{\"trait\":\"plan\",\"op\":\"eq\",\"value\":\"team\"}]},"
        "\"staff\":{\"rules\":[]}}}");
    fl_defs_change_t c[6];

    assert_int_equal(fl_defs_diff(old, nw, c, 6), 3);
    expect_change(&c[0], FL_DEFS_CHANGED, 0, 0);
    expect_change(&c[1], FL_DEFS_SAME, 1, 1);
    expect_change(&c[2], FL_DEFS_CHANGED, 2, 2);

    fl_project_free(nw);
    fl_project_free(old);
}

static void test_diff_reorder_only(void **state)
{
    (void) state;
    fl_project_t *old = load(OLD3);
    /* other flag order, key order, spelling of numbers, whitespace and an
     * unknown field: nothing changed */
    fl_project_t *nw = load("{ \"flags\" : [\n"
        "  {\"rolloutPercentage\": 3e1, \"name\": \"c\", \"enabled\": true},\n"
        "  {\"name\": \"b\", \"enabled\": true, \"rolloutPercentage\": 20.000,"
        " \"owner\": \"team-x\"},\n"
        "  {\"enabled\": true, \"name\": \"a\", \"rolloutPercentage\": 10}\n"
        "], \"note\": 1 }");
    fl_defs_change_t c[6];

    assert_int_equal(fl_defs_diff(old, nw, c, 6), 3);
    expect_change(&c[0], FL_DEFS_SAME, 2, 0);
    expect_change(&c[1], FL_DEFS_SAME, 1, 1);
    expect_change(&c[2], FL_DEFS_SAME, 0, 2);

    fl_project_free(nw);
    fl_project_free(old);
}

/* -------------------------------------------------------------- answer */

static void expect_answer(const fl_project_t *old, const fl_project_t *nw,
    uint64_t version, const fl_control_t *const *ctl, int dry_run,
    const char *want)
{
    fl_defs_change_t c[16];
    size_t n = fl_defs_diff(old, nw, c, 16);
    size_t bound = fl_defs_answer_json_bound(old, nw, c, n);
    char *buf = malloc(bound);

    assert_non_null(buf);
    size_t len = fl_defs_answer_json(old, nw, c, n, version, ctl, dry_run,
                                     buf, bound);
    assert_true(len <= bound);
    assert_int_equal(len, strlen(want));
    assert_memory_equal(buf, want, len);
    /* one byte short of the bound: nothing written */
    assert_int_equal(fl_defs_answer_json(old, nw, c, n, version, ctl,
                                         dry_run, buf, bound - 1), 0);
    free(buf);
}

static void test_answer_json(void **state)
{
    (void) state;
    fl_project_t *old = load("{\"flags\":["
        "{\"name\":\"a\",\"enabled\":true,\"rolloutPercentage\":10},"
        "{\"name\":\"b\",\"enabled\":true,\"rolloutPercentage\":20},"
        "{\"name\":\"c\",\"enabled\":true,\"rolloutPercentage\":30},"
        "{\"name\":\"e\",\"enabled\":true,\"rolloutPercentage\":30},"
        "{\"name\":\"f\",\"enabled\":true,\"rolloutPercentage\":30},"
        "{\"name\":\"g\",\"enabled\":true,\"rolloutPercentage\":30}]}");
    fl_project_t *nw = load("{\"flags\":["
        "{\"name\":\"g\",\"enabled\":false,\"rolloutPercentage\":30},"
        "{\"name\":\"a\",\"enabled\":true,\"rolloutPercentage\":10},"
        "{\"name\":\"c\",\"enabled\":true,\"rolloutPercentage\":31},"
        "{\"name\":\"d\",\"enabled\":false,\"rolloutPercentage\":0},"
        "{\"name\":\"e\",\"enabled\":true,\"rolloutPercentage\":31},"
        "{\"name\":\"f\",\"enabled\":true,\"rolloutPercentage\":31}]}");
    fl_control_t ca, cc, ce, cf, cg;
    fl_flag_info_t fi;

    /* a (same): rolled back, not listed; c: rolled back and overridden;
     * e: overridden off; f: nothing in force; g: overridden to 12.5 % */
    assert_int_equal(fl_project_flag_info(old, 0, &fi), 0);
    fl_control_init(&ca, fi.def_hash);
    assert_int_equal(fl_control_try_rollback(&ca, 1000, 20, 100, 2, FL_DECIDED_RULE), 1);
    fl_control_init(&cc, 3);
    assert_int_equal(fl_control_try_rollback(&cc, 1000, 20, 100, 2, FL_DECIDED_RULE), 1);
    fl_control_set_override(&cc, FL_OVERRIDE_PERCENT, 5000);
    fl_control_init(&ce, 4);
    fl_control_set_override(&ce, FL_OVERRIDE_OFF, 0);
    fl_control_init(&cf, 5);
    fl_control_init(&cg, 6);
    fl_control_set_override(&cg, FL_OVERRIDE_PERCENT, 12500);

    /* by the old project's index; b has none */
    const fl_control_t *ctl[6] = { &ca, NULL, &cc, &ce, &cf, &cg };

    expect_answer(old, nw, 7, ctl, 0,
        "{\"version\":7,\"added\":[\"d\"],\"changed\":[\"g\",\"c\",\"e\",\"f\"],"
        "\"removed\":[\"b\"],\"kept\":["
        "{\"flag\":\"g\",\"rolledBack\":false,\"override\":{\"rolloutPercentage\":12.5}},"
        "{\"flag\":\"c\",\"rolledBack\":true,\"override\":{\"rolloutPercentage\":5}},"
        "{\"flag\":\"e\",\"rolledBack\":false,\"override\":{\"enabled\":false}}]}");
    expect_answer(old, nw, 18446744073709551615ULL, NULL, 1,
        "{\"version\":18446744073709551615,\"added\":[\"d\"],"
        "\"changed\":[\"g\",\"c\",\"e\",\"f\"],\"removed\":[\"b\"],\"kept\":[],"
        "\"dryRun\":true}");

    /* a rollback alone: "override" null */
    fl_control_set_override(&cc, FL_OVERRIDE_NONE, 0);
    const fl_control_t *only_c[6] = { NULL, NULL, &cc, NULL, NULL, NULL };
    expect_answer(old, nw, 8, only_c, 1,
        "{\"version\":8,\"added\":[\"d\"],\"changed\":[\"g\",\"c\",\"e\",\"f\"],"
        "\"removed\":[\"b\"],\"kept\":[{\"flag\":\"c\",\"rolledBack\":true,"
        "\"override\":null}],\"dryRun\":true}");

    /* the first version: everything added */
    expect_answer(NULL, nw, 1, NULL, 0,
        "{\"version\":1,\"added\":[\"g\",\"a\",\"c\",\"d\",\"e\",\"f\"],"
        "\"changed\":[],\"removed\":[],\"kept\":[]}");
    /* nothing changed */
    expect_answer(nw, nw, 9, NULL, 0,
        "{\"version\":9,\"added\":[],\"changed\":[],\"removed\":[],\"kept\":[]}");

    fl_project_free(nw);
    fl_project_free(old);
}

static void test_answer_names(void **state)
{
    (void) state;
    /* names as decoded, whatever escapes the file wrote them with */
    fl_project_t *old = load("{\"flags\":["
        "{\"name\":\"a.b\",\"enabled\":true,\"rolloutPercentage\":1},"
        "{\"name\":\"c:d\",\"enabled\":true,\"rolloutPercentage\":1}]}");
    fl_project_t *nw = load("{\"flags\":["
        "{\"name\":\"\\u0061.b\",\"enabled\":true,\"rolloutPercentage\":2},"
        "{\"name\":\"x-Y_\\u0030\",\"enabled\":true,\"rolloutPercentage\":1}]}");
    fl_control_t cq;

    fl_control_init(&cq, 1);
    fl_control_set_override(&cq, FL_OVERRIDE_OFF, 0);
    const fl_control_t *ctl[2] = { &cq, NULL };

    expect_answer(old, nw, 2, ctl, 0,
        "{\"version\":2,\"added\":[\"x-Y_0\"],"
        "\"changed\":[\"a.b\"],\"removed\":[\"c:d\"],"
        "\"kept\":[{\"flag\":\"a.b\",\"rolledBack\":false,"
        "\"override\":{\"enabled\":false}}]}");

    fl_project_free(nw);
    fl_project_free(old);
}

/* --------------------------------------------------------- put, delete */

static void put_ok(const char *doc, const char *name, const char *body,
    const char *want)
{
    char *out = NULL;
    size_t out_len = 0;
    char err[256] = "";
    fl_status_t rc = fl_defs_put_flag(doc, strlen(doc), name, strlen(name),
                                      body, strlen(body), &arena, &out,
                                      &out_len, err, sizeof(err));
    if (rc != FL_OK) {
        fail_msg("put %s: %d %s", name, rc, err);
    }
    assert_non_null(out);
    assert_string_equal(out, want);
    assert_int_equal(out_len, strlen(want));
    arena_reset();
}

static void put_err(const char *doc, const char *name, const char *body,
    fl_status_t want_rc, const char *want_msg)
{
    char *out = (char *) 1;
    size_t out_len = 7;
    char err[256] = "";
    fl_status_t rc = fl_defs_put_flag(doc, strlen(doc), name, strlen(name),
                                      body, strlen(body), &arena, &out,
                                      &out_len, err, sizeof(err));
    assert_int_equal(rc, want_rc);
    assert_string_equal(err, want_msg);
    assert_null(out);
    assert_int_equal(out_len, 0);
    arena_reset();
}

static void del_ok(const char *doc, const char *name, const char *want)
{
    char *out = NULL;
    size_t out_len = 0;
    int found = -1;
    char err[256] = "";
    fl_status_t rc = fl_defs_delete_flag(doc, strlen(doc), name, strlen(name),
                                         &arena, &out, &out_len, &found, err,
                                         sizeof(err));
    if (rc != FL_OK) {
        fail_msg("delete %s: %d %s", name, rc, err);
    }
    if (want == NULL) {
        assert_int_equal(found, 0);
        assert_null(out);
        assert_int_equal(out_len, 0);
    } else {
        assert_int_equal(found, 1);
        assert_non_null(out);
        assert_string_equal(out, want);
        assert_int_equal(out_len, strlen(want));
    }
    arena_reset();
}

/* an indented document with unknown fields, and a "flags" key nested
 * elsewhere that is not the one */
#define DOC \
    "{\n" \
    "  \"note\": \"kept as written\",\n" \
    "  \"flags\": [\n" \
    "    {\"name\": \"a\", \"enabled\": true, \"rolloutPercentage\": 10, \"owner\": \"x\"},\n" \
    "    {\"name\": \"b\", \"enabled\": false, \"rolloutPercentage\": 0},\n" \
    "    {\"name\": \"c\", \"enabled\": true, \"rolloutPercentage\": 100, \"segments\": [\"beta\"]}\n" \
    "  ],\n" \
    "  \"segments\": {\"beta\": {\"rules\": []}},\n" \
    "  \"x-extra\": [1, {\"flags\": [{\"name\": \"b\"}]}]\n" \
    "}\n"

#define DOC_HEAD \
    "{\n" \
    "  \"note\": \"kept as written\",\n" \
    "  \"flags\": [\n"
#define DOC_A \
    "    {\"name\": \"a\", \"enabled\": true, \"rolloutPercentage\": 10, \"owner\": \"x\"}"
#define DOC_B \
    "    {\"name\": \"b\", \"enabled\": false, \"rolloutPercentage\": 0}"
#define DOC_C \
    "    {\"name\": \"c\", \"enabled\": true, \"rolloutPercentage\": 100, \"segments\": [\"beta\"]}"
#define DOC_TAIL \
    "\n  ],\n" \
    "  \"segments\": {\"beta\": {\"rules\": []}},\n" \
    "  \"x-extra\": [1, {\"flags\": [{\"name\": \"b\"}]}]\n" \
    "}\n"

static void test_put_replace(void **state)
{
    (void) state;
    /* the pieces make up the document */
    assert_string_equal(DOC_HEAD DOC_A ",\n" DOC_B ",\n" DOC_C DOC_TAIL, DOC);

    /* a body without "name": the name put first */
    put_ok(DOC, "b", "{\"enabled\": true, \"rolloutPercentage\": 5}",
           DOC_HEAD DOC_A ",\n"
           "    {\"name\":\"b\",\"enabled\": true, \"rolloutPercentage\": 5},\n"
           DOC_C DOC_TAIL);
    /* with its name (escaped otherwise), whitespace around it trimmed */
    put_ok(DOC, "a", " \n{\"name\":\"\\u0061\",\"enabled\":false,\"x\":{\"y\":[]}}\t\n",
           DOC_HEAD
           "    {\"name\":\"\\u0061\",\"enabled\":false,\"x\":{\"y\":[]}},\n"
           DOC_B ",\n" DOC_C DOC_TAIL);
    put_ok(DOC, "c", "{}",
           DOC_HEAD DOC_A ",\n" DOC_B ",\n" "    {\"name\":\"c\"}" DOC_TAIL);

    /* the result is a flags file with the new b */
    char *out = NULL;
    size_t out_len = 0;
    char err[256];
    const char *body = "{\"enabled\": true, \"rolloutPercentage\": 5}";
    assert_int_equal(fl_defs_put_flag(DOC, strlen(DOC), "b", 1, body,
                                      strlen(body), &arena, &out, &out_len,
                                      err, sizeof(err)), FL_OK);
    fl_project_t *old = load(DOC);
    fl_project_t *nw = NULL;
    assert_int_equal(fl_project_load_buffer(out, out_len, "t.json", &nw, err,
                                            sizeof(err)), FL_OK);
    fl_defs_change_t c[6];
    assert_int_equal(fl_defs_diff(old, nw, c, 6), 3);
    expect_change(&c[0], FL_DEFS_SAME, 0, 0);
    expect_change(&c[1], FL_DEFS_CHANGED, 1, 1);
    expect_change(&c[2], FL_DEFS_SAME, 2, 2);
    fl_project_free(nw);
    fl_project_free(old);
    arena_reset();
}

static void test_put_append(void **state)
{
    (void) state;
    /* after the last element, with the whitespace before it */
    put_ok(DOC, "d", "{\"enabled\": false, \"rolloutPercentage\": 0}",
           DOC_HEAD DOC_A ",\n" DOC_B ",\n" DOC_C ",\n"
           "    {\"name\":\"d\",\"enabled\": false, \"rolloutPercentage\": 0}"
           DOC_TAIL);
    /* into an empty array, whatever it holds of whitespace */
    put_ok("{\"flags\":[ ],\"segments\":{}}", "x", "{}",
           "{\"flags\":[{\"name\":\"x\"} ],\"segments\":{}}");
    put_ok("{\"flags\":[]}", "x", "{\"name\":\"x\",\"enabled\":true}",
           "{\"flags\":[{\"name\":\"x\",\"enabled\":true}]}");
    /* the last "flags" is the one */
    put_ok("{\"flags\":{},\"flags\":[1]}", "x", "{}",
           "{\"flags\":{},\"flags\":[1,{\"name\":\"x\"}]}");
    /* yajl's whitespace includes \f and \v */
    put_ok("{\"flags\"\f:\v[\f{\"name\":\"x\"}\v,\f{\"name\":\"y\"}\v]\f}", "y", "\v{}\f",
           "{\"flags\"\f:\v[\f{\"name\":\"x\"}\v,\f{\"name\":\"y\"}\v]\f}");
    put_ok("{\"flags\"\f:\v[\f{\"name\":\"x\"}\v]\f}", "z", "{}",
           "{\"flags\"\f:\v[\f{\"name\":\"x\"},\f{\"name\":\"z\"}\v]\f}");
    /* elements that are not objects or have no string name are kept */
    put_ok("{\"flags\":[null,{\"name\":1},{\"enabled\":true}]}", "x", "{}",
           "{\"flags\":[null,{\"name\":1},{\"enabled\":true},{\"name\":\"x\"}]}");
}

static void test_put_escaped_names(void **state)
{
    (void) state;
    const char *doc = "{\"flags\":[{\"name\":\"q\\\"uo\\\\te\"},"
                      "{\"name\":\"\\u00e9t\\u00e9\",\"enabled\":true}]}";

    /* the decoded names match */
    put_ok(doc, "\xc3\xa9t\xc3\xa9", "{\"enabled\":false}",
           "{\"flags\":[{\"name\":\"q\\\"uo\\\\te\"},"
           "{\"name\":\"\xc3\xa9t\xc3\xa9\",\"enabled\":false}]}");
    put_ok(doc, "q\"uo\\te", "{\"name\":\"q\\u0022uo\\u005cte\",\"n\":1}",
           "{\"flags\":[{\"name\":\"q\\u0022uo\\u005cte\",\"n\":1},"
           "{\"name\":\"\\u00e9t\\u00e9\",\"enabled\":true}]}");
    /* a new name with a quote and a line break, escaped when put in */
    put_ok(doc, "new\"\n", "{}",
           "{\"flags\":[{\"name\":\"q\\\"uo\\\\te\"},"
           "{\"name\":\"\\u00e9t\\u00e9\",\"enabled\":true},"
           "{\"name\":\"new\\\"\\n\"}]}");
    del_ok(doc, "q\"uo\\te",
           "{\"flags\":[{\"name\":\"\\u00e9t\\u00e9\",\"enabled\":true}]}");
    del_ok(doc, "\xc3\xa9t\xc3\xa9", "{\"flags\":[{\"name\":\"q\\\"uo\\\\te\"}]}");
    del_ok(doc, "\\u00e9t\\u00e9", NULL);
}

static void test_put_errors(void **state)
{
    (void) state;
    /* the body */
    put_err(DOC, "b", "[{\"name\":\"b\"}]", FL_ERR_JSON,
            "request body must be a JSON object");
    put_err(DOC, "b", "\"b\"", FL_ERR_JSON, "request body must be a JSON object");
    put_err(DOC, "b", " ", FL_ERR_JSON, "request body is empty");
    put_err(DOC, "b", "{\"name\":\"b\"", FL_ERR_JSON,
            "request body is not valid JSON: parse error: premature EOF (near byte 11)");
    put_err(DOC, "b", "{\"name\":\"b\"} {}", FL_ERR_JSON,
            "request body is not valid JSON: parse error: trailing garbage (near byte 14)");
    /* an unterminated string after the object (yajl alone takes it) */
    put_err(DOC, "b", "{\"enabled\":true} \"x", FL_ERR_JSON,
            "request body is not valid JSON: parse error: trailing garbage (near byte 17)");
    put_err(DOC, "b", "{\"name\":\"c\",\"enabled\":true}", FL_ERR_FIELD,
            "flag name \"c\" in the body does not match \"b\" in the path");
    put_err(DOC, "b\"x", "{\"name\":\"b\\n\\\"\"}", FL_ERR_FIELD,
            "flag name \"b\\n\\\"\" in the body does not match \"b\\\"x\" in the path");
    /* the last "name" counts */
    put_err(DOC, "b", "{\"name\":\"b\",\"name\":\"c\"}", FL_ERR_FIELD,
            "flag name \"c\" in the body does not match \"b\" in the path");
    put_err(DOC, "b", "{\"name\":null}", FL_ERR_FIELD,
            "\"name\" in the body must be a string");
    put_err(DOC, "b", "{\"name\":7}", FL_ERR_FIELD,
            "\"name\" in the body must be a string");
    put_err(DOC, "\xff", "{}", FL_ERR_FIELD,
            "flag name in the path is not valid UTF-8");

    /* the document */
    put_err("{\"segments\":{}}", "b", "{}", FL_ERR_INVALID,
            "document has no \"flags\" array");
    put_err("{\"flags\":{\"b\":{}}}", "b", "{}", FL_ERR_INVALID,
            "document has no \"flags\" array");
    put_err("{\"flags\":[],\"flags\":null}", "b", "{}", FL_ERR_INVALID,
            "document has no \"flags\" array");
    put_err("[{\"flags\":[]}]", "b", "{}", FL_ERR_INVALID,
            "document is not a JSON object");
    put_err("", "b", "{}", FL_ERR_INVALID, "document is empty");
    put_err("{\"flags\":[]}\"", "b", "{}", FL_ERR_INVALID,
            "document is not valid JSON: parse error: trailing garbage");
    put_err("{\"flags\":[}", "b", "{}", FL_ERR_INVALID,
            "document is not valid JSON: parse error: unallowed token at this point in JSON text");

    /* out of memory for the result */
    char *out = NULL;
    size_t out_len = 0;
    char err[64];
    arena_allocs_left = 0;
    assert_int_equal(fl_defs_put_flag(DOC, strlen(DOC), "b", 1, "{}", 2,
                                      &arena, &out, &out_len, err,
                                      sizeof(err)), FL_ERR_NOMEM);
    assert_string_equal(err, "out of memory");
    assert_null(out);
    arena_reset();
}

static void test_delete(void **state)
{
    (void) state;
    /* the first: up to the next element */
    del_ok(DOC, "a", DOC_HEAD DOC_B ",\n" DOC_C DOC_TAIL);
    /* one in the middle */
    del_ok(DOC, "b", DOC_HEAD DOC_A ",\n" DOC_C DOC_TAIL);
    /* the last: with the comma before it */
    del_ok(DOC, "c", DOC_HEAD DOC_A ",\n" DOC_B DOC_TAIL);
    /* absent (the nested "flags" is not the document's) */
    del_ok(DOC, "d", NULL);
    del_ok("{\"flags\":[],\"x\":{\"flags\":[{\"name\":\"d\"}]}}", "d", NULL);
    del_ok("{\"flags\"\f:\v[\f{\"name\":\"x\"}\v,\f{\"name\":\"y\"}\v]\f}", "x",
           "{\"flags\"\f:\v[\f{\"name\":\"y\"}\v]\f}");
    /* the only one: an empty array */
    del_ok("{\"flags\": [ {\"name\":\"x\"}\n ], \"z\":1}", "x",
           "{\"flags\": [], \"z\":1}");
    /* the first of two names (a document the loader would refuse) */
    del_ok("{\"flags\":[{\"name\":\"x\",\"n\":1},{\"name\":\"x\",\"n\":2}]}", "x",
           "{\"flags\":[{\"name\":\"x\",\"n\":2}]}");

    /* errors of the document */
    char *out = (char *) 1;
    size_t out_len = 3;
    int found = 5;
    char err[128];
    assert_int_equal(fl_defs_delete_flag("{\"flags\":7}", 11, "x", 1, &arena,
                                         &out, &out_len, &found, err,
                                         sizeof(err)), FL_ERR_INVALID);
    assert_string_equal(err, "document has no \"flags\" array");
    assert_null(out);
    assert_int_equal(out_len, 0);
    assert_int_equal(found, 0);
    arena_reset();
}

/* --------------------------------------------------- a version's file */

static void test_entry_json(void **state)
{
    (void) state;
    fl_project_t *old = load(OLD3);
    fl_project_t *nw = load("{\"flags\":["
        "{\"name\":\"c\",\"enabled\":true,\"rolloutPercentage\":31},"
        "{\"name\":\"a\",\"enabled\":true,\"rolloutPercentage\":10},"
        "{\"name\":\"d\",\"enabled\":false,\"rolloutPercentage\":0}]}");
    fl_defs_change_t c[6];
    size_t n = fl_defs_diff(old, nw, c, 6);
    char buf[512];
    /* 2026-11-27T21:50:01.999Z: whole seconds */
    uint64_t at = 1795816201999ULL;

    size_t bound = fl_defs_entry_json_bound(5, 4, old, nw, c, n);
    assert_true(bound <= sizeof(buf));
    size_t len = fl_defs_entry_json(3, at, "alice", 5, "web1", 4, old, nw, c,
                                    n, buf, bound);
    const char *want = "{\"version\":3,\"at\":\"2026-11-27T21:50:01Z\","
        "\"by\":\"alice\",\"host\":\"web1\",\"added\":[\"d\"],"
        "\"changed\":[\"c\"],\"removed\":[\"b\"]}";
    assert_int_equal(len, strlen(want));
    assert_memory_equal(buf, want, len);
    assert_int_equal(fl_defs_entry_json(3, at, "alice", 5, "web1", 4, old, nw,
                                        c, n, buf, bound - 1), 0);

    /* nobody; a name to escape; the first version */
    n = fl_defs_diff(NULL, nw, c, 6);
    bound = fl_defs_entry_json_bound(0, 6, NULL, nw, c, n);
    len = fl_defs_entry_json(1, 0, NULL, 0, "h\"\n\x01z", 5, NULL, nw, c, n,
                             buf, bound);
    want = "{\"version\":1,\"at\":\"1970-01-01T00:00:00Z\",\"by\":null,"
           "\"host\":\"h\\\"\\n\\u0001z\",\"added\":[\"c\",\"a\",\"d\"],"
           "\"changed\":[],\"removed\":[]}";
    assert_int_equal(len, strlen(want));
    assert_memory_equal(buf, want, len);

    fl_project_free(nw);
    fl_project_free(old);
}

static void parse_err(const char *file, const char *want)
{
    uint64_t v = 99;
    size_t el = 99, off = 99;
    char err[256] = "";

    assert_int_equal(fl_defs_file_parse(file, strlen(file), &v, &el, &off, err,
                                        sizeof(err)), FL_ERR_INVALID);
    assert_string_equal(err, want);
    assert_int_equal(v, 99);
    assert_int_equal(el, 99);
    assert_int_equal(off, 99);
}

static void test_file_round_trip(void **state)
{
    (void) state;
    fl_project_t *old = load(OLD3);
    fl_project_t *nw = load(DOC);
    fl_defs_change_t c[8];
    size_t n = fl_defs_diff(old, nw, c, 8);
    char file[2048];

    size_t el = fl_defs_entry_json(42, 1795816201000ULL, "bob", 3, "web2", 4,
                                   old, nw, c, n, file, sizeof(file));
    assert_true(el > 0);
    file[el] = '\n';
    memcpy(file + el + 1, DOC, strlen(DOC));
    size_t len = el + 1 + strlen(DOC);

    uint64_t v = 0;
    size_t entry_len = 0, off = 0;
    char err[256];
    assert_int_equal(fl_defs_file_parse(file, len, &v, &entry_len, &off, err,
                                        sizeof(err)), FL_OK);
    assert_int_equal(v, 42);
    assert_int_equal(entry_len, el);
    assert_int_equal(off, el + 1);
    assert_memory_equal(file + off, DOC, strlen(DOC));
    assert_memory_equal(file,
        "{\"version\":42,\"at\":\"2026-11-27T21:50:01Z\",\"by\":\"bob\","
        "\"host\":\"web2\",\"added\":[],\"changed\":[\"b\",\"c\"],\"removed\":[]}",
        entry_len);

    /* the largest version, a header of other fields, a CRLF document */
    const char *f = "{\"x\":[1],\"version\":18446744073709551615}\n\r\n{}";
    assert_int_equal(fl_defs_file_parse(f, strlen(f), &v, &entry_len, &off,
                                        err, sizeof(err)), FL_OK);
    assert_int_equal(v, 18446744073709551615ULL);
    assert_int_equal(entry_len, 40);
    assert_int_equal(off, 41);

    fl_project_free(nw);
    fl_project_free(old);
}

static void test_file_bad_headers(void **state)
{
    (void) state;
    parse_err("", "no header line");
    parse_err("{\"version\":1}", "no header line");
    parse_err("\n{}", "header is empty");
    parse_err(" \t\n{}", "header is empty");
    parse_err("{\"version\":1\n}", "header is not valid JSON: parse error: premature EOF");
    parse_err("[1]\n{}", "header is not a JSON object");
    parse_err("{\"version\":1}\"x\n{}", "header is not valid JSON: parse error: trailing garbage");
    parse_err("{\"version\":0}\n{}", "header has no \"version\" of at least 1");
    parse_err("{\"version\":-1}\n{}", "header has no \"version\" of at least 1");
    parse_err("{\"version\":\"3\"}\n{}", "header has no \"version\" of at least 1");
    parse_err("{\"version\":1.0}\n{}", "header has no \"version\" of at least 1");
    parse_err("{\"version\":1e2}\n{}", "header has no \"version\" of at least 1");
    parse_err("{\"version\":null}\n{}", "header has no \"version\" of at least 1");
    parse_err("{\"v\":1}\n{}", "header has no \"version\" of at least 1");
    parse_err("{\"version\":18446744073709551616}\n{}",
              "header has no \"version\" of at least 1");
    parse_err("{\"version\":2}\n", "no document after the header");
    parse_err("{\"version\":2}\n \r\n\t", "no document after the header");
}

static void test_history_json(void **state)
{
    (void) state;
    const char *e[] = {
        "{\"version\":3}",
        " {\"version\":2}\n",             /* trimmed */
        "[\"not an object\"]",            /* left out */
        "{\"version\":",                  /* left out */
        "{\"version\":4}\"",             /* left out */
        NULL,                             /* left out */
        "{\"version\":1,\"by\":null}",
    };
    size_t lens[7];
    char buf[256];

    for (size_t i = 0; i < 7; i++) {
        lens[i] = e[i] != NULL ? strlen(e[i]) : 0;
    }
    size_t bound = fl_defs_history_json_bound(lens, 7);
    assert_true(bound <= sizeof(buf));
    size_t len = fl_defs_history_json(e, lens, 7, buf, bound);
    const char *want = "{\"versions\":[{\"version\":3},{\"version\":2},"
                       "{\"version\":1,\"by\":null}]}";
    assert_int_equal(len, strlen(want));
    assert_memory_equal(buf, want, len);
    assert_int_equal(fl_defs_history_json(e, lens, 7, buf, bound - 1), 0);

    bound = fl_defs_history_json_bound(NULL, 0);
    len = fl_defs_history_json(NULL, NULL, 0, buf, bound);
    assert_int_equal(len, 15);
    assert_memory_equal(buf, "{\"versions\":[]}", 15);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_diff_kinds),
        cmocka_unit_test(test_diff_segment),
        cmocka_unit_test(test_diff_reorder_only),
        cmocka_unit_test(test_answer_json),
        cmocka_unit_test(test_answer_names),
        cmocka_unit_test_teardown(test_put_replace, arena_teardown),
        cmocka_unit_test_teardown(test_put_append, arena_teardown),
        cmocka_unit_test_teardown(test_put_escaped_names, arena_teardown),
        cmocka_unit_test_teardown(test_put_errors, arena_teardown),
        cmocka_unit_test_teardown(test_delete, arena_teardown),
        cmocka_unit_test(test_entry_json),
        cmocka_unit_test(test_file_round_trip),
        cmocka_unit_test(test_file_bad_headers),
        cmocka_unit_test(test_history_json),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
