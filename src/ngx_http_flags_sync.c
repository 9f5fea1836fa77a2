/*
 * ngx_http_flags_sync.c - flags_sync: a fleet of hosts shares error
 * counts, rollbacks and overrides through Redis (docs/sync.md).
 *
 * One worker per host (a lock in the zone) owns a connection to Redis,
 * driven by nginx's event loop: a non-blocking connect, read and write
 * handlers, timers.  hiredis only formats the commands and reads the
 * replies.  Every interval it runs one Lua script per project that adds
 * the host's deltas, decides the fleet's rollbacks atomically and answers
 * the project's rollbacks and overrides, which the worker applies to the
 * zone.  Nothing here runs on the request path: when Redis is away each
 * host decides alone, as without flags_sync.
 */

#include "ngx_http_flags_module.h"

#include <hiredis/hiredis.h>


#define NGX_HTTP_FLAGS_SYNC_BACKOFF_MAX  30000
#define NGX_HTTP_FLAGS_SYNC_ARGS         10      /* script args a flag */
#define NGX_HTTP_FLAGS_SYNC_PASSWORD_MAX 512     /* password_file, bytes */
#define NGX_HTTP_FLAGS_SYNC_NAME_MAX     64      /* host=, bytes */

/*
 * A reply's bound (docs/sync.md): the largest legitimate one is a
 * project's control hash, with per flag up to four fields a definition
 * (rb, ov, cb, ob) and their values.  Allowed: 8 definitions of each flag
 * of this host's largest project, 2048 more fields (flags of the project
 * that other hosts have and this one has not), at most 256 bytes an
 * element.  Past it a reply fails the round and the connection closes.
 */
#define NGX_HTTP_FLAGS_SYNC_ELTS_FLAG    64
#define NGX_HTTP_FLAGS_SYNC_ELTS_MIN     4096
#define NGX_HTTP_FLAGS_SYNC_ELT_BYTES    256
#define NGX_HTTP_FLAGS_SYNC_BYTES_MIN    65536


struct ngx_http_flags_sync_conf_s {
    ngx_str_t                   url;
    ngx_addr_t                 *addr;
    ngx_str_t                   host;        /* "host:port", for the log */
    ngx_str_t                   password;    /* empty: no AUTH */
    ngx_str_t                   name;        /* this host in the fleet */
    ngx_uint_t                  db;
    ngx_msec_t                  interval;
    ngx_str_t                   prefix;
};


/* what one flag's entry of a round sent */
typedef struct {
    uint64_t                    errors;      /* the totals read */
    uint64_t                    enabled;
    uint64_t                    local;       /* its control, encoded */
} ngx_http_flags_sync_sent_t;


typedef struct {
    ngx_http_flags_sync_sent_t *sent;
} ngx_http_flags_sync_project_t;


typedef enum {
    NGX_HTTP_FLAGS_SYNC_OFF = 0,             /* no connection */
    NGX_HTTP_FLAGS_SYNC_CONNECTING,
    NGX_HTTP_FLAGS_SYNC_IDLE,                /* connected, no round */
    NGX_HTTP_FLAGS_SYNC_BUSY                 /* replies awaited */
} ngx_http_flags_sync_state_e;


/* what a reply answers */
typedef enum {
    NGX_HTTP_FLAGS_SYNC_R_AUTH = 0,
    NGX_HTTP_FLAGS_SYNC_R_SELECT,
    NGX_HTTP_FLAGS_SYNC_R_LOAD,
    NGX_HTTP_FLAGS_SYNC_R_EVAL               /* + project index: EVALSHA;
                                              * + projects + index: EVAL */
} ngx_http_flags_sync_reply_e;


typedef struct {
    ngx_http_flags_main_conf_t     *fmcf;
    ngx_http_flags_sync_conf_t     *conf;
    ngx_log_t                      *log;
    ngx_event_t                     tick;
    ngx_event_t                     timeout;
    ngx_peer_connection_t           pc;
    redisReader                    *reader;
    ngx_uint_t                      state;
    ngx_uint_t                      owner;
    ngx_uint_t                      lost;    /* the loss was logged */
    ngx_msec_t                      backoff;
    ngx_msec_t                      next_try;
    ngx_msec_t                      round_start;

    u_char                         *out;     /* commands not yet sent */
    size_t                          out_len;
    size_t                          out_sent;
    size_t                          out_size;

    ngx_uint_t                     *expect;  /* replies awaited, in order */
    ngx_uint_t                      nexpect;
    ngx_uint_t                      head;
    ngx_uint_t                      nalloc;

    /* the last EVALSHA of each project, for a NOSCRIPT retry as EVAL */
    char                          **cmd;
    size_t                         *cmd_len;

    /* the bound of a reply, and what the one being read holds */
    size_t                          max_elements;
    size_t                          max_bytes;
    size_t                          reply_elements;
    size_t                          reply_bytes;
    ngx_uint_t                      too_large;

    u_char                          sha[41];
    ngx_uint_t                      has_sha;
    ngx_uint_t                      changed; /* the zone changed: save */
    ngx_http_flags_sync_project_t  *projects;
} ngx_http_flags_sync_t;


static ngx_http_flags_sync_t  *ngx_http_flags_sync_worker;


static void ngx_http_flags_sync_tick(ngx_event_t *ev);
static void ngx_http_flags_sync_timeout(ngx_event_t *ev);
static ngx_uint_t ngx_http_flags_sync_lock(ngx_http_flags_sync_t *s);
static ngx_uint_t ngx_http_flags_sync_owns(ngx_http_flags_sync_t *s);
static void ngx_http_flags_sync_connect(ngx_http_flags_sync_t *s);
static void ngx_http_flags_sync_fail(ngx_http_flags_sync_t *s,
    const char *why, ngx_str_t *detail);
static void ngx_http_flags_sync_close(ngx_http_flags_sync_t *s);
static void ngx_http_flags_sync_write(ngx_event_t *wev);
static void ngx_http_flags_sync_read(ngx_event_t *rev);
static ngx_int_t ngx_http_flags_sync_send(ngx_http_flags_sync_t *s,
    char *cmd, int len, ngx_uint_t kind);
static ngx_int_t ngx_http_flags_sync_flush(ngx_http_flags_sync_t *s);
static ngx_int_t ngx_http_flags_sync_hello(ngx_http_flags_sync_t *s);
static ngx_int_t ngx_http_flags_sync_round(ngx_http_flags_sync_t *s);
static ngx_int_t ngx_http_flags_sync_project(ngx_http_flags_sync_t *s,
    ngx_uint_t pi, ngx_uint_t rebase);
static ngx_int_t ngx_http_flags_sync_reply(ngx_http_flags_sync_t *s,
    redisReply *reply);
static ngx_int_t ngx_http_flags_sync_apply(ngx_http_flags_sync_t *s,
    ngx_uint_t pi, redisReply *reply);
static uint64_t ngx_http_flags_sync_local(ngx_http_flags_flag_t *flag,
    fl_state_snapshot_t *snap);
static void ngx_http_flags_sync_round_done(ngx_http_flags_sync_t *s);
static ngx_uint_t ngx_http_flags_sync_valid_name(ngx_str_t *name);




/* ------------------------------------------------------ the directive */

/*
 * The URL as messages show it: whatever stands between "://" (or the
 * start, when a typo lost it) and the last "@" (a password, or
 * user:password) is written "***", so that neither the log nor nginx -t's
 * output ever echoes a password.
 */

static ngx_str_t *
ngx_http_flags_sync_shown(ngx_conf_t *cf, ngx_str_t *url)
{
    u_char     *p, *last, *at, *d;
    ngx_str_t  *shown;

    shown = ngx_palloc(cf->pool, sizeof(ngx_str_t));
    if (shown == NULL) {
        return url;
    }

    *shown = *url;

    last = url->data + url->len;
    p = ngx_strlcasestrn(url->data, last, (u_char *) "://", 3 - 1);
    p = (p == NULL) ? url->data : p + 3;

    at = NULL;
    for (d = p; d < last; d++) {
        if (*d == '@') {
            at = d;
        }
    }

    if (at == NULL) {
        return shown;
    }

    shown->data = ngx_pnalloc(cf->pool, url->len + 4);
    if (shown->data == NULL) {
        return url;
    }

    d = ngx_cpymem(shown->data, url->data, p - url->data);
    d = ngx_cpymem(d, (*p == ':') ? ":***" : "***", (*p == ':') ? 4 : 3);
    d = ngx_cpymem(d, at, last - at);
    shown->len = d - shown->data;

    return shown;
}


/*
 * password_file=PATH: read once, by the master, while the configuration
 * is read (so the file may be readable by root only); its trailing
 * newlines are not part of the password.
 */

static char *
ngx_http_flags_sync_password_file(ngx_conf_t *cf,
    ngx_http_flags_sync_conf_t *sc, ngx_str_t *path)
{
    u_char           *buf;
    ssize_t           n;
    ngx_fd_t          fd;
    ngx_err_t         err;
    ngx_file_info_t   fi;

    if (path->len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "flags_sync: password_file= needs a path");
        return NGX_CONF_ERROR;
    }

    if (ngx_conf_full_name(cf->cycle, path, 1) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    fd = ngx_open_file(path->data, NGX_FILE_RDONLY, NGX_FILE_OPEN, 0);
    if (fd == NGX_INVALID_FILE) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno,
                           "flags_sync: cannot open password_file \"%V\"",
                           path);
        return NGX_CONF_ERROR;
    }

    buf = ngx_pnalloc(cf->pool, NGX_HTTP_FLAGS_SYNC_PASSWORD_MAX + 1);
    if (buf == NULL) {
        (void) ngx_close_file(fd);
        return NGX_CONF_ERROR;
    }

    if (ngx_fd_info(fd, &fi) == NGX_FILE_ERROR) {
        err = ngx_errno;
        (void) ngx_close_file(fd);
        ngx_conf_log_error(NGX_LOG_EMERG, cf, err,
                           "flags_sync: cannot read password_file \"%V\"",
                           path);
        return NGX_CONF_ERROR;
    }

    if (!ngx_is_file(&fi)) {
        (void) ngx_close_file(fd);
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "flags_sync: password_file \"%V\" is not "
                           "a regular file", path);
        return NGX_CONF_ERROR;
    }

    /* one byte more than the bound tells a file too large */
    n = ngx_read_fd(fd, buf, NGX_HTTP_FLAGS_SYNC_PASSWORD_MAX + 1);
    err = ngx_errno;
    (void) ngx_close_file(fd);

    if (n == -1) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, err,
                           "flags_sync: cannot read password_file \"%V\"",
                           path);
        return NGX_CONF_ERROR;
    }

    if (n > NGX_HTTP_FLAGS_SYNC_PASSWORD_MAX) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "flags_sync: password_file \"%V\" is larger "
                           "than %d bytes", path,
                           NGX_HTTP_FLAGS_SYNC_PASSWORD_MAX);
        return NGX_CONF_ERROR;
    }

    while (n > 0 && (buf[n - 1] == LF || buf[n - 1] == CR)) {
        n--;
    }

    if (n == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "flags_sync: password_file \"%V\" is empty",
                           path);
        return NGX_CONF_ERROR;
    }

    sc->password.data = buf;
    sc->password.len = n;

    return NGX_CONF_OK;
}


/*
 * flags_sync redis://[:PASSWORD@]HOST:PORT[/DB] [interval=1s]
 *            [prefix=flags:] [password_file=PATH] [host=NAME];
 */

char *
ngx_http_flags_sync(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_flags_main_conf_t *fmcf = conf;

    char                        *rv;
    u_char                      *p, *last, *at, *slash;
    ngx_int_t                    n;
    ngx_str_t                   *value, *shown, hp, v, pwfile;
    ngx_url_t                    u;
    ngx_uint_t                   i;
    ngx_http_flags_sync_conf_t  *sc;

    if (fmcf->sync) {
        return "is duplicate";
    }

    sc = ngx_pcalloc(cf->pool, sizeof(ngx_http_flags_sync_conf_t));
    if (sc == NULL) {
        return NGX_CONF_ERROR;
    }

    value = cf->args->elts;
    sc->url = value[1];
    sc->interval = 1000;
    ngx_str_set(&sc->prefix, "flags:");
    sc->name = cf->cycle->hostname;
    ngx_str_null(&pwfile);

    /* no message shows the password */
    shown = ngx_http_flags_sync_shown(cf, &value[1]);

    p = value[1].data;
    last = p + value[1].len;

    if (value[1].len < sizeof("redis://") - 1
        || ngx_strncmp(p, "redis://", sizeof("redis://") - 1) != 0)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "flags_sync: \"%V\" is not a redis:// URL "
                           "(redis://[:PASSWORD@]HOST:PORT[/DB])", shown);
        return NGX_CONF_ERROR;
    }

    p += sizeof("redis://") - 1;

    /* the password may hold '@': the last one ends it */
    at = NULL;
    for (slash = p; slash < last; slash++) {
        if (*slash == '@') {
            at = slash;
        }
    }

    if (at) {
        if (*p != ':' || at == p + 1) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "flags_sync: expected \":PASSWORD@\" before "
                               "the host in \"%V\"", shown);
            return NGX_CONF_ERROR;
        }

        sc->password.data = p + 1;
        sc->password.len = at - p - 1;
        p = at + 1;
    }

    slash = ngx_strlchr(p, last, '/');

    hp.data = p;
    hp.len = (slash ? slash : last) - p;

    if (slash && slash + 1 < last) {
        n = ngx_atoi(slash + 1, last - slash - 1);
        if (n == NGX_ERROR || n > 65535) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "flags_sync: the database in \"%V\" is not "
                               "a number", shown);
            return NGX_CONF_ERROR;
        }

        sc->db = n;
    }

    ngx_memzero(&u, sizeof(ngx_url_t));
    u.url = hp;
    u.no_resolve = 0;

    if (hp.len == 0 || ngx_parse_url(cf->pool, &u) != NGX_OK
        || u.no_port || u.naddrs == 0)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "flags_sync: \"%V\" needs HOST:PORT%s%s",
                           shown, u.err ? ": " : "",
                           u.err ? u.err : "");
        return NGX_CONF_ERROR;
    }

    sc->addr = &u.addrs[0];
    sc->host = hp;

    for (i = 2; i < cf->args->nelts; i++) {

        if (ngx_strncmp(value[i].data, "interval=", 9) == 0) {
            v.data = value[i].data + 9;
            v.len = value[i].len - 9;

            sc->interval = ngx_parse_time(&v, 0);

            if (sc->interval == (ngx_msec_t) NGX_ERROR
                || sc->interval < 10 || sc->interval > 3600000)
            {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "flags_sync: invalid \"%V\": a time "
                                   "from 10ms to 1h", &value[i]);
                return NGX_CONF_ERROR;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "prefix=", 7) == 0) {
            sc->prefix.data = value[i].data + 7;
            sc->prefix.len = value[i].len - 7;

            if (sc->prefix.len > 64
                || ngx_strlchr(sc->prefix.data,
                               sc->prefix.data + sc->prefix.len, '{')
                || ngx_strlchr(sc->prefix.data,
                               sc->prefix.data + sc->prefix.len, '}'))
            {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "flags_sync: invalid \"%V\": at most 64 "
                                   "bytes, without \"{\" or \"}\"",
                                   &value[i]);
                return NGX_CONF_ERROR;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "password_file=", 14) == 0) {
            if (pwfile.data) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "flags_sync: duplicate password_file=");
                return NGX_CONF_ERROR;
            }

            pwfile.data = value[i].data + 14;
            pwfile.len = value[i].len - 14;
            continue;
        }

        if (ngx_strncmp(value[i].data, "host=", 5) == 0) {
            sc->name.data = value[i].data + 5;
            sc->name.len = value[i].len - 5;

            if (!ngx_http_flags_sync_valid_name(&sc->name)) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "flags_sync: invalid \"%V\": 1 to %d "
                                   "bytes of letters, digits, \".\", \"-\", "
                                   "\"_\" or \":\"", &value[i],
                                   NGX_HTTP_FLAGS_SYNC_NAME_MAX);
                return NGX_CONF_ERROR;
            }

            continue;
        }

        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "flags_sync: unknown parameter \"%V\" (expected "
                           "interval=, prefix=, password_file= or host=)",
                           &value[i]);
        return NGX_CONF_ERROR;
    }

    if (pwfile.data) {
        if (sc->password.len) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "flags_sync: a password in the URL and "
                               "password_file= together");
            return NGX_CONF_ERROR;
        }

        rv = ngx_http_flags_sync_password_file(cf, sc, &pwfile);
        if (rv != NGX_CONF_OK) {
            return rv;
        }
    }

    if (!ngx_http_flags_sync_valid_name(&sc->name)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "flags_sync: the host name \"%V\" cannot name "
                           "this host in the fleet's records: set host=",
                           &sc->name);
        return NGX_CONF_ERROR;
    }

    fmcf->sync = sc;

    return NGX_CONF_OK;
}


/* A host's name in the fleet's records: no space (it ends a record). */

static ngx_uint_t
ngx_http_flags_sync_valid_name(ngx_str_t *name)
{
    u_char  *p, *last;

    if (name->len == 0 || name->len > NGX_HTTP_FLAGS_SYNC_NAME_MAX) {
        return 0;
    }

    last = name->data + name->len;

    for (p = name->data; p < last; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')
              || (*p >= '0' && *p <= '9')
              || *p == '.' || *p == '-' || *p == '_' || *p == ':'))
        {
            return 0;
        }
    }

    return 1;
}


/* --------------------------------------------------- the worker's life */

ngx_int_t
ngx_http_flags_sync_init_process(ngx_cycle_t *cycle,
    ngx_http_flags_main_conf_t *fmcf)
{
    ngx_uint_t                      i, nflags;
    ngx_http_flags_sync_t          *s;
    ngx_http_flags_project_t       *project;

    if (fmcf->sync == NULL || fmcf->sh == NULL
        || (ngx_process != NGX_PROCESS_WORKER
            && ngx_process != NGX_PROCESS_SINGLE))
    {
        return NGX_OK;
    }

    s = ngx_pcalloc(cycle->pool, sizeof(ngx_http_flags_sync_t));
    if (s == NULL) {
        return NGX_ERROR;
    }

    s->fmcf = fmcf;
    s->conf = fmcf->sync;
    s->log = cycle->log;

    s->projects = ngx_pcalloc(cycle->pool, fmcf->projects.nelts
                                      * sizeof(ngx_http_flags_sync_project_t));
    s->cmd = ngx_pcalloc(cycle->pool, fmcf->projects.nelts * sizeof(char *));
    s->cmd_len = ngx_pcalloc(cycle->pool,
                             fmcf->projects.nelts * sizeof(size_t));
    s->nalloc = 2 * fmcf->projects.nelts + 4;
    s->expect = ngx_pcalloc(cycle->pool, s->nalloc * sizeof(ngx_uint_t));

    if (s->projects == NULL || s->cmd == NULL || s->cmd_len == NULL
        || s->expect == NULL)
    {
        return NGX_ERROR;
    }

    project = fmcf->projects.elts;
    nflags = 0;

    for (i = 0; i < fmcf->projects.nelts; i++) {
        nflags = ngx_max(nflags, project[i].nflags);
    }

    s->max_elements = NGX_HTTP_FLAGS_SYNC_ELTS_MIN
                      + NGX_HTTP_FLAGS_SYNC_ELTS_FLAG * nflags;
    s->max_bytes = NGX_HTTP_FLAGS_SYNC_BYTES_MIN
                   + NGX_HTTP_FLAGS_SYNC_ELT_BYTES * s->max_elements;

    for (i = 0; i < fmcf->projects.nelts; i++) {
        s->projects[i].sent = ngx_pcalloc(cycle->pool,
                                  (project[i].nflags + 1)
                                  * sizeof(ngx_http_flags_sync_sent_t));
        if (s->projects[i].sent == NULL) {
            return NGX_ERROR;
        }
    }

    s->tick.handler = ngx_http_flags_sync_tick;
    s->tick.data = s;
    s->tick.log = cycle->log;
    s->tick.cancelable = 1;

    s->timeout.handler = ngx_http_flags_sync_timeout;
    s->timeout.data = s;
    s->timeout.log = cycle->log;
    s->timeout.cancelable = 1;

    ngx_http_flags_sync_worker = s;

    /* the first tick soon, spread a little between workers */
    ngx_add_timer(&s->tick, 10 + (ngx_pid % 10) * 10);

    return NGX_OK;
}


void
ngx_http_flags_sync_exit_process(ngx_http_flags_main_conf_t *fmcf)
{
    ngx_atomic_uint_t        old;
    ngx_http_flags_sync_t   *s;

    s = ngx_http_flags_sync_worker;

    if (s == NULL || s->fmcf != fmcf) {
        return;
    }

    ngx_http_flags_sync_close(s);

    old = fmcf->sh->sync_lock;

    if ((ngx_pid_t) (old & 0xffffffff) == ngx_pid) {
        (void) ngx_atomic_cmp_set(&fmcf->sh->sync_lock, old, 0);
        fmcf->sh->sync_connected = 0;
    }

    ngx_http_flags_sync_worker = NULL;
}


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


static ngx_uint_t
ngx_http_flags_sync_owns(ngx_http_flags_sync_t *s)
{
    return (ngx_pid_t) (s->fmcf->sh->sync_lock & 0xffffffff) == ngx_pid;
}


static void
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


static void
ngx_http_flags_sync_timeout(ngx_event_t *ev)
{
    ngx_http_flags_sync_t  *s = ev->data;

    ngx_http_flags_sync_fail(s, s->state == NGX_HTTP_FLAGS_SYNC_CONNECTING
                                ? "connect timed out" : "timed out", NULL);
}


/* ------------------------------------------------------ the connection */

/*
 * hiredis 0.14's reader bounds neither a bulk string's length nor an
 * array's element count: its reply object functions are wrapped to count
 * the elements and string bytes of the reply being read, and refuse
 * (NULL: the reader fails) past the bound.  The bytes buffered but not yet
 * parsed (a bulk string being received) are bounded in
 * ngx_http_flags_sync_read().
 */

static redisReplyObjectFunctions  ngx_http_flags_sync_fn;
static redisReplyObjectFunctions  ngx_http_flags_sync_fn_hiredis;


static ngx_uint_t
ngx_http_flags_sync_count(const redisReadTask *task, size_t elements,
    size_t bytes)
{
    ngx_http_flags_sync_t  *s = task->privdata;

    if (task->parent == NULL) {
        /* a reply begins */
        s->reply_elements = 1;
        s->reply_bytes = 0;
    }

    s->reply_elements += elements;
    s->reply_bytes += bytes;

    if (s->reply_elements > s->max_elements
        || s->reply_bytes > s->max_bytes)
    {
        s->too_large = 1;
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


static redisReader *
ngx_http_flags_sync_reader(ngx_http_flags_sync_t *s)
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
    r->privdata = s;
    s->too_large = 0;

    return r;
}


static void
ngx_http_flags_sync_connect(ngx_http_flags_sync_t *s)
{
    ngx_int_t          rc;
    ngx_connection_t  *c;

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

    s->reader = ngx_http_flags_sync_reader(s);
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


static void
ngx_http_flags_sync_close(ngx_http_flags_sync_t *s)
{
    ngx_uint_t  i;

    if (s->timeout.timer_set) {
        ngx_del_timer(&s->timeout);
    }

    if (s->pc.connection) {
        ngx_close_connection(s->pc.connection);
        s->pc.connection = NULL;
    }

    if (s->reader) {
        redisReaderFree(s->reader);
        s->reader = NULL;
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
 * connection retried with exponential backoff.
 */

static void
ngx_http_flags_sync_fail(ngx_http_flags_sync_t *s, const char *why,
    ngx_str_t *detail)
{
    ngx_http_flags_sync_close(s);

    (void) ngx_atomic_fetch_add(&s->fmcf->sh->sync_failures, 1);

    if (!s->lost) {
        s->lost = 1;

        if (detail) {
            ngx_log_error(NGX_LOG_ERR, s->log, 0,
                          "flags_sync: redis at %V: %s: %V; hosts decide "
                          "alone until it is back",
                          &s->conf->host, why, detail);
        } else {
            ngx_log_error(NGX_LOG_ERR, s->log, 0,
                          "flags_sync: redis at %V: %s; hosts decide alone "
                          "until it is back", &s->conf->host, why);
        }

    } else {
        ngx_log_error(NGX_LOG_INFO, s->log, 0,
                      "flags_sync: redis at %V: %s", &s->conf->host, why);
    }

    s->backoff = s->backoff ? ngx_min(s->backoff * 2,
                                      NGX_HTTP_FLAGS_SYNC_BACKOFF_MAX)
                            : s->conf->interval;
    s->next_try = ngx_current_msec + s->backoff;

    /* what is counted while away is not sent as if it were new: the
     * first round after it takes the totals as the baseline */
    s->fmcf->sh->sync_rebase = 1;
}


static ngx_int_t
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

    argv[0] = "SCRIPT";
    argvlen[0] = 6;
    argv[1] = "LOAD";
    argvlen[1] = 4;
    argv[2] = fl_sync_script(&argvlen[2]);

    return ngx_http_flags_sync_command(s, 3, argv, argvlen,
                                       NGX_HTTP_FLAGS_SYNC_R_LOAD);
}


static ngx_int_t
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

        s->state = NGX_HTTP_FLAGS_SYNC_BUSY;
        s->round_start = ngx_current_msec;
    }

    if (ngx_http_flags_sync_flush(s) != NGX_OK) {
        ngx_http_flags_sync_fail(s, "could not send", NULL);
    }
}


static void
ngx_http_flags_sync_read(ngx_event_t *rev)
{
    ssize_t                 n;
    ngx_int_t               rc;
    ngx_connection_t       *c;
    ngx_str_t               detail;
    redisReply             *reply;
    ngx_http_flags_sync_t  *s;
    u_char                  msg[128];
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

        for ( ;; ) {
            reply = NULL;

            if (redisReaderGetReply(s->reader, (void **) &reply)
                != REDIS_OK)
            {
                if (s->too_large) {
                    detail.data = msg;
                    detail.len = ngx_sprintf(msg, "more than %uz elements "
                                             "or %uz bytes of strings",
                                             s->max_elements, s->max_bytes)
                                 - msg;
                    ngx_http_flags_sync_fail(s, "reply too large", &detail);
                    return;
                }

                ngx_http_flags_sync_fail(s, "protocol error", NULL);
                return;
            }

            if (reply == NULL) {
                break;
            }

            rc = ngx_http_flags_sync_reply(s, reply);
            freeReplyObject(reply);

            if (rc != NGX_OK) {
                /* the failure was handled */
                return;
            }
        }

        /* what is left is a reply not complete yet: a bulk string whose
         * length no legitimate reply reaches is not awaited */
        if (s->reader->len - s->reader->pos > s->max_bytes) {
            detail.data = msg;
            detail.len = ngx_sprintf(msg, "more than %uz bytes not yet "
                                     "parsed", s->max_bytes)
                         - msg;
            ngx_http_flags_sync_fail(s, "reply too large", &detail);
            return;
        }
    }

    if (ngx_handle_read_event(rev, 0) != NGX_OK) {
        ngx_http_flags_sync_fail(s, "could not read", NULL);
    }
}


/* ------------------------------------------------------------ a round */

static ngx_int_t
ngx_http_flags_sync_round(ngx_http_flags_sync_t *s)
{
    ngx_uint_t  i, rebase;

    s->state = NGX_HTTP_FLAGS_SYNC_BUSY;
    s->round_start = ngx_current_msec;
    s->changed = 0;

    /* the first round after Redis was away (for this owner or the last) */
    rebase = s->fmcf->sh->sync_rebase;
    s->fmcf->sh->sync_rebase = 0;

    for (i = 0; i < s->fmcf->projects.nelts; i++) {
        if (ngx_http_flags_sync_project(s, i, rebase) != NGX_OK) {
            return NGX_ERROR;
        }
    }

    ngx_add_timer(&s->timeout, ngx_max(s->conf->interval * 5, 2000));

    return ngx_http_flags_sync_flush(s);
}


/* A flag's rollback and override as one number, to see a change. */

static uint64_t
ngx_http_flags_sync_local(ngx_http_flags_flag_t *flag,
    fl_state_snapshot_t *snap)
{
    fl_state_snapshot(flag->totals, flag->ctl, 0, 0, 0, snap);

    return (snap->rolled_back ? 1 : 0)
           | ((uint64_t) snap->override_kind << 1)
           | ((uint64_t) (snap->override_kind == FL_OVERRIDE_PERCENT
                          ? snap->override_milli : 0) << 8);
}


/*
 * One project's EVALSHA: an entry for each flag with new deltas or a
 * control that changed here (a rollback tripped or cleared, an override
 * set or removed) since the fleet last said.
 */

static ngx_int_t
ngx_http_flags_sync_project(ngx_http_flags_sync_t *s, ngx_uint_t pi,
    ngx_uint_t rebase)
{
    int                             argc, len;
    char                           *cmd;
    u_char                         *p, *buf;
    size_t                         *argvlen, keylen;
    int64_t                         now;
    uint32_t                        keys[FL_SOURCE_SLOTS];
    uint32_t                        ages[FL_SOURCE_SLOTS];
    uint64_t                        errors, enabled, de, dn, local, known;
    ngx_uint_t                      i, k, n, ns, nkeys, entries;
    const char                    **argv;
    fl_state_snapshot_t             snap;
    ngx_http_flags_flag_t          *flag;
    ngx_http_flags_node_t          *node;
    ngx_http_flags_project_t       *project;
    ngx_http_flags_sync_project_t  *sp;
    ngx_http_flags_sync_conf_t     *sc;
    ngx_http_flags_sync_sent_t     *sent;

    project = (ngx_http_flags_project_t *) s->fmcf->projects.elts + pi;
    sp = &s->projects[pi];
    sc = s->conf;

    if (s->cmd[pi]) {
        redisFreeCommand(s->cmd[pi]);
        s->cmd[pi] = NULL;
    }

    if (project->pversion == NULL) {
        return NGX_OK;
    }

    n = project->nflags;
    now = ngx_http_flags_now_sec();

    /* per flag: two keys (window, sources) and its arguments */
    argv = ngx_alloc((8 + 2 * n + NGX_HTTP_FLAGS_SYNC_ARGS * n)
                     * (sizeof(char *) + sizeof(size_t)), s->log);
    /* per flag: its key, "at errors enabled", the override value, two
     * deltas, the policy, the definition hash */
    keylen = sc->prefix.len + project->name.len + 16 + 3 + 16 + 1
             + FL_MAX_FLAG_NAME_LEN;
    buf = ngx_alloc(64 + sc->prefix.len + project->name.len
                    + n * (2 * keylen + 4 * NGX_INT64_LEN + sc->name.len + 2
                           + 16 + NGX_INT64_LEN * 2
                           + 16 + 4 * NGX_INT32_LEN + 8
                           + FL_SOURCE_SLOTS * (8 + 1 + NGX_INT32_LEN + 1)),
                    s->log);

    if (argv == NULL || buf == NULL) {
        ngx_free(argv);
        ngx_free(buf);
        return NGX_ERROR;
    }

    argvlen = (size_t *) (argv + 8 + 2 * n + NGX_HTTP_FLAGS_SYNC_ARGS * n);
    p = buf;

#define ngx_http_flags_sync_arg(a, start)                                    \
    argv[a] = (const char *) (start); argvlen[a] = p - (start)

    /* EVALSHA sha numkeys ctl-key [window keys] epoch ver n [entries] */
    argv[0] = "EVALSHA";
    argvlen[0] = 7;
    argv[1] = (const char *) s->sha;
    argvlen[1] = 40;

    nkeys = 0;
    argc = 3;                       /* argv[2] is numkeys, written last */

    {
        u_char  *start = p;

        p = ngx_sprintf(p, "%V{%V}:ctl", &sc->prefix, &project->name);
        ngx_http_flags_sync_arg(argc, start);
        argc++;
        nkeys++;
    }

    /* the window keys first, then the arguments: two passes */
    sent = sp->sent;

    for (i = 0; i < n; i++) {
        flag = &project->flags[i];
        sent[i].local = (uint64_t) -1;      /* no entry */

        if (flag->node == NULL) {
            continue;
        }

        errors = flag->totals->errors;
        enabled = flag->totals->enabled_evaluations;

        node = flag->node;

        if (rebase || !node->sync_based) {
            node->sync_base_errors = errors;
            node->sync_base_enabled = enabled;
            node->sync_based = 1;
        }

        de = errors - node->sync_base_errors;
        dn = enabled - node->sync_base_enabled;

        local = ngx_http_flags_sync_local(flag, &snap);
        known = flag->version->sync_known;

        if (project->pversion->sync_epoch == 0) {
            /* the fleet's state is not known yet: read it before
             * publishing anything but what is active here */
            known = 0;
        }

        sent[i].errors = errors;
        sent[i].enabled = enabled;

        if (local == known
            && (flag->policy.mode != FL_ROLLBACK_ON || snap.rolled_back
                || (de == 0 && dn == 0)))
        {
            /* nothing to say: the deltas are dropped with a rollback
             * in place or no policy to count for */
            node->sync_base_errors = errors;
            node->sync_base_enabled = enabled;
            sent[i].local = local;
            sent[i].local |= (uint64_t) 1 << 63;     /* seen, no entry */
            continue;
        }

        sent[i].local = local;

        {
            u_char  *start = p;

            p = ngx_sprintf(p, "%V{%V}:w:%016uxL:", &sc->prefix,
                            &project->name, flag->def_hash);
            p = ngx_cpymem(p, flag->name.data, flag->name.len);
            ngx_http_flags_sync_arg(argc, start);
            argc++;
            nkeys++;
        }
    }

    /* each entry's sources key, in the same order (docs/sync.md) */
    entries = nkeys - 1;

    for (i = 0; i < n; i++) {
        u_char  *start = p;

        flag = &project->flags[i];

        if (flag->node == NULL || (sent[i].local >> 63)) {
            continue;
        }

        p = ngx_sprintf(p, "%V{%V}:s:%016uxL:", &sc->prefix,
                        &project->name, flag->def_hash);
        p = ngx_cpymem(p, flag->name.data, flag->name.len);
        ngx_http_flags_sync_arg(argc, start);
        argc++;
        nkeys++;
    }

    {
        u_char  *start = p;

        p = ngx_sprintf(p, "%uL", project->pversion->sync_epoch);
        ngx_http_flags_sync_arg(argc, start);
        argc++;

        start = p;
        p = ngx_sprintf(p, "%uL", project->pversion->sync_ver);
        ngx_http_flags_sync_arg(argc, start);
        argc++;

        start = p;
        p = ngx_sprintf(p, "%ui", entries);
        ngx_http_flags_sync_arg(argc, start);
        argc++;

        /* who calls: the fleet's records name the host */
        argv[argc] = (const char *) sc->name.data;
        argvlen[argc++] = sc->name.len;
    }

    for (i = 0; i < n; i++) {
        u_char  *start;

        flag = &project->flags[i];

        if (flag->node == NULL || (sent[i].local >> 63)) {
            continue;
        }

        local = sent[i].local;
        known = project->pversion->sync_epoch
                ? flag->version->sync_known : 0;

        (void) ngx_http_flags_sync_local(flag, &snap);

        argv[argc] = (const char *) flag->name.data;
        argvlen[argc++] = flag->name.len;

        start = p;
        p = ngx_sprintf(p, "%016uxL", flag->def_hash);
        ngx_http_flags_sync_arg(argc, start);
        argc++;

        /* the rollback: published when it changed here */
        if ((local & 1) != (known & 1)) {
            argv[argc] = (local & 1) ? "set" : "clr";
            argvlen[argc++] = 3;

        } else {
            argv[argc] = "-";
            argvlen[argc++] = 1;
        }

        start = p;
        p = ngx_sprintf(p, "%uL %uL %uL %V %uL", snap.rollback_at_ms,
                        snap.rollback_errors, snap.rollback_enabled,
                        &sc->name, snap.rollback_sources);
        ngx_http_flags_sync_arg(argc, start);
        argc++;

        /* the override */
        if ((local >> 1) != (known >> 1)) {
            argv[argc] = (snap.override_kind == FL_OVERRIDE_NONE)
                         ? "del" : "set";
            argvlen[argc++] = 3;

        } else {
            argv[argc] = "-";
            argvlen[argc++] = 1;
        }

        start = p;
        if (snap.override_kind == FL_OVERRIDE_PERCENT) {
            p = ngx_sprintf(p, "%uD", snap.override_milli);
        } else {
            p = ngx_cpymem(p, "off", 3);
        }
        ngx_http_flags_sync_arg(argc, start);
        argc++;

        start = p;
        p = ngx_sprintf(p, "%uL",
                        sent[i].errors - flag->node->sync_base_errors);
        ngx_http_flags_sync_arg(argc, start);
        argc++;

        start = p;
        p = ngx_sprintf(p, "%uL",
                        sent[i].enabled - flag->node->sync_base_enabled);
        ngx_http_flags_sync_arg(argc, start);
        argc++;

        start = p;
        if (flag->policy.mode == FL_ROLLBACK_ON) {
            p = ngx_sprintf(p, "%uD %uD %uD %uD", flag->policy.min_errors,
                            flag->policy.rate_milli, flag->policy.window,
                            flag->policy.min_sources);
        }
        ngx_http_flags_sync_arg(argc, start);
        argc++;

        /* the window's sources, "key:age ...", when errors go out: the
         * fleet counts distinct sources over every host's */
        start = p;
        if (sent[i].errors != flag->node->sync_base_errors) {
            ns = ngx_http_flags_source_ages(s->fmcf, flag, now, keys, ages);

            for (k = 0; k < ns; k++) {
                p = ngx_sprintf(p, "%s%08xD:%uD", k ? " " : "", keys[k],
                                ages[k]);
            }
        }
        ngx_http_flags_sync_arg(argc, start);
        argc++;
    }

#undef ngx_http_flags_sync_arg

    {
        u_char  nk[NGX_INT_T_LEN];

        argv[2] = (const char *) nk;
        argvlen[2] = ngx_sprintf(nk, "%ui", nkeys) - nk;

        len = redisFormatCommandArgv(&cmd, argc, argv, argvlen);
    }

    /* a NOSCRIPT retry sends the same as EVAL with the script's text */
    if (len >= 0) {
        argv[0] = "EVAL";
        argvlen[0] = 4;
        argv[1] = fl_sync_script(&argvlen[1]);

        {
            u_char  nk[NGX_INT_T_LEN];

            argv[2] = (const char *) nk;
            argvlen[2] = ngx_sprintf(nk, "%ui", nkeys) - nk;

            s->cmd_len[pi] = redisFormatCommandArgv(&s->cmd[pi], argc, argv,
                                                    argvlen);
        }

        if ((int) s->cmd_len[pi] < 0) {
            s->cmd[pi] = NULL;
        }
    }

    ngx_free(argv);
    ngx_free(buf);

    if (len < 0) {
        return NGX_ERROR;
    }

    ngx_log_debug4(NGX_LOG_DEBUG_HTTP, s->log, 0,
                   "flags sync: round of project \"%V\": %ui of %ui flags "
                   "sent, %d bytes", &project->name, entries, n, len);

    if (!s->has_sha) {
        /* no SHA yet (cannot happen after SCRIPT LOAD): EVAL at once */
        redisFreeCommand(cmd);

        if (s->cmd[pi] == NULL) {
            return NGX_ERROR;
        }

        return ngx_http_flags_sync_send(s, s->cmd[pi], s->cmd_len[pi],
                                        NGX_HTTP_FLAGS_SYNC_R_EVAL
                                        + s->fmcf->projects.nelts + pi);
    }

    if (ngx_http_flags_sync_send(s, cmd, len,
                                 NGX_HTTP_FLAGS_SYNC_R_EVAL + pi)
        != NGX_OK)
    {
        redisFreeCommand(cmd);
        return NGX_ERROR;
    }

    redisFreeCommand(cmd);

    return NGX_OK;
}


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
        detail.data = (u_char *) reply->str;
        detail.len = reply->len;

        /*
         * NOSCRIPT to an EVALSHA: the script cache was emptied (a
         * restart, a failover), the same call goes again as EVAL, once.
         * NOSCRIPT to that EVAL is no Redis: the round fails (backoff).
         */
        if (kind >= NGX_HTTP_FLAGS_SYNC_R_EVAL
            && kind < NGX_HTTP_FLAGS_SYNC_R_EVAL + nprojects
            && reply->len >= 8
            && ngx_strncmp(reply->str, "NOSCRIPT", 8) == 0)
        {
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
                               : "the sync script failed", &detail);
        return NGX_ERROR;
    }

    switch (kind) {

    case NGX_HTTP_FLAGS_SYNC_R_AUTH:
    case NGX_HTTP_FLAGS_SYNC_R_SELECT:
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

        /* the first round goes at once */
        if (ngx_http_flags_sync_round(s) != NGX_OK) {
            ngx_http_flags_sync_fail(s, "could not send", NULL);
            return NGX_ERROR;
        }

        return NGX_OK;

    default:
        if (ngx_http_flags_sync_apply(s, pi, reply) != NGX_OK) {
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


static void
ngx_http_flags_sync_round_done(ngx_http_flags_sync_t *s)
{
    uint64_t                 now;
    ngx_http_flags_shctx_t  *sh;

    sh = s->fmcf->sh;
    now = ngx_http_flags_now_ms();

    if (s->timeout.timer_set) {
        ngx_del_timer(&s->timeout);
    }

    s->state = NGX_HTTP_FLAGS_SYNC_IDLE;
    s->backoff = 0;

    sh->sync_connected = 1;
    sh->sync_last_ok_ms = now;
    sh->sync_round_ms = ngx_current_msec - s->round_start;
    (void) ngx_atomic_fetch_add(&sh->sync_rounds, 1);

    if (s->lost) {
        s->lost = 0;
        ngx_log_error(NGX_LOG_NOTICE, s->log, 0,
                      "flags_sync: redis at %V is back", &s->conf->host);
    }

    if (s->changed) {
        s->changed = 0;
        (void) ngx_http_flags_state_changed(s->fmcf, s->log, NULL, NULL);
    }
}


static ngx_uint_t
ngx_http_flags_sync_u64(redisReply *r, uint64_t *out)
{
    ngx_int_t  n;

    if (r->type == REDIS_REPLY_INTEGER) {
        *out = (uint64_t) r->integer;
        return 1;
    }

    if (r->type != REDIS_REPLY_STRING || r->len == 0) {
        return 0;
    }

    n = ngx_atoof((u_char *) r->str, r->len);
    if (n == NGX_ERROR) {
        return 0;
    }

    *out = (uint64_t) n;

    return 1;
}


/*
 * A rollback took effect on this host, decided by the fleet: the one
 * place that says so (and where counting it belongs).  "host" is who
 * decided (whose deltas crossed the threshold) or published its local
 * rollback; empty for a record of an older version, which has no host.
 */

static void
ngx_http_flags_sync_rolled_back(ngx_http_flags_sync_t *s,
    ngx_http_flags_project_t *project, ngx_http_flags_flag_t *flag,
    uint64_t errors, uint64_t enabled, ngx_str_t *host)
{
    /* flags_rollbacks_total{by="fleet"}: every host that applies the
     * fleet's rollback counts it, so the alert pages for each */
    fl_count_rollback(flag->totals, FL_DECIDED_FLEET);

    if (host->len) {
        ngx_log_error(s->fmcf->log_level, s->log, 0,
                      "flags: flag \"%V\" of project \"%V\" rolled back by "
                      "the fleet (decided on host \"%V\": %uL errors, %uL "
                      "enabled evaluations in %uD s)", &flag->name,
                      &project->name, host, errors, enabled,
                      flag->policy.window);
        return;
    }

    ngx_log_error(s->fmcf->log_level, s->log, 0,
                  "flags: flag \"%V\" of project \"%V\" rolled back by the "
                  "fleet (no host recorded: %uL errors, %uL enabled "
                  "evaluations in %uD s)",
                  &flag->name, &project->name, errors, enabled,
                  flag->policy.window);
}


/* what the control hash says of one flag of this definition */
typedef struct {
    ngx_uint_t                  rolled_back;
    uint64_t                    at_ms;
    uint64_t                    errors;
    uint64_t                    enabled;
    uint64_t                    sources;
    uint64_t                    override;    /* kind << 1 | milli << 8 */
    ngx_str_t                   rb_host;     /* who rolled it back */
    ngx_str_t                   cb_host;     /* who last cleared it */
    ngx_str_t                   ob_host;     /* who last set the override */
} ngx_http_flags_sync_fleet_t;


/* A host name read from Redis, shown only when it is one flags_sync
 * accepts (no log line carries what a hostile server wrote). */

static void
ngx_http_flags_sync_who(ngx_str_t *dst, u_char *p, size_t len)
{
    ngx_str_t  name;

    name.data = p;
    name.len = len;

    if (ngx_http_flags_sync_valid_name(&name)) {
        *dst = name;
    }
}


/*
 * The fleet's answer for a project: the sent deltas are now counted; when
 * its epoch or version moved, the control hash: "rb:<def>:<flag>" ->
 * "at_ms errors enabled [host]", "ov:<def>:<flag>" -> "off" or
 * milli-percent, "cb:<def>:<flag>" and "ob:<def>:<flag>" -> the host that
 * last cleared the rollback, last changed the override.  Applied to each
 * flag whose definition hash is the same and whose control did not change
 * here since the round began (that change is published next round).  A
 * new epoch (Redis restarted empty, or this host's first contact after
 * another host's) applies nothing: the host forgets what the fleet said,
 * so the next round publishes what is active here and the fleet
 * converges.
 */

static ngx_int_t
ngx_http_flags_sync_apply(ngx_http_flags_sync_t *s, ngx_uint_t pi,
    redisReply *reply)
{
    long                            idx;
    u_char                         *f, *fl, *colon, *p, *last;
    size_t                          j, flen;
    uint32_t                        milli;
    uint64_t                        epoch, ver, def, fleet, known;
    ngx_int_t                       n;
    ngx_uint_t                      i, changed, k;
    redisReply                     *all, *v;
    fl_state_snapshot_t             snap;
    ngx_http_flags_flag_t          *flag;
    ngx_http_flags_project_t       *project;
    ngx_http_flags_sync_project_t  *sp;
    ngx_http_flags_pversion_t      *pv;
    ngx_http_flags_node_t          *node;
    ngx_http_flags_sync_fleet_t    *fleets, *ft;

    project = (ngx_http_flags_project_t *) s->fmcf->projects.elts + pi;
    sp = &s->projects[pi];
    pv = project->pversion;

    if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 2
        || !ngx_http_flags_sync_u64(reply->element[0], &epoch)
        || !ngx_http_flags_sync_u64(reply->element[1], &ver)
        || pv == NULL)
    {
        return NGX_ERROR;
    }

    /* the deltas sent are counted by the fleet: the baseline moves (not
     * when another worker took the lock meanwhile: it owns it now) */
    for (i = 0; ngx_http_flags_sync_owns(s) && i < project->nflags; i++) {
        node = project->flags[i].node;

        if (node == NULL
            || (sp->sent[i].local >> 63)
            || sp->sent[i].local == (uint64_t) -1)
        {
            continue;
        }

        node->sync_base_errors = sp->sent[i].errors;
        node->sync_base_enabled = sp->sent[i].enabled;
    }

    if (reply->elements < 3) {
        return NGX_OK;
    }

    all = reply->element[2];

    if (all->type != REDIS_REPLY_ARRAY || (all->elements & 1)) {
        return NGX_ERROR;
    }

    if (pv->sync_epoch != 0 && pv->sync_epoch != epoch) {
        ngx_log_error(NGX_LOG_NOTICE, s->log, 0,
                      "flags_sync: project \"%V\": redis holds a new state "
                      "(restarted empty?): this host publishes its active "
                      "rollbacks and overrides at the next round",
                      &project->name);

        for (i = 0; i < project->nflags; i++) {
            if (project->flags[i].node) {
                project->flags[i].version->sync_known = 0;
            }
        }

        pv->sync_epoch = epoch;
        pv->sync_ver = 0;       /* the next answer carries the state */

        return NGX_OK;
    }

    fleets = ngx_alloc((project->nflags + 1)
                       * sizeof(ngx_http_flags_sync_fleet_t), s->log);
    if (fleets == NULL) {
        return NGX_ERROR;
    }

    ngx_memzero(fleets, (project->nflags + 1)
                        * sizeof(ngx_http_flags_sync_fleet_t));

    for (j = 0; j < all->elements; j += 2) {
        f = (u_char *) all->element[j]->str;
        flen = all->element[j]->len;
        v = all->element[j + 1];

        if (all->element[j]->type != REDIS_REPLY_STRING
            || v->type != REDIS_REPLY_STRING
            || flen < 3 + 16 + 1 + 1 || f[2] != ':' || f[19] != ':'
            || (ngx_strncmp(f, "rb", 2) != 0 && ngx_strncmp(f, "ov", 2) != 0
                && ngx_strncmp(f, "cb", 2) != 0
                && ngx_strncmp(f, "ob", 2) != 0))
        {
            continue;
        }

        /* 16 hex digits (ngx_hextoi() is signed) */
        def = 0;
        for (k = 3; k < 19; k++) {
            u_char  c = f[k] | 0x20;

            def = (def << 4) | (uint64_t) ((c >= 'a') ? c - 'a' + 10
                                                       : c - '0');
        }

        fl = f + 20;
        idx = fl_project_find_flag(project->core, (const char *) fl,
                                   flen - 20);

        if (idx < 0 || project->flags[idx].def_hash != def) {
            /* another definition's state: not this host's */
            continue;
        }

        ft = &fleets[idx];
        p = (u_char *) v->str;
        last = p + v->len;

        switch (f[0]) {

        case 'r':
            /* "at_ms errors enabled", then the host (none before) */
            for (k = 0; k < 3; k++) {
                colon = ngx_strlchr(p, last, ' ');
                if (colon == NULL) {
                    colon = last;
                }

                n = ngx_atoof(p, colon - p);
                n = (n == NGX_ERROR) ? 0 : n;

                if (k == 0) {
                    ft->at_ms = (uint64_t) n;
                } else if (k == 1) {
                    ft->errors = (uint64_t) n;
                } else {
                    ft->enabled = (uint64_t) n;
                }

                p = (colon < last) ? colon + 1 : last;
            }

            ft->rolled_back = 1;

            /* the host, then the fleet's sources (none before) */
            colon = ngx_strlchr(p, last, ' ');
            if (colon == NULL) {
                colon = last;
            }

            ngx_http_flags_sync_who(&ft->rb_host, p, colon - p);

            if (colon < last) {
                n = ngx_atoof(colon + 1, last - colon - 1);
                ft->sources = (n == NGX_ERROR) ? 0 : (uint64_t) n;
            }

            break;

        case 'c':
            ngx_http_flags_sync_who(&ft->cb_host, p, last - p);
            break;

        case 'o':
            if (f[1] == 'b') {
                ngx_http_flags_sync_who(&ft->ob_host, p, last - p);
                break;
            }

            if (v->len == 3 && ngx_strncmp(p, "off", 3) == 0) {
                ft->override = (uint64_t) FL_OVERRIDE_OFF << 1;
                break;
            }

            n = ngx_atoi(p, v->len);
            if (n == NGX_ERROR || n > FL_MILLI_MAX) {
                break;
            }

            milli = (uint32_t) n;
            ft->override = ((uint64_t) FL_OVERRIDE_PERCENT << 1)
                           | ((uint64_t) milli << 8);
            break;
        }
    }

    changed = 0;

    for (i = 0; i < project->nflags; i++) {
        flag = &project->flags[i];
        ft = &fleets[i];

        if (flag->node == NULL) {
            continue;
        }

        fleet = (ft->rolled_back ? 1 : 0) | ft->override;

        /* a change here since the round began wins: it goes next round */
        if (sp->sent[i].local != (uint64_t) -1
            && (sp->sent[i].local & ~((uint64_t) 1 << 63))
               != ngx_http_flags_sync_local(flag, &snap))
        {
            continue;
        }

        known = ngx_http_flags_sync_local(flag, &snap);

        if (ft->rolled_back && !snap.rolled_back) {
            if (fl_control_try_rollback(flag->ctl, ft->at_ms, ft->errors,
                                        ft->enabled, ft->sources,
                                        FL_DECIDED_FLEET))
            {
                changed = 1;
                ngx_http_flags_sync_rolled_back(s, project, flag,
                                                ft->errors, ft->enabled,
                                                &ft->rb_host);
            }

        } else if (!ft->rolled_back && snap.rolled_back) {
            if (ngx_http_flags_clear_rollback(s->fmcf, flag)) {
                changed = 1;

                if (ft->cb_host.len) {
                    ngx_log_error(s->fmcf->log_level, s->log, 0,
                                  "flags: rollback of flag \"%V\" of project "
                                  "\"%V\" cleared by the fleet (host "
                                  "\"%V\")", &flag->name, &project->name,
                                  &ft->cb_host);
                } else {
                    ngx_log_error(s->fmcf->log_level, s->log, 0,
                                  "flags: rollback of flag \"%V\" of project "
                                  "\"%V\" cleared by the fleet (no host "
                                  "recorded)", &flag->name, &project->name);
                }
            }
        }

        if ((fleet >> 1) != (known >> 1)) {
            ngx_http_flags_set_override(flag,
                                        (fl_override_kind_t)
                                            ((fleet >> 1) & 0x7f),
                                        (uint32_t) (fleet >> 8));
            changed = 1;

            if (ft->ob_host.len) {
                ngx_log_error(s->fmcf->log_level, s->log, 0,
                              "flags: override of flag \"%V\" of project "
                              "\"%V\" %s by the fleet (host \"%V\")",
                              &flag->name, &project->name,
                              (fleet >> 1) ? "set" : "removed",
                              &ft->ob_host);
            } else {
                ngx_log_error(s->fmcf->log_level, s->log, 0,
                              "flags: override of flag \"%V\" of project "
                              "\"%V\" %s by the fleet (no host recorded)",
                              &flag->name, &project->name,
                              (fleet >> 1) ? "set" : "removed");
            }
        }

        flag->version->sync_known = fleet;
    }

    ngx_free(fleets);

    pv->sync_epoch = epoch;
    pv->sync_ver = ver;

    if (changed) {
        ngx_http_flags_answer_changed(project);
        s->changed = 1;
    }

    return NGX_OK;
}


/* ------------------------------------------ flags_status, flags_metrics */

ngx_uint_t
ngx_http_flags_sync_state(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_sync_state_t *st)
{
    uint64_t                 now;
    ngx_atomic_uint_t        lock;
    ngx_http_flags_shctx_t  *sh;

    ngx_memzero(st, sizeof(ngx_http_flags_sync_state_t));

    if (fmcf->sync == NULL || fmcf->sh == NULL) {
        return 0;
    }

    sh = fmcf->sh;
    now = ngx_http_flags_now_ms();
    lock = sh->sync_lock;

    st->connected = sh->sync_connected ? 1 : 0;
    st->last_ok_ms = sh->sync_last_ok_ms;
    st->lag_ms = (st->last_ok_ms && now > st->last_ok_ms)
                 ? now - st->last_ok_ms : 0;
    st->round_ms = sh->sync_round_ms;
    st->failures = sh->sync_failures;
    st->rounds = sh->sync_rounds;

    if ((time_t) (lock >> 32) >= ngx_time()) {
        st->owner = (ngx_pid_t) (lock & 0xffffffff);
    }

    return 1;
}
