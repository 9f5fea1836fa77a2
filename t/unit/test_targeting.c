/*
 * test_targeting.c - a flag's "rules" and "targets" (docs/flags-file.md,
 * docs/evaluation.md): the order rules are tried in, each rule's own
 * percentage on the flag's one bucket, the fallthrough, named users
 * against the kill switch, a rollback and an override, OFREP's reasons,
 * the answers (GET /flags, the SDK's, flags_status) and the loader's
 * errors.  Expected values come from fl_bucket() (the published bucket)
 * and from the rules of the docs written out here, not from the
 * evaluator.
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
#include "unit_project.h"

/* The loader's error for json, "" when it loads. */
static const char *load_error(const char *json)
{
    static char err[512];
    fl_project_t *p = NULL;

    err[0] = '\0';
    if (fl_project_load_buffer(json, strlen(json), "t.json", &p, err,
                               sizeof(err)) == FL_OK)
    {
        fl_project_free(p);
        return "";
    }
    return err;
}

static int in_bucket(const char *flag, const char *id, uint32_t milli)
{
    if (milli >= FL_MILLI_MAX) {
        return 1;
    }
    return fl_bucket(flag, strlen(flag), id, strlen(id)) < milli;
}

/* One flag (index i) for the caller of query, with its switch. */
static fl_detail_t eval1(fl_project_t *p, size_t i, const char *query,
    uint32_t eff, uint8_t sw)
{
    fl_detail_t d;
    fl_user_t u = user(query);

    assert_int_equal(fl_evaluate_flag_detail(p, i, &u, eff, sw, &d), 0);
    return d;
}

#define SEGMENTS \
    "\"segments\":{" \
    " \"staff\":{\"rules\":[{\"trait\":\"$userId\",\"op\":\"in\"," \
    "                        \"values\":[\"u1\",\"u7\"]}]}," \
    " \"pro\":{\"rules\":[{\"trait\":\"plan\",\"op\":\"eq\",\"value\":\"pro\"}]}," \
    " \"de\":{\"rules\":[{\"trait\":\"country\",\"op\":\"eq\",\"value\":\"de\"}]}}"


/* Staff plus 10 %: u1 and u7 always, everyone else by the bucket. */
static void test_staff_plus_ten(void **state)
{
    (void) state;
    fl_project_t *p = load(
        "{\"flags\":[{\"name\":\"rel\",\"enabled\":true,"
        "\"rolloutPercentage\":10,"
        "\"rules\":[{\"segments\":[\"staff\"],\"rolloutPercentage\":100}]}],"
        SEGMENTS "}");
    char q[64], id[32];
    int on = 0;

    assert_int_equal(eval1(p, 0, "userId=u1", 10000, 0).enabled, 1);
    assert_int_equal(eval1(p, 0, "userId=u7", 10000, 0).enabled, 1);
    /* the published bucket of u1 for "rel" is above 10 %, or the line
     * above would prove nothing */
    assert_true(fl_bucket("rel", 3, "u1", 2) >= 10000
                || fl_bucket("rel", 3, "u7", 2) >= 10000);

    for (int n = 0; n < 5000; n++) {
        snprintf(id, sizeof(id), "user-%d", n);
        snprintf(q, sizeof(q), "userId=%s", id);
        fl_detail_t d = eval1(p, 0, q, 10000, 0);
        assert_int_equal(d.enabled, in_bucket("rel", id, 10000));
        assert_int_equal(d.rule, 0);
        on += d.enabled;
        arena_reset();
    }
    /* about 10 % of 5,000 */
    assert_in_range(on, 400, 600);

    /* no id: the fallthrough strictly between 0 and 100 is off */
    assert_int_equal(eval1(p, 0, "", 10000, 0).enabled, 0);
    fl_project_free(p);
}

/* The first rule that matches decides, even when a later one would say
 * otherwise; a rule naming several segments matches on any of them. */
static void test_order(void **state)
{
    (void) state;
    fl_project_t *p = load(
        "{\"flags\":["
        "{\"name\":\"a\",\"enabled\":true,\"rolloutPercentage\":0,"
        " \"rules\":[{\"segments\":[\"pro\"],\"rolloutPercentage\":0},"
        "            {\"segments\":[\"pro\"],\"rolloutPercentage\":100}]},"
        "{\"name\":\"b\",\"enabled\":true,\"rolloutPercentage\":0,"
        " \"rules\":[{\"segments\":[\"pro\"],\"rolloutPercentage\":100},"
        "            {\"segments\":[\"pro\"],\"rolloutPercentage\":0}]},"
        "{\"name\":\"c\",\"enabled\":true,\"rolloutPercentage\":0,"
        " \"rules\":[{\"segments\":[\"de\",\"pro\"],\"rolloutPercentage\":100},"
        "            {\"segments\":[],\"rolloutPercentage\":0}]}],"
        SEGMENTS "}");
    fl_detail_t d;

    d = eval1(p, 0, "userId=x&trait_plan=pro", 0, 0);
    assert_int_equal(d.enabled, 0);
    assert_int_equal(d.rule, 1);
    d = eval1(p, 1, "userId=x&trait_plan=pro", 0, 0);
    assert_int_equal(d.enabled, 1);
    assert_int_equal(d.rule, 1);
    d = eval1(p, 1, "userId=x&trait_plan=free", 0, 0);
    assert_int_equal(d.enabled, 0);
    assert_int_equal(d.rule, 0);

    d = eval1(p, 2, "userId=x&trait_country=de", 0, 0);
    assert_int_equal(d.enabled, 1);
    assert_int_equal(d.rule, 1);
    d = eval1(p, 2, "userId=x&trait_plan=pro", 0, 0);
    assert_int_equal(d.enabled, 1);
    d = eval1(p, 2, "userId=x", 0, 0);
    /* "segments": [] matches everyone: the second rule, at 0 % */
    assert_int_equal(d.enabled, 0);
    assert_int_equal(d.rule, 2);
    assert_int_equal(d.reason, FL_REASON_TARGETING_MATCH);
    fl_project_free(p);
}

/* Raising a rule's or the fallthrough's percentage never turns a user
 * off: one bucket a flag and user, whichever percentage applies. */
static void test_monotone(void **state)
{
    (void) state;
    static const char *const pct[] = { "0", "5", "12.5", "50", "99.999",
                                       "100" };
    size_t npct = sizeof(pct) / sizeof(pct[0]);
    char json[1024], q[64];

    for (size_t a = 0; a < npct; a++) {
        fl_project_t *lo, *hi;
        size_t b = a + 1 < npct ? a + 1 : a;

        snprintf(json, sizeof(json),
            "{\"flags\":[{\"name\":\"m\",\"enabled\":true,"
            "\"rolloutPercentage\":%s,"
            "\"rules\":[{\"segments\":[\"pro\"],\"rolloutPercentage\":%s}]}],"
            SEGMENTS "}", pct[a], pct[a]);
        lo = load(json);
        snprintf(json, sizeof(json),
            "{\"flags\":[{\"name\":\"m\",\"enabled\":true,"
            "\"rolloutPercentage\":%s,"
            "\"rules\":[{\"segments\":[\"pro\"],\"rolloutPercentage\":%s}]}],"
            SEGMENTS "}", pct[b], pct[b]);
        hi = load(json);

        for (int n = 0; n < 2000; n++) {
            fl_user_t u;
            fl_detail_t dl, dh;

            snprintf(q, sizeof(q), "userId=w%d%s", n,
                     n % 2 ? "&trait_plan=pro" : "");
            u = user(q);
            fl_evaluate_detail(lo, &u, NULL, NULL, &dl);
            fl_evaluate_detail(hi, &u, NULL, NULL, &dh);
            if (dl.enabled && !dh.enabled) {
                fail_msg("%s turned off from %s %% to %s %%", q, pct[a],
                         pct[b]);
            }
            arena_reset();
        }
        fl_project_free(lo);
        fl_project_free(hi);
    }
}

/* Named users before any rule; the kill switch, a rollback and an
 * override still win. */
static void test_targets(void **state)
{
    (void) state;
    fl_project_t *p = load(
        "{\"flags\":[{\"name\":\"t\",\"enabled\":true,"
        "\"rolloutPercentage\":0,"
        "\"rules\":[{\"segments\":[\"pro\"],\"rolloutPercentage\":100},"
        "           {\"segments\":[\"de\"],\"rolloutPercentage\":0}],"
        "\"targets\":{\"on\":[\"n1\",\"n2\",\"n1\"],\"off\":[\"x9\"]}},"
        "{\"name\":\"t-off\",\"enabled\":false,\"rolloutPercentage\":100,"
        "\"targets\":{\"on\":[\"n1\"]}}],"
        SEGMENTS "}");
    fl_detail_t d;

    /* on at a fallthrough of 0 and against a rule at 0 % */
    d = eval1(p, 0, "userId=n1", 0, 0);
    assert_int_equal(d.enabled, 1);
    assert_int_equal(d.targeted, 1);
    assert_int_equal(d.reason, FL_REASON_TARGETING_MATCH);
    assert_int_equal(eval1(p, 0, "userId=n2&trait_country=de", 0, 0).enabled,
                     1);
    /* off against a rule at 100 % */
    d = eval1(p, 0, "userId=x9&trait_plan=pro", 0, 0);
    assert_int_equal(d.enabled, 0);
    assert_int_equal(d.targeted, 1);
    assert_int_equal(d.rule, 0);
    /* anyone else goes through the rules */
    d = eval1(p, 0, "userId=x8&trait_plan=pro", 0, 0);
    assert_int_equal(d.enabled, 1);
    assert_int_equal(d.targeted, 0);
    /* a trait is not the id, nor is an id differing in case */
    assert_int_equal(eval1(p, 0, "trait_userId=n1", 0, 0).enabled, 0);
    assert_int_equal(eval1(p, 0, "userId=N1", 0, 0).enabled, 0);

    /* "enabled": false in the file */
    d = eval1(p, 1, "userId=n1", 100000, 0);
    assert_int_equal(d.enabled, 0);
    assert_int_equal(d.reason, FL_REASON_DISABLED);
    /* a rollback, an override off */
    d = eval1(p, 0, "userId=n1", 0, FL_SWITCH_ROLLED_BACK);
    assert_int_equal(d.enabled, 0);
    assert_int_equal(d.targeted, 0);
    assert_int_equal(d.rolled_back, 1);
    assert_int_equal(d.reason, FL_REASON_DISABLED);
    d = eval1(p, 0, "userId=n1", 0, FL_SWITCH_OVERRIDE_OFF);
    assert_int_equal(d.enabled, 0);
    assert_int_equal(d.reason, FL_REASON_DISABLED);
    /* an override's percentage replaces every percentage and sets the
     * named users aside: 0 % turns n1 off, 100 % turns x9 on */
    d = eval1(p, 0, "userId=n1", 0, FL_SWITCH_OVERRIDE_PERCENT);
    assert_int_equal(d.enabled, 0);
    assert_int_equal(d.reason, FL_REASON_STATIC);
    d = eval1(p, 0, "userId=x9&trait_plan=pro", 100000,
              FL_SWITCH_OVERRIDE_PERCENT);
    assert_int_equal(d.enabled, 1);
    assert_int_equal(d.targeted, 0);
    assert_int_equal(d.rule, 0);
    assert_int_equal(d.reason, FL_REASON_STATIC);
    d = eval1(p, 0, "userId=x8&trait_country=de", 100000,
              FL_SWITCH_OVERRIDE_PERCENT);
    assert_int_equal(d.enabled, 1);
    /* a ramp's stage (an effective percentage without a switch) replaces
     * the fallthrough only: named users and rules keep theirs */
    assert_int_equal(eval1(p, 0, "userId=x9", 100000, 0).enabled, 0);
    assert_int_equal(eval1(p, 0, "userId=x8&trait_country=de", 100000, 0)
                     .enabled, 0);
    assert_int_equal(eval1(p, 0, "userId=x8", 100000, 0).enabled, 1);
    fl_project_free(p);
}

/* Named users on a flag without rules: the one implicit rule (its
 * segments, its percentage) for everybody else, as before. */
static void test_targets_without_rules(void **state)
{
    (void) state;
    fl_project_t *p = load(
        "{\"flags\":[{\"name\":\"s\",\"enabled\":true,"
        "\"rolloutPercentage\":100,\"segments\":[\"pro\"],"
        "\"targets\":{\"on\":[\"n1\"],\"off\":[\"x9\"]}}]," SEGMENTS "}");
    fl_detail_t d;

    assert_int_equal(eval1(p, 0, "userId=n1", 100000, 0).enabled, 1);
    assert_int_equal(eval1(p, 0, "userId=x9&trait_plan=pro", 100000, 0)
                     .enabled, 0);
    d = eval1(p, 0, "userId=a&trait_plan=pro", 100000, 0);
    assert_int_equal(d.enabled, 1);
    assert_int_equal(d.has_segments, 1);
    assert_int_equal(d.segment_matched, 1);
    assert_int_equal(d.reason, FL_REASON_TARGETING_MATCH);
    d = eval1(p, 0, "userId=a", 100000, 0);
    assert_int_equal(d.enabled, 0);
    assert_int_equal(d.segment_matched, 0);
    /* an override's percentage: the segments still gate, n1 aside */
    assert_int_equal(eval1(p, 0, "userId=n1", 100000,
                           FL_SWITCH_OVERRIDE_PERCENT).enabled, 0);
    fl_project_free(p);
}

/* OFREP's reasons for a flag with rules: a rule at 100 % or 0 % is a
 * targeting match, a rule or a fallthrough strictly between is a split,
 * the fallthrough at 0 or 100 % is the default. */
static void test_reasons(void **state)
{
    (void) state;
    fl_project_t *p = load(
        "{\"flags\":[{\"name\":\"r\",\"enabled\":true,"
        "\"rolloutPercentage\":0,"
        "\"rules\":[{\"segments\":[\"staff\"],\"rolloutPercentage\":100},"
        "           {\"segments\":[\"pro\"],\"rolloutPercentage\":50},"
        "           {\"segments\":[\"de\"],\"rolloutPercentage\":0}]}],"
        SEGMENTS "}");
    fl_detail_t d;

    d = eval1(p, 0, "userId=u1", 0, 0);
    assert_int_equal(d.reason, FL_REASON_TARGETING_MATCH);
    assert_int_equal(d.enabled, 1);
    assert_int_equal(d.rule, 1);
    assert_int_equal(d.has_segments, 0);

    d = eval1(p, 0, "userId=user-1&trait_plan=pro", 0, 0);
    assert_int_equal(d.reason, FL_REASON_SPLIT);
    assert_int_equal(d.rule, 2);
    assert_int_equal(d.enabled, in_bucket("r", "user-1", 50000));

    d = eval1(p, 0, "userId=user-1&trait_country=de", 0, 0);
    assert_int_equal(d.reason, FL_REASON_TARGETING_MATCH);
    assert_int_equal(d.rule, 3);
    assert_int_equal(d.enabled, 0);

    d = eval1(p, 0, "userId=user-1", 0, 0);
    assert_int_equal(d.reason, FL_REASON_DEFAULT);
    assert_int_equal(d.rule, 0);
    assert_int_equal(d.enabled, 0);
    d = eval1(p, 0, "userId=user-1", 100000, 0);
    assert_int_equal(d.reason, FL_REASON_DEFAULT);
    assert_int_equal(d.enabled, 1);
    d = eval1(p, 0, "userId=user-1", 25000, 0);
    assert_int_equal(d.reason, FL_REASON_SPLIT);
    assert_int_equal(d.enabled, in_bucket("r", "user-1", 25000));
    d = eval1(p, 0, "userId=user-1", 25000, FL_SWITCH_OVERRIDE_PERCENT);
    assert_int_equal(d.reason, FL_REASON_SPLIT);
    assert_int_equal(d.rule, 0);
    fl_project_free(p);

    /* named users without rules or segments: the flag's percentage is
     * the fallthrough; with segments, they are the one rule */
    p = load("{\"flags\":[{\"name\":\"n\",\"enabled\":true,"
             "\"rolloutPercentage\":0,\"targets\":{\"on\":[\"n1\"]}},"
             "{\"name\":\"m\",\"enabled\":true,\"rolloutPercentage\":40,"
             "\"segments\":[\"pro\"],\"targets\":{\"on\":[\"n1\"]}}],"
             SEGMENTS "}");
    assert_int_equal(eval1(p, 0, "userId=a", 0, 0).reason, FL_REASON_DEFAULT);
    assert_int_equal(eval1(p, 0, "userId=a", 100000, 0).reason,
                     FL_REASON_DEFAULT);
    assert_int_equal(eval1(p, 0, "userId=a", 500, 0).reason, FL_REASON_SPLIT);
    assert_int_equal(eval1(p, 0, "userId=n1", 0, 0).reason,
                     FL_REASON_TARGETING_MATCH);
    assert_int_equal(eval1(p, 1, "userId=a", 40000, 0).reason,
                     FL_REASON_TARGETING_MATCH);
    assert_int_equal(eval1(p, 1, "userId=a&trait_plan=pro", 40000, 0).reason,
                     FL_REASON_SPLIT);
    assert_int_equal(eval1(p, 1, "userId=a&trait_plan=pro", 100000, 0).reason,
                     FL_REASON_TARGETING_MATCH);
    fl_project_free(p);
}

/* GET /flags: the fallthrough's percentage and every segment the rules
 * name, in order, once; the OFREP answer's metadata. */
static void test_answers(void **state)
{
    (void) state;
    fl_project_t *p = load(
        "{\"flags\":[{\"name\":\"g\",\"enabled\":true,"
        "\"rolloutPercentage\":10,"
        "\"rules\":[{\"segments\":[\"pro\",\"staff\"],\"rolloutPercentage\":100},"
        "           {\"segments\":[\"staff\",\"de\"],\"rolloutPercentage\":0},"
        "           {\"segments\":[],\"rolloutPercentage\":5}],"
        "\"targets\":{\"on\":[\"n1\"],\"off\":[\"x9\",\"x8\"]}}]," SEGMENTS "}");
    fl_detail_t d[1];
    fl_user_t u = user("userId=u1");
    char buf[1024];
    size_t n;

    fl_evaluate_values(p, &u, NULL, NULL, d);
    assert_true(fl_flags_json_bound(p) < sizeof(buf));
    n = fl_flags_json(p, d, buf);
    buf[n] = '\0';
    assert_string_equal(buf,
        "{\"flags\":[{\"name\":\"g\",\"enabled\":true,\"rolloutPercentage\":10,"
        "\"segments\":[\"pro\",\"staff\",\"de\"]}]}");

    /* flags_status's targeting: the rules and the counts of named users */
    assert_true(fl_project_flag_targeting_json_bound(p, 0) < sizeof(buf));
    n = fl_project_flag_targeting_json(p, 0, buf);
    buf[n] = '\0';
    assert_string_equal(buf,
        ",\"rules\":[{\"segments\":[\"pro\",\"staff\"],\"rolloutPercentage\":100},"
        "{\"segments\":[\"staff\",\"de\"],\"rolloutPercentage\":0},"
        "{\"segments\":[],\"rolloutPercentage\":5}],"
        "\"targets\":{\"on\":1,\"off\":2}");
    fl_project_free(p);

    p = load("{\"flags\":[{\"name\":\"plain\",\"enabled\":true,"
             "\"rolloutPercentage\":10}]}");
    assert_int_equal(fl_project_flag_targeting_json_bound(p, 0), 0);
    assert_int_equal(fl_project_flag_targeting_json(p, 0, buf), 0);
    fl_project_free(p);
}

/* The SDK's definitions of a flag with rules, for three POSTs. */
static void test_sdk(void **state)
{
    (void) state;
    fl_project_t *p = load(
        "{\"flags\":[{\"name\":\"k\",\"enabled\":true,"
        "\"rolloutPercentage\":0,"
        "\"rules\":[{\"segments\":[\"pro\"],\"rolloutPercentage\":100},"
        "           {\"segments\":[],\"rolloutPercentage\":0}],"
        "\"targets\":{\"on\":[\"n1\"]}}]," SEGMENTS "}");
    fl_detail_t d[1];
    char buf[2048];
    size_t n;
    fl_user_t u;

    assert_true(fl_sdk_flags_json_bound(p) < sizeof(buf));

    u = user("userId=n1");
    fl_evaluate_values(p, &u, NULL, NULL, d);
    n = fl_sdk_flags_json(p, &u, d, buf);
    buf[n] = '\0';
    assert_string_equal(buf,
        "{\"flags\":[{\"name\":\"k\",\"enabled\":true,\"rolloutPercentage\":100,"
        "\"value\":null,\"segments\":[],\"stickyAssignments\":[]}]}");

    u = user("userId=a");
    fl_evaluate_values(p, &u, NULL, NULL, d);
    n = fl_sdk_flags_json(p, &u, d, buf);
    buf[n] = '\0';
    assert_string_equal(buf,
        "{\"flags\":[{\"name\":\"k\",\"enabled\":true,\"rolloutPercentage\":0,"
        "\"value\":null,\"segments\":["
        "{\"segmentId\":\"pro\",\"condition\":{\"type\":\"match\","
        "\"traitKey\":\"plan\",\"traitValue\":\"pro\"},\"rolloutPercentage\":100,"
        "\"sticky\":false},"
        "{\"segmentId\":\"rules[1]\",\"condition\":{\"type\":\"and\","
        "\"conditions\":[]},\"rolloutPercentage\":0,\"sticky\":false}],"
        "\"stickyAssignments\":[]}]}");

    /* rolled back: off for everyone, named users too */
    uint8_t sw = FL_SWITCH_ROLLED_BACK;
    uint32_t eff = 0;
    u = user("userId=n1");
    fl_evaluate_values(p, &u, &eff, &sw, d);
    n = fl_sdk_flags_json(p, &u, d, buf);
    buf[n] = '\0';
    assert_string_equal(buf,
        "{\"flags\":[{\"name\":\"k\",\"enabled\":false,\"rolloutPercentage\":0,"
        "\"value\":null,\"segments\":[],\"stickyAssignments\":[]}]}");
    fl_project_free(p);
}

/* The definition hash: a flag without rules or targets keeps the hash
 * it had; the order of named users does not count; a percentage does. */
static void test_definition_hash(void **state)
{
    (void) state;
    fl_flag_info_t a, b;
    fl_project_t *p1 = load(
        "{\"flags\":[{\"name\":\"h\",\"enabled\":true,\"rolloutPercentage\":5,"
        "\"targets\":{\"on\":[\"a\",\"b\"],\"off\":[\"c\"]}}]}");
    fl_project_t *p2 = load(
        "{\"flags\":[{\"name\":\"h\",\"enabled\":true,\"rolloutPercentage\":5,"
        "\"targets\":{\"off\":[\"c\"],\"on\":[\"b\",\"a\",\"b\"]}}]}");
    fl_project_t *p3 = load(
        "{\"flags\":[{\"name\":\"h\",\"enabled\":true,\"rolloutPercentage\":5,"
        "\"targets\":{\"on\":[\"a\"],\"off\":[\"c\",\"b\"]}}]}");
    fl_project_t *p4 = load(
        "{\"flags\":[{\"name\":\"h\",\"enabled\":true,\"rolloutPercentage\":5}]}");
    fl_project_t *p5 = load(
        "{\"flags\":[{\"name\":\"h\",\"enabled\":true,\"rolloutPercentage\":5,"
        "\"rules\":[{\"segments\":[],\"rolloutPercentage\":5}]}]}");
    fl_project_t *p6 = load(
        "{\"flags\":[{\"name\":\"h\",\"enabled\":true,\"rolloutPercentage\":5,"
        "\"rules\":[{\"segments\":[],\"rolloutPercentage\":6}]}]}");

    fl_project_flag_info(p1, 0, &a);
    fl_project_flag_info(p2, 0, &b);
    assert_true(a.def_hash == b.def_hash);
    fl_project_flag_info(p3, 0, &b);
    assert_true(a.def_hash != b.def_hash);
    fl_project_flag_info(p4, 0, &b);
    assert_true(a.def_hash != b.def_hash);
    fl_project_flag_info(p5, 0, &a);
    assert_true(a.def_hash != b.def_hash);
    fl_project_flag_info(p6, 0, &b);
    assert_true(a.def_hash != b.def_hash);

    fl_project_free(p1);
    fl_project_free(p2);
    fl_project_free(p3);
    fl_project_free(p4);
    fl_project_free(p5);
    fl_project_free(p6);
}

/* 10,000 named users are all found and no one else is; 10,001 are
 * refused. */
static void test_many_targets(void **state)
{
    (void) state;
    size_t cap = 200 * 1024;
    char *json = malloc(cap);
    size_t o;
    char q[64];

    assert_non_null(json);
    o = (size_t) snprintf(json, cap,
        "{\"flags\":[{\"name\":\"big\",\"enabled\":true,"
        "\"rolloutPercentage\":0,\"targets\":{\"on\":[");
    for (int n = 0; n < 10000; n++) {
        o += (size_t) snprintf(json + o, cap - o, "%s\"id-%d\"",
                               n ? "," : "", n);
    }
    snprintf(json + o, cap - o, "]}}]}");

    fl_project_t *p = load(json);
    for (int n = 0; n < 10000; n++) {
        snprintf(q, sizeof(q), "userId=id-%d", n);
        assert_int_equal(eval1(p, 0, q, 0, 0).enabled, 1);
        snprintf(q, sizeof(q), "userId=id-%d", n + 10000);
        assert_int_equal(eval1(p, 0, q, 0, 0).enabled, 0);
        arena_reset();
    }
    fl_project_free(p);

    snprintf(json + o, cap - o, ",\"one-more\"]}}]}");
    assert_string_equal(load_error(json),
        "t.json: flag \"big\": more than 10000 named users in \"targets\"");
    free(json);
}

struct error_case {
    const char  *flag;      /* the flag's members after its name */
    const char  *error;     /* after "t.json: flag \"e\": " */
};

static void test_errors(void **state)
{
    (void) state;
    static const struct error_case cases[] = {
        { "\"segments\":[\"pro\"],\"rules\":[]",
          "\"rules\" and \"segments\" cannot both be given (a rule names "
          "its own segments)" },
        { "\"rules\":{}", "\"rules\" must be an array of objects" },
        { "\"rules\":[1]", "\"rules\" must be an array of objects" },
        { "\"rules\":[{\"segments\":[],\"rolloutPercentage\":1},"
          "{\"segments\":\"pro\",\"rolloutPercentage\":1}]",
          "rules[1]: \"segments\" must be an array of strings" },
        { "\"rules\":[{\"rolloutPercentage\":1}]",
          "rules[0]: \"segments\" is missing" },
        { "\"rules\":[{\"segments\":[],\"rolloutPercentage\":1},"
          "{\"segments\":[\"nope\"],\"rolloutPercentage\":1}]",
          "rules[1]: unknown segment \"nope\"" },
        { "\"rules\":[{\"segments\":[]}]",
          "rules[0]: \"rolloutPercentage\" is missing" },
        { "\"rules\":[{\"segments\":[],\"rolloutPercentage\":\"5\"}]",
          "rules[0]: \"rolloutPercentage\" must be a number" },
        { "\"rules\":[{\"segments\":[],\"rolloutPercentage\":100.5}]",
          "rules[0]: \"rolloutPercentage\" must be between 0 and 100" },
        { "\"rules\":[{\"segments\":[],\"rolloutPercentage\":-1}]",
          "rules[0]: \"rolloutPercentage\" must be between 0 and 100" },
        { "\"rules\":[{\"segments\":[],\"rolloutPercentage\":1.0001}]",
          "rules[0]: \"rolloutPercentage\" has more than 3 decimals" },
        { "\"targets\":[]",
          "\"targets\" must be an object with \"on\" and \"off\" lists of "
          "user ids" },
        { "\"targets\":{\"on\":\"u1\"}",
          "\"targets\" must be an object with \"on\" and \"off\" lists of "
          "user ids" },
        { "\"targets\":{\"on\":[\"u1\",\"u2\",7]}",
          "targets.on[2]: a user id must be a non-empty string of at most "
          "1024 bytes" },
        { "\"targets\":{\"off\":[\"\"]}",
          "targets.off[0]: a user id must be a non-empty string of at most "
          "1024 bytes" },
        { "\"targets\":{\"on\":[\"u1\"],\"off\":[\"u2\",\"u1\"]}",
          "user \"u1\" is in both targets.on and targets.off" },
    };
    char json[1024], want[512];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(json, sizeof(json),
                 "{\"flags\":[{\"name\":\"ok\",\"enabled\":true,"
                 "\"rolloutPercentage\":1},{\"name\":\"e\",\"enabled\":true,"
                 "\"rolloutPercentage\":1,%s}]," SEGMENTS "}", cases[i].flag);
        snprintf(want, sizeof(want), "t.json: flag \"e\": %s",
                 cases[i].error);
        assert_string_equal(load_error(json), want);
    }

    /* 1,001 rules */
    size_t cap = 64 * 1024, o;
    char *big = malloc(cap);
    assert_non_null(big);
    o = (size_t) snprintf(big, cap, "{\"flags\":[{\"name\":\"e\","
                          "\"enabled\":true,\"rolloutPercentage\":1,"
                          "\"rules\":[");
    for (int n = 0; n < 1001; n++) {
        o += (size_t) snprintf(big + o, cap - o,
                               "%s{\"segments\":[],\"rolloutPercentage\":1}",
                               n ? "," : "");
    }
    snprintf(big + o, cap - o, "]}]}");
    assert_string_equal(load_error(big),
                        "t.json: flag \"e\": more than 1000 rules");
    free(big);

    /* an id of 1024 bytes is a user, 1025 is not */
    char id[1100];
    memset(id, 'i', 1025);
    id[1024] = '\0';
    snprintf(json, sizeof(json), "{\"flags\":[{\"name\":\"e\","
             "\"enabled\":true,\"rolloutPercentage\":1,"
             "\"targets\":{\"on\":[\"");
    size_t jl = strlen(json);
    char *j2 = malloc(4096);
    assert_non_null(j2);
    snprintf(j2, 4096, "%s%s\"]}}]}", json, id);
    assert_string_equal(load_error(j2), "");
    id[1024] = 'i';
    id[1025] = '\0';
    snprintf(j2, 4096, "%s%s\"]}}]}", json, id);
    assert_string_equal(load_error(j2),
        "t.json: flag \"e\": targets.on[0]: a user id must be a non-empty "
        "string of at most 1024 bytes");
    (void) jl;
    free(j2);

    /* unknown members of a rule are warned about, not refused */
    fl_project_t *p = load(
        "{\"flags\":[{\"name\":\"w\",\"enabled\":true,\"rolloutPercentage\":1,"
        "\"rules\":[{\"segments\":[],\"rolloutPercentage\":1,\"weight\":3}]}]}");
    assert_int_equal(fl_project_warning_count(p), 1);
    assert_string_equal(fl_project_warning(p, 0),
        "t.json: flag \"w\": rules[0]: unknown field \"weight\" ignored");
    fl_project_free(p);
}

/* GET /flags' ETag: on a flag with rules an override's percentage and a
 * ramp's stage at the same percentage give different bodies, so different
 * ETags; on a flag without, the switch is not in the ETag (as before). */
static void test_flags_etag(void **state)
{
    (void) state;
    fl_project_t *p = load(
        "{\"flags\":[{\"name\":\"r\",\"enabled\":true,"
        "\"rolloutPercentage\":10,"
        "\"rules\":[{\"segments\":[\"staff\"],\"rolloutPercentage\":100}]},"
        "{\"name\":\"plain\",\"enabled\":true,\"rolloutPercentage\":10}],"
        SEGMENTS "}");
    fl_user_t u = user("userId=u1");
    uint32_t eff[2] = { 50000, 50000 };
    uint8_t ramp[2] = { FL_SWITCH_NONE, FL_SWITCH_NONE };
    uint8_t ovr_r[2] = { FL_SWITCH_OVERRIDE_PERCENT, FL_SWITCH_NONE };
    uint8_t ovr_p[2] = { FL_SWITCH_NONE, FL_SWITCH_OVERRIDE_PERCENT };
    uint8_t rb[2] = { FL_SWITCH_NONE, FL_SWITCH_ROLLED_BACK };
    fl_detail_t a[2], b[2];

    /* the bodies differ: u1 is staff (on) unless the override sets the
     * rules aside */
    fl_evaluate_values(p, &u, eff, ramp, a);
    fl_evaluate_values(p, &u, eff, ovr_r, b);
    assert_int_equal(a[0].enabled, 1);
    assert_int_equal(b[0].enabled, in_bucket("r", "u1", 50000));
    assert_true(fl_flags_etag(p, &u, eff, ramp)
                != fl_flags_etag(p, &u, eff, ovr_r));
    assert_true(fl_flags_etag(p, &u, eff, ramp)
                == fl_answer_etag(p, &u, eff, NULL));
    assert_true(fl_flags_etag(p, &u, eff, ovr_p)
                == fl_answer_etag(p, &u, eff, NULL));
    assert_true(fl_flags_etag(p, &u, eff, rb)
                == fl_answer_etag(p, &u, eff, NULL));

    /* in two steps, the same */
    fl_etag_prefix_t pre;
    fl_flags_etag_prefix(p, eff, ovr_r, &pre);
    assert_true(fl_flags_etag_from(&pre, &u)
                == fl_flags_etag(p, &u, eff, ovr_r));
    fl_flags_etag_prefix(p, NULL, NULL, &pre);
    assert_true(fl_flags_etag_from(&pre, NULL)
                == fl_answer_etag(p, NULL, NULL, NULL));
    fl_project_free(p);
}

/* Many flags evaluate with the caller's id mixed once (rollout.hpp,
 * KeyMix): every bucket must still be fl_bucket()'s, for names of every
 * length mod 4 and keys of every length around the limits (3, 4, 64,
 * 65 bytes: the premixed path and the plain one). */
static void test_premixed_buckets(void **state)
{
    (void) state;
    char json[8192], name[16], key[128], q[160];
    size_t o;

    /* 12 flags named f, f1, f12, ... (lengths 1 to 12) at 50 % */
    o = (size_t) snprintf(json, sizeof(json), "{\"flags\":[");
    for (int i = 0; i < 12; i++) {
        for (int j = 0; j <= i; j++) {
            name[j] = (char) (j == 0 ? 'f' : '0' + j % 10);
        }
        name[i + 1] = '\0';
        o += (size_t) snprintf(json + o, sizeof(json) - o,
                               "%s{\"name\":\"%s\",\"enabled\":true,"
                               "\"rolloutPercentage\":50}", i ? "," : "",
                               name);
    }
    snprintf(json + o, sizeof(json) - o, "]}");
    fl_project_t *p = load(json);
    fl_detail_t d[12];

    for (size_t len = 1; len <= 70; len++) {
        for (int v = 0; v < 20; v++) {
            for (size_t k = 0; k < len; k++) {
                key[k] = (char) ('a' + (k * 7 + (size_t) v * 13) % 26);
            }
            key[len] = '\0';
            snprintf(q, sizeof(q), "userId=%s", key);
            fl_user_t u = user(q);
            fl_evaluate_values(p, &u, NULL, NULL, d);
            for (int i = 0; i < 12; i++) {
                for (int j = 0; j <= i; j++) {
                    name[j] = (char) (j == 0 ? 'f' : '0' + j % 10);
                }
                name[i + 1] = '\0';
                if (d[i].enabled != in_bucket(name, key, 50000)) {
                    fail_msg("flag %s, key %s: %d", name, key, d[i].enabled);
                }
            }
            arena_reset();
        }
    }
    fl_project_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_staff_plus_ten),
        cmocka_unit_test(test_order),
        cmocka_unit_test(test_monotone),
        cmocka_unit_test(test_targets),
        cmocka_unit_test(test_targets_without_rules),
        cmocka_unit_test(test_reasons),
        cmocka_unit_test(test_answers),
        cmocka_unit_test(test_sdk),
        cmocka_unit_test(test_definition_hash),
        cmocka_unit_test(test_many_targets),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_flags_etag),
        cmocka_unit_test(test_premixed_buckets),
    };
    return cmocka_run_group_tests(tests, NULL, arena_teardown);
}
