/*
 * ngx_http_flags_sync_tls.c - flags_sync over TLS (docs/sync.md, "TLS"):
 * rediss:// (or tls=on), tls_ca=, tls_cert=, tls_key=, tls_name= and
 * tls_verify=.
 *
 * The TLS is nginx's own, as its upstream module does it: an SSL context
 * made while the configuration is read (the files read then, so nginx -t
 * names a missing or unreadable one), and on a connected socket
 * ngx_ssl_create_connection(), the handshake driven by the event loop
 * (ngx_ssl_handshake(), c->ssl->handler), then c->recv and c->send are
 * nginx's SSL ones and the Redis protocol stays hiredis's formatter and
 * reader.  The server's certificate is checked once the handshake is
 * done, before a byte of the Redis protocol (AUTH) is sent: the chain
 * (SSL_get_verify_result()) and the name (X509_check_host(), or
 * X509_check_ip_asc() for an address).
 *
 * Why a failure says why: nginx logs OpenSSL's reason for a failed
 * handshake or read on the connection's log, at info or crit, on every
 * attempt.  A TLS connection's log here is its own (in its pool): it keeps
 * the connection's last message instead of writing it, and
 * ngx_http_flags_sync_fail() logs it once, with the loss, at error, as
 * every other loss of Redis (debug messages still go to the error log).
 */

#include "ngx_http_flags_sync.h"


#define NGX_HTTP_FLAGS_SYNC_TLS_REASON  384


#if (NGX_SSL)

#include <openssl/x509v3.h>


/* a TLS connection's own state, in its pool */
typedef struct {
    ngx_log_t                         log;
    ngx_log_t                        *real;
    ngx_http_flags_sync_t            *s;
    ngx_http_flags_sync_tls_done_pt   done;
    ngx_event_handler_pt              read_handler;
    ngx_event_handler_pt              write_handler;
    ngx_str_t                         reason;
    u_char                            buf[NGX_HTTP_FLAGS_SYNC_TLS_REASON];
    ngx_str_t                         name;   /* sent and checked, with a
                                               * '\0' after it */
} ngx_http_flags_sync_tls_t;


static ngx_uint_t ngx_http_flags_sync_tls_is_addr(ngx_str_t *name);
static void ngx_http_flags_sync_tls_writer(ngx_log_t *log, ngx_uint_t level,
    u_char *buf, size_t len);
static void ngx_http_flags_sync_tls_handshaked(ngx_connection_t *c);
static int ngx_http_flags_sync_tls_no_password(char *buf, int size, int rw,
    void *data);


/* ------------------------------------------------------- configuration */


/*
 * One parameter that starts with "tls": NGX_DECLINED when it is none of
 * them (the caller says "unknown parameter").
 */

ngx_int_t
ngx_http_flags_sync_tls_param(ngx_conf_t *cf, ngx_http_flags_sync_conf_t *sc,
    ngx_str_t *value)
{
    ngx_str_t   v, *path;
    ngx_uint_t  on;

    if (ngx_strncmp(value->data, "tls=", 4) == 0
        || ngx_strncmp(value->data, "tls_verify=", 11) == 0)
    {
        v.data = ngx_strlchr(value->data, value->data + value->len, '=') + 1;
        v.len = value->data + value->len - v.data;

        if (v.len == 2 && ngx_strncmp(v.data, "on", 2) == 0) {
            on = 1;

        } else if (v.len == 3 && ngx_strncmp(v.data, "off", 3) == 0) {
            on = 0;

        } else {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "flags_sync: invalid \"%V\": on or off",
                               value);
            return NGX_ERROR;
        }

        if (value->data[3] == '=') {
            if (sc->tls && !on) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "flags_sync: \"tls=off\" with a "
                                   "rediss:// URL");
                return NGX_ERROR;
            }

            sc->tls = on;

        } else {
            sc->tls_verify = on;
        }

        return NGX_OK;
    }

    if (ngx_strncmp(value->data, "tls_ca=", 7) == 0) {
        path = &sc->tls_ca;
        v.data = value->data + 7;

    } else if (ngx_strncmp(value->data, "tls_cert=", 9) == 0) {
        path = &sc->tls_cert;
        v.data = value->data + 9;

    } else if (ngx_strncmp(value->data, "tls_key=", 8) == 0) {
        path = &sc->tls_key;
        v.data = value->data + 8;

    } else if (ngx_strncmp(value->data, "tls_name=", 9) == 0) {
        path = &sc->tls_name;
        v.data = value->data + 9;

    } else {
        return NGX_DECLINED;
    }

    v.len = value->data + value->len - v.data;

    if (path->data) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "flags_sync: duplicate %*s",
                           (size_t) (v.data - value->data), value->data);
        return NGX_ERROR;
    }

    if (v.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "flags_sync: \"%V\" needs a %s", value,
                           path == &sc->tls_name ? "name" : "path");
        return NGX_ERROR;
    }

    *path = v;

    return NGX_OK;
}


/*
 * A file the configuration names: a regular file the master can read
 * now (errno named otherwise), and for the private key, one that no
 * other user can read or write (as a password; the master reads it as
 * root, so 0600 is enough).  The path is made absolute, relative to the
 * configuration's directory, and ends in '\0'.
 */

static ngx_int_t
ngx_http_flags_sync_tls_file(ngx_conf_t *cf, const char *what,
    ngx_str_t *path, ngx_uint_t secret)
{
    u_char            c, octal[4];
    ssize_t           n;
    ngx_fd_t          fd;
    ngx_err_t         err;
    ngx_uint_t        mode;
    ngx_file_info_t   fi;

    if (ngx_conf_full_name(cf->cycle, path, 1) != NGX_OK) {
        return NGX_ERROR;
    }

    fd = ngx_open_file(path->data, NGX_FILE_RDONLY, NGX_FILE_OPEN, 0);
    if (fd == NGX_INVALID_FILE) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno,
                           "flags_sync: cannot open %s \"%V\"", what, path);
        return NGX_ERROR;
    }

    if (ngx_fd_info(fd, &fi) == NGX_FILE_ERROR) {
        err = ngx_errno;
        (void) ngx_close_file(fd);
        ngx_conf_log_error(NGX_LOG_EMERG, cf, err,
                           "flags_sync: cannot read %s \"%V\"", what, path);
        return NGX_ERROR;
    }

    if (!ngx_is_file(&fi)) {
        (void) ngx_close_file(fd);
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "flags_sync: %s \"%V\" is not a regular file",
                           what, path);
        return NGX_ERROR;
    }

    /* a directory or a file without read permission fails here, where
     * OpenSSL would say less */
    n = ngx_read_fd(fd, &c, 1);
    err = ngx_errno;
    (void) ngx_close_file(fd);

    if (n == -1) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, err,
                           "flags_sync: cannot read %s \"%V\"", what, path);
        return NGX_ERROR;
    }

    if (n == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "flags_sync: %s \"%V\" is empty", what, path);
        return NGX_ERROR;
    }

    mode = ngx_file_access(&fi);

    if (secret && (mode & 0066)) {
        octal[0] = '0';
        octal[1] = (u_char) ('0' + ((mode >> 6) & 7));
        octal[2] = (u_char) ('0' + ((mode >> 3) & 7));
        octal[3] = (u_char) ('0' + (mode & 7));

        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "flags_sync: %s \"%V\" can be read or written "
                           "by other users (mode %*s): chmod 600 it",
                           what, path, (size_t) 4, octal);
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* OpenSSL's reason for the last failure, for a message */

static const char *
ngx_http_flags_sync_tls_ossl(void)
{
    const char     *r;
    unsigned long   e;

    e = ERR_peek_last_error();
    r = e ? ERR_reason_error_string(e) : NULL;

    return r ? r : "no reason given";
}


/*
 * After the parameters: the SSL context of a TLS connection, made once
 * by the master (workers inherit it), with the files read now.
 */

char *
ngx_http_flags_sync_tls_conf(ngx_conf_t *cf, ngx_http_flags_sync_conf_t *sc,
    ngx_str_t *host)
{
    u_char              *p;
    ngx_ssl_t           *ssl;
    ngx_pool_cleanup_t  *cln;

    if (!sc->tls) {
        if (sc->tls_ca.data || sc->tls_cert.data || sc->tls_key.data
            || sc->tls_name.data || sc->tls_verify != NGX_CONF_UNSET_UINT)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "flags_sync: tls_ca=, tls_cert=, tls_key=, "
                               "tls_name= and tls_verify= need a rediss:// "
                               "URL or tls=on");
            return NGX_CONF_ERROR;
        }

        return NGX_CONF_OK;
    }

    if ((sc->tls_cert.data == NULL) != (sc->tls_key.data == NULL)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "flags_sync: tls_cert= and tls_key= go together");
        return NGX_CONF_ERROR;
    }

    if (sc->tls_verify == NGX_CONF_UNSET_UINT) {
        sc->tls_verify = 1;
    }

    /* the name sent (SNI) and checked: tls_name=, else the URL's host;
     * with sentinel:// and no tls_name=, each connection's own peer (a
     * Sentinel's address, the master's address the Sentinels gave) */
    if (sc->tls_name.data == NULL) {
        if (sc->nsentinels) {
            goto context;
        }

        sc->tls_name = *host;
    }

    if (sc->tls_name.len > 1 && sc->tls_name.data[0] == '['
        && sc->tls_name.data[sc->tls_name.len - 1] == ']')
    {
        sc->tls_name.data++;
        sc->tls_name.len -= 2;
    }

    p = ngx_pnalloc(cf->pool, sc->tls_name.len + 1);
    if (p == NULL) {
        return NGX_CONF_ERROR;
    }

    (void) ngx_cpystrn(p, sc->tls_name.data, sc->tls_name.len + 1);
    sc->tls_name.data = p;

context:

    ssl = ngx_pcalloc(cf->pool, sizeof(ngx_ssl_t));
    if (ssl == NULL) {
        return NGX_CONF_ERROR;
    }

    ssl->log = cf->log;

    if (ngx_ssl_create(ssl, NGX_SSL_TLSv1_2|NGX_SSL_TLSv1_3, NULL)
        != NGX_OK)
    {
        return NGX_CONF_ERROR;
    }

    cln = ngx_pool_cleanup_add(cf->pool, 0);
    if (cln == NULL) {
        ngx_ssl_cleanup_ctx(ssl);
        return NGX_CONF_ERROR;
    }

    cln->handler = ngx_ssl_cleanup_ctx;
    cln->data = ssl;

    sc->ssl = ssl;

    /* the commands queued while a write waits may move the buffer */
    SSL_CTX_set_mode(ssl->ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);

    /* an encrypted key fails here, instead of asking on a terminal */
    SSL_CTX_set_default_passwd_cb(ssl->ctx,
                                  ngx_http_flags_sync_tls_no_password);

    /*
     * The chain is verified by OpenSSL during the handshake (a client
     * with SSL_VERIFY_NONE verifies and goes on); its result is checked
     * once the handshake is done, so that the message can say why.
     */
    ERR_clear_error();

    if (sc->tls_ca.data) {
        if (ngx_http_flags_sync_tls_file(cf, "tls_ca", &sc->tls_ca, 0)
            != NGX_OK)
        {
            return NGX_CONF_ERROR;
        }

        if (SSL_CTX_load_verify_locations(ssl->ctx,
                                          (char *) sc->tls_ca.data, NULL)
            == 0)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "flags_sync: tls_ca \"%V\" holds no "
                               "certificate OpenSSL can read (%s)",
                               &sc->tls_ca, ngx_http_flags_sync_tls_ossl());
            ERR_clear_error();
            return NGX_CONF_ERROR;
        }

    } else if (sc->tls_verify
               && SSL_CTX_set_default_verify_paths(ssl->ctx) == 0)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "flags_sync: the system's CA certificates could "
                           "not be loaded (%s): set tls_ca=",
                           ngx_http_flags_sync_tls_ossl());
        ERR_clear_error();
        return NGX_CONF_ERROR;
    }

    if (sc->tls_cert.data) {
        if (ngx_http_flags_sync_tls_file(cf, "tls_cert", &sc->tls_cert, 0)
            != NGX_OK
            || ngx_http_flags_sync_tls_file(cf, "tls_key", &sc->tls_key, 1)
               != NGX_OK)
        {
            return NGX_CONF_ERROR;
        }

        if (SSL_CTX_use_certificate_chain_file(ssl->ctx,
                                               (char *) sc->tls_cert.data)
            != 1)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "flags_sync: tls_cert \"%V\" holds no "
                               "certificate OpenSSL can read (%s)",
                               &sc->tls_cert, ngx_http_flags_sync_tls_ossl());
            ERR_clear_error();
            return NGX_CONF_ERROR;
        }

        /* OpenSSL checks that the key is the certificate's */
        if (SSL_CTX_use_PrivateKey_file(ssl->ctx, (char *) sc->tls_key.data,
                                        SSL_FILETYPE_PEM)
            != 1
            || SSL_CTX_check_private_key(ssl->ctx) != 1)
        {
            if (ERR_GET_REASON(ERR_peek_last_error())
                == X509_R_KEY_VALUES_MISMATCH)
            {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "flags_sync: tls_key \"%V\" is not the "
                                   "key of tls_cert \"%V\"",
                                   &sc->tls_key, &sc->tls_cert);

            } else {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "flags_sync: tls_key \"%V\" holds no "
                                   "private key OpenSSL can read (%s; an "
                                   "encrypted key is not supported)",
                                   &sc->tls_key,
                                   ngx_http_flags_sync_tls_ossl());
            }

            ERR_clear_error();
            return NGX_CONF_ERROR;
        }
    }

    ERR_clear_error();

    return NGX_CONF_OK;
}


static int
ngx_http_flags_sync_tls_no_password(char *buf, int size, int rw, void *data)
{
    return 0;
}


/* ---------------------------------------------------------- connection */


static ngx_uint_t
ngx_http_flags_sync_tls_is_addr(ngx_str_t *name)
{
#if (NGX_HAVE_INET6)
    u_char  a6[16];

    if (ngx_inet6_addr(name->data, name->len, a6) == NGX_OK) {
        return 1;
    }
#endif

    return ngx_inet_addr(name->data, name->len) != INADDR_NONE;
}


/*
 * The connection's log: every message but debug is kept as the reason
 * (the last one wins) and not written; ngx_http_flags_sync_fail() logs it
 * once.  Debug messages go on to the error log.
 */

static void
ngx_http_flags_sync_tls_writer(ngx_log_t *log, ngx_uint_t level, u_char *buf,
    size_t len)
{
    u_char                     *p, *last;
    ngx_log_t                  *l;
    ngx_http_flags_sync_tls_t  *t;

    t = log->wdata;

    if (level == NGX_LOG_DEBUG) {
        for (l = t->real; l; l = l->next) {
            if (l->log_level < level) {
                break;
            }

            if (l->writer) {
                l->writer(l, level, buf, len);
                continue;
            }

            (void) ngx_write_fd(l->file->fd, buf, len);
        }

        return;
    }

    /* the message without the time, level and pid#tid before it, nor
     * the line feed after it */
    last = buf + len;

    while (last > buf && (last[-1] == LF || last[-1] == CR)) {
        last--;
    }

    p = ngx_strlcasestrn(buf, last, (u_char *) ": ", 2 - 1);
    p = (p == NULL) ? buf : p + 2;

    if (p < last && *p == '*') {
        while (p < last && *p != ' ') {
            p++;
        }

        if (p < last) {
            p++;
        }
    }

    t->reason.data = t->buf;
    t->reason.len = ngx_min((size_t) (last - p), sizeof(t->buf));
    ngx_memcpy(t->buf, p, t->reason.len);
}


ngx_int_t
ngx_http_flags_sync_tls_start(ngx_http_flags_sync_t *s, ngx_connection_t *c,
    ngx_str_t *peer, ngx_http_flags_sync_tls_done_pt done)
{
    u_char                     *p, *last;
    ngx_int_t                   rc;
    ngx_str_t                   name;
    ngx_http_flags_sync_tls_t  *t;

    if (c->pool == NULL) {
        c->pool = ngx_create_pool(1024, s->log);
        if (c->pool == NULL) {
            return NGX_ERROR;
        }
    }

    t = ngx_pcalloc(c->pool, sizeof(ngx_http_flags_sync_tls_t));
    if (t == NULL) {
        return NGX_ERROR;
    }

    /* tls_name=, else the peer's "host:port" without the port (and an
     * IPv6 address without its brackets) */
    if (s->conf->tls_name.data) {
        name = s->conf->tls_name;

    } else {
        name = *peer;
        last = name.data + name.len;

        for (p = last; p > name.data; p--) {
            if (p[-1] == ':') {
                name.len = p - 1 - name.data;
                break;
            }

            if (p[-1] == ']') {
                break;
            }
        }

        if (name.len > 1 && name.data[0] == '['
            && name.data[name.len - 1] == ']')
        {
            name.data++;
            name.len -= 2;
        }
    }

    t->name.data = ngx_pnalloc(c->pool, name.len + 1);
    if (t->name.data == NULL) {
        return NGX_ERROR;
    }

    (void) ngx_cpystrn(t->name.data, name.data, name.len + 1);
    t->name.len = name.len;

    t->s = s;
    t->done = done;
    t->real = c->log;
    t->read_handler = c->read->handler;
    t->write_handler = c->write->handler;

    /* the connection's own log: it takes every message (info and above,
     * and the debug ones the error log takes) */
    t->log = *c->log;
    t->log.next = NULL;
    t->log.writer = ngx_http_flags_sync_tls_writer;
    t->log.wdata = t;

    if ((t->log.log_level & 0xf) < NGX_LOG_INFO) {
        t->log.log_level = (t->log.log_level & ~(ngx_uint_t) 0xf)
                           | NGX_LOG_INFO;
    }

    c->log = &t->log;
    c->read->log = c->log;
    c->write->log = c->log;

    if (ngx_ssl_create_connection(s->conf->ssl, c,
                                  NGX_SSL_BUFFER|NGX_SSL_CLIENT)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    /* SNI names a host; an address is not sent (RFC 6066) */
    if (!ngx_http_flags_sync_tls_is_addr(&t->name)
        && SSL_set_tlsext_host_name(c->ssl->connection,
                                    (char *) t->name.data)
           == 0)
    {
        ngx_ssl_error(NGX_LOG_ERR, c->log, 0,
                      "SSL_set_tlsext_host_name(\"%V\") failed",
                      &t->name);
        return NGX_ERROR;
    }

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, c->log, 0,
                   "flags: sync: TLS handshake with %V", &s->conf->host);

    rc = ngx_ssl_handshake(c);

    if (rc == NGX_AGAIN) {
        /* bounded by the caller's timer (ngx_http_flags_sync_t.timeout) */
        c->ssl->handler = ngx_http_flags_sync_tls_handshaked;
        return NGX_OK;
    }

    ngx_http_flags_sync_tls_handshaked(c);

    return NGX_OK;
}


static void
ngx_http_flags_sync_tls_handshaked(ngx_connection_t *c)
{
    long                        rc;
    X509                       *cert;
    ngx_int_t                   match;
    ngx_str_t                   error;
    ngx_http_flags_sync_t      *s;
    ngx_http_flags_sync_tls_t  *t;
    u_char                      msg[NGX_HTTP_FLAGS_SYNC_TLS_REASON];

    t = c->log->wdata;
    s = t->s;

    if (!c->ssl->handshaked) {
        error.data = msg;
        error.len = (t->reason.len
                     ? ngx_snprintf(msg, sizeof(msg), "handshake failed: %V",
                                    &t->reason)
                     : ngx_snprintf(msg, sizeof(msg), "handshake failed"))
                    - msg;
        t->done(s, c, &error);
        return;
    }

    if (s->conf->tls_verify) {
        rc = SSL_get_verify_result(c->ssl->connection);

        if (rc != X509_V_OK) {
            error.data = msg;
            error.len = ngx_snprintf(msg, sizeof(msg), "the peer's certificate "
                                     "does not verify: %s (%l)",
                                     X509_verify_cert_error_string(rc), rc)
                        - msg;
            t->done(s, c, &error);
            return;
        }

#if (OPENSSL_VERSION_NUMBER >= 0x30000000L)
        cert = SSL_get1_peer_certificate(c->ssl->connection);
#else
        cert = SSL_get_peer_certificate(c->ssl->connection);
#endif
        match = 0;

        if (cert) {
            if (ngx_http_flags_sync_tls_is_addr(&t->name)) {
                match = X509_check_ip_asc(cert,
                                          (char *) t->name.data, 0)
                        == 1;

            } else {
                match = X509_check_host(cert, (char *) t->name.data,
                                        t->name.len, 0, NULL)
                        == 1;
            }

            X509_free(cert);
        }

        if (!match) {
            error.data = msg;
            error.len = ngx_snprintf(msg, sizeof(msg), "the peer's certificate "
                                     "does not match \"%V\" (set "
                                     "tls_name= to a name it holds)",
                                     &t->name)
                        - msg;
            t->done(s, c, &error);
            return;
        }
    }

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, c->log, 0,
                   "flags: sync: TLS with %V: %s", &s->conf->host,
                   SSL_get_version(c->ssl->connection));

    /* the caller's handlers again, over c->recv and c->send of TLS */
    t->reason.len = 0;
    c->read->handler = t->read_handler;
    c->write->handler = t->write_handler;

    t->done(s, c, NULL);
}


/* What nginx said last on a TLS connection (OpenSSL's reason), or NULL. */

ngx_str_t *
ngx_http_flags_sync_tls_error(ngx_connection_t *c)
{
    u_char                      buf[64];
    ngx_http_flags_sync_tls_t  *t;

    if (c == NULL || c->log->writer != ngx_http_flags_sync_tls_writer) {
        return NULL;
    }

    t = c->log->wdata;

    /*
     * A write reset by the server may hide why it closed: with TLS 1.3 a
     * server that wants a client certificate says so in an alert after
     * the handshake, then closes, and the commands already on their way
     * make it reset the connection.  The alert may still wait to be read:
     * one read, and its failure is the reason.
     */
    if (c->ssl && t->reason.len > sizeof("SSL_write()") - 1
        && ngx_strncmp(t->reason.data, "SSL_write()",
                       sizeof("SSL_write()") - 1) == 0)
    {
        (void) c->recv(c, buf, sizeof(buf));
    }

    return t->reason.len ? &t->reason : NULL;
}


/*
 * Closes any sync connection, TLS or not: TLS says close_notify (without
 * waiting for the peer's), then the socket, then the pool that held the
 * connection's TLS state and log.
 */

void
ngx_http_flags_sync_tls_close(ngx_connection_t *c)
{
    ngx_pool_t  *pool;

    if (c->ssl) {
        c->ssl->no_wait_shutdown = 1;

        if (ngx_ssl_shutdown(c) == NGX_AGAIN) {
            /* the socket is full: no close_notify, the SSL freed now */
            c->error = 1;
            (void) ngx_ssl_shutdown(c);
        }
    }

    pool = c->pool;

    ngx_close_connection(c);

    if (pool) {
        ngx_destroy_pool(pool);
    }
}


#else /* !(NGX_SSL) */


ngx_int_t
ngx_http_flags_sync_tls_param(ngx_conf_t *cf, ngx_http_flags_sync_conf_t *sc,
    ngx_str_t *value)
{
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "flags_sync: \"%V\": this nginx is built without "
                       "OpenSSL", value);
    return NGX_ERROR;
}


char *
ngx_http_flags_sync_tls_conf(ngx_conf_t *cf, ngx_http_flags_sync_conf_t *sc,
    ngx_str_t *host)
{
    if (sc->tls) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "flags_sync: rediss:// needs nginx built with "
                           "OpenSSL");
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


ngx_int_t
ngx_http_flags_sync_tls_start(ngx_http_flags_sync_t *s, ngx_connection_t *c,
    ngx_str_t *peer, ngx_http_flags_sync_tls_done_pt done)
{
    return NGX_ERROR;
}


ngx_str_t *
ngx_http_flags_sync_tls_error(ngx_connection_t *c)
{
    return NULL;
}


void
ngx_http_flags_sync_tls_close(ngx_connection_t *c)
{
    ngx_close_connection(c);
}


#endif
