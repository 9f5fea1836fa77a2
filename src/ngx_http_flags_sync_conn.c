/*
 * ngx_http_flags_sync_conn.c - flags_sync's connection to Redis
 * (docs/sync.md), driven by nginx's event loop: the lock that makes one
 * worker a host's syncing worker, the tick, a non-blocking connect, the
 * read and write handlers and the timeout.  hiredis formats the commands
 * and reads the replies, with the reply's size bounded while it is read;
 * the replies to AUTH, SELECT and SCRIPT LOAD are checked here, a
 * NOSCRIPT is retried as EVAL, and a script's answer goes to the round
 * (ngx_http_flags_sync_round.c).  When Redis is away the loss is logged
 * once and the connection retried with backoff; serving never waits.
 * With TLS the handshake runs between the connect and the first write
 * (ngx_http_flags_sync_tls.c), within the connect's timeout.
 */

#include "ngx_http_flags_sync.h"


#define NGX_HTTP_FLAGS_SYNC_BACKOFF_MAX  30000


static ngx_uint_t ngx_http_flags_sync_lock(ngx_http_flags_sync_t *s);
static void ngx_http_flags_sync_write(ngx_event_t *wev);
static void ngx_http_flags_sync_read(ngx_event_t *rev);
#if (NGX_SSL)
static void ngx_http_flags_sync_tls_ready(ngx_http_flags_sync_t *s,
    ngx_connection_t *c, ngx_str_t *error);
#endif
static ngx_int_t ngx_http_flags_sync_hello(ngx_http_flags_sync_t *s);
static ngx_int_t ngx_http_flags_sync_reply(ngx_http_flags_sync_t *s,
    redisReply *reply);



/*
 * The lock: one word, expiry second << 32 | pid, taken and renewed with
 * compare-and-swap, so of two workers that find it expired exactly one
 * wins.  A killed owner stops renewing it and loses it when it expires.
 */

static ngx_uint_t
ngx_http_flags_sync_lock(ngx_http_flags_sync_t *s)
{
    time_t              now, ttl;
    ngx_pid_t           pid;
    ngx_atomic_uint_t   old, lock;

    now = ngx_time();
    ttl = 2 + (time_t) (3 * s->conf->interval / 1000);

    old = s->fmcf->sh->sync_lock;
    pid = (ngx_pid_t) (old & 0xffffffff);
    lock = ((ngx_atomic_uint_t) (now + ttl) << 32) | (uint32_t) ngx_pid;

    if (pid != ngx_pid && pid != 0 && (time_t) (old >> 32) >= now) {
        return 0;
    }

    return ngx_atomic_cmp_set(&s->fmcf->sh->sync_lock, old, lock);
}


ngx_uint_t
ngx_http_flags_sync_owns(ngx_http_flags_sync_t *s)
{
    return (ngx_pid_t) (s->fmcf->sh->sync_lock & 0xffffffff) == ngx_pid;
}


void
ngx_http_flags_sync_tick(ngx_event_t *ev)
{
    ngx_http_flags_sync_t  *s = ev->data;

    ngx_uint_t  owner;

    if (ngx_exiting || ngx_terminate || ngx_quit) {
        ngx_http_flags_sync_exit_process(s->fmcf);
        return;
    }

    ngx_add_timer(&s->tick, s->conf->interval);

    owner = ngx_http_flags_sync_lock(s);

    if (!owner) {
        if (s->owner) {
            /* another worker took over: it starts afresh */
            ngx_log_debug0(NGX_LOG_DEBUG_HTTP, s->log, 0,
                           "flags: sync: another worker holds the lock: "
                           "this one closes its connection");
            ngx_http_flags_sync_close(s);
            s->owner = 0;
        }

        return;
    }

    /*
     * A new owner (another worker, or a new generation's after a reload)
     * continues from the baseline Redis acknowledged, kept in the zone:
     * what the last owner counted and did not send goes out now.
     */
    if (!s->owner) {
        ngx_log_debug0(NGX_LOG_DEBUG_HTTP, s->log, 0,
                       "flags: sync: this worker took the lock");
    }

    s->owner = 1;

    switch (s->state) {

    case NGX_HTTP_FLAGS_SYNC_OFF:
        if ((ngx_msec_int_t) (ngx_current_msec - s->next_try) >= 0) {
            ngx_http_flags_sync_connect(s);
        }
        break;

    case NGX_HTTP_FLAGS_SYNC_IDLE:
        if (ngx_http_flags_sync_round(s) != NGX_OK) {
            ngx_http_flags_sync_fail(s, "could not send", NULL);
        }
        break;

    default:
        /* a round or the connect is still under way: its timeout acts */
        break;
    }
}


void
ngx_http_flags_sync_timeout(ngx_event_t *ev)
{
    ngx_http_flags_sync_t  *s = ev->data;

    const char  *why;

    why = (s->state == NGX_HTTP_FLAGS_SYNC_CONNECTING) ? "connect timed out"
                                                       : "timed out";
#if (NGX_SSL)
    if (s->pc.connection && s->pc.connection->ssl
        && !s->pc.connection->ssl->handshaked)
    {
        why = "TLS handshake timed out";
    }
#endif

    ngx_http_flags_sync_fail(s, why, NULL);
}


/* ------------------------------------------------------ the connection */

/*
 * hiredis 0.14's reader bounds neither a bulk string's length nor an
 * array's element count: its reply object functions are wrapped to count
 * the elements and string bytes of the reply being read, and refuse
 * (NULL: the reader fails) past the bound (ngx_http_flags_sync_bound_t,
 * the reader's privdata).  The bytes buffered but not yet parsed (a bulk
 * string being received) are bounded by the reader's owner
 * (ngx_http_flags_sync_read(), the Sentinel's read handler).
 */

static redisReplyObjectFunctions  ngx_http_flags_sync_fn;
static redisReplyObjectFunctions  ngx_http_flags_sync_fn_hiredis;


static ngx_uint_t
ngx_http_flags_sync_count(const redisReadTask *task, size_t elements,
    size_t bytes)
{
    ngx_http_flags_sync_bound_t  *b = task->privdata;

    if (task->parent == NULL) {
        /* a reply begins */
        b->elements = 1;
        b->bytes = 0;
    }

    b->elements += elements;
    b->bytes += bytes;

    if (b->elements > b->max_elements || b->bytes > b->max_bytes) {
        b->too_large = 1;
        return 0;
    }

    return 1;
}


static void *
ngx_http_flags_sync_string(const redisReadTask *task, char *str, size_t len)
{
    if (!ngx_http_flags_sync_count(task, 0, len)) {
        return NULL;
    }

    return ngx_http_flags_sync_fn_hiredis.createString(task, str, len);
}


static void *
ngx_http_flags_sync_array(const redisReadTask *task, int elements)
{
    if (!ngx_http_flags_sync_count(task, elements > 0 ? elements : 0, 0)) {
        return NULL;
    }

    return ngx_http_flags_sync_fn_hiredis.createArray(task, elements);
}


static void *
ngx_http_flags_sync_integer(const redisReadTask *task, long long value)
{
    if (!ngx_http_flags_sync_count(task, 0, 0)) {
        return NULL;
    }

    return ngx_http_flags_sync_fn_hiredis.createInteger(task, value);
}


static void *
ngx_http_flags_sync_nil(const redisReadTask *task)
{
    if (!ngx_http_flags_sync_count(task, 0, 0)) {
        return NULL;
    }

    return ngx_http_flags_sync_fn_hiredis.createNil(task);
}


/* A hiredis reader bounded by b (its max_elements and max_bytes set). */

redisReader *
ngx_http_flags_sync_reader(ngx_http_flags_sync_bound_t *b)
{
    redisReader  *r;

    r = redisReaderCreate();
    if (r == NULL) {
        return NULL;
    }

    if (ngx_http_flags_sync_fn.createArray == NULL) {
        /* hiredis's own functions build the objects */
        ngx_http_flags_sync_fn_hiredis = *r->fn;
        ngx_http_flags_sync_fn = *r->fn;
        ngx_http_flags_sync_fn.createString = ngx_http_flags_sync_string;
        ngx_http_flags_sync_fn.createArray = ngx_http_flags_sync_array;
        ngx_http_flags_sync_fn.createInteger = ngx_http_flags_sync_integer;
        ngx_http_flags_sync_fn.createNil = ngx_http_flags_sync_nil;
    }

    r->fn = &ngx_http_flags_sync_fn;
    r->privdata = b;
    b->too_large = 0;

    return r;
}


/*
 * Connects to Redis.  sentinel://: unless the Sentinels named the master
 * since the last connection was lost, they are asked first
 * (ngx_http_flags_sync_sentinel.c), and their answer calls this again.
 * The one place a connection to Redis is made: what becomes usable is
 * c, with its handlers.
 */

void
ngx_http_flags_sync_connect(ngx_http_flags_sync_t *s)
{
    ngx_int_t          rc;
    ngx_connection_t  *c;

    if (s->sentinel && ngx_http_flags_sync_sentinel_ask(s) == NGX_AGAIN) {
        return;
    }

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, s->log, 0,
                   "flags: sync: connecting to redis at %V", &s->conf->host);

    ngx_memzero(&s->pc, sizeof(ngx_peer_connection_t));

    s->pc.sockaddr = s->conf->addr->sockaddr;
    s->pc.socklen = s->conf->addr->socklen;
    s->pc.name = &s->conf->addr->name;
    s->pc.get = ngx_event_get_peer;
    s->pc.log = s->log;
    /* the loss is logged once, by ngx_http_flags_sync_fail() */
    s->pc.log_error = NGX_ERROR_INFO;

    rc = ngx_event_connect_peer(&s->pc);

    if (rc == NGX_ERROR || rc == NGX_BUSY || rc == NGX_DECLINED) {
        if (s->pc.connection) {
            ngx_close_connection(s->pc.connection);
            s->pc.connection = NULL;
        }

        ngx_http_flags_sync_fail(s, "could not connect", NULL);
        return;
    }

    c = s->pc.connection;
    c->data = s;
    c->read->handler = ngx_http_flags_sync_read;
    c->write->handler = ngx_http_flags_sync_write;

    s->reader = ngx_http_flags_sync_reader(&s->bound);
    if (s->reader == NULL) {
        ngx_http_flags_sync_fail(s, "out of memory", NULL);
        return;
    }

    s->out_len = 0;
    s->out_sent = 0;
    s->nexpect = 0;
    s->head = 0;
    s->has_sha = 0;
    s->state = NGX_HTTP_FLAGS_SYNC_CONNECTING;

    ngx_add_timer(&s->timeout, ngx_max(s->conf->interval * 5, 2000));

    /* AUTH, SELECT and SCRIPT LOAD go with the connect */
    if (ngx_http_flags_sync_hello(s) != NGX_OK) {
        ngx_http_flags_sync_fail(s, "out of memory", NULL);
        return;
    }

    if (rc == NGX_OK) {
        ngx_http_flags_sync_write(c->write);
    }
}


void
ngx_http_flags_sync_close(ngx_http_flags_sync_t *s)
{
    ngx_uint_t  i;

    if (s->timeout.timer_set) {
        ngx_del_timer(&s->timeout);
    }

    if (s->pc.connection) {
        /* TLS or not */
        ngx_http_flags_sync_tls_close(s->pc.connection);
        s->pc.connection = NULL;
    }

    if (s->reader) {
        redisReaderFree(s->reader);
        s->reader = NULL;
    }

    /* sentinel://: the next connection asks the Sentinels again */
    if (s->sentinel) {
        ngx_http_flags_sync_sentinel_close(s);
    }

    if (s->state != NGX_HTTP_FLAGS_SYNC_OFF) {
        s->fmcf->sh->sync_connected = 0;
    }

    /* what a round or the connection held: the commands not yet sent and
     * the EVALs kept for a NOSCRIPT retry (a new connection starts anew) */
    if (s->out) {
        ngx_free(s->out);
        s->out = NULL;
    }

    for (i = 0; i < s->fmcf->projects.nelts; i++) {
        if (s->cmd[i]) {
            redisFreeCommand(s->cmd[i]);
            s->cmd[i] = NULL;
        }
    }

    /* a compare-and-set of definitions awaiting its answer fails */
    ngx_http_flags_sync_defs_lost(s);

    s->state = NGX_HTTP_FLAGS_SYNC_OFF;
    s->nexpect = 0;
    s->head = 0;
    s->out_len = 0;
    s->out_sent = 0;
    s->out_size = 0;
}


/*
 * Redis is away, slow or refused us: serving goes on (each host decides
 * on its own counters); the loss is logged once, at error level, and the
 * connection retried with exponential backoff, jittered.
 */

void
ngx_http_flags_sync_fail(ngx_http_flags_sync_t *s, const char *why,
    ngx_str_t *detail)
{
    uint64_t    backoff;
    ngx_msec_t  wait;
    ngx_str_t   copy;
    u_char      buf[1024];

    /* a TLS connection's failure: OpenSSL's reason, as nginx said it */
    if (detail == NULL) {
        detail = ngx_http_flags_sync_tls_error(s->pc.connection);
    }

    /* the detail may live in what closing frees */
    if (detail) {
        copy.data = buf;
        copy.len = ngx_min(detail->len, sizeof(buf));
        ngx_memcpy(buf, detail->data, copy.len);
        detail = &copy;
    }

    ngx_http_flags_sync_close(s);

    (void) ngx_atomic_fetch_add(&s->fmcf->sh->sync_failures, 1);

    if (!s->lost) {
        s->lost = 1;

        if (detail) {
            ngx_log_error(NGX_LOG_ERR, s->log, 0,
                          "flags: sync: redis at %V: %s: %V; hosts decide "
                          "alone until it is back",
                          &s->conf->host, why, detail);
        } else {
            ngx_log_error(NGX_LOG_ERR, s->log, 0,
                          "flags: sync: redis at %V: %s; hosts decide alone "
                          "until it is back", &s->conf->host, why);
        }

    } else if (detail) {
        ngx_log_error(NGX_LOG_INFO, s->log, 0,
                      "flags: sync: redis at %V: %s: %V",
                      &s->conf->host, why, detail);

    } else {
        ngx_log_error(NGX_LOG_INFO, s->log, 0,
                      "flags: sync: redis at %V: %s", &s->conf->host, why);
    }

    /*
     * The wait is drawn in [backoff/2, backoff] (fl_sync_backoff(), equal
     * jitter), from this worker's random(), which nginx seeds per process
     * with its pid and the time: hosts that lost Redis in the same
     * millisecond (it died under all of them) come back spread over half
     * the backoff, not all at once.  The tick moves to the wait's end, so
     * the connect goes at that millisecond rather than at the next tick
     * of a phase the hosts may share; it still runs every interval, and
     * renews the lock as before.
     */
    backoff = s->backoff;
    wait = (ngx_msec_t) fl_sync_backoff(&backoff, s->conf->interval,
                                        NGX_HTTP_FLAGS_SYNC_BACKOFF_MAX,
                                        (uint64_t) ngx_random());
    s->backoff = (ngx_msec_t) backoff;
    s->next_try = ngx_current_msec + wait;

    if (s->tick.timer_set) {
        ngx_del_timer(&s->tick);
        ngx_add_timer(&s->tick, wait % s->conf->interval);
    }

    /* the first round after it sends what was counted while away only
     * for flags whose window is longer than the outage, and takes the
     * totals as the baseline for the others (docs/sync.md, "What a
     * failover loses") */
    s->fmcf->sh->sync_rebase = 1;
}


ngx_int_t
ngx_http_flags_sync_send(ngx_http_flags_sync_t *s, char *cmd, int len,
    ngx_uint_t kind)
{
    u_char  *p;
    size_t   size;

    if (len < 0 || s->nexpect - s->head >= s->nalloc) {
        return NGX_ERROR;
    }

    if (s->out_len + len > s->out_size) {
        size = ngx_max(s->out_size * 2, s->out_len + len + 4096);

        p = ngx_alloc(size, s->log);
        if (p == NULL) {
            return NGX_ERROR;
        }

        if (s->out) {
            ngx_memcpy(p, s->out, s->out_len);
            ngx_free(s->out);
        }

        s->out = p;
        s->out_size = size;
    }

    ngx_memcpy(s->out + s->out_len, cmd, len);
    s->out_len += len;

    s->expect[s->nexpect++ % s->nalloc] = kind;

    return NGX_OK;
}


/* One command, formatted by hiredis, queued with the reply it expects. */

static ngx_int_t
ngx_http_flags_sync_command(ngx_http_flags_sync_t *s, int argc,
    const char **argv, const size_t *argvlen, ngx_uint_t kind)
{
    int         len;
    char       *cmd;
    ngx_int_t   rc;

    len = redisFormatCommandArgv(&cmd, argc, argv, argvlen);
    if (len < 0) {
        return NGX_ERROR;
    }

    rc = ngx_http_flags_sync_send(s, cmd, len, kind);
    redisFreeCommand(cmd);

    return rc;
}


static ngx_int_t
ngx_http_flags_sync_hello(ngx_http_flags_sync_t *s)
{
    const char  *argv[3];
    size_t       argvlen[3];
    u_char       db[NGX_INT_T_LEN];

    if (s->conf->password.len) {
        argv[0] = "AUTH";
        argvlen[0] = 4;
        argv[1] = (const char *) s->conf->password.data;
        argvlen[1] = s->conf->password.len;

        if (ngx_http_flags_sync_command(s, 2, argv, argvlen,
                                        NGX_HTTP_FLAGS_SYNC_R_AUTH)
            != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    if (s->conf->db) {
        argv[0] = "SELECT";
        argvlen[0] = 6;
        argv[1] = (const char *) db;
        argvlen[1] = ngx_sprintf(db, "%ui", s->conf->db) - db;

        if (ngx_http_flags_sync_command(s, 2, argv, argvlen,
                                        NGX_HTTP_FLAGS_SYNC_R_SELECT)
            != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    /* sentinel://: is it still the master? (a failover demotes it) */
    if (s->sentinel) {
        argv[0] = "ROLE";
        argvlen[0] = 4;

        if (ngx_http_flags_sync_command(s, 1, argv, argvlen,
                                        NGX_HTTP_FLAGS_SYNC_R_ROLE)
            != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    argv[0] = "SCRIPT";
    argvlen[0] = 6;
    argv[1] = "LOAD";
    argvlen[1] = 4;
    argv[2] = fl_sync_script(&argvlen[2]);

    return ngx_http_flags_sync_command(s, 3, argv, argvlen,
                                       NGX_HTTP_FLAGS_SYNC_R_LOAD);
}


ngx_int_t
ngx_http_flags_sync_flush(ngx_http_flags_sync_t *s)
{
    ssize_t            n;
    ngx_connection_t  *c;

    c = s->pc.connection;

    while (s->out_sent < s->out_len) {
        n = c->send(c, s->out + s->out_sent, s->out_len - s->out_sent);

        if (n == NGX_AGAIN) {
            break;
        }

        if (n == NGX_ERROR || n == 0) {
            return NGX_ERROR;
        }

        s->out_sent += n;
    }

    if (s->out_sent == s->out_len) {
        s->out_sent = 0;
        s->out_len = 0;
    }

    if (ngx_handle_write_event(c->write, 0) != NGX_OK) {
        return NGX_ERROR;
    }

    return NGX_OK;
}


static void
ngx_http_flags_sync_write(ngx_event_t *wev)
{
    int                     err;
    socklen_t               len;
    ngx_connection_t       *c;
    ngx_http_flags_sync_t  *s;

    c = wev->data;
    s = c->data;

    if (s->state == NGX_HTTP_FLAGS_SYNC_CONNECTING) {
        err = 0;
        len = sizeof(int);

        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, (void *) &err, &len)
            == -1)
        {
            err = ngx_socket_errno;
        }

        if (err) {
            ngx_http_flags_sync_fail(s, "could not connect", NULL);
            return;
        }

#if (NGX_SSL)
        if (s->conf->tls && c->ssl == NULL) {
            /* the handshake, then ngx_http_flags_sync_tls_ready() */
            /* checked against tls_name=, else (sentinel://) the
             * master's address the Sentinels gave */
            if (ngx_http_flags_sync_tls_start(s, c, &s->conf->host,
                                              ngx_http_flags_sync_tls_ready)
                != NGX_OK)
            {
                ngx_http_flags_sync_fail(s, "TLS", NULL);
            }

            return;
        }
#endif

        s->state = NGX_HTTP_FLAGS_SYNC_BUSY;
        s->round_start = ngx_current_msec;
    }

    if (ngx_http_flags_sync_flush(s) != NGX_OK) {
        ngx_http_flags_sync_fail(s, "could not send", NULL);
    }
}


#if (NGX_SSL)

/* TLS is up (the commands queued go now) or failed */

static void
ngx_http_flags_sync_tls_ready(ngx_http_flags_sync_t *s, ngx_connection_t *c,
    ngx_str_t *error)
{
    if (error) {
        ngx_http_flags_sync_fail(s, "TLS", error);
        return;
    }

    /* connected: the socket is not asked again (a server refusing the
     * client's certificate may have reset it, and the reason is TLS's) */
    s->state = NGX_HTTP_FLAGS_SYNC_BUSY;
    s->round_start = ngx_current_msec;

    ngx_http_flags_sync_write(c->write);
}

#endif


/*
 * The replies complete in what the reader holds, each handed to
 * ngx_http_flags_sync_reply() and freed.  NGX_ERROR: the connection
 * failed (and was closed).
 */

static ngx_int_t
ngx_http_flags_sync_replies(ngx_http_flags_sync_t *s)
{
    ngx_int_t    rc;
    ngx_str_t    detail;
    redisReply  *reply;
    u_char       msg[128];

    for ( ;; ) {
        reply = NULL;

        if (redisReaderGetReply(s->reader, (void **) &reply) != REDIS_OK) {
            if (s->bound.too_large) {
                detail.data = msg;
                detail.len = ngx_sprintf(msg, "more than %uz elements "
                                         "or %uz bytes of strings",
                                         s->bound.max_elements, s->bound.max_bytes)
                             - msg;
                ngx_http_flags_sync_fail(s, "reply too large", &detail);
                return NGX_ERROR;
            }

            ngx_http_flags_sync_fail(s, "protocol error", NULL);
            return NGX_ERROR;
        }

        if (reply == NULL) {
            break;
        }

        rc = ngx_http_flags_sync_reply(s, reply);
        freeReplyObject(reply);

        if (rc != NGX_OK) {
            /* the failure was handled */
            return NGX_ERROR;
        }
    }

    /* what is left is a reply not complete yet: a bulk string whose
     * length no legitimate reply reaches is not awaited */
    if (s->reader->len - s->reader->pos > s->bound.max_bytes) {
        detail.data = msg;
        detail.len = ngx_sprintf(msg, "more than %uz bytes not yet "
                                 "parsed", s->bound.max_bytes)
                     - msg;
        ngx_http_flags_sync_fail(s, "reply too large", &detail);
        return NGX_ERROR;
    }

    return NGX_OK;
}


static void
ngx_http_flags_sync_read(ngx_event_t *rev)
{
    ssize_t                 n;
    ngx_connection_t       *c;
    ngx_http_flags_sync_t  *s;
    u_char                  buf[16384];

    c = rev->data;
    s = c->data;

    if (s->state == NGX_HTTP_FLAGS_SYNC_CONNECTING) {
        /* a refused connect shows as readable first */
        ngx_http_flags_sync_write(c->write);

        if (s->state != NGX_HTTP_FLAGS_SYNC_BUSY) {
            return;
        }
    }

    for ( ;; ) {
        n = c->recv(c, buf, sizeof(buf));

        if (n == NGX_AGAIN) {
            break;
        }

        if (n == 0 || n == NGX_ERROR) {
            ngx_http_flags_sync_fail(s, n == 0 ? "closed the connection"
                                               : "could not read", NULL);
            return;
        }

        if (redisReaderFeed(s->reader, (const char *) buf, n) != REDIS_OK) {
            ngx_http_flags_sync_fail(s, "out of memory", NULL);
            return;
        }

        if (ngx_http_flags_sync_replies(s) != NGX_OK) {
            return;
        }
    }

    if (ngx_handle_read_event(rev, 0) != NGX_OK) {
        ngx_http_flags_sync_fail(s, "could not read", NULL);
    }
}


/*
 * An error reply.  NOSCRIPT to an EVALSHA: the script cache was emptied
 * (a restart, a failover), the same call goes again as EVAL, once.
 * NOSCRIPT to that EVAL is no Redis: the round fails (backoff), as every
 * other error does.  NGX_ERROR: the connection failed.
 */

static ngx_int_t
ngx_http_flags_sync_refused(ngx_http_flags_sync_t *s, ngx_uint_t kind,
    ngx_uint_t pi, redisReply *reply)
{
    ngx_str_t   detail;
    ngx_uint_t  nprojects;

    detail.data = (u_char *) reply->str;
    detail.len = reply->len;
    nprojects = s->fmcf->projects.nelts;

    if (kind >= NGX_HTTP_FLAGS_SYNC_R_EVAL
        && kind < NGX_HTTP_FLAGS_SYNC_R_EVAL + nprojects
        && reply->len >= 8
        && ngx_strncmp(reply->str, "NOSCRIPT", 8) == 0)
    {
        ngx_log_debug1(NGX_LOG_DEBUG_HTTP, s->log, 0,
                       "flags: sync: NOSCRIPT: the round of project \"%V\" "
                       "goes again as EVAL",
                       &((ngx_http_flags_project_t *)
                             s->fmcf->projects.elts)[pi].name);

        if (s->cmd[pi] == NULL
            || ngx_http_flags_sync_send(s, s->cmd[pi], s->cmd_len[pi],
                                        kind + nprojects) != NGX_OK
            || ngx_http_flags_sync_flush(s) != NGX_OK)
        {
            ngx_http_flags_sync_fail(s, "could not send", NULL);
            return NGX_ERROR;
        }

        return NGX_OK;
    }

    ngx_http_flags_sync_fail(s,
                           kind == NGX_HTTP_FLAGS_SYNC_R_AUTH
                           ? "AUTH refused (check the password of "
                             "flags_sync)"
                           : kind == NGX_HTTP_FLAGS_SYNC_R_SELECT
                           ? "SELECT refused (check the database of "
                             "flags_sync)"
                           : kind == NGX_HTTP_FLAGS_SYNC_R_LOAD
                           ? "SCRIPT LOAD refused"
                           : kind == NGX_HTTP_FLAGS_SYNC_R_ROLE
                           ? "ROLE refused"
                           : "the sync script failed", &detail);
    return NGX_ERROR;
}


/* The reply to the oldest command awaiting one. */

static ngx_int_t
ngx_http_flags_sync_reply(ngx_http_flags_sync_t *s, redisReply *reply)
{
    ngx_str_t   detail;
    ngx_uint_t  kind, pi, nprojects;

    if (s->head == s->nexpect) {
        ngx_http_flags_sync_fail(s, "answered what was not asked", NULL);
        return NGX_ERROR;
    }

    kind = s->expect[s->head++ % s->nalloc];
    nprojects = s->fmcf->projects.nelts;
    pi = (kind >= NGX_HTTP_FLAGS_SYNC_R_EVAL)
         ? (kind - NGX_HTTP_FLAGS_SYNC_R_EVAL) % nprojects : 0;

    if (reply->type == REDIS_REPLY_ERROR) {
        return ngx_http_flags_sync_refused(s, kind, pi, reply);
    }

    switch (kind) {

    case NGX_HTTP_FLAGS_SYNC_R_AUTH:
    case NGX_HTTP_FLAGS_SYNC_R_SELECT:
        break;

    case NGX_HTTP_FLAGS_SYNC_R_ROLE:
        /* not a master: failed (and closed), the Sentinels asked again */
        if (ngx_http_flags_sync_sentinel_role(s, reply) != NGX_OK) {
            return NGX_ERROR;
        }

        break;

    case NGX_HTTP_FLAGS_SYNC_R_LOAD:
        if (reply->type != REDIS_REPLY_STRING || reply->len != 40) {
            ngx_http_flags_sync_fail(s, "SCRIPT LOAD answered no SHA",
                                     NULL);
            return NGX_ERROR;
        }

        ngx_memcpy(s->sha, reply->str, 40);
        s->sha[40] = '\0';
        s->has_sha = 1;

        ngx_log_debug1(NGX_LOG_DEBUG_HTTP, s->log, 0,
                       "flags: sync: connected, script loaded as %s",
                       s->sha);

        /* the first round goes at once */
        if (ngx_http_flags_sync_round(s) != NGX_OK) {
            ngx_http_flags_sync_fail(s, "could not send", NULL);
            return NGX_ERROR;
        }

        return NGX_OK;

    default:
        /* the script's answer: the round applies it */
        if (kind >= NGX_HTTP_FLAGS_SYNC_R_EVAL + 2 * nprojects
            ? ngx_http_flags_sync_defs_answer(s, pi, reply) != NGX_OK
            : ngx_http_flags_sync_answer(s, pi, reply) != NGX_OK)
        {
            detail.data = (u_char *) "unexpected reply";
            detail.len = sizeof("unexpected reply") - 1;
            ngx_http_flags_sync_fail(s, "the sync script failed", &detail);
            return NGX_ERROR;
        }

        break;
    }

    if (s->head == s->nexpect) {
        ngx_http_flags_sync_round_done(s);
    }

    return NGX_OK;
}
