/*
 * ngx_http_flags_push_ws.c - flags_websocket (docs/push.md): the
 * DeployRamp SDK's channel, GET /ws?token=T with the RFC 6455 handshake.
 * The server sends "flags_refreshed" with the flags for the connection's
 * user at once and at each change of the project's answers; the client
 * sends its user and the batches of what it evaluated, which are counted.
 *
 * This file owns the handshake, wslay's callbacks over the connection's
 * own recv and send after the 101, the client's messages and its limits,
 * and the closing handshake.  The registry (ngx_http_flags_push.c) tells
 * it of changes, heartbeats (a ping, or the close of an idle peer) and
 * the worker's exit (a close with 1001).  What a connection may hold is
 * bounded: NGX_HTTP_FLAGS_WS_SEND_MAX queued bytes, one message of
 * flags_max_report_size being read, and the client's rate below.
 */

#include "ngx_http_flags_push.h"

#include <ngx_sha1.h>
#include <wslay/wslay.h>


/* queued WebSocket bytes beyond which the peer is taken for gone */
#define NGX_HTTP_FLAGS_WS_SEND_MAX      (1024 * 1024)
/* what a client may send in one second before it is closed with 1008 */
#define NGX_HTTP_FLAGS_WS_MAX_FRAMES    1000
#define NGX_HTTP_FLAGS_WS_MAX_BYTES     (1024 * 1024)
/* how long the answer to a close frame of ours is awaited */
#define NGX_HTTP_FLAGS_WS_CLOSE_WAIT    2000         /* ms */

#define NGX_HTTP_FLAGS_WS_GUID  "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

/* nginx names no 426 */
#define NGX_HTTP_FLAGS_UPGRADE_REQUIRED  426


typedef struct {
    ngx_http_flags_push_t        push;       /* first: the registry's */

    wslay_event_context_ptr      wslay;
    ngx_pool_t                  *user_pool;  /* holds user's strings */
    fl_user_t                    user;
    ngx_msec_t                   last_in;    /* the peer last sent */
    ngx_msec_t                   second;     /* of the rate counts */
    ngx_uint_t                   frames;
    size_t                       bytes;
    size_t                       max_traits;
    uint16_t                     violation;  /* a close code to send */
    const char                  *why;        /* the reason, logged */

    unsigned                     upgraded:1; /* the 101 is sent */
    unsigned                     eof:1;      /* the peer is gone */
    unsigned                     failed:1;   /* drop it */
    unsigned                     deaf:1;     /* read no more */
} ngx_http_flags_ws_t;


static ngx_int_t ngx_http_flags_ws_init(ngx_http_flags_ws_t *ws);
static ngx_int_t ngx_http_flags_ws_accept(ngx_http_request_t *r,
    ngx_str_t *key, ngx_str_t *accept);
static ngx_int_t ngx_http_flags_ws_switch(ngx_http_request_t *r,
    ngx_str_t *accept);
static ngx_int_t ngx_http_flags_ws_start(ngx_http_flags_ws_t *ws);
static ngx_uint_t ngx_http_flags_ws_handshake(ngx_http_request_t *r,
    ngx_str_t *key, ngx_int_t *rc);
static ngx_table_elt_t *ngx_http_flags_ws_header(ngx_http_request_t *r,
    const char *name, size_t len);
static ngx_uint_t ngx_http_flags_ws_has_token(ngx_http_request_t *r,
    const char *name, const char *token);
static void ngx_http_flags_ws_read_handler(ngx_http_request_t *r);
static void ngx_http_flags_ws_write_handler(ngx_http_request_t *r);
static void ngx_http_flags_ws_run(ngx_http_flags_ws_t *ws, ngx_uint_t read);
static ngx_int_t ngx_http_flags_ws_receive(ngx_http_flags_ws_t *ws);
static ngx_int_t ngx_http_flags_ws_flush(ngx_http_flags_ws_t *ws);
static ngx_int_t ngx_http_flags_ws_closing(ngx_http_flags_ws_t *ws);
static void ngx_http_flags_ws_wait(ngx_http_flags_ws_t *ws);
static ngx_int_t ngx_http_flags_ws_refresh(ngx_http_flags_ws_t *ws);
static ngx_int_t ngx_http_flags_ws_refresh_answer(ngx_http_flags_ws_t *ws,
    ngx_pool_t *pool, ngx_str_t *answer);
static void ngx_http_flags_ws_close(ngx_http_flags_ws_t *ws, uint16_t code,
    const char *why, ngx_uint_t deaf);
static void ngx_http_flags_ws_message(ngx_http_flags_ws_t *ws,
    const uint8_t *msg, size_t len);
static void ngx_http_flags_ws_count_batch(ngx_http_flags_ws_t *ws,
    fl_sdk_message_t *m);
static void ngx_http_flags_ws_no_memory(ngx_http_flags_ws_t *ws);
static void ngx_http_flags_ws_error(ngx_http_flags_ws_t *ws,
    const char *code, const char *message);
static ngx_int_t ngx_http_flags_ws_set_user(ngx_http_flags_ws_t *ws,
    fl_user_t *u);
static ngx_uint_t ngx_http_flags_ws_same_user(fl_user_t *a, fl_user_t *b);
static void ngx_http_flags_ws_rate(ngx_http_flags_ws_t *ws);
static ssize_t ngx_http_flags_ws_recv(wslay_event_context_ptr ctx,
    uint8_t *buf, size_t len, int flags, void *data);
static ssize_t ngx_http_flags_ws_send(wslay_event_context_ptr ctx,
    const uint8_t *data, size_t len, int flags, void *user_data);
static void ngx_http_flags_ws_frame_start(wslay_event_context_ptr ctx,
    const struct wslay_event_on_frame_recv_start_arg *arg, void *data);
static void ngx_http_flags_ws_msg(wslay_event_context_ptr ctx,
    const struct wslay_event_on_msg_recv_arg *arg, void *data);
static void ngx_http_flags_ws_changed(ngx_http_flags_push_t *push,
    ngx_atomic_uint_t v);
static void ngx_http_flags_ws_beat(ngx_http_flags_push_t *push);
static void ngx_http_flags_ws_going_away(ngx_http_flags_push_t *push);
static void ngx_http_flags_ws_cleanup(ngx_http_flags_push_t *push);


static struct wslay_event_callbacks  ngx_http_flags_ws_callbacks = {
    ngx_http_flags_ws_recv,
    ngx_http_flags_ws_send,
    NULL,                                   /* genmask: servers do not mask */
    ngx_http_flags_ws_frame_start,
    NULL,
    NULL,
    ngx_http_flags_ws_msg
};


static const ngx_http_flags_push_transport_t  ngx_http_flags_ws_transport = {
    ngx_http_flags_ws_changed,
    ngx_http_flags_ws_beat,
    ngx_http_flags_ws_going_away,
    ngx_http_flags_ws_cleanup
};


/* ------------------------------------------------------- handshake */


/*
 * flags_websocket: GET ?token=T with the RFC 6455 handshake.  Checks: the
 * token (401), the method (405), the handshake (400; another version than
 * 13: 426), the per-worker cap (503); then 101 and the channel.
 */

ngx_int_t
ngx_http_flags_websocket_handler(ngx_http_request_t *r)
{
    ngx_int_t                  rc;
    ngx_str_t                  key, accept;
    ngx_http_flags_ws_t       *ws;
    ngx_http_flags_project_t  *project;

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

    ws = (ngx_http_flags_ws_t *)
         ngx_http_flags_push_create(r, project, sizeof(ngx_http_flags_ws_t),
                                    &ngx_http_flags_ws_transport);
    if (ws == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (ws == (void *) -1) {
        return ngx_http_flags_send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                         "too_many_connections",
                                         "this worker holds "
                                         "flags_push_max_connections push "
                                         "connections already");
    }

    if (ngx_http_flags_ws_init(ws) != NGX_OK
        || ngx_http_flags_ws_accept(r, &key, &accept) != NGX_OK)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    rc = ngx_http_flags_ws_switch(r, &accept);
    if (rc != NGX_OK) {
        return rc;
    }

    return ngx_http_flags_ws_start(ws);
}


/* The connection's limits and its wslay context. */

static ngx_int_t
ngx_http_flags_ws_init(ngx_http_flags_ws_t *ws)
{
    ngx_http_flags_loc_conf_t  *flcf;

    flcf = ngx_http_get_module_loc_conf(ws->push.request,
                                        ngx_http_flags_module);

    ws->max_traits = flcf->max_traits;
    ws->last_in = ngx_current_msec;
    ws->second = ngx_current_msec / 1000;

    if (wslay_event_context_server_init(&ws->wslay,
                                        &ngx_http_flags_ws_callbacks, ws)
        != 0)
    {
        ws->wslay = NULL;
        return NGX_ERROR;
    }

    /* a message (fragments included) larger than a report body: 1009 */
    wslay_event_config_set_max_recv_msg_length(ws->wslay,
                                               flcf->max_report_size);

    return NGX_OK;
}


/* Sec-WebSocket-Accept: base64(SHA-1(key + GUID)) */

static ngx_int_t
ngx_http_flags_ws_accept(ngx_http_request_t *r, ngx_str_t *key,
    ngx_str_t *accept)
{
    u_char      digest[20];
    ngx_str_t   src;
    ngx_sha1_t  sha1;

    ngx_sha1_init(&sha1);
    ngx_sha1_update(&sha1, key->data, key->len);
    ngx_sha1_update(&sha1, NGX_HTTP_FLAGS_WS_GUID,
                    sizeof(NGX_HTTP_FLAGS_WS_GUID) - 1);
    ngx_sha1_final(digest, &sha1);

    accept->data = ngx_pnalloc(r->pool, ngx_base64_encoded_length(20));
    if (accept->data == NULL) {
        return NGX_ERROR;
    }

    src.data = digest;
    src.len = 20;
    ngx_encode_base64(accept, &src);

    return NGX_OK;
}


/* The 101, sent now: NGX_OK, or what the request ends with. */

static ngx_int_t
ngx_http_flags_ws_switch(ngx_http_request_t *r, ngx_str_t *accept)
{
    ngx_int_t  rc;

    r->headers_out.status = NGX_HTTP_SWITCHING_PROTOCOLS;
    ngx_str_set(&r->headers_out.status_line, "101 Switching Protocols");
    r->headers_out.content_length_n = -1;
    r->keepalive = 0;

    if (ngx_http_flags_add_header(r, "Upgrade", (u_char *) "websocket", 9)
        == NULL
        || ngx_http_flags_add_header(r, "Sec-WebSocket-Accept", accept->data,
                                      accept->len)
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

    return NGX_OK;
}


/* After the 101: the first flags, the registry, the event handlers. */

static ngx_int_t
ngx_http_flags_ws_start(ngx_http_flags_ws_t *ws)
{
    ngx_connection_t    *c;
    ngx_http_request_t  *r;

    r = ws->push.request;
    c = r->connection;

    /* small messages that must not wait for Nagle */
    (void) ngx_tcp_nodelay(c);

    /* the flags of no one yet (docs/push.md) */
    ws->push.seen = ngx_http_flags_answer_version(ws->push.project);

    if (ngx_http_flags_ws_refresh(ws) != NGX_OK) {
        return NGX_ERROR;
    }

    if (ngx_http_flags_push_register(&ws->push) != NGX_OK) {
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

    ngx_log_debug0(NGX_LOG_DEBUG_HTTP, c->log, 0, "flags: push: websocket");

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
    ngx_http_flags_ws_t    *ws;

    ws = ngx_http_get_module_ctx(r, ngx_http_flags_module);

    if (r->connection->read->timedout) {
        /* no answer to our close frame */
        ngx_http_flags_push_end(&ws->push, NGX_HTTP_CLOSE);
        return;
    }

    ngx_http_flags_ws_run(ws, 1);
}


static void
ngx_http_flags_ws_write_handler(ngx_http_request_t *r)
{
    ngx_connection_t       *c;
    ngx_http_flags_ws_t    *ws;

    c = r->connection;
    ws = ngx_http_get_module_ctx(r, ngx_http_flags_module);

    if (c->write->timedout) {
        ngx_log_error(NGX_LOG_INFO, c->log, NGX_ETIMEDOUT,
                      "flags: push: WebSocket client timed out");
        c->timedout = 1;
        ngx_http_flags_push_end(&ws->push, NGX_HTTP_REQUEST_TIME_OUT);
        return;
    }

    ngx_http_flags_ws_run(ws, 0);
}


/*
 * Everything a WebSocket does goes through here, and only here (and in
 * the functions it calls) is it ended: read (when asked) what the peer
 * sent, act on what that found, send what is queued, then either wait or
 * end.
 */

static void
ngx_http_flags_ws_run(ngx_http_flags_ws_t *ws, ngx_uint_t read)
{
    ngx_connection_t    *c;
    ngx_http_request_t  *r;

    r = ws->push.request;
    c = r->connection;

    if (!ws->upgraded) {
        /* the 101 first: nothing may be written beside nginx's buffers */
        if (ngx_http_output_filter(r, NULL) == NGX_ERROR) {
            ngx_http_flags_push_end(&ws->push, NGX_ERROR);
            return;
        }

        ws->upgraded = !(r->buffered || c->buffered);
    }

    if (read && wslay_event_want_read(ws->wslay)
        && ngx_http_flags_ws_receive(ws) != NGX_OK)
    {
        return;
    }

    if (ws->violation) {
        ngx_log_error(NGX_LOG_INFO, c->log, 0,
                      "flags: push: closing WebSocket with %ud: %s",
                      (ngx_uint_t) ws->violation, ws->why);
        (void) wslay_event_queue_close(ws->wslay, ws->violation, NULL, 0);

        if (ws->deaf) {
            /* what the client sends next is not read, only dropped */
            wslay_event_shutdown_read(ws->wslay);
        }

        ws->violation = 0;
    }

    if (ngx_http_flags_ws_flush(ws) != NGX_OK) {
        return;
    }

    if (wslay_event_get_close_sent(ws->wslay)
        && !wslay_event_want_write(ws->wslay)
        && ngx_http_flags_ws_closing(ws) != NGX_OK)
    {
        return;
    }

    ngx_http_flags_ws_wait(ws);
}


/* What the peer sent, through wslay's callbacks: NGX_OK, or NGX_DONE when
 * that ended the connection. */

static ngx_int_t
ngx_http_flags_ws_receive(ngx_http_flags_ws_t *ws)
{
    int                  rc;
    ngx_connection_t    *c;
    ngx_http_request_t  *r;

    r = ws->push.request;
    c = r->connection;

    rc = wslay_event_recv(ws->wslay);

    if (ws->eof) {
        ngx_log_error(NGX_LOG_INFO, c->log, 0,
                      "flags: push: WebSocket client closed the "
                      "connection");
        ngx_http_flags_push_end(&ws->push, NGX_HTTP_CLIENT_CLOSED_REQUEST);
        return NGX_DONE;
    }

    if (rc != 0) {
        /*
         * a frame wslay cannot parse (a control frame over 125 bytes
         * or in fragments): it queued a close frame without a code,
         * sent once if the socket takes it
         */
        ngx_log_error(NGX_LOG_INFO, c->log, 0,
                      "flags: push: WebSocket client sent a malformed "
                      "frame");
        (void) wslay_event_send(ws->wslay);
        r->keepalive = 0;
        r->lingering_close = 1;
        ngx_http_flags_push_end(&ws->push, NGX_DONE);
        return NGX_DONE;
    }

    return NGX_OK;
}


/* Sends what is queued, once the 101 is out: NGX_OK, or NGX_DONE when the
 * peer is dropped (it takes nothing, or the connection failed). */

static ngx_int_t
ngx_http_flags_ws_flush(ngx_http_flags_ws_t *ws)
{
    ngx_connection_t  *c;

    c = ws->push.request->connection;

    if (ws->failed
        || wslay_event_get_queued_msg_length(ws->wslay)
           > NGX_HTTP_FLAGS_WS_SEND_MAX)
    {
        /* a peer that does not read: nothing more can reach it */
        ngx_log_error(NGX_LOG_INFO, c->log, 0,
                      "flags: push: dropping WebSocket client: %s",
                      ws->failed && ws->why ? ws->why
                      : "it does not read what is sent");
        ngx_http_flags_push_end(&ws->push, NGX_HTTP_REQUEST_TIME_OUT);
        return NGX_DONE;
    }

    if (ws->upgraded && wslay_event_want_write(ws->wslay)) {
        if (wslay_event_send(ws->wslay) != 0) {
            ngx_http_flags_push_end(&ws->push,
                                    NGX_HTTP_CLIENT_CLOSED_REQUEST);
            return NGX_DONE;
        }
    }

    return NGX_OK;
}


/* Our close frame is sent: no more pushes; the connection ends now
 * (NGX_DONE), or when the peer's close arrives (NGX_OK, awaited a
 * while). */

static ngx_int_t
ngx_http_flags_ws_closing(ngx_http_flags_ws_t *ws)
{
    ngx_event_t         *rev;
    ngx_http_request_t  *r;

    r = ws->push.request;
    rev = r->connection->read;

    ngx_http_flags_push_detach(&ws->push);
    r->keepalive = 0;

    if (wslay_event_get_close_received(ws->wslay)) {
        /* the closing handshake is complete: the server closes the
         * TCP connection (RFC 6455 7.1.1), now */
        ngx_http_flags_push_end(&ws->push, NGX_HTTP_CLOSE);
        return NGX_DONE;
    }

    if (!wslay_event_get_read_enabled(ws->wslay)) {
        /* a client closed for what it sent: nginx reads and drops
         * what it still sends until it closes (lingering close) */
        r->lingering_close = 1;
        ngx_http_flags_push_end(&ws->push, NGX_DONE);
        return NGX_DONE;
    }

    /* our close (1001): the peer's answer is awaited a while */
    if (!rev->timer_set) {
        ngx_add_timer(rev, NGX_HTTP_FLAGS_WS_CLOSE_WAIT);
    }

    return NGX_OK;
}


/* The events to wait for: writing while bytes are queued (send_timeout
 * bounds it), reading always. */

static void
ngx_http_flags_ws_wait(ngx_http_flags_ws_t *ws)
{
    ngx_connection_t          *c;
    ngx_http_request_t        *r;
    ngx_http_core_loc_conf_t  *clcf;

    r = ws->push.request;
    c = r->connection;
    clcf = ngx_http_get_module_loc_conf(r, ngx_http_core_module);

    if (wslay_event_want_write(ws->wslay) || !ws->upgraded) {
        if (!c->write->timer_set) {
            ngx_add_timer(c->write, clcf->send_timeout);
        }

        if (ngx_handle_write_event(c->write, 0) != NGX_OK) {
            ngx_http_flags_push_end(&ws->push, NGX_ERROR);
            return;
        }

    } else if (c->write->timer_set) {
        ngx_del_timer(c->write);
    }

    if (ngx_handle_read_event(c->read, 0) != NGX_OK) {
        ngx_http_flags_push_end(&ws->push, NGX_ERROR);
    }
}


/* Queues {"type":"flags_refreshed","flags":[...]} for the connection's
 * user; not counted (docs/push.md). */

static ngx_int_t
ngx_http_flags_ws_refresh(ngx_http_flags_ws_t *ws)
{
    int                      rc;
    ngx_str_t                answer;
    ngx_pool_t              *pool;
    struct wslay_event_msg   msg;

    pool = ngx_create_pool(NGX_DEFAULT_POOL_SIZE,
                           ws->push.request->connection->log);
    if (pool == NULL) {
        return NGX_ERROR;
    }

    if (ngx_http_flags_ws_refresh_answer(ws, pool, &answer) != NGX_OK) {
        ngx_destroy_pool(pool);
        return NGX_ERROR;
    }

    msg.opcode = WSLAY_TEXT_FRAME;
    msg.msg = answer.data;
    msg.msg_length = answer.len;

    /* wslay copies the message */
    rc = wslay_event_queue_msg(ws->wslay, &msg);

    ngx_destroy_pool(pool);

    /* after a close frame nothing more is sent, and that is fine */
    return (rc == 0 || rc == WSLAY_ERR_NO_MORE_MSG) ? NGX_OK : NGX_ERROR;
}


/* The message's text, in pool: the flags for the connection's user, with
 * the zone's effective percentages as GET /flags has them. */

static ngx_int_t
ngx_http_flags_ws_refresh_answer(ngx_http_flags_ws_t *ws, ngx_pool_t *pool,
    ngx_str_t *answer)
{
    u_char                     *out;
    ngx_http_flags_answer_t     a;

    if (ngx_http_flags_answer_init(&a, pool, ws->push.project,
                                   NGX_HTTP_FLAGS_DETAIL)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    out = ngx_pnalloc(pool, fl_sdk_refresh_json_bound(a.defs->core));
    if (out == NULL) {
        return NGX_ERROR;
    }

    /* not counted: the SDK reports what it answers (docs/evaluation.md) */
    ngx_http_flags_answer_evaluate(&a, &ws->user, NGX_HTTP_FLAGS_VALUES,
                                   NGX_HTTP_FLAGS_NOT_COUNTED);

    answer->len = fl_sdk_refresh_json(a.defs->core, &ws->user, a.detail,
                                      (char *) out);
    answer->data = out;

    return NGX_OK;
}


/* A close frame to queue (at the next ngx_http_flags_ws_run()); deaf:
 * the client's fault, nothing more it sends is read, so its answer to
 * the close is not awaited either. */

static void
ngx_http_flags_ws_close(ngx_http_flags_ws_t *ws, uint16_t code,
    const char *why, ngx_uint_t deaf)
{
    if (ws->violation == 0 && !wslay_event_get_close_sent(ws->wslay)) {
        ws->violation = code;
        ws->why = why;
        ws->deaf = deaf;
    }
}


/* A text message of the client (docs/push.md). */

static void
ngx_http_flags_ws_message(ngx_http_flags_ws_t *ws, const uint8_t *msg,
    size_t len)
{
    char               err[256];
    ngx_pool_t        *pool;
    fl_alloc_t         alloc;
    fl_status_t        st;
    fl_sdk_message_t   m;

    pool = ngx_create_pool(NGX_DEFAULT_POOL_SIZE,
                           ws->push.request->connection->log);
    if (pool == NULL) {
        ngx_http_flags_ws_no_memory(ws);
        return;
    }

    alloc.alloc = ngx_http_flags_pool_alloc;
    alloc.ctx = pool;

    st = fl_sdk_parse_message((const char *) msg, len, ws->max_traits,
                              &alloc, &m, err, sizeof(err));

    switch (st) {

    case FL_OK:
        ngx_http_flags_ws_count_batch(ws, &m);

        if (m.type == FL_SDK_MSG_UNKNOWN || !m.has_user
            || ngx_http_flags_ws_same_user(&ws->user, &m.user))
        {
            break;
        }

        /* another user: the flags for that one, at once */
        if (ngx_http_flags_ws_set_user(ws, &m.user) != NGX_OK
            || ngx_http_flags_ws_refresh(ws) != NGX_OK)
        {
            ngx_http_flags_ws_no_memory(ws);
        }

        break;

    case FL_ERR_JSON:
        ngx_http_flags_ws_error(ws, "invalid_json", err);
        break;

    case FL_ERR_FIELD:
        ngx_http_flags_ws_error(ws, "invalid_field", err);
        break;

    default:
        ngx_http_flags_ws_no_memory(ws);
        break;
    }

    ngx_destroy_pool(pool);
}


/*
 * The SDK evaluates locally and reports what it answered: each
 * evaluation counts like one flag of a GET /flags, so the error
 * rate of SDK users has its denominator (docs/push.md)
 */

static void
ngx_http_flags_ws_count_batch(ngx_http_flags_ws_t *ws, fl_sdk_message_t *m)
{
    long                    idx;
    int64_t                 now;
    ngx_uint_t              i;
    ngx_http_flags_defs_t  *defs;

    now = ngx_http_flags_now_sec();
    defs = ngx_http_flags_defs(ws->push.project);

    for (i = 0; i < m->nevals; i++) {
        idx = fl_project_find_flag(defs->core,
                                   m->evals[i].flag_name,
                                   m->evals[i].flag_name_len);
        if (idx >= 0) {
            ngx_http_flags_count_evaluation(defs,
                                            (ngx_uint_t) idx,
                                            m->evals[i].result, now);
        }
    }
}


/* Out of memory: the connection is dropped at the next
 * ngx_http_flags_ws_run(). */

static void
ngx_http_flags_ws_no_memory(ngx_http_flags_ws_t *ws)
{
    ws->failed = 1;
    ws->why = "out of memory";
}


/* {"type":"error","error":code,"message":...}: the SDKs ignore a type
 * they do not know, a person reading the traffic sees why. */

static void
ngx_http_flags_ws_error(ngx_http_flags_ws_t *ws, const char *code,
    const char *message)
{
    u_char                  *buf;
    size_t                   len;
    struct wslay_event_msg   msg;

    len = ngx_strlen(message);

    buf = ngx_alloc(fl_error_json_bound(ngx_strlen(code), len),
                    ws->push.request->connection->log);
    if (buf == NULL) {
        ngx_http_flags_ws_no_memory(ws);
        return;
    }

    msg.opcode = WSLAY_TEXT_FRAME;
    msg.msg = buf;
    msg.msg_length = fl_error_json(1, code, message, len, (char *) buf);

    (void) wslay_event_queue_msg(ws->wslay, &msg);

    ngx_free(buf);
}


/* The user of the connection becomes a copy of u (its own pool, so that
 * what the previous one held is freed). */

static ngx_int_t
ngx_http_flags_ws_set_user(ngx_http_flags_ws_t *ws, fl_user_t *u)
{
    size_t       i;
    ngx_pool_t  *pool;
    fl_user_t    copy;
    fl_trait_t  *t;

    pool = ngx_create_pool(NGX_DEFAULT_POOL_SIZE,
                           ws->push.request->connection->log);
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

    if (ws->user_pool) {
        ngx_destroy_pool(ws->user_pool);
    }

    ws->user_pool = pool;
    ws->user = copy;

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
ngx_http_flags_ws_rate(ngx_http_flags_ws_t *ws)
{
    ngx_msec_t  second;

    second = ngx_current_msec / 1000;

    if (second != ws->second) {
        ws->second = second;
        ws->frames = 0;
        ws->bytes = 0;
    }
}


/* wslay reads: first what came with the handshake, then the socket. */

static ssize_t
ngx_http_flags_ws_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len,
    int flags, void *data)
{
    ngx_http_flags_ws_t *ws = data;

    ssize_t              n;
    ngx_buf_t           *b;
    ngx_connection_t    *c;

    c = ws->push.request->connection;
    b = ws->push.request->header_in;

    if (ws->violation) {
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
            ws->eof = 1;
            wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
            return -1;
        }
    }

    ws->last_in = ngx_current_msec;

    ngx_http_flags_ws_rate(ws);
    ws->bytes += n;

    if (ws->bytes > NGX_HTTP_FLAGS_WS_MAX_BYTES) {
        ngx_http_flags_ws_close(ws, WSLAY_CODE_POLICY_VIOLATION,
                                "more bytes in a second than allowed", 1);
    }

    return n;
}


static ssize_t
ngx_http_flags_ws_send(wslay_event_context_ptr ctx, const uint8_t *data,
    size_t len, int flags, void *user_data)
{
    ngx_http_flags_ws_t *ws = user_data;

    ssize_t            n;
    ngx_connection_t  *c;

    c = ws->push.request->connection;

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
    ngx_http_flags_ws_t *ws = data;

    ngx_http_flags_ws_rate(ws);

    if (++ws->frames > NGX_HTTP_FLAGS_WS_MAX_FRAMES) {
        ngx_http_flags_ws_close(ws, WSLAY_CODE_POLICY_VIOLATION,
                                "more frames in a second than allowed", 1);
    }
}


static void
ngx_http_flags_ws_msg(wslay_event_context_ptr ctx,
    const struct wslay_event_on_msg_recv_arg *arg, void *data)
{
    ngx_http_flags_ws_t *ws = data;

    if (ws->violation) {
        return;
    }

    switch (arg->opcode) {

    case WSLAY_TEXT_FRAME:
        ngx_http_flags_ws_message(ws, arg->msg, arg->msg_length);
        break;

    case WSLAY_BINARY_FRAME:
        ngx_http_flags_ws_close(ws, WSLAY_CODE_UNSUPPORTED_DATA,
                                "a binary message", 1);
        break;

    default:
        /* ping (wslay answers it), pong, close (wslay answers it) */
        break;
    }
}


/* ------------------------------------------------ for the registry */


/* The tick: the project's answers changed, the flags go out again. */

static void
ngx_http_flags_ws_changed(ngx_http_flags_push_t *push, ngx_atomic_uint_t v)
{
    ngx_http_flags_ws_t *ws = (ngx_http_flags_ws_t *) push;

    push->seen = v;

    if (ngx_http_flags_ws_refresh(ws) != NGX_OK) {
        ngx_http_flags_ws_no_memory(ws);
    }

    ngx_http_flags_ws_run(ws, 0);
}


/* Every flags_push_heartbeat: a ping; a peer that sent nothing (not even
 * a pong) for two heartbeats is closed with 1001. */

static void
ngx_http_flags_ws_beat(ngx_http_flags_push_t *push)
{
    ngx_http_flags_ws_t *ws = (ngx_http_flags_ws_t *) push;

    struct wslay_event_msg  ping;

    if (ngx_current_msec - ws->last_in >= 2 * push->heartbeat) {
        ngx_http_flags_ws_close(ws, WSLAY_CODE_GOING_AWAY,
                                "the client sent nothing, not even a pong, "
                                "for two heartbeats", 0);

    } else {
        ping.opcode = WSLAY_PING;
        ping.msg = NULL;
        ping.msg_length = 0;

        if (wslay_event_queue_msg(ws->wslay, &ping) == WSLAY_ERR_NOMEM) {
            ngx_http_flags_ws_no_memory(ws);
        }
    }

    ngx_http_flags_ws_run(ws, 0);
}


/* The worker exits (the registry let the connection go): 1001. */

static void
ngx_http_flags_ws_going_away(ngx_http_flags_push_t *push)
{
    ngx_http_flags_ws_t *ws = (ngx_http_flags_ws_t *) push;

    ngx_http_flags_ws_close(ws, WSLAY_CODE_GOING_AWAY,
                            "the worker process exits", 0);
    ngx_http_flags_ws_run(ws, 0);
}


/* The request's pool goes: wslay's context and the user's pool too. */

static void
ngx_http_flags_ws_cleanup(ngx_http_flags_push_t *push)
{
    ngx_http_flags_ws_t *ws = (ngx_http_flags_ws_t *) push;

    if (ws->wslay) {
        wslay_event_context_free(ws->wslay);
        ws->wslay = NULL;
    }

    if (ws->user_pool) {
        ngx_destroy_pool(ws->user_pool);
        ws->user_pool = NULL;
    }
}
