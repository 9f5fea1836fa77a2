/*
 * test_sync_health.c - a host's standing with the fleet (docs/sync.md,
 * src/core/sync_health.cpp): how stale its view is, before and after the
 * first round, and the jittered wait before it connects again.
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


/* After a round: the time since it, whatever the start. */
static void test_stale_after(void **state)
{
    int never = -1;

    (void) state;
    assert_int_equal(fl_sync_stale_ms(15000, 12000, 1000, &never), 3000);
    assert_int_equal(never, 0);
    assert_int_equal(fl_sync_stale_ms(12000, 12000, 1000, &never), 0);
    assert_int_equal(never, 0);
    /* another worker's cached clock, a few ms behind the round's end */
    assert_int_equal(fl_sync_stale_ms(11995, 12000, 1000, &never), 0);
    assert_int_equal(never, 0);
    assert_int_equal(fl_sync_stale_ms(15000, 12000, 0, NULL), 3000);
}


/* Before the first round: since the host began to sync, and never set;
 * a host that just started is fresh. */
static void test_stale_before(void **state)
{
    int never = -1;

    (void) state;
    assert_int_equal(fl_sync_stale_ms(1000, 0, 1000, &never), 0);
    assert_int_equal(never, 1);
    assert_int_equal(fl_sync_stale_ms(61500, 0, 1000, &never), 60500);
    assert_int_equal(never, 1);
    never = -1;
    assert_int_equal(fl_sync_stale_ms(61500, 0, 0, &never), 0);
    assert_int_equal(never, 1);
    assert_int_equal(fl_sync_stale_ms(900, 0, 1000, &never), 0);
}


/* The backoff doubles from one interval to the cap; a success (0) starts
 * it again at one interval. */
static void test_backoff_steps(void **state)
{
    uint64_t b = 0;
    uint64_t want[] = { 1000, 2000, 4000, 8000, 16000, 30000, 30000 };

    (void) state;
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        uint64_t w = fl_sync_backoff(&b, 1000, 30000, 0);
        assert_int_equal(b, want[i]);
        /* random 0: the longest wait, the backoff itself */
        assert_int_equal(w, want[i]);
    }

    b = 0;
    assert_int_equal(fl_sync_backoff(&b, 200, 30000, 0), 200);
    assert_int_equal(b, 200);

    /* an interval above the cap: one interval first, then the cap */
    b = 0;
    assert_int_equal(fl_sync_backoff(&b, 60000, 30000, 0), 60000);
    assert_int_equal(fl_sync_backoff(&b, 60000, 30000, 0), 30000);
    assert_int_equal(b, 30000);
}


/* Every wait in [backoff/2, backoff] is drawn, and nothing else. */
static void test_backoff_range(void **state)
{
    static uint8_t  seen[30001];
    uint64_t        r, b, w, n;

    (void) state;
    memset(seen, 0, sizeof(seen));

    for (r = 0; r < 3 * 15001; r++) {
        b = 16000;
        w = fl_sync_backoff(&b, 1000, 30000, r);
        assert_int_equal(b, 30000);
        assert_true(w >= 15000 && w <= 30000);
        seen[w] = 1;
    }

    for (n = 0, w = 0; w <= 30000; w++) {
        n += seen[w];
    }
    assert_int_equal(n, 15001);

    /* a random number past 32 bits, as random() never gives, still in */
    b = 1000;
    w = fl_sync_backoff(&b, 1000, 30000, UINT64_MAX);
    assert_true(w >= 1000 && w <= 2000);

    /* the smallest backoff, 10 ms: 5 to 10 */
    b = 0;
    w = fl_sync_backoff(&b, 10, 30000, 5);
    assert_int_equal(w, 10 - 5 % 6);
}


/* 100 hosts that lost Redis in the same millisecond, random numbers of a
 * fixed seed: the first retries spread over half an interval instead of
 * one millisecond (the equal jitter; bench/fleet.pl measures hosts). */
static void test_backoff_spread(void **state)
{
    uint32_t  x = 2463534242u;
    uint64_t  b, w, lo = UINT64_MAX, hi = 0;
    unsigned  bucket[11], i, most = 0;

    (void) state;
    memset(bucket, 0, sizeof(bucket));

    for (i = 0; i < 100; i++) {
        /* xorshift32: numbers as random() gives, 31 bits */
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        b = 0;
        w = fl_sync_backoff(&b, 1000, 30000, x >> 1);
        lo = w < lo ? w : lo;
        hi = w > hi ? w : hi;
        bucket[(w - 500) / 50]++;
    }

    for (i = 0; i < 11; i++) {
        most = bucket[i] > most ? bucket[i] : most;
    }

    assert_true(lo >= 500 && hi <= 1000);
    assert_true(hi - lo >= 400);
    /* 100 over ten 50 ms slots: none holds a third of them */
    assert_true(most < 34);
}


int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stale_after),
        cmocka_unit_test(test_stale_before),
        cmocka_unit_test(test_backoff_steps),
        cmocka_unit_test(test_backoff_range),
        cmocka_unit_test(test_backoff_spread),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
