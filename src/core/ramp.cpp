/*
 * ramp.cpp - a flag's ramp (docs/ramps.md): when it starts, when a tick
 * closes and what the regression rule (regression.cpp) makes of it, when
 * a stage ends, what an operator's action does, and what flags_status
 * shows of it.
 *
 * The state is a POD in the shared zone.  One process at a time changes
 * it (the glue holds the zone's lock around fl_ramp_step() and
 * fl_ramp_act()); readers copy it word by word with fl_ramp_read().  So
 * the stores here are atomic one word at a time, and nothing more.
 *
 * A ramp moves only when a tick closes: the stage's clock, its on
 * evaluations and the evidence all change at tick boundaries, so a stage
 * lasts its hold rounded up to a whole tick, and what one tick counted
 * belongs to one stage.
 *
 * Its times are wall-clock ms (what flags_status, the state file and the
 * fleet show and keep), moved by fl_ramp_clock() whenever the wall clock
 * steps, so that every duration measured from them is monotonic time.
 */

#include "flags_core.h"
#include "json_writer.hpp"
#include "witness.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>

namespace {

static_assert(sizeof(fl_ramp_t) % sizeof(uint64_t) == 0,
              "a ramp is whole words");

inline uint64_t ld(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

inline void st(uint64_t *p, uint64_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELAXED);
}

double alpha_of(const fl_ramp_def_t *d)
{
    return static_cast<double>(d->alpha_ppm) / 1e6;
}

double phi_of(const fl_ramp_def_t *d)
{
    return static_cast<double>(d->dispersion_milli) / 1e3;
}

bool is_last(const fl_ramp_def_t *d, uint64_t stage)
{
    return stage + 1 >= d->nstages;
}

uint32_t stage_milli(const fl_ramp_def_t *d, uint64_t stage)
{
    return d->stages[stage < d->nstages ? stage : d->nstages - 1].milli;
}

/* No evidence: a new epoch, whose witnesses the next tick counts anew. */
void fresh_evidence(fl_ramp_t *r)
{
    fl_regression_t ev;

    fl_regression_init(&ev);
    std::memcpy(&r->evidence, &ev, sizeof(ev));
    st(&r->evidence_epoch, ld(&r->evidence_epoch) + 1);
    st(&r->witnesses, 0);
    st(&r->floor_held, 0);
}

/* Begins stage 0 at now: a fresh clock, fresh counts, no evidence. */
fl_ramp_event_t begin(const fl_ramp_def_t *d, fl_ramp_t *r, uint64_t now)
{
    st(&r->start_ms, now);
    st(&r->stage, 0);
    st(&r->stage_ms, now);
    st(&r->paused_ms, 0);
    st(&r->stage_on, 0);
    st(&r->stage_off, 0);
    st(&r->stalled, 0);
    st(&r->cause, FL_RAMP_CAUSE_NONE);
    st(&r->decided_ms, 0);
    st(&r->next_tick_ms, now + static_cast<uint64_t>(d->tick) * 1000);
    fresh_evidence(r);
    if (d->nstages <= 1) {
        st(&r->state, FL_RAMP_DONE);
        return FL_RAMP_EV_DONE;
    }
    st(&r->state, FL_RAMP_RUNNING);
    return FL_RAMP_EV_STARTED;
}

/* The next stage from now; DONE at the last. */
fl_ramp_event_t advance(const fl_ramp_def_t *d, fl_ramp_t *r, uint64_t now)
{
    uint64_t next = ld(&r->stage) + 1;

    st(&r->stage, next);
    st(&r->stage_ms, now);
    st(&r->stage_on, 0);
    st(&r->stage_off, 0);
    st(&r->stalled, 0);
    st(&r->stage_changes, ld(&r->stage_changes) + 1);
    if (is_last(d, next)) {
        st(&r->state, FL_RAMP_DONE);
        return FL_RAMP_EV_DONE;
    }
    if (ld(&r->state) == FL_RAMP_PAUSED) {
        st(&r->paused_ms, now);
    } else {
        st(&r->state, FL_RAMP_RUNNING);
    }
    return FL_RAMP_EV_ADVANCED;
}

/* A difference of lifetime totals; a total below its base (the zone is
 * new) counts nothing. */
uint64_t since(uint64_t total, uint64_t base)
{
    return total >= base ? total - base : 0;
}

void rebase(fl_ramp_t *r, const fl_ramp_input_t *in)
{
    st(&r->base_on, in->on);
    st(&r->base_off, in->off);
    st(&r->base_on_errors, in->on_errors);
    st(&r->base_off_errors, in->off_errors);
    st(&r->based, 1);
}

/* Closes the tick: its counts, the stage's, and the evidence.  Returns
 * ROLLBACK when the regression rule decided on it. */
fl_ramp_event_t close_tick(const fl_ramp_def_t *d, fl_ramp_t *r,
    uint64_t now, const fl_ramp_input_t *in)
{
    uint64_t n1 = 0, n0 = 0, e1 = 0, e0 = 0;

    if (ld(&r->based)) {
        n1 = since(in->on, ld(&r->base_on));
        n0 = since(in->off, ld(&r->base_off));
        e1 = since(in->on_errors, ld(&r->base_on_errors));
        e0 = since(in->off_errors, ld(&r->base_off_errors));
    }
    rebase(r, in);

    uint64_t step = static_cast<uint64_t>(d->tick) * 1000;
    uint64_t next = ld(&r->next_tick_ms) + step;
    if (next <= now) {
        /* ticks missed (no process ran them): one tick closes, and the
         * next one ends a whole tick from now */
        next = now + step;
    }
    st(&r->next_tick_ms, next);

    st(&r->last_n1, n1);
    st(&r->last_n0, n0);
    st(&r->last_e1, e1);
    st(&r->last_e0, e0);
    st(&r->stage_on, ld(&r->stage_on) + n1);
    st(&r->stage_off, ld(&r->stage_off) + n0);

    /* the evidence: a tick without a control group or an error changes
     * nothing (regression.cpp), so at 100 % it simply stops growing */
    fl_regression_t ev = r->evidence;
    /* a proof decides once: on the tick it is made, or on a later one
     * while the floor held it back (a cleared rollback's evidence stays
     * decided until a resume starts it afresh) */
    bool fresh = ev.decided == 0 || ld(&r->floor_held) != 0;
    int now_decided = fl_regression_tick(&ev, n1, n0, e1, e0, phi_of(d),
                                         alpha_of(d));
    std::memcpy(&r->evidence, &ev, sizeof(ev));

    /* who the proof rests on: with witnesses kept, the errors counted
     * are witnessed ones (witness.cpp), and the proof must rest on
     * enough distinct witnesses of the on cohort */
    bool floor_ok = true;
    if (in->witness != nullptr) {
        uint64_t seen = fl_witness_seen(in->witness, r);
        if (seen > ld(&r->witnesses)) {
            st(&r->witnesses, seen);
        }
        floor_ok = ld(&r->witnesses)
                   >= fl_ramp_min_witnesses(in->min_sources);
    }
    st(&r->floor_held, now_decided && fresh && !floor_ok ? 1 : 0);

    if (now_decided && fresh && floor_ok && in->guard) {
        st(&r->cause, FL_RAMP_CAUSE_REGRESSION);
        st(&r->decided_ms, now);
        st(&r->decided_n1, n1);
        st(&r->decided_n0, n0);
        st(&r->decided_e1, e1);
        st(&r->decided_e0, e0);
        st(&r->state, FL_RAMP_ROLLED_BACK);
        return FL_RAMP_EV_ROLLBACK;
    }
    return FL_RAMP_EV_NONE;
}

/* The stage's clock stops, unless a pause stopped it already: the hold
 * counts running time only. */
void stop_clock(fl_ramp_t *r, uint64_t now)
{
    if (ld(&r->paused_ms) == 0) {
        st(&r->paused_ms, now);
    }
}

/* t moved by the wall clock's step (two's complement), never to 0 or
 * below: 0 means "none" in every time the ramp keeps. */
uint64_t shifted(uint64_t t, uint64_t step)
{
    int64_t v = static_cast<int64_t>(t) + static_cast<int64_t>(step);
    return v > 0 ? static_cast<uint64_t>(v) : 1;
}

/* After a tick: the stage ends, holds, or gives up. */
fl_ramp_event_t progress(const fl_ramp_def_t *d, fl_ramp_t *r, uint64_t now)
{
    uint64_t stage = ld(&r->stage);
    const fl_ramp_stage_t &s = d->stages[stage];
    uint64_t started = ld(&r->stage_ms);
    /* the times moved with any step of the wall clock (fl_ramp_clock()),
     * so this is monotonic time; a stage that started "later" than now
     * (a caller that gave no monotonic clock) has held for nothing yet */
    uint64_t elapsed = now > started ? now - started : 0;
    bool held = elapsed >= static_cast<uint64_t>(s.hold) * 1000;

    if (held && ld(&r->stage_on) >= s.min_requests) {
        return advance(d, r, now);
    }
    if (!held) {
        st(&r->state, FL_RAMP_RUNNING);
        return FL_RAMP_EV_NONE;
    }

    st(&r->state, FL_RAMP_HOLDING);
    uint64_t limit = (static_cast<uint64_t>(s.hold) + d->max_extend) * 1000;
    if (elapsed < limit || ld(&r->stalled)) {
        return FL_RAMP_EV_NONE;
    }
    if (d->on_insufficient == FL_RAMP_INSUFFICIENT_ROLLBACK) {
        st(&r->cause, FL_RAMP_CAUSE_INSUFFICIENT);
        st(&r->decided_ms, now);
        st(&r->state, FL_RAMP_ROLLED_BACK);
        return FL_RAMP_EV_ROLLBACK;
    }
    st(&r->stalled, 1);
    return FL_RAMP_EV_STALLED;
}

} // namespace


extern "C" {

void fl_ramp_init(fl_ramp_t *r) noexcept
{
    std::memset(r, 0, sizeof(*r));
}

void fl_ramp_read(const fl_ramp_t *r, fl_ramp_t *out) noexcept
{
    const uint64_t *src = reinterpret_cast<const uint64_t *>(r);
    uint64_t *dst = reinterpret_cast<uint64_t *>(out);

    for (size_t i = 0; i < sizeof(*r) / sizeof(uint64_t); i++) {
        dst[i] = ld(&src[i]);
    }
}

void fl_ramp_clock(fl_ramp_t *r, uint64_t wall_ms, uint64_t mono_ms) noexcept
{
    if (mono_ms == 0) {
        return;
    }

    uint64_t offset = wall_ms - mono_ms;
    uint64_t was = ld(&r->clock_ms);

    if (offset == 0) {
        offset = 1;             /* 0 is "not known" */
    }
    if (was == 0) {
        st(&r->clock_ms, offset);
        return;
    }

    /* the wall clock stepped by offset - was since the times last moved.
     * The two clocks are read one after the other, each in whole ms, so
     * their difference wobbles by a ms or so: that is no step, and the
     * reference stays, so a slow drift still moves the times once it
     * adds up to the slack. */
    uint64_t step = offset - was;
    int64_t s = static_cast<int64_t>(step);
    if (s > -FL_RAMP_CLOCK_SLACK_MS && s < FL_RAMP_CLOCK_SLACK_MS) {
        return;
    }
    st(&r->clock_ms, offset);

    /* every time the ramp keeps moves with the wall clock, so what is
     * measured from them (the hold, the tick, the pause) is monotonic
     * time */
    uint64_t *times[] = {&r->start_ms, &r->stage_ms, &r->paused_ms,
                         &r->next_tick_ms};

    for (uint64_t *t : times) {
        uint64_t v = ld(t);
        if (v != 0) {
            st(t, shifted(v, step));
        }
    }
}

int fl_ramp_follow(fl_ramp_t *r, uint64_t now, int rolled_back) noexcept
{
    uint64_t state = ld(&r->state);

    if (state == FL_RAMP_DONE) {
        return 0;
    }

    if (rolled_back) {
        if (state == FL_RAMP_ROLLED_BACK) {
            return 0;
        }
        /* rolled back by another rule: the ramp stops with it */
        st(&r->state, FL_RAMP_ROLLED_BACK);
        if (ld(&r->cause) == FL_RAMP_CAUSE_NONE) {
            st(&r->cause, FL_RAMP_CAUSE_OTHER);
            st(&r->decided_ms, now);
        }
        return 1;
    }

    if (state != FL_RAMP_ROLLED_BACK) {
        return 0;
    }

    if (ld(&r->start_ms) == 0) {
        /* rolled back before it started: it waits for its start again */
        st(&r->cause, FL_RAMP_CAUSE_NONE);
        st(&r->decided_ms, 0);
        st(&r->paused_ms, 0);
        st(&r->state, FL_RAMP_PENDING);
        return 1;
    }

    /* the rollback was cleared: the ramp waits at its stage for an
     * operator to resume or restart it, its clock stopped (since a pause
     * before the rollback, if there was one) */
    stop_clock(r, now);
    st(&r->state, FL_RAMP_PAUSED);
    return 1;
}

fl_ramp_event_t fl_ramp_step(const fl_ramp_def_t *d, fl_ramp_t *r,
    uint64_t now, const fl_ramp_input_t *in) noexcept
{
    uint64_t state = ld(&r->state);

    if (state == FL_RAMP_DONE) {
        return FL_RAMP_EV_NONE;
    }

    if (fl_ramp_follow(r, now, in->rolled_back) || in->rolled_back) {
        return FL_RAMP_EV_NONE;
    }

    if (state == FL_RAMP_PENDING) {
        if (now < d->start_at_ms || in->frozen) {
            return FL_RAMP_EV_NONE;
        }
        fl_ramp_event_t ev = begin(d, r, now);
        rebase(r, in);
        return ev;
    }

    if (now < ld(&r->next_tick_ms)) {
        return FL_RAMP_EV_NONE;
    }

    if (close_tick(d, r, now, in) == FL_RAMP_EV_ROLLBACK) {
        return FL_RAMP_EV_ROLLBACK;
    }

    if (state == FL_RAMP_PAUSED) {
        return FL_RAMP_EV_NONE;
    }
    if (in->stopped || in->frozen) {
        st(&r->state, FL_RAMP_HOLDING);
        return FL_RAMP_EV_NONE;
    }
    return progress(d, r, now);
}

int fl_ramp_action_parse(const char *s, size_t len, fl_ramp_action_t *out)
    noexcept
{
    static const struct {
        const char         *name;
        fl_ramp_action_t    action;
    } names[] = {
        {"pause", FL_RAMP_PAUSE}, {"resume", FL_RAMP_RESUME},
        {"advance", FL_RAMP_ADVANCE}, {"restart", FL_RAMP_RESTART},
    };

    for (const auto &n : names) {
        if (std::strlen(n.name) == len && std::memcmp(n.name, s, len) == 0) {
            *out = n.action;
            return 0;
        }
    }
    return -1;
}

int fl_ramp_act(const fl_ramp_def_t *d, fl_ramp_t *r, uint64_t now,
    fl_ramp_action_t action, int *changed, const char **why) noexcept
{
    uint64_t state = ld(&r->state);

    *changed = 0;

    if (action == FL_RAMP_RESTART) {
        *changed = 1;
        st(&r->based, 0);
        return begin(d, r, now);
    }

    switch (state) {
    case FL_RAMP_DONE:
        *why = "the ramp is done: restart it to run it again";
        return -1;
    case FL_RAMP_ROLLED_BACK:
        *why = "the flag is rolled back: clear the rollback, or restart "
               "the ramp";
        return -1;
    case FL_RAMP_PENDING:
        if (action != FL_RAMP_ADVANCE) {
            *why = "the ramp has not started: advance or restart starts it";
            return -1;
        }
        *changed = 1;
        st(&r->based, 0);
        return begin(d, r, now);
    default:
        break;
    }

    switch (action) {
    case FL_RAMP_PAUSE:
        if (state != FL_RAMP_PAUSED) {
            st(&r->state, FL_RAMP_PAUSED);
            st(&r->paused_ms, now);
            *changed = 1;
        }
        return FL_RAMP_EV_NONE;

    case FL_RAMP_RESUME:
        if (state == FL_RAMP_PAUSED) {
            uint64_t paused = ld(&r->paused_ms);
            if (paused != 0 && now > paused) {
                /* the hold counts running time only */
                st(&r->stage_ms, ld(&r->stage_ms) + (now - paused));
            }
            st(&r->paused_ms, 0);
            st(&r->state, FL_RAMP_RUNNING);
            if (ld(&r->cause) != FL_RAMP_CAUSE_NONE || r->evidence.decided) {
                /* after a cleared rollback (whichever rule's): the
                 * operator vouches for the flag, and the rule starts
                 * again from no evidence */
                fresh_evidence(r);
                st(&r->cause, FL_RAMP_CAUSE_NONE);
                st(&r->decided_ms, 0);
            }
            *changed = 1;
        }
        return FL_RAMP_EV_NONE;

    case FL_RAMP_ADVANCE:
        *changed = 1;
        return advance(d, r, now);

    default:
        *why = "unknown action";
        return -1;
    }
}

uint32_t fl_ramp_milli(const fl_ramp_def_t *d, const fl_ramp_t *r,
    uint32_t configured_milli) noexcept
{
    if (d == nullptr || ld(&r->state) == FL_RAMP_PENDING) {
        return configured_milli;
    }
    return stage_milli(d, ld(&r->stage));
}

int fl_ramp_guards(const fl_ramp_def_t *d, const fl_ramp_t *r) noexcept
{
    if (d == nullptr) {
        return 0;
    }
    uint64_t state = ld(&r->state);
    if (state != FL_RAMP_RUNNING && state != FL_RAMP_HOLDING
        && state != FL_RAMP_PAUSED)
    {
        return 0;
    }
    if (stage_milli(d, ld(&r->stage)) >= FL_MILLI_MAX) {
        return 0;
    }
    return ld(&r->stage_off) > 0 || ld(&r->last_n0) > 0;
}

uint32_t fl_ramp_min_witnesses(uint32_t min_sources) noexcept
{
    return min_sources > FL_WITNESS_FLOOR_MIN ? min_sources
                                              : FL_WITNESS_FLOOR_MIN;
}

int fl_ramp_backstop(const fl_ramp_def_t *d, const fl_ramp_t *r,
    const fl_witness_t *w, const fl_ramp_input_t *in, uint32_t window)
    noexcept
{
    (void) r;               /* the ramp guards: the caller asked it */

    if (d == nullptr || w == nullptr) {
        return 1;
    }

    /* the backstop's closed ticks that cover the window, and the open
     * one */
    uint64_t tick = d->tick ? d->tick : 1;
    fl_witness_tick_t sum = {0, 0, 0, 0};
    if (!fl_witness_recent(w, in, (window + tick - 1) / tick, &sum)) {
        return 1;
    }

    if (sum.n1 == 0 || sum.n0 == 0) {
        /* no control group to compare with: the absolute rule alone */
        return 1;
    }

    /* w1 / n1 >= RATIO * w0 / n0, in integers */
    unsigned __int128 on = static_cast<unsigned __int128>(sum.w1) * sum.n0;
    unsigned __int128 off = static_cast<unsigned __int128>(sum.w0) * sum.n1
                            * FL_BACKSTOP_RATIO;
    return sum.w1 > 0 && on >= off;
}

const char *fl_ramp_state_name(fl_ramp_state_t s) noexcept
{
    switch (s) {
    case FL_RAMP_RUNNING:
        return "running";
    case FL_RAMP_PAUSED:
        return "paused";
    case FL_RAMP_DONE:
        return "done";
    case FL_RAMP_ROLLED_BACK:
        return "rolledBack";
    default:
        return "holding";
    }
}

} // extern "C"

/* ------------------------------------------------------ flags_status */

namespace {

char *put_time(char *o, uint64_t ms)
{
    *o++ = '"';
    o += fl_format_time_ms(ms, o);
    *o++ = '"';
    return o;
}

/* A finite double as a JSON number (6 significant digits). */
char *put_num(char *o, double v)
{
    if (!std::isfinite(v)) {
        v = v > 0 ? 1e300 : 0;
    }
    int n = std::snprintf(o, 32, "%.6g", v);
    return o + (n > 0 && n < 32 ? n : 0);
}

char *put_counts(char *o, uint64_t n, uint64_t e)
{
    o = fl::put_lit(o, "{\"requests\":");
    o += fl::put_u64(n, o);
    o = fl::put_lit(o, ",\"errors\":");
    o += fl::put_u64(e, o);
    *o++ = '}';
    return o;
}

/* ,"on":{...},"off":{...} */
char *put_cohorts(char *o, uint64_t n1, uint64_t e1, uint64_t n0, uint64_t e0)
{
    o = fl::put_lit(o, "\"on\":");
    o = put_counts(o, n1, e1);
    o = fl::put_lit(o, ",\"off\":");
    return put_counts(o, n0, e0);
}

const char *cause_name(uint64_t c)
{
    switch (c) {
    case FL_RAMP_CAUSE_REGRESSION:
        return "regression";
    case FL_RAMP_CAUSE_INSUFFICIENT:
        return "insufficientRequests";
    default:
        return "otherRollback";
    }
}

/* "waitingFor": what the stage lacks before it may end */
char *put_waiting(char *o, const fl_ramp_def_t *d, const fl_ramp_t *r,
    uint64_t now)
{
    uint64_t state = r->state;

    o = fl::put_lit(o, ",\"waitingFor\":");
    if (state == FL_RAMP_PENDING) {
        return fl::put_lit(o, "{\"startAt\":true}");
    }
    if (state != FL_RAMP_RUNNING && state != FL_RAMP_HOLDING
        && state != FL_RAMP_PAUSED)
    {
        return fl::put_lit(o, "null");
    }
    const fl_ramp_stage_t &s = d->stages[r->stage];
    uint64_t hold_end = r->stage_ms + static_cast<uint64_t>(s.hold) * 1000;
    uint64_t end = state == FL_RAMP_PAUSED ? r->paused_ms : now;
    uint64_t hold_left = hold_end > end ? (hold_end - end + 999) / 1000 : 0;
    uint64_t req_left = s.min_requests > r->stage_on
                        ? s.min_requests - r->stage_on : 0;

    o = fl::put_lit(o, "{\"holdSeconds\":");
    o += fl::put_u64(hold_left, o);
    o = fl::put_lit(o, ",\"requests\":");
    o += fl::put_u64(req_left, o);
    o = fl::put_lit(o, ",\"resume\":");
    o = state == FL_RAMP_PAUSED ? fl::put_lit(o, "true")
                                : fl::put_lit(o, "false");
    *o++ = '}';
    return o;
}

char *put_evidence(char *o, const fl_ramp_def_t *d, const fl_ramp_t *r)
{
    double alpha = alpha_of(d);

    o = fl::put_lit(o, ",\"evidence\":{\"statistic\":");
    o = put_num(o, std::exp(fl_regression_log_evidence(&r->evidence)));
    o = fl::put_lit(o, ",\"bound\":");
    o = put_num(o, 1 / alpha);
    o = fl::put_lit(o, ",\"ratio\":");
    o = put_num(o, fl_regression_ratio(&r->evidence, alpha));
    o = fl::put_lit(o, ",\"ticks\":");
    o += fl::put_u64(r->evidence.ticks, o);
    o = fl::put_lit(o, ",\"errors\":{\"on\":");
    o += fl::put_u64(r->evidence.errors_on, o);
    o = fl::put_lit(o, ",\"off\":");
    o += fl::put_u64(r->evidence.errors_off, o);
    o = fl::put_lit(o, "},\"witnesses\":");
    o += fl::put_u64(r->witnesses, o);
    o = fl::put_lit(o, ",\"heldForWitnesses\":");
    o = r->floor_held ? fl::put_lit(o, "true") : fl::put_lit(o, "false");
    o = fl::put_lit(o, ",\"alpha\":");
    o = put_num(o, alpha);
    o = fl::put_lit(o, ",\"dispersion\":");
    o = put_num(o, phi_of(d));
    *o++ = '}';
    return o;
}

} // namespace

extern "C" {

size_t fl_ramp_status_json(const fl_ramp_def_t *d, const fl_ramp_t *rs,
    uint64_t now, int rolled_back, char *buf) noexcept
{
    fl_ramp_t r;
    char *o = buf;

    fl_ramp_read(rs, &r);
    /* a rollback set or cleared that the ramp has not followed yet (it
     * does under the lock right after the control word changes): shown as
     * it will be */
    fl_ramp_follow(&r, now, rolled_back);
    if (r.stage >= d->nstages) {
        r.stage = d->nstages - 1;
    }

    o = fl::put_lit(o, "{\"stage\":");
    o += fl::put_u64(r.stage, o);
    o = fl::put_lit(o, ",\"stages\":");
    o += fl::put_u64(d->nstages, o);
    o = fl::put_lit(o, ",\"percentage\":");
    o += fl_json_milli(stage_milli(d, r.stage), o);
    o = fl::put_lit(o, ",\"state\":\"");
    const char *name = fl_ramp_state_name(static_cast<fl_ramp_state_t>(
                                              r.state));
    std::memcpy(o, name, std::strlen(name));
    o += std::strlen(name);
    *o++ = '"';

    o = fl::put_lit(o, ",\"startAt\":");
    o = d->start_at_ms ? put_time(o, d->start_at_ms) : fl::put_lit(o, "null");
    /* null until it started: pending, or rolled back before it started
     * (a new definition that kept its flag's rollback) */
    o = fl::put_lit(o, ",\"startedAt\":");
    o = r.state != FL_RAMP_PENDING && r.start_ms ? put_time(o, r.start_ms)
                                                 : fl::put_lit(o, "null");
    o = fl::put_lit(o, ",\"stageStartedAt\":");
    o = r.state != FL_RAMP_PENDING && r.start_ms ? put_time(o, r.stage_ms)
                                                 : fl::put_lit(o, "null");
    o = fl::put_lit(o, ",\"nextStageAt\":");
    bool moving = r.state == FL_RAMP_RUNNING || r.state == FL_RAMP_HOLDING;
    if (moving && !is_last(d, r.stage)) {
        uint64_t at = r.stage_ms
                      + static_cast<uint64_t>(d->stages[r.stage].hold) * 1000;
        o = put_time(o, at > now ? at : now);
    } else {
        o = fl::put_lit(o, "null");
    }
    o = put_waiting(o, d, &r, now);
    o = r.stalled ? fl::put_lit(o, ",\"stalled\":true")
                  : fl::put_lit(o, ",\"stalled\":false");
    o = fl::put_lit(o, ",\"tickSeconds\":");
    o += fl::put_u64(d->tick, o);
    o = fl::put_lit(o, ",\"stageRequests\":{\"on\":");
    o += fl::put_u64(r.stage_on, o);
    o = fl::put_lit(o, ",\"off\":");
    o += fl::put_u64(r.stage_off, o);
    o = fl::put_lit(o, "},\"lastTick\":{");
    o = put_cohorts(o, r.last_n1, r.last_e1, r.last_n0, r.last_e0);
    *o++ = '}';
    o = put_evidence(o, d, &r);

    o = fl::put_lit(o, ",\"decision\":");
    if (r.cause == FL_RAMP_CAUSE_NONE) {
        o = fl::put_lit(o, "null");
    } else {
        o = fl::put_lit(o, "{\"cause\":\"");
        const char *c = cause_name(r.cause);
        std::memcpy(o, c, std::strlen(c));
        o += std::strlen(c);
        o = fl::put_lit(o, "\",\"at\":");
        o = put_time(o, r.decided_ms);
        o = fl::put_lit(o, ",\"tick\":");
        if (r.cause == FL_RAMP_CAUSE_REGRESSION) {
            o += fl::put_u64(r.evidence.decided_tick, o);
            o = fl::put_lit(o, ",");
            o = put_cohorts(o, r.decided_n1, r.decided_e1, r.decided_n0,
                            r.decided_e0);
        } else {
            o = fl::put_lit(o, "null");
        }
        *o++ = '}';
    }
    o = fl::put_lit(o, ",\"stageChanges\":");
    o += fl::put_u64(r.stage_changes, o);
    *o++ = '}';
    return static_cast<size_t>(o - buf);
}

} // extern "C"
