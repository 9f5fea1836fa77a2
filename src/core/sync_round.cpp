/*
 * sync_round.cpp - what one flags_sync round sends (docs/sync.md): which
 * flags send an entry, and the script call's KEYS and ARGV, byte for byte
 * what sync_script.cpp reads.  The glue reads the zone into
 * fl_sync_flag_t, formats the arguments as a Redis command and sends it.
 *
 * Decisions:
 *  - a flag's rollback and override travel as one number
 *    (fl_sync_control()); a difference from what the fleet last said is a
 *    change made here, published by the round;
 *  - while the fleet's state is unknown (epoch 0) the fleet is taken to
 *    say "nothing": only what is active here is published;
 *  - counts go only under an active policy and with no rollback in place;
 *    otherwise they are dropped (the caller moves the baseline); they go
 *    as cumulative counts of this host's incarnation, with what Redis
 *    acknowledged of them, so the script adds each count once whatever
 *    was lost (docs/sync.md, "What a failover loses");
 *  - after an outage a flag's counts go only when the outage was shorter
 *    than its window (fl_sync_away_keeps());
 *  - the sources go with an error delta only;
 *  - a ramped flag sends an entry every round: the fleet steps its ramp
 *    (docs/sync.md, "Ramps across the fleet").
 */

#include "flags_core.h"

#include <cstring>

namespace {

/* Bytes of the longest decimal of a uint64_t, and of a uint32_t. */
constexpr size_t u64_digits = 20;
constexpr size_t u32_digits = 10;

/* A writer into the caller's buffer: never past its end, and it says so. */
struct Out {
    char   *p;
    char   *end;
    bool    full = false;

    Out(char *buf, size_t len) noexcept : p(buf), end(buf + len) {}

    void bytes(const char *s, size_t n) noexcept
    {
        if (full || static_cast<size_t>(end - p) < n) {
            full = true;
            return;
        }
        if (n) {
            std::memcpy(p, s, n);
        }
        p += n;
    }

    void str(const char *s) noexcept { bytes(s, std::strlen(s)); }

    void u64(uint64_t v) noexcept
    {
        char d[u64_digits];
        size_t i = sizeof(d);
        do {
            d[--i] = static_cast<char>('0' + v % 10);
            v /= 10;
        } while (v);
        bytes(d + i, sizeof(d) - i);
    }

    /* exactly `digits` lowercase hex digits */
    void hex(uint64_t v, unsigned digits) noexcept
    {
        char d[16];
        for (unsigned i = digits; i > 0; i--) {
            d[i - 1] = "0123456789abcdef"[v & 0xf];
            v >>= 4;
        }
        bytes(d, digits);
    }
};

/* One argument: what was written since start. */
struct Args {
    const char  **argv;
    size_t       *argvlen;
    size_t        max;
    size_t        argc = 0;
    bool          full = false;

    void add(const char *s, size_t len) noexcept
    {
        if (argc >= max) {
            full = true;
            return;
        }
        argv[argc] = s;
        argvlen[argc++] = len;
    }

    void since(const Out &o, const char *start) noexcept
    {
        add(start, static_cast<size_t>(o.p - start));
    }
};

uint64_t known_of(const fl_sync_round_t *r, const fl_sync_flag_t *f) noexcept
{
    return r->epoch ? f->known : 0;
}

/* the override kind's bits, kept an integer: a caller's control may hold
 * any value, not only fl_override_kind_t's */
unsigned kind_of(uint64_t control) noexcept
{
    return static_cast<unsigned>((control >> 1) & 0x7f);
}

/* PREFIX{project}:<what> (no ':' after it for "ctl") */
void key(Out &o, const fl_sync_round_t *r, const char *what) noexcept
{
    o.bytes(r->prefix, r->prefix_len);
    o.bytes("{", 1);
    o.bytes(r->project, r->project_len);
    o.bytes("}:", 2);
    o.str(what);
}

/* PREFIX{project}:w:<def>:<flag> or :s: */
void flag_key(Out &o, const fl_sync_round_t *r, const fl_sync_flag_t *f,
    const char *what) noexcept
{
    key(o, r, what);
    o.hex(f->def_hash, 16);
    o.bytes(":", 1);
    o.bytes(f->name, f->name_len);
}

/* The keys of every entry of one kind, in the flags' order. */
void entry_keys(Out &o, Args &a, const fl_sync_round_t *r,
    const fl_sync_flag_t *flags, size_t n, const char *what) noexcept
{
    for (size_t i = 0; i < n; i++) {
        if (flags[i].entry == FL_SYNC_NO_ENTRY) {
            continue;
        }
        char *start = o.p;
        flag_key(o, r, &flags[i], what);
        a.since(o, start);
    }
}

void rollback_args(Out &o, Args &a, const fl_sync_round_t *r,
    const fl_sync_flag_t *f, uint64_t known) noexcept
{
    /* published when it changed here */
    if ((f->control & 1) != (known & 1)) {
        a.add((f->control & 1) ? "set" : "clr", 3);
    } else {
        a.add("-", 1);
    }

    char *start = o.p;
    o.u64(f->rb_at_ms);
    o.bytes(" ", 1);
    o.u64(f->rb_errors);
    o.bytes(" ", 1);
    o.u64(f->rb_enabled);
    o.bytes(" ", 1);
    o.bytes(r->host, r->host_len);
    o.bytes(" ", 1);
    o.u64(f->rb_sources);
    a.since(o, start);
}

void override_args(Out &o, Args &a, const fl_sync_flag_t *f, uint64_t known)
    noexcept
{
    unsigned kind = kind_of(f->control);

    if ((f->control >> 1) != (known >> 1)) {
        a.add(kind == FL_OVERRIDE_NONE ? "del" : "set", 3);
    } else {
        a.add("-", 1);
    }

    char *start = o.p;
    if (kind == FL_OVERRIDE_PERCENT) {
        o.u64(f->control >> 8);
    } else {
        o.bytes("off", 3);
    }
    a.since(o, start);
}

void policy_arg(Out &o, Args &a, const fl_sync_flag_t *f) noexcept
{
    char *start = o.p;
    if (f->policy.mode == FL_ROLLBACK_ON) {
        o.u64(f->policy.min_errors);
        o.bytes(" ", 1);
        o.u64(f->policy.rate_milli);
        o.bytes(" ", 1);
        o.u64(f->policy.window);
        o.bytes(" ", 1);
        o.u64(f->policy.min_sources);
    }
    a.since(o, start);
}

/* "key:age ..." of the window's sources, when errors go out */
void sources_arg(Out &o, Args &a, const fl_sync_flag_t *f) noexcept
{
    char *start = o.p;
    size_t ns = f->nsources < FL_SOURCE_SLOTS ? f->nsources : FL_SOURCE_SLOTS;

    if (f->errors != f->base_errors && f->source_keys && f->source_ages) {
        for (size_t k = 0; k < ns; k++) {
            if (k) {
                o.bytes(" ", 1);
            }
            o.hex(f->source_keys[k], 8);
            o.bytes(":", 1);
            o.u64(f->source_ages[k]);
        }
    }
    a.since(o, start);
}

/* "tick alpha_ppm dispersion_milli start_at_ms max_extend
 * on_insufficient nstages milli:hold:min_requests ..." */
void ramp_def_arg(Out &o, Args &a, const fl_sync_flag_t *f) noexcept
{
    const fl_ramp_def_t *d = f->ramp_def;
    char *start = o.p;

    if (d != nullptr) {
        uint32_t nst = d->nstages < FL_RAMP_MAX_STAGES ? d->nstages
                                                       : FL_RAMP_MAX_STAGES;
        const uint64_t head[] = {
            d->tick, d->alpha_ppm, d->dispersion_milli, d->start_at_ms,
            d->max_extend, d->on_insufficient, nst,
        };
        for (size_t k = 0; k < sizeof(head) / sizeof(head[0]); k++) {
            if (k) {
                o.bytes(" ", 1);
            }
            o.u64(head[k]);
        }
        for (uint32_t k = 0; k < nst; k++) {
            o.bytes(" ", 1);
            o.u64(d->stages[k].milli);
            o.bytes(":", 1);
            o.u64(d->stages[k].hold);
            o.bytes(":", 1);
            o.u64(d->stages[k].min_requests);
        }
    }
    a.since(o, start);
}

/* "n1 n0 e1 e0 stopped guard actions witnesses floor a1 a0 ae1 ae0":
 * the cohorts' cumulative counts this incarnation has put into the fleet
 * (witnessed errors; acked + (totals - base), as the errors'), the
 * operator's actions as digits ("-": none), this host's distinct
 * witnesses of the evidence with the floor a proof needs, and what Redis
 * acknowledged of the four counts (docs/sync.md, "What a failover
 * loses") */
void ramp_host_arg(Out &o, Args &a, const fl_sync_flag_t *f) noexcept
{
    char *start = o.p;

    if (f->ramp_def != nullptr) {
        /* on, off, on errors, off errors: what Redis acknowledged, and
         * what this host counted since its base */
        const uint64_t acked[] = {
            f->acked_on, f->acked_off, f->acked_on_errors,
            f->acked_off_errors
        };
        const uint64_t since[] = {
            f->on - f->base_on, f->off - f->base_off,
            f->on_errors - f->base_on_errors,
            f->off_errors - f->base_off_errors
        };
        for (size_t k = 0; k < 4; k++) {
            if (k > 0) {
                o.bytes(" ", 1);
            }
            o.u64(acked[k] + since[k]);
        }
        o.bytes(f->ramp_stopped ? " 1" : " 0", 2);
        o.bytes(f->ramp_guard ? " 1 " : " 0 ", 3);
        unsigned n = fl_sync_ramp_actions_count(f->ramp_actions);
        if (n == 0) {
            o.bytes("-", 1);
        }
        for (unsigned k = 0; k < n; k++) {
            char c = static_cast<char>('0' + ((f->ramp_actions >> (4 * k))
                                              & 0xf));
            o.bytes(&c, 1);
        }
        o.bytes(" ", 1);
        o.u64(f->ramp_witnesses);
        o.bytes(" ", 1);
        o.u64(f->ramp_min_witnesses);
        for (uint64_t v : acked) {
            o.bytes(" ", 1);
            o.u64(v);
        }
    }
    a.since(o, start);
}

void ramp_seed_arg(Out &o, Args &a, const fl_sync_flag_t *f) noexcept
{
    char *start = o.p;

    if (f->ramp_def != nullptr && f->ramp_seed != nullptr) {
        char seed[FL_SYNC_RAMP_SEED_MAX];
        o.bytes(seed, fl_sync_ramp_seed(f->ramp_seed, seed));
    }
    a.since(o, start);
}

/* The FL_SYNC_ENTRY_ARGS arguments of one entry. */
void entry_args(Out &o, Args &a, const fl_sync_round_t *r,
    const fl_sync_flag_t *f) noexcept
{
    uint64_t known = known_of(r, f);

    a.add(f->name, f->name_len);

    char *start = o.p;
    o.hex(f->def_hash, 16);
    a.since(o, start);

    rollback_args(o, a, r, f, known);
    override_args(o, a, f, known);

    /* cumulative: what was acknowledged, and what was counted since */
    start = o.p;
    o.u64(f->acked_errors + (f->errors - f->base_errors));
    a.since(o, start);

    start = o.p;
    o.u64(f->acked_enabled + (f->enabled - f->base_enabled));
    a.since(o, start);

    policy_arg(o, a, f);
    sources_arg(o, a, f);

    ramp_def_arg(o, a, f);
    ramp_host_arg(o, a, f);
    ramp_seed_arg(o, a, f);

    start = o.p;
    o.u64(f->acked_errors);
    a.since(o, start);

    start = o.p;
    o.u64(f->acked_enabled);
    a.since(o, start);
}

} // namespace


extern "C" int fl_sync_ramp_actions_push(uint64_t *q, fl_ramp_action_t a)
    noexcept
{
    unsigned n = fl_sync_ramp_actions_count(*q);

    if (n >= FL_SYNC_RAMP_ACTIONS_MAX || static_cast<unsigned>(a) > 14) {
        return 0;
    }
    *q |= static_cast<uint64_t>(a + 1) << (4 * n);
    return 1;
}


extern "C" unsigned fl_sync_ramp_actions_count(uint64_t q) noexcept
{
    unsigned n = 0;

    while (n < FL_SYNC_RAMP_ACTIONS_MAX && ((q >> (4 * n)) & 0xf) != 0) {
        n++;
    }
    return n;
}


extern "C" uint64_t fl_sync_ramp_actions_drop(uint64_t q, unsigned n)
    noexcept
{
    return n >= FL_SYNC_RAMP_ACTIONS_MAX ? 0 : q >> (4 * n);
}


extern "C" uint64_t fl_sync_control(int rolled_back, fl_override_kind_t kind,
    uint32_t milli) noexcept
{
    return (rolled_back ? 1 : 0)
           | (static_cast<uint64_t>(kind & 0x7f) << 1)
           | (static_cast<uint64_t>(kind == FL_OVERRIDE_PERCENT ? milli : 0)
              << 8);
}


extern "C" int fl_sync_away_keeps(uint64_t away_ms,
    const fl_rollback_policy_t *p) noexcept
{
    if (p == nullptr || p->mode != FL_ROLLBACK_ON || p->window == 0) {
        return 0;
    }

    return away_ms / 1000 < p->window ? 1 : 0;
}


extern "C" size_t fl_sync_round_plan(const fl_sync_round_t *r,
    fl_sync_flag_t *flags, size_t n, size_t *with_sources) noexcept
{
    size_t entries = 0, sources = 0;

    for (size_t i = 0; i < n; i++) {
        fl_sync_flag_t *f = &flags[i];
        uint64_t de = f->errors - f->base_errors;
        uint64_t dn = f->enabled - f->base_enabled;

        f->entry = FL_SYNC_NO_ENTRY;

        if (!f->counted) {
            continue;
        }

        /* Redis lacks calls it acknowledged: the cumulative counts go
         * again, and it adds what it lost */
        bool resend = r->resend && (f->acked_errors || f->acked_enabled);

        if (f->ramp_def == nullptr
            && f->control == known_of(r, f)
            && (f->policy.mode != FL_ROLLBACK_ON || (f->control & 1)
                || (de == 0 && dn == 0 && !resend)))
        {
            /* nothing to say: the deltas are dropped with a rollback in
             * place or no policy to count for */
            continue;
        }

        f->entry = de ? FL_SYNC_ENTRY_SOURCES : FL_SYNC_ENTRY;
        entries++;
        sources += de ? 1 : 0;
    }

    if (with_sources) {
        *with_sources = sources;
    }

    return entries;
}


extern "C" size_t fl_sync_round_bound(const fl_sync_round_t *r,
    const fl_sync_flag_t *flags, size_t n) noexcept
{
    /* PREFIX{project}: */
    size_t head = r->prefix_len + r->project_len + 3;
    /* the control key; this host's key ("h:", the host, ':', 16 hex);
     * epoch, version, entries, calls */
    size_t b = head + 3 + head + 2 + r->host_len + 1 + 16 + 4 * u64_digits;

    for (size_t i = 0; i < n; i++) {
        const fl_sync_flag_t *f = &flags[i];

        if (f->entry == FL_SYNC_NO_ENTRY) {
            continue;
        }

        size_t ns = f->nsources < FL_SOURCE_SLOTS ? f->nsources
                                                  : FL_SOURCE_SLOTS;

        /* three keys: "w:", "s:" or "r:", <def>, ':', the name */
        b += FL_SYNC_ENTRY_KEYS * (head + 2 + 16 + 1 + f->name_len);
        /* <def>; the record: four numbers, the host, four spaces */
        b += 16 + 4 * u64_digits + r->host_len + 4;
        /* the override, two counts and what was acknowledged of them,
         * the policy: four numbers, 3 spaces */
        b += u64_digits + 4 * u64_digits + 4 * u32_digits + 3;
        /* each source: 8 hex digits, ':', its age, a space */
        b += ns * (8 + 1 + u32_digits + 1);
        /* the ramp: its definition (7 numbers, 3 a stage), this host's
         * part (4 numbers, 2 flags, the actions, 2 numbers, what was
         * acknowledged: 4 numbers), the seed */
        if (f->ramp_def != nullptr) {
            b += 7 * (u64_digits + 1)
                 + FL_RAMP_MAX_STAGES * (3 * (u32_digits + 1));
            b += 4 * (u64_digits + 1) + 4 + FL_SYNC_RAMP_ACTIONS_MAX + 1
                 + 2 * (u32_digits + 1) + 4 * (u64_digits + 1);
            b += FL_SYNC_RAMP_SEED_MAX;
        }
    }

    return b;
}


extern "C" size_t fl_sync_round_args(const fl_sync_round_t *r,
    const fl_sync_flag_t *flags, size_t n, char *buf, size_t buf_len,
    const char **argv, size_t *argvlen, size_t argv_max, size_t *nkeys)
    noexcept
{
    Out o(buf, buf_len);
    Args a{argv, argvlen, argv_max};
    size_t entries = 0;

    for (size_t i = 0; i < n; i++) {
        entries += flags[i].entry != FL_SYNC_NO_ENTRY ? 1 : 0;
    }

    /* KEYS: the control hash, the windows, the sources (docs/sync.md) */
    char *start = o.p;
    key(o, r, "ctl");
    a.since(o, start);

    entry_keys(o, a, r, flags, n, "w:");
    entry_keys(o, a, r, flags, n, "s:");
    entry_keys(o, a, r, flags, n, "r:");

    /* this host's incarnation's hash: what the script applied of it */
    start = o.p;
    key(o, r, "h:");
    o.bytes(r->host, r->host_len);
    o.bytes(":", 1);
    o.hex(r->incarnation, 16);
    a.since(o, start);

    /* ARGV: what this host last read, the count, who calls, and how many
     * of its calls were acknowledged */
    start = o.p;
    o.u64(r->epoch);
    a.since(o, start);

    start = o.p;
    o.u64(r->ver);
    a.since(o, start);

    start = o.p;
    o.u64(entries);
    a.since(o, start);

    a.add(r->host, r->host_len);

    start = o.p;
    o.u64(r->calls);
    a.since(o, start);

    for (size_t i = 0; i < n; i++) {
        if (flags[i].entry != FL_SYNC_NO_ENTRY) {
            entry_args(o, a, r, &flags[i]);
        }
    }

    if (o.full || a.full) {
        return 0;
    }

    if (nkeys) {
        *nkeys = 2 + FL_SYNC_ENTRY_KEYS * entries;
    }

    return a.argc;
}
