/*
 * bench/sources.c - what min_sources costs an error report (docs/rollback.md),
 * and what a ramp's witnesses add to it (docs/regression.md).
 *
 * The work a counted error does in the zone, on caller memory like the
 * zone's: count the error, sum the window, decide.  Baseline: that work as
 * it was before sources (fl_count_error, fl_window_sums,
 * fl_rollback_decide).  Measured: the same plus remembering the source
 * (fl_count_source) and counting the window's distinct sources
 * (fl_window_sources), with 1, 8 and 64 distinct sources cycling.  The two
 * are alternated in rounds and the median round is printed, as ns per
 * report and as the ratio of the baseline's throughput.
 *
 * The second table is a ramped flag's report: the work above with
 * sources as its baseline, and measured with its witness counted
 * (fl_witness_count) and the backstop's comparison (fl_ramp_backstop)
 * at each decision, with 1, 64 and 1,024 distinct witnesses cycling
 * (ticks of 1 s, so a witness counts again each tick until its two).
 *
 *   bench/sources.sh        builds it against build/core/libflagscore.a
 */

#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "flags_core.h"

#define REPORTS  200000
#define ROUNDS   9

static double now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

/* One run of REPORTS counted errors; returns ns per report. */
typedef struct {
    fl_witness_t       *w;
    fl_ramp_t          *r;
    fl_ramp_def_t      *d;
} witness_t;

static double run(fl_window_t *w, fl_totals_t *t, const uint32_t *keys,
    size_t nkeys, int sources, const witness_t *wit)
{
    fl_rollback_policy_t p = { FL_ROLLBACK_ON, UINT32_MAX, 10000, 60, 3 };
    uint64_t en, er, decided = 0;
    uint32_t seen[FL_SOURCE_SLOTS];
    double t0 = now_ns();

    for (size_t i = 0; i < REPORTS; i++) {
        int64_t now = 1000 + (int64_t) (i / 20000);     /* 10 s a run */
        size_t n = 0;

        fl_count_error(t, w, now);
        if (sources) {
            fl_count_source(w, now, keys[i % nkeys]);
        }
        en = er = 0;
        fl_window_sums(w, now, 60, &en, &er);
        if (sources) {
            fl_window_sources(w, now, 60, seen, &n, FL_SOURCE_SLOTS);
        }
        decided += fl_rollback_decide(er, en, n ? n : 1, &p);
        if (wit != NULL) {
            fl_ramp_input_t in;
            memset(&in, 0, sizeof(in));
            in.on = i;
            in.off = 19 * i;
            decided += fl_witness_count(wit->w, wit->r, 1, keys[i % nkeys],
                                        (uint64_t) now * 1000, 1);
            in.on_errors = wit->w->errors_on;
            decided += fl_ramp_backstop(wit->d, wit->r, wit->w, &in, 60);
        }
    }
    if (decided == UINT64_MAX) {
        puts("");                       /* keeps the loop */
    }
    return (now_ns() - t0) / REPORTS;
}

/* One row of a table: ROUNDS alternated rounds of the baseline (sources
 * as base_sources says, no witness) and the measured side (sources, and
 * the witness when wit is given, its state started afresh each round);
 * prints the median of each and their ratio. */
static void row(void *mem, const uint32_t *keys, size_t nkeys,
    int base_sources, const witness_t *wit)
{
    double base[ROUNDS], with[ROUNDS];
    fl_totals_t t;

    for (int r = 0; r < ROUNDS; r++) {
        fl_window_t *w = fl_window_init(mem, 60);
        memset(&t, 0, sizeof(t));
        base[r] = run(w, &t, keys, nkeys, base_sources, NULL);
        w = fl_window_init(mem, 60);
        memset(&t, 0, sizeof(t));
        if (wit != NULL) {
            fl_ramp_input_t in;
            fl_witness_init(wit->w);
            fl_ramp_init(wit->r);
            memset(&in, 0, sizeof(in));
            fl_ramp_step(wit->d, wit->r, 1000 * 1000, &in);
            fl_witness_roll(wit->w, &in, 1000 * 1000, 1);
        }
        with[r] = run(w, &t, keys, nkeys, 1, wit);
    }
    qsort(base, ROUNDS, sizeof(double), cmp);
    qsort(with, ROUNDS, sizeof(double), cmp);
    printf("%-28zu %12.1f %12.1f %8.2f\n", nkeys, base[ROUNDS / 2],
           with[ROUNDS / 2], base[ROUNDS / 2] / with[ROUNDS / 2]);
}

int main(void)
{
    static const size_t distinct[] = { 1, 8, 64 };
    static const size_t witnesses[] = { 1, 64, 1024 };
    static uint32_t keys[1024];
    static fl_witness_t wb;
    fl_ramp_t rs;
    fl_ramp_def_t def;
    witness_t wit = { &wb, &rs, &def };
    void *mem;

    if (posix_memalign(&mem, 64, fl_window_size(60)) != 0) {
        return 1;
    }
    for (uint32_t k = 0; k < 1024; k++) {
        char a[16];
        int len = snprintf(a, sizeof(a), "10.0.%u.%u", k / 256, k % 256);
        keys[k] = fl_source_key(NULL, 0, a, (size_t) len);
    }

    printf("%-28s %12s %12s %8s\n", "distinct sources", "base ns", "sources ns",
           "ratio");
    for (size_t d = 0; d < sizeof(distinct) / sizeof(distinct[0]); d++) {
        row(mem, keys, distinct[d], 0, NULL);
    }

    /* a ramped flag at 5 %, ticks of 1 s, its ramp started */
    memset(&def, 0, sizeof(def));
    def.nstages = 2;
    def.stages[0].milli = 5000;
    def.stages[0].hold = 3600;
    def.stages[1].milli = 100000;
    def.alpha_ppm = 10000;
    def.dispersion_milli = 2000;
    def.tick = 1;

    printf("\n%-28s %12s %12s %8s\n", "distinct witnesses (ramp)",
           "sources ns", "witness ns", "ratio");
    for (size_t d = 0; d < sizeof(witnesses) / sizeof(witnesses[0]); d++) {
        row(mem, keys, witnesses[d], 1, &wit);
    }
    free(mem);
    return 0;
}
