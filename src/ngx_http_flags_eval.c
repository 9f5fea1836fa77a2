/*
 * ngx_http_flags_eval.c - the one evaluate-and-count path.
 *
 * Every answer that tells a caller a flag's value goes through here: GET
 * {base}/flags, OFREP's single and bulk evaluations, flags_sdk's POST
 * {loc}flags, the live channel's refresh, and the $flag_NAME and
 * $flags_enabled variables.  So does the count of the evaluations the
 * DeployRamp SDK reports over its WebSocket.  The rule, once:
 *
 *   1. read each flag's control block once: the percentage in force and
 *      the switch (rolled back, overridden off), which always agree;
 *   2. evaluate (the core's fl_evaluate_detail(), with OFREP's reasons,
 *      or fl_evaluate_values() for answers that show none; one flag's;
 *      for GET /flags, fl_flags_answer() evaluates and writes the JSON in
 *      one pass);
 *   3. count each evaluation by its answer: the flag's evaluations, its
 *      on or off cohort and, when on, its window.  Counting is plain
 *      additions in the worker's own memory (the snapshot's pending
 *      counts: an answer of every flag is one addition for the answer and
 *      one a flag it showed on); the counts reach the zone at the end of
 *      the event loop's cycle, at most once a millisecond (one
 *      fl_count_evals() a flag for all of them, a posted event or a
 *      timer), and before anything reads them: flags_status, the metrics,
 *      the rollback decision, a ramp's tick, a sync round and a change of
 *      definitions call ngx_http_flags_counts_fold() first, so within a
 *      worker the counts are exact at every read; another worker's reach
 *      the zone within a millisecond or two, the zone says by when and
 *      whether they came, and flags_status and the metrics wait for them
 *      (ngx_http_flags_counts_settled()).
 *
 * Whether an answer is counted is the caller's to say, for one reason
 * only: the live channel's refresh is not, because the SDK evaluates
 * locally and reports what it answered (docs/push.md), and a variable is
 * counted at its first read, not when $flags_enabled evaluates the rest
 * (docs/variables.md).  Memory comes from the caller's pool.
 */

#include "ngx_http_flags_module.h"


static ngx_int_t ngx_http_flags_answer_controls(ngx_http_flags_defs_t *defs,
    ngx_http_flags_project_t *project);
static void ngx_http_flags_answer_count(ngx_http_flags_answer_t *a);
static ngx_http_flags_pending_t *ngx_http_flags_pending(
    ngx_http_flags_defs_t *defs);
static void ngx_http_flags_counts_fold_handler(ngx_event_t *ev);
static void ngx_http_flags_counts_timer_handler(ngx_event_t *ev);
static void ngx_http_flags_tally_drain(ngx_http_flags_defs_t *defs);
static void ngx_http_flags_settle_handler(ngx_event_t *ev);
static void ngx_http_flags_settle_cleanup(void *data);


/*
 * The fold's pace: at the end of an event cycle that counted, unless the
 * last fold is less than this many milliseconds old; then a timer folds
 * when it is that old.  A fold of 1,000 flags is 3,000 locked operations
 * on the zone (about 12 us with its lines in the cache, 35 us when a cycle
 * of answers has pushed them out); folded at the end of every cycle, a
 * worker answering a few requests a cycle paid about 1 us a request.
 */
#define NGX_HTTP_FLAGS_FOLD_MSEC  1


typedef struct {
    ngx_event_t                 ev;
    ngx_http_flags_answer_pt    answer;
    /* the folds it waits for (ngx_http_flags_zone_counts_wait()) */
    ngx_atomic_uint_t           marks[NGX_HTTP_FLAGS_MAX_PROCS];
} ngx_http_flags_settle_t;


static ngx_http_flags_defs_t  *ngx_http_flags_pending_head;
static ngx_event_t             ngx_http_flags_counts_event;
static ngx_event_t             ngx_http_flags_counts_timer;
/* the timer's data: nginx's debug log reads a timer's data as a
 * connection and prints its descriptor */
static ngx_connection_t        ngx_http_flags_counts_conn;
/* the last fold (0 before the first: a clock of milliseconds since boot
 * makes that long ago) */
static ngx_msec_t              ngx_http_flags_folded_at;
/* counts are held since the last fold (and the zone says until when) */
static ngx_uint_t              ngx_http_flags_counts_held;


/* detail: NGX_HTTP_FLAGS_DETAIL for ngx_http_flags_answer_evaluate(),
 * NGX_HTTP_FLAGS_BITS for ngx_http_flags_answer_flags_json() */

ngx_int_t
ngx_http_flags_answer_init(ngx_http_flags_answer_t *a, ngx_pool_t *pool,
    ngx_http_flags_project_t *project, ngx_uint_t detail)
{
    size_t                  i, n;
    ngx_http_flags_flag_t  *flags;
    ngx_http_flags_defs_t  *defs;

    defs = ngx_http_flags_defs(project);
    n = defs->nflags;
    flags = defs->flags;

    a->project = project;
    a->defs = defs;
    a->detail = NULL;
    a->enabled = n <= NGX_HTTP_FLAGS_ANSWER_LOCAL
                 ? a->local_enabled
                 : ngx_palloc(pool, FL_BIT_WORDS(n) * sizeof(uint64_t));

    if (a->enabled == NULL) {
        return NGX_ERROR;
    }

    if (detail == NGX_HTTP_FLAGS_DETAIL) {
        a->detail = n < NGX_HTTP_FLAGS_ANSWER_LOCAL
                    ? a->local
                    : ngx_palloc(pool, (n + 1) * sizeof(fl_detail_t));

        if (a->detail == NULL) {
            return NGX_ERROR;
        }
    }

    if (ngx_http_flags_answer_controls(defs, project) == NGX_OK) {
        a->effective = defs->ctl_effective;
        a->sw = defs->ctl_sw;
        a->etag_prefix = &defs->ctl_etag;
        return NGX_OK;
    }

    a->etag_prefix = NULL;

    a->effective = ngx_palloc(pool, (n + 1) * sizeof(uint32_t));
    a->sw = ngx_pnalloc(pool, n + 1);

    if (a->effective == NULL || a->sw == NULL) {
        return NGX_ERROR;
    }

    for (i = 0; i < n; i++) {
        a->effective[i] = fl_control_switch(flags[i].ctl,
                                            flags[i].rollout_milli,
                                            &a->sw[i]);
    }

    return NGX_OK;
}


/*
 * The percentage in force and the switch of every flag, read from the
 * zone once for each answer version of the project and kept in the
 * snapshot: they change only with a control change or a new
 * definition, and every such change bumps the version once it is made
 * (ngx_http_flags_control_changed(), the sync round, a definitions
 * switch), as the memo of answers relies on.  The version is read before
 * the controls, so controls read under a version a change then bumps are
 * read again by the next answer.  NGX_DECLINED: no version to
 * trust (the zone was full) or no memory: the caller reads them itself.
 */

static ngx_int_t
ngx_http_flags_answer_controls(ngx_http_flags_defs_t *defs,
    ngx_http_flags_project_t *project)
{
    size_t                  i, n;
    ngx_pool_t             *pool;
    ngx_atomic_uint_t       v;
    ngx_http_flags_flag_t  *flags;

    if (project->pversion == NULL) {
        return NGX_DECLINED;
    }

    v = ngx_http_flags_answer_version(project);

    if (defs->ctl_valid && defs->ctl_version == v) {
        return NGX_OK;
    }

    n = defs->nflags;

    if (defs->ctl_effective == NULL) {
        pool = defs->pool ? defs->pool : ngx_cycle->pool;

        defs->ctl_effective = ngx_palloc(pool, (n + 1) * sizeof(uint32_t));
        defs->ctl_sw = ngx_pnalloc(pool, n + 1);

        if (defs->ctl_effective == NULL || defs->ctl_sw == NULL) {
            defs->ctl_effective = NULL;
            return NGX_DECLINED;
        }
    }

    flags = defs->flags;

    for (i = 0; i < n; i++) {
        defs->ctl_effective[i] = fl_control_switch(flags[i].ctl,
                                                   flags[i].rollout_milli,
                                                   &defs->ctl_sw[i]);
    }

    fl_flags_etag_prefix(defs->core, defs->ctl_effective, defs->ctl_sw,
                         &defs->ctl_etag);

    defs->ctl_version = v;
    defs->ctl_valid = 1;

    return NGX_OK;
}


void
ngx_http_flags_answer_evaluate(ngx_http_flags_answer_t *a,
    const fl_user_t *user, ngx_uint_t reasons, ngx_uint_t counted)
{
    size_t                  i, n;
    ngx_http_flags_defs_t  *defs;

    defs = a->defs;

    if (reasons == NGX_HTTP_FLAGS_REASONS) {
        fl_evaluate_detail(defs->core, user, a->effective, a->sw,
                           a->detail);

    } else {
        fl_evaluate_values(defs->core, user, a->effective, a->sw,
                           a->detail);
    }

    n = defs->nflags;

    ngx_memzero(a->enabled, FL_BIT_WORDS(n) * sizeof(uint64_t));

    for (i = 0; i < n; i++) {
        a->enabled[i / 64] |= (uint64_t) (a->detail[i].enabled != 0)
                              << (i % 64);
    }

    if (counted == NGX_HTTP_FLAGS_COUNTED) {
        ngx_http_flags_answer_count(a);
    }
}


/* GET /flags' answer into buf (fl_flags_json_bound() bytes): evaluated
 * and written in one pass, then counted; returns its length. */

size_t
ngx_http_flags_answer_flags_json(ngx_http_flags_answer_t *a,
    const fl_user_t *user, ngx_uint_t counted, u_char *buf)
{
    size_t  len;

    len = fl_flags_answer(a->defs->core, user, a->effective, a->sw,
                          a->enabled, (char *) buf);

    if (counted == NGX_HTTP_FLAGS_COUNTED) {
        ngx_http_flags_answer_count(a);
    }

    return len;
}


/* One evaluation of every flag, with the values in a->enabled. */

static void
ngx_http_flags_answer_count(ngx_http_flags_answer_t *a)
{
    size_t                     i, n;
    int64_t                    now;
    ngx_http_flags_defs_t     *defs;
    ngx_http_flags_pending_t  *pending;

    defs = a->defs;
    n = defs->nflags;
    pending = ngx_http_flags_pending(defs);

    if (pending) {
        /* the evaluations once for the answer; the on ones a word of
         * flags at a time, into the tally, drained into pending at the
         * fold or before it could overflow */
        defs->pending_answers++;

        if (defs->tally_adds == FL_TALLY_MAX) {
            ngx_http_flags_tally_drain(defs);
        }

        fl_tally_add(defs->tally, a->enabled, n);
        defs->tally_adds++;

        return;
    }

    /* no memory for the pending counts: straight into the zone */
    now = ngx_http_flags_now_sec();

    for (i = 0; i < n; i++) {
        ngx_http_flags_count_evaluation(defs, i,
                                        (a->enabled[i / 64] >> (i % 64)) & 1,
                                        now);
    }
}


ngx_int_t
ngx_http_flags_evaluate_flag(ngx_http_flags_defs_t *defs,
    ngx_uint_t i, const fl_user_t *user, fl_detail_t *d, ngx_uint_t counted)
{
    uint8_t                 sw;
    uint32_t                effective;
    ngx_http_flags_flag_t  *flag;

    if (i >= defs->nflags) {
        return NGX_ERROR;
    }

    flag = &defs->flags[i];

    effective = fl_control_switch(flag->ctl, flag->rollout_milli, &sw);

    if (fl_evaluate_flag_detail(defs->core, i, user, effective, sw, d)
        != 0)
    {
        return NGX_ERROR;
    }

    if (counted == NGX_HTTP_FLAGS_COUNTED) {
        ngx_http_flags_count_evaluation(defs, i, d->enabled,
                                        ngx_http_flags_now_sec());
    }

    return NGX_OK;
}


/* One evaluation of flag i that answered enabled; now < 0: read the
 * clock.  A flag without room in the zone has no counters. */

void
ngx_http_flags_count_evaluation(ngx_http_flags_defs_t *defs,
    ngx_uint_t i, ngx_uint_t enabled, int64_t now)
{
    ngx_http_flags_flag_t     *flag;
    ngx_http_flags_pending_t  *pending;

    pending = ngx_http_flags_pending(defs);

    if (pending) {
        pending[i].evaluations++;
        pending[i].enabled += (enabled != 0);
        return;
    }

    flag = &defs->flags[i];

    if (flag->totals == NULL) {
        return;
    }

    if (now < 0) {
        now = ngx_http_flags_now_sec();
    }

    fl_count_eval(flag->totals, flag->window, now, enabled != 0);
}


/*
 * The pending counts of defs, on the fold list with the fold posted; NULL
 * when there is no memory for them (the caller counts in the zone).  The
 * array comes from the snapshot's pool, or the cycle's for a file's
 * snapshot: it lives as long as the snapshot, and a snapshot is freed
 * only after a fold (ngx_http_flags_defs_collect()).
 */

static ngx_http_flags_pending_t *
ngx_http_flags_pending(ngx_http_flags_defs_t *defs)
{
    ngx_pool_t  *pool;

    if (defs->pending == NULL) {
        pool = defs->pool ? defs->pool : ngx_cycle->pool;

        defs->tally = ngx_pcalloc(pool, (FL_TALLY_WORDS(defs->nflags) + 1)
                                        * sizeof(uint64_t));
        if (defs->tally == NULL) {
            return NULL;
        }

        defs->pending = ngx_pcalloc(pool, (defs->nflags + 1)
                                          * sizeof(ngx_http_flags_pending_t));
        if (defs->pending == NULL) {
            return NULL;
        }
    }

    if (!defs->on_fold_list) {
        defs->on_fold_list = 1;
        defs->next_pending = ngx_http_flags_pending_head;
        ngx_http_flags_pending_head = defs;
    }

    ngx_http_flags_counts_due();

    return defs->pending;
}


/*
 * Counts wait in this worker: the zone learns by when they will be in it
 * (the readers of other workers wait for that), and the fold is due at the
 * end of this event cycle, or, when the last one is recent, once it is
 * NGX_HTTP_FLAGS_FOLD_MSEC old (a timer is armed then).
 */

void
ngx_http_flags_counts_due(void)
{
    ngx_event_t                 *ev;
    ngx_http_flags_main_conf_t  *fmcf;

    if (!ngx_http_flags_counts_held) {
        ngx_http_flags_counts_held = 1;

        fmcf = ngx_http_cycle_get_module_main_conf(ngx_cycle,
                                                   ngx_http_flags_module);
        if (fmcf) {
            /* the timer's delay at most, and a millisecond each for the
             * clock's and the timer's rounding */
            ngx_http_flags_zone_counts_due(fmcf, ngx_current_msec
                                                 + NGX_HTTP_FLAGS_FOLD_MSEC
                                                 + 2);
        }
    }

    ev = &ngx_http_flags_counts_event;

    if (ev->posted || ngx_http_flags_counts_timer.timer_set) {
        return;
    }

    ev->handler = ngx_http_flags_counts_fold_handler;
    ev->log = ngx_cycle->log;
    ev->data = NULL;
    ngx_post_event(ev, &ngx_posted_events);
}


/* The tally's counts into the pending ones (of the flags' on values). */

static void
ngx_http_flags_tally_drain(ngx_http_flags_defs_t *defs)
{
    if (defs->tally_adds == 0) {
        return;
    }

    fl_tally_drain(defs->tally, defs->nflags, &defs->pending[0].enabled,
                   sizeof(ngx_http_flags_pending_t) / sizeof(uint32_t));
    defs->tally_adds = 0;
}


/* The end of a cycle that counted: fold, or arm the timer. */

static void
ngx_http_flags_counts_fold_handler(ngx_event_t *ev)
{
    ngx_msec_t    age;
    ngx_event_t  *timer;

    age = ngx_current_msec - ngx_http_flags_folded_at;

    if (age >= NGX_HTTP_FLAGS_FOLD_MSEC) {
        ngx_http_flags_counts_fold();
        return;
    }

    timer = &ngx_http_flags_counts_timer;

    if (!timer->timer_set) {
        timer->handler = ngx_http_flags_counts_timer_handler;
        timer->log = ngx_cycle->log;
        ngx_http_flags_counts_conn.fd = (ngx_socket_t) -1;
        timer->data = &ngx_http_flags_counts_conn;
        /* it never holds a worker that is shutting down: the exit folds */
        timer->cancelable = 1;
        ngx_add_timer(timer, NGX_HTTP_FLAGS_FOLD_MSEC - age);
    }
}


static void
ngx_http_flags_counts_timer_handler(ngx_event_t *ev)
{
    ngx_http_flags_counts_fold();
}


/*
 * A GET or HEAD of the counters (flags_status, flags_metrics): its body
 * discarded, then answer(r) once every worker's counts of earlier answers
 * are in the zone.
 */

ngx_int_t
ngx_http_flags_counts_get(ngx_http_request_t *r,
    ngx_http_flags_answer_pt answer)
{
    ngx_int_t  rc;

    if (!(r->method & (NGX_HTTP_GET|NGX_HTTP_HEAD))) {
        return ngx_http_flags_method_not_allowed(r, "GET, HEAD");
    }

    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    return ngx_http_flags_counts_settled(r, answer);
}


/*
 * flags_status and flags_metrics: this worker's counts are folded by the
 * reader (answer() folds first); another worker's reach the zone within
 * NGX_HTTP_FLAGS_FOLD_MSEC, and the zone says until when and whether they
 * have come: the answer waits for the counts each other worker held when
 * the request came, usually a millisecond or two, so that it counts every
 * evaluation answered before the request, whichever worker answered it.
 * A worker slow to fold (descheduled on a busy machine) is waited for;
 * one that has not folded NGX_HTTP_FLAGS_LATE_MSEC after its due time was
 * killed or is stuck, and is not.
 */

ngx_int_t
ngx_http_flags_counts_settled(ngx_http_request_t *r,
    ngx_http_flags_answer_pt answer)
{
    ngx_msec_t                   wait;
    ngx_atomic_uint_t            marks[NGX_HTTP_FLAGS_MAX_PROCS];
    ngx_pool_cleanup_t          *cln;
    ngx_http_flags_settle_t     *s;
    ngx_http_flags_main_conf_t  *fmcf;

    fmcf = ngx_http_get_module_main_conf(r, ngx_http_flags_module);

    wait = ngx_http_flags_zone_counts_wait(fmcf, marks, 1);

    if (wait == 0) {
        return answer(r);
    }

    s = ngx_palloc(r->pool, sizeof(ngx_http_flags_settle_t));
    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (s == NULL || cln == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_memzero(&s->ev, sizeof(ngx_event_t));
    ngx_memcpy(s->marks, marks, sizeof(marks));
    s->answer = answer;
    s->ev.handler = ngx_http_flags_settle_handler;
    s->ev.data = r;
    s->ev.log = r->connection->log;

    cln->handler = ngx_http_flags_settle_cleanup;
    cln->data = s;

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "flags: the answer waits %M ms for other workers' counts",
                   wait);

    r->main->count++;
    ngx_add_timer(&s->ev, wait);

    return NGX_DONE;
}


static void
ngx_http_flags_settle_handler(ngx_event_t *ev)
{
    ngx_msec_t                   wait;
    ngx_connection_t            *c;
    ngx_http_request_t          *r;
    ngx_http_flags_settle_t     *s;
    ngx_http_flags_main_conf_t  *fmcf;

    s = (ngx_http_flags_settle_t *) ((u_char *) ev
                                     - offsetof(ngx_http_flags_settle_t, ev));
    r = ev->data;
    c = r->connection;

    fmcf = ngx_http_get_module_main_conf(r, ngx_http_flags_module);

    /* a worker past its due time: asked again each millisecond */
    wait = ngx_http_flags_zone_counts_wait(fmcf, s->marks, 0);

    if (wait) {
        ngx_log_debug1(NGX_LOG_DEBUG_HTTP, c->log, 0,
                       "flags: the answer waits %M ms more for other "
                       "workers' counts", wait);
        ngx_add_timer(&s->ev, wait);
        return;
    }

    /* r may be gone after this */
    ngx_http_finalize_request(r, s->answer(r));
    ngx_http_run_posted_requests(c);
}


static void
ngx_http_flags_settle_cleanup(void *data)
{
    ngx_http_flags_settle_t  *s = data;

    if (s->ev.timer_set) {
        ngx_del_timer(&s->ev);
    }
}


void
ngx_http_flags_counts_fold(void)
{
    int64_t                      now;
    uint32_t                     answers, evaluations;
    ngx_uint_t                   i;
    ngx_http_flags_defs_t       *d, *next;
    ngx_http_flags_flag_t       *flag;
    ngx_http_flags_pending_t    *p;
    ngx_http_flags_main_conf_t  *fmcf;

    ngx_http_flags_folded_at = ngx_current_msec;

    if (!ngx_http_flags_counts_held) {
        return;
    }

    ngx_http_flags_counts_held = 0;

    ngx_http_flags_memo_fold();

    now = ngx_http_flags_now_sec();

    for (d = ngx_http_flags_pending_head; d; d = next) {
        next = d->next_pending;
        d->next_pending = NULL;
        d->on_fold_list = 0;

        answers = d->pending_answers;
        d->pending_answers = 0;

        ngx_http_flags_tally_drain(d);

        for (i = 0; i < d->nflags; i++) {
            /* the lines of the flags ahead asked for, which are rarely
             * still in the cache after a cycle of answers */
            if (i + 32 < d->nflags) {
                flag = &d->flags[i + 32];
                fl_count_prefetch(flag->totals, flag->window, now, 0);
            }

            /* (the window's header, asked for 16 flags ago, is there) */
            if (i + 16 < d->nflags) {
                flag = &d->flags[i + 16];
                fl_count_prefetch(flag->totals, flag->window, now, 1);
            }

            p = &d->pending[i];
            evaluations = p->evaluations + answers;

            if (evaluations == 0) {
                continue;
            }

            flag = &d->flags[i];

            if (flag->totals) {
                fl_count_evals(flag->totals, flag->window, now,
                               evaluations, p->enabled);
            }

            p->evaluations = 0;
            p->enabled = 0;
        }
    }

    ngx_http_flags_pending_head = NULL;

    /* in the zone: the other workers' readers need not wait for us */
    fmcf = ngx_http_cycle_get_module_main_conf(ngx_cycle,
                                               ngx_http_flags_module);
    if (fmcf) {
        ngx_http_flags_zone_counts_due(fmcf, 0);
    }
}


/* At exit: every evaluation counted, while the zone is ours. */

void
ngx_http_flags_counts_exit(void)
{
    ngx_http_flags_counts_fold();

    if (ngx_http_flags_counts_event.posted) {
        ngx_delete_posted_event(&ngx_http_flags_counts_event);
    }

    if (ngx_http_flags_counts_timer.timer_set) {
        ngx_del_timer(&ngx_http_flags_counts_timer);
    }
}
