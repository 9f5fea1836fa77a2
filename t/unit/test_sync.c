/*
 * test_sync.c - flags_sync's decisions in the core (docs/sync.md): which
 * flags a round sends and the script's KEYS and ARGV byte for byte
 * (sync_round.cpp), what a reply says and what applying it does to a flag
 * (sync_reply.cpp), and the exact refusal of each kind of broken reply.
 *
 * Replies are written as the glue hands them over: a flat view of the
 * hiredis tree in pre-order, built here with the S/I/A/NIL helpers.
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

#include "unit_sync_view.h"

/* ------------------------------------------------------------ helpers */

static fl_sync_reply_status_t head_of(const fl_sync_elt_t *v, size_t n,
    uint64_t known, fl_sync_head_t *h)
{
    return fl_sync_reply_head(v, n, known, h);
}

static fl_project_t *shop;
static uint64_t def_risky, def_calm;

static int load_shop(void **state)
{
    static const char json[] =
        "{\"flags\":["
        "{\"name\":\"risky\",\"enabled\":true,\"rolloutPercentage\":100},"
        "{\"name\":\"calm\",\"enabled\":true,\"rolloutPercentage\":50},"
        "{\"name\":\"other\",\"enabled\":false,\"rolloutPercentage\":0}"
        "]}";
    char err[256];
    fl_flag_info_t info;

    (void) state;
    if (fl_project_load_buffer(json, sizeof(json) - 1, "shop.json", &shop,
                               err, sizeof(err)) != FL_OK)
    {
        fprintf(stderr, "load: %s\n", err);
        return -1;
    }
    if (fl_project_flag_info(shop, 0, &info) != 0) {
        return -1;
    }
    def_risky = info.def_hash;
    if (fl_project_flag_info(shop, 1, &info) != 0) {
        return -1;
    }
    def_calm = info.def_hash;
    return 0;
}

static int free_shop(void **state)
{
    (void) state;
    fl_project_free(shop);
    shop = NULL;
    return 0;
}

/* "rb:<def>:<flag>" in buf */
static const char *field(char *buf, size_t size, const char *kind,
    uint64_t def, const char *flag)
{
    snprintf(buf, size, "%s:%016llx:%s", kind, (unsigned long long) def,
             flag);
    return buf;
}

/* The control hash {pairs} as the third element of an answer. */
static size_t answer(fl_sync_elt_t *v, const fl_sync_elt_t *pairs,
    size_t npairs)
{
    v[0] = A(3);
    v[1] = S("1700000000123456");
    v[2] = S("9");
    v[3] = A(npairs);
    memcpy(&v[4], pairs, npairs * sizeof(fl_sync_elt_t));
    return 4 + npairs;
}

static size_t controls(const fl_sync_elt_t *pairs, size_t npairs,
    fl_sync_fleet_t *fleets, size_t *ignored)
{
    fl_sync_elt_t v[64];
    fl_sync_head_t h;
    size_t n = answer(v, pairs, npairs);

    assert_int_equal(head_of(v, n, 0, &h), FL_SYNC_REPLY_OK);
    assert_true(h.has_control);
    return fl_sync_reply_controls(v, n, &h, shop, fleets, 3, ignored);
}

static void host_is(const char *got, size_t len, const char *want)
{
    if (want == NULL) {
        assert_null(got);
        assert_int_equal(len, 0);
        return;
    }
    assert_non_null(got);
    assert_int_equal(len, strlen(want));
    assert_memory_equal(got, want, len);
}

/* ------------------------------------------------------ names, control */

static void test_host_valid(void **state)
{
    char big[FL_SYNC_HOST_MAX + 2];

    (void) state;
    assert_true(fl_sync_host_valid("h1", 2));
    assert_true(fl_sync_host_valid("web-01.eu_west:2", 16));
    assert_false(fl_sync_host_valid("", 0));
    assert_false(fl_sync_host_valid(NULL, 3));
    assert_false(fl_sync_host_valid("a b", 3));
    assert_false(fl_sync_host_valid("a\0b", 3));
    assert_false(fl_sync_host_valid("h\xc3\xa9", 3));
    assert_false(fl_sync_host_valid("a@b", 3));

    memset(big, 'a', sizeof(big));
    assert_true(fl_sync_host_valid(big, FL_SYNC_HOST_MAX));
    assert_false(fl_sync_host_valid(big, FL_SYNC_HOST_MAX + 1));
}

static void test_control_encoding(void **state)
{
    (void) state;
    assert_true(fl_sync_control(0, FL_OVERRIDE_NONE, 0) == 0);
    assert_true(fl_sync_control(1, FL_OVERRIDE_NONE, 777) == 1);
    /* only a percentage carries its value */
    assert_true(fl_sync_control(0, FL_OVERRIDE_OFF, 555) == 2);
    assert_true(fl_sync_control(1, FL_OVERRIDE_OFF, 0) == 3);
    assert_true(fl_sync_control(0, FL_OVERRIDE_PERCENT, 25000)
                == (4 | ((uint64_t) 25000 << 8)));
    assert_true(fl_sync_control(7, FL_OVERRIDE_PERCENT, 100000)
                == (5 | ((uint64_t) 100000 << 8)));
}

/* --------------------------------------------------------- the round */

static fl_sync_round_t shop_round(void)
{
    fl_sync_round_t r = {
        .prefix = "flags:", .prefix_len = 6,
        .project = "shop", .project_len = 4,
        .host = "h1", .host_len = 2,
        .epoch = 1700000000123456ull, .ver = 7,
        .incarnation = 0x0123456789abcdefull, .calls = 41,
    };
    return r;
}

static fl_sync_flag_t flag(const char *name, uint64_t def, int policy_on)
{
    fl_sync_flag_t f;
    memset(&f, 0, sizeof(f));
    f.name = name;
    f.name_len = strlen(name);
    f.def_hash = def;
    f.counted = 1;
    f.policy.mode = policy_on ? FL_ROLLBACK_ON : FL_ROLLBACK_OFF;
    f.policy.min_errors = 5;
    f.policy.rate_milli = 10000;
    f.policy.window = 60;
    f.policy.min_sources = 3;
    return f;
}

/* Which flags send an entry: with the fleet's state known (epoch set) and
 * before the first answer (epoch 0: the fleet is taken to say nothing). */
static void test_plan(void **state)
{
    static const struct {
        const char      *why;
        int              counted, policy_on;
        uint64_t         control, known;
        uint64_t         errors, base_errors, enabled, base_enabled;
        fl_sync_entry_t  want, want_epoch0;
    } rows[] = {
        { "not counted, though it changed", 0, 1, 1, 0, 0, 0, 0, 0,
          FL_SYNC_NO_ENTRY, FL_SYNC_NO_ENTRY },
        { "deltas, no policy: dropped", 1, 0, 0, 0, 5, 0, 9, 0,
          FL_SYNC_NO_ENTRY, FL_SYNC_NO_ENTRY },
        { "rolled back (and known so): its deltas dropped", 1, 1, 1, 1,
          5, 0, 0, 0, FL_SYNC_NO_ENTRY, FL_SYNC_ENTRY_SOURCES },
        { "enabled evaluations only", 1, 1, 0, 0, 0, 0, 10, 4,
          FL_SYNC_ENTRY, FL_SYNC_ENTRY },
        { "an error delta", 1, 1, 0, 0, 3, 2, 0, 0,
          FL_SYNC_ENTRY_SOURCES, FL_SYNC_ENTRY_SOURCES },
        { "nothing new under a policy", 1, 1, 0, 0, 8, 8, 0, 0,
          FL_SYNC_NO_ENTRY, FL_SYNC_NO_ENTRY },
        { "an override set here, no policy", 1, 0, 2, 0, 0, 0, 0, 0,
          FL_SYNC_ENTRY, FL_SYNC_ENTRY },
        { "the fleet's rollback cleared here", 1, 0, 0, 1, 0, 0, 0, 0,
          FL_SYNC_ENTRY, FL_SYNC_NO_ENTRY },
        { "a wrapped-around baseline is a delta", 1, 1, 0, 0, 8, 9, 0, 0,
          FL_SYNC_ENTRY_SOURCES, FL_SYNC_ENTRY_SOURCES },
    };
    fl_sync_round_t r = shop_round();
    fl_sync_flag_t f[N(rows)];
    size_t i, sources, entries, want, want_sources;

    (void) state;
    for (int epoch0 = 0; epoch0 < 2; epoch0++) {
        r.epoch = epoch0 ? 0 : 1700000000123456ull;
        want = want_sources = 0;

        for (i = 0; i < N(rows); i++) {
            f[i] = flag("x", i, rows[i].policy_on);
            f[i].counted = rows[i].counted;
            f[i].control = rows[i].control;
            f[i].known = rows[i].known;
            f[i].errors = rows[i].errors;
            f[i].base_errors = rows[i].base_errors;
            f[i].enabled = rows[i].enabled;
            f[i].base_enabled = rows[i].base_enabled;
            f[i].entry = FL_SYNC_ENTRY;     /* the plan sets every one */
        }

        sources = 99;
        entries = fl_sync_round_plan(&r, f, N(rows), &sources);

        for (i = 0; i < N(rows); i++) {
            fl_sync_entry_t w = epoch0 ? rows[i].want_epoch0 : rows[i].want;
            if (f[i].entry != w) {
                fail_msg("%s (epoch %s): entry %d, want %d", rows[i].why,
                         epoch0 ? "0" : "known", (int) f[i].entry, (int) w);
            }
            want += w != FL_SYNC_NO_ENTRY;
            want_sources += w == FL_SYNC_ENTRY_SOURCES;
        }
        assert_int_equal(entries, want);
        assert_int_equal(sources, want_sources);
    }

    assert_int_equal(fl_sync_round_plan(&r, f, N(rows), NULL), want);
}

/* Four flags: an error delta with sources and a policy; an override set
 * here; nothing to say; a rollback published with its record. */
static size_t round_flags(fl_sync_flag_t *f, uint32_t *keys, uint32_t *ages)
{
    f[0] = flag("risky", 0x00c0ffee12345678ull, 1);
    f[0].errors = 10;
    f[0].base_errors = 4;
    f[0].enabled = 100;
    f[0].base_enabled = 40;
    f[0].acked_errors = 100;
    f[0].acked_enabled = 20;
    keys[0] = 0xdeadbeef;
    ages[0] = 3;
    keys[1] = 0x1;
    ages[1] = 0;
    f[0].source_keys = keys;
    f[0].source_ages = ages;
    f[0].nsources = 2;

    f[1] = flag("calm", 0xabcdef0123456789ull, 0);
    f[1].control = fl_sync_control(0, FL_OVERRIDE_PERCENT, 25000);

    f[2] = flag("idle", 0x2, 1);

    f[3] = flag("back", 0x1, 1);
    f[3].control = 1;
    f[3].rb_at_ms = 1700000000000ull;
    f[3].rb_errors = 6;
    f[3].rb_enabled = 40;
    f[3].rb_sources = 2;
    f[3].known = fl_sync_control(0, FL_OVERRIDE_OFF, 0);
    return 4;
}

/* An answer without the control hash: what a flag published was the
 * fleet's already (issue 25: a new definition kept its override, and the
 * fleet held it; the host must not publish it every round). */
static void test_known_unmoved(void **state)
{
    fl_sync_round_t r = shop_round();
    fl_sync_flag_t f[3];
    uint64_t kept = fl_sync_control(1, FL_OVERRIDE_PERCENT, 5000);

    (void) state;
    f[0] = flag("kept", 0, 1);          /* a new definition: known 0 */
    f[0].counted = 1;
    f[0].control = kept;
    f[0].known = 0;
    f[1] = flag("calm", 1, 1);          /* nothing to say */
    f[1].counted = 1;
    f[1].control = fl_sync_control(0, FL_OVERRIDE_OFF, 0);
    f[1].known = f[1].control;
    f[2] = flag("cleared", 2, 0);       /* cleared here, the fleet agreed */
    f[2].counted = 1;
    f[2].control = 0;
    f[2].known = fl_sync_control(1, FL_OVERRIDE_NONE, 0);
    r.epoch = 1700000000123456ull;

    assert_int_equal(fl_sync_round_plan(&r, f, 3, NULL), 2);
    assert_int_equal(f[1].entry, FL_SYNC_NO_ENTRY);
    assert_true(fl_sync_known_unmoved(&f[0]) == kept);
    assert_true(fl_sync_known_unmoved(&f[1]) == f[1].known);
    assert_true(fl_sync_known_unmoved(&f[2]) == 0);

    /* known so, the next round has nothing to publish */
    for (int i = 0; i < 3; i++) {
        f[i].known = fl_sync_known_unmoved(&f[i]);
    }
    assert_int_equal(fl_sync_round_plan(&r, f, 3, NULL), 0);
}

static void test_round_args(void **state)
{
    static const char *want[] = {
        "flags:{shop}:ctl",
        "flags:{shop}:w:00c0ffee12345678:risky",
        "flags:{shop}:w:abcdef0123456789:calm",
        "flags:{shop}:w:0000000000000001:back",
        "flags:{shop}:s:00c0ffee12345678:risky",
        "flags:{shop}:s:abcdef0123456789:calm",
        "flags:{shop}:s:0000000000000001:back",
        "flags:{shop}:r:00c0ffee12345678:risky",
        "flags:{shop}:r:abcdef0123456789:calm",
        "flags:{shop}:r:0000000000000001:back",
        "flags:{shop}:h:h1:0123456789abcdef",
        "1700000000123456", "7", "3", "h1", "41",
        "risky", "00c0ffee12345678", "-", "0 0 0 h1 0", "-", "off",
        "106", "80", "5 10000 60 3", "deadbeef:3 00000001:0", "", "", "",
        "100", "20",
        "calm", "abcdef0123456789", "-", "0 0 0 h1 0", "set", "25000",
        "0", "0", "", "", "", "", "", "0", "0",
        "back", "0000000000000001", "set", "1700000000000 6 40 h1 2",
        "del", "off", "0", "0", "5 10000 60 3", "", "", "", "", "0", "0",
    };
    fl_sync_round_t r = shop_round();
    fl_sync_flag_t f[4];
    uint32_t keys[2], ages[2];
    const char *argv[64];
    size_t argvlen[64], nkeys = 0, n, bound, argc, i;
    char *buf;

    (void) state;
    n = round_flags(f, keys, ages);
    assert_int_equal(fl_sync_round_plan(&r, f, n, NULL), 3);

    bound = fl_sync_round_bound(&r, f, n);
    buf = malloc(bound);
    assert_non_null(buf);

    argc = fl_sync_round_args(&r, f, n, buf, bound, argv, argvlen, 64,
                              &nkeys);
    assert_int_equal(argc, FL_SYNC_ROUND_ARGC(3));
    assert_int_equal(argc, N(want));
    assert_int_equal(nkeys, 11);

    for (i = 0; i < argc; i++) {
        if (argvlen[i] != strlen(want[i])
            || memcmp(argv[i], want[i], argvlen[i]) != 0)
        {
            fail_msg("argument %zu: \"%.*s\", want \"%s\"", i,
                     (int) argvlen[i], argv[i], want[i]);
        }
    }

    /* the whole of it fits the bound, and one byte less than what it
     * wrote fails whole (0), never writes past buf_len */
    size_t used = 0;
    for (i = 0; i < argc; i++) {
        if (argv[i] >= buf && argv[i] < buf + bound) {
            used += argvlen[i];
        }
    }
    assert_true(used <= bound);
    assert_int_equal(fl_sync_round_args(&r, f, n, buf, used - 1, argv,
                                        argvlen, 64, &nkeys), 0);
    assert_int_equal(fl_sync_round_args(&r, f, n, buf, bound, argv,
                                        argvlen, argc - 1, &nkeys), 0);
    free(buf);
}

static void test_round_empty(void **state)
{
    static const char *want[] = {
        "p{q}:ctl", "p{q}:h:h1:0123456789abcdef", "0", "0", "0", "h1", "41",
    };
    fl_sync_round_t r = shop_round();
    fl_sync_flag_t f = flag("x", 1, 1);
    const char *argv[8];
    size_t argvlen[8], nkeys = 9, i;
    char buf[256];

    (void) state;
    r.prefix = "p";
    r.prefix_len = 1;
    r.project = "q";
    r.project_len = 1;
    r.epoch = 0;
    r.ver = 0;

    assert_int_equal(fl_sync_round_plan(&r, &f, 1, NULL), 0);
    assert_true(fl_sync_round_bound(&r, &f, 1) <= sizeof(buf));
    assert_int_equal(fl_sync_round_args(&r, &f, 1, buf, sizeof(buf), argv,
                                        argvlen, 8, &nkeys),
                     FL_SYNC_ROUND_ARGC(0));
    assert_int_equal(nkeys, 2);
    for (i = 0; i < N(want); i++) {
        assert_int_equal(argvlen[i], strlen(want[i]));
        assert_memory_equal(argv[i], want[i], argvlen[i]);
    }
}

/* The largest numbers and every source slot fit the bound. */
static void test_round_bound(void **state)
{
    fl_sync_round_t r = shop_round();
    fl_sync_flag_t f = flag("n", UINT64_MAX, 1);
    uint32_t keys[FL_SOURCE_SLOTS + 5], ages[FL_SOURCE_SLOTS + 5];
    const char *argv[32];
    size_t argvlen[32], nkeys, bound, i;
    char *buf;

    (void) state;
    for (i = 0; i < N(keys); i++) {
        keys[i] = UINT32_MAX;
        ages[i] = UINT32_MAX;
    }
    f.errors = UINT64_MAX;
    f.enabled = UINT64_MAX;
    f.rb_at_ms = f.rb_errors = f.rb_enabled = f.rb_sources = UINT64_MAX;
    f.control = UINT64_MAX;         /* any value, not only the encoding's */
    f.policy.min_errors = f.policy.rate_milli = UINT32_MAX;
    f.policy.window = f.policy.min_sources = UINT32_MAX;
    f.source_keys = keys;
    f.source_ages = ages;
    f.nsources = N(keys);           /* more than a window holds: capped */
    f.acked_errors = f.acked_enabled = UINT64_MAX;
    r.calls = UINT64_MAX;
    r.incarnation = UINT64_MAX;

    assert_int_equal(fl_sync_round_plan(&r, &f, 1, NULL), 1);
    bound = fl_sync_round_bound(&r, &f, 1);
    buf = malloc(bound);
    assert_non_null(buf);
    assert_int_equal(fl_sync_round_args(&r, &f, 1, buf, bound, argv,
                                        argvlen, 32, &nkeys),
                     FL_SYNC_ROUND_ARGC(1));
    /* the sources: FL_SOURCE_SLOTS of "ffffffff:4294967295" */
    assert_int_equal(argvlen[FL_SYNC_ROUND_ARGC(1) - 6],
                     FL_SOURCE_SLOTS * 20 - 1);
    free(buf);

    /* and a ramp of every stage, the largest numbers, every action and a
     * seed of the longest words */
    fl_ramp_def_t d;
    fl_ramp_t seed;
    memset(&d, 0xff, sizeof(d));
    d.nstages = FL_RAMP_MAX_STAGES;
    memset(&seed, 0xff, sizeof(seed));
    for (i = 0; i < FL_REGRESSION_GRID; i++) {
        seed.evidence.log_lr[i] = -1.2345678901234567e-300;
    }
    f.ramp_def = &d;
    f.ramp_seed = &seed;
    f.on = f.off = f.on_errors = f.off_errors = UINT64_MAX;
    f.acked_on = f.acked_off = f.acked_on_errors = f.acked_off_errors
        = UINT64_MAX;
    f.ramp_actions = 0x4444444444444444ull;
    f.ramp_stopped = f.ramp_guard = 1;
    f.ramp_witnesses = f.ramp_min_witnesses = UINT32_MAX;
    assert_int_equal(fl_sync_round_plan(&r, &f, 1, NULL), 1);
    bound = fl_sync_round_bound(&r, &f, 1);
    buf = malloc(bound);
    assert_non_null(buf);
    assert_int_equal(fl_sync_round_args(&r, &f, 1, buf, bound, argv,
                                        argvlen, 32, &nkeys),
                     FL_SYNC_ROUND_ARGC(1));
    /* the actions: 16 digits; the witnesses and the floor; what was
     * acknowledged of the four counts */
    assert_int_equal(argvlen[FL_SYNC_ROUND_ARGC(1) - 4],
                     4 * 20 + 4 + 4 + FL_SYNC_RAMP_ACTIONS_MAX + 2 * 11
                     + 4 * 21);
    free(buf);
}

/* A ramped flag sends an entry every round, with its definition, this
 * host's part and, when asked, its seed. */
static void test_round_ramp(void **state)
{
    static const char *want[] = {
        "flags:{shop}:ctl",
        "flags:{shop}:w:0000000000000009:climb",
        "flags:{shop}:s:0000000000000009:climb",
        "flags:{shop}:r:0000000000000009:climb",
        "flags:{shop}:h:h1:0123456789abcdef",
        "1700000000123456", "7", "1", "h1", "41",
        "climb", "0000000000000009", "-", "0 0 0 h1 0", "-", "off", "0",
        "0", "5 10000 60 3", "",
        "1 10000 1500 1700000000000 30 1 3 1000:60:0 50000:120:100 "
        "100000:0:0",
        "5 15 1 0 0 1 32 0 0 0 0 0 0",
        "1 2 1700000000000 1700000001000 0 1700000002000 10 40 2 0 0 0 "
        "3 12 0 1 0.5 -0.25 0 0 0 7 1 2 0 0 0 0 0 0",
        "0", "0",
    };
    fl_sync_round_t r = shop_round();
    fl_sync_flag_t f = flag("climb", 9, 1);
    fl_ramp_def_t d;
    fl_ramp_t seed;
    const char *argv[32];
    size_t argvlen[32], nkeys = 0, i, bound;
    char *buf;

    (void) state;
    memset(&d, 0, sizeof(d));
    d.nstages = 3;
    d.stages[0].milli = 1000;
    d.stages[0].hold = 60;
    d.stages[1].milli = 50000;
    d.stages[1].hold = 120;
    d.stages[1].min_requests = 100;
    d.stages[2].milli = 100000;
    d.start_at_ms = 1700000000000ull;
    d.max_extend = 30;
    d.on_insufficient = FL_RAMP_INSUFFICIENT_ROLLBACK;
    d.alpha_ppm = 10000;
    d.dispersion_milli = 1500;
    d.tick = 1;

    /* no delta, no change, but a ramp: an entry */
    assert_int_equal(fl_sync_round_plan(&r, &f, 1, NULL), 0);
    f.ramp_def = &d;
    assert_int_equal(fl_sync_round_plan(&r, &f, 1, NULL), 1);
    assert_int_equal(f.entry, FL_SYNC_ENTRY);

    fl_ramp_init(&seed);
    seed.state = FL_RAMP_RUNNING;
    seed.stage = 2;
    seed.start_ms = 1700000000000ull;
    seed.stage_ms = 1700000001000ull;
    seed.next_tick_ms = 1700000002000ull;
    seed.stage_on = 10;
    seed.stage_off = 40;
    seed.stage_changes = 2;
    seed.last_n1 = 3;
    seed.last_n0 = 12;
    seed.last_e0 = 1;
    seed.evidence.log_lr[0] = 0.5;
    seed.evidence.log_lr[1] = -0.25;
    seed.evidence.ticks = 7;
    seed.evidence.errors_on = 1;
    seed.evidence.errors_off = 2;
    seed.base_on = 99;              /* this host's: never sent */
    f.ramp_seed = &seed;
    f.on = 105;
    f.base_on = 100;
    f.off = 15;
    f.on_errors = 1;
    f.ramp_guard = 1;
    f.ramp_stopped = 0;
    assert_true(fl_sync_ramp_actions_push(&f.ramp_actions, FL_RAMP_ADVANCE));
    assert_true(fl_sync_ramp_actions_push(&f.ramp_actions, FL_RAMP_RESUME));

    bound = fl_sync_round_bound(&r, &f, 1);
    buf = malloc(bound);
    assert_non_null(buf);
    assert_int_equal(fl_sync_round_args(&r, &f, 1, buf, bound, argv, argvlen,
                                        32, &nkeys), FL_SYNC_ROUND_ARGC(1));
    assert_int_equal(nkeys, 5);
    for (i = 0; i < N(want); i++) {
        if (argvlen[i] != strlen(want[i])
            || memcmp(argv[i], want[i], argvlen[i]) != 0)
        {
            fail_msg("argument %zu: \"%.*s\", want \"%s\"", i,
                     (int) argvlen[i], argv[i], want[i]);
        }
    }

    /* no actions, stopped, no seed */
    f.ramp_actions = 0;
    f.ramp_stopped = 1;
    f.ramp_seed = NULL;
    f.ramp_witnesses = 3;
    f.ramp_min_witnesses = 2;
    assert_int_equal(fl_sync_round_args(&r, &f, 1, buf, bound, argv, argvlen,
                                        32, &nkeys), FL_SYNC_ROUND_ARGC(1));
    assert_int_equal(argvlen[21], strlen("5 15 1 0 1 1 - 3 2 0 0 0 0"));
    assert_memory_equal(argv[21], "5 15 1 0 1 1 - 3 2 0 0 0 0", argvlen[21]);
    assert_int_equal(argvlen[22], 0);

    /* cumulative, as the errors are: what was acknowledged plus what
     * was counted since, then what was acknowledged */
    f.acked_on = 1000;
    f.acked_off = 2000;
    f.acked_on_errors = 30;
    f.acked_off_errors = 40;
    f.base_off = 5;
    f.off_errors = 6;
    f.base_off_errors = 2;
    assert_int_equal(fl_sync_round_args(&r, &f, 1, buf, bound, argv, argvlen,
                                        32, &nkeys), FL_SYNC_ROUND_ARGC(1));
    assert_int_equal(argvlen[21],
                     strlen("1005 2010 31 44 1 1 - 3 2 1000 2000 30 40"));
    assert_memory_equal(argv[21], "1005 2010 31 44 1 1 - 3 2 1000 2000 30 40",
                        argvlen[21]);
    free(buf);
}

/* The actions waiting for the fleet: in order, at most 16, dropped from
 * the oldest. */
static void test_ramp_actions(void **state)
{
    uint64_t q = 0;
    unsigned i;

    (void) state;
    assert_int_equal(fl_sync_ramp_actions_count(q), 0);
    assert_true(fl_sync_ramp_actions_push(&q, FL_RAMP_PAUSE));
    assert_true(fl_sync_ramp_actions_push(&q, FL_RAMP_RESTART));
    assert_true(fl_sync_ramp_actions_push(&q, FL_RAMP_RESUME));
    assert_int_equal(fl_sync_ramp_actions_count(q), 3);
    assert_true(q == 0x241);
    assert_true(fl_sync_ramp_actions_drop(q, 2) == 0x2);
    assert_true(fl_sync_ramp_actions_drop(q, 0) == q);
    assert_true(fl_sync_ramp_actions_drop(q, 3) == 0);

    for (i = 3; i < FL_SYNC_RAMP_ACTIONS_MAX; i++) {
        assert_true(fl_sync_ramp_actions_push(&q, FL_RAMP_ADVANCE));
    }
    assert_int_equal(fl_sync_ramp_actions_count(q), FL_SYNC_RAMP_ACTIONS_MAX);
    assert_false(fl_sync_ramp_actions_push(&q, FL_RAMP_PAUSE));
    assert_true(fl_sync_ramp_actions_drop(q, FL_SYNC_RAMP_ACTIONS_MAX) == 0);
    assert_int_equal(fl_sync_ramp_actions_count(
                         fl_sync_ramp_actions_drop(q, 15)), 1);
}


/* ------------------------------------------------ what a failover loses */

/* Counts made while Redis was away go when it is back only if the
 * outage was shorter than the flag's window (docs/sync.md). */
static void test_away_keeps(void **state)
{
    fl_sync_flag_t f = flag("x", 1, 1);     /* window 60 s */

    (void) state;
    assert_int_equal(fl_sync_away_keeps(0, &f.policy), 1);
    assert_int_equal(fl_sync_away_keeps(1500, &f.policy), 1);
    assert_int_equal(fl_sync_away_keeps(59999, &f.policy), 1);
    assert_int_equal(fl_sync_away_keeps(60000, &f.policy), 0);
    assert_int_equal(fl_sync_away_keeps(3600000, &f.policy), 0);
    /* never had a round */
    assert_int_equal(fl_sync_away_keeps(UINT64_MAX, &f.policy), 0);
    f.policy.window = 0;
    assert_int_equal(fl_sync_away_keeps(0, &f.policy), 0);
    f.policy.window = UINT32_MAX;
    assert_int_equal(fl_sync_away_keeps(UINT64_MAX - 1, &f.policy), 0);
    assert_int_equal(fl_sync_away_keeps(3600000, &f.policy), 1);
    f = flag("x", 1, 0);                    /* no policy: nothing counted */
    assert_int_equal(fl_sync_away_keeps(0, &f.policy), 0);
    assert_int_equal(fl_sync_away_keeps(0, NULL), 0);
}

/* A round's counts are cumulative: what was acknowledged plus what was
 * counted since; a reply lost leaves both, so the next round sends the
 * same cumulative plus what is new (the script adds the difference). */
static void test_cumulative(void **state)
{
    fl_sync_round_t r = shop_round();
    fl_sync_flag_t f = flag("risky", 0x5, 1);
    const char *argv[32];
    size_t argvlen[32], nkeys, bound;
    char *buf;

    (void) state;
    f.errors = 12;
    f.base_errors = 9;
    f.enabled = 30;
    f.base_enabled = 30;
    f.acked_errors = 7;
    f.acked_enabled = 25;

    assert_int_equal(fl_sync_round_plan(&r, &f, 1, NULL), 1);
    assert_int_equal(f.entry, FL_SYNC_ENTRY_SOURCES);
    bound = fl_sync_round_bound(&r, &f, 1);
    buf = malloc(bound);
    assert_non_null(buf);
    assert_int_equal(fl_sync_round_args(&r, &f, 1, buf, bound, argv, argvlen,
                                        32, &nkeys), FL_SYNC_ROUND_ARGC(1));
    /* keys: ctl, w, s, r, h; argv: 5 of the head, then the entry */
    assert_int_equal(nkeys, 5);
    assert_int_equal(argvlen[5 + 5 + 6], 2);
    assert_memory_equal(argv[5 + 5 + 6], "10", 2);      /* 7 + 3 */
    assert_int_equal(argvlen[5 + 5 + 7], 2);
    assert_memory_equal(argv[5 + 5 + 7], "25", 2);      /* 25 + 0 */
    assert_memory_equal(argv[5 + 5 + 13], "7", 1);
    assert_memory_equal(argv[5 + 5 + 14], "25", 2);
    free(buf);
}

/* After the store lost calls it had acknowledged, every counted flag
 * with acknowledged counts sends them, though nothing is new here. */
static void test_plan_resend(void **state)
{
    static const struct {
        const char      *why;
        int              policy_on;
        uint64_t         control, acked_errors, acked_enabled;
        fl_sync_entry_t  want, want_resend;
    } rows[] = {
        { "acknowledged errors", 1, 0, 3, 0,
          FL_SYNC_NO_ENTRY, FL_SYNC_ENTRY },
        { "acknowledged evaluations", 1, 0, 0, 8,
          FL_SYNC_NO_ENTRY, FL_SYNC_ENTRY },
        { "never sent anything", 1, 0, 0, 0,
          FL_SYNC_NO_ENTRY, FL_SYNC_NO_ENTRY },
        { "rolled back (the fleet knows)", 1, 1, 3, 8,
          FL_SYNC_NO_ENTRY, FL_SYNC_NO_ENTRY },
        { "no policy", 0, 0, 3, 8,
          FL_SYNC_NO_ENTRY, FL_SYNC_NO_ENTRY },
    };
    fl_sync_round_t r = shop_round();
    fl_sync_flag_t f[N(rows)];
    size_t i;

    (void) state;
    for (int resend = 0; resend < 2; resend++) {
        r.resend = resend;
        for (i = 0; i < N(rows); i++) {
            f[i] = flag("x", i, rows[i].policy_on);
            f[i].control = rows[i].control;
            f[i].known = rows[i].control;
            f[i].acked_errors = rows[i].acked_errors;
            f[i].acked_enabled = rows[i].acked_enabled;
        }
        assert_int_equal(fl_sync_round_plan(&r, f, N(rows), NULL),
                         resend ? 2 : 0);
        for (i = 0; i < N(rows); i++) {
            fl_sync_entry_t w = resend ? rows[i].want_resend : rows[i].want;
            if (f[i].entry != w) {
                fail_msg("%s (resend %d): entry %d, want %d", rows[i].why,
                         resend, (int) f[i].entry, (int) w);
            }
        }
    }
}

/* The fifth element of an answer: what the store lost. */
static void test_head_back(void **state)
{
    fl_sync_head_t h;
    fl_sync_elt_t back[] = { A(5), S("1700000000123456"), S("12"), A(0),
                             I(0), I(1) };
    fl_sync_elt_t both[] = { A(5), S("1700000000123456"), S("12"), A(0),
                             I(0), S("3") };
    fl_sync_elt_t resend[] = { A(5), S("1700000000123456"), S("12"), I(0),
                               I(0), I(2) };
    fl_sync_elt_t nohash[] = { A(5), S("1700000000123456"), S("12"), I(0),
                               I(0), I(1) };
    fl_sync_elt_t ramps[] = { A(5), S("1700000000123456"), S("12"), A(0),
                              A(1), I(0), I(1) };
    fl_sync_elt_t odd[] = { A(5), S("1700000000123456"), S("12"), A(0),
                            I(0), I(4) };
    fl_sync_elt_t word[] = { A(5), S("1700000000123456"), S("12"), A(0),
                             I(0), S("x") };
    fl_sync_elt_t four[] = { A(4), S("1700000000123456"), S("12"), A(0),
                             I(0) };

    (void) state;
    assert_int_equal(head_of(back, N(back), 1700000000123456ull, &h),
                     FL_SYNC_REPLY_OK);
    assert_true(h.has_control && h.went_back && !h.resend);
    assert_true(h.ver == 12);

    assert_int_equal(head_of(both, N(both), 1700000000123456ull, &h),
                     FL_SYNC_REPLY_OK);
    assert_true(h.went_back && h.resend);

    /* resend alone, no control hash */
    assert_int_equal(head_of(resend, N(resend), 1700000000123456ull, &h),
                     FL_SYNC_REPLY_OK);
    assert_true(!h.has_control && !h.went_back && h.resend);

    /* went back without the store's view: nothing to take as known */
    assert_int_equal(head_of(nohash, N(nohash), 1700000000123456ull, &h),
                     FL_SYNC_REPLY_OK);
    assert_false(h.went_back);

    /* a new epoch is a store restarted empty: forgotten, not repaired */
    assert_int_equal(head_of(back, N(back), 1600000000000000ull, &h),
                     FL_SYNC_REPLY_OK);
    assert_true(h.new_epoch && !h.went_back);

    /* with the ramps before it */
    assert_int_equal(head_of(ramps, N(ramps), 1700000000123456ull, &h),
                     FL_SYNC_REPLY_OK);
    assert_true(h.has_ramps && h.ramps == 4 && h.went_back && !h.resend);

    /* bits this host does not know, a word, no fifth element: no news */
    assert_int_equal(head_of(odd, N(odd), 1700000000123456ull, &h),
                     FL_SYNC_REPLY_OK);
    assert_false(h.went_back || h.resend);
    assert_int_equal(head_of(word, N(word), 1700000000123456ull, &h),
                     FL_SYNC_REPLY_OK);
    assert_false(h.went_back || h.resend);
    assert_int_equal(head_of(four, N(four), 1700000000123456ull, &h),
                     FL_SYNC_REPLY_OK);
    assert_false(h.went_back || h.resend);
}

/* A store that went back: its view becomes what the fleet says, so the
 * next round publishes the rollback it lost ("set"), the clear it lost
 * ("clr", not a resurrected rollback) and the override it lost. */
static void test_back_known(void **state)
{
    char fb[3][64];
    fl_sync_elt_t pairs[] = {
        S(field(fb[0], sizeof(fb[0]), "rb", def_calm, "calm")),
        S("1700000000000 6 40 h0 1"),
        S("lost"), S("7 11 1700000000000"),
        S("epoch"), S("1700000000123456"),
    };
    fl_sync_fleet_t fleets[3];
    size_t ignored = 9;
    fl_sync_round_t r = shop_round();
    fl_sync_flag_t f[3];
    const char *argv[64];
    size_t argvlen[64], nkeys, bound;
    char *buf;

    (void) state;
    /* "lost" is the hash's own field: used by nobody, ignored by nobody */
    assert_int_equal(controls(pairs, N(pairs), fleets, &ignored), 1);
    assert_int_equal(ignored, 0);

    /* the store's view: calm rolled back (cleared here before the
     * loss), risky not (rolled back here before the loss), no override
     * of other (set here before the loss) */
    assert_true(fl_sync_back_known(&fleets[1]) == 1);
    assert_true(fl_sync_back_known(&fleets[0]) == 0);
    assert_true(fl_sync_back_known(&fleets[2]) == 0);
    fleets[2].override_kind = FL_OVERRIDE_PERCENT;
    fleets[2].override_milli = 2500;
    assert_true(fl_sync_back_known(&fleets[2])
                == fl_sync_control(0, FL_OVERRIDE_PERCENT, 2500));
    fleets[2].override_kind = FL_OVERRIDE_OFF;
    assert_true(fl_sync_back_known(&fleets[2])
                == fl_sync_control(0, FL_OVERRIDE_OFF, 0));
    fleets[2].override_kind = FL_OVERRIDE_NONE;
    fleets[2].override_milli = 0;

    f[0] = flag("risky", def_risky, 1);
    f[0].control = 1;
    f[0].rb_at_ms = 1700000000500ull;
    f[0].rb_errors = 6;
    f[0].rb_enabled = 9;
    f[0].rb_sources = 2;
    f[1] = flag("calm", def_calm, 1);
    f[1].control = 0;
    f[2] = flag("other", 0x3, 0);
    f[2].control = fl_sync_control(0, FL_OVERRIDE_OFF, 0);
    for (int i = 0; i < 3; i++) {
        f[i].known = fl_sync_back_known(&fleets[i]);
    }

    assert_int_equal(fl_sync_round_plan(&r, f, 3, NULL), 3);
    bound = fl_sync_round_bound(&r, f, 3);
    buf = malloc(bound);
    assert_non_null(buf);
    assert_int_equal(fl_sync_round_args(&r, f, 3, buf, bound, argv, argvlen,
                                        64, &nkeys), FL_SYNC_ROUND_ARGC(3));
    /* the entries start after 11 keys and 5 of the head */
    size_t e = 11 + 5;
    assert_memory_equal(argv[e + 2], "set", 3);
    assert_int_equal(argvlen[e + 3], strlen("1700000000500 6 9 h1 2"));
    assert_memory_equal(argv[e + 3], "1700000000500 6 9 h1 2", argvlen[e + 3]);
    assert_memory_equal(argv[e + 4], "-", 1);
    e += FL_SYNC_ENTRY_ARGS;
    assert_memory_equal(argv[e + 2], "clr", 3);
    assert_memory_equal(argv[e + 4], "-", 1);
    e += FL_SYNC_ENTRY_ARGS;
    assert_memory_equal(argv[e + 2], "-", 1);
    assert_memory_equal(argv[e + 4], "set", 3);
    assert_memory_equal(argv[e + 5], "off", 3);
    free(buf);
}

/* ------------------------------------------------------ a reply's head */

static void test_head_good(void **state)
{
    fl_sync_head_t h;
    fl_sync_elt_t two[] = { A(2), S("1700000000123456"), S("7") };
    fl_sync_elt_t ints[] = { A(2), I(42), I(-1) };
    fl_sync_elt_t max[] = { A(2), S("9223372036854775807"), S("0") };
    fl_sync_elt_t three[] = { A(3), S("5"), S("6"), A(0) };
    fl_sync_elt_t extra[] = { A(4), S("5"), S("6"), A(2), S("a"), S("b"),
                              A(1), NIL() };

    (void) state;
    assert_int_equal(head_of(two, N(two), 0, &h), FL_SYNC_REPLY_OK);
    assert_true(h.epoch == 1700000000123456ull);
    assert_true(h.ver == 7);
    assert_false(h.has_control);
    assert_false(h.new_epoch);

    /* integers as they are, a negative one as its two's complement */
    assert_int_equal(head_of(ints, N(ints), 0, &h), FL_SYNC_REPLY_OK);
    assert_true(h.epoch == 42);
    assert_true(h.ver == UINT64_MAX);

    assert_int_equal(head_of(max, N(max), 0, &h), FL_SYNC_REPLY_OK);
    assert_true(h.epoch == INT64_MAX);

    /* the control hash: new epoch only when another one was known */
    assert_int_equal(head_of(three, N(three), 0, &h), FL_SYNC_REPLY_OK);
    assert_true(h.has_control);
    assert_int_equal(h.control, 3);
    assert_false(h.new_epoch);
    assert_int_equal(head_of(three, N(three), 5, &h), FL_SYNC_REPLY_OK);
    assert_false(h.new_epoch);
    assert_int_equal(head_of(three, N(three), 4, &h), FL_SYNC_REPLY_OK);
    assert_true(h.new_epoch);

    /* elements after the control hash are not read */
    assert_int_equal(head_of(extra, N(extra), 0, &h), FL_SYNC_REPLY_OK);
    assert_true(h.has_control);
    assert_int_equal(h.control, 3);
}

static void expect_head(const fl_sync_elt_t *v, size_t n,
    fl_sync_reply_status_t want)
{
    fl_sync_head_t h;
    fl_sync_reply_status_t st = head_of(v, n, 0, &h);

    if (st != want) {
        fail_msg("status %d (%s), want %d (%s)", (int) st,
                 fl_sync_reply_status_text(st), (int) want,
                 fl_sync_reply_status_text(want));
    }
    if (st != FL_SYNC_REPLY_OK) {
        assert_false(h.has_control);
    }
    if (st != FL_SYNC_REPLY_OK && st != FL_SYNC_REPLY_CONTROL) {
        assert_true(h.epoch == 0 && h.ver == 0);
    }
}

static void test_head_broken(void **state)
{
    fl_sync_elt_t v[8];
    fl_sync_head_t h;

    (void) state;
    /* not one whole reply */
    expect_head(NULL, 3, FL_SYNC_REPLY_MALFORMED);
    v[0] = A(2);
    expect_head(v, 0, FL_SYNC_REPLY_MALFORMED);
    v[1] = S("1");
    expect_head(v, 2, FL_SYNC_REPLY_MALFORMED);         /* short array */
    v[0] = A(SIZE_MAX);
    v[2] = S("2");
    expect_head(v, 3, FL_SYNC_REPLY_MALFORMED);         /* huge count */
    v[0] = A(2);
    v[3] = S("3");
    expect_head(v, 4, FL_SYNC_REPLY_MALFORMED);         /* trailing */
    v[0] = A(2);
    v[1] = A(1);                                        /* nested short */
    expect_head(v, 3, FL_SYNC_REPLY_MALFORMED);

    /* types and counts */
    v[0] = S("OK");
    expect_head(v, 1, FL_SYNC_REPLY_NOT_ARRAY);
    v[0] = I(3);
    expect_head(v, 1, FL_SYNC_REPLY_NOT_ARRAY);
    v[0] = NIL();
    expect_head(v, 1, FL_SYNC_REPLY_NOT_ARRAY);
    v[0] = A(0);
    expect_head(v, 1, FL_SYNC_REPLY_SHORT);
    v[0] = A(1);
    v[1] = S("1");
    expect_head(v, 2, FL_SYNC_REPLY_SHORT);

    /* the epoch */
    const char *bad[] = { "", "abc", "12a", "-5", "+5", " 5", "5 ", "1.5",
                          "9223372036854775808", "18446744073709551616",
                          "99999999999999999999999" };
    for (size_t i = 0; i < N(bad); i++) {
        v[0] = A(2);
        v[1] = S(bad[i]);
        v[2] = S("1");
        expect_head(v, 3, FL_SYNC_REPLY_EPOCH);
        v[1] = S("1");
        v[2] = S(bad[i]);
        expect_head(v, 3, FL_SYNC_REPLY_VERSION);
    }
    v[0] = A(2);
    v[1] = NIL();
    v[2] = S("1");
    expect_head(v, 3, FL_SYNC_REPLY_EPOCH);
    v[1] = A(1);
    v[2] = S("1");
    v[3] = S("1");
    expect_head(v, 4, FL_SYNC_REPLY_EPOCH);
    v[1] = S("1");
    v[2] = A(0);
    expect_head(v, 3, FL_SYNC_REPLY_VERSION);
    /* a string with no bytes behind it */
    v[1].type = FL_SYNC_ELT_STRING;
    v[1].str = NULL;
    v[1].len = 4;
    v[2] = S("1");
    expect_head(v, 3, FL_SYNC_REPLY_EPOCH);

    /* the control hash: epoch and version are read */
    v[0] = A(3);
    v[1] = S("11");
    v[2] = S("12");
    v[3] = S("rb:x");
    assert_int_equal(head_of(v, 4, 0, &h), FL_SYNC_REPLY_CONTROL);
    assert_true(h.epoch == 11 && h.ver == 12);
    assert_false(h.has_control);
    v[3] = A(1);
    v[4] = S("odd");
    expect_head(v, 5, FL_SYNC_REPLY_CONTROL);
    v[3] = NIL();
    expect_head(v, 4, FL_SYNC_REPLY_CONTROL);

    /* every status has its words */
    assert_string_equal(fl_sync_reply_status_text(FL_SYNC_REPLY_OK), "");
    for (int st = FL_SYNC_REPLY_MALFORMED; st <= FL_SYNC_REPLY_CONTROL;
         st++)
    {
        assert_true(strlen(fl_sync_reply_status_text(
                        (fl_sync_reply_status_t) st)) > 0);
    }
    assert_string_equal(fl_sync_reply_status_text(FL_SYNC_REPLY_EPOCH),
                        "the epoch is not a number");
}

/* 10,000 nested arrays: read without recursion, the whole walk linear. */
static void test_head_deep(void **state)
{
    size_t depth = 10000, n = depth + 4, i;
    fl_sync_elt_t *v = calloc(n, sizeof(fl_sync_elt_t));
    fl_sync_head_t h;

    (void) state;
    assert_non_null(v);
    v[0] = A(2);
    for (i = 1; i <= depth; i++) {
        v[i] = A(1);
    }
    v[depth] = A(0);
    v[depth + 1] = S("1");
    assert_int_equal(head_of(v, depth + 2, 0, &h), FL_SYNC_REPLY_EPOCH);
    v[depth] = A(1);
    assert_int_equal(head_of(v, depth + 2, 0, &h), FL_SYNC_REPLY_MALFORMED);

    /* as the value of a control field: skipped */
    v[0] = A(3);
    v[1] = S("1");
    v[2] = S("2");
    v[3] = A(2);
    v[4] = S("ov:0000000000000000:risky");
    for (i = 5; i < n; i++) {
        v[i] = A(1);
    }
    v[n - 1] = S("x");
    assert_int_equal(head_of(v, n, 0, &h), FL_SYNC_REPLY_OK);
    fl_sync_fleet_t fleets[3];
    size_t ignored = 0;
    assert_int_equal(fl_sync_reply_controls(v, n, &h, shop, fleets, 3,
                                            &ignored), 0);
    assert_int_equal(ignored, 1);
    free(v);
}

/* ---------------------------------------------------- the control hash */

static void test_controls_good(void **state)
{
    char f0[64], f1[64], f2[64], f3[64], f4[64], f5[64];
    fl_sync_elt_t pairs[] = {
        S("epoch"), S("1700000000123456"),
        S("ver"), S("9"),
        S(field(f0, sizeof(f0), "rb", def_risky, "risky")),
        S("1700000000000 6 40 h1 3"),
        S(field(f1, sizeof(f1), "cb", def_risky, "risky")), S("h2"),
        S(field(f2, sizeof(f2), "ov", def_calm, "calm")), S("25000"),
        S(field(f3, sizeof(f3), "ob", def_calm, "calm")), S("h3"),
        S(field(f4, sizeof(f4), "ov", def_risky, "risky")), S("off"),
        S(field(f5, sizeof(f5), "ob", def_risky, "risky")), S("h:4"),
    };
    fl_sync_fleet_t fl[3];
    size_t ignored = 99;

    (void) state;
    assert_int_equal(controls(pairs, N(pairs), fl, &ignored), 6);
    assert_int_equal(ignored, 0);

    assert_true(fl[0].rolled_back);
    assert_true(fl[0].at_ms == 1700000000000ull);
    assert_true(fl[0].errors == 6);
    assert_true(fl[0].enabled == 40);
    assert_true(fl[0].sources == 3);
    host_is(fl[0].rb_host, fl[0].rb_host_len, "h1");
    host_is(fl[0].cb_host, fl[0].cb_host_len, "h2");
    host_is(fl[0].ob_host, fl[0].ob_host_len, "h:4");
    assert_int_equal(fl[0].override_kind, FL_OVERRIDE_OFF);
    assert_int_equal(fl[0].override_milli, 0);

    assert_false(fl[1].rolled_back);
    assert_int_equal(fl[1].override_kind, FL_OVERRIDE_PERCENT);
    assert_int_equal(fl[1].override_milli, 25000);
    host_is(fl[1].ob_host, fl[1].ob_host_len, "h3");
    host_is(fl[1].rb_host, fl[1].rb_host_len, NULL);
    host_is(fl[1].cb_host, fl[1].cb_host_len, NULL);

    /* a flag the hash does not name: nothing */
    assert_false(fl[2].rolled_back);
    assert_int_equal(fl[2].override_kind, FL_OVERRIDE_NONE);
    host_is(fl[2].ob_host, fl[2].ob_host_len, NULL);
}

/* Records of older versions, and records a server mangled. */
static void test_controls_records(void **state)
{
    static const struct {
        const char *record;
        uint64_t    at_ms, errors, enabled, sources;
        const char *host;
    } cases[] = {
        { "1700000000000 6 40", 1700000000000ull, 6, 40, 0, NULL },
        { "1700000000000 6 40 h0", 1700000000000ull, 6, 40, 0, "h0" },
        { "1 2 3 h1 4", 1, 2, 3, 4, "h1" },
        { "1 2 3 b@d 4", 1, 2, 3, 4, NULL },
        { "1 2 3 h1 4 5", 1, 2, 3, 0, "h1" },
        { "1 2 3 h1 x", 1, 2, 3, 0, "h1" },
        { "1 2 3  4", 1, 2, 3, 4, NULL },
        { "x y z", 0, 0, 0, 0, NULL },
        { "", 0, 0, 0, 0, NULL },
        { "   ", 0, 0, 0, 0, NULL },
        { "-1 99999999999999999999 9223372036854775807", 0, 0,
          9223372036854775807ull, 0, NULL },
        { "1 2", 1, 2, 0, 0, NULL },
    };
    char f0[64];

    (void) state;
    for (size_t i = 0; i < N(cases); i++) {
        fl_sync_elt_t pairs[] = {
            S(field(f0, sizeof(f0), "rb", def_risky, "risky")),
            S(cases[i].record),
        };
        fl_sync_fleet_t fl[3];
        size_t ignored = 99;

        assert_int_equal(controls(pairs, N(pairs), fl, &ignored), 1);
        assert_int_equal(ignored, 0);
        assert_true(fl[0].rolled_back);
        if (fl[0].at_ms != cases[i].at_ms || fl[0].errors != cases[i].errors
            || fl[0].enabled != cases[i].enabled
            || fl[0].sources != cases[i].sources)
        {
            fail_msg("record \"%s\" read as %llu %llu %llu %llu",
                     cases[i].record, (unsigned long long) fl[0].at_ms,
                     (unsigned long long) fl[0].errors,
                     (unsigned long long) fl[0].enabled,
                     (unsigned long long) fl[0].sources);
        }
        host_is(fl[0].rb_host, fl[0].rb_host_len, cases[i].host);
    }
}

/* Fields this host does not read: each skipped, counted, nothing set. */
static void test_controls_ignored(void **state)
{
    char f[16][96];
    char upper[64];
    fl_sync_elt_t pairs[] = {
        /* another definition of the flag, an unknown flag */
        S(field(f[0], 96, "rb", def_risky ^ 1, "risky")), S("1 2 3"),
        S(field(f[1], 96, "rb", def_risky, "nosuch")), S("1 2 3"),
        /* malformed names */
        S("rb:x"), S("1 2 3"),
        S(field(f[2], 96, "xx", def_risky, "risky")), S("1 2 3"),
        S(field(f[3], 96, "rv", def_risky, "risky")), S("1 2 3"),
        S(field(f[4], 96, "rb", def_risky, "")), S("1 2 3"),
        S("rb:00000000000000zz:risky"), S("1 2 3"),
        S("rb-0000000000000000:risky"), S("1 2 3"),
        S("rb:0000000000000000-risky"), S("1 2 3"),
        /* not strings */
        I(5), S("1 2 3"),
        S(field(f[5], 96, "rb", def_risky, "risky")), I(5),
        S(field(f[6], 96, "rb", def_risky, "risky")), NIL(),
        S(field(f[7], 96, "rb", def_risky, "risky")), A(0),
        /* overrides neither "off" nor milli-percent */
        S(field(f[8], 96, "ov", def_calm, "calm")), S("100001"),
        S(field(f[9], 96, "ov", def_calm, "calm")), S("-1"),
        S(field(f[10], 96, "ov", def_calm, "calm")), S("12.5"),
        S(field(f[11], 96, "ov", def_calm, "calm")), S(""),
        S(field(f[12], 96, "ov", def_calm, "calm")), S("OFF"),
    };
    fl_sync_fleet_t fl[3];
    size_t ignored = 0;

    (void) state;
    assert_int_equal(controls(pairs, N(pairs), fl, &ignored), 0);
    assert_int_equal(ignored, N(pairs) / 2);
    for (int i = 0; i < 3; i++) {
        assert_false(fl[i].rolled_back);
        assert_int_equal(fl[i].override_kind, FL_OVERRIDE_NONE);
    }

    /* either case of hex digits; hosts a log line must not show */
    snprintf(upper, sizeof(upper), "ob:%016llX:calm",
             (unsigned long long) def_calm);
    fl_sync_elt_t more[] = {
        S(upper), S("bad host"),
        S(field(f[13], 96, "ov", def_calm, "calm")), S("100000"),
        S(field(f[14], 96, "cb", def_calm, "calm")), S(""),
    };
    assert_int_equal(controls(more, N(more), fl, &ignored), 3);
    assert_int_equal(ignored, 0);
    assert_int_equal(fl[1].override_kind, FL_OVERRIDE_PERCENT);
    assert_int_equal(fl[1].override_milli, 100000);
    host_is(fl[1].ob_host, fl[1].ob_host_len, NULL);
    host_is(fl[1].cb_host, fl[1].cb_host_len, NULL);
}

/* Calls that cannot be answered: nothing read, fleets zeroed. */
static void test_controls_refused(void **state)
{
    fl_sync_elt_t v[] = { A(3), S("1"), S("2"), A(2), S("a"), S("b") };
    fl_sync_head_t h;
    fl_sync_fleet_t fl[3];
    size_t ignored = 7;

    (void) state;
    memset(fl, 0xff, sizeof(fl));
    memset(&h, 0, sizeof(h));
    assert_int_equal(fl_sync_reply_controls(v, N(v), &h, shop, fl, 3,
                                            &ignored), 0);
    assert_int_equal(ignored, 0);
    assert_false(fl[0].rolled_back);
    assert_null(fl[2].ob_host);

    h.has_control = 1;
    h.control = 99;                 /* out of the view */
    assert_int_equal(fl_sync_reply_controls(v, N(v), &h, shop, fl, 3,
                                            NULL), 0);
    h.control = 1;                  /* not an array */
    assert_int_equal(fl_sync_reply_controls(v, N(v), &h, shop, fl, 3,
                                            NULL), 0);
    h.control = 3;
    assert_int_equal(fl_sync_reply_controls(v, N(v), &h, NULL, fl, 3,
                                            NULL), 0);
    /* fewer fleets than the project has flags: the others are skipped */
    char f0[64];
    fl_sync_elt_t w[] = { A(3), S("1"), S("2"), A(2),
                          S(field(f0, sizeof(f0), "rb", def_calm, "calm")),
                          S("1 2 3") };
    assert_int_equal(head_of(w, N(w), 0, &h), FL_SYNC_REPLY_OK);
    assert_int_equal(fl_sync_reply_controls(w, N(w), &h, shop, fl, 1,
                                            &ignored), 0);
    assert_int_equal(ignored, 1);
    assert_int_equal(fl_sync_reply_controls(w, N(w), &h, shop, fl, 2,
                                            &ignored), 1);
    assert_true(fl[1].rolled_back);

    /* a view that is not whole: the pairs past its end are not read */
    fl_sync_elt_t cut[] = { A(3), S("1"), S("2"), A(4),
                            S(field(f0, sizeof(f0), "rb", def_calm, "calm")),
                            S("1 2 3"), S("ver") };
    h.has_control = 1;
    h.control = 3;
    assert_int_equal(fl_sync_reply_controls(cut, N(cut), &h, shop, fl, 3,
                                            &ignored), 1);
    assert_int_equal(ignored, 1);
}

/* ---------------------------------------------------------- an action */

static fl_sync_fleet_t fleet(int rolled_back, fl_override_kind_t kind,
    uint32_t milli)
{
    fl_sync_fleet_t f;
    memset(&f, 0, sizeof(f));
    f.rolled_back = rolled_back;
    f.override_kind = kind;
    f.override_milli = milli;
    return f;
}

/* {epoch, ver, 0, ramps}: the seed's words read back as the fleet's
 * answer give the same state; broken items are skipped; the copy says
 * what changed. */
static void test_ramps(void **state)
{
    static char words[FL_SYNC_RAMP_VALUES][32];
    fl_sync_elt_t v[8 + 2 * (FL_SYNC_RAMP_VALUES + 1)];
    fl_sync_flag_t f[3];
    fl_sync_head_t h;
    fl_sync_ramp_t out[3];
    fl_ramp_def_t d;
    fl_ramp_t st, zone;
    char seed[FL_SYNC_RAMP_SEED_MAX];
    size_t len, k, n, ignored;
    const char *p;

    (void) state;
    memset(&d, 0, sizeof(d));
    d.nstages = 3;
    d.stages[0].milli = 1000;
    d.stages[1].milli = 50000;
    d.stages[2].milli = 100000;
    d.tick = 1;

    fl_ramp_init(&st);
    st.state = FL_RAMP_HOLDING;
    st.stage = 1;
    st.start_ms = 1700000000000ull;
    st.stage_ms = 1700000060000ull;
    st.next_tick_ms = 1700000061000ull;
    st.stage_on = 12345;
    st.stage_changes = 1;
    st.evidence.log_lr[0] = 0.1;
    st.evidence.log_lr[4] = -3.141592653589793;
    st.evidence.ticks = 61;
    st.evidence.decided = 1;
    st.evidence.decided_tick = 60;
    st.decided_e1 = 4;

    len = fl_sync_ramp_seed(&st, seed);
    assert_true(len < sizeof(seed));
    seed[len] = '\0';

    /* entries: f[0] no entry, f[1] ramped, f[2] an entry without a ramp */
    f[0] = flag("a", 1, 1);
    f[1] = flag("b", 2, 1);
    f[2] = flag("c", 3, 1);
    f[0].entry = FL_SYNC_NO_ENTRY;
    f[1].entry = FL_SYNC_ENTRY;
    f[1].ramp_def = &d;
    f[2].entry = FL_SYNC_ENTRY;

    n = 0;
    v[n++] = A(4);
    v[n++] = S("5");
    v[n++] = S("6");
    v[n++] = I(0);
    v[n++] = A(2);
    v[n++] = A(FL_SYNC_RAMP_VALUES);
    for (k = 0, p = seed; k < FL_SYNC_RAMP_VALUES; k++) {
        const char *sp = strchr(p, ' ');
        size_t wl = sp ? (size_t) (sp - p) : strlen(p);
        memcpy(words[k], p, wl);
        words[k][wl] = '\0';
        v[n++] = S(words[k]);
        p = sp ? sp + 1 : p + wl;
    }
    v[n++] = I(0);

    assert_int_equal(head_of(v, n, 0, &h), FL_SYNC_REPLY_OK);
    assert_false(h.has_control);
    assert_true(h.has_ramps);
    assert_int_equal(h.ramps, 4);

    assert_int_equal(fl_sync_reply_ramps(v, n, &h, f, 3, NULL, out, &ignored), 1);
    assert_int_equal(ignored, 0);
    assert_false(out[0].present);
    assert_true(out[1].present);
    assert_false(out[2].present);
    assert_memory_equal(&out[1].state, &st, sizeof(st));

    /* the copy: a zone pending, then at stage 1, then restarted */
    fl_ramp_init(&zone);
    zone.base_on = 77;
    assert_int_equal(fl_sync_ramp_copy(&d, &zone, &out[1].state, 0, 0),
                     FL_RAMP_EV_STARTED);
    assert_true(zone.base_on == 77);
    assert_true(zone.stage == 1 && zone.evidence.ticks == 61);
    assert_true(zone.evidence.log_lr[4] == -3.141592653589793);
    assert_int_equal(fl_sync_ramp_copy(&d, &zone, &out[1].state, 0, 0),
                     FL_RAMP_EV_NONE);
    out[1].state.stage = 2;
    out[1].state.state = FL_RAMP_DONE;
    assert_int_equal(fl_sync_ramp_copy(&d, &zone, &out[1].state, 0, 0),
                     FL_RAMP_EV_DONE);
    out[1].state.stage = 0;
    out[1].state.state = FL_RAMP_RUNNING;
    out[1].state.start_ms++;
    assert_int_equal(fl_sync_ramp_copy(&d, &zone, &out[1].state, 0, 0),
                     FL_RAMP_EV_STARTED);
    out[1].state.stalled = 1;
    assert_int_equal(fl_sync_ramp_copy(&d, &zone, &out[1].state, 0, 0),
                     FL_RAMP_EV_STALLED);

    /* broken items: a stage past the definition, a word not a number, a
     * log_lr not finite, one value short */
    v[6 + 1] = S("3");
    assert_int_equal(fl_sync_reply_ramps(v, n, &h, f, 3, NULL, out, &ignored), 0);
    assert_int_equal(ignored, 1);
    v[6 + 1] = S("x");
    assert_int_equal(fl_sync_reply_ramps(v, n, &h, f, 3, NULL, out, &ignored), 0);
    v[6 + 1] = S("1");
    v[6 + 16] = S("inf");
    assert_int_equal(fl_sync_reply_ramps(v, n, &h, f, 3, NULL, out, &ignored), 0);
    v[6 + 16] = S("1e999");
    assert_int_equal(fl_sync_reply_ramps(v, n, &h, f, 3, NULL, out, &ignored), 0);
    v[6 + 16] = S("0.1");
    assert_int_equal(fl_sync_reply_ramps(v, n, &h, f, 3, NULL, out, &ignored), 1);
    /* one value short (the last value becomes the second item), and a
     * third item for which no entry was sent */
    v[5] = A(FL_SYNC_RAMP_VALUES - 1);
    v[4] = A(3);
    assert_int_equal(head_of(v, n, 0, &h), FL_SYNC_REPLY_OK);
    assert_int_equal(fl_sync_reply_ramps(v, n, &h, f, 3, NULL, out, &ignored), 0);
    assert_int_equal(ignored, 2);

    /* a fourth element that is no array: no ramps */
    v[0] = A(4);
    v[4] = I(7);
    assert_int_equal(head_of(v, 5, 0, &h), FL_SYNC_REPLY_OK);
    assert_false(h.has_ramps);
    assert_int_equal(fl_sync_reply_ramps(v, 5, &h, f, 3, NULL, out, &ignored), 0);
    /* the integer 0 is the only number that stands for the hash */
    v[0] = A(3);
    v[3] = I(1);
    assert_int_equal(head_of(v, 4, 0, &h), FL_SYNC_REPLY_CONTROL);
}

static void test_action(void **state)
{
    fl_sync_action_t a;
    fl_sync_fleet_t f;
    uint64_t off = fl_sync_control(0, FL_OVERRIDE_OFF, 0);
    uint64_t pct = fl_sync_control(0, FL_OVERRIDE_PERCENT, 25000);

    (void) state;
    /* changed here during the round: nothing, known kept */
    f = fleet(1, FL_OVERRIDE_NONE, 0);
    assert_int_equal(fl_sync_action(&f, 0, 1, &a), 0);
    assert_false(a.rollback || a.clear || a.set_override);

    /* the fleet's rollback over none here */
    assert_int_equal(fl_sync_action(&f, 0, 0, &a), 1);
    assert_true(a.rollback);
    assert_false(a.clear || a.set_override);
    assert_true(a.known == 1);

    /* already rolled back here: nothing to do */
    assert_int_equal(fl_sync_action(&f, 1, 1, &a), 1);
    assert_false(a.rollback || a.clear || a.set_override);

    /* the fleet has none: the one here is cleared */
    f = fleet(0, FL_OVERRIDE_NONE, 0);
    assert_int_equal(fl_sync_action(&f, 1, 1, &a), 1);
    assert_true(a.clear);
    assert_false(a.rollback || a.set_override);
    assert_true(a.known == 0);

    /* overrides: set, changed, removed; a rollback leaves them be */
    f = fleet(0, FL_OVERRIDE_PERCENT, 25000);
    assert_int_equal(fl_sync_action(&f, off, off, &a), 1);
    assert_true(a.set_override);
    assert_int_equal(a.override_kind, FL_OVERRIDE_PERCENT);
    assert_int_equal(a.override_milli, 25000);
    assert_true(a.known == pct);

    assert_int_equal(fl_sync_action(&f, pct | 1, pct | 1, &a), 1);
    assert_false(a.set_override);
    assert_true(a.clear);

    f = fleet(0, FL_OVERRIDE_NONE, 0);
    assert_int_equal(fl_sync_action(&f, pct, pct, &a), 1);
    assert_true(a.set_override);
    assert_int_equal(a.override_kind, FL_OVERRIDE_NONE);
    assert_int_equal(a.override_milli, 0);

    /* an "off" override's value is 0 whatever the fleet struct holds */
    f = fleet(1, FL_OVERRIDE_OFF, 777);
    assert_int_equal(fl_sync_action(&f, 0, 0, &a), 1);
    assert_true(a.rollback && a.set_override);
    assert_int_equal(a.override_kind, FL_OVERRIDE_OFF);
    assert_int_equal(a.override_milli, 0);
    assert_true(a.known == (off | 1));
}

/* ------------------------------------------- the fleet's ramp, checked */

/* {epoch, ver, 0, [item]}: one ramped entry whose item is st's numbers,
 * as the script writes them (the seed's words). */
static size_t ramp_answer(const fl_ramp_t *st, fl_sync_elt_t *v,
    char (*words)[32])
{
    char seed[FL_SYNC_RAMP_SEED_MAX];
    size_t len, k, n;
    const char *p;

    len = fl_sync_ramp_seed(st, seed);
    seed[len] = '\0';

    n = 0;
    v[n++] = A(4);
    v[n++] = S("5");
    v[n++] = S("6");
    v[n++] = I(0);
    v[n++] = A(1);
    v[n++] = A(FL_SYNC_RAMP_VALUES);
    for (k = 0, p = seed; k < FL_SYNC_RAMP_VALUES; k++) {
        const char *sp = strchr(p, ' ');
        size_t wl = sp ? (size_t) (sp - p) : strlen(p);
        memcpy(words[k], p, wl);
        words[k][wl] = '\0';
        v[n++] = S(words[k]);
        p = sp ? sp + 1 : p + wl;
    }
    return n;
}

/* Read st as the fleet's answer: 1 when taken, else 0 and *why. */
static int ramp_read(const fl_ramp_def_t *d, const fl_ramp_t *st,
    uint64_t known, const fl_sync_fleet_t *fleets, const char **why)
{
    static char words[FL_SYNC_RAMP_VALUES][32];
    fl_sync_elt_t v[6 + FL_SYNC_RAMP_VALUES];
    fl_sync_flag_t f;
    fl_sync_head_t h;
    fl_sync_ramp_t out[1];
    size_t n, ignored, used;

    f = flag("b", 2, 1);
    f.entry = FL_SYNC_ENTRY;
    f.ramp_def = d;
    f.known = known;

    n = ramp_answer(st, v, words);
    assert_int_equal(head_of(v, n, 0, &h), FL_SYNC_REPLY_OK);
    used = fl_sync_reply_ramps(v, n, &h, &f, 1, fleets, out, &ignored);
    assert_int_equal(used + ignored, 1);
    assert_int_equal(out[0].present, (int) used);
    *why = out[0].refused;
    if (used) {
        assert_null(out[0].refused);
        assert_memory_equal(&out[0].state, st, sizeof(*st));
    } else {
        assert_non_null(out[0].refused);
    }
    return (int) used;
}

static void refused(const fl_ramp_def_t *d, const fl_ramp_t *st,
    uint64_t known, const fl_sync_fleet_t *fleets, const char *want)
{
    const char *why = NULL;

    assert_int_equal(ramp_read(d, st, known, fleets, &why), 0);
    if (strncmp(why, want, strlen(want)) != 0) {
        fail_msg("refused \"%s\", not \"%s\"", why, want);
    }
}

/* A state the script never writes is refused whole, with why; so is one
 * that disagrees with the fleet's rollback (this answer's control hash,
 * else what the fleet last said). */
static void test_ramp_checks(void **state)
{
    fl_ramp_def_t d;
    fl_ramp_t good, st;
    fl_sync_fleet_t fl[1];
    const char *why;

    (void) state;
    memset(&d, 0, sizeof(d));
    d.nstages = 3;
    d.stages[0].milli = 10000;
    d.stages[1].milli = 60000;
    d.stages[2].milli = 100000;
    d.tick = 1;

    fl_ramp_init(&good);
    good.state = FL_RAMP_RUNNING;
    good.stage = 1;
    good.start_ms = 1700000000000ull;
    good.stage_ms = 1700000060000ull;
    good.next_tick_ms = 1700000061000ull;
    good.stage_changes = 1;
    good.evidence.ticks = 61;
    assert_int_equal(ramp_read(&d, &good, 0, NULL, &why), 1);

    /* done before the last stage; at the last stage and not done */
    st = good;
    st.state = FL_RAMP_DONE;
    refused(&d, &st, 0, NULL, "done before its last stage");
    st.stage = 2;
    assert_int_equal(ramp_read(&d, &st, 0, NULL, &why), 1);
    st.state = FL_RAMP_HOLDING;
    refused(&d, &st, 0, NULL, "at its last stage and not done");

    /* not started, yet at a stage or with a tick */
    fl_ramp_init(&st);
    assert_int_equal(ramp_read(&d, &st, 0, NULL, &why), 1);
    st.stage = 1;
    refused(&d, &st, 0, NULL, "never started");
    st.stage = 0;
    st.next_tick_ms = 5;
    refused(&d, &st, 0, NULL, "never started");

    /* times out of order */
    st = good;
    st.stage_ms = st.start_ms - 1;
    refused(&d, &st, 0, NULL, "started, with times out of order");
    st = good;
    st.next_tick_ms = st.start_ms;
    refused(&d, &st, 0, NULL, "started, with times out of order");

    /* a decision without a time, a rollback without a cause, a decision
     * at a tick not counted */
    st = good;
    st.cause = FL_RAMP_CAUSE_REGRESSION;
    refused(&d, &st, 0, NULL, "a decision without a time");
    st = good;
    st.state = FL_RAMP_ROLLED_BACK;
    refused(&d, &st, 1, NULL, "rolled back without a cause");
    st = good;
    st.evidence.decided = 1;
    st.evidence.decided_tick = 62;
    refused(&d, &st, 0, NULL, "decided at a tick");
    st.evidence.decided_tick = 61;
    assert_int_equal(ramp_read(&d, &st, 0, NULL, &why), 1);

    /* the fleet's rollback: running against it, rolled back without it */
    refused(&d, &good, 1, NULL, "not rolled back, though the fleet's");
    st = good;
    st.state = FL_RAMP_ROLLED_BACK;
    st.cause = FL_RAMP_CAUSE_OTHER;
    st.decided_ms = good.next_tick_ms;
    assert_int_equal(ramp_read(&d, &st, 1, NULL, &why), 1);
    refused(&d, &st, 0, NULL, "rolled back, though the fleet's control");
    /* this answer's control hash wins over what was said before */
    fl[0] = fleet(1, FL_OVERRIDE_NONE, 0);
    assert_int_equal(ramp_read(&d, &st, 0, fl, &why), 1);
    refused(&d, &good, 0, fl, "not rolled back");
    fl[0] = fleet(0, FL_OVERRIDE_NONE, 0);
    refused(&d, &st, 1, fl, "rolled back, though");
    assert_int_equal(ramp_read(&d, &good, 1, fl, &why), 1);
    /* done stays done under a rollback */
    st = good;
    st.state = FL_RAMP_DONE;
    st.stage = 2;
    assert_int_equal(ramp_read(&d, &st, 1, NULL, &why), 1);

    /* a ramp rolled back before it started, then cleared: paused at
     * stage 0 with no start (the script writes it so) */
    fl_ramp_init(&st);
    st.state = FL_RAMP_PAUSED;
    st.paused_ms = 5;
    st.cause = FL_RAMP_CAUSE_OTHER;
    st.decided_ms = 4;
    assert_int_equal(ramp_read(&d, &st, 0, NULL, &why), 1);
}

/* The copy on a host rolled back before the fleet heard of it: the
 * fleet's stage, still rolled back; what a host that knows nothing
 * serves. */
static void test_ramp_copy_rolled(void **state)
{
    fl_ramp_def_t d;
    fl_ramp_t zone, fleet_st;

    (void) state;
    memset(&d, 0, sizeof(d));
    d.nstages = 3;
    d.stages[0].milli = 10000;
    d.stages[1].milli = 60000;
    d.stages[2].milli = 100000;

    fl_ramp_init(&zone);
    zone.state = FL_RAMP_RUNNING;
    zone.start_ms = 1000;
    zone.stage_ms = 1000;
    zone.next_tick_ms = 2000;
    zone.base_on = 9;

    fleet_st = zone;
    fleet_st.base_on = 0;
    fleet_st.stage = 1;
    fleet_st.stage_ms = 5000;
    fleet_st.next_tick_ms = 6000;

    assert_int_equal(fl_sync_ramp_copy(&d, &zone, &fleet_st, 1, 4321),
                     FL_RAMP_EV_ADVANCED);
    assert_true(zone.state == FL_RAMP_ROLLED_BACK);
    assert_true(zone.stage == 1 && zone.stage_ms == 5000);
    assert_true(zone.cause == FL_RAMP_CAUSE_OTHER);
    assert_true(zone.decided_ms == 4321);
    assert_true(zone.base_on == 9);
    /* the fleet's own rollback, its cause, as it is */
    fleet_st.state = FL_RAMP_ROLLED_BACK;
    fleet_st.cause = FL_RAMP_CAUSE_REGRESSION;
    fleet_st.decided_ms = 5500;
    assert_int_equal(fl_sync_ramp_copy(&d, &zone, &fleet_st, 1, 4321),
                     FL_RAMP_EV_NONE);
    assert_true(zone.cause == FL_RAMP_CAUSE_REGRESSION);
    assert_true(zone.decided_ms == 5500);
    /* not rolled back here: the fleet's state whole */
    fleet_st.state = FL_RAMP_RUNNING;
    fleet_st.cause = FL_RAMP_CAUSE_NONE;
    assert_int_equal(fl_sync_ramp_copy(&d, &zone, &fleet_st, 0, 0),
                     FL_RAMP_EV_NONE);
    assert_true(zone.state == FL_RAMP_RUNNING);
    /* done is done */
    fleet_st.state = FL_RAMP_DONE;
    fleet_st.stage = 2;
    assert_int_equal(fl_sync_ramp_copy(&d, &zone, &fleet_st, 1, 4321),
                     FL_RAMP_EV_DONE);
    assert_true(zone.state == FL_RAMP_DONE);

    /* a host that knows nothing: no more than the first stage */
    assert_true(fl_sync_ramp_unknown_milli(&d, 30000) == 10000);
    assert_true(fl_sync_ramp_unknown_milli(&d, 10000) == FL_RAMP_NONE);
    assert_true(fl_sync_ramp_unknown_milli(&d, 0) == FL_RAMP_NONE);
    assert_true(fl_sync_ramp_unknown_milli(NULL, 30000) == FL_RAMP_NONE);
}

/* A runtime version's signed bytes (docs/sync.md, "Signing"), exactly. */
static void test_defs_signed(void **state)
{
    (void) state;
    char out[256];
    const char want[] = "flags-definitions\nshop\n5\n1700000000123\n{\"version\":5}\n{\"flags\":[]}";
    size_t bound = fl_sync_defs_signed_bound(4, 13, 12);
    size_t n = fl_sync_defs_signed("shop", 4, 5, 1700000000123ULL, "{\"version\":5}", 13,
                                   "{\"flags\":[]}", 12, out, sizeof(out));

    assert_int_equal(n, sizeof(want) - 1);
    assert_memory_equal(out, want, n);
    assert_true(bound >= n);
    /* too small: nothing written past cap, 0 */
    assert_int_equal(fl_sync_defs_signed("shop", 4, 5, 1700000000123ULL, "{\"version\":5}", 13,
                                         "{\"flags\":[]}", 12, out, n - 1), 0);
    assert_int_equal(fl_sync_defs_signed("shop", 4, 5, 1700000000123ULL, "{\"version\":5}", 13,
                                         "{\"flags\":[]}", 12, out, n), n);
    /* the largest numbers fit the bound */
    n = fl_sync_defs_signed("p", 1, UINT64_MAX, UINT64_MAX, "", 0, "", 0, out, sizeof(out));
    assert_int_equal(n, sizeof("flags-definitions\np\n18446744073709551615\n18446744073709551615\n\n") - 1);
    assert_true(fl_sync_defs_signed_bound(1, 0, 0) >= n);
    /* another project or number is other bytes */
    n = fl_sync_defs_signed("shoq", 4, 5, 1700000000123ULL, "{\"version\":5}", 13,
                            "{\"flags\":[]}", 12, out, sizeof(out));
    assert_memory_not_equal(out, want, n);
}

/* What a host does with the fleet's answer to "get". */
static void test_defs_get(void **state)
{
    (void) state;
    uint64_t refused = 0, at = 0;

    /* an empty fleet: a host on the file says nothing, a newer one seeds */
    assert_int_equal(fl_sync_defs_get(0, 1, 0, 0, &refused, &at), FL_SYNC_DEFS_NOTHING);
    assert_int_equal(fl_sync_defs_get(0, 4, 0, 0, &refused, &at), FL_SYNC_DEFS_SEED);
    /* an older fleet (restarted from an old dump): seeded too */
    assert_int_equal(fl_sync_defs_get(3, 4, 0, 0, &refused, &at), FL_SYNC_DEFS_SEED);
    /* up to date */
    assert_int_equal(fl_sync_defs_get(4, 4, 0, 0, &refused, &at), FL_SYNC_DEFS_NOTHING);
    /* newer: checked */
    assert_int_equal(fl_sync_defs_get(5, 4, 1, 100, &refused, &at), FL_SYNC_DEFS_CHECK);
    /* newer but no longer than ours by the time the answer came */
    assert_int_equal(fl_sync_defs_get(5, 5, 1, 100, &refused, &at), FL_SYNC_DEFS_NOTHING);
    /* refused already: not again, round after round */
    refused = 5;
    at = 100;
    assert_int_equal(fl_sync_defs_get(5, 4, 1, 100, &refused, &at), FL_SYNC_DEFS_NOTHING);
    assert_int_equal(refused, 5);
    /* the same number written again, at another time: checked */
    assert_int_equal(fl_sync_defs_get(5, 4, 1, 101, &refused, &at), FL_SYNC_DEFS_CHECK);
    /* the refused version gone (the fleet behind it): forgotten */
    assert_int_equal(fl_sync_defs_get(4, 4, 0, 0, &refused, &at), FL_SYNC_DEFS_NOTHING);
    assert_int_equal(refused, 0);
    assert_int_equal(at, 0);
    assert_int_equal(fl_sync_defs_get(5, 4, 1, 100, &refused, &at), FL_SYNC_DEFS_CHECK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_valid),
        cmocka_unit_test(test_defs_signed),
        cmocka_unit_test(test_defs_get),
        cmocka_unit_test(test_control_encoding),
        cmocka_unit_test(test_plan),
        cmocka_unit_test(test_known_unmoved),
        cmocka_unit_test(test_round_args),
        cmocka_unit_test(test_round_empty),
        cmocka_unit_test(test_round_bound),
        cmocka_unit_test(test_away_keeps),
        cmocka_unit_test(test_cumulative),
        cmocka_unit_test(test_plan_resend),
        cmocka_unit_test(test_head_back),
        cmocka_unit_test(test_round_ramp),
        cmocka_unit_test(test_ramp_actions),
        cmocka_unit_test(test_head_good),
        cmocka_unit_test(test_head_broken),
        cmocka_unit_test(test_head_deep),
        cmocka_unit_test(test_controls_good),
        cmocka_unit_test(test_controls_records),
        cmocka_unit_test(test_controls_ignored),
        cmocka_unit_test(test_controls_refused),
        cmocka_unit_test(test_action),
        cmocka_unit_test(test_back_known),
        cmocka_unit_test(test_ramps),
        cmocka_unit_test(test_ramp_checks),
        cmocka_unit_test(test_ramp_copy_rolled),
    };

    return cmocka_run_group_tests(tests, load_shop, free_shop);
}
