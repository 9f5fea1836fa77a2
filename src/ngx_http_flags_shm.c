/*
 * ngx_http_flags_shm.c - the shared zone across configuration generations.
 *
 * The zone holds only mutable state (see ngx_http_flags_module.h): nodes
 * found by "project\0flag", their versions (one per definition) and window
 * blocks.  Definitions stay in each process's configuration.
 *
 * Generations.  Every configuration that binds the zone gets a number
 * (fmcf->gen) when init_zone prepares it in the master; it is "committed"
 * only when nginx commits the cycle (init_module, after the listening
 * sockets were opened).  Each worker records (pid, generation) in the zone
 * while it runs.  Hence:
 *
 *  - preparing changes nothing a running worker sees: a changed
 *    definition gets a new version beside the old one, a changed window
 *    length a new head window whose predecessor is still summed, so a
 *    configuration nginx rejects after init_zone leaves no trace;
 *  - an object is bindable by a new generation only while the committed
 *    generation uses it (last_gen >= committed): a flag removed, or a
 *    definition replaced, by a committed configuration starts fresh if it
 *    comes back (a definition with the rollback and override of the one
 *    it replaces then: ngx_http_flags_control_definition());
 *  - an object is freed only once it is no longer bindable and every
 *    process of a generation that could reach it has exited, whatever the
 *    number of reloads in between (a slow request in an old worker keeps
 *    its flag's memory alive, never another project's);
 *  - a retired window is merged into its successor and freed under the
 *    same rule, so that no event counted in it is lost.
 *
 * Workers that die without exit_process are found at the next reload by
 * their pid (gone, a zombie, or no longer the master's child).
 *
 * Locking: the slab mutex guards the lists and the tree.  The request path
 * takes it only to sum the windows of a version (reports, status) and to
 * snapshot the zone for the state file; counting is lock-free.
 */

#include "ngx_http_flags_module.h"


static ngx_int_t ngx_http_flags_reconcile(ngx_http_flags_main_conf_t *fmcf,
    ngx_log_t *log);
static void ngx_http_flags_collect(ngx_http_flags_main_conf_t *fmcf,
    ngx_uint_t committed);
static ngx_uint_t ngx_http_flags_min_live(ngx_http_flags_shctx_t *sh);
static ngx_http_flags_proc_t *ngx_http_flags_zone_own(
    ngx_http_flags_shctx_t *sh);
static ngx_uint_t ngx_http_flags_proc_alive(ngx_pid_t pid);
static ngx_int_t ngx_http_flags_bind(ngx_http_flags_main_conf_t *fmcf,
    ngx_str_t *project, ngx_http_flags_flag_t *flag, uint32_t window,
    ngx_uint_t gen, ngx_uint_t committed, ngx_log_t *log);
static ngx_int_t ngx_http_flags_bind_node(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_flag_t *flag, u_char *key, size_t len, uint32_t hash,
    uint32_t window, ngx_uint_t gen);
static ngx_http_flags_version_t *ngx_http_flags_bind_match(
    ngx_http_flags_flag_t *flag, ngx_http_flags_node_t *node,
    ngx_uint_t committed);
static void ngx_http_flags_bind_window(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_flag_t *flag, ngx_http_flags_version_t *v,
    uint32_t window, ngx_uint_t gen, ngx_log_t *log);
static ngx_int_t ngx_http_flags_bound(ngx_slab_pool_t *shpool,
    ngx_http_flags_flag_t *flag,
    ngx_http_flags_node_t *node, ngx_http_flags_version_t *v);
static ngx_http_flags_window_t *ngx_http_flags_new_window(
    ngx_slab_pool_t *shpool, uint32_t seconds);
static ngx_http_flags_version_t *ngx_http_flags_new_version(
    ngx_slab_pool_t *shpool, uint64_t def_hash, uint32_t seconds,
    ngx_uint_t gen);
static void ngx_http_flags_free_version(ngx_slab_pool_t *shpool,
    ngx_http_flags_version_t *v);
static ngx_http_flags_node_t *ngx_http_flags_lookup(
    ngx_http_flags_shctx_t *sh, u_char *key, size_t len, uint32_t hash);
static ngx_int_t ngx_http_flags_zone_existed(ngx_shm_zone_t *shm_zone);
static void ngx_http_flags_bind_pversion(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_project_t *project);


int64_t
ngx_http_flags_now_sec(void)
{
    struct timespec  ts;

    /* windows need a clock that is the same in every worker and never
     * jumps with the wall clock */
    (void) clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);

    return (int64_t) ts.tv_sec;
}


uint64_t
ngx_http_flags_now_ms(void)
{
    ngx_time_t  *tp;

    tp = ngx_timeofday();

    return (uint64_t) tp->sec * 1000 + tp->msec;
}


ngx_int_t
ngx_http_flags_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_http_flags_main_conf_t  *ofmcf = data;

    size_t                       len;
    ngx_slab_pool_t             *shpool;
    ngx_http_flags_shctx_t      *sh;
    ngx_http_flags_main_conf_t  *fmcf;

    fmcf = shm_zone->data;
    shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;
    fmcf->shpool = shpool;

    if (ofmcf) {
        /* a reload with the same zone: prepare beside the old state */
        fmcf->sh = ofmcf->sh;
        return ngx_http_flags_reconcile(fmcf, shm_zone->shm.log);
    }

    if (shm_zone->shm.exists) {
        fmcf->sh = shpool->data;
        return ngx_http_flags_reconcile(fmcf, shm_zone->shm.log);
    }

    sh = ngx_slab_alloc(shpool, sizeof(ngx_http_flags_shctx_t));
    if (sh == NULL) {
        return NGX_ERROR;
    }

    ngx_memzero(sh, sizeof(ngx_http_flags_shctx_t));
    ngx_rbtree_init(&sh->rbtree, &sh->sentinel, ngx_str_rbtree_insert_value);

    /* the ring of recent changes goes last among the flags' needs: a zone
     * too small for it works without it */
    sh->events = ngx_slab_calloc(shpool, FL_EVENTS_MAX * sizeof(fl_event_t));
    ngx_queue_init(&sh->queue);

    shpool->data = sh;
    fmcf->sh = sh;

    len = sizeof(" in flags zone \"\"") + shm_zone->shm.name.len;

    shpool->log_ctx = ngx_slab_alloc(shpool, len);
    if (shpool->log_ctx == NULL) {
        return NGX_ERROR;
    }

    ngx_sprintf(shpool->log_ctx, " in flags zone \"%V\"%Z",
                &shm_zone->shm.name);

    /* a full zone is reported once, by us, not at every allocation */
    shpool->log_nomem = 0;

    if (ngx_http_flags_zone_existed(shm_zone)) {
        ngx_log_error(NGX_LOG_NOTICE, shm_zone->shm.log, 0,
                      "flags: zone \"%V\" changed size: counters were reset%s",
                      &shm_zone->shm.name,
                      fmcf->state_file.len
                      ? ", rollbacks and overrides come from the state file"
                      : ", rollbacks and overrides were cleared");
    }

    return ngx_http_flags_reconcile(fmcf, shm_zone->shm.log);
}


/* Was there a zone of this name in the running cycle (a size change)? */

static ngx_int_t
ngx_http_flags_zone_existed(ngx_shm_zone_t *shm_zone)
{
    ngx_uint_t        i;
    ngx_list_part_t  *part;
    ngx_shm_zone_t   *zone;

    if (ngx_cycle == NULL || ngx_cycle->shared_memory.part.elts == NULL) {
        return 0;
    }

    part = (ngx_list_part_t *) &ngx_cycle->shared_memory.part;
    zone = part->elts;

    for (i = 0; /* void */ ; i++) {

        if (i >= part->nelts) {
            if (part->next == NULL) {
                break;
            }
            part = part->next;
            zone = part->elts;
            i = 0;
        }

        if (zone[i].tag == shm_zone->tag
            && zone[i].shm.name.len == shm_zone->shm.name.len
            && ngx_strncmp(zone[i].shm.name.data, shm_zone->shm.name.data,
                           shm_zone->shm.name.len) == 0)
        {
            return 1;
        }
    }

    return 0;
}


/*
 * Prepares a new generation in the master: frees what no process can
 * reach any more, then binds every flag of the new configuration.
 */

static ngx_int_t
ngx_http_flags_reconcile(ngx_http_flags_main_conf_t *fmcf, ngx_log_t *log)
{
    size_t                      i, n;
    uint32_t                    window;
    ngx_int_t                   rc;
    ngx_uint_t                  gen, committed, unbound;
    ngx_slab_pool_t            *shpool;
    ngx_http_flags_flag_t      *flag;
    ngx_http_flags_defs_t      *defs;
    ngx_http_flags_shctx_t     *sh;
    ngx_http_flags_project_t   *project;

    shpool = fmcf->shpool;
    sh = fmcf->sh;
    project = fmcf->projects.elts;
    unbound = 0;

    ngx_shmtx_lock(&shpool->mutex);

    gen = ++sh->generation;
    committed = sh->committed;
    fmcf->gen = gen;

    ngx_http_flags_collect(fmcf, committed);

    for (i = 0; i < fmcf->projects.nelts; i++) {
        ngx_http_flags_bind_pversion(fmcf, &project[i]);

        defs = ngx_http_flags_defs(&project[i]);

        for (n = 0; n < defs->nflags; n++) {
            flag = &defs->flags[n];
            /* resolved: its own window, or the http one */
            window = flag->policy.window;

            rc = ngx_http_flags_bind(fmcf, &project[i].name, flag, window,
                                     gen, committed, log);
            if (rc != NGX_OK) {
                unbound++;
            }
        }
    }

    ngx_shmtx_unlock(&shpool->mutex);

    if (unbound) {
        ngx_log_error(NGX_LOG_WARN, log, 0,
                      "flags: zone \"%V\" is full: %ui flags are evaluated "
                      "but not counted and cannot be rolled back; "
                      "increase the flags_zone size",
                      &fmcf->zone_name, unbound);
    }

    return NGX_OK;
}


/*
 * With the zone locked: takes out of the tree the nodes that the committed
 * generation no longer uses, and frees whatever no live process can reach.
 */

static void
ngx_http_flags_collect(ngx_http_flags_main_conf_t *fmcf, ngx_uint_t committed)
{
    ngx_uint_t                  live;
    ngx_queue_t                *q, *next;
    ngx_slab_pool_t            *shpool;
    ngx_http_flags_node_t      *node;
    ngx_http_flags_window_t    *w, **wp;
    ngx_http_flags_shctx_t     *sh;
    ngx_http_flags_version_t   *v, **vp;

    shpool = fmcf->shpool;
    sh = fmcf->sh;

    live = ngx_http_flags_min_live(sh);

    /* the committed generation may respawn a worker at any time */
    if (committed && committed < live) {
        live = committed;
    }

    for (q = ngx_queue_head(&sh->queue);
         q != ngx_queue_sentinel(&sh->queue);
         q = next)
    {
        next = ngx_queue_next(q);
        node = ngx_queue_data(q, ngx_http_flags_node_t, queue);

        if (node->last_gen < committed && node->in_tree) {
            /* removed by a committed configuration: never bound again */
            ngx_rbtree_delete(&sh->rbtree, &node->sn.node);
            node->in_tree = 0;
        }

        if (node->last_gen < committed && node->last_gen < live) {
            while (node->versions) {
                v = node->versions;
                node->versions = v->next;
                ngx_http_flags_free_version(shpool, v);
            }

            ngx_queue_remove(q);
            ngx_slab_free_locked(shpool, node);
            sh->nnodes--;
            continue;
        }

        for (vp = &node->versions; *vp; /* void */ ) {
            v = *vp;

            if (v->last_gen < committed && v->last_gen < live) {
                *vp = v->next;
                ngx_http_flags_free_version(shpool, v);
                continue;
            }

            /* windows replaced by a longer or shorter one: once nobody
             * counts into them, their events move to the head */
            for (wp = &v->windows->next; *wp; /* void */ ) {
                w = *wp;

                if (w->retired <= live) {
                    *wp = w->next;
                    fl_window_merge(ngx_http_flags_window_block(v->windows),
                                    ngx_http_flags_window_block(w));
                    ngx_slab_free_locked(shpool, w);
                    continue;
                }

                wp = &w->next;
            }

            vp = &v->next;
        }
    }
}


/* The oldest generation a live worker runs, or NGX_MAX_UINT32_VALUE. */

static ngx_uint_t
ngx_http_flags_min_live(ngx_http_flags_shctx_t *sh)
{
    ngx_uint_t              i, min;
    ngx_http_flags_proc_t  *p;

    if (sh->untracked) {
        return 0;
    }

    min = NGX_MAX_UINT32_VALUE;

    for (i = 0; i < NGX_HTTP_FLAGS_MAX_PROCS; i++) {
        p = &sh->procs[i];

        if (p->pid == 0) {
            continue;
        }

        if (!ngx_http_flags_proc_alive(p->pid)) {
            /* died without exit_process (a crash, kill -9) */
            p->pid = 0;
            continue;
        }

        if (p->gen < min) {
            min = p->gen;
        }
    }

    return min;
}


/*
 * With the zone locked: the project's answer version record, made if the
 * zone has none of that name yet (its definitions then count as the
 * committed ones: nothing was pushed for them).  The definitions' digest
 * covers each flag's definition hash in file order, so a flag changed,
 * added, removed or moved gives another one.
 */

static void
ngx_http_flags_bind_pversion(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_project_t *project)
{
    ngx_http_flags_shctx_t     *sh;
    ngx_http_flags_pversion_t  *pv;

    sh = fmcf->sh;

    for (pv = sh->pversions; pv; pv = pv->next) {
        if (pv->len == project->name.len
            && ngx_memcmp(pv->name, project->name.data, pv->len) == 0)
        {
            project->pversion = pv;
            return;
        }
    }

    pv = ngx_slab_alloc_locked(fmcf->shpool,
                               offsetof(ngx_http_flags_pversion_t, name)
                               + project->name.len);
    if (pv == NULL) {
        /* the zone is full: this project's changes are not pushed */
        project->pversion = NULL;
        return;
    }

    /* every field starts empty: the runtime definitions' too */
    ngx_memzero(pv, offsetof(ngx_http_flags_pversion_t, name));

    pv->version = 0;
    pv->defs = ngx_http_flags_defs(project)->hash;
    pv->sync_epoch = 0;
    pv->sync_ver = 0;
    pv->len = project->name.len;
    ngx_memcpy(pv->name, project->name.data, pv->len);

    /* only the master walks the list, with the lock */
    pv->next = sh->pversions;
    sh->pversions = pv;

    project->pversion = pv;
}


ngx_atomic_uint_t
ngx_http_flags_answer_version(ngx_http_flags_project_t *project)
{
    if (project->pversion == NULL) {
        return 0;
    }

    return __atomic_load_n(&project->pversion->version, __ATOMIC_ACQUIRE);
}


/* Whether this configuration is the one nginx committed last (a worker
 * of an older one is about to be told to exit); read without the lock. */

ngx_uint_t
ngx_http_flags_zone_current(ngx_http_flags_main_conf_t *fmcf)
{
    if (fmcf->sh == NULL) {
        return 1;
    }

    return __atomic_load_n(&fmcf->sh->committed, __ATOMIC_ACQUIRE)
               == fmcf->gen
           && !__atomic_load_n(&fmcf->sh->retired, __ATOMIC_ACQUIRE);
}


/*
 * Is a worker still running?  Called in the master: a worker is its child,
 * so a pid that is gone, a zombie, or now another process's child is not
 * that worker any more.  Called in a worker (a write of runtime
 * definitions awaiting every worker's acknowledgement): the other workers
 * are its siblings, children of its own parent.
 */

static ngx_uint_t
ngx_http_flags_proc_alive(ngx_pid_t pid)
{
    u_char   buf[512], *p, *last;
    ssize_t  n;
    ngx_fd_t fd;
    ngx_int_t ppid;
    u_char   name[64];

    ngx_sprintf(name, "/proc/%P/stat%Z", pid);

    fd = ngx_open_file(name, NGX_FILE_RDONLY, NGX_FILE_OPEN, 0);
    if (fd == NGX_INVALID_FILE) {
        if (ngx_errno == NGX_ENOENT) {
            return 0;
        }

        /* no /proc: ask the kernel whether the pid exists at all */
        return kill(pid, 0) == 0 || ngx_errno != NGX_ESRCH;
    }

    n = ngx_read_fd(fd, buf, sizeof(buf) - 1);
    ngx_close_file(fd);

    if (n <= 0) {
        return 0;
    }

    /* "pid (comm) S ppid ...": comm may hold spaces and parentheses */
    last = buf + n;
    p = last;

    while (p > buf && p[-1] != ')') {
        p--;
    }

    if (p == buf || last - p < 4) {
        return 1;
    }

    p++;                                    /* the space */

    if (*p == 'Z' || *p == 'X' || *p == 'x') {
        return 0;
    }

    p += 2;

    for (ppid = 0; p < last && *p >= '0' && *p <= '9'; p++) {
        ppid = ppid * 10 + (*p - '0');
    }

    if (ngx_process == NGX_PROCESS_WORKER) {
        return ppid == (ngx_int_t) getppid();
    }

    return ppid == (ngx_int_t) getpid();
}


/*
 * With the zone locked: binds one flag of generation gen to its node and
 * version, making what is missing.  NGX_DECLINED when the zone is full:
 * the flag is then evaluated with its configured percentage and not
 * counted.
 */

static ngx_int_t
ngx_http_flags_bind(ngx_http_flags_main_conf_t *fmcf, ngx_str_t *project,
    ngx_http_flags_flag_t *flag, uint32_t window, ngx_uint_t gen,
    ngx_uint_t committed, ngx_log_t *log)
{
    u_char                      key[NGX_HTTP_FLAGS_KEY_LEN];
    size_t                      len;
    uint32_t                    hash;
    ngx_http_flags_node_t      *node;
    ngx_http_flags_version_t   *v;

    flag->node = NULL;
    flag->version = NULL;
    flag->replaced = NULL;
    flag->totals = NULL;
    flag->ctl = NULL;
    flag->window = NULL;
    flag->ramp = NULL;
    flag->witness = NULL;

    /* the key: "project\0flag" */
    len = project->len + 1 + flag->name.len;
    ngx_memcpy(key, project->data, project->len);
    key[project->len] = '\0';
    ngx_memcpy(key + project->len + 1, flag->name.data, flag->name.len);

    hash = ngx_crc32_short(key, len);
    node = ngx_http_flags_lookup(fmcf->sh, key, len, hash);

    if (node == NULL) {
        return ngx_http_flags_bind_node(fmcf, flag, key, len, hash, window,
                                        gen);
    }

    node->last_gen = gen;

    v = ngx_http_flags_bind_match(flag, node, committed);

    if (v == NULL) {
        v = ngx_http_flags_new_version(fmcf->shpool, flag->def_hash, window,
                                       gen);
        if (v == NULL) {
            return NGX_DECLINED;
        }

        /* published last: a reader walking the list sees it whole */
        v->next = node->versions;
        __atomic_store_n(&node->versions, v, __ATOMIC_RELEASE);

        return ngx_http_flags_bound(fmcf->shpool, flag, node, v);
    }

    v->last_gen = gen;

    ngx_http_flags_bind_window(fmcf, flag, v, window, gen, log);

    return ngx_http_flags_bound(fmcf->shpool, flag, node, v);
}


/* With the zone locked: a new node for the key, with its first version. */

static ngx_int_t
ngx_http_flags_bind_node(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_flag_t *flag, u_char *key, size_t len, uint32_t hash,
    uint32_t window, ngx_uint_t gen)
{
    ngx_slab_pool_t           *shpool;
    ngx_http_flags_node_t     *node;
    ngx_http_flags_shctx_t    *sh;
    ngx_http_flags_version_t  *v;

    shpool = fmcf->shpool;
    sh = fmcf->sh;

    node = ngx_slab_calloc_locked(shpool,
                                  offsetof(ngx_http_flags_node_t, key) + len);
    if (node == NULL) {
        return NGX_DECLINED;
    }

    v = ngx_http_flags_new_version(shpool, flag->def_hash, window, gen);
    if (v == NULL) {
        ngx_slab_free_locked(shpool, node);
        return NGX_DECLINED;
    }

    ngx_memcpy(node->key, key, len);
    node->key_len = len;
    node->first_gen = gen;
    node->last_gen = gen;
    node->in_tree = 1;
    node->versions = v;
    node->sn.str.data = node->key;
    node->sn.str.len = len;
    node->sn.node.key = hash;

    ngx_rbtree_insert(&sh->rbtree, &node->sn.node);
    ngx_queue_insert_tail(&sh->queue, &node->queue);
    sh->nnodes++;

    return ngx_http_flags_bound(fmcf->shpool, flag, node, v);
}


/*
 * The version of the flag's definition, if the running configuration
 * still uses it (NULL if not); the version it uses for another definition
 * is kept in flag->replaced for the commit, which carries its rollback and
 * override over to the new one.
 */

static ngx_http_flags_version_t *
ngx_http_flags_bind_match(ngx_http_flags_flag_t *flag,
    ngx_http_flags_node_t *node, ngx_uint_t committed)
{
    ngx_http_flags_version_t  *v, *match;

    match = NULL;

    for (v = node->versions; v; v = v->next) {
        if (v->last_gen < committed || v->superseded) {
            continue;
        }

        if (v->ctl.def_hash == flag->def_hash) {
            if (match == NULL) {
                match = v;
            }

        } else if (v->first_gen <= committed) {
            flag->replaced = v;
        }
    }

    return match;
}


/*
 * With the zone locked: another window length for a version kept is a new
 * head where every worker counts from now on; the old one is still summed,
 * and merged into the head once no worker that could be counting into it
 * is left.  A full zone keeps the old length.
 */

static void
ngx_http_flags_bind_window(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_flag_t *flag, ngx_http_flags_version_t *v,
    uint32_t window, ngx_uint_t gen, ngx_log_t *log)
{
    ngx_http_flags_window_t  *w;

    if (fl_window_seconds(ngx_http_flags_window_block(v->windows))
        == window)
    {
        return;
    }

    w = ngx_http_flags_new_window(fmcf->shpool, window);
    if (w == NULL) {
        ngx_log_error(NGX_LOG_WARN, log, 0,
                      "flags: zone \"%V\" is full: flag \"%V\" keeps its "
                      "window of %uD s", &fmcf->zone_name, &flag->name,
                      fl_window_seconds(
                          ngx_http_flags_window_block(v->windows)));
        return;
    }

    v->windows->retired = gen;
    w->next = v->windows;
    __atomic_store_n(&v->windows, w, __ATOMIC_RELEASE);
}


static ngx_int_t
ngx_http_flags_bound(ngx_slab_pool_t *shpool, ngx_http_flags_flag_t *flag,
    ngx_http_flags_node_t *node, ngx_http_flags_version_t *v)
{
    flag->node = node;
    flag->version = v;
    flag->totals = &node->totals;
    flag->ctl = &v->ctl;
    flag->window = ngx_http_flags_window_block(v->windows);
    flag->ramp = &v->ramp;

    if (flag->ramp_def && v->witness == NULL) {
        /* the zone is locked; a full zone leaves the ramp without
         * witnesses: its regression rule then sees no error, and the
         * absolute rule guards the flag unnarrowed (docs/ramps.md) */
        v->witness = ngx_slab_alloc_locked(shpool, sizeof(fl_witness_t));
        if (v->witness) {
            fl_witness_init(v->witness);
        }
    }

    flag->witness = v->witness;

    return NGX_OK;
}


static ngx_http_flags_window_t *
ngx_http_flags_new_window(ngx_slab_pool_t *shpool, uint32_t seconds)
{
    ngx_http_flags_window_t  *w;

    w = ngx_slab_alloc_locked(shpool, offsetof(ngx_http_flags_window_t, block)
                                      + fl_window_size(seconds));
    if (w == NULL) {
        return NULL;
    }

    w->next = NULL;
    w->retired = 0;
    fl_window_init(w->block, seconds);

    return w;
}


static ngx_http_flags_version_t *
ngx_http_flags_new_version(ngx_slab_pool_t *shpool, uint64_t def_hash,
    uint32_t seconds, ngx_uint_t gen)
{
    ngx_http_flags_version_t  *v;

    v = ngx_slab_alloc_locked(shpool, sizeof(ngx_http_flags_version_t));
    if (v == NULL) {
        return NULL;
    }

    v->windows = ngx_http_flags_new_window(shpool, seconds);
    if (v->windows == NULL) {
        ngx_slab_free_locked(shpool, v);
        return NULL;
    }

    v->next = NULL;
    v->first_gen = gen;
    v->last_gen = gen;
    fl_control_init(&v->ctl, def_hash);
    fl_ramp_init(&v->ramp);
    v->witness = NULL;
    v->defined_ms = 0;
    v->sync_known = 0;
    v->sync_ramp_actions = 0;
    v->sync_ramp_seen = 0;

    return v;
}


static void
ngx_http_flags_free_version(ngx_slab_pool_t *shpool,
    ngx_http_flags_version_t *v)
{
    ngx_http_flags_window_t  *w, *next;

    for (w = v->windows; w; w = next) {
        next = w->next;
        ngx_slab_free_locked(shpool, w);
    }

    if (v->witness) {
        ngx_slab_free_locked(shpool, v->witness);
    }

    ngx_slab_free_locked(shpool, v);
}


static ngx_http_flags_node_t *
ngx_http_flags_lookup(ngx_http_flags_shctx_t *sh, u_char *key, size_t len,
    uint32_t hash)
{
    ngx_str_t        name;
    ngx_str_node_t  *sn;

    name.data = key;
    name.len = len;

    sn = ngx_str_rbtree_lookup(&sh->rbtree, &name, hash);
    if (sn == NULL) {
        return NULL;
    }

    return (ngx_http_flags_node_t *) ((u_char *) sn
                                      - offsetof(ngx_http_flags_node_t, sn));
}


/* The module's configuration of a cycle, when that cycle has a zone. */

ngx_http_flags_main_conf_t *
ngx_http_flags_zone_conf(ngx_cycle_t *cycle)
{
    ngx_http_flags_main_conf_t  *fmcf;

    if (cycle->conf_ctx == NULL
        || cycle->conf_ctx[ngx_http_module.index] == NULL)
    {
        return NULL;
    }

    fmcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_http_flags_module);

    return (fmcf && fmcf->sh) ? fmcf : NULL;
}


/*
 * nginx commits the new cycle (init_module): from now on its generation is
 * the one whose state the state file describes; definition changes take
 * effect (their old versions are left to the old workers) and are logged.
 */

void
ngx_http_flags_zone_commit(ngx_cycle_t *cycle,
    ngx_http_flags_main_conf_t *fmcf)
{
    ngx_http_flags_main_conf_t  *ofmcf;

    /* a zone left behind by a size change: its workers stop writing the
     * state file, which now describes the new zone */

    ofmcf = cycle->old_cycle ? ngx_http_flags_zone_conf(cycle->old_cycle)
                             : NULL;

    if (ofmcf && ofmcf->sh != fmcf->sh) {
        ngx_shmtx_lock(&ofmcf->shpool->mutex);
        ofmcf->sh->retired = 1;
        ngx_shmtx_unlock(&ofmcf->shpool->mutex);
    }

    ngx_shmtx_lock(&fmcf->shpool->mutex);
    fmcf->sh->committed = fmcf->gen;
    ngx_shmtx_unlock(&fmcf->shpool->mutex);
}


/* Whether the project's committed definitions differ from those its
 * answer version was last bumped for; they are recorded as known. */

ngx_uint_t
ngx_http_flags_zone_defs_committed(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_project_t *project)
{
    uint64_t    hash;
    ngx_uint_t  changed;

    if (project->pversion == NULL) {
        return 0;
    }

    ngx_shmtx_lock(&fmcf->shpool->mutex);

    hash = ngx_http_flags_defs(project)->hash;
    changed = project->pversion->defs != hash;
    project->pversion->defs = hash;

    ngx_shmtx_unlock(&fmcf->shpool->mutex);

    return changed;
}


/*
 * A runtime version of a project's definitions in this worker, bound
 * under the zone's lock.  Each flag of defs is bound as
 * a reload binds it: an unchanged definition finds its version (counters,
 * window, rollback, override, ramp); a new one gets a fresh version, and
 * created[i] says so (the worker that creates it hands it the old one's
 * mitigations: ngx_http_flags_control_definition()).  Every version of
 * old that defs no longer uses (a changed or removed flag) is superseded:
 * no later binding finds it, so a flag removed and added again, or a
 * definition reverted, starts fresh but for what is carried.  Returns the
 * number of flags without room in the zone.
 */

ngx_uint_t
ngx_http_flags_zone_bind_defs(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_project_t *project, ngx_http_flags_defs_t *old,
    ngx_http_flags_defs_t *defs, u_char *created, ngx_log_t *log)
{
    long                    k;
    uint64_t                now;
    ngx_uint_t              i, unbound, committed;
    ngx_http_flags_flag_t  *flag, *was;

    unbound = 0;
    now = ngx_http_flags_now_ms();

    ngx_shmtx_lock(&fmcf->shpool->mutex);

    committed = fmcf->sh->committed;

    for (i = 0; i < defs->nflags; i++) {
        flag = &defs->flags[i];
        created[i] = 0;

        if (ngx_http_flags_bind(fmcf, &project->name, flag,
                                flag->policy.window, fmcf->gen, committed,
                                log)
            != NGX_OK)
        {
            unbound++;
            continue;
        }

        /* the generation's replaced version is the reload's business */
        flag->replaced = NULL;

        if (flag->version->defined_ms == 0) {
            flag->version->defined_ms = now;
            created[i] = 1;
        }
    }

    for (i = 0; old && i < old->nflags; i++) {
        was = &old->flags[i];

        if (was->version == NULL) {
            continue;
        }

        k = fl_project_find_flag(defs->core, (const char *) was->name.data,
                                 was->name.len);

        if (k < 0 || defs->flags[k].version != was->version) {
            was->version->superseded = 1;
        }
    }

    ngx_shmtx_unlock(&fmcf->shpool->mutex);

    return unbound;
}


/*
 * Runtime definitions, the acknowledgements: this worker serves every
 * publication up to seq; and whether every live worker of the committed
 * generation does (a draining worker of an older one keeps what it had).
 */

void
ngx_http_flags_zone_defs_ack(ngx_http_flags_main_conf_t *fmcf,
    ngx_atomic_uint_t seq)
{
    ngx_http_flags_proc_t  *own;

    own = ngx_http_flags_zone_own(fmcf->sh);

    if (own) {
        __atomic_store_n(&own->defs_seq, seq, __ATOMIC_RELEASE);
    }
}


ngx_uint_t
ngx_http_flags_zone_defs_acked(ngx_http_flags_main_conf_t *fmcf,
    ngx_atomic_uint_t seq)
{
    ngx_uint_t              i, committed;
    ngx_http_flags_proc_t  *p;

    committed = __atomic_load_n(&fmcf->sh->committed, __ATOMIC_ACQUIRE);

    for (i = 0; i < NGX_HTTP_FLAGS_MAX_PROCS; i++) {
        p = &fmcf->sh->procs[i];

        if (p->pid == 0 || p->gen != committed
            || __atomic_load_n(&p->defs_seq, __ATOMIC_ACQUIRE) >= seq)
        {
            continue;
        }

        /* one that died is respawned, and the new worker takes the
         * newest version when it starts */
        if (p->pid == ngx_pid || ngx_http_flags_proc_alive(p->pid)) {
            return 0;
        }
    }

    return 1;
}


/*
 * The counts' fold (ngx_http_flags_eval.c): the evaluations this worker
 * holds are in the zone by due (ngx_current_msec, the monotonic clock
 * every process of the host shares), 0: it holds none, as it has just
 * folded them.  A fold's number moves before its time is cleared: a
 * reader that sees a later time (counts held again) also sees the number
 * moved, and knows the counts it waited for are in.
 */

void
ngx_http_flags_zone_counts_due(ngx_http_flags_main_conf_t *fmcf,
    ngx_msec_t due)
{
    ngx_http_flags_proc_t  *own;

    if (fmcf->sh == NULL) {
        return;
    }

    /* untracked (no slot): readers do not wait for this worker */
    own = ngx_http_flags_zone_own(fmcf->sh);

    if (own == NULL) {
        return;
    }

    if (due == 0) {
        __atomic_fetch_add(&own->counts_folds, 1, __ATOMIC_RELEASE);
    }

    __atomic_store_n(&own->counts_due, due, __ATOMIC_RELEASE);
}


/*
 * How long a reader waits before it asks again whether every other
 * process has folded the evaluations it held when the reader came, in
 * milliseconds; 0: all are in the zone.  marks holds, for each slot, 1 +
 * the number of its fold the reader waits for (0: none): first fills it,
 * the calls after it clear what has come.  A process that holds counts
 * past its due time (descheduled on a busy machine) is asked again every
 * millisecond, up to NGX_HTTP_FLAGS_LATE_MSEC past it; one still holding
 * then was killed or is stuck, and is not waited for.  A slot taken by a
 * new worker starts with nothing held.
 */

ngx_msec_t
ngx_http_flags_zone_counts_wait(ngx_http_flags_main_conf_t *fmcf,
    ngx_atomic_uint_t *marks, ngx_uint_t first)
{
    ngx_msec_t               due, wait;
    ngx_atomic_uint_t        folds, mark;
    ngx_uint_t               i;
    ngx_msec_int_t           ahead;
    ngx_http_flags_proc_t   *p;
    ngx_http_flags_shctx_t  *sh;

    sh = fmcf->sh;
    wait = 0;

    if (sh == NULL) {
        return 0;
    }

    for (i = 0; i < NGX_HTTP_FLAGS_MAX_PROCS; i++) {
        p = &sh->procs[i];

        mark = first ? 0 : marks[i];

        if (!first && mark == 0) {
            continue;
        }

        marks[i] = 0;

        if (p->pid == 0 || p->pid == ngx_pid) {
            continue;
        }

        due = __atomic_load_n(&p->counts_due, __ATOMIC_ACQUIRE);
        folds = __atomic_load_n(&p->counts_folds, __ATOMIC_ACQUIRE);

        if (due == 0) {
            continue;
        }

        if (!first && folds + 1 != mark) {
            /* folded since: what it holds now came after the reader */
            continue;
        }

        ahead = (ngx_msec_int_t) (due - ngx_current_msec);

        if (ahead <= -NGX_HTTP_FLAGS_LATE_MSEC) {
            continue;
        }

        marks[i] = folds + 1;

        if (ahead < 1) {
            ahead = 1;
        }

        if ((ngx_msec_t) ahead > wait) {
            wait = ahead;
        }
    }

    return wait;
}


/* A worker (or the single process) records its generation in the zone. */

void
ngx_http_flags_zone_attach(ngx_cycle_t *cycle,
    ngx_http_flags_main_conf_t *fmcf)
{
    ngx_uint_t               i;
    ngx_http_flags_proc_t   *p, *free;
    ngx_http_flags_shctx_t  *sh;

    sh = fmcf->sh;
    free = NULL;

    ngx_shmtx_lock(&fmcf->shpool->mutex);

    for (i = 0; i < NGX_HTTP_FLAGS_MAX_PROCS; i++) {
        p = &sh->procs[i];

        if (p->pid == ngx_pid) {
            free = p;
            break;
        }

        if (p->pid == 0 && free == NULL) {
            free = p;
        }
    }

    if (free) {
        free->pid = ngx_pid;
        free->gen = fmcf->gen;
        free->defs_seq = 0;
        free->counts_due = 0;

    } else {
        /* nothing can be freed safely any more until a restart */
        sh->untracked = 1;
    }

    ngx_shmtx_unlock(&fmcf->shpool->mutex);

    if (free == NULL) {
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0,
                      "flags: zone \"%V\": more than %d worker processes, "
                      "memory of removed flags is no longer reused",
                      &fmcf->zone_name, NGX_HTTP_FLAGS_MAX_PROCS);
    }
}


/* An exiting worker gives its slot back. */

void
ngx_http_flags_zone_detach(ngx_http_flags_main_conf_t *fmcf)
{
    ngx_http_flags_proc_t  *own;

    ngx_shmtx_lock(&fmcf->shpool->mutex);

    own = ngx_http_flags_zone_own(fmcf->sh);

    if (own) {
        own->pid = 0;
    }

    ngx_shmtx_unlock(&fmcf->shpool->mutex);
}


/* This process's slot in the zone (zone_attach() gave it), NULL when it
 * has none. */

static ngx_http_flags_proc_t *
ngx_http_flags_zone_own(ngx_http_flags_shctx_t *sh)
{
    ngx_uint_t  i;

    for (i = 0; i < NGX_HTTP_FLAGS_MAX_PROCS; i++) {
        if (sh->procs[i].pid == ngx_pid) {
            return &sh->procs[i];
        }
    }

    return NULL;
}


/* ------------------------------------------------- the request path */


/* A flag's window at now over seconds: its enabled evaluations, errors
 * and distinct sources.  With the lock: the head and the windows it
 * replaced hold the events. */

void
ngx_http_flags_window_sums(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_version_t *v, int64_t now, uint32_t seconds,
    uint64_t *enabled, uint64_t *errors, uint64_t *sources)
{
    size_t                    n;
    uint32_t                  keys[FL_SOURCE_SLOTS];
    ngx_http_flags_window_t  *w;

    *enabled = 0;
    *errors = 0;
    n = 0;

    ngx_shmtx_lock(&fmcf->shpool->mutex);

    for (w = v->windows; w; w = w->next) {
        fl_window_sums(ngx_http_flags_window_block(w), now, seconds,
                       enabled, errors);
        fl_window_sources(ngx_http_flags_window_block(w), now, seconds,
                          keys, &n, FL_SOURCE_SLOTS);
    }

    ngx_shmtx_unlock(&fmcf->shpool->mutex);

    *sources = n;
}


/* The flag's window second by second (flags_status's "perSecond"): the
 * last min(window, FL_SERIES_MAX) seconds of every block it counts in. */

void
ngx_http_flags_window_series(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_flag_t *flag, int64_t now, fl_series_t *t)
{
    ngx_http_flags_window_t  *w;

    ngx_memzero(t, sizeof(fl_series_t));

    if (flag->node == NULL) {
        return;
    }

    t->seconds = ngx_min(flag->policy.window, FL_SERIES_MAX);

    ngx_shmtx_lock(&fmcf->shpool->mutex);

    for (w = flag->version->windows; w; w = w->next) {
        fl_window_series(ngx_http_flags_window_block(w), now, t);
    }

    ngx_shmtx_unlock(&fmcf->shpool->mutex);
}


/*
 * The distinct sources of the flag's window errors now, with their ages in
 * seconds (flags_sync sends them to the fleet).  keys and ages hold
 * FL_SOURCE_SLOTS.  Returns how many.
 */

ngx_uint_t
ngx_http_flags_source_ages(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_flag_t *flag, int64_t now, uint32_t *keys, uint32_t *ages)
{
    size_t                    n;
    ngx_http_flags_window_t  *w;

    if (flag->node == NULL) {
        return 0;
    }

    n = 0;

    ngx_shmtx_lock(&fmcf->shpool->mutex);

    for (w = flag->version->windows; w; w = w->next) {
        fl_window_source_ages(ngx_http_flags_window_block(w), now,
                              flag->policy.window, keys, ages, &n,
                              FL_SOURCE_SLOTS);
    }

    ngx_shmtx_unlock(&fmcf->shpool->mutex);

    return n;
}


/*
 * What a ramp's step (and its backstop) reads of the flag: its cohorts'
 * lifetime evaluations, their witnessed errors (the regression rule's
 * counts, docs/regression.md), what stops the ramp, and the policy's
 * minSources.
 */

void
ngx_http_flags_ramp_input(ngx_http_flags_defs_t *defs,
    ngx_http_flags_flag_t *flag, fl_ramp_input_t *in)
{
    fl_flag_info_t       info;
    fl_state_snapshot_t  s;

    ngx_memzero(in, sizeof(fl_ramp_input_t));

    if (flag->node == NULL) {
        return;
    }

    fl_state_snapshot(flag->totals, flag->ctl, 0, 0, 0, &s);

    in->on = s.on_evaluations;
    in->off = s.off_evaluations;
    in->rolled_back = s.rolled_back;
    in->stopped = s.override_kind != FL_OVERRIDE_NONE;
    in->guard = flag->policy.mode == FL_ROLLBACK_ON;
    in->min_sources = flag->policy.min_sources;
    in->witness = flag->witness;

    if (flag->witness) {
        in->on_errors = __atomic_load_n(&flag->witness->errors_on,
                                        __ATOMIC_RELAXED);
        in->off_errors = __atomic_load_n(&flag->witness->errors_off,
                                         __ATOMIC_RELAXED);
    }

    if (fl_project_flag_info(defs->core, flag - defs->flags, &info)
        == 0 && !info.enabled)
    {
        in->stopped = 1;            /* the kill switch of the file */
    }
}


void
ngx_http_flags_snapshot(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_flag_t *flag, int64_t now, fl_state_snapshot_t *s)
{
    uint32_t  seconds;
    uint64_t  enabled, errors, sources;

    if (flag->node == NULL) {
        /* the zone was full: nothing is counted for this flag */
        ngx_memzero(s, sizeof(fl_state_snapshot_t));
        s->policy = flag->policy;
        return;
    }

    seconds = flag->policy.window;

    ngx_http_flags_window_sums(fmcf, flag->version, now, seconds,
                               &enabled, &errors, &sources);

    fl_state_snapshot(flag->totals, flag->ctl, seconds, enabled, errors, s);
    s->window_sources = sources;
    s->policy = flag->policy;

    s->defined_ms = flag->version->defined_ms;

    if (flag->ramp_def) {
        /* read word by word by the writer (fl_ramp_read()) */
        s->ramp = flag->ramp;
        s->now_ms = ngx_http_flags_now_ms();
    }
}


/* Clears a rollback and empties the windows so it does not trip again at
 * once (docs/rollback.md); returns 1 if there was one. */

ngx_uint_t
ngx_http_flags_clear_rollback(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_flag_t *flag)
{
    ngx_http_flags_window_t  *w;

    ngx_shmtx_lock(&fmcf->shpool->mutex);

    for (w = flag->version->windows; w; w = w->next) {
        fl_window_clear(ngx_http_flags_window_block(w));
    }

    ngx_shmtx_unlock(&fmcf->shpool->mutex);

    return fl_control_clear_rollback(flag->ctl);
}


void
ngx_http_flags_set_override(ngx_http_flags_flag_t *flag,
    fl_override_kind_t kind, uint32_t milli)
{
    fl_control_set_override(flag->ctl, kind, milli);
}


/*
 * The rollbacks and overrides of the committed generation, for the state
 * file: at most max entries, names copied into keys (max times
 * NGX_HTTP_FLAGS_KEY_LEN bytes) so that nothing points into the zone once
 * it is unlocked, and the snapshot's sequence number in *seq.  Returns the
 * number of entries, or (size_t) -1 when the zone was replaced by another
 * (its workers must not write the file).
 */

size_t
ngx_http_flags_zone_saved(ngx_http_flags_main_conf_t *fmcf,
    fl_saved_flag_t *e, u_char *keys, fl_ramp_t *ramps, size_t max,
    ngx_atomic_uint_t *seq)
{
    u_char                    *k;
    size_t                     n, plen;
    ngx_uint_t                 c, ramped;
    ngx_queue_t               *q;
    fl_state_snapshot_t        s;
    ngx_http_flags_node_t     *node;
    ngx_http_flags_shctx_t    *sh;
    ngx_http_flags_version_t  *v;

    sh = fmcf->sh;
    n = 0;

    ngx_shmtx_lock(&fmcf->shpool->mutex);

    if (sh->retired) {
        ngx_shmtx_unlock(&fmcf->shpool->mutex);
        return (size_t) -1;
    }

    c = sh->committed;

    /* snapshots are ordered by the mutex: a later one holds every change
     * an earlier one held */
    *seq = ++sh->state_seq;

    for (q = ngx_queue_head(&sh->queue);
         q != ngx_queue_sentinel(&sh->queue) && n < max;
         q = ngx_queue_next(q))
    {
        node = ngx_queue_data(q, ngx_http_flags_node_t, queue);

        if (node->first_gen > c || node->last_gen < c) {
            continue;
        }

        for (v = node->versions; v; v = v->next) {
            if (v->first_gen <= c && v->last_gen >= c) {
                break;
            }
        }

        if (v == NULL) {
            continue;
        }

        /* a ramp that has started is kept, whatever its control says */
        ramped = __atomic_load_n(&v->ramp.state, __ATOMIC_RELAXED)
                 != FL_RAMP_PENDING;

        if (!ramped && !fl_control_active(&v->ctl)) {
            continue;
        }

        fl_state_snapshot(NULL, &v->ctl, 0, 0, 0, &s);

        k = keys + n * NGX_HTTP_FLAGS_KEY_LEN;
        ngx_memcpy(k, node->key, node->key_len);
        plen = ngx_strlen(k);

        e[n].project = (const char *) k;
        e[n].project_len = plen;
        e[n].flag = (const char *) k + plen + 1;
        e[n].flag_len = node->key_len - plen - 1;
        e[n].def_hash = s.def_hash;
        e[n].rolled_back = s.rolled_back;
        e[n].rollback_at_ms = s.rollback_at_ms;
        e[n].rollback_errors = s.rollback_errors;
        e[n].rollback_enabled = s.rollback_enabled;
        e[n].rollback_sources = s.rollback_sources;
        e[n].rollback_by = s.rollback_by;
        e[n].override_kind = s.override_kind;
        e[n].override_milli = s.override_milli;
        e[n].ramp = NULL;

        if (ramped) {
            fl_ramp_read(&v->ramp, &ramps[n]);
            e[n].ramp = &ramps[n];
        }

        n++;
    }

    ngx_shmtx_unlock(&fmcf->shpool->mutex);

    return n;
}


/* ------------------------------------------------------- flags_metrics */


/* A report refused with the error code of reason (fl_refused_t). */

void
ngx_http_flags_refused(ngx_http_request_t *r, ngx_uint_t reason)
{
    ngx_http_flags_main_conf_t  *fmcf;

    fmcf = ngx_http_get_module_main_conf(r, ngx_http_flags_module);

    if (fmcf->sh == NULL || reason >= FL_REFUSED_MAX) {
        return;
    }

    (void) ngx_atomic_fetch_add(&fmcf->sh->refused[reason], 1);
}


/*
 * The slab allocator's pages: those in use (whole pages, however full
 * their slots are) and the free ones.  Together they are the zone less
 * the allocator's own page table.
 */

void
ngx_http_flags_zone_bytes(ngx_http_flags_main_conf_t *fmcf, uint64_t *used,
    uint64_t *nfree)
{
    ngx_uint_t        pages, pfree;
    ngx_slab_pool_t  *shpool;

    shpool = fmcf->shpool;

    if (shpool == NULL) {
        *used = 0;
        *nfree = 0;
        return;
    }

    ngx_shmtx_lock(&shpool->mutex);

    pages = shpool->last - shpool->pages;
    pfree = shpool->pfree;

    ngx_shmtx_unlock(&shpool->mutex);

    *used = (uint64_t) (pages - ngx_min(pfree, pages)) * ngx_pagesize;
    *nfree = (uint64_t) pfree * ngx_pagesize;
}


/* ---------------------------------------------------------- the events */


/*
 * The ring of recent control changes.  A writer takes the next sequence
 * number with one atomic add, marks its slot as being written (seq 0),
 * fills it and publishes the number last; a reader copies a slot and keeps
 * it only if its number was the same before and after the copy.  No lock:
 * a worker that dies while writing leaves one slot marked free.
 */

static size_t
ngx_http_flags_event_copy(char *dst, size_t max, const u_char *src,
    size_t len)
{
    len = fl_utf8_prefix((const char *) src, len, max);
    ngx_memcpy(dst, src, len);

    return len;
}


void
ngx_http_flags_event_add(ngx_http_flags_main_conf_t *fmcf,
    fl_event_kind_t kind, fl_event_by_t by, ngx_str_t *project,
    ngx_str_t *flag, ngx_str_t *who, u_char *detail, size_t len)
{
    fl_event_t              *e;
    ngx_atomic_uint_t        seq;
    ngx_http_flags_shctx_t  *sh;

    sh = fmcf->sh;

    if (sh == NULL || sh->events == NULL) {
        return;
    }

    seq = ngx_atomic_fetch_add(&sh->event_seq, 1) + 1;
    e = &sh->events[seq % FL_EVENTS_MAX];

    __atomic_store_n(&e->seq, 0, __ATOMIC_RELEASE);

    e->at_ms = ngx_http_flags_now_ms();
    e->kind = kind;
    e->by = by;
    e->project_len = ngx_http_flags_event_copy(e->project,
                                               sizeof(e->project),
                                               project->data, project->len);
    e->flag_len = flag ? ngx_http_flags_event_copy(e->flag, sizeof(e->flag),
                                                   flag->data, flag->len)
                       : 0;
    e->who_len = (who && who->len)
                 ? ngx_http_flags_event_copy(e->who, sizeof(e->who),
                                             who->data, who->len)
                 : 0;
    e->detail_len = ngx_http_flags_event_copy(e->detail, sizeof(e->detail),
                                              detail, len);

    __atomic_store_n(&e->seq, (uint64_t) seq, __ATOMIC_RELEASE);
}


void
ngx_http_flags_events_read(ngx_http_flags_main_conf_t *fmcf, fl_event_t *out)
{
    uint64_t     before;
    ngx_uint_t   i;
    fl_event_t  *e;

    for (i = 0; i < FL_EVENTS_MAX; i++) {
        out[i].seq = 0;

        if (fmcf->sh == NULL || fmcf->sh->events == NULL) {
            continue;
        }

        e = &fmcf->sh->events[i];
        before = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);

        if (before == 0) {
            continue;
        }

        ngx_memcpy(&out[i], e, sizeof(fl_event_t));
        __atomic_thread_fence(__ATOMIC_ACQUIRE);

        if (__atomic_load_n(&e->seq, __ATOMIC_RELAXED) != before) {
            out[i].seq = 0;         /* rewritten meanwhile */
            continue;
        }

        out[i].seq = before;
    }
}


ngx_atomic_uint_t
ngx_http_flags_events_seq(ngx_http_flags_main_conf_t *fmcf)
{
    return fmcf->sh ? fmcf->sh->event_seq : 0;
}


/* flags_sync's standing, as its syncing worker wrote it into the zone:
 * read here, so that any layer may (the fleet's files write it). */

/* ------------------------------------------ flags_status, flags_metrics */

ngx_uint_t
ngx_http_flags_zone_sync_state(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_sync_state_t *st)
{
    int                      never;
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
    /* computed now, so it grows while Redis is away */
    st->stale_ms = fl_sync_stale_ms(ngx_current_msec, sh->sync_ok_msec,
                                    sh->sync_start_msec, &never);
    st->stale_never = never;
    st->interval_ms = fmcf->sync_interval;
    st->round_ms = sh->sync_round_ms;
    st->failures = sh->sync_failures;
    st->rounds = sh->sync_rounds;

    if ((time_t) (lock >> 32) >= ngx_time()) {
        st->owner = (ngx_pid_t) (lock & 0xffffffff);
    }

    return 1;
}


/* Redis is away: not connected, or no round answered for two intervals
 * and a second (a round is not answered within 5 intervals, at least 2 s,
 * before it fails: this says it sooner). */

ngx_uint_t
ngx_http_flags_zone_sync_away(ngx_http_flags_main_conf_t *fmcf)
{
    uint64_t                 now, last;
    ngx_http_flags_shctx_t  *sh;

    if (fmcf->sync == NULL || fmcf->sh == NULL) {
        return 0;
    }

    sh = fmcf->sh;

    if (!sh->sync_connected) {
        return 1;
    }

    now = ngx_http_flags_now_ms();
    last = sh->sync_last_ok_ms;

    return last == 0 || now > last + 2 * fmcf->sync_interval + 1000;
}


/* The ramp's percentage into the control word, as its state says (a
 * state restored from the state file). */

void
ngx_http_flags_zone_ramp_apply(ngx_http_flags_flag_t *flag)
{
    fl_ramp_t  r;

    if (flag->ramp_def == NULL || flag->ramp == NULL) {
        return;
    }

    fl_ramp_read(flag->ramp, &r);

    fl_control_set_ramp(flag->ctl, r.state == FL_RAMP_PENDING
                                   ? FL_RAMP_NONE
                                   : fl_ramp_milli(flag->ramp_def, &r,
                                                   flag->rollout_milli));
}
