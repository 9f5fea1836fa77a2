/*
 * ngx_http_flags_evaluate.c - GET {base}/flags.
 *
 * The hot path: the answer from this worker's memo when the same caller
 * asked since the last change (ngx_http_flags_memo.c); else decode the
 * query, evaluate and count (ngx_http_flags_eval.c) and write the JSON.
 * Memory comes only from the request pool (and the memo's own).
 */

#include "ngx_http_flags_module.h"


static ngx_int_t ngx_http_flags_evaluate_answer(ngx_http_request_t *r,
    ngx_http_flags_project_t *project, ngx_http_flags_memo_key_t *key);


ngx_int_t
ngx_http_flags_evaluate_handler(ngx_http_request_t *r)
{
    ngx_int_t                    rc;
    ngx_http_flags_memo_t       *m;
    ngx_http_flags_project_t    *project;
    ngx_http_flags_memo_key_t    key;
    ngx_http_flags_loc_conf_t   *flcf;
    ngx_http_flags_main_conf_t  *fmcf;

    /* the memo's line for this caller is fetched from memory while the
     * request is authenticated */
    key.kind = NGX_HTTP_FLAGS_MEMO_FLAGS;
    key.bytes = r->args.len ? r->args.data : (u_char *) "";
    key.len = r->args.len;
    key.hashed = 0;
    key.caller_hashed = 0;
    ngx_http_flags_memo_prefetch(&key);

    /* the token is checked before the method (docs/http-api.md) */
    rc = ngx_http_flags_authenticate(r, &project);
    if (project == NULL) {
        return rc;
    }

    if (!(r->method & (NGX_HTTP_GET|NGX_HTTP_HEAD))) {
        return ngx_http_flags_method_not_allowed(r, "GET, HEAD");
    }

    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    /* If-None-Match is answered here, against the answer's own ETag;
     * nginx's filter would take "*" as a match without one */
    r->disable_not_modified = 1;

    flcf = ngx_http_get_module_loc_conf(r, ngx_http_flags_module);
    fmcf = ngx_http_get_module_main_conf(r, ngx_http_flags_module);

    /* the memo's key; the version is read before anything the answer is
     * computed from (ngx_http_flags_memo.c) */
    key.scope = flcf;
    key.project = project;
    key.defs = ngx_http_flags_defs(project);
    key.gen = fmcf->gen;
    key.version = ngx_http_flags_answer_version(project);

    m = ngx_http_flags_memo_find(&key);

    if (m == NULL) {
        return ngx_http_flags_evaluate_answer(r, project, &key);
    }

    return ngx_http_flags_memo_answer(r, m);
}


/* The answer computed: the caller from the query, evaluation, counts,
 * JSON; then kept in the memo under key. */

static ngx_int_t
ngx_http_flags_evaluate_answer(ngx_http_request_t *r,
    ngx_http_flags_project_t *project, ngx_http_flags_memo_key_t *key)
{
    char                        err[256];
    u_char                     *body, text[FL_ETAG_LEN];
    size_t                      len;
    uint64_t                    etag;
    ngx_int_t                   rc;
    fl_user_t                   user;
    fl_alloc_t                  alloc;
    fl_status_t                 st;
    ngx_http_flags_answer_t     answer;
    ngx_http_flags_loc_conf_t  *flcf;

    flcf = key->scope;

    alloc.alloc = ngx_http_flags_pool_alloc;
    alloc.ctx = r->pool;

    st = fl_parse_query((const char *) r->args.data, r->args.len,
                        flcf->max_traits, &alloc, &user, err, sizeof(err));

    if (st == FL_ERR_QUERY) {
        return ngx_http_flags_send_error(r, NGX_HTTP_BAD_REQUEST,
                                         "invalid_query", err);
    }

    if (st != FL_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (ngx_http_flags_answer_init(&answer, r->pool, project,
                                   NGX_HTTP_FLAGS_BITS)
        != NGX_OK)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    /* everything the answer depends on: definitions, effective
     * percentages, the normalised caller (docs/http-api.md), and the
     * switch only where these bytes show it (fl_flags_etag()) */
    etag = answer.etag_prefix
           ? fl_flags_etag_from(answer.etag_prefix, &user)
           : fl_flags_etag(answer.defs->core, &user, answer.effective,
                           answer.sw);
    (void) fl_etag_format(etag, (char *) text);

    rc = ngx_http_flags_etag_text(r, text);
    if (rc != NGX_OK) {
        return rc;
    }

    if (ngx_http_flags_none_match(r, text, etag)) {
        /* the caller holds this answer: no evaluation, nothing counted,
         * no body built (docs/decisions.md) */
        return ngx_http_flags_send_not_modified(r);
    }

    body = ngx_pnalloc(r->pool, fl_flags_json_bound(answer.defs->core));
    if (body == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    len = ngx_http_flags_answer_flags_json(&answer, &user,
                                           NGX_HTTP_FLAGS_COUNTED, body);

    ngx_http_flags_memo_store(key, body, len, &etag, answer.enabled, -1);

    return ngx_http_flags_send_json(r, NGX_HTTP_OK, body, len);
}
