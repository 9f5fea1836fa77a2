/*
 * ngx_http_flags_push.h - what the push files share, and only they:
 * a push connection as the registry (ngx_http_flags_push.c) keeps it,
 * and the table through which the registry reaches the connection's
 * transport (ngx_http_flags_push_sse.c, ngx_http_flags_push_ws.c).
 *
 * The transports call the registry; the registry calls a transport only
 * through its table, so it knows nothing of SSE or of wslay.  A
 * transport's own connection begins with an ngx_http_flags_push_t (its
 * first member) and is what the request's module context points to.
 */

#ifndef _NGX_HTTP_FLAGS_PUSH_H_INCLUDED_
#define _NGX_HTTP_FLAGS_PUSH_H_INCLUDED_


#include "ngx_http_flags_module.h"


typedef struct ngx_http_flags_push_s  ngx_http_flags_push_t;

/* What the registry asks of a transport; each runs on the worker's event
 * loop and may end the connection (ngx_http_flags_push_end). */
typedef struct {
    /* the tick: the project's answers moved to version v */
    void   (*changed)(ngx_http_flags_push_t *push, ngx_atomic_uint_t v);
    /* flags_push_heartbeat passed (the next one is armed already) */
    void   (*beat)(ngx_http_flags_push_t *push);
    /* the worker exits; push is out of the registry already */
    void   (*going_away)(ngx_http_flags_push_t *push);
    /* the request's pool goes: what the transport holds outside it
     * (NULL: nothing) */
    void   (*cleanup)(ngx_http_flags_push_t *push);
} ngx_http_flags_push_transport_t;

struct ngx_http_flags_push_s {
    ngx_queue_t                       queue;    /* its project's, here */
    ngx_http_request_t               *request;
    ngx_http_flags_project_t         *project;  /* NULL: every project
                                                 * (flags_dashboard) */
    const ngx_http_flags_push_transport_t  *transport;
    ngx_atomic_uint_t                 seen;     /* the version pushed */
    ngx_event_t                       beat;     /* heartbeat, ping, idle */
    ngx_msec_t                        heartbeat;

    unsigned                          registered:1;
};


/* The token of a push request (401 on failure: bare for OFREP). */
ngx_int_t ngx_http_flags_push_project(ngx_http_request_t *r,
    ngx_http_flags_project_t **project, ngx_uint_t bare);

/* A connection of size bytes (ngx_http_flags_push_t first, the rest
 * zeroed) set as r's module context, or (void *) -1 when the worker holds
 * flags_push_max_connections already, or NULL. */
ngx_http_flags_push_t *ngx_http_flags_push_create(ngx_http_request_t *r,
    ngx_http_flags_project_t *project, size_t size,
    const ngx_http_flags_push_transport_t *transport);
/* Pushed to from now on (push->seen set by the caller); the heartbeat
 * starts. */
ngx_int_t ngx_http_flags_push_register(ngx_http_flags_push_t *push);
/* The version a connection follows: its project's answers, or with
 * project NULL (flags_dashboard's stream) the zone's event ring. */
ngx_atomic_uint_t ngx_http_flags_push_version(
    ngx_http_flags_main_conf_t *fmcf, ngx_http_flags_project_t *project);
/* No longer pushed to (idempotent). */
void ngx_http_flags_push_detach(ngx_http_flags_push_t *push);
/* Ends the request (from any event). */
void ngx_http_flags_push_end(ngx_http_flags_push_t *push, ngx_int_t rc);


#endif /* _NGX_HTTP_FLAGS_PUSH_H_INCLUDED_ */
