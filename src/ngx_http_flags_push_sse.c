/*
 * ngx_http_flags_push_sse.c - OFREP's event stream (docs/push.md):
 * {loc}v1/events?token=T in a flags_ofrep location, text/event-stream
 * with one "refetchEvaluation" event for each change of the project's
 * answers, a comment every flags_push_heartbeat, and the end of the
 * response when the worker exits.  flags_dashboard's {loc}events is the
 * same stream for every project (project NULL): one "changed" event for
 * each change of the zone's event ring (docs/dashboard.md).
 *
 * It goes through nginx's output filters (chunked, HTTP/2) one small
 * buffer at a time, and holds at most one event: while the peer has not
 * taken the previous bytes, later changes are merged into the waiting
 * one.  The registry (ngx_http_flags_push.c) tells it of changes,
 * heartbeats and the worker's exit.
 */

#include "ngx_http_flags_push.h"


#define NGX_HTTP_FLAGS_SSE_BUF          128


typedef struct {
    ngx_http_flags_push_t        push;       /* first: the registry's */

    /* one buffer, sent whole before it is written again */
    ngx_buf_t                    buf;
    ngx_chain_t                  out;
    u_char                       data[NGX_HTTP_FLAGS_SSE_BUF];

    unsigned                     pending:1;  /* an event waits */
} ngx_http_flags_sse_t;


static void ngx_http_flags_sse_write_handler(ngx_http_request_t *r);
static ngx_int_t ngx_http_flags_sse_send(ngx_http_flags_sse_t *sse,
    u_char *data, size_t len);
static ngx_int_t ngx_http_flags_sse_event(ngx_http_flags_sse_t *sse);
static void ngx_http_flags_sse_changed(ngx_http_flags_push_t *push,
    ngx_atomic_uint_t v);
static void ngx_http_flags_sse_beat(ngx_http_flags_push_t *push);
static void ngx_http_flags_sse_finish(ngx_http_flags_push_t *push);


static const ngx_http_flags_push_transport_t  ngx_http_flags_sse_transport = {
    ngx_http_flags_sse_changed,
    ngx_http_flags_sse_beat,
    ngx_http_flags_sse_finish,
    NULL                                    /* all in the request's pool */
};


/*
 * {loc}v1/events after ngx_http_flags_ofrep.c checked the path, the token
 * and the method: the stream, or NGX_DECLINED when this worker holds
 * flags_push_max_connections already (the caller answers 503).
 */

ngx_int_t
ngx_http_flags_push_sse(ngx_http_request_t *r,
    ngx_http_flags_project_t *project)
{
    ngx_int_t               rc;
    ngx_connection_t       *c;
    ngx_http_flags_push_t  *push;

    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    push = ngx_http_flags_push_create(r, project,
                                      sizeof(ngx_http_flags_sse_t),
                                      &ngx_http_flags_sse_transport);
    if (push == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (push == (void *) -1) {
        return NGX_DECLINED;
    }

    r->headers_out.status = NGX_HTTP_OK;
    r->headers_out.content_length_n = -1;
    ngx_str_set(&r->headers_out.content_type, "text/event-stream");
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    r->headers_out.content_type_lowcase = NULL;
    r->allow_ranges = 0;

    if (ngx_http_flags_add_header(r, "Cache-Control",
                                   (u_char *) "no-store", 8) == NULL
        || ngx_http_flags_add_header(r, "X-Accel-Buffering",
                                      (u_char *) "no", 2) == NULL)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    /* the header goes out now, not with the first event */
    if (ngx_http_send_special(r, NGX_HTTP_FLUSH) == NGX_ERROR) {
        return NGX_ERROR;
    }

    c = r->connection;

    push->seen = ngx_http_flags_push_version(
                     ngx_http_get_module_main_conf(r, ngx_http_flags_module),
                     project);

    if (ngx_http_flags_push_register(push) != NGX_OK) {
        return NGX_ERROR;
    }

    /* the request lives until the stream ends */
    r->main->count++;

    r->read_event_handler = ngx_http_test_reading;
    r->write_event_handler = ngx_http_flags_sse_write_handler;

    if (r->buffered || c->buffered) {
        ngx_post_event(c->write, &ngx_posted_events);
    }

    ngx_log_debug0(NGX_LOG_DEBUG_HTTP, c->log, 0, "flags: push: sse stream");

    return NGX_DONE;
}


static void
ngx_http_flags_sse_write_handler(ngx_http_request_t *r)
{
    ngx_event_t               *wev;
    ngx_connection_t          *c;
    ngx_http_flags_sse_t      *sse;
    ngx_http_core_loc_conf_t  *clcf;

    c = r->connection;
    wev = c->write;
    sse = ngx_http_get_module_ctx(r, ngx_http_flags_module);

    if (wev->timedout) {
        /* a peer that reads nothing for send_timeout */
        ngx_log_error(NGX_LOG_INFO, c->log, NGX_ETIMEDOUT,
                      "flags: push: event stream client timed out");
        c->timedout = 1;
        ngx_http_flags_push_end(&sse->push, NGX_HTTP_REQUEST_TIME_OUT);
        return;
    }

    if (ngx_http_output_filter(r, NULL) == NGX_ERROR) {
        ngx_http_flags_push_end(&sse->push, NGX_ERROR);
        return;
    }

    if (r->buffered || c->buffered) {
        clcf = ngx_http_get_module_loc_conf(r, ngx_http_core_module);

        if (!wev->timer_set) {
            ngx_add_timer(wev, clcf->send_timeout);
        }

        if (ngx_handle_write_event(wev, clcf->send_lowat) != NGX_OK) {
            ngx_http_flags_push_end(&sse->push, NGX_ERROR);
        }

        return;
    }

    if (wev->timer_set) {
        ngx_del_timer(wev);
    }

    if (sse->pending && ngx_http_flags_sse_event(sse) != NGX_OK) {
        ngx_http_flags_push_end(&sse->push, NGX_ERROR);
    }
}


/* Writes bytes when nothing is waiting to be sent (the caller checks). */

static ngx_int_t
ngx_http_flags_sse_send(ngx_http_flags_sse_t *sse, u_char *data,
    size_t len)
{
    ngx_buf_t                 *b;
    ngx_connection_t          *c;
    ngx_http_request_t        *r;
    ngx_http_core_loc_conf_t  *clcf;

    r = sse->push.request;
    c = r->connection;
    b = &sse->buf;

    ngx_memzero(b, sizeof(ngx_buf_t));

    b->start = sse->data;
    b->end = sse->data + sizeof(sse->data);
    b->pos = b->start;
    b->last = ngx_cpymem(b->pos, data, len);
    b->memory = 1;
    b->flush = 1;
    b->tag = (ngx_buf_tag_t) &ngx_http_flags_module;

    sse->out.buf = b;
    sse->out.next = NULL;

    if (ngx_http_output_filter(r, &sse->out) == NGX_ERROR) {
        return NGX_ERROR;
    }

    if (r->buffered || c->buffered) {
        clcf = ngx_http_get_module_loc_conf(r, ngx_http_core_module);

        if (!c->write->timer_set) {
            ngx_add_timer(c->write, clcf->send_timeout);
        }

        if (ngx_handle_write_event(c->write, clcf->send_lowat) != NGX_OK) {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


/*
 * "refetchEvaluation" for the project's current version.  While the peer
 * has not taken the previous bytes the event waits (pending), and any
 * later change is merged into it: the client refetches once.
 */

static ngx_int_t
ngx_http_flags_sse_event(ngx_http_flags_sse_t *sse)
{
    u_char              *p;
    u_char               buf[NGX_HTTP_FLAGS_SSE_BUF];
    ngx_atomic_uint_t    v;
    ngx_http_request_t  *r;

    r = sse->push.request;

    if (r->buffered || r->connection->buffered) {
        sse->pending = 1;
        return NGX_OK;
    }

    v = ngx_http_flags_push_version(
            ngx_http_get_module_main_conf(r, ngx_http_flags_module),
            sse->push.project);

    /* OFREP's event, or the operator's page's (docs/dashboard.md) */
    p = buf + (sse->push.project ? fl_sse_refetch_event(v, (char *) buf)
                                 : fl_sse_changed_event(v, (char *) buf));

    sse->pending = 0;
    sse->push.seen = v;

    return ngx_http_flags_sse_send(sse, buf, p - buf);
}


/* The registry's tick: the project changed (the event reads the version
 * itself, the newest). */

static void
ngx_http_flags_sse_changed(ngx_http_flags_push_t *push, ngx_atomic_uint_t v)
{
    ngx_http_flags_sse_t *sse = (ngx_http_flags_sse_t *) push;

    if (ngx_http_flags_sse_event(sse) != NGX_OK) {
        ngx_http_flags_push_end(push, NGX_ERROR);
    }
}


/* Every flags_push_heartbeat: a comment, unless bytes wait already. */

static void
ngx_http_flags_sse_beat(ngx_http_flags_push_t *push)
{
    ngx_http_flags_sse_t *sse = (ngx_http_flags_sse_t *) push;

    ngx_http_request_t  *r;

    r = push->request;

    if (r->buffered || r->connection->buffered) {
        return;             /* bytes wait already; send_timeout watches */
    }

    if (ngx_http_flags_sse_send(sse, (u_char *) ": heartbeat\n\n",
                                sizeof(": heartbeat\n\n") - 1)
        != NGX_OK)
    {
        ngx_http_flags_push_end(push, NGX_ERROR);
    }
}


/* The end of a stream (the worker exits; the registry let it go): a last
 * event if the answers changed since the last one, then the end of the
 * response. */

static void
ngx_http_flags_sse_finish(ngx_http_flags_push_t *push)
{
    ngx_http_flags_sse_t *sse = (ngx_http_flags_sse_t *) push;

    ngx_int_t            rc;
    ngx_http_request_t  *r;

    r = push->request;

    if (push->seen != ngx_http_flags_push_version(
                          ngx_http_get_module_main_conf(r,
                                                        ngx_http_flags_module),
                          push->project)
        && ngx_http_flags_sse_event(sse) != NGX_OK)
    {
        ngx_http_flags_push_end(push, NGX_ERROR);
        return;
    }

    rc = ngx_http_send_special(r, NGX_HTTP_LAST);

    if (rc == NGX_OK && !r->buffered && !r->connection->buffered) {
        /* all sent: closed now, neither kept alive nor lingering, so
         * the client reconnects at once, to another worker */
        ngx_http_flags_push_end(push, NGX_HTTP_CLOSE);
        return;
    }

    /* what is still buffered is sent by nginx's writer, or dropped at
     * send_timeout */
    ngx_http_flags_push_end(push, rc);
}
