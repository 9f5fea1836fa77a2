/*
 * test_ofrep.c - the OFREP core (docs/ofrep.md): the context of a POST
 * body, the reason of each flag and the parity of one flag with all flags, the
 * single, bulk and error bodies, the answer ETag and If-None-Match.
 */

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "flags_core.h"

#include "unit_arena.h"

static char err[256];

static const char project_json[] =
    "{\"flags\":["
    "{\"name\":\"static-on\",\"enabled\":true,\"rolloutPercentage\":100},"
    "{\"name\":\"static-off\",\"enabled\":true,\"rolloutPercentage\":0},"
    "{\"name\":\"killed\",\"enabled\":false,\"rolloutPercentage\":100},"
    "{\"name\":\"split\",\"enabled\":true,\"rolloutPercentage\":50},"
    "{\"name\":\"seg-full\",\"enabled\":true,\"rolloutPercentage\":100,"
    "\"segments\":[\"pro\"]},"
    "{\"name\":\"seg-split\",\"enabled\":true,\"rolloutPercentage\":12.5,"
    "\"segments\":[\"pro\"]},"
    "{\"name\":\"seg-zero\",\"enabled\":true,\"rolloutPercentage\":0,"
    "\"segments\":[\"pro\"]}],"
    "\"segments\":{\"pro\":{\"rules\":"
    "[{\"trait\":\"plan\",\"op\":\"eq\",\"value\":\"pro\"}]}}}";

enum { F_STATIC_ON, F_STATIC_OFF, F_KILLED, F_SPLIT, F_SEG_FULL, F_SEG_SPLIT,
       F_SEG_ZERO, NFLAGS };

static fl_project_t *load(const char *json)
{
    fl_project_t *p = NULL;
    char e[512];

    if (fl_project_load_buffer(json, strlen(json), "t.json", &p, e,
                               sizeof(e)) != FL_OK)
    {
        fail_msg("load: %s", e);
    }
    return p;
}

static fl_status_t ctx(const char *body, size_t max_traits, fl_user_t *u)
{
    return fl_ofrep_parse_context(body, strlen(body), max_traits, &arena, u,
                                  err, sizeof(err));
}

static fl_user_t ok_ctx(const char *body)
{
    fl_user_t u;

    if (ctx(body, 64, &u) != FL_OK) {
        fail_msg("context %s: %s", body, err);
    }
    return u;
}

static void assert_trait(const fl_user_t *u, const char *name,
    const char *value)
{
    const fl_trait_t *t = fl_user_trait(u, name, strlen(name));

    if (value == NULL) {
        assert_null(t);
        return;
    }
    assert_non_null(t);
    assert_int_equal(t->value_len, strlen(value));
    assert_memory_equal(t->value, value, t->value_len);
}


/* ------------------------------------------------------------ context */

static void test_context_mapping(void **state)
{
    (void) state;
    fl_user_t u = ok_ctx("{\"context\":{\"targetingKey\":\"user-2\","
                         "\"plan\":\"pro\",\"age\":42,\"ratio\":-1.50e3,"
                         "\"beta\":true,\"old\":false,\"gone\":null,"
                         "\"userId\":\"not-the-key\"}}");

    assert_int_equal(u.user_id_len, 6);
    assert_memory_equal(u.user_id, "user-2", 6);
    assert_int_equal(u.ntraits, 6);
    assert_trait(&u, "plan", "pro");
    assert_trait(&u, "age", "42");
    assert_trait(&u, "ratio", "-1.50e3");      /* the number's own text */
    assert_trait(&u, "beta", "true");
    assert_trait(&u, "old", "false");
    assert_trait(&u, "gone", NULL);             /* null: absent */
    assert_trait(&u, "userId", "not-the-key");  /* just a trait here */
    assert_trait(&u, "targetingKey", NULL);

    /* sorted by name, bytewise */
    for (size_t i = 1; i < u.ntraits; i++) {
        size_t a = u.traits[i - 1].name_len, b = u.traits[i].name_len;
        int c = memcmp(u.traits[i - 1].name, u.traits[i].name,
                       a < b ? a : b);
        assert_true(c < 0 || (c == 0 && a < b));
    }
}

static void test_context_empty(void **state)
{
    (void) state;
    const char *empty[] = {
        "", "  \r\n\t ", "{}", "{\"context\":null}", "{\"context\":{}}",
        "{\"other\":[1,{\"x\":2}]}",
        "{\"context\":{\"targetingKey\":\"\"}}",
        "{\"context\":{\"targetingKey\":null,\"a\":null}}",
        "{\"context\":{\"plan\":\"x\"},\"context\":null}",
    };

    for (size_t i = 0; i < sizeof(empty) / sizeof(empty[0]); i++) {
        fl_user_t u = ok_ctx(empty[i]);
        if (u.user_id != NULL || u.ntraits != 0) {
            fail_msg("%s is not the empty context", empty[i]);
        }
    }

    /* NULL body */
    fl_user_t u;
    assert_int_equal(fl_ofrep_parse_context(NULL, 0, 64, &arena, &u, err,
                                            sizeof(err)), FL_OK);
    assert_null(u.user_id);
    assert_int_equal(u.ntraits, 0);
}

static void test_context_last_wins(void **state)
{
    (void) state;
    fl_user_t u = ok_ctx("{\"context\":{\"plan\":\"free\",\"targetingKey\":"
                         "\"a\",\"plan\":\"pro\",\"targetingKey\":\"b\","
                         "\"x\":\"1\",\"x\":null,\"y\":{},\"y\":7}}");

    assert_int_equal(u.user_id_len, 1);
    assert_memory_equal(u.user_id, "b", 1);
    assert_trait(&u, "plan", "pro");
    assert_trait(&u, "x", NULL);        /* the last is null: absent */
    assert_trait(&u, "y", "7");         /* the object before is not checked */
    assert_int_equal(u.ntraits, 2);

    /* the last context wins too */
    u = ok_ctx("{\"context\":{\"plan\":\"free\"},\"context\":{\"a\":\"1\"}}");
    assert_int_equal(u.ntraits, 1);
    assert_trait(&u, "a", "1");
}

struct bad_case {
    const char   *body;
    fl_status_t   want;
    const char   *message;
};

static void test_context_errors(void **state)
{
    (void) state;
    const struct bad_case c[] = {
        { "{", FL_ERR_JSON, NULL },
        { "{\"context\":{}} x", FL_ERR_JSON, NULL },
        { "[]", FL_ERR_JSON, "request body must be a JSON object" },
        { "\"context\"", FL_ERR_JSON, "request body must be a JSON object" },
        { "null", FL_ERR_JSON, "request body must be a JSON object" },
        { "{\"context\":\"\xc3\x28\"}", FL_ERR_JSON, NULL },
        { "{\"context\":{\"a\":\"\xed\xa0\x80\"}}", FL_ERR_JSON, NULL },
        { "{\"context\":{\"a\":\"\\ud800\"}}", FL_ERR_JSON, NULL },
        { "{\"context\":{\"a\":\"\xc0\xaf\"}}", FL_ERR_JSON, NULL },
        { "{\"context\":[]}", FL_ERR_FIELD, "context must be an object" },
        { "{\"context\":\"x\"}", FL_ERR_FIELD, "context must be an object" },
        { "{\"context\":7}", FL_ERR_FIELD, "context must be an object" },
        { "{\"context\":{\"plan\":{\"a\":1}}}", FL_ERR_FIELD,
          "context property \"plan\" is an object: only strings, numbers, "
          "booleans and null are accepted" },
        { "{\"context\":{\"tags\":[\"a\"]}}", FL_ERR_FIELD,
          "context property \"tags\" is an array: only strings, numbers, "
          "booleans and null are accepted" },
        { "{\"context\":{\"targetingKey\":5}}", FL_ERR_FIELD,
          "targetingKey must be a string" },
        { "{\"context\":{\"targetingKey\":true}}", FL_ERR_FIELD,
          "targetingKey must be a string" },
        { "{\"context\":{\"targetingKey\":\"a\\u0000b\"}}", FL_ERR_FIELD,
          "targetingKey holds a NUL byte" },
        { "{\"context\":{\"a\":\"x\\u0000\"}}", FL_ERR_FIELD,
          "context property \"a\" holds a NUL byte" },
        { "{\"context\":{\"a\\u0000\":\"x\"}}", FL_ERR_FIELD,
          "a context property name holds a NUL byte" },
        { "{\"context\":{\"\":\"x\"}}", FL_ERR_FIELD,
          "a context property has an empty name" },
        /* the first in document order among the kept properties */
        { "{\"context\":{\"b\":[],\"a\":{}}}", FL_ERR_FIELD,
          "context property \"b\" is an array: only strings, numbers, "
          "booleans and null are accepted" },
        { "{\"context\":{\"a\":{},\"targetingKey\":1}}", FL_ERR_FIELD,
          "context property \"a\" is an object: only strings, numbers, "
          "booleans and null are accepted" },
    };

    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        fl_user_t u;
        fl_status_t rc = ctx(c[i].body, 64, &u);
        if (rc != c[i].want) {
            fail_msg("row %zu (%s): status %d, want %d (%s)", i, c[i].body,
                     rc, c[i].want, err);
        }
        if (c[i].message != NULL && strcmp(err, c[i].message) != 0) {
            fail_msg("row %zu: message \"%s\", want \"%s\"", i, err,
                     c[i].message);
        }
        assert_null(u.user_id);
        assert_int_equal(u.ntraits, 0);
    }
}

static void test_context_syntax_messages(void **state)
{
    (void) state;
    fl_user_t u;

    assert_int_equal(ctx("{\"context\":", 64, &u), FL_ERR_JSON);
    assert_non_null(strstr(err, "request body is not valid JSON"));

    assert_int_equal(ctx("{\"a\":\"\xff\"}", 64, &u), FL_ERR_JSON);
    assert_non_null(strstr(err, "UTF-8"));
}

static void test_context_deep(void **state)
{
    (void) state;
    size_t depth = 100000;
    char *body = malloc(2 * depth + 16);
    fl_user_t u;

    assert_non_null(body);
    /* {"x":[[[[...]]]]} far deeper than allowed: no recursion, no growth */
    strcpy(body, "{\"x\":");
    size_t n = strlen(body);
    memset(body + n, '[', depth);
    memset(body + n + depth, ']', depth);
    strcpy(body + n + 2 * depth, "}");

    assert_int_equal(ctx(body, 64, &u), FL_ERR_JSON);
    assert_string_equal(err, "JSON nesting is deeper than 64 levels");

    /* 63 levels under the root are fine */
    strcpy(body, "{\"x\":");
    memset(body + n, '[', 63);
    memset(body + n + 63, ']', 63);
    strcpy(body + n + 126, "}");
    assert_int_equal(ctx(body, 64, &u), FL_OK);
    free(body);
}

static void test_context_limits(void **state)
{
    (void) state;
    char body[4096], v[FL_MAX_VALUE_LEN + 2], name[FL_MAX_TRAIT_NAME_LEN + 2];
    fl_user_t u;

    memset(v, 'v', sizeof(v));
    memset(name, 'n', sizeof(name));

    /* values: 1024 bytes fit, 1025 do not (strings, numbers, the key) */
    snprintf(body, sizeof(body), "{\"context\":{\"targetingKey\":\"%.*s\","
             "\"a\":\"%.*s\"}}", FL_MAX_VALUE_LEN, v, FL_MAX_VALUE_LEN, v);
    assert_int_equal(ctx(body, 64, &u), FL_OK);
    assert_int_equal(u.user_id_len, FL_MAX_VALUE_LEN);

    snprintf(body, sizeof(body), "{\"context\":{\"a\":\"%.*s\"}}",
             FL_MAX_VALUE_LEN + 1, v);
    assert_int_equal(ctx(body, 64, &u), FL_ERR_FIELD);
    assert_string_equal(err, "context property \"a\" is longer than 1024 bytes");

    snprintf(body, sizeof(body), "{\"context\":{\"targetingKey\":\"%.*s\"}}",
             FL_MAX_VALUE_LEN + 1, v);
    assert_int_equal(ctx(body, 64, &u), FL_ERR_FIELD);
    assert_string_equal(err, "targetingKey is longer than 1024 bytes");

    char num[FL_MAX_VALUE_LEN + 2];
    memset(num, '1', sizeof(num));
    snprintf(body, sizeof(body), "{\"context\":{\"n\":%.*s}}",
             FL_MAX_VALUE_LEN + 1, num);
    assert_int_equal(ctx(body, 64, &u), FL_ERR_FIELD);
    assert_string_equal(err, "context property \"n\" is longer than 1024 bytes");

    /* names: 128 bytes fit, 129 do not */
    snprintf(body, sizeof(body), "{\"context\":{\"%.*s\":\"x\"}}",
             FL_MAX_TRAIT_NAME_LEN, name);
    assert_int_equal(ctx(body, 64, &u), FL_OK);
    assert_int_equal(u.ntraits, 1);

    snprintf(body, sizeof(body), "{\"context\":{\"%.*s\":\"x\"}}",
             FL_MAX_TRAIT_NAME_LEN + 1, name);
    assert_int_equal(ctx(body, 64, &u), FL_ERR_FIELD);
    assert_string_equal(err,
                        "a context property name is longer than 128 bytes");
}

static void test_context_max_traits(void **state)
{
    (void) state;
    fl_user_t u;
    const char *three = "{\"context\":{\"targetingKey\":\"k\",\"a\":\"1\","
                        "\"b\":2,\"c\":true,\"d\":null,\"a\":\"3\"}}";

    /* targetingKey, nulls and repeats do not count */
    assert_int_equal(ctx(three, 3, &u), FL_OK);
    assert_int_equal(u.ntraits, 3);

    assert_int_equal(ctx(three, 2, &u), FL_ERR_FIELD);
    assert_string_equal(err, "more than 2 traits in the context");
    assert_int_equal(ctx(three, 0, &u), FL_ERR_FIELD);
}

static void test_context_no_memory(void **state)
{
    (void) state;
    fl_user_t u;

    /* the last two allocations (the properties, then the traits) fail
     * after a complete parse; yajl's own are not checked by yajl, so they
     * are left alone */
    const char *b2 = "{\"context\":{\"targetingKey\":\"u\",\"b\":\"2\",\"a\":1}}";
    size_t before = arena_allocs_left;
    assert_int_equal(fl_ofrep_parse_context(b2, strlen(b2), 64, &arena, &u,
                                            err, sizeof(err)), FL_OK);
    size_t used = before - arena_allocs_left;
    assert_int_equal(u.ntraits, 2);

    for (size_t k = used - 2; k < used; k++) {
        arena_allocs_left = k;
        assert_int_equal(fl_ofrep_parse_context(b2, strlen(b2), 64, &arena,
                                                &u, err, sizeof(err)),
                         FL_ERR_NOMEM);
        assert_string_equal(err, "out of memory");
        assert_null(u.user_id);
        assert_int_equal(u.ntraits, 0);
    }
    arena_allocs_left = SIZE_MAX;
}


/* ------------------------------------------------------------ reasons */

static fl_user_t q(const char *query)
{
    fl_user_t u;

    if (fl_parse_query(query, strlen(query), 64, &arena, &u, err,
                       sizeof(err)) != FL_OK)
    {
        fail_msg("query %s: %s", query, err);
    }
    return u;
}

static void test_reasons(void **state)
{
    (void) state;
    fl_project_t *p = load(project_json);
    fl_detail_t d[NFLAGS];

    /* user-1 is outside 12.5 % of seg-split and picked for split or not:
     * the value follows fl_bucket, the reason does not */
    fl_user_t pro = q("userId=user-1&trait_plan=pro");
    fl_evaluate_detail(p, &pro, NULL, NULL, d);

    assert_int_equal(d[F_STATIC_ON].reason, FL_REASON_STATIC);
    assert_int_equal(d[F_STATIC_ON].enabled, 1);
    assert_int_equal(d[F_STATIC_OFF].reason, FL_REASON_STATIC);
    assert_int_equal(d[F_STATIC_OFF].enabled, 0);
    assert_int_equal(d[F_KILLED].reason, FL_REASON_DISABLED);
    assert_int_equal(d[F_KILLED].enabled, 0);
    assert_int_equal(d[F_KILLED].rollout_milli, 100000);
    assert_int_equal(d[F_SPLIT].reason, FL_REASON_SPLIT);
    assert_int_equal(d[F_SPLIT].enabled,
                     fl_bucket("split", 5, "user-1", 6) < 50000);
    assert_int_equal(d[F_SEG_FULL].reason, FL_REASON_TARGETING_MATCH);
    assert_int_equal(d[F_SEG_FULL].enabled, 1);
    assert_int_equal(d[F_SEG_FULL].segment_matched, 1);
    assert_int_equal(d[F_SEG_SPLIT].reason, FL_REASON_SPLIT);
    assert_int_equal(d[F_SEG_SPLIT].segment_matched, 1);
    assert_int_equal(d[F_SEG_SPLIT].enabled,
                     fl_bucket("seg-split", 9, "user-1", 6) < 12500);
    assert_int_equal(d[F_SEG_ZERO].reason, FL_REASON_STATIC);
    assert_int_equal(d[F_SEG_ZERO].enabled, 0);

    for (int i = 0; i < NFLAGS; i++) {
        assert_int_equal(d[i].rolled_back, 0);
        assert_int_equal(d[i].has_segments, i >= F_SEG_FULL);
    }

    /* outside the segment: TARGETING_MATCH, off, whatever the rollout */
    fl_user_t free_ = q("userId=user-1&trait_plan=free");
    fl_evaluate_detail(p, &free_, NULL, NULL, d);
    assert_int_equal(d[F_SEG_FULL].reason, FL_REASON_TARGETING_MATCH);
    assert_int_equal(d[F_SEG_FULL].enabled, 0);
    assert_int_equal(d[F_SEG_FULL].segment_matched, 0);
    assert_int_equal(d[F_SEG_SPLIT].reason, FL_REASON_TARGETING_MATCH);
    assert_int_equal(d[F_SEG_SPLIT].enabled, 0);
    /* 0 % decides before the segments */
    assert_int_equal(d[F_SEG_ZERO].reason, FL_REASON_STATIC);

    /* anonymous: a partial rollout is off, and still SPLIT */
    fl_user_t anon = q("");
    fl_evaluate_detail(p, &anon, NULL, NULL, d);
    assert_int_equal(d[F_SPLIT].reason, FL_REASON_SPLIT);
    assert_int_equal(d[F_SPLIT].enabled, 0);
    assert_int_equal(d[F_STATIC_ON].enabled, 1);

    fl_project_free(p);
}

static void test_reasons_switched(void **state)
{
    (void) state;
    fl_project_t *p = load(project_json);
    fl_detail_t d[NFLAGS];
    uint32_t eff[NFLAGS] = { 0, 0, 100000, 50000, 0, 100000, 0 };
    uint8_t sw[NFLAGS] = {
        FL_SWITCH_ROLLED_BACK, FL_SWITCH_NONE, FL_SWITCH_NONE,
        FL_SWITCH_NONE, FL_SWITCH_OVERRIDE_OFF, FL_SWITCH_NONE,
        FL_SWITCH_NONE
    };
    fl_user_t pro = q("userId=user-1&trait_plan=pro");

    /* static-off overridden to 0 (no switch): STATIC; seg-split at 100 %:
     * TARGETING_MATCH */
    fl_evaluate_detail(p, &pro, eff, sw, d);

    assert_int_equal(d[F_STATIC_ON].reason, FL_REASON_DISABLED);
    assert_int_equal(d[F_STATIC_ON].rolled_back, 1);
    assert_int_equal(d[F_STATIC_ON].rollout_milli, 0);
    assert_int_equal(d[F_STATIC_ON].enabled, 0);
    assert_int_equal(d[F_STATIC_OFF].reason, FL_REASON_STATIC);
    assert_int_equal(d[F_SEG_FULL].reason, FL_REASON_DISABLED);
    assert_int_equal(d[F_SEG_FULL].rolled_back, 0);
    assert_int_equal(d[F_SEG_FULL].enabled, 0);
    assert_int_equal(d[F_SEG_SPLIT].reason, FL_REASON_TARGETING_MATCH);
    assert_int_equal(d[F_SEG_SPLIT].enabled, 1);
    assert_int_equal(d[F_SEG_SPLIT].rollout_milli, 100000);

    /* a killed flag stays DISABLED whatever the zone says */
    assert_int_equal(d[F_KILLED].reason, FL_REASON_DISABLED);

    /* one flag alone gives what the whole evaluation gives */
    for (size_t i = 0; i < NFLAGS; i++) {
        fl_detail_t one;
        assert_int_equal(fl_evaluate_flag_detail(p, i, &pro, eff[i], sw[i],
                                                 &one), 0);
        assert_int_equal(one.enabled, d[i].enabled);
        assert_int_equal(one.reason, d[i].reason);
        assert_int_equal(one.has_segments, d[i].has_segments);
        assert_int_equal(one.segment_matched, d[i].segment_matched);
        assert_int_equal(one.rolled_back, d[i].rolled_back);
        assert_int_equal(one.rollout_milli, d[i].rollout_milli);
    }
    fl_detail_t one;
    assert_int_equal(fl_evaluate_flag_detail(p, NFLAGS, &pro, 0, 0, &one), -1);

    fl_project_free(p);
}

/* One flag alone (fl_evaluate_flag_detail, as OFREP's single evaluation
 * and the variables ask) gives what the whole project's evaluation gives
 * (with its shared segment results), and the values alone
 * (fl_evaluate_values, GET /flags) are the same values, for every caller
 * and percentage. */
static void test_parity_with_evaluate(void **state)
{
    (void) state;
    fl_project_t *p = load(project_json);
    fl_detail_t d[NFLAGS];
    fl_detail_t r[NFLAGS];
    fl_detail_t v[NFLAGS];
    uint32_t eff[NFLAGS];
    char query[128];

    for (int k = 0; k < 2000; k++) {
        snprintf(query, sizeof(query), "userId=u%d&trait_plan=%s", k,
                 k % 3 ? "pro" : "free");
        fl_user_t u = q(query);
        for (int i = 0; i < NFLAGS; i++) {
            eff[i] = (uint32_t) ((k * 7919 + i * 104729) % 100001);
        }
        fl_evaluate_detail(p, &u, eff, NULL, r);
        fl_evaluate_values(p, &u, eff, NULL, v);
        for (int i = 0; i < NFLAGS; i++) {
            if (v[i].enabled != r[i].enabled
                || v[i].rollout_milli != r[i].rollout_milli)
            {
                fail_msg("%s flag %d: values %d, detail %d", query, i,
                         v[i].enabled, r[i].enabled);
            }
            assert_int_equal(fl_evaluate_flag_detail(p, (size_t) i, &u,
                                                     eff[i], FL_SWITCH_NONE,
                                                     &d[i]), 0);
            if (r[i].enabled != d[i].enabled
                || r[i].reason != d[i].reason
                || r[i].segment_matched != d[i].segment_matched
                || r[i].rollout_milli != d[i].rollout_milli)
            {
                fail_msg("%s flag %d: all flags %d/%d, one flag %d/%d", query,
                         i, r[i].enabled, r[i].reason, d[i].enabled,
                         d[i].reason);
            }
        }
        arena_reset();
    }
    fl_project_free(p);
}

static void test_control_switch(void **state)
{
    (void) state;
    fl_control_t c;
    uint8_t sw = 99;

    assert_int_equal(fl_control_switch(NULL, 25000, &sw), 25000);
    assert_int_equal(sw, FL_SWITCH_NONE);

    fl_control_init(&c, 1);
    assert_int_equal(fl_control_switch(&c, 25000, &sw), 25000);
    assert_int_equal(sw, FL_SWITCH_NONE);

    fl_control_set_override(&c, FL_OVERRIDE_PERCENT, 12500);
    assert_int_equal(fl_control_switch(&c, 25000, &sw), 12500);
    assert_int_equal(sw, FL_SWITCH_OVERRIDE_PERCENT);

    fl_control_set_override(&c, FL_OVERRIDE_PERCENT, 0);
    assert_int_equal(fl_control_switch(&c, 25000, &sw), 0);
    assert_int_equal(sw, FL_SWITCH_OVERRIDE_PERCENT);

    fl_control_set_override(&c, FL_OVERRIDE_OFF, 0);
    assert_int_equal(fl_control_switch(&c, 25000, &sw), 0);
    assert_int_equal(sw, FL_SWITCH_OVERRIDE_OFF);

    /* a rollback wins over the override */
    assert_int_equal(fl_control_try_rollback(&c, 1, 2, 3, 1, FL_DECIDED_RULE), 1);
    assert_int_equal(fl_control_switch(&c, 25000, &sw), 0);
    assert_int_equal(sw, FL_SWITCH_ROLLED_BACK);

    fl_control_set_override(&c, FL_OVERRIDE_PERCENT, 100000);
    assert_int_equal(fl_control_switch(&c, 25000, &sw), 0);
    assert_int_equal(sw, FL_SWITCH_ROLLED_BACK);
    assert_int_equal(fl_control_effective(&c, 25000), 0);

    fl_control_clear_rollback(&c);
    assert_int_equal(fl_control_switch(&c, 25000, &sw), 100000);
    assert_int_equal(sw, FL_SWITCH_OVERRIDE_PERCENT);
}


/* ------------------------------------------------------------ answers */

static void test_flag_json(void **state)
{
    (void) state;
    fl_project_t *p = load(project_json);
    fl_detail_t d[NFLAGS];
    uint32_t eff[NFLAGS] = { 0, 0, 100000, 50000, 100000, 12345, 0 };
    uint8_t sw[NFLAGS] = { FL_SWITCH_ROLLED_BACK, 0, 0, 0, 0, 0, 0 };
    fl_user_t pro = q("userId=user-1&trait_plan=pro");
    char buf[512];

    fl_evaluate_detail(p, &pro, eff, sw, d);

    size_t n = fl_ofrep_flag_json(p, F_STATIC_ON, &d[F_STATIC_ON], buf);
    assert_true(n <= fl_ofrep_flag_json_bound(p, F_STATIC_ON));
    buf[n] = '\0';
    assert_string_equal(buf,
        "{\"key\":\"static-on\",\"value\":false,\"reason\":\"DISABLED\","
        "\"variant\":\"off\",\"metadata\":{\"rolloutPercentage\":0,"
        "\"rolledBack\":true}}");

    n = fl_ofrep_flag_json(p, F_SEG_FULL, &d[F_SEG_FULL], buf);
    buf[n] = '\0';
    assert_string_equal(buf,
        "{\"key\":\"seg-full\",\"value\":true,\"reason\":\"TARGETING_MATCH\","
        "\"variant\":\"on\",\"metadata\":{\"rolloutPercentage\":100,"
        "\"rolledBack\":false,\"segmentMatched\":true}}");

    n = fl_ofrep_flag_json(p, F_SEG_SPLIT, &d[F_SEG_SPLIT], buf);
    buf[n] = '\0';
    assert_non_null(strstr(buf, "\"reason\":\"SPLIT\""));
    assert_non_null(strstr(buf, "\"rolloutPercentage\":12.345,"));

    assert_int_equal(fl_ofrep_flag_json_bound(p, NFLAGS), 0);
    fl_project_free(p);
}

static void test_bulk_json(void **state)
{
    (void) state;
    fl_project_t *p = load(
        "{\"flags\":[{\"name\":\"a\",\"enabled\":true,\"rolloutPercentage\":100},"
        "{\"name\":\"b.c:D-1_\",\"enabled\":false,\"rolloutPercentage\":25}]}");
    fl_detail_t d[2];
    fl_user_t anon = q("");
    char buf[1024];

    fl_evaluate_detail(p, &anon, NULL, NULL, d);

    size_t n = fl_ofrep_bulk_json(p, d, NULL, 0, NULL, 0, buf);
    assert_true(n <= fl_ofrep_bulk_json_bound(p, 0, 0));
    buf[n] = '\0';
    assert_string_equal(buf,
        "{\"flags\":[{\"key\":\"a\",\"value\":true,\"reason\":\"STATIC\","
        "\"variant\":\"on\",\"metadata\":{\"rolloutPercentage\":100,"
        "\"rolledBack\":false}},{\"key\":\"b.c:D-1_\",\"value\":false,"
        "\"reason\":\"DISABLED\",\"variant\":\"off\",\"metadata\":"
        "{\"rolloutPercentage\":25,\"rolledBack\":false}}]}");

    /* the stream: the path and the token percent-encoded */
    const char path[] = "/of rep/\xc3\xa9?#%\"/";
    const char token[] = "pub/a+b=c&d%\"";
    n = fl_ofrep_bulk_json(p, d, path, sizeof(path) - 1, token,
                           sizeof(token) - 1, buf);
    assert_true(n <= fl_ofrep_bulk_json_bound(p, sizeof(path) - 1,
                                              sizeof(token) - 1));
    buf[n] = '\0';
    const char *tail = strstr(buf, "}}],");
    assert_non_null(tail);
    assert_string_equal(tail + 3,
        ",\"eventStreams\":[{\"type\":\"sse\",\"endpoint\":{\"requestUri\":"
        "\"/of%20rep/%C3%A9%3F%23%25%22/v1/events?token="
        "pub%2Fa%2Bb%3Dc%26d%25%22\"},\"inactivityDelaySec\":120}]}");

    /* the plain case */
    n = fl_ofrep_bulk_json(p, d, "/ofrep/", 7, "pub_shop_1", 10, buf);
    buf[n] = '\0';
    assert_non_null(strstr(buf, "\"requestUri\":\"/ofrep/v1/events?token="
                                "pub_shop_1\""));
    fl_project_free(p);
}

static void test_bounds_hostile(void **state)
{
    (void) state;
    /* the longest name; a path and a token that all need escaping */
    char json[2048], name[FL_MAX_FLAG_NAME_LEN + 1];
    memset(name, 'n', FL_MAX_FLAG_NAME_LEN);
    name[FL_MAX_FLAG_NAME_LEN] = '\0';
    snprintf(json, sizeof(json),
             "{\"flags\":[{\"name\":\"%s\",\"enabled\":true,"
             "\"rolloutPercentage\":33.333,\"segments\":[\"s\"]}],"
             "\"segments\":{\"s\":{\"rules\":[]}}}", name);
    fl_project_t *p = load(json);
    fl_detail_t d[1];
    fl_user_t anon = q("");
    char path[300], token[300];
    memset(path, 0xff, sizeof(path));
    memset(token, '"', sizeof(token));

    fl_evaluate_detail(p, &anon, NULL, NULL, d);

    size_t bound = fl_ofrep_bulk_json_bound(p, sizeof(path), sizeof(token));
    char *buf = malloc(bound);
    assert_non_null(buf);
    size_t n = fl_ofrep_bulk_json(p, d, path, sizeof(path), token,
                                  sizeof(token), buf);
    assert_true(n <= bound);
    free(buf);

    bound = fl_ofrep_flag_json_bound(p, 0);
    buf = malloc(bound);
    n = fl_ofrep_flag_json(p, 0, &d[0], buf);
    assert_true(n <= bound);
    free(buf);
    fl_project_free(p);
}

static void test_error_json(void **state)
{
    (void) state;
    char buf[512];
    const char key[] = "a\"b\xff";
    const char details[] = "line\nbreak";

    size_t n = fl_ofrep_error_json(key, sizeof(key) - 1, "FLAG_NOT_FOUND",
                                   details, sizeof(details) - 1, buf);
    assert_true(n <= fl_ofrep_error_json_bound(sizeof(key) - 1,
                                               sizeof(details) - 1));
    buf[n] = '\0';
    assert_string_equal(buf,
        "{\"key\":\"a\\\"b\\ufffd\",\"errorCode\":\"FLAG_NOT_FOUND\","
        "\"errorDetails\":\"line\\nbreak\"}");

    n = fl_ofrep_error_json(NULL, 0, "PARSE_ERROR", "bad", 3, buf);
    buf[n] = '\0';
    assert_string_equal(buf,
        "{\"errorCode\":\"PARSE_ERROR\",\"errorDetails\":\"bad\"}");

    /* an empty key is still a key */
    n = fl_ofrep_error_json("", 0, "GENERAL", "", 0, buf);
    buf[n] = '\0';
    assert_string_equal(buf,
        "{\"key\":\"\",\"errorCode\":\"GENERAL\",\"errorDetails\":\"\"}");

    /* a code longer than any OpenFeature code is cut, within the bound */
    char code[100];
    memset(code, 'C', sizeof(code) - 1);
    code[sizeof(code) - 1] = '\0';
    n = fl_ofrep_error_json(NULL, 0, code, "", 0, buf);
    assert_true(n <= fl_ofrep_error_json_bound(0, 0));
}


/* ------------------------------------------------------------ ETag */

#define PIN(got, want)                                                       \
    do {                                                                     \
        uint64_t got_ = (got);                                               \
        if (got_ != UINT64_C(want)) {                                        \
            fail_msg("%s: 0x%016llx, not 0x%016llx", #got,                   \
                     (unsigned long long) got_,                              \
                     (unsigned long long) UINT64_C(want));                   \
        }                                                                    \
    } while (0)

static void test_answer_etag(void **state)
{
    (void) state;
    fl_project_t *p = load(project_json);
    uint32_t eff[NFLAGS] = { 100000, 0, 100000, 50000, 100000, 12500, 0 };
    uint8_t sw[NFLAGS] = { 0 };

    fl_user_t a = q("userId=u1&trait_plan=pro&trait_x=1");
    fl_user_t a2 = ok_ctx("{\"context\":{\"x\":1,\"plan\":\"pro\","
                          "\"targetingKey\":\"u1\"}}");
    uint64_t e = fl_answer_etag(p, &a, eff, sw);

    /* stable; the same normalised caller from a query or a context; NULL
     * arrays read as the configured state */
    assert_true(e == fl_answer_etag(p, &a, eff, sw));
    assert_true(e == fl_answer_etag(p, &a2, eff, sw));
    assert_true(e == fl_answer_etag(p, &a, eff, NULL));
    assert_true(e == fl_answer_etag(p, &a, NULL, NULL));

    /* the caller */
    fl_user_t b = q("userId=u2&trait_plan=pro&trait_x=1");
    fl_user_t c = q("userId=u1&trait_plan=pro&trait_x=2");
    fl_user_t d = q("userId=u1&trait_plan=pro");
    fl_user_t e1 = q("trait_plan=pro&trait_x=1");
    fl_user_t e2 = q("userId=&trait_plan=pro&trait_x=1");
    /* the boundaries between fields count: ("ab","c") is not ("a","bc") */
    fl_user_t f1 = q("trait_ab=c");
    fl_user_t f2 = q("trait_a=bc");
    assert_true(e != fl_answer_etag(p, &b, eff, sw));
    assert_true(e != fl_answer_etag(p, &c, eff, sw));
    assert_true(e != fl_answer_etag(p, &d, eff, sw));
    assert_true(e != fl_answer_etag(p, &e1, eff, sw));
    assert_true(fl_answer_etag(p, &e1, eff, sw)
                == fl_answer_etag(p, &e2, eff, sw));
    assert_true(fl_answer_etag(p, &f1, eff, sw)
                != fl_answer_etag(p, &f2, eff, sw));

    /* the state: a percentage, a rollback, an override off */
    eff[F_SPLIT] = 50001;
    assert_true(e != fl_answer_etag(p, &a, eff, sw));
    eff[F_SPLIT] = 50000;
    sw[F_STATIC_OFF] = FL_SWITCH_ROLLED_BACK;
    uint64_t rb = fl_answer_etag(p, &a, eff, sw);
    sw[F_STATIC_OFF] = FL_SWITCH_OVERRIDE_OFF;
    uint64_t off = fl_answer_etag(p, &a, eff, sw);
    assert_true(e != rb && e != off && rb != off);
    sw[F_STATIC_OFF] = 0;

    /* the definitions: one flag's percentage in the file */
    char other[sizeof(project_json)];
    memcpy(other, project_json, sizeof(other));
    char *at = strstr(other, "\"rolloutPercentage\":50}");
    assert_non_null(at);
    memcpy(at, "\"rolloutPercentage\":51}", 23);
    fl_project_t *p2 = load(other);
    assert_true(fl_answer_etag(p, &a, NULL, NULL)
                != fl_answer_etag(p2, &a, NULL, NULL));
    fl_project_free(p2);

    /* the bulk tag adds the event stream */
    uint64_t b0 = fl_ofrep_bulk_etag(p, &a, eff, sw, NULL, 0, NULL, 0);
    uint64_t b1 = fl_ofrep_bulk_etag(p, &a, eff, sw, "/ofrep/", 7, "t1", 2);
    uint64_t b2 = fl_ofrep_bulk_etag(p, &a, eff, sw, "/ofrep/", 7, "t2", 2);
    uint64_t b3 = fl_ofrep_bulk_etag(p, &a, eff, sw, "/x/", 3, "t1", 2);
    assert_true(b0 != b1 && b1 != b2 && b1 != b3 && b0 != e);
    assert_true(b1 == fl_ofrep_bulk_etag(p, &a, eff, sw, "/ofrep/", 7,
                                         "t1", 2));
    fl_project_free(p);
}

/*
 * Exact values: ETags reach clients and caches, and definition hashes are
 * kept in state files and in Redis, so neither may change with the code
 * that computes them.  Computed by ofrep.cpp's and project.cpp's hashers
 * as they were before the ETag code got a file of its own.
 */
static void test_etag_pinned(void **state)
{
    (void) state;
    fl_project_t *p = load(project_json);
    uint32_t eff[NFLAGS] = { 100000, 0, 100000, 50000, 100000, 12500, 0 };
    uint8_t sw[NFLAGS] = { 0 };
    fl_user_t a = q("userId=u1&trait_plan=pro&trait_x=1");
    fl_user_t anon = q("");
    fl_flag_info_t info;

    fl_project_flag_info(p, F_STATIC_ON, &info);
    PIN(info.def_hash, 0xed4708ec84b4814e);
    fl_project_flag_info(p, F_SEG_SPLIT, &info);
    PIN(info.def_hash, 0xf6aff89ef86924b6);

    PIN(fl_answer_etag(p, &a, eff, sw), 0x4a286944bdd6d4e1);
    PIN(fl_answer_etag(p, &anon, NULL, NULL), 0x021d502eff0750f5);
    PIN(fl_answer_etag(p, NULL, NULL, NULL), 0x021d502eff0750f5);
    PIN(fl_answer_etag(NULL, NULL, NULL, NULL), 0x16238265045c619b);

    sw[F_SPLIT] = FL_SWITCH_ROLLED_BACK;
    eff[F_SPLIT] = 0;
    PIN(fl_answer_etag(p, &a, eff, sw), 0xc14eeac6af07a7ee);

    PIN(fl_ofrep_bulk_etag(p, &a, eff, sw, NULL, 0, NULL, 0),
        0x0d9d2833cc04569d);
    PIN(fl_ofrep_bulk_etag(p, &a, eff, sw, "/ofrep/", 7, "pub_shop_1", 10),
        0x72db6a9076fb790f);

    fl_project_free(p);
}

static void test_etag_format(void **state)
{
    (void) state;
    char out[FL_ETAG_LEN + 1];

    assert_int_equal(fl_etag_format(UINT64_C(0x0123456789abcdef), out), 18);
    out[18] = '\0';
    assert_string_equal(out, "\"0123456789abcdef\"");
    fl_etag_format(0, out);
    assert_string_equal(out, "\"0000000000000000\"");
}

struct inm_case {
    const char  *value;
    int          want;
};

static void test_none_match(void **state)
{
    (void) state;
    uint64_t tag = UINT64_C(0x3ec2eeda29fae3d6);
    const struct inm_case c[] = {
        { "\"3ec2eeda29fae3d6\"", 1 },
        { "W/\"3ec2eeda29fae3d6\"", 1 },            /* weak comparison */
        { "  \"3ec2eeda29fae3d6\"\t", 1 },
        { "\"x\", \"3ec2eeda29fae3d6\"", 1 },
        { "\"x\",W/\"3ec2eeda29fae3d6\" ,\"y\"", 1 },
        { ", ,\"3ec2eeda29fae3d6\",,", 1 },          /* empty elements */
        { "*", 1 },
        { " * ", 1 },
        { "\"3EC2EEDA29FAE3D6\"", 0 },              /* opaque: exact bytes */
        { "3ec2eeda29fae3d6", 0 },                  /* no quotes */
        { "\"3ec2eeda29fae3d\"", 0 },
        { "\"3ec2eeda29fae3d6 \"", 0 },             /* a space is no etagc */
        { "\"3ec2eeda29fae3d6\" \"x\"", 0 },        /* no comma */
        { "\"3ec2eeda29fae3d6\", \"unterminated", 0 },
        { "\"3ec2eeda29fae3d6\", *", 0 },           /* "*" only alone */
        { "w/\"3ec2eeda29fae3d6\"", 0 },            /* W/ is case-sensitive */
        { "\"other\"", 0 },
        { "", 0 },
        { ",", 0 },
    };

    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        int got = fl_etag_none_match(c[i].value, strlen(c[i].value), tag);
        if (got != c[i].want) {
            fail_msg("row %zu: If-None-Match: %s gave %d", i, c[i].value,
                     got);
        }
    }
    assert_int_equal(fl_etag_none_match(NULL, 0, tag), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_context_mapping, arena_teardown),
        cmocka_unit_test_teardown(test_context_empty, arena_teardown),
        cmocka_unit_test_teardown(test_context_last_wins, arena_teardown),
        cmocka_unit_test_teardown(test_context_errors, arena_teardown),
        cmocka_unit_test_teardown(test_context_syntax_messages,
                                  arena_teardown),
        cmocka_unit_test_teardown(test_context_deep, arena_teardown),
        cmocka_unit_test_teardown(test_context_limits, arena_teardown),
        cmocka_unit_test_teardown(test_context_max_traits, arena_teardown),
        cmocka_unit_test_teardown(test_context_no_memory, arena_teardown),
        cmocka_unit_test_teardown(test_reasons, arena_teardown),
        cmocka_unit_test_teardown(test_reasons_switched, arena_teardown),
        cmocka_unit_test_teardown(test_parity_with_evaluate, arena_teardown),
        cmocka_unit_test_teardown(test_control_switch, arena_teardown),
        cmocka_unit_test_teardown(test_flag_json, arena_teardown),
        cmocka_unit_test_teardown(test_bulk_json, arena_teardown),
        cmocka_unit_test_teardown(test_bounds_hostile, arena_teardown),
        cmocka_unit_test_teardown(test_error_json, arena_teardown),
        cmocka_unit_test_teardown(test_answer_etag, arena_teardown),
        cmocka_unit_test_teardown(test_etag_pinned, arena_teardown),
        cmocka_unit_test_teardown(test_etag_format, arena_teardown),
        cmocka_unit_test_teardown(test_none_match, arena_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
