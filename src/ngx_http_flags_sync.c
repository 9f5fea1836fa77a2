/*
 * ngx_http_flags_sync.c - flags_sync: a fleet of hosts shares error
 * counts, rollbacks and overrides through Redis (docs/sync.md).
 *
 * This file owns the directive (its URL, parameters and password file,
 * checked by nginx -t), a worker's start and exit (the syncing state, the
 * timers, the lock given back), and what flags_status and flags_metrics
 * show of the sync.  One worker per host (a lock in the zone) owns a
 * connection to Redis (ngx_http_flags_sync_conn.c) and runs a round every
 * interval (ngx_http_flags_sync_round.c): one Lua script per project adds
 * the host's deltas, decides the fleet's rollbacks atomically and answers
 * the project's rollbacks and overrides, which the worker applies to the
 * zone.  Nothing here runs on the request path: when Redis is away each
 * host decides alone, as without flags_sync.
 */

#include "ngx_http_flags_sync.h"


#define NGX_HTTP_FLAGS_SYNC_PASSWORD_MAX 512     /* password_file, bytes */
#define NGX_HTTP_FLAGS_SYNC_KEY_MIN      16      /* key_file, bytes */

/*
 * A reply's bound (docs/sync.md): the largest legitimate one is a
 * project's control hash, with per flag up to four fields a definition
 * (rb, ov, cb, ob) and their values.  Allowed: 8 definitions of each flag
 * of this host's largest project, 2048 more fields (flags of the project
 * that other hosts have and this one has not), at most 256 bytes an
 * element (ngx_http_flags_sync_defs_bound(), which also makes room for a
 * runtime project's version).  Past it a reply fails the round and the
 * connection closes.
 */


static ngx_http_flags_sync_t  *ngx_http_flags_sync_worker;


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
 * password_file=PATH and key_file=PATH: read once, by the master, while
 * the configuration is read (so the file may be readable by root only);
 * its trailing newlines are not part of the secret.  what names the
 * parameter in messages; min is the fewest bytes allowed.
 */

static char *
ngx_http_flags_sync_secret_file(ngx_conf_t *cf, const char *what,
    size_t min, ngx_str_t *path, ngx_str_t *out)
{
    u_char           *buf;
    ssize_t           n;
    ngx_fd_t          fd;
    ngx_err_t         err;
    ngx_file_info_t   fi;

    if (path->len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "flags_sync: %s= needs a path", what);
        return NGX_CONF_ERROR;
    }

    if (ngx_conf_full_name(cf->cycle, path, 1) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    fd = ngx_open_file(path->data, NGX_FILE_RDONLY, NGX_FILE_OPEN, 0);
    if (fd == NGX_INVALID_FILE) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno,
                           "flags_sync: cannot open %s \"%V\"",
                           what, path);
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
                           "flags_sync: cannot read %s \"%V\"",
                           what, path);
        return NGX_CONF_ERROR;
    }

    if (!ngx_is_file(&fi)) {
        (void) ngx_close_file(fd);
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "flags_sync: %s \"%V\" is not "
                           "a regular file", what, path);
        return NGX_CONF_ERROR;
    }

    /* one byte more than the bound tells a file too large */
    n = ngx_read_fd(fd, buf, NGX_HTTP_FLAGS_SYNC_PASSWORD_MAX + 1);
    err = ngx_errno;
    (void) ngx_close_file(fd);

    if (n == -1) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, err,
                           "flags_sync: cannot read %s \"%V\"",
                           what, path);
        return NGX_CONF_ERROR;
    }

    if (n > NGX_HTTP_FLAGS_SYNC_PASSWORD_MAX) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "flags_sync: %s \"%V\" is larger "
                           "than %d bytes", what, path,
                           NGX_HTTP_FLAGS_SYNC_PASSWORD_MAX);
        return NGX_CONF_ERROR;
    }

    while (n > 0 && (buf[n - 1] == LF || buf[n - 1] == CR)) {
        n--;
    }

    if (n == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "flags_sync: %s \"%V\" is empty", what, path);
        return NGX_CONF_ERROR;
    }

    if ((size_t) n < min) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "flags_sync: %s \"%V\" is shorter than %uz "
                           "bytes", what, path, min);
        return NGX_CONF_ERROR;
    }

    out->data = buf;
    out->len = n;

    return NGX_CONF_OK;
}


/*
 * A URL's "[:PASSWORD@]" at *pp (the password may hold '@': the last one
 * ends it), into sc->password, *pp moved past it; before names what
 * follows it, for the message.
 */

static char *
ngx_http_flags_sync_url_password(ngx_conf_t *cf,
    ngx_http_flags_sync_conf_t *sc, u_char **pp, u_char *last,
    ngx_str_t *shown, const char *before)
{
    u_char  *p, *at, *c;

    p = *pp;
    at = NULL;

    for (c = p; c < last; c++) {
        if (*c == '@') {
            at = c;
        }
    }

    if (at == NULL) {
        return NGX_CONF_OK;
    }

    if (*p != ':' || at == p + 1) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "flags_sync: expected \":PASSWORD@\" before "
                           "%s in \"%V\"", before, shown);
        return NGX_CONF_ERROR;
    }

    sc->password.data = p + 1;
    sc->password.len = at - p - 1;
    *pp = at + 1;

    return NGX_CONF_OK;
}


/* A URL's database, the bytes from p to last, into sc->db. */

static char *
ngx_http_flags_sync_url_db(ngx_conf_t *cf, ngx_http_flags_sync_conf_t *sc,
    u_char *p, u_char *last, ngx_str_t *shown)
{
    ngx_int_t  n;

    n = ngx_atoi(p, last - p);
    if (n == NGX_ERROR || n > 65535) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "flags_sync: the database in \"%V\" is not "
                           "a number", shown);
        return NGX_CONF_ERROR;
    }

    sc->db = n;

    return NGX_CONF_OK;
}


/*
 * The URL: redis://[:PASSWORD@]HOST:PORT[/DB], or rediss:// for TLS.
 * shown is the URL as messages show it (no password); host gets the
 * host without the port (the name TLS checks by default).
 */

static char *
ngx_http_flags_sync_url(ngx_conf_t *cf, ngx_http_flags_sync_conf_t *sc,
    ngx_str_t *url, ngx_str_t *shown, ngx_str_t *host)
{
    u_char     *p, *last, *slash;
    ngx_str_t   hp;
    ngx_url_t   u;

    p = url->data;
    last = p + url->len;

    if (url->len >= sizeof("rediss://") - 1
        && ngx_strncmp(p, "rediss://", sizeof("rediss://") - 1) == 0)
    {
        sc->tls = 1;
        p++;        /* one byte longer than redis:// */

    } else if (url->len < sizeof("redis://") - 1
        || ngx_strncmp(p, "redis://", sizeof("redis://") - 1) != 0)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "flags_sync: \"%V\" is not a redis:// URL "
                           "(redis://[:PASSWORD@]HOST:PORT[/DB], or "
                           "rediss:// for TLS)", shown);
        return NGX_CONF_ERROR;
    }

    p += sizeof("redis://") - 1;

    if (ngx_http_flags_sync_url_password(cf, sc, &p, last, shown, "the host")
        != NGX_CONF_OK)
    {
        return NGX_CONF_ERROR;
    }

    slash = ngx_strlchr(p, last, '/');

    hp.data = p;
    hp.len = (slash ? slash : last) - p;

    if (slash && slash + 1 < last
        && ngx_http_flags_sync_url_db(cf, sc, slash + 1, last, shown)
           != NGX_CONF_OK)
    {
        return NGX_CONF_ERROR;
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
    *host = u.host;

    return NGX_CONF_OK;
}


/*
 * The URL of a master found by Sentinels (docs/sync.md "Sentinel"):
 * sentinel://[:PASSWORD@]HOST:PORT[,HOST:PORT...]/MASTER_NAME[/DB].  The
 * password and the database are the master's; the Sentinels are asked
 * without AUTH.  Each Sentinel is resolved now, as redis://'s host is.
 */

static char *
ngx_http_flags_sync_sentinel_url(ngx_conf_t *cf,
    ngx_http_flags_sync_conf_t *sc, ngx_str_t *url, ngx_str_t *shown)
{
    u_char     *p, *last, *slash, *name_end, *comma;
    ngx_str_t   hp;
    ngx_url_t   u;
    ngx_uint_t  i;

    p = url->data + sizeof("sentinel://") - 1;
    last = url->data + url->len;

    if (ngx_http_flags_sync_url_password(cf, sc, &p, last, shown,
                                         "the sentinels")
        != NGX_CONF_OK)
    {
        return NGX_CONF_ERROR;
    }

    slash = ngx_strlchr(p, last, '/');

    if (slash == NULL || slash + 1 >= last || slash[1] == '/') {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "flags_sync: \"%V\" names no master "
                           "(sentinel://[:PASSWORD@]HOST:PORT[,HOST:PORT...]"
                           "/MASTER_NAME[/DB])", shown);
        return NGX_CONF_ERROR;
    }

    name_end = ngx_strlchr(slash + 1, last, '/');
    if (name_end == NULL) {
        name_end = last;
    }

    sc->master_name.data = slash + 1;
    sc->master_name.len = name_end - slash - 1;

    if (!fl_sync_host_valid((const char *) sc->master_name.data,
                            sc->master_name.len))
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "flags_sync: invalid master name \"%V\" in "
                           "\"%V\": 1 to %d bytes of letters, digits, "
                           "\".\", \"-\", \"_\" or \":\"",
                           &sc->master_name, shown, (int) FL_SYNC_HOST_MAX);
        return NGX_CONF_ERROR;
    }

    if (name_end < last
        && ngx_http_flags_sync_url_db(cf, sc, name_end + 1, last, shown)
           != NGX_CONF_OK)
    {
        return NGX_CONF_ERROR;
    }

    /* the Sentinels, in the order they are asked */
    sc->sentinels = ngx_pcalloc(cf->pool, NGX_HTTP_FLAGS_SYNC_SENTINELS_MAX
                                          * sizeof(ngx_addr_t));
    if (sc->sentinels == NULL) {
        return NGX_CONF_ERROR;
    }

    for (i = 0; p < slash; i++) {
        comma = ngx_strlchr(p, slash, ',');
        if (comma == NULL) {
            comma = slash;
        }

        hp.data = p;
        hp.len = comma - p;
        p = comma + 1;

        if (i == NGX_HTTP_FLAGS_SYNC_SENTINELS_MAX) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "flags_sync: more than %d sentinels in "
                               "\"%V\"", NGX_HTTP_FLAGS_SYNC_SENTINELS_MAX,
                               shown);
            return NGX_CONF_ERROR;
        }

        ngx_memzero(&u, sizeof(ngx_url_t));
        u.url = hp;
        u.no_resolve = 0;

        if (hp.len == 0 || ngx_parse_url(cf->pool, &u) != NGX_OK
            || u.no_port || u.naddrs == 0)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "flags_sync: the sentinel \"%V\" in \"%V\" "
                               "is not HOST:PORT%s%s", &hp, shown,
                               u.err ? ": " : "", u.err ? u.err : "");
            return NGX_CONF_ERROR;
        }

        sc->sentinels[i] = u.addrs[0];
    }

    if (i == 0 || slash[-1] == ',') {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "flags_sync: \"%V\" needs HOST:PORT of a sentinel "
                           "before \"/\"%s", shown,
                           i ? " after the last \",\"" : "");
        return NGX_CONF_ERROR;
    }

    sc->nsentinels = i;

    /* what the log shows until the Sentinels name the master */
    sc->host.len = sizeof("master \"\"") - 1 + sc->master_name.len;
    sc->host.data = ngx_pnalloc(cf->pool, sc->host.len);
    if (sc->host.data == NULL) {
        return NGX_CONF_ERROR;
    }

    (void) ngx_sprintf(sc->host.data, "master \"%V\"", &sc->master_name);

    return NGX_CONF_OK;
}


/* One parameter after the URL; password_file= is read at the end. */

static char *
ngx_http_flags_sync_param(ngx_conf_t *cf, ngx_http_flags_sync_conf_t *sc,
    ngx_str_t *value, ngx_str_t *pwfile, ngx_str_t *keyfile)
{
    ngx_str_t  v;

    if (ngx_strncmp(value->data, "interval=", 9) == 0) {
        v.data = value->data + 9;
        v.len = value->len - 9;

        sc->interval = ngx_parse_time(&v, 0);

        if (sc->interval == (ngx_msec_t) NGX_ERROR
            || sc->interval < 10 || sc->interval > 3600000)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "flags_sync: invalid \"%V\": a time "
                               "from 10ms to 1h", value);
            return NGX_CONF_ERROR;
        }

        return NGX_CONF_OK;
    }

    if (ngx_strncmp(value->data, "prefix=", 7) == 0) {
        sc->prefix.data = value->data + 7;
        sc->prefix.len = value->len - 7;

        if (sc->prefix.len > 64
            || ngx_strlchr(sc->prefix.data,
                           sc->prefix.data + sc->prefix.len, '{')
            || ngx_strlchr(sc->prefix.data,
                           sc->prefix.data + sc->prefix.len, '}'))
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "flags_sync: invalid \"%V\": at most 64 "
                               "bytes, without \"{\" or \"}\"", value);
            return NGX_CONF_ERROR;
        }

        return NGX_CONF_OK;
    }

    if (ngx_strncmp(value->data, "password_file=", 14) == 0) {
        if (pwfile->data) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "flags_sync: duplicate password_file=");
            return NGX_CONF_ERROR;
        }

        pwfile->data = value->data + 14;
        pwfile->len = value->len - 14;
        return NGX_CONF_OK;
    }

    if (ngx_strncmp(value->data, "key_file=", 9) == 0) {
        if (keyfile->data) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "flags_sync: duplicate key_file=");
            return NGX_CONF_ERROR;
        }

        keyfile->data = value->data + 9;
        keyfile->len = value->len - 9;
        return NGX_CONF_OK;
    }

    if (ngx_strncmp(value->data, "host=", 5) == 0) {
        sc->name.data = value->data + 5;
        sc->name.len = value->len - 5;

        if (!fl_sync_host_valid((const char *) sc->name.data, sc->name.len))
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "flags_sync: invalid \"%V\": 1 to %d "
                               "bytes of letters, digits, \".\", \"-\", "
                               "\"_\" or \":\"", value,
                               (int) FL_SYNC_HOST_MAX);
            return NGX_CONF_ERROR;
        }

        return NGX_CONF_OK;
    }

    /* tls=, tls_ca=, tls_cert=, tls_key=, tls_name=, tls_verify= */
    if (ngx_strncmp(value->data, "tls", 3) == 0) {
        switch (ngx_http_flags_sync_tls_param(cf, sc, value)) {
        case NGX_OK:
            return NGX_CONF_OK;
        case NGX_DECLINED:
            break;
        default:
            return NGX_CONF_ERROR;
        }
    }

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "flags_sync: unknown parameter \"%V\" (expected "
                       "interval=, prefix=, password_file=, key_file=, "
                       "host=, tls=, tls_ca=, tls_cert=, tls_key=, "
                       "tls_name= or tls_verify=)",
                       value);
    return NGX_CONF_ERROR;
}


/*
 * flags_sync redis://[:PASSWORD@]HOST:PORT[/DB] [interval=1s]
 *  (or sentinel://[:PASSWORD@]HOST:PORT[,HOST:PORT...]/MASTER_NAME[/DB])
 *            [prefix=flags:] [password_file=PATH] [host=NAME]
 *            [tls=on] [tls_ca=PATH] [tls_cert=PATH tls_key=PATH]
 *            [tls_name=NAME] [tls_verify=off];
 * (rediss:// is redis:// with tls=on)
 */

char *
ngx_http_flags_sync(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_flags_main_conf_t *fmcf = conf;

    char                        *rv;
    ngx_str_t                   *value, *shown, pwfile, keyfile, host;
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
    sc->tls_verify = NGX_CONF_UNSET_UINT;
    ngx_str_null(&pwfile);
    ngx_str_null(&keyfile);

    /* no message shows the password */
    shown = ngx_http_flags_sync_shown(cf, &value[1]);

    ngx_str_null(&host);

    if (value[1].len >= sizeof("sentinel://") - 1
        && ngx_strncmp(value[1].data, "sentinel://",
                       sizeof("sentinel://") - 1) == 0)
    {
        rv = ngx_http_flags_sync_sentinel_url(cf, sc, &value[1], shown);

    } else {
        rv = ngx_http_flags_sync_url(cf, sc, &value[1], shown, &host);
    }

    if (rv != NGX_CONF_OK) {
        return rv;
    }

    for (i = 2; i < cf->args->nelts; i++) {
        rv = ngx_http_flags_sync_param(cf, sc, &value[i], &pwfile,
                                       &keyfile);
        if (rv != NGX_CONF_OK) {
            return rv;
        }
    }

    if (pwfile.data) {
        if (sc->password.len) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "flags_sync: a password in the URL and "
                               "password_file= together");
            return NGX_CONF_ERROR;
        }

        rv = ngx_http_flags_sync_secret_file(cf, "password_file", 1, &pwfile,
                                             &sc->password);
        if (rv != NGX_CONF_OK) {
            return rv;
        }
    }

    /* the key that signs runtime definitions' versions */
    if (keyfile.data) {
        rv = ngx_http_flags_sync_secret_file(cf, "key_file",
                                             NGX_HTTP_FLAGS_SYNC_KEY_MIN,
                                             &keyfile, &sc->key);
        if (rv != NGX_CONF_OK) {
            return rv;
        }
    }

    /* TLS: its context, the CA and the client's pair read now */
    rv = ngx_http_flags_sync_tls_conf(cf, sc, &host);
    if (rv != NGX_CONF_OK) {
        return rv;
    }

    if (!fl_sync_host_valid((const char *) sc->name.data, sc->name.len)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "flags_sync: the host name \"%V\" cannot name "
                           "this host in the fleet's records: set host=",
                           &sc->name);
        return NGX_CONF_ERROR;
    }

    fmcf->sync = sc;
    fmcf->sync_interval = sc->interval;
    fmcf->sync_tls = sc->tls;

    return NGX_CONF_OK;
}


/* --------------------------------------------------- the worker's life */

/*
 * A ramp this host's copy knows nothing of (pending, never answered by
 * the fleet, no state file entry): until the fleet answers, it serves no
 * more than the ramp's first stage (fl_sync_ramp_unknown_milli(),
 * docs/sync.md "Rejoining"), not a configured percentage above what the
 * fleet may serve.  Every worker does it, the same way.
 */

static void
ngx_http_flags_sync_unknown_ramps(ngx_http_flags_main_conf_t *fmcf)
{
    ngx_uint_t                 i, k;
    ngx_http_flags_flag_t     *flag;
    ngx_http_flags_defs_t     *defs;
    ngx_http_flags_project_t  *project;

    project = fmcf->projects.elts;

    ngx_shmtx_lock(&fmcf->shpool->mutex);

    for (i = 0; i < fmcf->projects.nelts; i++) {
        defs = ngx_http_flags_defs(&project[i]);

        for (k = 0; k < defs->nflags; k++) {
            flag = &defs->flags[k];

            if (flag->ramp_def == NULL || flag->ramp == NULL
                || flag->version == NULL
                || flag->version->sync_ramp_seen != 0
                || __atomic_load_n(&flag->ramp->state, __ATOMIC_RELAXED)
                   != FL_RAMP_PENDING)
            {
                continue;
            }

            fl_control_set_ramp(flag->ctl,
                                fl_sync_ramp_unknown_milli(flag->ramp_def,
                                                         flag->rollout_milli));
        }
    }

    ngx_shmtx_unlock(&fmcf->shpool->mutex);
}


ngx_int_t
ngx_http_flags_sync_init_process(ngx_cycle_t *cycle,
    ngx_http_flags_main_conf_t *fmcf)
{
    ngx_uint_t                      i;
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
    s->nalloc = 3 * fmcf->projects.nelts + 4;
    s->expect = ngx_pcalloc(cycle->pool, s->nalloc * sizeof(ngx_uint_t));

    if (s->projects == NULL || s->cmd == NULL || s->cmd_len == NULL
        || s->expect == NULL)
    {
        return NGX_ERROR;
    }

    project = fmcf->projects.elts;

    /* the reply's bound; each round's start follows the flag counts */
    ngx_http_flags_sync_defs_bound(s);

    for (i = 0; i < fmcf->projects.nelts; i++) {
        /* held until a round takes a newer snapshot */
        s->projects[i].defs = ngx_http_flags_defs(&project[i]);

        if (s->projects[i].defs->pool) {
            s->projects[i].defs->refs++;
        }

        s->projects[i].flags = ngx_pcalloc(cycle->pool,
                                   (s->projects[i].defs->nflags + 1)
                                   * sizeof(fl_sync_flag_t));
        if (s->projects[i].flags == NULL) {
            return NGX_ERROR;
        }
    }

    ngx_http_flags_sync_unknown_ramps(fmcf);

    if (s->conf->nsentinels
        && ngx_http_flags_sync_sentinel_init(s, cycle) != NGX_OK)
    {
        return NGX_ERROR;
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

    /* staleness counts from the first worker's start until the first
     * round (docs/sync.md); a reload's workers keep it */
    (void) ngx_atomic_cmp_set(&fmcf->sh->sync_start_msec, 0,
                              ngx_max(ngx_current_msec, 1));

    /* the first tick at a random point of the first interval (of the
     * first second at most): hosts started together, and a host's
     * workers, do not all connect in one millisecond (nginx seeds
     * random() per process) */
    ngx_add_timer(&s->tick, 10 + (ngx_msec_t) ngx_random()
                                 % ngx_min(s->conf->interval, 1000));

    /* a runtime project's write goes to the fleet without waiting for
     * the tick (ngx_http_flags_sync_defs_wake()) */
    for (i = 0; i < fmcf->projects.nelts; i++) {
        if (project[i].runtime) {
            s->defs_wake.handler = ngx_http_flags_sync_defs_wake;
            s->defs_wake.data = s;
            s->defs_wake.log = cycle->log;
            s->defs_wake.cancelable = 1;
            ngx_add_timer(&s->defs_wake, 10);
            break;
        }
    }

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

    if (s->defs_wake.timer_set) {
        ngx_del_timer(&s->defs_wake);
    }

    old = fmcf->sh->sync_lock;

    if ((ngx_pid_t) (old & 0xffffffff) == ngx_pid) {
        (void) ngx_atomic_cmp_set(&fmcf->sh->sync_lock, old, 0);
        fmcf->sh->sync_connected = 0;
    }

    ngx_http_flags_sync_worker = NULL;
}


/* This host's name in records: flags_sync's host= (or the host's name,
 * its default), or the host's name without flags_sync. */

void
ngx_http_flags_sync_host(ngx_http_flags_main_conf_t *fmcf, ngx_str_t *name)
{
    if (fmcf->sync) {
        *name = fmcf->sync->name;
        return;
    }

    *name = ngx_cycle->hostname;
}


/* flags_status's "master" and "sentinel" (docs/sync.md "Sentinel"), as
 * the syncing worker wrote them into the zone. */

ngx_uint_t
ngx_http_flags_sync_sentinel_shown(ngx_http_flags_main_conf_t *fmcf,
    ngx_str_t *master, ngx_str_t *sentinel, u_char *buf)
{
    ngx_uint_t               k;
    ngx_http_flags_shctx_t  *sh;

    if (fmcf->sync == NULL || fmcf->sync->nsentinels == 0 || fmcf->sh == NULL)
    {
        return 0;
    }

    sh = fmcf->sh;

    ngx_shmtx_lock(&fmcf->shpool->mutex);

    master->len = ngx_min(sh->sync_master_len, NGX_SOCKADDR_STRLEN);
    master->data = buf;
    ngx_memcpy(buf, sh->sync_master, master->len);
    k = sh->sync_sentinel;

    ngx_shmtx_unlock(&fmcf->shpool->mutex);

    /* an index of another generation's list is not shown */
    if (k == 0 || k > fmcf->sync->nsentinels) {
        ngx_str_null(sentinel);

    } else {
        *sentinel = fmcf->sync->sentinels[k - 1].name;
    }

    return 1;
}
