/*
 * test_state.c - the shared per-flag state block (window, counters,
 * rollback, override) and the flags_status object built from it.
 */

#define _POSIX_C_SOURCE 200809L

#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <cmocka.h>

#include "flags_core.h"

/*
 * A flag's state as the nginx glue composes it (ngx_http_flags_shm.c):
 * lifetime totals, the control block of its definition, and its window.
 * The window lives in its own 16-byte aligned storage, like a slab.
 */
typedef struct {
    fl_totals_t     t;
    fl_control_t    c;
    fl_window_t    *w;
} flag_state;

#define FS(m) ((flag_state *) (m))

static fl_window_t *new_window(uint32_t window)
{
    void *mem = NULL;
    fl_window_t *w;

    assert_int_equal(posix_memalign(&mem, 16, fl_window_size(window)), 0);
    memset(mem, 0xa5, fl_window_size(window));      /* init must not rely on zeroes */
    w = fl_window_init(mem, window);
    assert_ptr_equal(w, mem);
    return w;
}

static void *new_block(uint32_t window, uint64_t hash)
{
    flag_state *f = malloc(sizeof(flag_state));

    assert_non_null(f);
    memset(f, 0xa5, sizeof(*f));
    memset(&f->t, 0, sizeof(f->t));
    fl_control_init(&f->c, hash);
    f->w = new_window(window);
    return f;
}

static void free_block(void *m)
{
    free(FS(m)->w);
    free(m);
}

static void count_eval(void *m, int64_t now, int enabled)
{
    fl_count_eval(&FS(m)->t, FS(m)->w, now, enabled);
}

/* ngx_http_flags_count_error(): count, then the rollback decision. */
static int record_error(void *m, int64_t now, uint64_t now_ms,
    const fl_rollback_policy_t *p)
{
    uint64_t en = 0, er = 0;

    fl_count_error(&FS(m)->t, FS(m)->w, now);

    if (p == NULL || p->mode != FL_ROLLBACK_ON
        || fl_control_rolled_back(&FS(m)->c))
    {
        return 0;
    }
    fl_window_sums(FS(m)->w, now, p->window, &en, &er);
    if (!fl_rollback_decide(er, en, 1, p)) {
        return 0;
    }
    return fl_control_try_rollback(&FS(m)->c, now_ms, er, en, 1,
                                   FL_DECIDED_RULE);
}

/* ngx_http_flags_clear_rollback(): the window is emptied too. */
static int clear_rollback(void *m)
{
    fl_window_clear(FS(m)->w);
    return fl_control_clear_rollback(&FS(m)->c);
}

static fl_state_snapshot_t snap(const void *m, int64_t now)
{
    fl_state_snapshot_t s;
    uint64_t en = 0, er = 0;
    uint32_t w = fl_window_seconds(FS(m)->w);

    fl_window_sums(FS(m)->w, now, w, &en, &er);
    fl_state_snapshot(&FS(m)->t, &FS(m)->c, w, en, er, &s);
    return s;
}

static void eval_n(void *mem, int64_t now, int enabled, int n)
{
    for (int i = 0; i < n; i++) {
        count_eval(mem, now, enabled);
    }
}

static const fl_rollback_policy_t off_policy = { FL_ROLLBACK_OFF, 1, 0, 60, 1 };


/* ------------------------------------------------------------- layout */

static void test_size_and_init(void **state)
{
    (void) state;
    /* 1 header word, then 2 words per second. */
    /* the header, the buckets, the source table */
    assert_int_equal(fl_window_size(60), 8 + 60 * 16 + FL_SOURCE_SLOTS * 8);
    assert_int_equal(fl_window_size(1), 8 + 16 + FL_SOURCE_SLOTS * 8);
    assert_int_equal(fl_window_size(0), fl_window_size(1));
    assert_int_equal(fl_window_size(100000), fl_window_size(FL_WINDOW_MAX));

    void *m = new_block(60, 0x0123456789abcdefULL);
    assert_int_equal(fl_window_seconds(FS(m)->w), 60);
    assert_true(FS(m)->c.def_hash == 0x0123456789abcdefULL);

    fl_state_snapshot_t s = snap(m, 1000);
    assert_int_equal(s.window_seconds, 60);
    assert_true(s.def_hash == 0x0123456789abcdefULL);
    assert_int_equal(s.evaluations, 0);
    assert_int_equal(s.enabled_evaluations, 0);
    assert_int_equal(s.errors, 0);
    assert_int_equal(s.window_enabled, 0);
    assert_int_equal(s.window_errors, 0);
    assert_int_equal(s.rolled_back, 0);
    assert_int_equal(s.override_kind, FL_OVERRIDE_NONE);
    assert_int_equal(fl_control_effective(&FS(m)->c, 25000), 25000);
    free_block(m);

    m = new_block(0, 1);
    assert_int_equal(fl_window_seconds(FS(m)->w), 1);
    free_block(m);
}


/* ------------------------------------------------------------- window */

static void test_exact_counts(void **state)
{
    (void) state;
    void *m = new_block(60, 1);

    eval_n(m, 500, 1, 1000);
    eval_n(m, 500, 0, 234);
    for (int i = 0; i < 17; i++) {
        record_error(m, 500, 0, &off_policy);
    }

    fl_state_snapshot_t s = snap(m, 500);
    assert_int_equal(s.evaluations, 1234);
    assert_int_equal(s.enabled_evaluations, 1000);
    assert_int_equal(s.errors, 17);
    assert_int_equal(s.window_enabled, 1000);     /* only enabled ones */
    assert_int_equal(s.window_errors, 17);
    free_block(m);
}

/* fl_count_prefetch() (the fold asks for the lines of the flags ahead)
 * reads at most, writes nothing, and takes what the fold may hand it: a
 * flag without counters (NULL), any second, either stage. */
static void test_count_prefetch_changes_nothing(void **state)
{
    (void) state;
    void *m = new_block(60, 1);
    size_t wsize = fl_window_size(60);

    fl_count_evals(&FS(m)->t, FS(m)->w, 500, 40, 25);

    fl_totals_t t0 = FS(m)->t;
    unsigned char *w0 = malloc(wsize);
    assert_non_null(w0);
    memcpy(w0, FS(m)->w, wsize);

    const int64_t seconds[] = { 0, 1, 499, 500, 501, 4294967295LL,
                                4294967296LL + 500, -1 };
    for (size_t i = 0; i < sizeof(seconds) / sizeof(seconds[0]); i++) {
        fl_count_prefetch(&FS(m)->t, FS(m)->w, seconds[i], 0);
        fl_count_prefetch(&FS(m)->t, FS(m)->w, seconds[i], 1);
        fl_count_prefetch(NULL, FS(m)->w, seconds[i], 1);
        fl_count_prefetch(&FS(m)->t, NULL, seconds[i], 1);
        fl_count_prefetch(NULL, NULL, seconds[i], 0);
    }

    assert_memory_equal(&FS(m)->t, &t0, sizeof(t0));
    assert_memory_equal(FS(m)->w, w0, wsize);

    /* and what follows counts as it would have */
    fl_count_evals(&FS(m)->t, FS(m)->w, 500, 10, 5);
    fl_state_snapshot_t s = snap(m, 500);
    assert_int_equal(s.evaluations, 50);
    assert_int_equal(s.enabled_evaluations, 30);
    assert_int_equal(s.window_enabled, 30);

    free(w0);
    free_block(m);
}

/* Cohorts are the evaluations by their answer; an on-cohort error is a
 * flag error (totals and window) and the on cohort's; an off-cohort one
 * is the off cohort's, never the window's, and a report's (not an
 * upstream one's) still a lifetime error of the flag. */
static void test_cohorts_and_upstream_errors(void **state)
{
    (void) state;
    void *m = new_block(60, 1);

    for (int i = 0; i < 7; i++) {
        fl_count_eval(&FS(m)->t, FS(m)->w, 500, i < 5);
    }
    fl_count_error_cohort(&FS(m)->t, FS(m)->w, 500, 1, 1);
    fl_count_error_cohort(&FS(m)->t, FS(m)->w, 500, 1, 1);
    fl_count_error_cohort(&FS(m)->t, FS(m)->w, 500, 0, 1);
    record_error(m, 500, 0, &off_policy);
    fl_count_error_cohort(&FS(m)->t, FS(m)->w, 500, 0, 0);
    fl_count_error_cohort(&FS(m)->t, FS(m)->w, 500, 0, 0);

    fl_state_snapshot_t s = snap(m, 500);
    assert_int_equal(s.on_evaluations, 5);
    assert_int_equal(s.off_evaluations, 2);
    assert_int_equal(s.on_errors, 3);           /* 2 upstream + 1 report */
    assert_int_equal(s.off_errors, 3);          /* 1 upstream + 2 reports */
    assert_int_equal(s.errors_upstream, 2);
    assert_int_equal(s.errors, 3);              /* the on cohort's only */
    assert_int_equal(s.window_errors, 3);
    assert_int_equal(s.evaluations, 7);
    assert_int_equal(s.enabled_evaluations, 5);
    assert_int_equal(s.window_enabled, 5);
    free_block(m);
}

static void test_one_second_buckets_and_rotation(void **state)
{
    (void) state;
    void *m = new_block(3, 1);

    eval_n(m, 100, 1, 2);
    eval_n(m, 101, 1, 3);
    eval_n(m, 102, 1, 4);

    assert_int_equal(snap(m, 100).window_enabled, 9);  /* 101, 102: "future" */
    assert_int_equal(snap(m, 102).window_enabled, 9);
    assert_int_equal(snap(m, 103).window_enabled, 7);  /* 100 left */
    assert_int_equal(snap(m, 104).window_enabled, 4);
    assert_int_equal(snap(m, 105).window_enabled, 0);

    /* Second 103 reuses 100's bucket: its old count is gone. */
    eval_n(m, 103, 1, 5);
    assert_int_equal(snap(m, 103).window_enabled, 12);
    assert_int_equal(snap(m, 104).window_enabled, 9);
    assert_int_equal(snap(m, 105).window_enabled, 5);
    assert_int_equal(snap(m, 106).window_enabled, 0);
    assert_int_equal(snap(m, 106).enabled_evaluations, 14);

    /* Every second in turn, round and round the ring. */
    for (int64_t t = 200; t < 230; t++) {
        eval_n(m, t, 1, (int) (t % 7) + 1);
        fl_state_snapshot_t s = snap(m, t);
        uint64_t want = 0;
        for (int64_t u = t - 2 < 200 ? 200 : t - 2; u <= t; u++) {
            want += (uint64_t) (u % 7) + 1;
        }
        assert_int_equal(s.window_enabled, want);
    }
    free_block(m);
}

static void test_expiry_after_window(void **state)
{
    (void) state;
    void *m = new_block(60, 1);

    eval_n(m, 1000, 1, 10);
    record_error(m, 1000, 0, &off_policy);
    assert_int_equal(snap(m, 1059).window_enabled, 10);
    assert_int_equal(snap(m, 1059).window_errors, 1);
    assert_int_equal(snap(m, 1060).window_enabled, 0);
    assert_int_equal(snap(m, 1060).window_errors, 0);
    assert_int_equal(snap(m, 1060).enabled_evaluations, 10);
    free_block(m);
}

static void test_long_idle_gap(void **state)
{
    (void) state;
    void *m = new_block(60, 1);

    eval_n(m, 1000, 1, 10);

    /* Thousands of windows later, on the same bucket index as 1000... */
    int64_t t2 = 1000 + 60 * 5000;
    assert_int_equal(snap(m, t2).window_enabled, 0);
    eval_n(m, t2, 1, 1);
    assert_int_equal(snap(m, t2).window_enabled, 1);

    /* ...and on another one. */
    int64_t t3 = t2 + 60 * 1000 + 7;
    assert_int_equal(snap(m, t3).window_enabled, 0);
    eval_n(m, t3, 1, 2);
    assert_int_equal(snap(m, t3).window_enabled, 2);
    assert_int_equal(snap(m, t3).enabled_evaluations, 13);
    free_block(m);
}

static void test_clock_backwards(void **state)
{
    (void) state;
    void *m = new_block(60, 1);

    eval_n(m, 1000, 1, 3);
    /* A small step back lands in another bucket: nothing is lost. */
    eval_n(m, 999, 1, 2);
    assert_int_equal(snap(m, 1000).window_enabled, 5);

    /* A whole window back lands on 1000's bucket, stamped in the future:
     * the event is counted into it, not lost. */
    eval_n(m, 940, 1, 4);
    assert_int_equal(snap(m, 940).window_enabled, 9);
    assert_int_equal(snap(m, 1000).window_enabled, 9);

    /* Far back: the future stamps count as current. */
    record_error(m, 1000, 0, &off_policy);
    record_error(m, 100, 0, &off_policy);
    assert_int_equal(snap(m, 100).window_errors, 2);
    assert_int_equal(snap(m, 100).window_enabled, 9);

    /* Once the clock is past them again they expire normally. */
    assert_int_equal(snap(m, 1060).window_enabled, 0);
    assert_int_equal(snap(m, 1060).window_errors, 0);
    assert_int_equal(snap(m, 1060).enabled_evaluations, 9);
    assert_int_equal(snap(m, 1060).errors, 2);
    free_block(m);
}

static void test_32bit_stamps(void **state)
{
    (void) state;
    void *m = new_block(60, 1);

    /* Past 2^31 (an empty bucket's zero stamp must not look "newer"). */
    int64_t t = 3000000000LL;
    eval_n(m, t, 1, 2);
    assert_int_equal(snap(m, t).window_enabled, 2);
    assert_int_equal(snap(m, t + 60).window_enabled, 0);

    /* Across 2^32, where the stamps wrap to 0. */
    t = 4294967295LL;
    eval_n(m, t, 1, 3);
    eval_n(m, t + 1, 1, 4);
    assert_int_equal(snap(m, t + 1).window_enabled, 7);
    assert_int_equal(snap(m, t + 60).window_enabled, 4);
    assert_int_equal(snap(m, t + 61).window_enabled, 0);
    free_block(m);
}


/* ------------------------------------------------------------ sources */

static size_t count_sources(const fl_window_t *w, int64_t now,
    uint32_t seconds)
{
    uint32_t keys[FL_SOURCE_SLOTS];
    size_t n = 0;

    fl_window_sources(w, now, seconds, keys, &n, FL_SOURCE_SLOTS);
    return n;
}

/* The source key: a user before an address, and the two never mix. */
static void test_source_key(void **state)
{
    (void) state;

    uint32_t u = fl_source_key("10.0.0.1", 8, "127.0.0.1", 9);
    uint32_t a = fl_source_key(NULL, 0, "10.0.0.1", 8);
    uint32_t e = fl_source_key("", 0, "10.0.0.1", 8);     /* empty: address */

    assert_int_not_equal(u, a);
    assert_int_equal(a, e);
    assert_int_equal(u, fl_source_key("10.0.0.1", 8, "192.0.2.7", 9));
    assert_int_not_equal(fl_source_key("alice", 5, NULL, 0),
                         fl_source_key("bob", 3, NULL, 0));
    assert_int_not_equal(fl_source_key(NULL, 0, NULL, 0), 0);
}

/* Distinct sources within the window: repeats count once, old ones
 * leave, merges and clears carry them. */
static void test_window_sources(void **state)
{
    (void) state;
    fl_window_t *w = new_window(60);
    int64_t now = 1000;

    assert_int_equal(count_sources(w, now, 60), 0);

    for (uint32_t k = 1; k <= 5; k++) {
        fl_count_source(w, now, fl_source_key(NULL, 0, (char *) &k, 4));
        fl_count_source(w, now, fl_source_key(NULL, 0, (char *) &k, 4));
    }
    assert_int_equal(count_sources(w, now, 60), 5);
    assert_int_equal(count_sources(w, now + 59, 60), 5);
    assert_int_equal(count_sources(w, now + 60, 60), 0);  /* all left */
    assert_int_equal(count_sources(w, now + 5, 5), 0);    /* a shorter rule */

    /* a source seen again later stays in for its later second */
    uint32_t one = 1;
    fl_count_source(w, now + 30, fl_source_key(NULL, 0, (char *) &one, 4));
    assert_int_equal(count_sources(w, now + 60, 60), 1);
    assert_int_equal(count_sources(w, now + 89, 60), 1);
    assert_int_equal(count_sources(w, now + 90, 60), 0);

    /* merged into another window: the same sources */
    fl_window_t *d = new_window(120);
    fl_window_merge(d, w);
    assert_int_equal(count_sources(d, now, 120), 5);
    /* counted over both blocks, a key counts once */
    uint32_t keys[FL_SOURCE_SLOTS];
    size_t n = 0;
    fl_window_sources(w, now + 1, 60, keys, &n, FL_SOURCE_SLOTS);
    fl_window_sources(d, now + 1, 60, keys, &n, FL_SOURCE_SLOTS);
    assert_int_equal(n, 5);

    /* with their ages: the newest second of each key */
    uint32_t ages[FL_SOURCE_SLOTS];
    n = 0;
    fl_window_source_ages(w, now + 40, 60, keys, ages, &n, FL_SOURCE_SLOTS);
    assert_int_equal(n, 5);
    for (size_t j = 0; j < n; j++) {
        assert_int_equal(ages[j],
                         keys[j] == fl_source_key(NULL, 0, (char *) &one, 4)
                         ? 10 : 40);
    }
    n = 0;
    fl_window_source_ages(w, now - 3, 60, keys, ages, &n, FL_SOURCE_SLOTS);
    assert_int_equal(ages[0], 0);           /* a second not yet past */

    fl_window_clear(w);
    assert_int_equal(count_sources(w, now, 60), 0);

    /* many distinct sources: the table holds at least what min_sources
     * can ask for, and never more than its slots */
    for (uint32_t k = 0; k < 1000; k++) {
        fl_count_source(w, now, fl_source_key(NULL, 0, (char *) &k, 4));
    }
    n = count_sources(w, now, 60);
    assert_true(n >= FL_MIN_SOURCES_MAX);
    assert_true(n <= FL_SOURCE_SLOTS);

    /* the newest sources win over older ones when the table is full */
    for (uint32_t k = 5000; k < 5040; k++) {
        fl_count_source(w, now + 10, fl_source_key(NULL, 0, (char *) &k, 4));
    }
    assert_true(count_sources(w, now + 60, 60) >= 32);

    free(w);
    free(d);
}

/* The rule waits for min_sources, and says what it waits for. */
static void test_rollback_sources(void **state)
{
    (void) state;
    fl_rollback_policy_t p = { FL_ROLLBACK_ON, 20, 10000, 60, 3 };
    fl_rollback_wait_t w;

    assert_int_equal(fl_rollback_decide(20, 0, 2, &p), 0);
    assert_int_equal(fl_rollback_decide(20, 0, 3, &p), 1);
    assert_int_equal(fl_rollback_decide(500, 0, 2, &p), 0);
    assert_int_equal(fl_rollback_decide(19, 0, 30, &p), 0);

    fl_rollback_waiting(5, 100, 1, &p, &w);
    assert_int_equal(w.errors, 15);
    assert_int_equal(w.rate_errors, 5);         /* 10 of 100 */
    assert_int_equal(w.sources, 2);

    fl_rollback_waiting(25, 251, 3, &p, &w);
    assert_int_equal(w.errors, 0);
    assert_int_equal(w.rate_errors, 1);         /* 25.1 rounds up to 26 */
    assert_int_equal(w.sources, 0);

    fl_rollback_waiting(26, 251, 4, &p, &w);
    assert_int_equal(w.errors + w.rate_errors + w.sources, 0);
    assert_int_equal(fl_rollback_decide(26, 251, 4, &p), 1);

    /* 0 in a policy reads as 1 */
    fl_rollback_policy_t z = { FL_ROLLBACK_ON, 1, 0, 60, 0 };
    assert_int_equal(fl_rollback_decide(1, 0, 0, &z), 0);
    assert_int_equal(fl_rollback_decide(1, 0, 1, &z), 1);
}

/* A rollback's record keeps its sources and who decided it. */
static void test_rollback_record_by(void **state)
{
    (void) state;
    fl_totals_t t;
    fl_control_t c;
    fl_state_snapshot_t s;

    memset(&t, 0, sizeof(t));
    fl_control_init(&c, 7);
    assert_int_equal(fl_control_try_rollback(&c, 5000, 9, 40, 4,
                                             FL_DECIDED_FLEET), 1);
    assert_int_equal(fl_control_try_rollback(&c, 6000, 1, 1, 1,
                                             FL_DECIDED_RULE), 0);
    fl_state_snapshot(&t, &c, 60, 0, 0, &s);
    assert_int_equal(s.rollback_at_ms, 5000);
    assert_int_equal(s.rollback_sources, 4);
    assert_int_equal(s.rollback_by, FL_DECIDED_FLEET);

    assert_int_equal(fl_control_clear_rollback(&c), 1);
    fl_control_restore_rollback(&c, 7000, 3, 3, 0, FL_DECIDED_UNKNOWN);
    fl_state_snapshot(&t, &c, 60, 0, 0, &s);
    assert_int_equal(s.rollback_sources, 0);
    assert_int_equal(s.rollback_by, FL_DECIDED_UNKNOWN);
}


/* ----------------------------------------------------------- decision */

static void test_rollback_decide(void **state)
{
    (void) state;
    fl_rollback_policy_t p = { FL_ROLLBACK_ON, 20, 10000, 60, 1 }; /* 20, 10 % */

    assert_int_equal(fl_rollback_decide(19, 0, 1, &p), 0);     /* min_errors - 1 */
    assert_int_equal(fl_rollback_decide(20, 0, 1, &p), 1);     /* min alone decides */
    assert_int_equal(fl_rollback_decide(0, 0, 1, &p), 0);
    assert_int_equal(fl_rollback_decide(19, 10, 1, &p), 0);    /* rate ok, too few */
    assert_int_equal(fl_rollback_decide(20, 200, 1, &p), 1);   /* exactly 10 % */
    assert_int_equal(fl_rollback_decide(20, 201, 1, &p), 0);   /* just under */
    assert_int_equal(fl_rollback_decide(21, 210, 1, &p), 1);
    assert_int_equal(fl_rollback_decide(21, 211, 1, &p), 0);
    assert_int_equal(fl_rollback_decide(1000, 1, 1, &p), 1);

    /* A fractional rate: 12.345 %. */
    fl_rollback_policy_t q = { FL_ROLLBACK_ON, 1, 12345, 60, 1 };
    assert_int_equal(fl_rollback_decide(12345, 100000, 1, &q), 1);
    assert_int_equal(fl_rollback_decide(12345, 100001, 1, &q), 0);
    assert_int_equal(fl_rollback_decide(1, 8, 1, &q), 1);      /* 12.5 % */
    assert_int_equal(fl_rollback_decide(1, 9, 1, &q), 0);      /* 11.1 % */

    /* min_errors 1 and rate 0: the first error trips. */
    fl_rollback_policy_t r = { FL_ROLLBACK_ON, 1, 0, 60, 1 };
    assert_int_equal(fl_rollback_decide(1, UINT64_MAX, 1, &r), 1);
    assert_int_equal(fl_rollback_decide(0, 0, 1, &r), 0);
    /* min_errors 0 reads as 1: no error, no rollback. */
    fl_rollback_policy_t z = { FL_ROLLBACK_ON, 0, 0, 60, 1 };
    assert_int_equal(fl_rollback_decide(0, 0, 1, &z), 0);
    assert_int_equal(fl_rollback_decide(1, 0, 1, &z), 1);

    /* Mode OFF never trips; no policy never trips. */
    fl_rollback_policy_t off = { FL_ROLLBACK_OFF, 1, 0, 60, 1 };
    assert_int_equal(fl_rollback_decide(UINT64_MAX, 0, 1, &off), 0);
    assert_int_equal(fl_rollback_decide(UINT64_MAX, 0, 1, NULL), 0);

    /* Huge counts: 64-bit products would overflow. */
    fl_rollback_policy_t all = { FL_ROLLBACK_ON, 1, 100000, 60, 1 };  /* 100 % */
    assert_int_equal(fl_rollback_decide(UINT64_MAX, UINT64_MAX, 1, &all), 1);
    assert_int_equal(fl_rollback_decide(UINT64_MAX - 1, UINT64_MAX, 1, &all), 0);
    fl_rollback_policy_t half = { FL_ROLLBACK_ON, 1, 50000, 60, 1 };
    assert_int_equal(fl_rollback_decide(UINT64_MAX / 2 + 1, UINT64_MAX, 1, &half), 1);
    assert_int_equal(fl_rollback_decide(UINT64_MAX / 2, UINT64_MAX, 1, &half), 0);
    assert_int_equal(fl_rollback_decide(UINT64_MAX, 1, 1, &p), 1);
    assert_int_equal(fl_rollback_decide(UINT32_MAX, (uint64_t) UINT32_MAX * 10, 1, &p), 1);
    assert_int_equal(fl_rollback_decide(UINT32_MAX, (uint64_t) UINT32_MAX * 10 + 1, 1, &p), 0);
}

static void test_record_error_trips_once(void **state)
{
    (void) state;
    void *m = new_block(60, 1);
    fl_rollback_policy_t p = { FL_ROLLBACK_ON, 3, 50000, 60, 1 };     /* 3, 50 % */

    eval_n(m, 100, 1, 4);
    assert_int_equal(record_error(m, 100, 1000, &p), 0);
    assert_int_equal(record_error(m, 101, 2000, &p), 0);
    assert_int_equal(fl_control_effective(&FS(m)->c, 25000), 25000);
    assert_int_equal(record_error(m, 102, 1795352709123ULL, &p), 1);
    assert_int_equal(record_error(m, 102, 9999, &p), 0);
    assert_int_equal(record_error(m, 103, 9999, &p), 0);

    fl_state_snapshot_t s = snap(m, 103);
    assert_int_equal(s.rolled_back, 1);
    assert_true(s.rollback_at_ms == 1795352709123ULL);
    assert_int_equal(s.rollback_errors, 3);     /* the counts it decided on */
    assert_int_equal(s.rollback_enabled, 4);
    assert_int_equal(s.errors, 5);
    assert_int_equal(s.window_errors, 5);
    assert_int_equal(fl_control_effective(&FS(m)->c, 25000), 0);
    assert_int_equal(fl_control_effective(&FS(m)->c, 100000), 0);
    free_block(m);
}

static void test_record_error_rate_not_reached(void **state)
{
    (void) state;
    void *m = new_block(60, 1);
    fl_rollback_policy_t p = { FL_ROLLBACK_ON, 2, 10000, 60, 1 };

    eval_n(m, 100, 1, 100);
    for (int i = 0; i < 9; i++) {
        assert_int_equal(record_error(m, 100, 0, &p), 0);
    }
    assert_int_equal(record_error(m, 100, 0, &p), 1);   /* 10 of 100 */
    free_block(m);
}

static void test_record_error_mode_off(void **state)
{
    (void) state;
    void *m = new_block(60, 1);

    for (int i = 0; i < 1000; i++) {
        assert_int_equal(record_error(m, 100, 0, &off_policy), 0);
    }
    assert_int_equal(record_error(m, 100, 0, NULL), 0);
    fl_state_snapshot_t s = snap(m, 100);
    assert_int_equal(s.rolled_back, 0);
    assert_int_equal(s.errors, 1001);
    assert_int_equal(s.window_errors, 1001);
    free_block(m);
}

static void test_record_error_window(void **state)
{
    (void) state;
    fl_rollback_policy_t p10 = { FL_ROLLBACK_ON, 3, 0, 10, 1 };
    fl_rollback_policy_t p600 = { FL_ROLLBACK_ON, 3, 0, 600, 1 };

    /* The policy's shorter window: errors 15 s apart do not add up. */
    void *m = new_block(60, 1);
    assert_int_equal(record_error(m, 100, 0, &p10), 0);
    assert_int_equal(record_error(m, 100, 0, &p10), 0);
    assert_int_equal(record_error(m, 115, 0, &p10), 0);
    assert_int_equal(record_error(m, 115, 0, &p10), 0);
    assert_int_equal(record_error(m, 116, 0, &p10), 1);
    assert_int_equal(snap(m, 116).rollback_errors, 3);
    free_block(m);

    /* A longer policy window is cut to the block's. */
    m = new_block(60, 1);
    assert_int_equal(record_error(m, 100, 0, &p600), 0);
    assert_int_equal(record_error(m, 100, 0, &p600), 0);
    assert_int_equal(record_error(m, 160, 0, &p600), 0);
    assert_int_equal(record_error(m, 161, 0, &p600), 0);
    assert_int_equal(record_error(m, 161, 0, &p600), 1);
    free_block(m);
}


/* ------------------------------------------------ clear, redefine, copy */

static void test_clear_rollback(void **state)
{
    (void) state;
    void *m = new_block(60, 1);
    fl_rollback_policy_t p = { FL_ROLLBACK_ON, 2, 0, 60, 1 };

    eval_n(m, 100, 1, 7);
    eval_n(m, 100, 0, 3);
    assert_int_equal(record_error(m, 100, 0, &p), 0);
    assert_int_equal(record_error(m, 100, 0, &p), 1);

    assert_int_equal(clear_rollback(m), 1);
    fl_state_snapshot_t s = snap(m, 100);
    assert_int_equal(s.rolled_back, 0);
    assert_int_equal(s.rollback_at_ms, 0);
    assert_int_equal(s.window_enabled, 0);      /* window emptied */
    assert_int_equal(s.window_errors, 0);
    assert_int_equal(s.evaluations, 10);        /* lifetime kept */
    assert_int_equal(s.enabled_evaluations, 7);
    assert_int_equal(s.errors, 2);
    assert_int_equal(fl_control_effective(&FS(m)->c, 30000), 30000);
    assert_int_equal(clear_rollback(m), 0);

    /* It does not trip again at once: the window starts from zero. */
    assert_int_equal(record_error(m, 100, 0, &p), 0);
    assert_int_equal(record_error(m, 100, 0, &p), 1);
    free_block(m);
}

static void test_override_precedence(void **state)
{
    (void) state;
    void *m = new_block(60, 1);
    fl_rollback_policy_t p = { FL_ROLLBACK_ON, 1, 0, 60, 1 };

    fl_control_set_override(&FS(m)->c, FL_OVERRIDE_PERCENT, 12345);
    assert_int_equal(fl_control_effective(&FS(m)->c, 25000), 12345);
    fl_state_snapshot_t s = snap(m, 0);
    assert_int_equal(s.override_kind, FL_OVERRIDE_PERCENT);
    assert_int_equal(s.override_milli, 12345);

    fl_control_set_override(&FS(m)->c, FL_OVERRIDE_PERCENT, 0);
    assert_int_equal(fl_control_effective(&FS(m)->c, 25000), 0);
    fl_control_set_override(&FS(m)->c, FL_OVERRIDE_PERCENT, 100000);
    assert_int_equal(fl_control_effective(&FS(m)->c, 25000), 100000);
    fl_control_set_override(&FS(m)->c, FL_OVERRIDE_PERCENT, 500000);     /* clamped */
    assert_int_equal(fl_control_effective(&FS(m)->c, 25000), 100000);

    fl_control_set_override(&FS(m)->c, FL_OVERRIDE_OFF, 777);
    assert_int_equal(fl_control_effective(&FS(m)->c, 25000), 0);
    s = snap(m, 0);
    assert_int_equal(s.override_kind, FL_OVERRIDE_OFF);
    assert_int_equal(s.override_milli, 0);

    fl_control_set_override(&FS(m)->c, FL_OVERRIDE_NONE, 0);
    assert_int_equal(fl_control_effective(&FS(m)->c, 25000), 25000);
    assert_int_equal(snap(m, 0).override_kind, FL_OVERRIDE_NONE);

    /* A rollback wins over an override, which comes back when cleared. */
    fl_control_set_override(&FS(m)->c, FL_OVERRIDE_PERCENT, 50000);
    assert_int_equal(record_error(m, 5, 1, &p), 1);
    assert_int_equal(fl_control_effective(&FS(m)->c, 25000), 0);
    s = snap(m, 5);
    assert_int_equal(s.rolled_back, 1);
    assert_int_equal(s.override_kind, FL_OVERRIDE_PERCENT);
    assert_int_equal(s.override_milli, 50000);
    /* Changing the override keeps the rollback. */
    fl_control_set_override(&FS(m)->c, FL_OVERRIDE_PERCENT, 60000);
    assert_int_equal(fl_control_effective(&FS(m)->c, 25000), 0);
    assert_int_equal(clear_rollback(m), 1);
    assert_int_equal(fl_control_effective(&FS(m)->c, 25000), 60000);
    free_block(m);
}

/* A new definition is a fresh control block beside the old one (the glue
 * keeps the old one for workers that still run the old definition); the
 * lifetime totals are the flag's and stay. */
static void test_new_definition(void **state)
{
    (void) state;
    void *m = new_block(60, 1);
    fl_rollback_policy_t p = { FL_ROLLBACK_ON, 1, 0, 60, 1 };

    eval_n(m, 100, 1, 5);
    fl_control_set_override(&FS(m)->c, FL_OVERRIDE_OFF, 0);
    assert_int_equal(record_error(m, 100, 1, &p), 1);
    assert_int_equal(fl_control_active(&FS(m)->c), 1);

    fl_control_t fresh;
    memset(&fresh, 0xa5, sizeof(fresh));
    fl_control_init(&fresh, 0xfeedULL);
    assert_int_equal(fl_control_active(&fresh), 0);
    assert_int_equal(fl_control_rolled_back(&fresh), 0);
    assert_int_equal(fl_control_effective(&fresh, 40000), 40000);

    fl_state_snapshot_t s;
    fl_state_snapshot(&FS(m)->t, &fresh, 60, 0, 0, &s);
    assert_true(s.def_hash == 0xfeedULL);
    assert_int_equal(s.rolled_back, 0);
    assert_int_equal(s.override_kind, FL_OVERRIDE_NONE);
    assert_int_equal(s.enabled_evaluations, 5);
    assert_int_equal(s.errors, 1);

    /* the old definition keeps its rollback for its own workers */
    assert_int_equal(fl_control_effective(&FS(m)->c, 40000), 0);
    free_block(m);
}

/* A new definition keeps the old one's rollback and override
 * (fl_control_carry(), issue 25): the record whole, the override's
 * value, never the old ramp's percentage nor its definition hash; what
 * the new block has is never undone. */
static void test_carry(void **state)
{
    (void) state;
    fl_totals_t t;
    fl_control_t from, to;
    fl_state_snapshot_t s;

    memset(&t, 0, sizeof(t));
    fl_control_init(&from, 0x01d);
    fl_control_set_ramp(&from, 50000);
    fl_control_set_override(&from, FL_OVERRIDE_PERCENT, 5000);
    assert_int_equal(fl_control_try_rollback(&from, 1795352709123ULL, 7, 30,
                                             3, FL_DECIDED_FLEET), 1);

    fl_control_init(&to, 0x0e1);
    fl_control_set_ramp(&to, 1000);             /* the new ramp's stage 0 */
    assert_int_equal(fl_control_carry(&to, &from),
                     FL_CARRIED_ROLLBACK | FL_CARRIED_OVERRIDE);

    fl_state_snapshot(&t, &to, 60, 0, 0, &s);
    assert_true(s.def_hash == 0x0e1);
    assert_int_equal(s.rolled_back, 1);
    assert_true(s.rollback_at_ms == 1795352709123ULL);
    assert_int_equal(s.rollback_errors, 7);
    assert_int_equal(s.rollback_enabled, 30);
    assert_int_equal(s.rollback_sources, 3);
    assert_int_equal(s.rollback_by, FL_DECIDED_FLEET);
    assert_int_equal(s.override_kind, FL_OVERRIDE_PERCENT);
    assert_int_equal(s.override_milli, 5000);
    assert_int_equal(fl_control_ramp(&to), 1000);
    assert_int_equal(fl_control_effective(&to, 25000), 0);

    /* the source is read, never changed */
    assert_int_equal(fl_control_rolled_back(&from), 1);
    assert_int_equal(fl_control_ramp(&from), 50000);

    /* flags_admin's clear, then its removal, on the new block */
    assert_int_equal(fl_control_clear_rollback(&to), 1);
    assert_int_equal(fl_control_effective(&to, 25000), 5000);
    fl_control_set_override(&to, FL_OVERRIDE_NONE, 0);
    assert_int_equal(fl_control_effective(&to, 25000), 1000);
    assert_int_equal(fl_control_active(&to), 0);

    /* a block with nothing carries nothing, and undoes nothing */
    fl_control_t none;
    fl_control_init(&none, 0x0a);
    fl_control_set_override(&to, FL_OVERRIDE_OFF, 0);
    assert_int_equal(fl_control_carry(&to, &none), 0);
    assert_int_equal(fl_control_active(&to), 1);
    assert_int_equal(fl_control_effective(&to, 25000), 0);

    /* an override only: it replaces the new block's, whose own rollback
     * keeps its record */
    fl_control_t ov;
    fl_control_init(&ov, 0x0b);
    fl_control_set_override(&ov, FL_OVERRIDE_PERCENT, 100000);
    assert_int_equal(fl_control_try_rollback(&to, 9000, 1, 2, 1,
                                             FL_DECIDED_RULE), 1);
    assert_int_equal(fl_control_carry(&to, &ov), FL_CARRIED_OVERRIDE);
    fl_state_snapshot(&t, &to, 60, 0, 0, &s);
    assert_int_equal(s.rolled_back, 1);
    assert_true(s.rollback_at_ms == 9000);
    assert_int_equal(s.rollback_by, FL_DECIDED_RULE);
    assert_int_equal(s.override_kind, FL_OVERRIDE_PERCENT);
    assert_int_equal(s.override_milli, 100000);

    /* a rollback onto a block rolled back already: its own record stays */
    assert_int_equal(fl_control_carry(&to, &from), FL_CARRIED_ROLLBACK
                                                   | FL_CARRIED_OVERRIDE);
    fl_state_snapshot(&t, &to, 60, 0, 0, &s);
    assert_true(s.rollback_at_ms == 9000);
    assert_int_equal(s.override_milli, 5000);

    /* an override off, and the no-ops */
    fl_control_t off, fresh;
    fl_control_init(&off, 1);
    fl_control_set_override(&off, FL_OVERRIDE_OFF, 0);
    fl_control_init(&fresh, 2);
    assert_int_equal(fl_control_carry(&fresh, &off), FL_CARRIED_OVERRIDE);
    assert_int_equal(fl_control_rolled_back(&fresh), 0);
    assert_int_equal(fl_control_effective(&fresh, 100000), 0);
    assert_int_equal(fl_control_carry(&fresh, NULL), 0);
    assert_int_equal(fl_control_carry(NULL, &from), 0);
    assert_int_equal(fl_control_carry(&fresh, &fresh), 0);
}

static void test_restore_rollback(void **state)
{
    (void) state;
    void *m = new_block(60, 1);

    fl_control_restore_rollback(&FS(m)->c, 1795352709123ULL, 25, 100, 2,
                                FL_DECIDED_RULE);
    fl_state_snapshot_t s = snap(m, 0);
    assert_int_equal(s.rolled_back, 1);
    assert_true(s.rollback_at_ms == 1795352709123ULL);
    assert_int_equal(s.rollback_errors, 25);
    assert_int_equal(s.rollback_enabled, 100);
    assert_int_equal(fl_control_effective(&FS(m)->c, 25000), 0);

    /* Already rolled back: record_error does not trip again. */
    fl_rollback_policy_t p = { FL_ROLLBACK_ON, 1, 0, 60, 1 };
    assert_int_equal(record_error(m, 0, 5, &p), 0);
    assert_true(snap(m, 0).rollback_at_ms == 1795352709123ULL);
    free_block(m);
}

/* A window of another length replaces the head: once nobody counts into
 * the old one, its buckets are merged by second into the new one. */
static void test_merge(void **state)
{
    (void) state;
    void *src = new_block(60, 1);
    void *dst = new_block(10, 2);

    eval_n(src, 100, 1, 5);        /* older than dst's window at 150 */
    eval_n(src, 145, 1, 6);
    eval_n(src, 150, 1, 7);
    eval_n(src, 150, 0, 2);
    fl_count_error(&FS(src)->t, FS(src)->w, 150);
    fl_count_error(&FS(src)->t, FS(src)->w, 150);
    fl_count_error(&FS(src)->t, FS(src)->w, 150);
    eval_n(dst, 150, 1, 1);        /* dst already counted this second */

    fl_window_merge(FS(dst)->w, FS(src)->w);
    fl_state_snapshot_t s = snap(dst, 150);
    assert_int_equal(s.window_seconds, 10);
    assert_int_equal(s.window_enabled, 14);         /* 145 and 150 */
    assert_int_equal(s.window_errors, 3);
    assert_int_equal(snap(dst, 155).window_enabled, 8);
    free_block(src);
    free_block(dst);

    /* Into a longer window everything of the shorter one fits. */
    src = new_block(5, 1);
    dst = new_block(300, 1);
    for (int64_t t = 1000; t < 1010; t++) {
        eval_n(src, t, 1, 1);
    }
    fl_window_merge(FS(dst)->w, FS(src)->w);
    assert_int_equal(snap(dst, 1009).window_enabled, 5);  /* 1005..1009 */
    eval_n(dst, 1010, 1, 1);
    assert_int_equal(snap(dst, 1010).window_enabled, 6);

    /* A summed pair (head and the retired window) counts each event once. */
    uint64_t en = 0, er = 0;
    fl_window_sums(FS(dst)->w, 1010, 300, &en, &er);
    fl_window_sums(FS(src)->w, 1010, 300, &en, &er);
    assert_int_equal(en, 6 + 5);
    free_block(src);
    free_block(dst);
}


/* ------------------------------------------------------------ threads */

#define THREADS 4
#define PER_THREAD 200000

struct worker {
    void                        *mem;
    const fl_rollback_policy_t  *policy;
    int                          wins;
};

static void *hammer(void *arg)
{
    struct worker *w = arg;

    for (int i = 0; i < PER_THREAD; i++) {
        /* Two seconds interleaved: two buckets under contention. */
        count_eval(w->mem, 1000 + (i & 1), i % 3 == 0);
        if (i % 100 == 0) {
            w->wins += record_error(w->mem, 1000 + (i & 1), 7, w->policy);
        }
    }
    return NULL;
}

static void test_concurrent_exact(void **state)
{
    (void) state;
    void *m = new_block(60, 1);
    fl_rollback_policy_t p = { FL_ROLLBACK_ON, 500, 0, 60, 1 };
    pthread_t th[THREADS];
    struct worker w[THREADS];

    for (int i = 0; i < THREADS; i++) {
        w[i].mem = m;
        w[i].policy = &p;
        w[i].wins = 0;
        assert_int_equal(pthread_create(&th[i], NULL, hammer, &w[i]), 0);
    }
    int wins = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        wins += w[i].wins;
    }

    uint64_t enabled_per = (PER_THREAD + 2) / 3;
    uint64_t errors_per = PER_THREAD / 100;
    fl_state_snapshot_t s = snap(m, 1001);
    assert_int_equal(s.evaluations, (uint64_t) THREADS * PER_THREAD);
    assert_int_equal(s.enabled_evaluations, THREADS * enabled_per);
    assert_int_equal(s.errors, THREADS * errors_per);
    assert_int_equal(s.window_enabled, THREADS * enabled_per);
    assert_int_equal(s.window_errors, THREADS * errors_per);
    assert_int_equal(wins, 1);                      /* exactly one winner */
    assert_int_equal(s.rolled_back, 1);
    /* The winner's count: other threads may have added theirs between its
     * increment and its sum. */
    assert_true(s.rollback_errors >= 500);
    assert_true(s.rollback_errors < 500 + THREADS);
    free_block(m);
}


/* The window second by second (flags_status's "perSecond", issue 24). */
static void test_window_series(void **state)
{
    (void) state;
    void *m = new_block(60, 1);
    fl_series_t t = { .seconds = 60 };

    eval_n(m, 940, 1, 2);           /* 60 s before 1000: out */
    eval_n(m, 941, 1, 4);           /* 59 s before: the oldest second in */
    eval_n(m, 995, 1, 3);
    eval_n(m, 995, 0, 5);           /* off evaluations are not in it */
    fl_count_error(&FS(m)->t, FS(m)->w, 999);
    fl_count_error(&FS(m)->t, FS(m)->w, 999);
    fl_window_series(FS(m)->w, 1000, &t);
    for (unsigned k = 0; k < FL_SERIES_MAX; k++) {
        uint32_t en = k == 5 ? 3 : k == 59 ? 4 : 0;
        assert_int_equal(t.enabled[k], en);
        assert_int_equal(t.errors[k], k == 1 ? 2 : 0);
    }

    /* a shorter series: only its seconds; a second block adds to it, and
     * a second stamped ahead (another worker's clock) counts as now */
    void *m2 = new_block(10, 1);
    eval_n(m2, 995, 1, 7);
    eval_n(m2, 1001, 1, 1);
    memset(&t, 0, sizeof(t));
    t.seconds = 3;
    fl_window_series(FS(m)->w, 1000, &t);
    fl_window_series(FS(m2)->w, 1000, &t);
    assert_int_equal(t.enabled[0], 1);
    assert_int_equal(t.errors[1], 2);
    assert_int_equal(t.enabled[5], 0);
    memset(&t, 0, sizeof(t));
    t.seconds = 60;
    fl_window_series(FS(m)->w, 1000, &t);
    fl_window_series(FS(m2)->w, 1000, &t);
    assert_int_equal(t.enabled[5], 3 + 7);
    free_block(m);
    free_block(m2);
}


/* -------------------------------------------------------- status JSON */

static const char flags_file[] =
    "{\"flags\":["
    "{\"name\":\"new-checkout\",\"enabled\":true,\"rolloutPercentage\":25,"
    " \"segments\":[\"beta\",\"staff\"]},"
    "{\"name\":\"dark-mode\",\"enabled\":false,\"rolloutPercentage\":12.5}],"
    "\"segments\":{"
    " \"beta\":{\"rules\":[{\"trait\":\"plan\",\"op\":\"eq\",\"value\":\"pro\"}]},"
    " \"staff\":{\"rules\":[{\"trait\":\"staff\",\"op\":\"exists\"}]}}}";

static void status_for(const fl_project_t *p, size_t i, const fl_state_snapshot_t *s,
    int counted, const char *want)
{
    size_t bound = fl_status_flag_json_bound(p, i);
    char *buf = malloc(bound);
    assert_non_null(buf);
    size_t n = fl_status_flag_json(p, i, s, counted, buf);
    assert_true(n <= bound);
    if (n != strlen(want)) print_error("got: %.*s\n", (int) n, buf);
    assert_int_equal(n, strlen(want));
    assert_memory_equal(buf, want, n);
    free(buf);
}

static void test_status_json(void **state)
{
    (void) state;
    fl_project_t *p = NULL;
    char err[256];

    assert_int_equal(fl_project_load_buffer(flags_file, sizeof(flags_file) - 1,
                                            "test", &p, err, sizeof(err)), FL_OK);
    void *m = new_block(60, 1);
    fl_rollback_policy_t pol = { FL_ROLLBACK_ON, 2, 10000, 60, 1 };

    eval_n(m, 100, 1, 3);
    eval_n(m, 100, 0, 1);
    /* a report of the on cohort (issue 17: a report is in a cohort too) */
    record_error(m, 100, 0, &pol);
    fl_series_t series = { .seconds = 60 };
    fl_window_series(FS(m)->w, 100, &series);
    fl_state_snapshot_t s = snap(m, 100);
    s.policy = pol;
    s.series = &series;
    status_for(p, 0, &s, 1,
        "{\"name\":\"new-checkout\",\"enabled\":true,\"rolloutPercentage\":25,"
        "\"segments\":[\"beta\",\"staff\"],\"effectiveRolloutPercentage\":25,"
        "\"rolledBack\":false,\"override\":null,"
        "\"counters\":{\"evaluations\":4,\"enabledEvaluations\":3,\"errors\":1},"
        "\"window\":{\"seconds\":60,\"enabledEvaluations\":3,\"errors\":1,\"sources\":0,\"perSecond\":[[0,3,1]]},"
        "\"rollbackRule\":{\"enabled\":true,\"minErrors\":2,\"rate\":10,\"window\":60,"
        "\"minSources\":1,\"waitingFor\":{\"errors\":1,\"rateErrors\":0,\"sources\":1}},"
        "\"errorsBySource\":{\"reports\":1,\"upstream\":0},"
        "\"cohorts\":{\"on\":{\"evaluations\":3,\"errors\":1,\"errorPercentage\":33.333},"
        "\"off\":{\"evaluations\":1,\"errors\":0,\"errorPercentage\":0}},"
        "\"rollback\":null,\"definedAt\":null,\"zoneFull\":false}");

    assert_int_equal(record_error(m, 100, 1795352709123ULL, &pol), 1);
    fl_control_set_override(&FS(m)->c, FL_OVERRIDE_PERCENT, 33333);
    memset(&series, 0, sizeof(series));
    series.seconds = 60;
    fl_window_series(FS(m)->w, 100, &series);
    s = snap(m, 100);
    s.policy = pol;
    s.window_sources = 1;
    s.series = &series;
    status_for(p, 0, &s, 1,
        "{\"name\":\"new-checkout\",\"enabled\":true,\"rolloutPercentage\":25,"
        "\"segments\":[\"beta\",\"staff\"],\"effectiveRolloutPercentage\":0,"
        "\"rolledBack\":true,\"override\":{\"rolloutPercentage\":33.333},"
        "\"counters\":{\"evaluations\":4,\"enabledEvaluations\":3,\"errors\":2},"
        "\"window\":{\"seconds\":60,\"enabledEvaluations\":3,\"errors\":2,\"sources\":1,\"perSecond\":[[0,3,2]]},"
        "\"rollbackRule\":{\"enabled\":true,\"minErrors\":2,\"rate\":10,\"window\":60,"
        "\"minSources\":1,\"waitingFor\":null},"
        "\"errorsBySource\":{\"reports\":2,\"upstream\":0},"
        "\"cohorts\":{\"on\":{\"evaluations\":3,\"errors\":2,\"errorPercentage\":66.666},"
        "\"off\":{\"evaluations\":1,\"errors\":0,\"errorPercentage\":0}},"
        "\"rollback\":{\"at\":\"2026-11-22T13:05:09.123Z\",\"errors\":2,"
        "\"enabledEvaluations\":3,\"sources\":1,\"decidedBy\":\"rule\"},"
        "\"definedAt\":null,\"zoneFull\":false}");

    clear_rollback(m);
    memset(&series, 0, sizeof(series));
    series.seconds = 60;
    fl_window_series(FS(m)->w, 100, &series);
    s = snap(m, 100);
    s.policy = pol;
    s.series = &series;
    status_for(p, 0, &s, 1,
        "{\"name\":\"new-checkout\",\"enabled\":true,\"rolloutPercentage\":25,"
        "\"segments\":[\"beta\",\"staff\"],\"effectiveRolloutPercentage\":33.333,"
        "\"rolledBack\":false,\"override\":{\"rolloutPercentage\":33.333},"
        "\"counters\":{\"evaluations\":4,\"enabledEvaluations\":3,\"errors\":2},"
        "\"window\":{\"seconds\":60,\"enabledEvaluations\":0,\"errors\":0,\"sources\":0,\"perSecond\":[]},"
        "\"rollbackRule\":{\"enabled\":true,\"minErrors\":2,\"rate\":10,\"window\":60,"
        "\"minSources\":1,\"waitingFor\":{\"errors\":2,\"rateErrors\":0,\"sources\":1}},"
        "\"errorsBySource\":{\"reports\":2,\"upstream\":0},"
        "\"cohorts\":{\"on\":{\"evaluations\":3,\"errors\":2,\"errorPercentage\":66.666},"
        "\"off\":{\"evaluations\":1,\"errors\":0,\"errorPercentage\":0}},"
        "\"rollback\":null,\"definedAt\":null,\"zoneFull\":false}");

    /* A flag off in its file keeps its configured percentage. */
    void *m2 = new_block(30, 1);
    fl_control_set_override(&FS(m2)->c, FL_OVERRIDE_OFF, 0);
    s = snap(m2, 100);
    s.policy = off_policy;
    status_for(p, 1, &s, 1,
        "{\"name\":\"dark-mode\",\"enabled\":false,\"rolloutPercentage\":12.5,"
        "\"segments\":[],\"effectiveRolloutPercentage\":0,"
        "\"rolledBack\":false,\"override\":{\"enabled\":false},"
        "\"counters\":{\"evaluations\":0,\"enabledEvaluations\":0,\"errors\":0},"
        "\"window\":{\"seconds\":30,\"enabledEvaluations\":0,\"errors\":0,\"sources\":0,\"perSecond\":[]},"
        "\"rollbackRule\":{\"enabled\":false,\"minErrors\":1,\"rate\":0,\"window\":60,"
        "\"minSources\":1,\"waitingFor\":null},"
        "\"errorsBySource\":{\"reports\":0,\"upstream\":0},"
        "\"cohorts\":{\"on\":{\"evaluations\":0,\"errors\":0,\"errorPercentage\":null},"
        "\"off\":{\"evaluations\":0,\"errors\":0,\"errorPercentage\":null}},"
        "\"rollback\":null,\"definedAt\":null,\"zoneFull\":false}");
    fl_control_set_override(&FS(m2)->c, FL_OVERRIDE_NONE, 0);
    s = snap(m2, 100);
    s.evaluations = UINT64_MAX;             /* the widest numbers fit */
    s.enabled_evaluations = UINT64_MAX;
    s.errors = UINT64_MAX;
    s.window_enabled = UINT64_MAX;
    s.window_errors = UINT64_MAX;
    s.rolled_back = 1;
    s.rollback_errors = UINT64_MAX;
    s.rollback_enabled = UINT64_MAX;
    s.rollback_at_ms = 253402300799999ULL;
    s.errors_upstream = UINT64_MAX;
    s.on_evaluations = UINT64_MAX;
    s.on_errors = UINT64_MAX;
    s.off_evaluations = UINT64_MAX;
    s.off_errors = UINT64_MAX;
    s.window_sources = UINT64_MAX;
    s.rollback_sources = UINT64_MAX;
    s.rollback_by = FL_DECIDED_FLEET;
    s.policy.mode = FL_ROLLBACK_ON;
    s.policy.min_errors = UINT32_MAX;
    s.policy.rate_milli = 99999;
    s.policy.window = FL_WINDOW_MAX;
    s.policy.min_sources = FL_MIN_SOURCES_MAX;
    status_for(p, 1, &s, 1,
        "{\"name\":\"dark-mode\",\"enabled\":false,\"rolloutPercentage\":12.5,"
        "\"segments\":[],\"effectiveRolloutPercentage\":0,"
        "\"rolledBack\":true,\"override\":null,"
        "\"counters\":{\"evaluations\":18446744073709551615,"
        "\"enabledEvaluations\":18446744073709551615,\"errors\":18446744073709551615},"
        "\"window\":{\"seconds\":30,\"enabledEvaluations\":18446744073709551615,"
        "\"errors\":18446744073709551615,\"sources\":18446744073709551615,\"perSecond\":[]},"
        "\"rollbackRule\":{\"enabled\":true,\"minErrors\":4294967295,\"rate\":99.999,"
        "\"window\":3600,\"minSources\":32,\"waitingFor\":null},"
        "\"errorsBySource\":{\"reports\":0,\"upstream\":18446744073709551615},"
        "\"cohorts\":{\"on\":{\"evaluations\":18446744073709551615,"
        "\"errors\":18446744073709551615,\"errorPercentage\":100},"
        "\"off\":{\"evaluations\":18446744073709551615,"
        "\"errors\":18446744073709551615,\"errorPercentage\":100}},"
        "\"rollback\":{\"at\":\"9999-12-31T23:59:59.999Z\","
        "\"errors\":18446744073709551615,\"enabledEvaluations\":18446744073709551615,"
        "\"sources\":18446744073709551615,\"decidedBy\":\"fleet\"},"
        "\"definedAt\":null,\"zoneFull\":false}");

    /* the widest "waitingFor" fits the bound too */
    s.rolled_back = 0;
    s.window_errors = 0;
    s.window_sources = 0;
    s.policy.rate_milli = 100000;
    /* and the widest series: 60 busy seconds of the largest counts */
    s.window_seconds = FL_WINDOW_MAX;
    series.seconds = FL_SERIES_MAX;
    for (unsigned k = 0; k < FL_SERIES_MAX; k++) {
        series.enabled[k] = UINT32_MAX;
        series.errors[k] = UINT32_MAX;
    }
    s.series = &series;
    {
        size_t bound = fl_status_flag_json_bound(p, 1);
        char *buf = malloc(bound);
        assert_non_null(buf);
        size_t n = fl_status_flag_json(p, 1, &s, 1, buf);
        assert_true(n > 0 && n <= bound);
        const char *widest = "\"waitingFor\":{\"errors\":4294967295,"
            "\"rateErrors\":18446744073709551615,\"sources\":32}";
        assert_non_null(memmem(buf, n, widest, strlen(widest)));
        free(buf);
    }

    /* Sources and cohorts: reports are the errors that are not upstream;
     * percentages round down to 3 decimals; more errors than evaluations
     * (a snapshot read between two counters) reads 100. */
    memset(&s, 0, sizeof(s));
    s.window_seconds = 30;
    s.evaluations = 20;
    s.errors = 7;
    s.errors_upstream = 5;
    s.on_evaluations = 8;
    s.on_errors = 5;
    s.off_evaluations = 3;
    s.off_errors = 1;
    s.policy = off_policy;
    status_for(p, 1, &s, 1,
        "{\"name\":\"dark-mode\",\"enabled\":false,\"rolloutPercentage\":12.5,"
        "\"segments\":[],\"effectiveRolloutPercentage\":12.5,"
        "\"rolledBack\":false,\"override\":null,"
        "\"counters\":{\"evaluations\":20,\"enabledEvaluations\":0,\"errors\":7},"
        "\"window\":{\"seconds\":30,\"enabledEvaluations\":0,\"errors\":0,\"sources\":0,\"perSecond\":[]},"
        "\"rollbackRule\":{\"enabled\":false,\"minErrors\":1,\"rate\":0,\"window\":60,"
        "\"minSources\":1,\"waitingFor\":null},"
        "\"errorsBySource\":{\"reports\":2,\"upstream\":5},"
        "\"cohorts\":{\"on\":{\"evaluations\":8,\"errors\":5,\"errorPercentage\":62.5},"
        "\"off\":{\"evaluations\":3,\"errors\":1,\"errorPercentage\":33.333}},"
        "\"rollback\":null,\"definedAt\":null,\"zoneFull\":false}");
    s.errors = 4;                           /* upstream read after errors */
    s.off_evaluations = 1;
    s.off_errors = 2;
    s.on_evaluations = 3;
    s.on_errors = 0;
    status_for(p, 1, &s, 1,
        "{\"name\":\"dark-mode\",\"enabled\":false,\"rolloutPercentage\":12.5,"
        "\"segments\":[],\"effectiveRolloutPercentage\":12.5,"
        "\"rolledBack\":false,\"override\":null,"
        "\"counters\":{\"evaluations\":20,\"enabledEvaluations\":0,\"errors\":4},"
        "\"window\":{\"seconds\":30,\"enabledEvaluations\":0,\"errors\":0,\"sources\":0,\"perSecond\":[]},"
        "\"rollbackRule\":{\"enabled\":false,\"minErrors\":1,\"rate\":0,\"window\":60,"
        "\"minSources\":1,\"waitingFor\":null},"
        "\"errorsBySource\":{\"reports\":0,\"upstream\":4},"
        "\"cohorts\":{\"on\":{\"evaluations\":3,\"errors\":0,\"errorPercentage\":0},"
        "\"off\":{\"evaluations\":1,\"errors\":2,\"errorPercentage\":100}},"
        "\"rollback\":null,\"definedAt\":null,\"zoneFull\":false}");

    /* A flag without room in the zone: a zeroed snapshot, zoneFull. */
    memset(&s, 0, sizeof(s));
    s.policy = pol;
    status_for(p, 0, &s, 0,
        "{\"name\":\"new-checkout\",\"enabled\":true,\"rolloutPercentage\":25,"
        "\"segments\":[\"beta\",\"staff\"],\"effectiveRolloutPercentage\":25,"
        "\"rolledBack\":false,\"override\":null,"
        "\"counters\":{\"evaluations\":0,\"enabledEvaluations\":0,\"errors\":0},"
        "\"window\":{\"seconds\":0,\"enabledEvaluations\":0,\"errors\":0,\"sources\":0,\"perSecond\":[]},"
        "\"rollbackRule\":{\"enabled\":true,\"minErrors\":2,\"rate\":10,\"window\":60,"
        "\"minSources\":1,\"waitingFor\":null},"
        "\"errorsBySource\":{\"reports\":0,\"upstream\":0},"
        "\"cohorts\":{\"on\":{\"evaluations\":0,\"errors\":0,\"errorPercentage\":null},"
        "\"off\":{\"evaluations\":0,\"errors\":0,\"errorPercentage\":null}},"
        "\"rollback\":null,\"definedAt\":null,\"zoneFull\":true}");

    /* Out of range. */
    assert_int_equal(fl_status_flag_json_bound(p, 2), 0);
    char small[8];
    assert_int_equal(fl_status_flag_json(p, 2, &s, 1, small), 0);

    free_block(m);
    free_block(m2);
    fl_project_free(p);
}

/* ---------------------------------------------------- policy resolution */

static fl_rollback_policy_t pol(fl_rollback_mode_t mode, uint32_t min_errors,
    uint32_t rate_milli, uint32_t window)
{
    fl_rollback_policy_t p;

    p.mode = mode;
    p.min_errors = min_errors;
    p.rate_milli = rate_milli;
    p.window = window;
    return p;
}

static void assert_policy(const fl_rollback_policy_t *p, fl_rollback_mode_t mode,
    uint32_t min_errors, uint32_t rate_milli, uint32_t window)
{
    assert_int_equal(p->mode, mode);
    assert_int_equal(p->min_errors, min_errors);
    assert_int_equal(p->rate_milli, rate_milli);
    assert_int_equal(p->window, window);
}

static void test_policy_default(void **state)
{
    (void) state;
    fl_rollback_policy_t d = fl_rollback_policy_default();

    /* min_errors=20 rate=10% window=60s */
    assert_policy(&d, FL_ROLLBACK_ON, 20, 10000, 60);
}

static void test_policy_resolve(void **state)
{
    (void) state;
    fl_rollback_policy_t http = pol(FL_ROLLBACK_ON, 5, 2500, 300);
    fl_rollback_policy_t off = pol(FL_ROLLBACK_OFF, 7, 3000, 90);
    fl_rollback_policy_t flag, out;

    /* no "rollback": the http policy, on or off */
    flag = pol(FL_ROLLBACK_INHERIT, 0, 0, 0);
    fl_rollback_policy_resolve(&flag, &http, &out);
    assert_policy(&out, FL_ROLLBACK_ON, 5, 2500, 300);
    fl_rollback_policy_resolve(&flag, &off, &out);
    assert_policy(&out, FL_ROLLBACK_OFF, 7, 3000, 90);

    /* "rollback": false disables, whatever the http policy */
    flag = pol(FL_ROLLBACK_OFF, 0, 0, 0);
    fl_rollback_policy_resolve(&flag, &http, &out);
    assert_int_equal(out.mode, FL_ROLLBACK_OFF);
    assert_int_equal(out.window, 300);

    /* an object fills its gaps from the http policy */
    flag = pol(FL_ROLLBACK_ON, 50, 0, 0);
    fl_rollback_policy_resolve(&flag, &http, &out);
    assert_policy(&out, FL_ROLLBACK_ON, 50, 2500, 300);
    flag = pol(FL_ROLLBACK_ON, 0, 500, 0);
    fl_rollback_policy_resolve(&flag, &http, &out);
    assert_policy(&out, FL_ROLLBACK_ON, 5, 500, 300);
    flag = pol(FL_ROLLBACK_ON, 1, 1, 1);
    fl_rollback_policy_resolve(&flag, &http, &out);
    assert_policy(&out, FL_ROLLBACK_ON, 1, 1, 1);

    /* ... or from the built-in defaults when flags_rollback is off; the
     * object still switches rollback on for its flag */
    flag = pol(FL_ROLLBACK_ON, 0, 0, 120);
    fl_rollback_policy_resolve(&flag, &off, &out);
    assert_policy(&out, FL_ROLLBACK_ON, 20, 10000, 120);

    /* no http policy reads as the default; in place works */
    flag = pol(FL_ROLLBACK_ON, 0, 0, 0);
    fl_rollback_policy_resolve(&flag, NULL, &flag);
    assert_policy(&flag, FL_ROLLBACK_ON, 20, 10000, 60);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_size_and_init),
        cmocka_unit_test(test_exact_counts),
        cmocka_unit_test(test_count_prefetch_changes_nothing),
        cmocka_unit_test(test_cohorts_and_upstream_errors),
        cmocka_unit_test(test_one_second_buckets_and_rotation),
        cmocka_unit_test(test_expiry_after_window),
        cmocka_unit_test(test_long_idle_gap),
        cmocka_unit_test(test_clock_backwards),
        cmocka_unit_test(test_32bit_stamps),
        cmocka_unit_test(test_rollback_decide),
        cmocka_unit_test(test_policy_default),
        cmocka_unit_test(test_policy_resolve),
        cmocka_unit_test(test_record_error_trips_once),
        cmocka_unit_test(test_record_error_rate_not_reached),
        cmocka_unit_test(test_record_error_mode_off),
        cmocka_unit_test(test_record_error_window),
        cmocka_unit_test(test_clear_rollback),
        cmocka_unit_test(test_override_precedence),
        cmocka_unit_test(test_new_definition),
        cmocka_unit_test(test_carry),
        cmocka_unit_test(test_restore_rollback),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_concurrent_exact),
        cmocka_unit_test(test_window_series),
        cmocka_unit_test(test_status_json),
        cmocka_unit_test(test_source_key),
        cmocka_unit_test(test_window_sources),
        cmocka_unit_test(test_rollback_sources),
        cmocka_unit_test(test_rollback_record_by),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
