/*
 * ngx_http_flags_metrics.c - flags_metrics: the zone's counters in the
 * Prometheus text exposition format 0.0.4 (docs/metrics.md).
 *
 * A snapshot of every flag of every project of this worker's
 * configuration, the refused reports and the zone's pages go to the core,
 * which writes the text.  Like flags_status it takes no token: protect it
 * with allow/deny.
 */

#include "ngx_http_flags_module.h"


static ngx_str_t  ngx_http_flags_metrics_type =
    ngx_string("text/plain; version=0.0.4; charset=utf-8");


static ngx_int_t ngx_http_flags_metrics_answer(ngx_http_request_t *r);


ngx_int_t
ngx_http_flags_metrics_handler(ngx_http_request_t *r)
{
    return ngx_http_flags_counts_get(r, ngx_http_flags_metrics_answer);
}


static ngx_int_t
ngx_http_flags_metrics_answer(ngx_http_request_t *r)
{
    u_char                      *body;
    size_t                       i, n, len, size;
    int64_t                      now;
    uint8_t                     *counted;
    ngx_uint_t                   k;
    fl_state_snapshot_t         *s;
    fl_metrics_module_t          m;
    ngx_http_flags_sync_state_t  sync;
    fl_metrics_project_t        *mp;
    ngx_http_flags_defs_t         *defs;
    ngx_http_flags_project_t    *project;
    ngx_http_flags_main_conf_t  *fmcf;

    fmcf = ngx_http_get_module_main_conf(r, ngx_http_flags_module);
    project = fmcf->projects.elts;

    mp = ngx_pcalloc(r->pool, (fmcf->projects.nelts + 1)
                              * sizeof(fl_metrics_project_t));
    if (mp == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    /* this worker's answers from its memo are counted before reading */
    ngx_http_flags_counts_fold();

    now = ngx_http_flags_now_sec();

    for (i = 0; i < fmcf->projects.nelts; i++) {
        defs = ngx_http_flags_defs(&project[i]);
        n = defs->nflags;

        s = ngx_palloc(r->pool, (n + 1) * sizeof(fl_state_snapshot_t));
        counted = ngx_palloc(r->pool, n + 1);
        if (s == NULL || counted == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        for (k = 0; k < n; k++) {
            ngx_http_flags_snapshot(fmcf, &defs->flags[k], now, &s[k]);
            counted[k] = defs->flags[k].node != NULL;
        }

        mp[i].name = (const char *) project[i].name.data;
        mp[i].name_len = project[i].name.len;
        mp[i].project = defs->core;
        mp[i].snapshots = s;
        mp[i].counted = counted;
        mp[i].defs_version = ngx_http_flags_versions_current(&project[i]);

        for (k = 0; project[i].pversion && k < FL_DEFS_REJECTED_MAX; k++) {
            mp[i].defs_rejected[k] = project[i].pversion->defs_rejected[k];
        }
    }

    ngx_memzero(&m, sizeof(fl_metrics_module_t));

    if (fmcf->sh) {
        for (k = 0; k < FL_REFUSED_MAX; k++) {
            m.refused[k] = fmcf->sh->refused[k];
        }
    }

    ngx_http_flags_zone_bytes(fmcf, &m.zone_used_bytes, &m.zone_free_bytes);

    /* push connections are counted per worker only: not rendered */
    m.push_connections = -1;

    /* flags_sync: the host's sync state (docs/sync.md) */
    if (ngx_http_flags_zone_sync_state(fmcf, &sync)) {
        m.sync_enabled = 1;
        m.sync_connected = (int) sync.connected;
        m.sync_last_success_ms = sync.last_ok_ms;
        m.sync_lag_ms = sync.lag_ms;
        m.sync_stale_ms = sync.stale_ms;
        m.sync_interval_ms = sync.interval_ms;
        m.sync_failures = sync.failures;
    }

    size = fl_metrics_bound(mp, fmcf->projects.nelts);
    if (size == 0) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    body = ngx_pnalloc(r->pool, size);
    if (body == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    len = fl_metrics_write(mp, fmcf->projects.nelts, &m, (char *) body);
    if (len == 0) {
        ngx_log_error(NGX_LOG_ALERT, r->connection->log, 0,
                      "flags: the core could not write the metrics");
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    r->headers_out.content_type = ngx_http_flags_metrics_type;
    /* the type alone, as nginx keeps it: gzip_types matches on it */
    r->headers_out.content_type_len = sizeof("text/plain") - 1;
    r->headers_out.content_type_lowcase = NULL;

    return ngx_http_flags_send_body(r, NGX_HTTP_OK, body, len);
}
