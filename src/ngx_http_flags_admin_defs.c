/*
 * ngx_http_flags_admin_defs.c - flags_admin's definitions routes
 * (docs/definitions.md):
 *
 *   {loc}definitions/<project>                  GET, PUT
 *   {loc}definitions/<project>/flags/<flag>     PUT, DELETE
 *   {loc}definitions/<project>/history          GET
 *   {loc}definitions/<project>/versions/<N>     GET
 *
 * A write: the body read (at most flags_definitions_max_size), the
 * project's writer lock taken (another worker's write: tried again every
 * few milliseconds), the new document made from the current one and
 * validated by the code that validates the file for "nginx -t", the
 * version stored on disk and published (ngx_http_flags_versions.c),
 * applied here, and answered once every worker serves it.  ?dryRun=1
 * stops before the lock: validated, the difference answered.
 */

#include "ngx_http_flags_module.h"


#define NGX_HTTP_FLAGS_DEFS_RETRY       5        /* ms, the lock is taken */
#define NGX_HTTP_FLAGS_DEFS_LOCK_WAIT   3000     /* ms, then 503 */
#define NGX_HTTP_FLAGS_DEFS_ACK_POLL    5        /* ms */
#define NGX_HTTP_FLAGS_DEFS_ACK_WAIT    10000    /* ms, then 503 */


typedef enum {
    NGX_HTTP_FLAGS_DEFS_DOCUMENT = 0,
    NGX_HTTP_FLAGS_DEFS_FLAG,
    NGX_HTTP_FLAGS_DEFS_HISTORY,
    NGX_HTTP_FLAGS_DEFS_VERSION,
    NGX_HTTP_FLAGS_DEFS_NONE
} ngx_http_flags_defs_route_e;


typedef struct {
    ngx_http_flags_main_conf_t   *fmcf;
    ngx_http_flags_project_t     *project;
    ngx_uint_t                    route;
    ngx_str_t                     flag;
    uint64_t                      if_match;  /* 0: none; else v<N> + 1 */
    ngx_uint_t                    dry_run;
    ngx_str_t                     body;
    ngx_event_t                   wait;
    ngx_msec_t                    started;
    ngx_atomic_uint_t             seq;       /* the publication awaited */
    uint64_t                      version;
    ngx_str_t                     answer;
    ngx_uint_t                    locked;
    /* flags_sync: the version was proposed to the fleet; what its log
     * line says once the fleet took it */
    ngx_uint_t                    proposed;
    fl_defs_change_t             *changes;
    size_t                        nchanges;
    ngx_str_t                     who;
    /* a local write whose files a thread writes: the new snapshot, its
     * document's room in the zone, the job */
    ngx_http_flags_defs_t        *defs;
    u_char                       *buf;
    ngx_http_flags_versions_job_t *job;
} ngx_http_flags_defs_ctx_t;


static ngx_uint_t ngx_http_flags_defs_route(ngx_str_t *route,
    ngx_str_t *project, ngx_str_t *flag, uint64_t *version);
static ngx_int_t ngx_http_flags_defs_get(ngx_http_request_t *r,
    ngx_http_flags_project_t *project);
static ngx_int_t ngx_http_flags_defs_history(ngx_http_request_t *r,
    ngx_http_flags_project_t *project);
static ngx_int_t ngx_http_flags_defs_version(ngx_http_request_t *r,
    ngx_http_flags_project_t *project, uint64_t version);
static ngx_int_t ngx_http_flags_defs_send_doc(ngx_http_request_t *r,
    uint64_t version, u_char *doc, size_t len);
static ngx_int_t ngx_http_flags_defs_if_match(ngx_http_request_t *r,
    uint64_t *out);
static void ngx_http_flags_defs_body(ngx_http_request_t *r);
static void ngx_http_flags_defs_wake(ngx_event_t *ev);
static ngx_int_t ngx_http_flags_defs_step(ngx_http_request_t *r,
    ngx_http_flags_defs_ctx_t *ctx);
static ngx_int_t ngx_http_flags_defs_write(ngx_http_request_t *r,
    ngx_http_flags_defs_ctx_t *ctx);
static ngx_int_t ngx_http_flags_defs_store(ngx_http_request_t *r,
    ngx_http_flags_defs_ctx_t *ctx, ngx_http_flags_defs_t *old,
    ngx_http_flags_defs_t *defs, fl_defs_change_t *c, size_t n);
static ngx_int_t ngx_http_flags_defs_seed(ngx_http_request_t *r,
    ngx_http_flags_project_t *project, ngx_http_flags_defs_t *old,
    ngx_http_flags_versions_job_t *job);
static ngx_int_t ngx_http_flags_defs_stored(ngx_http_request_t *r,
    ngx_http_flags_defs_ctx_t *ctx);
static ngx_int_t ngx_http_flags_defs_written(ngx_http_request_t *r,
    ngx_http_flags_defs_ctx_t *ctx, ngx_int_t rc);
#if (NGX_THREADS)
static void ngx_http_flags_defs_disk(void *data, ngx_log_t *log);
static void ngx_http_flags_defs_disk_done(ngx_event_t *ev);
#endif
static ngx_int_t ngx_http_flags_defs_answer(ngx_http_request_t *r,
    ngx_http_flags_defs_ctx_t *ctx);
static ngx_int_t ngx_http_flags_defs_fleet(ngx_http_request_t *r,
    ngx_http_flags_defs_ctx_t *ctx);
static ngx_int_t ngx_http_flags_defs_first_entry(ngx_http_request_t *r,
    ngx_http_flags_defs_t *defs, ngx_str_t *entry);
static void ngx_http_flags_defs_cleanup(void *data);
static void ngx_http_flags_defs_who(ngx_http_request_t *r, ngx_str_t *who);
static void ngx_http_flags_defs_log(ngx_http_request_t *r,
    ngx_http_flags_project_t *project, uint64_t version, ngx_str_t *who,
    fl_defs_change_t *c, size_t n);


ngx_int_t
ngx_http_flags_admin_defs_handler(ngx_http_request_t *r, ngx_str_t *route)
{
    uint64_t                     version;
    ngx_int_t                    rc;
    ngx_str_t                    name, flag, val;
    ngx_uint_t                   kind;
    ngx_pool_cleanup_t          *cln;
    ngx_http_flags_project_t    *project;
    ngx_http_flags_defs_ctx_t   *ctx;
    ngx_http_flags_loc_conf_t   *flcf;
    ngx_http_flags_main_conf_t  *fmcf;

    static const char *const     routes[] = {
        "definitions/<project>",
        "definitions/<project>/flags/<flag>",
        "definitions/<project>/history",
        "definitions/<project>/versions/<version>",
        NULL
    };

    version = 0;
    ngx_str_null(&flag);

    /* If-Match is this route's own compare-and-set (412 before anything
     * is written); nginx's filter would compare it with the answer's ETag */
    r->disable_not_modified = 1;

    kind = ngx_http_flags_defs_route(route, &name, &flag, &version);

    if (kind == NGX_HTTP_FLAGS_DEFS_NONE) {
        return ngx_http_flags_route_not_found(r, routes);
    }

    switch (kind) {

    case NGX_HTTP_FLAGS_DEFS_DOCUMENT:
        if (!(r->method & (NGX_HTTP_GET|NGX_HTTP_HEAD|NGX_HTTP_PUT))) {
            return ngx_http_flags_method_not_allowed(r, "GET, HEAD, PUT");
        }
        break;

    case NGX_HTTP_FLAGS_DEFS_FLAG:
        if (!(r->method & (NGX_HTTP_PUT|NGX_HTTP_DELETE))) {
            return ngx_http_flags_method_not_allowed(r, "PUT, DELETE");
        }
        break;

    default:
        if (!(r->method & (NGX_HTTP_GET|NGX_HTTP_HEAD))) {
            return ngx_http_flags_method_not_allowed(r, "GET, HEAD");
        }
    }

    fmcf = ngx_http_get_module_main_conf(r, ngx_http_flags_module);

    project = ngx_http_flags_find_project(fmcf, &name);
    if (project == NULL) {
        return ngx_http_flags_admin_unknown(r, "unknown_project", NULL,
                                            &name);
    }

    if (!project->runtime) {
        r->expect_tested = 1;
        return ngx_http_flags_send_error(r, NGX_HTTP_CONFLICT,
                                         "definitions_in_file",
                                         "the project's definitions are its "
                                         "flags file (definitions=file): "
                                         "edit the file and reload");
    }

    if (project->pversion == NULL) {
        r->expect_tested = 1;
        return ngx_http_flags_send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                         "zone_full",
                                         "the flags zone had no room for "
                                         "this project; increase flags_zone");
    }

    /*
     * this worker serves what the host serves; a snapshot made here
     * outlives the request (its pool keeps the log it is made with), so
     * it is made with the worker's log, never the connection's
     */
    ngx_http_flags_versions_refresh(fmcf, project, ngx_cycle->log);

    if (r->method & (NGX_HTTP_GET|NGX_HTTP_HEAD)) {
        rc = ngx_http_discard_request_body(r);
        if (rc != NGX_OK) {
            return rc;
        }

        if (kind == NGX_HTTP_FLAGS_DEFS_HISTORY) {
            return ngx_http_flags_defs_history(r, project);
        }

        if (kind == NGX_HTTP_FLAGS_DEFS_VERSION) {
            return ngx_http_flags_defs_version(r, project, version);
        }

        return ngx_http_flags_defs_get(r, project);
    }

    ctx = ngx_pcalloc(r->pool, sizeof(ngx_http_flags_defs_ctx_t));
    if (ctx == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx->fmcf = fmcf;
    ctx->project = project;
    ctx->route = kind;
    ctx->flag = flag;

    if (ngx_http_flags_defs_if_match(r, &ctx->if_match) != NGX_OK) {
        r->expect_tested = 1;
        ngx_http_flags_versions_rejected(project,
                                         NGX_HTTP_FLAGS_REJECTED_CONFLICT);
        return ngx_http_flags_send_error(r, NGX_HTTP_PRECONDITION_FAILED,
                                         "version_conflict",
                                         "If-Match must name a version as "
                                         "its ETag does: \"v<N>\"");
    }

    ctx->dry_run = ngx_http_arg(r, (u_char *) "dryRun", 6, &val) == NGX_OK
                   && ((val.len == 1 && val.data[0] == '1')
                       || (val.len == 4
                           && ngx_strncmp(val.data, "true", 4) == 0));

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    cln->handler = ngx_http_flags_defs_cleanup;
    cln->data = ctx;

    ctx->wait.handler = ngx_http_flags_defs_wake;
    ctx->wait.data = r;
    ctx->wait.log = r->connection->log;

    ngx_http_set_ctx(r, ctx, ngx_http_flags_module);

    if (r->method == NGX_HTTP_DELETE) {
        rc = ngx_http_discard_request_body(r);
        if (rc != NGX_OK) {
            return rc;
        }

        r->main->count++;
        ngx_http_flags_defs_body(r);
        return NGX_DONE;
    }

    flcf = ngx_http_get_module_loc_conf(r, ngx_http_flags_module);

    /* refused before a byte is read, without "100 Continue" */
    if (r->headers_in.content_length_n > (off_t) flcf->definitions_max_size)
    {
        r->expect_tested = 1;
        ngx_http_flags_versions_rejected(project,
                                         NGX_HTTP_FLAGS_REJECTED_TOO_LARGE);
        return ngx_http_flags_too_large(r, flcf->definitions_max_size,
                                        "the definitions", 0);
    }

    rc = ngx_http_read_client_request_body(r, ngx_http_flags_defs_body);
    if (rc >= NGX_HTTP_SPECIAL_RESPONSE) {
        return rc;
    }

    return NGX_DONE;
}


/* <project>, <project>/flags/<flag>, <project>/history, .../versions/<N> */

static ngx_uint_t
ngx_http_flags_defs_route(ngx_str_t *route, ngx_str_t *project,
    ngx_str_t *flag, uint64_t *version)
{
    u_char  *p, *last, *slash;

    p = route->data;
    last = p + route->len;

    slash = ngx_strlchr(p, last, '/');

    project->data = p;
    project->len = (slash ? slash : last) - p;

    if (project->len == 0) {
        return NGX_HTTP_FLAGS_DEFS_NONE;
    }

    if (slash == NULL) {
        return NGX_HTTP_FLAGS_DEFS_DOCUMENT;
    }

    p = slash + 1;

    if ((size_t) (last - p) == sizeof("history") - 1
        && ngx_strncmp(p, "history", sizeof("history") - 1) == 0)
    {
        return NGX_HTTP_FLAGS_DEFS_HISTORY;
    }

    if ((size_t) (last - p) > sizeof("flags/") - 1
        && ngx_strncmp(p, "flags/", sizeof("flags/") - 1) == 0)
    {
        flag->data = p + sizeof("flags/") - 1;
        flag->len = last - flag->data;

        return ngx_strlchr(flag->data, last, '/') ? NGX_HTTP_FLAGS_DEFS_NONE
                                                 : NGX_HTTP_FLAGS_DEFS_FLAG;
    }

    if ((size_t) (last - p) > sizeof("versions/") - 1
        && ngx_strncmp(p, "versions/", sizeof("versions/") - 1) == 0)
    {
        p += sizeof("versions/") - 1;
        *version = 0;

        if (last - p > 19 || *p == '0') {
            return NGX_HTTP_FLAGS_DEFS_NONE;
        }

        for ( /* void */ ; p < last; p++) {
            if (*p < '0' || *p > '9') {
                return NGX_HTTP_FLAGS_DEFS_NONE;
            }

            *version = *version * 10 + (*p - '0');
        }

        return NGX_HTTP_FLAGS_DEFS_VERSION;
    }

    return NGX_HTTP_FLAGS_DEFS_NONE;
}


/* --------------------------------------------------------------- reads */


static ngx_int_t
ngx_http_flags_defs_get(ngx_http_request_t *r,
    ngx_http_flags_project_t *project)
{
    ngx_http_flags_defs_t  *defs;

    defs = ngx_http_flags_defs(project);

    return ngx_http_flags_defs_send_doc(r, defs->version, defs->doc,
                                        defs->doc_len);
}


static ngx_int_t
ngx_http_flags_defs_send_doc(ngx_http_request_t *r, uint64_t version,
    u_char *doc, size_t len)
{
    u_char     *p, tag[NGX_INT64_LEN + 4];
    ngx_buf_t  *b;

    p = ngx_sprintf(tag, "\"v%uL\"", version);

    if (ngx_http_flags_add_header(r, "ETag", tag, p - tag) == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    /* the document as stored: a copy, the snapshot may go meanwhile */
    b = ngx_create_temp_buf(r->pool, len ? len : 1);
    if (b == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    b->last = ngx_cpymem(b->pos, doc, len);

    return ngx_http_flags_send_json(r, NGX_HTTP_OK, b->pos, len);
}


static ngx_int_t
ngx_http_flags_defs_history(ngx_http_request_t *r,
    ngx_http_flags_project_t *project)
{
    u_char                      *out;
    size_t                       size, len, lens[NGX_HTTP_FLAGS_VERSIONS_KEEP];
    uint64_t                     versions[NGX_HTTP_FLAGS_VERSIONS_KEEP];
    ngx_str_t                    entry, doc;
    ngx_uint_t                   i, n, m;
    const char                  *entries[NGX_HTTP_FLAGS_VERSIONS_KEEP];
    ngx_http_flags_defs_t       *defs;
    ngx_http_flags_main_conf_t  *fmcf;

    fmcf = ngx_http_get_module_main_conf(r, ngx_http_flags_module);

    n = ngx_http_flags_versions_list(r->pool, fmcf, project, versions,
                                     NGX_HTTP_FLAGS_VERSIONS_KEEP);
    m = 0;

    for (i = 0; i < n; i++) {
        if (ngx_http_flags_versions_read(r->pool, fmcf, project, versions[i],
                                         &entry, &doc, NULL,
                                         r->connection->log)
            == NGX_OK)
        {
            entries[m] = (const char *) entry.data;
            lens[m++] = entry.len;
        }
    }

    if (m == 0) {
        /* nothing written yet: the file is version 1 */
        defs = ngx_http_flags_defs(project);

        if (ngx_http_flags_defs_first_entry(r, defs, &entry) != NGX_OK) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        entries[0] = (const char *) entry.data;
        lens[0] = entry.len;
        m = 1;
    }

    size = fl_defs_history_json_bound(lens, m);
    out = ngx_pnalloc(r->pool, size);
    if (out == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    len = fl_defs_history_json(entries, lens, m, (char *) out, size);

    return ngx_http_flags_send_json(r, NGX_HTTP_OK, out, len);
}


static ngx_int_t
ngx_http_flags_defs_version(ngx_http_request_t *r,
    ngx_http_flags_project_t *project, uint64_t version)
{
    ngx_int_t                    rc;
    ngx_str_t                    entry, doc;
    ngx_http_flags_defs_t       *defs;
    ngx_http_flags_main_conf_t  *fmcf;

    fmcf = ngx_http_get_module_main_conf(r, ngx_http_flags_module);

    rc = ngx_http_flags_versions_read(r->pool, fmcf, project, version,
                                      &entry, &doc, NULL, r->connection->log);

    if (rc == NGX_OK) {
        return ngx_http_flags_defs_send_doc(r, version, doc.data, doc.len);
    }

    defs = ngx_http_flags_defs(project);

    if (rc == NGX_DECLINED && version == defs->version) {
        /* the file's version 1, not written yet */
        return ngx_http_flags_defs_send_doc(r, version, defs->doc,
                                            defs->doc_len);
    }

    if (rc == NGX_DECLINED) {
        return ngx_http_flags_send_error(r, NGX_HTTP_NOT_FOUND, "no_version",
                                         "this version is not kept (the "
                                         "last 50 are)");
    }

    return NGX_HTTP_INTERNAL_SERVER_ERROR;
}


/* If-Match: "v<N>" -> N + 1; "*" -> the current version, whatever it is;
 * absent -> 0.  NGX_ERROR when it names no version. */

static ngx_int_t
ngx_http_flags_defs_if_match(ngx_http_request_t *r, uint64_t *out)
{
    u_char           *p, *last;
    uint64_t          v;
    ngx_table_elt_t  *h;

    h = r->headers_in.if_match;
    *out = 0;

    if (h == NULL) {
        return NGX_OK;
    }

    p = h->value.data;
    last = p + h->value.len;

    if (h->value.len == 1 && *p == '*') {
        return NGX_OK;
    }

    if (last - p < 4 || p[0] != '"' || p[1] != 'v' || last[-1] != '"'
        || last - p > 23 || p[2] == '0')
    {
        return NGX_ERROR;
    }

    v = 0;

    for (p += 2; p < last - 1; p++) {
        if (*p < '0' || *p > '9') {
            return NGX_ERROR;
        }

        v = v * 10 + (*p - '0');
    }

    *out = v + 1;

    return NGX_OK;
}


/* -------------------------------------------------------------- writes */


/* The body is read (or discarded): the write's first step. */

static void
ngx_http_flags_defs_body(ngx_http_request_t *r)
{
    ngx_int_t                   rc;
    ngx_http_flags_defs_ctx_t  *ctx;
    ngx_http_flags_loc_conf_t  *flcf;

    ctx = ngx_http_get_module_ctx(r, ngx_http_flags_module);
    flcf = ngx_http_get_module_loc_conf(r, ngx_http_flags_module);

    if (r->method == NGX_HTTP_PUT) {
        rc = ngx_http_flags_body_whole(r, flcf->definitions_max_size,
                                       &ctx->body);

        if (rc == NGX_DECLINED) {
            ngx_http_flags_versions_rejected(ctx->project,
                                        NGX_HTTP_FLAGS_REJECTED_TOO_LARGE);
            ngx_http_finalize_request(r,
                ngx_http_flags_too_large(r, flcf->definitions_max_size,
                                         "the definitions", 0));
            return;
        }

        if (rc != NGX_OK) {
            ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
            return;
        }
    }

    ctx->started = ngx_current_msec;

    rc = ngx_http_flags_defs_step(r, ctx);

    if (rc != NGX_DONE) {
        ngx_http_finalize_request(r, rc);
    }
}


static void
ngx_http_flags_defs_wake(ngx_event_t *ev)
{
    ngx_int_t                   rc;
    ngx_connection_t           *c;
    ngx_http_request_t         *r;
    ngx_http_flags_defs_ctx_t  *ctx;

    r = ev->data;
    c = r->connection;
    ctx = ngx_http_get_module_ctx(r, ngx_http_flags_module);

    rc = ngx_http_flags_defs_step(r, ctx);

    if (rc != NGX_DONE) {
        /* r may be gone after this */
        ngx_http_finalize_request(r, rc);
    }

    ngx_http_run_posted_requests(c);
}


/*
 * Where the write is: waiting for the lock, or for the workers; NGX_DONE
 * while it waits (a timer wakes it), else the answer's status.
 */

static ngx_int_t
ngx_http_flags_defs_step(ngx_http_request_t *r,
    ngx_http_flags_defs_ctx_t *ctx)
{
    ngx_http_flags_main_conf_t  *fmcf;

    fmcf = ngx_http_get_module_main_conf(r, ngx_http_flags_module);

    if (ctx->proposed && ctx->seq == 0) {
        return ngx_http_flags_defs_fleet(r, ctx);
    }

    if (ctx->seq) {
        /* stored and published: every worker serves it? */
        if (ngx_http_flags_zone_defs_acked(fmcf, ctx->seq)) {
            return ngx_http_flags_defs_answer(r, ctx);
        }

        if (ngx_current_msec - ctx->started
            > NGX_HTTP_FLAGS_DEFS_ACK_WAIT)
        {
            ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                          "flags: project \"%V\": version %uL is stored, "
                          "but a worker did not take it within %d ms",
                          &ctx->project->name, ctx->version,
                          NGX_HTTP_FLAGS_DEFS_ACK_WAIT);
            return ngx_http_flags_send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                             "apply_timeout",
                                             "the version is stored, and a "
                                             "worker has not taken it yet");
        }

        ngx_add_timer(&ctx->wait, NGX_HTTP_FLAGS_DEFS_ACK_POLL);
        return NGX_DONE;
    }

    if (!ctx->dry_run) {
        if (!ngx_http_flags_zone_current(fmcf)) {
            return ngx_http_flags_send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                             "reloading",
                                             "this worker's configuration "
                                             "was replaced; try again");
        }

        if (ngx_http_flags_versions_lock(fmcf, ctx->project) != NGX_OK) {
            if (ngx_current_msec - ctx->started
                > NGX_HTTP_FLAGS_DEFS_LOCK_WAIT)
            {
                return ngx_http_flags_send_error(r,
                           NGX_HTTP_SERVICE_UNAVAILABLE, "definitions_busy",
                           "another write of this project's definitions "
                           "holds the lock");
            }

            ngx_add_timer(&ctx->wait, NGX_HTTP_FLAGS_DEFS_RETRY);
            return NGX_DONE;
        }

        ctx->locked = 1;
    }

    return ngx_http_flags_defs_write(r, ctx);
}


/*
 * The write itself, under the lock (or a dry run): the new document, its
 * validation, the difference, then the version stored and applied.
 */

static ngx_int_t
ngx_http_flags_defs_write(ngx_http_request_t *r,
    ngx_http_flags_defs_ctx_t *ctx)
{
    int                          found;
    char                         err[1024];
    u_char                      *doc;
    size_t                       len, n, size;
    uint64_t                     current;
    fl_alloc_t                   alloc;
    fl_status_t                  st;
    fl_project_t                *core;
    fl_defs_change_t            *c;
    const fl_control_t         **ctl;
    ngx_http_flags_defs_t       *old, *defs;
    ngx_http_flags_project_t    *project;
    ngx_http_flags_main_conf_t  *fmcf;

    fmcf = ngx_http_get_module_main_conf(r, ngx_http_flags_module);
    project = ctx->project;

    /* what the host serves now, this worker included */
    ngx_http_flags_versions_refresh(fmcf, project, ngx_cycle->log);

    old = ngx_http_flags_defs_pin(r, project);
    if (old == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    current = ngx_http_flags_versions_current(project);

    if (ctx->if_match && ctx->if_match - 1 != current) {
        ngx_http_flags_versions_rejected(project,
                                         NGX_HTTP_FLAGS_REJECTED_CONFLICT);
        return ngx_http_flags_send_error(r, NGX_HTTP_PRECONDITION_FAILED,
                                         "version_conflict",
                                         "If-Match names a version that is "
                                         "no longer the current one");
    }

    if (old->version != current) {
        /* the host's version did not load here (logged): no write on it */
        return ngx_http_flags_send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                         "definitions_busy",
                                         "this worker does not serve the "
                                         "current version yet");
    }

    alloc.alloc = ngx_http_flags_pool_alloc;
    alloc.ctx = r->pool;

    switch (ctx->route) {

    case NGX_HTTP_FLAGS_DEFS_FLAG:
        if (r->method == NGX_HTTP_DELETE) {
            st = fl_defs_delete_flag((const char *) old->doc, old->doc_len,
                                     (const char *) ctx->flag.data,
                                     ctx->flag.len, &alloc, (char **) &doc,
                                     &len, &found, err, sizeof(err));
            if (st == FL_OK && !found) {
                return ngx_http_flags_admin_unknown(r, "unknown_flag",
                                                    project, &ctx->flag);
            }

        } else {
            st = fl_defs_put_flag((const char *) old->doc, old->doc_len,
                                  (const char *) ctx->flag.data,
                                  ctx->flag.len,
                                  (const char *) ctx->body.data,
                                  ctx->body.len, &alloc, (char **) &doc,
                                  &len, err, sizeof(err));
        }

        break;

    default:
        doc = ctx->body.data;
        len = ctx->body.len;
        st = FL_OK;
    }

    if (st == FL_ERR_NOMEM) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (st == FL_OK) {
        st = ngx_http_flags_defs_parse(project, doc, len, &core, err,
                                       sizeof(err));
    }

    if (st != FL_OK) {
        ngx_http_flags_versions_rejected(project,
                                         NGX_HTTP_FLAGS_REJECTED_INVALID);
        return ngx_http_flags_send_error(r, NGX_HTTP_BAD_REQUEST,
                                         "invalid_definitions", err);
    }

    /* the difference, and what the changed flags keep */
    n = fl_project_flag_count(old->core) + fl_project_flag_count(core);
    c = ngx_palloc(r->pool, (n + 1) * sizeof(fl_defs_change_t));
    ctl = ngx_palloc(r->pool, (old->nflags + 1) * sizeof(fl_control_t *));

    if (c == NULL || ctl == NULL) {
        fl_project_free(core);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    n = fl_defs_diff(old->core, core, c, n);

    for (size = 0; size < old->nflags; size++) {
        ctl[size] = old->flags[size].ctl;
    }

    ctx->version = (len == old->doc_len
                    && ngx_memcmp(doc, old->doc, len) == 0)
                   ? current : current + 1;

    size = fl_defs_answer_json_bound(old->core, core, c, n);
    ctx->answer.data = ngx_pnalloc(r->pool, size);
    if (ctx->answer.data == NULL) {
        fl_project_free(core);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx->answer.len = fl_defs_answer_json(old->core, core, c, n,
                                          ctx->version, ctl, ctx->dry_run,
                                          (char *) ctx->answer.data, size);

    if (ctx->dry_run || ctx->version == current) {
        /* nothing to store: the same document is the same version */
        fl_project_free(core);
        return ngx_http_flags_defs_answer(r, ctx);
    }

    /* the worker's log: the snapshot's pool outlives the connection */
    defs = ngx_http_flags_defs_make(fmcf, project, doc, len, core,
                                    ctx->version, ngx_http_flags_now_ms(),
                                    ngx_cycle->log);
    if (defs == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx->defs = defs;

    return ngx_http_flags_defs_written(r, ctx,
                                       ngx_http_flags_defs_store(r, ctx, old,
                                                                 defs, c, n));
}


/*
 * After the store (rc: what ngx_http_flags_defs_store() or, once a thread
 * wrote the files, ngx_http_flags_defs_stored() returned): a version
 * published is awaited on every worker, the lock released; anything else
 * frees the new snapshot and is answered (or waits for the fleet).
 */

static ngx_int_t
ngx_http_flags_defs_written(ngx_http_request_t *r,
    ngx_http_flags_defs_ctx_t *ctx, ngx_int_t rc)
{
    if (rc == NGX_DONE) {
        /* a thread writes the files: ngx_http_flags_defs_disk_done() */
        return NGX_DONE;
    }

    /* an error answered by the store returns what sending it returned,
     * NGX_OK too: only a publication (ctx->seq) is a stored version */
    if (rc != NGX_OK || ctx->seq == 0) {
        ngx_destroy_pool(ctx->defs->pool);
        ctx->defs = NULL;

        if (rc == NGX_AGAIN) {
            /* the fleet's: the syncing worker stores it, the lock is
             * held until it has */
            return ngx_http_flags_defs_step(r, ctx);
        }

        if (rc == NGX_BUSY) {
            return ngx_http_flags_send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                             "fleet_unavailable",
                                             "flags_sync cannot reach redis: "
                                             "versions are written to the "
                                             "fleet only, and every host "
                                             "keeps serving the current one");
        }

        if (rc == NGX_ABORT) {
            return ngx_http_flags_send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                             "zone_full",
                                             "the flags zone has no room for "
                                             "this version; increase "
                                             "flags_zone");
        }

        return rc;
    }

    ngx_http_flags_versions_unlock(ctx->fmcf, ctx->project);
    ctx->locked = 0;

    return ngx_http_flags_defs_step(r, ctx);
}


/*
 * defs is version ctx->version: written durably (the file's version 1
 * first, on the first write), published to the host, applied here.
 * NGX_OK with ctx->seq set; else a status, or the error already answered
 * (ctx->seq still 0).  With flags_sync it goes to the fleet instead
 * (ngx_http_flags_sync_defs_propose()): NGX_AGAIN, proposed; NGX_BUSY,
 * Redis is away; NGX_ABORT, no room in the zone.
 */

static ngx_int_t
ngx_http_flags_defs_store(ngx_http_request_t *r,
    ngx_http_flags_defs_ctx_t *ctx, ngx_http_flags_defs_t *old,
    ngx_http_flags_defs_t *defs, fl_defs_change_t *c, size_t n)
{
    u_char                         *buf;
    size_t                          size;
    ngx_int_t                       rc;
    ngx_str_t                       entry, doc, who, host;
#if (NGX_THREADS)
    ngx_thread_task_t              *task;
#endif
    ngx_http_flags_project_t       *project;
    ngx_http_flags_main_conf_t     *fmcf;
    ngx_http_flags_versions_job_t  *job;

    fmcf = ngx_http_get_module_main_conf(r, ngx_http_flags_module);
    project = ctx->project;

    ngx_http_flags_defs_who(r, &who);
    ngx_http_flags_sync_host(fmcf, &host);

    size = fl_defs_entry_json_bound(who.len, host.len, old->core, defs->core,
                                    c, n);
    entry.data = ngx_pnalloc(r->pool, size);
    if (entry.data == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    entry.len = fl_defs_entry_json(defs->version, defs->at_ms,
                                   (const char *) who.data, who.len,
                                   (const char *) host.data, host.len,
                                   old->core, defs->core, c, n,
                                   (char *) entry.data, size);

    /* flags_sync: the fleet's compare-and-set first */
    if (fmcf->sync
        && ngx_http_flags_defs_seed(r, project, old, NULL) != NGX_OK)
    {
        return ngx_http_flags_send_error(r, NGX_HTTP_INSUFFICIENT_STORAGE,
                                         "insufficient_storage",
                                         "the version could not be stored "
                                         "(see the error log)");
    }

    rc = ngx_http_flags_sync_defs_propose(fmcf, project, old->version, defs,
                                          &entry, r->connection->log);

    if (rc != NGX_DECLINED) {
        if (rc == NGX_OK) {
            ctx->proposed = 1;
            ctx->changes = c;
            ctx->nchanges = n;
            ctx->who = who;
            return NGX_AGAIN;
        }

        /* Redis away (NGX_BUSY), or no room in the zone: answered by
         * the caller */
        return rc == NGX_BUSY ? NGX_BUSY : NGX_ABORT;
    }

    /* the zone's memory first: never stored and then not served */
    buf = ngx_http_flags_versions_reserve(fmcf, defs->doc_len);
    if (buf == NULL) {
        return ngx_http_flags_send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                         "zone_full",
                                         "the flags zone has no room for "
                                         "this version; increase flags_zone");
    }

    doc.data = defs->doc;
    doc.len = defs->doc_len;

    job = ngx_pcalloc(r->pool, sizeof(ngx_http_flags_versions_job_t));

    if (job == NULL
        || ngx_http_flags_defs_seed(r, project, old, job) != NGX_OK
        || ngx_http_flags_versions_job(r->pool, fmcf, project, job,
                                       defs->version, &entry, &doc)
           != NGX_OK)
    {
        ngx_slab_free(fmcf->shpool, buf);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx->buf = buf;
    ctx->job = job;
    ctx->changes = c;
    ctx->nchanges = n;
    ctx->who = who;

#if (NGX_THREADS)

    /* the disk's part in a thread: the worker goes on answering while
     * the files are written and synced */
    if (fmcf->state_thread_pool) {
        task = ngx_thread_task_alloc(r->pool, 0);

        if (task) {
            task->ctx = ctx;
            task->handler = ngx_http_flags_defs_disk;
            task->event.handler = ngx_http_flags_defs_disk_done;
            task->event.data = r;

            if (ngx_thread_task_post(fmcf->state_thread_pool, task)
                == NGX_OK)
            {
                return NGX_DONE;
            }
        }

        /* the queue is full: here, then */
    }

#endif

    ngx_http_flags_versions_run(job);

    return ngx_http_flags_defs_stored(r, ctx);
}


#if (NGX_THREADS)

static void
ngx_http_flags_defs_disk(void *data, ngx_log_t *log)
{
    ngx_http_flags_defs_ctx_t  *ctx = data;

    ngx_http_flags_versions_run(ctx->job);
}


/* In the event loop: the thread wrote the files (or failed). */

static void
ngx_http_flags_defs_disk_done(ngx_event_t *ev)
{
    ngx_int_t                   rc;
    ngx_connection_t           *c;
    ngx_http_request_t         *r;
    ngx_http_flags_defs_ctx_t  *ctx;

    r = ev->data;
    c = r->connection;
    ctx = ngx_http_get_module_ctx(r, ngx_http_flags_module);

    rc = ngx_http_flags_defs_written(r, ctx,
                                     ngx_http_flags_defs_stored(r, ctx));

    if (rc != NGX_DONE) {
        /* r may be gone after this */
        ngx_http_finalize_request(r, rc);
    }

    ngx_http_run_posted_requests(c);
}

#endif


/*
 * The files are written (ctx->job ran): the version published to the
 * host, logged and applied here; NGX_OK with ctx->seq set.  A failure
 * frees the zone's room and is answered: 507 when the disk had no room
 * (the version is not stored: the current one is still served).
 */

static ngx_int_t
ngx_http_flags_defs_stored(ngx_http_request_t *r,
    ngx_http_flags_defs_ctx_t *ctx)
{
    ngx_int_t                    rc;
    ngx_http_flags_defs_t       *defs;
    ngx_http_flags_project_t    *project;
    ngx_http_flags_main_conf_t  *fmcf;

    fmcf = ctx->fmcf;
    project = ctx->project;
    defs = ctx->defs;

    rc = ngx_http_flags_versions_done(r->pool, fmcf, project, ctx->job,
                                      r->connection->log);
    if (rc != NGX_OK) {
        ngx_slab_free(fmcf->shpool, ctx->buf);

        if (rc == NGX_DECLINED) {
            return ngx_http_flags_send_error(r, NGX_HTTP_INSUFFICIENT_STORAGE,
                                             "insufficient_storage",
                                             "no space left to store the "
                                             "version: the current one is "
                                             "still served");
        }

        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx->seq = ngx_http_flags_versions_publish(fmcf, project, defs,
                                               ctx->buf);

    ngx_http_flags_defs_log(r, project, defs->version, &ctx->who,
                            ctx->changes, ctx->nchanges);

    (void) ngx_http_flags_versions_apply(fmcf, project, defs, NULL,
                                         r->connection->log);

    /* this worker's acknowledgement, with any other project's */
    ngx_http_flags_versions_refresh_all(fmcf, ngx_cycle->log);

    return NGX_OK;
}


/*
 * A version proposed to the fleet: NGX_DONE while the syncing worker has
 * not heard back (a timer polls), then the acknowledgements awaited as
 * for a local write, 412 when another host's write won, 503 when the
 * fleet was not reached.
 */

static ngx_int_t
ngx_http_flags_defs_fleet(ngx_http_request_t *r,
    ngx_http_flags_defs_ctx_t *ctx)
{
    ngx_int_t                    rc;
    ngx_atomic_uint_t            seq;
    ngx_http_flags_main_conf_t  *fmcf;

    fmcf = ngx_http_get_module_main_conf(r, ngx_http_flags_module);
    seq = 0;

    rc = ngx_http_flags_sync_defs_poll(fmcf, ctx->project, ctx->started, 0,
                                       &seq);

    if (rc == NGX_AGAIN) {
        ngx_add_timer(&ctx->wait, NGX_HTTP_FLAGS_DEFS_ACK_POLL);
        return NGX_DONE;
    }

    ctx->proposed = 0;
    ngx_http_flags_versions_unlock(fmcf, ctx->project);
    ctx->locked = 0;

    if (rc == NGX_DECLINED) {
        ngx_http_flags_versions_rejected(ctx->project,
                                         NGX_HTTP_FLAGS_REJECTED_CONFLICT);
        return ngx_http_flags_send_error(r, NGX_HTTP_PRECONDITION_FAILED,
                                         "version_conflict",
                                         "another host wrote a version of "
                                         "this project first");
    }

    if (rc != NGX_OK) {
        return ngx_http_flags_send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                         "fleet_unavailable",
                                         "flags_sync did not hear back from "
                                         "redis in time; if redis took the "
                                         "version, every host serves it at "
                                         "its next round");
    }

    ngx_http_flags_defs_log(r, ctx->project, ctx->version, &ctx->who,
                            ctx->changes, ctx->nchanges);

    /* this worker serves it, then every worker */
    ngx_http_flags_versions_refresh_all(fmcf, r->connection->log);

    ctx->seq = seq;
    ctx->started = ngx_current_msec;

    return ngx_http_flags_defs_step(r, ctx);
}


/* 200 and the version's ETag (a dry run: the version it would be). */

static ngx_int_t
ngx_http_flags_defs_answer(ngx_http_request_t *r,
    ngx_http_flags_defs_ctx_t *ctx)
{
    u_char  *p, tag[NGX_INT64_LEN + 4];

    if (!ctx->dry_run) {
        p = ngx_sprintf(tag, "\"v%uL\"", ctx->version);

        if (ngx_http_flags_add_header(r, "ETag", tag, p - tag) == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
    }

    return ngx_http_flags_send_json(r, NGX_HTTP_OK, ctx->answer.data,
                                    ctx->answer.len);
}


/* The first write stores the file's version 1 before it, so history and
 * a revert reach it. */

static ngx_int_t
ngx_http_flags_defs_seed(ngx_http_request_t *r,
    ngx_http_flags_project_t *project, ngx_http_flags_defs_t *old,
    ngx_http_flags_versions_job_t *job)
{
    uint64_t                     v[1];
    ngx_str_t                    entry, doc;
    ngx_http_flags_main_conf_t  *fmcf;

    fmcf = ngx_http_get_module_main_conf(r, ngx_http_flags_module);

    if (old->version != 1
        || ngx_http_flags_versions_list(r->pool, fmcf, project, v, 1) != 0)
    {
        return NGX_OK;
    }

    if (ngx_http_flags_defs_first_entry(r, old, &entry) != NGX_OK) {
        return NGX_ERROR;
    }

    doc.data = old->doc;
    doc.len = old->doc_len;

    if (job) {
        /* written before the new version, by the same job */
        return ngx_http_flags_versions_job(r->pool, fmcf, project, job, 1,
                                           &entry, &doc);
    }

    return ngx_http_flags_versions_write(r->pool, fmcf, project, 1, &entry,
                                         &doc, r->connection->log);
}


/* Version 1's history entry: the file's flags, all added, by nobody. */

static ngx_int_t
ngx_http_flags_defs_first_entry(ngx_http_request_t *r,
    ngx_http_flags_defs_t *defs, ngx_str_t *entry)
{
    size_t                       n, size;
    ngx_str_t                    host;
    fl_defs_change_t            *c;
    ngx_http_flags_main_conf_t  *fmcf;

    fmcf = ngx_http_get_module_main_conf(r, ngx_http_flags_module);
    ngx_http_flags_sync_host(fmcf, &host);

    n = defs->nflags;
    c = ngx_palloc(r->pool, (n + 1) * sizeof(fl_defs_change_t));
    if (c == NULL) {
        return NGX_ERROR;
    }

    n = fl_defs_diff(NULL, defs->core, c, n);

    size = fl_defs_entry_json_bound(0, host.len, NULL, defs->core, c, n);
    entry->data = ngx_pnalloc(r->pool, size);
    if (entry->data == NULL) {
        return NGX_ERROR;
    }

    entry->len = fl_defs_entry_json(1, defs->at_ms, NULL, 0,
                                    (const char *) host.data, host.len,
                                    NULL, defs->core, c, n,
                                    (char *) entry->data, size);

    return NGX_OK;
}


/* Who wrote it: the auth_basic user, else the client's address. */

static void
ngx_http_flags_defs_who(ngx_http_request_t *r, ngx_str_t *who)
{
    u_char  buf[NGX_MAX_ERROR_STR / 4];

    if (ngx_http_flags_admin_user(r, buf, sizeof(buf)) > 0) {
        *who = r->headers_in.user;
        return;
    }

    *who = r->connection->addr_text;
}


/* One line a version at the routine level, and the event ring's. */

static void
ngx_http_flags_defs_log(ngx_http_request_t *r,
    ngx_http_flags_project_t *project, uint64_t version, ngx_str_t *who,
    fl_defs_change_t *c, size_t n)
{
    u_char                      *p, detail[FL_EVENT_DETAIL_MAX];
    size_t                       i, added, changed, removed;
    ngx_str_t                    esc;
    ngx_http_flags_loc_conf_t   *flcf;
    ngx_http_flags_main_conf_t  *fmcf;

    fmcf = ngx_http_get_module_main_conf(r, ngx_http_flags_module);
    flcf = ngx_http_get_module_loc_conf(r, ngx_http_flags_module);

    added = changed = removed = 0;

    for (i = 0; i < n; i++) {
        added += c[i].kind == FL_DEFS_ADDED;
        changed += c[i].kind == FL_DEFS_CHANGED;
        removed += c[i].kind == FL_DEFS_REMOVED;
    }

    esc.data = ngx_pnalloc(r->pool, who->len * 4 + 1);
    if (esc.data == NULL) {
        return;
    }

    esc.len = (u_char *) ngx_escape_json(esc.data, who->data, who->len)
              - esc.data;

    ngx_log_error(flcf->log_routine, r->connection->log, 0,
                  "flags: project \"%V\" has definitions version %uL by "
                  "\"%V\": %uz flags added, %uz changed, %uz removed",
                  &project->name, version, &esc, added, changed, removed);

    p = ngx_snprintf(detail, sizeof(detail),
                     "version %uL: %uz added, %uz changed, %uz removed",
                     version, added, changed, removed);

    ngx_http_flags_event_add(fmcf, FL_EVENT_DEFINITION, FL_EVENT_BY_ADMIN,
                             &project->name, NULL, who, detail, p - detail);
}


static void
ngx_http_flags_defs_cleanup(void *data)
{
    ngx_http_flags_defs_ctx_t  *ctx = data;

    ngx_atomic_uint_t           seq;

    if (ctx->wait.timer_set) {
        ngx_del_timer(&ctx->wait);
    }

    if (ctx->proposed) {
        /* the request ends first: the proposal is withdrawn */
        (void) ngx_http_flags_sync_defs_poll(ctx->fmcf, ctx->project, 0, 1,
                                             &seq);
    }

    if (ctx->locked) {
        ngx_http_flags_versions_unlock(ctx->fmcf, ctx->project);
    }
}
