/*
 * ngx_http_flags_admin.c - flags_admin: clear rollbacks, set and remove
 * overrides.  It takes no token: protect it with allow/deny, auth_basic or
 * auth_request; nginx -t warns about a location that has none of them.
 */

#include "ngx_http_flags_module.h"


typedef enum {
    NGX_HTTP_FLAGS_ADMIN_NONE = 0,      /* not a route of flags_admin */
    NGX_HTTP_FLAGS_ROLLBACKS,
    NGX_HTTP_FLAGS_OVERRIDES,
    NGX_HTTP_FLAGS_RAMPS
} ngx_http_flags_admin_kind_e;


typedef struct {
    ngx_http_flags_project_t     *project;
    ngx_http_flags_defs_t        *defs;      /* pinned: flag is of it */
    ngx_http_flags_flag_t        *flag;
    ngx_http_flags_change_t       change;
    const char                   *too_large;  /* the body's 413 message */
    u_char                        user[NGX_MAX_ERROR_STR / 4];
} ngx_http_flags_admin_ctx_t;


/* a flags_admin location, remembered at merge, checked at postconfiguration */
typedef struct {
    ngx_http_flags_loc_conf_t    *flcf;      /* the directive's file, line */
    void                        **loc_conf;  /* the location's, all modules */
} ngx_http_flags_admin_location_t;


/*
 * The access modules' location configurations are private to their .c
 * files.  These copy the members read here, as nginx 1.22 (and every
 * release since access control existed in this form) lays them out; the
 * module is built against the same nginx headers (--with-compat), so the
 * NGX_HAVE_* conditions match.  Rules are read only when their array's
 * element size matches the copy; otherwise any rule counts as protection.
 */

typedef struct {
    ngx_array_t                  *rules;     /* IPv4, and "all" */
#if (NGX_HAVE_INET6)
    ngx_array_t                  *rules6;
#endif
#if (NGX_HAVE_UNIX_DOMAIN)
    ngx_array_t                  *rules_un;
#endif
} ngx_http_flags_access_conf_t;

typedef struct {
    in_addr_t                     mask;
    in_addr_t                     addr;
    ngx_uint_t                    deny;
} ngx_http_flags_access_rule_t;

#if (NGX_HAVE_INET6)
typedef struct {
    struct in6_addr               addr;
    struct in6_addr               mask;
    ngx_uint_t                    deny;
} ngx_http_flags_access_rule6_t;
#endif

typedef struct {
    ngx_http_complex_value_t     *realm;     /* NULL: no auth_basic */
    ngx_http_complex_value_t     *user_file;
} ngx_http_flags_auth_basic_conf_t;

typedef struct {
    ngx_str_t                     uri;       /* empty: off or unset */
} ngx_http_flags_auth_request_conf_t;


/* what guards the writes of a flags_admin location */
typedef enum {
    NGX_HTTP_FLAGS_ADMIN_GUARDED = 0,
    NGX_HTTP_FLAGS_ADMIN_OPEN,               /* no access control */
    NGX_HTTP_FLAGS_ADMIN_ANY_ALLOWS_ALL      /* satisfy any + allow all */
} ngx_http_flags_admin_guard_e;


typedef struct {
    ngx_int_t                     access;    /* ctx_index, or NGX_ERROR */
    ngx_int_t                     auth_basic;
    ngx_int_t                     auth_request;
} ngx_http_flags_admin_modules_t;


/* the access modules' indexes, found at postconfiguration (the same in
 * every cycle: they are nginx's own modules) */
static ngx_http_flags_admin_modules_t  ngx_http_flags_admin_modules = {
    NGX_ERROR, NGX_ERROR, NGX_ERROR
};


static void ngx_http_flags_override_body(ngx_http_request_t *r);
static ngx_int_t ngx_http_flags_override_put(ngx_http_request_t *r);
static void ngx_http_flags_ramp_body(ngx_http_request_t *r);
static ngx_int_t ngx_http_flags_ramp_put(ngx_http_request_t *r);
static ngx_int_t ngx_http_flags_admin_body(ngx_http_request_t *r,
    ngx_str_t *body, ngx_int_t *answer);
static ngx_uint_t ngx_http_flags_admin_cross_site(ngx_http_request_t *r);
static ngx_uint_t ngx_http_flags_admin_own_origin(ngx_http_request_t *r,
    ngx_str_t *origin);
static ngx_uint_t ngx_http_flags_admin_server_name(ngx_http_request_t *r,
    ngx_str_t *name);
static ngx_uint_t ngx_http_flags_admin_local_address(ngx_http_request_t *r,
    ngx_str_t *name);
static ngx_uint_t ngx_http_flags_admin_path(ngx_http_request_t *r,
    ngx_str_t *project, ngx_str_t *flag);
static ngx_http_flags_admin_ctx_t *ngx_http_flags_admin_target(
    ngx_http_request_t *r, ngx_str_t *project_name, ngx_str_t *flag_name,
    ngx_int_t *rc);
static ngx_int_t ngx_http_flags_override_start(ngx_http_request_t *r,
    ngx_http_flags_admin_ctx_t *ctx, ngx_http_client_body_handler_pt post);
static void ngx_http_flags_admin_change(ngx_http_request_t *r,
    ngx_http_flags_admin_ctx_t *ctx);
static ngx_int_t ngx_http_flags_admin_save(ngx_http_request_t *r);
static ngx_int_t ngx_http_flags_admin_saved(ngx_http_request_t *r,
    ngx_int_t rc, u_char *err);
static ngx_uint_t ngx_http_flags_admin_allows(
    ngx_http_flags_access_conf_t *alcf);
static ngx_int_t ngx_http_flags_module_index(ngx_cycle_t *cycle,
    const char *name);
static ngx_uint_t ngx_http_flags_admin_guard(void **loc_conf,
    ngx_http_flags_admin_modules_t *m);
static void ngx_http_flags_admin_rules(ngx_http_flags_access_conf_t *alcf,
    ngx_uint_t *deny_all, ngx_uint_t *allow_all);


/*
 * {loc}rollbacks/<project>/<flag>   DELETE
 * {loc}overrides/<project>/<flag>   PUT, DELETE
 * {loc}ramps/<project>/<flag>       PUT {"action": ...}
 */

ngx_int_t
ngx_http_flags_admin_handler(ngx_http_request_t *r)
{
    ngx_int_t                    rc;
    ngx_uint_t                   kind;
    ngx_str_t                    project_name, flag_name, route;
    ngx_http_flags_admin_ctx_t  *ctx;

    static const char *const     routes[] = {
        "rollbacks/<project>/<flag>",
        "overrides/<project>/<flag>",
        "ramps/<project>/<flag>",
        NULL
    };

    if (ngx_http_flags_admin_cross_site(r)) {
        r->expect_tested = 1;
        return ngx_http_flags_send_error(r, NGX_HTTP_FORBIDDEN,
                                         "cross_origin",
                                         "a browser sent this for another "
                                         "site: flags_admin answers only "
                                         "its own origin");
    }

    /* definitions=runtime (ngx_http_flags_admin_defs.c) */
    if (ngx_http_flags_route(r, &route) == NGX_OK
        && route.len > sizeof("definitions/") - 1
        && ngx_strncmp(route.data, "definitions/",
                       sizeof("definitions/") - 1) == 0)
    {
        route.data += sizeof("definitions/") - 1;
        route.len -= sizeof("definitions/") - 1;

        return ngx_http_flags_admin_defs_handler(r, &route);
    }

    kind = ngx_http_flags_admin_path(r, &project_name, &flag_name);

    if (kind == NGX_HTTP_FLAGS_ADMIN_NONE) {
        return ngx_http_flags_route_not_found(r, routes);
    }

    if (kind == NGX_HTTP_FLAGS_ROLLBACKS) {
        if (r->method != NGX_HTTP_DELETE) {
            return ngx_http_flags_method_not_allowed(r, "DELETE");
        }

    } else if (kind == NGX_HTTP_FLAGS_RAMPS) {
        if (r->method != NGX_HTTP_PUT) {
            return ngx_http_flags_method_not_allowed(r, "PUT");
        }

    } else if (!(r->method & (NGX_HTTP_PUT|NGX_HTTP_DELETE))) {
        return ngx_http_flags_method_not_allowed(r, "PUT, DELETE");
    }

    ctx = ngx_http_flags_admin_target(r, &project_name, &flag_name, &rc);
    if (ctx == NULL) {
        return rc;
    }

    if (kind == NGX_HTTP_FLAGS_RAMPS) {
        if (ctx->flag->ramp_def == NULL) {
            r->expect_tested = 1;
            return ngx_http_flags_send_error(r, NGX_HTTP_NOT_FOUND, "no_ramp",
                                             "the flag has no ramp");
        }

        ctx->too_large = "the ramp action body is too large";
        return ngx_http_flags_override_start(r, ctx,
                                             ngx_http_flags_ramp_body);
    }

    if (r->method == NGX_HTTP_PUT) {
        ctx->too_large = "the override body is too large";
        return ngx_http_flags_override_start(r, ctx,
                                             ngx_http_flags_override_body);
    }

    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    ngx_http_flags_admin_change(r, ctx);

    if (kind == NGX_HTTP_FLAGS_ROLLBACKS) {
        if (!ngx_http_flags_control_clear(&ctx->change)) {
            return ngx_http_flags_send_empty(r, NGX_HTTP_NO_CONTENT);
        }

        return ngx_http_flags_admin_save(r);
    }

    ngx_http_flags_control_override(&ctx->change, FL_OVERRIDE_NONE, 0);

    return ngx_http_flags_admin_save(r);
}


/* {loc}rollbacks/P/F or {loc}overrides/P/F: which, and P and F. */

static ngx_uint_t
ngx_http_flags_admin_path(ngx_http_request_t *r, ngx_str_t *project,
    ngx_str_t *flag)
{
    u_char      *p, *last, *slash;
    ngx_str_t    route;
    ngx_uint_t   kind;

    /* the location is a prefix such as "/flags-admin/" */
    if (ngx_http_flags_route(r, &route) != NGX_OK) {
        return NGX_HTTP_FLAGS_ADMIN_NONE;
    }

    p = route.data;
    last = p + route.len;

    if ((size_t) (last - p) > sizeof("rollbacks/") - 1
        && ngx_strncmp(p, "rollbacks/", sizeof("rollbacks/") - 1) == 0)
    {
        kind = NGX_HTTP_FLAGS_ROLLBACKS;

    } else if ((size_t) (last - p) > sizeof("overrides/") - 1
               && ngx_strncmp(p, "overrides/", sizeof("overrides/") - 1) == 0)
    {
        kind = NGX_HTTP_FLAGS_OVERRIDES;

    } else if ((size_t) (last - p) > sizeof("ramps/") - 1
               && ngx_strncmp(p, "ramps/", sizeof("ramps/") - 1) == 0)
    {
        kind = NGX_HTTP_FLAGS_RAMPS;

    } else {
        return NGX_HTTP_FLAGS_ADMIN_NONE;
    }

    /* "rollbacks/" and "overrides/" are as long */
    p += kind == NGX_HTTP_FLAGS_RAMPS ? sizeof("ramps/") - 1
                                      : sizeof("rollbacks/") - 1;

    slash = ngx_strlchr(p, last, '/');
    if (slash == NULL || slash == p || slash + 1 == last
        || ngx_strlchr(slash + 1, last, '/') != NULL)
    {
        return NGX_HTTP_FLAGS_ADMIN_NONE;
    }

    project->data = p;
    project->len = slash - p;
    flag->data = slash + 1;
    flag->len = last - flag->data;

    return kind;
}


/* The project and flag named, with room in the zone; else NULL, with
 * what answering the error returned in *rc. */

static ngx_http_flags_admin_ctx_t *
ngx_http_flags_admin_target(ngx_http_request_t *r, ngx_str_t *project_name,
    ngx_str_t *flag_name, ngx_int_t *rc)
{
    long                         idx;
    ngx_http_flags_defs_t       *defs;
    ngx_http_flags_project_t    *project;
    ngx_http_flags_admin_ctx_t  *ctx;
    ngx_http_flags_main_conf_t  *fmcf;

    fmcf = ngx_http_get_module_main_conf(r, ngx_http_flags_module);

    project = ngx_http_flags_find_project(fmcf, project_name);
    if (project == NULL) {
        *rc = ngx_http_flags_admin_unknown(r, "unknown_project", NULL,
                                           project_name);
        return NULL;
    }

    /* kept while the body is read and the state file written */
    defs = ngx_http_flags_defs_pin(r, project);
    if (defs == NULL) {
        *rc = NGX_HTTP_INTERNAL_SERVER_ERROR;
        return NULL;
    }

    idx = fl_project_find_flag(defs->core, (const char *) flag_name->data,
                               flag_name->len);
    if (idx < 0) {
        *rc = ngx_http_flags_admin_unknown(r, "unknown_flag", project,
                                           flag_name);
        return NULL;
    }

    if (defs->flags[idx].node == NULL) {
        *rc = ngx_http_flags_send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                        "zone_full",
                                        "the flags zone had no room for "
                                        "this flag; increase flags_zone");
        return NULL;
    }

    ctx = ngx_palloc(r->pool, sizeof(ngx_http_flags_admin_ctx_t));
    if (ctx == NULL) {
        *rc = NGX_HTTP_INTERNAL_SERVER_ERROR;
        return NULL;
    }

    ctx->project = project;
    ctx->defs = defs;
    ctx->flag = &defs->flags[idx];

    return ctx;
}


/* PUT: refused before a byte is read, and without "100 Continue", when
 * the declared body is too large; else read. */

static ngx_int_t
ngx_http_flags_override_start(ngx_http_request_t *r,
    ngx_http_flags_admin_ctx_t *ctx, ngx_http_client_body_handler_pt post)
{
    ngx_http_flags_loc_conf_t  *flcf;

    flcf = ngx_http_get_module_loc_conf(r, ngx_http_flags_module);

    if (r->headers_in.content_length_n > (off_t) flcf->max_report_size) {
        return ngx_http_flags_send_error(r, NGX_HTTP_REQUEST_ENTITY_TOO_LARGE,
                                         "payload_too_large", ctx->too_large);
    }

    return ngx_http_flags_read_body(r, ctx, post);
}


/* NGX_OK: the whole body read; NGX_DONE: it was not, and *answer is
 * what answering that returned. */

static ngx_int_t
ngx_http_flags_admin_body(ngx_http_request_t *r, ngx_str_t *body,
    ngx_int_t *answer)
{
    ngx_int_t                    rc;
    ngx_http_flags_loc_conf_t   *flcf;
    ngx_http_flags_admin_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_flags_module);
    flcf = ngx_http_get_module_loc_conf(r, ngx_http_flags_module);

    rc = ngx_http_flags_body_whole(r, flcf->max_report_size, body);

    if (rc == NGX_DECLINED) {
        *answer = ngx_http_flags_send_error(r,
                                            NGX_HTTP_REQUEST_ENTITY_TOO_LARGE,
                                            "payload_too_large",
                                            ctx->too_large);
        return NGX_DONE;
    }

    if (rc != NGX_OK) {
        *answer = NGX_HTTP_INTERNAL_SERVER_ERROR;
        return NGX_DONE;
    }

    return NGX_OK;
}


static void
ngx_http_flags_ramp_body(ngx_http_request_t *r)
{
    ngx_http_finalize_request(r, ngx_http_flags_ramp_put(r));
}


/* PUT {loc}ramps/P/F: 204 once the state file holds the change (or at
 * once when nothing changed), 409 when the action does not apply. */

static ngx_int_t
ngx_http_flags_ramp_put(ngx_http_request_t *r)
{
    char                         err[256];
    ngx_int_t                    rc;
    ngx_str_t                    body;
    ngx_uint_t                   changed;
    const char                  *why;
    fl_status_t                  st;
    fl_ramp_action_t             action;
    ngx_http_flags_admin_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_flags_module);

    if (ngx_http_flags_admin_body(r, &body, &rc) != NGX_OK) {
        return rc;
    }

    st = fl_parse_ramp_action((const char *) body.data, body.len, &action,
                              err, sizeof(err));

    if (st == FL_ERR_JSON || st == FL_ERR_FIELD) {
        return ngx_http_flags_send_error(r, NGX_HTTP_BAD_REQUEST,
                                         st == FL_ERR_JSON ? "invalid_json"
                                                           : "invalid_field",
                                         err);
    }

    if (st != FL_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_http_flags_admin_change(r, ctx);

    why = "";

    if (ngx_http_flags_control_ramp_act(&ctx->change, action, &changed, &why)
        != 0)
    {
        return ngx_http_flags_send_error(r, NGX_HTTP_CONFLICT,
                                         "ramp_conflict", why);
    }

    if (!changed) {
        return ngx_http_flags_send_empty(r, NGX_HTTP_NO_CONTENT);
    }

    return ngx_http_flags_admin_save(r);
}


/*
 * 404 for a project or flag of the path that does not exist, naming it as
 * ingest does for a report's flagName: at most 128 bytes of it, never half
 * a UTF-8 sequence (the JSON writer escapes the rest).
 */

ngx_int_t
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


static void
ngx_http_flags_override_body(ngx_http_request_t *r)
{
    ngx_http_finalize_request(r, ngx_http_flags_override_put(r));
}


static ngx_int_t
ngx_http_flags_override_put(ngx_http_request_t *r)
{
    char                         err[256];
    uint32_t                     milli;
    ngx_int_t                    rc;
    ngx_str_t                    body;
    fl_status_t                  st;
    fl_override_kind_t           kind;
    ngx_http_flags_admin_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_flags_module);

    if (ngx_http_flags_admin_body(r, &body, &rc) != NGX_OK) {
        return rc;
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

    ngx_http_flags_admin_change(r, ctx);
    ngx_http_flags_control_override(&ctx->change, kind, milli);

    return ngx_http_flags_admin_save(r);
}


/*
 * The change a request makes, for the control owner
 * (ngx_http_flags_control.c): its log line is the audit record of the
 * change, what was set and who set it, as far as nginx knows:
 *
 *   flags: override set for flag "b" of project "shop": rolloutPercentage
 *   12.5, by user "alice", client: 10.0.0.7, server: ..., request: "PUT ..."
 *
 * The client address, server and request come from nginx's own context
 * of a request's log lines (ngx_http_log_error()), on every line.
 */

static void
ngx_http_flags_admin_change(ngx_http_request_t *r,
    ngx_http_flags_admin_ctx_t *ctx)
{
    ngx_http_flags_change_t  *ch;

    ch = &ctx->change;

    ngx_http_flags_change_init(ch, r, ctx->defs, ctx->flag);

    ch->by = NGX_HTTP_FLAGS_BY_ADMIN;
    ch->who.data = ctx->user;
    ch->who.len = ngx_http_flags_admin_user(r, ctx->user, sizeof(ctx->user));

    if (ch->who.len) {
        /* the event ring keeps the name as sent; its readers escape it */
        ch->who_raw = r->headers_in.user;
    }

    /* the answer waits for the state file (ngx_http_flags_admin_save()) */
    ch->batch = 1;
}


/* The answer waits, off the event loop, for the state file to hold the
 * change (ngx_http_flags_state_changed()). */

static ngx_int_t
ngx_http_flags_admin_save(ngx_http_request_t *r)
{
    ngx_http_flags_main_conf_t  *fmcf;

    fmcf = ngx_http_get_module_main_conf(r, ngx_http_flags_module);

    return ngx_http_flags_control_save(fmcf, r->connection->log, r,
                                       ngx_http_flags_admin_saved);
}


/*
 * The user auth_basic checked for r ($remote_user), escaped as in JSON, or
 * nothing.  The glue cannot see which access handlers ran, so it names a
 * user only where nginx's access phase cannot have let r in without
 * auth_basic verifying that user's password:
 *
 *   - r is a main request: nginx runs the access phase for those only (an
 *     internal redirect runs it again, in the new location);
 *   - auth_basic is on in r's location (or the limit_except block that
 *     applies to r's method): a user file, and a realm that is not "off"
 *     for this request, evaluated as auth_basic's handler evaluates it;
 *   - with "satisfy all" (the default) every access handler had to let r
 *     in, auth_basic too; with "satisfy any" one sufficed, so only when no
 *     other of nginx's access modules in the location can let anyone in
 *     (no "allow" rule, no auth_request).
 *
 * Otherwise a Basic header names a user nobody checked (auth_basic off, a
 * location without it, an address an allow rule let in): it is not
 * logged, nor kept in the event ring (issue 23).
 */

size_t
ngx_http_flags_admin_user(ngx_http_request_t *r, u_char *buf, size_t size)
{
    size_t                               len;
    ngx_str_t                            realm;
    ngx_http_core_loc_conf_t            *clcf;
    ngx_http_flags_auth_basic_conf_t    *abcf;
    ngx_http_flags_auth_request_conf_t  *arcf;

    if (r != r->main || ngx_http_flags_admin_modules.auth_basic == NGX_ERROR) {
        return 0;
    }

    abcf = r->loc_conf[ngx_http_flags_admin_modules.auth_basic];

    if (abcf == NULL || abcf->realm == NULL || abcf->user_file == NULL) {
        return 0;
    }

    if (ngx_http_complex_value(r, abcf->realm, &realm) != NGX_OK
        || (realm.len == 3 && ngx_strncmp(realm.data, "off", 3) == 0))
    {
        return 0;
    }

    clcf = ngx_http_get_module_loc_conf(r, ngx_http_core_module);

    if (clcf->satisfy == NGX_HTTP_SATISFY_ANY) {

        if (ngx_http_flags_admin_modules.access != NGX_ERROR
            && ngx_http_flags_admin_allows(
                   r->loc_conf[ngx_http_flags_admin_modules.access]))
        {
            return 0;
        }

        if (ngx_http_flags_admin_modules.auth_request != NGX_ERROR) {
            arcf = r->loc_conf[ngx_http_flags_admin_modules.auth_request];

            if (arcf && arcf->uri.len) {
                return 0;
            }
        }
    }

    if (ngx_http_auth_basic_user(r) != NGX_OK
        || r->headers_in.user.len == 0)
    {
        return 0;
    }

    /* at most 6 bytes out per byte in (\u00XX) */
    len = ngx_min(r->headers_in.user.len, size / 6);

    return (u_char *) ngx_escape_json(buf, r->headers_in.user.data, len)
           - buf;
}


/*
 * Whether the access module's rules (allow/deny) let some address in: an
 * "allow" rule of any family.  A layout other than the one copied above
 * is taken to allow.
 */

static ngx_uint_t
ngx_http_flags_admin_allows(ngx_http_flags_access_conf_t *alcf)
{
    ngx_uint_t                      i;
    ngx_http_flags_access_rule_t   *rule;
#if (NGX_HAVE_INET6)
    ngx_http_flags_access_rule6_t  *rule6;
#endif
#if (NGX_HAVE_UNIX_DOMAIN)
    ngx_uint_t                     *deny;
#endif

    if (alcf == NULL) {
        return 0;
    }

    if (alcf->rules) {
        if (alcf->rules->size != sizeof(ngx_http_flags_access_rule_t)) {
            return 1;
        }

        rule = alcf->rules->elts;

        for (i = 0; i < alcf->rules->nelts; i++) {
            if (!rule[i].deny) {
                return 1;
            }
        }
    }

#if (NGX_HAVE_INET6)

    if (alcf->rules6) {
        if (alcf->rules6->size != sizeof(ngx_http_flags_access_rule6_t)) {
            return 1;
        }

        rule6 = alcf->rules6->elts;

        for (i = 0; i < alcf->rules6->nelts; i++) {
            if (!rule6[i].deny) {
                return 1;
            }
        }
    }

#endif

#if (NGX_HAVE_UNIX_DOMAIN)

    if (alcf->rules_un) {
        /* a rule of unix: sockets is its "deny" alone */
        if (alcf->rules_un->size != sizeof(ngx_uint_t)) {
            return 1;
        }

        deny = alcf->rules_un->elts;

        for (i = 0; i < alcf->rules_un->nelts; i++) {
            if (!deny[i]) {
                return 1;
            }
        }
    }

#endif

    return 0;
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


/*
 * nginx -t: a flags_admin location that nothing guards is a warning (not
 * an error: a listener only a trusted network reaches is a choice nginx
 * cannot see).  The check runs here, after every module merged its
 * location configurations, so inherited directives are seen.
 */

ngx_int_t
ngx_http_flags_admin_location(ngx_conf_t *cf, ngx_http_flags_loc_conf_t *flcf)
{
    ngx_http_server_name_t           *sn;
    ngx_http_core_loc_conf_t         *clcf;
    ngx_http_core_srv_conf_t         *cscf;
    ngx_http_flags_main_conf_t       *fmcf;
    ngx_http_flags_admin_location_t  *loc;

    fmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_flags_module);
    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);

    if (fmcf->admin_locations == NULL) {
        fmcf->admin_locations = ngx_array_create(cf->pool, 2,
                                    sizeof(ngx_http_flags_admin_location_t));
        if (fmcf->admin_locations == NULL) {
            return NGX_ERROR;
        }
    }

    loc = ngx_array_push(fmcf->admin_locations);
    if (loc == NULL) {
        return NGX_ERROR;
    }

    loc->flcf = flcf;
    loc->loc_conf = clcf->loc_conf;

    /* the own-origin check (ngx_http_flags_admin_server_name()) reads
     * the server's names at request time: copied into the cycle's pool */
    cscf = ngx_http_conf_get_module_srv_conf(cf, ngx_http_core_module);

    flcf->admin_names = ngx_array_create(cf->pool,
                                         cscf->server_names.nelts
                                         ? cscf->server_names.nelts : 1,
                                         sizeof(ngx_http_server_name_t));
    if (flcf->admin_names == NULL) {
        return NGX_ERROR;
    }

    sn = ngx_array_push_n(flcf->admin_names, cscf->server_names.nelts);
    if (sn == NULL && cscf->server_names.nelts) {
        return NGX_ERROR;
    }

    if (cscf->server_names.nelts) {
        ngx_memcpy(sn, cscf->server_names.elts,
                   cscf->server_names.nelts * sizeof(ngx_http_server_name_t));
    }

    return NGX_OK;
}


ngx_int_t
ngx_http_flags_admin_check(ngx_conf_t *cf)
{
    void                            **lc, **put, **del;
    ngx_uint_t                        i, guard, g;
    ngx_http_core_loc_conf_t         *clcf;
    ngx_http_flags_main_conf_t       *fmcf;
    ngx_http_flags_admin_modules_t    m;
    ngx_http_flags_admin_location_t  *loc;

    fmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_flags_module);

    m.access = ngx_http_flags_module_index(cf->cycle,
                                           "ngx_http_access_module");
    m.auth_basic = ngx_http_flags_module_index(cf->cycle,
                                               "ngx_http_auth_basic_module");
    m.auth_request = ngx_http_flags_module_index(cf->cycle,
                                             "ngx_http_auth_request_module");

    fmcf->auth_basic_index = m.auth_basic;
    ngx_http_flags_admin_modules = m;

    if (fmcf->admin_locations == NULL) {
        return NGX_OK;
    }

    loc = fmcf->admin_locations->elts;

    for (i = 0; i < fmcf->admin_locations->nelts; i++) {
        lc = loc[i].loc_conf;
        clcf = lc[ngx_http_core_module.ctx_index];

        /* every change is a PUT or a DELETE: "limit_except GET { ... }"
         * puts both under the rules of its block */
        put = (clcf->limit_except & NGX_HTTP_PUT)
              ? clcf->limit_except_loc_conf : lc;
        del = (clcf->limit_except & NGX_HTTP_DELETE)
              ? clcf->limit_except_loc_conf : lc;

        guard = ngx_http_flags_admin_guard(put, &m);
        g = ngx_http_flags_admin_guard(del, &m);

        /* the weaker of the two */
        if (g == NGX_HTTP_FLAGS_ADMIN_OPEN
            || guard == NGX_HTTP_FLAGS_ADMIN_GUARDED)
        {
            guard = g;
        }

        if (guard == NGX_HTTP_FLAGS_ADMIN_OPEN) {
            ngx_log_error(NGX_LOG_WARN, cf->log, 0,
                          "flags_admin in %V:%ui has no access control "
                          "(allow/deny, auth_basic, auth_request): anyone "
                          "who reaches it can clear rollbacks and set "
                          "overrides",
                          &loc[i].flcf->handler_file,
                          loc[i].flcf->handler_line);

        } else if (guard == NGX_HTTP_FLAGS_ADMIN_ANY_ALLOWS_ALL) {
            ngx_log_error(NGX_LOG_WARN, cf->log, 0,
                          "flags_admin in %V:%ui has \"satisfy any\" and an "
                          "\"allow\" for every address: anyone who reaches "
                          "it can clear rollbacks and set overrides",
                          &loc[i].flcf->handler_file,
                          loc[i].flcf->handler_line);
        }
    }

    return NGX_OK;
}


/* the ctx_index of an http module by name; NGX_ERROR when not built in */

static ngx_int_t
ngx_http_flags_module_index(ngx_cycle_t *cycle, const char *name)
{
    ngx_uint_t  i;

    for (i = 0; cycle->modules[i]; i++) {
        if (cycle->modules[i]->type == NGX_HTTP_MODULE
            && cycle->modules[i]->name
            && ngx_strcmp(cycle->modules[i]->name, name) == 0)
        {
            return cycle->modules[i]->ctx_index;
        }
    }

    return NGX_ERROR;
}


/*
 * What protects requests under one set of location configurations
 * (docs/http-api.md, "What nginx -t counts as protection"):
 *
 *   - allow/deny: a "deny all" (a deny of every IPv4 address) that no
 *     "allow all" comes before; allow rules alone, or denies of some
 *     addresses, let everyone else in;
 *   - auth_basic with a realm other than "off" and a user file;
 *   - auth_request with a URI ("off" is none).
 *
 * With "satisfy any" one of them suffices, so an allow of every address
 * opens the location whatever else is there.
 */

static ngx_uint_t
ngx_http_flags_admin_guard(void **loc_conf, ngx_http_flags_admin_modules_t *m)
{
    ngx_uint_t                           guarded, deny_all, allow_all;
    ngx_http_complex_value_t            *realm;
    ngx_http_core_loc_conf_t            *clcf;
    ngx_http_flags_access_conf_t        *alcf;
    ngx_http_flags_auth_basic_conf_t    *abcf;
    ngx_http_flags_auth_request_conf_t  *arcf;

    guarded = 0;
    allow_all = 0;

    if (m->access != NGX_ERROR && loc_conf[m->access]) {
        alcf = loc_conf[m->access];
        deny_all = 0;

        ngx_http_flags_admin_rules(alcf, &deny_all, &allow_all);

        guarded |= deny_all;
    }

    if (m->auth_basic != NGX_ERROR && loc_conf[m->auth_basic]) {
        abcf = loc_conf[m->auth_basic];
        realm = abcf->realm;

        if (realm && abcf->user_file
            && !(realm->lengths == NULL && realm->value.len == 3
                 && ngx_strncmp(realm->value.data, "off", 3) == 0))
        {
            guarded = 1;
        }
    }

    if (m->auth_request != NGX_ERROR && loc_conf[m->auth_request]) {
        arcf = loc_conf[m->auth_request];

        if (arcf->uri.len) {
            guarded = 1;
        }
    }

    if (!guarded) {
        return NGX_HTTP_FLAGS_ADMIN_OPEN;
    }

    clcf = loc_conf[ngx_http_core_module.ctx_index];

    if (clcf->satisfy == NGX_HTTP_SATISFY_ANY && allow_all) {
        return NGX_HTTP_FLAGS_ADMIN_ANY_ALLOWS_ALL;
    }

    return NGX_HTTP_FLAGS_ADMIN_GUARDED;
}


/*
 * Rules are tried in order and the first that matches decides, so only
 * the first rule matching every address ("all", a /0) matters of those
 * after it: a deny there refuses whoever no earlier allow named, an allow
 * there lets everyone in.
 */

static void
ngx_http_flags_admin_rules(ngx_http_flags_access_conf_t *alcf,
    ngx_uint_t *deny_all, ngx_uint_t *allow_all)
{
    ngx_uint_t                      i;
    ngx_http_flags_access_rule_t   *rule;
#if (NGX_HAVE_INET6)
    ngx_uint_t                      n;
    ngx_http_flags_access_rule6_t  *rule6;
#endif

    if (alcf->rules) {
        if (alcf->rules->size != sizeof(ngx_http_flags_access_rule_t)) {
            /* not the layout copied above: count the rules as protection */
            *deny_all = 1;
            return;
        }

        rule = alcf->rules->elts;

        for (i = 0; i < alcf->rules->nelts; i++) {
            if (rule[i].mask == 0) {
                if (rule[i].deny) {
                    *deny_all = 1;

                } else {
                    *allow_all = 1;
                }

                break;
            }
        }
    }

#if (NGX_HAVE_INET6)

    if (alcf->rules6
        && alcf->rules6->size == sizeof(ngx_http_flags_access_rule6_t))
    {
        rule6 = alcf->rules6->elts;

        for (i = 0; i < alcf->rules6->nelts; i++) {
            for (n = 0; n < 16; n++) {
                if (rule6[i].mask.s6_addr[n]) {
                    break;
                }
            }

            if (n == 16) {
                if (!rule6[i].deny) {
                    *allow_all = 1;
                }

                break;
            }
        }
    }

#endif
}


/*
 * A browser's request made for another site (docs/dashboard.md): an
 * Origin that is not the server's own, or Sec-Fetch-Site saying
 * "cross-site" or "same-site".  Programs (curl) send neither.
 */

static ngx_uint_t
ngx_http_flags_admin_cross_site(ngx_http_request_t *r)
{
    ngx_uint_t        i;
    ngx_list_part_t  *part;
    ngx_table_elt_t  *h;

    part = &r->headers_in.headers.part;
    h = part->elts;

    for (i = 0; /* void */; i++) {

        if (i >= part->nelts) {
            if (part->next == NULL) {
                break;
            }

            part = part->next;
            h = part->elts;
            i = 0;
        }

        if (h[i].key.len == sizeof("Sec-Fetch-Site") - 1
            && ngx_strncasecmp(h[i].key.data, (u_char *) "Sec-Fetch-Site",
                               h[i].key.len) == 0)
        {
            if ((h[i].value.len == 10
                 && ngx_strncasecmp(h[i].value.data, (u_char *) "cross-site",
                                    10) == 0)
                || (h[i].value.len == 9
                    && ngx_strncasecmp(h[i].value.data,
                                       (u_char *) "same-site", 9) == 0))
            {
                return 1;
            }

            continue;
        }

        if (h[i].key.len == sizeof("Origin") - 1
            && ngx_strncasecmp(h[i].key.data, (u_char *) "Origin",
                               h[i].key.len) == 0
            && !ngx_http_flags_admin_own_origin(r, &h[i].value))
        {
            return 1;
        }
    }

    return 0;
}


/*
 * Whether an Origin (scheme://host[:port]) is the server's own: its
 * host[:port] is the Host the request was sent to, as a page of the
 * same origin sends it, and that host is one of the server's names.  The
 * first alone is what a DNS-rebinding page satisfies: its own name points
 * to the server, so its requests carry its name as Host and Origin both.
 * The server's names are those of the virtual server that took the
 * request (server_name: exact, wildcard and regular expression names),
 * and the address the connection arrived at (a page loaded from
 * http://127.0.0.1:8080/ is the server's own).
 */

static ngx_uint_t
ngx_http_flags_admin_own_origin(ngx_http_request_t *r, ngx_str_t *origin)
{
    u_char     *p, *last, *colon;
    ngx_str_t  *host, name;

    p = ngx_strlcasestrn(origin->data, origin->data + origin->len,
                         (u_char *) "//", 2 - 1);
    if (p == NULL) {
        return 0;               /* "null" and other opaque origins */
    }

    p += 2;
    last = origin->data + origin->len;

    host = r->headers_in.host ? &r->headers_in.host->value : NULL;

    if (host == NULL || (size_t) (last - p) != host->len
        || ngx_strncasecmp(p, host->data, host->len) != 0)
    {
        return 0;
    }

    /* the name: without the port, an IPv6 address without its brackets */
    if (p < last && *p == '[') {
        colon = ngx_strlchr(p, last, ']');
        if (colon == NULL) {
            return 0;
        }

        name.data = p + 1;
        name.len = colon - name.data;

    } else {
        colon = ngx_strlchr(p, last, ':');

        name.data = p;
        name.len = (colon ? colon : last) - p;
    }

    if (name.len == 0) {
        return 0;
    }

    return ngx_http_flags_admin_server_name(r, &name)
           || ngx_http_flags_admin_local_address(r, &name);
}


/* Whether name is one of the server_name names of r's virtual server. */

static ngx_uint_t
ngx_http_flags_admin_server_name(ngx_http_request_t *r, ngx_str_t *name)
{
    size_t                      len;
    ngx_uint_t                  i;
    ngx_http_server_name_t     *sn;
    ngx_http_flags_loc_conf_t  *flcf;

    flcf = ngx_http_get_module_loc_conf(r, ngx_http_flags_module);

    if (flcf->admin_names == NULL) {
        return 0;
    }

    sn = flcf->admin_names->elts;

    for (i = 0; i < flcf->admin_names->nelts; i++) {

#if (NGX_PCRE)
        if (sn[i].regex) {
            if (ngx_regex_exec(sn[i].regex->regex, name, NULL, 0) >= 0) {
                return 1;
            }

            continue;
        }
#endif

        len = sn[i].name.len;

        if (len == 0) {
            continue;
        }

        if (sn[i].name.data[0] == '*' || sn[i].name.data[0] == '.') {
            /* "*.example.com": a name below it; ".example.com": that
             * too, and example.com itself */
            if (sn[i].name.data[0] == '.'
                && name->len == len - 1
                && ngx_strncasecmp(name->data, sn[i].name.data + 1,
                                   len - 1) == 0)
            {
                return 1;
            }

            len -= (sn[i].name.data[0] == '*');

            if (name->len > len
                && ngx_strncasecmp(name->data + name->len - len,
                                   sn[i].name.data
                                   + (sn[i].name.data[0] == '*'),
                                   len) == 0)
            {
                return 1;
            }

            continue;
        }

        if (len > 2 && sn[i].name.data[len - 1] == '*'
            && sn[i].name.data[len - 2] == '.')
        {
            /* "www.example.*" */
            if (name->len > len - 1
                && ngx_strncasecmp(name->data, sn[i].name.data, len - 1)
                   == 0)
            {
                return 1;
            }

            continue;
        }

        if (name->len == len
            && ngx_strncasecmp(name->data, sn[i].name.data, len) == 0)
        {
            return 1;
        }
    }

    return 0;
}


/* Whether name is the address r's connection arrived at. */

static ngx_uint_t
ngx_http_flags_admin_local_address(ngx_http_request_t *r, ngx_str_t *name)
{
    u_char     buf[NGX_SOCKADDR_STRLEN];
    ngx_str_t  addr;

    addr.data = buf;
    addr.len = NGX_SOCKADDR_STRLEN;

    if (ngx_connection_local_sockaddr(r->connection, &addr, 0) != NGX_OK) {
        return 0;
    }

    return name->len == addr.len
           && ngx_strncasecmp(name->data, addr.data, addr.len) == 0;
}
