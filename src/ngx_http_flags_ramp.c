/*
 * ngx_http_flags_ramp.c - ramps (docs/ramps.md): every worker runs a
 * timer that moves each ramp of its configuration on.
 *
 * Twice a second a worker takes the zone's lock, if nobody holds it, and
 * hands each ramp to the core (fl_ramp_step()) with its flag's lifetime
 * totals (evaluations by cohort, witnessed errors by cohort) and what
 * stops it.  The core decides everything: when the ramp
 * starts, when a tick closes and what the regression rule makes of it,
 * when a stage ends.  Whoever holds the lock when a tick is due closes
 * it, so a tick is closed once however many workers (of however many
 * generations) run.  What a step gives (a new stage, a rollback) is
 * handed, after the lock, to the control owner (ngx_http_flags_control.c):
 * the percentage into the control word, the version, the log, the state
 * file.
 *
 * A worker of a generation that is shutting down runs no step: its
 * successors do.
 *
 * With flags_sync no worker runs this timer: the fleet decides each ramp
 * (docs/sync.md, "Ramps across the fleet"; ngx_http_flags_sync_round.c).
 */

#include "ngx_http_flags_module.h"


#define NGX_HTTP_FLAGS_RAMP_PERIOD  500         /* ms */


typedef struct {
    ngx_http_flags_defs_t      *defs;
    ngx_http_flags_flag_t      *flag;
    fl_ramp_event_t             event;
} ngx_http_flags_ramp_change_t;


typedef struct {
    ngx_event_t                     timer;
    ngx_http_flags_main_conf_t     *fmcf;
    ngx_http_flags_ramp_change_t   *changes;    /* one a ramped flag */
    ngx_uint_t                      nramps;     /* room in changes */
} ngx_http_flags_ramps_t;


static void ngx_http_flags_ramp_timer(ngx_event_t *ev);
static ngx_uint_t ngx_http_flags_ramp_steps(ngx_http_flags_ramps_t *rs,
    ngx_uint_t *dirty);
static fl_ramp_event_t ngx_http_flags_ramp_step(ngx_http_flags_flag_t *flag,
    ngx_http_flags_defs_t *defs, uint64_t now_ms, ngx_uint_t *dirty);


static ngx_http_flags_ramps_t  *ngx_http_flags_ramps;


/* The ramped flags of a project's definitions now. */

static ngx_uint_t
ngx_http_flags_ramp_count(ngx_http_flags_project_t *project)
{
    ngx_uint_t              n, nramps;
    ngx_http_flags_defs_t  *defs;

    defs = ngx_http_flags_defs(project);
    nramps = 0;

    for (n = 0; n < defs->nflags; n++) {
        if (defs->flags[n].ramp_def && defs->flags[n].ramp) {
            nramps++;
        }
    }

    return nramps;
}


ngx_int_t
ngx_http_flags_ramp_init_process(ngx_cycle_t *cycle,
    ngx_http_flags_main_conf_t *fmcf)
{
    ngx_uint_t                 i, nramps, runtime;
    ngx_http_flags_ramps_t    *rs;
    ngx_http_flags_project_t  *project;

    ngx_http_flags_ramps = NULL;

    if (fmcf->sh == NULL || fmcf->sync) {
        /* with flags_sync the fleet runs the ramps, in Redis: the syncing
         * worker copies their state into the zone each round; while Redis
         * is away they stay frozen where the fleet left them and the
         * absolute rule guards their flags (docs/sync.md) */
        return NGX_OK;
    }

    /* a runtime project may get a ramp with a version: its timer runs */
    project = fmcf->projects.elts;
    nramps = 0;
    runtime = 0;

    for (i = 0; i < fmcf->projects.nelts; i++) {
        runtime |= project[i].runtime;
        nramps += ngx_http_flags_ramp_count(&project[i]);
    }

    if (nramps == 0 && !runtime) {
        return NGX_OK;
    }

    rs = ngx_pcalloc(cycle->pool, sizeof(ngx_http_flags_ramps_t));
    if (rs == NULL) {
        return NGX_ERROR;
    }

    rs->fmcf = fmcf;
    rs->timer.handler = ngx_http_flags_ramp_timer;
    rs->timer.data = rs;
    rs->timer.log = cycle->log;
    rs->timer.cancelable = 1;

    ngx_http_flags_ramps = rs;

    /* soon, spread a little between workers */
    ngx_add_timer(&rs->timer, 20 + (ngx_pid % 10) * 10);

    return NGX_OK;
}


void
ngx_http_flags_ramp_exit_process(ngx_http_flags_main_conf_t *fmcf)
{
    ngx_http_flags_ramps_t  *rs;

    rs = ngx_http_flags_ramps;

    if (rs == NULL || rs->fmcf != fmcf) {
        return;
    }

    if (rs->timer.timer_set) {
        ngx_del_timer(&rs->timer);
    }

    ngx_free(rs->changes);
    rs->changes = NULL;
    rs->nramps = 0;

    ngx_http_flags_ramps = NULL;
}


static void
ngx_http_flags_ramp_timer(ngx_event_t *ev)
{
    ngx_uint_t                    i, n, dirty, nramps;
    ngx_http_flags_ramps_t       *rs;
    ngx_http_flags_change_t       ch;
    ngx_http_flags_project_t     *project;
    ngx_http_flags_ramp_change_t *c;

    rs = ev->data;

    if (ngx_exiting || ngx_terminate || ngx_quit) {
        return;
    }

    ngx_add_timer(ev, NGX_HTTP_FLAGS_RAMP_PERIOD);

    if (rs->fmcf->sh->retired) {
        return;
    }

    /* room for an event of every ramped flag: a runtime version may
     * have added ramps since the last tick */
    project = rs->fmcf->projects.elts;
    nramps = 0;

    for (i = 0; i < rs->fmcf->projects.nelts; i++) {
        nramps += ngx_http_flags_ramp_count(&project[i]);
    }

    if (nramps > rs->nramps) {
        c = ngx_alloc(nramps * sizeof(ngx_http_flags_ramp_change_t), ev->log);
        if (c == NULL) {
            return;
        }

        ngx_free(rs->changes);
        rs->changes = c;
        rs->nramps = nramps;
    }

    if (nramps == 0) {
        return;
    }

    /* the cohorts' counts include this worker's memo answers */
    ngx_http_flags_counts_fold();

    dirty = 0;
    n = ngx_http_flags_ramp_steps(rs, &dirty);

    ngx_memzero(&ch, sizeof(ngx_http_flags_change_t));
    ch.fmcf = rs->fmcf;
    ch.log = ev->log;
    ch.level = rs->fmcf->log_level;
    ch.routine = rs->fmcf->log_routine;
    ch.by = NGX_HTTP_FLAGS_BY_RULE;
    ch.batch = 1;               /* saved once, below */

    for (i = 0; i < n; i++) {
        c = &rs->changes[i];
        ch.project = c->defs->project;
        ch.defs = c->defs;
        ch.flag = c->flag;
        ngx_http_flags_control_ramp(&ch, c->event);
    }

    if (n || dirty) {
        (void) ngx_http_flags_control_save(rs->fmcf, ev->log, NULL, NULL);
    }
}


/* Every ramp's step under the zone's lock; the events to apply are in
 * rs->changes.  *dirty: a tick changed what the state file keeps. */

static ngx_uint_t
ngx_http_flags_ramp_steps(ngx_http_flags_ramps_t *rs, ngx_uint_t *dirty)
{
    uint64_t                   now_ms, mono_ms;
    ngx_uint_t                 i, n, k;
    fl_ramp_event_t            ev;
    ngx_http_flags_flag_t     *flag;
    ngx_http_flags_defs_t     *defs;
    ngx_http_flags_project_t  *project;

    if (!ngx_shmtx_trylock(&rs->fmcf->shpool->mutex)) {
        /* another process steps the ramps, or allocates: next time */
        return 0;
    }

    /* the two clocks of the same ngx_time_update(): the wall clock, and
     * the monotonic one (CLOCK_MONOTONIC, shared by every process of the
     * host) that the ramps' durations run on (fl_ramp_clock()) */
    now_ms = ngx_http_flags_now_ms();
    mono_ms = (uint64_t) ngx_current_msec;
    project = rs->fmcf->projects.elts;
    k = 0;

    for (i = 0; i < rs->fmcf->projects.nelts; i++) {
        defs = ngx_http_flags_defs(&project[i]);

        for (n = 0; n < defs->nflags; n++) {
            flag = &defs->flags[n];

            if (flag->ramp_def == NULL || flag->ramp == NULL
                || k == rs->nramps)
            {
                continue;
            }

            fl_ramp_clock(flag->ramp, now_ms, mono_ms);

            ev = ngx_http_flags_ramp_step(flag, defs, now_ms, dirty);

            if (ev != FL_RAMP_EV_NONE) {
                rs->changes[k].defs = defs;
                rs->changes[k].flag = flag;
                rs->changes[k].event = ev;
                k++;
            }
        }
    }

    ngx_shmtx_unlock(&rs->fmcf->shpool->mutex);

    return k;
}


static fl_ramp_event_t
ngx_http_flags_ramp_step(ngx_http_flags_flag_t *flag,
    ngx_http_flags_defs_t *defs, uint64_t now_ms, ngx_uint_t *dirty)
{
    uint64_t              next_tick;
    fl_ramp_input_t       in;
    fl_ramp_event_t       ev;

    /* the cohorts' evaluations, their witnessed errors, what stops it */
    ngx_http_flags_ramp_input(defs, flag, &in);

    /* the backstop's tick, on the monotonic clock */
    fl_witness_roll(flag->witness, &in, (uint64_t) ngx_current_msec,
                    flag->ramp_def->tick);

    next_tick = flag->ramp->next_tick_ms;

    ev = fl_ramp_step(flag->ramp_def, flag->ramp, now_ms, &in);

    if (ev == FL_RAMP_EV_ROLLBACK
        && !fl_control_try_rollback(flag->ctl, now_ms,
                                    flag->ramp->evidence.errors_on,
                                    flag->ramp->stage_on,
                                    flag->ramp->witnesses,
                                    FL_DECIDED_RULE))
    {
        /* the ramp's rule rolls the flag back in the same change as the
         * ramp's state, under the lock (an action that takes the lock
         * next finds both); another rule's rollback came first */
        ev = FL_RAMP_EV_NONE;
    }

    if (flag->ramp->next_tick_ms != next_tick
        && flag->ramp->last_e1 + flag->ramp->last_e0 > 0)
    {
        /* the evidence moved: the state file keeps it */
        *dirty = 1;
    }

    return ev;
}
