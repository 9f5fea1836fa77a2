/*
 * ngx_http_flags_ofrep.c - flags_ofrep: the OpenFeature Remote Evaluation
 * Protocol under a location (docs/ofrep.md).
 *
 *   POST {loc}v1/evaluate/flags/{key}   one flag
 *   POST {loc}v1/evaluate/flags         every flag, with an ETag
 *
 * Order of checks: the path (404), the token (401, no body), the method
 * (405), the declared size (413); then, once the body is read, its size,
 * the JSON and the context (400), and last the flag (404).  The answer is
 * GET /flags' for the same caller, from the same evaluate-and-count path
 * (ngx_http_flags_eval.c).  The core decides
 * and writes every byte; this file reads the request and the zone.
 */

#include "ngx_http_flags_module.h"


typedef struct {
    ngx_http_flags_project_t    *project;
    ngx_str_t                    token;     /* the client's, in its header */
    ngx_str_t                    base;      /* {loc}: the path before v1/ */
    ngx_str_t                    key;       /* single: the flag's key */
    ngx_uint_t                   bulk;
} ngx_http_flags_ofrep_ctx_t;


static ngx_int_t ngx_http_flags_ofrep_events_start(ngx_http_request_t *r);
static ngx_int_t ngx_http_flags_ofrep_evaluate_start(ngx_http_request_t *r,
    ngx_str_t *base, ngx_str_t *rest);
static ngx_int_t ngx_http_flags_ofrep_route(ngx_http_request_t *r,
    ngx_str_t *base, ngx_str_t *rest);
static ngx_uint_t ngx_http_flags_ofrep_push(ngx_http_request_t *r);
static void ngx_http_flags_ofrep_body(ngx_http_request_t *r);
static ngx_int_t ngx_http_flags_ofrep_process(ngx_http_request_t *r,
    ngx_http_flags_ofrep_ctx_t *ctx);
static ngx_int_t ngx_http_flags_ofrep_memo_key(ngx_http_request_t *r,
    ngx_http_flags_ofrep_ctx_t *ctx, ngx_str_t *body,
    ngx_http_flags_memo_key_t *k);
static ngx_int_t ngx_http_flags_ofrep_single(ngx_http_request_t *r,
    ngx_http_flags_ofrep_ctx_t *ctx, fl_user_t *user,
    ngx_http_flags_memo_key_t *mkey);
static ngx_int_t ngx_http_flags_ofrep_bulk(ngx_http_request_t *r,
    ngx_http_flags_ofrep_ctx_t *ctx, fl_user_t *user,
    ngx_http_flags_memo_key_t *mkey);
static ngx_int_t ngx_http_flags_ofrep_error(ngx_http_request_t *r,
    ngx_uint_t status, ngx_str_t *key, const char *code, const char *details);
static ngx_int_t ngx_http_flags_ofrep_refuse(ngx_http_request_t *r,
    ngx_uint_t status, ngx_str_t *key, const char *code, const char *details);


static ngx_str_t  ngx_http_flags_ofrep_eval = ngx_string("v1/evaluate/flags");
static ngx_str_t  ngx_http_flags_ofrep_events = ngx_string("v1/events");


ngx_int_t
ngx_http_flags_ofrep_handler(ngx_http_request_t *r)
{
    ngx_int_t   rc;
    ngx_str_t   base, rest;

    /*
     * nginx's conditional filter would answer a 200 with "If-None-Match: *"
     * by a 304 (it needs no ETag for that): the 304 is decided here, for
     * the bulk answer only; If-Match and If-Modified-Since mean nothing
     * for a POST that evaluates
     */
    r->disable_not_modified = 1;

    rc = ngx_http_flags_ofrep_route(r, &base, &rest);
    if (rc != NGX_OK) {
        return rc;
    }

    if (rest.len == ngx_http_flags_ofrep_events.len
        && ngx_strncmp(rest.data, ngx_http_flags_ofrep_events.data,
                       rest.len) == 0)
    {
        return ngx_http_flags_ofrep_events_start(r);
    }

    return ngx_http_flags_ofrep_evaluate_start(r, &base, &rest);
}


/*
 * PUSH HOOK: {loc}v1/events?token=... is the SSE stream of
 * ngx_http_flags_push.c (docs/push.md).  Its token is in the query
 * (EventSource sends no header; a Bearer header is taken too); then the
 * method, then the stream.
 */

static ngx_int_t
ngx_http_flags_ofrep_events_start(ngx_http_request_t *r)
{
    ngx_int_t                  rc;
    ngx_http_flags_project_t  *project;

    if (!ngx_http_flags_push_enabled(r)) {
        return ngx_http_flags_ofrep_refuse(r, NGX_HTTP_NOT_FOUND, NULL,
                                           "GENERAL", "no event stream here");
    }

    rc = ngx_http_flags_push_token(r, &project);
    if (project == NULL) {
        return rc;
    }

    if (r->method != NGX_HTTP_GET) {
        if (ngx_http_flags_add_header(r, "Allow", (u_char *) "GET", 3)
            == NULL)
        {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        return ngx_http_flags_ofrep_refuse(r, NGX_HTTP_NOT_ALLOWED, NULL,
                                           "GENERAL",
                                           "the event stream is GET");
    }

    rc = ngx_http_flags_push_sse(r, project);

    if (rc == NGX_DECLINED) {
        return ngx_http_flags_ofrep_refuse(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                   NULL, "GENERAL",
                   "this worker holds flags_push_max_connections "
                   "streams already");
    }

    return rc;
}


/*
 * {loc}v1/evaluate/flags[/KEY]: the path, the token, the method, the
 * declared size; then the body is read (ngx_http_flags_ofrep_body()).
 */

static ngx_int_t
ngx_http_flags_ofrep_evaluate_start(ngx_http_request_t *r, ngx_str_t *base,
    ngx_str_t *rest)
{
    size_t                       n;
    ngx_int_t                    rc;
    ngx_str_t                    token;
    ngx_http_flags_project_t    *project;
    ngx_http_flags_loc_conf_t   *flcf;
    ngx_http_flags_ofrep_ctx_t  *ctx;

    n = ngx_http_flags_ofrep_eval.len;

    if (rest->len < n
        || ngx_strncmp(rest->data, ngx_http_flags_ofrep_eval.data, n) != 0
        || (rest->len > n && rest->data[n] != '/'))
    {
        return ngx_http_flags_ofrep_refuse(r, NGX_HTTP_NOT_FOUND, NULL,
                                           "GENERAL",
                                           "no such OFREP endpoint");
    }

    rc = ngx_http_flags_authenticate_bare(r, &project, &token);
    if (project == NULL) {
        return rc;
    }

    if (r->method != NGX_HTTP_POST) {
        if (ngx_http_flags_add_header(r, "Allow", (u_char *) "POST", 4)
            == NULL)
        {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        return ngx_http_flags_ofrep_refuse(r, NGX_HTTP_NOT_ALLOWED, NULL,
                                           "GENERAL",
                                           "OFREP evaluations are POST");
    }

    ctx = ngx_pcalloc(r->pool, sizeof(ngx_http_flags_ofrep_ctx_t));
    if (ctx == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx->project = project;
    ctx->token = token;
    ctx->base = *base;
    ctx->bulk = (rest->len == n);

    if (!ctx->bulk) {
        /* r->uri is decoded: "a%2Fb" is the key "a/b" */
        ctx->key.data = rest->data + n + 1;
        ctx->key.len = rest->len - n - 1;
    }

    flcf = ngx_http_get_module_loc_conf(r, ngx_http_flags_module);

    /* a declared length is refused before a byte of the body is read */
    if (r->headers_in.content_length_n > (off_t) flcf->max_report_size) {
        return ngx_http_flags_ofrep_refuse(r,
                   NGX_HTTP_REQUEST_ENTITY_TOO_LARGE,
                   ctx->bulk ? NULL : &ctx->key, "GENERAL",
                   "the request body is larger than flags_max_report_size");
    }

    return ngx_http_flags_read_body(r, ctx, ngx_http_flags_ofrep_body);
}


/*
 * Splits r->uri into {loc} and what follows.  In a prefix location {loc}
 * is the location's name (with the '/' after it when the name has none at
 * its end: ngx_http_flags_route()); in any other (a regular expression,
 * an exact or a named location) it is the URI up to the first "v1/" that
 * starts an OFREP path after a '/'.
 */

static ngx_int_t
ngx_http_flags_ofrep_route(ngx_http_request_t *r, ngx_str_t *base,
    ngx_str_t *rest)
{
    u_char                    *p, *last;
    ngx_uint_t                 prefix;
    ngx_http_core_loc_conf_t  *clcf;

    clcf = ngx_http_get_module_loc_conf(r, ngx_http_core_module);

    prefix = !clcf->exact_match && !clcf->named && !clcf->noname;
#if (NGX_PCRE)
    prefix = prefix && clcf->regex == NULL;
#endif

    if (!prefix || ngx_http_flags_route(r, rest) != NGX_OK) {
        last = r->uri.data + r->uri.len;

        rest->data = last;
        rest->len = 0;

        for (p = r->uri.data; p < last; p++) {
            if (p[0] != '/' || (size_t) (last - p) < sizeof("/v1/") - 1
                || ngx_strncmp(p + 1, "v1/", 3) != 0)
            {
                continue;
            }

            if (((size_t) (last - p - 1) >= ngx_http_flags_ofrep_eval.len
                 && ngx_strncmp(p + 1, ngx_http_flags_ofrep_eval.data,
                                ngx_http_flags_ofrep_eval.len) == 0)
                || ((size_t) (last - p - 1)
                    >= ngx_http_flags_ofrep_events.len
                    && ngx_strncmp(p + 1, ngx_http_flags_ofrep_events.data,
                                   ngx_http_flags_ofrep_events.len) == 0))
            {
                rest->data = p + 1;
                rest->len = last - rest->data;
                break;
            }
        }
    }

    base->data = r->uri.data;
    base->len = rest->data - r->uri.data;

    return NGX_OK;
}


/*
 * PUSH HOOK: whether the bulk answer lists the event stream: when this
 * location serves it (flags_ofrep_events, flags_push_max_connections).
 */

static ngx_uint_t
ngx_http_flags_ofrep_push(ngx_http_request_t *r)
{
    return ngx_http_flags_push_enabled(r);
}


static void
ngx_http_flags_ofrep_body(ngx_http_request_t *r)
{
    ngx_http_flags_ofrep_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_flags_module);

    ngx_http_finalize_request(r, ngx_http_flags_ofrep_process(r, ctx));
}


static ngx_int_t
ngx_http_flags_ofrep_process(ngx_http_request_t *r,
    ngx_http_flags_ofrep_ctx_t *ctx)
{
    char                          err[256];
    ngx_int_t                     rc;
    ngx_str_t                    *key, body;
    fl_user_t                     user;
    fl_alloc_t                    alloc;
    fl_status_t                   st;
    ngx_http_flags_memo_t        *m;
    ngx_http_flags_loc_conf_t    *flcf;
    ngx_http_flags_memo_key_t     mkey;

    flcf = ngx_http_get_module_loc_conf(r, ngx_http_flags_module);
    key = ctx->bulk ? NULL : &ctx->key;

    /* read before anything the answer is computed from */
    mkey.version = ngx_http_flags_answer_version(ctx->project);

    /* the JSON reader wants the body in one piece */
    rc = ngx_http_flags_body_whole(r, flcf->max_report_size, &body);

    if (rc == NGX_DECLINED) {
        return ngx_http_flags_ofrep_error(r,
                   NGX_HTTP_REQUEST_ENTITY_TOO_LARGE, key, "GENERAL",
                   "the request body is larger than flags_max_report_size");
    }

    if (rc != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    /* the same caller asked since the last change: the memo answers */
    if (ngx_http_flags_ofrep_memo_key(r, ctx, &body, &mkey) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    m = ngx_http_flags_memo_find(&mkey);
    if (m != NULL) {
        return ngx_http_flags_memo_answer(r, m);
    }

    alloc.alloc = ngx_http_flags_pool_alloc;
    alloc.ctx = r->pool;

    st = fl_ofrep_parse_context((const char *) body.data, body.len,
                                flcf->max_traits, &alloc, &user,
                                err, sizeof(err));

    switch (st) {

    case FL_OK:
        break;

    case FL_ERR_JSON:
        return ngx_http_flags_ofrep_error(r, NGX_HTTP_BAD_REQUEST, key,
                                          "PARSE_ERROR", err);

    case FL_ERR_FIELD:
        return ngx_http_flags_ofrep_error(r, NGX_HTTP_BAD_REQUEST, key,
                                          "INVALID_CONTEXT", err);

    default:
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (ctx->bulk) {
        return ngx_http_flags_ofrep_bulk(r, ctx, &user, &mkey);
    }

    return ngx_http_flags_ofrep_single(r, ctx, &user, &mkey);
}


/*
 * The memo's key of an evaluation: what decides its answer besides the
 * project's version: the location, the kind, the flag's key (single), the
 * base and token the bulk ETag hashes, and the body's bytes.
 */

static ngx_int_t
ngx_http_flags_ofrep_memo_key(ngx_http_request_t *r,
    ngx_http_flags_ofrep_ctx_t *ctx, ngx_str_t *body,
    ngx_http_flags_memo_key_t *k)
{
    u_char                      *p;
    ngx_http_flags_main_conf_t  *fmcf;

    fmcf = ngx_http_get_module_main_conf(r, ngx_http_flags_module);

    k->kind = ctx->bulk ? NGX_HTTP_FLAGS_MEMO_OFREP_BULK
                        : NGX_HTTP_FLAGS_MEMO_OFREP_ONE;
    k->scope = ngx_http_get_module_loc_conf(r, ngx_http_flags_module);
    k->project = ctx->project;
    k->defs = ngx_http_flags_defs(ctx->project);
    k->gen = fmcf->gen;
    k->hashed = 0;
    k->caller_hashed = 0;
    k->len = ctx->key.len + ctx->base.len + ctx->token.len + body->len + 3;

    p = ngx_pnalloc(r->pool, k->len);
    if (p == NULL) {
        return NGX_ERROR;
    }

    k->bytes = p;

    /* each part ends with a NUL, which none of the first three holds;
     * an empty part may have no data pointer */
    if (ctx->key.len) {
        p = ngx_cpymem(p, ctx->key.data, ctx->key.len);
    }
    *p++ = '\0';
    if (ctx->base.len) {
        p = ngx_cpymem(p, ctx->base.data, ctx->base.len);
    }
    *p++ = '\0';
    if (ctx->token.len) {
        p = ngx_cpymem(p, ctx->token.data, ctx->token.len);
    }
    *p++ = '\0';
    if (body->len) {
        ngx_memcpy(p, body->data, body->len);
    }

    return NGX_OK;
}


static ngx_int_t
ngx_http_flags_ofrep_single(ngx_http_request_t *r,
    ngx_http_flags_ofrep_ctx_t *ctx, fl_user_t *user,
    ngx_http_flags_memo_key_t *mkey)
{
    long                       i;
    u_char                    *body;
    size_t                     len;
    uint64_t                   bit;
    fl_detail_t                d;
    ngx_http_flags_defs_t     *defs;

    /* the definitions the memo's key was made for, in this event */
    defs = mkey->defs;

    i = fl_project_find_flag(defs->core, (const char *) ctx->key.data,
                             ctx->key.len);
    if (i < 0) {
        return ngx_http_flags_ofrep_error(r, NGX_HTTP_NOT_FOUND, &ctx->key,
                                          "FLAG_NOT_FOUND",
                                          "the project has no such flag");
    }

    if (ngx_http_flags_evaluate_flag(defs, (ngx_uint_t) i, user, &d,
                                     NGX_HTTP_FLAGS_COUNTED)
        != NGX_OK)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    body = ngx_pnalloc(r->pool,
                       fl_ofrep_flag_json_bound(defs->core, (size_t) i));
    if (body == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    len = fl_ofrep_flag_json(defs->core, (size_t) i, &d, (char *) body);

    bit = d.enabled != 0;
    ngx_http_flags_memo_store(mkey, body, len, NULL, &bit, i);

    return ngx_http_flags_send_json(r, NGX_HTTP_OK, body, len);
}


static ngx_int_t
ngx_http_flags_ofrep_bulk(ngx_http_request_t *r,
    ngx_http_flags_ofrep_ctx_t *ctx, fl_user_t *user,
    ngx_http_flags_memo_key_t *mkey)
{
    u_char                    *body;
    size_t                     len, path_len;
    uint64_t                   etag;
    ngx_int_t                  rc;
    const char                *path;
    ngx_table_elt_t           *inm;
    ngx_http_flags_defs_t     *defs;
    ngx_http_flags_answer_t    answer;

    if (ngx_http_flags_answer_init(&answer, r->pool, ctx->project,
                                   NGX_HTTP_FLAGS_DETAIL)
        != NGX_OK)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    defs = answer.defs;

    if (ngx_http_flags_ofrep_push(r)) {
        path = (const char *) ctx->base.data;
        path_len = ctx->base.len;

    } else {
        path = NULL;
        path_len = 0;
    }

    etag = fl_ofrep_bulk_etag(defs->core, user, answer.effective,
                              answer.sw, path, path_len,
                              (const char *) ctx->token.data, ctx->token.len);

    rc = ngx_http_flags_set_etag(r, etag);
    if (rc != NGX_OK) {
        return rc;
    }

    inm = r->headers_in.if_none_match;

    if (inm && fl_etag_none_match((const char *) inm->value.data,
                                  inm->value.len, etag))
    {
        /* the caller holds this answer: nothing evaluated or counted, as
         * for GET /flags (docs/decisions.md) */
        return ngx_http_flags_send_not_modified(r);
    }

    /* every flag is evaluated and counted, as by GET /flags */
    ngx_http_flags_answer_evaluate(&answer, user, NGX_HTTP_FLAGS_REASONS,
                                   NGX_HTTP_FLAGS_COUNTED);

    body = ngx_pnalloc(r->pool, fl_ofrep_bulk_json_bound(defs->core,
                                                         path_len,
                                                         ctx->token.len));
    if (body == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    len = fl_ofrep_bulk_json(defs->core, answer.detail, path, path_len,
                             (const char *) ctx->token.data, ctx->token.len,
                             (char *) body);

    ngx_http_flags_memo_store(mkey, body, len, &etag, answer.enabled, -1);

    return ngx_http_flags_send_json(r, NGX_HTTP_OK, body, len);
}


/* An OFREP error body once the request body is read (or discarded). */

static ngx_int_t
ngx_http_flags_ofrep_error(ngx_http_request_t *r, ngx_uint_t status,
    ngx_str_t *key, const char *code, const char *details)
{
    u_char  *body;
    size_t   len, details_len;

    details_len = ngx_strlen(details);

    body = ngx_pnalloc(r->pool,
                       fl_ofrep_error_json_bound(key ? key->len : 0,
                                                 details_len));
    if (body == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    len = fl_ofrep_error_json(key ? (const char *) key->data : NULL,
                              key ? key->len : 0, code, details, details_len,
                              (char *) body);

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "flags: OFREP %ui %s", status, code);

    return ngx_http_flags_send_json(r, status, body, len);
}


/*
 * The same before the body is read: final, so a client that waits for
 * "100 Continue" gets it instead, and the body it may still send is
 * discarded, so keep-alive goes on (as ngx_http_flags_send_error()).
 */

static ngx_int_t
ngx_http_flags_ofrep_refuse(ngx_http_request_t *r, ngx_uint_t status,
    ngx_str_t *key, const char *code, const char *details)
{
    ngx_int_t  rc;

    r->expect_tested = 1;

    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    return ngx_http_flags_ofrep_error(r, status, key, code, details);
}



