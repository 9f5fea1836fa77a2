/*
 * ngx_http_flags_upstream.c - upstream errors roll back (docs/variables.md).
 *
 *   flags_upstream_errors on | off [status=500-599] [flags=NAME[,NAME...]];
 *
 * At the log phase of a main request whose location has it on and whose
 * status is in the range, each flag the location holds accountable counts
 * an upstream error: an error of the flag (reports' totals and window, so
 * the rollback decision runs as after an accepted report) and of its on
 * cohort when the flag was on for the request, only of its off cohort
 * when it was off.  Accountable are the flags of flags= that the request
 * read (by $flag_NAME or $flags_enabled), or without flags= the flags it
 * read by their own $flag_NAME: reading $flags_enabled to pass the list
 * along makes no flag accountable.
 */

#include "ngx_http_flags_module.h"


typedef struct {
    ngx_http_flags_main_conf_t  *fmcf;
    ngx_array_t                 *names;      /* flags=, or NULL */
    ngx_str_t                   *addr;       /* $remote_addr */
} ngx_http_flags_upstream_walk_t;


/* a flags= list, checked against the projects at postconfiguration */
typedef struct {
    ngx_array_t                 *names;      /* of ngx_str_t */
    ngx_str_t                    file;
    ngx_uint_t                   line;
} ngx_http_flags_upstream_list_t;


static ngx_int_t ngx_http_flags_upstream_log(ngx_http_request_t *r);
static ngx_int_t ngx_http_flags_upstream_check(ngx_conf_t *cf);
static void ngx_http_flags_upstream_flag(ngx_http_request_t *r,
    ngx_http_flags_defs_t *defs, ngx_http_flags_flag_t *flag,
    ngx_uint_t enabled, ngx_uint_t named, const fl_user_t *user, void *data);
static char *ngx_http_flags_upstream_names(ngx_conf_t *cf,
    ngx_http_flags_loc_conf_t *flcf, ngx_str_t *value);


/* flags_upstream_errors on | off [status=N-M | status=N] [flags=A,B]; */

char *
ngx_http_flags_upstream_errors(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_flags_loc_conf_t *flcf = conf;

    u_char      *dash;
    ngx_int_t    lo, hi;
    ngx_str_t   *value, st;
    ngx_uint_t   i, status;

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
    status = 0;

    for (i = 2; i < cf->args->nelts; i++) {

        if (value[i].len > sizeof("flags=") - 1
            && ngx_strncmp(value[i].data, "flags=", sizeof("flags=") - 1)
               == 0
            && flcf->upstream_flags == NULL)
        {
            if (ngx_http_flags_upstream_names(cf, flcf, &value[i])
                != NGX_CONF_OK)
            {
                return NGX_CONF_ERROR;
            }

            continue;
        }

        if (value[i].len <= sizeof("status=") - 1
            || ngx_strncmp(value[i].data, "status=", sizeof("status=") - 1)
               != 0
            || status)
        {
            goto invalid;
        }

        status = 1;
        st.data = value[i].data + sizeof("status=") - 1;
        st.len = value[i].len - (sizeof("status=") - 1);

        dash = ngx_strlchr(st.data, st.data + st.len, '-');

        if (dash == NULL) {
            lo = ngx_atoi(st.data, st.len);
            hi = lo;

        } else {
            lo = ngx_atoi(st.data, dash - st.data);
            hi = ngx_atoi(dash + 1, st.data + st.len - dash - 1);
        }

        if (lo == NGX_ERROR || hi == NGX_ERROR
            || lo < 100 || hi > 599 || lo > hi)
        {
            goto invalid;
        }
    }

    flcf->upstream_status_min = lo;
    flcf->upstream_status_max = hi;

    return NGX_CONF_OK;

invalid:

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "invalid parameter \"%V\" in flags_upstream_errors, "
                       "expected status=N-M with 100 <= N <= M <= 599 or "
                       "flags=NAME[,NAME...], each once", &value[i]);
    return NGX_CONF_ERROR;
}


/* flags=A,B,C: the names, kept for the check at postconfiguration */

static char *
ngx_http_flags_upstream_names(ngx_conf_t *cf, ngx_http_flags_loc_conf_t *flcf,
    ngx_str_t *value)
{
    u_char                          *p, *last, *comma;
    ngx_str_t                       *name;
    ngx_http_flags_main_conf_t      *fmcf;
    ngx_http_flags_upstream_list_t  *list;

    fmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_flags_module);

    flcf->upstream_flags = ngx_array_create(cf->pool, 4, sizeof(ngx_str_t));
    if (flcf->upstream_flags == NULL) {
        return NGX_CONF_ERROR;
    }

    p = value->data + sizeof("flags=") - 1;
    last = value->data + value->len;

    while (p <= last) {
        comma = ngx_strlchr(p, last, ',');
        if (comma == NULL) {
            comma = last;
        }

        if (comma == p) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid parameter \"%V\" in "
                               "flags_upstream_errors: an empty flag name",
                               value);
            return NGX_CONF_ERROR;
        }

        name = ngx_array_push(flcf->upstream_flags);
        if (name == NULL) {
            return NGX_CONF_ERROR;
        }

        name->data = p;
        name->len = comma - p;
        p = comma + 1;
    }

    if (fmcf->upstream_lists == NULL) {
        fmcf->upstream_lists = ngx_array_create(cf->pool, 4,
                                    sizeof(ngx_http_flags_upstream_list_t));
        if (fmcf->upstream_lists == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    list = ngx_array_push(fmcf->upstream_lists);
    if (list == NULL) {
        return NGX_CONF_ERROR;
    }

    list->names = flcf->upstream_flags;
    list->file = cf->conf_file->file.name;
    list->line = cf->conf_file->line;

    return NGX_CONF_OK;
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

    return ngx_http_flags_upstream_check(cf);
}


/* Every name of a flags= list is a flag of some project: nginx -t names
 * the file, the line and the flag of a typo. */

static ngx_int_t
ngx_http_flags_upstream_check(ngx_conf_t *cf)
{
    ngx_str_t                       *name;
    ngx_uint_t                       i, j, k, found;
    ngx_http_flags_project_t        *project;
    ngx_http_flags_main_conf_t      *fmcf;
    ngx_http_flags_upstream_list_t  *list;

    fmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_flags_module);

    if (fmcf->upstream_lists == NULL) {
        return NGX_OK;
    }

    list = fmcf->upstream_lists->elts;
    project = fmcf->projects.elts;

    for (i = 0; i < fmcf->upstream_lists->nelts; i++) {
        name = list[i].names->elts;

        for (j = 0; j < list[i].names->nelts; j++) {
            found = 0;

            for (k = 0; k < fmcf->projects.nelts && !found; k++) {
                found = fl_project_find_flag(
                            ngx_http_flags_defs(&project[k])->core,
                                             (const char *) name[j].data,
                                             name[j].len)
                        >= 0;
            }

            if (!found) {
                ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                              "flags_upstream_errors names flag \"%V\", "
                              "which no flags_project has, in %V:%ui",
                              &name[j], &list[i].file, list[i].line);
                return NGX_ERROR;
            }
        }
    }

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
    walk.names = flcf->upstream_flags;
    walk.addr = &r->connection->addr_text;

    ngx_http_flags_variables_each_read(r, ngx_http_flags_upstream_flag,
                                       &walk);

    return NGX_OK;
}


static void
ngx_http_flags_upstream_flag(ngx_http_request_t *r,
    ngx_http_flags_defs_t *defs, ngx_http_flags_flag_t *flag,
    ngx_uint_t enabled, ngx_uint_t named, const fl_user_t *user, void *data)
{
    ngx_http_flags_upstream_walk_t *walk = data;

    ngx_str_t                *name;
    ngx_uint_t                i;
    ngx_http_flags_change_t   ch;
    ngx_http_flags_failure_t  failure;

    if (flag->totals == NULL) {
        return;
    }

    if (walk->names == NULL) {
        if (!named) {
            return;
        }

    } else {
        name = walk->names->elts;

        for (i = 0; i < walk->names->nelts; i++) {
            if (name[i].len == flag->name.len
                && ngx_memcmp(name[i].data, flag->name.data, name[i].len)
                   == 0)
            {
                break;
            }
        }

        if (i == walk->names->nelts) {
            return;
        }
    }

    /* an upstream error is nginx's own observation: its source and its
     * witness are the context's user, else the client */
    ngx_memzero(&failure, sizeof(ngx_http_flags_failure_t));
    failure.enabled = enabled;
    failure.upstream = 1;
    failure.source = fl_source_key(user->user_id, user->user_id_len,
                                   (const char *) walk->addr->data,
                                   walk->addr->len);
    failure.witness = failure.source;

    ngx_http_flags_change_init(&ch, r, defs, flag);

    (void) ngx_http_flags_control_failure(&ch, &failure);
}
