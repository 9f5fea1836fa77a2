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
 * another one, and the old one is freed once no request pins it.  A file
 * project's snapshot lives in the configuration's pool.
 */

#include "ngx_http_flags_module.h"


static void ngx_http_flags_defs_free_core(void *data);
static void ngx_http_flags_defs_unpin(void *data);


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
    defs->project = project;
    project->defs = defs;

    return NGX_CONF_OK;
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


/* The project is given defs; the old snapshot goes once unpinned. */

void
ngx_http_flags_defs_switch(ngx_http_flags_project_t *project,
    ngx_http_flags_defs_t *defs)
{
    ngx_http_flags_defs_t  *old;

    old = project->defs;
    project->defs = defs;

    if (old->pool && old->refs == 0) {
        ngx_destroy_pool(old->pool);
    }
}


static void
ngx_http_flags_defs_unpin(void *data)
{
    ngx_http_flags_defs_t  *defs = data;

    ngx_http_flags_project_t  *project;

    project = defs->project;

    if (--defs->refs == 0 && project->defs != defs) {
        ngx_destroy_pool(defs->pool);
    }
}


static void
ngx_http_flags_defs_free_core(void *data)
{
    fl_project_free(data);
}
