/*
 * ngx_http_flags_ingest.c - POST {base}/ingest/errors.
 *
 * Checks in the order of the spec (token, method, Content-Type, size, JSON,
 * fields, flag), finds the report's cohort (the core's fl_report_cohort():
 * its "enabled", else the flag's answer now for its userId and traits,
 * else on), hands the report's line to flags_error_log
 * (ngx_http_flags_reportlog.c), and once it is written counts the error
 * through the one entry of failures (ngx_http_flags_control_failure():
 * cohort, source, witness, the rule) and answers 204.  A line that could not be written is
 * answered 500 and not counted.
 */

#include "ngx_http_flags_module.h"


typedef struct {
    ngx_http_flags_project_t     *project;
    ngx_http_flags_flag_t        *flag;      /* of the accepted report */
    ngx_http_flags_failure_t      failure;   /* its cohort, source, witness */
    ngx_http_flags_defs_t        *defs;      /* pinned: flag is of it */
} ngx_http_flags_ingest_ctx_t;


/*
 * The parser's memory (yajl's buffers, the report's strings) is needed
 * only until the report's line is in the report log's batch.  Taking it from one pool a
 * worker reuses, not from the request's pool, keeps the requests that wait
 * for the batch small: 32 waiting requests with parsers of their own grew
 * and trimmed the heap (brk) on every pass.
 */
static ngx_pool_t  *ngx_http_flags_scratch;
static ngx_uint_t   ngx_http_flags_scratch_busy;


static void ngx_http_flags_ingest_body(ngx_http_request_t *r);
static ngx_int_t ngx_http_flags_ingest_process(ngx_http_request_t *r,
    ngx_pool_t *pool);
static ngx_int_t ngx_http_flags_feed_piece(void *ctx, u_char *p,
    size_t len);
static void ngx_http_flags_report_cohort(ngx_http_flags_defs_t *defs,
    ngx_uint_t i, fl_report_t *report, size_t max_traits, fl_alloc_t *alloc,
    ngx_http_flags_failure_t *f);
static ngx_int_t ngx_http_flags_logged(ngx_http_request_t *r,
    ngx_int_t rc);
static ngx_int_t ngx_http_flags_accepted(ngx_http_request_t *r,
    ngx_http_flags_ingest_ctx_t *ctx);


ngx_int_t
ngx_http_flags_ingest_handler(ngx_http_request_t *r)
{
    ngx_int_t                  rc;
    ngx_http_flags_project_t  *project;

    /* a refused token is counted by why (flags_metrics) */
    rc = ngx_http_flags_authenticate_report(r, &project);
    if (project == NULL) {
        return rc;
    }

    if (r->method != NGX_HTTP_POST) {
        ngx_http_flags_refused(r, FL_REFUSED_METHOD_NOT_ALLOWED);
        return ngx_http_flags_method_not_allowed(r, "POST");
    }

    return ngx_http_flags_ingest_report(r, project);
}


/*
 * A POST whose token gave project: the checks that follow (media type,
 * size, body, fields, flag), the report log and the count.  Also the
 * report route of flags_sdk (ngx_http_flags_sdk.c), which is this same
 * path.
 */

ngx_int_t
ngx_http_flags_ingest_report(ngx_http_request_t *r,
    ngx_http_flags_project_t *project)
{
    ngx_http_flags_ingest_ctx_t  *ctx;

    ctx = ngx_pcalloc(r->pool, sizeof(ngx_http_flags_ingest_ctx_t));
    if (ctx == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx->project = project;

    return ngx_http_flags_read_json_body(r, ctx, "the report", 1,
                                         ngx_http_flags_ingest_body);
}


static void
ngx_http_flags_ingest_body(ngx_http_request_t *r)
{
    ngx_int_t    rc;
    ngx_pool_t  *pool;

    pool = r->pool;

    /* nothing runs a second report while one is parsed, but should it */
    if (!ngx_http_flags_scratch_busy) {
        if (ngx_http_flags_scratch == NULL) {
            ngx_http_flags_scratch = ngx_create_pool(NGX_DEFAULT_POOL_SIZE,
                                                     ngx_cycle->log);
        }

        if (ngx_http_flags_scratch) {
            pool = ngx_http_flags_scratch;
            ngx_http_flags_scratch_busy = 1;
        }
    }

    rc = ngx_http_flags_ingest_process(r, pool);

    if (pool != r->pool) {
        ngx_reset_pool(pool);
        ngx_http_flags_scratch_busy = 0;
    }

    ngx_http_finalize_request(r, rc);
}


static ngx_int_t
ngx_http_flags_ingest_process(ngx_http_request_t *r, ngx_pool_t *pool)
{
    char                          err[256];
    u_char                        msg[256], *p;
    long                          idx;
    size_t                        len;
    fl_alloc_t                    alloc;
    fl_status_t                   st;
    fl_report_t                   report;
    ngx_chain_t                  *cl;
    fl_report_parser_t           *rp;
    ngx_http_flags_defs_t        *defs;
    ngx_http_flags_project_t     *project;
    ngx_http_flags_loc_conf_t    *flcf;
    ngx_http_flags_ingest_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_flags_module);
    flcf = ngx_http_get_module_loc_conf(r, ngx_http_flags_module);
    project = ctx->project;

    /* a chunked body has no declared length: measure what arrived */
    if (ngx_http_flags_body_size(r) > (off_t) flcf->max_report_size) {
        return ngx_http_flags_too_large(r, flcf->max_report_size,
                                        "the report", 1);
    }

    alloc.alloc = ngx_http_flags_pool_alloc;
    alloc.ctx = pool;

    rp = fl_report_parser_new(&alloc);
    if (rp == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    cl = r->request_body ? r->request_body->bufs : NULL;

    if (cl != NULL && cl->next == NULL && ngx_buf_in_memory(cl->buf)) {
        /* the usual report: one buffer, read by the core's fast path */
        (void) fl_report_parser_feed_whole(rp, cl->buf->pos,
                                           cl->buf->last - cl->buf->pos);

    } else if (ngx_http_flags_body_pieces(r, ngx_http_flags_feed_piece, rp)
               != NGX_OK)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    st = fl_report_parser_finish(rp, &report, err, sizeof(err));

    switch (st) {

    case FL_OK:
        break;

    case FL_ERR_JSON:
        ngx_http_flags_refused(r, FL_REFUSED_INVALID_JSON);
        return ngx_http_flags_send_error(r, NGX_HTTP_BAD_REQUEST,
                                         "invalid_json", err);

    case FL_ERR_FIELD:
        ngx_http_flags_refused(r, FL_REFUSED_INVALID_FIELD);
        return ngx_http_flags_send_error(r, NGX_HTTP_BAD_REQUEST,
                                         "invalid_field", err);

    default:
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    /* the definitions this report is counted in, kept until the report
     * log has its line */
    defs = ngx_http_flags_defs_pin(r, project);
    if (defs == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx->defs = defs;

    /* only the token's own project is searched */
    idx = fl_project_find_flag(defs->core, report.flag_name,
                               report.flag_name_len);
    if (idx < 0) {
        /* echo at most 128 bytes of the client's name, never half of a
         * UTF-8 sequence: the message goes into a JSON answer */
        len = fl_utf8_prefix(report.flag_name, report.flag_name_len,
                             FL_MAX_FLAG_NAME_LEN);

        /* the name may hold a decoded NUL ("\u0000"): the message goes
         * on by its length, never as a C string */
        p = ngx_snprintf(msg, sizeof(msg),
                         "project \"%V\" has no flag \"%*s\"",
                         &project->name, len, report.flag_name);

        ngx_http_flags_refused(r, FL_REFUSED_UNKNOWN_FLAG);

        return ngx_http_flags_send_error_len(r, NGX_HTTP_NOT_FOUND,
                                             "unknown_flag", msg, p - msg);
    }

    ctx->flag = &defs->flags[idx];
    ngx_memzero(&ctx->failure, sizeof(ngx_http_flags_failure_t));
    /* the user when the report names one, else $remote_addr (real_ip
     * applies): what min_sources counts */
    ctx->failure.source = fl_source_key(report.user_id, report.user_id_len,
                                  (const char *) r->connection->addr_text.data,
                                  r->connection->addr_text.len);
    /* the address alone: what the regression rule counts */
    ctx->failure.witness = fl_witness_key_report(
                                  (const char *) r->connection->addr_text.data,
                                  r->connection->addr_text.len);
    /* now, while the report's strings are in the pool */
    ngx_http_flags_report_cohort(defs, idx, &report, flcf->max_traits,
                                 &alloc, &ctx->failure);

    return ngx_http_flags_report_log(r, &project->name, &report,
                                     ngx_http_flags_logged);
}


/* flags_error_log has the report's line (ngx_http_flags_report_log()) */

static ngx_int_t
ngx_http_flags_logged(ngx_http_request_t *r, ngx_int_t rc)
{
    ngx_http_flags_ingest_ctx_t  *ctx;

    if (rc != NGX_OK) {
        /* not written: 500, and the report is not counted */
        ngx_http_flags_refused(r, FL_REFUSED_INTERNAL_ERROR);
        return ngx_http_flags_send_error(r, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                         "internal_error",
                                         "the report could not be stored");
    }

    ctx = ngx_http_get_module_ctx(r, ngx_http_flags_module);

    return ngx_http_flags_accepted(r, ctx);
}


/* The report's line is written (or there is no report log). */

static ngx_int_t
ngx_http_flags_accepted(ngx_http_request_t *r,
    ngx_http_flags_ingest_ctx_t *ctx)
{
    ngx_http_flags_change_t  ch;

    ngx_http_flags_change_init(&ch, r, ctx->defs, ctx->flag);

    (void) ngx_http_flags_control_failure(&ch, &ctx->failure);

    return ngx_http_flags_send_empty(r, NGX_HTTP_NO_CONTENT);
}


/*
 * The report's cohort (f->enabled), and whether its claim is disputed:
 * its "enabled" when given, else what the flag answers its userId and
 * traits now (rollback and override included; not an evaluation), else
 * on.  A ramped flag's report that claims a cohort and names a user is
 * checked against the flag's answer for that user (fl_report_disputed()).
 */

static void
ngx_http_flags_report_cohort(ngx_http_flags_defs_t *defs,
    ngx_uint_t i, fl_report_t *report, size_t max_traits, fl_alloc_t *alloc,
    ngx_http_flags_failure_t *f)
{
    fl_user_t     user;
    fl_cohort_t   cohort;
    fl_detail_t   d;
    ngx_uint_t    evaluate;

    cohort = fl_report_cohort(report, max_traits, alloc, &user);

    f->enabled = cohort != FL_COHORT_OFF;

    evaluate = cohort == FL_COHORT_EVALUATE
               || (defs->flags[i].witness != NULL
                   && (user.user_id != NULL || user.ntraits > 0));

    if (!evaluate
        || ngx_http_flags_evaluate_flag(defs, i, &user, &d,
                                        NGX_HTTP_FLAGS_NOT_COUNTED)
           != NGX_OK)
    {
        return;
    }

    if (cohort == FL_COHORT_EVALUATE) {
        f->enabled = d.enabled;

    } else {
        f->disputed = fl_report_disputed(report, d.enabled);
    }
}


static ngx_int_t
ngx_http_flags_feed_piece(void *ctx, u_char *p, size_t len)
{
    /* after a syntax error the parser ignores the rest: stop reading */
    return fl_report_parser_feed(ctx, p, len) == FL_OK ? NGX_OK : NGX_DONE;
}


