/*
 * test_sdk.c - the DeployRamp SDK API of the core (docs/sdk.md): the body
 * of POST {loc}flags, the flags array the SDK evaluates, the
 * flags_refreshed message and the messages of the live channel.
 *
 * The strongest check is the last one: a small copy of the Go SDK's
 * evaluation (its Flag(): enabled, segments in order, sticky, its own 0-99
 * hash, the flag's percentage) run over the JSON this core writes must
 * give, for every user and every set of traits, what fl_evaluate_detail() gives.
 */

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <yajl/yajl_tree.h>

#include "flags_core.h"

#include "unit_arena.h"
#include "unit_project.h"

static fl_user_t body_user(const char *body)
{
    fl_user_t u;
    char err[256];

    if (fl_sdk_parse_request(body, strlen(body), 64, &arena, &u, err,
                             sizeof(err)) != FL_OK)
    {
        fail_msg("body %s: %s", body, err);
    }
    return u;
}

static void expect_trait(const fl_user_t *u, const char *name,
    const char *value)
{
    const fl_trait_t *t = fl_user_trait(u, name, strlen(name));

    if (value == NULL) {
        assert_null(t);
        return;
    }
    if (t == NULL) {
        fail_msg("trait %s missing", name);
    }
    assert_int_equal(t->value_len, strlen(value));
    assert_memory_equal(t->value, value, t->value_len);
}

static void expect_err(const char *body, size_t len, size_t max_traits,
    fl_status_t want, const char *msg)
{
    fl_user_t u;
    char err[256] = "";
    fl_status_t rc = fl_sdk_parse_request(body, len, max_traits, &arena, &u,
                                          err, sizeof(err));

    if (rc != want || strcmp(err, msg) != 0) {
        fail_msg("body %.*s: got %d \"%s\", want %d \"%s\"", (int) len, body,
                 rc, err, want, msg);
    }
    assert_null(u.user_id);
    assert_int_equal(u.ntraits, 0);
}

#define FIELD(body, msg)  expect_err(body, strlen(body), 64, FL_ERR_FIELD, msg)
#define JSON(body, msg)   expect_err(body, strlen(body), 64, FL_ERR_JSON, msg)


/* ------------------------------------------------------- the request body */

static void test_request_body(void **state)
{
    (void) state;
    fl_user_t u = body_user(
        "{\"userId\":\"u-1\",\"traits\":{\"plan\":\"pro\",\"n\":1.50,"
        "\"big\":-2e3,\"ok\":true,\"no\":false,\"gone\":null,"
        "\"caf\\u00e9\":\"\\u2603\"},\"extra\":[1,{\"x\":2}]}");

    assert_int_equal(u.user_id_len, 3);
    assert_memory_equal(u.user_id, "u-1", 3);
    assert_int_equal(u.ntraits, 6);
    expect_trait(&u, "plan", "pro");
    expect_trait(&u, "n", "1.50");              /* the text as sent */
    expect_trait(&u, "big", "-2e3");
    expect_trait(&u, "ok", "true");
    expect_trait(&u, "no", "false");
    expect_trait(&u, "gone", NULL);             /* null: not sent */
    expect_trait(&u, "caf\xc3\xa9", "\xe2\x98\x83");

    /* sorted by name, as fl_user_trait() needs */
    for (size_t i = 0; i + 1 < u.ntraits; i++) {
        size_t n = u.traits[i].name_len < u.traits[i + 1].name_len
                   ? u.traits[i].name_len : u.traits[i + 1].name_len;
        int c = memcmp(u.traits[i].name, u.traits[i + 1].name, n);
        assert_true(c < 0 || (c == 0 && u.traits[i].name_len
                                        < u.traits[i + 1].name_len));
    }
}

static void test_request_absent_and_duplicates(void **state)
{
    (void) state;
    fl_user_t u = body_user("{}");
    assert_null(u.user_id);
    assert_int_equal(u.ntraits, 0);

    u = body_user("{\"userId\":null,\"traits\":null}");
    assert_null(u.user_id);
    assert_int_equal(u.ntraits, 0);

    /* an empty userId is no userId, as "userId=" in the query */
    u = body_user("{\"userId\":\"\",\"traits\":{}}");
    assert_null(u.user_id);
    assert_int_equal(u.ntraits, 0);

    /* the last of duplicate keys wins, at both levels */
    u = body_user("{\"userId\":\"a\",\"userId\":\"b\",\"traits\":{\"x\":1},"
                  "\"traits\":{\"p\":\"1\",\"q\":\"q\",\"p\":\"2\","
                  "\"q\":null}}");
    assert_memory_equal(u.user_id, "b", 1);
    assert_int_equal(u.ntraits, 1);
    expect_trait(&u, "p", "2");
    expect_trait(&u, "q", NULL);
    expect_trait(&u, "x", NULL);

    /* an empty value is a value (exists) */
    u = body_user("{\"traits\":{\"e\":\"\"}}");
    assert_int_equal(u.ntraits, 1);
    expect_trait(&u, "e", "");

    /* a null later replaces a bad earlier value: nothing to refuse */
    u = body_user("{\"traits\":{\"o\":{},\"o\":null}}");
    assert_int_equal(u.ntraits, 0);
}

static void test_request_limits(void **state)
{
    (void) state;
    char body[4096];
    char name[200];
    fl_user_t u;

    /* userId and values: 1024 bytes pass, 1025 do not */
    snprintf(body, sizeof(body), "{\"userId\":\"%01024d\"}", 0);
    u = body_user(body);
    assert_int_equal(u.user_id_len, 1024);
    snprintf(body, sizeof(body), "{\"userId\":\"%01025d\"}", 0);
    FIELD(body, "userId is longer than 1024 bytes");

    snprintf(body, sizeof(body), "{\"traits\":{\"t\":\"%01024d\"}}", 0);
    u = body_user(body);
    assert_int_equal(u.traits[0].value_len, 1024);
    snprintf(body, sizeof(body), "{\"traits\":{\"t\":\"%01025d\"}}", 0);
    FIELD(body, "traits.t is longer than 1024 bytes");
    snprintf(body, sizeof(body), "{\"traits\":{\"t\":1%01024d}}", 0);
    FIELD(body, "traits.t is longer than 1024 bytes");

    /* names: 128 bytes pass, 129 do not */
    memset(name, 'n', 129);
    snprintf(body, sizeof(body), "{\"traits\":{\"%.128s\":\"v\"}}", name);
    u = body_user(body);
    assert_int_equal(u.traits[0].name_len, 128);
    snprintf(body, sizeof(body), "{\"traits\":{\"%.129s\":\"v\"}}", name);
    FIELD(body, "a trait name is longer than 128 bytes");
    FIELD("{\"traits\":{\"\":\"v\"}}", "a trait name is empty");

    /* max_traits counts distinct names that are not null */
    const char *three = "{\"traits\":{\"a\":1,\"b\":2,\"c\":3,\"a\":4,"
                        "\"d\":null}}";
    expect_err(three, strlen(three), 2, FL_ERR_FIELD, "more than 2 traits");
    assert_int_equal(fl_sdk_parse_request(three, strlen(three), 3, &arena,
                                          &u, NULL, 0), FL_OK);
    assert_int_equal(u.ntraits, 3);
    expect_trait(&u, "a", "4");
    expect_err("{\"traits\":{\"a\":1}}", 18, 0, FL_ERR_FIELD,
               "more than 0 traits");
}

static void test_request_fields(void **state)
{
    (void) state;

    FIELD("{\"userId\":1}", "userId must be a string");
    FIELD("{\"userId\":true}", "userId must be a string");
    FIELD("{\"userId\":{}}", "userId must be a string");
    FIELD("{\"traits\":[]}", "traits must be an object");
    FIELD("{\"traits\":\"plan=pro\"}", "traits must be an object");
    FIELD("{\"traits\":{\"a\":\"1\",\"o\":{\"x\":1}}}",
          "traits.o must be a string, number, boolean or null");
    FIELD("{\"traits\":{\"l\":[1]}}",
          "traits.l must be a string, number, boolean or null");
    /* the name is escaped, and cut to 64 bytes */
    FIELD("{\"traits\":{\"a\\\"b\\n\":[]}}",
          "traits.a\\\"b\\n must be a string, number, boolean or null");
    FIELD("{\"traits\":{\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\":[]}}",
          "traits.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa... "
          "must be a string, number, boolean or null");

    /* a NUL byte is refused as %00 is in the query */
    FIELD("{\"userId\":\"a\\u0000b\"}", "userId holds a NUL byte");
    FIELD("{\"traits\":{\"a\\u0000\":\"v\"}}", "a trait name holds a NUL byte");
    FIELD("{\"traits\":{\"k\":\"\\u0000\"}}", "traits.k holds a NUL byte");

    /* the first member at fault in document order */
    FIELD("{\"traits\":{\"z\":[],\"a\":{}}}",
          "traits.z must be a string, number, boolean or null");
}

/* The JSON refusals read as those of a report body: same status, same
 * message (docs/http-api.md). */
static void test_request_json(void **state)
{
    (void) state;
    static const char *const bodies[] = {
        "", "   \n\t ", "[]", "\"x\"", "1", "null", "{", "{\"userId\":",
        "{} {}", "{\"a\":1,}", "{'a':1}", "\xef\xbb\xbf{}",
        "{\"userId\":\"\xc0\x80\"}", "{\"userId\":\"\xed\xa0\x80\"}",
        "{\"userId\":\"\\ud800\"}", "{\"userId\":\"\\udc00x\"}",
        "{\"userId\":\"\xf4\x90\x80\x80\"}", "{\"a\":tru\xff}",
        "{\"traits\":{\"a\":\"\xe2\x98\"}}",
    };

    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        const char *b = bodies[i];
        fl_report_parser_t *rp = fl_report_parser_new(&arena);
        fl_report_t r;
        char rerr[256] = "", serr[256] = "";
        fl_user_t u;

        assert_non_null(rp);
        fl_report_parser_feed(rp, (const unsigned char *) b, strlen(b));
        fl_status_t rrc = fl_report_parser_finish(rp, &r, rerr, sizeof(rerr));
        fl_status_t src = fl_sdk_parse_request(b, strlen(b), 64, &arena, &u,
                                               serr, sizeof(serr));
        if (rrc != FL_ERR_JSON || src != FL_ERR_JSON
            || strcmp(rerr, serr) != 0)
        {
            fail_msg("body %zu: report %d \"%s\", sdk %d \"%s\"", i, rrc,
                     rerr, src, serr);
        }
    }

    JSON("", "request body is empty");
    JSON("[1]", "request body must be a JSON object");
    JSON("{\"userId\":\"\xc0\x80\"}",
         "request body is not valid UTF-8 (byte 11)");

    /* nesting: 64 levels pass, 65 do not, at no cost */
    char deep[300];
    size_t n = 0;
    deep[n++] = '{';
    deep[n++] = '"'; deep[n++] = 'x'; deep[n++] = '"'; deep[n++] = ':';
    for (int i = 0; i < 63; i++) {
        deep[n++] = '[';
    }
    for (int i = 0; i < 63; i++) {
        deep[n++] = ']';
    }
    deep[n++] = '}';
    fl_user_t u;
    assert_int_equal(fl_sdk_parse_request(deep, n, 64, &arena, &u, NULL, 0),
                     FL_OK);
    memmove(deep + 6, deep + 5, n - 5);
    deep[5] = '[';
    n++;
    memmove(deep + n - 1, deep + n - 2, 2);
    deep[n - 2] = ']';
    n++;
    expect_err(deep, n, 64, FL_ERR_JSON, "JSON nesting is deeper than 64 levels");
}

static void test_request_no_memory(void **state)
{
    (void) state;
    const char *b = "{\"userId\":\"u\",\"traits\":{\"a\":\"1\",\"b\":2,"
                    "\"c\":true}}";
    fl_user_t u;
    char err[128];

    /* yajl does not survive a failing allocation in the middle of a parse
     * (arena.hpp), so only the allocations after it fail here: those of
     * the traits */
    assert_int_equal(fl_sdk_parse_request(b, strlen(b), 64, &arena, &u, err,
                                          sizeof(err)), FL_OK);
    size_t total = SIZE_MAX - arena_allocs_left;
    arena_reset();
    assert_true(total > 3);

    for (size_t k = total - 3; k < total; k++) {
        arena_allocs_left = k;
        fl_status_t rc = fl_sdk_parse_request(b, strlen(b), 64, &arena, &u,
                                              err, sizeof(err));
        arena_allocs_left = SIZE_MAX;
        assert_int_equal(rc, FL_ERR_NOMEM);
        assert_string_equal(err, "out of memory");
        assert_null(u.user_id);
        assert_int_equal(u.ntraits, 0);
        arena_reset();
    }
    assert_int_equal(fl_sdk_parse_request(b, strlen(b), 64, NULL, &u, NULL, 0),
                     FL_ERR_INTERNAL);
}


/* --------------------------------------------------------- the flags array */

static const char *const project_json =
    "{\"flags\":["
    "{\"name\":\"plain\",\"enabled\":true,\"rolloutPercentage\":30},"
    "{\"name\":\"all\",\"enabled\":true,\"rolloutPercentage\":100},"
    "{\"name\":\"killed\",\"enabled\":false,\"rolloutPercentage\":100,"
    " \"segments\":[\"pro\"]},"
    "{\"name\":\"zero\",\"enabled\":true,\"rolloutPercentage\":0},"
    "{\"name\":\"pro-de\",\"enabled\":true,\"rolloutPercentage\":100,"
    " \"segments\":[\"pro-de\",\"staff\"]},"
    "{\"name\":\"paid\",\"enabled\":true,\"rolloutPercentage\":40,"
    " \"segments\":[\"paid\"]},"
    "{\"name\":\"ios\",\"enabled\":true,\"rolloutPercentage\":100,"
    " \"segments\":[\"ios\"]},"
    "{\"name\":\"mixed\",\"enabled\":true,\"rolloutPercentage\":100,"
    " \"segments\":[\"pro-ios\"]},"
    "{\"name\":\"everyone\",\"enabled\":true,\"rolloutPercentage\":100,"
    " \"segments\":[\"all\"]},"
    "{\"name\":\"odd\",\"enabled\":true,\"rolloutPercentage\":100,"
    " \"segments\":[\"ic\",\"empty\",\"in-empty\",\"one\",\"neq\"]},"
    "{\"name\":\"acct\",\"enabled\":true,\"rolloutPercentage\":50,"
    " \"stickiness\":\"accountId\"},"
    "{\"name\":\"q:uote\",\"enabled\":true,\"rolloutPercentage\":12.5}"
    "],\"segments\":{"
    "\"pro\":{\"rules\":[{\"trait\":\"plan\",\"op\":\"eq\",\"value\":\"pro\"}]},"
    "\"pro-de\":{\"rules\":[{\"trait\":\"plan\",\"op\":\"eq\",\"value\":\"pro\"},"
    "  {\"trait\":\"country\",\"op\":\"eq\",\"value\":\"de\"}]},"
    "\"staff\":{\"rules\":[{\"trait\":\"role\",\"op\":\"eq\",\"value\":\"st\\\"aff\"}]},"
    "\"paid\":{\"rules\":[{\"trait\":\"plan\",\"op\":\"in\","
    "  \"values\":[\"pro\",\"enterprise\"]}]},"
    "\"ios\":{\"rules\":[{\"trait\":\"platform\",\"op\":\"regex\","
    "  \"value\":\"^(ios|ipados)$\",\"ignoreCase\":true}]},"
    "\"pro-ios\":{\"rules\":[{\"trait\":\"plan\",\"op\":\"eq\",\"value\":\"pro\"},"
    "  {\"trait\":\"platform\",\"op\":\"regex\",\"value\":\"^ios$\"}]},"
    "\"all\":{\"rules\":[]},"
    "\"ic\":{\"rules\":[{\"trait\":\"plan\",\"op\":\"eq\",\"value\":\"Pro\","
    "  \"ignoreCase\":true}]},"
    "\"empty\":{\"rules\":[{\"trait\":\"plan\",\"op\":\"eq\",\"value\":\"\"}]},"
    "\"in-empty\":{\"rules\":[{\"trait\":\"plan\",\"op\":\"in\","
    "  \"values\":[\"x\",\"\"]}]},"
    "\"one\":{\"rules\":[{\"trait\":\"plan\",\"op\":\"in\",\"values\":[\"solo\"]},"
    "  {\"trait\":\"n\",\"op\":\"gte\",\"value\":10}]},"
    "\"neq\":{\"rules\":[{\"trait\":\"plan\",\"op\":\"neq\",\"value\":\"free\"}]}"
    "}}";

#define T "{\"type\":\"and\",\"conditions\":[]}"
#define F "{\"type\":\"or\",\"conditions\":[]}"
#define M(k, v) "{\"type\":\"match\",\"traitKey\":\"" k "\",\"traitValue\":\"" v "\"}"
#define SEG(id, cond, pct) \
    "{\"segmentId\":\"" id "\",\"condition\":" cond ",\"rolloutPercentage\":" \
    pct ",\"sticky\":false}"
#define FLAG(name, en, pct, segs) \
    "{\"name\":\"" name "\",\"enabled\":" en ",\"rolloutPercentage\":" pct \
    ",\"value\":null,\"segments\":[" segs "],\"stickyAssignments\":[]}"

static char *flags_for(const fl_project_t *p, const fl_user_t *u,
    const uint32_t *eff, fl_detail_t *r, size_t *len)
{
    size_t bound = fl_sdk_flags_json_bound(p);
    char *buf = arena_alloc(NULL, bound + 1);

    fl_evaluate_detail(p, u, eff, NULL, r);
    *len = fl_sdk_flags_json(p, u, r, buf);
    assert_true(*len <= bound);
    buf[*len] = '\0';
    return buf;
}

static void test_flags_json(void **state)
{
    (void) state;
    fl_project_t *p = load(project_json);
    fl_detail_t r[16];
    size_t len;

    /* user-2 is in the first 30 % of "plain", 12.5 % of "q:uote" and 40 %
     * of "paid" (fl_bucket: 20316, 11581, 39307); account a-1 is in the
     * first 50 % of "acct" (28562) */
    assert_int_equal(fl_bucket("plain", 5, "user-2", 6), 20316);
    assert_int_equal(fl_bucket("q:uote", 6, "user-2", 6), 11581);
    assert_int_equal(fl_bucket("paid", 4, "user-2", 6), 39307);
    assert_int_equal(fl_bucket("acct", 4, "a-1", 3), 28562);

    fl_user_t u = body_user("{\"userId\":\"user-2\",\"traits\":{\"plan\":\"pro\","
                            "\"platform\":\"IOS\",\"accountId\":\"a-1\"}}");
    char *got = flags_for(p, &u, NULL, r, &len);

    assert_string_equal(got, "{\"flags\":["
        FLAG("plain", "true", "100", "") ","
        FLAG("all", "true", "100", "") ","
        FLAG("killed", "false", "0", SEG("pro", M("plan", "pro"), "0")) ","
        FLAG("zero", "false", "0", "") ","
        FLAG("pro-de", "true", "0",
             SEG("pro-de", "{\"type\":\"and\",\"conditions\":["
                 M("plan", "pro") "," M("country", "de") "]}", "100") ","
             SEG("staff", M("role", "st\\\"aff"), "100")) ","
        FLAG("paid", "true", "0",
             SEG("paid", "{\"type\":\"or\",\"conditions\":["
                 M("plan", "enterprise") "," M("plan", "pro") "]}", "100")) ","
        FLAG("ios", "true", "0", SEG("ios", T, "100")) ","
        /* platform "IOS" fails the case-sensitive ^ios$: the segment is
         * always false, the eq part is not sent */
        FLAG("mixed", "true", "0", SEG("pro-ios", F, "100")) ","
        FLAG("everyone", "true", "0", SEG("all", T, "100")) ","
        FLAG("odd", "true", "0",
             SEG("ic", T, "100") "," SEG("empty", F, "100") ","
             SEG("in-empty", F, "100") "," SEG("one", F, "100") ","
             SEG("neq", T, "100")) ","
        FLAG("acct", "true", "100", "") ","
        FLAG("q:uote", "true", "100", "")
        "]}");

    /* the other way round: no traits, another user */
    assert_int_equal(fl_bucket("plain", 5, "user-1", 6), 42190);
    u = body_user("{\"userId\":\"user-1\",\"traits\":{\"platform\":\"ios\","
                  "\"n\":10}}");
    got = flags_for(p, &u, NULL, r, &len);
    assert_non_null(strstr(got, FLAG("plain", "true", "0", "")));
    assert_non_null(strstr(got, FLAG("mixed", "true", "0",
                                     SEG("pro-ios", M("plan", "pro"), "100"))));
    assert_non_null(strstr(got, SEG("ic", F, "100") "," SEG("empty", F, "100")
                            "," SEG("in-empty", F, "100") ","
                            SEG("one", M("plan", "solo"), "100") ","
                            SEG("neq", T, "100")));
    /* no accountId: no key for "acct" */
    assert_non_null(strstr(got, FLAG("acct", "true", "0", "")));

    fl_project_free(p);
}

/* Rolled back or overridden off (effective 0): off for everyone; an
 * override's percentage is what is resolved. */
static void test_flags_json_effective(void **state)
{
    (void) state;
    fl_project_t *p = load(project_json);
    size_t n = fl_project_flag_count(p);
    uint32_t eff[16];
    fl_detail_t r[16];
    size_t len;
    fl_user_t u = body_user("{\"userId\":\"user-2\",\"traits\":{\"plan\":\"pro\"}}");

    for (size_t i = 0; i < n; i++) {
        fl_flag_info_t info;
        fl_project_flag_info(p, i, &info);
        eff[i] = info.rollout_milli;
    }
    eff[1] = 0;                 /* "all" rolled back */
    eff[4] = 0;                 /* "pro-de" overridden off */
    eff[0] = 20000;             /* "plain" at 20 %: user-2 (20316) out */

    char *got = flags_for(p, &u, eff, r, &len);
    assert_non_null(strstr(got, FLAG("all", "false", "0", "")));
    assert_non_null(strstr(got, FLAG("plain", "true", "0", "")));
    assert_non_null(strstr(got, "{\"name\":\"pro-de\",\"enabled\":false,"
                                "\"rolloutPercentage\":0,\"value\":null,"
                                "\"segments\":[{\"segmentId\":\"pro-de\","));
    assert_int_equal(r[1].enabled, 0);
    assert_int_equal(r[4].enabled, 0);

    /* NULL results read as the configured percentages */
    char buf[8192];
    assert_true(fl_sdk_flags_json_bound(p) < sizeof(buf));
    len = fl_sdk_flags_json(p, &u, NULL, buf);
    buf[len] = '\0';
    assert_non_null(strstr(buf, FLAG("all", "true", "100", "")));

    fl_project_free(p);
}

static void test_flags_json_empty(void **state)
{
    (void) state;
    fl_project_t *p = load("{\"flags\":[]}");
    char buf[64];
    fl_user_t u = {NULL, 0, NULL, 0};

    assert_true(fl_sdk_flags_json_bound(p) <= sizeof(buf));
    size_t len = fl_sdk_flags_json(p, &u, NULL, buf);
    assert_int_equal(len, 12);
    assert_memory_equal(buf, "{\"flags\":[]}", 12);

    len = fl_sdk_refresh_json(p, NULL, NULL, buf);
    assert_true(len <= fl_sdk_refresh_json_bound(p));
    assert_memory_equal(buf, "{\"type\":\"flags_refreshed\",\"flags\":[]}", len);
    fl_project_free(p);

    /* no project at all */
    assert_int_equal(fl_sdk_flags_json(NULL, NULL, NULL, buf), 12);
}

static void test_refresh_json(void **state)
{
    (void) state;
    fl_project_t *p = load(project_json);
    fl_detail_t r[16];
    size_t len;
    fl_user_t u = body_user("{\"userId\":\"user-9\",\"traits\":{\"plan\":\"pro\"}}");
    char *flags = flags_for(p, &u, NULL, r, &len);
    char *msg = arena_alloc(NULL, fl_sdk_refresh_json_bound(p));
    size_t mlen = fl_sdk_refresh_json(p, &u, r, msg);
    static const char head[] = "{\"type\":\"flags_refreshed\",\"flags\":";

    assert_true(mlen <= fl_sdk_refresh_json_bound(p));
    assert_int_equal(mlen, sizeof(head) - 1 + len - sizeof("{\"flags\":") + 1);
    assert_memory_equal(msg, head, sizeof(head) - 1);
    /* the same array, then the closing brace */
    assert_memory_equal(msg + sizeof(head) - 1, flags + 9, len - 9);
    fl_project_free(p);
}

/* The bound holds for names and values that escape to six bytes each, and
 * for segments whose every rule is sent. */
static void test_flags_json_bound(void **state)
{
    (void) state;
    char json[16384], val[601], *o = json;
    size_t vlen = 0;

    for (int i = 0; i < 100; i++) {
        memcpy(val + vlen, "\\u0001", 6);
        vlen += 6;
    }
    val[vlen] = '\0';

    o += sprintf(o, "{\"flags\":[{\"name\":\"f\",\"enabled\":true,"
                 "\"rolloutPercentage\":100,\"segments\":[\"s\",\"t\"]}],"
                 "\"segments\":{\"s\":{\"rules\":[");
    for (int i = 0; i < 5; i++) {
        o += sprintf(o, "%s{\"trait\":\"%s%d\",\"op\":\"in\",\"values\":"
                     "[\"%s\",\"a%s\",\"b%s\"]}", i ? "," : "", val, i, val,
                     val, val);
    }
    o += sprintf(o, "]},\"t\":{\"rules\":[{\"trait\":\"x\",\"op\":\"eq\","
                 "\"value\":\"%s\"}]}}}", val);
    fl_project_t *p = load(json);

    char tr[2048];
    snprintf(tr, sizeof(tr), "{\"userId\":\"u\",\"traits\":{\"x\":\"%s\"}}", val);
    fl_user_t u = body_user(tr);
    fl_detail_t r[1];
    size_t len;
    char *got = flags_for(p, &u, NULL, r, &len);
    /* 16 matches of 100 escaped bytes each (600 bytes written) */
    assert_true(len > 16 * 600);
    assert_non_null(strstr(got, "\"segmentId\":\"t\",\"condition\":"
                                "{\"type\":\"match\",\"traitKey\":\"x\""));
    fl_project_free(p);
}


/* ---------------------------------------------- the SDK, over our JSON */

/* The Go SDK's hashKey: the JS string hash over the code points, |h| % 100. */
static int sdk_hash(const char *s)
{
    int32_t h = 0;
    for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
        h = (int32_t) ((uint32_t) h * 31u + *p);
    }
    if (h < 0) {
        h = (int32_t) (0u - (uint32_t) h);
    }
    return (int) ((uint32_t) h % 100u);
}

static const char *sdk_trait(const fl_user_t *u, const char *name)
{
    const fl_trait_t *t = fl_user_trait(u, name, strlen(name));
    /* the SDK's traits are strings: a missing one reads as "" */
    return t ? t->value : "";
}

static int sdk_match(yajl_val cond, const fl_user_t *u)
{
    const char *type_path[] = {"type", NULL};
    const char *cond_path[] = {"conditions", NULL};
    const char *key_path[] = {"traitKey", NULL};
    const char *val_path[] = {"traitValue", NULL};
    const char *type = YAJL_GET_STRING(yajl_tree_get(cond, type_path,
                                                     yajl_t_string));
    yajl_val list = yajl_tree_get(cond, cond_path, yajl_t_array);

    assert_non_null(type);
    if (strcmp(type, "match") == 0) {
        const char *k = YAJL_GET_STRING(yajl_tree_get(cond, key_path,
                                                      yajl_t_string));
        const char *v = YAJL_GET_STRING(yajl_tree_get(cond, val_path,
                                                      yajl_t_string));
        return strcmp(sdk_trait(u, k), v) == 0;
    }
    size_t n = list ? YAJL_GET_ARRAY(list)->len : 0;
    int and = strcmp(type, "and") == 0;
    assert_true(and || strcmp(type, "or") == 0);
    for (size_t i = 0; i < n; i++) {
        int m = sdk_match(YAJL_GET_ARRAY(list)->values[i], u);
        if (and && !m) {
            return 0;
        }
        if (!and && m) {
            return 1;
        }
    }
    return and;
}

static long long num(yajl_val v, const char *name)
{
    const char *path[] = {name, NULL};
    yajl_val n = yajl_tree_get(v, path, yajl_t_number);
    assert_non_null(n);
    assert_true(YAJL_IS_INTEGER(n));
    return YAJL_GET_INTEGER(n);
}

/* deployramp.Flag(): enabled, the first matching segment decides with
 * its percentage, else the flag's own. */
static int sdk_flag(yajl_val f, const char *user_id, const fl_user_t *u)
{
    const char *name_path[] = {"name", NULL};
    const char *en_path[] = {"enabled", NULL};
    const char *seg_path[] = {"segments", NULL};
    const char *id_path[] = {"segmentId", NULL};
    const char *cond_path[] = {"condition", NULL};
    const char *name = YAJL_GET_STRING(yajl_tree_get(f, name_path,
                                                     yajl_t_string));
    yajl_val segs = yajl_tree_get(f, seg_path, yajl_t_array);
    char key[4096];

    if (!YAJL_IS_TRUE(yajl_tree_get(f, en_path, yajl_t_any))) {
        return 0;
    }
    for (size_t i = 0; segs && i < YAJL_GET_ARRAY(segs)->len; i++) {
        yajl_val s = YAJL_GET_ARRAY(segs)->values[i];
        if (sdk_match(yajl_tree_get(s, cond_path, yajl_t_object), u)) {
            snprintf(key, sizeof(key), "%s:%s:%s", name, user_id,
                     YAJL_GET_STRING(yajl_tree_get(s, id_path,
                                                   yajl_t_string)));
            long long pct = num(s, "rolloutPercentage");
            assert_true(pct == 0 || pct == 100);
            return sdk_hash(key) < pct;
        }
    }
    long long pct = num(f, "rolloutPercentage");
    assert_true(pct == 0 || pct == 100);
    if (pct >= 100) {
        return 1;
    }
    if (pct <= 0) {
        return 0;
    }
    snprintf(key, sizeof(key), "%s:%s", name, user_id);
    return sdk_hash(key) < pct;
}

static yajl_val parse_tree(const char *json)
{
    char err[256];
    yajl_val v = yajl_tree_parse(json, err, sizeof(err));
    if (v == NULL) {
        fail_msg("our JSON does not parse: %s\n%s", err, json);
    }
    return v;
}

/* user and traits of one step of the property test */
static fl_user_t make_user(unsigned k, char *uid, size_t uid_size)
{
    static const char *const plans[] = {"pro", "enterprise", "free", "solo",
                                        "Pro", ""};
    static const char *const platforms[] = {"ios", "IOS", "android", NULL};
    char body[512];
    int o;

    snprintf(uid, uid_size, "user-%u", k);
    o = snprintf(body, sizeof(body), "{\"userId\":\"%s\",\"traits\":{", uid);
    const char *sep = "";
    if (k % 7 != 0) {
        o += snprintf(body + o, sizeof(body) - o, "\"plan\":\"%s\"",
                      plans[k % 6]);
        sep = ",";
    }
    if (platforms[k % 4]) {
        o += snprintf(body + o, sizeof(body) - o, "%s\"platform\":\"%s\"",
                      sep, platforms[k % 4]);
        sep = ",";
    }
    if (k % 3 == 0) {
        o += snprintf(body + o, sizeof(body) - o, "%s\"country\":\"de\","
                      "\"n\":%u", sep, k % 20);
        sep = ",";
    }
    if (k % 5 == 0) {
        o += snprintf(body + o, sizeof(body) - o, "%s\"role\":\"st\\\"aff\"",
                      sep);
        sep = ",";
    }
    if (k % 2 == 0) {
        o += snprintf(body + o, sizeof(body) - o, "%s\"accountId\":\"a-%u\"",
                      sep, k / 2);
    }
    snprintf(body + o, sizeof(body) - o, "}}");
    return body_user(body);
}

/* Evaluated by the SDK from our JSON, every flag for every one of 3000
 * users is what fl_evaluate_detail() says, with and without rollbacks. */
static void test_sdk_agrees(void **state)
{
    (void) state;
    fl_project_t *p = load(project_json);
    size_t n = fl_project_flag_count(p);
    uint32_t eff[16];
    fl_detail_t r[16];
    size_t on = 0, off = 0;

    for (size_t i = 0; i < n; i++) {
        fl_flag_info_t info;
        fl_project_flag_info(p, i, &info);
        eff[i] = info.rollout_milli;
    }

    for (unsigned k = 0; k < 3000; k++) {
        char uid[32];
        size_t len;
        fl_user_t u = make_user(k, uid, sizeof(uid));

        if (k == 1500) {
            eff[0] = 0;                 /* plain rolled back */
            eff[5] = 75000;             /* paid overridden to 75 % */
        }
        char *json = flags_for(p, &u, eff, r, &len);
        yajl_val root = parse_tree(json);
        const char *flags_path[] = {"flags", NULL};
        yajl_val flags = yajl_tree_get(root, flags_path, yajl_t_array);

        assert_non_null(flags);
        assert_int_equal(YAJL_GET_ARRAY(flags)->len, n);
        for (size_t i = 0; i < n; i++) {
            int sdk = sdk_flag(YAJL_GET_ARRAY(flags)->values[i], uid, &u);
            if (sdk != r[i].enabled) {
                fail_msg("user %u flag %zu: sdk %d, module %d\n%s", k, i, sdk,
                         r[i].enabled, json);
            }
            sdk ? on++ : off++;
        }
        yajl_tree_free(root);
        arena_reset();
    }
    /* both answers occur plenty */
    assert_true(on > 5000 && off > 5000);
    fl_project_free(p);
}

/* Call-time traits of the SDK on an eq-only segment: the SDK's answer for
 * traits it merges on top is the module's for those traits. */
static void test_sdk_overrides(void **state)
{
    (void) state;
    fl_project_t *p = load(project_json);
    size_t n = fl_project_flag_count(p);
    fl_detail_t r[16], r2[16];
    size_t len;
    fl_user_t sent = body_user("{\"userId\":\"user-3\",\"traits\":{\"plan\":\"free\"}}");
    fl_user_t later = body_user("{\"userId\":\"user-3\",\"traits\":{\"plan\":\"pro\","
                                "\"country\":\"de\"}}");
    char *json = flags_for(p, &sent, NULL, r, &len);
    yajl_val root = parse_tree(json);
    const char *flags_path[] = {"flags", NULL};
    yajl_val flags = yajl_tree_get(root, flags_path, yajl_t_array);

    fl_evaluate_detail(p, &later, NULL, NULL, r2);
    for (size_t i = 0; i < n; i++) {
        /* pro-de (4) and paid (5) are made of eq / in rules only */
        if (i == 4 || i == 5) {
            assert_int_equal(sdk_flag(YAJL_GET_ARRAY(flags)->values[i],
                                      "user-3", &later), r2[i].enabled);
            assert_int_equal(r2[i].enabled, 1);
            assert_int_equal(r[i].enabled, 0);
        }
    }
    yajl_tree_free(root);
    fl_project_free(p);
}


/* ------------------------------------------------ messages of the channel */

static fl_sdk_message_t message(const char *m, fl_status_t want,
    const char *msg)
{
    fl_sdk_message_t out;
    char err[256] = "";
    fl_status_t rc = fl_sdk_parse_message(m, strlen(m), 64, &arena, &out,
                                          err, sizeof(err));

    if (rc != want || strcmp(err, msg) != 0) {
        fail_msg("message %s: got %d \"%s\", want %d \"%s\"", m, rc, err,
                 want, msg);
    }
    return out;
}

static void test_messages(void **state)
{
    (void) state;
    fl_sdk_message_t m = message(
        "{\"type\":\"evaluation_batch\",\"evaluations\":["
        "{\"type\":\"evaluation\",\"flagName\":\"a\",\"result\":true,"
        "\"traits\":{\"plan\":\"free\"},\"userId\":\"u-old\",\"timestamp\":1},"
        "{\"type\":\"evaluation\",\"flagName\":\"b\",\"result\":false,"
        "\"traits\":{\"plan\":\"pro\",\"country\":\"de\"},\"userId\":\"u-1\","
        "\"timestamp\":1700000000000}]}", FL_OK, "");

    assert_int_equal(m.type, FL_SDK_MSG_EVALUATION_BATCH);
    assert_int_equal(m.type_name_len, 16);
    assert_memory_equal(m.type_name, "evaluation_batch", 16);
    assert_int_equal(m.nevents, 2);
    assert_int_equal(m.has_user, 1);
    assert_int_equal(m.user.user_id_len, 3);
    assert_memory_equal(m.user.user_id, "u-1", 3);
    assert_int_equal(m.user.ntraits, 2);
    expect_trait(&m.user, "plan", "pro");
    expect_trait(&m.user, "country", "de");
    assert_int_equal(m.nevals, 2);
    assert_int_equal(m.evals[0].flag_name_len, 1);
    assert_memory_equal(m.evals[0].flag_name, "a", 1);
    assert_int_equal(m.evals[0].result, 1);
    assert_memory_equal(m.evals[1].flag_name, "b", 1);
    assert_int_equal(m.evals[1].result, 0);

    /* elements without a string flagName and a boolean result are skipped */
    m = message("{\"type\":\"evaluation_batch\",\"evaluations\":[7,"
                "{\"flagName\":\"a\",\"result\":1},{\"flagName\":2,\"result\":true},"
                "{\"result\":true},{\"flagName\":\"c\",\"result\":true,"
                "\"userId\":\"u\"}]}", FL_OK, "");
    assert_int_equal(m.nevents, 5);
    assert_int_equal(m.nevals, 1);
    assert_memory_equal(m.evals[0].flag_name, "c", 1);
    assert_int_equal(m.evals[0].result, 1);

    m = message("{\"type\":\"performance_batch\",\"performanceEvents\":["
                "{\"type\":\"performance\",\"flagName\":\"a\","
                "\"durationMs\":1.25,\"branch\":\"enabled\","
                "\"traits\":{},\"userId\":\"u-2\",\"timestamp\":2}]}",
                FL_OK, "");
    assert_int_equal(m.type, FL_SDK_MSG_PERFORMANCE_BATCH);
    assert_int_equal(m.nevents, 1);
    assert_int_equal(m.has_user, 1);
    assert_memory_equal(m.user.user_id, "u-2", 3);
    assert_int_equal(m.user.ntraits, 0);

    /* no events: no user */
    m = message("{\"type\":\"evaluation_batch\",\"evaluations\":[]}", FL_OK, "");
    assert_int_equal(m.type, FL_SDK_MSG_EVALUATION_BATCH);
    assert_int_equal(m.nevents, 0);
    assert_int_equal(m.has_user, 0);
    m = message("{\"type\":\"evaluation_batch\"}", FL_OK, "");
    assert_int_equal(m.has_user, 0);
    m = message("{\"type\":\"evaluation_batch\",\"evaluations\":null}", FL_OK, "");
    assert_int_equal(m.has_user, 0);

    /* unknown types are told apart, with their name */
    m = message("{\"type\":\"performance\",\"x\":[1]}", FL_OK, "");
    assert_int_equal(m.type, FL_SDK_MSG_UNKNOWN);
    assert_int_equal(m.type_name_len, 11);
    assert_memory_equal(m.type_name, "performance", 11);
    assert_int_equal(m.has_user, 0);
    m = message("{\"type\":\"\"}", FL_OK, "");
    assert_int_equal(m.type, FL_SDK_MSG_UNKNOWN);
    assert_int_equal(m.type_name_len, 0);
    m = message("{\"type\":\"flags_refreshed\",\"flags\":[]}", FL_OK, "");
    assert_int_equal(m.type, FL_SDK_MSG_UNKNOWN);
}

static void test_message_errors(void **state)
{
    (void) state;

    message("", FL_ERR_JSON, "message is empty");
    message("[]", FL_ERR_JSON, "message must be a JSON object");
    message("{\"type\":\"\xc0\x80\"}", FL_ERR_JSON,
            "message is not valid UTF-8 (byte 9)");
    message("{\"type\":\"\\udc00\"}", FL_ERR_JSON,
            "message has a lone surrogate escape \\udc00 (byte 9)");
    message("{\"type\":", FL_ERR_JSON,
            "message is not valid JSON: parse error: premature EOF (near byte 8)");
    message("{}", FL_ERR_FIELD, "type is required");
    message("{\"type\":null}", FL_ERR_FIELD, "type is required");
    message("{\"type\":1}", FL_ERR_FIELD, "type must be a string");
    message("{\"type\":\"evaluation_batch\",\"evaluations\":{}}", FL_ERR_FIELD,
            "evaluations must be an array");
    message("{\"type\":\"performance_batch\",\"performanceEvents\":[{},1]}",
            FL_ERR_FIELD, "performanceEvents[1] must be an object");
    message("{\"type\":\"evaluation_batch\",\"evaluations\":[{},{},"
            "{\"userId\":7}]}", FL_ERR_FIELD,
            "evaluations[2].userId must be a string");
    message("{\"type\":\"evaluation_batch\",\"evaluations\":["
            "{\"traits\":{\"a\":[]}}]}", FL_ERR_FIELD,
            "evaluations[0].traits.a must be a string, number, boolean or null");
    message("{\"type\":\"evaluation_batch\",\"evaluations\":["
            "{\"traits\":{\"a\":1,\"b\":2}}]}", FL_OK, "");

    fl_sdk_message_t m;
    const char *three = "{\"type\":\"evaluation_batch\",\"evaluations\":["
                        "{\"traits\":{\"a\":1,\"b\":2,\"c\":3}}]}";
    char err[128];
    assert_int_equal(fl_sdk_parse_message(three, strlen(three), 2, &arena, &m,
                                          err, sizeof(err)), FL_ERR_FIELD);
    assert_string_equal(err, "evaluations[0].more than 2 traits");
    assert_int_equal(m.has_user, 0);
    assert_null(m.user.traits);
    assert_int_equal(fl_sdk_parse_message(three, strlen(three), 2, NULL, &m,
                                          err, sizeof(err)), FL_ERR_INTERNAL);
}


int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_request_body, arena_teardown),
        cmocka_unit_test_teardown(test_request_absent_and_duplicates,
                                  arena_teardown),
        cmocka_unit_test_teardown(test_request_limits, arena_teardown),
        cmocka_unit_test_teardown(test_request_fields, arena_teardown),
        cmocka_unit_test_teardown(test_request_json, arena_teardown),
        cmocka_unit_test_teardown(test_request_no_memory, arena_teardown),
        cmocka_unit_test_teardown(test_flags_json, arena_teardown),
        cmocka_unit_test_teardown(test_flags_json_effective, arena_teardown),
        cmocka_unit_test_teardown(test_flags_json_empty, arena_teardown),
        cmocka_unit_test_teardown(test_refresh_json, arena_teardown),
        cmocka_unit_test_teardown(test_flags_json_bound, arena_teardown),
        cmocka_unit_test_teardown(test_sdk_agrees, arena_teardown),
        cmocka_unit_test_teardown(test_sdk_overrides, arena_teardown),
        cmocka_unit_test_teardown(test_messages, arena_teardown),
        cmocka_unit_test_teardown(test_message_errors, arena_teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
