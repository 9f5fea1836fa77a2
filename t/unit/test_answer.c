/*
 * test_answer.c - fl_flags_answer(), GET /flags' answer in one pass
 * (issue 27): the same bytes as fl_flags_json() writes for
 * fl_evaluate_values()'s results, and the same value a flag in its bits,
 * for projects and callers drawn at random: flags whose "name:" leaves
 * 0 to 3 bytes waiting, on and off in the file, with and without
 * segments, rules, named users and stickiness; callers with ids of 0 to
 * 70 bytes (the mixed path takes 4 to 64), without one, without a query;
 * the configured percentages and effective ones with every switch; with
 * the 8-lane buckets (AVX2) and without; and the tally that counts
 * its values (fl_tally_add()).
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

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(uint32_t n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t) (rng_state % n);
}

static const uint32_t percents[] = {
    0, 1, 5000, 12500, 33333, 50000, 50000, 75000, 99999, 100000, 100000
};

static void put_pct(char **o, uint32_t milli)
{
    *o += sprintf(*o, "%u.%03u", milli / 1000, milli % 1000);
}

/* A project of nflags flags; every_rules: every how many flags one has
 * rules and named users (0: none), stickiness likewise. */
static char *project_json(size_t nflags, unsigned every_rules,
    unsigned every_sticky)
{
    char *json = malloc(nflags * 400 + 1024), *o = json;
    static const char *segs[] = { "pro", "de", "nobody" };

    o += sprintf(o, "{\"flags\":[");
    for (size_t i = 0; i < nflags; i++) {
        /* names of 3 to 10 characters: every alignment of "name:" */
        unsigned extra = rnd(8);
        o += sprintf(o, "%s{\"name\":\"f%zu", i ? "," : "", i);
        for (unsigned k = 0; k < extra; k++) {
            *o++ = (char) ('a' + rnd(26));
        }
        o += sprintf(o, "\",\"enabled\":%s,\"rolloutPercentage\":",
                     rnd(6) == 0 ? "false" : "true");
        put_pct(&o, percents[rnd(sizeof(percents) / sizeof(percents[0]))]);

        if (every_sticky && i % every_sticky == 1) {
            o += sprintf(o, ",\"stickiness\":\"plan\"");
        }

        if (every_rules && i % every_rules == 0) {
            o += sprintf(o, ",\"rules\":[{\"segments\":[\"pro\"],"
                            "\"rolloutPercentage\":30},"
                            "{\"segments\":[],\"rolloutPercentage\":60}],"
                            "\"targets\":{\"on\":[\"user-1\",\"user-7\"],"
                            "\"off\":[\"user-2\"]}}");
            continue;
        }

        o += sprintf(o, ",\"segments\":[");
        unsigned ns = rnd(3);
        for (unsigned k = 0; k < ns; k++) {
            o += sprintf(o, "%s\"%s\"", k ? "," : "", segs[rnd(3)]);
        }
        o += sprintf(o, "]}");
    }
    o += sprintf(o, "],\"segments\":{"
        "\"pro\":{\"rules\":[{\"trait\":\"plan\",\"op\":\"in\","
        "\"values\":[\"pro\",\"team\"]}]},"
        "\"de\":{\"rules\":[{\"trait\":\"country\",\"op\":\"eq\","
        "\"value\":\"DE\",\"ignoreCase\":true}]},"
        "\"nobody\":{\"rules\":[{\"trait\":\"plan\",\"op\":\"eq\","
        "\"value\":\"none\"}]}}}");
    return json;
}

/* The caller's query: an id of len bytes (SIZE_MAX: none) and traits. */
static void query(char *q, size_t len)
{
    static const char *plans[] = { "pro", "free", "team" };
    static const char *countries[] = { "de", "DE", "fr" };
    char *o = q;

    if (len != SIZE_MAX) {
        o += sprintf(o, "userId=");
        for (size_t k = 0; k < len; k++) {
            *o++ = (char) ('a' + rnd(26));
        }
        *o++ = '&';
    }
    sprintf(o, "trait_plan=%s&trait_country=%s", plans[rnd(3)],
            countries[rnd(3)]);
}

/* fl_flags_answer() against fl_evaluate_values() + fl_flags_json() for
 * one caller and one set of percentages and switches. */
static void same_answer(fl_project_t *p, const fl_user_t *u,
    const uint32_t *eff, const uint8_t *sw)
{
    size_t n = fl_project_flag_count(p), bound = fl_flags_json_bound(p);
    fl_detail_t *d = calloc(n + 1, sizeof(*d));
    uint64_t *bits = malloc((FL_BIT_WORDS(n) + 1) * sizeof(uint64_t));
    /* got: the bound and a guard after it, which no answer writes (the
     * copies past an object stay inside the bound) */
    char *want = malloc(bound), *got = malloc(bound + 64), guard[64];
    memset(guard, 0xa5, sizeof(guard));
    memcpy(got + bound, guard, sizeof(guard));

    fl_evaluate_values(p, u, eff, sw, d);
    size_t wn = fl_flags_json(p, d, want);

    /* a word past the last is never written */
    bits[FL_BIT_WORDS(n)] = 0x5a5a5a5a5a5a5a5aull;
    size_t gn = fl_flags_answer(p, u, eff, sw, bits, got);

    assert_int_equal(gn, wn);
    assert_memory_equal(got, want, wn);
    assert_memory_equal(got + bound, guard, sizeof(guard));
    for (size_t i = 0; i < n; i++) {
        unsigned bit = (unsigned) ((bits[i / 64] >> (i % 64)) & 1);
        assert_int_equal(bit, d[i].enabled);

        /* and flag by flag without the evaluation's caches: each
         * segment tried in turn, no bits of segments, no mixed id */
        fl_detail_t one;
        assert_int_equal(fl_evaluate_flag_detail(p, i, u,
                             eff ? eff[i] : d[i].rollout_milli,
                             sw ? sw[i] : FL_SWITCH_NONE, &one), 0);
        assert_int_equal(bit, one.enabled);
    }
    if (n % 64) {
        /* bits past the last flag stay zero */
        assert_int_equal(bits[n / 64] >> (n % 64), 0);
    }
    assert_int_equal(bits[FL_BIT_WORDS(n)], 0x5a5a5a5a5a5a5a5aull);

    /* the same bytes and bits whichever way the segments are evaluated:
     * all first (0) or only for the flags inside their percentage (1) */
    for (int mode = 0; mode <= 1; mode++) {
        uint64_t *again = calloc(FL_BIT_WORDS(n) + 1, sizeof(uint64_t));
        int was = fl_answer_lazy_set(mode);
        size_t an = fl_flags_answer(p, u, eff, sw, again, got);
        assert_int_equal(fl_answer_lazy_set(was), mode);
        assert_int_equal(an, wn);
        assert_memory_equal(got, want, wn);
        assert_memory_equal(again, bits, FL_BIT_WORDS(n) * sizeof(uint64_t));
        assert_memory_equal(got + bound, guard, sizeof(guard));
        free(again);
    }

    free(d);
    free(bits);
    free(want);
    free(got);
}

/* same_answer() with the percentages and switches the glue passes when
 * nothing changed them (each flag's configured percentage, no switch:
 * every object one copy where lanes run), then with one flag in seven
 * rolled back, overridden or at another percentage (those written one by
 * one). */
static void same_answer_configured(fl_project_t *p, const fl_user_t *u)
{
    size_t n = fl_project_flag_count(p);
    fl_detail_t *d = calloc(n + 1, sizeof(*d));
    uint32_t *eff = malloc((n + 1) * sizeof(uint32_t));
    uint8_t *sw = malloc(n + 1);

    fl_evaluate_values(p, u, NULL, NULL, d);
    for (size_t i = 0; i < n; i++) {
        eff[i] = d[i].rollout_milli;
        sw[i] = FL_SWITCH_NONE;
    }
    same_answer(p, u, eff, sw);

    for (size_t i = rnd(7); i < n; i += 1 + rnd(13)) {
        if (rnd(2)) {
            sw[i] = (uint8_t) (1 + rnd(3));
        } else {
            eff[i] = percents[rnd(sizeof(percents) / sizeof(percents[0]))];
        }
    }
    same_answer(p, u, eff, sw);

    free(d);
    free(eff);
    free(sw);
}

static void check_project(size_t nflags, unsigned every_rules,
    unsigned every_sticky, unsigned callers)
{
    char *json = project_json(nflags, every_rules, every_sticky);
    fl_project_t *p = load(json);
    size_t n = fl_project_flag_count(p);
    uint32_t *eff = malloc((n + 1) * sizeof(uint32_t));
    uint8_t *sw = malloc(n + 1);
    char q[256];

    assert_int_equal(n, nflags);

    for (unsigned c = 0; c < callers; c++) {
        /* ids of 0 to 70 bytes, and none */
        size_t len = rnd(12) == 0 ? SIZE_MAX : rnd(71);
        query(q, len);
        fl_user_t u = user(q);

        same_answer(p, &u, NULL, NULL);
        same_answer_configured(p, &u);

        for (size_t i = 0; i < n; i++) {
            eff[i] = percents[rnd(sizeof(percents) / sizeof(percents[0]))];
            sw[i] = (uint8_t) rnd(4);       /* every fl_switch_t */
        }
        same_answer(p, &u, eff, sw);
        same_answer(p, &u, eff, NULL);
        arena_reset();
    }

    /* no caller at all */
    same_answer(p, NULL, NULL, NULL);
    same_answer(p, NULL, eff, sw);

    free(eff);
    free(sw);
    fl_project_free(p);
    free(json);
}

/* Simple flags only: 1 and 2 (the last object is copied by its length),
 * 7 (too few to mix the id), 8, 64 (one word of bits exactly), 65 (the
 * last flag alone in its word) and 1,000. */
static void test_simple_flags(void **state)
{
    (void) state;
    check_project(1, 0, 0, 200);
    check_project(2, 0, 0, 200);
    check_project(7, 0, 0, 200);
    check_project(8, 0, 0, 200);
    check_project(64, 0, 0, 200);
    check_project(65, 0, 0, 200);
    check_project(1000, 0, 0, 40);
}

/* With flags that take flag_value() itself: rules and named users (the
 * callers user-1, user-2 and user-7 among them), stickiness. */
static void test_flags_with_rules(void **state)
{
    (void) state;
    check_project(30, 3, 0, 200);
    check_project(30, 0, 4, 200);
    check_project(200, 5, 7, 60);

    /* named users: an id drawn at random is rarely one */
    char *json = project_json(9, 1, 0);
    fl_project_t *p = load(json);
    static const char *ids[] = { "user-1", "user-2", "user-7", "user-3" };
    for (size_t k = 0; k < 4; k++) {
        char q[64];
        snprintf(q, sizeof(q), "userId=%s&trait_plan=free", ids[k]);
        fl_user_t u = user(q);
        same_answer(p, &u, NULL, NULL);
    }
    arena_reset();
    fl_project_free(p);
    free(json);
}

/* Flags of many segments: some flags' segments all among the first 64
 * (decided by bits), some with one beyond (decided one by one). Segment
 * k matches a caller whose plan is plans[k % 3], and for odd k whose
 * country is de too. */
static void test_many_segments(void **state)
{
    (void) state;
    static const char *plans[] = { "pro", "free", "team" };
    size_t nsegs = 70, nflags = 300;
    char *json = malloc(nflags * 200 + nsegs * 200 + 64), *o = json;

    o += sprintf(o, "{\"flags\":[");
    for (size_t i = 0; i < nflags; i++) {
        o += sprintf(o, "%s{\"name\":\"m%zu\",\"enabled\":true,"
                        "\"rolloutPercentage\":", i ? "," : "", i);
        put_pct(&o, percents[rnd(sizeof(percents) / sizeof(percents[0]))]);
        o += sprintf(o, ",\"segments\":[");
        unsigned ns = rnd(4);
        for (unsigned k = 0; k < ns; k++) {
            /* one flag in four may name a segment past the 64th */
            unsigned s = rnd(i % 4 == 0 ? (unsigned) nsegs : 64);
            o += sprintf(o, "%s\"s%u\"", k ? "," : "", s);
        }
        o += sprintf(o, "]}");
    }
    o += sprintf(o, "],\"segments\":{");
    for (size_t k = 0; k < nsegs; k++) {
        o += sprintf(o, "%s\"s%zu\":{\"rules\":[{\"trait\":\"plan\","
                        "\"op\":\"eq\",\"value\":\"%s\"}%s]}",
                     k ? "," : "", k, plans[k % 3],
                     k % 2 ? ",{\"trait\":\"country\",\"op\":\"eq\","
                             "\"value\":\"DE\",\"ignoreCase\":true}" : "");
    }
    o += sprintf(o, "}}");

    fl_project_t *p = load(json);
    uint32_t eff[300];
    uint8_t sw[300];
    char q[256];

    for (unsigned c = 0; c < 120; c++) {
        query(q, 4 + rnd(20));
        fl_user_t u = user(q);
        same_answer(p, &u, NULL, NULL);
        for (size_t i = 0; i < nflags; i++) {
            eff[i] = percents[rnd(sizeof(percents) / sizeof(percents[0]))];
            sw[i] = (uint8_t) rnd(4);
        }
        same_answer(p, &u, eff, sw);
        arena_reset();
    }
    fl_project_free(p);
    free(json);
}

/* The project of t/unit/test_eval.c's answer, pinned: the bytes and the
 * bits, with configured and effective percentages. */
static void test_pinned(void **state)
{
    (void) state;
    fl_project_t *p = load(
        "{\"flags\":["
        "{\"name\":\"new-checkout\",\"enabled\":true,"
        "\"rolloutPercentage\":25,\"segments\":[]},"
        "{\"name\":\"dark-mode\",\"enabled\":false,"
        "\"rolloutPercentage\":12.5,\"segments\":[]},"
        "{\"name\":\"all\",\"enabled\":true,\"rolloutPercentage\":100,"
        "\"segments\":[]}]}");
    fl_user_t u = user("userId=user-1");
    uint64_t bits[1];
    char buf[512];

    size_t n = fl_flags_answer(p, &u, NULL, NULL, bits, buf);
    buf[n] = '\0';
    /* bucket(new-checkout, user-1) = 40631: outside 25 % */
    assert_string_equal(buf,
        "{\"flags\":["
        "{\"name\":\"new-checkout\",\"enabled\":false,\"rolloutPercentage\":25,"
        "\"segments\":[]},"
        "{\"name\":\"dark-mode\",\"enabled\":false,\"rolloutPercentage\":12.5,"
        "\"segments\":[]},"
        "{\"name\":\"all\",\"enabled\":true,\"rolloutPercentage\":100,"
        "\"segments\":[]}]}");
    assert_int_equal(bits[0], 4);

    uint32_t eff[3] = { 50000, 33333, 0 };
    uint8_t sw[3] = { FL_SWITCH_OVERRIDE_PERCENT, FL_SWITCH_NONE,
                      FL_SWITCH_ROLLED_BACK };
    n = fl_flags_answer(p, &u, eff, sw, bits, buf);
    buf[n] = '\0';
    assert_string_equal(buf,
        "{\"flags\":["
        "{\"name\":\"new-checkout\",\"enabled\":true,\"rolloutPercentage\":50,"
        "\"segments\":[]},"
        "{\"name\":\"dark-mode\",\"enabled\":false,\"rolloutPercentage\":33.333,"
        "\"segments\":[]},"
        "{\"name\":\"all\",\"enabled\":false,\"rolloutPercentage\":0,"
        "\"segments\":[]}]}");
    assert_int_equal(bits[0], 1);
    arena_reset();
    fl_project_free(p);

    /* no flags: the bits are not touched */
    p = load("{\"flags\":[]}");
    bits[0] = 77;
    n = fl_flags_answer(p, NULL, NULL, NULL, bits, buf);
    buf[n] = '\0';
    assert_string_equal(buf, "{\"flags\":[]}");
    assert_int_equal(bits[0], 77);
    fl_project_free(p);
}

/* Objects of every length from 62 to 163 bytes, so that a flag's on and
 * off objects straddle each fixed copy size (64, 96, 128) and the copy by
 * length, both ways: the answer is held to a text written here, flag by
 * flag from its bit, not to the core's own writer. */
static void copy_sizes(void)
{
    enum { N = 100 };
    char *json = malloc(N * 200 + 64), *o = json;
    char names[N][N + 2];

    o += sprintf(o, "{\"flags\":[");
    for (size_t k = 0; k < N; k++) {
        names[k][0] = 's';
        memset(names[k] + 1, 'x', k);
        names[k][k + 1] = '\0';
        o += sprintf(o, "%s{\"name\":\"%s\",\"enabled\":true,"
                     "\"rolloutPercentage\":50,\"segments\":[]}",
                     k ? "," : "", names[k]);
    }
    sprintf(o, "]}");
    fl_project_t *p = load(json);
    size_t bound = fl_flags_json_bound(p);
    char *got = malloc(bound), *want = malloc(bound + N * 200);
    uint64_t bits[FL_BIT_WORDS(N)];
    char q[64];

    /* the percentages in force as the glue passes them: the copies of
     * fl_project_s::json_width bytes where lanes run */
    uint32_t eff[N];
    uint8_t sw[N];
    for (size_t k = 0; k < N; k++) {
        eff[k] = 50000;
        sw[k] = FL_SWITCH_NONE;
    }

    for (unsigned c = 0; c < 100; c++) {
        snprintf(q, sizeof(q), "userId=copy-%u", c / 2);
        fl_user_t u = user(q);
        size_t n = c % 2 ? fl_flags_answer(p, &u, eff, sw, bits, got)
                         : fl_flags_answer(p, &u, NULL, NULL, bits, got);
        unsigned on = 0;

        o = want + sprintf(want, "{\"flags\":[");
        for (size_t k = 0; k < N; k++) {
            int bit = (int) ((bits[k / 64] >> (k % 64)) & 1);
            on += (unsigned) bit;
            o += sprintf(o, "%s{\"name\":\"%s\",\"enabled\":%s,"
                         "\"rolloutPercentage\":50,\"segments\":[]}",
                         k ? "," : "", names[k], bit ? "true" : "false");
        }
        o += sprintf(o, "]}");
        assert_int_equal(n, (size_t) (o - want));
        assert_memory_equal(got, want, n);
        /* and the bits are the evaluation's */
        same_answer(p, &u, NULL, NULL);
        /* a coin toss a flag: neither all on nor all off */
        assert_true(on > 20 && on < 80);
        arena_reset();
    }
    free(got);
    free(want);
    fl_project_free(p);
    free(json);
}

static void test_copy_sizes(void **state)
{
    (void) state;
    copy_sizes();
    int was = fl_lanes_set(0);
    copy_sizes();
    if (was != -1) {
        fl_lanes_set(1);
    }
}

/* A project of n flags at 5 %, flag k's name lens[k] bytes long (1 to
 * 128; its objects 62 + lens[k] bytes on, 63 + lens[k] off), without
 * segments. */
static fl_project_t *names_project(const unsigned *lens, size_t n)
{
    char *json = malloc(n * 400 + 64), *o = json;

    o += sprintf(o, "{\"flags\":[");
    for (size_t k = 0; k < n; k++) {
        /* k in base 62, after '-' up to the length (k < 62 for 1) */
        static const char digits[] =
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        char id[8];
        unsigned m = 0;
        size_t v = k;
        do {
            id[m++] = digits[v % 62];
            v /= 62;
        } while (v != 0);
        assert_true(m <= lens[k]);
        o += sprintf(o, "%s{\"name\":\"", k ? "," : "");
        for (unsigned i = 0; i < lens[k]; i++) {
            *o++ = i < lens[k] - m ? '-' : id[lens[k] - 1 - i];
        }
        o += sprintf(o, "\",\"enabled\":true,\"rolloutPercentage\":5,"
                        "\"segments\":[]}");
    }
    sprintf(o, "]}");
    fl_project_t *p = load(json);
    free(json);
    return p;
}

/* n flags of names len bytes, but every `every`th (0: none) of names
 * long bytes, and the last `tail` of names 2 bytes: the width the load
 * chose, and the answers of many callers held to fl_flags_json()'s with
 * the configured percentages (the copies) and others (one by one). */
static unsigned width_of(size_t n, unsigned len, unsigned every,
    unsigned long_len, size_t tail)
{
    unsigned *lens = malloc(n * sizeof(unsigned));
    char q[64];

    for (size_t k = 0; k < n; k++) {
        lens[k] = every && k % every == every - 1 ? long_len : len;
        if (k + tail >= n) {
            lens[k] = 2;
        }
    }
    fl_project_t *p = names_project(lens, n);
    unsigned width = fl_answer_width(p);

    for (unsigned c = 0; c < 40; c++) {
        snprintf(q, sizeof(q), "userId=width-%u&trait_plan=pro", c);
        fl_user_t u = user(q);
        same_answer(p, &u, NULL, NULL);
        same_answer_configured(p, &u);
        arena_reset();
    }
    fl_project_free(p);
    free(lens);
    return width;
}

/*
 * The width of the answer's copies where lanes run (Loader::build_lanes()):
 * the one of fewest instructions, a load and a store each 32 bytes of
 * every flag's copy and about 40 for each piece longer than the width.
 * They copy the pieces of the answer's frame (fl_project_s::json_frame):
 * the rest of a flag's object after its value and the next one's start,
 * 59 bytes and the next flag's name here; the last piece is copied by
 * its length and not weighed.  Pieces of up to 64 bytes: 64; up to 96:
 * 96; up to 128: 128.  A few pieces longer than 64 among many short ones
 * are copied apart at 64; many are not.  Pieces over 128 bytes are copied
 * apart at any width, and where all are, 64 costs least.  And the last
 * pieces may be shorter than a copy: the answer's bound has room for the
 * copies before them (same_answer()'s guard).
 */
static void test_copy_width(void **state)
{
    (void) state;
    /* a piece: 59 + the next flag's name */
    assert_int_equal(width_of(62, 1, 0, 0, 0), 64);
    assert_int_equal(width_of(70, 5, 0, 0, 0), 64);
    assert_int_equal(width_of(70, 6, 0, 0, 0), 96);
    assert_int_equal(width_of(70, 30, 0, 0, 0), 96);
    assert_int_equal(width_of(70, 37, 0, 0, 0), 96);
    assert_int_equal(width_of(70, 38, 0, 0, 0), 128);
    assert_int_equal(width_of(130, 69, 0, 0, 0), 128);
    assert_int_equal(width_of(130, 70, 0, 0, 0), 64);
    /* one flag in 31 of a 30-byte name, the piece before it 89 bytes: 40
     * each apart at 64 costs less than 2 vectors more for every flag (62
     * flags: names of 1 byte run out) */
    assert_int_equal(width_of(62, 1, 31, 30, 0), 64);
    /* one in 5: more */
    assert_int_equal(width_of(62, 1, 5, 30, 0), 96);
    /* every third flag's name 128 bytes: the pieces before them 187,
     * over every width, the others 119 */
    assert_int_equal(width_of(100, 60, 3, 128, 0), 128);
    /* at 128, the last three flags' names 2 bytes: the pieces before
     * them and between them 61, the last 37 */
    assert_int_equal(width_of(70, 60, 0, 0, 3), 128);
    assert_int_equal(width_of(3, 60, 0, 0, 1), 128);
}

/* The 8-lane buckets (lanes.hpp): where the CPU has AVX2 they run, and
 * fl_flags_answer() gives the scalar path's bytes and values for projects
 * across chunks of 256 flags (520: two whole chunks and 8 flags, groups
 * of every alignment padded to 8 lanes) and ids of every length, 0 to 70;
 * then the same with the lanes turned off, the path of every other CPU. */
static void lanes_every_length(void)
{
    char *json = project_json(520, 0, 0);
    fl_project_t *p = load(json);
    char q[256];

    for (size_t len = 0; len <= 70; len++) {
        for (unsigned c = 0; c < 4; c++) {
            query(q, len);
            fl_user_t u = user(q);
            same_answer(p, &u, NULL, NULL);
        }
        arena_reset();
    }
    fl_project_free(p);
    free(json);
}

/* The load's choice (project.cpp, Loader::build_lanes()): each segment
 * named by one flag at 5 % is evaluated for about one caller in twenty,
 * so lazily; a segment that flags at 100 % name is needed by every
 * caller, so first; no segments, nothing to weigh.  fl_answer_lazy_set()
 * overrides the choice both ways and gives it back. */
static char *flags_naming(unsigned nflags, const char *pct, int own)
{
    char *json = malloc(nflags * 120 + 1024), *o = json;

    o += sprintf(o, "{\"flags\":[");
    for (unsigned i = 0; i < nflags; i++) {
        o += sprintf(o, "%s{\"name\":\"f%u\",\"enabled\":true,"
                        "\"rolloutPercentage\":%s,\"segments\":[\"s%u\"]}",
                     i ? "," : "", i, pct, own ? i : 0);
    }
    o += sprintf(o, "],\"segments\":{");
    for (unsigned i = 0; i < nflags; i++) {
        o += sprintf(o, "%s\"s%u\":{\"rules\":[{\"trait\":\"plan\","
                        "\"op\":\"eq\",\"value\":\"p%u\"}]}",
                     i ? "," : "", i, i);
    }
    o += sprintf(o, "}}");
    return json;
}

static void test_lazy_choice(void **state)
{
    (void) state;
    char *few = flags_naming(10, "5", 1), *all = flags_naming(10, "100", 0);
    fl_project_t *lazy = load(few), *first = load(all);
    fl_project_t *none = load("{\"flags\":[{\"name\":\"a\",\"enabled\":true,"
                              "\"rolloutPercentage\":50}]}");

    assert_int_equal(fl_answer_lazy(lazy), 1);
    assert_int_equal(fl_answer_lazy(first), 0);
    assert_int_equal(fl_answer_lazy(none), 0);
    assert_int_equal(fl_answer_lazy(NULL), 0);

    assert_int_equal(fl_answer_lazy_set(1), -1);
    assert_int_equal(fl_answer_lazy(first), 1);
    assert_int_equal(fl_answer_lazy_set(0), 1);
    assert_int_equal(fl_answer_lazy(lazy), 0);
    assert_int_equal(fl_answer_lazy_set(-1), 0);
    assert_int_equal(fl_answer_lazy(lazy), 1);

    fl_project_free(lazy);
    fl_project_free(first);
    fl_project_free(none);
    free(few);
    free(all);
}

static void test_lanes(void **state)
{
    (void) state;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) {
        /* on, as every answer above ran */
        assert_int_equal(fl_lanes_set(1), 1);
    } else {
        assert_int_equal(fl_lanes_set(1), -1);
        print_message("no AVX2 here: the scalar path alone is tested\n");
    }
#endif
    lanes_every_length();

    int was = fl_lanes_set(0);
    if (was != -1) {
        assert_int_equal(was, 1);
        assert_int_equal(fl_lanes_set(0), 0);
        lanes_every_length();
        check_project(1000, 0, 0, 20);
        check_project(200, 5, 7, 20);
        assert_int_equal(fl_lanes_set(1), 0);
    }
}

/* fl_tally_add() and fl_tally_drain() (tally.cpp) against plain
 * increments: random bit sets of 1, 63, 64, 65 and 1,000 flags, up to
 * FL_TALLY_MAX additions between drains (the bound, all flags on, counts
 * exactly FL_TALLY_MAX), drains adding to counts already there and
 * writing every stride-th word only. */
static void tally_check(size_t n, unsigned adds, unsigned rounds,
    unsigned density)
{
    size_t words = FL_BIT_WORDS(n);
    uint64_t *tally = calloc(FL_TALLY_WORDS(n) + 1, sizeof(uint64_t));
    uint64_t *bits = calloc(words, sizeof(uint64_t));
    /* counts at stride 2, as the glue's {evaluations, enabled} pairs */
    uint32_t *counts = calloc(2 * n, sizeof(uint32_t));
    uint32_t *want = calloc(n, sizeof(uint32_t));

    for (size_t i = 0; i < n; i++) {
        counts[2 * i] = 0xdeadbeef;         /* the other word: untouched */
        counts[2 * i + 1] = want[i] = (uint32_t) i;
    }
    /* the canary past the last tally word: never written */
    tally[FL_TALLY_WORDS(n)] = 0x5a5a5a5a5a5a5a5aull;

    for (unsigned r = 0; r < rounds; r++) {
        for (unsigned k = 0; k < adds; k++) {
            memset(bits, 0, words * sizeof(uint64_t));
            for (size_t i = 0; i < n; i++) {
                if (density == 100 || rnd(100) < density) {
                    bits[i / 64] |= (uint64_t) 1 << (i % 64);
                    want[i]++;
                }
            }
            fl_tally_add(tally, bits, n);
        }
        fl_tally_drain(tally, n, counts + 1, 2);
        for (size_t w = 0; w < FL_TALLY_WORDS(n); w++) {
            assert_int_equal(tally[w], 0);
        }
    }
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(counts[2 * i + 1], want[i]);
        assert_int_equal(counts[2 * i], 0xdeadbeef);
    }
    assert_int_equal(tally[FL_TALLY_WORDS(n)], 0x5a5a5a5a5a5a5a5aull);

    free(tally);
    free(bits);
    free(counts);
    free(want);
}

static void test_tally(void **state)
{
    (void) state;
    static const size_t sizes[] = { 1, 63, 64, 65, 1000 };

    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        tally_check(sizes[k], 1, 3, 50);
        tally_check(sizes[k], 37, 3, 50);
        tally_check(sizes[k], FL_TALLY_MAX, 2, 50);
        tally_check(sizes[k], FL_TALLY_MAX, 2, 100);
        tally_check(sizes[k], FL_TALLY_MAX, 1, 3);
    }
    /* nothing added: a drain changes nothing */
    tally_check(1000, 0, 2, 50);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pinned),
        cmocka_unit_test(test_simple_flags),
        cmocka_unit_test(test_flags_with_rules),
        cmocka_unit_test(test_many_segments),
        cmocka_unit_test(test_lazy_choice),
        cmocka_unit_test(test_lanes),
        cmocka_unit_test(test_copy_sizes),
        cmocka_unit_test(test_copy_width),
        cmocka_unit_test(test_tally),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
