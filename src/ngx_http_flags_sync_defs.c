/*
 * ngx_http_flags_sync_defs.c - one version of a runtime project's
 * definitions for the whole fleet (docs/sync.md, "One version for the
 * fleet").
 *
 * With flags_sync, a definitions=runtime project's versions live in Redis,
 * in one hash, PREFIX{project}:defs (the script: fl_sync_defs_script()).
 *
 *  - A write (flags_admin, any worker of any host) is not stored by its
 *    request: ngx_http_flags_sync_defs_propose() leaves it in the zone
 *    (the project's ngx_http_flags_pversion_t.defs_proposal) and the
 *    request waits on a timer.  The syncing worker's next round sends it
 *    as a compare-and-set against the version it was made from; when the
 *    fleet took it, the syncing worker stores it here exactly as a local
 *    write does (ngx_http_flags_versions_write(), reserve, publish, apply)
 *    and the request answers once every worker serves it.  The loser of
 *    two writes gets 412; with Redis away, 503 and nothing applied.
 *  - Every round asks the fleet's version; a newer one is verified (its
 *    signature under key_file=, its entry, its document validated as
 *    "nginx -t" validates a file) and stored and served here the same way.
 *    A version refused keeps this host on its own; it is logged once, at
 *    error, and counted.
 *  - Redis without the project's hash (restarted empty), or with an older
 *    version than this host's: the next round seeds it with this host's
 *    version, the newest wins.
 *
 * The syncing worker also takes the project's current snapshot at each
 * round's start (ngx_http_flags_sync_defs_hold()): a version adds or
 * removes flags, and the round's arrays and the reply's bound follow.
 */

#include "ngx_http_flags_sync.h"

#include <openssl/hmac.h>
#include <openssl/evp.h>
#include <openssl/crypto.h>


#define NGX_HTTP_FLAGS_SYNC_SIG_LEN     64       /* hex of HMAC-SHA256 */
#define NGX_HTTP_FLAGS_SYNC_STALE_MS    60000    /* a proposal left behind */
#define NGX_HTTP_FLAGS_SYNC_WAKE_MS     5        /* proposals looked for */


static ngx_int_t ngx_http_flags_sync_defs_sign(ngx_http_flags_sync_t *s,
    ngx_http_flags_project_t *project, uint64_t version, uint64_t at_ms,
    ngx_str_t *entry, ngx_str_t *doc, u_char *hex);
static ngx_int_t ngx_http_flags_sync_defs_store(ngx_http_flags_sync_t *s,
    ngx_http_flags_project_t *project, uint64_t version, uint64_t at_ms,
    ngx_str_t *entry, ngx_str_t *doc, ngx_atomic_uint_t *seq);
static ngx_int_t ngx_http_flags_sync_defs_take(ngx_http_flags_sync_t *s,
    ngx_uint_t pi, redisReply *reply, uint64_t v, uint64_t at_ms);
static void ngx_http_flags_sync_defs_settle(ngx_http_flags_sync_t *s,
    ngx_http_flags_project_t *project, ngx_uint_t state,
    ngx_atomic_uint_t seq, uint64_t found);
static ngx_int_t ngx_http_flags_sync_defs_number(redisReply *r,
    uint64_t *out);


/* ------------------------------------------------------ the request's */


ngx_int_t
ngx_http_flags_sync_defs_propose(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_project_t *project, uint64_t base,
    ngx_http_flags_defs_t *defs, ngx_str_t *entry, ngx_log_t *log)
{
    size_t                           size;
    uint64_t                         now;
    ngx_http_flags_pversion_t       *pv;
    ngx_http_flags_sync_proposal_t  *p, *old;

    pv = project->pversion;

    if (fmcf->sync == NULL || !project->runtime || pv == NULL) {
        return NGX_DECLINED;
    }

    /* Redis away: nothing is written anywhere */
    if (ngx_http_flags_zone_sync_away(fmcf)) {
        return NGX_BUSY;
    }

    size = offsetof(ngx_http_flags_sync_proposal_t, data) + entry->len
           + defs->doc_len;

    p = ngx_slab_alloc(fmcf->shpool, size);
    if (p == NULL) {
        ngx_log_error(NGX_LOG_ERR, log, 0,
                      "flags: zone \"%V\" has no room for a version of "
                      "project \"%V\" (%uz bytes) to send to the fleet; "
                      "increase the flags_zone size",
                      &fmcf->zone_name, &project->name, size);
        return NGX_ERROR;
    }

    now = ngx_http_flags_now_ms();

    p->state = NGX_HTTP_FLAGS_SYNC_P_PENDING;
    p->pid = ngx_pid;
    p->made_ms = now;
    p->base = base;
    p->version = defs->version;
    p->at_ms = defs->at_ms;
    p->seq = 0;
    p->found = 0;
    p->entry_len = entry->len;
    p->doc_len = defs->doc_len;
    ngx_memcpy(ngx_cpymem(p->data, entry->data, entry->len), defs->doc,
               defs->doc_len);

    ngx_shmtx_lock(&fmcf->shpool->mutex);

    old = pv->defs_proposal;

    if (old) {
        if ((old->state == NGX_HTTP_FLAGS_SYNC_P_PENDING
             || old->state == NGX_HTTP_FLAGS_SYNC_P_SENT)
            && now - old->made_ms < NGX_HTTP_FLAGS_SYNC_STALE_MS)
        {
            /* another write of this host is on its way (the writer lock
             * makes it rare: a request that outlived its lock) */
            ngx_shmtx_unlock(&fmcf->shpool->mutex);
            ngx_slab_free(fmcf->shpool, p);
            return NGX_BUSY;
        }

        /* a settled proposal its request never read, or left behind */
        ngx_slab_free_locked(fmcf->shpool, old);
    }

    pv->defs_proposal = p;

    ngx_shmtx_unlock(&fmcf->shpool->mutex);

    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, log, 0,
                   "flags: project \"%V\": version %uL proposed to the "
                   "fleet on version %uL", &project->name, defs->version,
                   base);

    return NGX_OK;
}


/*
 * How this worker's proposal went.  Past the wait (the longest a round
 * takes to send it and hear back), or with give_up (the request ends),
 * the proposal is withdrawn: a pending one is never sent; one already
 * sent is left to the syncing worker, which frees it (whatever the fleet
 * answered, every host takes the fleet's version at its next round).
 */

ngx_int_t
ngx_http_flags_sync_defs_poll(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_project_t *project, ngx_msec_t started,
    ngx_uint_t give_up, ngx_atomic_uint_t *seq)
{
    ngx_int_t                        rc;
    ngx_msec_t                       wait;
    ngx_http_flags_pversion_t       *pv;
    ngx_http_flags_sync_proposal_t  *p;

    pv = project->pversion;
    wait = ngx_max(3 * fmcf->sync_interval, 1000) + 2000;

    if (!give_up && ngx_current_msec - started > wait) {
        give_up = 1;
    }

    ngx_shmtx_lock(&fmcf->shpool->mutex);

    p = pv->defs_proposal;

    if (p == NULL || p->pid != ngx_pid) {
        ngx_shmtx_unlock(&fmcf->shpool->mutex);
        return NGX_ERROR;
    }

    switch (p->state) {

    case NGX_HTTP_FLAGS_SYNC_P_DONE:
        *seq = p->seq;
        rc = NGX_OK;
        break;

    case NGX_HTTP_FLAGS_SYNC_P_CONFLICT:
        rc = NGX_DECLINED;
        break;

    case NGX_HTTP_FLAGS_SYNC_P_PENDING:
        if (!give_up) {
            ngx_shmtx_unlock(&fmcf->shpool->mutex);
            return NGX_AGAIN;
        }

        rc = NGX_ERROR;
        break;

    case NGX_HTTP_FLAGS_SYNC_P_SENT:
        if (!give_up) {
            ngx_shmtx_unlock(&fmcf->shpool->mutex);
            return NGX_AGAIN;
        }

        p->state = NGX_HTTP_FLAGS_SYNC_P_ABANDONED;
        ngx_shmtx_unlock(&fmcf->shpool->mutex);
        return NGX_ERROR;

    default:  /* FAILED */
        rc = NGX_ERROR;
    }

    pv->defs_proposal = NULL;
    ngx_slab_free_locked(fmcf->shpool, p);

    ngx_shmtx_unlock(&fmcf->shpool->mutex);

    return rc;
}


/* The syncing worker settles the proposal it sent. */

static void
ngx_http_flags_sync_defs_settle(ngx_http_flags_sync_t *s,
    ngx_http_flags_project_t *project, ngx_uint_t state,
    ngx_atomic_uint_t seq, uint64_t found)
{
    ngx_http_flags_pversion_t       *pv;
    ngx_http_flags_sync_proposal_t  *p;

    pv = project->pversion;

    ngx_shmtx_lock(&s->fmcf->shpool->mutex);

    p = pv->defs_proposal;

    if (p && p->state == NGX_HTTP_FLAGS_SYNC_P_SENT) {
        p->state = state;
        p->seq = seq;
        p->found = found;

    } else if (p && p->state == NGX_HTTP_FLAGS_SYNC_P_ABANDONED) {
        pv->defs_proposal = NULL;
        ngx_slab_free_locked(s->fmcf->shpool, p);
    }

    ngx_shmtx_unlock(&s->fmcf->shpool->mutex);
}


/* ------------------------------------------------- the syncing worker */


/*
 * A round's start: each project's snapshot now.  The one the last round
 * worked on stays alive until its answers are applied (a round starts
 * only once the last one is answered), then goes back to the collector;
 * the flags' array and the reply's bound follow the new flag count.
 */

ngx_int_t
ngx_http_flags_sync_defs_hold(ngx_http_flags_sync_t *s)
{
    ngx_uint_t                      i, changed;
    fl_sync_flag_t                 *flags;
    ngx_http_flags_defs_t          *defs, *old;
    ngx_http_flags_project_t       *project;
    ngx_http_flags_sync_project_t  *sp;

    project = s->fmcf->projects.elts;
    changed = 0;

    for (i = 0; i < s->fmcf->projects.nelts; i++) {
        sp = &s->projects[i];
        defs = ngx_http_flags_defs(&project[i]);
        old = sp->defs;

        if (defs == old) {
            continue;
        }

        flags = ngx_calloc((defs->nflags + 1) * sizeof(fl_sync_flag_t),
                           s->log);
        if (flags == NULL) {
            return NGX_ERROR;
        }

        if (sp->flags_heap) {
            ngx_free(sp->flags);
        }

        sp->flags = flags;
        sp->flags_heap = 1;

        if (defs->pool) {
            defs->refs++;
        }

        if (old->pool) {
            old->refs--;
        }

        sp->defs = defs;
        changed = 1;

        ngx_log_debug3(NGX_LOG_DEBUG_HTTP, s->log, 0,
                       "flags: sync: project \"%V\" is at definitions "
                       "version %uL: %ui flags", &project[i].name,
                       defs->version, defs->nflags);
    }

    if (changed) {
        ngx_http_flags_sync_defs_bound(s);
        ngx_http_flags_defs_collect();
    }

    return NGX_OK;
}


/*
 * A write does not wait for the next tick: every few milliseconds the
 * syncing worker (the others: every interval, to see whether they took
 * the lock), when no round is under way, looks for a proposal (one load
 * a runtime project) and runs a round at once when it finds one.  The
 * other hosts take the version at their own next round.
 */

void
ngx_http_flags_sync_defs_wake(ngx_event_t *ev)
{
    ngx_http_flags_sync_t  *s = ev->data;

    ngx_uint_t                        i;
    ngx_http_flags_project_t         *project;
    ngx_http_flags_sync_proposal_t   *p;

    if (ngx_exiting || ngx_terminate || ngx_quit) {
        return;
    }

    /* a worker that does not sync looks again an interval later */
    if (!s->owner || !ngx_http_flags_sync_owns(s)) {
        ngx_add_timer(ev, s->conf->interval);
        return;
    }

    ngx_add_timer(ev, NGX_HTTP_FLAGS_SYNC_WAKE_MS);

    if (s->state != NGX_HTTP_FLAGS_SYNC_IDLE) {
        return;
    }

    project = s->fmcf->projects.elts;

    for (i = 0; i < s->fmcf->projects.nelts; i++) {
        if (!project[i].runtime || project[i].pversion == NULL) {
            continue;
        }

        p = __atomic_load_n(&project[i].pversion->defs_proposal,
                            __ATOMIC_ACQUIRE);

        /* a glance without the lock: the round reads it under the lock */
        if (p && __atomic_load_n(&p->state, __ATOMIC_ACQUIRE)
                 == NGX_HTTP_FLAGS_SYNC_P_PENDING)
        {
            ngx_log_debug1(NGX_LOG_DEBUG_HTTP, s->log, 0,
                           "flags: sync: a write of project \"%V\" waits: "
                           "the round goes now", &project[i].name);

            if (ngx_http_flags_sync_round(s) != NGX_OK) {
                ngx_http_flags_sync_fail(s, "could not send", NULL);
            }

            return;
        }
    }
}


/*
 * The largest reply the syncing worker reads: the control hash of the
 * largest project (docs/sync.md, "A reply's size is bounded"), and, with
 * a runtime project, a version's entry and document (at most the largest
 * flags_definitions_max_size allowed by default, or four times the
 * largest document served, whichever is more).
 */

#define NGX_HTTP_FLAGS_SYNC_ELTS_FLAG    64
#define NGX_HTTP_FLAGS_SYNC_ELTS_MIN     4096
#define NGX_HTTP_FLAGS_SYNC_ELT_BYTES    256
#define NGX_HTTP_FLAGS_SYNC_BYTES_MIN    65536

void
ngx_http_flags_sync_defs_bound(ngx_http_flags_sync_t *s)
{
    size_t                     doc;
    ngx_uint_t                 i, nflags, runtime;
    ngx_http_flags_defs_t     *defs;
    ngx_http_flags_project_t  *project;

    project = s->fmcf->projects.elts;
    nflags = 0;
    doc = 0;
    runtime = 0;

    for (i = 0; i < s->fmcf->projects.nelts; i++) {
        defs = ngx_http_flags_defs(&project[i]);
        nflags = ngx_max(nflags, defs->nflags);
        runtime |= project[i].runtime;

        if (project[i].runtime) {
            doc = ngx_max(doc, defs->doc_len);
        }
    }

    s->bound.max_elements = NGX_HTTP_FLAGS_SYNC_ELTS_MIN
                      + NGX_HTTP_FLAGS_SYNC_ELTS_FLAG * nflags;
    s->bound.max_bytes = NGX_HTTP_FLAGS_SYNC_BYTES_MIN
                   + NGX_HTTP_FLAGS_SYNC_ELT_BYTES * s->bound.max_elements;

    if (runtime) {
        /* an entry lists at most every name twice: bounded by a doc */
        s->bound.max_bytes += 2 * ngx_max(4 * doc,
                                    NGX_HTTP_FLAGS_DEFINITIONS_MAX_SIZE);
    }
}


/*
 * The project's call to the definitions script, queued after its round's
 * EVALSHA: a proposal sent as compare-and-set, else this host's version
 * as a seed when the fleet lacked it, else a question.
 */

ngx_int_t
ngx_http_flags_sync_defs_queue(ngx_http_flags_sync_t *s, ngx_uint_t pi)
{
    int                              len;
    char                            *cmd, *script, num[4][NGX_INT64_LEN + 1];
    u_char                           sig[NGX_HTTP_FLAGS_SYNC_SIG_LEN + 1];
    u_char                           key[512];
    size_t                           slen, argvlen[12];
    uint64_t                         mine, base;
    ngx_int_t                        rc;
    ngx_str_t                        entry, doc;
    ngx_uint_t                       argc;
    ngx_pool_t                      *pool;
    const char                      *argv[12];
    ngx_http_flags_defs_t           *defs;
    ngx_http_flags_project_t        *project;
    ngx_http_flags_pversion_t       *pv;
    ngx_http_flags_sync_sent_t      *sent;
    ngx_http_flags_sync_project_t   *sp;
    ngx_http_flags_sync_proposal_t  *p;

    project = (ngx_http_flags_project_t *) s->fmcf->projects.elts + pi;
    sp = &s->projects[pi];
    pv = project->pversion;
    sp->defs_op = NGX_HTTP_FLAGS_SYNC_D_NONE;

    if (!project->runtime || pv == NULL) {
        return NGX_OK;
    }

    mine = ngx_http_flags_versions_current(project);
    sent = NULL;
    base = 0;

    /* a write of this host, taken out of the zone */
    ngx_shmtx_lock(&s->fmcf->shpool->mutex);

    p = pv->defs_proposal;

    if (p && p->state == NGX_HTTP_FLAGS_SYNC_P_PENDING) {
        sent = ngx_alloc(sizeof(ngx_http_flags_sync_sent_t) + p->entry_len
                         + p->doc_len + 1, s->log);

        if (sent) {
            sent->version = p->version;
            sent->at_ms = p->at_ms;
            sent->entry.data = (u_char *) (sent + 1);
            sent->entry.len = p->entry_len;
            sent->doc.data = sent->entry.data + p->entry_len;
            sent->doc.len = p->doc_len;
            ngx_memcpy(sent->entry.data, p->data,
                       p->entry_len + p->doc_len);
            base = p->base;
            p->state = NGX_HTTP_FLAGS_SYNC_P_SENT;
        }
    }

    ngx_shmtx_unlock(&s->fmcf->shpool->mutex);

    if (sent) {
        sp->defs_op = NGX_HTTP_FLAGS_SYNC_D_CAS;

    } else if (sp->defs_seed && mine > 1) {
        /* the fleet lost its version (or has an older one): ours, as
         * stored on disk with its history entry */
        defs = ngx_http_flags_defs(project);

        pool = ngx_create_pool(NGX_DEFAULT_POOL_SIZE, s->log);
        if (pool == NULL) {
            return NGX_ERROR;
        }

        rc = (defs->version == mine)
             ? ngx_http_flags_versions_read(pool, s->fmcf, project, mine,
                                            &entry, &doc, NULL, s->log)
             : NGX_DECLINED;

        if (rc == NGX_OK) {
            sent = ngx_alloc(sizeof(ngx_http_flags_sync_sent_t) + entry.len
                             + doc.len + 1, s->log);
        }

        if (sent) {
            sent->version = mine;
            sent->at_ms = defs->at_ms;
            sent->entry.data = (u_char *) (sent + 1);
            sent->entry.len = entry.len;
            sent->doc.data = ngx_cpymem(sent->entry.data, entry.data,
                                        entry.len);
            sent->doc.len = doc.len;
            ngx_memcpy(sent->doc.data, doc.data, doc.len);
            sp->defs_op = NGX_HTTP_FLAGS_SYNC_D_SEED;
        }

        ngx_destroy_pool(pool);
    }

    if (sp->defs_op == NGX_HTTP_FLAGS_SYNC_D_NONE) {
        sp->defs_op = NGX_HTTP_FLAGS_SYNC_D_GET;
    }

    script = (char *) fl_sync_defs_script(&slen);

    argv[0] = "EVAL";
    argvlen[0] = 4;
    argv[1] = script;
    argvlen[1] = slen;
    argv[2] = "1";
    argvlen[2] = 1;
    argv[3] = (char *) key;
    argvlen[3] = ngx_snprintf(key, sizeof(key), "%V{%V}:defs",
                              &s->conf->prefix, &project->name)
                 - key;

    if (sp->defs_op == NGX_HTTP_FLAGS_SYNC_D_GET) {
        argv[4] = "get";
        argvlen[4] = 3;
        argv[5] = num[0];
        argvlen[5] = ngx_sprintf((u_char *) num[0], "%uL", mine)
                     - (u_char *) num[0];
        argc = 6;

    } else {
        if (ngx_http_flags_sync_defs_sign(s, project, sent->version,
                                          sent->at_ms, &sent->entry,
                                          &sent->doc, sig)
            != NGX_OK)
        {
            ngx_free(sent);
            return NGX_ERROR;
        }

        argv[4] = sp->defs_op == NGX_HTTP_FLAGS_SYNC_D_CAS ? "cas" : "seed";
        argvlen[4] = ngx_strlen(argv[4]);
        argv[5] = num[0];
        argvlen[5] = ngx_sprintf((u_char *) num[0], "%uL", base)
                     - (u_char *) num[0];
        argv[6] = num[1];
        argvlen[6] = ngx_sprintf((u_char *) num[1], "%uL", sent->version)
                     - (u_char *) num[1];
        argv[7] = num[2];
        argvlen[7] = ngx_sprintf((u_char *) num[2], "%uL", sent->at_ms)
                     - (u_char *) num[2];
        argv[8] = (char *) sent->entry.data;
        argvlen[8] = sent->entry.len;
        argv[9] = (char *) sent->doc.data;
        argvlen[9] = sent->doc.len;
        argv[10] = (char *) sig;
        argvlen[10] = s->conf->key.len ? NGX_HTTP_FLAGS_SYNC_SIG_LEN : 0;
        argv[11] = (char *) s->conf->name.data;
        argvlen[11] = s->conf->name.len;
        argc = 12;
    }

    len = redisFormatCommandArgv(&cmd, (int) argc, argv, argvlen);

    if (len < 0) {
        ngx_free(sent);
        return NGX_ERROR;
    }

    if (sp->defs_sent) {
        ngx_free(sp->defs_sent);
    }

    sp->defs_sent = sent;

    rc = ngx_http_flags_sync_send(s, cmd, len, NGX_HTTP_FLAGS_SYNC_R_EVAL
                                  + 2 * s->fmcf->projects.nelts + pi);
    redisFreeCommand(cmd);

    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, s->log, 0,
                   "flags: sync: definitions of project \"%V\": %s at "
                   "version %uL", &project->name, argv[4],
                   sent ? sent->version : mine);

    return rc;
}


/* The definitions script's answer (NGX_ERROR fails the round). */

ngx_int_t
ngx_http_flags_sync_defs_answer(ngx_http_flags_sync_t *s, ngx_uint_t pi,
    redisReply *reply)
{
    uint64_t                        ok, v, mine, at_ms;
    ngx_int_t                       rc;
    ngx_atomic_uint_t               seq;
    ngx_http_flags_sync_sent_t     *sent;
    ngx_http_flags_project_t       *project;
    ngx_http_flags_sync_project_t  *sp;

    project = (ngx_http_flags_project_t *) s->fmcf->projects.elts + pi;
    sp = &s->projects[pi];
    sent = sp->defs_sent;
    sp->defs_sent = NULL;

    if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 1
        || ngx_http_flags_sync_defs_number(reply->element[0], &ok)
           != NGX_OK)
    {
        rc = NGX_ERROR;
        goto done;
    }

    rc = NGX_OK;
    mine = ngx_http_flags_versions_current(project);

    switch (sp->defs_op) {

    case NGX_HTTP_FLAGS_SYNC_D_GET:
        /* ok is the fleet's version here; with it, {v, at, entry, doc,
         * sig, host} when newer than this host's */
        at_ms = 0;

        if (reply->elements > 1
            && (reply->elements != 6
                || ngx_http_flags_sync_defs_number(reply->element[1], &at_ms)
                   != NGX_OK))
        {
            rc = NGX_ERROR;
            break;
        }

        switch (fl_sync_defs_get(ok, mine, reply->elements > 1, at_ms,
                                 &sp->defs_refused, &sp->defs_refused_at))
        {

        case FL_SYNC_DEFS_SEED:
            if (!sp->defs_seed) {
                ngx_log_error(NGX_LOG_NOTICE, s->log, 0,
                              "flags: sync: project \"%V\": the fleet "
                              "holds definitions version %uL, this host "
                              "%uL: it seeds the fleet at the next round",
                              &project->name, ok, mine);
            }

            sp->defs_seed = 1;
            break;

        case FL_SYNC_DEFS_CHECK:
            sp->defs_seed = 0;
            rc = ngx_http_flags_sync_defs_take(s, pi, reply, ok, at_ms);
            break;

        default:
            sp->defs_seed = 0;
        }

        break;

    case NGX_HTTP_FLAGS_SYNC_D_CAS:
    case NGX_HTTP_FLAGS_SYNC_D_SEED:
        if (reply->elements != 2
            || ngx_http_flags_sync_defs_number(reply->element[1], &v)
               != NGX_OK
            || sent == NULL)
        {
            rc = NGX_ERROR;
            break;
        }

        if (sp->defs_op == NGX_HTTP_FLAGS_SYNC_D_SEED) {
            sp->defs_seed = 0;

            if (ok == 1) {
                ngx_log_error(NGX_LOG_NOTICE, s->log, 0,
                              "flags: sync: project \"%V\": the fleet is "
                              "seeded with this host's definitions "
                              "version %uL", &project->name, v);
            }

            break;
        }

        if (ok != 1) {
            ngx_log_error(NGX_LOG_INFO, s->log, 0,
                          "flags: sync: project \"%V\": definitions "
                          "version %uL refused by the fleet, which holds "
                          "version %uL", &project->name, sent->version, v);
            ngx_http_flags_sync_defs_settle(s, project,
                                            NGX_HTTP_FLAGS_SYNC_P_CONFLICT,
                                            0, v);
            break;
        }

        /* the fleet's now: stored and served here at once */
        seq = 0;

        if (ngx_http_flags_sync_defs_store(s, project, sent->version,
                                           sent->at_ms, &sent->entry,
                                           &sent->doc, &seq)
            != NGX_OK)
        {
            /* the fleet has it: the next round takes it again */
            ngx_http_flags_sync_defs_settle(s, project,
                                            NGX_HTTP_FLAGS_SYNC_P_FAILED,
                                            0, 0);
            break;
        }

        ngx_http_flags_sync_defs_settle(s, project,
                                        NGX_HTTP_FLAGS_SYNC_P_DONE, seq, 0);
        break;

    default:
        rc = NGX_ERROR;
    }

done:

    if (rc != NGX_OK && sent && sp->defs_op == NGX_HTTP_FLAGS_SYNC_D_CAS) {
        ngx_http_flags_sync_defs_settle(s, project,
                                        NGX_HTTP_FLAGS_SYNC_P_FAILED, 0, 0);
    }

    if (sent) {
        ngx_free(sent);
    }

    sp->defs_op = NGX_HTTP_FLAGS_SYNC_D_NONE;

    return rc;
}


/*
 * The connection is gone with answers awaited: a compare-and-set sent
 * and not answered fails its request (503; the fleet may have taken it:
 * if so, every host takes it at its next round, this one too).
 */

void
ngx_http_flags_sync_defs_lost(ngx_http_flags_sync_t *s)
{
    ngx_uint_t                      i;
    ngx_http_flags_project_t       *project;
    ngx_http_flags_sync_project_t  *sp;

    project = s->fmcf->projects.elts;

    for (i = 0; i < s->fmcf->projects.nelts; i++) {
        sp = &s->projects[i];

        if (sp->defs_sent == NULL) {
            continue;
        }

        if (sp->defs_op == NGX_HTTP_FLAGS_SYNC_D_CAS
            && project[i].pversion)
        {
            ngx_http_flags_sync_defs_settle(s, &project[i],
                                            NGX_HTTP_FLAGS_SYNC_P_FAILED,
                                            0, 0);
        }

        ngx_free(sp->defs_sent);
        sp->defs_sent = NULL;
        sp->defs_op = NGX_HTTP_FLAGS_SYNC_D_NONE;
    }
}


/*
 * The fleet's version is newer than this host's: {v, at, entry, doc,
 * sig, host}.  Verified (signature, entry), validated (the document, as
 * "nginx -t" validates the file), then stored and served.  A version
 * refused is logged once, counted, and this host keeps its own.
 */

static ngx_int_t
ngx_http_flags_sync_defs_take(ngx_http_flags_sync_t *s, ngx_uint_t pi,
    redisReply *reply, uint64_t v, uint64_t at_ms)
{
    char                           err[1024];
    u_char                        *buf, sig[NGX_HTTP_FLAGS_SYNC_SIG_LEN + 1];
    size_t                         entry_len, doc_off;
    uint64_t                       fv;
    ngx_str_t                      entry, doc, host, detail;
    ngx_uint_t                     i, reason;
    fl_status_t                    st;
    fl_project_t                  *core;
    ngx_atomic_uint_t              seq;
    ngx_http_flags_project_t      *project;
    ngx_http_flags_sync_project_t *sp;

    project = (ngx_http_flags_project_t *) s->fmcf->projects.elts + pi;
    sp = &s->projects[pi];

    for (i = 2; i < 6; i++) {
        if (reply->element[i]->type != REDIS_REPLY_STRING) {
            return NGX_ERROR;
        }
    }

    entry.data = (u_char *) reply->element[2]->str;
    entry.len = reply->element[2]->len;
    doc.data = (u_char *) reply->element[3]->str;
    doc.len = reply->element[3]->len;
    host.data = (u_char *) reply->element[5]->str;
    host.len = reply->element[5]->len;

    if (!fl_sync_host_valid((const char *) host.data, host.len)) {
        ngx_str_set(&host, "?");
    }

    reason = NGX_HTTP_FLAGS_REJECTED_INVALID;
    ngx_str_null(&detail);

    /* the signature first: nothing of an unsigned version is parsed */
    if (s->conf->key.len) {
        if (reply->element[4]->len != NGX_HTTP_FLAGS_SYNC_SIG_LEN) {
            reason = NGX_HTTP_FLAGS_REJECTED_SIGNATURE;
            if (reply->element[4]->len) {
                ngx_str_set(&detail, "its signature is malformed");

            } else {
                ngx_str_set(&detail, "it is not signed, and key_file= is "
                                     "set");
            }

            goto refused;
        }

        if (ngx_http_flags_sync_defs_sign(s, project, v, at_ms, &entry, &doc,
                                          sig)
            != NGX_OK)
        {
            return NGX_ERROR;
        }

        if (CRYPTO_memcmp(sig, reply->element[4]->str,
                          NGX_HTTP_FLAGS_SYNC_SIG_LEN)
            != 0)
        {
            reason = NGX_HTTP_FLAGS_REJECTED_SIGNATURE;
            ngx_str_set(&detail, "its signature does not verify under "
                                 "key_file=");
            goto refused;
        }
    }

    /* the entry must be this version's history line */
    buf = ngx_alloc(entry.len + 1 + doc.len + 1, s->log);
    if (buf == NULL) {
        return NGX_ERROR;
    }

    ngx_memcpy(buf, entry.data, entry.len);
    buf[entry.len] = '\n';
    ngx_memcpy(buf + entry.len + 1, doc.data, doc.len);

    st = fl_defs_file_parse((const char *) buf, entry.len + 1 + doc.len, &fv,
                            &entry_len, &doc_off, err, sizeof(err));
    ngx_free(buf);

    if (st == FL_ERR_NOMEM) {
        return NGX_ERROR;
    }

    if (st != FL_OK || fv != v || entry_len != entry.len) {
        detail.data = (u_char *) (st != FL_OK ? err
                                              : "its entry is of another "
                                                "version");
        detail.len = ngx_strlen(detail.data);
        goto refused;
    }

    /* the document, as "nginx -t" reads the flags file */
    if (ngx_http_flags_defs_parse(project, doc.data, doc.len, &core, err,
                                  sizeof(err))
        != FL_OK)
    {
        detail.data = (u_char *) err;
        detail.len = ngx_strlen(err);
        goto refused;
    }

    fl_project_free(core);

    seq = 0;

    if (ngx_http_flags_sync_defs_store(s, project, v, at_ms, &entry, &doc,
                                       &seq)
        != NGX_OK)
    {
        /* logged; tried again at the next round */
        return NGX_OK;
    }

    ngx_log_error(s->fmcf->log_routine, s->log, 0,
                  "flags: project \"%V\" has definitions version %uL from "
                  "the fleet (written on host \"%V\")",
                  &project->name, v, &host);

    return NGX_OK;

refused:

    sp->defs_refused = v;
    sp->defs_refused_at = at_ms;
    ngx_http_flags_versions_rejected(project, reason);

    ngx_log_error(NGX_LOG_ERR, s->log, 0,
                  "flags: sync: project \"%V\": definitions version %uL in "
                  "redis (from host \"%V\") refused: %V; this host keeps "
                  "serving version %uL", &project->name, v, &host, &detail,
                  ngx_http_flags_versions_current(project));

    return NGX_OK;
}


/*
 * A version the fleet holds, stored and served here exactly as a local
 * write is (ngx_http_flags_admin_defs.c): the zone's memory first, the
 * file durably, published to every worker, applied in this one.
 */

static ngx_int_t
ngx_http_flags_sync_defs_store(ngx_http_flags_sync_t *s,
    ngx_http_flags_project_t *project, uint64_t version, uint64_t at_ms,
    ngx_str_t *entry, ngx_str_t *doc, ngx_atomic_uint_t *seq)
{
    u_char                 *buf;
    ngx_int_t               rc;
    ngx_pool_t             *pool;
    ngx_http_flags_defs_t  *defs;

    if (version <= ngx_http_flags_versions_current(project)) {
        return NGX_OK;
    }

    defs = ngx_http_flags_defs_make(s->fmcf, project, doc->data, doc->len,
                                    NULL, version, at_ms, s->log);
    if (defs == NULL) {
        return NGX_ERROR;
    }

    buf = ngx_http_flags_versions_reserve(s->fmcf, defs->doc_len);
    if (buf == NULL) {
        ngx_log_error(NGX_LOG_ERR, s->log, 0,
                      "flags: zone \"%V\" is full: definitions version %uL "
                      "of project \"%V\" from the fleet is not served; "
                      "increase the flags_zone size", &s->fmcf->zone_name,
                      version, &project->name);
        ngx_destroy_pool(defs->pool);
        return NGX_ERROR;
    }

    pool = ngx_create_pool(NGX_DEFAULT_POOL_SIZE, s->log);
    if (pool == NULL) {
        ngx_slab_free(s->fmcf->shpool, buf);
        ngx_destroy_pool(defs->pool);
        return NGX_ERROR;
    }

    rc = ngx_http_flags_versions_write(pool, s->fmcf, project, version, entry,
                                       doc, s->log);
    ngx_destroy_pool(pool);

    if (rc != NGX_OK) {
        ngx_log_error(NGX_LOG_ERR, s->log, 0,
                      "flags: definitions version %uL of project \"%V\" "
                      "from the fleet could not be stored: this host keeps "
                      "serving version %uL", version, &project->name,
                      ngx_http_flags_versions_current(project));
        ngx_slab_free(s->fmcf->shpool, buf);
        ngx_destroy_pool(defs->pool);
        return NGX_ERROR;
    }

    *seq = ngx_http_flags_versions_publish(s->fmcf, project, defs, buf);

    (void) ngx_http_flags_versions_apply(s->fmcf, project, defs, NULL,
                                         s->log);

    /* this worker's acknowledgement */
    ngx_http_flags_versions_refresh_all(s->fmcf, s->log);

    return NGX_OK;
}


/*
 * HMAC-SHA256 under key_file='s key, in hex, of what makes a version:
 * "flags-definitions\n" project "\n" version "\n" at_ms "\n" entry "\n"
 * document.  The project and version are in it, so a version signed for
 * one project or number is not another's.  Without a key: NGX_OK, hex
 * left empty.
 */

static ngx_int_t
ngx_http_flags_sync_defs_sign(ngx_http_flags_sync_t *s,
    ngx_http_flags_project_t *project, uint64_t version, uint64_t at_ms,
    ngx_str_t *entry, ngx_str_t *doc, u_char *hex)
{
    u_char        *msg, *p, mac[EVP_MAX_MD_SIZE];
    size_t         len;
    unsigned int   mac_len;

    hex[0] = '\0';

    if (s->conf->key.len == 0) {
        return NGX_OK;
    }

    len = fl_sync_defs_signed_bound(project->name.len, entry->len,
                                    doc->len);

    msg = ngx_alloc(len, s->log);
    if (msg == NULL) {
        return NGX_ERROR;
    }

    /* the bytes signed: the core's rule, fl_sync_defs_signed() */
    len = fl_sync_defs_signed((const char *) project->name.data,
                              project->name.len, version, at_ms,
                              (const char *) entry->data, entry->len,
                              (const char *) doc->data, doc->len,
                              (char *) msg, len);

    mac_len = 0;

    if (len == 0
        || HMAC(EVP_sha256(), s->conf->key.data, (int) s->conf->key.len,
                msg, len, mac, &mac_len)
        == NULL
        || mac_len * 2 != NGX_HTTP_FLAGS_SYNC_SIG_LEN)
    {
        ngx_free(msg);
        ngx_log_error(NGX_LOG_ERR, s->log, 0,
                      "flags: sync: HMAC-SHA256 failed");
        return NGX_ERROR;
    }

    ngx_free(msg);

    p = ngx_hex_dump(hex, mac, mac_len);
    *p = '\0';

    return NGX_OK;
}


/* An integer, or a string of digits (a Lua number comes as an integer,
 * a field as a string). */

static ngx_int_t
ngx_http_flags_sync_defs_number(redisReply *r, uint64_t *out)
{
    size_t    i;
    uint64_t  v;

    if (r->type == REDIS_REPLY_INTEGER) {
        if (r->integer < 0) {
            return NGX_ERROR;
        }

        *out = (uint64_t) r->integer;
        return NGX_OK;
    }

    if (r->type != REDIS_REPLY_STRING || r->len == 0 || r->len > 19) {
        return NGX_ERROR;
    }

    v = 0;

    for (i = 0; i < r->len; i++) {
        if (r->str[i] < '0' || r->str[i] > '9') {
            return NGX_ERROR;
        }

        v = v * 10 + (r->str[i] - '0');
    }

    *out = v;

    return NGX_OK;
}
