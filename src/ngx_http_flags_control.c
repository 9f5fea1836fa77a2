/*
 * ngx_http_flags_control.c - every change of a flag's control state, and
 * what follows it.
 *
 * A flag's control block (fl_control_t, in the zone) says whether it is
 * rolled back and whether an override is in force.  It changes in five
 * ways, and only through this file:
 *
 *   a rollback by this host's rule   after an error was counted (a
 *                                    report, an upstream error)
 *   a rollback by the fleet          flags_sync applies the fleet's record
 *   a cleared rollback               flags_admin, or the fleet
 *   an override set or removed       flags_admin, or the fleet
 *   a new definition                 a reload commits other definitions:
 *                                    the flag keeps its rollback and
 *                                    override (a new control block takes
 *                                    them from the old one)
 *   a ramp's stage                   the ramp's step, flags_admin, or
 *                                    the fleet's ramp (flags_sync)
 *   a rollback by a ramp's rule      the ramp's step (regression, or
 *                                    onInsufficient "rollback")
 *
 * Each change has the same consequences, taken here and nowhere else:
 *
 *   the project's answer version is bumped (push clients are told at the
 *   next tick, memo entries of the old version stop answering); one log
 *   line says what changed and who changed it, a rollback's (by any rule
 *   or the fleet) at flags_log_level, any other change's at its routine=
 *   (notice by default), so that an alert on [error] pages for rollbacks
 *   only; a rollback is counted (flags_rollbacks_total, by="rule" or "fleet"); the
 *   state file is rewritten, at once or, for a caller that changes several
 *   flags in a row (a sync round) or must answer after the write
 *   (flags_admin), once by that caller through ngx_http_flags_control_save().
 *
 * The zone file (_shm.c) holds the memory; the core decides (the rule,
 * fl_rollback_decide(); the block's transitions, fl_control_*()).
 */

#include "ngx_http_flags_module.h"


static ngx_uint_t ngx_http_flags_control_decide(ngx_http_flags_change_t *ch,
    int64_t now);
static void ngx_http_flags_control_changed(ngx_http_flags_change_t *ch);
static void ngx_http_flags_control_ramp_follow(ngx_http_flags_change_t *ch,
    uint64_t now);
static void ngx_http_flags_control_ramp_rollback(ngx_http_flags_change_t *ch);
static void ngx_http_flags_control_ramp_log(ngx_http_flags_change_t *ch,
    const char *what, fl_ramp_t *r);
static void ngx_http_flags_control_event(ngx_http_flags_change_t *ch,
    fl_event_kind_t kind, const char *fmt, ...);
static ngx_str_t *ngx_http_flags_control_host(ngx_http_flags_change_t *ch,
    ngx_str_t *by, u_char *buf, size_t size);
static ngx_uint_t ngx_http_flags_control_ramp_fleet_log(
    ngx_http_flags_change_t *ch);


/* A change made while serving r: its log (with the request's context),
 * its location's flags_log_level, the state file written at once. */

void
ngx_http_flags_change_init(ngx_http_flags_change_t *ch,
    ngx_http_request_t *r, ngx_http_flags_defs_t *defs,
    ngx_http_flags_flag_t *flag)
{
    ngx_http_flags_loc_conf_t  *flcf;

    flcf = ngx_http_get_module_loc_conf(r, ngx_http_flags_module);

    ngx_memzero(ch, sizeof(ngx_http_flags_change_t));

    ch->fmcf = ngx_http_get_module_main_conf(r, ngx_http_flags_module);
    ch->project = defs->project;
    ch->defs = defs;
    ch->flag = flag;
    ch->log = r->connection->log;
    ch->level = flcf->log_level;
    ch->routine = flcf->log_routine;
    ch->by = NGX_HTTP_FLAGS_BY_RULE;
}


/*
 * A failure of the flag (f): a report, or an upstream error.  Counted in
 * its cohort (fl_count_error_cohort(): the lifetime totals and, when on,
 * the window), its source (the absolute rule's min_sources) and its
 * witness (the regression rule's counts, when the flag has a ramp); then
 * an on error runs this host's rule.  Returns 1 when it rolled the flag
 * back.  Every failure comes through here, so who can move which rule
 * (docs/regression.md, "Who can make it act") is written once.
 */

ngx_uint_t
ngx_http_flags_control_failure(ngx_http_flags_change_t *ch,
    ngx_http_flags_failure_t *f)
{
    int64_t                 now;
    ngx_http_flags_flag_t  *flag;

    flag = ch->flag;

    if (flag->node == NULL) {
        /* the zone was full: nothing is counted for this flag */
        return 0;
    }

    now = ngx_http_flags_now_sec();

    fl_count_error_cohort(flag->totals, flag->window, now, f->enabled,
                          f->upstream);

    if (flag->witness) {
        if (f->disputed) {
            fl_witness_dispute(flag->witness);

        } else {
            /* a monotonic clock, the same in every worker: a tick's
             * witnesses are the same whoever counts them */
            (void) fl_witness_count(flag->witness, flag->ramp, f->enabled,
                                    f->witness, (uint64_t) ngx_current_msec,
                                    flag->ramp_def->tick);
        }
    }

    if (!f->enabled) {
        /* the flag was off for this client: its cohort's error, never
         * the window's, so no rollback to decide */
        return 0;
    }

    fl_count_source(flag->window, now, f->source);

    return ngx_http_flags_control_decide(ch, now);
}


/*
 * After an error of the flag's on cohort was counted at now: this host's
 * absolute rule (docs/rollback.md), narrowed while a ramp guards the
 * flag to what its off cohort does not share (docs/ramps.md, "The
 * backstop").  Returns 1 when this error rolled the flag back.
 */

static ngx_uint_t
ngx_http_flags_control_decide(ngx_http_flags_change_t *ch, int64_t now)
{
    char                    rate[16];
    size_t                  rate_len;
    uint32_t                seconds;
    uint64_t                enabled, errors, sources;
    ngx_uint_t              backstop;
    fl_ramp_input_t         in;
    ngx_http_flags_flag_t  *flag;

    flag = ch->flag;

    if (flag->node == NULL
        || flag->policy.mode != FL_ROLLBACK_ON
        || fl_control_rolled_back(flag->ctl))
    {
        return 0;
    }

    /* the window's evaluations include this worker's pending ones */
    ngx_http_flags_counts_fold();

    seconds = flag->policy.window;

    ngx_http_flags_window_sums(ch->fmcf, flag->version, now, seconds,
                               &enabled, &errors, &sources);

    if (!fl_rollback_decide(errors, enabled, sources, &flag->policy)) {
        return 0;
    }

    backstop = 0;

    if (flag->ramp_def && fl_ramp_guards(flag->ramp_def, flag->ramp)
        && !ngx_http_flags_zone_sync_away(ch->fmcf))
    {
        /* the ramp's control group is the baseline: the threshold acts
         * only on failures its off cohort does not share, so an outage of
         * the whole site rolls back no ramped flag, and the regression
         * rule guards the rest; with the fleet's ramp frozen (Redis
         * away), the threshold alone (docs/sync.md) */
        ngx_http_flags_ramp_input(ch->defs, flag, &in);

        if (!fl_ramp_backstop(flag->ramp_def, flag->ramp, flag->witness,
                              &in, seconds))
        {
            ngx_log_debug2(NGX_LOG_DEBUG_HTTP, ch->log, 0,
                           "flags: flag \"%V\" of project \"%V\": its off "
                           "cohort fails alike: the ramp's backstop holds",
                           &flag->name, &ch->project->name);
            return 0;
        }

        backstop = 1;
    }

    if (!fl_control_try_rollback(flag->ctl, ngx_http_flags_now_ms(),
                                 errors, enabled, sources, FL_DECIDED_RULE))
    {
        /* another worker's error tripped it first */
        return 0;
    }

    fl_count_rollback(flag->totals, FL_DECIDED_RULE);

    rate_len = fl_json_milli(flag->policy.rate_milli, rate);

    ngx_log_error(ch->level, ch->log, 0,
                  "flags: rolled back flag \"%V\" of project \"%V\": "
                  "%uL errors and %uL enabled evaluations in %uD s from "
                  "%uL distinct sources (min_errors=%uD rate=%*s%% "
                  "min_sources=%uD; decided by this host's rule%s)",
                  &flag->name, &ch->project->name, errors, enabled,
                  flag->policy.window, sources, flag->policy.min_errors,
                  rate_len, rate, flag->policy.min_sources,
                  backstop ? ", the ramp's backstop: its off cohort does "
                             "not fail alike" : "");

    ngx_http_flags_control_event(ch, FL_EVENT_ROLLBACK,
                                 "%uL errors and %uL enabled evaluations in "
                                 "%uD s from %uL distinct source%s",
                                 errors, enabled, flag->policy.window,
                                 sources, sources == 1 ? "" : "s");

    ngx_http_flags_control_changed(ch);

    return 1;
}


/*
 * The fleet's rollback record of the flag (flags_sync), decided on host
 * ch->who (empty: a record of an older version names none).  Returns 1
 * when it took effect here.
 */

ngx_uint_t
ngx_http_flags_control_fleet_rollback(ngx_http_flags_change_t *ch,
    uint64_t at_ms, uint64_t errors, uint64_t enabled, uint64_t sources)
{
    ngx_http_flags_flag_t  *flag;

    flag = ch->flag;

    if (!fl_control_try_rollback(flag->ctl, at_ms, errors, enabled, sources,
                                 FL_DECIDED_FLEET))
    {
        return 0;
    }

    /* flags_rollbacks_total{by="fleet"}: every host that applies the
     * fleet's rollback counts it, so an alert pages for each */
    fl_count_rollback(flag->totals, FL_DECIDED_FLEET);

    if (ngx_http_flags_control_ramp_fleet_log(ch)) {
        /* the fleet's ramp decided it */

    } else if (ch->who.len) {
        ngx_log_error(ch->level, ch->log, 0,
                      "flags: flag \"%V\" of project \"%V\" rolled back by "
                      "the fleet (decided on host \"%V\": %uL errors, %uL "
                      "enabled evaluations in %uD s)", &flag->name,
                      &ch->project->name, &ch->who, errors, enabled,
                      flag->policy.window);

    } else {
        ngx_log_error(ch->level, ch->log, 0,
                      "flags: flag \"%V\" of project \"%V\" rolled back by "
                      "the fleet (no host recorded: %uL errors, %uL "
                      "enabled evaluations in %uD s)", &flag->name,
                      &ch->project->name, errors, enabled,
                      flag->policy.window);
    }

    ngx_http_flags_control_event(ch, FL_EVENT_ROLLBACK,
                                 "decided by the fleet: %uL errors and %uL "
                                 "enabled evaluations", errors, enabled);

    ngx_http_flags_control_changed(ch);

    return 1;
}


/*
 * Clears the flag's rollback and empties its windows, so that it does not
 * trip again at once (docs/rollback.md).  Returns 1 if there was one.
 */

ngx_uint_t
ngx_http_flags_control_clear(ngx_http_flags_change_t *ch)
{
    ngx_str_t  by;
    u_char     buf[NGX_HTTP_FLAGS_WHO_LEN + 16];

    if (!ngx_http_flags_clear_rollback(ch->fmcf, ch->flag)) {
        return 0;
    }

    if (ch->by == NGX_HTTP_FLAGS_BY_FLEET) {
        ngx_log_error(ch->routine, ch->log, 0,
                      "flags: rollback of flag \"%V\" of project \"%V\" "
                      "cleared by the fleet (%V)", &ch->flag->name,
                      &ch->project->name,
                      ngx_http_flags_control_host(ch, &by, buf,
                                                  sizeof(buf)));

    } else {
        ngx_log_error(ch->routine, ch->log, 0,
                      "flags: rollback cleared for flag \"%V\" of project "
                      "\"%V\"%s%V%s", &ch->flag->name, &ch->project->name,
                      ch->who.len ? ", by user \"" : "", &ch->who,
                      ch->who.len ? "\"" : "");
    }

    ngx_http_flags_control_event(ch, FL_EVENT_CLEAR, "rollback cleared");

    ngx_http_flags_control_changed(ch);

    return 1;
}


/* Sets the flag's override (FL_OVERRIDE_NONE: removes it). */

void
ngx_http_flags_control_override(ngx_http_flags_change_t *ch,
    fl_override_kind_t kind, uint32_t milli)
{
    u_char      value[64], buf[NGX_HTTP_FLAGS_WHO_LEN + 16];
    u_char     *p;
    ngx_str_t   by;

    ngx_http_flags_set_override(ch->flag, kind, milli);

    if (ch->by == NGX_HTTP_FLAGS_BY_FLEET) {
        ngx_log_error(ch->routine, ch->log, 0,
                      "flags: override of flag \"%V\" of project \"%V\" %s "
                      "by the fleet (%V)", &ch->flag->name,
                      &ch->project->name,
                      kind != FL_OVERRIDE_NONE ? "set" : "removed",
                      ngx_http_flags_control_host(ch, &by, buf,
                                                  sizeof(buf)));
        ngx_http_flags_control_event(ch, kind != FL_OVERRIDE_NONE
                                         ? FL_EVENT_OVERRIDE
                                         : FL_EVENT_OVERRIDE_REMOVED,
                                     kind != FL_OVERRIDE_NONE
                                     ? "override set by the fleet"
                                     : "override removed by the fleet");
        ngx_http_flags_control_changed(ch);
        return;
    }

    switch (kind) {

    case FL_OVERRIDE_OFF:
        p = ngx_cpymem(value, ": enabled false",
                       sizeof(": enabled false") - 1);
        break;

    case FL_OVERRIDE_PERCENT:
        p = ngx_cpymem(value, ": rolloutPercentage ",
                       sizeof(": rolloutPercentage ") - 1);
        p += fl_json_milli(milli, (char *) p);
        break;

    default:
        p = value;
    }

    ngx_log_error(ch->routine, ch->log, 0,
                  "flags: override %s for flag \"%V\" of project \"%V\"%*s"
                  "%s%V%s", kind != FL_OVERRIDE_NONE ? "set" : "removed",
                  &ch->flag->name, &ch->project->name, (size_t) (p - value),
                  value, ch->who.len ? ", by user \"" : "", &ch->who,
                  ch->who.len ? "\"" : "");

    if (kind == FL_OVERRIDE_NONE) {
        ngx_http_flags_control_event(ch, FL_EVENT_OVERRIDE_REMOVED,
                                     "override removed");

    } else {
        /* value is ": enabled false" or ": rolloutPercentage N" */
        ngx_http_flags_control_event(ch, FL_EVENT_OVERRIDE, "%*s",
                                     (size_t) (p - value - 2), value + 2);
    }

    ngx_http_flags_control_changed(ch);
}


/*
 * A reload committed its generation: a project whose definitions differ
 * gives other answers, and a flag whose definition changed keeps, in its
 * new version's control block, the rollback and override of the one it
 * replaced (ngx_http_flags_control_definition()).  This runs in the
 * master once the generation is committed and before its workers start:
 * the first moment the new blocks are read.  The old generation's
 * workers count into the old blocks until they stop accepting; a
 * rollback one of them trips after this stays with the old definition.
 */

void
ngx_http_flags_control_committed(ngx_cycle_t *cycle,
    ngx_http_flags_main_conf_t *fmcf)
{
    size_t                     i, n;
    ngx_http_flags_flag_t     *flag;
    ngx_http_flags_change_t    ch;
    ngx_http_flags_defs_t     *defs;
    ngx_http_flags_project_t  *project;

    project = fmcf->projects.elts;

    ngx_memzero(&ch, sizeof(ngx_http_flags_change_t));
    ch.fmcf = fmcf;
    ch.log = cycle->log;
    ch.level = fmcf->log_level;
    ch.routine = fmcf->log_routine;
    ch.by = NGX_HTTP_FLAGS_BY_DEFINITION;
    ch.batch = 1;               /* the state file is the reload's to write */

    for (i = 0; i < fmcf->projects.nelts; i++) {
        ch.project = &project[i];
        ch.defs = ngx_http_flags_defs(&project[i]);
        defs = ch.defs;

        if (ngx_http_flags_zone_defs_committed(fmcf, &project[i])) {
            ngx_http_flags_control_changed(&ch);
        }

        for (n = 0; n < defs->nflags; n++) {
            flag = &defs->flags[n];

            if (flag->version && flag->version->defined_ms == 0) {
                flag->version->defined_ms = ngx_http_flags_now_ms();
            }

            if (flag->replaced) {
                ch.flag = flag;
                (void) ngx_http_flags_control_definition(&ch,
                                                     &flag->replaced->ctl);
                ch.flag = NULL;
            }

            flag->replaced = NULL;
        }
    }
}


/*
 * The flag ch->flag has a new definition, and from is the control block
 * of the one it replaces (a reload's commit; a change of definitions at
 * runtime calls it the same way).  Its new control block (ch->flag->ctl)
 * takes from's rollback, with its record, and from's override
 * (fl_control_carry(): never from's ramp percentage, and nothing the new
 * block has is undone); its counters, window and ramp start fresh, and
 * the ramp follows a kept rollback at once (rolledBack, as any rollback
 * makes it).  The change is logged at the routine level, naming what was
 * kept, and is the flag's "definition" event.  When something was kept,
 * the consequences of a change follow (the answer version; the state
 * file, unless ch->batch).  Only flags_admin clears what was kept.
 * Call it once the new block is the one answers read, where from gets no
 * more changes that must last (a rollback tripped on from afterwards
 * stays there).  Returns 1 when a rollback or an override was kept.
 */

ngx_uint_t
ngx_http_flags_control_definition(ngx_http_flags_change_t *ch,
    const fl_control_t *from)
{
    int                     kept;
    u_char                  what[NGX_HTTP_FLAGS_KEPT_LEN], *p;
    ngx_http_flags_flag_t  *flag;

    flag = ch->flag;

    if (flag->ctl == NULL) {
        if (from && fl_control_active(from)) {
            ngx_log_error(NGX_LOG_WARN, ch->log, 0,
                          "flags: flag \"%V\" of project \"%V\" has a new "
                          "definition, and zone \"%V\" is full: its "
                          "rollback and override are lost; increase the "
                          "flags_zone size", &flag->name, &ch->project->name,
                          &ch->fmcf->zone_name);
        }

        ngx_http_flags_control_event(ch, FL_EVENT_DEFINITION,
                                     "a new definition");
        return 0;
    }

    kept = fl_control_carry(flag->ctl, from);

    if (kept == 0) {
        ngx_http_flags_control_event(ch, FL_EVENT_DEFINITION,
                                     "a new definition");
        return 0;
    }

    p = ngx_http_flags_control_kept(what, kept, flag->ctl);

    ngx_log_error(ch->routine, ch->log, 0,
                  "flags: flag \"%V\" of project \"%V\" has a new "
                  "definition: its %*s kept", &flag->name,
                  &ch->project->name, (size_t) (p - what), what);

    ngx_http_flags_control_event(ch, FL_EVENT_DEFINITION,
                                 "a new definition: its %*s kept",
                                 (size_t) (p - what), what);

    /* the ramp follows the kept rollback; the answers change */
    ngx_http_flags_control_changed(ch);

    return 1;
}


/*
 * What a new definition kept (kept: fl_control_carry()'s answer, not 0),
 * as the log and the events say it, the override's value read from c:
 * "rollback is", "override (rolloutPercentage 5) is", "rollback and its
 * override (enabled false) are".  At most NGX_HTTP_FLAGS_KEPT_LEN bytes
 * at p; returns their end.
 */

u_char *
ngx_http_flags_control_kept(u_char *p, ngx_uint_t kept, const fl_control_t *c)
{
    fl_totals_t          t;
    fl_state_snapshot_t  s;

    if (kept & FL_CARRIED_ROLLBACK) {
        p = ngx_cpymem(p, "rollback", sizeof("rollback") - 1);

        if (!(kept & FL_CARRIED_OVERRIDE)) {
            return ngx_cpymem(p, " is", sizeof(" is") - 1);
        }

        p = ngx_cpymem(p, " and its ", sizeof(" and its ") - 1);
    }

    ngx_memzero(&t, sizeof(fl_totals_t));
    fl_state_snapshot(&t, c, 0, 0, 0, &s);

    if (s.override_kind == FL_OVERRIDE_PERCENT) {
        p = ngx_cpymem(p, "override (rolloutPercentage ",
                       sizeof("override (rolloutPercentage ") - 1);
        p += fl_json_milli(s.override_milli, (char *) p);
        *p++ = ')';

    } else {
        p = ngx_cpymem(p, "override (enabled false)",
                       sizeof("override (enabled false)") - 1);
    }

    if (kept & FL_CARRIED_ROLLBACK) {
        return ngx_cpymem(p, " are", sizeof(" are") - 1);
    }

    return ngx_cpymem(p, " is", sizeof(" is") - 1);
}


/*
 * A ramp's step (ch->by RULE), an operator's action (ADMIN) or the
 * fleet's state copied into the zone (FLEET) gave ev: the stage's
 * percentage into the control word, or the ramp's rollback.
 */

void
ngx_http_flags_control_ramp(ngx_http_flags_change_t *ch, fl_ramp_event_t ev)
{
    fl_ramp_t               r;
    ngx_http_flags_flag_t  *flag;

    flag = ch->flag;

    fl_ramp_read(flag->ramp, &r);

    switch (ev) {

    case FL_RAMP_EV_ROLLBACK:
        ngx_http_flags_control_ramp_rollback(ch);
        return;

    case FL_RAMP_EV_STALLED:
        ngx_log_error(ch->routine, ch->log, 0,
                      "flags: ramp of flag \"%V\" of project \"%V\" holds at "
                      "stage %uL: %uL of its %uD on evaluations after "
                      "hold and maxExtend (onInsufficient \"hold\")",
                      &flag->name, &ch->project->name, r.stage, r.stage_on,
                      flag->ramp_def->stages[r.stage].min_requests);
        ngx_http_flags_control_event(ch, FL_EVENT_RAMP,
                                     "holds at stage %uL: %uL of its %uD on "
                                     "evaluations", r.stage, r.stage_on,
                                     flag->ramp_def->stages[r.stage]
                                         .min_requests);
        return;

    case FL_RAMP_EV_STARTED:
    case FL_RAMP_EV_ADVANCED:
    case FL_RAMP_EV_DONE:
        break;

    default:
        return;
    }

    fl_control_set_ramp(flag->ctl, fl_ramp_milli(flag->ramp_def, &r,
                                                 flag->rollout_milli));

    ngx_http_flags_control_ramp_log(ch,
                                    ev == FL_RAMP_EV_STARTED ? "started at"
                                    : ev == FL_RAMP_EV_DONE ? "is done at"
                                    : "advanced to", &r);

    ngx_http_flags_control_changed(ch);
}


/* An operator's action on the ramp (flags_admin): restart also clears a
 * rollback.  0, or -1 with *why when the action does not apply. */

ngx_int_t
ngx_http_flags_control_ramp_act(ngx_http_flags_change_t *ch,
    fl_ramp_action_t action, ngx_uint_t *changed, const char **why)
{
    int                     rc, c;
    uint64_t                now;
    fl_ramp_t               r;
    ngx_http_flags_flag_t  *flag;

    flag = ch->flag;
    *changed = 0;

    if (action == FL_RAMP_RESTART) {
        *changed = ngx_http_flags_control_clear(ch);
    }

    now = ngx_http_flags_now_ms();

    ngx_shmtx_lock(&ch->fmcf->shpool->mutex);

    /* the ramp as its flag's rollback is now, whatever step ran last */
    ngx_http_flags_control_ramp_follow(ch, now);

    rc = fl_ramp_act(flag->ramp_def, flag->ramp, now, action, &c, why);

    if (rc >= 0 && ch->fmcf->sync) {
        /* the fleet runs the ramp: the next round takes the action to it
         * (docs/sync.md), and this host's copy waits for its answer */
        if (!fl_sync_ramp_actions_push(&flag->version->sync_ramp_actions,
                                       action))
        {
            ngx_log_error(NGX_LOG_WARN, ch->log, 0,
                          "flags: ramp of flag \"%V\" of project \"%V\": "
                          "%ui actions wait for the fleet already: this one "
                          "is applied here only", &flag->name,
                          &ch->project->name,
                          (ngx_uint_t) FL_SYNC_RAMP_ACTIONS_MAX);
        }
    }

    ngx_shmtx_unlock(&ch->fmcf->shpool->mutex);

    if (rc < 0) {
        return -1;
    }

    if (c) {
        *changed = 1;
    }

    if (rc != FL_RAMP_EV_NONE) {
        ngx_http_flags_control_ramp(ch, (fl_ramp_event_t) rc);
        return 0;
    }

    if (c) {
        fl_ramp_read(flag->ramp, &r);
        ngx_http_flags_control_ramp_log(ch, action == FL_RAMP_PAUSE
                                            ? "paused at" : "resumed at", &r);
    }

    return 0;
}


/* The ramp's rule rolled the flag back: the regression rule, with its
 * evidence, or a stage short of its minRequests.  The step set the
 * control word with the ramp's state, under the zone's lock
 * (ngx_http_flags_ramp.c); the rest follows here. */

static void
ngx_http_flags_control_ramp_rollback(ngx_http_flags_change_t *ch)
{
    double                  alpha;
    fl_ramp_t               r;
    ngx_http_flags_flag_t  *flag;

    flag = ch->flag;

    fl_ramp_read(flag->ramp, &r);

    fl_count_rollback(flag->totals, FL_DECIDED_RULE);

    alpha = flag->ramp_def->alpha_ppm / 1e6;

    if (r.cause == FL_RAMP_CAUSE_REGRESSION) {
        ngx_log_error(ch->level, ch->log, 0,
                      "flags: rolled back flag \"%V\" of project \"%V\": "
                      "its ramp's regression rule at stage %uL found the on "
                      "cohort failing more than the off cohort (evidence "
                      "%.2f times its bound 1/alpha = %uD after %uL ticks; "
                      "errors on %uL, off %uL; the deciding tick: on %uL "
                      "errors in %uL requests, off %uL in %uL)",
                      &flag->name, &ch->project->name, r.stage,
                      fl_regression_ratio(&r.evidence, alpha),
                      (uint32_t) (1 / alpha + 0.5), r.evidence.ticks,
                      r.evidence.errors_on,
                      r.evidence.errors_off, r.decided_e1, r.decided_n1,
                      r.decided_e0, r.decided_n0);

        ngx_http_flags_control_event(ch, FL_EVENT_ROLLBACK,
                                     "the ramp's regression rule at stage "
                                     "%uL: evidence %.2f times its bound; "
                                     "errors on %uL, off %uL", r.stage,
                                     fl_regression_ratio(&r.evidence, alpha),
                                     r.evidence.errors_on,
                                     r.evidence.errors_off);

    } else {
        ngx_log_error(ch->level, ch->log, 0,
                      "flags: rolled back flag \"%V\" of project \"%V\": "
                      "its ramp's stage %uL had %uL of its %uD on "
                      "evaluations after hold and maxExtend "
                      "(onInsufficient \"rollback\")", &flag->name,
                      &ch->project->name, r.stage, r.stage_on,
                      flag->ramp_def->stages[r.stage].min_requests);

        ngx_http_flags_control_event(ch, FL_EVENT_ROLLBACK,
                                     "the ramp's stage %uL had %uL of its "
                                     "%uD on evaluations", r.stage,
                                     r.stage_on,
                                     flag->ramp_def->stages[r.stage]
                                         .min_requests);
    }

    ngx_http_flags_control_changed(ch);
}


/* A fleet's rollback decided by the fleet's ramp (its state was copied
 * into the zone before the record was applied): its evidence, as this
 * host's ramp would say it.  0 when the ramp did not decide it. */

static ngx_uint_t
ngx_http_flags_control_ramp_fleet_log(ngx_http_flags_change_t *ch)
{
    double                  alpha;
    fl_ramp_t               r;
    ngx_str_t               by;
    ngx_http_flags_flag_t  *flag;
    u_char                  buf[NGX_HTTP_FLAGS_WHO_LEN + 16];

    flag = ch->flag;

    if (flag->ramp_def == NULL || flag->ramp == NULL) {
        return 0;
    }

    fl_ramp_read(flag->ramp, &r);

    if (r.state != FL_RAMP_ROLLED_BACK
        || (r.cause != FL_RAMP_CAUSE_REGRESSION
            && r.cause != FL_RAMP_CAUSE_INSUFFICIENT))
    {
        return 0;
    }

    (void) ngx_http_flags_control_host(ch, &by, buf, sizeof(buf));

    if (r.cause == FL_RAMP_CAUSE_INSUFFICIENT) {
        ngx_log_error(ch->level, ch->log, 0,
                      "flags: flag \"%V\" of project \"%V\" rolled back by "
                      "the fleet: its ramp's stage %uL had %uL of its %uD on "
                      "evaluations after hold and maxExtend (onInsufficient "
                      "\"rollback\"; %V)", &flag->name, &ch->project->name,
                      r.stage, r.stage_on,
                      flag->ramp_def->stages[r.stage].min_requests, &by);
        return 1;
    }

    alpha = flag->ramp_def->alpha_ppm / 1e6;

    ngx_log_error(ch->level, ch->log, 0,
                  "flags: flag \"%V\" of project \"%V\" rolled back by the "
                  "fleet: its ramp's regression rule at stage %uL found the "
                  "on cohort failing more than the off cohort (evidence %.1f "
                  "reached 1/alpha = %.1f after %uL ticks of the fleet; "
                  "errors on %uL, off %uL; the deciding tick: on %uL errors "
                  "in %uL requests, off %uL in %uL; %V)", &flag->name,
                  &ch->project->name, r.stage,
                  fl_regression_ratio(&r.evidence, alpha) / alpha, 1 / alpha,
                  r.evidence.ticks, r.evidence.errors_on,
                  r.evidence.errors_off, r.decided_e1, r.decided_n1,
                  r.decided_e0, r.decided_n0, &by);

    return 1;
}


/* "flags: ramp of flag "f" of project "p" advanced to stage 2 (25%), by
 * user "alice"" */

static void
ngx_http_flags_control_ramp_log(ngx_http_flags_change_t *ch,
    const char *what, fl_ramp_t *r)
{
    char                    pc[16];
    size_t                  len;
    ngx_http_flags_flag_t  *flag;

    flag = ch->flag;

    len = fl_json_milli(flag->ramp_def->stages[r->stage].milli, pc);

    /* a stage change, or a pause or resume */
    ngx_http_flags_control_event(ch, what[0] == 'p' || what[0] == 'r'
                                     ? FL_EVENT_RAMP : FL_EVENT_STAGE,
                                 "%s stage %uL of %uD (%*s%%)", what,
                                 r->stage, flag->ramp_def->nstages, len, pc);

    if (ch->by == NGX_HTTP_FLAGS_BY_FLEET) {
        ngx_log_error(ch->routine, ch->log, 0,
                      "flags: ramp of flag \"%V\" of project \"%V\" %s "
                      "stage %uL of %uD (%*s%%), by the fleet", &flag->name,
                      &ch->project->name, what, r->stage,
                      flag->ramp_def->nstages, len, pc);
        return;
    }

    ngx_log_error(ch->routine, ch->log, 0,
                  "flags: ramp of flag \"%V\" of project \"%V\" %s stage "
                  "%uL of %uD (%*s%%)%s%V%s", &flag->name,
                  &ch->project->name, what, r->stage,
                  flag->ramp_def->nstages, len, pc,
                  ch->who.len ? ", by user \"" : "", &ch->who,
                  ch->who.len ? "\"" : "");
}


/*
 * The state file holds every change so far.  Without r nothing waits;
 * with r, done(r, ...) answers it once the file is written (see
 * ngx_http_flags_state_changed()).
 */

ngx_int_t
ngx_http_flags_control_save(ngx_http_flags_main_conf_t *fmcf, ngx_log_t *log,
    ngx_http_request_t *r, ngx_http_flags_state_done_pt done)
{
    return ngx_http_flags_state_changed(fmcf, log, r, done);
}


/*
 * With the zone's lock held: the ramp's times on the wall clock as it reads
 * now (the fleet's, with flags_sync, are Redis's and stay as they are),
 * and its state as its flag's rollback says: rolledBack once rolled back,
 * paused once the rollback is cleared (docs/ramps.md).
 */

static void
ngx_http_flags_control_ramp_follow(ngx_http_flags_change_t *ch, uint64_t now)
{
    ngx_http_flags_flag_t  *flag;

    flag = ch->flag;

    fl_ramp_clock(flag->ramp, now,
                  ch->fmcf->sync ? 0 : (uint64_t) ngx_current_msec);

    (void) fl_ramp_follow(flag->ramp, now,
                          fl_control_rolled_back(flag->ctl));
}


/* The consequences every change shares. */

static void
ngx_http_flags_control_changed(ngx_http_flags_change_t *ch)
{
    ngx_http_flags_pversion_t  *pv;

    if (ch->flag && ch->flag->ramp_def && ch->flag->ramp) {
        /* a rollback set or cleared moves the ramp in the same change,
         * before anyone is answered or the state file written: a resume
         * right after a cleared rollback finds it paused */
        ngx_shmtx_lock(&ch->fmcf->shpool->mutex);
        ngx_http_flags_control_ramp_follow(ch, ngx_http_flags_now_ms());
        ngx_shmtx_unlock(&ch->fmcf->shpool->mutex);
    }

    pv = ch->project->pversion;

    /* push clients are told at the next tick; memo entries of the old
     * version stop answering (docs/push.md, ngx_http_flags_memo.c) */
    if (pv) {
        (void) __atomic_add_fetch(&pv->version, 1, __ATOMIC_RELEASE);
    }

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, ch->log, 0,
                   "flags: project \"%V\" answers changed (answer version "
                   "%uA)", &ch->project->name, pv ? pv->version : 0);

    if (!ch->batch) {
        /* written off the event loop; nothing waits for it */
        (void) ngx_http_flags_control_save(ch->fmcf, ch->log, NULL, NULL);
    }
}


/* "host \"NAME\"" or "no host recorded": who made a change of the
 * fleet's, as its log line says it */

static ngx_str_t *
ngx_http_flags_control_host(ngx_http_flags_change_t *ch, ngx_str_t *by,
    u_char *buf, size_t size)
{
    by->data = buf;

    if (ch->who.len == 0) {
        by->len = ngx_cpymem(buf, "no host recorded", 16) - buf;
        return by;
    }

    by->len = ngx_snprintf(buf, size, "host \"%V\"", &ch->who) - buf;

    return by;
}


/* One entry of the zone's ring of recent changes (docs/dashboard.md):
 * what changed, who changed it, and a short sentence. */

static void
ngx_http_flags_control_event(ngx_http_flags_change_t *ch,
    fl_event_kind_t kind, const char *fmt, ...)
{
    u_char         detail[FL_EVENT_DETAIL_MAX], *p;
    va_list        args;
    fl_event_by_t  by;

    va_start(args, fmt);
    p = ngx_vslprintf(detail, detail + sizeof(detail), fmt, args);
    va_end(args);

    switch (ch->by) {
    case NGX_HTTP_FLAGS_BY_FLEET:
        by = FL_EVENT_BY_FLEET;
        break;
    case NGX_HTTP_FLAGS_BY_ADMIN:
        by = FL_EVENT_BY_ADMIN;
        break;
    case NGX_HTTP_FLAGS_BY_DEFINITION:
        by = FL_EVENT_BY_DEFINITION;
        break;
    default:
        by = FL_EVENT_BY_RULE;
    }

    ngx_http_flags_event_add(ch->fmcf, kind, by, &ch->project->name,
                             ch->flag ? &ch->flag->name : NULL,
                             ch->who_raw.len ? &ch->who_raw : &ch->who,
                             detail, p - detail);
}

