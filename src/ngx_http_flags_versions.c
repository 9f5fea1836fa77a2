/*
 * ngx_http_flags_versions.c - definitions=runtime: a project's versions
 * on this host (docs/definitions.md).
 *
 * Where a version lives:
 *  - on disk, durably: one file a version, "<flags_state_file>.definitions/
 *    <project>/v<N>.json" (its history entry on the first line, then the
 *    document: fl_defs_file_parse()), written to a temporary name, synced,
 *    renamed and the directory synced; the last NGX_HTTP_FLAGS_VERSIONS_KEEP
 *    are kept.  The configuration reads the newest that loads, so a reload
 *    or a restart serves what was last written;
 *  - in the zone: the project's record (ngx_http_flags_pversion_t) holds
 *    the version this host serves and its document, published by the
 *    writer (or by the configuration's commit);
 *  - in each worker: the snapshot it serves (ngx_http_flags_defs_t).  A
 *    worker takes a newer published version between two events: when a
 *    request of the project is authenticated, and on a timer of
 *    NGX_HTTP_FLAGS_VERSIONS_PERIOD, after which it acknowledges every
 *    publication it has applied in its slot of the zone.
 *
 * A write (ngx_http_flags_admin_defs.c) holds the project's writer lock,
 * writes the file, publishes, applies in its own worker and answers once
 * every live worker of the committed generation has acknowledged it.  A
 * worker of a replaced configuration (draining after a reload) keeps the
 * snapshot it has: it binds nothing for a generation that is gone.
 */

#include "ngx_http_flags_module.h"

#include <dirent.h>


#define NGX_HTTP_FLAGS_VERSIONS_PERIOD   50          /* ms */
#define NGX_HTTP_FLAGS_VERSIONS_DIR      ".definitions"
/* a writer that holds the lock longer has died with it */
#define NGX_HTTP_FLAGS_VERSIONS_LOCK_MS  30000


static ngx_int_t ngx_http_flags_versions_path(ngx_pool_t *pool,
    ngx_http_flags_main_conf_t *fmcf, ngx_http_flags_project_t *project,
    uint64_t version, ngx_str_t *path);
static ngx_int_t ngx_http_flags_versions_read_file(ngx_pool_t *pool,
    ngx_str_t *path, ngx_str_t *content, time_t *mtime, ngx_log_t *log);
static void ngx_http_flags_versions_prune(ngx_pool_t *pool,
    ngx_http_flags_main_conf_t *fmcf, ngx_http_flags_project_t *project,
    uint64_t newest, ngx_log_t *log);
static void ngx_http_flags_versions_timer(ngx_event_t *ev);


static ngx_event_t  ngx_http_flags_versions_ev;


/* ------------------------------------------------------------- the disk */


/* "<state file>.definitions/<project>" (version 0), or its "/v<N>.json" */

static ngx_int_t
ngx_http_flags_versions_path(ngx_pool_t *pool,
    ngx_http_flags_main_conf_t *fmcf, ngx_http_flags_project_t *project,
    uint64_t version, ngx_str_t *path)
{
    u_char  *p;
    size_t   len;

    len = fmcf->state_file.len + sizeof(NGX_HTTP_FLAGS_VERSIONS_DIR) - 1
          + 1 + project->name.len + sizeof("/v.json") + NGX_INT64_LEN;

    path->data = ngx_pnalloc(pool, len);
    if (path->data == NULL) {
        return NGX_ERROR;
    }

    p = ngx_cpymem(path->data, fmcf->state_file.data, fmcf->state_file.len);
    p = ngx_cpymem(p, NGX_HTTP_FLAGS_VERSIONS_DIR,
                   sizeof(NGX_HTTP_FLAGS_VERSIONS_DIR) - 1);
    *p++ = '/';
    p = ngx_cpymem(p, project->name.data, project->name.len);

    if (version) {
        p = ngx_sprintf(p, "/v%uL.json", version);
    }

    *p = '\0';
    path->len = p - path->data;

    return NGX_OK;
}


/*
 * The versions stored for the project, newest first (at most max); their
 * number.  A missing directory has none.
 */

ngx_uint_t
ngx_http_flags_versions_list(ngx_pool_t *pool,
    ngx_http_flags_main_conf_t *fmcf, ngx_http_flags_project_t *project,
    uint64_t *out, ngx_uint_t max)
{
    DIR            *dir;
    u_char         *p;
    uint64_t        v;
    ngx_str_t       path;
    ngx_uint_t      n, i, j;
    struct dirent  *de;

    if (ngx_http_flags_versions_path(pool, fmcf, project, 0, &path)
        != NGX_OK)
    {
        return 0;
    }

    dir = opendir((char *) path.data);
    if (dir == NULL) {
        return 0;
    }

    n = 0;

    while ((de = readdir(dir)) != NULL) {
        p = (u_char *) de->d_name;

        if (p[0] != 'v' || p[1] < '1' || p[1] > '9') {
            continue;
        }

        v = 0;

        for (p++; *p >= '0' && *p <= '9'; p++) {
            if (v > (UINT64_MAX - 9) / 10) {
                break;
            }

            v = v * 10 + (*p - '0');
        }

        if (ngx_strcmp(p, ".json") != 0) {
            continue;
        }

        /* kept sorted, newest first */
        for (i = 0; i < n && out[i] > v; i++) { /* void */ }

        if (i == max) {
            continue;
        }

        for (j = (n < max ? n : max - 1); j > i; j--) {
            out[j] = out[j - 1];
        }

        out[i] = v;

        if (n < max) {
            n++;
        }
    }

    closedir(dir);

    return n;
}


/*
 * Version N of the project as stored: its history entry and document (in
 * pool).  NGX_DECLINED when it is not stored (or no longer), NGX_ERROR
 * when the file does not read or parse.
 */

ngx_int_t
ngx_http_flags_versions_read(ngx_pool_t *pool,
    ngx_http_flags_main_conf_t *fmcf, ngx_http_flags_project_t *project,
    uint64_t version, ngx_str_t *entry, ngx_str_t *doc, time_t *mtime,
    ngx_log_t *log)
{
    char         err[256];
    size_t       entry_len, doc_off;
    uint64_t     v;
    ngx_int_t    rc;
    ngx_str_t    path, content;

    if (ngx_http_flags_versions_path(pool, fmcf, project, version, &path)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    rc = ngx_http_flags_versions_read_file(pool, &path, &content, mtime,
                                           log);
    if (rc != NGX_OK) {
        return rc;
    }

    if (fl_defs_file_parse((const char *) content.data, content.len, &v,
                           &entry_len, &doc_off, err, sizeof(err))
        != FL_OK
        || v != version)
    {
        ngx_log_error(NGX_LOG_ERR, log, 0,
                      "flags: version file \"%V\" is not version %uL: %s",
                      &path, version, v != version ? "another version" : err);
        return NGX_ERROR;
    }

    entry->data = content.data;
    entry->len = entry_len;
    doc->data = content.data + doc_off;
    doc->len = content.len - doc_off;

    return NGX_OK;
}


static ngx_int_t
ngx_http_flags_versions_read_file(ngx_pool_t *pool, ngx_str_t *path,
    ngx_str_t *content, time_t *mtime, ngx_log_t *log)
{
    ssize_t          n;
    ngx_fd_t         fd;
    ngx_file_info_t  fi;

    fd = ngx_open_file(path->data, NGX_FILE_RDONLY, NGX_FILE_OPEN, 0);
    if (fd == NGX_INVALID_FILE) {
        if (ngx_errno == NGX_ENOENT) {
            return NGX_DECLINED;
        }

        ngx_log_error(NGX_LOG_ERR, log, ngx_errno,
                      ngx_open_file_n " \"%V\" failed", path);
        return NGX_ERROR;
    }

    if (ngx_fd_info(fd, &fi) == NGX_FILE_ERROR
        || !ngx_is_file(&fi)
        || ngx_file_size(&fi) > FL_MAX_FLAGS_FILE_SIZE + 65536)
    {
        ngx_log_error(NGX_LOG_ERR, log, 0,
                      "flags: version file \"%V\" is not a regular file of "
                      "a sane size", path);
        ngx_close_file(fd);
        return NGX_ERROR;
    }

    if (mtime) {
        *mtime = ngx_file_mtime(&fi);
    }

    content->len = (size_t) ngx_file_size(&fi);
    content->data = ngx_pnalloc(pool, content->len + 1);
    if (content->data == NULL) {
        ngx_close_file(fd);
        return NGX_ERROR;
    }

    n = ngx_read_fd(fd, content->data, content->len);
    ngx_close_file(fd);

    if (n != (ssize_t) content->len) {
        ngx_log_error(NGX_LOG_ERR, log, ngx_errno,
                      ngx_read_fd_n " \"%V\" was short", path);
        return NGX_ERROR;
    }

    content->data[content->len] = '\0';

    return NGX_OK;
}


/*
 * Version N, durably: written to a temporary file, synced, renamed to its
 * name, the directory synced; older versions beyond the last KEEP go.
 * NGX_OK; NGX_DECLINED when the disk is full (or over quota, or over a
 * file size limit): nothing was stored; NGX_ERROR on any other failure,
 * logged.  The three steps below do the same with the disk's part in a
 * thread (ngx_http_flags_admin_defs.c).
 */

ngx_int_t
ngx_http_flags_versions_write(ngx_pool_t *pool,
    ngx_http_flags_main_conf_t *fmcf, ngx_http_flags_project_t *project,
    uint64_t version, ngx_str_t *entry, ngx_str_t *doc, ngx_log_t *log)
{
    ngx_http_flags_versions_job_t  job;

    ngx_memzero(&job, sizeof(ngx_http_flags_versions_job_t));

    if (ngx_http_flags_versions_job(pool, fmcf, project, &job, version,
                                    entry, doc)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    ngx_http_flags_versions_run(&job);

    return ngx_http_flags_versions_done(pool, fmcf, project, &job, log);
}


/*
 * A file for the job to write (at most two: the file's version 1 goes
 * before the first version written): its names, in pool, and its bytes.
 */

ngx_int_t
ngx_http_flags_versions_job(ngx_pool_t *pool,
    ngx_http_flags_main_conf_t *fmcf, ngx_http_flags_project_t *project,
    ngx_http_flags_versions_job_t *job, uint64_t version, ngx_str_t *entry,
    ngx_str_t *doc)
{
    ngx_str_t                        dir, path;
    ngx_http_flags_versions_file_t  *f;

    if (job->nfiles == 2) {
        return NGX_ERROR;
    }

    if (ngx_http_flags_versions_path(pool, fmcf, project, 0, &dir) != NGX_OK
        || ngx_http_flags_versions_path(pool, fmcf, project, version, &path)
           != NGX_OK)
    {
        return NGX_ERROR;
    }

    f = &job->files[job->nfiles];

    f->tmp = ngx_pnalloc(pool, path.len + sizeof(".tmp"));
    if (f->tmp == NULL) {
        return NGX_ERROR;
    }

    ngx_sprintf(f->tmp, "%V.tmp%Z", &path);

    f->path = path.data;
    f->version = version;
    f->entry = *entry;
    f->doc = *doc;

    job->dir = dir.data;
    job->newest = version;
    job->nfiles++;

    return NGX_OK;
}


/*
 * The job's files written in order, stopping at the first failure (its
 * step, file and errno in the job).  No log, no pool, no zone: it runs in
 * a thread of flags_state_thread_pool as well as in the event loop.
 */

void
ngx_http_flags_versions_run(ngx_http_flags_versions_job_t *job)
{
    u_char                          *slash;
    ssize_t                          n, want;
    ngx_fd_t                         fd;
    ngx_uint_t                       i;
    struct iovec                     iov[3];
    ngx_http_flags_versions_file_t  *f;

    job->err = 0;
    job->failed = NULL;
    job->written = 0;
    job->name = job->dir;

    /* "<state file>.definitions/<project>", its parent first if need be */
    if (ngx_create_dir(job->dir, 0700) == NGX_FILE_ERROR
        && ngx_errno != NGX_EEXIST)
    {
        slash = job->dir + ngx_strlen(job->dir) - 1;

        while (slash > job->dir && *slash != '/') {
            slash--;
        }

        *slash = '\0';

        if (ngx_create_dir(job->dir, 0700) == NGX_FILE_ERROR
            && ngx_errno != NGX_EEXIST)
        {
            job->err = ngx_errno;
            *slash = '/';
            job->failed = ngx_create_dir_n;
            return;
        }

        *slash = '/';

        if (ngx_create_dir(job->dir, 0700) == NGX_FILE_ERROR
            && ngx_errno != NGX_EEXIST)
        {
            job->err = ngx_errno;
            job->failed = ngx_create_dir_n;
            return;
        }
    }

    for (i = 0; i < job->nfiles; i++) {
        f = &job->files[i];
        job->name = f->tmp;

        fd = ngx_open_file(f->tmp, NGX_FILE_WRONLY, NGX_FILE_TRUNCATE, 0600);
        if (fd == NGX_INVALID_FILE) {
            job->err = ngx_errno;
            job->failed = ngx_open_file_n;
            return;
        }

        iov[0].iov_base = f->entry.data;
        iov[0].iov_len = f->entry.len;
        iov[1].iov_base = (void *) "\n";
        iov[1].iov_len = 1;
        iov[2].iov_base = f->doc.data;
        iov[2].iov_len = f->doc.len;
        want = (ssize_t) (f->entry.len + 1 + f->doc.len);

        /* a short write sets no errno: a stale one (EEXIST of the mkdir)
         * must not pass for the reason, a full disk is */
        ngx_set_errno(0);
        n = writev(fd, iov, 3);

        if (n != want) {
            job->err = (n >= 0 || ngx_errno == 0) ? NGX_ENOSPC : ngx_errno;
            job->failed = "writev()";

        } else if (fsync(fd) == -1) {
            job->err = ngx_errno;
            job->failed = "fsync()";
        }

        ngx_close_file(fd);

        if (job->failed) {
            (void) ngx_delete_file(f->tmp);
            return;
        }

        if (ngx_rename_file(f->tmp, f->path) == NGX_FILE_ERROR) {
            job->err = ngx_errno;
            job->failed = ngx_rename_file_n;
            (void) ngx_delete_file(f->tmp);
            return;
        }

        job->written++;
    }

    /* the renames made durable */
    job->name = job->dir;

    fd = ngx_open_file(job->dir, NGX_FILE_RDONLY, NGX_FILE_OPEN, 0);
    if (fd == NGX_INVALID_FILE) {
        job->err = ngx_errno;
        job->failed = ngx_open_file_n;
        return;
    }

    if (fsync(fd) == -1 && ngx_errno != NGX_EINVAL) {
        job->err = ngx_errno;
        job->failed = "fsync()";
    }

    ngx_close_file(fd);
}


/*
 * In the event loop, once the job ran: its failure logged, or the old
 * versions pruned.  NGX_OK; NGX_DECLINED, no room for it; NGX_ERROR.
 */

ngx_int_t
ngx_http_flags_versions_done(ngx_pool_t *pool,
    ngx_http_flags_main_conf_t *fmcf, ngx_http_flags_project_t *project,
    ngx_http_flags_versions_job_t *job, ngx_log_t *log)
{
    if (job->failed) {
        ngx_log_error(NGX_LOG_ERR, log, job->err,
                      "flags: storing version %uL of project \"%V\": %s "
                      "\"%s\" failed", job->newest, &project->name,
                      job->failed, job->name);

        /* no room for it: a full disk, a quota, a file size limit */
        return (job->err == NGX_ENOSPC || job->err == EFBIG
#ifdef EDQUOT
                || job->err == EDQUOT
#endif
               ) ? NGX_DECLINED : NGX_ERROR;
    }

    ngx_http_flags_versions_prune(pool, fmcf, project, job->newest, log);

    return NGX_OK;
}


static void
ngx_http_flags_versions_prune(ngx_pool_t *pool,
    ngx_http_flags_main_conf_t *fmcf, ngx_http_flags_project_t *project,
    uint64_t newest, ngx_log_t *log)
{
    uint64_t    versions[NGX_HTTP_FLAGS_VERSIONS_KEEP + 8];
    ngx_str_t   path;
    ngx_uint_t  i, n;

    n = ngx_http_flags_versions_list(pool, fmcf, project, versions,
                                     NGX_HTTP_FLAGS_VERSIONS_KEEP + 8);

    for (i = 0; i < n; i++) {
        if (versions[i] + NGX_HTTP_FLAGS_VERSIONS_KEEP > newest) {
            continue;
        }

        if (ngx_http_flags_versions_path(pool, fmcf, project, versions[i],
                                         &path)
            == NGX_OK
            && ngx_delete_file(path.data) == NGX_FILE_ERROR)
        {
            ngx_log_error(NGX_LOG_WARN, log, ngx_errno,
                          ngx_delete_file_n " \"%V\" failed", &path);
        }
    }
}


/* ---------------------------------------------------- the configuration */


/*
 * A runtime project at configuration time: its newest stored version
 * that loads replaces the file's snapshot (which "nginx -t" validated);
 * the file seeds version 1 when none is stored.
 */

ngx_int_t
ngx_http_flags_versions_conf(ngx_conf_t *cf, ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_project_t *project)
{
    char                    err[1024];
    time_t                  mtime;
    uint64_t                versions[NGX_HTTP_FLAGS_VERSIONS_KEEP + 8];
    ngx_int_t               rc;
    ngx_str_t               entry, doc;
    ngx_uint_t              i, n;
    fl_project_t           *core;
    ngx_pool_cleanup_t     *cln;
    ngx_http_flags_defs_t  *defs, *seed;

    seed = project->defs;

    n = ngx_http_flags_versions_list(cf->pool, fmcf, project, versions,
                                     NGX_HTTP_FLAGS_VERSIONS_KEEP + 8);

    for (i = 0; i < n; i++) {
        rc = ngx_http_flags_versions_read(cf->pool, fmcf, project,
                                          versions[i], &entry, &doc, &mtime,
                                          cf->log);
        if (rc != NGX_OK) {
            continue;
        }

        if (ngx_http_flags_defs_parse(project, doc.data, doc.len, &core, err,
                                      sizeof(err))
            != FL_OK)
        {
            ngx_conf_log_error(NGX_LOG_WARN, cf, 0,
                               "project \"%V\": stored version %uL does not "
                               "load, skipped: %s", &project->name,
                               versions[i], err);
            continue;
        }

        cln = ngx_pool_cleanup_add(cf->pool, 0);
        if (cln == NULL) {
            fl_project_free(core);
            return NGX_ERROR;
        }

        cln->handler = (ngx_pool_cleanup_pt) fl_project_free;
        cln->data = core;

        defs = ngx_http_flags_defs_table(cf->pool, core);
        if (defs == NULL) {
            return NGX_ERROR;
        }

        defs->project = project;
        defs->version = versions[i];
        defs->at_ms = (uint64_t) mtime * 1000;
        defs->doc = doc.data;
        defs->doc_len = doc.len;

        if (defs->hash != seed->hash) {
            ngx_conf_log_error(NGX_LOG_NOTICE, cf, 0,
                               "project \"%V\" serves its stored version "
                               "%uL; \"%V\" differs from it and is not read "
                               "(definitions=runtime: change flags through "
                               "flags_admin)", &project->name, versions[i],
                               &project->file);
        }

        project->defs = defs;

        return NGX_OK;
    }

    return NGX_OK;
}


/* ---------------------------------------------------------- the zone */


/*
 * Version defs of the project is the one this host serves: its document
 * into the zone (the old one freed), the version and its time, a new
 * publication, a new answer version.  The zone's memory is taken first
 * (ngx_http_flags_versions_reserve()) so that a version is never stored
 * on disk and then not served.  Returns the publication's sequence.
 */

u_char *
ngx_http_flags_versions_reserve(ngx_http_flags_main_conf_t *fmcf,
    size_t len)
{
    return ngx_slab_alloc(fmcf->shpool, len ? len : 1);
}


ngx_atomic_uint_t
ngx_http_flags_versions_publish(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_project_t *project, ngx_http_flags_defs_t *defs,
    u_char *buf)
{
    u_char                     *old;
    ngx_atomic_uint_t           seq;
    ngx_http_flags_pversion_t  *pv;

    pv = project->pversion;

    ngx_memcpy(buf, defs->doc, defs->doc_len);

    ngx_shmtx_lock(&fmcf->shpool->mutex);

    old = pv->defs_doc;
    pv->defs_doc = buf;
    pv->defs_len = defs->doc_len;
    pv->defs_at_ms = defs->at_ms;
    __atomic_store_n(&pv->defs_version, defs->version, __ATOMIC_RELEASE);
    seq = ngx_atomic_fetch_add(&fmcf->sh->defs_seq, 1) + 1;

    if (old) {
        ngx_slab_free_locked(fmcf->shpool, old);
    }

    ngx_shmtx_unlock(&fmcf->shpool->mutex);

    /* the answers change: ETags, the memo, push connections */
    (void) ngx_atomic_fetch_add(&pv->version, 1);

    return seq;
}


/*
 * The configuration's commit (init module, in the master): a runtime
 * project's version from disk is published unless the zone has a newer
 * one (a write between the configuration's read and its commit: the new
 * workers take it when they start).
 */

void
ngx_http_flags_versions_commit(ngx_http_flags_main_conf_t *fmcf,
    ngx_log_t *log)
{
    u_char                     *buf;
    ngx_uint_t                  i;
    ngx_http_flags_defs_t      *defs;
    ngx_http_flags_project_t   *project;
    ngx_http_flags_pversion_t  *pv;

    if (fmcf->sh == NULL || ngx_test_config) {
        return;
    }

    project = fmcf->projects.elts;

    for (i = 0; i < fmcf->projects.nelts; i++) {
        pv = project[i].pversion;
        defs = ngx_http_flags_defs(&project[i]);

        if (!project[i].runtime || pv == NULL
            || __atomic_load_n(&pv->defs_version, __ATOMIC_ACQUIRE)
               >= defs->version)
        {
            continue;
        }

        buf = ngx_http_flags_versions_reserve(fmcf, defs->doc_len);
        if (buf == NULL) {
            ngx_log_error(NGX_LOG_ALERT, log, 0,
                          "flags: zone \"%V\" is full: project \"%V\"'s "
                          "definitions cannot be changed at runtime; "
                          "increase the flags_zone size",
                          &fmcf->zone_name, &project[i].name);
            continue;
        }

        (void) ngx_http_flags_versions_publish(fmcf, &project[i], defs, buf);
    }
}


/* ------------------------------------------------------- a worker */


/*
 * The project's published version, if newer than this worker's: parsed,
 * bound and served from the next event on.  Only a worker of the
 * committed configuration applies it.
 */

void
ngx_http_flags_versions_refresh(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_project_t *project, ngx_log_t *log)
{
    u_char                     *doc;
    size_t                      len;
    uint64_t                    version, at_ms;
    ngx_http_flags_defs_t      *defs;
    ngx_http_flags_pversion_t  *pv;

    static uint64_t             failed;

    pv = project->pversion;

    if (!project->runtime || pv == NULL) {
        return;
    }

    version = __atomic_load_n(&pv->defs_version, __ATOMIC_ACQUIRE);

    if (version <= ngx_http_flags_defs(project)->version
        || version == failed
        || !ngx_http_flags_zone_current(fmcf))
    {
        return;
    }

    /* a copy, under the lock: the writer frees the old document */
    ngx_shmtx_lock(&fmcf->shpool->mutex);

    version = pv->defs_version;
    at_ms = pv->defs_at_ms;
    len = pv->defs_len;
    doc = ngx_alloc(len + 1, log);

    if (doc) {
        ngx_memcpy(doc, pv->defs_doc, len);
    }

    ngx_shmtx_unlock(&fmcf->shpool->mutex);

    if (doc == NULL) {
        return;
    }

    defs = ngx_http_flags_defs_make(fmcf, project, doc, len, NULL, version,
                                    at_ms, log);
    ngx_free(doc);

    if (defs == NULL) {
        /* logged; not tried again until another version comes */
        failed = version;
        return;
    }

    (void) ngx_http_flags_versions_apply(fmcf, project, defs, NULL, log);
}


/*
 * defs serves the project in this worker from the next event: bound to
 * the zone (a flag whose definition is unchanged keeps everything; a
 * changed one keeps its rollback and override, carried by the worker that
 * created its new version: ngx_http_flags_control_definition()), the memo
 * folded first (its entries count into the old snapshot's flags).
 * created (nflags bytes, or NULL) is filled with which flags this worker
 * bound first.  Returns the number of flags kept with a mitigation.
 */

ngx_uint_t
ngx_http_flags_versions_apply(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_project_t *project, ngx_http_flags_defs_t *defs,
    u_char *created, ngx_log_t *log)
{
    long                     k;
    ngx_uint_t               i, kept, unbound;
    ngx_http_flags_flag_t   *flag, *was;
    ngx_http_flags_defs_t   *old;
    ngx_http_flags_change_t  ch;

    old = ngx_http_flags_defs(project);

    if (created == NULL) {
        created = ngx_pnalloc(defs->pool, defs->nflags + 1);
        if (created == NULL) {
            return 0;
        }
    }

    ngx_http_flags_counts_fold();

    unbound = ngx_http_flags_zone_bind_defs(fmcf, project, old, defs,
                                            created, log);
    if (unbound) {
        ngx_log_error(NGX_LOG_WARN, log, 0,
                      "flags: zone \"%V\" is full: %ui flags of project "
                      "\"%V\" are evaluated but not counted and cannot be "
                      "rolled back; increase the flags_zone size",
                      &fmcf->zone_name, unbound, &project->name);
    }

    ngx_memzero(&ch, sizeof(ngx_http_flags_change_t));
    ch.fmcf = fmcf;
    ch.project = project;
    ch.defs = defs;
    ch.log = log;
    ch.level = fmcf->log_level;
    ch.routine = fmcf->log_routine;
    ch.by = NGX_HTTP_FLAGS_BY_DEFINITION;
    ch.batch = 1;

    kept = 0;

    for (i = 0; i < defs->nflags; i++) {
        flag = &defs->flags[i];

        if (!created[i]) {
            continue;
        }

        k = fl_project_find_flag(old->core, (const char *) flag->name.data,
                                 flag->name.len);
        was = k >= 0 ? &old->flags[k] : NULL;

        if (was == NULL || was->ctl == NULL || was->version == flag->version)
        {
            continue;
        }

        ch.flag = flag;
        kept += ngx_http_flags_control_definition(&ch, was->ctl);
    }

    ngx_http_flags_defs_switch(project, defs);

    if (kept) {
        (void) ngx_http_flags_control_save(fmcf, log, NULL, NULL);
    }

    return kept;
}


/* Every runtime project, then the acknowledgement of what was applied. */

void
ngx_http_flags_versions_refresh_all(ngx_http_flags_main_conf_t *fmcf,
    ngx_log_t *log)
{
    ngx_uint_t                 i;
    ngx_atomic_uint_t          seq;
    ngx_http_flags_project_t  *project;

    if (fmcf->sh == NULL) {
        return;
    }

    seq = __atomic_load_n(&fmcf->sh->defs_seq, __ATOMIC_ACQUIRE);
    project = fmcf->projects.elts;

    for (i = 0; i < fmcf->projects.nelts; i++) {
        ngx_http_flags_versions_refresh(fmcf, &project[i], log);
    }

    ngx_http_flags_zone_defs_ack(fmcf, seq);
    ngx_http_flags_defs_collect();
}


/* A worker's start: the newest versions, then a timer that keeps up. */

ngx_int_t
ngx_http_flags_versions_init_process(ngx_cycle_t *cycle,
    ngx_http_flags_main_conf_t *fmcf)
{
    ngx_uint_t                 i, runtime;
    ngx_http_flags_project_t  *project;

    project = fmcf->projects.elts;
    runtime = 0;

    for (i = 0; i < fmcf->projects.nelts; i++) {
        runtime |= project[i].runtime;
    }

    if (!runtime || fmcf->sh == NULL) {
        return NGX_OK;
    }

    ngx_http_flags_versions_refresh_all(fmcf, cycle->log);

    ngx_http_flags_versions_ev.handler = ngx_http_flags_versions_timer;
    ngx_http_flags_versions_ev.data = fmcf;
    ngx_http_flags_versions_ev.log = cycle->log;
    ngx_http_flags_versions_ev.cancelable = 1;

    ngx_add_timer(&ngx_http_flags_versions_ev,
                  NGX_HTTP_FLAGS_VERSIONS_PERIOD);

    return NGX_OK;
}


static void
ngx_http_flags_versions_timer(ngx_event_t *ev)
{
    ngx_http_flags_main_conf_t  *fmcf = ev->data;

    ngx_http_flags_versions_refresh_all(fmcf, ev->log);

    if (!ngx_exiting) {
        ngx_add_timer(ev, NGX_HTTP_FLAGS_VERSIONS_PERIOD);
    }
}


/* ------------------------------------------------------- the writer */


/* One writer a project on this host: NGX_OK, or NGX_BUSY. */

ngx_int_t
ngx_http_flags_versions_lock(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_project_t *project)
{
    uint64_t                    now;
    ngx_atomic_uint_t           pid;
    ngx_http_flags_pversion_t  *pv;

    pv = project->pversion;
    now = ngx_http_flags_now_ms();

    ngx_shmtx_lock(&fmcf->shpool->mutex);

    pid = pv->defs_writer;

    if (pid != 0 && pid != (ngx_atomic_uint_t) ngx_pid
        && now - pv->defs_writer_ms < NGX_HTTP_FLAGS_VERSIONS_LOCK_MS
        && kill((ngx_pid_t) pid, 0) == 0)
    {
        ngx_shmtx_unlock(&fmcf->shpool->mutex);
        return NGX_BUSY;
    }

    pv->defs_writer = (ngx_atomic_uint_t) ngx_pid;
    pv->defs_writer_ms = now;

    ngx_shmtx_unlock(&fmcf->shpool->mutex);

    return NGX_OK;
}


void
ngx_http_flags_versions_unlock(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_project_t *project)
{
    ngx_http_flags_pversion_t  *pv;

    pv = project->pversion;

    ngx_shmtx_lock(&fmcf->shpool->mutex);

    if (pv->defs_writer == (ngx_atomic_uint_t) ngx_pid) {
        pv->defs_writer = 0;
    }

    ngx_shmtx_unlock(&fmcf->shpool->mutex);
}


/* The version this host serves (0: a file project, or no zone). */

uint64_t
ngx_http_flags_versions_current(ngx_http_flags_project_t *project)
{
    if (!project->runtime || project->pversion == NULL) {
        return ngx_http_flags_defs(project)->version;
    }

    return __atomic_load_n(&project->pversion->defs_version,
                           __ATOMIC_ACQUIRE);
}


/* A refused version, counted by why (flags_metrics). */

void
ngx_http_flags_versions_rejected(ngx_http_flags_project_t *project,
    ngx_uint_t reason)
{
    if (project->pversion && reason < 4) {
        (void) ngx_atomic_fetch_add(&project->pversion->defs_rejected[reason],
                                    1);
    }
}
