/*
 * ngx_http_flags_reportlog.c - flags_error_log, the report log: the
 * directive, the default file, creating it 0640, recreating it when USR1
 * reopens it, and the batch of report lines written once an event-loop
 * pass (as nginx's log module owns its access_log files).  Ingest hands a
 * report over with ngx_http_flags_report_log() and learns, through its
 * callback, when the line is written.
 *
 * The lines of all reports accepted in one pass of the event loop go into
 * one write(2): each report appends its line to this worker's batch and
 * its request waits (r->main->count++, NGX_DONE, as while a body is read);
 * a posted event, run once the pass has handled every ready connection,
 * writes the batch and only then calls back for each report, in order.
 * So a 204 still means the line is in the kernel, and the lines of one
 * batch are one O_APPEND write: never interleaved with another worker's.
 * A write that fails or is cut short fails the whole batch: every report
 * in it is called back with NGX_ERROR, and the written part is cut off
 * again.  A batch over NGX_HTTP_FLAGS_BATCH_MAX bytes is written before
 * the next line is added.  A client that closes while its report waits
 * changes nothing: the line is written and the callback runs, only the
 * answer goes nowhere.  The batch is always written before the event
 * loop's pass ends, hence before the report log is reopened (USR1) or the
 * worker exits; the file's flush callback, which nginx runs at both,
 * writes it too, should anything be left.
 */

#include "ngx_http_flags_module.h"


#define NGX_HTTP_FLAGS_BATCH_MAX  65536


typedef struct ngx_http_flags_waiting_s  ngx_http_flags_waiting_t;

/* a report whose line is in the batch, not yet written */
struct ngx_http_flags_waiting_s {
    ngx_http_request_t           *request;
    ngx_http_flags_logged_pt      logged;
    ngx_http_flags_waiting_t     *next;
};


/* A worker's batch: lines not yet written, and their requests. */
typedef struct {
    u_char                       *buf;       /* buf[0]: room for a '\n' */
    size_t                        len;       /* of the lines, from buf + 1 */
    size_t                        size;
    ngx_http_flags_waiting_t     *first;
    ngx_http_flags_waiting_t    **last;
    ngx_uint_t                    n;
    ngx_event_t                   event;     /* posted: writes the batch */
    ngx_http_flags_main_conf_t   *fmcf;
} ngx_http_flags_batch_t;


static ngx_http_flags_batch_t  ngx_http_flags_batch;


static ngx_int_t ngx_http_flags_open_log(ngx_conf_t *cf,
    ngx_http_flags_main_conf_t *fmcf, ngx_str_t *name);
static void ngx_http_flags_log_flush(ngx_open_file_t *file, ngx_log_t *log);
static void ngx_http_flags_batch_event(ngx_event_t *ev);
static void ngx_http_flags_batch_flush(void);
static ngx_int_t ngx_http_flags_batch_write(ngx_http_flags_batch_t *b,
    ngx_log_t *log);


/* flags_error_log path | off; */

char *
ngx_http_flags_error_log(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_flags_main_conf_t *fmcf = conf;

    ngx_str_t  *value;

    if (fmcf->error_log != NGX_CONF_UNSET_PTR) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (ngx_strcmp(value[1].data, "off") == 0) {
        fmcf->error_log = NULL;
        return NGX_CONF_OK;
    }

    if (ngx_http_flags_open_log(cf, fmcf, &value[1]) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


/*
 * The http block is read: without flags_error_log the report log is the
 * default file, or none when no flags_project uses the module (a module
 * loaded but unused opens no files).
 */

ngx_int_t
ngx_http_flags_report_log_conf(ngx_conf_t *cf,
    ngx_http_flags_main_conf_t *fmcf)
{
    ngx_str_t  name;

    if (fmcf->error_log != NGX_CONF_UNSET_PTR) {
        return NGX_OK;
    }

    if (fmcf->projects.nelts == 0) {
        fmcf->error_log = NULL;
        return NGX_OK;
    }

    ngx_str_null(&name);

    return ngx_http_flags_open_log(cf, fmcf, &name);
}


/*
 * The report log, name given or (empty name) the default: the file beside
 * nginx's compiled-in access log (on Debian /var/log/nginx/), since the
 * prefix's logs/ may not exist.  Resolved against the prefix and reopened
 * on USR1 like access_log.
 *
 * nginx opens its log files itself after the configuration is read, and
 * creates them 0644; reports hold personal data, so a missing file is
 * created here first, 0640 (less the umask).  An existing file keeps its
 * mode: an operator who chose one is not overruled.  Creating it also
 * proves now, with the directive's line, that the file can be written,
 * where nginx's own failure would name neither.
 */

static ngx_int_t
ngx_http_flags_open_log(ngx_conf_t *cf, ngx_http_flags_main_conf_t *fmcf,
    ngx_str_t *name)
{
    u_char           *p, errstr[NGX_MAX_ERROR_STR];
    size_t            len;
    ngx_fd_t          fd;
    ngx_err_t         err;
    ngx_str_t         path;
    ngx_open_file_t  *file;

    path = *name;

    if (path.len == 0) {
        len = sizeof(NGX_HTTP_LOG_PATH) - 1;

        while (len && NGX_HTTP_LOG_PATH[len - 1] != '/') {
            len--;
        }

        path.len = len + sizeof(NGX_HTTP_FLAGS_ERROR_LOG) - 1;
        path.data = ngx_pnalloc(cf->pool, path.len + 1);
        if (path.data == NULL) {
            return NGX_ERROR;
        }

        p = ngx_cpymem(path.data, NGX_HTTP_LOG_PATH, len);
        ngx_memcpy(p, NGX_HTTP_FLAGS_ERROR_LOG,
                   sizeof(NGX_HTTP_FLAGS_ERROR_LOG));
    }

    /* the full, NUL-terminated name is file->name */
    file = ngx_conf_open_file(cf->cycle, &path);
    if (file == NULL) {
        return NGX_ERROR;
    }

    fd = ngx_open_file(file->name.data, NGX_FILE_APPEND,
                       NGX_FILE_CREATE_OR_OPEN,
                       NGX_HTTP_FLAGS_ERROR_LOG_ACCESS);

    if (fd == NGX_INVALID_FILE) {
        err = ngx_errno;
        p = ngx_strerror(err, errstr, sizeof(errstr));

        if (name->len) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "flags_error_log \"%V\" cannot be opened: "
                               "%*s (set flags_error_log to a writable file "
                               "or \"off\")",
                               &file->name, p - errstr, errstr);

        } else {
            ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                          "the default flags_error_log \"%V\" cannot be "
                          "opened: %*s (set flags_error_log to a writable "
                          "file or \"off\") in %V:%ui",
                          &file->name, p - errstr, errstr,
                          &fmcf->project_file, fmcf->project_line);
        }

        return NGX_ERROR;
    }

    if (ngx_close_file(fd) == NGX_FILE_ERROR) {
        ngx_conf_log_error(NGX_LOG_ALERT, cf, ngx_errno,
                           ngx_close_file_n " \"%V\" failed", &file->name);
    }

    /*
     * A file shared with a buffered access_log keeps that log's flush:
     * its buffer matters more than the mode of a file it created anyway.
     */
    if (file->flush == NULL) {
        file->flush = ngx_http_flags_log_flush;
    }

    fmcf->error_log = file;

    return NGX_OK;
}


/*
 * ngx_reopen_files() calls this right before it reopens the file on USR1:
 * the log was usually just renamed away, and nginx would create the new
 * one 0644.  It is called at process exit too (ngx_conf_flush_files),
 * where nothing is reopened: then it only writes the batch.  Otherwise it
 * only creates a missing file (a worker that may not create it leaves
 * that to the master, which reopens first); apart from the batch of
 * report lines it never writes, truncates or changes an existing file,
 * and it never holds a descriptor.
 */

static void
ngx_http_flags_log_flush(ngx_open_file_t *file, ngx_log_t *log)
{
    ngx_fd_t  fd;

    /* reports waiting for their line go to the file still open (the
     * batch is written before each pass of the event loop ends, so this
     * finds it empty) */
    ngx_http_flags_batch_flush();

    if (ngx_exiting || ngx_quit || ngx_terminate) {
        return;
    }

    fd = ngx_open_file(file->name.data, NGX_FILE_APPEND,
                       NGX_FILE_CREATE_OR_OPEN,
                       NGX_HTTP_FLAGS_ERROR_LOG_ACCESS);

    if (fd == NGX_INVALID_FILE) {
        /* nginx's own open() right after reports the failure */
        return;
    }

    if (ngx_close_file(fd) == NGX_FILE_ERROR) {
        ngx_log_error(NGX_LOG_ALERT, log, ngx_errno,
                      "flags: " ngx_close_file_n " \"%V\" failed",
                      &file->name);
    }
}


/*
 * An accepted report's line, of the project named project: appended to
 * the batch, and the request waits for the write (NGX_DONE; logged() runs
 * once it is written, NGX_OK, or failed, NGX_ERROR, and its result
 * finalizes the request).  Without a report log, or when the line finds
 * no memory, logged() runs at once and its result is returned.
 */

ngx_int_t
ngx_http_flags_report_log(ngx_http_request_t *r, ngx_str_t *project,
    fl_report_t *report, ngx_http_flags_logged_pt logged)
{
    u_char                      *buf;
    size_t                       bound, size;
    ngx_http_flags_batch_t      *b;
    ngx_http_flags_waiting_t    *w;
    ngx_http_flags_main_conf_t  *fmcf;

    fmcf = ngx_http_get_module_main_conf(r, ngx_http_flags_module);

    if (fmcf->error_log == NULL) {
        /* nothing to write: the report goes on at once */
        return logged(r, NGX_OK);
    }

    b = &ngx_http_flags_batch;

    if (b->fmcf == NULL) {
        b->fmcf = fmcf;
        b->first = NULL;
        b->last = &b->first;
        b->event.handler = ngx_http_flags_batch_event;
        b->event.data = b;
        b->event.log = ngx_cycle->log;
    }

    w = ngx_palloc(r->pool, sizeof(ngx_http_flags_waiting_t));
    if (w == NULL) {
        return logged(r, NGX_ERROR);
    }

    bound = fl_report_log_bound(report, project->len);

    /* a full batch is written first: memory stays bounded */
    if (b->len && b->len + bound > NGX_HTTP_FLAGS_BATCH_MAX) {
        ngx_http_flags_batch_flush();
    }

    if (b->size < 1 + b->len + bound) {
        size = ngx_max(1 + b->len + bound, NGX_HTTP_FLAGS_BATCH_MAX + 1);

        buf = ngx_alloc(size, r->connection->log);
        if (buf == NULL) {
            return logged(r, NGX_ERROR);
        }

        if (b->len) {
            ngx_memcpy(buf + 1, b->buf + 1, b->len);
        }

        ngx_free(b->buf);
        b->buf = buf;
        b->size = size;
    }

    b->len += fl_report_log_line(report, (const char *) project->data,
                                 project->len, ngx_http_flags_now_ms(),
                                 (char *) b->buf + 1 + b->len);

    w->request = r;
    w->logged = logged;
    w->next = NULL;
    *b->last = w;
    b->last = &w->next;
    b->n++;

    r->main->count++;

    if (!b->event.posted) {
        ngx_post_event(&b->event, &ngx_posted_events);
    }

    return NGX_DONE;
}


static void
ngx_http_flags_batch_event(ngx_event_t *ev)
{
    ngx_http_flags_batch_flush();
}


/*
 * Writes the batch, then calls back for its reports in the order they
 * came, with NGX_OK, or NGX_ERROR for each when the write failed.
 */

static void
ngx_http_flags_batch_flush(void)
{
    ngx_int_t                  rc;
    ngx_connection_t          *c;
    ngx_http_request_t        *r;
    ngx_http_flags_batch_t    *b;
    ngx_http_flags_waiting_t  *w, *next;

    b = &ngx_http_flags_batch;

    if (b->n == 0) {
        return;
    }

    if (b->event.posted) {
        ngx_delete_posted_event(&b->event);
    }

    rc = ngx_http_flags_batch_write(b, ngx_cycle->log);

    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, ngx_cycle->log, 0,
                   "flags: report batch of %ui lines, %uz bytes: %s",
                   b->n, b->len, rc == NGX_OK ? "written" : "failed");

    /* answering may run more requests: they start a new batch */
    w = b->first;
    b->first = NULL;
    b->last = &b->first;
    b->len = 0;
    b->n = 0;

    for ( /* void */ ; w; w = next) {
        next = w->next;
        r = w->request;
        c = r->connection;

        ngx_http_finalize_request(r, w->logged(r, rc));

        ngx_http_run_posted_requests(c);
    }
}


/*
 * One write(2) on a file opened with O_APPEND: lines from different
 * workers never interleave.
 *
 * A full disk (or file size limit) can take only part of a batch.  The
 * fragment is cut off again so that the next line starts on a line of its
 * own; where that is impossible (an append-only file), the zone remembers
 * it and the next writer starts with a newline.
 */

static ngx_int_t
ngx_http_flags_batch_write(ngx_http_flags_batch_t *b, ngx_log_t *log)
{
    u_char                      *start;
    off_t                        end;
    size_t                       len;
    ssize_t                      n;
    ngx_err_t                    err;
    ngx_file_info_t              fi;
    ngx_open_file_t             *file;
    ngx_http_flags_shctx_t      *sh;

    /* the descriptor nginx holds now: USR1 replaces it between passes */
    file = b->fmcf->error_log;
    sh = b->fmcf->sh;

    start = b->buf + 1;
    len = b->len;

    if (sh && sh->log_torn) {
        *b->buf = '\n';
        start = b->buf;
        len++;
    }

    n = ngx_write_fd(file->fd, start, len);

    if (n == (ssize_t) len) {
        if (start == b->buf) {
            (void) ngx_atomic_cmp_set(&sh->log_torn, 1, 0);
        }

        return NGX_OK;
    }

    if (n == -1) {
        err = ngx_errno;
        ngx_log_error(NGX_LOG_ALERT, log, err,
                      "flags: writing a report to \"%V\" failed; %ui "
                      "reports answered 500", &file->name, b->n);
        return NGX_ERROR;
    }

    /* a short write: the file system is full or the file at its limit */

    ngx_log_error(NGX_LOG_ALERT, log, 0,
                  "flags: writing a report to \"%V\" failed: only %z of "
                  "%uz bytes were written (file system full or file size "
                  "limit reached); %ui reports answered 500",
                  &file->name, n, len, b->n);

    end = lseek(file->fd, 0, SEEK_CUR);

    if (n > 0
        && (end == -1
            || ngx_fd_info(file->fd, &fi) == NGX_FILE_ERROR
            || ngx_file_size(&fi) != end
            || ftruncate(file->fd, end - n) == -1))
    {
        ngx_log_error(NGX_LOG_ALERT, log, ngx_errno,
                      "flags: could not remove the partial line from \"%V\"",
                      &file->name);

        if (sh) {
            sh->log_torn = 1;
        }
    }

    return NGX_ERROR;
}
