/*
 * ngx_http_flags_admin.c - flags_admin: clear rollbacks, set and remove
 * overrides.  It takes no token: protect it with allow/deny or auth_basic.
 */

#include "ngx_http_flags_module.h"


typedef enum {
    NGX_HTTP_FLAGS_ROLLBACKS = 0,
    NGX_HTTP_FLAGS_OVERRIDES
} ngx_http_flags_admin_kind_e;


typedef struct {
    ngx_http_flags_project_t     *project;
    ngx_http_flags_flag_t        *flag;
} ngx_http_flags_admin_ctx_t;


static void ngx_http_flags_override_body(ngx_http_request_t *r);
static ngx_int_t ngx_http_flags_copy_piece(void *ctx, u_char *p,
    size_t len);
static ngx_int_t ngx_http_flags_override_put(ngx_http_request_t *r);
static ngx_int_t ngx_http_flags_admin_done(ngx_http_request_t *r,
    ngx_http_flags_admin_ctx_t *ctx, const char *what);
static ngx_int_t ngx_http_flags_admin_saved(ngx_http_request_t *r,
    ngx_int_t rc, u_char *err);
static ngx_int_t ngx_http_flags_admin_unknown(ngx_http_request_t *r,
    const char *code, ngx_http_flags_project_t *project, ngx_str_t *name);


/*
 * {loc}rollbacks/<project>/<flag>   DELETE
 * {loc}overrides/<project>/<flag>   PUT, DELETE
 */

ngx_int_t
ngx_http_flags_admin_handler(ngx_http_request_t *r)
{
    u_char                      *p, *last, *slash;
    long                         idx;
    ngx_int_t                    rc;
    ngx_str_t                    project_name, flag_name;
    ngx_uint_t                   kind;
    ngx_http_core_loc_conf_t    *clcf;
    ngx_http_flags_loc_conf_t   *flcf;
    ngx_http_flags_main_conf_t  *fmcf;
    ngx_http_flags_admin_ctx_t  *ctx;
    ngx_http_flags_project_t    *project;

    clcf = ngx_http_get_module_loc_conf(r, ngx_http_core_module);

    p = r->uri.data;
    last = p + r->uri.len;

    /* the location is a prefix such as "/flags-admin/" */
    if (r->uri.len < clcf->name.len
        || ngx_strncmp(p, clcf->name.data, clcf->name.len) != 0)
    {
        goto not_found;
    }

    p += clcf->name.len;

    if (p < last && *p == '/') {
        p++;
    }

    if ((size_t) (last - p) > sizeof("rollbacks/") - 1
        && ngx_strncmp(p, "rollbacks/", sizeof("rollbacks/") - 1) == 0)
    {
        kind = NGX_HTTP_FLAGS_ROLLBACKS;

    } else if ((size_t) (last - p) > sizeof("overrides/") - 1
               && ngx_strncmp(p, "overrides/", sizeof("overrides/") - 1) == 0)
    {
        kind = NGX_HTTP_FLAGS_OVERRIDES;

    } else {
        goto not_found;
    }

    p += sizeof("rollbacks/") - 1;

    slash = ngx_strlchr(p, last, '/');
    if (slash == NULL || slash == p || slash + 1 == last
        || ngx_strlchr(slash + 1, last, '/') != NULL)
    {
        goto not_found;
    }

    if (kind == NGX_HTTP_FLAGS_ROLLBACKS) {
        if (r->method != NGX_HTTP_DELETE) {
            return ngx_http_flags_method_not_allowed(r, "DELETE");
        }

    } else if (!(r->method & (NGX_HTTP_PUT|NGX_HTTP_DELETE))) {
        return ngx_http_flags_method_not_allowed(r, "PUT, DELETE");
    }

    project_name.data = p;
    project_name.len = slash - p;
    flag_name.data = slash + 1;
    flag_name.len = last - flag_name.data;

    fmcf = ngx_http_get_module_main_conf(r, ngx_http_flags_module);

    project = ngx_http_flags_find_project(fmcf, &project_name);
    if (project == NULL) {
        return ngx_http_flags_admin_unknown(r, "unknown_project", NULL,
                                            &project_name);
    }

    idx = fl_project_find_flag(project->core, (const char *) flag_name.data,
                               flag_name.len);
    if (idx < 0) {
        return ngx_http_flags_admin_unknown(r, "unknown_flag", project,
                                            &flag_name);
    }

    if (project->flags[idx].node == NULL) {
        return ngx_http_flags_send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                         "zone_full",
                                         "the flags zone had no room for "
                                         "this flag; increase flags_zone");
    }

    ctx = ngx_palloc(r->pool, sizeof(ngx_http_flags_admin_ctx_t));
    if (ctx == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx->project = project;
    ctx->flag = &project->flags[idx];
    ngx_http_set_ctx(r, ctx, ngx_http_flags_module);

    if (r->method == NGX_HTTP_PUT) {
        flcf = ngx_http_get_module_loc_conf(r, ngx_http_flags_module);

        /* refused before a byte is read, and without "100 Continue" */
        if (r->headers_in.content_length_n > (off_t) flcf->max_report_size) {
            return ngx_http_flags_send_error(r,
                                         NGX_HTTP_REQUEST_ENTITY_TOO_LARGE,
                                         "payload_too_large",
                                         "the override body is too large");
        }

        rc = ngx_http_read_client_request_body(r,
                                               ngx_http_flags_override_body);
        if (rc >= NGX_HTTP_SPECIAL_RESPONSE) {
            return rc;
        }

        return NGX_DONE;
    }

    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    if (kind == NGX_HTTP_FLAGS_ROLLBACKS) {
        if (!ngx_http_flags_clear_rollback(fmcf, ctx->flag)) {
            return ngx_http_flags_send_empty(r, NGX_HTTP_NO_CONTENT);
        }

        return ngx_http_flags_admin_done(r, ctx, "rollback cleared");
    }

    ngx_http_flags_set_override(ctx->flag, FL_OVERRIDE_NONE, 0);

    return ngx_http_flags_admin_done(r, ctx, "override removed");

not_found:

    return ngx_http_flags_route_not_found(r, "rollbacks/<project>/<flag>",
                                          "overrides/<project>/<flag>");
}


/*
 * 404 for a project or flag of the path that does not exist, naming it as
 * ingest does for a report's flagName: at most 128 bytes of it, never half
 * a UTF-8 sequence (the JSON writer escapes the rest).
 */

static ngx_int_t
ngx_http_flags_admin_unknown(ngx_http_request_t *r, const char *code,
    ngx_http_flags_project_t *project, ngx_str_t *name)
{
    u_char  *p, msg[512];
    size_t   len;

    /* final before the body is read: no "100 Continue" */
    r->expect_tested = 1;

    len = fl_utf8_prefix((const char *) name->data, name->len,
                         FL_MAX_FLAG_NAME_LEN);

    if (project) {
        p = ngx_snprintf(msg, sizeof(msg),
                         "project \"%V\" has no flag \"%*s\"",
                         &project->name, len, name->data);

    } else {
        p = ngx_snprintf(msg, sizeof(msg), "there is no project \"%*s\"",
                         len, name->data);
    }

    return ngx_http_flags_send_error_len(r, NGX_HTTP_NOT_FOUND, code, msg,
                                         p - msg);
}


static ngx_int_t
ngx_http_flags_copy_piece(void *ctx, u_char *p, size_t len)
{
    ngx_str_t  *body = ctx;

    body->len = ngx_cpymem(body->data + body->len, p, len) - body->data;

    return NGX_OK;
}


static void
ngx_http_flags_override_body(ngx_http_request_t *r)
{
    ngx_http_finalize_request(r, ngx_http_flags_override_put(r));
}


static ngx_int_t
ngx_http_flags_override_put(ngx_http_request_t *r)
{
    char                         err[256];
    off_t                        size;
    uint32_t                     milli;
    ngx_str_t                    body;
    fl_status_t                  st;
    fl_override_kind_t           kind;
    ngx_http_flags_loc_conf_t   *flcf;
    ngx_http_flags_admin_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_flags_module);
    flcf = ngx_http_get_module_loc_conf(r, ngx_http_flags_module);

    size = ngx_http_flags_body_size(r);

    if (size > (off_t) flcf->max_report_size) {
        return ngx_http_flags_send_error(r, NGX_HTTP_REQUEST_ENTITY_TOO_LARGE,
                                         "payload_too_large",
                                         "the override body is too large");
    }

    body.data = ngx_pnalloc(r->pool, (size_t) size + 1);
    if (body.data == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    body.len = 0;

    if (ngx_http_flags_body_pieces(r, ngx_http_flags_copy_piece, &body)
        != NGX_OK)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    st = fl_parse_override((const char *) body.data, body.len, &kind, &milli,
                           err, sizeof(err));

    if (st == FL_ERR_JSON) {
        return ngx_http_flags_send_error(r, NGX_HTTP_BAD_REQUEST,
                                         "invalid_json", err);
    }

    if (st == FL_ERR_FIELD) {
        return ngx_http_flags_send_error(r, NGX_HTTP_BAD_REQUEST,
                                         "invalid_field", err);
    }

    if (st != FL_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_http_flags_set_override(ctx->flag, kind, milli);

    return ngx_http_flags_admin_done(r, ctx, "override set");
}


/*
 * A change is in the zone (every worker sees it): log it, save it, and
 * say so.  The answer waits, off the event loop, for the state file to
 * hold the change (ngx_http_flags_state_changed()).
 */

static ngx_int_t
ngx_http_flags_admin_done(ngx_http_request_t *r,
    ngx_http_flags_admin_ctx_t *ctx, const char *what)
{
    ngx_http_flags_loc_conf_t   *flcf;
    ngx_http_flags_main_conf_t  *fmcf;

    flcf = ngx_http_get_module_loc_conf(r, ngx_http_flags_module);
    fmcf = ngx_http_get_module_main_conf(r, ngx_http_flags_module);

    /* push clients of the project learn it (docs/push.md) */
    ngx_http_flags_changed(ctx->project);

    ngx_log_error(flcf->log_level, r->connection->log, 0,
                  "flags: %s for flag \"%V\" of project \"%V\"",
                  what, &ctx->flag->name, &ctx->project->name);

    return ngx_http_flags_state_changed(fmcf, r->connection->log, r,
                                        ngx_http_flags_admin_saved);
}


/*
 * A change that could not be saved stays in effect (a kill switch thrown
 * during an incident must not be undone by a full disk), but is not
 * answered 204: it would be lost at the next restart.
 */

static ngx_int_t
ngx_http_flags_admin_saved(ngx_http_request_t *r, ngx_int_t rc, u_char *err)
{
    u_char  msg[512];

    if (rc == NGX_ERROR) {
        ngx_snprintf(msg, sizeof(msg) - 1, "the change is in effect on every "
                     "worker but was not saved to flags_state_file, so a "
                     "restart would lose it: %s%Z", err);
        msg[sizeof(msg) - 1] = '\0';

        return ngx_http_flags_send_error(r, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                         "state_not_saved", (char *) msg);
    }

    return ngx_http_flags_send_empty(r, NGX_HTTP_NO_CONTENT);
}
