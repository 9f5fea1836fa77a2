/*
 * ngx_http_flags_module - feature flags and error-driven rollback in nginx.
 *
 * The C glue shared by the ngx_http_flags_*.c files.  Decisions (parsing,
 * evaluation, counting, the rollback rule, JSON) live in the C++ core behind
 * src/core/flags_core.h; these files translate between nginx and the core.
 */

#ifndef _NGX_HTTP_FLAGS_MODULE_H_INCLUDED_
#define _NGX_HTTP_FLAGS_MODULE_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "flags_core.h"


#define NGX_HTTP_FLAGS_ZONE_NAME      "flags"
#define NGX_HTTP_FLAGS_ZONE_SIZE      (8 * 1024 * 1024)
/* in the directory of nginx's compiled-in access log */
#define NGX_HTTP_FLAGS_ERROR_LOG      "flags-errors.log"
/* reports hold personal data: not readable by everyone */
#define NGX_HTTP_FLAGS_ERROR_LOG_ACCESS  0640


/* A flag's node in the shared zone: found by "project\0flag". */
typedef struct {
    ngx_str_node_t              sn;          /* key: crc32 + name */
    ngx_queue_t                 queue;       /* every node, live or retired */
    ngx_uint_t                  generation;  /* last cycle that used it */
    ngx_uint_t                  retired;     /* out of the tree, to be freed */
    u_char                     *state;       /* fl_state block, own slab */
    size_t                      key_len;
    u_char                      key[1];
} ngx_http_flags_node_t;


/* The zone's header, parked in shpool->data. */
typedef struct {
    ngx_rbtree_t                rbtree;
    ngx_rbtree_node_t           sentinel;
    ngx_queue_t                 queue;
    ngx_uint_t                  generation;
} ngx_http_flags_shctx_t;


typedef struct {
    ngx_str_t                   name;
    fl_rollback_policy_t        policy;      /* resolved: mode ON or OFF */
    uint32_t                    rollout_milli;
    u_char                     *state;       /* NULL when the zone was full */
} ngx_http_flags_flag_t;


typedef struct {
    ngx_str_t                   name;
    ngx_array_t                 tokens;      /* of ngx_str_t */
    ngx_str_t                   file;        /* absolute path */
    fl_project_t               *core;
    ngx_uint_t                  nflags;
    ngx_http_flags_flag_t      *flags;
} ngx_http_flags_project_t;


typedef struct {
    ngx_shm_zone_t             *shm_zone;
    ngx_slab_pool_t            *shpool;
    ngx_http_flags_shctx_t     *sh;
    ngx_str_t                   zone_name;
    ssize_t                     zone_size;

    ngx_array_t                 projects;    /* of ngx_http_flags_project_t */
    fl_rollback_policy_t        rollback;    /* the http-level policy */

    ngx_open_file_t            *error_log;   /* NULL when "off" */
    ngx_str_t                   error_log_name;
    ngx_str_t                   project_file; /* of the first flags_project */
    ngx_uint_t                  project_line;
    ngx_str_t                   state_file;  /* empty when off */
    ngx_uint_t                  rollback_set;
} ngx_http_flags_main_conf_t;


typedef struct {
    ngx_uint_t                  max_traits;
    size_t                      max_report_size;

    /* the content handler one of our directives set, and where */
    ngx_http_handler_pt         handler;
    ngx_str_t                  *handler_directive;
    ngx_str_t                   handler_file;
    ngx_uint_t                  handler_line;
} ngx_http_flags_loc_conf_t;


extern ngx_module_t  ngx_http_flags_module;


/* ngx_http_flags_shm.c */
ngx_int_t ngx_http_flags_init_zone(ngx_shm_zone_t *shm_zone, void *data);
void ngx_http_flags_save_state(ngx_http_flags_main_conf_t *fmcf,
    ngx_log_t *log);
int64_t ngx_http_flags_now_sec(void);
uint64_t ngx_http_flags_now_ms(void);

/* ngx_http_flags_response.c */
ngx_int_t ngx_http_flags_authenticate(ngx_http_request_t *r,
    ngx_http_flags_project_t **project);
ngx_int_t ngx_http_flags_send_error(ngx_http_request_t *r, ngx_uint_t status,
    const char *code, const char *message);
ngx_int_t ngx_http_flags_method_not_allowed(ngx_http_request_t *r,
    const char *allow);
ngx_int_t ngx_http_flags_send_json(ngx_http_request_t *r, ngx_uint_t status,
    u_char *body, size_t len);
ngx_int_t ngx_http_flags_send_empty(ngx_http_request_t *r, ngx_uint_t status);
ngx_http_flags_project_t *ngx_http_flags_find_project(
    ngx_http_flags_main_conf_t *fmcf, ngx_str_t *name);
void *ngx_http_flags_pool_alloc(void *ctx, size_t size);
off_t ngx_http_flags_body_size(ngx_http_request_t *r);
ngx_int_t ngx_http_flags_body_pieces(ngx_http_request_t *r,
    ngx_int_t (*fn)(void *ctx, u_char *p, size_t len), void *ctx);

/* handlers: ngx_http_flags_evaluate.c, _ingest.c, _admin.c */
ngx_int_t ngx_http_flags_evaluate_handler(ngx_http_request_t *r);
ngx_int_t ngx_http_flags_ingest_handler(ngx_http_request_t *r);
ngx_int_t ngx_http_flags_status_handler(ngx_http_request_t *r);
ngx_int_t ngx_http_flags_admin_handler(ngx_http_request_t *r);


#endif /* _NGX_HTTP_FLAGS_MODULE_H_INCLUDED_ */
