/*
 * ngx_http_flags_statefile.c - flags_state_file: rollbacks and overrides that
 * survive a restart.
 *
 * The file always describes the zone as the committed configuration sees
 * it (ngx_http_flags_zone_saved()): it is rewritten at every commit (start
 * and reload, by the master, synchronously) and after every rollback and
 * admin change (by the worker that made it, in a thread of
 * flags_state_thread_pool, so the event loop never waits for the disk).
 *
 * A rewrite is two steps.  The snapshot is taken in the event loop (a
 * copy under the slab mutex: ngx_shmtx_lock() identifies its owner by pid,
 * so it could not exclude two threads of one process) and gets a sequence
 * number from the zone under that same mutex: a higher number is a later
 * snapshot, which holds every change an earlier one held.  The write
 * (temporary file, fsync, rename) runs in the thread under an fcntl() lock
 * on <file>.lock (released by the kernel if a worker dies) and is skipped
 * when the zone says a later snapshot is on disk already, so an older
 * snapshot never replaces a newer one.  fcntl() locks belong to processes,
 * so a worker has at most one write in flight; changes made meanwhile
 * mark it dirty and are written, together, by the next one.  A temporary
 * file renamed over the old one means a crash never leaves it half-written.
 *
 * flags_admin's answer waits for the write that holds its change (204, or
 * 500 state_not_saved); a rollback does not wait.
 */

#include "ngx_http_flags_module.h"


/* What a rewrite writes, and how it went. */
typedef struct {
    u_char                         *buf;        /* the serialized zone */
    size_t                          len;
    ngx_atomic_uint_t               seq;        /* of its snapshot */
    ngx_atomic_t                   *written;    /* the zone's: on disk */

    u_char                         *names;      /* one block for: */
    u_char                         *path;
    u_char                         *lock_name;
    u_char                         *tmp_name;
    u_char                         *dir;        /* NULL: the cwd */

    ngx_uint_t                      chown;
    ngx_uid_t                       user;
    ngx_gid_t                       group;

    ngx_int_t                       rc;
    ngx_uint_t                      skipped;
    ngx_err_t                       err;
    ngx_err_t                       chown_err;
    const char                     *op;         /* the call that failed */
    u_char                         *op_name;
    u_char                          msg[256];   /* for state_not_saved */
} ngx_http_flags_state_job_t;


#if (NGX_THREADS)

typedef struct ngx_http_flags_state_waiter_s  ngx_http_flags_state_waiter_t;

struct ngx_http_flags_state_waiter_s {
    ngx_http_flags_state_waiter_t  *next;
    ngx_http_request_t             *r;
    ngx_http_flags_state_done_pt    done;
};


/* A worker's writer: one write in flight, the requests waiting for it. */
typedef struct {
    ngx_http_flags_main_conf_t     *fmcf;
    ngx_thread_task_t              *task;       /* its ctx: the job */
    ngx_uint_t                      busy;
    ngx_uint_t                      dirty;      /* changed since its snapshot */
    ngx_http_flags_state_waiter_t  *writing;    /* answered when it is done */
    ngx_http_flags_state_waiter_t  *waiting;    /* need the next snapshot */
    ngx_event_t                     guard;      /* holds a graceful exit */
} ngx_http_flags_state_writer_t;


static ngx_http_flags_state_writer_t  ngx_http_flags_state_writer;

#endif



static ngx_int_t ngx_http_flags_user_cannot(ngx_http_flags_main_conf_t *fmcf,
    ngx_core_conf_t *ccf, ngx_log_t *log, const char *what, u_char *path);
static ngx_int_t ngx_http_flags_user_may(ngx_core_conf_t *ccf,
    ngx_file_info_t *fi, ngx_uint_t dir);
static ngx_int_t ngx_http_flags_read_state(ngx_str_t *path, ngx_pool_t *pool,
    ngx_str_t *out, ngx_log_t *log);
static ngx_int_t ngx_http_flags_state_serialize(
    ngx_http_flags_main_conf_t *fmcf, ngx_log_t *log,
    ngx_http_flags_state_job_t *job, u_char *err, size_t err_len);
static void ngx_http_flags_state_write(ngx_http_flags_state_job_t *job);
static void ngx_http_flags_state_report(ngx_http_flags_state_job_t *job,
    ngx_log_t *log);
static void ngx_http_flags_state_free(ngx_http_flags_state_job_t *job);
#if (NGX_THREADS)
static ngx_int_t ngx_http_flags_state_post(ngx_http_flags_main_conf_t *fmcf,
    ngx_log_t *log, u_char *err, size_t err_len);
static void ngx_http_flags_state_thread(void *data, ngx_log_t *log);
static void ngx_http_flags_state_written(ngx_event_t *ev);
static void ngx_http_flags_state_guard(ngx_event_t *ev);
static void ngx_http_flags_state_answer(ngx_http_flags_state_waiter_t *w,
    ngx_int_t rc, u_char *err);
#endif


#define ngx_http_flags_state_err(err, len, fmt, ...)                         \
    if (err) {                                                               \
        *ngx_snprintf(err, (len) - 1, fmt, __VA_ARGS__) = '\0';              \
    }


/*
 * At configuration time (the zone's init, also under "nginx -t"), once the
 * "user" directive is known: the directory must let the worker user
 * create and rename files, and an existing state or lock file must be a
 * regular file that user can use.  Otherwise every change would be
 * answered and lost at the next restart.
 */

ngx_int_t
ngx_http_flags_check_state_dir(ngx_http_flags_main_conf_t *fmcf,
    ngx_cycle_t *cycle, ngx_log_t *log)
{
    u_char           *dir, *p, *lock;
    ngx_file_info_t   fi;
    ngx_core_conf_t  *ccf;

    if (fmcf->state_file.len == 0) {
        return NGX_OK;
    }

    ccf = (ngx_core_conf_t *) ngx_get_conf(fmcf->cycle->conf_ctx,
                                           ngx_core_module);

    dir = ngx_pnalloc(fmcf->cycle->pool, fmcf->state_file.len + 2);
    lock = ngx_pnalloc(fmcf->cycle->pool,
                       fmcf->state_file.len + sizeof(".lock"));
    if (dir == NULL || lock == NULL) {
        return NGX_ERROR;
    }

    p = ngx_cpymem(dir, fmcf->state_file.data, fmcf->state_file.len);
    *p = '\0';

    while (p > dir && p[-1] != '/') {
        p--;
    }

    if (p == dir) {
        *p++ = '.';
    } else if (p - 1 > dir) {
        p--;
    }

    *p = '\0';

    /* both messages end with the command that makes the directory right
     * for the worker user ("-o" only when the workers change user) */

    if (ngx_file_info(dir, &fi) == NGX_FILE_ERROR || !ngx_is_dir(&fi)) {
        ngx_log_error(NGX_LOG_EMERG, log, ngx_errno,
                      "flags_state_file \"%V\": directory \"%s\" does not "
                      "exist in %V; create it for the worker user with "
                      "\"install -d %s%s%s-m 0750 %s\"", &fmcf->state_file, dir,
                      &fmcf->state_file_conf,
                      ccf->username ? "-o " : "",
                      ccf->username ? ccf->username : "",
                      ccf->username ? " " : "", dir);
        return NGX_ERROR;
    }

    if (!ngx_http_flags_user_may(ccf, &fi, 1)) {
        ngx_log_error(NGX_LOG_EMERG, log, 0,
                      "flags_state_file \"%V\": the worker user \"%s\" "
                      "cannot create files in \"%s\" in %V; give it the "
                      "directory with \"install -d %s%s%s-m 0750 %s\"",
                      &fmcf->state_file,
                      ccf->username ? ccf->username : "(current)", dir,
                      &fmcf->state_file_conf,
                      ccf->username ? "-o " : "",
                      ccf->username ? ccf->username : "",
                      ccf->username ? " " : "", dir);
        return NGX_ERROR;
    }

    if (ngx_file_info(fmcf->state_file.data, &fi) != NGX_FILE_ERROR
        && !ngx_is_file(&fi))
    {
        ngx_log_error(NGX_LOG_EMERG, log, 0,
                      "flags_state_file \"%V\" is not a regular file in %V",
                      &fmcf->state_file, &fmcf->state_file_conf);
        return NGX_ERROR;
    }

    ngx_sprintf(lock, "%V.lock%Z", &fmcf->state_file);

    if (ngx_file_info(lock, &fi) != NGX_FILE_ERROR
        && (!ngx_is_file(&fi) || !ngx_http_flags_user_may(ccf, &fi, 0)))
    {
        return ngx_http_flags_user_cannot(fmcf, ccf, log,
                                          "write the lock file", lock);
    }

    return NGX_OK;
}


static ngx_int_t
ngx_http_flags_user_cannot(ngx_http_flags_main_conf_t *fmcf,
    ngx_core_conf_t *ccf, ngx_log_t *log, const char *what, u_char *path)
{
    ngx_log_error(NGX_LOG_EMERG, log, 0,
                  "flags_state_file \"%V\": the worker user \"%s\" "
                  "cannot %s \"%s\" in %V", &fmcf->state_file,
                  ccf->username ? ccf->username : "(current)", what, path,
                  &fmcf->state_file_conf);

    return NGX_ERROR;
}


/* May the worker user write (and, for a directory, search) this? */

static ngx_int_t
ngx_http_flags_user_may(ngx_core_conf_t *ccf, ngx_file_info_t *fi,
    ngx_uint_t dir)
{
    int         i, n;
    gid_t       groups[256];
    mode_t      need;
    ngx_uid_t   uid;

    uid = ccf->user;

    if (geteuid() != 0 || uid == (ngx_uid_t) NGX_CONF_UNSET_UINT) {
        /* workers keep our own identity */
        uid = geteuid();
    }

    if (uid == 0) {
        return 1;
    }

    if (fi->st_uid == uid) {
        need = dir ? (S_IWUSR|S_IXUSR) : S_IWUSR;
        return (fi->st_mode & need) == need;
    }

    need = dir ? (S_IWGRP|S_IXGRP) : S_IWGRP;

    if (uid == geteuid()) {
        if (fi->st_gid == getegid()) {
            return (fi->st_mode & need) == need;
        }

        n = getgroups(256, groups);

    } else {
        n = 256;

        if (ccf->username == NULL
            || getgrouplist(ccf->username, ccf->group, groups, &n) == -1)
        {
            n = 0;
        }
    }

    for (i = 0; i < n; i++) {
        if (groups[i] == fi->st_gid) {
            return (fi->st_mode & need) == need;
        }
    }

    if (uid != geteuid() && fi->st_gid == ccf->group) {
        return (fi->st_mode & need) == need;
    }

    need = dir ? (S_IWOTH|S_IXOTH) : S_IWOTH;

    return (fi->st_mode & need) == need;
}


/*
 * Opened without blocking (a FIFO would hang the master) and checked with
 * fstat() before a byte is read.
 */

static ngx_int_t
ngx_http_flags_read_state(ngx_str_t *path, ngx_pool_t *pool, ngx_str_t *out,
    ngx_log_t *log)
{
    int              fd;
    ssize_t          n;
    ngx_file_info_t  fi;

    fd = open((char *) path->data, O_RDONLY|O_NONBLOCK|O_CLOEXEC);
    if (fd == -1) {
        if (ngx_errno != NGX_ENOENT) {
            ngx_log_error(NGX_LOG_WARN, log, ngx_errno,
                          "flags: cannot open state file \"%V\", ignoring it",
                          path);
        }
        return NGX_DECLINED;
    }

    if (ngx_fd_info(fd, &fi) == NGX_FILE_ERROR || !ngx_is_file(&fi)
        || ngx_file_size(&fi) > NGX_HTTP_FLAGS_STATE_FILE_MAX)
    {
        ngx_log_error(NGX_LOG_WARN, log, 0,
                      "flags: state file \"%V\" is not a regular file of at "
                      "most %d bytes, ignoring it", path,
                      NGX_HTTP_FLAGS_STATE_FILE_MAX);
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
 * At start (a fresh zone): bring back the rollback and override of each
 * flag that still exists, onto its definition as it is now (a changed
 * definition keeps them, as at a reload: docs/rollback.md), and a ramp's
 * state only onto the same definition (a changed one's ramp starts
 * again).  A state file that cannot be read or parsed is logged and
 * ignored, never fatal.
 */

void
ngx_http_flags_restore_state(ngx_http_flags_main_conf_t *fmcf, ngx_log_t *log)
{
    char                       err[512];
    long                       idx;
    size_t                     i, n;
    ngx_str_t                  content, name;
    u_char                     what[NGX_HTTP_FLAGS_KEPT_LEN], *p;
    ngx_uint_t                 rollbacks, overrides, ramps, stale, changed;
    ngx_uint_t                 kept;
    fl_alloc_t                 alloc;
    ngx_pool_t                *pool;
    fl_status_t                st;
    fl_saved_flag_t           *saved;
    ngx_http_flags_flag_t     *flag;
    ngx_http_flags_defs_t     *defs;
    ngx_http_flags_project_t  *project;

    /* "nginx -t" builds a throwaway zone: nothing to restore into */
    if (fmcf->state_file.len == 0 || ngx_test_config) {
        return;
    }

    pool = ngx_create_pool(NGX_DEFAULT_POOL_SIZE, log);
    if (pool == NULL) {
        return;
    }

    if (ngx_http_flags_read_state(&fmcf->state_file, pool, &content, log)
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
    ramps = 0;
    stale = 0;
    changed = 0;

    for (i = 0; i < n; i++) {
        name.data = (u_char *) saved[i].project;
        name.len = saved[i].project_len;

        project = ngx_http_flags_find_project(fmcf, &name);
        if (project == NULL) {
            stale++;
            continue;
        }

        defs = ngx_http_flags_defs(project);
        idx = fl_project_find_flag(defs->core, saved[i].flag,
                                   saved[i].flag_len);
        if (idx < 0) {
            stale++;
            continue;
        }

        flag = &defs->flags[idx];

        if (flag->version == NULL) {
            /* the zone had no room for it */
            stale++;
            continue;
        }

        kept = 0;

        if (saved[i].rolled_back) {
            fl_control_restore_rollback(flag->ctl,
                                        saved[i].rollback_at_ms,
                                        saved[i].rollback_errors,
                                        saved[i].rollback_enabled,
                                        saved[i].rollback_sources,
                                        saved[i].rollback_by);
            rollbacks++;
            kept |= FL_CARRIED_ROLLBACK;
        }

        if (saved[i].override_kind != FL_OVERRIDE_NONE) {
            fl_control_set_override(flag->ctl,
                                    saved[i].override_kind,
                                    saved[i].override_milli);
            overrides++;
            kept |= FL_CARRIED_OVERRIDE;
        }

        if (flag->def_hash != saved[i].def_hash) {
            /* a ramp's state belongs to its definition: a changed one
             * starts again */
            if (kept) {
                changed++;
                p = ngx_http_flags_control_kept(what, kept, flag->ctl);
                ngx_log_error(NGX_LOG_NOTICE, log, 0,
                              "flags: flag \"%V\" of project \"%V\" has a "
                              "new definition since the state file was "
                              "written: its %*s restored onto it",
                              &flag->name, &project->name,
                              (size_t) (p - what), what);
            }

            continue;
        }

        if (saved[i].ramp != NULL && flag->ramp_def != NULL) {
            /* the next tick takes the new zone's totals as its base */
            saved[i].ramp->based = 0;
            ngx_memcpy(flag->ramp, saved[i].ramp, sizeof(fl_ramp_t));
            ngx_http_flags_zone_ramp_apply(flag);
            ramps++;
        }
    }

    ngx_log_error(NGX_LOG_NOTICE, log, 0,
                  "flags: state file \"%V\": restored %ui rollbacks and %ui "
                  "overrides (and %ui ramps), those of %ui flags onto a "
                  "changed definition; skipped %ui entries of removed flags",
                  &fmcf->state_file, rollbacks, overrides, ramps, changed,
                  stale);

done:

    ngx_destroy_pool(pool);
}


/*
 * The snapshot (event loop, or the master): the zone's rollbacks and
 * overrides serialized into job->buf, with the sequence number that orders
 * it among all snapshots, and the names the write needs.  NGX_DECLINED
 * when this process's zone was replaced by another one at a reload and
 * must not write the file.
 */

static ngx_int_t
ngx_http_flags_state_serialize(ngx_http_flags_main_conf_t *fmcf,
    ngx_log_t *log, ngx_http_flags_state_job_t *job, u_char *err,
    size_t err_len)
{
    u_char           *keys, *p;
    size_t            n, max, len;
    ngx_int_t         rc;
    fl_ramp_t        *ramps;
    ngx_core_conf_t  *ccf;
    fl_saved_flag_t  *entries;

    rc = NGX_ERROR;
    entries = NULL;
    keys = NULL;
    ramps = NULL;

    job->buf = NULL;
    job->names = NULL;
    job->written = &fmcf->sh->state_written;

    ccf = (ngx_core_conf_t *) ngx_get_conf(fmcf->cycle->conf_ctx,
                                           ngx_core_module);

    /* the master writes at start and reload: the lock file must stay
     * usable by the workers */
    job->chown = geteuid() == 0
                 && ccf->user != (ngx_uid_t) NGX_CONF_UNSET_UINT
                 && ccf->user != 0;
    job->user = ccf->user;
    job->group = ccf->group;

    /* the zone may gain nodes at a reload meanwhile: retry with room */
    max = fmcf->sh->nnodes + 16;

    for ( ;; ) {
        entries = ngx_alloc(max * sizeof(fl_saved_flag_t), log);
        keys = ngx_alloc(max * NGX_HTTP_FLAGS_KEY_LEN, log);
        ramps = ngx_alloc(max * sizeof(fl_ramp_t), log);
        if (entries == NULL || keys == NULL || ramps == NULL) {
            ngx_http_flags_state_err(err, err_len, "%s", "out of memory");
            goto done;
        }

        n = ngx_http_flags_zone_saved(fmcf, entries, keys, ramps, max,
                                      &job->seq);

        if (n == (size_t) -1) {
            ngx_log_error(NGX_LOG_INFO, log, 0,
                          "flags: state file \"%V\" not written: the "
                          "configuration was reloaded with another zone",
                          &fmcf->state_file);
            rc = NGX_DECLINED;
            goto done;
        }

        if (n < max) {
            break;
        }

        ngx_free(entries);
        ngx_free(keys);
        ngx_free(ramps);
        max *= 2;
    }

    /* <file>, <file>.lock, <file>.tmp.<pid>, its directory */
    len = fmcf->state_file.len + 1;

    job->names = ngx_alloc(4 * len + sizeof(".lock") + sizeof(".tmp.")
                           + NGX_INT_T_LEN + 2, log);
    job->buf = ngx_alloc(fl_state_file_bound(entries, n), log);
    if (job->names == NULL || job->buf == NULL) {
        ngx_http_flags_state_err(err, err_len, "%s", "out of memory");
        goto done;
    }

    job->path = job->names;
    p = ngx_sprintf(job->path, "%V%Z", &fmcf->state_file);
    job->lock_name = p;
    p = ngx_sprintf(p, "%V.lock%Z", &fmcf->state_file);
    job->tmp_name = p;
    p = ngx_sprintf(p, "%V.tmp.%P%Z", &fmcf->state_file, ngx_pid);

    /* the rename itself reaches the disk with the directory */
    for (len = fmcf->state_file.len;
         len && fmcf->state_file.data[len - 1] != '/';
         len--)
    { /* void */ }

    if (len) {
        job->dir = p;
        ngx_memcpy(p, fmcf->state_file.data, len);
        p[len > 1 ? len - 1 : len] = '\0';

    } else {
        job->dir = NULL;
    }

    job->len = fl_state_file_write(entries, n, (char *) job->buf);

    rc = NGX_OK;

done:

    ngx_free(entries);
    ngx_free(keys);
    ngx_free(ramps);

    if (rc != NGX_OK) {
        ngx_http_flags_state_free(job);
    }

    return rc;
}


static void
ngx_http_flags_state_free(ngx_http_flags_state_job_t *job)
{
    ngx_free(job->buf);
    ngx_free(job->names);
    job->buf = NULL;
    job->names = NULL;
}


/* What went wrong, for the alert (op on name) and the admin answer
 * ("cannot VERB "name": reason"); no logging, no allocation. */

static void
ngx_http_flags_state_fail(ngx_http_flags_state_job_t *job, ngx_err_t e,
    const char *op, u_char *name, const char *verb)
{
    u_char  errstr[NGX_MAX_ERROR_STR], *es;

    job->err = e;
    job->op = op;
    job->op_name = name;

    es = ngx_strerror(e, errstr, sizeof(errstr));

    *ngx_snprintf(job->msg, sizeof(job->msg) - 1, "cannot %s \"%s\": %*s",
                  verb, name, es - errstr, errstr) = '\0';
}


/*
 * The write: in a thread of the pool, or in the master.  It neither logs
 * nor allocates; what went wrong is left in the job for
 * ngx_http_flags_state_report() (alert) and the admin answer (msg).
 */

static void
ngx_http_flags_state_write(ngx_http_flags_state_job_t *job)
{
    size_t     off;
    ssize_t    w;
    ngx_fd_t   lock_fd, fd, dfd;
    ngx_err_t  e;

    job->rc = NGX_ERROR;
    job->msg[0] = '\0';
    job->err = 0;
    job->chown_err = 0;
    job->op = NULL;
    job->op_name = NULL;
    job->skipped = 0;
    fd = NGX_INVALID_FILE;

    lock_fd = ngx_open_file(job->lock_name, NGX_FILE_RDWR,
                            NGX_FILE_CREATE_OR_OPEN, 0600);
    if (lock_fd == NGX_INVALID_FILE) {
        e = ngx_errno;
        ngx_http_flags_state_fail(job, e, ngx_open_file_n, job->lock_name, "open");
        return;
    }

    if (job->chown && fchown(lock_fd, job->user, job->group) == -1) {
        job->chown_err = ngx_errno;
    }

    if (ngx_lock_fd(lock_fd) != 0) {
        e = ngx_errno;
        ngx_http_flags_state_fail(job, e, ngx_lock_fd_n, job->lock_name, "lock");
        goto close;
    }

    /* a later snapshot is on disk already: it holds this one's changes */
    if (*job->written > job->seq) {
        job->skipped = 1;
        job->rc = NGX_OK;
        goto unlock;
    }

    fd = ngx_open_file(job->tmp_name, NGX_FILE_WRONLY, NGX_FILE_TRUNCATE,
                       0644);
    if (fd == NGX_INVALID_FILE) {
        e = ngx_errno;
        ngx_http_flags_state_fail(job, e, ngx_open_file_n, job->tmp_name, "create");
        goto unlock;
    }

    for (off = 0; off < job->len; off += w) {
        w = ngx_write_fd(fd, job->buf + off, job->len - off);
        if (w <= 0) {
            e = (w == 0) ? NGX_ENOSPC : ngx_errno;
            ngx_http_flags_state_fail(job, e, ngx_write_fd_n, job->tmp_name, "write");
            goto unlock;
        }
    }

    if (fsync(fd) == -1) {
        e = ngx_errno;
        ngx_http_flags_state_fail(job, e, "fsync()", job->tmp_name, "sync");
        goto unlock;
    }

    if (ngx_rename_file(job->tmp_name, job->path) == NGX_FILE_ERROR) {
        e = ngx_errno;
        ngx_http_flags_state_fail(job, e, ngx_rename_file_n, job->tmp_name, "rename");
        goto unlock;
    }

    *job->written = job->seq;
    job->rc = NGX_OK;

    if (job->dir) {
        dfd = open((char *) job->dir, O_RDONLY|O_DIRECTORY|O_CLOEXEC);
        if (dfd != -1) {
            (void) fsync(dfd);
            (void) close(dfd);
        }
    }

unlock:

    if (fd != NGX_INVALID_FILE) {
        (void) ngx_close_file(fd);
        if (job->rc != NGX_OK) {
            (void) ngx_delete_file(job->tmp_name);
        }
    }

    (void) ngx_unlock_fd(lock_fd);

close:

    (void) ngx_close_file(lock_fd);
}


/* In the event loop: what the write left to say. */

static void
ngx_http_flags_state_report(ngx_http_flags_state_job_t *job, ngx_log_t *log)
{
    if (job->chown_err) {
        ngx_log_error(NGX_LOG_WARN, log, job->chown_err,
                      "flags: fchown(\"%s\") failed", job->lock_name);
    }

    if (job->op == NULL) {
        if (job->skipped) {
            ngx_log_debug2(NGX_LOG_DEBUG_HTTP, log, 0,
                           "flags: state snapshot %uA not written, %uA is "
                           "newer", job->seq, *job->written);

        } else {
            ngx_log_debug3(NGX_LOG_DEBUG_HTTP, log, 0,
                           "flags: state snapshot %uA written to \"%s\", "
                           "%uz bytes", job->seq, job->path, job->len);
        }

        return;
    }

    if (job->op_name == job->tmp_name && job->rc == NGX_ERROR
        && ngx_strcmp(job->op, ngx_rename_file_n) == 0)
    {
        ngx_log_error(NGX_LOG_ALERT, log, job->err,
                      "flags: " ngx_rename_file_n " \"%s\" to \"%s\" failed",
                      job->tmp_name, job->path);
        return;
    }

    ngx_log_error(NGX_LOG_ALERT, log, job->err, "flags: %s \"%s\" failed",
                  job->op, job->op_name);
}


/*
 * Rewrites the state file from the zone, synchronously: the master at
 * start and reload, and every process when nginx has no threads.  NGX_OK
 * when the file on disk describes the zone; NGX_ERROR (logged, and
 * described in err when given) when it could not be written; NGX_DECLINED
 * when this process's zone was replaced by another one at a reload.
 */

ngx_int_t
ngx_http_flags_save_state(ngx_http_flags_main_conf_t *fmcf, ngx_log_t *log,
    u_char *err, size_t err_len)
{
    ngx_int_t                   rc;
    ngx_http_flags_state_job_t  job;

    if (fmcf->state_file.len == 0) {
        return NGX_OK;
    }

    rc = ngx_http_flags_state_serialize(fmcf, log, &job, err, err_len);
    if (rc != NGX_OK) {
        return rc;
    }

    ngx_http_flags_state_write(&job);
    ngx_http_flags_state_report(&job, log);

    if (job.rc != NGX_OK) {
        ngx_http_flags_state_err(err, err_len, "%s", job.msg);
    }

    ngx_http_flags_state_free(&job);

    return job.rc;
}


/*
 * After a change in the zone (a rollback, an admin change): rewrite the
 * state file.  Without r nothing waits.  With r, r is answered by
 * done(r, rc, err) once the file holds the change (rc NGX_OK), could not
 * be written (NGX_ERROR, err says why) or must not be (NGX_DECLINED): at
 * once, whose value is returned, or later from the event loop, and then
 * this returns NGX_DONE with r->main->count raised, as
 * ngx_http_read_client_request_body() does.
 */

ngx_int_t
ngx_http_flags_state_changed(ngx_http_flags_main_conf_t *fmcf,
    ngx_log_t *log, ngx_http_request_t *r, ngx_http_flags_state_done_pt done)
{
    u_char     err[256];
    ngx_int_t  rc;
#if (NGX_THREADS)
    ngx_http_flags_state_waiter_t  *w;
#endif

    err[0] = '\0';

    if (fmcf->state_file.len == 0) {
        return r ? done(r, NGX_OK, err) : NGX_OK;
    }

#if (NGX_THREADS)

    if (fmcf->state_thread_pool) {
        w = NULL;

        if (r) {
            w = ngx_palloc(r->pool, sizeof(ngx_http_flags_state_waiter_t));
            if (w == NULL) {
                return NGX_HTTP_INTERNAL_SERVER_ERROR;
            }

            w->r = r;
            w->done = done;
        }

        if (ngx_http_flags_state_writer.busy) {
            /* the write in flight may have snapshotted the zone before
             * this change: the next one holds it */
            ngx_http_flags_state_writer.dirty = 1;

            if (w) {
                w->next = ngx_http_flags_state_writer.waiting;
                ngx_http_flags_state_writer.waiting = w;
                r->main->count++;
                return NGX_DONE;
            }

            return NGX_OK;
        }

        rc = ngx_http_flags_state_post(fmcf, log, err, sizeof(err));

        if (rc == NGX_OK) {
            if (w) {
                w->next = NULL;
                ngx_http_flags_state_writer.writing = w;
                r->main->count++;
                return NGX_DONE;
            }

            return NGX_OK;
        }

        return r ? done(r, rc, err) : NGX_OK;
    }

#endif

    rc = ngx_http_flags_save_state(fmcf, log, err, sizeof(err));

    return r ? done(r, rc, err) : NGX_OK;
}


#if (NGX_THREADS)

/* Snapshot now, write in the pool. */

static ngx_int_t
ngx_http_flags_state_post(ngx_http_flags_main_conf_t *fmcf, ngx_log_t *log,
    u_char *err, size_t err_len)
{
    ngx_int_t                       rc;
    ngx_thread_task_t              *task;
    ngx_http_flags_state_job_t     *job;
    ngx_http_flags_state_writer_t  *sw;

    sw = &ngx_http_flags_state_writer;

    if (sw->task == NULL) {
        /* one task a worker, reused: one write in flight at a time */
        task = ngx_thread_task_alloc(fmcf->cycle->pool,
                                     sizeof(ngx_http_flags_state_job_t));
        if (task == NULL) {
            ngx_http_flags_state_err(err, err_len, "%s", "out of memory");
            return NGX_ERROR;
        }

        task->handler = ngx_http_flags_state_thread;
        task->event.handler = ngx_http_flags_state_written;
        task->event.data = sw;
        task->event.log = fmcf->cycle->log;

        sw->guard.handler = ngx_http_flags_state_guard;
        sw->guard.data = sw;
        sw->guard.log = fmcf->cycle->log;
        sw->guard.cancelable = 0;

        sw->task = task;
        sw->fmcf = fmcf;
    }

    task = sw->task;
    job = task->ctx;

    sw->dirty = 0;

    rc = ngx_http_flags_state_serialize(fmcf, log, job, err, err_len);
    if (rc != NGX_OK) {
        return rc;
    }

    if (ngx_thread_task_post(fmcf->state_thread_pool, task) != NGX_OK) {
        ngx_http_flags_state_free(job);
        ngx_http_flags_state_err(err, err_len, "%s",
                                 "the thread pool's queue is full");
        return NGX_ERROR;
    }

    sw->busy = 1;

    /* a graceful exit waits for timers that are not cancelable: the
     * worker stays until the write is done and its waiters answered */
    ngx_add_timer(&sw->guard, 60000);

    return NGX_OK;
}


static void
ngx_http_flags_state_thread(void *data, ngx_log_t *log)
{
    ngx_http_flags_state_write(data);
}


static void
ngx_http_flags_state_guard(ngx_event_t *ev)
{
    ngx_http_flags_state_writer_t  *sw = ev->data;

    if (sw->busy) {
        ngx_add_timer(ev, 60000);
    }
}


/* In the event loop, once the thread is done. */

static void
ngx_http_flags_state_written(ngx_event_t *ev)
{
    u_char                          err[256], next_err[256];
    ngx_int_t                       rc, next_rc;
    ngx_http_flags_state_job_t     *job;
    ngx_http_flags_state_waiter_t  *done, *waiting;
    ngx_http_flags_state_writer_t  *sw;

    sw = ev->data;
    job = sw->task->ctx;

    sw->busy = 0;

    if (sw->guard.timer_set) {
        ngx_del_timer(&sw->guard);
    }

    ngx_http_flags_state_report(job, ngx_cycle->log);

    rc = job->rc;
    ngx_cpystrn(err, job->msg, sizeof(err));
    ngx_http_flags_state_free(job);

    done = sw->writing;
    sw->writing = NULL;

    /*
     * Changes made while the thread wrote: one more write for them all,
     * posted before anyone is answered (an answer may run the next
     * pipelined request, which may change the zone again).
     */
    if (sw->dirty) {
        waiting = sw->waiting;
        sw->waiting = NULL;

        next_err[0] = '\0';
        next_rc = ngx_http_flags_state_post(sw->fmcf, ngx_cycle->log,
                                            next_err, sizeof(next_err));
        if (next_rc == NGX_OK) {
            sw->writing = waiting;

        } else {
            ngx_http_flags_state_answer(waiting, next_rc, next_err);
        }
    }

    ngx_http_flags_state_answer(done, rc, err);
}


static void
ngx_http_flags_state_answer(ngx_http_flags_state_waiter_t *w, ngx_int_t rc,
    u_char *err)
{
    ngx_connection_t               *c;
    ngx_http_request_t             *r;
    ngx_http_flags_state_waiter_t  *next;

    for ( /* void */ ; w; w = next) {
        next = w->next;
        r = w->r;
        c = r->connection;

        ngx_http_finalize_request(r, w->done(r, rc, err));
        ngx_http_run_posted_requests(c);
    }
}

#endif
