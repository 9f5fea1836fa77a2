/*
 * test_sentinel.c - what flags_sync reads of Redis Sentinel (sentinel.cpp,
 * docs/sync.md "Sentinel"): the master a Sentinel names, a node's ROLE,
 * and a +switch-master message, each good answer value by value and each
 * broken one by its status.  Replies are written as the glue hands them
 * over: a flat view of the hiredis tree in pre-order.
 */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "flags_core.h"

#include "unit_sync_view.h"

static void test_master_good(void **state)
{
    fl_sync_addr_t a;
    fl_sync_elt_t v4[] = { A(2), S("127.0.0.1"), S("6380") };
    fl_sync_elt_t v6[] = { A(2), S("::1"), S("65535") };
    const uint8_t lo4[4] = { 127, 0, 0, 1 };
    const uint8_t lo6[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1 };

    (void) state;

    assert_int_equal(fl_sentinel_master(v4, N(v4), &a), FL_SENTINEL_OK);
    assert_int_equal(a.family, 4);
    assert_memory_equal(a.addr, lo4, 4);
    assert_int_equal(a.port, 6380);

    assert_int_equal(fl_sentinel_master(v6, N(v6), &a), FL_SENTINEL_OK);
    assert_int_equal(a.family, 6);
    assert_memory_equal(a.addr, lo6, 16);
    assert_int_equal(a.port, 65535);
    assert_string_equal(fl_sentinel_status_text(FL_SENTINEL_OK), "");
}

static const fl_sync_elt_t *v4ok(void)
{
    static fl_sync_elt_t v[3];

    v[0] = A(2);
    v[1] = S("127.0.0.1");
    v[2] = S("6380");
    return v;
}

static void test_master_broken(void **state)
{
    fl_sync_addr_t a;
    fl_sync_elt_t one[] = { A(1), S("127.0.0.1") };
    fl_sync_elt_t three[] = { A(3), S("127.0.0.1"), S("1"), S("2") };
    fl_sync_elt_t num[] = { A(2), S("127.0.0.1"), I(6379) };
    fl_sync_elt_t str[] = { S("127.0.0.1:6379") };
    fl_sync_elt_t claims[] = { A(5), S("127.0.0.1"), S("6379") };
    fl_sync_elt_t after[] = { A(2), S("127.0.0.1"), S("6379"), S("x") };
    fl_sync_elt_t nested[] = { A(2), A(1), S("x"), S("6379") };
    fl_sync_elt_t name[] = { A(2), S("redis.example"), S("6379") };
    fl_sync_elt_t empty[] = { A(2), S(""), S("6379") };
    fl_sync_elt_t nul[] = { A(2), S("127.0.0.1"), S("6379") };
    fl_sync_elt_t zero[] = { A(2), S("127.0.0.1"), S("0") };
    fl_sync_elt_t big[] = { A(2), S("127.0.0.1"), S("65536") };
    fl_sync_elt_t sign[] = { A(2), S("127.0.0.1"), S("-1") };
    fl_sync_elt_t longp[] = { A(2), S("127.0.0.1"), S("000006379") };
    fl_sync_elt_t space[] = { A(2), S("127.0.0.1"), S("6379 ") };

    (void) state;

    nul[1].len = 10;                         /* "127.0.0.1\0" */

    assert_int_equal(fl_sentinel_master(one, N(one), &a),
                     FL_SENTINEL_NOT_PAIR);
    assert_int_equal(fl_sentinel_master(three, N(three), &a),
                     FL_SENTINEL_NOT_PAIR);
    assert_int_equal(fl_sentinel_master(num, N(num), &a),
                     FL_SENTINEL_NOT_PAIR);
    assert_int_equal(fl_sentinel_master(str, N(str), &a),
                     FL_SENTINEL_NOT_PAIR);
    assert_int_equal(fl_sentinel_master(nested, N(nested), &a),
                     FL_SENTINEL_NOT_PAIR);
    assert_int_equal(fl_sentinel_master(claims, N(claims), &a),
                     FL_SENTINEL_MALFORMED);
    assert_int_equal(fl_sentinel_master(after, N(after), &a),
                     FL_SENTINEL_MALFORMED);
    assert_int_equal(fl_sentinel_master(v4ok(), 3, &a), FL_SENTINEL_OK);
    assert_int_equal(fl_sentinel_master(NULL, 0, &a),
                     FL_SENTINEL_MALFORMED);
    assert_int_equal(a.port, 0);             /* nothing left behind */
    assert_int_equal(fl_sentinel_master(name, N(name), &a),
                     FL_SENTINEL_HOST);
    assert_int_equal(fl_sentinel_master(empty, N(empty), &a),
                     FL_SENTINEL_HOST);
    assert_int_equal(fl_sentinel_master(nul, N(nul), &a),
                     FL_SENTINEL_HOST);
    assert_int_equal(fl_sentinel_master(zero, N(zero), &a),
                     FL_SENTINEL_PORT);
    assert_int_equal(fl_sentinel_master(big, N(big), &a),
                     FL_SENTINEL_PORT);
    assert_int_equal(fl_sentinel_master(sign, N(sign), &a),
                     FL_SENTINEL_PORT);
    assert_int_equal(fl_sentinel_master(longp, N(longp), &a),
                     FL_SENTINEL_PORT);
    assert_int_equal(fl_sentinel_master(space, N(space), &a),
                     FL_SENTINEL_PORT);
    /* a refused answer leaves no address behind */
    assert_int_equal(a.family, 0);
    assert_int_equal(a.port, 0);

    assert_string_equal(fl_sentinel_status_text(FL_SENTINEL_HOST),
                        "the master's host is not an IP address");
    assert_string_equal(fl_sentinel_status_text(FL_SENTINEL_NOT_PAIR),
                        "the reply is not an address and a port");
}

static void test_role(void **state)
{
    fl_sync_elt_t master[] = { A(3), S("master"), I(10), A(0) };
    fl_sync_elt_t slave[] = { A(5), S("slave"), S("127.0.0.1"), I(6379),
                              S("connected"), I(10) };
    fl_sync_elt_t sentinel[] = { A(2), S("sentinel"), A(1), S("m") };
    fl_sync_elt_t other[] = { A(1), S("masters") };
    fl_sync_elt_t notarr[] = { S("master") };
    fl_sync_elt_t first[] = { A(1), I(1) };
    fl_sync_elt_t claims[] = { A(4), S("master") };

    (void) state;

    assert_int_equal(fl_sync_role(master, N(master)), FL_SYNC_ROLE_MASTER);
    assert_int_equal(fl_sync_role(slave, N(slave)), FL_SYNC_ROLE_REPLICA);
    assert_int_equal(fl_sync_role(sentinel, N(sentinel)),
                     FL_SYNC_ROLE_SENTINEL);
    assert_int_equal(fl_sync_role(other, N(other)), FL_SYNC_ROLE_UNKNOWN);
    assert_int_equal(fl_sync_role(notarr, N(notarr)), FL_SYNC_ROLE_UNKNOWN);
    assert_int_equal(fl_sync_role(first, N(first)), FL_SYNC_ROLE_UNKNOWN);
    assert_int_equal(fl_sync_role(claims, N(claims)), FL_SYNC_ROLE_UNKNOWN);
    assert_string_equal(fl_sync_role_text(FL_SYNC_ROLE_REPLICA), "replica");
    assert_string_equal(fl_sync_role_text(FL_SYNC_ROLE_UNKNOWN), "unknown");
}

static void test_switched(void **state)
{
    fl_sync_elt_t ours[] = { A(3), S("message"), S("+switch-master"),
                             S("shop 127.0.0.1 6379 127.0.0.1 6380") };
    fl_sync_elt_t prefix[] = { A(3), S("message"), S("+switch-master"),
                               S("shop2 127.0.0.1 6379 127.0.0.1 6380") };
    fl_sync_elt_t other[] = { A(3), S("message"), S("+sdown"),
                              S("shop 127.0.0.1 6379") };
    fl_sync_elt_t sub[] = { A(3), S("subscribe"), S("+switch-master"),
                            I(1) };
    fl_sync_elt_t bare[] = { A(3), S("message"), S("+switch-master"),
                             S("shop") };

    (void) state;

    assert_int_equal(fl_sentinel_switched(ours, N(ours), "shop", 4), 1);
    assert_int_equal(fl_sentinel_switched(prefix, N(prefix), "shop", 4), 0);
    assert_int_equal(fl_sentinel_switched(other, N(other), "shop", 4), 0);
    assert_int_equal(fl_sentinel_switched(sub, N(sub), "shop", 4), 0);
    assert_int_equal(fl_sentinel_switched(bare, N(bare), "shop", 4), 0);
    assert_int_equal(fl_sentinel_switched(ours, 3, "shop", 4), 0);
}

static void test_subscribed(void **state)
{
    fl_sync_elt_t good[] = { A(3), S("subscribe"), S("+switch-master"),
                             I(1) };
    fl_sync_elt_t other[] = { A(3), S("subscribe"), S("+sdown"), I(1) };
    fl_sync_elt_t addr[] = { A(2), S("127.0.0.1"), S("6379") };
    fl_sync_elt_t str[] = { A(3), S("subscribe"), S("+switch-master"),
                            S("1") };

    (void) state;

    assert_int_equal(fl_sentinel_subscribed(good, N(good)), 1);
    assert_int_equal(fl_sentinel_subscribed(good, 3), 0);
    assert_int_equal(fl_sentinel_subscribed(other, N(other)), 0);
    assert_int_equal(fl_sentinel_subscribed(addr, N(addr)), 0);
    assert_int_equal(fl_sentinel_subscribed(str, N(str)), 0);
    assert_int_equal(fl_sentinel_subscribed(NULL, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_master_good),
        cmocka_unit_test(test_master_broken),
        cmocka_unit_test(test_role),
        cmocka_unit_test(test_switched),
        cmocka_unit_test(test_subscribed),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
