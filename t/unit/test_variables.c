/*
 * test_variables.c - the core rules behind $flag_NAME and flags_context
 * (docs/variables.md): variable names, lookups, collisions, and the caller
 * built from configured values.
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

static fl_project_t *load(const char *json)
{
    fl_project_t *p = NULL;
    if (fl_project_load_buffer(json, strlen(json), "t.json", &p, err,
                               sizeof(err)) != FL_OK)
    {
        fail_msg("%s", err);
    }
    return p;
}

#define FLAG(n) "{\"name\":\"" n "\",\"enabled\":true,\"rolloutPercentage\":100}"

static void test_var_name(void **state)
{
    (void) state;
    char out[64];
    const char *n = "New-Checkout.v2:EU_x9";
    size_t len = fl_flag_var_name(n, strlen(n), out);
    assert_int_equal(len, strlen(n));
    assert_memory_equal(out, "new_checkout_v2_eu_x9", len);
}

static void test_find_var(void **state)
{
    (void) state;
    fl_project_t *p = load("{\"flags\":[" FLAG("plain") "," FLAG("new-checkout")
                           "," FLAG("Beta.UI") "]}");
    assert_int_equal(fl_project_find_var(p, "plain", 5), 0);
    assert_int_equal(fl_project_find_var(p, "new_checkout", 12), 1);
    assert_int_equal(fl_project_find_var(p, "beta_ui", 7), 2);
    assert_int_equal(fl_project_find_var(p, "BETA_UI", 7), 2);
    assert_int_equal(fl_project_find_var(p, "new-checkout", 12), 1);
    assert_int_equal(fl_project_find_var(p, "new_checkou", 11), -1);
    assert_int_equal(fl_project_find_var(p, "", 0), -1);

    size_t a = 99, b = 99;
    assert_int_equal(fl_project_var_collision(p, &a, &b), 0);
    fl_project_free(p);

    p = load("{\"flags\":[" FLAG("x") "," FLAG("a-b") "," FLAG("y") ","
             FLAG("A:b") "," FLAG("a.b") "]}");
    assert_int_equal(fl_project_var_collision(p, &a, &b), 1);
    assert_int_equal(a, 1);
    assert_int_equal(b, 3);
    fl_project_free(p);
}

static void test_user_from_values(void **state)
{
    (void) state;
    fl_user_t u;
    fl_trait_t t[3] = {
        { "plan", 4, "pro", 3 },
        { "country", 7, "", 0 },            /* empty: absent */
        { "app", 3, "2.1.0", 5 },
    };

    assert_int_equal(fl_user_from_values("alice", 5, t, 3, 64, &arena, &u,
                                         err, sizeof(err)), FL_OK);
    assert_int_equal(u.user_id_len, 5);
    assert_memory_equal(u.user_id, "alice", 5);
    assert_int_equal(u.ntraits, 2);
    assert_memory_equal(u.traits[0].name, "app", 3);    /* sorted */
    assert_memory_equal(u.traits[1].name, "plan", 4);
    assert_null(fl_user_trait(&u, "country", 7));

    /* empty userId: none */
    assert_int_equal(fl_user_from_values("", 0, NULL, 0, 64, &arena, &u,
                                         err, sizeof(err)), FL_OK);
    assert_null(u.user_id);
    assert_int_equal(u.ntraits, 0);

    /* the limits of fl_parse_query() */
    static char big[FL_MAX_VALUE_LEN + 1];
    memset(big, 'a', sizeof(big));
    assert_int_equal(fl_user_from_values(big, FL_MAX_VALUE_LEN, NULL, 0, 64,
                                         &arena, &u, err, sizeof(err)), FL_OK);
    assert_int_equal(fl_user_from_values(big, sizeof(big), NULL, 0, 64,
                                         &arena, &u, err, sizeof(err)),
                     FL_ERR_QUERY);
    assert_string_equal(err, "userId is longer than 1024 bytes");
    assert_null(u.user_id);

    fl_trait_t tb = { "plan", 4, big, sizeof(big) };
    assert_int_equal(fl_user_from_values("u", 1, &tb, 1, 64, &arena, &u,
                                         err, sizeof(err)), FL_ERR_QUERY);
    assert_string_equal(err, "trait \"plan\" is longer than 1024 bytes");

    assert_int_equal(fl_user_from_values("a\0b", 3, NULL, 0, 64, &arena, &u,
                                         err, sizeof(err)), FL_ERR_QUERY);
    assert_string_equal(err, "a NUL byte in userId");

    assert_int_equal(fl_user_from_values("u", 1, t, 3, 1, &arena, &u,
                                         err, sizeof(err)), FL_ERR_QUERY);
    assert_string_equal(err, "more than 1 traits");

    fl_trait_t dup[2] = { { "p", 1, "x", 1 }, { "p", 1, "y", 1 } };
    assert_int_equal(fl_user_from_values("u", 1, dup, 2, 64, &arena, &u,
                                         err, sizeof(err)), FL_ERR_QUERY);
    assert_string_equal(err, "trait \"p\" is given twice");

    arena_allocs_left = 0;
    assert_int_equal(fl_user_from_values("u", 1, t, 3, 64, &arena, &u,
                                         err, sizeof(err)), FL_ERR_NOMEM);
    arena_allocs_left = SIZE_MAX;
    arena_reset();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_var_name),
        cmocka_unit_test(test_find_var),
        cmocka_unit_test(test_user_from_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
