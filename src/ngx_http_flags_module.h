/*
 * ngx_http_flags_module - feature flags and error-driven rollback in nginx.
 *
 * The C glue shared by the ngx_http_flags_*.c files.  Decisions (parsing,
 * evaluation, counting, the rollback rule, JSON) live in the C++ core behind
 * src/core/flags_core.h; these files translate between nginx and the core.
 * This is the one header they share.
 *
 * One file per nginx concern:
 *   ngx_http_flags_module.c    the module, its directives, configuration,
 *                              and its lifecycle: the zone's init checks
 *                              the state file's directory and restores a
 *                              new zone from it, init_module commits the
 *                              zone and writes the state file, a worker's
 *                              start and exit attach it to the zone and
 *                              start or stop flags_sync
 *   ngx_http_flags_shm.c       the zone, a library of it: generations,
 *                              reload, commit, attach/detach, counting
 *   ngx_http_flags_defs.c      a project's definitions, their one owner:
 *                              loaded, tabled, and handed to a request as
 *                              one snapshot (ngx_http_flags_defs_t)
 *   ngx_http_flags_versions.c  definitions=runtime: versions on disk, in
 *                              the zone, taken by every worker
 *   ngx_http_flags_statefile.c flags_state_file: checks, restore, rewrites
 *   ngx_http_flags_http.c      token, route, request body, JSON answers
 *   ngx_http_flags_control.c   every change of a flag's control state
 *                              (rollbacks, overrides, new definitions) and
 *                              its consequences: version, log, counters,
 *                              state file; and the one entry of failures
 *                              (reports, upstream errors): their cohort,
 *                              source and witness, then the rule
 *   ngx_http_flags_eval.c      the one evaluate-and-count path of answers
 *   ngx_http_flags_ramp.c      ramps: a worker's timer that runs each
 *                              ramp's ticks under the zone's lock
 *   ngx_http_flags_memo.c      a worker's memo of whole answers; its hits
 *                              are counted at the end of the cycle
 *   ngx_http_flags_evaluate.c  GET /flags                    (flags_evaluate)
 *   ngx_http_flags_ingest.c    POST /ingest/errors
 *   ngx_http_flags_reportlog.c flags_error_log: the report log's file and
 *                              its batch, one write(2) an event-loop pass
 *   ngx_http_flags_status.c    flags_status
 *   ngx_http_flags_admin.c     flags_admin
 *   ngx_http_flags_admin_defs.c  flags_admin's definitions routes
 *   ngx_http_flags_dashboard.c flags_dashboard: the operator's page
 *   ngx_http_flags_ofrep.c     OpenFeature OFREP             (flags_ofrep)
 *   ngx_http_flags_sdk.c       flags_sdk: POST {loc}flags, {loc}report
 *   ngx_http_flags_push.c      live push: the cap, the token, the registry
 *                              of push connections and its tick
 *   ngx_http_flags_push_sse.c  OFREP's event stream ({loc}v1/events)
 *   ngx_http_flags_push_ws.c   flags_websocket: handshake, wslay, messages
 *   ngx_http_flags_variables.c $flag_NAME, $flags_enabled, flags_context
 *   ngx_http_flags_upstream.c  flags_upstream_errors, a log-phase handler
 *   ngx_http_flags_metrics.c   flags_metrics: Prometheus text format
 *   ngx_http_flags_sync.c      flags_sync: a fleet through Redis: the
 *                              directive, a worker's start and exit
 *   ngx_http_flags_sync_conn.c its connection, owned by the event loop
 *   ngx_http_flags_sync_round.c  its round: the zone to the core's
 *                              encoding, the answer applied to the zone
 *   ngx_http_flags_sync_tls.c  its TLS (rediss://), nginx's own
 *                              (these share ngx_http_flags_sync.h)
 *
 * Layers.  A file calls only the files below it (and the core); a lower
 * file calls up only through a callback the caller handed it (the report
 * log's ngx_http_flags_logged_pt, the state file's done):
 *
 *   module     ngx_http_flags_module.c: nginx's hooks (directives,
 *              configuration, init module, process start and exit) call
 *              each file's directive, handler and lifecycle entries
 *   handlers   evaluate, ingest, status, metrics, admin, dashboard, ofrep,
 *              sdk, push (with its transports push_sse and push_ws),
 *              variables, upstream: what nginx runs for a request (content
 *              handlers, variables, the log phase, a push connection's
 *              events).  A handler calls no other handler, except where
 *              one serves the other's path:
 *                sdk -> ingest      POST {loc}report is the report path
 *                admin -> admin_defs  {loc}definitions/ is its route
 *                ofrep -> push      {loc}v1/events is the SSE stream
 *                dashboard -> push  {loc}events is the SSE stream
 *                dashboard -> status  {loc}status.json is its document
 *                upstream -> variables  the flags the request read
 *   services   sync (sync, sync_conn, sync_round), ramp, reportlog,
 *              control, then memo, eval and statefile: the fleet and the
 *              ramps' timer (both hand their changes to control), the
 *              report log, control changes (the one entry of failures,
 *              every change of a control block; they save the state file
 *              and fold the memo before deciding), the memo of answers
 *              (which counts through eval), the evaluate-and-count path,
 *              the state file
 *   http       ngx_http_flags_http.c: what handlers and services share
 *              (token, route, body, answers, find_project, pool_alloc,
 *              a content handler's directive)
 *   defs       ngx_http_flags_defs.c: a project's definitions; every file
 *              above reads a project's flags through it.  Their runtime
 *              versions (ngx_http_flags_versions.c) are a service: http
 *              calls up to it once, when a token names a runtime project
 *              (a request takes the newest version before it reads one)
 *   zone       ngx_http_flags_shm.c: the zone, a library of it, and what
 *              lives in it: counting, a ramp's inputs and its percentage
 *              in the control word, flags_sync's standing
 *   core       flags_core.h: every decision; it calls no glue
 */

#ifndef _NGX_HTTP_FLAGS_MODULE_H_INCLUDED_
#define _NGX_HTTP_FLAGS_MODULE_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "flags_core.h"


#define NGX_HTTP_FLAGS_ZONE_NAME      "flags"
#define NGX_HTTP_FLAGS_ZONE_SIZE      (8 * 1024 * 1024)
/* in the directory of nginx's compiled-in access log */
#define NGX_HTTP_FLAGS_ERROR_LOG      "flags-errors.log"
/* reports hold personal data: not readable by everyone */
#define NGX_HTTP_FLAGS_ERROR_LOG_ACCESS  0640
#define NGX_HTTP_FLAGS_STATE_FILE_MAX (16 * 1024 * 1024)
/* flags_definitions_max_size's default */
#define NGX_HTTP_FLAGS_DEFINITIONS_MAX_SIZE  (4 * 1024 * 1024)


/*
 * The zone holds, per (project, flag), a node with the lifetime totals and
 * the versions of the flag: one per definition (def_hash), each with its
 * control block (rollback, override) and a list of window blocks, the
 * head being where events are counted.  Every object carries the
 * configuration generations that use it; see ngx_http_flags_shm.c for
 * when it may be reused.
 */

#define NGX_HTTP_FLAGS_MAX_PROCS      256
/* how long past its due time a reader waits for a worker's fold: one
 * that has not folded by then was killed or is stuck, and the reader
 * answers without its held counts */
#define NGX_HTTP_FLAGS_LATE_MSEC      1000
/* tokens up to this long are compared from a stack buffer */
#define NGX_HTTP_FLAGS_TOKEN_PAD      256
#define NGX_HTTP_FLAGS_KEY_LEN        FL_KEY_LEN        /* project\0flag */


typedef struct ngx_http_flags_window_s  ngx_http_flags_window_t;

struct ngx_http_flags_window_s {
    ngx_http_flags_window_t    *next;
    ngx_uint_t                  retired;     /* generation that replaced it */
    uint64_t                    block[1];    /* fl_window_t, then buckets */
};

#define ngx_http_flags_window_block(w)  ((fl_window_t *) (void *) (w)->block)


typedef struct ngx_http_flags_version_s  ngx_http_flags_version_t;

struct ngx_http_flags_version_s {
    ngx_http_flags_version_t   *next;
    ngx_uint_t                  first_gen;
    ngx_uint_t                  last_gen;
    ngx_http_flags_window_t    *windows;     /* the head counts events */
    fl_control_t                ctl;
    /* the definition's ramp, if it has one (ngx_http_flags_ramp.c) */
    fl_ramp_t                   ramp;
    /* and the witnesses of its regression rule (NULL without a ramp) */
    fl_witness_t               *witness;
    /* when a configuration using it was first committed, or a runtime
     * version first bound it (0: not yet) */
    uint64_t                    defined_ms;
    /* a runtime version changed or removed the flag: never bound again
     * (its mitigations moved to the new version, ngx_http_flags_defs.c) */
    ngx_uint_t                  superseded;
    /* flags_sync: this definition's rollback and override as the fleet
     * last said (ngx_http_flags_sync.c); only the syncing worker uses it */
    uint64_t                    sync_known;
    /* flags_sync and a ramp: flags_admin's actions the fleet has not
     * acknowledged yet (fl_sync_ramp_actions_push(), under the zone's
     * lock), and whether the fleet answered this ramp (never, since
     * Redis was last away, before: NGX_HTTP_FLAGS_SYNC_SEEN...) */
    uint64_t                    sync_ramp_actions;
    ngx_uint_t                  sync_ramp_seen;
};


typedef struct {
    ngx_str_node_t              sn;          /* key: crc32 + name */
    ngx_queue_t                 queue;       /* every node */
    ngx_uint_t                  first_gen;
    ngx_uint_t                  last_gen;
    ngx_uint_t                  in_tree;
    fl_totals_t                 totals;
    /* flags_sync: of the totals, what Redis acknowledged (or what was
     * dropped); kept here so the next syncing worker, of this generation
     * or the next, continues from it (ngx_http_flags_sync.c) */
    uint64_t                    sync_base_errors;
    uint64_t                    sync_base_enabled;
    /* and of the cohorts' totals, for a ramp the fleet runs */
    uint64_t                    sync_base_on;
    uint64_t                    sync_base_off;
    uint64_t                    sync_base_on_errors;
    uint64_t                    sync_base_off_errors;
    ngx_uint_t                  sync_based;  /* 0: take the totals */
    /* of what was sent, the cumulative counts Redis acknowledged under
     * this zone's incarnation (docs/sync.md, "What a failover loses") */
    uint64_t                    sync_acked_errors;
    uint64_t                    sync_acked_enabled;
    /* and of the cohorts', for a ramp the fleet runs */
    uint64_t                    sync_acked_on;
    uint64_t                    sync_acked_off;
    uint64_t                    sync_acked_on_errors;
    uint64_t                    sync_acked_off_errors;
    ngx_http_flags_version_t   *versions;
    size_t                      key_len;
    u_char                      key[1];
} ngx_http_flags_node_t;


/*
 * A project's answer version: bumped by every change that can change an
 * answer of the project (a rollback trips or is cleared, an override is
 * set or removed, a reload commits other definitions).  Found by name, so
 * every generation shares it; read without the lock.  Never freed: one
 * record per project name the zone has seen.
 */

typedef struct ngx_http_flags_pversion_s  ngx_http_flags_pversion_t;

struct ngx_http_flags_pversion_s {
    ngx_http_flags_pversion_t  *next;
    ngx_atomic_t                version;
    uint64_t                    defs;        /* the committed definitions */
    /* flags_sync: the Redis epoch and version of the project's controls
     * this host last read (ngx_http_flags_sync.c) */
    uint64_t                    sync_epoch;
    uint64_t                    sync_ver;
    /* and how many of its calls Redis acknowledged; resend: Redis said
     * it lacks some, the next round sends every flag's counts */
    uint64_t                    sync_calls;
    ngx_uint_t                  sync_resend;
    /* definitions=runtime (ngx_http_flags_versions.c): the version this
     * host serves, when it was made and its document (slab memory, under
     * the lock); the worker writing the next one (its pid, 0: none) */
    ngx_atomic_t                defs_version;
    uint64_t                    defs_at_ms;
    u_char                     *defs_doc;
    size_t                      defs_len;
    ngx_atomic_t                defs_writer;
    uint64_t                    defs_writer_ms;
    /* versions refused, by ngx_http_flags_rejected_e (flags_metrics) */
    ngx_atomic_t                defs_rejected[4];
    /* flags_sync: a write proposed to the fleet, NULL: none (slab
     * memory, under the lock: ngx_http_flags_sync_defs.c) */
    void                       *defs_proposal;
    size_t                      len;
    u_char                      name[1];
};


/* A process that may use the zone: a worker and its generation. */
typedef struct {
    ngx_pid_t                   pid;
    ngx_uint_t                  gen;
    /* the last publication of runtime definitions it serves */
    ngx_atomic_t                defs_seq;
    /* the evaluations it holds (ngx_http_flags_eval.c) are in the zone by
     * this ngx_current_msec; 0: it holds none */
    ngx_atomic_t                counts_due;
    /* its folds of held counts so far: a reader that saw it hold some
     * waits for this to move */
    ngx_atomic_t                counts_folds;
} ngx_http_flags_proc_t;


/* The zone's header, parked in shpool->data. */
typedef struct {
    ngx_rbtree_t                rbtree;
    ngx_rbtree_node_t           sentinel;
    ngx_queue_t                 queue;
    ngx_uint_t                  nnodes;
    ngx_uint_t                  generation;  /* the last one prepared */
    ngx_uint_t                  committed;   /* the one whose workers run */
    ngx_uint_t                  untracked;   /* a worker found no slot */
    ngx_uint_t                  retired;     /* replaced by another zone */
    ngx_atomic_t                log_torn;    /* a report line was cut */
    ngx_atomic_t                state_seq;   /* the last state snapshot */
    ngx_atomic_t                state_written; /* the one on disk */
    /* reports refused, by fl_refused_t (flags_metrics) */
    ngx_atomic_t                refused[FL_REFUSED_MAX];
    ngx_http_flags_pversion_t  *pversions;
    ngx_http_flags_proc_t       procs[NGX_HTTP_FLAGS_MAX_PROCS];
    /* flags_sync (ngx_http_flags_sync.c): the syncing worker's lock,
     * expiry second << 32 | pid, and what flags_status and flags_metrics
     * show of the sync */
    ngx_atomic_t                sync_lock;
    ngx_atomic_t                sync_connected;
    ngx_atomic_t                sync_last_ok_ms;
    ngx_atomic_t                sync_round_ms;
    ngx_atomic_t                sync_failures;
    ngx_atomic_t                sync_rounds;
    /* Redis was away: the next round drops what was counted meanwhile
     * in the flags whose window is not longer than the outage */
    ngx_atomic_t                sync_rebase;
    /* this zone's random id in the fleet, made by the first round (0:
     * not yet), kept across reloads (docs/sync.md, "What a failover
     * loses") */
    uint64_t                    sync_incarnation;
    /* staleness (flags_status's staleSeconds), on the monotonic clock
     * every process of the host shares (ngx_current_msec): the end of the
     * last round completed, and when the host began to sync; 0: not yet */
    ngx_atomic_t                sync_ok_msec;
    ngx_atomic_t                sync_start_msec;
    /* flags_sync sentinel://: the master the Sentinels named last
     * ("host:port", 0 bytes: none yet) and the Sentinel that named it
     * (its index in the directive + 1); under the zone's lock */
    u_char                      sync_master[NGX_SOCKADDR_STRLEN];
    size_t                      sync_master_len;
    ngx_uint_t                  sync_sentinel;
    /* the ring of recent control changes (docs/dashboard.md): the last
     * sequence number given, and the slots (seq % FL_EVENTS_MAX); NULL
     * when the zone had no room for them (a zone of a few pages) */
    ngx_atomic_t                event_seq;
    fl_event_t                 *events;
    /* publications of runtime definitions (ngx_http_flags_versions.c) */
    ngx_atomic_t                defs_seq;
} ngx_http_flags_shctx_t;


typedef struct {
    ngx_str_t                   name;
    fl_rollback_policy_t        policy;      /* resolved: mode ON or OFF */
    uint32_t                    rollout_milli;
    uint64_t                    def_hash;
    ngx_http_flags_node_t      *node;        /* NULL when the zone was full */
    ngx_http_flags_version_t   *version;
    ngx_http_flags_version_t   *replaced;    /* for the commit's carry */

    /* what the request path touches, resolved at bind time: the window
     * is the head when this generation was prepared (a later head is
     * merged with it only once this generation has exited) */
    fl_totals_t                *totals;
    fl_control_t               *ctl;
    fl_window_t                *window;

    /* its ramp: the definition (the project's, NULL: none) and the state
     * in the zone (NULL when the zone was full) */
    const fl_ramp_def_t        *ramp_def;
    fl_ramp_t                  *ramp;
    /* a ramped flag's witnesses (NULL: none, or the zone was full) */
    fl_witness_t               *witness;
} ngx_http_flags_flag_t;


/*
 * A project's definitions as a process serves them (ngx_http_flags_defs.c):
 * the core's project, the table of its flags bound to the zone, their
 * digest and version.  A request reads one snapshot from start to end
 * (ngx_http_flags_defs_pin()); a change of definitions gives the project
 * another snapshot, never edits one.
 */

typedef struct ngx_http_flags_defs_s     ngx_http_flags_defs_t;

/* evaluations counted in a worker, folded into the zone at the end of the
 * event cycle (ngx_http_flags_eval.c) */
typedef struct {
    uint32_t                    evaluations;
    uint32_t                    enabled;
} ngx_http_flags_pending_t;
typedef struct ngx_http_flags_project_s  ngx_http_flags_project_t;

struct ngx_http_flags_defs_s {
    fl_project_t               *core;
    ngx_uint_t                  nflags;
    ngx_http_flags_flag_t      *flags;
    uint64_t                    hash;        /* digest of the definitions */
    uint64_t                    version;     /* 1, 2, ... (a file's: 1) */
    uint64_t                    at_ms;       /* when it was made, 0: at load */
    ngx_uint_t                  refs;        /* requests that pinned it */
    ngx_pool_t                 *pool;        /* its own (runtime), or NULL */
    ngx_http_flags_project_t   *project;
    /* definitions=runtime: the document as stored (the flags file's
     * schema), and the next snapshot replaced in this process */
    u_char                     *doc;
    size_t                      doc_len;
    ngx_http_flags_defs_t      *retired;
    /* per variable index of the core module, the flag a $flag_ variable
     * reads, or -1 (ngx_http_flags_variables.c); NULL: found by name */
    ngx_int_t                  *flag_of_var;
    /* this worker's evaluations not yet in the zone, per flag, and the
     * next snapshot with some (ngx_http_flags_eval.c) */
    ngx_http_flags_pending_t   *pending;
    uint32_t                    pending_answers;  /* of every flag */
    /* the on values of those answers, not yet in pending (fl_tally_add()),
     * and how many were added since the last drain */
    uint64_t                   *tally;
    uint32_t                    tally_adds;
    ngx_http_flags_defs_t      *next_pending;
    unsigned                    on_fold_list:1;
    /* this worker's reading of the flags' control blocks, good while the
     * project's answer version is ctl_version (ngx_http_flags_eval.c) */
    unsigned                    ctl_valid:1;
    ngx_atomic_uint_t           ctl_version;
    uint32_t                   *ctl_effective;
    uint8_t                    *ctl_sw;
    fl_etag_prefix_t            ctl_etag;    /* GET /flags' ETag so far */
};


struct ngx_http_flags_project_s {
    ngx_str_t                   name;
    ngx_array_t                 tokens;      /* of ngx_str_t */
    ngx_str_t                   file;        /* absolute path */
    ngx_uint_t                  runtime;     /* definitions=runtime */
    ngx_str_t                   conf_file;   /* where flags_project is */
    ngx_uint_t                  conf_line;
    /* the definitions served now: read through ngx_http_flags_defs() */
    ngx_http_flags_defs_t      *defs;
    ngx_http_flags_pversion_t  *pversion;    /* NULL when the zone was full */
};

/* the project's definitions now (a request that spans events pins them:
 * ngx_http_flags_defs_pin()) */
#define ngx_http_flags_defs(project)  ((project)->defs)


/* flags_context and the variables' tables (ngx_http_flags_variables.c) */
typedef struct ngx_http_flags_context_s    ngx_http_flags_context_t;
typedef struct ngx_http_flags_vars_conf_s  ngx_http_flags_vars_conf_t;
/* flags_sync (ngx_http_flags_sync.c) */
typedef struct ngx_http_flags_sync_conf_s  ngx_http_flags_sync_conf_t;


typedef struct {
    ngx_cycle_t                *cycle;
    ngx_shm_zone_t             *shm_zone;
    ngx_slab_pool_t            *shpool;
    ngx_http_flags_shctx_t     *sh;
    ngx_str_t                   zone_name;
    ssize_t                     zone_size;

    ngx_array_t                 projects;    /* of ngx_http_flags_project_t */
    size_t                      token_max;   /* the longest token */
    fl_rollback_policy_t        rollback;    /* the http-level policy */

    ngx_open_file_t            *error_log;   /* NULL when "off" */
    ngx_str_t                   project_file; /* of the first flags_project */
    ngx_uint_t                  project_line;
    ngx_str_t                   state_file;  /* empty when off */
    ngx_str_t                   state_file_conf;  /* "file:line" */
    ngx_str_t                   state_thread_pool_name;
#if (NGX_THREADS)
    ngx_thread_pool_t          *state_thread_pool;  /* NULL: write at once */
#endif
    ngx_uint_t                  rollback_set;
    ngx_uint_t                  gen;         /* this configuration's */
    ngx_uint_t                  log_level;   /* flags_log_level and its */
    ngx_uint_t                  log_routine; /* routine= at http level */
    ngx_uint_t                  push_max;    /* push connections a worker */
    ngx_str_t                   push_max_file;  /* where it was set */
    ngx_uint_t                  push_max_line;
    ngx_http_flags_vars_conf_t *vars;        /* NULL until one is needed */
    ngx_http_flags_sync_conf_t *sync;        /* NULL: no flags_sync */
    ngx_msec_t                  sync_interval;   /* its interval= */
    ngx_uint_t                  sync_tls;        /* rediss://, tls=on */
    ngx_array_t                *upstream_lists; /* flags= of
                                                 * flags_upstream_errors,
                                                 * checked at
                                                 * postconfiguration */

    /* flags_admin (ngx_http_flags_admin.c): its locations, checked for
     * access control once every module has merged; auth_basic's
     * ctx_index (NGX_ERROR: not compiled in) for the user it logs */
    ngx_array_t                *admin_locations;
    ngx_int_t                   auth_basic_index;
} ngx_http_flags_main_conf_t;


typedef struct {
    ngx_uint_t                  max_traits;
    size_t                      max_report_size;
    size_t                      definitions_max_size;
    ngx_uint_t                  log_level;   /* rollbacks */
    ngx_uint_t                  log_routine; /* routine=: other changes */
    ngx_msec_t                  push_heartbeat;
    ngx_flag_t                  ofrep_events;

    /* flags_context, flags_upstream_errors (docs/variables.md) */
    ngx_http_flags_context_t   *context;     /* NULL: none in scope */
    ngx_flag_t                  upstream_errors;
    ngx_uint_t                  upstream_status_min;
    ngx_uint_t                  upstream_status_max;
    ngx_array_t                *upstream_flags; /* of ngx_str_t; NULL: the
                                                 * flags read by name */

    /* flags_dashboard admin=PATH (empty: the page is read-only) */
    ngx_str_t                   dashboard_admin;

    /* a flags_admin location: its server's server_name entries, copied
     * at merge (nginx keeps the server's own array in the configuration's
     * temporary pool, freed once the configuration is read) */
    ngx_array_t                *admin_names;

    /* the content handler one of our directives set, and where */
    ngx_http_handler_pt         handler;
    ngx_str_t                  *handler_directive;
    ngx_str_t                   handler_file;
    ngx_uint_t                  handler_line;
} ngx_http_flags_loc_conf_t;


extern ngx_module_t  ngx_http_flags_module;


/* ngx_http_flags_shm.c */
ngx_int_t ngx_http_flags_init_zone(ngx_shm_zone_t *shm_zone, void *data);
/* the zone of a cycle's configuration, NULL without one; the lifecycle
 * (ngx_http_flags_module.c) commits it, attaches and detaches workers */
ngx_http_flags_main_conf_t *ngx_http_flags_zone_conf(ngx_cycle_t *cycle);
void ngx_http_flags_zone_commit(ngx_cycle_t *cycle,
    ngx_http_flags_main_conf_t *fmcf);
void ngx_http_flags_zone_attach(ngx_cycle_t *cycle,
    ngx_http_flags_main_conf_t *fmcf);
void ngx_http_flags_zone_detach(ngx_http_flags_main_conf_t *fmcf);
ngx_uint_t ngx_http_flags_zone_defs_committed(
    ngx_http_flags_main_conf_t *fmcf, ngx_http_flags_project_t *project);
ngx_uint_t ngx_http_flags_zone_bind_defs(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_project_t *project, ngx_http_flags_defs_t *old,
    ngx_http_flags_defs_t *defs, u_char *created, ngx_log_t *log);
void ngx_http_flags_zone_counts_due(ngx_http_flags_main_conf_t *fmcf,
    ngx_msec_t due);
ngx_msec_t ngx_http_flags_zone_counts_wait(ngx_http_flags_main_conf_t *fmcf,
    ngx_atomic_uint_t *marks, ngx_uint_t first);
void ngx_http_flags_zone_defs_ack(ngx_http_flags_main_conf_t *fmcf,
    ngx_atomic_uint_t seq);
ngx_uint_t ngx_http_flags_zone_defs_acked(ngx_http_flags_main_conf_t *fmcf,
    ngx_atomic_uint_t seq);
void ngx_http_flags_ramp_input(ngx_http_flags_defs_t *defs,
    ngx_http_flags_flag_t *flag, fl_ramp_input_t *in);
void ngx_http_flags_window_series(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_flag_t *flag, int64_t now, fl_series_t *t);
void ngx_http_flags_window_sums(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_version_t *v, int64_t now, uint32_t seconds,
    uint64_t *enabled, uint64_t *errors, uint64_t *sources);
ngx_uint_t ngx_http_flags_source_ages(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_flag_t *flag, int64_t now, uint32_t *keys, uint32_t *ages);
void ngx_http_flags_snapshot(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_flag_t *flag, int64_t now, fl_state_snapshot_t *s);
ngx_uint_t ngx_http_flags_clear_rollback(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_flag_t *flag);
void ngx_http_flags_set_override(ngx_http_flags_flag_t *flag,
    fl_override_kind_t kind, uint32_t milli);
size_t ngx_http_flags_zone_saved(ngx_http_flags_main_conf_t *fmcf,
    fl_saved_flag_t *e, u_char *keys, fl_ramp_t *ramps, size_t max,
    ngx_atomic_uint_t *seq);
int64_t ngx_http_flags_now_sec(void);
/* the ramp's percentage into the control word, as its state says (a
 * state restored from the state file) */
void ngx_http_flags_zone_ramp_apply(ngx_http_flags_flag_t *flag);
/* flags_sync's standing in the zone: what flags_status and flags_metrics
 * show; 0 when flags_sync is off */
typedef struct {
    ngx_uint_t                  connected;
    uint64_t                    last_ok_ms;  /* 0: never */
    uint64_t                    lag_ms;      /* since the last success */
    uint64_t                    stale_ms;    /* the same, monotonic; before
                                              * the first: since the sync
                                              * began (stale_never set) */
    ngx_uint_t                  stale_never;
    uint64_t                    interval_ms;
    uint64_t                    round_ms;    /* the last round's duration */
    uint64_t                    failures;
    uint64_t                    rounds;
    ngx_pid_t                   owner;
} ngx_http_flags_sync_state_t;
ngx_uint_t ngx_http_flags_zone_sync_state(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_sync_state_t *st);
/* 1 when flags_sync is configured and Redis is away (not connected, or
 * no round answered for a few intervals): the fleet's ramps freeze here
 * and the absolute rule guards their flags again */
ngx_uint_t ngx_http_flags_zone_sync_away(ngx_http_flags_main_conf_t *fmcf);
ngx_atomic_uint_t ngx_http_flags_answer_version(
    ngx_http_flags_project_t *project);
ngx_uint_t ngx_http_flags_zone_current(ngx_http_flags_main_conf_t *fmcf);
/* flags_metrics: a refused report (reason: fl_refused_t), the zone's pages */
void ngx_http_flags_refused(ngx_http_request_t *r, ngx_uint_t reason);
void ngx_http_flags_zone_bytes(ngx_http_flags_main_conf_t *fmcf,
    uint64_t *used, uint64_t *nfree);
uint64_t ngx_http_flags_now_ms(void);
/* the ring of recent control changes: add one (who and detail may be
 * empty), copy them all out (FL_EVENTS_MAX slots, a free one has seq 0),
 * the last sequence number */
void ngx_http_flags_event_add(ngx_http_flags_main_conf_t *fmcf,
    fl_event_kind_t kind, fl_event_by_t by, ngx_str_t *project,
    ngx_str_t *flag, ngx_str_t *who, u_char *detail, size_t len);
void ngx_http_flags_events_read(ngx_http_flags_main_conf_t *fmcf,
    fl_event_t *out);
ngx_atomic_uint_t ngx_http_flags_events_seq(ngx_http_flags_main_conf_t *fmcf);

/* ngx_http_flags_defs.c: a project's definitions, their one owner */
char *ngx_http_flags_defs_conf(ngx_conf_t *cf,
    ngx_http_flags_project_t *project);
ngx_http_flags_defs_t *ngx_http_flags_defs_table(ngx_pool_t *pool,
    fl_project_t *core);
ngx_int_t ngx_http_flags_defs_policies(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_defs_t *defs);
ngx_http_flags_defs_t *ngx_http_flags_defs_pin(ngx_http_request_t *r,
    ngx_http_flags_project_t *project);
void ngx_http_flags_defs_switch(ngx_http_flags_project_t *project,
    ngx_http_flags_defs_t *defs);
fl_status_t ngx_http_flags_defs_parse(ngx_http_flags_project_t *project,
    const u_char *doc, size_t len, fl_project_t **core, char *err,
    size_t err_len);
ngx_http_flags_defs_t *ngx_http_flags_defs_make(
    ngx_http_flags_main_conf_t *fmcf, ngx_http_flags_project_t *project,
    const u_char *doc, size_t len, fl_project_t *core, uint64_t version,
    uint64_t at_ms, ngx_log_t *log);
void ngx_http_flags_defs_collect(void);

/* ngx_http_flags_versions.c: definitions=runtime, a project's versions */
#define NGX_HTTP_FLAGS_VERSIONS_KEEP  50

typedef enum {
    NGX_HTTP_FLAGS_REJECTED_INVALID = 0,    /* does not load: 400 */
    NGX_HTTP_FLAGS_REJECTED_TOO_LARGE,      /* over its size: 413 */
    NGX_HTTP_FLAGS_REJECTED_CONFLICT,       /* If-Match: 412 */
    NGX_HTTP_FLAGS_REJECTED_SIGNATURE       /* flags_sync's key */
} ngx_http_flags_rejected_e;

ngx_uint_t ngx_http_flags_versions_list(ngx_pool_t *pool,
    ngx_http_flags_main_conf_t *fmcf, ngx_http_flags_project_t *project,
    uint64_t *out, ngx_uint_t max);
ngx_int_t ngx_http_flags_versions_read(ngx_pool_t *pool,
    ngx_http_flags_main_conf_t *fmcf, ngx_http_flags_project_t *project,
    uint64_t version, ngx_str_t *entry, ngx_str_t *doc, time_t *mtime,
    ngx_log_t *log);
ngx_int_t ngx_http_flags_versions_write(ngx_pool_t *pool,
    ngx_http_flags_main_conf_t *fmcf, ngx_http_flags_project_t *project,
    uint64_t version, ngx_str_t *entry, ngx_str_t *doc, ngx_log_t *log);
/* the same in three steps, the middle one for a thread */
typedef struct {
    u_char                     *tmp;
    u_char                     *path;
    uint64_t                    version;
    ngx_str_t                   entry;
    ngx_str_t                   doc;
} ngx_http_flags_versions_file_t;
typedef struct {
    u_char                     *dir;
    ngx_http_flags_versions_file_t  files[2];
    ngx_uint_t                  nfiles;
    uint64_t                    newest;
    ngx_uint_t                  written;
    ngx_err_t                   err;         /* of the step that failed */
    const char                 *failed;      /* NULL: none */
    u_char                     *name;        /* the file it failed on */
} ngx_http_flags_versions_job_t;
ngx_int_t ngx_http_flags_versions_job(ngx_pool_t *pool,
    ngx_http_flags_main_conf_t *fmcf, ngx_http_flags_project_t *project,
    ngx_http_flags_versions_job_t *job, uint64_t version, ngx_str_t *entry,
    ngx_str_t *doc);
void ngx_http_flags_versions_run(ngx_http_flags_versions_job_t *job);
ngx_int_t ngx_http_flags_versions_done(ngx_pool_t *pool,
    ngx_http_flags_main_conf_t *fmcf, ngx_http_flags_project_t *project,
    ngx_http_flags_versions_job_t *job, ngx_log_t *log);
ngx_int_t ngx_http_flags_versions_conf(ngx_conf_t *cf,
    ngx_http_flags_main_conf_t *fmcf, ngx_http_flags_project_t *project);
u_char *ngx_http_flags_versions_reserve(ngx_http_flags_main_conf_t *fmcf,
    size_t len);
ngx_atomic_uint_t ngx_http_flags_versions_publish(
    ngx_http_flags_main_conf_t *fmcf, ngx_http_flags_project_t *project,
    ngx_http_flags_defs_t *defs, u_char *buf);
void ngx_http_flags_versions_commit(ngx_http_flags_main_conf_t *fmcf,
    ngx_log_t *log);
void ngx_http_flags_versions_refresh(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_project_t *project, ngx_log_t *log);
void ngx_http_flags_versions_refresh_all(ngx_http_flags_main_conf_t *fmcf,
    ngx_log_t *log);
ngx_uint_t ngx_http_flags_versions_apply(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_project_t *project, ngx_http_flags_defs_t *defs,
    u_char *created, ngx_log_t *log);
ngx_int_t ngx_http_flags_versions_init_process(ngx_cycle_t *cycle,
    ngx_http_flags_main_conf_t *fmcf);
ngx_int_t ngx_http_flags_versions_lock(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_project_t *project);
void ngx_http_flags_versions_unlock(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_project_t *project);
uint64_t ngx_http_flags_versions_current(ngx_http_flags_project_t *project);
void ngx_http_flags_versions_rejected(ngx_http_flags_project_t *project,
    ngx_uint_t reason);

/* ngx_http_flags_statefile.c */
ngx_int_t ngx_http_flags_check_state_dir(ngx_http_flags_main_conf_t *fmcf,
    ngx_cycle_t *cycle, ngx_log_t *log);
void ngx_http_flags_restore_state(ngx_http_flags_main_conf_t *fmcf,
    ngx_log_t *log);
ngx_int_t ngx_http_flags_save_state(ngx_http_flags_main_conf_t *fmcf,
    ngx_log_t *log, u_char *err, size_t err_len);
typedef ngx_int_t (*ngx_http_flags_state_done_pt)(ngx_http_request_t *r,
    ngx_int_t rc, u_char *err);
ngx_int_t ngx_http_flags_state_changed(ngx_http_flags_main_conf_t *fmcf,
    ngx_log_t *log, ngx_http_request_t *r, ngx_http_flags_state_done_pt done);

/* ngx_http_flags_http.c: a content handler's directive (cmd->post) */
char *ngx_http_flags_set_handler(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
/* ngx_http_flags_http.c */
ngx_int_t ngx_http_flags_authenticate(ngx_http_request_t *r,
    ngx_http_flags_project_t **project);
ngx_int_t ngx_http_flags_authenticate_report(ngx_http_request_t *r,
    ngx_http_flags_project_t **project);
ngx_http_flags_project_t *ngx_http_flags_token_project(ngx_http_request_t *r,
    const u_char *token, size_t len);
ngx_int_t ngx_http_flags_refuse_token(ngx_http_request_t *r, ngx_uint_t bare);
ngx_int_t ngx_http_flags_authenticate_bare(ngx_http_request_t *r,
    ngx_http_flags_project_t **project, ngx_str_t *token);
ngx_int_t ngx_http_flags_send_error(ngx_http_request_t *r, ngx_uint_t status,
    const char *code, const char *message);
ngx_int_t ngx_http_flags_send_error_len(ngx_http_request_t *r,
    ngx_uint_t status, const char *code, const u_char *message, size_t len);
ngx_int_t ngx_http_flags_set_etag(ngx_http_request_t *r, uint64_t etag);
/* an answer's tag (FL_ETAG_LEN bytes as sent, and its value): the ETag
 * header, and whether If-None-Match names it */
ngx_int_t ngx_http_flags_etag_text(ngx_http_request_t *r, const u_char *text);
ngx_uint_t ngx_http_flags_none_match(ngx_http_request_t *r,
    const u_char *text, uint64_t etag);
ngx_int_t ngx_http_flags_send_not_modified(ngx_http_request_t *r);
ngx_table_elt_t *ngx_http_flags_add_header(ngx_http_request_t *r,
    const char *name, u_char *value, size_t len);
ngx_int_t ngx_http_flags_method_not_allowed(ngx_http_request_t *r,
    const char *allow);
ngx_int_t ngx_http_flags_route(ngx_http_request_t *r, ngx_str_t *route);
ngx_int_t ngx_http_flags_route_not_found(ngx_http_request_t *r,
    const char *const *routes);
ngx_int_t ngx_http_flags_send_body(ngx_http_request_t *r, ngx_uint_t status,
    u_char *body, size_t len);
ngx_int_t ngx_http_flags_too_large(ngx_http_request_t *r, size_t max,
    const char *what, ngx_uint_t count);
/* Content-Type is application/json, with or without parameters */
ngx_int_t ngx_http_flags_is_json(ngx_table_elt_t *h);
ngx_int_t ngx_http_flags_read_json_body(ngx_http_request_t *r, void *ctx,
    const char *what, ngx_uint_t count, ngx_http_client_body_handler_pt post);
ngx_int_t ngx_http_flags_read_body(ngx_http_request_t *r, void *ctx,
    ngx_http_client_body_handler_pt post);
ngx_int_t ngx_http_flags_body_whole(ngx_http_request_t *r, size_t max,
    ngx_str_t *body);
ngx_int_t ngx_http_flags_send_json(ngx_http_request_t *r, ngx_uint_t status,
    u_char *body, size_t len);
ngx_int_t ngx_http_flags_send_empty(ngx_http_request_t *r, ngx_uint_t status);
ngx_http_flags_project_t *ngx_http_flags_find_project(
    ngx_http_flags_main_conf_t *fmcf, ngx_str_t *name);
void *ngx_http_flags_pool_alloc(void *ctx, size_t size);
off_t ngx_http_flags_body_size(ngx_http_request_t *r);
ngx_int_t ngx_http_flags_body_pieces(ngx_http_request_t *r,
    ngx_int_t (*fn)(void *ctx, u_char *p, size_t len), void *ctx);

/* ngx_http_flags_reportlog.c: flags_error_log (the report log) */
char *ngx_http_flags_error_log(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
ngx_int_t ngx_http_flags_report_log_conf(ngx_conf_t *cf,
    ngx_http_flags_main_conf_t *fmcf);
/* a report's line was written (rc NGX_OK) or not (NGX_ERROR): the result
 * finalizes the request */
typedef ngx_int_t (*ngx_http_flags_logged_pt)(ngx_http_request_t *r,
    ngx_int_t rc);
ngx_int_t ngx_http_flags_report_log(ngx_http_request_t *r, ngx_str_t *project,
    fl_report_t *report, ngx_http_flags_logged_pt logged);

/* ngx_http_flags_ingest.c: a report after its token and method
 * (flags_sdk's report route too) */
ngx_int_t ngx_http_flags_ingest_report(ngx_http_request_t *r,
    ngx_http_flags_project_t *project);

/* ngx_http_flags_control.c: every change of a flag's control state */
typedef enum {
    NGX_HTTP_FLAGS_BY_RULE = 0,         /* this host's rollback rule */
    NGX_HTTP_FLAGS_BY_FLEET,            /* flags_sync: who is a host */
    NGX_HTTP_FLAGS_BY_ADMIN,            /* flags_admin: who is a user */
    NGX_HTTP_FLAGS_BY_DEFINITION        /* a reload's new definitions */
} ngx_http_flags_by_e;

#define NGX_HTTP_FLAGS_WHO_LEN  FL_SYNC_HOST_MAX

typedef struct {
    ngx_http_flags_main_conf_t *fmcf;
    ngx_http_flags_project_t   *project;
    ngx_http_flags_defs_t      *defs;       /* the snapshot flag is of */
    ngx_http_flags_flag_t      *flag;
    ngx_log_t                  *log;        /* a request's: its context */
    ngx_uint_t                  level;      /* flags_log_level in force:
                                             * a rollback's */
    ngx_uint_t                  routine;    /* its routine=: any other
                                             * change's */
    ngx_uint_t                  by;         /* ngx_http_flags_by_e */
    ngx_str_t                   who;        /* a host, a user, or empty */
    ngx_str_t                   who_raw;    /* the user as sent (who is
                                             * escaped for the log) */
    ngx_uint_t                  batch;      /* the caller saves, once */
} ngx_http_flags_change_t;

void ngx_http_flags_change_init(ngx_http_flags_change_t *ch,
    ngx_http_request_t *r, ngx_http_flags_defs_t *defs,
    ngx_http_flags_flag_t *flag);

/* One failure of a flag seen while serving a request: an error report,
 * or an upstream answer in flags_upstream_errors' range.  The one entry
 * of failures: it counts them and runs the rule. */
typedef struct {
    ngx_uint_t                  enabled;    /* its cohort: the flag on */
    ngx_uint_t                  upstream;   /* nginx saw it fail */
    ngx_uint_t                  disputed;   /* a report's "enabled" the
                                             * evaluation contradicts */
    uint32_t                    source;     /* fl_source_key(): sources */
    uint32_t                    witness;    /* the regression rule's */
} ngx_http_flags_failure_t;

ngx_uint_t ngx_http_flags_control_failure(ngx_http_flags_change_t *ch,
    ngx_http_flags_failure_t *f);
ngx_uint_t ngx_http_flags_control_fleet_rollback(ngx_http_flags_change_t *ch,
    uint64_t at_ms, uint64_t errors, uint64_t enabled, uint64_t sources);
ngx_uint_t ngx_http_flags_control_clear(ngx_http_flags_change_t *ch);
void ngx_http_flags_control_override(ngx_http_flags_change_t *ch,
    fl_override_kind_t kind, uint32_t milli);
void ngx_http_flags_control_committed(ngx_cycle_t *cycle,
    ngx_http_flags_main_conf_t *fmcf);
/* a new definition of ch->flag: its new control block keeps the
 * rollback and override of from, the replaced one's; 1 when it kept one */
ngx_uint_t ngx_http_flags_control_definition(ngx_http_flags_change_t *ch,
    const fl_control_t *from);
/* "rollback and its override (rolloutPercentage 5) are": what was kept */
#define NGX_HTTP_FLAGS_KEPT_LEN  64
u_char *ngx_http_flags_control_kept(u_char *p, ngx_uint_t kept,
    const fl_control_t *c);
ngx_int_t ngx_http_flags_control_save(ngx_http_flags_main_conf_t *fmcf,
    ngx_log_t *log, ngx_http_request_t *r, ngx_http_flags_state_done_pt done);
/* a ramp's step (by RULE), an operator's action (by ADMIN) or the
 * fleet's state copied into the zone (by FLEET, flags_sync) gave ev */
void ngx_http_flags_control_ramp(ngx_http_flags_change_t *ch,
    fl_ramp_event_t ev);
/* an operator's action on the ramp: 0 and *changed, or -1 and *why */
ngx_int_t ngx_http_flags_control_ramp_act(ngx_http_flags_change_t *ch,
    fl_ramp_action_t action, ngx_uint_t *changed, const char **why);

/* ngx_http_flags_ramp.c: the ramps' ticks */
ngx_int_t ngx_http_flags_ramp_init_process(ngx_cycle_t *cycle,
    ngx_http_flags_main_conf_t *fmcf);
void ngx_http_flags_ramp_exit_process(ngx_http_flags_main_conf_t *fmcf);

/* ngx_http_flags_eval.c: the one evaluate-and-count path */
#define NGX_HTTP_FLAGS_ANSWER_LOCAL  64

typedef struct {
    ngx_http_flags_project_t   *project;
    ngx_http_flags_defs_t      *defs;       /* its definitions, now */
    uint32_t                   *effective;  /* the percentage in force */
    uint8_t                    *sw;         /* fl_switch_t, a flag */
    fl_detail_t                *detail;     /* the answer, a flag, or
                                               NULL: the values alone */
    uint64_t                   *enabled;    /* the values, a bit a flag
                                               (FL_BIT_WORDS()) */
    /* GET /flags' ETag of the flags' part, when read once a version
     * (ngx_http_flags_eval.c); NULL: hash it for this answer */
    const fl_etag_prefix_t     *etag_prefix;
    /* detail and values of a project of up to NGX_HTTP_FLAGS_ANSWER_LOCAL
     * flags: the answer lives on its handler's stack, so the request pool
     * keeps its room for the body (the pool's block is 4 KB by default) */
    fl_detail_t                 local[NGX_HTTP_FLAGS_ANSWER_LOCAL];
    uint64_t                    local_enabled[
                                    FL_BIT_WORDS(NGX_HTTP_FLAGS_ANSWER_LOCAL)];
} ngx_http_flags_answer_t;

#define NGX_HTTP_FLAGS_NOT_COUNTED  0
#define NGX_HTTP_FLAGS_COUNTED      1
#define NGX_HTTP_FLAGS_VALUES       0     /* the answer shows no reason */
#define NGX_HTTP_FLAGS_REASONS      1     /* OFREP's */
#define NGX_HTTP_FLAGS_BITS         0     /* the values alone */
#define NGX_HTTP_FLAGS_DETAIL       1     /* fl_detail_t a flag */

ngx_int_t ngx_http_flags_answer_init(ngx_http_flags_answer_t *a,
    ngx_pool_t *pool, ngx_http_flags_project_t *project, ngx_uint_t detail);
void ngx_http_flags_answer_evaluate(ngx_http_flags_answer_t *a,
    const fl_user_t *user, ngx_uint_t reasons, ngx_uint_t counted);
size_t ngx_http_flags_answer_flags_json(ngx_http_flags_answer_t *a,
    const fl_user_t *user, ngx_uint_t counted, u_char *buf);
ngx_int_t ngx_http_flags_evaluate_flag(ngx_http_flags_defs_t *defs,
    ngx_uint_t i, const fl_user_t *user, fl_detail_t *d, ngx_uint_t counted);
void ngx_http_flags_count_evaluation(ngx_http_flags_defs_t *defs,
    ngx_uint_t i, ngx_uint_t enabled, int64_t now);
/* Every evaluation this worker counted (and every memo answer) into the
 * zone: readers of the counters call it first; nothing when none. */
void ngx_http_flags_counts_fold(void);
/* Counts wait in this worker: schedules their fold (at the end of the
 * event cycle, at most every NGX_HTTP_FLAGS_FOLD_MSEC). */
void ngx_http_flags_counts_due(void);
/* answer(r) once every worker's counts held at this moment are in the
 * zone (flags_status, flags_metrics): at once, or NGX_DONE and after a
 * wait, a millisecond or two unless a worker is slow to fold, and never
 * past NGX_HTTP_FLAGS_LATE_MSEC after the time it was due. */
typedef ngx_int_t (*ngx_http_flags_answer_pt)(ngx_http_request_t *r);
ngx_int_t ngx_http_flags_counts_settled(ngx_http_request_t *r,
    ngx_http_flags_answer_pt answer);
/* the same for a GET or HEAD, its body discarded; 405 otherwise */
ngx_int_t ngx_http_flags_counts_get(ngx_http_request_t *r,
    ngx_http_flags_answer_pt answer);
void ngx_http_flags_counts_exit(void);

/* ngx_http_flags_memo.c: this worker's memo of whole answers */
typedef struct ngx_http_flags_memo_s  ngx_http_flags_memo_t;

#define NGX_HTTP_FLAGS_MEMO_FLAGS       1     /* GET {base}/flags */
#define NGX_HTTP_FLAGS_MEMO_OFREP_ONE   2     /* OFREP, one flag */
#define NGX_HTTP_FLAGS_MEMO_OFREP_BULK  3     /* OFREP, every flag */

typedef struct {
    ngx_uint_t                  kind;
    void                       *scope;      /* the location's conf */
    ngx_http_flags_project_t   *project;
    ngx_http_flags_defs_t      *defs;       /* the answer's definitions */
    ngx_uint_t                  gen;
    ngx_atomic_uint_t           version;    /* read before the answer */
    const u_char               *bytes;      /* the caller's */
    size_t                      len;
    /* ngx_http_flags_memo.c's: the key's hash once find() computed it,
     * for the store() of the same request; its caller half once
     * prefetch() computed it */
    uint64_t                    hash;
    uint64_t                    caller;
    unsigned                    hashed:1;
    unsigned                    caller_hashed:1;
} ngx_http_flags_memo_key_t;

void ngx_http_flags_memo_prefetch(ngx_http_flags_memo_key_t *k);
ngx_http_flags_memo_t *ngx_http_flags_memo_find(ngx_http_flags_memo_key_t *k);
void ngx_http_flags_memo_store(ngx_http_flags_memo_key_t *k, u_char *body,
    size_t len, const uint64_t *etag, const uint64_t *enabled,
    ngx_int_t single);
ngx_int_t ngx_http_flags_memo_answer(ngx_http_request_t *r,
    ngx_http_flags_memo_t *m);
void ngx_http_flags_memo_fold(void);
void ngx_http_flags_memo_exit(void);

/* ngx_http_flags_admin.c: the user flags_admin logs (JSON-escaped into
 * buf; 0: none) */
size_t ngx_http_flags_admin_user(ngx_http_request_t *r, u_char *buf,
    size_t size);
/* ... and its 404 of an unknown project (project NULL) or flag */
ngx_int_t ngx_http_flags_admin_unknown(ngx_http_request_t *r,
    const char *code, ngx_http_flags_project_t *project, ngx_str_t *name);
/* ngx_http_flags_admin_defs.c: flags_admin's definitions/ routes */
ngx_int_t ngx_http_flags_admin_defs_handler(ngx_http_request_t *r,
    ngx_str_t *route);

/* handlers: ngx_http_flags_evaluate.c, _ingest.c, _status.c, _admin.c */
ngx_int_t ngx_http_flags_evaluate_handler(ngx_http_request_t *r);
ngx_int_t ngx_http_flags_ingest_handler(ngx_http_request_t *r);
ngx_int_t ngx_http_flags_status_handler(ngx_http_request_t *r);
ngx_int_t ngx_http_flags_status_document(ngx_http_request_t *r,
    ngx_str_t *doc);
/* ngx_http_flags_metrics.c: flags_metrics (docs/metrics.md) */
ngx_int_t ngx_http_flags_metrics_handler(ngx_http_request_t *r);
ngx_int_t ngx_http_flags_admin_handler(ngx_http_request_t *r);
/* merge: a location of flags_admin; postconfiguration: the nginx -t
 * warning for those that nothing protects */
ngx_int_t ngx_http_flags_admin_location(ngx_conf_t *cf,
    ngx_http_flags_loc_conf_t *flcf);
ngx_int_t ngx_http_flags_admin_check(ngx_conf_t *cf);
/* ngx_http_flags_dashboard.c: flags_dashboard (docs/dashboard.md) */
char *ngx_http_flags_dashboard(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
ngx_int_t ngx_http_flags_dashboard_handler(ngx_http_request_t *r);
ngx_int_t ngx_http_flags_dashboard_init(ngx_conf_t *cf);
/* ngx_http_flags_sdk.c */
ngx_int_t ngx_http_flags_sdk_handler(ngx_http_request_t *r);

/* ngx_http_flags_ofrep.c: flags_ofrep (docs/ofrep.md) */
ngx_int_t ngx_http_flags_ofrep_handler(ngx_http_request_t *r);

/* ngx_http_flags_push.c: live push (docs/push.md); what the push files
 * share among themselves is in ngx_http_flags_push.h */
char *ngx_http_flags_push_max_connections(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
ngx_int_t ngx_http_flags_push_limit(ngx_cycle_t *cycle);
ngx_uint_t ngx_http_flags_push_enabled(ngx_http_request_t *r);
ngx_int_t ngx_http_flags_push_token(ngx_http_request_t *r,
    ngx_http_flags_project_t **project);
/* ngx_http_flags_push_sse.c: OFREP's event stream */
ngx_int_t ngx_http_flags_push_sse(ngx_http_request_t *r,
    ngx_http_flags_project_t *project);      /* NULL: flags_dashboard's */
/* ngx_http_flags_push_ws.c: flags_websocket */
ngx_int_t ngx_http_flags_websocket_handler(ngx_http_request_t *r);

/* ngx_http_flags_variables.c: flags_context, $flag_NAME, $flags_enabled */
ngx_int_t ngx_http_flags_variables_table(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_defs_t *defs, ngx_pool_t *pool);
char *ngx_http_flags_context(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_http_flags_merge_context(ngx_conf_t *cf,
    ngx_http_flags_loc_conf_t *prev, ngx_http_flags_loc_conf_t *conf);
ngx_int_t ngx_http_flags_add_variables(ngx_conf_t *cf);
ngx_int_t ngx_http_flags_variables_init(ngx_conf_t *cf);
/* a flag the request read: its answer, whether it was read by its own
 * $flag_NAME (not only through $flags_enabled), and the user it was
 * evaluated for */
typedef void (*ngx_http_flags_read_pt)(ngx_http_request_t *r,
    ngx_http_flags_defs_t *defs, ngx_http_flags_flag_t *flag,
    ngx_uint_t enabled, ngx_uint_t named, const fl_user_t *user,
    void *data);
void ngx_http_flags_variables_each_read(ngx_http_request_t *r,
    ngx_http_flags_read_pt fn, void *data);

/* ngx_http_flags_upstream.c: flags_upstream_errors, the log phase */
char *ngx_http_flags_upstream_errors(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
ngx_int_t ngx_http_flags_upstream_init(ngx_conf_t *cf);

/* ngx_http_flags_sync.c: flags_sync, a fleet through Redis (docs/sync.md) */
void ngx_http_flags_sync_host(ngx_http_flags_main_conf_t *fmcf,
    ngx_str_t *name);
char *ngx_http_flags_sync(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
/* ngx_http_flags_sync_defs.c: a write of a runtime project's definitions
 * goes to the fleet (NGX_DECLINED: no fleet, write here; NGX_OK: proposed,
 * poll it; NGX_BUSY: Redis is away; NGX_ERROR: no memory), and how it
 * went (NGX_AGAIN: not yet; NGX_OK: stored and published here, *seq;
 * NGX_DECLINED: the fleet holds another version; NGX_ERROR: the fleet was
 * not reached, nothing applied) */
ngx_int_t ngx_http_flags_sync_defs_propose(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_project_t *project, uint64_t base,
    ngx_http_flags_defs_t *defs, ngx_str_t *entry, ngx_log_t *log);
ngx_int_t ngx_http_flags_sync_defs_poll(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_project_t *project, ngx_msec_t started,
    ngx_uint_t give_up, ngx_atomic_uint_t *seq);
ngx_int_t ngx_http_flags_sync_init_process(ngx_cycle_t *cycle,
    ngx_http_flags_main_conf_t *fmcf);
void ngx_http_flags_sync_exit_process(ngx_http_flags_main_conf_t *fmcf);
/* sentinel://: 1, with the master the Sentinels named last (copied into
 * buf, NGX_SOCKADDR_STRLEN bytes; empty: none yet) and the Sentinel that
 * named it (empty: none); 0 for redis:// and without flags_sync */
ngx_uint_t ngx_http_flags_sync_sentinel_shown(ngx_http_flags_main_conf_t *fmcf,
    ngx_str_t *master, ngx_str_t *sentinel, u_char *buf);



#endif /* _NGX_HTTP_FLAGS_MODULE_H_INCLUDED_ */
