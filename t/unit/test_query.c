/*
 * test_query.c - decoding the caller from the query string (docs/evaluation.md).
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

static fl_status_t parse(const char *q, size_t max, fl_user_t *u)
{
    err[0] = '\0';
    return fl_parse_query(q, strlen(q), max, &arena, u, err, sizeof(err));
}

static fl_user_t ok(const char *q)
{
    fl_user_t u;
    if (parse(q, 64, &u) != FL_OK) {
        fail_msg("\"%s\": %s", q, err);
    }
    return u;
}

static void bad(const char *q, size_t max, const char *msg)
{
    fl_user_t u;
    assert_int_equal(parse(q, max, &u), FL_ERR_QUERY);
    assert_string_equal(err, msg);
    assert_null(u.user_id);
    assert_null(u.traits);
    assert_int_equal(u.ntraits, 0);
}

static void expect_trait(const fl_user_t *u, const char *name,
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

static void expect_user(const fl_user_t *u, const char *id)
{
    if (id == NULL) {
        assert_null(u->user_id);
        assert_int_equal(u->user_id_len, 0);
        return;
    }
    assert_non_null(u->user_id);
    assert_int_equal(u->user_id_len, strlen(id));
    assert_memory_equal(u->user_id, id, u->user_id_len);
}

/* ---------------------------------------------------------------- tests */

static void test_basic(void **state)
{
    (void) state;
    fl_user_t u = ok("");
    expect_user(&u, NULL);
    assert_int_equal(u.ntraits, 0);

    assert_int_equal(fl_parse_query(NULL, 0, 64, &arena, &u, err,
                                    sizeof(err)), FL_OK);
    assert_int_equal(u.ntraits, 0);

    u = ok("userId=user-1&trait_plan=pro&trait_country=DE&other=1");
    expect_user(&u, "user-1");
    assert_int_equal(u.ntraits, 2);
    expect_trait(&u, "plan", "pro");
    expect_trait(&u, "country", "DE");
    expect_trait(&u, "other", NULL);
    expect_trait(&u, "Plan", NULL);

    /* separators, missing '=', '=' in a value, empty names */
    u = ok("&&trait_beta&=x&trait_a=b=c&&");
    expect_user(&u, NULL);
    assert_int_equal(u.ntraits, 2);
    expect_trait(&u, "beta", "");
    expect_trait(&u, "a", "b=c");

    /* names are case-sensitive; unknown parameters are ignored */
    u = ok("userid=x&USERID=y&Trait_a=1&trait_A=2&trait_a=3");
    expect_user(&u, NULL);
    assert_int_equal(u.ntraits, 2);
    expect_trait(&u, "A", "2");
    expect_trait(&u, "a", "3");
}

static void test_decoding(void **state)
{
    (void) state;
    fl_user_t u = ok("userId=a+b%20c&trait_email=bob%2Bx%40example.com"
                     "&trait_plus=%2b&trait_sp=+&trait_e=%c3%A9");
    expect_user(&u, "a b c");
    expect_trait(&u, "email", "bob+x@example.com");
    expect_trait(&u, "plus", "+");
    expect_trait(&u, "sp", " ");
    expect_trait(&u, "e", "\xc3\xa9");

    /* names are decoded before they are recognized */
    u = ok("%75serId=u1&trait%5Fplan=pro&trait_na%6De=x&trait_a+b=1"
           "&trait_%26=amp&trait_%3D=eq");
    expect_user(&u, "u1");
    expect_trait(&u, "plan", "pro");
    expect_trait(&u, "name", "x");
    expect_trait(&u, "a b", "1");
    expect_trait(&u, "&", "amp");
    expect_trait(&u, "=", "eq");

    /* a decoded escape is not decoded again */
    u = ok("trait_a=%2541");
    expect_trait(&u, "a", "%41");
}

static void test_malformed(void **state)
{
    (void) state;
    static const char *cases[] = {
        "trait_a=%zz", "trait_a=%", "trait_a=%4", "trait_a=%4g", "%",
        "userId=%g0", "trait_%=1", "other=%2", "x%=1", "trait_a=50%", NULL
    };
    for (int i = 0; cases[i]; i++) {
        bad(cases[i], 64, "malformed percent-encoding in the query");
    }
    bad("trait_a=a%00b", 64, "a NUL byte (%00) in the query");
    bad("userId=%00", 64, "a NUL byte (%00) in the query");
    bad("trait_%00=1", 64, "a NUL byte (%00) in the query");

    /* a raw NUL byte inside the given length */
    fl_user_t u;
    assert_int_equal(fl_parse_query("trait_a=x\0y", 11, 64, &arena, &u, err,
                                    sizeof(err)), FL_ERR_QUERY);
    assert_string_equal(err, "a NUL byte (%00) in the query");
}

static void test_last_wins(void **state)
{
    (void) state;
    fl_user_t u = ok("userId=a&userId=b");
    expect_user(&u, "b");
    u = ok("userId=a&userId=");
    expect_user(&u, NULL);
    u = ok("userId=&userId=c");
    expect_user(&u, "c");
    u = ok("userId");
    expect_user(&u, NULL);

    u = ok("trait_x=1&trait_y=2&trait_x=3&trait_x=");
    assert_int_equal(u.ntraits, 2);
    expect_trait(&u, "x", "");
    expect_trait(&u, "y", "2");

    /* a repeated trait counts once */
    fl_user_t v;
    assert_int_equal(parse("trait_a=1&trait_a=2&trait_b=1&trait_a=3", 2, &v),
                     FL_OK);
    assert_int_equal(v.ntraits, 2);
    expect_trait(&v, "a", "3");
}

static void test_empty_trait_name(void **state)
{
    (void) state;
    bad("trait_=x", 64, "a trait name is empty (\"trait_\" alone)");
    bad("trait_", 64, "a trait name is empty (\"trait_\" alone)");
    bad("trait%5F=x", 64, "a trait name is empty (\"trait_\" alone)");
    /* "trait" without the underscore is just another parameter */
    fl_user_t u = ok("trait=x");
    assert_int_equal(u.ntraits, 0);
}

static void test_limits(void **state)
{
    (void) state;
    enum { BIG = 4 * 1024 };
    char *q = malloc(BIG * 3 + 64);
    fl_user_t u;

    /* userId: 1024 bytes after decoding are fine, 1025 are not */
    strcpy(q, "userId=");
    for (int i = 0; i < 1024; i++) strcat(q, "%41");
    u = ok(q);
    assert_int_equal(u.user_id_len, 1024);
    assert_int_equal(u.user_id[1023], 'A');
    strcat(q, "B");
    bad(q, 64, "userId is longer than 1024 bytes");

    /* trait values */
    strcpy(q, "trait_plan=");
    memset(q + 11, 'v', 1024);
    q[11 + 1024] = '\0';
    u = ok(q);
    assert_int_equal(u.ntraits, 1);
    assert_int_equal(fl_user_trait(&u, "plan", 4)->value_len, 1024);
    strcat(q, "v");
    bad(q, 64, "trait \"plan\" is longer than 1024 bytes");

    /* an unprintable name is not echoed */
    strcpy(q, "trait_a%0A=");
    memset(q + 11, 'v', 1025);
    q[11 + 1025] = '\0';
    bad(q, 64, "a trait value is longer than 1024 bytes");

    /* trait names: 128 bytes after decoding */
    strcpy(q, "trait_");
    memset(q + 6, 'n', 128);
    strcpy(q + 6 + 128, "=x");
    u = ok(q);
    assert_int_equal(u.ntraits, 1);
    assert_int_equal(u.traits[0].name_len, 128);
    strcpy(q, "trait_");
    memset(q + 6, 'n', 129);
    strcpy(q + 6 + 129, "=x");
    bad(q, 64, "a trait name is longer than 128 bytes");

    free(q);
}

static void test_max_traits(void **state)
{
    (void) state;
    fl_user_t u;

    assert_int_equal(parse("trait_a=1&trait_b=2", 2, &u), FL_OK);
    bad("trait_a=1&trait_b=2&trait_c=3", 2, "more than 2 traits");
    bad("trait_a=1", 0, "more than 0 traits");
    assert_int_equal(parse("userId=x&other=1", 0, &u), FL_OK);
}

/* Sorted bytewise by name, unique; found by binary search. */
static void test_sorted(void **state)
{
    (void) state;
    fl_user_t u = ok("trait_b=1&trait_a=2&trait_B=3&trait_aa=4&trait_%C3%A9=5"
                     "&trait_a%20=6&trait_0=7&trait_a=8");
    static const char *order[] = { "0", "B", "a", "a ", "aa", "b",
                                   "\xc3\xa9" };
    assert_int_equal(u.ntraits, 7);
    for (size_t i = 0; i < 7; i++) {
        assert_int_equal(u.traits[i].name_len, strlen(order[i]));
        assert_memory_equal(u.traits[i].name, order[i], u.traits[i].name_len);
        assert_ptr_equal(fl_user_trait(&u, order[i], strlen(order[i])),
                         &u.traits[i]);
    }
    expect_trait(&u, "a", "8");
    expect_trait(&u, "", NULL);
    expect_trait(&u, "ab", NULL);
    assert_null(fl_user_trait(NULL, "a", 1));
}

/* A trait is found by its exact name, whatever its length: for each
 * length 1 to 40, a name that differs from the caller's trait in any one
 * byte (first, middle, last: the words the comparison reads overlap
 * there) or by one byte more or less is not it.  And names are sorted by
 * unsigned bytes whether they differ in the first byte or later. */
static void test_lookup_every_length(void **state)
{
    (void) state;
    char q[128], name[48], probe[48];

    for (size_t n = 1; n <= 40; n++) {
        for (size_t i = 0; i < n; i++) {
            name[i] = (char) ('a' + (i * 7) % 26);
        }
        name[n] = '\0';
        snprintf(q, sizeof(q), "trait_%s=v&trait_zz=w", name);
        fl_user_t u = ok(q);
        expect_trait(&u, name, "v");

        for (size_t i = 0; i < n; i++) {
            memcpy(probe, name, n + 1);
            probe[i] = (char) (probe[i] == 'A' ? 'B' : 'A');
            assert_null(fl_user_trait(&u, probe, n));
        }
        memcpy(probe, name, n + 1);
        assert_null(fl_user_trait(&u, probe, n - 1 == 0 ? 0 : n - 1));
        probe[n] = 'x';
        assert_null(fl_user_trait(&u, probe, n + 1));
    }

    fl_user_t u = ok("trait_%E9=1&trait_b=2&trait_%80a=3&trait_%80=4&trait_ab=5");
    static const char *order[] = { "ab", "b", "\x80", "\x80" "a", "\xe9" };
    assert_int_equal(u.ntraits, 5);
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(u.traits[i].name_len, strlen(order[i]));
        assert_memory_equal(u.traits[i].name, order[i], u.traits[i].name_len);
    }
}

/* 10,000 traits: refused quickly with the default limit, accepted and
 * correctly indexed with a large one. */
static void test_many_traits(void **state)
{
    (void) state;
    enum { N = 10000 };
    char *q = malloc(N * 32);
    size_t len = 0;
    fl_user_t u;

    for (int i = N - 1; i >= 0; i--) {
        len += (size_t) sprintf(q + len, "%strait_t%d=v%d", len ? "&" : "", i, i);
    }
    bad(q, 64, "more than 64 traits");

    assert_int_equal(parse(q, N, &u), FL_OK);
    assert_int_equal(u.ntraits, N);
    for (size_t i = 1; i < u.ntraits; i++) {
        const fl_trait_t *a = &u.traits[i - 1], *b = &u.traits[i];
        size_t n = a->name_len < b->name_len ? a->name_len : b->name_len;
        int c = memcmp(a->name, b->name, n);
        assert_true(c < 0 || (c == 0 && a->name_len < b->name_len));
    }
    for (int i = 0; i < N; i += 97) {
        char name[16], value[16];
        sprintf(name, "t%d", i);
        sprintf(value, "v%d", i);
        expect_trait(&u, name, value);
    }

    /* 10,000 times the same trait is one trait */
    len = 0;
    for (int i = 0; i < N; i++) {
        len += (size_t) sprintf(q + len, "%strait_same=%d", len ? "&" : "", i);
    }
    assert_int_equal(parse(q, 1, &u), FL_OK);
    assert_int_equal(u.ntraits, 1);
    expect_trait(&u, "same", "9999");
    free(q);
}

static void *no_alloc(void *ctx, size_t size)
{
    (void) ctx;
    (void) size;
    return NULL;
}

static void test_no_memory(void **state)
{
    (void) state;
    fl_alloc_t none = { no_alloc, NULL };
    fl_user_t u;

    /* a value to decode needs memory */
    u.user_id = NULL;
    assert_int_equal(fl_parse_query("userId=a%20b", 12, 64, &none, &u, err,
                                    sizeof(err)), FL_ERR_NOMEM);
    assert_null(u.user_id);
    /* so do traits, plain or not */
    assert_int_equal(fl_parse_query("trait_a=b", 9, 64, &none, &u, err,
                                    sizeof(err)), FL_ERR_NOMEM);
    assert_null(u.user_id);
    /* an empty query, or a plain userId alone, needs none: the id points
     * into the query */
    assert_int_equal(fl_parse_query("", 0, 64, &none, &u, err, sizeof(err)),
                     FL_OK);
    const char *q = "userId=x";
    assert_int_equal(fl_parse_query(q, 8, 64, &none, &u, err, sizeof(err)),
                     FL_OK);
    assert_ptr_equal(u.user_id, q + 7);
    assert_int_equal(u.user_id_len, 1);
    assert_int_equal(u.ntraits, 0);
}

/* Plain names and values point into the query; decoded ones are copies
 * with their own bytes, and a copy never overruns its buffer (the
 * sanitizer build sees one). */
static void test_points_into_query(void **state)
{
    (void) state;
    const char *q = "trait_plan=pro&userId=u-1&trait_email=a%40b.c"
                    "&trait_x+y=1&other=%41&trait_zz=last";
    fl_user_t u;

    assert_int_equal(parse(q, 64, &u), FL_OK);
    assert_ptr_equal(u.user_id, strstr(q, "u-1"));
    assert_int_equal(u.ntraits, 4);
    /* sorted by name: email, plan, x y, zz */
    assert_int_equal(u.traits[0].name_len, 5);
    assert_ptr_equal(u.traits[0].name, strstr(q, "email"));
    assert_int_equal(u.traits[0].value_len, 5);
    assert_memory_equal(u.traits[0].value, "a@b.c", 5);
    assert_true(u.traits[0].value < q || u.traits[0].value >= q + strlen(q));
    assert_ptr_equal(u.traits[1].name, strstr(q, "plan"));
    assert_ptr_equal(u.traits[1].value, strstr(q, "pro"));
    assert_int_equal(u.traits[2].name_len, 3);
    assert_memory_equal(u.traits[2].name, "x y", 3);
    assert_true(u.traits[2].name < q || u.traits[2].name >= q + strlen(q));
    assert_ptr_equal(u.traits[2].value, strstr(q, "=1&") + 1);
    assert_ptr_equal(u.traits[3].value, strstr(q, "last"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_basic, arena_teardown),
        cmocka_unit_test_teardown(test_decoding, arena_teardown),
        cmocka_unit_test_teardown(test_malformed, arena_teardown),
        cmocka_unit_test_teardown(test_last_wins, arena_teardown),
        cmocka_unit_test_teardown(test_empty_trait_name, arena_teardown),
        cmocka_unit_test_teardown(test_limits, arena_teardown),
        cmocka_unit_test_teardown(test_max_traits, arena_teardown),
        cmocka_unit_test_teardown(test_sorted, arena_teardown),
        cmocka_unit_test_teardown(test_lookup_every_length, arena_teardown),
        cmocka_unit_test_teardown(test_points_into_query, arena_teardown),
        cmocka_unit_test_teardown(test_many_traits, arena_teardown),
        cmocka_unit_test_teardown(test_no_memory, arena_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
