/*
 * ngx_http_flags_sync_round.c - a flags_sync round (docs/sync.md): every
 * interval one script call a project, pipelined, and each answer applied
 * to the zone.
 *
 * Glue: the zone's totals, baselines and controls are read into the
 * core's fl_sync_flag_t; the core decides which flags send an entry and
 * writes the script's KEYS and ARGV (src/core/sync_round.cpp); hiredis
 * formats them as EVALSHA (and as EVAL, kept for a NOSCRIPT retry).  An
 * answer, read by hiredis, goes to the core as a flat view of its
 * elements; the core reads the fleet's record of each flag and says what
 * applying it does (src/core/sync_reply.cpp); this file does it to the
 * zone, logs it, moves the baselines and has the push clients and the
 * state file told.
 */

#include "ngx_http_flags_sync.h"

#include <openssl/rand.h>


static ngx_int_t ngx_http_flags_sync_project(ngx_http_flags_sync_t *s,
    ngx_uint_t pi, ngx_uint_t rebase, uint64_t away_ms);
static void ngx_http_flags_sync_incarnation(ngx_http_flags_sync_t *s);


/* ------------------------------------------------------ what it sends */

ngx_int_t
ngx_http_flags_sync_round(ngx_http_flags_sync_t *s)
{
    uint64_t    away_ms, last_ok, now;
    ngx_uint_t  i, rebase;

    s->state = NGX_HTTP_FLAGS_SYNC_BUSY;
    s->round_start = ngx_current_msec;
    s->changed = 0;

    ngx_http_flags_sync_incarnation(s);

    /* the first round after Redis was away (for this owner or the last):
     * how long since the last round answered decides, per flag, whether
     * what was counted meanwhile goes (fl_sync_away_keeps()) */
    rebase = s->fmcf->sh->sync_rebase;
    s->fmcf->sh->sync_rebase = 0;

    now = ngx_http_flags_now_ms();
    last_ok = s->fmcf->sh->sync_last_ok_ms;
    away_ms = (last_ok == 0) ? UINT64_MAX
                             : (now > last_ok ? now - last_ok : 0);

    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, s->log, 0,
                   "flags: sync: round begins, %ui projects%s%uL ms",
                   s->fmcf->projects.nelts,
                   rebase ? " (Redis was away: counts of flags whose window "
                            "is shorter are dropped), away "
                          : ", last answered ",
                   last_ok ? away_ms : 0);

    /* the deltas read the windows: this worker's memo answers first */
    ngx_http_flags_counts_fold();

    /* each project's definitions now (a runtime version changes them) */
    if (ngx_http_flags_sync_defs_hold(s) != NGX_OK) {
        return NGX_ERROR;
    }

    for (i = 0; i < s->fmcf->projects.nelts; i++) {
        if (ngx_http_flags_sync_project(s, i, rebase, away_ms) != NGX_OK
            || ngx_http_flags_sync_defs_queue(s, i) != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    ngx_add_timer(&s->timeout, ngx_max(s->conf->interval * 5, 2000));

    return ngx_http_flags_sync_flush(s);
}


/*
 * This zone's incarnation: a random 64-bit id, made once by the first
 * round and kept in the zone (so across reloads); the script keeps per
 * host and incarnation the cumulative counts it applied.  A zone made
 * anew (restart, size change) starts its totals at 0 under a new one.
 */

static void
ngx_http_flags_sync_incarnation(ngx_http_flags_sync_t *s)
{
    uint64_t  id;

    if (s->fmcf->sh->sync_incarnation != 0) {
        return;
    }

    if (RAND_bytes((unsigned char *) &id, sizeof(id)) != 1) {
        /* no entropy from OpenSSL: time, pid and nginx's random */
        id = ((uint64_t) ngx_random() << 32) ^ (uint64_t) ngx_random()
             ^ ((uint64_t) ngx_pid << 16) ^ ngx_http_flags_now_ms();
    }

    /* only the syncing worker writes it, holding the lock */
    s->fmcf->sh->sync_incarnation = id ? id : 1;
}


/* A flag's rollback and override as the round sees them (the core's
 * encoding), from a snapshot of its control. */

static uint64_t
ngx_http_flags_sync_control(ngx_http_flags_flag_t *flag,
    fl_state_snapshot_t *snap)
{
    fl_state_snapshot(flag->totals, flag->ctl, 0, 0, 0, snap);

    return fl_sync_control(snap->rolled_back, snap->override_kind,
                           snap->override_milli);
}


/*
 * A flag as the round reads it from the zone.  The baseline is taken from
 * the totals when the flag has none yet, and on the first round after
 * Redis was away: for a ramp's cohorts always, for errors and enabled
 * evaluations when the outage lasted the flag's window or longer (what
 * was counted meanwhile is not sent).
 */

static void
ngx_http_flags_sync_read_flag(ngx_http_flags_defs_t *defs,
    ngx_http_flags_flag_t *flag, ngx_uint_t rebase, uint64_t away_ms,
    fl_sync_flag_t *f)
{
    ngx_uint_t              ramped;
    fl_ramp_input_t         in;
    fl_state_snapshot_t     snap;
    ngx_http_flags_node_t  *node;

    ngx_memzero(f, sizeof(fl_sync_flag_t));

    f->name = (const char *) flag->name.data;
    f->name_len = flag->name.len;
    f->def_hash = flag->def_hash;
    f->policy = flag->policy;

    node = flag->node;

    if (node == NULL) {
        /* the zone had no room for it: nothing counted, nothing sent */
        return;
    }

    f->counted = 1;
    f->control = ngx_http_flags_sync_control(flag, &snap);
    f->errors = flag->totals->errors;
    f->enabled = flag->totals->enabled_evaluations;
    f->on = snap.on_evaluations;
    f->off = snap.off_evaluations;
    f->on_errors = snap.on_errors;
    f->off_errors = snap.off_errors;

    /* the fleet runs a ramp: it must know of the flag what
     * ngx_http_flags_ramp.c tells fl_ramp_step() */
    ramped = flag->ramp_def && flag->ramp;

    if (ramped) {
        ngx_http_flags_ramp_input(defs, flag, &in);
    }

    if (ramped && in.witness) {
        /* a ramp's errors as its regression rule counts them: witnessed
         * (docs/regression.md); a new definition's block counts from 0 */
        f->on_errors = in.on_errors;
        f->off_errors = in.off_errors;

        if (f->on_errors < node->sync_base_on_errors
            || f->off_errors < node->sync_base_off_errors)
        {
            node->sync_base_on_errors = f->on_errors;
            node->sync_base_off_errors = f->off_errors;
        }

        f->ramp_witnesses = fl_witness_seen(in.witness, flag->ramp);
        f->ramp_min_witnesses = fl_ramp_min_witnesses(in.min_sources);
    }

    if (!node->sync_based
        || (rebase && !fl_sync_away_keeps(away_ms, &flag->policy)))
    {
        node->sync_base_errors = f->errors;
        node->sync_base_enabled = f->enabled;
    }

    if (rebase || !node->sync_based) {
        /* a ramp's ticks are Redis's: what its cohorts counted while
         * Redis was away is this host's, never the fleet's (what was
         * acknowledged before still counts once: sync_acked_*) */
        node->sync_base_on = f->on;
        node->sync_base_off = f->off;
        node->sync_base_on_errors = f->on_errors;
        node->sync_base_off_errors = f->off_errors;
        node->sync_based = 1;
    }

    f->base_errors = node->sync_base_errors;
    f->base_enabled = node->sync_base_enabled;
    f->acked_errors = node->sync_acked_errors;
    f->acked_enabled = node->sync_acked_enabled;
    f->base_on = node->sync_base_on;
    f->base_off = node->sync_base_off;
    f->base_on_errors = node->sync_base_on_errors;
    f->base_off_errors = node->sync_base_off_errors;
    f->acked_on = node->sync_acked_on;
    f->acked_off = node->sync_acked_off;
    f->acked_on_errors = node->sync_acked_on_errors;
    f->acked_off_errors = node->sync_acked_off_errors;

    if (ramped) {
        f->ramp_def = flag->ramp_def;
        f->ramp_stopped = in.stopped;
        f->ramp_guard = in.guard;
        f->ramp_actions = __atomic_load_n(&flag->version->sync_ramp_actions,
                                          __ATOMIC_RELAXED);

        if (rebase && flag->version->sync_ramp_seen) {
            /* Redis was away: it may have restarted empty */
            flag->version->sync_ramp_seen = NGX_HTTP_FLAGS_SYNC_SEEN_BEFORE;
        }
    }

    f->known = flag->version->sync_known;
    f->rb_at_ms = snap.rollback_at_ms;
    f->rb_errors = snap.rollback_errors;
    f->rb_enabled = snap.rollback_enabled;
    f->rb_sources = snap.rollback_sources;
}


/*
 * What the core planned, done to the zone: a flag with nothing to say
 * drops its deltas (its baseline moves to the totals read); an entry with
 * an error delta reads its window's sources into keys, FL_SOURCE_SLOTS
 * keys then their ages an entry.
 */

static void
ngx_http_flags_sync_prepare(ngx_http_flags_sync_t *s,
    ngx_http_flags_project_t *project, fl_sync_flag_t *flags, uint32_t *keys)
{
    ngx_http_flags_defs_t  *defs;
    int64_t                 now;
    uint32_t               *ages;
    ngx_uint_t              i;
    fl_sync_flag_t         *f;
    ngx_http_flags_flag_t  *flag;

    defs = ngx_http_flags_sync_defs(s, project);

    now = ngx_http_flags_now_sec();

    for (i = 0; i < defs->nflags; i++) {
        f = &flags[i];
        flag = &defs->flags[i];

        if (f->entry == FL_SYNC_NO_ENTRY && f->counted) {
            flag->node->sync_base_errors = f->errors;
            flag->node->sync_base_enabled = f->enabled;
            continue;
        }

        if (f->entry != FL_SYNC_ENTRY_SOURCES) {
            continue;
        }

        ages = keys + FL_SOURCE_SLOTS;
        f->nsources = ngx_http_flags_source_ages(s->fmcf, flag, now, keys,
                                                 ages);
        f->source_keys = keys;
        f->source_ages = ages;
        keys += 2 * FL_SOURCE_SLOTS;
    }
}


/*
 * The round's command, formatted by hiredis: EVALSHA sha numkeys, then
 * the core's arguments; the same as EVAL with the script's text is kept
 * for a NOSCRIPT retry.  Returns the EVALSHA's length, -1 on failure.
 */

static int
ngx_http_flags_sync_format(ngx_http_flags_sync_t *s, ngx_uint_t pi,
    const char **argv, size_t *argvlen, size_t argc, size_t nkeys,
    char **cmd)
{
    int     len;
    u_char  nk[NGX_SIZE_T_LEN];

    argv[0] = "EVALSHA";
    argvlen[0] = 7;
    argv[1] = (const char *) s->sha;
    argvlen[1] = 40;
    argv[2] = (const char *) nk;
    argvlen[2] = ngx_sprintf(nk, "%uz", nkeys) - nk;

    len = redisFormatCommandArgv(cmd, (int) argc, argv, argvlen);
    if (len < 0) {
        return -1;
    }

    argv[0] = "EVAL";
    argvlen[0] = 4;
    argv[1] = fl_sync_script(&argvlen[1]);

    s->cmd_len[pi] = redisFormatCommandArgv(&s->cmd[pi], (int) argc, argv,
                                            argvlen);

    if ((int) s->cmd_len[pi] < 0) {
        s->cmd[pi] = NULL;
    }

    return len;
}


/*
 * The project's KEYS and ARGV as the core writes them, into memory of
 * the core's bound, then the command.  The sources read for it are not
 * kept past it.
 */

static int
ngx_http_flags_sync_call(ngx_http_flags_sync_t *s, ngx_uint_t pi,
    fl_sync_round_t *round, size_t entries, char **cmd)
{
    int                        len;
    char                      *buf;
    size_t                     argc, bound, nkeys, *argvlen;
    const char               **argv;
    fl_sync_flag_t            *flags;
    ngx_http_flags_defs_t     *defs;

    defs = s->projects[pi].defs;
    flags = s->projects[pi].flags;

    /* EVALSHA sha numkeys, then the core's */
    argc = 3 + FL_SYNC_ROUND_ARGC(entries);
    bound = fl_sync_round_bound(round, flags, defs->nflags);

    argv = ngx_alloc(argc * (sizeof(char *) + sizeof(size_t)) + bound,
                     s->log);
    if (argv == NULL) {
        return -1;
    }

    argvlen = (size_t *) (argv + argc);
    buf = (char *) (argvlen + argc);
    nkeys = 0;

    if (fl_sync_round_args(round, flags, defs->nflags, buf, bound,
                           argv + 3, argvlen + 3, argc - 3, &nkeys)
        != argc - 3)
    {
        len = -1;

    } else {
        len = ngx_http_flags_sync_format(s, pi, argv, argvlen, argc, nkeys,
                                         cmd);
    }

    ngx_free(argv);

    return len;
}


/* The command queued: EVALSHA, or EVAL when no SHA is known. */

static ngx_int_t
ngx_http_flags_sync_queue(ngx_http_flags_sync_t *s, ngx_uint_t pi,
    char *cmd, int len)
{
    ngx_int_t  rc;

    if (!s->has_sha) {
        /* no SHA yet (cannot happen after SCRIPT LOAD): EVAL at once */
        redisFreeCommand(cmd);

        if (s->cmd[pi] == NULL) {
            return NGX_ERROR;
        }

        return ngx_http_flags_sync_send(s, s->cmd[pi], s->cmd_len[pi],
                                        NGX_HTTP_FLAGS_SYNC_R_EVAL
                                        + s->fmcf->projects.nelts + pi);
    }

    rc = ngx_http_flags_sync_send(s, cmd, len,
                                  NGX_HTTP_FLAGS_SYNC_R_EVAL + pi);
    redisFreeCommand(cmd);

    return rc;
}


/*
 * One project's script call: an entry for each flag with new deltas or a
 * control that changed here (a rollback tripped or cleared, an override
 * set or removed) since the fleet last said (the core decides which).
 */

static ngx_int_t
ngx_http_flags_sync_project(ngx_http_flags_sync_t *s, ngx_uint_t pi,
    ngx_uint_t rebase, uint64_t away_ms)
{
    int                         len;
    char                       *cmd;
    size_t                      entries, sources;
    uint32_t                   *keys;
    fl_ramp_t                  *seed;
    ngx_uint_t                  i, n, seeds;
    fl_sync_flag_t             *flags;
    fl_sync_round_t             round;
    ngx_http_flags_sync_conf_t *sc;
    ngx_http_flags_defs_t      *defs;
    ngx_http_flags_project_t   *project;

    project = (ngx_http_flags_project_t *) s->fmcf->projects.elts + pi;
    defs = s->projects[pi].defs;
    flags = s->projects[pi].flags;
    sc = s->conf;
    n = defs->nflags;

    if (s->cmd[pi]) {
        redisFreeCommand(s->cmd[pi]);
        s->cmd[pi] = NULL;
    }

    if (project->pversion == NULL) {
        return NGX_OK;
    }

    round.prefix = (const char *) sc->prefix.data;
    round.prefix_len = sc->prefix.len;
    round.project = (const char *) project->name.data;
    round.project_len = project->name.len;
    round.host = (const char *) sc->name.data;
    round.host_len = sc->name.len;
    round.epoch = project->pversion->sync_epoch;
    round.ver = project->pversion->sync_ver;
    round.incarnation = s->fmcf->sh->sync_incarnation;
    round.calls = project->pversion->sync_calls;
    round.resend = project->pversion->sync_resend != 0;

    seeds = 0;

    for (i = 0; i < n; i++) {
        ngx_http_flags_sync_read_flag(defs, &defs->flags[i], rebase,
                                      away_ms, &flags[i]);
        seeds += flags[i].ramp_def != NULL
                 && defs->flags[i].version->sync_ramp_seen
                    != NGX_HTTP_FLAGS_SYNC_SEEN;
    }

    entries = fl_sync_round_plan(&round, flags, n, &sources);

    /* sent once: a call lost again is found again by the script */
    project->pversion->sync_resend = 0;

    keys = ngx_alloc((sources ? sources : 1) * 2 * FL_SOURCE_SLOTS
                     * sizeof(uint32_t) + seeds * sizeof(fl_ramp_t), s->log);
    if (keys == NULL) {
        return NGX_ERROR;
    }

    ngx_http_flags_sync_prepare(s, project, flags, keys);

    /* the seeds: this host's copy of each ramp the fleet has not
     * answered since Redis was away, taken if Redis lost its own */
    seed = (fl_ramp_t *) (keys + (sources ? sources : 1) * 2
                                 * FL_SOURCE_SLOTS);

    for (i = 0; seeds && i < n; i++) {
        if (flags[i].ramp_def
            && defs->flags[i].version->sync_ramp_seen
               != NGX_HTTP_FLAGS_SYNC_SEEN)
        {
            fl_ramp_read(defs->flags[i].ramp, seed);
            flags[i].ramp_seed = seed++;
        }
    }

    len = ngx_http_flags_sync_call(s, pi, &round, entries, &cmd);

    for (i = 0; i < n; i++) {
        flags[i].source_keys = NULL;
        flags[i].source_ages = NULL;
        flags[i].ramp_seed = NULL;
    }

    ngx_free(keys);

    if (len < 0) {
        return NGX_ERROR;
    }

    ngx_log_debug4(NGX_LOG_DEBUG_HTTP, s->log, 0,
                   "flags: sync: round of project \"%V\": %uz of %ui flags "
                   "sent, %d bytes", &project->name, entries, n, len);

    return ngx_http_flags_sync_queue(s, pi, cmd, len);
}


/* ------------------------------------------------- what the answer does */

/*
 * The reply as the core reads it: its elements in pre-order.  Returns how
 * many it has; only the first max are written (max 0: a count).  hiredis
 * nests replies at most 7 deep, so the recursion is bounded.
 */

size_t
ngx_http_flags_sync_view(redisReply *r, fl_sync_elt_t *view, size_t max,
    size_t i)
{
    size_t          k;
    fl_sync_elt_t  *e;

    if (i < max) {
        e = &view[i];
        ngx_memzero(e, sizeof(fl_sync_elt_t));

        switch (r->type) {

        case REDIS_REPLY_INTEGER:
            e->type = FL_SYNC_ELT_INTEGER;
            e->integer = r->integer;
            break;

        case REDIS_REPLY_STRING:
            e->type = FL_SYNC_ELT_STRING;
            e->str = r->str;
            e->len = r->len;
            break;

        case REDIS_REPLY_ARRAY:
            e->type = FL_SYNC_ELT_ARRAY;
            e->elements = r->elements;
            break;

        default:
            e->type = FL_SYNC_ELT_OTHER;
            break;
        }
    }

    i++;

    if (r->type == REDIS_REPLY_ARRAY) {
        for (k = 0; k < r->elements; k++) {
            i = ngx_http_flags_sync_view(r->element[k], view, max, i);
        }
    }

    return i;
}


/* The counts sent are counted by the fleet: the baseline and what was
 * acknowledged move, and the project's acknowledged calls (not when
 * another worker took the lock meanwhile: it owns it now). */

static void
ngx_http_flags_sync_counted(ngx_http_flags_sync_t *s,
    ngx_http_flags_project_t *project, fl_sync_flag_t *flags)
{
    ngx_http_flags_defs_t  *defs;
    ngx_uint_t              i;
    ngx_http_flags_node_t  *node;

    defs = ngx_http_flags_sync_defs(s, project);

    if (ngx_http_flags_sync_owns(s)) {
        project->pversion->sync_calls++;
    }

    for (i = 0; ngx_http_flags_sync_owns(s) && i < defs->nflags; i++) {
        node = defs->flags[i].node;

        if (node == NULL || flags[i].entry == FL_SYNC_NO_ENTRY) {
            continue;
        }

        node->sync_acked_errors += flags[i].errors - flags[i].base_errors;
        node->sync_acked_enabled += flags[i].enabled
                                    - flags[i].base_enabled;
        node->sync_base_errors = flags[i].errors;
        node->sync_base_enabled = flags[i].enabled;

        if (flags[i].ramp_def) {
            node->sync_acked_on += flags[i].on - flags[i].base_on;
            node->sync_acked_off += flags[i].off - flags[i].base_off;
            node->sync_acked_on_errors += flags[i].on_errors
                                          - flags[i].base_on_errors;
            node->sync_acked_off_errors += flags[i].off_errors
                                           - flags[i].base_off_errors;
            node->sync_base_on = flags[i].on;
            node->sync_base_off = flags[i].off;
            node->sync_base_on_errors = flags[i].on_errors;
            node->sync_base_off_errors = flags[i].off_errors;
        }
    }
}


/* A new epoch (Redis restarted empty, or this host's first contact after
 * another host's): the host forgets what the fleet said, so the next
 * round publishes what is active here and the fleet converges. */

static void
ngx_http_flags_sync_forget(ngx_http_flags_sync_t *s,
    ngx_http_flags_project_t *project, uint64_t epoch)
{
    ngx_http_flags_defs_t  *defs;
    ngx_uint_t  i;

    defs = ngx_http_flags_sync_defs(s, project);

    ngx_log_error(NGX_LOG_NOTICE, s->log, 0,
                  "flags: sync: project \"%V\": redis holds a new state "
                  "(restarted empty?): this host publishes its active "
                  "rollbacks and overrides at the next round",
                  &project->name);

    for (i = 0; i < defs->nflags; i++) {
        if (defs->flags[i].node) {
            defs->flags[i].version->sync_known = 0;
            if (defs->flags[i].version->sync_ramp_seen) {
                defs->flags[i].version->sync_ramp_seen =
                                              NGX_HTTP_FLAGS_SYNC_SEEN_BEFORE;
            }
        }
    }

    project->pversion->sync_epoch = epoch;
    project->pversion->sync_ver = 0;      /* the next answer carries it */
}



/*
 * The store went back (a failover, a restart from a snapshot): it lost
 * versions this host read, so its view is older than what this host
 * holds.  Nothing of it is applied; it becomes what the fleet says, so
 * the next round publishes, where this host differs from it, each
 * rollback, clear and override the store lost (docs/sync.md, "What a
 * failover loses").
 */

static void
ngx_http_flags_sync_back(ngx_http_flags_sync_t *s,
    ngx_http_flags_project_t *project, fl_sync_head_t *head,
    fl_sync_fleet_t *fleets)
{
    ngx_uint_t              i;
    ngx_http_flags_defs_t  *defs;

    defs = ngx_http_flags_sync_defs(s, project);

    ngx_log_error(NGX_LOG_NOTICE, s->log, 0,
                  "flags: sync: project \"%V\": redis lost fleet changes "
                  "this host had read (version %uL, redis now at %uL: a "
                  "failover or a restart from a snapshot): this host "
                  "publishes its rollbacks, clears and overrides at the "
                  "next round", &project->name,
                  project->pversion->sync_ver, head->ver);

    for (i = 0; i < defs->nflags; i++) {
        if (defs->flags[i].node) {
            defs->flags[i].version->sync_known =
                                         fl_sync_back_known(&fleets[i]);
        }
    }

    project->pversion->sync_epoch = head->epoch;
    project->pversion->sync_ver = head->ver;
}


/* One flag: what the core says the fleet's answer does, done here.
 * Returns 1 when the flag's control changed. */

static ngx_uint_t
ngx_http_flags_sync_apply_flag(ngx_http_flags_sync_t *s,
    ngx_http_flags_project_t *project, ngx_http_flags_flag_t *flag,
    fl_sync_fleet_t *ft, uint64_t sent)
{
    ngx_uint_t               changed;
    fl_sync_action_t         act;
    ngx_http_flags_defs_t   *defs;
    fl_state_snapshot_t      snap;
    ngx_http_flags_change_t  ch;

    defs = ngx_http_flags_sync_defs(s, project);

    if (!fl_sync_action(ft, sent, ngx_http_flags_sync_control(flag, &snap),
                        &act))
    {
        /* changed here during the round: that goes out next round */
        return 0;
    }

    /* the control owner logs, counts and bumps the version; the round
     * saves the state file once, at its end */
    ngx_memzero(&ch, sizeof(ngx_http_flags_change_t));
    ch.fmcf = s->fmcf;
    ch.project = project;
    ch.defs = defs;
    ch.flag = flag;
    ch.log = s->log;
    ch.level = s->fmcf->log_level;
    ch.routine = s->fmcf->log_routine;
    ch.by = NGX_HTTP_FLAGS_BY_FLEET;
    ch.batch = 1;

    changed = 0;

    if (act.rollback) {
        ch.who.data = (u_char *) ft->rb_host;
        ch.who.len = ft->rb_host_len;
        changed |= ngx_http_flags_control_fleet_rollback(&ch, ft->at_ms,
                                                         ft->errors,
                                                         ft->enabled,
                                                         ft->sources);
    }

    if (act.clear) {
        ch.who.data = (u_char *) ft->cb_host;
        ch.who.len = ft->cb_host_len;
        changed |= ngx_http_flags_control_clear(&ch);
    }

    if (act.set_override) {
        ch.who.data = (u_char *) ft->ob_host;
        ch.who.len = ft->ob_host_len;
        ngx_http_flags_control_override(&ch, act.override_kind,
                                        act.override_milli);
        changed = 1;
    }

    flag->version->sync_known = act.known;

    return changed;
}


/*
 * The fleet's state of each ramp the round sent, copied into the zone
 * under its lock (ev[i]: what the copy changed, applied by
 * ngx_http_flags_sync_ramp_events() once the controls are), the
 * operator's actions the call carried dropped (the script ran them, even
 * when its item is refused); a ramp whose actions here are not all
 * acknowledged yet is left as it is (they go next round).  An item that
 * does not hold together with the fleet's control (the core says why) is
 * not copied, and logged at most once a minute a project.
 */

static ngx_int_t
ngx_http_flags_sync_ramps(ngx_http_flags_sync_t *s, ngx_uint_t pi,
    fl_sync_elt_t *view, size_t n, fl_sync_head_t *head,
    fl_sync_fleet_t *fleets, fl_ramp_event_t *ev, u_char *known)
{
    size_t                          used, ignored;
    uint64_t                        q, state, ticks;
    ngx_uint_t                      i, dirty, seen, rolled;
    const char                     *why;
    fl_sync_flag_t                 *flags;
    fl_sync_ramp_t                 *ramps;
    fl_ramp_input_t                 in;
    fl_state_snapshot_t             snap;
    ngx_http_flags_flag_t          *flag, *refused;
    ngx_http_flags_defs_t          *defs;
    ngx_http_flags_project_t       *project;
    ngx_http_flags_sync_project_t  *sp;

    project = (ngx_http_flags_project_t *) s->fmcf->projects.elts + pi;
    defs = s->projects[pi].defs;
    sp = &s->projects[pi];
    flags = sp->flags;

    ramps = ngx_alloc((defs->nflags + 1) * sizeof(fl_sync_ramp_t), s->log);
    if (ramps == NULL) {
        return NGX_ERROR;
    }

    used = fl_sync_reply_ramps(view, n, head, flags, defs->nflags,
                               fleets, ramps, &ignored);

    dirty = 0;
    refused = NULL;
    why = NULL;

    ngx_shmtx_lock(&s->fmcf->shpool->mutex);

    for (i = 0; i < defs->nflags; i++) {
        flag = &defs->flags[i];
        ev[i] = FL_RAMP_EV_NONE;
        known[i] = 0;

        if ((!ramps[i].present && ramps[i].refused == NULL)
            || flag->ramp == NULL || !ngx_http_flags_sync_owns(s))
        {
            continue;
        }

        if (flag->witness) {
            /* the backstop's tick (the local rule's, docs/ramps.md): the
             * fleet runs the ramp, this host its own threshold */
            ngx_http_flags_ramp_input(defs, flag, &in);
            fl_witness_roll(flag->witness, &in, (uint64_t) ngx_current_msec,
                            flag->ramp_def->tick);
        }

        q = fl_sync_ramp_actions_drop(flag->version->sync_ramp_actions,
                         fl_sync_ramp_actions_count(flags[i].ramp_actions));
        flag->version->sync_ramp_actions = q;

        if (!ramps[i].present) {
            if (flag->version->sync_ramp_seen) {
                /* the next round offers this host's copy: taken if the
                 * script finds the fleet's hash broken */
                flag->version->sync_ramp_seen =
                                              NGX_HTTP_FLAGS_SYNC_SEEN_BEFORE;
            }
            if (refused == NULL) {
                refused = flag;
                why = ramps[i].refused;
            }
            continue;
        }

        seen = flag->version->sync_ramp_seen;
        flag->version->sync_ramp_seen = NGX_HTTP_FLAGS_SYNC_SEEN;

        if (q != 0) {
            continue;
        }

        state = flag->ramp->state;
        ticks = flag->ramp->evidence.ticks;

        /* rolled back here, and not by the fleet's word: the fleet has
         * not heard of it yet, and its stage does not lift it */
        fl_state_snapshot(flag->totals, flag->ctl, 0, 0, 0, &snap);
        rolled = snap.rolled_back && !(flags[i].known & 1);

        ev[i] = fl_sync_ramp_copy(flag->ramp_def, flag->ramp,
                                  &ramps[i].state, rolled,
                                  snap.rollback_at_ms);

        if (seen == 0 && ev[i] == FL_RAMP_EV_NONE
            && flag->ramp->state == FL_RAMP_PENDING
            && fl_control_ramp(flag->ctl) != FL_RAMP_NONE)
        {
            /* the first word of the fleet: not started, the configured
             * percentage (ngx_http_flags_sync_unknown_ramps()) */
            known[i] = 1;
        }

        if (ev[i] != FL_RAMP_EV_NONE || state != flag->ramp->state
            || (ticks != flag->ramp->evidence.ticks
                && flag->ramp->last_e1 + flag->ramp->last_e0 > 0))
        {
            /* what the state file keeps moved (as the local step's) */
            dirty = 1;
        }
    }

    ngx_shmtx_unlock(&s->fmcf->shpool->mutex);

    if (refused
        && (sp->refused_log == 0 || ngx_current_msec - sp->refused_log >= 60000))
    {
        ngx_log_error(NGX_LOG_WARN, s->log, 0,
                      "flags: sync: project \"%V\": the fleet's ramp of flag "
                      "\"%V\" is refused: %s (this host keeps its copy)",
                      &project->name, &refused->name, why);
        sp->refused_log = ngx_current_msec;
    }

    if (dirty) {
        s->changed = 1;
    }

    ngx_free(ramps);

    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, s->log, 0,
                   "flags: sync: project \"%V\": %uz ramps of the fleet "
                   "read, %uz ignored", &project->name, used, ignored);

    return NGX_OK;
}


/* What the copies changed, applied through the control owner after the
 * answer's controls: a rollback in the same answer is in place before a
 * new stage's percentage is. */

static void
ngx_http_flags_sync_ramp_events(ngx_http_flags_sync_t *s, ngx_uint_t pi,
    fl_ramp_event_t *ev, u_char *known)
{
    ngx_uint_t                 i;
    ngx_http_flags_flag_t     *flag;
    ngx_http_flags_change_t    ch;
    ngx_http_flags_defs_t     *defs;
    ngx_http_flags_project_t  *project;

    project = (ngx_http_flags_project_t *) s->fmcf->projects.elts + pi;
    defs = s->projects[pi].defs;

    ngx_memzero(&ch, sizeof(ngx_http_flags_change_t));
    ch.fmcf = s->fmcf;
    ch.project = project;
    ch.defs = defs;
    ch.log = s->log;
    ch.level = s->fmcf->log_level;
    ch.routine = s->fmcf->log_routine;
    ch.by = NGX_HTTP_FLAGS_BY_FLEET;
    ch.batch = 1;               /* the round saves once, at its end */

    for (i = 0; i < defs->nflags; i++) {
        flag = &defs->flags[i];

        if (known[i]) {
            /* no event, no log: the answer's percentage changed */
            fl_control_set_ramp(flag->ctl, FL_RAMP_NONE);
            if (project->pversion) {
                (void) __atomic_add_fetch(&project->pversion->version, 1,
                                          __ATOMIC_RELEASE);
            }
        }

        if (ev[i] == FL_RAMP_EV_NONE) {
            continue;
        }

        ch.flag = flag;
        ngx_http_flags_control_ramp(&ch, ev[i]);
    }
}


/*
 * The control hash, when the fleet's state moved: "rb:<def>:<flag>" ->
 * "at_ms errors enabled [host [sources]]", "ov:<def>:<flag>" -> "off" or
 * milli-percent, "cb:" and "ob:" -> the host that last cleared the
 * rollback, last changed the override, read by the core into fleets.
 * Applied to each flag whose definition is the same here and whose
 * control did not change here since the round began (that change is
 * published next round).
 */

static void
ngx_http_flags_sync_controls(ngx_http_flags_sync_t *s, ngx_uint_t pi,
    fl_sync_head_t *head, fl_sync_fleet_t *fleets, size_t used,
    size_t ignored)
{
    ngx_uint_t                 i, changed;
    fl_sync_flag_t            *flags;
    ngx_http_flags_defs_t     *defs;
    ngx_http_flags_project_t  *project;

    project = (ngx_http_flags_project_t *) s->fmcf->projects.elts + pi;
    defs = s->projects[pi].defs;
    flags = s->projects[pi].flags;

    changed = 0;

    for (i = 0; i < defs->nflags; i++) {
        if (defs->flags[i].node == NULL) {
            continue;
        }

        changed |= ngx_http_flags_sync_apply_flag(s, project,
                                                  &defs->flags[i],
                                                  &fleets[i],
                                                  flags[i].control);
    }

    project->pversion->sync_epoch = head->epoch;
    project->pversion->sync_ver = head->ver;

    ngx_log_debug5(NGX_LOG_DEBUG_HTTP, s->log, 0,
                   "flags: sync: project \"%V\" read at version %uL: %uz "
                   "fields used, %uz ignored%s", &project->name, head->ver,
                   used, ignored, changed ? ", controls changed" : "");

    if (changed) {
        s->changed = 1;
    }
}


/*
 * The fleet's answer for a project {epoch, ver[, control hash | 0[,
 * ramps]]}: the deltas sent are now counted; the control hash, when the
 * project's epoch or version moved, is read first (the ramps' states are
 * checked against it), the ramps are copied, the controls applied, and
 * then the ramps' new stages, so that a rollback and a stage of the same
 * answer never serve the stage.  A new epoch applies no control (see
 * ngx_http_flags_sync_forget()).  NGX_ERROR: a reply the core refuses
 * fails the round.
 */

ngx_int_t
ngx_http_flags_sync_answer(ngx_http_flags_sync_t *s, ngx_uint_t pi,
    redisReply *reply)
{
    size_t                      i, n, nf, used, ignored;
    u_char                     *known;
    ngx_int_t                   rc;
    fl_sync_elt_t              *view;
    fl_sync_fleet_t            *fleets;
    fl_ramp_event_t            *ev;
    fl_sync_head_t              head;
    fl_sync_reply_status_t      st;
    ngx_http_flags_defs_t      *defs;
    ngx_http_flags_project_t   *project;

    project = (ngx_http_flags_project_t *) s->fmcf->projects.elts + pi;
    defs = s->projects[pi].defs;

    if (project->pversion == NULL) {
        return NGX_ERROR;
    }

    n = ngx_http_flags_sync_view(reply, NULL, 0, 0);

    view = ngx_alloc(n * sizeof(fl_sync_elt_t), s->log);
    if (view == NULL) {
        return NGX_ERROR;
    }

    (void) ngx_http_flags_sync_view(reply, view, n, 0);

    st = fl_sync_reply_head(view, n, project->pversion->sync_epoch, &head);

    if (st != FL_SYNC_REPLY_OK && st != FL_SYNC_REPLY_CONTROL) {
        ngx_log_debug2(NGX_LOG_DEBUG_HTTP, s->log, 0,
                       "flags: sync: answer of project \"%V\": %s",
                       &project->name, fl_sync_reply_status_text(st));
        ngx_free(view);
        return NGX_ERROR;
    }

    ngx_http_flags_sync_counted(s, project, s->projects[pi].flags);

    if (head.resend && ngx_http_flags_sync_owns(s)) {
        /* the store lacks calls it acknowledged: every flag's counts go
         * next round, and the script adds what it lost */
        project->pversion->sync_resend = 1;
    }

    if (st == FL_SYNC_REPLY_CONTROL) {
        ngx_log_debug2(NGX_LOG_DEBUG_HTTP, s->log, 0,
                       "flags: sync: answer of project \"%V\": %s",
                       &project->name, fl_sync_reply_status_text(st));
        ngx_free(view);
        return NGX_ERROR;
    }

    /* the control hash read first: a ramp's state is checked against
     * it; then the controls applied, then the ramps' new stages, so a
     * rollback of this answer is in place before a stage's percentage */
    nf = defs->nflags + 1;
    fleets = ngx_alloc(nf * (sizeof(fl_sync_fleet_t) + sizeof(fl_ramp_event_t)
                             + 1), s->log);
    if (fleets == NULL) {
        ngx_free(view);
        return NGX_ERROR;
    }

    ev = (fl_ramp_event_t *) (fleets + nf);
    known = (u_char *) (ev + nf);
    used = 0;
    ignored = 0;

    if (head.has_control) {
        used = fl_sync_reply_controls(view, n, &head, defs->core, fleets,
                                      defs->nflags, &ignored);
    }

    rc = NGX_OK;

    if (head.has_ramps
        && ngx_http_flags_sync_ramps(s, pi, view, n, &head,
                                     head.has_control ? fleets : NULL, ev,
                                     known)
           != NGX_OK)
    {
        rc = NGX_ERROR;

    } else if (!head.has_control) {
        ngx_log_debug2(NGX_LOG_DEBUG_HTTP, s->log, 0,
                       "flags: sync: project \"%V\" is at version %uL: "
                       "nothing new", &project->name, head.ver);

        /* what this round published was the fleet's already */
        for (i = 0; i < defs->nflags; i++) {
            if (defs->flags[i].node) {
                defs->flags[i].version->sync_known =
                           fl_sync_known_unmoved(&s->projects[pi].flags[i]);
            }
        }

    } else if (head.new_epoch) {
        ngx_http_flags_sync_forget(s, project, head.epoch);

    } else if (head.went_back) {
        ngx_http_flags_sync_back(s, project, &head, fleets);

    } else {
        ngx_http_flags_sync_controls(s, pi, &head, fleets, used, ignored);
    }

    if (rc == NGX_OK && head.has_ramps) {
        ngx_http_flags_sync_ramp_events(s, pi, ev, known);
    }

    ngx_free(fleets);
    ngx_free(view);

    return rc;
}


void
ngx_http_flags_sync_round_done(ngx_http_flags_sync_t *s)
{
    uint64_t                 now;
    ngx_http_flags_shctx_t  *sh;

    sh = s->fmcf->sh;
    now = ngx_http_flags_now_ms();

    if (s->timeout.timer_set) {
        ngx_del_timer(&s->timeout);
    }

    s->state = NGX_HTTP_FLAGS_SYNC_IDLE;
    s->backoff = 0;

    sh->sync_connected = 1;
    sh->sync_last_ok_ms = now;
    sh->sync_ok_msec = ngx_max(ngx_current_msec, 1);
    sh->sync_round_ms = ngx_current_msec - s->round_start;
    (void) ngx_atomic_fetch_add(&sh->sync_rounds, 1);

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, s->log, 0,
                   "flags: sync: round done in %M ms%s",
                   (ngx_msec_t) (ngx_current_msec - s->round_start),
                   s->changed ? ", the state file is rewritten" : "");

    if (s->lost) {
        s->lost = 0;
        ngx_log_error(NGX_LOG_NOTICE, s->log, 0,
                      "flags: sync: redis at %V is back", &s->conf->host);
    }

    if (s->changed) {
        s->changed = 0;
        (void) ngx_http_flags_control_save(s->fmcf, s->log, NULL, NULL);
    }
}
