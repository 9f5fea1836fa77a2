/*
 * ngx_http_flags_push.c - live push (docs/push.md): long-lived connections
 * that learn every change of their project's answers.
 *
 *   {loc}v1/events?token=T   in a flags_ofrep location: OFREP's SSE stream
 *                            (ngx_http_flags_push_sse.c)
 *   GET /ws?token=T          flags_websocket: the DeployRamp SDK's channel
 *                            (ngx_http_flags_push_ws.c)
 *
 * This file owns what both share: the directive and the per-worker cap,
 * the token of a push request and the error log lines that mask it, and
 * the registry of this worker's push connections with its tick and each
 * connection's heartbeat.  It reaches a connection's transport only
 * through the table of ngx_http_flags_push.h.
 *
 * The zone keeps one answer version a project (ngx_http_flags_shm.c),
 * bumped wherever an answer can change.  Each worker that holds a push
 * connection runs one timer (every 100 ms) that reads the versions of
 * the projects it has connections for, without a lock, and tells the
 * connections of a project whose version moved.  A worker of a replaced
 * configuration pushes nothing (its definitions are the old ones): it is
 * about to exit, and when it does its connections go away (the
 * transports end their streams and close their WebSockets), so clients
 * reconnect to the new workers.
 */

#include "ngx_http_flags_push.h"


#define NGX_HTTP_FLAGS_PUSH_TICK        100          /* ms */

/* the cap when flags_push_max_connections is not set, at most */
#define NGX_HTTP_FLAGS_PUSH_MAX_DEFAULT  1024


/* The push connections of this worker, by project. */
typedef struct {
    ngx_http_flags_main_conf_t  *fmcf;
    ngx_queue_t                 *conns;
    ngx_atomic_uint_t           *seen;
    ngx_uint_t                   n;
    ngx_event_t                  tick;
} ngx_http_flags_push_worker_t;


static u_char *ngx_http_flags_push_log_handler(ngx_http_request_t *r,
    ngx_http_request_t *sr, u_char *buf, size_t len);
static u_char *ngx_http_flags_push_masked(u_char *p, u_char *last,
    ngx_str_t *line);
static ngx_int_t ngx_http_flags_push_worker_init(
    ngx_http_flags_push_worker_t *w, ngx_http_flags_main_conf_t *fmcf);
static void ngx_http_flags_push_cleanup(void *data);
static void ngx_http_flags_push_tick(ngx_event_t *ev);
static void ngx_http_flags_push_exit(ngx_http_flags_push_worker_t *w);
static void ngx_http_flags_push_tell(ngx_http_flags_push_worker_t *w,
    ngx_uint_t i, ngx_atomic_uint_t v);
static void ngx_http_flags_push_beat(ngx_event_t *ev);


static ngx_http_flags_push_worker_t  ngx_http_flags_push_worker;


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


ngx_int_t
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


/* ---------------------------------------------------------- registry */


/* A push connection for r, or (void *) -1 when the worker is full. */

ngx_http_flags_push_t *
ngx_http_flags_push_create(ngx_http_request_t *r,
    ngx_http_flags_project_t *project, size_t size,
    const ngx_http_flags_push_transport_t *transport)
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
                      "flags: push: %ui connections in this worker, "
                      "flags_push_max_connections is %ui",
                      w->n, fmcf->push_max);
        return (void *) -1;
    }

    push = ngx_pcalloc(r->pool, size);
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
    push->transport = transport;
    push->heartbeat = flcf->push_heartbeat;

    push->beat.handler = ngx_http_flags_push_beat;
    push->beat.data = push;
    push->beat.log = r->connection->log;
    push->beat.cancelable = 1;

    ngx_http_set_ctx(r, push, ngx_http_flags_module);

    return push;
}


ngx_int_t
ngx_http_flags_push_register(ngx_http_flags_push_t *push)
{
    ngx_uint_t                     i;
    ngx_http_flags_main_conf_t    *fmcf;
    ngx_http_flags_push_worker_t  *w;

    w = &ngx_http_flags_push_worker;
    fmcf = ngx_http_get_module_main_conf(push->request,
                                         ngx_http_flags_module);

    if (w->fmcf != fmcf
        && ngx_http_flags_push_worker_init(w, fmcf) != NGX_OK)
    {
        return NGX_ERROR;
    }

    /* the operator's page (flags_dashboard) follows every project: the
     * queue after the projects' */
    i = push->project
        ? (ngx_uint_t) (push->project
                        - (ngx_http_flags_project_t *) fmcf->projects.elts)
        : fmcf->projects.nelts;

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


/* The first connection in this worker (or in a new single-process
 * cycle): one queue and one last version a project, and the tick. */

static ngx_int_t
ngx_http_flags_push_worker_init(ngx_http_flags_push_worker_t *w,
    ngx_http_flags_main_conf_t *fmcf)
{
    ngx_uint_t  i, n;

    /* one queue a project, and one for the operator's page */
    n = fmcf->projects.nelts + 1;

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

    return NGX_OK;
}


/* No longer pushed to (idempotent): out of the queue, no heartbeat. */

void
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

    if (push->transport->cleanup) {
        push->transport->cleanup(push);
    }
}


/* Ends the request (from any event: posted requests are run here). */

void
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


/* ------------------------------------------------------------- tick */


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
    ngx_atomic_uint_t            v;
    ngx_http_flags_project_t    *projects;

    if (ngx_exiting || ngx_quit || ngx_terminate) {
        ngx_http_flags_push_exit(w);
        return;
    }

    projects = w->fmcf->projects.elts;

    /* a worker of a replaced configuration pushes nothing */

    if (ngx_http_flags_zone_current(w->fmcf)) {

        for (i = 0; i <= w->fmcf->projects.nelts; i++) {
            if (ngx_queue_empty(&w->conns[i])) {
                continue;
            }

            v = ngx_http_flags_push_version(w->fmcf, i < w->fmcf->projects.nelts
                                                     ? &projects[i] : NULL);

            if (v == w->seen[i]) {
                continue;
            }

            w->seen[i] = v;

#if (NGX_DEBUG)
            if (i < w->fmcf->projects.nelts) {
                ngx_log_debug2(NGX_LOG_DEBUG_HTTP, ev->log, 0,
                               "flags: push: project \"%V\" changed (answer "
                               "version %uA): telling its clients",
                               &projects[i].name, v);

            } else {
                ngx_log_debug1(NGX_LOG_DEBUG_HTTP, ev->log, 0,
                               "flags: push: the zone's events changed "
                               "(event %uA): telling the operator's pages",
                               v);
            }
#endif

            ngx_http_flags_push_tell(w, i, v);
        }
    }

    if (w->n && !ev->timer_set) {
        ngx_add_timer(ev, NGX_HTTP_FLAGS_PUSH_TICK);
    }
}


/* The connections of project i that have not seen version v learn it. */

static void
ngx_http_flags_push_tell(ngx_http_flags_push_worker_t *w, ngx_uint_t i,
    ngx_atomic_uint_t v)
{
    ngx_queue_t            *q, *next;
    ngx_http_flags_push_t  *push;

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

        push->transport->changed(push, v);
    }
}


/* The worker exits: every connection leaves the registry and goes away
 * as its transport ends it (streams end, WebSockets close with 1001). */

static void
ngx_http_flags_push_exit(ngx_http_flags_push_worker_t *w)
{
    ngx_uint_t              i;
    ngx_queue_t            *q;
    ngx_http_flags_push_t  *push;

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, w->tick.log, 0,
                   "flags: push: the worker exits: %ui connections go "
                   "away", w->n);

    for (i = 0; i <= w->fmcf->projects.nelts; i++) {
        while (!ngx_queue_empty(&w->conns[i])) {
            q = ngx_queue_head(&w->conns[i]);
            push = ngx_queue_data(q, ngx_http_flags_push_t, queue);

            ngx_http_flags_push_detach(push);
            push->transport->going_away(push);
        }
    }
}


/* Every flags_push_heartbeat: the transport's heartbeat (an SSE comment,
 * a WebSocket ping or its idle check). */

static void
ngx_http_flags_push_beat(ngx_event_t *ev)
{
    ngx_http_flags_push_t *push = ev->data;

    ngx_add_timer(ev, push->heartbeat);

    push->transport->beat(push);
}


/* What a push connection follows: its project's answer version, or, for
 * the operator's page (project NULL), the zone's event ring. */

ngx_atomic_uint_t
ngx_http_flags_push_version(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_project_t *project)
{
    return project ? ngx_http_flags_answer_version(project)
                   : ngx_http_flags_events_seq(fmcf);
}

