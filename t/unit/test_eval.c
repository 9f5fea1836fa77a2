/*
 * test_eval.c - evaluation (docs/evaluation.md, docs/flags-file.md): every rule operator, segments,
 * rollout and stickiness, semver ordering, and the /flags JSON answer.
 *
 * Rules are tested through the public API: a one-flag project whose only
 * segment holds the rule under test, evaluated for a caller given as a
 * query string.
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

/* Whether rule (a JSON object) holds for the caller described by query. */
static int rule(const char *rule_json, const char *query)
{
    char json[2048];
    fl_detail_t r;

    snprintf(json, sizeof(json),
        "{\"flags\":[{\"name\":\"f\",\"enabled\":true,"
        "\"rolloutPercentage\":100,\"segments\":[\"s\"]}],"
        "\"segments\":{\"s\":{\"rules\":[%s]}}}", rule_json);
    fl_project_t *p = load(json);
    fl_user_t u = user(query);
    fl_evaluate_detail(p, &u, NULL, NULL, &r);
    fl_project_free(p);
    return r.enabled;
}

/* One row: the rule (a JSON object), the caller (a query string) and
 * whether the rule must hold. */
struct rule_case {
    const char  *rule;
    const char  *query;
    int          want;
};

static void check_rules(const struct rule_case *c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (rule(c[i].rule, c[i].query) != c[i].want) {
            fail_msg("row %zu: rule %s for \"%s\" should be %s", i,
                     c[i].rule, c[i].query, c[i].want ? "true" : "false");
        }
    }
}

/* ----------------------------------------------------- string operators */

static void test_eq_neq(void **state)
{
    (void) state;
    const char *eq = "{\"trait\":\"plan\",\"op\":\"eq\",\"value\":\"pro\"}";
    const char *eqi = "{\"trait\":\"plan\",\"op\":\"eq\",\"value\":\"PrO\","
                      "\"ignoreCase\":true}";
    /* ignoreCase folds ASCII letters only */
    const char *eqe = "{\"trait\":\"c\",\"op\":\"eq\",\"value\":\"\xc3\x89\","
                      "\"ignoreCase\":true}";
    const char *ne = "{\"trait\":\"plan\",\"op\":\"neq\",\"value\":\"pro\"}";
    const char *nei = "{\"trait\":\"plan\",\"op\":\"neq\",\"value\":\"PRO\","
                      "\"ignoreCase\":true}";

    const struct rule_case cases[] = {
        { eq, "trait_plan=pro", 1 },
        { eq, "trait_plan=Pro", 0 },
        { eq, "trait_plan=pro2", 0 },
        { eq, "trait_plan=", 0 },
        { eq, "trait_other=pro", 0 },
        { eqi, "trait_plan=pro", 1 },
        { eqi, "trait_plan=PRO", 1 },
        { eqi, "trait_plan=pr", 0 },
        { eqe, "trait_c=%C3%89", 1 },
        { eqe, "trait_c=%C3%A9", 0 },
        { ne, "trait_plan=pro", 0 },
        { ne, "trait_plan=PRO", 1 },
        { ne, "trait_plan=", 1 },
        { ne, "", 1 },
        { nei, "trait_plan=pro", 0 },
        { nei, "trait_plan=free", 1 },
    };

    check_rules(cases, sizeof(cases) / sizeof(cases[0]));
}

/* "trait": "$userId" tests the caller's id (issue 26): the userId
 * parameter, never a trait that calls itself so */
static void test_user_id(void **state)
{
    (void) state;
    const char *in = "{\"trait\":\"$userId\",\"op\":\"in\","
                     "\"values\":[\"u1\",\"u7\"]}";
    const char *ex = "{\"trait\":\"$userId\",\"op\":\"exists\"}";
    const char *sw = "{\"trait\":\"$userId\",\"op\":\"starts_with\","
                     "\"value\":\"staff-\"}";
    const char *nin = "{\"trait\":\"$userId\",\"op\":\"not_in\","
                      "\"values\":[\"u1\"]}";

    const struct rule_case cases[] = {
        { in, "userId=u1", 1 },
        { in, "userId=u7", 1 },
        { in, "userId=u2", 0 },
        { in, "", 0 },
        /* a trait of that name is not the caller's id */
        { in, "trait_%24userId=u1", 0 },
        { in, "userId=u2&trait_%24userId=u1", 0 },
        { in, "trait_userId=u1", 0 },
        { ex, "userId=x", 1 },
        { ex, "", 0 },
        { sw, "userId=staff-42", 1 },
        { sw, "userId=guest", 0 },
        /* no id: not in any list */
        { nin, "", 1 },
        { nin, "userId=u1", 0 },
        { nin, "userId=u2", 1 },
    };

    check_rules(cases, sizeof(cases) / sizeof(cases[0]));
}

static void test_in_not_in(void **state)
{
    (void) state;
    const char *in = "{\"trait\":\"plan\",\"op\":\"in\","
                     "\"values\":[\"pro\",\"enterprise\",\"a\",\"pro\"]}";
    const char *ini = "{\"trait\":\"plan\",\"op\":\"in\",\"ignoreCase\":true,"
                      "\"values\":[\"Pro\",\"ENTERPRISE\"]}";
    /* bytewise order of the sorted list, beyond ASCII */
    const char *utf = "{\"trait\":\"c\",\"op\":\"in\",\"ignoreCase\":true,"
                      "\"values\":[\"\xc3\xa9t\xc3\xa9\",\"Zz\",\"\x7f\",\"a\"]}";
    const char *empty = "{\"trait\":\"plan\",\"op\":\"in\",\"values\":[]}";
    const char *nin = "{\"trait\":\"plan\",\"op\":\"not_in\","
                      "\"values\":[\"pro\",\"enterprise\"]}";
    const char *nini = "{\"trait\":\"plan\",\"op\":\"not_in\","
                       "\"ignoreCase\":true,\"values\":[\"pro\"]}";

    const struct rule_case cases[] = {
        { in, "trait_plan=pro", 1 },
        { in, "trait_plan=enterprise", 1 },
        { in, "trait_plan=a", 1 },
        { in, "trait_plan=ENTERPRISE", 0 },
        { in, "trait_plan=free", 0 },
        { in, "trait_plan=pr", 0 },
        { in, "trait_plan=", 0 },
        { in, "", 0 },
        { ini, "trait_plan=enterprise", 1 },
        { ini, "trait_plan=PRO", 1 },
        { ini, "trait_plan=free", 0 },
        { utf, "trait_c=%C3%A9T%C3%A9", 1 },
        { utf, "trait_c=zZ", 1 },
        { utf, "trait_c=%7F", 1 },
        { utf, "trait_c=A", 1 },
        { utf, "trait_c=%C3%89t%C3%A9", 0 },
        { utf, "trait_c=b", 0 },
        { empty, "trait_plan=pro", 0 },
        { nin, "trait_plan=pro", 0 },
        { nin, "trait_plan=PRO", 1 },
        { nin, "trait_plan=free", 1 },
        { nin, "", 1 },
        { nini, "trait_plan=PRO", 0 },
        { nini, "trait_plan=free", 1 },
    };

    check_rules(cases, sizeof(cases) / sizeof(cases[0]));
}

static void test_contains_starts_ends(void **state)
{
    (void) state;
    const char *c = "{\"trait\":\"e\",\"op\":\"contains\",\"value\":\"@ex\"}";
    const char *ci = "{\"trait\":\"e\",\"op\":\"contains\",\"value\":\"@EX\","
                     "\"ignoreCase\":true}";
    const char *ce = "{\"trait\":\"e\",\"op\":\"contains\",\"value\":\"\"}";
    const char *s = "{\"trait\":\"v\",\"op\":\"starts_with\",\"value\":\"be\"}";
    const char *si = "{\"trait\":\"v\",\"op\":\"starts_with\",\"value\":\"BE\","
                     "\"ignoreCase\":true}";
    const char *e = "{\"trait\":\"v\",\"op\":\"ends_with\",\"value\":\"ta\"}";
    const char *ei = "{\"trait\":\"v\",\"op\":\"ends_with\",\"value\":\"TA\","
                     "\"ignoreCase\":true}";

    const struct rule_case cases[] = {
        { c, "trait_e=bob%40example.com", 1 },
        { c, "trait_e=%40ex", 1 },
        { c, "trait_e=bob%40EXAMPLE.com", 0 },
        { c, "trait_e=%40e", 0 },
        { c, "", 0 },
        { ci, "trait_e=bob%40example.com", 1 },
        { ci, "trait_e=a%40eX", 1 },
        { ci, "trait_e=bob%40e.com", 0 },
        { ce, "trait_e=", 1 },
        { ce, "", 0 },
        { s, "trait_v=beta", 1 },
        { s, "trait_v=be", 1 },
        { s, "trait_v=b", 0 },
        { s, "trait_v=Beta", 0 },
        { s, "trait_v=abeta", 0 },
        { si, "trait_v=beta", 1 },
        { si, "trait_v=alpha", 0 },
        { e, "trait_v=beta", 1 },
        { e, "trait_v=ta", 1 },
        { e, "trait_v=a", 0 },
        { e, "trait_v=betA", 0 },
        { e, "trait_v=tab", 0 },
        { ei, "trait_v=beta", 1 },
        { ei, "trait_v=betb", 0 },
    };

    check_rules(cases, sizeof(cases) / sizeof(cases[0]));
}

static void test_regex(void **state)
{
    (void) state;
    const char *r = "{\"trait\":\"v\",\"op\":\"regex\",\"value\":\"et\"}";
    const char *a = "{\"trait\":\"v\",\"op\":\"regex\","
                    "\"value\":\"^[0-9]+\\\\.[0-9]+$\"}";
    const char *ri = "{\"trait\":\"v\",\"op\":\"regex\",\"value\":\"^BETA$\","
                     "\"ignoreCase\":true}";
    /* UTF-8 aware; invalid UTF-8 in a value matches nothing but does not
     * stop the search elsewhere */
    const char *u = "{\"trait\":\"v\",\"op\":\"regex\",\"value\":\"^.$\"}";
    const char *ua = "{\"trait\":\"v\",\"op\":\"regex\",\"value\":\"b\"}";
    /* empty value */
    const char *e = "{\"trait\":\"v\",\"op\":\"regex\",\"value\":\"^$\"}";

    const struct rule_case cases[] = {
        { r, "trait_v=beta", 1 }, /* unanchored search */
        { r, "trait_v=bETa", 0 },
        { r, "", 0 },
        { a, "trait_v=10.5", 1 },
        { a, "trait_v=x10.5", 0 },
        { a, "trait_v=10.5x", 0 },
        { ri, "trait_v=beta", 1 },
        { ri, "trait_v=BeTa", 1 },
        { ri, "trait_v=betas", 0 },
        { u, "trait_v=%C3%A9", 1 },
        { u, "trait_v=%FF", 0 },
        { ua, "trait_v=a%FFb", 1 },
        { e, "trait_v=", 1 },
    };

    check_rules(cases, sizeof(cases) / sizeof(cases[0]));
}

/* ---------------------------------------------------- numeric operators */

static void test_numbers(void **state)
{
    (void) state;
    const char *gt = "{\"trait\":\"age\",\"op\":\"gt\",\"value\":10}";
    const char *gte = "{\"trait\":\"age\",\"op\":\"gte\",\"value\":10}";
    const char *lt = "{\"trait\":\"age\",\"op\":\"lt\",\"value\":\"10\"}";
    const char *lte = "{\"trait\":\"age\",\"op\":\"lte\",\"value\":1e1}";
    /* exact decimals: a double would call these equal */
    const char *p3 = "{\"trait\":\"x\",\"op\":\"gt\",\"value\":0.3}";
    const char *big = "{\"trait\":\"x\",\"op\":\"lt\","
                      "\"value\":9007199254740993}";
    /* negative thresholds */
    const char *neg = "{\"trait\":\"x\",\"op\":\"gt\",\"value\":-2.5}";

    const struct rule_case cases[] = {
        { gt, "trait_age=11", 1 },
        { gt, "trait_age=10", 0 },
        { gt, "trait_age=10.001", 1 },
        { gt, "trait_age=9", 0 },
        { gt, "trait_age=1e2", 1 },
        { gt, "trait_age=100000000000000000000000000000", 1 },
        { gte, "trait_age=10", 1 },
        { gte, "trait_age=10.000", 1 },
        { gte, "trait_age=1.0E1", 1 },
        { gte, "trait_age=9.999", 0 },
        { lt, "trait_age=9.999", 1 },
        { lt, "trait_age=-11", 1 },
        { lt, "trait_age=-0", 1 },
        { lt, "trait_age=10", 0 },
        { lte, "trait_age=10", 1 },
        { lte, "trait_age=100e-1", 1 },
        { lte, "trait_age=10.0000000000000000001", 0 },
        { p3, "trait_x=0.30000000000000001", 1 },
        { big, "trait_x=9007199254740992", 1 },
        { neg, "trait_x=-2.4", 1 },
        { neg, "trait_x=0", 1 },
        { neg, "trait_x=-2.5", 0 },
        { neg, "trait_x=-3", 0 },
    };

    check_rules(cases, sizeof(cases) / sizeof(cases[0]));

    /* values that are not JSON numbers: every numeric rule is false */
    static const char *bad[] = {
        "trait_age=abc", "trait_age=01", "trait_age=%2B11", "trait_age=+11",
        "trait_age=%2011", "trait_age=11%20", "trait_age=1e", "trait_age=inf",
        "trait_age=NaN", "trait_age=", "trait_age=0x20", "trait_age=.5",
        "trait_age=11.", "trait_age=-", "trait_age=1e%2B", "trait_age=--1",
        "", NULL
    };
    for (int i = 0; bad[i]; i++) {
        assert_false(rule(gt, bad[i]));
        assert_false(rule(gte, bad[i]));
        assert_false(rule(lt, bad[i]));
        assert_false(rule(lte, bad[i]));
    }
}

/* --------------------------------------------------------------- semver */

static int semver(const char *a, const char *b, int *ok)
{
    return fl_semver_cmp(a, strlen(a), b, strlen(b), ok);
}

static void test_semver_cmp(void **state)
{
    (void) state;
    int ok;
    static const char *chain[] = {
        "0.0.1", "0.9.0", "1.0.0-0", "1.0.0-2", "1.0.0-10", "1.0.0-alpha",
        "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
        "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.2.0", "1.10.0",
        "2.0.0", "10.0.0", "123456789012345678901234567890.0.0", NULL
    };
    for (int i = 0; chain[i]; i++) {
        for (int j = 0; chain[j]; j++) {
            int c = semver(chain[i], chain[j], &ok);
            assert_int_equal(ok, 1);
            if (i < j) assert_true(c < 0);
            if (i == j) assert_int_equal(c, 0);
            if (i > j) assert_true(c > 0);
        }
    }

    /* short forms, v prefix, build metadata ignored */
    assert_int_equal(semver("1", "1.0.0", &ok), 0);
    assert_int_equal(ok, 1);
    assert_int_equal(semver("1.2", "1.2.0", &ok), 0);
    assert_int_equal(semver("v1.2.3", "1.2.3", &ok), 0);
    assert_int_equal(semver("1.2.3+build.5", "1.2.3+other", &ok), 0);
    assert_int_equal(ok, 1);
    assert_true(semver("1.2-rc.1", "1.2.0", &ok) < 0);
    assert_int_equal(ok, 1);
    assert_true(semver("1.0.0-alpha+001", "1.0.0-alpha.1", &ok) < 0);
    assert_true(semver("0", "v0.0.1", &ok) < 0);
    assert_int_equal(ok, 1);

    static const char *bad[] = {
        "", "v", "V1.0.0", "1.", "1.2.", "1.2.3.4", "01.2.3", "1.02.3",
        "1.2.03", "1.2.3-", "1.2.3-01", "1.2.3-a..b", "1.2.3+", "1.2.3+a..b",
        "1.2.3-al_pha", " 1.2.3", "1.2.3 ", "a.b.c", "-1.2.3", "vv1", NULL
    };
    for (int i = 0; bad[i]; i++) {
        ok = 1;
        assert_int_equal(semver(bad[i], "1.0.0", &ok), 0);
        assert_int_equal(ok, 0);
        ok = 1;
        assert_int_equal(semver("1.0.0", bad[i], &ok), 0);
        assert_int_equal(ok, 0);
    }
    /* leading zeros are fine in build metadata, "0" alone is a number */
    assert_int_equal(semver("1.0.0+001", "1.0.0", &ok), 0);
    assert_int_equal(ok, 1);
    assert_int_equal(semver("0.0.0-0", "0.0.0-0", &ok), 0);
    assert_int_equal(ok, 1);
}

static void test_semver_rules(void **state)
{
    (void) state;
    const char *eq = "{\"trait\":\"v\",\"op\":\"semver_eq\",\"value\":\"1.2\"}";
    const char *gt = "{\"trait\":\"v\",\"op\":\"semver_gt\","
                     "\"value\":\"1.0.0-alpha\"}";
    const char *lt = "{\"trait\":\"v\",\"op\":\"semver_lt\","
                     "\"value\":\"v2.0.0\"}";

    const struct rule_case cases[] = {
        { eq, "trait_v=1.2.0", 1 },
        { eq, "trait_v=v1.2.0%2Bbuild", 1 },
        { eq, "trait_v=1.2.1", 0 },
        { eq, "trait_v=1.2.0-rc.1", 0 },
        { gt, "trait_v=1.0.0-alpha.1", 1 },
        { gt, "trait_v=1.0.0-beta", 1 },
        { gt, "trait_v=1.0.0", 1 },
        { gt, "trait_v=1.0.0-alpha", 0 },
        { gt, "trait_v=0.9", 0 },
        { lt, "trait_v=1.99.99", 1 },
        { lt, "trait_v=2.0.0-rc.1", 1 },
        { lt, "trait_v=2", 0 },
        { lt, "trait_v=10.0.0", 0 },
    };

    check_rules(cases, sizeof(cases) / sizeof(cases[0]));

    static const char *bad[] = {
        "trait_v=", "trait_v=latest", "trait_v=1.2.3.4", "trait_v=01.0.0",
        "trait_v=1.0.0-", "", NULL
    };
    for (int i = 0; bad[i]; i++) {
        assert_false(rule(eq, bad[i]));
        assert_false(rule(gt, bad[i]));
        assert_false(rule(lt, bad[i]));
    }
}

/* ------------------------------------------------- exists, missing traits */

static void test_exists(void **state)
{
    (void) state;
    const char *ex = "{\"trait\":\"beta\",\"op\":\"exists\"}";
    const char *nex = "{\"trait\":\"beta\",\"op\":\"not_exists\"}";

    const struct rule_case cases[] = {
        { ex, "trait_beta=1", 1 },
        { ex, "trait_beta=", 1 }, /* empty is present */
        { ex, "trait_beta", 1 },
        { ex, "trait_betas=1", 0 },
        { ex, "userId=u&beta=1", 0 },
        { nex, "trait_beta=", 0 },
        { nex, "trait_bet=1", 1 },
        { nex, "", 1 },
    };

    check_rules(cases, sizeof(cases) / sizeof(cases[0]));
}

static void test_missing_trait(void **state)
{
    (void) state;
    static const struct { const char *rule; int want; } cases[] = {
        {"{\"trait\":\"t\",\"op\":\"eq\",\"value\":\"\"}", 0},
        {"{\"trait\":\"t\",\"op\":\"neq\",\"value\":\"x\"}", 1},
        {"{\"trait\":\"t\",\"op\":\"in\",\"values\":[\"\"]}", 0},
        {"{\"trait\":\"t\",\"op\":\"not_in\",\"values\":[\"x\"]}", 1},
        {"{\"trait\":\"t\",\"op\":\"contains\",\"value\":\"\"}", 0},
        {"{\"trait\":\"t\",\"op\":\"starts_with\",\"value\":\"\"}", 0},
        {"{\"trait\":\"t\",\"op\":\"ends_with\",\"value\":\"\"}", 0},
        {"{\"trait\":\"t\",\"op\":\"regex\",\"value\":\"\"}", 0},
        {"{\"trait\":\"t\",\"op\":\"gt\",\"value\":-1}", 0},
        {"{\"trait\":\"t\",\"op\":\"gte\",\"value\":0}", 0},
        {"{\"trait\":\"t\",\"op\":\"lt\",\"value\":1}", 0},
        {"{\"trait\":\"t\",\"op\":\"lte\",\"value\":0}", 0},
        {"{\"trait\":\"t\",\"op\":\"semver_eq\",\"value\":\"1.0.0\"}", 0},
        {"{\"trait\":\"t\",\"op\":\"semver_gt\",\"value\":\"0.0.0\"}", 0},
        {"{\"trait\":\"t\",\"op\":\"semver_lt\",\"value\":\"9.0.0\"}", 0},
        {"{\"trait\":\"t\",\"op\":\"exists\"}", 0},
        {"{\"trait\":\"t\",\"op\":\"not_exists\"}", 1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(rule(cases[i].rule, "userId=u1&trait_T=x&trait_tt=x"),
                         cases[i].want);
        assert_int_equal(rule(cases[i].rule, ""), cases[i].want);
    }
}

/* ------------------------------------------------------------- segments */

static const char seg_project[] =
    "{\"flags\":["
    " {\"name\":\"any\",\"enabled\":true,\"rolloutPercentage\":100,"
    "  \"segments\":[\"pro\",\"de-beta\"]},"
    " {\"name\":\"all\",\"enabled\":true,\"rolloutPercentage\":100,"
    "  \"segments\":[\"de-beta\"]},"
    " {\"name\":\"everyone\",\"enabled\":true,\"rolloutPercentage\":100,"
    "  \"segments\":[\"empty\"]},"
    " {\"name\":\"none\",\"enabled\":true,\"rolloutPercentage\":100,"
    "  \"segments\":[]},"
    " {\"name\":\"off\",\"enabled\":false,\"rolloutPercentage\":100}"
    "],\"segments\":{"
    " \"pro\":{\"rules\":[{\"trait\":\"plan\",\"op\":\"eq\",\"value\":\"pro\"}]},"
    " \"de-beta\":{\"rules\":["
    "   {\"trait\":\"country\",\"op\":\"eq\",\"value\":\"de\",\"ignoreCase\":true},"
    "   {\"trait\":\"beta\",\"op\":\"exists\"}]},"
    " \"empty\":{\"rules\":[]}"
    "}}";

static void eval_seg(fl_project_t *p, const char *query, int any, int all)
{
    fl_detail_t r[5];
    fl_user_t u = user(query);

    fl_evaluate_detail(p, &u, NULL, NULL, r);
    assert_int_equal(r[0].enabled, any);
    assert_int_equal(r[1].enabled, all);
    assert_int_equal(r[2].enabled, 1);
    assert_int_equal(r[3].enabled, 1);
    assert_int_equal(r[4].enabled, 0);
    assert_int_equal(r[4].rollout_milli, 100000);
}

static void test_segments(void **state)
{
    (void) state;
    fl_project_t *p = load(seg_project);

    eval_seg(p, "", 0, 0);
    eval_seg(p, "trait_plan=pro", 1, 0);
    eval_seg(p, "trait_country=DE", 0, 0);                /* one rule of two */
    eval_seg(p, "trait_country=DE&trait_beta=", 1, 1);    /* both rules */
    eval_seg(p, "trait_plan=pro&trait_country=de&trait_beta=y", 1, 1);
    eval_seg(p, "trait_plan=free&trait_country=fr&trait_beta=y", 0, 0);
    fl_project_free(p);
}

/* -------------------------------------------------------------- rollout */

static const char rollout_project[] =
    "{\"flags\":["
    " {\"name\":\"half\",\"enabled\":true,\"rolloutPercentage\":50},"
    " {\"name\":\"full\",\"enabled\":true,\"rolloutPercentage\":100},"
    " {\"name\":\"zero\",\"enabled\":true,\"rolloutPercentage\":0},"
    " {\"name\":\"sticky\",\"enabled\":true,\"rolloutPercentage\":50,"
    "  \"stickiness\":\"company\"},"
    " {\"name\":\"explicit\",\"enabled\":true,\"rolloutPercentage\":99.999,"
    "  \"stickiness\":\"userId\"}"
    "]}";

static void test_anonymous(void **state)
{
    (void) state;
    fl_project_t *p = load(rollout_project);
    fl_detail_t r[5];
    fl_user_t u = user("trait_plan=pro");

    fl_evaluate_detail(p, &u, NULL, NULL, r);
    assert_int_equal(r[0].enabled, 0);
    assert_int_equal(r[0].rollout_milli, 50000);
    assert_int_equal(r[1].enabled, 1);
    assert_int_equal(r[2].enabled, 0);
    assert_int_equal(r[3].enabled, 0);
    assert_int_equal(r[4].enabled, 0);

    /* a NULL user is anonymous too; "userId=" is no userId */
    fl_evaluate_detail(p, NULL, NULL, NULL, r);
    assert_int_equal(r[0].enabled, 0);
    assert_int_equal(r[1].enabled, 1);
    u = user("userId=");
    fl_evaluate_detail(p, &u, NULL, NULL, r);
    assert_int_equal(r[0].enabled, 0);
    assert_int_equal(r[1].enabled, 1);

    /* p = 0 is off even for a known user */
    u = user("userId=user-1");
    fl_evaluate_detail(p, &u, NULL, NULL, r);
    assert_int_equal(r[2].enabled, 0);
    assert_int_equal(r[1].enabled, 1);
    fl_project_free(p);
}

static void test_rollout_buckets(void **state)
{
    (void) state;
    fl_project_t *p = load(rollout_project);
    fl_detail_t r[5];
    char q[64];
    int on = 0;

    for (int i = 0; i < 2000; i++) {
        int n = snprintf(q, sizeof(q), "user-%d", i);
        fl_user_t u = { q, (size_t) n, NULL, 0 };
        fl_evaluate_detail(p, &u, NULL, NULL, r);
        assert_int_equal(r[0].enabled, fl_bucket("half", 4, q, (size_t) n) < 50000);
        assert_int_equal(r[4].enabled,
                         fl_bucket("explicit", 8, q, (size_t) n) < 99999);
        assert_int_equal(r[3].enabled, 0);      /* no company trait */
        on += r[0].enabled;
    }
    assert_in_range(on, 900, 1100);

    /* the docs/evaluation.md vector: bucket 40631 is in at 40.632 %, out at 40.631 % */
    fl_project_t *q2 = load("{\"flags\":[{\"name\":\"new-checkout\","
                            "\"enabled\":true,\"rolloutPercentage\":40.632}]}");
    fl_user_t u1 = user("userId=user-1");
    fl_evaluate_detail(q2, &u1, NULL, NULL, r);
    assert_int_equal(r[0].enabled, 1);
    uint32_t eff = 40631;
    fl_evaluate_detail(q2, &u1, &eff, NULL, r);
    assert_int_equal(r[0].enabled, 0);
    assert_int_equal(r[0].rollout_milli, 40631);
    fl_project_free(q2);
    fl_project_free(p);
}

static void test_stickiness(void **state)
{
    (void) state;
    fl_project_t *p = load(rollout_project);
    fl_detail_t r[5];
    char q[128];
    int on = 0;

    for (int i = 0; i < 500; i++) {
        char company[32];
        int n = snprintf(company, sizeof(company), "acme-%d", i);
        uint32_t b = fl_bucket("sticky", 6, company, (size_t) n);

        /* the userId does not matter, only the company */
        snprintf(q, sizeof(q), "userId=a&trait_company=%s", company);
        fl_user_t u = user(q);
        fl_evaluate_detail(p, &u, NULL, NULL, r);
        assert_int_equal(r[3].enabled, b < 50000);
        snprintf(q, sizeof(q), "userId=zzz-%d&trait_company=%s", i, company);
        u = user(q);
        fl_evaluate_detail(p, &u, NULL, NULL, r);
        assert_int_equal(r[3].enabled, b < 50000);
        on += r[3].enabled;
    }
    assert_in_range(on, 200, 300);

    /* an empty stickiness value is no key */
    fl_user_t u = user("trait_company=");
    fl_evaluate_detail(p, &u, NULL, NULL, r);
    assert_int_equal(r[3].enabled, 0);
    fl_project_free(p);
}

/* Raising the percentage only adds users. */
static void test_monotonic(void **state)
{
    (void) state;
    static const uint32_t pcts[] = {
        0, 1, 999, 1000, 10000, 12345, 25000, 33333, 50000, 75500, 99999,
        100000
    };
    enum { NP = sizeof(pcts) / sizeof(pcts[0]) };
    fl_project_t *p = load("{\"flags\":[{\"name\":\"mono\",\"enabled\":true,"
                           "\"rolloutPercentage\":100}]}");
    unsigned counts[NP] = {0};
    char id[16];

    for (int i = 0; i < 100000; i++) {
        int n = snprintf(id, sizeof(id), "u%d", i);
        fl_user_t u = { id, (size_t) n, NULL, 0 };
        int prev = 0;
        for (int k = 0; k < NP; k++) {
            fl_detail_t r;
            fl_evaluate_detail(p, &u, &pcts[k], NULL, &r);
            assert_int_equal(r.rollout_milli, pcts[k]);
            if (prev) {
                assert_int_equal(r.enabled, 1);
            }
            prev = r.enabled;
            counts[k] += r.enabled;
        }
    }
    assert_int_equal(counts[0], 0);
    assert_int_equal(counts[NP - 1], 100000);
    assert_in_range(counts[8], 49000, 51000);
    assert_in_range(counts[5], 11845, 12845);
    fl_project_free(p);
}

/* ------------------------------------------------------- effective, JSON */

static const char json_project[] =
    "{\"flags\":["
    " {\"name\":\"new-checkout\",\"enabled\":true,\"rolloutPercentage\":25,"
    "  \"segments\":[\"beta\",\"q\\\"uote\"]},"
    " {\"name\":\"dark-mode\",\"enabled\":false,\"rolloutPercentage\":12.5},"
    " {\"name\":\"all\",\"enabled\":true,\"rolloutPercentage\":100,"
    "  \"extra\":{\"ignored\":[1,2]}}"
    "],\"segments\":{\"beta\":{\"rules\":[]},\"q\\\"uote\":{\"rules\":[]}}}";

static void test_flags_json(void **state)
{
    (void) state;
    fl_project_t *p = load(json_project);
    fl_detail_t r[3];
    fl_user_t u = user("userId=user-1");
    char *buf = malloc(fl_flags_json_bound(p));

    fl_evaluate_detail(p, &u, NULL, NULL, r);
    size_t n = fl_flags_json(p, r, buf);
    assert_true(n <= fl_flags_json_bound(p));
    buf[n] = '\0';
    /* bucket(new-checkout, user-1) = 40631: outside 25 % */
    assert_string_equal(buf,
        "{\"flags\":["
        "{\"name\":\"new-checkout\",\"enabled\":false,\"rolloutPercentage\":25,"
        "\"segments\":[\"beta\",\"q\\\"uote\"]},"
        "{\"name\":\"dark-mode\",\"enabled\":false,\"rolloutPercentage\":12.5,"
        "\"segments\":[]},"
        "{\"name\":\"all\",\"enabled\":true,\"rolloutPercentage\":100,"
        "\"segments\":[]}]}");

    /* effective percentages: rolled back (0), override, kept */
    uint32_t eff[3] = { 50000, 33333, 0 };
    fl_evaluate_detail(p, &u, eff, NULL, r);
    assert_int_equal(r[0].enabled, 1);
    assert_int_equal(r[1].enabled, 0);      /* killed in the file */
    assert_int_equal(r[2].enabled, 0);
    n = fl_flags_json(p, r, buf);
    buf[n] = '\0';
    assert_string_equal(buf,
        "{\"flags\":["
        "{\"name\":\"new-checkout\",\"enabled\":true,\"rolloutPercentage\":50,"
        "\"segments\":[\"beta\",\"q\\\"uote\"]},"
        "{\"name\":\"dark-mode\",\"enabled\":false,\"rolloutPercentage\":33.333,"
        "\"segments\":[]},"
        "{\"name\":\"all\",\"enabled\":false,\"rolloutPercentage\":0,"
        "\"segments\":[]}]}");
    free(buf);
    fl_project_free(p);

    /* no flags */
    p = load("{\"flags\":[]}");
    char small[64];
    assert_true(fl_flags_json_bound(p) <= sizeof(small));
    n = fl_flags_json(p, r, small);
    small[n] = '\0';
    assert_string_equal(small, "{\"flags\":[]}");
    fl_project_free(p);
}

/* Long names are written whole. */
static void test_flags_json_long_names(void **state)
{
    (void) state;
    char name[129], seg[129], json[1024], want[1024];
    memset(name, 'n', 128);
    name[128] = '\0';
    memset(seg, 's', 128);
    seg[128] = '\0';
    snprintf(json, sizeof(json), "{\"flags\":[{\"name\":\"%s\",\"enabled\":"
             "true,\"rolloutPercentage\":100,\"segments\":[\"%s\"]}],"
             "\"segments\":{\"%s\":{\"rules\":[]}}}", name, seg, seg);
    fl_project_t *p = load(json);
    fl_detail_t r;
    char buf[1024];

    fl_evaluate_detail(p, NULL, NULL, NULL, &r);
    assert_true(fl_flags_json_bound(p) <= sizeof(buf));
    size_t n = fl_flags_json(p, &r, buf);
    buf[n] = '\0';
    snprintf(want, sizeof(want), "{\"flags\":[{\"name\":\"%s\",\"enabled\":"
             "true,\"rolloutPercentage\":100,\"segments\":[\"%s\"]}]}",
             name, seg);
    assert_string_equal(buf, want);
    fl_project_free(p);
}

/* The bound holds for the longest possible answer. */
static void test_flags_json_bound(void **state)
{
    (void) state;
    fl_project_t *p = load(
        "{\"flags\":[{\"name\":\"a\",\"enabled\":true,\"rolloutPercentage\":1,"
        "\"segments\":[\"\\u0001\\u0002\"]},"
        "{\"name\":\"b\",\"enabled\":true,\"rolloutPercentage\":1}],"
        "\"segments\":{\"\\u0001\\u0002\":{\"rules\":[]}}}");
    fl_detail_t r[2] = { { .enabled = 0, .rollout_milli = 99999 },
                         { .enabled = 0, .rollout_milli = 12345 } };
    char buf[512];
    size_t n = fl_flags_json(p, r, buf);

    assert_true(n <= fl_flags_json_bound(p));
    buf[n] = '\0';
    assert_string_equal(buf,
        "{\"flags\":[{\"name\":\"a\",\"enabled\":false,"
        "\"rolloutPercentage\":99.999,\"segments\":[\"\\u0001\\u0002\"]},"
        "{\"name\":\"b\",\"enabled\":false,\"rolloutPercentage\":12.345,"
        "\"segments\":[]}]}");
    fl_project_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_eq_neq, arena_teardown),
        cmocka_unit_test_teardown(test_user_id, arena_teardown),
        cmocka_unit_test_teardown(test_in_not_in, arena_teardown),
        cmocka_unit_test_teardown(test_contains_starts_ends, arena_teardown),
        cmocka_unit_test_teardown(test_regex, arena_teardown),
        cmocka_unit_test_teardown(test_numbers, arena_teardown),
        cmocka_unit_test_teardown(test_semver_cmp, arena_teardown),
        cmocka_unit_test_teardown(test_semver_rules, arena_teardown),
        cmocka_unit_test_teardown(test_exists, arena_teardown),
        cmocka_unit_test_teardown(test_missing_trait, arena_teardown),
        cmocka_unit_test_teardown(test_segments, arena_teardown),
        cmocka_unit_test_teardown(test_anonymous, arena_teardown),
        cmocka_unit_test_teardown(test_rollout_buckets, arena_teardown),
        cmocka_unit_test_teardown(test_stickiness, arena_teardown),
        cmocka_unit_test_teardown(test_monotonic, arena_teardown),
        cmocka_unit_test_teardown(test_flags_json, arena_teardown),
        cmocka_unit_test_teardown(test_flags_json_long_names, arena_teardown),
        cmocka_unit_test_teardown(test_flags_json_bound, arena_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
