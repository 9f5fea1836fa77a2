/*
 * ngx_http_flags_sync_sentinel.c - flags_sync sentinel:// (docs/sync.md
 * "Sentinel"): the syncing worker asks the Sentinels for the master
 * before it connects to Redis, checks that the node it reached is the
 * master, and hears of a failover.
 *
 *  - Asking: before each connection to Redis (the first, and every one
 *    after a connection was lost) the worker sends SENTINEL
 *    get-master-addr-by-name NAME to one Sentinel at a time, over a
 *    connection of its own (nginx's, non-blocking, with a timeout),
 *    starting with the one that answered last and going on in the
 *    directive's order when one fails, times out or answers nothing
 *    usable.  The answer's master is where ngx_http_flags_sync_connect()
 *    goes; when no Sentinel answers, the round fails as a lost Redis does
 *    (backoff, logged once).
 *  - ROLE is pipelined with AUTH and SELECT on each connection to the
 *    master: a node that is not the master fails the connection, and the
 *    next one asks the Sentinels again.  So does any error reply
 *    (-READONLY from a demoted master) and a lost connection, since every
 *    closed connection forgets the master.
 *  - +switch-master: a second, long-lived connection to one Sentinel is
 *    subscribed to the channel; a message about our master closes the
 *    connection to Redis and asks the Sentinels at once, without waiting
 *    for the backoff.  A lost subscription moves to the next Sentinel
 *    after a pause.
 *
 * The request path never waits for any of it; the reading of the replies
 * (the master's address, the role, the message) is the core's
 * (src/core/sentinel.cpp).  hiredis formats the commands and parses the
 * replies, bounded as the connection to Redis is.
 */

#include "ngx_http_flags_sync.h"


/* a Sentinel's reply: two short strings; a message: three */
#define NGX_HTTP_FLAGS_SENTINEL_ELEMENTS  64
#define NGX_HTTP_FLAGS_SENTINEL_BYTES     4096
/* what each Sentinel said, for the line logged when none answered */
#define NGX_HTTP_FLAGS_SENTINEL_WHY       1024


typedef struct {
    ngx_http_flags_sync_t         *s;
    ngx_peer_connection_t          pc;
    redisReader                   *reader;
    /* a Sentinel's time to answer; for a subscription lost, the pause
     * before the next Sentinel */
    ngx_event_t                    timer;
    ngx_uint_t                     index;       /* the Sentinel */
    ngx_uint_t                     gen;         /* opened: a new one */
    ngx_uint_t                     connected;
    ngx_uint_t                     subscribed;  /* the channel confirmed */
    ngx_uint_t                     sub;         /* 1: the subscription */
    char                          *out;         /* hiredis's command */
    size_t                         out_len;
    size_t                         out_sent;
    ngx_http_flags_sync_bound_t    bound;       /* of the reply read */
} ngx_http_flags_sync_sconn_t;


struct ngx_http_flags_sync_sentinel_s {
    /* the worker's copy of the configuration (s->conf points here):
     * addr and host are the master the Sentinels named last */
    ngx_http_flags_sync_conf_t     conf;
    ngx_str_t                      label;      /* host before an answer */
    ngx_addr_t                     master;
    ngx_sockaddr_t                 master_sa;
    u_char                         master_text[NGX_SOCKADDR_STRLEN];
    ngx_uint_t                     known;      /* named since the last
                                                * connection was lost */
    ngx_uint_t                     start;      /* asked first */
    ngx_uint_t                     tried;      /* this time */
    ngx_uint_t                     silent;     /* none answered: logged */
    ngx_http_flags_sync_sconn_t    ask;
    ngx_http_flags_sync_sconn_t    sub;
    u_char                         why[NGX_HTTP_FLAGS_SENTINEL_WHY];
    size_t                         why_len;
};


static ngx_int_t ngx_http_flags_sync_sconn_open(
    ngx_http_flags_sync_sconn_t *sc, ngx_uint_t index);
static void ngx_http_flags_sync_sconn_close(ngx_http_flags_sync_sconn_t *sc);
static void ngx_http_flags_sync_sconn_write(ngx_event_t *wev);
static void ngx_http_flags_sync_sconn_read(ngx_event_t *rev);
static void ngx_http_flags_sync_sconn_timer(ngx_event_t *ev);
#if (NGX_SSL)
static void ngx_http_flags_sync_sconn_tls_ready(ngx_http_flags_sync_t *s,
    ngx_connection_t *c, ngx_str_t *error);
#endif
static void ngx_http_flags_sync_sconn_failed(ngx_http_flags_sync_sconn_t *sc,
    const char *why, ngx_str_t *detail);
static ngx_int_t ngx_http_flags_sync_sconn_reply(
    ngx_http_flags_sync_sconn_t *sc, redisReply *reply);
static void ngx_http_flags_sync_ask_one(ngx_http_flags_sync_t *s,
    ngx_uint_t index);
static void ngx_http_flags_sync_ask_failed(ngx_http_flags_sync_t *s,
    const char *why, ngx_str_t *detail);
static void ngx_http_flags_sync_found(ngx_http_flags_sync_t *s,
    fl_sync_addr_t *a);
static void ngx_http_flags_sync_sub_open(ngx_http_flags_sync_t *s,
    ngx_uint_t index);
static void ngx_http_flags_sync_sub_lost(ngx_http_flags_sync_t *s,
    const char *why, ngx_str_t *detail);


/* One Sentinel's time to answer: the interval, at least 1 s, at most 5 s. */

static ngx_msec_t
ngx_http_flags_sync_sentinel_timeout(ngx_http_flags_sync_t *s)
{
    return ngx_min(ngx_max(s->conf->interval, 1000), 5000);
}


ngx_int_t
ngx_http_flags_sync_sentinel_init(ngx_http_flags_sync_t *s,
    ngx_cycle_t *cycle)
{
    ngx_http_flags_sync_sentinel_t  *st;

    st = ngx_pcalloc(cycle->pool, sizeof(ngx_http_flags_sync_sentinel_t));
    if (st == NULL) {
        return NGX_ERROR;
    }

    st->conf = *s->conf;
    st->label = s->conf->host;
    s->conf = &st->conf;

    st->ask.s = s;
    st->sub.s = s;
    st->sub.sub = 1;

    st->ask.timer.handler = ngx_http_flags_sync_sconn_timer;
    st->ask.timer.data = &st->ask;
    st->ask.timer.log = cycle->log;
    st->ask.timer.cancelable = 1;

    st->sub.timer = st->ask.timer;
    st->sub.timer.data = &st->sub;

    s->sentinel = st;

    return NGX_OK;
}


/* ------------------------------------------------ asking the Sentinels */

/*
 * Before a connection to Redis: NGX_OK when the Sentinels named the
 * master since the last connection was lost (connect to it), NGX_AGAIN
 * when they are being asked (their answer connects, or fails the round).
 */

ngx_int_t
ngx_http_flags_sync_sentinel_ask(ngx_http_flags_sync_t *s)
{
    ngx_http_flags_sync_sentinel_t  *st = s->sentinel;

    if (st->known) {
        return NGX_OK;
    }

    if (s->state == NGX_HTTP_FLAGS_SYNC_ASKING) {
        return NGX_AGAIN;
    }

    s->state = NGX_HTTP_FLAGS_SYNC_ASKING;
    st->conf.host = st->label;
    st->tried = 0;
    st->why_len = 0;

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, s->log, 0,
                   "flags: sync: asking the sentinels for the master of "
                   "\"%V\", first %V", &st->conf.master_name,
                   &st->conf.sentinels[st->start].name);

    ngx_http_flags_sync_ask_one(s, st->start);

    return NGX_AGAIN;
}


static void
ngx_http_flags_sync_ask_one(ngx_http_flags_sync_t *s, ngx_uint_t index)
{
    if (ngx_http_flags_sync_sconn_open(&s->sentinel->ask, index) != NGX_OK) {
        ngx_http_flags_sync_ask_failed(s, "could not connect", NULL);
    }
}


/*
 * The Sentinel asked did not name the master: the next one is asked;
 * after the last, the round fails as a lost Redis does (backoff), and the
 * first time in a row it is logged at error, with what each one said.
 */

static void
ngx_http_flags_sync_ask_failed(ngx_http_flags_sync_t *s, const char *why,
    ngx_str_t *detail)
{
    u_char                          *p, *last, *entry;
    ngx_uint_t                       index;
    ngx_http_flags_sync_sentinel_t  *st = s->sentinel;

    index = st->ask.index;

    p = st->why + st->why_len;
    last = st->why + sizeof(st->why);

    if (st->why_len) {
        p = ngx_slprintf(p, last, "; ");
    }

    entry = p;

    p = ngx_slprintf(p, last, "%V: %s", &st->conf.sentinels[index].name,
                     why);
    if (detail) {
        p = ngx_slprintf(p, last, ": %V", detail);
    }

    st->why_len = p - st->why;

    ngx_log_error(NGX_LOG_INFO, s->log, 0, "flags: sync: sentinel %*s",
                  (size_t) (p - entry), entry);

    ngx_http_flags_sync_sconn_close(&st->ask);

    if (++st->tried < st->conf.nsentinels) {
        ngx_http_flags_sync_ask_one(s, (index + 1) % st->conf.nsentinels);
        return;
    }

    if (!st->silent) {
        st->silent = 1;
        ngx_log_error(NGX_LOG_ERR, s->log, 0,
                      "flags: sync: no sentinel named the master of \"%V\" "
                      "(%*s); hosts decide alone until one does",
                      &st->conf.master_name, st->why_len, st->why);
    }

    /* said above: the loss is logged at info from here on */
    s->lost = 1;

    ngx_http_flags_sync_fail(s, "no sentinel named the master", NULL);
}


/* A Sentinel named the master: it becomes where Redis is, and connected. */

static void
ngx_http_flags_sync_found(ngx_http_flags_sync_t *s, fl_sync_addr_t *a)
{
    size_t                           len;
    ngx_uint_t                       index;
    struct sockaddr_in              *sin;
    ngx_http_flags_shctx_t          *sh;
    ngx_http_flags_sync_sentinel_t  *st = s->sentinel;
    u_char                           text[NGX_SOCKADDR_STRLEN];
#if (NGX_HAVE_INET6)
    struct sockaddr_in6             *sin6;
#endif

    index = st->ask.index;

    ngx_memzero(&st->master_sa, sizeof(ngx_sockaddr_t));

    if (a->family == 4) {
        sin = &st->master_sa.sockaddr_in;
        sin->sin_family = AF_INET;
        sin->sin_port = htons(a->port);
        ngx_memcpy(&sin->sin_addr, a->addr, 4);
        st->master.socklen = sizeof(struct sockaddr_in);

    } else {
#if (NGX_HAVE_INET6)
        sin6 = &st->master_sa.sockaddr_in6;
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons(a->port);
        ngx_memcpy(&sin6->sin6_addr, a->addr, 16);
        st->master.socklen = sizeof(struct sockaddr_in6);
#else
        ngx_str_t  detail = ngx_string("an IPv6 address");

        ngx_http_flags_sync_ask_failed(s, "unusable answer", &detail);
        return;
#endif
    }

    st->master.sockaddr = &st->master_sa.sockaddr;

    len = ngx_sock_ntop(st->master.sockaddr, st->master.socklen, text,
                        NGX_SOCKADDR_STRLEN, 1);

    if (len != st->master.name.len
        || ngx_memcmp(text, st->master_text, len) != 0)
    {
        ngx_log_error(NGX_LOG_NOTICE, s->log, 0,
                      "flags: sync: master of \"%V\" is %*s (sentinel %V)",
                      &st->conf.master_name, len, text,
                      &st->conf.sentinels[index].name);
    }

    ngx_memcpy(st->master_text, text, len);
    st->master.name.data = st->master_text;
    st->master.name.len = len;

    st->conf.addr = &st->master;
    st->conf.host = st->master.name;

    /* flags_status's "master" and "sentinel" */
    sh = s->fmcf->sh;
    ngx_shmtx_lock(&s->fmcf->shpool->mutex);
    ngx_memcpy(sh->sync_master, text, len);
    sh->sync_master_len = len;
    sh->sync_sentinel = index + 1;
    ngx_shmtx_unlock(&s->fmcf->shpool->mutex);

    st->known = 1;
    st->start = index;
    st->silent = 0;

    ngx_http_flags_sync_sconn_close(&st->ask);

    /* a failover is heard from the Sentinel that answered, unless one is
     * listened to already (or is being waited for) */
    if (st->sub.pc.connection == NULL && !st->sub.timer.timer_set) {
        ngx_http_flags_sync_sub_open(s, index);
    }

    s->state = NGX_HTTP_FLAGS_SYNC_OFF;
    ngx_http_flags_sync_connect(s);
}


/*
 * The connection to Redis is closed (lost, failed, the lock lost, the
 * worker exiting): the next one asks the Sentinels again.  The
 * subscription stays while this worker syncs.
 */

void
ngx_http_flags_sync_sentinel_close(ngx_http_flags_sync_t *s)
{
    ngx_http_flags_sync_sentinel_t  *st = s->sentinel;

    ngx_http_flags_sync_sconn_close(&st->ask);
    st->known = 0;

    if (!ngx_http_flags_sync_owns(s) || ngx_exiting || ngx_terminate
        || ngx_quit)
    {
        ngx_http_flags_sync_sconn_close(&st->sub);
    }
}


/* The reply to ROLE on a new connection: NGX_ERROR when the node is not
 * the master (the connection failed, and was closed). */

ngx_int_t
ngx_http_flags_sync_sentinel_role(ngx_http_flags_sync_t *s,
    redisReply *reply)
{
    u_char          *p;
    ngx_str_t        detail;
    fl_sync_elt_t    view[2];
    fl_sync_role_t   role;
    u_char           msg[64];

    ngx_memzero(view, sizeof(view));

    /* its first element is all that is read */
    if (reply->type == REDIS_REPLY_ARRAY && reply->elements > 0) {
        view[0].type = FL_SYNC_ELT_ARRAY;
        view[0].elements = 1;

        if (reply->element[0]->type == REDIS_REPLY_STRING) {
            view[1].type = FL_SYNC_ELT_STRING;
            view[1].str = reply->element[0]->str;
            view[1].len = reply->element[0]->len;
        }
    }

    role = fl_sync_role(view, 2);

    if (role == FL_SYNC_ROLE_MASTER) {
        return NGX_OK;
    }

    p = ngx_snprintf(msg, sizeof(msg), "ROLE says %s",
                     fl_sync_role_text(role));
    detail.data = msg;
    detail.len = p - msg;

    ngx_http_flags_sync_fail(s, "not the master", &detail);

    return NGX_ERROR;
}


/* ------------------------------------------------- +switch-master */

static void
ngx_http_flags_sync_sub_open(ngx_http_flags_sync_t *s, ngx_uint_t index)
{
    if (ngx_http_flags_sync_sconn_open(&s->sentinel->sub, index) != NGX_OK) {
        ngx_http_flags_sync_sub_lost(s, "could not connect", NULL);
    }
}


/* The subscription is lost: the next Sentinel is tried after a pause. */

static void
ngx_http_flags_sync_sub_lost(ngx_http_flags_sync_t *s, const char *why,
    ngx_str_t *detail)
{
    ngx_msec_t                       pause;
    ngx_http_flags_sync_sentinel_t  *st = s->sentinel;

    pause = ngx_max(s->conf->interval, 1000);

    if (detail) {
        ngx_log_error(NGX_LOG_INFO, s->log, 0,
                      "flags: sync: sentinel %V: +switch-master not heard: "
                      "%s: %V; the next sentinel in %M ms",
                      &st->conf.sentinels[st->sub.index].name, why, detail,
                      pause);
    } else {
        ngx_log_error(NGX_LOG_INFO, s->log, 0,
                      "flags: sync: sentinel %V: +switch-master not heard: "
                      "%s; the next sentinel in %M ms",
                      &st->conf.sentinels[st->sub.index].name, why, pause);
    }

    ngx_http_flags_sync_sconn_close(&st->sub);

    st->sub.index = (st->sub.index + 1) % st->conf.nsentinels;
    ngx_add_timer(&st->sub.timer, pause);
}


/* ------------------------------------------- a connection to a Sentinel */

static ngx_int_t
ngx_http_flags_sync_sconn_open(ngx_http_flags_sync_sconn_t *sc,
    ngx_uint_t index)
{
    int                      len;
    ngx_int_t                rc;
    ngx_addr_t              *addr;
    const char              *argv[3];
    size_t                   argvlen[3];
    ngx_connection_t        *c;
    ngx_http_flags_sync_t   *s = sc->s;

    sc->index = index;
    sc->gen++;
    addr = &s->conf->sentinels[index];

    if (sc->sub) {
        argv[0] = "SUBSCRIBE";
        argvlen[0] = 9;
        argv[1] = "+switch-master";
        argvlen[1] = 14;
        len = redisFormatCommandArgv(&sc->out, 2, argv, argvlen);

    } else {
        argv[0] = "SENTINEL";
        argvlen[0] = 8;
        argv[1] = "get-master-addr-by-name";
        argvlen[1] = 23;
        argv[2] = (const char *) s->conf->master_name.data;
        argvlen[2] = s->conf->master_name.len;
        len = redisFormatCommandArgv(&sc->out, 3, argv, argvlen);
    }

    if (len < 0) {
        sc->out = NULL;
        return NGX_ERROR;
    }

    sc->out_len = len;
    sc->out_sent = 0;

    /* bounded as the connection to Redis is (ngx_http_flags_sync_conn.c) */
    sc->bound.max_elements = NGX_HTTP_FLAGS_SENTINEL_ELEMENTS;
    sc->bound.max_bytes = NGX_HTTP_FLAGS_SENTINEL_BYTES;

    sc->reader = ngx_http_flags_sync_reader(&sc->bound);
    if (sc->reader == NULL) {
        ngx_http_flags_sync_sconn_close(sc);
        return NGX_ERROR;
    }

    ngx_memzero(&sc->pc, sizeof(ngx_peer_connection_t));

    sc->pc.sockaddr = addr->sockaddr;
    sc->pc.socklen = addr->socklen;
    sc->pc.name = &addr->name;
    sc->pc.get = ngx_event_get_peer;
    sc->pc.log = s->log;
    sc->pc.log_error = NGX_ERROR_INFO;

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, s->log, 0,
                   "flags: sync: sentinel %V: %s", &addr->name,
                   sc->sub ? "subscribing to +switch-master"
                           : "asking for the master");

    rc = ngx_event_connect_peer(&sc->pc);

    if (rc == NGX_ERROR || rc == NGX_BUSY || rc == NGX_DECLINED) {
        ngx_http_flags_sync_sconn_close(sc);
        return NGX_ERROR;
    }

    c = sc->pc.connection;
    c->data = sc;
    c->read->handler = ngx_http_flags_sync_sconn_read;
    c->write->handler = ngx_http_flags_sync_sconn_write;

    sc->connected = 0;
    sc->subscribed = 0;

    ngx_add_timer(&sc->timer, ngx_http_flags_sync_sentinel_timeout(s));

    if (rc == NGX_OK) {
        /* may fail, and close sc (or open it again to the next one) */
        ngx_http_flags_sync_sconn_write(c->write);
    }

    return NGX_OK;
}


static void
ngx_http_flags_sync_sconn_close(ngx_http_flags_sync_sconn_t *sc)
{
    if (sc->timer.timer_set) {
        ngx_del_timer(&sc->timer);
    }

    if (sc->pc.connection) {
        /* TLS or not */
        ngx_http_flags_sync_tls_close(sc->pc.connection);
        sc->pc.connection = NULL;
    }

    if (sc->reader) {
        redisReaderFree(sc->reader);
        sc->reader = NULL;
    }

    if (sc->out) {
        redisFreeCommand(sc->out);
        sc->out = NULL;
    }

    sc->connected = 0;
    sc->subscribed = 0;
}


/* The Sentinel failed us: the next one (asking), or a pause then the next
 * one (the subscription). */

static void
ngx_http_flags_sync_sconn_failed(ngx_http_flags_sync_sconn_t *sc,
    const char *why, ngx_str_t *detail)
{
    if (sc->sub) {
        ngx_http_flags_sync_sub_lost(sc->s, why, detail);

    } else {
        ngx_http_flags_sync_ask_failed(sc->s, why, detail);
    }
}


static void
ngx_http_flags_sync_sconn_timer(ngx_event_t *ev)
{
    ngx_http_flags_sync_sconn_t  *sc = ev->data;

    ngx_http_flags_sync_t  *s = sc->s;

    if (sc->pc.connection) {
        ngx_http_flags_sync_sconn_failed(sc,
                                         sc->connected ? "timed out"
                                                       : "connect timed out",
                                         NULL);
        return;
    }

    /* the pause after a lost subscription: the next Sentinel, while this
     * worker syncs */
    if (sc->sub && ngx_http_flags_sync_owns(s)
        && !ngx_exiting && !ngx_terminate && !ngx_quit)
    {
        ngx_http_flags_sync_sub_open(s, sc->index);
    }
}


static void
ngx_http_flags_sync_sconn_write(ngx_event_t *wev)
{
    int                           err;
    ssize_t                       n;
    socklen_t                     len;
    ngx_connection_t             *c;
    ngx_http_flags_sync_sconn_t  *sc;

    c = wev->data;
    sc = c->data;

    if (!sc->connected) {
        err = 0;
        len = sizeof(int);

        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, (void *) &err, &len)
            == -1)
        {
            err = ngx_socket_errno;
        }

        if (err) {
            ngx_http_flags_sync_sconn_failed(sc, "could not connect", NULL);
            return;
        }

        sc->connected = 1;

#if (NGX_SSL)
        if (sc->s->conf->tls && c->ssl == NULL) {
            /* the handshake (bounded by sc->timer), checked against
             * tls_name=, else this Sentinel's address; then the command */
            if (ngx_http_flags_sync_tls_start(sc->s, c,
                    &sc->s->conf->sentinels[sc->index].name,
                    ngx_http_flags_sync_sconn_tls_ready)
                != NGX_OK)
            {
                ngx_http_flags_sync_sconn_failed(sc, "TLS", NULL);
            }

            return;
        }
#endif
    }

    while (sc->out && sc->out_sent < sc->out_len) {
        n = c->send(c, (u_char *) sc->out + sc->out_sent,
                    sc->out_len - sc->out_sent);

        if (n == NGX_AGAIN) {
            break;
        }

        if (n == NGX_ERROR || n == 0) {
            ngx_http_flags_sync_sconn_failed(sc, "could not send", NULL);
            return;
        }

        sc->out_sent += n;
    }

    if (sc->out && sc->out_sent == sc->out_len) {
        redisFreeCommand(sc->out);
        sc->out = NULL;
    }

    if (ngx_handle_write_event(wev, 0) != NGX_OK) {
        ngx_http_flags_sync_sconn_failed(sc, "could not send", NULL);
    }
}


#if (NGX_SSL)

/* TLS with a Sentinel is up (the command goes now) or failed */

static void
ngx_http_flags_sync_sconn_tls_ready(ngx_http_flags_sync_t *s,
    ngx_connection_t *c, ngx_str_t *error)
{
    ngx_http_flags_sync_sconn_t  *sc = c->data;

    if (error) {
        ngx_http_flags_sync_sconn_failed(sc, "TLS", error);
        return;
    }

    ngx_http_flags_sync_sconn_write(c->write);
}

#endif


static void
ngx_http_flags_sync_sconn_read(ngx_event_t *rev)
{
    ssize_t                       n;
    ngx_int_t                     rc;
    ngx_uint_t                    gen;
    redisReply                   *reply;
    ngx_connection_t             *c;
    ngx_http_flags_sync_sconn_t  *sc;
    u_char                        buf[4096];

    c = rev->data;
    sc = c->data;
    gen = sc->gen;

    if (!sc->connected) {
        /* a refused connect shows as readable first */
        ngx_http_flags_sync_sconn_write(c->write);

        if (sc->gen != gen || sc->pc.connection == NULL || !sc->connected) {
            return;
        }
    }

    for ( ;; ) {
        n = c->recv(c, buf, sizeof(buf));

        if (n == NGX_AGAIN) {
            break;
        }

        if (n == 0 || n == NGX_ERROR) {
            ngx_http_flags_sync_sconn_failed(sc, n == 0
                                             ? "closed the connection"
                                             : "could not read", NULL);
            return;
        }

        if (redisReaderFeed(sc->reader, (const char *) buf, n) != REDIS_OK) {
            ngx_http_flags_sync_sconn_failed(sc, "out of memory", NULL);
            return;
        }

        for ( ;; ) {
            reply = NULL;

            if (redisReaderGetReply(sc->reader, (void **) &reply) != REDIS_OK)
            {
                ngx_http_flags_sync_sconn_failed(sc, sc->bound.too_large
                                                 ? "reply too large"
                                                 : "protocol error", NULL);
                return;
            }

            if (reply == NULL) {
                break;
            }

            rc = ngx_http_flags_sync_sconn_reply(sc, reply);
            freeReplyObject(reply);

            if (rc != NGX_OK || sc->gen != gen || sc->pc.connection == NULL)
            {
                /* closed (and perhaps opened again): c is gone */
                return;
            }
        }

        /* a bulk string longer than any answer is not awaited */
        if (sc->reader->len - sc->reader->pos > sc->bound.max_bytes) {
            ngx_http_flags_sync_sconn_failed(sc, "reply too large", NULL);
            return;
        }
    }

    if (ngx_handle_read_event(rev, 0) != NGX_OK) {
        ngx_http_flags_sync_sconn_failed(sc, "could not read", NULL);
    }
}


/* A reply of a Sentinel.  NGX_DONE: the connection is closed. */

static ngx_int_t
ngx_http_flags_sync_sconn_reply(ngx_http_flags_sync_sconn_t *sc,
    redisReply *reply)
{
    size_t                   n;
    ngx_str_t                detail;
    fl_sync_addr_t           a;
    fl_sync_elt_t            view[NGX_HTTP_FLAGS_SENTINEL_ELEMENTS];
    ngx_uint_t               gen;
    fl_sentinel_status_t     st;
    ngx_http_flags_sync_t   *s = sc->s;

    if (reply->type == REDIS_REPLY_ERROR) {
        detail.data = (u_char *) reply->str;
        detail.len = ngx_min(reply->len, 200);
        ngx_http_flags_sync_sconn_failed(sc, "refused", &detail);
        return NGX_DONE;
    }

    n = ngx_http_flags_sync_view(reply, view,
                                  NGX_HTTP_FLAGS_SENTINEL_ELEMENTS, 0);
    n = ngx_min(n, NGX_HTTP_FLAGS_SENTINEL_ELEMENTS);

    if (!sc->sub) {
        /* the answer to get-master-addr-by-name */
        if (reply->type == REDIS_REPLY_NIL) {
            detail = s->conf->master_name;
            ngx_http_flags_sync_sconn_failed(sc, "no master named", &detail);
            return NGX_DONE;
        }

        st = fl_sentinel_master(view, n, &a);

        if (st != FL_SENTINEL_OK) {
            ngx_http_flags_sync_sconn_failed(sc, fl_sentinel_status_text(st),
                                             NULL);
            return NGX_DONE;
        }

        ngx_http_flags_sync_found(s, &a);
        return NGX_DONE;
    }

    if (!sc->subscribed) {
        /* ["subscribe", "+switch-master", 1]: listening from now on */
        if (!fl_sentinel_subscribed(view, n)) {
            ngx_http_flags_sync_sconn_failed(sc, "not subscribed", NULL);
            return NGX_DONE;
        }

        sc->subscribed = 1;

        if (sc->timer.timer_set) {
            ngx_del_timer(&sc->timer);
        }

        ngx_log_debug1(NGX_LOG_DEBUG_HTTP, s->log, 0,
                       "flags: sync: sentinel %V: subscribed to "
                       "+switch-master",
                       &s->conf->sentinels[sc->index].name);
        return NGX_OK;
    }

    if (!fl_sentinel_switched(view, n, (const char *) s->conf->master_name.data,
                              s->conf->master_name.len))
    {
        return NGX_OK;
    }

    ngx_log_error(NGX_LOG_NOTICE, s->log, 0,
                  "flags: sync: sentinel %V: the master of \"%V\" moved: "
                  "asking the sentinels",
                  &s->conf->sentinels[sc->index].name,
                  &s->conf->master_name);

    if (s->state == NGX_HTTP_FLAGS_SYNC_ASKING || !s->owner) {
        return NGX_OK;
    }

    gen = sc->gen;

    /* back to the Sentinels now, whatever the backoff said */
    ngx_http_flags_sync_close(s);
    s->next_try = ngx_current_msec;

    if (sc->gen != gen || sc->pc.connection == NULL) {
        return NGX_DONE;
    }

    ngx_http_flags_sync_connect(s);

    return (sc->gen == gen && sc->pc.connection) ? NGX_OK : NGX_DONE;
}
