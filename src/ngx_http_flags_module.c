/*
 * ngx_http_flags_module.c - directives, configuration and the lifecycle
 * (the zone's init, init module, a process's start and exit), which calls
 * the zone, the state file and flags_sync in their order.
 *
 * Flags files are parsed here, once per configuration cycle, so that a bad
 * file fails "nginx -t" (and a reload keeps the old configuration) with the
 * file and the flag at fault.
 */

#include "ngx_http_flags_module.h"

#if (NGX_LINUX) && defined(__GLIBC__)
#include <malloc.h>
#define NGX_HAVE_MALLOPT_TRIM  1
#else
#define NGX_HAVE_MALLOPT_TRIM  0
#endif


static void *ngx_http_flags_create_main_conf(ngx_conf_t *cf);
static char *ngx_http_flags_init_main_conf(ngx_conf_t *cf, void *conf);
static void *ngx_http_flags_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_flags_merge_loc_conf(ngx_conf_t *cf, void *parent,
    void *child);

static char *ngx_http_flags_zone(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_flags_project(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_flags_project_name(ngx_conf_t *cf,
    ngx_http_flags_main_conf_t *fmcf, ngx_str_t *value);
static char *ngx_http_flags_project_params(ngx_conf_t *cf,
    ngx_http_flags_project_t *project);
static char *ngx_http_flags_project_token(ngx_conf_t *cf,
    ngx_http_flags_project_t *project, ngx_str_t *value);
static char *ngx_http_flags_project_file(ngx_conf_t *cf,
    ngx_http_flags_project_t *project, ngx_str_t *value);
static char *ngx_http_flags_project_unique(ngx_conf_t *cf,
    ngx_http_flags_main_conf_t *fmcf, ngx_http_flags_project_t *project);
static char *ngx_http_flags_rollback(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_flags_state_file(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_flags_log_level(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static ngx_int_t ngx_http_flags_log_level_value(ngx_str_t *name,
    ngx_uint_t *level);
static char *ngx_http_flags_init_thread_pool(ngx_conf_t *cf,
    ngx_http_flags_main_conf_t *fmcf);
static ngx_int_t ngx_http_flags_postconfiguration(ngx_conf_t *cf);
static ngx_int_t ngx_http_flags_init_shm_zone(ngx_shm_zone_t *shm_zone,
    void *data);
static ngx_int_t ngx_http_flags_init_module(ngx_cycle_t *cycle);
static ngx_int_t ngx_http_flags_init_process(ngx_cycle_t *cycle);
static void ngx_http_flags_exit_process(ngx_cycle_t *cycle);


static ngx_conf_num_bounds_t  ngx_http_flags_max_traits_bounds = {
    ngx_conf_check_num_bounds, 0, 100000
};


/* like limit_req_log_level; flags_log_level's two levels */
static ngx_conf_enum_t  ngx_http_flags_log_levels[] = {
    { ngx_string("info"), NGX_LOG_INFO },
    { ngx_string("notice"), NGX_LOG_NOTICE },
    { ngx_string("warn"), NGX_LOG_WARN },
    { ngx_string("error"), NGX_LOG_ERR },
    { ngx_null_string, 0 }
};


static ngx_command_t  ngx_http_flags_commands[] = {

    { ngx_string("flags_zone"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_http_flags_zone,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("flags_project"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_2MORE,
      ngx_http_flags_project,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("flags_rollback"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_1MORE,
      ngx_http_flags_rollback,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("flags_error_log"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_http_flags_error_log,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("flags_state_file"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_http_flags_state_file,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("flags_sync"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_1MORE,
      ngx_http_flags_sync,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("flags_state_thread_pool"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_str_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_http_flags_main_conf_t, state_thread_pool_name),
      NULL },

    { ngx_string("flags_max_traits"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_flags_loc_conf_t, max_traits),
      &ngx_http_flags_max_traits_bounds },

    { ngx_string("flags_max_report_size"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_size_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_flags_loc_conf_t, max_report_size),
      NULL },

    /* flags_admin's definitions routes: the largest document a write
     * takes (docs/definitions.md) */
    { ngx_string("flags_definitions_max_size"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_size_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_flags_loc_conf_t, definitions_max_size),
      NULL },

    /* rollbacks at the level; routine changes at routine= */
    { ngx_string("flags_log_level"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE12,
      ngx_http_flags_log_level,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("flags_evaluate"),
      NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_http_flags_set_handler,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      (void *) ngx_http_flags_evaluate_handler },

    { ngx_string("flags_sdk"),
      NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_http_flags_set_handler,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      (void *) ngx_http_flags_sdk_handler },

    { ngx_string("flags_ingest_errors"),
      NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_http_flags_set_handler,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      (void *) ngx_http_flags_ingest_handler },

    { ngx_string("flags_status"),
      NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_http_flags_set_handler,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      (void *) ngx_http_flags_status_handler },

    /* Prometheus (ngx_http_flags_metrics.c, docs/metrics.md) */
    { ngx_string("flags_metrics"),
      NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_http_flags_set_handler,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      (void *) ngx_http_flags_metrics_handler },

    { ngx_string("flags_admin"),
      NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_http_flags_set_handler,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      (void *) ngx_http_flags_admin_handler },

    /* the operator's page (ngx_http_flags_dashboard.c) */
    { ngx_string("flags_dashboard"),
      NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS|NGX_CONF_TAKE1,
      ngx_http_flags_dashboard,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      (void *) ngx_http_flags_dashboard_handler },

    { ngx_string("flags_ofrep"),
      NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_http_flags_set_handler,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      (void *) ngx_http_flags_ofrep_handler },

    /* live push (ngx_http_flags_push.c, docs/push.md) */
    { ngx_string("flags_websocket"),
      NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_http_flags_set_handler,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      (void *) ngx_http_flags_websocket_handler },

    { ngx_string("flags_ofrep_events"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_FLAG,
      ngx_conf_set_flag_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_flags_loc_conf_t, ofrep_events),
      NULL },

    { ngx_string("flags_push_heartbeat"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_msec_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_flags_loc_conf_t, push_heartbeat),
      NULL },

    { ngx_string("flags_push_max_connections"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_http_flags_push_max_connections,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_http_flags_main_conf_t, push_max),
      NULL },

    /* flags as variables, upstream errors (docs/variables.md) */
    { ngx_string("flags_context"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_2MORE,
      ngx_http_flags_context,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("flags_upstream_errors"),
      NGX_HTTP_LOC_CONF|NGX_CONF_TAKE123,
      ngx_http_flags_upstream_errors,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

      ngx_null_command
};


static ngx_http_module_t  ngx_http_flags_module_ctx = {
    ngx_http_flags_add_variables,          /* preconfiguration */
    ngx_http_flags_postconfiguration,      /* postconfiguration */

    ngx_http_flags_create_main_conf,       /* create main configuration */
    ngx_http_flags_init_main_conf,         /* init main configuration */

    NULL,                                  /* create server configuration */
    NULL,                                  /* merge server configuration */

    ngx_http_flags_create_loc_conf,        /* create location configuration */
    ngx_http_flags_merge_loc_conf          /* merge location configuration */
};


ngx_module_t  ngx_http_flags_module = {
    NGX_MODULE_V1,
    &ngx_http_flags_module_ctx,            /* module context */
    ngx_http_flags_commands,               /* module directives */
    NGX_HTTP_MODULE,                       /* module type */
    NULL,                                  /* init master */
    ngx_http_flags_init_module,            /* init module */
    ngx_http_flags_init_process,           /* init process */
    NULL,                                  /* init thread */
    NULL,                                  /* exit thread */
    ngx_http_flags_exit_process,           /* exit process */
    NULL,                                  /* exit master */
    NGX_MODULE_V1_PADDING
};


static void *
ngx_http_flags_create_main_conf(ngx_conf_t *cf)
{
    ngx_http_flags_main_conf_t  *fmcf;

    fmcf = ngx_pcalloc(cf->pool, sizeof(ngx_http_flags_main_conf_t));
    if (fmcf == NULL) {
        return NULL;
    }

    /*
     * set by ngx_pcalloc():
     *
     *     fmcf->shm_zone = NULL;
     *     fmcf->zone_name = { 0, NULL };
     *     fmcf->state_file = { 0, NULL };
     *     fmcf->rollback_set = 0;
     */

    fmcf->cycle = cf->cycle;
    fmcf->zone_size = NGX_CONF_UNSET;
    fmcf->error_log = NGX_CONF_UNSET_PTR;
    fmcf->push_max = NGX_CONF_UNSET_UINT;
    fmcf->auth_basic_index = NGX_ERROR;

    if (ngx_array_init(&fmcf->projects, cf->pool, 4,
                       sizeof(ngx_http_flags_project_t))
        != NGX_OK)
    {
        return NULL;
    }

    fmcf->rollback = fl_rollback_policy_default();

    return fmcf;
}


/*
 * Runs when the whole http block is read: directives may come in any order,
 * so flag policies are resolved and the zone is added only now.
 */

static char *
ngx_http_flags_init_main_conf(ngx_conf_t *cf, void *conf)
{
    ngx_http_flags_main_conf_t *fmcf = conf;

    size_t                     i;
    ngx_http_flags_project_t  *project;
    ngx_http_flags_loc_conf_t *flcf;

    flcf = ((ngx_http_conf_ctx_t *) cf->ctx)->loc_conf[
                                             ngx_http_flags_module.ctx_index];

    /* events logged outside a request (reloads, ramps' steps, the
     * fleet's rounds) use the http level */
    if (flcf->log_level != NGX_CONF_UNSET_UINT) {
        fmcf->log_level = flcf->log_level;
        fmcf->log_routine = flcf->log_routine;

    } else {
        fmcf->log_level = NGX_LOG_ERR;
        fmcf->log_routine = NGX_LOG_NOTICE;
    }

    /* push connections one worker holds: set at init module, once
     * worker_connections is known (ngx_http_flags_push_limit) */

    /* the report log (ngx_http_flags_reportlog.c) */
    if (ngx_http_flags_report_log_conf(cf, fmcf) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    if (fmcf->projects.nelts == 0) {
        /* the module is loaded but unused: add no zone */
        return NGX_CONF_OK;
    }

    project = fmcf->projects.elts;

    for (i = 0; i < fmcf->projects.nelts; i++) {
        if (project[i].runtime && fmcf->state_file.len == 0) {
            ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                          "project \"%V\" has definitions=runtime, which "
                          "keeps its versions beside flags_state_file, but "
                          "flags_state_file is not set in %V:%ui",
                          &project[i].name, &project[i].conf_file,
                          project[i].conf_line);
            return NGX_CONF_ERROR;
        }

        /* the newest stored version replaces the file's (validated) */
        if (project[i].runtime
            && ngx_http_flags_versions_conf(cf, fmcf, &project[i]) != NGX_OK)
        {
            return NGX_CONF_ERROR;
        }

        if (ngx_http_flags_defs_policies(fmcf, project[i].defs) != NGX_OK) {
            return NGX_CONF_ERROR;
        }
    }

    if (fmcf->zone_name.len == 0) {
        ngx_str_set(&fmcf->zone_name, NGX_HTTP_FLAGS_ZONE_NAME);
        fmcf->zone_size = NGX_HTTP_FLAGS_ZONE_SIZE;
    }

    fmcf->shm_zone = ngx_shared_memory_add(cf, &fmcf->zone_name,
                                           fmcf->zone_size,
                                           &ngx_http_flags_module);
    if (fmcf->shm_zone == NULL) {
        return NGX_CONF_ERROR;
    }

    if (fmcf->shm_zone->data) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "flags_zone \"%V\" is already used by another "
                           "module or http block", &fmcf->zone_name);
        return NGX_CONF_ERROR;
    }

    fmcf->shm_zone->init = ngx_http_flags_init_shm_zone;
    fmcf->shm_zone->data = fmcf;

    return ngx_http_flags_init_thread_pool(cf, fmcf);
}


/*
 * Workers write the state file in a thread of this pool ("default" unless
 * flags_state_thread_pool names another): adding it here makes nginx
 * create "default" even when no thread_pool directive is written, and
 * fails "nginx -t" for a name that no thread_pool defines.
 */

static char *
ngx_http_flags_init_thread_pool(ngx_conf_t *cf,
    ngx_http_flags_main_conf_t *fmcf)
{
    if (fmcf->state_thread_pool_name.data == NULL) {
        ngx_str_set(&fmcf->state_thread_pool_name, "default");
    }

#if (NGX_THREADS)

    if (fmcf->state_file.len == 0) {
        return NGX_CONF_OK;
    }

    fmcf->state_thread_pool = ngx_thread_pool_add(cf,
                                              &fmcf->state_thread_pool_name);
    if (fmcf->state_thread_pool == NULL) {
        return NGX_CONF_ERROR;
    }

#endif

    return NGX_CONF_OK;
}


static void *
ngx_http_flags_create_loc_conf(ngx_conf_t *cf)
{
    ngx_http_flags_loc_conf_t  *flcf;

    flcf = ngx_palloc(cf->pool, sizeof(ngx_http_flags_loc_conf_t));
    if (flcf == NULL) {
        return NULL;
    }

    flcf->max_traits = NGX_CONF_UNSET_UINT;
    flcf->max_report_size = NGX_CONF_UNSET_SIZE;
    flcf->definitions_max_size = NGX_CONF_UNSET_SIZE;
    flcf->log_level = NGX_CONF_UNSET_UINT;
    flcf->log_routine = NGX_CONF_UNSET_UINT;
    flcf->push_heartbeat = NGX_CONF_UNSET_MSEC;
    flcf->ofrep_events = NGX_CONF_UNSET;
    flcf->context = NGX_CONF_UNSET_PTR;
    flcf->upstream_errors = NGX_CONF_UNSET;
    flcf->upstream_status_min = NGX_CONF_UNSET_UINT;
    flcf->upstream_status_max = NGX_CONF_UNSET_UINT;
    flcf->upstream_flags = NULL;
    ngx_str_null(&flcf->dashboard_admin);   /* a location's own: no merge */
    flcf->handler = NULL;
    flcf->handler_directive = NULL;
    ngx_str_null(&flcf->handler_file);
    flcf->handler_line = 0;

    return flcf;
}


static char *
ngx_http_flags_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child)
{
    ngx_http_flags_loc_conf_t *prev = parent;
    ngx_http_flags_loc_conf_t *conf = child;

    ngx_http_core_loc_conf_t  *clcf;

    ngx_conf_merge_uint_value(conf->max_traits, prev->max_traits, 64);
    ngx_conf_merge_size_value(conf->max_report_size, prev->max_report_size,
                              64 * 1024);
    ngx_conf_merge_size_value(conf->definitions_max_size,
                              prev->definitions_max_size,
                              NGX_HTTP_FLAGS_DEFINITIONS_MAX_SIZE);
    /* the two levels of flags_log_level are inherited together */
    if (conf->log_level == NGX_CONF_UNSET_UINT) {
        conf->log_level = prev->log_level;
        conf->log_routine = prev->log_routine;
    }

    if (conf->log_level == NGX_CONF_UNSET_UINT) {
        conf->log_level = NGX_LOG_ERR;
        conf->log_routine = NGX_LOG_NOTICE;
    }
    ngx_conf_merge_msec_value(conf->push_heartbeat, prev->push_heartbeat,
                              15000);
    ngx_conf_merge_value(conf->ofrep_events, prev->ofrep_events, 1);

    /* flags_upstream_errors: nested locations inherit it */
    if (conf->upstream_errors == NGX_CONF_UNSET) {
        conf->upstream_errors = prev->upstream_errors;
        conf->upstream_status_min = prev->upstream_status_min;
        conf->upstream_status_max = prev->upstream_status_max;
        conf->upstream_flags = prev->upstream_flags;
    }

    ngx_conf_merge_value(conf->upstream_errors, prev->upstream_errors, 0);

    if (ngx_http_flags_merge_context(cf, prev, conf) != NGX_CONF_OK) {
        return NGX_CONF_ERROR;
    }

    if (conf->push_heartbeat < 100) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"flags_push_heartbeat\" must be at least 100ms");
        return NGX_CONF_ERROR;
    }

    if (conf->max_report_size == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"flags_max_report_size\" must be at least 1");
        return NGX_CONF_ERROR;
    }

    if (conf->definitions_max_size == 0
        || conf->definitions_max_size > FL_MAX_FLAGS_FILE_SIZE)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"flags_definitions_max_size\" must be at least "
                           "1 and at most %uz (the largest flags file)",
                           (size_t) FL_MAX_FLAGS_FILE_SIZE);
        return NGX_CONF_ERROR;
    }

    /*
     * proxy_pass, fastcgi_pass, stub_status and the like replace
     * clcf->handler without looking: a directive of ours written before
     * them would be dropped in silence.  The handlers are final only now.
     * The handler is not inherited, so only the location that named the
     * directive is checked.
     */

    if (conf->handler) {
        clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);

        if (clcf->handler != conf->handler) {
            ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                          "\"%V\" conflicts with another content handler "
                          "(such as proxy_pass) in this location in %V:%ui",
                          conf->handler_directive, &conf->handler_file,
                          conf->handler_line);
            return NGX_CONF_ERROR;
        }

        /* checked for access control once all modules merged */
        if (conf->handler == ngx_http_flags_admin_handler
            && ngx_http_flags_admin_location(cf, conf) != NGX_OK)
        {
            return NGX_CONF_ERROR;
        }
    }

    return NGX_CONF_OK;
}


/*
 * The zone's init (nginx calls it for every cycle that adds the zone, also
 * under "nginx -t"): the state file's directory is checked now that the
 * worker user is known, the zone prepares this configuration's generation,
 * and a new zone (not one kept across a reload) takes back the rollbacks
 * and overrides of the state file.
 */

static ngx_int_t
ngx_http_flags_init_shm_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_int_t                    rc;
    ngx_http_flags_main_conf_t  *fmcf;

    fmcf = shm_zone->data;

    if (ngx_http_flags_check_state_dir(fmcf, (ngx_cycle_t *) ngx_cycle,
                                       shm_zone->shm.log)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    rc = ngx_http_flags_init_zone(shm_zone, data);
    if (rc != NGX_OK) {
        return rc;
    }

    if (data == NULL && !shm_zone->shm.exists) {
        ngx_http_flags_restore_state(fmcf, shm_zone->shm.log);
    }

    return NGX_OK;
}


/*
 * Once the whole configuration is read (the events block may come after
 * the http block, and this runs under "nginx -t" too): the push cap,
 * which depends on worker_connections; then the zone's commit.
 */

static ngx_int_t
ngx_http_flags_init_module(ngx_cycle_t *cycle)
{
    ngx_http_flags_main_conf_t  *fmcf;

    if (ngx_http_flags_push_limit(cycle) != NGX_OK) {
        return NGX_ERROR;
    }

    if (ngx_test_config) {
        return NGX_OK;
    }

    fmcf = ngx_http_flags_zone_conf(cycle);
    if (fmcf == NULL) {
        return NGX_OK;
    }

    /* the new cycle is committed: what changed with its definitions, and
     * its generation's state goes to disk */
    ngx_http_flags_zone_commit(cycle, fmcf);
    ngx_http_flags_control_committed(cycle, fmcf);
    ngx_http_flags_versions_commit(fmcf, cycle->log);

    (void) ngx_http_flags_save_state(fmcf, cycle->log, NULL, 0);

    return NGX_OK;
}


/* A worker (or the single process) starts: the zone, then flags_sync. */

static ngx_int_t
ngx_http_flags_init_process(ngx_cycle_t *cycle)
{
    ngx_http_flags_main_conf_t  *fmcf;

    if (ngx_process == NGX_PROCESS_HELPER) {
        return NGX_OK;
    }

    fmcf = ngx_http_flags_zone_conf(cycle);
    if (fmcf == NULL) {
        return NGX_OK;
    }

#if (NGX_HAVE_MALLOPT_TRIM)
    /*
     * The report batch keeps the pools of the requests of one event-loop
     * pass (about 200 KB for 32 connections) until its write returns, and
     * frees them together: with glibc's default 128 KB trim threshold the
     * heap top was handed back with brk() after every pass and faulted in
     * again by the next, a page fault per 4 KB of every pass.  Keeping up
     * to 4 MB of free heap stops that churn (docs/decisions.md).
     */
    (void) mallopt(M_TRIM_THRESHOLD, 4 * 1024 * 1024);
#endif

    ngx_http_flags_zone_attach(cycle, fmcf);

    /* ramps: the worker's timer of their ticks (ngx_http_flags_ramp.c) */
    if (ngx_http_flags_ramp_init_process(cycle, fmcf) != NGX_OK) {
        return NGX_ERROR;
    }

    /* definitions=runtime: the newest versions, and a timer that keeps
     * up with the ones written later (ngx_http_flags_versions.c) */
    if (ngx_http_flags_versions_init_process(cycle, fmcf) != NGX_OK) {
        return NGX_ERROR;
    }

    /* flags_sync: the worker's timer (ngx_http_flags_sync.c) */
    return ngx_http_flags_sync_init_process(cycle, fmcf);
}


/* A worker exits: flags_sync's lock if it held it, then its zone slot. */

static void
ngx_http_flags_exit_process(ngx_cycle_t *cycle)
{
    ngx_http_flags_main_conf_t  *fmcf;

    if (ngx_process == NGX_PROCESS_HELPER) {
        return;
    }

    fmcf = ngx_http_flags_zone_conf(cycle);
    if (fmcf == NULL) {
        return;
    }

    /* the evaluations and memo answers not counted yet are, while the
     * zone is ours */
    ngx_http_flags_counts_exit();
    ngx_http_flags_memo_exit();

    ngx_http_flags_ramp_exit_process(fmcf);
    ngx_http_flags_sync_exit_process(fmcf);
    ngx_http_flags_zone_detach(fmcf);
}


static ngx_int_t
ngx_http_flags_postconfiguration(ngx_conf_t *cf)
{
    /*
     * nginx reloads with "master_process off" in its one process, which
     * then accepts no connection with the new configuration (stock nginx
     * 1.22 does the same without this module): refusing the reload keeps
     * the running configuration serving, push connections, zone and all.
     */
    if (ngx_process == NGX_PROCESS_SINGLE
        && !ngx_is_init_cycle(cf->cycle->old_cycle))
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "flags: nginx cannot reload with "
                           "\"master_process off\" (its one process would "
                           "accept no connection with the new "
                           "configuration): the running configuration keeps "
                           "serving; restart nginx to load the new one");
        return NGX_ERROR;
    }

    if (ngx_http_flags_variables_init(cf) != NGX_OK) {
        return NGX_ERROR;
    }

    if (ngx_http_flags_admin_check(cf) != NGX_OK) {
        return NGX_ERROR;
    }

    if (ngx_http_flags_dashboard_init(cf) != NGX_OK) {
        return NGX_ERROR;
    }

    return ngx_http_flags_upstream_init(cf);
}


/* flags_zone name:size; */

static char *
ngx_http_flags_zone(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_flags_main_conf_t *fmcf = conf;

    u_char     *p;
    ssize_t     size;
    ngx_str_t  *value, s;

    if (fmcf->zone_name.len) {
        return "is duplicate";
    }

    if (fmcf->projects.nelts) {
        return "must come before the first \"flags_project\"";
    }

    value = cf->args->elts;

    p = (u_char *) ngx_strchr(value[1].data, ':');
    if (p == NULL || p == value[1].data) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid zone \"%V\", expected name:size",
                           &value[1]);
        return NGX_CONF_ERROR;
    }

    s.data = p + 1;
    s.len = value[1].data + value[1].len - s.data;

    size = ngx_parse_size(&s);
    if (size == NGX_ERROR) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid zone size \"%V\"", &value[1]);
        return NGX_CONF_ERROR;
    }

    if (size < (ssize_t) (8 * ngx_pagesize)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "zone \"%V\" is too small", &value[1]);
        return NGX_CONF_ERROR;
    }

    fmcf->zone_name.data = value[1].data;
    fmcf->zone_name.len = p - value[1].data;
    fmcf->zone_size = size;

    return NGX_CONF_OK;
}


static ngx_int_t
ngx_http_flags_valid_name(ngx_str_t *name)
{
    size_t  i;
    u_char  c;

    if (name->len == 0 || name->len > FL_MAX_PROJECT_NAME_LEN) {
        return 0;
    }

    for (i = 0; i < name->len; i++) {
        c = name->data[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
              || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-'))
        {
            return 0;
        }
    }

    return 1;
}


/*
 * What an [emerg] may show of a flags_project parameter: tokens are
 * secrets, and a mistyped "Token=..." or a bare word may well be one.
 * Only a short name made of [A-Za-z_] before "=" is shown, never a value.
 */

static ngx_uint_t
ngx_http_flags_param_name(ngx_str_t *value, ngx_str_t *name)
{
    u_char  *eq, *p;

    eq = ngx_strlchr(value->data, value->data + value->len, '=');

    if (eq == NULL || eq == value->data || eq - value->data > 32) {
        return 0;
    }

    for (p = value->data; p < eq; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')
              || *p == '_'))
        {
            return 0;
        }
    }

    name->data = value->data;
    name->len = eq + 1 - value->data;

    return 1;
}


/* flags_project NAME token=T [token=T ...] file=PATH; */

static char *
ngx_http_flags_project(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_flags_main_conf_t *fmcf = conf;

    char                      *rv;
    ngx_str_t                 *value;
    ngx_http_flags_project_t  *project;

    value = cf->args->elts;

    rv = ngx_http_flags_project_name(cf, fmcf, &value[1]);
    if (rv != NGX_CONF_OK) {
        return rv;
    }

    project = ngx_array_push(&fmcf->projects);
    if (project == NULL) {
        return NGX_CONF_ERROR;
    }

    /* where errors about the default flags_error_log point to */
    if (fmcf->projects.nelts == 1) {
        fmcf->project_file = cf->conf_file->file.name;
        fmcf->project_line = cf->conf_file->line;
    }

    ngx_memzero(project, sizeof(ngx_http_flags_project_t));
    project->name = value[1];
    project->conf_file = cf->conf_file->file.name;
    project->conf_line = cf->conf_file->line;

    if (ngx_array_init(&project->tokens, cf->pool, 2, sizeof(ngx_str_t))
        != NGX_OK)
    {
        return NGX_CONF_ERROR;
    }

    rv = ngx_http_flags_project_params(cf, project);
    if (rv != NGX_CONF_OK) {
        return rv;
    }

    rv = ngx_http_flags_project_unique(cf, fmcf, project);
    if (rv != NGX_CONF_OK) {
        return rv;
    }

    return ngx_http_flags_defs_conf(cf, project);
}


/* The NAME of flags_project: not a parameter, valid, and not yet used. */

static char *
ngx_http_flags_project_name(ngx_conf_t *cf, ngx_http_flags_main_conf_t *fmcf,
    ngx_str_t *value)
{
    ngx_str_t                  name;
    ngx_uint_t                 i;
    ngx_http_flags_project_t  *projects;

    /* "flags_project token=T ..." without a name: the token is no name */
    if (ngx_strlchr(value->data, value->data + value->len, '=')) {
        if (ngx_http_flags_param_name(value, &name)) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "flags_project: invalid project name \"%V\" "
                               "(parameter 1); the name comes first",
                               &name);
        } else {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "flags_project: invalid project name "
                               "(parameter 1); the name comes first");
        }

        return NGX_CONF_ERROR;
    }

    if (!ngx_http_flags_valid_name(value)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid project name \"%V\": expected 1 to 64 "
                           "of A-Z a-z 0-9 _ . -", value);
        return NGX_CONF_ERROR;
    }

    projects = fmcf->projects.elts;

    for (i = 0; i < fmcf->projects.nelts; i++) {
        if (projects[i].name.len == value->len
            && ngx_strncmp(projects[i].name.data, value->data, value->len)
               == 0)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "duplicate project \"%V\"", value);
            return NGX_CONF_ERROR;
        }
    }

    return NGX_CONF_OK;
}


/* The parameters after NAME: at least one token= and exactly one file=. */

static char *
ngx_http_flags_project_params(ngx_conf_t *cf,
    ngx_http_flags_project_t *project)
{
    char        *rv;
    ngx_str_t   *value, name;
    ngx_uint_t   i;

    value = cf->args->elts;

    for (i = 2; i < cf->args->nelts; i++) {

        if (ngx_strncmp(value[i].data, "token=", 6) == 0) {
            rv = ngx_http_flags_project_token(cf, project, &value[i]);

        } else if (ngx_strncmp(value[i].data, "file=", 5) == 0) {
            rv = ngx_http_flags_project_file(cf, project, &value[i]);

        } else if (ngx_strcmp(value[i].data, "definitions=runtime") == 0) {
            project->runtime = 1;
            rv = NGX_CONF_OK;

        } else if (ngx_strcmp(value[i].data, "definitions=file") == 0) {
            project->runtime = 0;
            rv = NGX_CONF_OK;

        } else if (ngx_strncmp(value[i].data, "definitions=", 12) == 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "flags_project: invalid \"%V\": expected "
                               "definitions=file or definitions=runtime",
                               &value[i]);
            rv = NGX_CONF_ERROR;

        } else if (ngx_http_flags_param_name(&value[i], &name)) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "flags_project: unknown parameter \"%V\" "
                               "(parameter %ui); expected token=, file= "
                               "or definitions=", &name, i);
            rv = NGX_CONF_ERROR;

        } else {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "flags_project: unknown parameter "
                               "(parameter %ui); expected token=, file= "
                               "or definitions=", i);
            rv = NGX_CONF_ERROR;
        }

        if (rv != NGX_CONF_OK) {
            return rv;
        }
    }

    if (project->tokens.nelts == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "project \"%V\" has no \"token=\"",
                           &project->name);
        return NGX_CONF_ERROR;
    }

    if (project->file.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "project \"%V\" has no \"file=\"", &project->name);
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


static char *
ngx_http_flags_project_token(ngx_conf_t *cf, ngx_http_flags_project_t *project,
    ngx_str_t *value)
{
    size_t                       k;
    ngx_str_t                   *token;
    ngx_http_flags_main_conf_t  *fmcf;

    token = ngx_array_push(&project->tokens);
    if (token == NULL) {
        return NGX_CONF_ERROR;
    }

    /* a copy padded with zeros to whole 8-byte words, which
     * ngx_http_flags_token_equal() compares a word a step, no tail */
    token->len = value->len - 6;
    token->data = ngx_pcalloc(cf->pool, ngx_align(token->len, 8));
    if (token->data == NULL) {
        return NGX_CONF_ERROR;
    }

    ngx_memcpy(token->data, value->data + 6, token->len);

    /* the longest token in whole words, for
     * ngx_http_flags_token_project() */
    fmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_flags_module);
    fmcf->token_max = ngx_max(fmcf->token_max, ngx_align(token->len, 8));

    if (token->len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "project \"%V\": empty token", &project->name);
        return NGX_CONF_ERROR;
    }

    /* tokens travel in an HTTP header: visible ASCII only */
    for (k = 0; k < token->len; k++) {
        if (token->data[k] <= 0x20 || token->data[k] >= 0x7f) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "project \"%V\": a token may only "
                               "contain visible ASCII characters",
                               &project->name);
            return NGX_CONF_ERROR;
        }
    }

    return NGX_CONF_OK;
}


static char *
ngx_http_flags_project_file(ngx_conf_t *cf, ngx_http_flags_project_t *project,
    ngx_str_t *value)
{
    if (project->file.len) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "project \"%V\": duplicate \"file\"",
                           &project->name);
        return NGX_CONF_ERROR;
    }

    project->file.data = value->data + 5;
    project->file.len = value->len - 5;

    if (project->file.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "project \"%V\": empty \"file\"", &project->name);
        return NGX_CONF_ERROR;
    }

    /* relative to the configuration prefix, like "include" */
    if (ngx_conf_full_name(cf->cycle, &project->file, 1) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


/*
 * A token picks exactly one project: none twice in the project, none of
 * an earlier project's.  Never print the token itself.
 */

static char *
ngx_http_flags_project_unique(ngx_conf_t *cf, ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_project_t *project)
{
    ngx_str_t                 *token, *other;
    ngx_uint_t                 i, j, t;
    ngx_http_flags_project_t  *projects;

    token = project->tokens.elts;
    projects = fmcf->projects.elts;

    for (t = 0; t < project->tokens.nelts; t++) {

        for (j = t + 1; j < project->tokens.nelts; j++) {
            if (token[t].len == token[j].len
                && ngx_strncmp(token[t].data, token[j].data, token[t].len)
                   == 0)
            {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "project \"%V\" lists token %ui twice",
                                   &project->name, t + 1);
                return NGX_CONF_ERROR;
            }
        }

        /* the last project is this one */
        for (i = 0; i + 1 < fmcf->projects.nelts; i++) {
            other = projects[i].tokens.elts;

            for (j = 0; j < projects[i].tokens.nelts; j++) {
                if (token[t].len == other[j].len
                    && ngx_strncmp(token[t].data, other[j].data,
                                   token[t].len) == 0)
                {
                    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                       "token %ui of project \"%V\" is "
                                       "already used by project \"%V\"",
                                       t + 1, &project->name,
                                       &projects[i].name);
                    return NGX_CONF_ERROR;
                }
            }
        }
    }

    return NGX_CONF_OK;
}


/* flags_rollback min_errors=N rate=P% window=T min_sources=N | off; */

static char *
ngx_http_flags_rollback(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_flags_main_conf_t *fmcf = conf;

    ngx_int_t    n;
    ngx_str_t   *value, s;
    ngx_uint_t   i;

    if (fmcf->rollback_set) {
        return "is duplicate";
    }

    fmcf->rollback_set = 1;
    value = cf->args->elts;

    if (cf->args->nelts == 2 && ngx_strcmp(value[1].data, "off") == 0) {
        fmcf->rollback.mode = FL_ROLLBACK_OFF;
        return NGX_CONF_OK;
    }

    for (i = 1; i < cf->args->nelts; i++) {

        if (ngx_strncmp(value[i].data, "min_errors=", 11) == 0) {
            n = ngx_atoi(value[i].data + 11, value[i].len - 11);
            if (n < 1 || n > (ngx_int_t) NGX_MAX_UINT32_VALUE) {
                goto invalid;
            }

            fmcf->rollback.min_errors = (uint32_t) n;
            continue;
        }

        if (ngx_strncmp(value[i].data, "rate=", 5) == 0) {
            if (fl_parse_milli((char *) value[i].data + 5, value[i].len - 5,
                               &fmcf->rollback.rate_milli)
                != FL_MILLI_OK
                || fmcf->rollback.rate_milli == 0)
            {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid rate \"%V\": expected a "
                                   "percentage above 0 and at most 100 with "
                                   "at most 3 decimals", &value[i]);
                return NGX_CONF_ERROR;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "min_sources=", 12) == 0) {
            n = ngx_atoi(value[i].data + 12, value[i].len - 12);
            if (n < 1 || n > (ngx_int_t) FL_MIN_SOURCES_MAX) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid min_sources \"%V\": expected "
                                   "1 to %ui", &value[i],
                                   (ngx_uint_t) FL_MIN_SOURCES_MAX);
                return NGX_CONF_ERROR;
            }

            fmcf->rollback.min_sources = (uint32_t) n;
            continue;
        }

        if (ngx_strncmp(value[i].data, "window=", 7) == 0) {
            s.data = value[i].data + 7;
            s.len = value[i].len - 7;

            n = ngx_parse_time(&s, 1);
            if (n == NGX_ERROR || n < 1 || n > FL_WINDOW_MAX) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid window \"%V\": expected 1s to "
                                   "1h", &value[i]);
                return NGX_CONF_ERROR;
            }

            fmcf->rollback.window = (uint32_t) n;
            continue;
        }

        goto invalid;
    }

    return NGX_CONF_OK;

invalid:

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "invalid parameter \"%V\"", &value[i]);
    return NGX_CONF_ERROR;
}


/*
 * flags_log_level level [routine=level];
 *
 * The level is a rollback's: this host's rule, the fleet's, a ramp's.
 * Routine changes (a ramp's stages, pauses and resumes, a cleared
 * rollback, an override, a new definition) are logged at routine=,
 * notice unless the level is lower (info): an alert on the level pages
 * for rollbacks only.  routine= may not be above the level.
 */

static char *
ngx_http_flags_log_level(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_flags_loc_conf_t *flcf = conf;

    ngx_str_t   *value, name;
    ngx_uint_t   level, routine;

    if (flcf->log_level != NGX_CONF_UNSET_UINT) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (ngx_http_flags_log_level_value(&value[1], &level) != NGX_OK) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid value \"%V\" (expected info, notice, "
                           "warn or error)", &value[1]);
        return NGX_CONF_ERROR;
    }

    /* NGX_LOG_ERR < NGX_LOG_WARN < NGX_LOG_NOTICE < NGX_LOG_INFO */
    routine = ngx_max(level, NGX_LOG_NOTICE);

    if (cf->args->nelts == 3) {
        if (value[2].len <= sizeof("routine=") - 1
            || ngx_strncmp(value[2].data, "routine=", sizeof("routine=") - 1)
               != 0)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid parameter \"%V\" (expected "
                               "routine=level)", &value[2]);
            return NGX_CONF_ERROR;
        }

        name.data = value[2].data + sizeof("routine=") - 1;
        name.len = value[2].len - (sizeof("routine=") - 1);

        if (ngx_http_flags_log_level_value(&name, &routine) != NGX_OK) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid value \"%V\" (expected info, "
                               "notice, warn or error)", &value[2]);
            return NGX_CONF_ERROR;
        }

        if (routine < level) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "\"%V\" is above the rollbacks' level "
                               "\"%V\": routine changes would log above "
                               "rollbacks", &value[2], &value[1]);
            return NGX_CONF_ERROR;
        }
    }

    flcf->log_level = level;
    flcf->log_routine = routine;

    return NGX_CONF_OK;
}


static ngx_int_t
ngx_http_flags_log_level_value(ngx_str_t *name, ngx_uint_t *level)
{
    ngx_conf_enum_t  *e;

    for (e = ngx_http_flags_log_levels; e->name.len; e++) {
        if (e->name.len == name->len
            && ngx_strncasecmp(e->name.data, name->data, name->len) == 0)
        {
            *level = e->value;
            return NGX_OK;
        }
    }

    return NGX_ERROR;
}


/* flags_state_file path | off; */

static char *
ngx_http_flags_state_file(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_flags_main_conf_t *fmcf = conf;

    u_char     *p;
    ngx_str_t  *value;

    if (fmcf->state_file.data) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (ngx_strcmp(value[1].data, "off") == 0) {
        ngx_str_set(&fmcf->state_file, "");
        return NGX_CONF_OK;
    }

    fmcf->state_file = value[1];

    if (ngx_conf_full_name(cf->cycle, &fmcf->state_file, 1) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    /* the directory is checked once the worker user is known (the
     * zone's init); its messages name this place */

    p = ngx_pnalloc(cf->pool, cf->conf_file->file.name.len + NGX_INT_T_LEN
                              + 2);
    if (p == NULL) {
        return NGX_CONF_ERROR;
    }

    fmcf->state_file_conf.data = p;
    fmcf->state_file_conf.len = ngx_sprintf(p, "%V:%ui",
                                            &cf->conf_file->file.name,
                                            cf->conf_file->line)
                                - p;

    return NGX_CONF_OK;
}


