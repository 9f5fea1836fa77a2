/*
 * ngx_http_flags_evaluate.c - GET {base}/flags.
 *
 * The hot path: decode the query, read the answer's tag, evaluate and
 * count (ngx_http_flags_eval.c), and write the JSON.  Memory comes only
 * from the request pool.
 */

#include "ngx_http_flags_module.h"


/*
 * This worker's memo of answer tags, so that a revalidation (If-None-Match)
 * is answered without decoding the query or reading the flags: the key is
 * the raw query bytes with the configuration generation, the project and
 * flags_max_traits (which decide how those bytes parse); the entry holds
 * the project's answer version (ngx_http_flags_answer_changed()) read before the
 * tag was computed.  A rollback, a cleared rollback, an override or a new
 * definition bumps the version, so an entry of an older version never
 * answers (docs/decisions.md).  Longer queries are not kept.
 */

#define NGX_HTTP_FLAGS_TAGS       512          /* a power of two */
#define NGX_HTTP_FLAGS_TAG_ARGS   248

typedef struct {
    ngx_http_flags_project_t   *project;
    ngx_uint_t                  gen;
    ngx_uint_t                  max_traits;
    ngx_atomic_uint_t           version;
    uint64_t                    etag;
    u_char                      text[FL_ETAG_LEN];    /* as sent */
    size_t                      len;
    u_char                      args[NGX_HTTP_FLAGS_TAG_ARGS];
} ngx_http_flags_tag_t;


static ngx_http_flags_tag_t  *ngx_http_flags_tags;


static ngx_http_flags_tag_t *
ngx_http_flags_tag_slot(ngx_http_request_t *r,
    ngx_http_flags_project_t *project)
{
    uint32_t  h;

    if (r->args.len > NGX_HTTP_FLAGS_TAG_ARGS || project->pversion == NULL) {
        return NULL;
    }

    if (ngx_http_flags_tags == NULL) {
        /* once a worker, for its lifetime */
        ngx_http_flags_tags = ngx_pcalloc(ngx_cycle->pool,
                                  NGX_HTTP_FLAGS_TAGS
                                  * sizeof(ngx_http_flags_tag_t));
        if (ngx_http_flags_tags == NULL) {
            return NULL;
        }
    }

    h = fl_murmur3_32(r->args.len ? (const void *) r->args.data : "",
                      r->args.len, (uint32_t) (uintptr_t) project);

    return &ngx_http_flags_tags[h & (NGX_HTTP_FLAGS_TAGS - 1)];
}


static ngx_uint_t
ngx_http_flags_tag_hit(ngx_http_flags_tag_t *t, ngx_http_request_t *r,
    ngx_http_flags_project_t *project, ngx_uint_t gen, ngx_uint_t max_traits,
    ngx_atomic_uint_t version)
{
    return t->project == project && t->gen == gen
           && t->max_traits == max_traits && t->version == version
           && t->len == r->args.len
           && (r->args.len == 0
               || ngx_memcmp(t->args, r->args.data, r->args.len) == 0);
}


ngx_int_t
ngx_http_flags_evaluate_handler(ngx_http_request_t *r)
{
    char                        err[256];
    u_char                     *body;
    size_t                      len;
    uint64_t                    etag;
    ngx_int_t                   rc;
    fl_user_t                   user;
    fl_alloc_t                  alloc;
    fl_status_t                 st;
    ngx_table_elt_t            *inm, *h;
    ngx_atomic_uint_t           version;
    ngx_http_flags_tag_t       *tag;
    ngx_http_flags_answer_t     answer;
    ngx_http_flags_project_t   *project;
    ngx_http_flags_loc_conf_t  *flcf;
    ngx_http_flags_main_conf_t *fmcf;

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

    /* read before anything the tag is computed from */
    version = ngx_http_flags_answer_version(project);
    tag = ngx_http_flags_tag_slot(r, project);
    inm = r->headers_in.if_none_match;

    if (inm != NULL && tag != NULL
        && ngx_http_flags_tag_hit(tag, r, project, fmcf->gen,
                                  flcf->max_traits, version)
        && ((inm->value.len == FL_ETAG_LEN
             && ngx_memcmp(inm->value.data, tag->text, FL_ETAG_LEN) == 0)
            || fl_etag_none_match((const char *) inm->value.data,
                                  inm->value.len, tag->etag)))
    {
        /* a copy: the memo may change before the log phase reads it */
        body = ngx_pnalloc(r->pool, FL_ETAG_LEN);
        if (body == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        ngx_memcpy(body, tag->text, FL_ETAG_LEN);

        h = ngx_http_flags_add_header(r, "ETag", body, FL_ETAG_LEN);
        if (h == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        r->headers_out.etag = h;

        return ngx_http_flags_send_not_modified(r);
    }

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

    if (ngx_http_flags_answer_init(&answer, r->pool, project) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    /* everything the answer depends on: definitions, effective
     * percentages, the normalised caller (docs/http-api.md); not the
     * switch, which these bytes do not show */
    etag = fl_answer_etag(project->core, &user, answer.effective, NULL);

    rc = ngx_http_flags_set_etag(r, etag);
    if (rc != NGX_OK) {
        return rc;
    }

    if (tag != NULL) {
        tag->project = project;
        tag->gen = fmcf->gen;
        tag->max_traits = flcf->max_traits;
        tag->version = version;
        tag->etag = etag;
        (void) fl_etag_format(etag, (char *) tag->text);
        tag->len = r->args.len;
        if (r->args.len) {      /* no query: args.data may be NULL */
            ngx_memcpy(tag->args, r->args.data, r->args.len);
        }
    }

    if (inm != NULL
        && fl_etag_none_match((const char *) inm->value.data,
                              inm->value.len, etag))
    {
        /* the caller holds this answer: no evaluation, nothing counted,
         * no body built (docs/decisions.md) */
        return ngx_http_flags_send_not_modified(r);
    }

    ngx_http_flags_answer_evaluate(&answer, &user, NGX_HTTP_FLAGS_COUNTED);

    body = ngx_pnalloc(r->pool, fl_flags_json_bound(project->core));
    if (body == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    len = fl_flags_json(project->core, answer.detail, (char *) body);

    return ngx_http_flags_send_json(r, NGX_HTTP_OK, body, len);
}
