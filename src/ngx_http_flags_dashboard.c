/*
 * ngx_http_flags_dashboard.c - flags_dashboard [admin=PATH]: the
 * operator's page (docs/dashboard.md).  Below its prefix location: the
 * page and its two files (built into the core), config.json, status.json
 * (the flags_status document) and events (an event stream of the zone's
 * ring of changes, through the push registry).  Every answer of the
 * location carries a strict Content-Security-Policy and three more
 * headers: a header filter adds them, so nginx's own answers there (401
 * of auth_basic, 403 of deny, 413, 500) carry them as the page's do.  It
 * takes no token: protect it with allow/deny, auth_basic or mTLS, as
 * flags_status.
 */

#include "ngx_http_flags_module.h"


static ngx_int_t ngx_http_flags_dashboard_header_filter(
    ngx_http_request_t *r);
static ngx_int_t ngx_http_flags_dashboard_headers(ngx_http_request_t *r);
static ngx_int_t ngx_http_flags_dashboard_asset(ngx_http_request_t *r,
    fl_asset_t *a);
static ngx_int_t ngx_http_flags_dashboard_config(ngx_http_request_t *r);
static ngx_int_t ngx_http_flags_dashboard_status(ngx_http_request_t *r);
static ngx_int_t ngx_http_flags_dashboard_events(ngx_http_request_t *r);


static ngx_http_output_header_filter_pt
    ngx_http_flags_dashboard_next_header_filter;


#define NGX_HTTP_FLAGS_DASHBOARD_CSP                                         \
    "default-src 'none'; script-src 'self'; style-src 'self'; "              \
    "connect-src 'self'; img-src 'self'; base-uri 'none'; "                  \
    "form-action 'none'; frame-ancestors 'none'"


/* flags_dashboard [admin=PATH]; */

char *
ngx_http_flags_dashboard(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_flags_loc_conf_t *flcf = conf;

    char       *rv;
    ngx_str_t  *value;

    rv = ngx_http_flags_set_handler(cf, cmd, conf);
    if (rv != NGX_CONF_OK) {
        return rv;
    }

    value = cf->args->elts;

    if (cf->args->nelts == 1) {
        return NGX_CONF_OK;
    }

    if (value[1].len <= sizeof("admin=") - 1
        || ngx_strncmp(value[1].data, "admin=", sizeof("admin=") - 1) != 0)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid parameter \"%V\" of \"flags_dashboard\": "
                           "expected admin=PATH", &value[1]);
        return NGX_CONF_ERROR;
    }

    flcf->dashboard_admin.data = value[1].data + sizeof("admin=") - 1;
    flcf->dashboard_admin.len = value[1].len - (sizeof("admin=") - 1);

    if (flcf->dashboard_admin.data[0] != '/'
        || flcf->dashboard_admin.data[flcf->dashboard_admin.len - 1] != '/')
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"flags_dashboard\" admin=%V: the path of a "
                           "flags_admin location, starting and ending with "
                           "\"/\" (such as admin=/flags-admin/)",
                           &flcf->dashboard_admin);
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


ngx_int_t
ngx_http_flags_dashboard_handler(ngx_http_request_t *r)
{
    ngx_int_t   rc;
    ngx_str_t   route;
    fl_asset_t  a;

    if (!(r->method & (NGX_HTTP_GET|NGX_HTTP_HEAD))) {
        return ngx_http_flags_method_not_allowed(r, "GET, HEAD");
    }

    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    if (ngx_http_flags_route(r, &route) != NGX_OK) {
        route.len = 0;
        route.data = NULL;

        if (r->uri.len == 0 || r->uri.data[r->uri.len - 1] != '/') {
            /* an exact location: the page itself at its own name */
            route.data = (u_char *) "";
        }
    }

    if (route.data != NULL
        && fl_dashboard_asset((const char *) route.data, route.len, &a) == 0)
    {
        return ngx_http_flags_dashboard_asset(r, &a);
    }

    if (route.len == sizeof("config.json") - 1
        && ngx_strncmp(route.data, "config.json", route.len) == 0)
    {
        return ngx_http_flags_dashboard_config(r);
    }

    if (route.len == sizeof("status.json") - 1
        && ngx_strncmp(route.data, "status.json", route.len) == 0)
    {
        /* once every worker's counts of earlier answers are in the zone */
        return ngx_http_flags_counts_settled(r,
                                             ngx_http_flags_dashboard_status);
    }

    if (route.len == sizeof("events") - 1
        && ngx_strncmp(route.data, "events", route.len) == 0)
    {
        return ngx_http_flags_dashboard_events(r);
    }

    return ngx_http_flags_send_error(r, NGX_HTTP_NOT_FOUND, "not_found",
                                     "the operator's page has index.html, "
                                     "app.js, app.css, config.json, "
                                     "status.json and events");
}


/* postconfiguration: the filter is the first of the chain (the module
 * is loaded after nginx's own), so every answer passes it. */

ngx_int_t
ngx_http_flags_dashboard_init(ngx_conf_t *cf)
{
    ngx_http_flags_dashboard_next_header_filter = ngx_http_top_header_filter;
    ngx_http_top_header_filter = ngx_http_flags_dashboard_header_filter;

    return NGX_OK;
}


/*
 * An answer of a flags_dashboard location, whoever made it: the page's
 * handler, nginx for a 401, 403 or 413 before the handler ran, or for a
 * code the handler returned (500).  The content handler is the location's
 * (nginx sets it when it finds the location, before the access phase);
 * an error_page that redirects elsewhere answers for another location.
 */

static ngx_int_t
ngx_http_flags_dashboard_header_filter(ngx_http_request_t *r)
{
    if (r->content_handler == ngx_http_flags_dashboard_handler
        && r == r->main
        && ngx_http_flags_dashboard_headers(r) != NGX_OK)
    {
        return NGX_ERROR;
    }

    return ngx_http_flags_dashboard_next_header_filter(r);
}


/* What every answer of the page carries (docs/dashboard.md). */

static ngx_int_t
ngx_http_flags_dashboard_headers(ngx_http_request_t *r)
{
    if (ngx_http_flags_add_header(r, "Content-Security-Policy",
                (u_char *) NGX_HTTP_FLAGS_DASHBOARD_CSP,
                sizeof(NGX_HTTP_FLAGS_DASHBOARD_CSP) - 1) == NULL
        || ngx_http_flags_add_header(r, "X-Content-Type-Options",
                                      (u_char *) "nosniff", 7) == NULL
        || ngx_http_flags_add_header(r, "Referrer-Policy",
                                      (u_char *) "no-referrer", 11) == NULL
        || ngx_http_flags_add_header(r, "X-Frame-Options",
                                      (u_char *) "DENY", 4) == NULL)
    {
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* A file of the page: its bytes as built in, a strong tag, 304 for a
 * matching If-None-Match. */

static ngx_int_t
ngx_http_flags_dashboard_asset(ngx_http_request_t *r, fl_asset_t *a)
{
    u_char     text[FL_ETAG_LEN];
    ngx_int_t  rc;

    (void) fl_etag_format(a->etag, (char *) text);

    if (ngx_http_flags_etag_text(r, text) != NGX_OK
        || ngx_http_flags_add_header(r, "Cache-Control",
                                      (u_char *) "no-cache", 8) == NULL)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (ngx_http_flags_none_match(r, text, a->etag)) {
        return ngx_http_flags_send_not_modified(r);
    }

    r->headers_out.content_type.data = (u_char *) a->type;
    r->headers_out.content_type.len = ngx_strlen(a->type);
    r->headers_out.content_type_len = r->headers_out.content_type.len;

    rc = ngx_http_flags_send_body(r, NGX_HTTP_OK, (u_char *) a->data, a->len);

    return rc;
}


static ngx_int_t
ngx_http_flags_dashboard_config(ngx_http_request_t *r)
{
    u_char                     *body;
    size_t                      len;
    ngx_http_flags_loc_conf_t  *flcf;

    flcf = ngx_http_get_module_loc_conf(r, ngx_http_flags_module);

    body = ngx_pnalloc(r->pool,
                       fl_dashboard_config_json_bound(
                           flcf->dashboard_admin.len));
    if (body == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    len = fl_dashboard_config_json(flcf->dashboard_admin.len
                                   ? (const char *) flcf->dashboard_admin.data
                                   : NULL,
                                   flcf->dashboard_admin.len, (char *) body);

    if (ngx_http_flags_add_header(r, "Cache-Control",
                                   (u_char *) "no-store", 8) == NULL)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_http_flags_send_json(r, NGX_HTTP_OK, body, len);
}


static ngx_int_t
ngx_http_flags_dashboard_status(ngx_http_request_t *r)
{
    ngx_str_t  doc;

    if (ngx_http_flags_status_document(r, &doc) != NGX_OK
        || ngx_http_flags_add_header(r, "Cache-Control",
                                      (u_char *) "no-store", 8) == NULL)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_http_flags_send_json(r, NGX_HTTP_OK, doc.data, doc.len);
}


/* The page's live channel: the push registry's stream of every project
 * (docs/push.md), 503 at flags_push_max_connections. */

static ngx_int_t
ngx_http_flags_dashboard_events(ngx_http_request_t *r)
{
    ngx_int_t  rc;

    rc = ngx_http_flags_push_sse(r, NULL);

    if (rc == NGX_DECLINED) {
        return ngx_http_flags_send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                         "too_many_connections",
                                         "this worker holds "
                                         "flags_push_max_connections push "
                                         "connections already");
    }

    return rc;
}
