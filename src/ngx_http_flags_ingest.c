/*
 * ngx_http_flags_ingest.c - POST {base}/ingest/errors.
 *
 * Checks in the order of the spec (token, method, Content-Type, size, JSON,
 * fields, flag), appends the report to flags_error_log with one write(2)
 * before answering 204, then counts the error and lets the core decide on
 * a rollback.
 */

#include "ngx_http_flags_module.h"


typedef struct {
    ngx_http_flags_project_t  *project;
} ngx_http_flags_ingest_ctx_t;


static ngx_int_t ngx_http_flags_is_json(ngx_table_elt_t *h);
static void ngx_http_flags_ingest_body(ngx_http_request_t *r);
static ngx_int_t ngx_http_flags_ingest_process(ngx_http_request_t *r);
static ngx_int_t ngx_http_flags_feed_piece(void *ctx, u_char *p,
    size_t len);
static ngx_int_t ngx_http_flags_too_large(ngx_http_request_t *r,
    size_t max);
static ngx_int_t ngx_http_flags_write_report(ngx_http_request_t *r,
    ngx_http_flags_project_t *project, fl_report_t *report);
static void ngx_http_flags_rolled_back(ngx_http_request_t *r,
    ngx_http_flags_project_t *project, ngx_http_flags_flag_t *flag,
    fl_state_snapshot_t *s);


/*
 * "application/json", any case, optionally followed by parameters:
 * "application/json; charset=utf-8", "Application/JSON ;charset=UTF-8".
 */

static ngx_int_t
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

    if ((size_t) (last - p) < sizeof("application/json") - 1
        || ngx_strncasecmp(p, (u_char *) "application/json",
                           sizeof("application/json") - 1) != 0)
    {
        return 0;
    }

    p += sizeof("application/json") - 1;

    while (p < last && (*p == ' ' || *p == '\t')) {
        p++;
    }

    return p == last || *p == ';';
}


ngx_int_t
ngx_http_flags_ingest_handler(ngx_http_request_t *r)
{
    ngx_int_t                     rc;
    ngx_http_flags_project_t     *project;
    ngx_http_flags_loc_conf_t    *flcf;
    ngx_http_flags_ingest_ctx_t  *ctx;

    rc = ngx_http_flags_authenticate(r, &project);
    if (project == NULL) {
        return rc;
    }

    if (r->method != NGX_HTTP_POST) {
        return ngx_http_flags_method_not_allowed(r, "POST");
    }

    if (!ngx_http_flags_is_json(r->headers_in.content_type)) {
        return ngx_http_flags_send_error(r, NGX_HTTP_UNSUPPORTED_MEDIA_TYPE,
                                         "unsupported_media_type",
                                         "Content-Type must be "
                                         "application/json");
    }

    flcf = ngx_http_get_module_loc_conf(r, ngx_http_flags_module);

    /* a declared length is refused before a byte of the body is read */
    if (r->headers_in.content_length_n > (off_t) flcf->max_report_size) {
        return ngx_http_flags_too_large(r, flcf->max_report_size);
    }

    ctx = ngx_palloc(r->pool, sizeof(ngx_http_flags_ingest_ctx_t));
    if (ctx == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx->project = project;
    ngx_http_set_ctx(r, ctx, ngx_http_flags_module);

    rc = ngx_http_read_client_request_body(r, ngx_http_flags_ingest_body);

    if (rc >= NGX_HTTP_SPECIAL_RESPONSE) {
        return rc;
    }

    return NGX_DONE;
}


static ngx_int_t
ngx_http_flags_too_large(ngx_http_request_t *r, size_t max)
{
    u_char  msg[128];

    ngx_snprintf(msg, sizeof(msg), "the report is larger than %uz bytes%Z",
                 max);

    return ngx_http_flags_send_error(r, NGX_HTTP_REQUEST_ENTITY_TOO_LARGE,
                                     "payload_too_large", (char *) msg);
}


static void
ngx_http_flags_ingest_body(ngx_http_request_t *r)
{
    ngx_http_finalize_request(r, ngx_http_flags_ingest_process(r));
}


static ngx_int_t
ngx_http_flags_ingest_process(ngx_http_request_t *r)
{
    char                          err[256];
    u_char                        msg[256], *p;
    long                          idx;
    size_t                        len;
    ngx_int_t                     rc;
    fl_alloc_t                    alloc;
    fl_status_t                   st;
    fl_report_t                   report;
    fl_state_snapshot_t           s;
    fl_report_parser_t           *rp;
    ngx_http_flags_flag_t        *flag;
    ngx_http_flags_project_t     *project;
    ngx_http_flags_loc_conf_t    *flcf;
    ngx_http_flags_ingest_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_flags_module);
    flcf = ngx_http_get_module_loc_conf(r, ngx_http_flags_module);
    project = ctx->project;

    /* a chunked body has no declared length: measure what arrived */
    if (ngx_http_flags_body_size(r) > (off_t) flcf->max_report_size) {
        return ngx_http_flags_too_large(r, flcf->max_report_size);
    }

    alloc.alloc = ngx_http_flags_pool_alloc;
    alloc.ctx = r->pool;

    rp = fl_report_parser_new(&alloc);
    if (rp == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (ngx_http_flags_body_pieces(r, ngx_http_flags_feed_piece, rp)
        != NGX_OK)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    st = fl_report_parser_finish(rp, &report, err, sizeof(err));

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

    /* only the token's own project is searched */
    idx = fl_project_find_flag(project->core, report.flag_name,
                               report.flag_name_len);
    if (idx < 0) {
        /* echo at most 128 bytes of the client's name, never half of a
         * UTF-8 sequence: the message goes into a JSON answer */
        len = report.flag_name_len;

        if (len > 128) {
            len = 128;
            while (len && ((u_char) report.flag_name[len] & 0xc0) == 0x80) {
                len--;
            }
        }

        /* the name may hold a decoded NUL ("\u0000"): the message goes
         * on by its length, never as a C string */
        p = ngx_snprintf(msg, sizeof(msg),
                         "project \"%V\" has no flag \"%*s\"",
                         &project->name, len, report.flag_name);

        return ngx_http_flags_send_error_len(r, NGX_HTTP_NOT_FOUND,
                                             "unknown_flag", msg, p - msg);
    }

    rc = ngx_http_flags_write_report(r, project, &report);
    if (rc != NGX_OK) {
        return ngx_http_flags_send_error(r, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                         "internal_error",
                                         "the report could not be stored");
    }

    flag = &project->flags[idx];

    if (ngx_http_flags_count_error(
            ngx_http_get_module_main_conf(r, ngx_http_flags_module), flag, &s))
    {
        ngx_http_flags_rolled_back(r, project, flag, &s);
    }

    return ngx_http_flags_send_empty(r, NGX_HTTP_NO_CONTENT);
}


static ngx_int_t
ngx_http_flags_feed_piece(void *ctx, u_char *p, size_t len)
{
    /* after a syntax error the parser ignores the rest: stop reading */
    return fl_report_parser_feed(ctx, p, len) == FL_OK ? NGX_OK : NGX_DONE;
}


/*
 * One line, one write(2) on a file opened with O_APPEND: lines from
 * different workers never interleave, and the 204 is sent only after the
 * kernel has the whole line.
 *
 * A full disk (or file size limit) can take only part of a line.  The
 * fragment is cut off again so that the next line starts on a line of its
 * own; where that is impossible (an append-only file), the zone remembers
 * it and the next writer starts with a newline.
 */

static ngx_int_t
ngx_http_flags_write_report(ngx_http_request_t *r,
    ngx_http_flags_project_t *project, fl_report_t *report)
{
    u_char                      *line, *start;
    off_t                        end;
    size_t                       len;
    ssize_t                      n;
    ngx_err_t                    err;
    ngx_file_info_t              fi;
    ngx_http_flags_shctx_t      *sh;
    ngx_http_flags_main_conf_t  *fmcf;

    fmcf = ngx_http_get_module_main_conf(r, ngx_http_flags_module);

    if (fmcf->error_log == NULL) {
        return NGX_OK;
    }

    sh = fmcf->sh;

    line = ngx_pnalloc(r->pool, 1 + fl_report_log_bound(report,
                                                        project->name.len));
    if (line == NULL) {
        return NGX_ERROR;
    }

    len = fl_report_log_line(report, (const char *) project->name.data,
                             project->name.len, ngx_http_flags_now_ms(),
                             (char *) line + 1);
    start = line + 1;

    if (sh && sh->log_torn) {
        *line = '\n';
        start = line;
        len++;
    }

    n = ngx_write_fd(fmcf->error_log->fd, start, len);

    if (n == (ssize_t) len) {
        if (start == line) {
            (void) ngx_atomic_cmp_set(&sh->log_torn, 1, 0);
        }

        return NGX_OK;
    }

    if (n == -1) {
        err = ngx_errno;
        ngx_log_error(NGX_LOG_ALERT, r->connection->log, err,
                      "flags: writing a report to \"%V\" failed",
                      &fmcf->error_log->name);
        return NGX_ERROR;
    }

    /* a short write: the file system is full or the file at its limit */

    ngx_log_error(NGX_LOG_ALERT, r->connection->log, 0,
                  "flags: writing a report to \"%V\" failed: only %z of "
                  "%uz bytes were written (file system full or file size "
                  "limit reached)", &fmcf->error_log->name, n, len);

    end = lseek(fmcf->error_log->fd, 0, SEEK_CUR);

    if (n > 0
        && (end == -1
            || ngx_fd_info(fmcf->error_log->fd, &fi) == NGX_FILE_ERROR
            || ngx_file_size(&fi) != end
            || ftruncate(fmcf->error_log->fd, end - n) == -1))
    {
        ngx_log_error(NGX_LOG_ALERT, r->connection->log, ngx_errno,
                      "flags: could not remove the partial line from \"%V\"",
                      &fmcf->error_log->name);

        if (sh) {
            sh->log_torn = 1;
        }
    }

    return NGX_ERROR;
}


static void
ngx_http_flags_rolled_back(ngx_http_request_t *r,
    ngx_http_flags_project_t *project, ngx_http_flags_flag_t *flag,
    fl_state_snapshot_t *s)
{
    char                         rate[16];
    size_t                       rate_len;
    ngx_http_flags_loc_conf_t   *flcf;
    ngx_http_flags_main_conf_t  *fmcf;

    rate_len = fl_json_milli(flag->policy.rate_milli, rate);
    flcf = ngx_http_get_module_loc_conf(r, ngx_http_flags_module);

    ngx_log_error(flcf->log_level, r->connection->log, 0,
                  "flags: rolled back flag \"%V\" of project \"%V\": "
                  "%uL errors and %uL enabled evaluations in %uD s "
                  "(min_errors=%uD rate=%*s%%)",
                  &flag->name, &project->name, s->rollback_errors,
                  s->rollback_enabled, flag->policy.window,
                  flag->policy.min_errors, rate_len, rate);

    fmcf = ngx_http_get_module_main_conf(r, ngx_http_flags_module);

    /* written off the event loop; nothing waits for it */
    (void) ngx_http_flags_state_changed(fmcf, r->connection->log, NULL, NULL);
}
