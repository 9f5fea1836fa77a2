/*
 * ngx_http_flags_sync.h - what the files of flags_sync share (docs/sync.md),
 * and nothing else includes:
 *
 *   ngx_http_flags_sync.c        the directive, a worker's start and exit,
 *                                what flags_status and flags_metrics show
 *   ngx_http_flags_sync_conn.c   the connection to Redis, owned by the event
 *                                loop: the lock, the tick, connect, send,
 *                                read (hiredis, bounded), the replies to
 *                                AUTH, SELECT and SCRIPT LOAD, NOSCRIPT
 *   ngx_http_flags_sync_sentinel.c  sentinel://: the Sentinels asked for
 *                                the master, its ROLE checked, a failover
 *                                heard on +switch-master
 *   ngx_http_flags_sync_round.c  a round: the zone read into the core's
 *                                fl_sync_flag_t, the command sent, the
 *                                script's answer applied to the zone
 *   ngx_http_flags_sync_defs.c   a runtime project's definitions in the
 *                                fleet: a write proposed in the zone and
 *                                sent as a compare-and-set, the fleet's
 *                                newest version taken, signed versions
 *   ngx_http_flags_sync_tls.c    TLS (rediss://, tls=on): the SSL context
 *                                and its files, a connection's handshake
 *                                and checks, its close
 *
 * The decisions (which flag sends what, how the answer reads, what it does
 * to a flag) are the core's: src/core/sync_round.cpp, sync_reply.cpp.
 */

#ifndef _NGX_HTTP_FLAGS_SYNC_H_INCLUDED_
#define _NGX_HTTP_FLAGS_SYNC_H_INCLUDED_


#include "ngx_http_flags_module.h"

#include <hiredis/hiredis.h>


struct ngx_http_flags_sync_conf_s {
    ngx_str_t                   url;
    ngx_addr_t                 *addr;
    ngx_str_t                   host;        /* "host:port", for the log */
    ngx_str_t                   password;    /* empty: no AUTH */
    ngx_str_t                   name;        /* this host in the fleet */
    ngx_uint_t                  db;
    ngx_msec_t                  interval;
    ngx_str_t                   prefix;
    ngx_str_t                   key;         /* key_file=: empty, none */
    /* sentinel://: the Sentinels in order, resolved when the configuration
     * is read, and the name of the master they watch; addr is NULL (the
     * Sentinels name the master) and host shows the master's name */
    ngx_addr_t                 *sentinels;
    ngx_uint_t                  nsentinels;  /* 0: redis:// */
    ngx_str_t                   master_name;

    /* TLS (ngx_http_flags_sync_tls.c): rediss:// or tls=on */
    ngx_uint_t                  tls;
    ngx_uint_t                  tls_verify;  /* tls_verify=, default on */
    ngx_str_t                   tls_name;    /* SNI and the name checked */
    ngx_str_t                   tls_ca;      /* paths; NULL data: none */
    ngx_str_t                   tls_cert;
    ngx_str_t                   tls_key;
#if (NGX_SSL)
    ngx_ssl_t                  *ssl;         /* made by the master */
#endif
};


#define NGX_HTTP_FLAGS_SYNC_SENTINELS_MAX  16


/*
 * A reply being read by hiredis's reader, bounded: hiredis 0.14 bounds
 * neither a bulk string's length nor an array's element count, so the
 * reader made by ngx_http_flags_sync_reader() counts the elements and
 * string bytes of the reply being read and fails past max_elements or
 * max_bytes, with too_large set.  The connection to Redis and each
 * connection to a Sentinel hold one.
 */
typedef struct {
    size_t                          max_elements;
    size_t                          max_bytes;
    size_t                          elements;
    size_t                          bytes;
    ngx_uint_t                      too_large;
} ngx_http_flags_sync_bound_t;


typedef struct ngx_http_flags_sync_sentinel_s  ngx_http_flags_sync_sentinel_t;


/* a project's last round: per flag what it read and decided (the
 * baseline moves to what was sent when the answer arrives) */
/* ngx_http_flags_version_t.sync_ramp_seen: 0, the fleet never answered
 * this ramp here (this host's copy knows nothing unless a state file
 * restored it); SEEN, answered since Redis was last away; SEEN_BEFORE,
 * answered before, not since.  A round sends this host's copy as a seed
 * unless SEEN. */
#define NGX_HTTP_FLAGS_SYNC_SEEN         1
#define NGX_HTTP_FLAGS_SYNC_SEEN_BEFORE  2


/* a write of a runtime project's definitions proposed to the fleet, in
 * the zone (ngx_http_flags_pversion_t.defs_proposal, slab memory, its
 * state under the zone's lock): the request's worker makes it, the
 * syncing worker sends it as a compare-and-set and says how it went */
#define NGX_HTTP_FLAGS_SYNC_P_PENDING    1
#define NGX_HTTP_FLAGS_SYNC_P_SENT       2
#define NGX_HTTP_FLAGS_SYNC_P_DONE       3   /* stored here: seq */
#define NGX_HTTP_FLAGS_SYNC_P_CONFLICT   4   /* the fleet had another */
#define NGX_HTTP_FLAGS_SYNC_P_FAILED     5   /* Redis went away */
#define NGX_HTTP_FLAGS_SYNC_P_ABANDONED  6   /* the request gave up */

typedef struct {
    ngx_uint_t                  state;
    ngx_pid_t                   pid;         /* the request's worker */
    uint64_t                    made_ms;
    uint64_t                    base;
    uint64_t                    version;
    uint64_t                    at_ms;
    ngx_atomic_uint_t           seq;         /* DONE: the publication */
    uint64_t                    found;       /* CONFLICT: the fleet's */
    size_t                      entry_len;
    size_t                      doc_len;
    u_char                      data[1];     /* entry, then document */
} ngx_http_flags_sync_proposal_t;


/* what a round asked of the definitions script */
#define NGX_HTTP_FLAGS_SYNC_D_NONE   0
#define NGX_HTTP_FLAGS_SYNC_D_GET    1
#define NGX_HTTP_FLAGS_SYNC_D_CAS    2
#define NGX_HTTP_FLAGS_SYNC_D_SEED   3

/* a version sent (CAS, seed), kept by the syncing worker until answered */
typedef struct {
    uint64_t                    version;
    uint64_t                    at_ms;
    ngx_str_t                   entry;
    ngx_str_t                   doc;
} ngx_http_flags_sync_sent_t;


typedef struct {
    /* the definitions its flags are of: taken when a round starts, held
     * (refs) until the next round takes another
     * (ngx_http_flags_sync_defs_hold()) */
    ngx_http_flags_defs_t      *defs;
    fl_sync_flag_t             *flags;
    ngx_uint_t                  flags_heap;   /* flags is ngx_alloc()'s */
    ngx_msec_t                  refused_log;  /* a ramp's item refused:
                                               * when last logged */
    /* definitions=runtime in the fleet (ngx_http_flags_sync_defs.c) */
    ngx_uint_t                  defs_op;      /* this round's, D_* */
    ngx_uint_t                  defs_seed;    /* the fleet lacks ours */
    uint64_t                    defs_refused; /* the fleet's version this
                                               * host refused (logged), */
    uint64_t                    defs_refused_at;  /* and its time */
    ngx_http_flags_sync_sent_t *defs_sent;    /* CAS or seed in flight */
} ngx_http_flags_sync_project_t;


typedef enum {
    NGX_HTTP_FLAGS_SYNC_OFF = 0,             /* no connection */
    NGX_HTTP_FLAGS_SYNC_ASKING,              /* sentinel://: the Sentinels
                                              * are asked for the master */
    NGX_HTTP_FLAGS_SYNC_CONNECTING,
    NGX_HTTP_FLAGS_SYNC_IDLE,                /* connected, no round */
    NGX_HTTP_FLAGS_SYNC_BUSY                 /* replies awaited */
} ngx_http_flags_sync_state_e;


/* what a reply answers */
typedef enum {
    NGX_HTTP_FLAGS_SYNC_R_AUTH = 0,
    NGX_HTTP_FLAGS_SYNC_R_SELECT,
    NGX_HTTP_FLAGS_SYNC_R_LOAD,
    NGX_HTTP_FLAGS_SYNC_R_ROLE,              /* sentinel://: a master? */
    NGX_HTTP_FLAGS_SYNC_R_EVAL               /* + project index: EVALSHA;
                                              * + projects + index: EVAL;
                                              * + 2 * projects + index:
                                              * the definitions' EVAL */
} ngx_http_flags_sync_reply_e;


typedef struct {
    ngx_http_flags_main_conf_t     *fmcf;
    ngx_http_flags_sync_conf_t     *conf;
    ngx_log_t                      *log;
    ngx_event_t                     tick;
    ngx_event_t                     timeout;
    ngx_event_t                     defs_wake;   /* a proposal waits */
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
    ngx_http_flags_sync_bound_t     bound;

    u_char                          sha[41];
    ngx_uint_t                      has_sha;
    ngx_uint_t                      changed; /* the zone changed: save */
    ngx_http_flags_sync_project_t  *projects;

    /* sentinel:// (ngx_http_flags_sync_sentinel.c), NULL for redis://;
     * then conf is this worker's own copy of the configuration, whose
     * addr and host are the master the Sentinels named last */
    ngx_http_flags_sync_sentinel_t *sentinel;
} ngx_http_flags_sync_t;


/* the definitions a round of the project works on */
static ngx_inline ngx_http_flags_defs_t *
ngx_http_flags_sync_defs(ngx_http_flags_sync_t *s,
    ngx_http_flags_project_t *project)
{
    return s->projects[project
                       - (ngx_http_flags_project_t *) s->fmcf->projects.elts]
           .defs;
}


/* ngx_http_flags_sync_conn.c */
void ngx_http_flags_sync_tick(ngx_event_t *ev);
void ngx_http_flags_sync_connect(ngx_http_flags_sync_t *s);
void ngx_http_flags_sync_timeout(ngx_event_t *ev);
ngx_uint_t ngx_http_flags_sync_owns(ngx_http_flags_sync_t *s);
void ngx_http_flags_sync_close(ngx_http_flags_sync_t *s);
void ngx_http_flags_sync_fail(ngx_http_flags_sync_t *s, const char *why,
    ngx_str_t *detail);
ngx_int_t ngx_http_flags_sync_send(ngx_http_flags_sync_t *s, char *cmd,
    int len, ngx_uint_t kind);
ngx_int_t ngx_http_flags_sync_flush(ngx_http_flags_sync_t *s);
redisReader *ngx_http_flags_sync_reader(ngx_http_flags_sync_bound_t *b);

/* ngx_http_flags_sync_sentinel.c */
ngx_int_t ngx_http_flags_sync_sentinel_init(ngx_http_flags_sync_t *s,
    ngx_cycle_t *cycle);
ngx_int_t ngx_http_flags_sync_sentinel_ask(ngx_http_flags_sync_t *s);
void ngx_http_flags_sync_sentinel_close(ngx_http_flags_sync_t *s);
ngx_int_t ngx_http_flags_sync_sentinel_role(ngx_http_flags_sync_t *s,
    redisReply *reply);
/* ngx_http_flags_sync_tls.c */

/* a TLS connection is ready (error NULL: handshake done, the certificate
 * checked, c's handlers back) or failed (error says why; the caller
 * closes c with ngx_http_flags_sync_tls_close()) */
typedef void (*ngx_http_flags_sync_tls_done_pt)(ngx_http_flags_sync_t *s,
    ngx_connection_t *c, ngx_str_t *error);

ngx_int_t ngx_http_flags_sync_tls_param(ngx_conf_t *cf,
    ngx_http_flags_sync_conf_t *sc, ngx_str_t *value);
char *ngx_http_flags_sync_tls_conf(ngx_conf_t *cf,
    ngx_http_flags_sync_conf_t *sc, ngx_str_t *host);
ngx_int_t ngx_http_flags_sync_tls_start(ngx_http_flags_sync_t *s,
    ngx_connection_t *c, ngx_str_t *peer,
    ngx_http_flags_sync_tls_done_pt done);
ngx_str_t *ngx_http_flags_sync_tls_error(ngx_connection_t *c);
void ngx_http_flags_sync_tls_close(ngx_connection_t *c);

/* ngx_http_flags_sync_round.c */
ngx_int_t ngx_http_flags_sync_round(ngx_http_flags_sync_t *s);
/* a reply as the core reads it (fl_sync_elt_t, its elements in pre-order):
 * how many it has, the first max written (max 0: a count) */
size_t ngx_http_flags_sync_view(redisReply *r, fl_sync_elt_t *view,
    size_t max, size_t i);
ngx_int_t ngx_http_flags_sync_answer(ngx_http_flags_sync_t *s,
    ngx_uint_t pi, redisReply *reply);
void ngx_http_flags_sync_round_done(ngx_http_flags_sync_t *s);

/* ngx_http_flags_sync_defs.c */
ngx_int_t ngx_http_flags_sync_defs_hold(ngx_http_flags_sync_t *s);
ngx_int_t ngx_http_flags_sync_defs_queue(ngx_http_flags_sync_t *s,
    ngx_uint_t pi);
ngx_int_t ngx_http_flags_sync_defs_answer(ngx_http_flags_sync_t *s,
    ngx_uint_t pi, redisReply *reply);
void ngx_http_flags_sync_defs_lost(ngx_http_flags_sync_t *s);
void ngx_http_flags_sync_defs_bound(ngx_http_flags_sync_t *s);
void ngx_http_flags_sync_defs_wake(ngx_event_t *ev);


#endif /* _NGX_HTTP_FLAGS_SYNC_H_INCLUDED_ */
