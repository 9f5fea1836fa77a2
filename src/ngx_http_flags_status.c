/*
 * ngx_http_flags_status.c - flags_status: per project and flag, the
 * definition, the effective state, the counters and the rollback record.
 * It takes no token: protect it with allow/deny or auth_basic.
 */

#include "ngx_http_flags_module.h"


static ngx_int_t ngx_http_flags_status_answer(ngx_http_request_t *r);


ngx_int_t
ngx_http_flags_status_handler(ngx_http_request_t *r)
{
    return ngx_http_flags_counts_get(r, ngx_http_flags_status_answer);
}


static ngx_int_t
ngx_http_flags_status_answer(ngx_http_request_t *r)
{
    ngx_str_t  doc;

    if (ngx_http_flags_status_document(r, &doc) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_http_flags_send_json(r, NGX_HTTP_OK, doc.data, doc.len);
}


/* The flags_status document, from r's pool (flags_dashboard's
 * status.json too). */

ngx_int_t
ngx_http_flags_status_document(ngx_http_request_t *r, ngx_str_t *doc)
{
    u_char                      *body, *p;
    size_t                       i, n, size;
    int64_t                      now;
    fl_event_t                  *events;
    fl_series_t                  series;
    fl_state_snapshot_t          s;
    ngx_http_flags_defs_t       *defs;
    ngx_http_flags_project_t    *project;
    ngx_http_flags_main_conf_t  *fmcf;
    ngx_http_flags_sync_state_t  sync;
    ngx_str_t                    master, sentinel;
    u_char                       mbuf[NGX_SOCKADDR_STRLEN];
    u_char                       at[24];

    fmcf = ngx_http_get_module_main_conf(r, ngx_http_flags_module);
    project = fmcf->projects.elts;

    size = sizeof("{\"projects\":[]}");

    /* flags_sync: "sync":{...} after the projects (docs/sync.md) */
    size += sizeof(",\"sync\":{\"connected\":false,\"lastSuccess\":\"\","
                   "\"lagMs\":,\"staleSeconds\":.,\"lastRoundMs\":,"
                   "\"intervalMs\":,"
                   "\"failures\":,\"rounds\":,\"owner\":,\"tls\":false}")
            + 24 + 8 * NGX_INT64_LEN
            + sizeof(",\"master\":\"\",\"sentinel\":\"\"")
            + 2 * NGX_SOCKADDR_STRLEN;

    /* the ring of recent changes (docs/dashboard.md) */
    size += 1 + fl_events_json_bound(FL_EVENTS_MAX);

    for (i = 0; i < fmcf->projects.nelts; i++) {
        size += sizeof("{\"name\":\"\",\"flags\":[]},") + project[i].name.len
                + sizeof(",\"definitions\":{\"source\":\"runtime\","
                         "\"version\":,\"at\":\"\"}") + NGX_INT64_LEN + 24;
        defs = ngx_http_flags_defs(&project[i]);

        for (n = 0; n < defs->nflags; n++) {
            size += fl_status_flag_json_bound(defs->core, n) + 1;
        }
    }

    body = ngx_pnalloc(r->pool, size);
    events = ngx_palloc(r->pool, FL_EVENTS_MAX * sizeof(fl_event_t));
    if (body == NULL || events == NULL) {
        return NGX_ERROR;
    }

    /* this worker's answers from its memo are counted before reading */
    ngx_http_flags_counts_fold();

    now = ngx_http_flags_now_sec();
    p = ngx_cpymem(body, "{\"projects\":[", sizeof("{\"projects\":[") - 1);

    for (i = 0; i < fmcf->projects.nelts; i++) {
        if (i) {
            *p++ = ',';
        }

        /* project names are [A-Za-z0-9_.-]: nothing to escape */
        p = ngx_sprintf(p, "{\"name\":\"%V\",\"flags\":[", &project[i].name);
        defs = ngx_http_flags_defs(&project[i]);

        for (n = 0; n < defs->nflags; n++) {
            if (n) {
                *p++ = ',';
            }

            ngx_http_flags_snapshot(fmcf, &defs->flags[n], now, &s);
            ngx_http_flags_window_series(fmcf, &defs->flags[n], now,
                                         &series);
            s.series = &series;

            p += fl_status_flag_json(defs->core, n, &s,
                                     defs->flags[n].node != NULL,
                                     (char *) p);
        }

        /* after its flags: what is served here, the file's or a runtime
         * version (docs/definitions.md) */
        p = ngx_sprintf(p, "],\"definitions\":{\"source\":\"%s\","
                        "\"version\":%uL,\"at\":\"",
                        project[i].runtime ? "runtime" : "file",
                        defs->version);
        p += fl_format_time_ms(defs->at_ms, (char *) p);
        p = ngx_cpymem(p, "\"}}", 3);
    }

    p = ngx_cpymem(p, "]", 1);

    if (ngx_http_flags_zone_sync_state(fmcf, &sync)) {
        p = ngx_sprintf(p, ",\"sync\":{\"connected\":%s,\"lastSuccess\":",
                        sync.connected ? "true" : "false");

        if (sync.last_ok_ms) {
            *p++ = '"';
            (void) fl_format_time_ms(sync.last_ok_ms, (char *) at);
            p = ngx_cpymem(p, at, 24);
            *p++ = '"';

        } else {
            p = ngx_cpymem(p, "null", 4);
        }

        p = ngx_sprintf(p, ",\"lagMs\":%uL,\"staleSeconds\":", sync.lag_ms);

        /* seconds with milliseconds; null before the first round */
        if (sync.stale_never) {
            p = ngx_cpymem(p, "null", 4);

        } else {
            p = ngx_sprintf(p, "%uL.%03uL", sync.stale_ms / 1000,
                            sync.stale_ms % 1000);
        }

        /* the interval too, so that a reader can tell how many rounds
         * old the view is (the page marks more than 3 as stale, as the
         * FlagsFleetStale alert does) */
        p = ngx_sprintf(p, ",\"lastRoundMs\":%uL,\"intervalMs\":%uL,"
                        "\"failures\":%uL,\"rounds\":%uL,\"owner\":%P,"
                        "\"tls\":%s",
                        sync.round_ms, sync.interval_ms, sync.failures,
                        sync.rounds, sync.owner,
                        fmcf->sync_tls ? "true" : "false");

        /* sentinel://: the master the Sentinels named, and which one */
        if (ngx_http_flags_sync_sentinel_shown(fmcf, &master, &sentinel,
                                               mbuf))
        {
            p = ngx_cpymem(p, ",\"master\":", sizeof(",\"master\":") - 1);
            p = master.len ? ngx_sprintf(p, "\"%V\"", &master)
                           : ngx_cpymem(p, "null", 4);
            p = ngx_cpymem(p, ",\"sentinel\":", sizeof(",\"sentinel\":") - 1);
            p = sentinel.len ? ngx_sprintf(p, "\"%V\"", &sentinel)
                             : ngx_cpymem(p, "null", 4);
        }

        *p++ = '}';
    }

    ngx_http_flags_events_read(fmcf, events);
    *p++ = ',';
    p += fl_events_json(events, FL_EVENTS_MAX, (char *) p);

    p = ngx_cpymem(p, "}", 1);

    doc->data = body;
    doc->len = p - body;

    return NGX_OK;
}
