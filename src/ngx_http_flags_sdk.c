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


/* the body in one piece, as the core reads it */
typedef struct {
    u_char                     *data;
    size_t                      len;
    size_t                      size;
} ngx_http_flags_sdk_body_t;


static void ngx_http_flags_sdk_body(ngx_http_request_t *r);
static ngx_int_t ngx_http_flags_sdk_flags(ngx_http_request_t *r);
static ngx_int_t ngx_http_flags_sdk_copy(void *ctx, u_char *p, size_t len);


ngx_int_t
ngx_http_flags_sdk_handler(ngx_http_request_t *r)
{
    u_char                     *p, *last;
    size_t                      len;
    ngx_int_t                   rc;
    ngx_http_flags_sdk_ctx_t   *ctx;
    ngx_http_flags_project_t   *project;
    ngx_http_core_loc_conf_t   *clcf;

    /* the token is checked before anything else (docs/http-api.md) */
    rc = ngx_http_flags_authenticate(r, &project);
    if (project == NULL) {
        return rc;
    }

    clcf = ngx_http_get_module_loc_conf(r, ngx_http_core_module);

    p = r->uri.data;
    last = p + r->uri.len;

    if (r->uri.len < clcf->name.len
        || ngx_strncmp(p, clcf->name.data, clcf->name.len) != 0)
    {
        goto not_found;
    }

    p += clcf->name.len;

    if (p == last) {
        /* "location = /api/sdk/report": the route is the last segment */
        while (p > r->uri.data && p[-1] != '/') {
            p--;
        }

    } else if (clcf->name.data[clcf->name.len - 1] != '/') {
        /* "location /api/sdk" as well as "location /api/sdk/" */
        if (*p != '/') {
            goto not_found;
        }

        p++;
    }

    len = last - p;

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

    return ngx_http_flags_route_not_found(r, "flags", "report");
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
    off_t                       size;
    size_t                      len;
    u_char                     *out;
    fl_user_t                   user;
    fl_alloc_t                  alloc;
    fl_status_t                 st;
    ngx_http_flags_sdk_ctx_t   *ctx;
    ngx_http_flags_answer_t     answer;
    ngx_http_flags_sdk_body_t   body;
    ngx_http_flags_project_t   *project;
    ngx_http_flags_loc_conf_t  *flcf;

    ctx = ngx_http_get_module_ctx(r, ngx_http_flags_module);
    flcf = ngx_http_get_module_loc_conf(r, ngx_http_flags_module);
    project = ctx->project;

    /* a chunked body has no declared length: measure what arrived */
    size = ngx_http_flags_body_size(r);
    if (size > (off_t) flcf->max_report_size) {
        return ngx_http_flags_too_large(r, flcf->max_report_size,
                                        "the request body", 0);
    }

    body.len = 0;
    body.size = (size_t) size;
    body.data = ngx_pnalloc(r->pool, body.size + 1);
    if (body.data == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (ngx_http_flags_body_pieces(r, ngx_http_flags_sdk_copy, &body)
        != NGX_OK)
    {
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
    if (ngx_http_flags_answer_init(&answer, r->pool, project) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_http_flags_answer_evaluate(&answer, &user, NGX_HTTP_FLAGS_COUNTED);

    out = ngx_pnalloc(r->pool, fl_sdk_flags_json_bound(project->core));
    if (out == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    len = fl_sdk_flags_json(project->core, &user, answer.detail,
                            (char *) out);

    return ngx_http_flags_send_json(r, NGX_HTTP_OK, out, len);
}


static ngx_int_t
ngx_http_flags_sdk_copy(void *ctx, u_char *p, size_t len)
{
    ngx_http_flags_sdk_body_t  *body = ctx;

    if (len > body->size - body->len) {
        return NGX_ERROR;               /* more than was measured */
    }

    body->len = ngx_cpymem(body->data + body->len, p, len) - body->data;

    return NGX_OK;
}
