/*
 * bench/answer-loop.c - GET /flags' answer in the core alone, without
 * nginx or the kernel: fl_flags_answer() (one pass: evaluation, JSON and
 * the values' bits) against the two-pass way it replaced,
 * fl_evaluate_values() then fl_flags_json(), and against itself with its
 * 8-lane buckets turned off (fl_lanes_set(0): the scalar path, what a CPU
 * without AVX2 runs), measured in the same run.
 *
 *   answer-loop FLAGS.json [USERS] [ROUNDS]
 *
 * Each round asks every one of USERS distinct callers (default 100,000:
 * bench-user-1 ... with the traits bench/run.sh sends) once each way,
 * the ways taking turns at going first. The percentages in force
 * and the switches are passed as arrays, as the nginx glue passes them.
 * Printed: each way's thread CPU µs an answer (median of ROUNDS, default
 * 5), the ratios two-pass / one-pass and scalar / lanes (above 1: the
 * second is dearer), and the answers' bytes. Before timing, every
 * caller's answers are compared byte for byte and flag by flag, with the
 * lanes and without: a difference exits 1.
 *
 * Built and run by bench/answer-loop.sh against build/core/libflagscore.a.
 */

#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "flags_core.h"

/* the request pool of one answer: a bump allocator reset per caller */
static char    pool[1 << 16];
static size_t  pool_used;

static void *pool_alloc(void *ctx, size_t n)
{
    (void) ctx;
    n = (n + 15) & ~(size_t) 15;
    if (pool_used + n > sizeof(pool)) {
        return NULL;
    }
    void *p = pool + pool_used;
    pool_used += n;
    return p;
}

static double cpu_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

/* BENCH_TRAITS=varied: each caller's traits drawn from its number, so
 * that which segments match changes from caller to caller as it does in
 * real traffic (the default: every caller has bench/run.sh's traits) */
static int varied;

static int caller(size_t k, fl_user_t *u)
{
    /* the first of each: bench/run.sh's */
    static const char *plans[] = { "pro", "free", "team", "enterprise" };
    static const char *countries[] = { "de", "at", "ch", "fr", "us" };
    static const char *versions[] = { "2.3.1", "3.0.0", "1.9.9" };
    static const char *domains[] = { "example.com", "deployramp.com" };
    static char q[256];
    fl_alloc_t alloc = { pool_alloc, NULL };
    char err[256];
    uint32_t r = (uint32_t) (k + 1) * 2654435761u;
    /* bench/run.sh's traits, or the caller's own */
    unsigned v = varied != 0;
    int len = snprintf(q, sizeof(q), "userId=bench-user-%zu&trait_plan=%s"
                       "&trait_country=%s&trait_appVersion=%s"
                       "&trait_email=ana.silva%%40%s&trait_sessions=%u",
                       k + 1, plans[v * ((r >> 4) % 4)],
                       countries[v * ((r >> 8) % 5)],
                       versions[v * ((r >> 12) % 3)],
                       domains[v * ((r >> 16) % 2)],
                       v ? (r >> 20) % 100 : 42);

    pool_used = 0;
    if (fl_parse_query(q, (size_t) len, 64, &alloc, u, err, sizeof(err))
        != FL_OK)
    {
        fprintf(stderr, "answer-loop: query: %s\n", err);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: answer-loop FLAGS.json [USERS] [ROUNDS]\n");
        return 2;
    }
    const char *traits = getenv("BENCH_TRAITS");
    varied = traits != NULL && strcmp(traits, "varied") == 0;
    size_t users = argc > 2 ? strtoul(argv[2], NULL, 10) : 100000;
    int rounds = argc > 3 ? atoi(argv[3]) : 5;
    if (users == 0 || rounds < 1 || rounds > 99) {
        fprintf(stderr, "answer-loop: USERS >= 1, ROUNDS 1 to 99\n");
        return 2;
    }

    FILE *f = fopen(argv[1], "rb");
    if (f == NULL) {
        perror(argv[1]);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    rewind(f);
    char *text = malloc((size_t) size + 1);
    if (text == NULL || fread(text, 1, (size_t) size, f) != (size_t) size) {
        fprintf(stderr, "answer-loop: cannot read %s\n", argv[1]);
        return 1;
    }
    fclose(f);

    fl_project_t *p;
    char err[512];
    if (fl_project_load_buffer(text, (size_t) size, argv[1], &p, err,
                               sizeof(err)) != FL_OK)
    {
        fprintf(stderr, "answer-loop: %s\n", err);
        return 1;
    }

    size_t n = fl_project_flag_count(p), bound = fl_flags_json_bound(p);
    fl_detail_t *detail = calloc(n + 1, sizeof(*detail));
    uint64_t *bits = calloc(FL_BIT_WORDS(n) + 1, sizeof(uint64_t));
    uint32_t *eff = calloc(n + 1, sizeof(uint32_t));
    uint8_t *sw = calloc(n + 1, 1);
    char *one = malloc(bound), *two = malloc(bound);
    double *t1 = calloc((size_t) rounds, sizeof(double));
    double *t2 = calloc((size_t) rounds, sizeof(double));
    double *t3 = calloc((size_t) rounds, sizeof(double));
    fl_user_t u;
    /* -1: no AVX2 here, the one pass is the scalar path already */
    int lanes = fl_lanes_set(1);

    /* the configured percentages, no switch: what the glue's cache of
     * the controls holds when nothing is rolled back or overridden */
    fl_evaluate_values(p, NULL, NULL, NULL, detail);
    for (size_t i = 0; i < n; i++) {
        eff[i] = detail[i].rollout_milli;
    }

    unsigned long long bytes = 0;
    for (size_t k = 0; k < users; k++) {
        if (caller(k, &u) != 0) {
            return 1;
        }
        fl_evaluate_values(p, &u, eff, sw, detail);
        size_t l2 = fl_flags_json(p, detail, two);
        for (int on = 1; on >= 0; on--) {
            fl_lanes_set(on);
            size_t l1 = fl_flags_answer(p, &u, eff, sw, bits, one);
            if (l1 != l2 || memcmp(one, two, l1) != 0) {
                fprintf(stderr, "answer-loop: caller %zu: the answers differ"
                        " (lanes %s)\n", k + 1, on ? "on" : "off");
                return 1;
            }
            for (size_t i = 0; i < n; i++) {
                if (((bits[i / 64] >> (i % 64)) & 1) != detail[i].enabled) {
                    fprintf(stderr, "answer-loop: caller %zu, flag %zu: the "
                            "values differ (lanes %s)\n", k + 1, i,
                            on ? "on" : "off");
                    return 1;
                }
            }
        }
        fl_lanes_set(1);
        bytes += l2;
    }

    for (int r = 0; r < rounds; r++) {
        for (int side = 0; side < 3; side++) {
            int way = (r + side) % 3;       /* each goes first in turn */
            if (way == 2 && lanes == -1) {
                continue;
            }
            fl_lanes_set(way != 2);
            double start = cpu_us();
            for (size_t k = 0; k < users; k++) {
                caller(k, &u);
                if (way != 1) {
                    fl_flags_answer(p, &u, eff, sw, bits, one);
                } else {
                    fl_evaluate_values(p, &u, eff, sw, detail);
                    fl_flags_json(p, detail, two);
                }
            }
            double us = (cpu_us() - start) / (double) users;
            (way == 0 ? t1 : way == 1 ? t2 : t3)[r] = us;
        }
    }
    fl_lanes_set(1);

    qsort(t1, (size_t) rounds, sizeof(double), cmp_double);
    qsort(t2, (size_t) rounds, sizeof(double), cmp_double);
    qsort(t3, (size_t) rounds, sizeof(double), cmp_double);
    double m1 = t1[rounds / 2], m2 = t2[rounds / 2], m3 = t3[rounds / 2];

    printf("%s: %zu flags, %zu distinct callers (%s traits), %d rounds, "
           "%llu bytes an answer on average\n", argv[1], n, users,
           varied ? "varied" : "the same", rounds,
           bytes / (unsigned long long) users);
    printf("one pass (fl_flags_answer)           %8.3f us CPU an answer\n",
           m1);
    printf("two passes (values, then flags_json) %8.3f us CPU an answer\n",
           m2);
    printf("ratio two / one                      %8.3f\n", m2 / m1);
    if (lanes == -1) {
        printf("one pass, scalar buckets             (this CPU has no AVX2:"
               " the one pass above is the scalar path)\n");
    } else {
        printf("one pass, scalar buckets (lanes off) %8.3f us CPU an answer\n",
               m3);
        printf("ratio scalar / lanes                 %8.3f\n", m3 / m1);
    }

    free(t3);
    free(t1);
    free(t2);
    free(one);
    free(two);
    free(sw);
    free(eff);
    free(bits);
    free(detail);
    free(text);
    fl_project_free(p);
    return 0;
}
