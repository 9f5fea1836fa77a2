/*
 * ngx_http_flags_state.c - flags_state_file: rollbacks and overrides that
 * survive a restart.
 *
 * The file always describes the zone as the committed configuration sees
 * it (ngx_http_flags_zone_saved()): it is rewritten at every commit (start
 * and reload, by the master) and after every rollback and admin change (by
 * the worker that made it).  Writers take an fcntl() lock (released by the
 * kernel if a worker dies) and snapshot the zone only once they hold it,
 * so the file on disk is never older than the last change; a temporary
 * file renamed over the old one means a crash never leaves it
 * half-written.
 */

#include "ngx_http_flags_module.h"


static ngx_int_t ngx_http_flags_user_may(ngx_core_conf_t *ccf,
    ngx_file_info_t *fi, ngx_uint_t dir);
static ngx_int_t ngx_http_flags_read_state(ngx_str_t *path, ngx_pool_t *pool,
    ngx_str_t *out, ngx_log_t *log);
static ngx_int_t ngx_http_flags_write_state(ngx_http_flags_main_conf_t *fmcf,
    ngx_log_t *log, u_char *err, size_t err_len);


#define ngx_http_flags_state_err(err, len, fmt, ...)                         \
    if (err) {                                                               \
        *ngx_snprintf(err, (len) - 1, fmt, __VA_ARGS__) = '\0';              \
    }


/*
 * At configuration time (init_zone, also under "nginx -t"), once the
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

    if (ngx_file_info(dir, &fi) == NGX_FILE_ERROR || !ngx_is_dir(&fi)) {
        ngx_log_error(NGX_LOG_EMERG, log, ngx_errno,
                      "flags_state_file \"%V\": directory \"%s\" does not "
                      "exist in %V", &fmcf->state_file, dir,
                      &fmcf->state_file_conf);
        return NGX_ERROR;
    }

    if (!ngx_http_flags_user_may(ccf, &fi, 1)) {
        ngx_log_error(NGX_LOG_EMERG, log, 0,
                      "flags_state_file \"%V\": the worker user \"%s\" "
                      "cannot create files in \"%s\" in %V",
                      &fmcf->state_file,
                      ccf->username ? ccf->username : "(current)", dir,
                      &fmcf->state_file_conf);
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
        ngx_log_error(NGX_LOG_EMERG, log, 0,
                      "flags_state_file \"%V\": the worker user \"%s\" "
                      "cannot write the lock file \"%s\" in %V",
                      &fmcf->state_file,
                      ccf->username ? ccf->username : "(current)", lock,
                      &fmcf->state_file_conf);
        return NGX_ERROR;
    }

    return NGX_OK;
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
 * At start (a fresh zone): bring back each rollback and override whose
 * flag still has the same definition.  A state file that cannot be read or
 * parsed is logged and ignored, never fatal.
 */

void
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
    fl_saved_flag_t           *saved;
    ngx_http_flags_flag_t     *flag;
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
        if (idx < 0) {
            stale++;
            continue;
        }

        flag = &project->flags[idx];

        if (flag->version == NULL || flag->def_hash != saved[i].def_hash) {
            stale++;
            continue;
        }

        if (saved[i].rolled_back) {
            fl_control_restore_rollback(&flag->version->ctl,
                                        saved[i].rollback_at_ms,
                                        saved[i].rollback_errors,
                                        saved[i].rollback_enabled);
            rollbacks++;
        }

        if (saved[i].override_kind != FL_OVERRIDE_NONE) {
            fl_control_set_override(&flag->version->ctl,
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
 * Rewrites the state file from the zone.  NGX_OK when the file on disk
 * describes the zone; NGX_ERROR (logged, and described in err when given)
 * when it could not be written; NGX_DECLINED when this process's zone was
 * replaced by another one at a reload and must not write it.
 */

ngx_int_t
ngx_http_flags_save_state(ngx_http_flags_main_conf_t *fmcf, ngx_log_t *log,
    u_char *err, size_t err_len)
{
    u_char           *lock_name;
    ngx_fd_t          lock_fd;
    ngx_int_t         rc;
    ngx_err_t         e;
    ngx_core_conf_t  *ccf;

    if (fmcf->state_file.len == 0) {
        return NGX_OK;
    }

    lock_name = ngx_alloc(fmcf->state_file.len + sizeof(".lock"), log);
    if (lock_name == NULL) {
        ngx_http_flags_state_err(err, err_len, "%s", "out of memory");
        return NGX_ERROR;
    }

    ngx_sprintf(lock_name, "%V.lock%Z", &fmcf->state_file);

    lock_fd = ngx_open_file(lock_name, NGX_FILE_RDWR, NGX_FILE_CREATE_OR_OPEN,
                            0600);
    if (lock_fd == NGX_INVALID_FILE) {
        e = ngx_errno;
        ngx_log_error(NGX_LOG_ALERT, log, e,
                      ngx_open_file_n " \"%s\" failed", lock_name);
        ngx_http_flags_state_err(err, err_len, "cannot open \"%s\": %s",
                                 lock_name, strerror(e));
        ngx_free(lock_name);
        return NGX_ERROR;
    }

    /* the master writes at start and reload: the lock file must stay
     * usable by the workers */
    ccf = (ngx_core_conf_t *) ngx_get_conf(fmcf->cycle->conf_ctx,
                                           ngx_core_module);

    if (geteuid() == 0 && ccf->user != (ngx_uid_t) NGX_CONF_UNSET_UINT
        && ccf->user != 0)
    {
        if (fchown(lock_fd, ccf->user, ccf->group) == -1) {
            ngx_log_error(NGX_LOG_WARN, log, ngx_errno,
                          "fchown(\"%s\") failed", lock_name);
        }
    }

    if (ngx_lock_fd(lock_fd) != 0) {
        e = ngx_errno;
        ngx_log_error(NGX_LOG_ALERT, log, e,
                      ngx_lock_fd_n " \"%s\" failed", lock_name);
        ngx_http_flags_state_err(err, err_len, "cannot lock \"%s\": %s",
                                 lock_name, strerror(e));
        rc = NGX_ERROR;
        goto close;
    }

    rc = ngx_http_flags_write_state(fmcf, log, err, err_len);

    (void) ngx_unlock_fd(lock_fd);

close:

    ngx_close_file(lock_fd);
    ngx_free(lock_name);

    return rc;
}


static ngx_int_t
ngx_http_flags_write_state(ngx_http_flags_main_conf_t *fmcf, ngx_log_t *log,
    u_char *err, size_t err_len)
{
    u_char           *tmp_name, *buf, *keys, *dir;
    size_t            n, max, len, off;
    ssize_t           w;
    ngx_fd_t          fd, dfd;
    ngx_err_t         e;
    ngx_int_t         rc;
    fl_saved_flag_t  *entries;

    rc = NGX_ERROR;
    fd = NGX_INVALID_FILE;
    buf = NULL;
    tmp_name = NULL;
    entries = NULL;
    keys = NULL;

    /* the zone may gain nodes at a reload meanwhile: retry with room */
    max = fmcf->sh->nnodes + 16;

    for ( ;; ) {
        entries = ngx_alloc(max * sizeof(fl_saved_flag_t), log);
        keys = ngx_alloc(max * NGX_HTTP_FLAGS_KEY_LEN, log);
        if (entries == NULL || keys == NULL) {
            ngx_http_flags_state_err(err, err_len, "%s", "out of memory");
            goto done;
        }

        n = ngx_http_flags_zone_saved(fmcf, entries, keys, max);

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
        max *= 2;
    }

    tmp_name = ngx_alloc(fmcf->state_file.len + sizeof(".tmp.")
                         + NGX_INT_T_LEN, log);
    buf = ngx_alloc(fl_state_file_bound(entries, n), log);
    if (tmp_name == NULL || buf == NULL) {
        ngx_http_flags_state_err(err, err_len, "%s", "out of memory");
        goto done;
    }

    ngx_sprintf(tmp_name, "%V.tmp.%P%Z", &fmcf->state_file, ngx_pid);

    len = fl_state_file_write(entries, n, (char *) buf);

    fd = ngx_open_file(tmp_name, NGX_FILE_WRONLY, NGX_FILE_TRUNCATE, 0644);
    if (fd == NGX_INVALID_FILE) {
        e = ngx_errno;
        ngx_log_error(NGX_LOG_ALERT, log, e,
                      ngx_open_file_n " \"%s\" failed", tmp_name);
        ngx_http_flags_state_err(err, err_len, "cannot create \"%s\": %s",
                                 tmp_name, strerror(e));
        goto done;
    }

    for (off = 0; off < len; off += w) {
        w = ngx_write_fd(fd, buf + off, len - off);
        if (w <= 0) {
            e = (w == 0) ? NGX_ENOSPC : ngx_errno;
            ngx_log_error(NGX_LOG_ALERT, log, e,
                          ngx_write_fd_n " \"%s\" failed", tmp_name);
            ngx_http_flags_state_err(err, err_len, "cannot write \"%s\": %s",
                                     tmp_name, strerror(e));
            goto done;
        }
    }

    if (fsync(fd) == -1) {
        e = ngx_errno;
        ngx_log_error(NGX_LOG_ALERT, log, e,
                      "fsync() \"%s\" failed", tmp_name);
        ngx_http_flags_state_err(err, err_len, "cannot sync \"%s\": %s",
                                 tmp_name, strerror(e));
        goto done;
    }

    if (ngx_rename_file(tmp_name, fmcf->state_file.data) == NGX_FILE_ERROR) {
        e = ngx_errno;
        ngx_log_error(NGX_LOG_ALERT, log, e,
                      ngx_rename_file_n " \"%s\" to \"%V\" failed",
                      tmp_name, &fmcf->state_file);
        ngx_http_flags_state_err(err, err_len, "cannot rename \"%s\": %s",
                                 tmp_name, strerror(e));
        goto done;
    }

    /* the rename itself reaches the disk with the directory */
    for (len = fmcf->state_file.len;
         len && fmcf->state_file.data[len - 1] != '/';
         len--)
    { /* void */ }

    dir = len ? ngx_alloc(len + 1, log) : NULL;

    if (dir) {
        ngx_memcpy(dir, fmcf->state_file.data, len);
        dir[len > 1 ? len - 1 : len] = '\0';

        dfd = open((char *) dir, O_RDONLY|O_DIRECTORY|O_CLOEXEC);
        if (dfd != -1) {
            (void) fsync(dfd);
            (void) close(dfd);
        }

        ngx_free(dir);
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
    ngx_free(entries);
    ngx_free(keys);

    return rc;
}
