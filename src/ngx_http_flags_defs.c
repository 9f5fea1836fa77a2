/*
 * ngx_http_flags_defs.c - a project's definitions: the one owner.
 *
 * A project's definitions (its flags file, parsed by the core; the table
 * of its flags with their resolved policies and their place in the zone;
 * their digest and version) are one snapshot, ngx_http_flags_defs_t.
 * This file loads it, resolves its policies, and hands it out:
 *
 *  - ngx_http_flags_defs(project): the snapshot served now, for what runs
 *    to its end in one event (an answer, the status, a timer's tick);
 *  - ngx_http_flags_defs_pin(r, project): the same, kept alive until the
 *    request's pool is destroyed, for a request that waits for its body or
 *    is answered later (a report, flags_admin's write).
 *
 * A change of definitions never edits a snapshot: the project is given
 * another one (ngx_http_flags_defs_switch(), between two events), and the
 * old one is freed once no request pins it.  A snapshot of the
 * configuration lives in its pool; a runtime version's
 * (ngx_http_flags_versions.c applies them) in a pool of its own.
 */

#include "ngx_http_flags_module.h"


static ngx_int_t ngx_http_flags_defs_read_doc(ngx_conf_t *cf,
    ngx_http_flags_project_t *project, ngx_http_flags_defs_t *defs);
static void ngx_http_flags_defs_free_core(void *data);
static void ngx_http_flags_defs_unpin(void *data);


/* this process's replaced snapshots that requests may still pin */
static ngx_http_flags_defs_t  *ngx_http_flags_defs_retired;


/*
 * The project's flags file at configuration time (so that "nginx -t" and
 * a reload name the file and the flag at fault): its snapshot, version 1.
 */

char *
ngx_http_flags_defs_conf(ngx_conf_t *cf, ngx_http_flags_project_t *project)
{
    char                    err[1024];
    size_t                  n;
    fl_status_t             rc;
    fl_project_t           *core;
    ngx_pool_cleanup_t     *cln;
    ngx_http_flags_defs_t  *defs;

    /* ngx_conf_full_name() NUL-terminates the path */

    rc = fl_project_load((const char *) project->file.data, &core,
                         err, sizeof(err));
    if (rc != FL_OK) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%s", err);
        return NGX_CONF_ERROR;
    }

    /* unknown fields load, but a misspelt one should not pass unseen */
    for (n = 0; n < fl_project_warning_count(core); n++) {
        ngx_conf_log_error(NGX_LOG_WARN, cf, 0, "%s",
                           fl_project_warning(core, n));
    }

    cln = ngx_pool_cleanup_add(cf->pool, 0);
    if (cln == NULL) {
        fl_project_free(core);
        return NGX_CONF_ERROR;
    }

    cln->handler = ngx_http_flags_defs_free_core;
    cln->data = core;

    defs = ngx_http_flags_defs_table(cf->pool, core);
    if (defs == NULL) {
        return NGX_CONF_ERROR;
    }

    defs->version = 1;
    defs->at_ms = (uint64_t) ngx_time() * 1000;
    defs->project = project;
    project->defs = defs;

    if (project->runtime
        && ngx_http_flags_defs_read_doc(cf, project, defs) != NGX_OK)
    {
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


/*
 * A runtime project's file, as bytes: the document of version 1, stored
 * when the first version is written (ngx_http_flags_admin_defs.c).  It
 * was just parsed from the same file.
 */

static ngx_int_t
ngx_http_flags_defs_read_doc(ngx_conf_t *cf, ngx_http_flags_project_t *project,
    ngx_http_flags_defs_t *defs)
{
    ssize_t          n;
    ngx_file_t       file;
    ngx_file_info_t  fi;

    ngx_memzero(&file, sizeof(ngx_file_t));
    file.name = project->file;
    file.log = cf->log;

    file.fd = ngx_open_file(project->file.data, NGX_FILE_RDONLY,
                            NGX_FILE_OPEN, 0);
    if (file.fd == NGX_INVALID_FILE) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno,
                           ngx_open_file_n " \"%V\" failed", &project->file);
        return NGX_ERROR;
    }

    if (ngx_fd_info(file.fd, &fi) == NGX_FILE_ERROR) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno,
                           ngx_fd_info_n " \"%V\" failed", &project->file);
        ngx_close_file(file.fd);
        return NGX_ERROR;
    }

    defs->doc_len = (size_t) ngx_file_size(&fi);
    defs->doc = ngx_pnalloc(cf->pool, defs->doc_len + 1);

    if (defs->doc == NULL) {
        ngx_close_file(file.fd);
        return NGX_ERROR;
    }

    n = ngx_read_file(&file, defs->doc, defs->doc_len, 0);
    ngx_close_file(file.fd);

    if (n != (ssize_t) defs->doc_len) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"%V\" was read short", &project->file);
        return NGX_ERROR;
    }

    defs->doc[defs->doc_len] = '\0';

    return NGX_OK;
}


/*
 * A snapshot of the core's project in pool: the table of its flags (names,
 * configured percentages, definition hashes, ramps) and the digest of the
 * definitions, which any flag added, removed, moved or changed changes.
 * Policies are resolved later (ngx_http_flags_defs_policies()), once the
 * http-level flags_rollback is known; nothing is bound to the zone yet.
 */

ngx_http_flags_defs_t *
ngx_http_flags_defs_table(ngx_pool_t *pool, fl_project_t *core)
{
    size_t                  n;
    uint64_t                hash;
    fl_flag_info_t          info;
    ngx_http_flags_flag_t  *flag;
    ngx_http_flags_defs_t  *defs;

    defs = ngx_pcalloc(pool, sizeof(ngx_http_flags_defs_t));
    if (defs == NULL) {
        return NULL;
    }

    defs->core = core;
    defs->nflags = fl_project_flag_count(core);

    defs->flags = ngx_pcalloc(pool, (defs->nflags ? defs->nflags : 1)
                                    * sizeof(ngx_http_flags_flag_t));
    if (defs->flags == NULL) {
        return NULL;
    }

    hash = 0xcbf29ce484222325ULL ^ defs->nflags;

    for (n = 0; n < defs->nflags; n++) {
        if (fl_project_flag_info(core, n, &info) != 0) {
            return NULL;
        }

        flag = &defs->flags[n];

        flag->name.data = (u_char *) info.name;
        flag->name.len = info.name_len;
        flag->rollout_milli = info.rollout_milli;
        flag->def_hash = info.def_hash;
        flag->ramp_def = fl_project_flag_ramp(core, n);

        hash = (hash ^ info.def_hash) * 0x100000001b3ULL;
        hash ^= hash >> 29;
    }

    defs->hash = hash;

    return defs;
}


/* Each flag's policy: its own, or the http level's (flags_rollback). */

ngx_int_t
ngx_http_flags_defs_policies(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_defs_t *defs)
{
    size_t          n;
    fl_flag_info_t  info;

    for (n = 0; n < defs->nflags; n++) {
        if (fl_project_flag_info(defs->core, n, &info) != 0) {
            return NGX_ERROR;
        }

        fl_rollback_policy_resolve(&info.rollback, &fmcf->rollback,
                                   &defs->flags[n].policy);
    }

    return NGX_OK;
}


/*
 * The project's definitions now, kept for the request: a change of
 * definitions while it waits (for its body, for the state file) leaves
 * it the snapshot it started with.  NULL when out of memory.
 */

ngx_http_flags_defs_t *
ngx_http_flags_defs_pin(ngx_http_request_t *r,
    ngx_http_flags_project_t *project)
{
    ngx_pool_cleanup_t     *cln;
    ngx_http_flags_defs_t  *defs;

    defs = project->defs;

    if (defs->pool == NULL) {
        /* the configuration's: lives as long as the request's worker */
        return defs;
    }

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        return NULL;
    }

    cln->handler = ngx_http_flags_defs_unpin;
    cln->data = defs;
    defs->refs++;

    return defs;
}

/*
 * The project is given defs (between two events of this process: what
 * the current event holds of the old snapshot stays valid); the old one
 * is freed by ngx_http_flags_defs_collect() once no request pins it.
 */

void
ngx_http_flags_defs_switch(ngx_http_flags_project_t *project,
    ngx_http_flags_defs_t *defs)
{
    ngx_http_flags_defs_t  *old;

    old = project->defs;
    project->defs = defs;

    if (old->pool) {
        old->retired = ngx_http_flags_defs_retired;
        ngx_http_flags_defs_retired = old;
    }
}


/* Frees the replaced snapshots no request pins any more. */

void
ngx_http_flags_defs_collect(void)
{
    ngx_http_flags_defs_t  *d, **prev;

    if (ngx_http_flags_defs_retired == NULL) {
        return;
    }

    /* a snapshot's pending counts reach the zone before it is freed */
    ngx_http_flags_counts_fold();

    prev = &ngx_http_flags_defs_retired;

    for (d = ngx_http_flags_defs_retired; d; d = *prev) {
        if (d->refs) {
            prev = &d->retired;
            continue;
        }

        *prev = d->retired;
        ngx_destroy_pool(d->pool);
    }
}


/*
 * A document of definitions read as the flags file is by "nginx -t": the
 * same code, the same messages, the project's file named in them.
 */

fl_status_t
ngx_http_flags_defs_parse(ngx_http_flags_project_t *project,
    const u_char *doc, size_t len, fl_project_t **core, char *err,
    size_t err_len)
{
    return fl_project_load_buffer((const char *) doc, len,
                                  (const char *) project->file.data, core,
                                  err, err_len);
}


/*
 * A snapshot of a runtime version, in a pool of its own: the document
 * (copied), its core project (core, already parsed and taken over, or
 * parsed here), the table, the policies and the variables' table.  The
 * caller binds it to the zone and serves it.  NULL when the document does
 * not load (it was validated when written: logged here) or memory is
 * short.
 */

ngx_http_flags_defs_t *
ngx_http_flags_defs_make(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_project_t *project, const u_char *doc, size_t len,
    fl_project_t *core, uint64_t version, uint64_t at_ms, ngx_log_t *log)
{
    char                    err[1024];
    u_char                 *copy;
    ngx_pool_t             *pool;
    ngx_pool_cleanup_t     *cln;
    ngx_http_flags_defs_t  *defs;

    if (core == NULL
        && ngx_http_flags_defs_parse(project, doc, len, &core, err,
                                     sizeof(err))
           != FL_OK)
    {
        ngx_log_error(NGX_LOG_ALERT, log, 0,
                      "flags: project \"%V\": version %uL does not load: %s",
                      &project->name, version, err);
        return NULL;
    }

    pool = ngx_create_pool(NGX_DEFAULT_POOL_SIZE, log);
    if (pool == NULL) {
        fl_project_free(core);
        return NULL;
    }

    cln = ngx_pool_cleanup_add(pool, 0);
    if (cln == NULL) {
        fl_project_free(core);
        ngx_destroy_pool(pool);
        return NULL;
    }

    cln->handler = ngx_http_flags_defs_free_core;
    cln->data = core;

    defs = ngx_http_flags_defs_table(pool, core);
    copy = ngx_pnalloc(pool, len + 1);

    if (defs == NULL || copy == NULL
        || ngx_http_flags_defs_policies(fmcf, defs) != NGX_OK
        || ngx_http_flags_variables_table(fmcf, defs, pool) != NGX_OK)
    {
        ngx_destroy_pool(pool);
        return NULL;
    }

    ngx_memcpy(copy, doc, len);
    copy[len] = '\0';

    defs->doc = copy;
    defs->doc_len = len;
    defs->pool = pool;
    defs->project = project;
    defs->version = version;
    defs->at_ms = at_ms;

    return defs;
}


static void
ngx_http_flags_defs_unpin(void *data)
{
    ngx_http_flags_defs_t  *defs = data;

    defs->refs--;
}


static void
ngx_http_flags_defs_free_core(void *data)
{
    fl_project_free(data);
}
