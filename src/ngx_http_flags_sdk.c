/*
 * ngx_http_flags_sdk.c - flags_sdk: the API the DeployRamp SDKs call, in a
 * prefix location such as "location /api/sdk/ { flags_sdk; }"
 * (docs/sdk.md).
 *
 *   POST {loc}flags    the flags for the body's user, resolved by the core
 *                      (sdk.cpp), evaluated and counted as GET /flags is
 *   POST {loc}report   an error report: POST /ingest/errors's own path
 *
 * An exact location ("location = /api/sdk/report") serves the route its
 * URI ends with, so each route can have directives of its own (limit_req
 * on reports).
 *
 * Checks: the token, then the route (404 not_found), then the method (405,
 * Allow: POST), then what each route checks.
 */

#include "ngx_http_flags_module.h"


typedef struct {
    ngx_http_flags_project_t   *project;
} ngx_http_flags_sdk_ctx_t;


static void ngx_http_flags_sdk_body(ngx_http_request_t *r);
static ngx_int_t ngx_http_flags_sdk_flags(ngx_http_request_t *r);


ngx_int_t
ngx_http_flags_sdk_handler(ngx_http_request_t *r)
{
    u_char                     *p;
    size_t                      len;
    ngx_int_t                   rc;
    ngx_str_t                   route;
    ngx_http_flags_sdk_ctx_t   *ctx;
    ngx_http_flags_project_t   *project;

    static const char *const    routes[] = { "flags", "report", NULL };

    /* the token is checked before anything else (docs/http-api.md) */
    rc = ngx_http_flags_authenticate(r, &project);
    if (project == NULL) {
        return rc;
    }

    if (ngx_http_flags_route(r, &route) != NGX_OK) {
        goto not_found;
    }

    p = route.data;
    len = route.len;

    if (len == 0) {
        /* "location = /api/sdk/report": the route is the last segment */
        while (p > r->uri.data && p[-1] != '/') {
            p--;
            len++;
        }

    } else if (p == r->uri.data || p[-1] != '/') {
        /* "location /api/sdk" takes "/api/sdk/flags", not "/api/sdkflags" */
        goto not_found;
    }

    if (len == sizeof("report") - 1
        && ngx_strncmp(p, "report", sizeof("report") - 1) == 0)
    {
        if (r->method != NGX_HTTP_POST) {
            return ngx_http_flags_method_not_allowed(r, "POST");
        }

        /* validated, logged and counted as POST /ingest/errors */
        return ngx_http_flags_ingest_report(r, project);
    }

    if (len != sizeof("flags") - 1
        || ngx_strncmp(p, "flags", sizeof("flags") - 1) != 0)
    {
        goto not_found;
    }

    if (r->method != NGX_HTTP_POST) {
        return ngx_http_flags_method_not_allowed(r, "POST");
    }

    ctx = ngx_palloc(r->pool, sizeof(ngx_http_flags_sdk_ctx_t));
    if (ctx == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx->project = project;

    return ngx_http_flags_read_json_body(r, ctx, "the request body", 0,
                                         ngx_http_flags_sdk_body);

not_found:

    return ngx_http_flags_route_not_found(r, routes);
}


static void
ngx_http_flags_sdk_body(ngx_http_request_t *r)
{
    ngx_http_finalize_request(r, ngx_http_flags_sdk_flags(r));
}


/*
 * POST {loc}flags once its body is read: the caller from the body, then
 * what GET /flags does (ngx_http_flags_eval.c: one evaluation and one
 * count a flag), then the SDK's answer for that caller.
 */

static ngx_int_t
ngx_http_flags_sdk_flags(ngx_http_request_t *r)
{
    char                        err[256];
    size_t                      len;
    u_char                     *out;
    ngx_int_t                   rc;
    ngx_str_t                   body;
    fl_user_t                   user;
    fl_alloc_t                  alloc;
    fl_status_t                 st;
    ngx_http_flags_sdk_ctx_t   *ctx;
    ngx_http_flags_answer_t     answer;
    ngx_http_flags_project_t   *project;
    ngx_http_flags_loc_conf_t  *flcf;

    ctx = ngx_http_get_module_ctx(r, ngx_http_flags_module);
    flcf = ngx_http_get_module_loc_conf(r, ngx_http_flags_module);
    project = ctx->project;

    rc = ngx_http_flags_body_whole(r, flcf->max_report_size, &body);

    if (rc == NGX_DECLINED) {
        return ngx_http_flags_too_large(r, flcf->max_report_size,
                                        "the request body", 0);
    }

    if (rc != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    alloc.alloc = ngx_http_flags_pool_alloc;
    alloc.ctx = r->pool;

    st = fl_sdk_parse_request((const char *) body.data, body.len,
                              flcf->max_traits, &alloc, &user, err,
                              sizeof(err));

    switch (st) {

    case FL_OK:
        break;

    case FL_ERR_JSON:
        return ngx_http_flags_send_error(r, NGX_HTTP_BAD_REQUEST,
                                         "invalid_json", err);

    case FL_ERR_FIELD:
        return ngx_http_flags_send_error(r, NGX_HTTP_BAD_REQUEST,
                                         "invalid_field", err);

    default:
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    /* one evaluation a flag, with the answer the SDK will reach */
    if (ngx_http_flags_answer_init(&answer, r->pool, project,
                                   NGX_HTTP_FLAGS_DETAIL)
        != NGX_OK)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_http_flags_answer_evaluate(&answer, &user, NGX_HTTP_FLAGS_VALUES,
                                   NGX_HTTP_FLAGS_COUNTED);

    out = ngx_pnalloc(r->pool, fl_sdk_flags_json_bound(answer.defs->core));
    if (out == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    len = fl_sdk_flags_json(answer.defs->core, &user, answer.detail,
                            (char *) out);

    return ngx_http_flags_send_json(r, NGX_HTTP_OK, out, len);
}
