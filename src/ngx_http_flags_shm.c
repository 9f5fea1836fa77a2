/*
 * ngx_http_flags_shm.c - the shared zone and the state file.
 *
 * The zone holds only mutable state: one node a (project, flag) with a
 * fl_state block (counters, window, rollback, override).  Definitions stay
 * in each process's configuration.  Nodes are found by "project\0flag", so
 * a reload that keeps a flag keeps its state.
 */

#include "ngx_http_flags_module.h"


static ngx_int_t ngx_http_flags_reconcile(ngx_http_flags_main_conf_t *fmcf,
    ngx_log_t *log);
static ngx_uint_t ngx_http_flags_bind(ngx_http_flags_main_conf_t *fmcf,
    ngx_uint_t gen, ngx_uint_t create, ngx_uint_t *cleared);
static ngx_http_flags_node_t *ngx_http_flags_lookup(
    ngx_http_flags_shctx_t *sh, u_char *key, size_t len, uint32_t hash);
static void ngx_http_flags_restore_state(ngx_http_flags_main_conf_t *fmcf,
    ngx_log_t *log);
static ngx_int_t ngx_http_flags_write_state(ngx_http_flags_main_conf_t *fmcf,
    ngx_log_t *log);
static ngx_int_t ngx_http_flags_zone_existed(ngx_shm_zone_t *shm_zone);


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
    ngx_int_t                    rc;
    ngx_slab_pool_t             *shpool;
    ngx_http_flags_shctx_t      *sh;
    ngx_http_flags_main_conf_t  *fmcf;

    fmcf = shm_zone->data;
    shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;
    fmcf->shpool = shpool;

    if (ofmcf) {
        /* a reload with the same zone: reconcile with the old state */
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

    ngx_rbtree_init(&sh->rbtree, &sh->sentinel, ngx_str_rbtree_insert_value);
    ngx_queue_init(&sh->queue);
    sh->generation = 0;

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
                      "flags zone \"%V\" changed size: counters were reset%s",
                      &shm_zone->shm.name,
                      fmcf->state_file.len
                      ? ", rollbacks and overrides come from the state file"
                      : ", rollbacks and overrides were cleared");
    }

    rc = ngx_http_flags_reconcile(fmcf, shm_zone->shm.log);
    if (rc != NGX_OK) {
        return rc;
    }

    ngx_http_flags_restore_state(fmcf, shm_zone->shm.log);

    return NGX_OK;
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
 * Binds every flag of the new configuration to its node, creating nodes
 * for new flags and clearing the rollback and override of a flag whose
 * definition changed.  Runs in the master while old workers may still
 * serve with the old configuration, so a node the new one no longer uses
 * is freed only one generation later.  Flags that keep their node are bound
 * first and unused nodes freed before new ones are made, so that memory
 * given back by removed flags is there for new ones.
 */

static ngx_int_t
ngx_http_flags_reconcile(ngx_http_flags_main_conf_t *fmcf, ngx_log_t *log)
{
    ngx_uint_t                  gen, unbound, cleared;
    ngx_queue_t                *q, *next;
    ngx_slab_pool_t            *shpool;
    ngx_http_flags_node_t      *node;
    ngx_http_flags_shctx_t     *sh;

    shpool = fmcf->shpool;
    sh = fmcf->sh;
    cleared = 0;

    ngx_shmtx_lock(&shpool->mutex);

    gen = ++sh->generation;

    (void) ngx_http_flags_bind(fmcf, gen, 0, &cleared);

    /* free what neither this generation nor the previous one uses */

    for (q = ngx_queue_head(&sh->queue);
         q != ngx_queue_sentinel(&sh->queue);
         q = next)
    {
        next = ngx_queue_next(q);
        node = ngx_queue_data(q, ngx_http_flags_node_t, queue);

        if (node->generation + 1 >= gen) {
            continue;
        }

        if (!node->retired) {
            ngx_rbtree_delete(&sh->rbtree, &node->sn.node);
        }

        ngx_queue_remove(q);
        ngx_slab_free_locked(shpool, node->state);
        ngx_slab_free_locked(shpool, node);
    }

    unbound = ngx_http_flags_bind(fmcf, gen, 1, &cleared);

    ngx_shmtx_unlock(&shpool->mutex);

    if (unbound) {
        ngx_log_error(NGX_LOG_WARN, log, 0,
                      "flags zone \"%V\" is full: %ui flags are evaluated "
                      "but not counted and cannot be rolled back; "
                      "increase the flags_zone size",
                      &fmcf->zone_name, unbound);
    }

    if (cleared) {
        ngx_log_error(NGX_LOG_NOTICE, log, 0,
                      "flags: %ui changed flag definitions, their rollbacks "
                      "and overrides were cleared", cleared);
    }

    return NGX_OK;
}


/*
 * One pass over the flags of the configuration, with the zone locked.
 * Without "create", binds the flags whose node exists with the same window
 * length.  With it, makes nodes for the flags still unbound (carrying the
 * state of a node whose window length changed) and returns how many found
 * no room.
 */

static ngx_uint_t
ngx_http_flags_bind(ngx_http_flags_main_conf_t *fmcf, ngx_uint_t gen,
    ngx_uint_t create, ngx_uint_t *cleared)
{
    u_char                      key[64 + 1 + 128];
    size_t                      i, n, len;
    uint32_t                    hash, window;
    ngx_uint_t                  unbound;
    fl_flag_info_t              info;
    ngx_slab_pool_t            *shpool;
    ngx_http_flags_node_t      *node, *old;
    ngx_http_flags_shctx_t     *sh;
    ngx_http_flags_flag_t      *flag;
    ngx_http_flags_project_t   *project;

    shpool = fmcf->shpool;
    sh = fmcf->sh;
    project = fmcf->projects.elts;
    unbound = 0;

    for (i = 0; i < fmcf->projects.nelts; i++) {
        for (n = 0; n < project[i].nflags; n++) {
            flag = &project[i].flags[n];

            if ((create && flag->state)
                || fl_project_flag_info(project[i].core, n, &info) != 0)
            {
                continue;
            }

            window = (flag->policy.mode == FL_ROLLBACK_ON)
                     ? flag->policy.window
                     : fmcf->rollback.window;

            /* the key: "project\0flag" */
            len = project[i].name.len + 1 + flag->name.len;
            ngx_memcpy(key, project[i].name.data, project[i].name.len);
            key[project[i].name.len] = '\0';
            ngx_memcpy(key + project[i].name.len + 1, flag->name.data,
                       flag->name.len);

            hash = ngx_crc32_short(key, len);
            old = ngx_http_flags_lookup(sh, key, len, hash);

            if (old && fl_state_window(old->state) == window) {
                if (fl_state_def_hash(old->state) != info.def_hash) {
                    fl_state_redefine(old->state, info.def_hash);
                    (*cleared)++;
                }

                old->generation = gen;
                flag->state = old->state;
                continue;
            }

            if (!create) {
                flag->state = NULL;
                continue;
            }

            node = ngx_slab_alloc_locked(shpool,
                                   offsetof(ngx_http_flags_node_t, key) + len);
            if (node == NULL) {
                unbound++;
                continue;
            }

            node->state = ngx_slab_alloc_locked(shpool, fl_state_size(window));
            if (node->state == NULL) {
                ngx_slab_free_locked(shpool, node);
                unbound++;
                continue;
            }

            ngx_memcpy(node->key, key, len);
            node->key_len = len;
            node->generation = gen;
            node->retired = 0;
            node->sn.str.data = node->key;
            node->sn.str.len = len;
            node->sn.node.key = hash;

            fl_state_init(node->state, window, info.def_hash);

            if (old) {
                /* the window length changed: carry the state over and
                 * leave the old node to the old workers */
                fl_state_copy(node->state, old->state);

                if (fl_state_def_hash(old->state) != info.def_hash) {
                    fl_state_redefine(node->state, info.def_hash);
                    (*cleared)++;
                }

                ngx_rbtree_delete(&sh->rbtree, &old->sn.node);
                old->retired = 1;
            }

            ngx_rbtree_insert(&sh->rbtree, &node->sn.node);
            ngx_queue_insert_tail(&sh->queue, &node->queue);

            flag->state = node->state;
        }
    }

    return unbound;
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


/* ----------------------------------------------------------- state file */


static ngx_int_t
ngx_http_flags_read_file(ngx_str_t *path, ngx_pool_t *pool, ngx_str_t *out,
    ngx_log_t *log)
{
    ssize_t          n;
    ngx_fd_t         fd;
    ngx_file_info_t  fi;

    fd = ngx_open_file(path->data, NGX_FILE_RDONLY, NGX_FILE_OPEN, 0);
    if (fd == NGX_INVALID_FILE) {
        if (ngx_errno != NGX_ENOENT) {
            ngx_log_error(NGX_LOG_WARN, log, ngx_errno,
                          "flags: cannot open state file \"%V\", ignoring it",
                          path);
        }
        return NGX_DECLINED;
    }

    if (ngx_fd_info(fd, &fi) == NGX_FILE_ERROR
        || ngx_file_size(&fi) > 64 * 1024 * 1024)
    {
        ngx_log_error(NGX_LOG_WARN, log, ngx_errno,
                      "flags: cannot use state file \"%V\", ignoring it",
                      path);
        ngx_close_file(fd);
        return NGX_DECLINED;
    }

    out->len = ngx_file_size(&fi);
    out->data = ngx_pnalloc(pool, out->len + 1);
    if (out->data == NULL) {
        ngx_close_file(fd);
        return NGX_ERROR;
    }

    n = ngx_read_fd(fd, out->data, out->len);
    ngx_close_file(fd);

    if (n != (ssize_t) out->len) {
        ngx_log_error(NGX_LOG_WARN, log, ngx_errno,
                      "flags: short read of state file \"%V\", ignoring it",
                      path);
        return NGX_DECLINED;
    }

    return NGX_OK;
}


/*
 * At start (a fresh zone): bring back each rollback and override whose
 * flag still has the same definition.  A state file that cannot be read or
 * parsed is logged and ignored, never fatal.
 */

static void
ngx_http_flags_restore_state(ngx_http_flags_main_conf_t *fmcf, ngx_log_t *log)
{
    char                       err[512];
    long                       idx;
    size_t                     i, n;
    ngx_str_t                  content, name;
    ngx_uint_t                 rollbacks, overrides, stale;
    fl_alloc_t                 alloc;
    ngx_pool_t                *pool;
    fl_status_t                st;
    fl_flag_info_t             info;
    fl_saved_flag_t           *saved;
    ngx_http_flags_project_t  *project;

    /* "nginx -t" builds a throwaway zone: nothing to restore into */
    if (fmcf->state_file.len == 0 || ngx_test_config) {
        return;
    }

    pool = ngx_create_pool(NGX_DEFAULT_POOL_SIZE, log);
    if (pool == NULL) {
        return;
    }

    if (ngx_http_flags_read_file(&fmcf->state_file, pool, &content, log)
        != NGX_OK)
    {
        goto done;
    }

    alloc.alloc = ngx_http_flags_pool_alloc;
    alloc.ctx = pool;

    st = fl_state_file_parse((const char *) content.data, content.len,
                             &alloc, &saved, &n, err, sizeof(err));
    if (st != FL_OK) {
        ngx_log_error(NGX_LOG_WARN, log, 0,
                      "flags: ignoring state file \"%V\": %s",
                      &fmcf->state_file, err);
        goto done;
    }

    rollbacks = 0;
    overrides = 0;
    stale = 0;

    for (i = 0; i < n; i++) {
        name.data = (u_char *) saved[i].project;
        name.len = saved[i].project_len;

        project = ngx_http_flags_find_project(fmcf, &name);
        if (project == NULL) {
            stale++;
            continue;
        }

        idx = fl_project_find_flag(project->core, saved[i].flag,
                                   saved[i].flag_len);

        if (idx < 0 || project->flags[idx].state == NULL
            || fl_project_flag_info(project->core, idx, &info) != 0
            || info.def_hash != saved[i].def_hash)
        {
            stale++;
            continue;
        }

        if (saved[i].rolled_back) {
            fl_state_restore_rollback(project->flags[idx].state,
                                      saved[i].rollback_at_ms,
                                      saved[i].rollback_errors,
                                      saved[i].rollback_enabled);
            rollbacks++;
        }

        if (saved[i].override_kind != FL_OVERRIDE_NONE) {
            fl_state_set_override(project->flags[idx].state,
                                  saved[i].override_kind,
                                  saved[i].override_milli);
            overrides++;
        }
    }

    ngx_log_error(NGX_LOG_NOTICE, log, 0,
                  "flags: state file \"%V\": restored %ui rollbacks and %ui "
                  "overrides, skipped %ui entries of changed or removed flags",
                  &fmcf->state_file, rollbacks, overrides, stale);

done:

    ngx_destroy_pool(pool);
}


/*
 * Rewrites the state file after a rollback or an override change.  Writers
 * in different workers take an fcntl() lock (released by the kernel if a
 * worker dies) and snapshot the zone only once they hold it, so the file
 * on disk is never older than the last change; a temporary file renamed
 * over the old one means a crash never leaves it half-written.
 */

void
ngx_http_flags_save_state(ngx_http_flags_main_conf_t *fmcf, ngx_log_t *log)
{
    u_char     *lock_name;
    ngx_fd_t    lock_fd;

    if (fmcf->state_file.len == 0) {
        return;
    }

    lock_name = ngx_alloc(fmcf->state_file.len + sizeof(".lock"), log);
    if (lock_name == NULL) {
        return;
    }

    ngx_sprintf(lock_name, "%V.lock%Z", &fmcf->state_file);

    lock_fd = ngx_open_file(lock_name, NGX_FILE_RDWR, NGX_FILE_CREATE_OR_OPEN,
                            NGX_FILE_DEFAULT_ACCESS);
    if (lock_fd == NGX_INVALID_FILE) {
        ngx_log_error(NGX_LOG_ALERT, log, ngx_errno,
                      ngx_open_file_n " \"%s\" failed", lock_name);
        ngx_free(lock_name);
        return;
    }

    if (ngx_lock_fd(lock_fd) != 0) {
        ngx_log_error(NGX_LOG_ALERT, log, ngx_errno,
                      ngx_lock_fd_n " \"%s\" failed", lock_name);
        goto close;
    }

    (void) ngx_http_flags_write_state(fmcf, log);

    (void) ngx_unlock_fd(lock_fd);

close:

    ngx_close_file(lock_fd);
    ngx_free(lock_name);
}


static ngx_int_t
ngx_http_flags_write_state(ngx_http_flags_main_conf_t *fmcf, ngx_log_t *log)
{
    u_char                    *tmp_name, *buf;
    size_t                     i, k, n, total, len, off;
    int64_t                    now;
    ssize_t                    w;
    ngx_fd_t                   fd;
    ngx_int_t                  rc;
    fl_flag_info_t             info;
    fl_saved_flag_t           *e;
    fl_state_snapshot_t        s;
    ngx_http_flags_project_t  *project;

    project = fmcf->projects.elts;
    total = 0;

    for (i = 0; i < fmcf->projects.nelts; i++) {
        total += project[i].nflags;
    }

    e = ngx_alloc((total + 1) * sizeof(fl_saved_flag_t), log);
    if (e == NULL) {
        return NGX_ERROR;
    }

    n = 0;
    now = ngx_http_flags_now_sec();

    for (i = 0; i < fmcf->projects.nelts; i++) {
        for (k = 0; k < project[i].nflags; k++) {
            if (project[i].flags[k].state == NULL
                || fl_project_flag_info(project[i].core, k, &info) != 0)
            {
                continue;
            }

            fl_state_snapshot(project[i].flags[k].state, now, &s);

            if (!s.rolled_back && s.override_kind == FL_OVERRIDE_NONE) {
                continue;
            }

            e[n].project = (const char *) project[i].name.data;
            e[n].project_len = project[i].name.len;
            e[n].flag = info.name;
            e[n].flag_len = info.name_len;
            e[n].def_hash = info.def_hash;
            e[n].rolled_back = s.rolled_back;
            e[n].rollback_at_ms = s.rollback_at_ms;
            e[n].rollback_errors = s.rollback_errors;
            e[n].rollback_enabled = s.rollback_enabled;
            e[n].override_kind = s.override_kind;
            e[n].override_milli = s.override_milli;
            n++;
        }
    }

    rc = NGX_ERROR;
    fd = NGX_INVALID_FILE;
    buf = NULL;

    tmp_name = ngx_alloc(fmcf->state_file.len + sizeof(".tmp.") + NGX_INT_T_LEN,
                         log);
    if (tmp_name == NULL) {
        goto done;
    }

    ngx_sprintf(tmp_name, "%V.tmp.%P%Z", &fmcf->state_file, ngx_pid);

    buf = ngx_alloc(fl_state_file_bound(e, n), log);
    if (buf == NULL) {
        goto done;
    }

    len = fl_state_file_write(e, n, (char *) buf);

    fd = ngx_open_file(tmp_name, NGX_FILE_WRONLY, NGX_FILE_TRUNCATE,
                       NGX_FILE_DEFAULT_ACCESS);
    if (fd == NGX_INVALID_FILE) {
        ngx_log_error(NGX_LOG_ALERT, log, ngx_errno,
                      ngx_open_file_n " \"%s\" failed", tmp_name);
        goto done;
    }

    for (off = 0; off < len; off += w) {
        w = ngx_write_fd(fd, buf + off, len - off);
        if (w <= 0) {
            ngx_log_error(NGX_LOG_ALERT, log, ngx_errno,
                          ngx_write_fd_n " \"%s\" failed", tmp_name);
            goto done;
        }
    }

    if (fsync(fd) == -1) {
        ngx_log_error(NGX_LOG_ALERT, log, ngx_errno,
                      "fsync() \"%s\" failed", tmp_name);
        goto done;
    }

    if (ngx_rename_file(tmp_name, fmcf->state_file.data) == NGX_FILE_ERROR) {
        ngx_log_error(NGX_LOG_ALERT, log, ngx_errno,
                      ngx_rename_file_n " \"%s\" to \"%V\" failed",
                      tmp_name, &fmcf->state_file);
        goto done;
    }

    rc = NGX_OK;

done:

    if (fd != NGX_INVALID_FILE) {
        ngx_close_file(fd);
        if (rc != NGX_OK) {
            (void) ngx_delete_file(tmp_name);
        }
    }

    ngx_free(tmp_name);
    ngx_free(buf);
    ngx_free(e);

    return rc;
}
