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
 *      or fl_evaluate_values() for answers that show none; one flag's);
 *   3. count each evaluation by its answer: the flag's evaluations, its
 *      on or off cohort and, when on, its window (fl_count_eval()).
 *
 * Whether an answer is counted is the caller's to say, for one reason
 * only: the live channel's refresh is not, because the SDK evaluates
 * locally and reports what it answered (docs/push.md), and a variable is
 * counted at its first read, not when $flags_enabled evaluates the rest
 * (docs/variables.md).  Memory comes from the caller's pool.
 */

#include "ngx_http_flags_module.h"


ngx_int_t
ngx_http_flags_answer_init(ngx_http_flags_answer_t *a, ngx_pool_t *pool,
    ngx_http_flags_project_t *project)
{
    size_t                  i, n;
    ngx_http_flags_flag_t  *flags;
    ngx_http_flags_defs_t  *defs;

    defs = ngx_http_flags_defs(project);
    n = defs->nflags;
    flags = defs->flags;

    a->project = project;
    a->defs = defs;
    a->effective = ngx_palloc(pool, (n + 1) * sizeof(uint32_t));
    a->sw = ngx_pnalloc(pool, n + 1);
    a->detail = ngx_palloc(pool, (n + 1) * sizeof(fl_detail_t));

    if (a->effective == NULL || a->sw == NULL || a->detail == NULL) {
        return NGX_ERROR;
    }

    for (i = 0; i < n; i++) {
        a->effective[i] = fl_control_switch(flags[i].ctl,
                                            flags[i].rollout_milli,
                                            &a->sw[i]);
    }

    return NGX_OK;
}


void
ngx_http_flags_answer_evaluate(ngx_http_flags_answer_t *a,
    const fl_user_t *user, ngx_uint_t reasons, ngx_uint_t counted)
{
    size_t                  i, n;
    int64_t                 now;
    ngx_http_flags_defs_t  *defs;

    defs = a->defs;

    if (reasons == NGX_HTTP_FLAGS_REASONS) {
        fl_evaluate_detail(defs->core, user, a->effective, a->sw,
                           a->detail);

    } else {
        fl_evaluate_values(defs->core, user, a->effective, a->sw,
                           a->detail);
    }

    if (counted != NGX_HTTP_FLAGS_COUNTED) {
        return;
    }

    n = defs->nflags;
    now = ngx_http_flags_now_sec();

    for (i = 0; i < n; i++) {
        ngx_http_flags_count_evaluation(defs, i, a->detail[i].enabled, now);
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
    ngx_http_flags_flag_t  *flag;

    flag = &defs->flags[i];

    if (flag->totals == NULL) {
        return;
    }

    if (now < 0) {
        now = ngx_http_flags_now_sec();
    }

    fl_count_eval(flag->totals, flag->window, now, enabled != 0);
}
