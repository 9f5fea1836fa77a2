/*
 * ngx_http_flags_upstream.c - upstream errors roll back (docs/variables.md).
 *
 *   flags_upstream_errors on | off [status=500-599];
 *
 * At the log phase of a main request whose location has it on and whose
 * status is in the range, each flag the request read through a variable
 * ($flag_NAME, $flags_enabled) counts an upstream error: an error of the
 * flag (reports' totals and window, so the rollback decision runs as after
 * an accepted report) and of its on cohort when the flag was on for the
 * request, only of its off cohort when it was off.
 */

#include "ngx_http_flags_module.h"


typedef struct {
    ngx_http_flags_main_conf_t  *fmcf;
    int64_t                      now;
} ngx_http_flags_upstream_walk_t;


static ngx_int_t ngx_http_flags_upstream_log(ngx_http_request_t *r);
static void ngx_http_flags_upstream_flag(ngx_http_request_t *r,
    ngx_http_flags_project_t *project, ngx_http_flags_flag_t *flag,
    ngx_uint_t enabled, void *data);


/* flags_upstream_errors on | off [status=N-M | status=N]; */

char *
ngx_http_flags_upstream_errors(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_flags_loc_conf_t *flcf = conf;

    u_char     *dash;
    ngx_int_t   lo, hi;
    ngx_str_t  *value;

    if (flcf->upstream_errors != NGX_CONF_UNSET) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (ngx_strcmp(value[1].data, "on") == 0) {
        flcf->upstream_errors = 1;

    } else if (ngx_strcmp(value[1].data, "off") == 0) {
        flcf->upstream_errors = 0;

    } else {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid value \"%V\" in flags_upstream_errors, "
                           "expected \"on\" or \"off\"", &value[1]);
        return NGX_CONF_ERROR;
    }

    lo = 500;
    hi = 599;

    if (cf->args->nelts == 3) {
        if (value[2].len <= sizeof("status=") - 1
            || ngx_strncmp(value[2].data, "status=", sizeof("status=") - 1)
               != 0)
        {
            goto invalid;
        }

        value[2].data += sizeof("status=") - 1;
        value[2].len -= sizeof("status=") - 1;

        dash = ngx_strlchr(value[2].data, value[2].data + value[2].len, '-');

        if (dash == NULL) {
            lo = ngx_atoi(value[2].data, value[2].len);
            hi = lo;

        } else {
            lo = ngx_atoi(value[2].data, dash - value[2].data);
            hi = ngx_atoi(dash + 1, value[2].data + value[2].len - dash - 1);
        }

        if (lo == NGX_ERROR || hi == NGX_ERROR
            || lo < 100 || hi > 599 || lo > hi)
        {
            value[2].data -= sizeof("status=") - 1;
            value[2].len += sizeof("status=") - 1;
            goto invalid;
        }
    }

    flcf->upstream_status_min = lo;
    flcf->upstream_status_max = hi;

    return NGX_CONF_OK;

invalid:

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "invalid parameter \"%V\" in flags_upstream_errors, "
                       "expected status=N-M with 100 <= N <= M <= 599",
                       &value[2]);
    return NGX_CONF_ERROR;
}


/* postconfiguration: the log-phase handler */

ngx_int_t
ngx_http_flags_upstream_init(ngx_conf_t *cf)
{
    ngx_http_handler_pt        *h;
    ngx_http_core_main_conf_t  *cmcf;

    cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);

    h = ngx_array_push(&cmcf->phases[NGX_HTTP_LOG_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    *h = ngx_http_flags_upstream_log;

    return NGX_OK;
}


static ngx_int_t
ngx_http_flags_upstream_log(ngx_http_request_t *r)
{
    ngx_uint_t                       status;
    ngx_http_flags_loc_conf_t       *flcf;
    ngx_http_flags_upstream_walk_t   walk;

    /* one request, one status: the main request's (log_subrequest also
     * runs this for subrequests, whose reads are the main request's) */
    if (r != r->main) {
        return NGX_OK;
    }

    flcf = ngx_http_get_module_loc_conf(r, ngx_http_flags_module);

    if (flcf->upstream_errors != 1) {
        return NGX_OK;
    }

    /* the status as $status has it */
    status = r->err_status ? r->err_status : r->headers_out.status;

    if (status < flcf->upstream_status_min
        || status > flcf->upstream_status_max)
    {
        return NGX_OK;
    }

    walk.fmcf = ngx_http_get_module_main_conf(r, ngx_http_flags_module);
    walk.now = ngx_http_flags_now_sec();

    ngx_http_flags_variables_each_read(r, ngx_http_flags_upstream_flag,
                                       &walk);

    return NGX_OK;
}


static void
ngx_http_flags_upstream_flag(ngx_http_request_t *r,
    ngx_http_flags_project_t *project, ngx_http_flags_flag_t *flag,
    ngx_uint_t enabled, void *data)
{
    ngx_http_flags_upstream_walk_t *walk = data;

    fl_state_snapshot_t  s;

    if (flag->totals == NULL) {
        return;
    }

    fl_count_upstream_error(flag->totals, flag->window, walk->now, enabled);

    /* an error of the on cohort is the flag's: the decision of a report */
    if (enabled
        && ngx_http_flags_decide_rollback(walk->fmcf, flag, walk->now, &s))
    {
        ngx_http_flags_rolled_back(r, project, flag, &s);
    }
}
