/*
 * ngx_http_flags_push.c - live push (docs/push.md): long-lived connections
 * that learn every change of their project's answers.
 *
 *   {loc}v1/events?token=T   in a flags_ofrep location: OFREP's SSE stream
 *                            (text/event-stream, "refetchEvaluation")
 *   GET /ws?token=T          flags_websocket: the DeployRamp SDK's channel
 *                            ("flags_refreshed" with the flags for its user)
 *
 * The zone keeps one answer version a project (ngx_http_flags_shm.c),
 * bumped wherever an answer can change.  Each worker that holds a push
 * connection runs one timer (every 100 ms) that reads the versions of
 * the projects it has connections for, without a lock, and tells the
 * connections of a project whose version moved.  A worker of a replaced
 * configuration pushes nothing (its definitions are the old ones): it is
 * about to exit, and when it does it ends its streams (a last event if
 * something changed) and closes its WebSockets with 1001, so clients
 * reconnect to the new workers.
 *
 * Everything runs on the worker's event loop, non-blocking: SSE goes
 * through nginx's output filters (chunked, HTTP/2) one small buffer at a
 * time; a WebSocket is framed by wslay over the connection's own recv and
 * send after the 101.  What a connection may hold is bounded: one event
 * for SSE (later ones are merged into it), NGX_HTTP_FLAGS_WS_SEND_MAX
 * queued bytes for a WebSocket, one message of flags_max_report_size
 * being read, and the limits of the client's rate below.
 */

#include "ngx_http_flags_module.h"

#include <ngx_sha1.h>
#include <wslay/wslay.h>


#define NGX_HTTP_FLAGS_PUSH_TICK        100          /* ms */
/* queued WebSocket bytes beyond which the peer is taken for gone */
#define NGX_HTTP_FLAGS_WS_SEND_MAX      (1024 * 1024)
/* what a client may send in one second before it is closed with 1008 */
#define NGX_HTTP_FLAGS_WS_MAX_FRAMES    1000
#define NGX_HTTP_FLAGS_WS_MAX_BYTES     (1024 * 1024)
#define NGX_HTTP_FLAGS_SSE_BUF          128
/* how long the answer to a close frame of ours is awaited */
#define NGX_HTTP_FLAGS_WS_CLOSE_WAIT    2000         /* ms */

#define NGX_HTTP_FLAGS_WS_GUID  "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

/* nginx names no 426 */
#define NGX_HTTP_FLAGS_UPGRADE_REQUIRED  426

/* the cap when flags_push_max_connections is not set, at most */
#define NGX_HTTP_FLAGS_PUSH_MAX_DEFAULT  1024


typedef struct ngx_http_flags_push_s  ngx_http_flags_push_t;

struct ngx_http_flags_push_s {
    ngx_queue_t                  queue;      /* its project's, this worker */
    ngx_http_request_t          *request;
    ngx_http_flags_project_t    *project;
    ngx_atomic_uint_t            seen;       /* the version last pushed */
    ngx_event_t                  beat;       /* heartbeat, ping, idle */
    ngx_msec_t                   heartbeat;

    /* SSE: one buffer, sent whole before it is written again */
    ngx_buf_t                    buf;
    ngx_chain_t                  out;
    u_char                       data[NGX_HTTP_FLAGS_SSE_BUF];

    /* WebSocket */
    wslay_event_context_ptr      ws;
    ngx_pool_t                  *user_pool;  /* holds user's strings */
    fl_user_t                    user;
    ngx_msec_t                   last_in;    /* the peer last sent */
    ngx_msec_t                   second;     /* of the rate counts */
    ngx_uint_t                   frames;
    size_t                       bytes;
    size_t                       max_traits;
    uint16_t                     violation;  /* a close code to send */
    const char                  *why;        /* the reason, logged */

    unsigned                     websocket:1;
    unsigned                     registered:1;
    unsigned                     pending:1;  /* SSE: an event waits */
    unsigned                     upgraded:1; /* WS: the 101 is sent */
    unsigned                     eof:1;      /* WS: the peer is gone */
    unsigned                     failed:1;   /* WS: drop it */
    unsigned                     deaf:1;     /* WS: read no more */
};


/* The push connections of this worker, by project. */
typedef struct {
    ngx_http_flags_main_conf_t  *fmcf;
    ngx_queue_t                 *conns;
    ngx_atomic_uint_t           *seen;
    ngx_uint_t                   n;
    ngx_event_t                  tick;
} ngx_http_flags_push_worker_t;


static ngx_int_t ngx_http_flags_push_project(ngx_http_request_t *r,
    ngx_http_flags_project_t **project, ngx_uint_t bare);
static u_char *ngx_http_flags_push_log_handler(ngx_http_request_t *r,
    ngx_http_request_t *sr, u_char *buf, size_t len);
static u_char *ngx_http_flags_push_masked(u_char *p, u_char *last,
    ngx_str_t *line);
static ngx_http_flags_push_t *ngx_http_flags_push_create(
    ngx_http_request_t *r, ngx_http_flags_project_t *project);
static ngx_int_t ngx_http_flags_push_register(ngx_http_flags_push_t *push);
static void ngx_http_flags_push_detach(ngx_http_flags_push_t *push);
static void ngx_http_flags_push_cleanup(void *data);
static void ngx_http_flags_push_end(ngx_http_flags_push_t *push,
    ngx_int_t rc);
static void ngx_http_flags_push_tick(ngx_event_t *ev);
static void ngx_http_flags_push_beat(ngx_event_t *ev);
static void ngx_http_flags_push_going_away(ngx_http_flags_push_t *push);

static void ngx_http_flags_sse_write_handler(ngx_http_request_t *r);
static ngx_int_t ngx_http_flags_sse_send(ngx_http_flags_push_t *push,
    u_char *data, size_t len);
static ngx_int_t ngx_http_flags_sse_event(ngx_http_flags_push_t *push);
static void ngx_http_flags_sse_finish(ngx_http_flags_push_t *push);

static ngx_uint_t ngx_http_flags_ws_handshake(ngx_http_request_t *r,
    ngx_str_t *key, ngx_int_t *rc);
static ngx_table_elt_t *ngx_http_flags_ws_header(ngx_http_request_t *r,
    const char *name, size_t len);
static ngx_uint_t ngx_http_flags_ws_has_token(ngx_http_request_t *r,
    const char *name, const char *token);
static void ngx_http_flags_ws_read_handler(ngx_http_request_t *r);
static void ngx_http_flags_ws_write_handler(ngx_http_request_t *r);
static void ngx_http_flags_ws_run(ngx_http_flags_push_t *push,
    ngx_uint_t read);
static ngx_int_t ngx_http_flags_ws_refresh(ngx_http_flags_push_t *push);
static void ngx_http_flags_ws_close(ngx_http_flags_push_t *push,
    uint16_t code, const char *why, ngx_uint_t deaf);
static void ngx_http_flags_ws_message(ngx_http_flags_push_t *push,
    const uint8_t *msg, size_t len);
static void ngx_http_flags_ws_error(ngx_http_flags_push_t *push,
    const char *code, const char *message);
static ngx_int_t ngx_http_flags_ws_set_user(ngx_http_flags_push_t *push,
    fl_user_t *u);
static ngx_uint_t ngx_http_flags_ws_same_user(fl_user_t *a, fl_user_t *b);
static ssize_t ngx_http_flags_ws_recv(wslay_event_context_ptr ctx,
    uint8_t *buf, size_t len, int flags, void *data);
static ssize_t ngx_http_flags_ws_send(wslay_event_context_ptr ctx,
    const uint8_t *data, size_t len, int flags, void *user_data);
static void ngx_http_flags_ws_frame_start(wslay_event_context_ptr ctx,
    const struct wslay_event_on_frame_recv_start_arg *arg, void *data);
static void ngx_http_flags_ws_msg(wslay_event_context_ptr ctx,
    const struct wslay_event_on_msg_recv_arg *arg, void *data);


static ngx_http_flags_push_worker_t  ngx_http_flags_push_worker;


static struct wslay_event_callbacks  ngx_http_flags_ws_callbacks = {
    ngx_http_flags_ws_recv,
    ngx_http_flags_ws_send,
    NULL,                                   /* genmask: servers do not mask */
    ngx_http_flags_ws_frame_start,
    NULL,
    NULL,
    ngx_http_flags_ws_msg
};


/* ---------------------------------------------------- configuration */


/* flags_push_max_connections N; where it is set is kept for the warning
 * of ngx_http_flags_push_limit() */

char *
ngx_http_flags_push_max_connections(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf)
{
    ngx_http_flags_main_conf_t *fmcf = conf;

    char  *rv;

    rv = ngx_conf_set_num_slot(cf, cmd, conf);
    if (rv != NGX_CONF_OK) {
        return rv;
    }

    fmcf->push_max_file = cf->conf_file->file.name;
    fmcf->push_max_line = cf->conf_file->line;

    return NGX_CONF_OK;
}


/*
 * At init module, when worker_connections is known.  A push connection
 * holds one of the worker's connections for as long as the client likes,
 * and a worker out of connections refuses everything, every virtual host
 * included.  So push never takes more than half of them: without the
 * directive the cap is the smaller of 1024 and half of worker_connections;
 * a value set above that half is lowered to it, with a warning (also
 * under "nginx -t") that names the directive's place.
 */

ngx_int_t
ngx_http_flags_push_limit(ngx_cycle_t *cycle)
{
    ngx_uint_t                   half;
    ngx_event_conf_t            *ecf;
    ngx_http_flags_main_conf_t  *fmcf;

    fmcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_http_flags_module);
    if (fmcf == NULL) {
        return NGX_OK;
    }

    ecf = ngx_event_get_conf(cycle->conf_ctx, ngx_event_core_module);

    half = ecf->connections / 2;

    if (fmcf->push_max == NGX_CONF_UNSET_UINT) {
        fmcf->push_max = ngx_min(NGX_HTTP_FLAGS_PUSH_MAX_DEFAULT, half);
        return NGX_OK;
    }

    if (fmcf->push_max > half) {
        ngx_log_error(NGX_LOG_WARN, cycle->log, 0,
                      "flags_push_max_connections %ui is more than half of "
                      "worker_connections %ui: a worker holds at most %ui "
                      "push connections in %V:%ui",
                      fmcf->push_max, ecf->connections, half,
                      &fmcf->push_max_file, fmcf->push_max_line);

        fmcf->push_max = half;
    }

    return NGX_OK;
}


/* The OFREP location lists and serves the event stream. */

ngx_uint_t
ngx_http_flags_push_enabled(ngx_http_request_t *r)
{
    ngx_http_flags_loc_conf_t   *flcf;
    ngx_http_flags_main_conf_t  *fmcf;

    flcf = ngx_http_get_module_loc_conf(r, ngx_http_flags_module);
    fmcf = ngx_http_get_module_main_conf(r, ngx_http_flags_module);

    return flcf->ofrep_events && fmcf->push_max > 0;
}


/*
 * The token of a push request: "token" in the query (an EventSource or a
 * WebSocket cannot send headers), percent-decoded; without one, the
 * "Authorization: Bearer" header, as for every other request.  On
 * failure *project is NULL and the 401 is answered: without a body for
 * OFREP (bare), in JSON otherwise.
 */

ngx_int_t
ngx_http_flags_push_token(ngx_http_request_t *r,
    ngx_http_flags_project_t **project)
{
    return ngx_http_flags_push_project(r, project, 1);
}


static ngx_int_t
ngx_http_flags_push_project(ngx_http_request_t *r,
    ngx_http_flags_project_t **project, ngx_uint_t bare)
{
    u_char     *dst, *src, *token;
    size_t      len;
    ngx_str_t   value, out;

    *project = NULL;

    /* from here on, nothing logged for this request shows its token */
    r->log_handler = ngx_http_flags_push_log_handler;

    if (ngx_http_arg(r, (u_char *) "token", 5, &value) != NGX_OK) {
        if (bare) {
            return ngx_http_flags_authenticate_bare(r, project, &out);
        }

        return ngx_http_flags_authenticate(r, project);
    }

    token = ngx_pnalloc(r->pool, value.len + 1);
    if (token == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    dst = token;
    src = value.data;
    ngx_unescape_uri(&dst, &src, value.len, 0);
    len = dst - token;

    *project = ngx_http_flags_token_project(r, token, len);

    if (*project == NULL) {
        return ngx_http_flags_refuse_token(r, bare);
    }

    return NGX_OK;
}


/*
 * What an error log line of a push request ends with, ours and nginx's
 * alike: the fields of nginx's own handler for a request of this kind
 * (server, request, host, referrer), except that the request line shows
 * the value of every "token" parameter of its query as "***".  The token
 * of an EventSource or a WebSocket is in its URL.
 */

static u_char *
ngx_http_flags_push_log_handler(ngx_http_request_t *r,
    ngx_http_request_t *sr, u_char *buf, size_t len)
{
    u_char                    *p, *last;
    ngx_http_core_srv_conf_t  *cscf;

    last = buf + len;
    cscf = ngx_http_get_module_srv_conf(r, ngx_http_core_module);

    p = ngx_slprintf(buf, last, ", server: %V", &cscf->server_name);

    if (r->request_line.len) {
        p = ngx_slprintf(p, last, ", request: \"");
        p = ngx_http_flags_push_masked(p, last, &r->request_line);
        p = ngx_slprintf(p, last, "\"");
    }

    if (r->headers_in.host) {
        p = ngx_slprintf(p, last, ", host: \"%V\"",
                         &r->headers_in.host->value);
    }

    if (r->headers_in.referer) {
        p = ngx_slprintf(p, last, ", referrer: \"%V\"",
                         &r->headers_in.referer->value);
    }

    return p;
}


/*
 * The request line with "***" for the value of each "token" parameter
 * (any case, as ngx_http_arg() finds it): up to the next "&" or the end
 * of the URI, which ends at the last space when " HTTP/" follows it.
 */

static u_char *
ngx_http_flags_push_masked(u_char *p, u_char *last, ngx_str_t *line)
{
    u_char  *s, *end, *uri_end;

    s = line->data;
    end = s + line->len;
    uri_end = end;

    while (uri_end > s && uri_end[-1] != ' ') {
        uri_end--;
    }

    if (uri_end > s && end - uri_end >= 5
        && ngx_strncmp(uri_end, "HTTP/", 5) == 0)
    {
        uri_end--;

    } else {
        uri_end = end;
    }

    /* up to the query, as it is */

    while (s < uri_end && *s != '?') {
        if (p < last) {
            *p++ = *s;
        }

        s++;
    }

    /* each parameter, after its "?" or "&" */

    while (s < uri_end) {
        if (p < last) {
            *p++ = *s;
        }

        s++;

        if (uri_end - s >= 6 && ngx_strncasecmp(s, (u_char *) "token=", 6)
                                == 0)
        {
            p = ngx_slprintf(p, last, "%*s***", (size_t) 6, s);
            s += 6;

            while (s < uri_end && *s != '&') {
                s++;
            }

            continue;
        }

        while (s < uri_end && *s != '&') {
            if (p < last) {
                *p++ = *s;
            }

            s++;
        }
    }

    /* the protocol */

    while (s < end && p < last) {
        *p++ = *s++;
    }

    return p;
}




/* ------------------------------------------------------------- SSE */


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

    push = ngx_http_flags_push_create(r, project);
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

    push->seen = ngx_http_flags_answer_version(project);

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

    ngx_log_debug0(NGX_LOG_DEBUG_HTTP, c->log, 0, "flags push: sse stream");

    return NGX_DONE;
}


static void
ngx_http_flags_sse_write_handler(ngx_http_request_t *r)
{
    ngx_event_t               *wev;
    ngx_connection_t          *c;
    ngx_http_flags_push_t     *push;
    ngx_http_core_loc_conf_t  *clcf;

    c = r->connection;
    wev = c->write;
    push = ngx_http_get_module_ctx(r, ngx_http_flags_module);

    if (wev->timedout) {
        /* a peer that reads nothing for send_timeout */
        ngx_log_error(NGX_LOG_INFO, c->log, NGX_ETIMEDOUT,
                      "flags push: event stream client timed out");
        c->timedout = 1;
        ngx_http_flags_push_end(push, NGX_HTTP_REQUEST_TIME_OUT);
        return;
    }

    if (ngx_http_output_filter(r, NULL) == NGX_ERROR) {
        ngx_http_flags_push_end(push, NGX_ERROR);
        return;
    }

    if (r->buffered || c->buffered) {
        clcf = ngx_http_get_module_loc_conf(r, ngx_http_core_module);

        if (!wev->timer_set) {
            ngx_add_timer(wev, clcf->send_timeout);
        }

        if (ngx_handle_write_event(wev, clcf->send_lowat) != NGX_OK) {
            ngx_http_flags_push_end(push, NGX_ERROR);
        }

        return;
    }

    if (wev->timer_set) {
        ngx_del_timer(wev);
    }

    if (push->pending && ngx_http_flags_sse_event(push) != NGX_OK) {
        ngx_http_flags_push_end(push, NGX_ERROR);
    }
}


/* Writes bytes when nothing is waiting to be sent (the caller checks). */

static ngx_int_t
ngx_http_flags_sse_send(ngx_http_flags_push_t *push, u_char *data,
    size_t len)
{
    ngx_buf_t                 *b;
    ngx_connection_t          *c;
    ngx_http_request_t        *r;
    ngx_http_core_loc_conf_t  *clcf;

    r = push->request;
    c = r->connection;
    b = &push->buf;

    ngx_memzero(b, sizeof(ngx_buf_t));

    b->start = push->data;
    b->end = push->data + sizeof(push->data);
    b->pos = b->start;
    b->last = ngx_cpymem(b->pos, data, len);
    b->memory = 1;
    b->flush = 1;
    b->tag = (ngx_buf_tag_t) &ngx_http_flags_module;

    push->out.buf = b;
    push->out.next = NULL;

    if (ngx_http_output_filter(r, &push->out) == NGX_ERROR) {
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
ngx_http_flags_sse_event(ngx_http_flags_push_t *push)
{
    u_char              *p;
    u_char               buf[NGX_HTTP_FLAGS_SSE_BUF];
    ngx_atomic_uint_t    v;
    ngx_http_request_t  *r;

    r = push->request;

    if (r->buffered || r->connection->buffered) {
        push->pending = 1;
        return NGX_OK;
    }

    v = ngx_http_flags_answer_version(push->project);

    p = buf + fl_sse_refetch_event(v, (char *) buf);

    push->pending = 0;
    push->seen = v;

    return ngx_http_flags_sse_send(push, buf, p - buf);
}


/* The end of a stream (the worker exits): a last event if the answers
 * changed since the last one, then the end of the response. */

static void
ngx_http_flags_sse_finish(ngx_http_flags_push_t *push)
{
    ngx_int_t            rc;
    ngx_http_request_t  *r;

    r = push->request;

    ngx_http_flags_push_detach(push);

    if (push->seen != ngx_http_flags_answer_version(push->project)
        && ngx_http_flags_sse_event(push) != NGX_OK)
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


/* ------------------------------------------------------- WebSocket */


/*
 * flags_websocket: GET ?token=T with the RFC 6455 handshake.  Checks: the
 * token (401), the method (405), the handshake (400; another version than
 * 13: 426), the per-worker cap (503); then 101 and the channel.
 */

ngx_int_t
ngx_http_flags_websocket_handler(ngx_http_request_t *r)
{
    u_char                      *accept;
    u_char                       digest[20];
    ngx_int_t                    rc;
    ngx_str_t                    key, src, dst;
    ngx_sha1_t                   sha1;
    ngx_connection_t            *c;
    ngx_http_flags_push_t       *push;
    ngx_http_flags_project_t    *project;
    ngx_http_flags_loc_conf_t   *flcf;

    rc = ngx_http_flags_push_project(r, &project, 0);
    if (project == NULL) {
        return rc;
    }

    if (r->method != NGX_HTTP_GET) {
        return ngx_http_flags_method_not_allowed(r, "GET");
    }

    if (!ngx_http_flags_ws_handshake(r, &key, &rc)) {
        return rc;
    }

    push = ngx_http_flags_push_create(r, project);
    if (push == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (push == (void *) -1) {
        return ngx_http_flags_send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                         "too_many_connections",
                                         "this worker holds "
                                         "flags_push_max_connections push "
                                         "connections already");
    }

    c = r->connection;
    flcf = ngx_http_get_module_loc_conf(r, ngx_http_flags_module);

    push->websocket = 1;
    push->max_traits = flcf->max_traits;
    push->last_in = ngx_current_msec;
    push->second = ngx_current_msec / 1000;

    if (wslay_event_context_server_init(&push->ws,
                                        &ngx_http_flags_ws_callbacks, push)
        != 0)
    {
        push->ws = NULL;
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    /* a message (fragments included) larger than a report body: 1009 */
    wslay_event_config_set_max_recv_msg_length(push->ws,
                                               flcf->max_report_size);

    /* Sec-WebSocket-Accept: base64(SHA-1(key + GUID)) */

    ngx_sha1_init(&sha1);
    ngx_sha1_update(&sha1, key.data, key.len);
    ngx_sha1_update(&sha1, NGX_HTTP_FLAGS_WS_GUID,
                    sizeof(NGX_HTTP_FLAGS_WS_GUID) - 1);
    ngx_sha1_final(digest, &sha1);

    accept = ngx_pnalloc(r->pool, ngx_base64_encoded_length(20));
    if (accept == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    src.data = digest;
    src.len = 20;
    dst.data = accept;
    ngx_encode_base64(&dst, &src);

    r->headers_out.status = NGX_HTTP_SWITCHING_PROTOCOLS;
    ngx_str_set(&r->headers_out.status_line, "101 Switching Protocols");
    r->headers_out.content_length_n = -1;
    r->keepalive = 0;

    if (ngx_http_flags_add_header(r, "Upgrade", (u_char *) "websocket", 9)
        == NULL
        || ngx_http_flags_add_header(r, "Sec-WebSocket-Accept", dst.data,
                                      dst.len)
           == NULL)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK) {
        return rc;
    }

    if (ngx_http_send_special(r, NGX_HTTP_FLUSH) == NGX_ERROR) {
        return NGX_ERROR;
    }

    /* small messages that must not wait for Nagle */
    (void) ngx_tcp_nodelay(c);

    /* the flags of no one yet (docs/push.md) */
    push->seen = ngx_http_flags_answer_version(project);

    if (ngx_http_flags_ws_refresh(push) != NGX_OK) {
        return NGX_ERROR;
    }

    if (ngx_http_flags_push_register(push) != NGX_OK) {
        return NGX_ERROR;
    }

    r->main->count++;

    r->read_event_handler = ngx_http_flags_ws_read_handler;
    r->write_event_handler = ngx_http_flags_ws_write_handler;

    /* the first message goes out from the event loop, and frames that
     * came with the handshake are read from there too */
    ngx_post_event(c->write, &ngx_posted_events);

    if (r->header_in->pos < r->header_in->last || c->read->ready) {
        ngx_post_event(c->read, &ngx_posted_events);
    }

    ngx_log_debug0(NGX_LOG_DEBUG_HTTP, c->log, 0, "flags push: websocket");

    return NGX_DONE;
}


/* The client's half of the handshake (RFC 6455 4.2.1): 1 when it is
 * right, else 0 and *rc is the refusal's. */

static ngx_uint_t
ngx_http_flags_ws_handshake(ngx_http_request_t *r, ngx_str_t *key,
    ngx_int_t *rc)
{
    u_char            raw[32];
    ngx_str_t         decoded;
    ngx_table_elt_t  *h, *version;

    if (r->http_version != NGX_HTTP_VERSION_11
#if (NGX_HTTP_V2)
        || r->stream
#endif
       )
    {
        *rc = ngx_http_flags_send_error(r, NGX_HTTP_BAD_REQUEST,
                                        "bad_handshake",
                                        "a WebSocket handshake is an "
                                        "HTTP/1.1 request");
        return 0;
    }

    if (r->headers_in.content_length_n > 0 || r->headers_in.chunked) {
        *rc = ngx_http_flags_send_error(r, NGX_HTTP_BAD_REQUEST,
                                        "bad_handshake",
                                        "a WebSocket handshake has no body");
        return 0;
    }

    /* nginx 1.22 keeps no pointer to Connection: the list is read */
    if (!ngx_http_flags_ws_has_token(r, "Upgrade", "websocket")
        || !ngx_http_flags_ws_has_token(r, "Connection", "upgrade"))
    {
        *rc = ngx_http_flags_send_error(r, NGX_HTTP_BAD_REQUEST,
                                        "bad_handshake",
                                        "expected \"Upgrade: websocket\" "
                                        "and \"Connection: Upgrade\"");
        return 0;
    }

    version = ngx_http_flags_ws_header(r, "Sec-WebSocket-Version",
                                       sizeof("Sec-WebSocket-Version") - 1);

    if (version == NULL || version->value.len != 2
        || ngx_strncmp(version->value.data, "13", 2) != 0)
    {
        h = ngx_http_flags_add_header(r, "Sec-WebSocket-Version",
                                       (u_char *) "13", 2);
        if (h == NULL) {
            *rc = NGX_HTTP_INTERNAL_SERVER_ERROR;
            return 0;
        }

        *rc = ngx_http_flags_send_error(r, NGX_HTTP_FLAGS_UPGRADE_REQUIRED,
                                        "bad_handshake",
                                        "Sec-WebSocket-Version must be 13");
        return 0;
    }

    h = ngx_http_flags_ws_header(r, "Sec-WebSocket-Key",
                                 sizeof("Sec-WebSocket-Key") - 1);

    /* the key is 16 bytes in base64: 24 characters */
    decoded.data = raw;

    if (h == NULL || h->value.len != 24
        || ngx_decode_base64(&decoded, &h->value) != NGX_OK
        || decoded.len != 16)
    {
        *rc = ngx_http_flags_send_error(r, NGX_HTTP_BAD_REQUEST,
                                        "bad_handshake",
                                        "Sec-WebSocket-Key must be 16 bytes "
                                        "in base64");
        return 0;
    }

    *key = h->value;

    return 1;
}


static ngx_table_elt_t *
ngx_http_flags_ws_header(ngx_http_request_t *r, const char *name, size_t len)
{
    ngx_uint_t        i;
    ngx_list_part_t  *part;
    ngx_table_elt_t  *h, *found;

    part = &r->headers_in.headers.part;
    h = part->elts;
    found = NULL;

    for (i = 0; /* void */ ; i++) {

        if (i >= part->nelts) {
            if (part->next == NULL) {
                break;
            }

            part = part->next;
            h = part->elts;
            i = 0;
        }

        if (h[i].key.len == len
            && ngx_strncasecmp(h[i].key.data, (u_char *) name, len) == 0)
        {
            if (found) {
                return NULL;            /* given twice: none is right */
            }

            found = &h[i];
        }
    }

    return found;
}


/* A header of that name (there may be several) lists the token in its
 * comma-separated value (any case). */

static ngx_uint_t
ngx_http_flags_ws_has_token(ngx_http_request_t *r, const char *name,
    const char *token)
{
    u_char           *p, *last, *start;
    size_t            len, name_len;
    ngx_uint_t        i;
    ngx_list_part_t  *part;
    ngx_table_elt_t  *h;

    len = ngx_strlen(token);
    name_len = ngx_strlen(name);
    part = &r->headers_in.headers.part;
    h = part->elts;

    for (i = 0; /* void */ ; i++) {

        if (i >= part->nelts) {
            if (part->next == NULL) {
                return 0;
            }

            part = part->next;
            h = part->elts;
            i = 0;
        }

        if (h[i].key.len != name_len
            || ngx_strncasecmp(h[i].key.data, (u_char *) name, name_len)
               != 0)
        {
            continue;
        }

        p = h[i].value.data;
        last = p + h[i].value.len;

        while (p < last) {
            while (p < last && (*p == ' ' || *p == '\t' || *p == ',')) {
                p++;
            }

            start = p;

            while (p < last && *p != ',' && *p != ' ' && *p != '\t') {
                p++;
            }

            if ((size_t) (p - start) == len
                && ngx_strncasecmp(start, (u_char *) token, len) == 0)
            {
                return 1;
            }

            while (p < last && *p != ',') {
                p++;
            }
        }
    }
}


static void
ngx_http_flags_ws_read_handler(ngx_http_request_t *r)
{
    ngx_http_flags_push_t  *push;

    push = ngx_http_get_module_ctx(r, ngx_http_flags_module);

    if (r->connection->read->timedout) {
        /* no answer to our close frame */
        ngx_http_flags_push_end(push, NGX_HTTP_CLOSE);
        return;
    }

    ngx_http_flags_ws_run(push, 1);
}


static void
ngx_http_flags_ws_write_handler(ngx_http_request_t *r)
{
    ngx_connection_t       *c;
    ngx_http_flags_push_t  *push;

    c = r->connection;
    push = ngx_http_get_module_ctx(r, ngx_http_flags_module);

    if (c->write->timedout) {
        ngx_log_error(NGX_LOG_INFO, c->log, NGX_ETIMEDOUT,
                      "flags push: WebSocket client timed out");
        c->timedout = 1;
        ngx_http_flags_push_end(push, NGX_HTTP_REQUEST_TIME_OUT);
        return;
    }

    ngx_http_flags_ws_run(push, 0);
}


/*
 * Everything a WebSocket does goes through here, and only here is it
 * ended: read (when asked) what the peer sent, act on what that found,
 * send what is queued, then either wait or end.
 */

static void
ngx_http_flags_ws_run(ngx_http_flags_push_t *push, ngx_uint_t read)
{
    ngx_int_t                  rc;
    ngx_connection_t          *c;
    ngx_http_request_t        *r;
    ngx_http_core_loc_conf_t  *clcf;

    r = push->request;
    c = r->connection;
    clcf = ngx_http_get_module_loc_conf(r, ngx_http_core_module);

    if (!push->upgraded) {
        /* the 101 first: nothing may be written beside nginx's buffers */
        if (ngx_http_output_filter(r, NULL) == NGX_ERROR) {
            ngx_http_flags_push_end(push, NGX_ERROR);
            return;
        }

        push->upgraded = !(r->buffered || c->buffered);
    }

    if (read && wslay_event_want_read(push->ws)) {
        rc = wslay_event_recv(push->ws);

        if (push->eof) {
            ngx_log_error(NGX_LOG_INFO, c->log, 0,
                          "flags push: WebSocket client closed the "
                          "connection");
            ngx_http_flags_push_end(push, NGX_HTTP_CLIENT_CLOSED_REQUEST);
            return;
        }

        if (rc != 0) {
            /*
             * a frame wslay cannot parse (a control frame over 125 bytes
             * or in fragments): it queued a close frame without a code,
             * sent once if the socket takes it
             */
            ngx_log_error(NGX_LOG_INFO, c->log, 0,
                          "flags push: WebSocket client sent a malformed "
                          "frame");
            (void) wslay_event_send(push->ws);
            r->keepalive = 0;
            r->lingering_close = 1;
            ngx_http_flags_push_end(push, NGX_DONE);
            return;
        }
    }

    if (push->violation) {
        ngx_log_error(NGX_LOG_INFO, c->log, 0,
                      "flags push: closing WebSocket with %ud: %s",
                      (ngx_uint_t) push->violation, push->why);
        (void) wslay_event_queue_close(push->ws, push->violation, NULL, 0);

        if (push->deaf) {
            /* what the client sends next is not read, only dropped */
            wslay_event_shutdown_read(push->ws);
        }

        push->violation = 0;
    }

    if (push->failed
        || wslay_event_get_queued_msg_length(push->ws)
           > NGX_HTTP_FLAGS_WS_SEND_MAX)
    {
        /* a peer that does not read: nothing more can reach it */
        ngx_log_error(NGX_LOG_INFO, c->log, 0,
                      "flags push: dropping WebSocket client: %s",
                      push->failed && push->why ? push->why
                      : "it does not read what is sent");
        ngx_http_flags_push_end(push, NGX_HTTP_REQUEST_TIME_OUT);
        return;
    }

    if (push->upgraded && wslay_event_want_write(push->ws)) {
        if (wslay_event_send(push->ws) != 0) {
            ngx_http_flags_push_end(push, NGX_HTTP_CLIENT_CLOSED_REQUEST);
            return;
        }
    }

    if (wslay_event_get_close_sent(push->ws)
        && !wslay_event_want_write(push->ws))
    {
        ngx_http_flags_push_detach(push);
        r->keepalive = 0;

        if (wslay_event_get_close_received(push->ws)) {
            /* the closing handshake is complete: the server closes the
             * TCP connection (RFC 6455 7.1.1), now */
            ngx_http_flags_push_end(push, NGX_HTTP_CLOSE);
            return;
        }

        if (!wslay_event_get_read_enabled(push->ws)) {
            /* a client closed for what it sent: nginx reads and drops
             * what it still sends until it closes (lingering close) */
            r->lingering_close = 1;
            ngx_http_flags_push_end(push, NGX_DONE);
            return;
        }

        /* our close (1001): the peer's answer is awaited a while */
        if (!c->read->timer_set) {
            ngx_add_timer(c->read, NGX_HTTP_FLAGS_WS_CLOSE_WAIT);
        }
    }

    if (wslay_event_want_write(push->ws) || !push->upgraded) {
        if (!c->write->timer_set) {
            ngx_add_timer(c->write, clcf->send_timeout);
        }

        if (ngx_handle_write_event(c->write, 0) != NGX_OK) {
            ngx_http_flags_push_end(push, NGX_ERROR);
            return;
        }

    } else if (c->write->timer_set) {
        ngx_del_timer(c->write);
    }

    if (ngx_handle_read_event(c->read, 0) != NGX_OK) {
        ngx_http_flags_push_end(push, NGX_ERROR);
    }
}


/* Queues {"type":"flags_refreshed","flags":[...]} for the connection's
 * user, with the zone's effective percentages as GET /flags has them;
 * not counted (docs/push.md). */

static ngx_int_t
ngx_http_flags_ws_refresh(ngx_http_flags_push_t *push)
{
    int                         rc;
    u_char                     *out;
    size_t                      len;
    ngx_pool_t                 *pool;
    ngx_http_flags_answer_t     answer;
    ngx_http_flags_project_t   *project;
    struct wslay_event_msg      msg;

    project = push->project;

    pool = ngx_create_pool(NGX_DEFAULT_POOL_SIZE,
                           push->request->connection->log);
    if (pool == NULL) {
        return NGX_ERROR;
    }

    out = ngx_pnalloc(pool, fl_sdk_refresh_json_bound(project->core));

    if (out == NULL
        || ngx_http_flags_answer_init(&answer, pool, project) != NGX_OK)
    {
        ngx_destroy_pool(pool);
        return NGX_ERROR;
    }

    ngx_http_flags_answer_evaluate(&answer, &push->user,
                                   NGX_HTTP_FLAGS_NOT_COUNTED);

    len = fl_sdk_refresh_json(project->core, &push->user, answer.detail,
                              (char *) out);

    msg.opcode = WSLAY_TEXT_FRAME;
    msg.msg = out;
    msg.msg_length = len;

    /* wslay copies the message */
    rc = wslay_event_queue_msg(push->ws, &msg);

    ngx_destroy_pool(pool);

    /* after a close frame nothing more is sent, and that is fine */
    return (rc == 0 || rc == WSLAY_ERR_NO_MORE_MSG) ? NGX_OK : NGX_ERROR;
}


/* A close frame to queue (at the next ngx_http_flags_ws_run()); deaf:
 * the client's fault, nothing more it sends is read, so its answer to
 * the close is not awaited either. */

static void
ngx_http_flags_ws_close(ngx_http_flags_push_t *push, uint16_t code,
    const char *why, ngx_uint_t deaf)
{
    if (push->violation == 0 && !wslay_event_get_close_sent(push->ws)) {
        push->violation = code;
        push->why = why;
        push->deaf = deaf;
    }
}


/* A text message of the client (docs/push.md). */

static void
ngx_http_flags_ws_message(ngx_http_flags_push_t *push, const uint8_t *msg,
    size_t len)
{
    char               err[256];
    long               idx;
    int64_t            now;
    ngx_uint_t         i;
    ngx_pool_t        *pool;
    fl_alloc_t         alloc;
    fl_status_t        st;
    fl_sdk_message_t   m;

    pool = ngx_create_pool(NGX_DEFAULT_POOL_SIZE,
                           push->request->connection->log);
    if (pool == NULL) {
        push->failed = 1;
        push->why = "out of memory";
        return;
    }

    alloc.alloc = ngx_http_flags_pool_alloc;
    alloc.ctx = pool;

    st = fl_sdk_parse_message((const char *) msg, len, push->max_traits,
                              &alloc, &m, err, sizeof(err));

    switch (st) {

    case FL_OK:
        /*
         * The SDK evaluates locally and reports what it answered: each
         * evaluation counts like one flag of a GET /flags, so the error
         * rate of SDK users has its denominator (docs/push.md)
         */
        now = ngx_http_flags_now_sec();

        for (i = 0; i < m.nevals; i++) {
            idx = fl_project_find_flag(push->project->core,
                                       m.evals[i].flag_name,
                                       m.evals[i].flag_name_len);
            if (idx >= 0) {
                ngx_http_flags_count_evaluation(push->project,
                                                (ngx_uint_t) idx,
                                                m.evals[i].result, now);
            }
        }

        if (m.type == FL_SDK_MSG_UNKNOWN || !m.has_user
            || ngx_http_flags_ws_same_user(&push->user, &m.user))
        {
            break;
        }

        /* another user: the flags for that one, at once */
        if (ngx_http_flags_ws_set_user(push, &m.user) != NGX_OK
            || ngx_http_flags_ws_refresh(push) != NGX_OK)
        {
            push->failed = 1;
            push->why = "out of memory";
        }

        break;

    case FL_ERR_JSON:
        ngx_http_flags_ws_error(push, "invalid_json", err);
        break;

    case FL_ERR_FIELD:
        ngx_http_flags_ws_error(push, "invalid_field", err);
        break;

    default:
        push->failed = 1;
        push->why = "out of memory";
        break;
    }

    ngx_destroy_pool(pool);
}


/* {"type":"error","error":code,"message":...}: the SDKs ignore a type
 * they do not know, a person reading the traffic sees why. */

static void
ngx_http_flags_ws_error(ngx_http_flags_push_t *push, const char *code,
    const char *message)
{
    u_char                  *buf;
    size_t                   len;
    struct wslay_event_msg   msg;

    len = ngx_strlen(message);

    buf = ngx_alloc(fl_error_json_bound(ngx_strlen(code), len),
                    push->request->connection->log);
    if (buf == NULL) {
        push->failed = 1;
        push->why = "out of memory";
        return;
    }

    msg.opcode = WSLAY_TEXT_FRAME;
    msg.msg = buf;
    msg.msg_length = fl_error_json(1, code, message, len, (char *) buf);

    (void) wslay_event_queue_msg(push->ws, &msg);

    ngx_free(buf);
}


/* The user of the connection becomes a copy of u (its own pool, so that
 * what the previous one held is freed). */

static ngx_int_t
ngx_http_flags_ws_set_user(ngx_http_flags_push_t *push, fl_user_t *u)
{
    size_t       i;
    ngx_pool_t  *pool;
    fl_user_t    copy;
    fl_trait_t  *t;

    pool = ngx_create_pool(NGX_DEFAULT_POOL_SIZE,
                           push->request->connection->log);
    if (pool == NULL) {
        return NGX_ERROR;
    }

    copy.user_id = NULL;
    copy.user_id_len = 0;
    copy.traits = NULL;
    copy.ntraits = 0;

    if (u->user_id) {
        copy.user_id = ngx_pnalloc(pool, u->user_id_len + 1);
        if (copy.user_id == NULL) {
            goto failed;
        }

        ngx_memcpy((u_char *) copy.user_id, u->user_id, u->user_id_len);
        copy.user_id_len = u->user_id_len;
    }

    if (u->ntraits) {
        t = ngx_palloc(pool, u->ntraits * sizeof(fl_trait_t));
        if (t == NULL) {
            goto failed;
        }

        for (i = 0; i < u->ntraits; i++) {
            t[i].name = ngx_pnalloc(pool, u->traits[i].name_len + 1);
            t[i].value = ngx_pnalloc(pool, u->traits[i].value_len + 1);
            if (t[i].name == NULL || t[i].value == NULL) {
                goto failed;
            }

            ngx_memcpy((u_char *) t[i].name, u->traits[i].name,
                       u->traits[i].name_len);
            ngx_memcpy((u_char *) t[i].value, u->traits[i].value,
                       u->traits[i].value_len);
            t[i].name_len = u->traits[i].name_len;
            t[i].value_len = u->traits[i].value_len;
        }

        copy.traits = t;
        copy.ntraits = u->ntraits;
    }

    if (push->user_pool) {
        ngx_destroy_pool(push->user_pool);
    }

    push->user_pool = pool;
    push->user = copy;

    return NGX_OK;

failed:

    ngx_destroy_pool(pool);

    return NGX_ERROR;
}


/* Traits are sorted by name and unique: equal users are equal pairwise. */

static ngx_uint_t
ngx_http_flags_ws_same_user(fl_user_t *a, fl_user_t *b)
{
    size_t  i;

    if (a->user_id_len != b->user_id_len
        || (a->user_id_len
            && ngx_memcmp(a->user_id, b->user_id, a->user_id_len) != 0)
        || a->ntraits != b->ntraits)
    {
        return 0;
    }

    for (i = 0; i < a->ntraits; i++) {
        if (a->traits[i].name_len != b->traits[i].name_len
            || a->traits[i].value_len != b->traits[i].value_len
            || ngx_memcmp(a->traits[i].name, b->traits[i].name,
                          a->traits[i].name_len) != 0
            || ngx_memcmp(a->traits[i].value, b->traits[i].value,
                          a->traits[i].value_len) != 0)
        {
            return 0;
        }
    }

    return 1;
}


/* The second of the rate counts: a new one starts them again. */

static void
ngx_http_flags_ws_rate(ngx_http_flags_push_t *push)
{
    ngx_msec_t  second;

    second = ngx_current_msec / 1000;

    if (second != push->second) {
        push->second = second;
        push->frames = 0;
        push->bytes = 0;
    }
}


/* wslay reads: first what came with the handshake, then the socket. */

static ssize_t
ngx_http_flags_ws_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len,
    int flags, void *data)
{
    ngx_http_flags_push_t *push = data;

    ssize_t              n;
    ngx_buf_t           *b;
    ngx_connection_t    *c;

    c = push->request->connection;
    b = push->request->header_in;

    if (push->violation) {
        /* nothing more is read from a client being closed */
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }

    if (b->pos < b->last) {
        n = ngx_min((size_t) (b->last - b->pos), len);
        ngx_memcpy(buf, b->pos, n);
        b->pos += n;

    } else {
        n = c->recv(c, buf, len);

        if (n == NGX_AGAIN) {
            wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
            return -1;
        }

        if (n == 0 || n == NGX_ERROR) {
            push->eof = 1;
            wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
            return -1;
        }
    }

    push->last_in = ngx_current_msec;

    ngx_http_flags_ws_rate(push);
    push->bytes += n;

    if (push->bytes > NGX_HTTP_FLAGS_WS_MAX_BYTES) {
        ngx_http_flags_ws_close(push, WSLAY_CODE_POLICY_VIOLATION,
                                "more bytes in a second than allowed", 1);
    }

    return n;
}


static ssize_t
ngx_http_flags_ws_send(wslay_event_context_ptr ctx, const uint8_t *data,
    size_t len, int flags, void *user_data)
{
    ngx_http_flags_push_t *push = user_data;

    ssize_t            n;
    ngx_connection_t  *c;

    c = push->request->connection;

    n = c->send(c, (u_char *) data, len);

    if (n == NGX_AGAIN || n == 0) {
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }

    if (n == NGX_ERROR) {
        wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
    }

    return n;
}


/* Every frame the client starts counts toward its rate (control frames
 * too: a ping flood is a flood). */

static void
ngx_http_flags_ws_frame_start(wslay_event_context_ptr ctx,
    const struct wslay_event_on_frame_recv_start_arg *arg, void *data)
{
    ngx_http_flags_push_t *push = data;

    ngx_http_flags_ws_rate(push);

    if (++push->frames > NGX_HTTP_FLAGS_WS_MAX_FRAMES) {
        ngx_http_flags_ws_close(push, WSLAY_CODE_POLICY_VIOLATION,
                                "more frames in a second than allowed", 1);
    }
}


static void
ngx_http_flags_ws_msg(wslay_event_context_ptr ctx,
    const struct wslay_event_on_msg_recv_arg *arg, void *data)
{
    ngx_http_flags_push_t *push = data;

    if (push->violation) {
        return;
    }

    switch (arg->opcode) {

    case WSLAY_TEXT_FRAME:
        ngx_http_flags_ws_message(push, arg->msg, arg->msg_length);
        break;

    case WSLAY_BINARY_FRAME:
        ngx_http_flags_ws_close(push, WSLAY_CODE_UNSUPPORTED_DATA,
                                "a binary message", 1);
        break;

    default:
        /* ping (wslay answers it), pong, close (wslay answers it) */
        break;
    }
}


/* ---------------------------------------------------------- shared */


/* A push connection for r, or (void *) -1 when the worker is full. */

static ngx_http_flags_push_t *
ngx_http_flags_push_create(ngx_http_request_t *r,
    ngx_http_flags_project_t *project)
{
    ngx_pool_cleanup_t            *cln;
    ngx_http_flags_push_t         *push;
    ngx_http_flags_loc_conf_t     *flcf;
    ngx_http_flags_main_conf_t    *fmcf;
    ngx_http_flags_push_worker_t  *w;

    w = &ngx_http_flags_push_worker;
    fmcf = ngx_http_get_module_main_conf(r, ngx_http_flags_module);
    flcf = ngx_http_get_module_loc_conf(r, ngx_http_flags_module);

    if (w->n >= fmcf->push_max
        || (w->fmcf && w->fmcf != fmcf && w->n > 0)
        || ngx_exiting)
    {
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "flags push: %ui connections in this worker, "
                      "flags_push_max_connections is %ui",
                      w->n, fmcf->push_max);
        return (void *) -1;
    }

    push = ngx_pcalloc(r->pool, sizeof(ngx_http_flags_push_t));
    if (push == NULL) {
        return NULL;
    }

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        return NULL;
    }

    cln->handler = ngx_http_flags_push_cleanup;
    cln->data = push;

    push->request = r;
    push->project = project;
    push->heartbeat = flcf->push_heartbeat;

    push->beat.handler = ngx_http_flags_push_beat;
    push->beat.data = push;
    push->beat.log = r->connection->log;
    push->beat.cancelable = 1;

    ngx_http_set_ctx(r, push, ngx_http_flags_module);

    return push;
}


static ngx_int_t
ngx_http_flags_push_register(ngx_http_flags_push_t *push)
{
    ngx_uint_t                     i, n;
    ngx_http_flags_main_conf_t    *fmcf;
    ngx_http_flags_push_worker_t  *w;

    w = &ngx_http_flags_push_worker;
    fmcf = ngx_http_get_module_main_conf(push->request,
                                         ngx_http_flags_module);

    if (w->fmcf != fmcf) {
        /* the first one in this worker (or in a new single-process
         * cycle): one queue and one last version a project */
        n = fmcf->projects.nelts;

        w->conns = ngx_palloc(fmcf->cycle->pool, n * sizeof(ngx_queue_t));
        w->seen = ngx_pcalloc(fmcf->cycle->pool,
                              n * sizeof(ngx_atomic_uint_t));
        if (w->conns == NULL || w->seen == NULL) {
            w->fmcf = NULL;
            return NGX_ERROR;
        }

        for (i = 0; i < n; i++) {
            ngx_queue_init(&w->conns[i]);
        }

        w->fmcf = fmcf;
        w->n = 0;

        ngx_memzero(&w->tick, sizeof(ngx_event_t));
        w->tick.handler = ngx_http_flags_push_tick;
        w->tick.data = w;
        w->tick.log = fmcf->cycle->log;
        /* not cancelable: an exiting worker waits for it to close the
         * connections (see ngx_http_flags_push_tick) */
        w->tick.cancelable = 0;
    }

    i = push->project - (ngx_http_flags_project_t *) fmcf->projects.elts;

    if (ngx_queue_empty(&w->conns[i])) {
        w->seen[i] = push->seen;
    }

    ngx_queue_insert_tail(&w->conns[i], &push->queue);
    push->registered = 1;
    w->n++;

    if (!w->tick.timer_set) {
        ngx_add_timer(&w->tick, NGX_HTTP_FLAGS_PUSH_TICK);
    }

    ngx_add_timer(&push->beat, push->heartbeat);

    return NGX_OK;
}


/* No longer pushed to (idempotent): out of the queue, no heartbeat. */

static void
ngx_http_flags_push_detach(ngx_http_flags_push_t *push)
{
    ngx_http_flags_push_worker_t  *w;

    if (push->beat.timer_set) {
        ngx_del_timer(&push->beat);
    }

    if (push->beat.posted) {
        ngx_delete_posted_event(&push->beat);
    }

    if (!push->registered) {
        return;
    }

    w = &ngx_http_flags_push_worker;

    ngx_queue_remove(&push->queue);
    push->registered = 0;
    w->n--;

    if (w->n == 0 && w->tick.timer_set) {
        ngx_del_timer(&w->tick);
    }
}


/* The request's pool goes: whatever ended it, nothing points to it. */

static void
ngx_http_flags_push_cleanup(void *data)
{
    ngx_http_flags_push_t *push = data;

    ngx_http_flags_push_detach(push);

    if (push->ws) {
        wslay_event_context_free(push->ws);
        push->ws = NULL;
    }

    if (push->user_pool) {
        ngx_destroy_pool(push->user_pool);
        push->user_pool = NULL;
    }
}


/* Ends the request (from any event: posted requests are run here). */

static void
ngx_http_flags_push_end(ngx_http_flags_push_t *push, ngx_int_t rc)
{
    ngx_connection_t    *c;
    ngx_http_request_t  *r;

    r = push->request;
    c = r->connection;

    ngx_http_flags_push_detach(push);

    ngx_http_finalize_request(r, rc);
    ngx_http_run_posted_requests(c);
}


/*
 * Every 100 ms while this worker holds push connections: the projects
 * whose answer version moved tell their connections.  An exiting worker
 * closes them all instead (this timer is what keeps it alive meanwhile).
 */

static void
ngx_http_flags_push_tick(ngx_event_t *ev)
{
    ngx_http_flags_push_worker_t *w = ev->data;

    ngx_uint_t                   i;
    ngx_queue_t                 *q, *next;
    ngx_atomic_uint_t            v;
    ngx_http_flags_push_t       *push;
    ngx_http_flags_project_t    *projects;

    projects = w->fmcf->projects.elts;

    if (ngx_exiting || ngx_quit || ngx_terminate) {
        for (i = 0; i < w->fmcf->projects.nelts; i++) {
            while (!ngx_queue_empty(&w->conns[i])) {
                q = ngx_queue_head(&w->conns[i]);
                push = ngx_queue_data(q, ngx_http_flags_push_t, queue);
                ngx_http_flags_push_going_away(push);
            }
        }

        return;
    }

    /* a worker of a replaced configuration pushes nothing */

    if (ngx_http_flags_zone_current(w->fmcf)) {

        for (i = 0; i < w->fmcf->projects.nelts; i++) {
            if (ngx_queue_empty(&w->conns[i])) {
                continue;
            }

            v = ngx_http_flags_answer_version(&projects[i]);

            if (v == w->seen[i]) {
                continue;
            }

            w->seen[i] = v;

            ngx_log_debug2(NGX_LOG_DEBUG_HTTP, ev->log, 0,
                           "flags push: project \"%V\" changed (answer "
                           "version %uA): telling its clients",
                           &projects[i].name, v);

            for (q = ngx_queue_head(&w->conns[i]);
                 q != ngx_queue_sentinel(&w->conns[i]);
                 q = next)
            {
                /* a connection may end here: only itself leaves */
                next = ngx_queue_next(q);
                push = ngx_queue_data(q, ngx_http_flags_push_t, queue);

                if (push->seen == v) {
                    continue;
                }

                if (push->websocket) {
                    push->seen = v;

                    if (ngx_http_flags_ws_refresh(push) != NGX_OK) {
                        push->failed = 1;
                        push->why = "out of memory";
                    }

                    ngx_http_flags_ws_run(push, 0);

                } else if (ngx_http_flags_sse_event(push) != NGX_OK) {
                    ngx_http_flags_push_end(push, NGX_ERROR);
                }
            }
        }
    }

    if (w->n && !ev->timer_set) {
        ngx_add_timer(ev, NGX_HTTP_FLAGS_PUSH_TICK);
    }
}


/* The worker exits: streams end, WebSockets are closed with 1001. */

static void
ngx_http_flags_push_going_away(ngx_http_flags_push_t *push)
{
    if (!push->websocket) {
        ngx_http_flags_sse_finish(push);
        return;
    }

    ngx_http_flags_push_detach(push);
    ngx_http_flags_ws_close(push, WSLAY_CODE_GOING_AWAY,
                            "the worker process exits", 0);
    ngx_http_flags_ws_run(push, 0);
}


/*
 * Every flags_push_heartbeat: an SSE comment, or a WebSocket ping; a
 * WebSocket peer that sent nothing (not even a pong) for two heartbeats
 * is closed with 1001.
 */

static void
ngx_http_flags_push_beat(ngx_event_t *ev)
{
    ngx_http_flags_push_t *push = ev->data;

    ngx_http_request_t      *r;
    struct wslay_event_msg   ping;

    r = push->request;

    ngx_add_timer(ev, push->heartbeat);

    if (!push->websocket) {
        if (r->buffered || r->connection->buffered) {
            return;         /* bytes wait already; send_timeout watches */
        }

        if (ngx_http_flags_sse_send(push, (u_char *) ": heartbeat\n\n",
                                    sizeof(": heartbeat\n\n") - 1)
            != NGX_OK)
        {
            ngx_http_flags_push_end(push, NGX_ERROR);
        }

        return;
    }

    if (ngx_current_msec - push->last_in >= 2 * push->heartbeat) {
        ngx_http_flags_ws_close(push, WSLAY_CODE_GOING_AWAY,
                                "the client sent nothing, not even a pong, "
                                "for two heartbeats", 0);

    } else {
        ping.opcode = WSLAY_PING;
        ping.msg = NULL;
        ping.msg_length = 0;

        if (wslay_event_queue_msg(push->ws, &ping) == WSLAY_ERR_NOMEM) {
            push->failed = 1;
            push->why = "out of memory";
        }
    }

    ngx_http_flags_ws_run(push, 0);
}

