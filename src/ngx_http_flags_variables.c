/*
 * ngx_http_flags_variables.c - flags as nginx variables (docs/variables.md).
 *
 *   flags_context PROJECT user=VALUE [trait_NAME=VALUE ...];
 *   $flag_NAME       "1" or "0": flag NAME of the project, for this request
 *   $flags_enabled   the flags that are on, comma-separated, in file order
 *
 * A request keeps, per project, the caller built from the context's values
 * (once, at the first read), each flag's answer (evaluated at its first
 * read) and the flags it read: a flag read counts one evaluation, and one
 * of its on or off cohort, once per request whatever the number of reads.
 * The log phase (ngx_http_flags_upstream.c) walks the flags read.
 *
 * That state hangs off a cleanup of the main request's pool, never the
 * module's ctx slot: handlers of this module use the slot for their own
 * structures, and nginx clears the slot on an internal redirect, while a
 * pool cleanup lives as long as the request.  So an internal redirect and
 * every subrequest share the main request's answers and read set.
 *
 * The checks of "nginx -t" run at postconfiguration, when every variable
 * the configuration names is known (nginx does not tell a module where a
 * variable was named): an unknown $flag_NAME fails when no project named
 * by a flags_context has it; collisions fail where a flags_context names
 * the project, when the configuration is merged.
 */

#include "ngx_http_flags_module.h"


#define NGX_HTTP_FLAGS_VAR_PREFIX     "flag_"

#define NGX_HTTP_FLAGS_VAR_EVALUATED  0x01
#define NGX_HTTP_FLAGS_VAR_ENABLED    0x02
#define NGX_HTTP_FLAGS_VAR_READ       0x04
#define NGX_HTTP_FLAGS_VAR_NAMED      0x08  /* read by its $flag_NAME */


typedef struct {
    ngx_str_t                   name;
    ngx_http_complex_value_t    value;
} ngx_http_flags_context_trait_t;


struct ngx_http_flags_context_s {
    ngx_str_t                   name;        /* of the project */
    ngx_http_flags_project_t   *project;     /* resolved when merged */
    ngx_http_complex_value_t    user;
    ngx_array_t                 traits;      /* of ..._context_trait_t */
    ngx_str_t                   file;
    ngx_uint_t                  line;
    ngx_uint_t                  checked;     /* project resolved, checked */
};


/* The configuration's: its contexts, and the number of variables whose
 * flag each project's definitions resolve (their flag_of_var). */
struct ngx_http_flags_vars_conf_s {
    ngx_array_t                 contexts;    /* of ngx_http_flags_context_t* */
    ngx_uint_t                  nvars;
};


typedef struct ngx_http_flags_vars_eval_s  ngx_http_flags_vars_eval_t;

struct ngx_http_flags_vars_eval_s {
    ngx_http_flags_vars_eval_t *next;
    ngx_http_flags_project_t   *project;
    ngx_http_flags_defs_t      *defs;        /* pinned by the main request */
    fl_user_t                   user;
    ngx_uint_t                  refused;     /* values over the limits */
    ngx_uint_t                  listed;      /* enabled_list is built */
    ngx_str_t                   enabled_list;
    u_char                     *state;       /* per flag: VAR_* bits */
};


typedef struct {
    ngx_http_flags_vars_eval_t *evals;
    ngx_uint_t                  building;    /* reading a context's values */
} ngx_http_flags_vars_ctx_t;


static ngx_int_t ngx_http_flags_flag_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_http_flags_enabled_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_http_flags_vars_eval(ngx_http_request_t *r,
    ngx_http_flags_vars_eval_t **out);
static ngx_http_flags_vars_eval_t *ngx_http_flags_vars_find(
    ngx_http_flags_vars_ctx_t *ctx, ngx_http_flags_project_t *project);
static ngx_int_t ngx_http_flags_vars_user(ngx_http_request_t *r,
    ngx_http_flags_loc_conf_t *flcf, ngx_http_flags_vars_ctx_t *ctx,
    ngx_http_flags_vars_eval_t *e, fl_trait_t *traits);
static ngx_int_t ngx_http_flags_vars_values(ngx_http_request_t *r,
    ngx_http_flags_context_t *context, ngx_str_t *uid, fl_trait_t *traits);
static ngx_uint_t ngx_http_flags_vars_read(ngx_http_flags_vars_eval_t *e,
    ngx_uint_t i, int64_t now);
static ngx_http_flags_vars_ctx_t *ngx_http_flags_vars_ctx(
    ngx_http_request_t *r, ngx_uint_t create);
static void ngx_http_flags_vars_cleanup(void *data);
static ngx_http_flags_vars_conf_t *ngx_http_flags_vars_conf(ngx_conf_t *cf);
static char *ngx_http_flags_compile(ngx_conf_t *cf, ngx_str_t *value,
    ngx_http_complex_value_t *cv);
static ngx_http_flags_context_t *ngx_http_flags_context_create(
    ngx_conf_t *cf);
static char *ngx_http_flags_context_params(ngx_conf_t *cf,
    ngx_http_flags_context_t *ctx);
static char *ngx_http_flags_context_trait(ngx_conf_t *cf,
    ngx_http_flags_context_t *ctx, ngx_str_t *value);
static ngx_uint_t ngx_http_flags_var_flag(ngx_str_t *name, ngx_str_t *flag);
static ngx_int_t ngx_http_flags_vars_check(ngx_conf_t *cf,
    ngx_http_flags_vars_conf_t *vars, ngx_str_t *name);
static ngx_int_t ngx_http_flags_vars_table(ngx_http_flags_vars_conf_t *vars,
    ngx_http_flags_defs_t *defs, ngx_http_variable_t *v, ngx_pool_t *pool);
static ngx_int_t ngx_http_flags_vars_tables(ngx_conf_t *cf,
    ngx_http_flags_vars_conf_t *vars, ngx_http_flags_main_conf_t *fmcf,
    ngx_http_variable_t *v);


static ngx_str_t  ngx_http_flags_prefix = ngx_string(NGX_HTTP_FLAGS_VAR_PREFIX);
static ngx_str_t  ngx_http_flags_enabled_name = ngx_string("flags_enabled");


/* ------------------------------------------------------ configuration */


/* preconfiguration: the variables exist before any directive names them */

ngx_int_t
ngx_http_flags_add_variables(ngx_conf_t *cf)
{
    ngx_http_variable_t  *var;

    var = ngx_http_add_variable(cf, &ngx_http_flags_prefix,
                                NGX_HTTP_VAR_PREFIX|NGX_HTTP_VAR_NOCACHEABLE);
    if (var == NULL) {
        return NGX_ERROR;
    }

    var->get_handler = ngx_http_flags_flag_variable;

    var = ngx_http_add_variable(cf, &ngx_http_flags_enabled_name,
                                NGX_HTTP_VAR_NOCACHEABLE);
    if (var == NULL) {
        return NGX_ERROR;
    }

    var->get_handler = ngx_http_flags_enabled_variable;

    return NGX_OK;
}


static ngx_http_flags_vars_conf_t *
ngx_http_flags_vars_conf(ngx_conf_t *cf)
{
    ngx_http_flags_main_conf_t  *fmcf;

    fmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_flags_module);

    if (fmcf->vars == NULL) {
        fmcf->vars = ngx_pcalloc(cf->pool, sizeof(ngx_http_flags_vars_conf_t));
        if (fmcf->vars == NULL) {
            return NULL;
        }

        if (ngx_array_init(&fmcf->vars->contexts, cf->pool, 4,
                           sizeof(ngx_http_flags_context_t *))
            != NGX_OK)
        {
            return NULL;
        }
    }

    return fmcf->vars;
}


static char *
ngx_http_flags_compile(ngx_conf_t *cf, ngx_str_t *value,
    ngx_http_complex_value_t *cv)
{
    ngx_http_compile_complex_value_t  ccv;

    ngx_memzero(&ccv, sizeof(ngx_http_compile_complex_value_t));

    ccv.cf = cf;
    ccv.value = value;
    ccv.complex_value = cv;

    if (ngx_http_compile_complex_value(&ccv) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


/* flags_context PROJECT user=VALUE [trait_NAME=VALUE ...]; */

char *
ngx_http_flags_context(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_flags_loc_conf_t *flcf = conf;

    char                        *rv;
    ngx_http_flags_context_t    *ctx, **slot;
    ngx_http_flags_vars_conf_t  *vars;

    if (flcf->context != NGX_CONF_UNSET_PTR) {
        return "is duplicate";
    }

    ctx = ngx_http_flags_context_create(cf);
    if (ctx == NULL) {
        return NGX_CONF_ERROR;
    }

    rv = ngx_http_flags_context_params(cf, ctx);
    if (rv != NGX_CONF_OK) {
        return rv;
    }

    vars = ngx_http_flags_vars_conf(cf);
    if (vars == NULL) {
        return NGX_CONF_ERROR;
    }

    slot = ngx_array_push(&vars->contexts);
    if (slot == NULL) {
        return NGX_CONF_ERROR;
    }

    *slot = ctx;
    flcf->context = ctx;

    return NGX_CONF_OK;
}


/* A context of PROJECT, with the place of the directive for later errors */

static ngx_http_flags_context_t *
ngx_http_flags_context_create(ngx_conf_t *cf)
{
    ngx_str_t                 *value;
    ngx_http_flags_context_t  *ctx;

    value = cf->args->elts;

    ctx = ngx_pcalloc(cf->pool, sizeof(ngx_http_flags_context_t));
    if (ctx == NULL) {
        return NULL;
    }

    if (ngx_array_init(&ctx->traits, cf->pool, 4,
                       sizeof(ngx_http_flags_context_trait_t))
        != NGX_OK)
    {
        return NULL;
    }

    ctx->name = value[1];
    ctx->file = cf->conf_file->file.name;
    ctx->line = cf->conf_file->line;

    return ctx;
}


/* The parameters after PROJECT: exactly one user=, any trait_NAME= */

static char *
ngx_http_flags_context_params(ngx_conf_t *cf, ngx_http_flags_context_t *ctx)
{
    ngx_str_t   *value, v;
    ngx_uint_t   i, user;

    value = cf->args->elts;
    user = 0;

    for (i = 2; i < cf->args->nelts; i++) {

        if (ngx_strncmp(value[i].data, "user=", 5) == 0) {
            if (user) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "duplicate \"user=\" in flags_context");
                return NGX_CONF_ERROR;
            }

            user = 1;
            v.data = value[i].data + 5;
            v.len = value[i].len - 5;

            if (ngx_http_flags_compile(cf, &v, &ctx->user) != NGX_CONF_OK) {
                return NGX_CONF_ERROR;
            }

            continue;
        }

        if (ngx_http_flags_context_trait(cf, ctx, &value[i]) != NGX_CONF_OK) {
            return NGX_CONF_ERROR;
        }
    }

    if (!user) {
        return "needs \"user=\"";
    }

    return NGX_CONF_OK;
}


/* trait_NAME=VALUE: a valid NAME, not yet given, and VALUE compiled */

static char *
ngx_http_flags_context_trait(ngx_conf_t *cf, ngx_http_flags_context_t *ctx,
    ngx_str_t *value)
{
    u_char                          *eq;
    ngx_str_t                        v;
    ngx_uint_t                       j;
    ngx_http_flags_context_trait_t  *t;

    eq = ngx_strlchr(value->data, value->data + value->len, '=');

    if (value->len < sizeof("trait_") - 1
        || ngx_strncmp(value->data, "trait_", sizeof("trait_") - 1) != 0
        || eq == NULL)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid parameter \"%V\" in flags_context, "
                           "expected user=VALUE or trait_NAME=VALUE",
                           value);
        return NGX_CONF_ERROR;
    }

    v.data = value->data + sizeof("trait_") - 1;
    v.len = eq - v.data;

    if (v.len == 0 || v.len > FL_MAX_TRAIT_NAME_LEN) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid trait name in \"%V\": 1 to %d bytes "
                           "after \"trait_\"", value,
                           (int) FL_MAX_TRAIT_NAME_LEN);
        return NGX_CONF_ERROR;
    }

    t = ctx->traits.elts;

    for (j = 0; j < ctx->traits.nelts; j++) {
        if (t[j].name.len == v.len
            && ngx_strncmp(t[j].name.data, v.data, v.len) == 0)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "duplicate trait \"%V\" in flags_context",
                               &v);
            return NGX_CONF_ERROR;
        }
    }

    t = ngx_array_push(&ctx->traits);
    if (t == NULL) {
        return NGX_CONF_ERROR;
    }

    t->name = v;
    v.data = eq + 1;
    v.len = value->data + value->len - v.data;

    return ngx_http_flags_compile(cf, &v, &t->value);
}


/*
 * The project of a context, found once the http block is read (flags_project
 * may come after flags_context), and its variable names checked: two flags
 * whose names map to one variable name fail here.
 */

static ngx_int_t
ngx_http_flags_context_resolve(ngx_conf_t *cf, ngx_http_flags_context_t *ctx)
{
    size_t                       a, b;
    fl_project_t                *core;
    fl_flag_info_t               fa, fb;
    ngx_http_flags_main_conf_t  *fmcf;

    if (ctx == NULL || ctx == NGX_CONF_UNSET_PTR || ctx->checked) {
        return NGX_OK;
    }

    ctx->checked = 1;

    fmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_flags_module);

    ctx->project = ngx_http_flags_find_project(fmcf, &ctx->name);

    if (ctx->project == NULL) {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "flags_context names unknown project \"%V\" "
                      "(no flags_project of that name) in %V:%ui",
                      &ctx->name, &ctx->file, ctx->line);
        return NGX_ERROR;
    }

    core = ngx_http_flags_defs(ctx->project)->core;

    if (fl_project_var_collision(core, &a, &b)
        && fl_project_flag_info(core, a, &fa) == 0
        && fl_project_flag_info(core, b, &fb) == 0)
    {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "flags \"%s\" and \"%s\" of project \"%V\" are both "
                      "read as one variable ($flag_ lowercases and writes "
                      "'-', '.' and ':' as '_') in %V:%ui",
                      fa.name, fb.name, &ctx->name, &ctx->file, ctx->line);
        return NGX_ERROR;
    }

    return NGX_OK;
}


char *
ngx_http_flags_merge_context(ngx_conf_t *cf, ngx_http_flags_loc_conf_t *prev,
    ngx_http_flags_loc_conf_t *conf)
{
    ngx_http_flags_context_t  *ctx;

    if (ngx_http_flags_context_resolve(cf, prev->context) != NGX_OK
        || ngx_http_flags_context_resolve(cf, conf->context) != NGX_OK)
    {
        return NGX_CONF_ERROR;
    }

    ngx_conf_merge_ptr_value(conf->context, prev->context, NULL);

    ctx = conf->context;

    if (ctx && ctx->traits.nelts > conf->max_traits) {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "flags_context has %ui traits, more than "
                      "flags_max_traits %ui, in %V:%ui",
                      ctx->traits.nelts, conf->max_traits, &ctx->file,
                      ctx->line);
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


/*
 * postconfiguration: every variable the configuration names is known.  A
 * $flag_NAME that no project named by a flags_context has fails; with no
 * flags_context at all nothing can be known, and a warning says the
 * variable is always empty.  Then, per project, the flag of each named
 * $flag_ variable, so a read looks it up by index.
 */

ngx_int_t
ngx_http_flags_variables_init(ngx_conf_t *cf)
{
    ngx_uint_t                   i;
    ngx_http_variable_t         *v;
    ngx_http_flags_vars_conf_t  *vars;
    ngx_http_flags_main_conf_t  *fmcf;
    ngx_http_core_main_conf_t   *cmcf;

    cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);
    fmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_flags_module);

    vars = ngx_http_flags_vars_conf(cf);
    if (vars == NULL) {
        return NGX_ERROR;
    }

    v = cmcf->variables.elts;

    for (i = 0; i < cmcf->variables.nelts; i++) {
        if (ngx_http_flags_vars_check(cf, vars, &v[i].name) != NGX_OK) {
            return NGX_ERROR;
        }
    }

    vars->nvars = cmcf->variables.nelts;

    if (fmcf->projects.nelts == 0 || vars->nvars == 0) {
        return NGX_OK;
    }

    return ngx_http_flags_vars_tables(cf, vars, fmcf, v);
}


/* Whether a variable's name is $flag_NAME: then *flag is NAME. */

static ngx_uint_t
ngx_http_flags_var_flag(ngx_str_t *name, ngx_str_t *flag)
{
    if (name->len <= ngx_http_flags_prefix.len
        || ngx_strncmp(name->data, NGX_HTTP_FLAGS_VAR_PREFIX,
                       ngx_http_flags_prefix.len) != 0)
    {
        return 0;
    }

    flag->data = name->data + ngx_http_flags_prefix.len;
    flag->len = name->len - ngx_http_flags_prefix.len;

    return 1;
}


/* A $flag_NAME read must be a flag of a project some flags_context names */

static ngx_int_t
ngx_http_flags_vars_check(ngx_conf_t *cf, ngx_http_flags_vars_conf_t *vars,
    ngx_str_t *name)
{
    ngx_str_t                   flag;
    ngx_uint_t                  k, found;
    ngx_http_flags_project_t   *runtime;
    ngx_http_flags_context_t  **ctx;

    if (!ngx_http_flags_var_flag(name, &flag)) {
        return NGX_OK;
    }

    runtime = NULL;

    if (vars->contexts.nelts == 0) {
        ngx_log_error(NGX_LOG_WARN, cf->log, 0,
                      "variable \"$%V\" is read but no flags_context "
                      "names a project: it is always empty", name);
        return NGX_OK;
    }

    ctx = vars->contexts.elts;
    found = 0;

    for (k = 0; k < vars->contexts.nelts && !found; k++) {
        if (ctx[k]->project && ctx[k]->project->runtime) {
            /* a version may add it: until one does, it reads "0" */
            runtime = ctx[k]->project;
        }

        found = ctx[k]->project
                && fl_project_find_var(
                       ngx_http_flags_defs(ctx[k]->project)->core,
                                       (const char *) flag.data, flag.len)
                   >= 0;
    }

    if (!found && runtime) {
        ngx_log_error(NGX_LOG_WARN, cf->log, 0,
                      "flag variable \"$%V\" names no flag of project "
                      "\"%V\" now: it reads \"0\" until a version of its "
                      "definitions adds the flag", name, &runtime->name);
        return NGX_OK;
    }

    if (!found) {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "unknown flag variable \"$%V\": project \"%V\" "
                      "of flags_context in %V:%ui has no such flag%s",
                      name, &ctx[0]->name, &ctx[0]->file, ctx[0]->line,
                      vars->contexts.nelts > 1
                      ? ", nor has any other flags_context's project"
                      : "");
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* Per project, per variable index: the flag a $flag_ variable reads, or -1 */

static ngx_int_t
ngx_http_flags_vars_tables(ngx_conf_t *cf, ngx_http_flags_vars_conf_t *vars,
    ngx_http_flags_main_conf_t *fmcf, ngx_http_variable_t *v)
{
    ngx_uint_t                 p;
    ngx_http_flags_defs_t     *defs;
    ngx_http_flags_project_t  *project;

    project = fmcf->projects.elts;

    for (p = 0; p < fmcf->projects.nelts; p++) {
        defs = ngx_http_flags_defs(&project[p]);

        if (ngx_http_flags_vars_table(vars, defs, v, cf->pool) != NGX_OK) {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


static ngx_int_t
ngx_http_flags_vars_table(ngx_http_flags_vars_conf_t *vars,
    ngx_http_flags_defs_t *defs, ngx_http_variable_t *v, ngx_pool_t *pool)
{
    ngx_str_t    flag;
    ngx_int_t   *table;
    ngx_uint_t   i;

    table = ngx_palloc(pool, vars->nvars * sizeof(ngx_int_t));
    if (table == NULL) {
        return NGX_ERROR;
    }

    for (i = 0; i < vars->nvars; i++) {
        table[i] = -1;

        if (ngx_http_flags_var_flag(&v[i].name, &flag)) {
            table[i] = fl_project_find_var(defs->core,
                                           (const char *) flag.data,
                                           flag.len);
        }
    }

    defs->flag_of_var = table;

    return NGX_OK;
}


/* A runtime version's table, in its pool (ngx_http_flags_defs_make()). */

ngx_int_t
ngx_http_flags_variables_table(ngx_http_flags_main_conf_t *fmcf,
    ngx_http_flags_defs_t *defs, ngx_pool_t *pool)
{
    ngx_http_core_main_conf_t  *cmcf;

    if (fmcf->vars == NULL || fmcf->vars->nvars == 0) {
        return NGX_OK;
    }

    cmcf = ngx_http_cycle_get_module_main_conf(ngx_cycle,
                                               ngx_http_core_module);

    return ngx_http_flags_vars_table(fmcf->vars, defs,
                                     cmcf->variables.elts, pool);
}


/* ------------------------------------------------------- the request */


static void
ngx_http_flags_vars_cleanup(void *data)
{
    ngx_http_flags_vars_ctx_t  *ctx = data;

    /* the pool goes: nothing may find the answers any more */
    ctx->evals = NULL;
}


static ngx_http_flags_vars_ctx_t *
ngx_http_flags_vars_ctx(ngx_http_request_t *r, ngx_uint_t create)
{
    ngx_pool_cleanup_t         *cln;
    ngx_http_flags_vars_ctx_t  *ctx;

    for (cln = r->main->pool->cleanup; cln; cln = cln->next) {
        if (cln->handler == ngx_http_flags_vars_cleanup) {
            return cln->data;
        }
    }

    if (!create) {
        return NULL;
    }

    cln = ngx_pool_cleanup_add(r->main->pool,
                               sizeof(ngx_http_flags_vars_ctx_t));
    if (cln == NULL) {
        return NULL;
    }

    ctx = cln->data;
    ctx->evals = NULL;
    ctx->building = 0;
    cln->handler = ngx_http_flags_vars_cleanup;

    return ctx;
}


/*
 * The answers of the project of this request's flags_context: NGX_OK with
 * *out (NULL: no flags_context here, or read while the context's own
 * values are computed), NGX_ERROR when memory ran out.
 */

static ngx_int_t
ngx_http_flags_vars_eval(ngx_http_request_t *r,
    ngx_http_flags_vars_eval_t **out)
{
    fl_trait_t                  *traits;
    ngx_http_flags_context_t    *context;
    ngx_http_flags_vars_ctx_t   *ctx;
    ngx_http_flags_vars_eval_t  *e;
    ngx_http_flags_loc_conf_t   *flcf;

    *out = NULL;

    flcf = ngx_http_get_module_loc_conf(r, ngx_http_flags_module);
    context = flcf->context;

    if (context == NULL || context->project == NULL) {
        return NGX_OK;
    }

    ctx = ngx_http_flags_vars_ctx(r, 1);
    if (ctx == NULL) {
        return NGX_ERROR;
    }

    *out = ngx_http_flags_vars_find(ctx, context->project);
    if (*out) {
        return NGX_OK;
    }

    if (ctx->building) {
        /* user= or a trait reads a $flag_ variable: no answer */
        return NGX_OK;
    }

    e = ngx_pcalloc(r->main->pool, sizeof(ngx_http_flags_vars_eval_t));
    if (e == NULL) {
        return NGX_ERROR;
    }

    e->project = context->project;
    /* the definitions of every read of this request, whatever changes
     * until its log phase */
    e->defs = ngx_http_flags_defs_pin(r->main, context->project);
    if (e->defs == NULL) {
        return NGX_ERROR;
    }

    e->state = ngx_pcalloc(r->main->pool, e->defs->nflags + 1);
    traits = ngx_palloc(r->main->pool,
                        (context->traits.nelts + 1) * sizeof(fl_trait_t));
    if (e->state == NULL || traits == NULL) {
        return NGX_ERROR;
    }

    if (ngx_http_flags_vars_user(r, flcf, ctx, e, traits) != NGX_OK) {
        return NGX_ERROR;
    }

    /* two contexts naming one project may both have started: the first
     * to finish wins, so one request has one answer a flag */
    *out = ngx_http_flags_vars_find(ctx, e->project);
    if (*out) {
        return NGX_OK;
    }

    e->next = ctx->evals;
    ctx->evals = e;
    *out = e;

    return NGX_OK;
}


static ngx_http_flags_vars_eval_t *
ngx_http_flags_vars_find(ngx_http_flags_vars_ctx_t *ctx,
    ngx_http_flags_project_t *project)
{
    ngx_http_flags_vars_eval_t  *e;

    for (e = ctx->evals; e; e = e->next) {
        if (e->project == project) {
            return e;
        }
    }

    return NULL;
}


/*
 * The caller of e, built from the values of the context (traits: room for
 * them): NGX_OK, with e->refused set when the values are over the limits.
 */

static ngx_int_t
ngx_http_flags_vars_user(ngx_http_request_t *r,
    ngx_http_flags_loc_conf_t *flcf, ngx_http_flags_vars_ctx_t *ctx,
    ngx_http_flags_vars_eval_t *e, fl_trait_t *traits)
{
    char                       err[256];
    ngx_str_t                  uid;
    fl_alloc_t                 alloc;
    fl_status_t                st;
    ngx_http_flags_context_t  *context;

    context = flcf->context;

    ctx->building = 1;

    if (ngx_http_flags_vars_values(r, context, &uid, traits) != NGX_OK) {
        ctx->building = 0;
        return NGX_ERROR;
    }

    ctx->building = 0;

    alloc.alloc = ngx_http_flags_pool_alloc;
    alloc.ctx = r->main->pool;

    st = fl_user_from_values((const char *) uid.data, uid.len, traits,
                             context->traits.nelts, flcf->max_traits,
                             &alloc, &e->user, err, sizeof(err));

    if (st == FL_ERR_QUERY) {
        /* every flag reads 0 and nothing is counted, as GET /flags
         * answers 400 to such a caller */
        e->refused = 1;
        ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                      "flags: the values of flags_context \"%V\" are "
                      "refused (%s): every $flag_ reads 0",
                      &context->name, err);

    } else if (st != FL_OK) {
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* The values of user= and of each trait, for this request. */

static ngx_int_t
ngx_http_flags_vars_values(ngx_http_request_t *r,
    ngx_http_flags_context_t *context, ngx_str_t *uid, fl_trait_t *traits)
{
    ngx_str_t                        val;
    ngx_uint_t                       i;
    ngx_http_flags_context_trait_t  *t;

    if (ngx_http_complex_value(r, &context->user, uid) != NGX_OK) {
        return NGX_ERROR;
    }

    t = context->traits.elts;

    for (i = 0; i < context->traits.nelts; i++) {
        if (ngx_http_complex_value(r, &t[i].value, &val) != NGX_OK) {
            return NGX_ERROR;
        }

        traits[i].name = (const char *) t[i].name.data;
        traits[i].name_len = t[i].name.len;
        traits[i].value = (const char *) val.data;
        traits[i].value_len = val.len;
    }

    return NGX_OK;
}


/* Flag i's answer; its first read counts the evaluation (and so its
 * cohort).  now < 0: not read yet. */

static ngx_uint_t
ngx_http_flags_vars_read(ngx_http_flags_vars_eval_t *e, ngx_uint_t i,
    int64_t now)
{
    u_char       st;
    fl_detail_t  d;

    st = e->state[i];

    if (e->refused) {
        return 0;
    }

    if (!(st & NGX_HTTP_FLAGS_VAR_EVALUATED)) {
        if (ngx_http_flags_evaluate_flag(e->defs, i, &e->user, &d,
                                         NGX_HTTP_FLAGS_NOT_COUNTED)
            == NGX_OK
            && d.enabled)
        {
            st |= NGX_HTTP_FLAGS_VAR_ENABLED;
        }

        st |= NGX_HTTP_FLAGS_VAR_EVALUATED;
    }

    if (!(st & NGX_HTTP_FLAGS_VAR_READ)) {
        st |= NGX_HTTP_FLAGS_VAR_READ;

        ngx_http_flags_count_evaluation(e->defs, i,
                                        st & NGX_HTTP_FLAGS_VAR_ENABLED, now);
    }

    e->state[i] = st;

    return (st & NGX_HTTP_FLAGS_VAR_ENABLED) != 0;
}


static ngx_int_t
ngx_http_flags_flag_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    ngx_str_t *name = (ngx_str_t *) data;

    ngx_int_t                    idx;
    ngx_uint_t                   k;
    ngx_http_variable_t         *vv;
    ngx_http_core_main_conf_t   *cmcf;
    ngx_http_flags_main_conf_t  *fmcf;
    ngx_http_flags_vars_eval_t  *e;

    if (ngx_http_flags_vars_eval(r, &e) != NGX_OK) {
        return NGX_ERROR;
    }

    if (e == NULL) {
        v->not_found = 1;
        return NGX_OK;
    }

    idx = -1;

    /* a variable the configuration names: its flag was found at
     * postconfiguration; a name seen only now (SSI, perl) is looked up */

    cmcf = ngx_http_get_module_main_conf(r, ngx_http_core_module);
    fmcf = ngx_http_get_module_main_conf(r, ngx_http_flags_module);
    vv = cmcf->variables.elts;

    if ((u_char *) name >= (u_char *) vv
        && (u_char *) name < (u_char *) (vv + cmcf->variables.nelts)
        && fmcf->vars && e->defs->flag_of_var)
    {
        k = (ngx_http_variable_t *) ((u_char *) name
                                     - offsetof(ngx_http_variable_t, name))
            - vv;
        if (k < fmcf->vars->nvars) {
            idx = e->defs->flag_of_var[k];
        }

    } else if (name->len > ngx_http_flags_prefix.len) {
        idx = fl_project_find_var(e->defs->core,
                                  (const char *) name->data
                                  + ngx_http_flags_prefix.len,
                                  name->len - ngx_http_flags_prefix.len);
    }

    if (idx < 0 && e->project->runtime) {
        /* not a flag of this version: off, as an unknown flag is */
        v->data = (u_char *) "0";
        v->len = 1;
        v->valid = 1;
        v->no_cacheable = 0;
        v->not_found = 0;
        return NGX_OK;
    }

    if (idx < 0) {
        v->not_found = 1;
        return NGX_OK;
    }

    v->data = ngx_http_flags_vars_read(e, idx, -1) ? (u_char *) "1"
                                                   : (u_char *) "0";
    e->state[idx] |= NGX_HTTP_FLAGS_VAR_NAMED;
    v->len = 1;
    v->valid = 1;
    v->no_cacheable = 0;
    v->not_found = 0;

    return NGX_OK;
}


/* $flags_enabled reads every flag of the project: each counts once. */

static ngx_int_t
ngx_http_flags_enabled_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    u_char                      *p;
    size_t                       len;
    int64_t                      now;
    ngx_uint_t                   i, n;
    fl_flag_info_t               info;
    ngx_http_flags_vars_eval_t  *e;

    if (ngx_http_flags_vars_eval(r, &e) != NGX_OK) {
        return NGX_ERROR;
    }

    if (e == NULL) {
        v->not_found = 1;
        return NGX_OK;
    }

    if (!e->listed) {
        n = e->defs->nflags;
        now = ngx_http_flags_now_sec();
        len = 0;

        for (i = 0; i < n; i++) {
            if (ngx_http_flags_vars_read(e, i, now)
                && fl_project_flag_info(e->defs->core, i, &info) == 0)
            {
                len += info.name_len + 1;
            }
        }

        p = ngx_pnalloc(r->main->pool, len + 1);
        if (p == NULL) {
            return NGX_ERROR;
        }

        e->enabled_list.data = p;

        for (i = 0; i < n; i++) {
            if ((e->state[i] & NGX_HTTP_FLAGS_VAR_ENABLED)
                && fl_project_flag_info(e->defs->core, i, &info) == 0)
            {
                if (p != e->enabled_list.data) {
                    *p++ = ',';
                }

                p = ngx_cpymem(p, info.name, info.name_len);
            }
        }

        e->enabled_list.len = p - e->enabled_list.data;
        e->listed = 1;
    }

    v->data = e->enabled_list.data;
    v->len = e->enabled_list.len;
    v->valid = 1;
    v->no_cacheable = 0;
    v->not_found = 0;

    return NGX_OK;
}


/*
 * Every flag this request (its internal redirects and subrequests
 * included) read through a variable, with its answer: the log phase's
 * walk (ngx_http_flags_upstream.c).  Refused values read nothing.
 */

void
ngx_http_flags_variables_each_read(ngx_http_request_t *r,
    ngx_http_flags_read_pt fn, void *data)
{
    ngx_uint_t                   i;
    ngx_http_flags_vars_ctx_t   *ctx;
    ngx_http_flags_vars_eval_t  *e;

    ctx = ngx_http_flags_vars_ctx(r, 0);
    if (ctx == NULL) {
        return;
    }

    for (e = ctx->evals; e; e = e->next) {
        for (i = 0; i < e->defs->nflags; i++) {
            if (e->state[i] & NGX_HTTP_FLAGS_VAR_READ) {
                fn(r, e->defs, &e->defs->flags[i],
                   (e->state[i] & NGX_HTTP_FLAGS_VAR_ENABLED) != 0,
                   (e->state[i] & NGX_HTTP_FLAGS_VAR_NAMED) != 0,
                   &e->user, data);
            }
        }
    }
}
