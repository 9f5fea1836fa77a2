/*
 * ngx_http_flags_http.c - what every handler of the module shares: the
 * Bearer token, the route under a location, reading the request body, and
 * JSON answers (errors are JSON too: returning a status would make nginx
 * send its HTML page).
 */

#include "ngx_http_flags_module.h"


/* the request body, copied into a buffer of the size measured */
typedef struct {
    u_char                     *pos;
    u_char                     *end;
} ngx_http_flags_copy_t;


static ngx_int_t ngx_http_flags_auth(ngx_http_request_t *r,
    ngx_http_flags_project_t **project, ngx_str_t *token, ngx_uint_t bare,
    ngx_uint_t count);
static ngx_int_t ngx_http_flags_unauthorized(ngx_http_request_t *r,
    const char *code, const char *challenge, const char *message,
    ngx_uint_t bare);
static ngx_table_elt_t *ngx_http_flags_add_header_z(ngx_http_request_t *r,
    const char *name, const char *value);
static ngx_int_t ngx_http_flags_copy_piece(void *ctx, u_char *p, size_t len);


void *
ngx_http_flags_pool_alloc(void *ctx, size_t size)
{
    return ngx_palloc(ctx, size);
}


/*
 * Compares a candidate with a configured token in time that depends only on
 * the configured token's length, never on where the two differ.
 */

static ngx_uint_t
ngx_http_flags_token_equal(const u_char *conf, size_t conf_len,
    const u_char *cand, size_t cand_len)
{
    size_t      i;
    uint64_t    a, b;
    ngx_uint_t  diff;

    /* conf is padded with zeros to whole words (at configuration), cand
     * to the longest of them (zeros past the caller's own): eight bytes a
     * step, as many steps whatever cand is; equal lengths have equal
     * padding */
    diff = conf_len ^ cand_len;

    for (i = 0; i < conf_len; i += 8) {
        ngx_memcpy(&a, conf + i, 8);
        ngx_memcpy(&b, cand + i, 8);
        diff |= (a ^ b) != 0;
    }

#if (NGX_HAVE_GCC_ATOMIC || defined __GNUC__)
    /* the compiler may not turn the loop into an early exit on a value it
     * cannot see (a volatile would cost a memory round trip per byte) */
    __asm__ __volatile__ ("" : "+r" (diff));
#endif

    return diff == 0;
}


/*
 * "Authorization: Bearer <token>" -> the project that owns the token.
 * Without one, *project is NULL and the result is that of having answered
 * 401 already (which may well be NGX_OK).
 */

ngx_int_t
ngx_http_flags_authenticate(ngx_http_request_t *r,
    ngx_http_flags_project_t **project)
{
    return ngx_http_flags_auth(r, project, NULL, 0, 0);
}


/*
 * The same for a report: a refusal is counted for flags_metrics, by why
 * it was refused (FL_REFUSED_UNAUTHORIZED: no Bearer token,
 * FL_REFUSED_INVALID_TOKEN: a token of no project).
 */

ngx_int_t
ngx_http_flags_authenticate_report(ngx_http_request_t *r,
    ngx_http_flags_project_t **project)
{
    return ngx_http_flags_auth(r, project, NULL, 0, 1);
}


/*
 * The same check for OFREP, whose 401 has no body (docs/ofrep.md); on
 * success *token is the token the client sent (its bytes in the header).
 */

ngx_int_t
ngx_http_flags_authenticate_bare(ngx_http_request_t *r,
    ngx_http_flags_project_t **project, ngx_str_t *token)
{
    return ngx_http_flags_auth(r, project, token, 1, 0);
}


/*
 * Whether the 6 bytes at p are "bearer" in any case: both words ORed
 * with 0x20 in every byte, which maps 'B' and 'b' alone to 'b' (and so
 * for each letter), a few instructions instead of a case-folding loop.
 */

static ngx_inline ngx_uint_t
ngx_http_flags_is_bearer(const u_char *p)
{
    uint16_t  b, wb;
    uint32_t  a, wa;

    ngx_memcpy(&a, p, 4);
    ngx_memcpy(&b, p + 4, 2);
    ngx_memcpy(&wa, "bear", 4);
    ngx_memcpy(&wb, "er", 2);

    return (a | 0x20202020) == wa && (uint16_t) (b | 0x2020) == wb;
}


/* count: a refused token is counted for flags_metrics (reports) */

static ngx_int_t
ngx_http_flags_auth(ngx_http_request_t *r, ngx_http_flags_project_t **project,
    ngx_str_t *out, ngx_uint_t bare, ngx_uint_t count)
{
    u_char           *p, *last, *token;
    size_t            len;
    const char       *message;
    ngx_table_elt_t  *h;

    *project = NULL;
    h = r->headers_in.authorization;

    if (h == NULL) {
        message = "an \"Authorization: Bearer <token>\" header is required";
        goto unauthorized;
    }

    p = h->value.data;
    last = p + h->value.len;

    /*
     * RFC 7230 OWS around the value: nginx's parser drops leading spaces
     * but keeps a leading tab, and HTTP/2 hands the value over untouched
     */
    while (p < last && (*p == ' ' || *p == '\t')) {
        p++;
    }

    if (last - p < 6 || !ngx_http_flags_is_bearer(p)
        || (last - p > 6 && p[6] != ' ' && p[6] != '\t'))
    {
        message = "the Authorization scheme must be Bearer";
        goto unauthorized;
    }

    for (p += 6; p < last && (*p == ' ' || *p == '\t'); p++) { /* void */ }

    token = p;

    for ( /* void */ ; p < last && *p != ' ' && *p != '\t'; p++) { /* void */ }

    len = p - token;

    for ( /* void */ ; p < last && (*p == ' ' || *p == '\t'); p++) { /* void */ }

    if (len == 0 || p != last) {
        message = "the Authorization header must carry exactly one token";
        goto unauthorized;
    }

    *project = ngx_http_flags_token_project(r, token, len);

    if (*project == NULL) {
        if (count) {
            ngx_http_flags_refused(r, FL_REFUSED_INVALID_TOKEN);
        }

        return ngx_http_flags_refuse_token(r, bare);
    }

    if (out) {
        out->data = token;
        out->len = len;
    }

    /* definitions=runtime: a newer version is taken before the request
     * reads the project (ngx_http_flags_versions.c) */
    if ((*project)->runtime) {
        ngx_http_flags_versions_refresh(
            ngx_http_get_module_main_conf(r, ngx_http_flags_module),
            *project, r->connection->log);
    }

    return NGX_OK;

unauthorized:

    if (count) {
        ngx_http_flags_refused(r, FL_REFUSED_UNAUTHORIZED);
    }

    return ngx_http_flags_unauthorized(r, "unauthorized", "Bearer", message,
                                       bare);
}


/*
 * The project a token belongs to, or NULL.  Every configured token is
 * compared whole, so the time taken says nothing of where a guess went
 * wrong, nor of which project it came close to.
 */

ngx_http_flags_project_t *
ngx_http_flags_token_project(ngx_http_request_t *r, const u_char *token,
    size_t len)
{
    u_char                       pad[NGX_HTTP_FLAGS_TOKEN_PAD], *cand;
    size_t                       n;
    ngx_str_t                   *tokens;
    ngx_uint_t                   i, j, found;
    ngx_http_flags_project_t    *projects;
    ngx_http_flags_main_conf_t  *fmcf;

    fmcf = ngx_http_get_module_main_conf(r, ngx_http_flags_module);

    /* the caller's token padded with zeros to the longest configured one,
     * so that every comparison reads whole words of both */
    cand = pad;

    if (fmcf->token_max > sizeof(pad)) {
        cand = ngx_pnalloc(r->pool, fmcf->token_max);
        if (cand == NULL) {
            return NULL;
        }
    }

    n = ngx_min(len, fmcf->token_max);
    ngx_memcpy(cand, token, n);
    ngx_memzero(cand + n, fmcf->token_max - n);

    found = NGX_CONF_UNSET_UINT;
    projects = fmcf->projects.elts;

    for (i = 0; i < fmcf->projects.nelts; i++) {
        tokens = projects[i].tokens.elts;

        for (j = 0; j < projects[i].tokens.nelts; j++) {
            if (ngx_http_flags_token_equal(tokens[j].data, tokens[j].len,
                                           cand, len))
            {
                found = i;
            }
        }
    }

    if (len == 0 || found == NGX_CONF_UNSET_UINT) {
        return NULL;
    }

    return &projects[found];
}


/* 401 invalid_token: in JSON, or with no body for OFREP (bare). */

ngx_int_t
ngx_http_flags_refuse_token(ngx_http_request_t *r, ngx_uint_t bare)
{
    return ngx_http_flags_unauthorized(r, "invalid_token",
                                       "Bearer error=\"invalid_token\"",
                                       "the token does not belong to any "
                                       "project", bare);
}


static ngx_int_t
ngx_http_flags_unauthorized(ngx_http_request_t *r, const char *code,
    const char *challenge, const char *message, ngx_uint_t bare)
{
    ngx_int_t         rc;
    ngx_table_elt_t  *h;

    h = ngx_http_flags_add_header_z(r, "WWW-Authenticate", challenge);
    if (h == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    /* auth_request copies the challenge of a 401 from this pointer only */
    r->headers_out.www_authenticate = h;

    if (bare) {
        /* as ngx_http_flags_send_error() does before answering */
        r->expect_tested = 1;

        rc = ngx_http_discard_request_body(r);
        if (rc != NGX_OK) {
            return rc;
        }

        return ngx_http_flags_send_empty(r, NGX_HTTP_UNAUTHORIZED);
    }

    return ngx_http_flags_send_error(r, NGX_HTTP_UNAUTHORIZED, code, message);
}


ngx_int_t
ngx_http_flags_method_not_allowed(ngx_http_request_t *r, const char *allow)
{
    if (ngx_http_flags_add_header_z(r, "Allow", allow) == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_http_flags_send_error(r, NGX_HTTP_NOT_ALLOWED,
                                     "method_not_allowed",
                                     "this method is not allowed here");
}


/*
 * The route of a handler that serves several (flags_admin, flags_sdk,
 * flags_ofrep): what follows its location's name in r->uri, less the '/'
 * between them when the name has none at its end ("location /api/sdk"
 * routes "/api/sdk/flags" as "location /api/sdk/" does); r->uri up to
 * route->data is the location's part.  NGX_DECLINED when r->uri does not
 * start with the name (a regular expression or a named location).
 */

ngx_int_t
ngx_http_flags_route(ngx_http_request_t *r, ngx_str_t *route)
{
    size_t                     n;
    ngx_http_core_loc_conf_t  *clcf;

    clcf = ngx_http_get_module_loc_conf(r, ngx_http_core_module);

    n = clcf->name.len;

    if (r->uri.len < n || ngx_strncmp(r->uri.data, clcf->name.data, n) != 0) {
        return NGX_DECLINED;
    }

    if (n < r->uri.len && r->uri.data[n] == '/'
        && (n == 0 || r->uri.data[n - 1] != '/'))
    {
        n++;
    }

    route->data = r->uri.data + n;
    route->len = r->uri.len - n;

    return NGX_OK;
}


/*
 * 404 not_found for a path that names no route of its location, with the
 * location's real prefix before each of its routes (a NULL-terminated
 * list): "expected /api/sdk/flags or /api/sdk/report", "expected /a/x,
 * /a/y or /a/z".  A prefix location's name gets a '/' when it has none at
 * its end (the handlers take "/api/sdk" and "/api/sdk/" alike); an exact
 * location shows its name up to the last '/', where its route would
 * start.  A regular expression or a named location has no prefix to show.
 */

ngx_int_t
ngx_http_flags_route_not_found(ngx_http_request_t *r,
    const char *const *routes)
{
    u_char                    *msg, *p;
    size_t                     len;
    ngx_str_t                  base;
    ngx_uint_t                 prefix, slash, i, n;
    ngx_http_core_loc_conf_t  *clcf;

    /* final before the body is read: no "100 Continue" */
    r->expect_tested = 1;

    clcf = ngx_http_get_module_loc_conf(r, ngx_http_core_module);

    prefix = !clcf->named && !clcf->noname;
#if (NGX_PCRE)
    prefix = prefix && clcf->regex == NULL;
#endif

    base = clcf->name;
    slash = 0;

    if (!prefix) {
        return ngx_http_flags_send_error(r, NGX_HTTP_NOT_FOUND, "not_found",
                                         "this location has no prefix to "
                                         "route from");
    }

    if (clcf->exact_match) {
        while (base.len && base.data[base.len - 1] != '/') {
            base.len--;
        }

    } else if (base.len == 0 || base.data[base.len - 1] != '/') {
        slash = 1;
    }

    len = sizeof("expected ") - 1;

    for (n = 0; routes[n]; n++) {
        /* each route, and ", " or " or " before all but the first */
        len += sizeof(" or ") - 1 + base.len + slash + ngx_strlen(routes[n]);
    }

    msg = ngx_pnalloc(r->pool, len);
    if (msg == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    p = ngx_cpymem(msg, "expected ", sizeof("expected ") - 1);

    for (i = 0; i < n; i++) {
        if (i + 1 == n && i > 0) {
            p = ngx_cpymem(p, " or ", sizeof(" or ") - 1);

        } else if (i > 0) {
            p = ngx_cpymem(p, ", ", sizeof(", ") - 1);
        }

        p = ngx_sprintf(p, "%V%s%s", &base, slash ? "/" : "", routes[i]);
    }

    return ngx_http_flags_send_error_len(r, NGX_HTTP_NOT_FOUND, "not_found",
                                         msg, p - msg);
}


/* A response header; name must outlive the request (a literal). */

ngx_table_elt_t *
ngx_http_flags_add_header(ngx_http_request_t *r, const char *name,
    u_char *value, size_t len)
{
    ngx_table_elt_t  *h;

    h = ngx_list_push(&r->headers_out.headers);
    if (h == NULL) {
        return NULL;
    }

    h->hash = 1;
    h->key.data = (u_char *) name;
    h->key.len = ngx_strlen(name);
    h->value.data = value;
    h->value.len = len;
    h->lowcase_key = NULL;

    return h;
}


static ngx_table_elt_t *
ngx_http_flags_add_header_z(ngx_http_request_t *r, const char *name,
    const char *value)
{
    return ngx_http_flags_add_header(r, name, (u_char *) value,
                                     ngx_strlen(value));
}


/*
 * {"error": code, "message": message}.  Handlers answer errors themselves:
 * returning a status would make nginx send its HTML error page.
 */

ngx_int_t
ngx_http_flags_send_error(ngx_http_request_t *r, ngx_uint_t status,
    const char *code, const char *message)
{
    /*
     * An error is final whether or not the body was read: a client that
     * waits for "100 Continue" gets this status instead (RFC 7231 5.1.1),
     * as nginx answers an over-long client_max_body_size; the body it may
     * still send is discarded, so keep-alive goes on.
     */
    r->expect_tested = 1;

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "flags: %ui %s", status, code);

    return ngx_http_flags_send_error_len(r, status, code,
                                         (const u_char *) message,
                                         ngx_strlen(message));
}


/*
 * ngx_http_flags_send_error() takes the message as a C string; this one
 * takes its length, for messages that echo client bytes and so may hold a
 * NUL.  The body is the same {"error":code,"message":message}.
 */

ngx_int_t
ngx_http_flags_send_error_len(ngx_http_request_t *r, ngx_uint_t status,
    const char *code, const u_char *message, size_t len)
{
    u_char     *body;
    size_t      n;
    ngx_int_t   rc;

    /* unread bodies would be taken for the next request on keep-alive */
    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    body = ngx_pnalloc(r->pool, fl_error_json_bound(ngx_strlen(code), len));
    if (body == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    n = fl_error_json(0, code, (const char *) message, len, (char *) body);

    return ngx_http_flags_send_json(r, status, body, n);
}


ngx_int_t
ngx_http_flags_send_json(ngx_http_request_t *r, ngx_uint_t status,
    u_char *body, size_t len)
{
    ngx_str_set(&r->headers_out.content_type, "application/json");
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    r->headers_out.content_type_lowcase = NULL;

    /* answers are per user and per moment: no cache may keep them */
    if (ngx_http_flags_add_header_z(r, "Cache-Control", "no-store") == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_http_flags_send_body(r, status, body, len);
}


/* A whole answer from memory, with the Content-Type the caller set. */

ngx_int_t
ngx_http_flags_send_body(ngx_http_request_t *r, ngx_uint_t status,
    u_char *body, size_t len)
{
    ngx_int_t     rc;
    ngx_buf_t    *b;
    ngx_chain_t   out;

    r->headers_out.status = status;
    r->headers_out.content_length_n = len;

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    b = ngx_calloc_buf(r->pool);
    if (b == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    b->pos = body;
    b->last = body + len;
    b->memory = 1;
    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;

    out.buf = b;
    out.next = NULL;

    return ngx_http_output_filter(r, &out);
}


ngx_int_t
ngx_http_flags_send_empty(ngx_http_request_t *r, ngx_uint_t status)
{
    r->headers_out.status = status;
    r->headers_out.content_length_n = 0;
    r->header_only = 1;

    /* like HEAD in the static module: the header is the whole answer */
    return ngx_http_send_header(r);
}


ngx_http_flags_project_t *
ngx_http_flags_find_project(ngx_http_flags_main_conf_t *fmcf, ngx_str_t *name)
{
    ngx_uint_t                 i;
    ngx_http_flags_project_t  *project;

    project = fmcf->projects.elts;

    for (i = 0; i < fmcf->projects.nelts; i++) {
        if (project[i].name.len == name->len
            && ngx_strncmp(project[i].name.data, name->data, name->len) == 0)
        {
            return &project[i];
        }
    }

    return NULL;
}


/* Bytes of the request body read so far (all of it in a body handler). */

off_t
ngx_http_flags_body_size(ngx_http_request_t *r)
{
    off_t         size;
    ngx_chain_t  *cl;

    size = 0;

    if (r->request_body) {
        for (cl = r->request_body->bufs; cl; cl = cl->next) {
            size += ngx_buf_size(cl->buf);
        }
    }

    return size;
}


/*
 * Hands the request body to fn piece by piece, whether nginx kept it in
 * memory buffers, spooled it to a temporary file, or both.  fn returns
 * NGX_OK to go on, NGX_DONE to stop early; reading errors give NGX_ERROR.
 */

ngx_int_t
ngx_http_flags_body_pieces(ngx_http_request_t *r,
    ngx_int_t (*fn)(void *ctx, u_char *p, size_t len), void *ctx)
{
    u_char       *buf;
    off_t         pos;
    size_t        len;
    ssize_t       n;
    ngx_int_t     rc;
    ngx_buf_t    *b;
    ngx_chain_t  *cl;

    if (r->request_body == NULL) {
        return NGX_OK;
    }

    buf = NULL;

    for (cl = r->request_body->bufs; cl; cl = cl->next) {
        b = cl->buf;

        if (ngx_buf_in_memory(b)) {
            if (b->last > b->pos) {
                rc = fn(ctx, b->pos, b->last - b->pos);
                if (rc != NGX_OK) {
                    return rc == NGX_DONE ? NGX_OK : rc;
                }
            }
            continue;
        }

        if (!b->in_file || b->file == NULL) {
            continue;
        }

        if (buf == NULL) {
            buf = ngx_palloc(r->pool, 8192);
            if (buf == NULL) {
                return NGX_ERROR;
            }
        }

        for (pos = b->file_pos; pos < b->file_last; pos += n) {
            len = (size_t) ngx_min(b->file_last - pos, 8192);

            n = ngx_read_file(b->file, buf, len, pos);
            if (n <= 0) {
                return NGX_ERROR;
            }

            rc = fn(ctx, buf, n);
            if (rc != NGX_OK) {
                return rc == NGX_DONE ? NGX_OK : rc;
            }
        }
    }

    return NGX_OK;
}


/*
 * The request body in one piece, as the core's readers take it: the
 * buffer nginx read it into when there is only one, else a copy of its
 * pieces in the request's pool.  NGX_DECLINED when it is over max bytes
 * (what arrived is measured: a chunked body declares no length),
 * NGX_ERROR when it cannot be read.
 */

ngx_int_t
ngx_http_flags_body_whole(ngx_http_request_t *r, size_t max, ngx_str_t *body)
{
    off_t                  size;
    ngx_chain_t           *cl;
    ngx_http_flags_copy_t  copy;

    size = ngx_http_flags_body_size(r);

    if (size > (off_t) max) {
        return NGX_DECLINED;
    }

    cl = r->request_body ? r->request_body->bufs : NULL;

    if (cl != NULL && cl->next == NULL && ngx_buf_in_memory(cl->buf)) {
        body->data = cl->buf->pos;
        body->len = cl->buf->last - cl->buf->pos;
        return NGX_OK;
    }

    body->data = ngx_pnalloc(r->pool, (size_t) size + 1);
    if (body->data == NULL) {
        return NGX_ERROR;
    }

    copy.pos = body->data;
    copy.end = body->data + size;

    if (ngx_http_flags_body_pieces(r, ngx_http_flags_copy_piece, &copy)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    body->len = copy.pos - body->data;

    return NGX_OK;
}


static ngx_int_t
ngx_http_flags_copy_piece(void *ctx, u_char *p, size_t len)
{
    ngx_http_flags_copy_t  *copy = ctx;

    if (len > (size_t) (copy->end - copy->pos)) {
        return NGX_ERROR;               /* more than was measured */
    }

    copy->pos = ngx_cpymem(copy->pos, p, len);

    return NGX_OK;
}


/*
 * The ETag header, known to nginx as such (the gzip filter weakens it when
 * it compresses).  The handlers turn nginx's own conditional filter off
 * (r->disable_not_modified): it would take "If-None-Match: *" as a match
 * without looking at the tag.
 */

ngx_int_t
ngx_http_flags_set_etag(ngx_http_request_t *r, uint64_t etag)
{
    u_char  text[FL_ETAG_LEN];

    (void) fl_etag_format(etag, (char *) text);

    return ngx_http_flags_etag_text(r, text);
}


/* If-None-Match names the answer's tag (text as sent, value): 304. */

ngx_uint_t
ngx_http_flags_none_match(ngx_http_request_t *r, const u_char *text,
    uint64_t etag)
{
    ngx_table_elt_t  *inm;

    inm = r->headers_in.if_none_match;

    return inm != NULL
           && ((inm->value.len == FL_ETAG_LEN
                && ngx_memcmp(inm->value.data, text, FL_ETAG_LEN) == 0)
               || fl_etag_none_match((const char *) inm->value.data,
                                     inm->value.len, etag));
}


/* The answer's tag as the ETag header, from memory of its own. */

ngx_int_t
ngx_http_flags_etag_text(ngx_http_request_t *r, const u_char *text)
{
    u_char           *value;
    ngx_table_elt_t  *h;

    /* a copy in r's pool: the text may be on the caller's stack, or in a
     * memo entry that goes before the log phase */
    value = ngx_pnalloc(r->pool, FL_ETAG_LEN);
    if (value == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_memcpy(value, text, FL_ETAG_LEN);

    h = ngx_http_flags_add_header(r, "ETag", value, FL_ETAG_LEN);
    if (h == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    r->headers_out.etag = h;

    return NGX_OK;
}


ngx_int_t
ngx_http_flags_send_not_modified(ngx_http_request_t *r)
{
    if (ngx_http_flags_add_header(r, "Cache-Control", (u_char *) "no-store", 8)
        == NULL)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    r->headers_out.status = NGX_HTTP_NOT_MODIFIED;
    /* a 304 has no body, and no Content-Length but the 200's */
    r->headers_out.content_length_n = -1;
    r->header_only = 1;

    return ngx_http_send_header(r);
}


/*
 * 413 for a body over max bytes: "<what> is larger than N bytes".  Reports
 * (count) are counted as refused for flags_metrics.
 */

ngx_int_t
ngx_http_flags_too_large(ngx_http_request_t *r, size_t max, const char *what,
    ngx_uint_t count)
{
    u_char  msg[128];

    ngx_snprintf(msg, sizeof(msg), "%s is larger than %uz bytes%Z", what, max);

    if (count) {
        ngx_http_flags_refused(r, FL_REFUSED_PAYLOAD_TOO_LARGE);
    }

    return ngx_http_flags_send_error(r, NGX_HTTP_REQUEST_ENTITY_TOO_LARGE,
                                     "payload_too_large", (char *) msg);
}


/*
 * "application/json", any case, optionally followed by parameters:
 * "application/json; charset=utf-8", "Application/JSON ;charset=UTF-8".
 */

ngx_int_t
ngx_http_flags_is_json(ngx_table_elt_t *h)
{
    u_char  *p, *last;

    if (h == NULL) {
        return 0;
    }

    p = h->value.data;
    last = p + h->value.len;

    while (p < last && (*p == ' ' || *p == '\t')) {
        p++;
    }

    /* the lower-case spelling, which clients send, by one compare of
     * whole words; any other case byte by byte */
    if ((size_t) (last - p) < sizeof("application/json") - 1
        || (ngx_memcmp(p, "application/json",
                       sizeof("application/json") - 1) != 0
            && ngx_strncasecmp(p, (u_char *) "application/json",
                               sizeof("application/json") - 1) != 0))
    {
        return 0;
    }

    p += sizeof("application/json") - 1;

    while (p < last && (*p == ' ' || *p == '\t')) {
        p++;
    }

    return p == last || *p == ';';
}


/*
 * The start of a handler that takes a JSON body of at most
 * flags_max_report_size bytes: 415 unless Content-Type is JSON, 413 for a
 * declared length over the limit (before a byte of the body is read), then
 * ctx becomes the request's and the body is read; post runs once it is
 * in.  what and count as for ngx_http_flags_too_large().
 */

ngx_int_t
ngx_http_flags_read_json_body(ngx_http_request_t *r, void *ctx,
    const char *what, ngx_uint_t count, ngx_http_client_body_handler_pt post)
{
    ngx_http_flags_loc_conf_t  *flcf;

    if (!ngx_http_flags_is_json(r->headers_in.content_type)) {
        if (count) {
            ngx_http_flags_refused(r, FL_REFUSED_UNSUPPORTED_MEDIA_TYPE);
        }

        return ngx_http_flags_send_error(r, NGX_HTTP_UNSUPPORTED_MEDIA_TYPE,
                                         "unsupported_media_type",
                                         "Content-Type must be "
                                         "application/json");
    }

    flcf = ngx_http_get_module_loc_conf(r, ngx_http_flags_module);

    if (r->headers_in.content_length_n > (off_t) flcf->max_report_size) {
        return ngx_http_flags_too_large(r, flcf->max_report_size, what, count);
    }

    return ngx_http_flags_read_body(r, ctx, post);
}


/*
 * ctx becomes the request's and the body is read; post runs once it is
 * in.  NGX_DONE, or the status of an error nginx met reading it.
 */

ngx_int_t
ngx_http_flags_read_body(ngx_http_request_t *r, void *ctx,
    ngx_http_client_body_handler_pt post)
{
    ngx_int_t  rc;

    ngx_http_set_ctx(r, ctx, ngx_http_flags_module);

    rc = ngx_http_read_client_request_body(r, post);

    if (rc >= NGX_HTTP_SPECIAL_RESPONSE) {
        return rc;
    }

    return NGX_DONE;
}


/* A content handler's directive (cmd->post is the handler): the module's
 * directives and the handlers' own (flags_dashboard) set it alike. */

char *
ngx_http_flags_set_handler(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_flags_loc_conf_t *flcf = conf;

    ngx_http_core_loc_conf_t  *clcf;

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);

    /* the same words whichever comes first (the other order: merge) */
    if (clcf->handler) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"%V\" conflicts with another content handler "
                           "(such as proxy_pass) in this location",
                           &cmd->name);
        return NGX_CONF_ERROR;
    }

    clcf->handler = (ngx_http_handler_pt) cmd->post;

    flcf->handler = clcf->handler;
    flcf->handler_directive = &cmd->name;
    flcf->handler_file = cf->conf_file->file.name;
    flcf->handler_line = cf->conf_file->line;

    return NGX_CONF_OK;
}
