/*
 * ngx_http_flags_memo.c - this worker's memo of whole answers.
 *
 * An SDK or an OFREP provider asks again and again for the same caller;
 * between two control changes the answer is the same bytes.  A memo entry
 * keeps the answer (body, ETag, the value of each flag) under everything
 * it depends on:
 *
 *   the kind of answer and the location's configuration (its project,
 *   flags_max_traits, the OFREP base), the configuration generation, the
 *   caller's bytes (the query, or the OFREP body and flag key), and the
 *   project's answer version, read before the answer was computed.
 *
 * Every change of a flag's control state or definition bumps the version
 * (ngx_http_flags_control.c), so an entry of an older version never
 * answers.  Evaluation depends on nothing else: no clock, no randomness.
 *
 * An answer served from the memo is still an evaluation of every flag it
 * shows, and is counted as one, by its values: the entry counts its hits
 * and the hits are folded into the zone's counters with the other counts
 * (ngx_http_flags_counts_fold(): at the end of the event loop's cycle that
 * served them, at most once a millisecond), so one fold counts a burst of
 * hits with one atomic operation a counter.  Readers of the counters in
 * this worker (flags_status, flags_metrics, the rollback decision, a sync
 * round) fold first; another worker's hits reach the zone within a
 * millisecond or two, and flags_status and flags_metrics wait for them.  A
 * worker killed by a signal loses the hits of its last millisecond or two
 * at most; one that exits folds them (docs/evaluation.md, "Counting").
 *
 * Memory: malloc'd entries in a table of sets of NGX_HTTP_FLAGS_MEMO_WAYS
 * entries, at most NGX_HTTP_FLAGS_MEMO_BYTES in all; an entry being sent
 * is freed when its last request is done with it (a pool cleanup), so the
 * body is sent without a copy.  An answer is kept the second time its key
 * is seen (a table of key hashes, in sets too, remembers the first): a
 * caller who asks once costs the memo nothing, and one who polls is
 * answered from it from its third request on.
 *
 * The set of a key comes from the high half of its hash, the caller's
 * bytes'; the low half, the location's and project's, is the same for
 * every caller of a location and completes the tag.  (Taken from the low
 * half alone, every caller of a location shared one slot, and 1,000
 * callers polling in turn were never answered from the memo: issue 23.)
 * A full set gives up, in this order, an older answer of the same key,
 * an answer of an older version of the project, its least recently used
 * answer.
 */

#include "ngx_http_flags_module.h"


#define NGX_HTTP_FLAGS_MEMO_SETS      2048          /* a power of two */
#define NGX_HTTP_FLAGS_MEMO_WAYS      4             /* entries a set */
#define NGX_HTTP_FLAGS_MEMO_BYTES     (8 * 1024 * 1024)
#define NGX_HTTP_FLAGS_MEMO_MAX_KEY   2048


struct ngx_http_flags_memo_s {
    uint64_t                    hash;
    void                       *scope;
    ngx_http_flags_project_t   *project;
    /* the definitions it was computed from: alive while it has hits to
     * count, as a change of definitions folds the memo first */
    ngx_http_flags_defs_t      *defs;
    ngx_uint_t                  gen;
    ngx_atomic_uint_t           version;
    ngx_uint_t                  kind;

    u_char                     *key;
    size_t                      key_len;

    u_char                     *body;
    size_t                      len;
    u_char                      etag[FL_ETAG_LEN];
    uint64_t                    etag_value;
    unsigned                    has_etag:1;

    unsigned                    pending:1;  /* on the fold list */
    unsigned                    dead:1;     /* out of the table */

    ngx_int_t                   single;     /* flag index, or -1: all */
    uint8_t                    *enabled;    /* a bit a flag */

    ngx_uint_t                  used;       /* the clock at its last use */
    ngx_uint_t                  hits;       /* served, not counted yet */
    ngx_uint_t                  refs;       /* requests sending body */
    size_t                      size;       /* bytes, for the budget */

    ngx_http_flags_memo_t      *next_pending;
};


static ngx_http_flags_memo_t  *ngx_http_flags_memo_table[NGX_HTTP_FLAGS_MEMO_SETS]
                                                     [NGX_HTTP_FLAGS_MEMO_WAYS];
/*
 * A set's line: the hash of each entry of the set (its tag), and the keys
 * of the set seen once (hash ^ version, newest first: the admission).
 * Both in one 64-byte cache line, and the entries' pointers apart: a
 * caller the memo does not hold (most of them, with many distinct users)
 * reads one line on the way in and writes it on the way out.  In three
 * tables (tags, seen, pointers) that was three lines missed in the cache,
 * 0.2 us a request on the bench's distinct users (issue 27).
 */
typedef struct {
    uint64_t                    tag[NGX_HTTP_FLAGS_MEMO_WAYS];
    uint64_t                    seen[NGX_HTTP_FLAGS_MEMO_WAYS];
} ngx_http_flags_memo_line_t;

static ngx_http_flags_memo_line_t
                               ngx_http_flags_memo_lines[NGX_HTTP_FLAGS_MEMO_SETS]
#if defined(__GNUC__)
                                   __attribute__((aligned(64)))
#endif
                                   ;
static ngx_http_flags_memo_t  *ngx_http_flags_memo_pending;
static size_t                  ngx_http_flags_memo_used;
static ngx_uint_t              ngx_http_flags_memo_clock;


static uint64_t ngx_http_flags_memo_hash(ngx_http_flags_memo_key_t *k);
static ngx_uint_t ngx_http_flags_memo_set(uint64_t hash);
static ngx_uint_t ngx_http_flags_memo_admit(ngx_http_flags_memo_line_t *line,
    uint64_t hash, ngx_atomic_uint_t version);
static ngx_uint_t ngx_http_flags_memo_way(ngx_http_flags_memo_t **set,
    ngx_http_flags_memo_key_t *k, uint64_t hash);
static ngx_uint_t ngx_http_flags_memo_same(ngx_http_flags_memo_t *m,
    ngx_http_flags_memo_key_t *k, uint64_t hash);
static void ngx_http_flags_memo_hit(ngx_http_flags_memo_t *m);
static void ngx_http_flags_memo_fold_one(ngx_http_flags_memo_t *m,
    int64_t now);
static void ngx_http_flags_memo_release(void *data);
static void ngx_http_flags_memo_drop(ngx_http_flags_memo_t *m);


/* The caller's half of a key's hash (the high one): its bytes and kind,
 * eight bytes a step. */

static uint64_t
ngx_http_flags_memo_caller(ngx_http_flags_memo_key_t *k)
{
    if (!k->caller_hashed) {
        k->caller = fl_hash64(k->bytes, k->len, (uint64_t) k->kind)
                    & 0xffffffff00000000ULL;
        k->caller_hashed = 1;
    }

    return k->caller;
}


static uint64_t
ngx_http_flags_memo_hash(ngx_http_flags_memo_key_t *k)
{
    uint64_t  h;

    if (k->hashed) {
        return k->hash;
    }

    h = ngx_http_flags_memo_caller(k)
        | fl_murmur3_32(&k->scope, sizeof(k->scope),
                        (uint32_t) (uintptr_t) k->project);

    k->hash = h;
    k->hashed = 1;

    return h;
}


/*
 * The set of a hash in the table: from the caller's half, so that
 * the callers of one location (one low half) spread over every set, and
 * so that it is known before the request is authenticated (prefetch()).
 */

static ngx_uint_t
ngx_http_flags_memo_set(uint64_t hash)
{
    return (ngx_uint_t) (hash >> 32) & (NGX_HTTP_FLAGS_MEMO_SETS - 1);
}


/*
 * The caller's half of k's hash computed, and its set's line asked of
 * memory, while the request is authenticated: with many distinct callers
 * the line is rarely in the cache, and find() would wait for it (issue 27).
 * k needs kind, bytes and len.
 */

void
ngx_http_flags_memo_prefetch(ngx_http_flags_memo_key_t *k)
{
    ngx_uint_t  s;

    if (k->len > NGX_HTTP_FLAGS_MEMO_MAX_KEY) {
        return;
    }

    s = ngx_http_flags_memo_set(ngx_http_flags_memo_caller(k));

#if defined(__GNUC__)
    __builtin_prefetch(&ngx_http_flags_memo_lines[s], 1);
#else
    (void) s;
#endif
}


static ngx_uint_t
ngx_http_flags_memo_same(ngx_http_flags_memo_t *m,
    ngx_http_flags_memo_key_t *k, uint64_t hash)
{
    return m->hash == hash && m->kind == k->kind && m->scope == k->scope
           && m->project == k->project && m->defs == k->defs
           && m->gen == k->gen
           && m->version == k->version && m->key_len == k->len
           && ngx_memcmp(m->key, k->bytes, k->len) == 0;
}


ngx_http_flags_memo_t *
ngx_http_flags_memo_find(ngx_http_flags_memo_key_t *k)
{
    uint64_t                hash, *tags;
    ngx_uint_t              i, s;
    ngx_http_flags_memo_t  *m;

    if (k->project->pversion == NULL
        || k->len > NGX_HTTP_FLAGS_MEMO_MAX_KEY)
    {
        return NULL;
    }

    hash = ngx_http_flags_memo_hash(k);
    s = ngx_http_flags_memo_set(hash);
    tags = ngx_http_flags_memo_lines[s].tag;

    /* the tags first: the entries' pointers are read for a match only */
    for (i = 0; i < NGX_HTTP_FLAGS_MEMO_WAYS; i++) {
        if (tags[i] != hash) {
            continue;
        }

        m = ngx_http_flags_memo_table[s][i];

        if (m && ngx_http_flags_memo_same(m, k, hash)) {
            m->used = ++ngx_http_flags_memo_clock;
            return m;
        }
    }

    return NULL;
}


/*
 * Whether a key (its hash, of the project's version) was seen before in
 * its set's line; if not, it is remembered now, in place of the oldest.
 */

static ngx_uint_t
ngx_http_flags_memo_admit(ngx_http_flags_memo_line_t *line, uint64_t hash,
    ngx_atomic_uint_t version)
{
    uint64_t    v, *set;
    ngx_uint_t  i;

    /* the version too: an answer that changed is seen anew */
    v = hash ^ version;
    set = line->seen;

    for (i = 0; i < NGX_HTTP_FLAGS_MEMO_WAYS; i++) {
        if (set[i] == v) {
            return 1;
        }
    }

    /* newest first */
    for (i = NGX_HTTP_FLAGS_MEMO_WAYS - 1; i > 0; i--) {
        set[i] = set[i - 1];
    }

    set[0] = v;

    return 0;
}


/*
 * The entry of set a new answer of k takes: one holding an older answer
 * of the same key, else an empty one, else one of an older version of
 * k's project (it answers nobody any more), else the least recently used.
 */

static ngx_uint_t
ngx_http_flags_memo_way(ngx_http_flags_memo_t **set,
    ngx_http_flags_memo_key_t *k, uint64_t hash)
{
    ngx_uint_t              i, way, rank, r;
    ngx_http_flags_memo_t  *m;

    way = 0;
    rank = 0;

    for (i = 0; i < NGX_HTTP_FLAGS_MEMO_WAYS; i++) {
        m = set[i];

        if (m == NULL) {
            r = 3;

        } else if (m->hash == hash) {
            return i;

        } else if (m->project == k->project && m->version != k->version) {
            r = 2;

        } else {
            r = 1;
        }

        if (r > rank
            || (r == 1 && rank == 1 && m->used < set[way]->used))
        {
            way = i;
            rank = r;
        }
    }

    return way;
}


/*
 * Keeps an answer just computed: body (len bytes), its ETag (NULL: none)
 * and the value of each flag it shows: bit i of enabled (FL_BIT_WORDS())
 * for every flag of the project, or bit 0 for flag single (>= 0) alone.  Nothing is
 * kept when the key or the answer is too large, or memory is short: the
 * memo is an optimisation, never a cause of failure.
 */

void
ngx_http_flags_memo_store(ngx_http_flags_memo_key_t *k, u_char *body,
    size_t len, const uint64_t *etag, const uint64_t *enabled,
    ngx_int_t single)
{
    u_char                 *p;
    size_t                  size, nflags, bits, i;
    uint64_t                hash;
    ngx_uint_t              way, s;
    ngx_http_flags_memo_t  *m, *old, **set;

    if (k->project->pversion == NULL
        || k->len > NGX_HTTP_FLAGS_MEMO_MAX_KEY)
    {
        return;
    }

    nflags = single >= 0 ? 1 : k->defs->nflags;
    bits = (nflags + 7) / 8;
    size = sizeof(ngx_http_flags_memo_t) + k->len + len + bits;

    hash = ngx_http_flags_memo_hash(k);
    s = ngx_http_flags_memo_set(hash);

    /* the first sight of a key is only remembered */
    if (!ngx_http_flags_memo_admit(&ngx_http_flags_memo_lines[s], hash,
                                   k->version))
    {
        return;
    }

    set = ngx_http_flags_memo_table[s];
    way = ngx_http_flags_memo_way(set, k, hash);
    old = set[way];

    if (ngx_http_flags_memo_used - (old ? old->size : 0) + size
        > NGX_HTTP_FLAGS_MEMO_BYTES)
    {
        return;
    }

    m = ngx_alloc(size, ngx_cycle->log);
    if (m == NULL) {
        return;
    }

    if (old) {
        set[way] = NULL;
        ngx_http_flags_memo_drop(old);
    }

    ngx_memzero(m, sizeof(ngx_http_flags_memo_t));

    p = (u_char *) (m + 1);

    m->hash = hash;
    m->scope = k->scope;
    m->project = k->project;
    m->defs = k->defs;
    m->gen = k->gen;
    m->version = k->version;
    m->kind = k->kind;
    m->size = size;
    m->single = single;

    m->key = p;
    m->key_len = k->len;
    p = ngx_cpymem(p, k->bytes, k->len);

    m->body = p;
    m->len = len;
    p = ngx_cpymem(p, body, len);

    m->enabled = p;
    ngx_memzero(p, bits);

    for (i = 0; i < nflags; i++) {
        if ((enabled[i / 64] >> (i % 64)) & 1) {
            p[i / 8] |= (uint8_t) (1 << (i % 8));
        }
    }

    if (etag) {
        m->etag_value = *etag;
        (void) fl_etag_format(*etag, (char *) m->etag);
        m->has_etag = 1;
    }

    m->used = ++ngx_http_flags_memo_clock;

    set[way] = m;
    ngx_http_flags_memo_lines[s].tag[way] = hash;
    ngx_http_flags_memo_used += size;
}


/*
 * Answers r from m: its ETag if it has one, 304 when If-None-Match names
 * it (not counted: the caller holds the answer), else 200 with m's body,
 * counted as the evaluations it shows.  The body is not copied: r holds m
 * until its pool goes.
 */

ngx_int_t
ngx_http_flags_memo_answer(ngx_http_request_t *r, ngx_http_flags_memo_t *m)
{
    ngx_int_t            rc;
    ngx_pool_cleanup_t  *cln;

    if (m->has_etag) {
        rc = ngx_http_flags_etag_text(r, m->etag);
        if (rc != NGX_OK) {
            return rc;
        }

        if (ngx_http_flags_none_match(r, m->etag, m->etag_value)) {
            return ngx_http_flags_send_not_modified(r);
        }
    }

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    cln->handler = ngx_http_flags_memo_release;
    cln->data = m;
    m->refs++;

    ngx_http_flags_memo_hit(m);

    return ngx_http_flags_send_json(r, NGX_HTTP_OK, m->body, m->len);
}


/* One more answer of m to count: at the counts' next fold. */

static void
ngx_http_flags_memo_hit(ngx_http_flags_memo_t *m)
{
    m->hits++;

    if (!m->pending) {
        m->pending = 1;
        m->next_pending = ngx_http_flags_memo_pending;
        ngx_http_flags_memo_pending = m;
    }

    /* the counts' fold folds the memo's hits first */
    ngx_http_flags_counts_due();
}


/*
 * Counts every hit not counted yet.  Readers of the counters call it
 * first; it costs nothing when there is none.
 */

void
ngx_http_flags_memo_fold(void)
{
    int64_t                 now;
    ngx_http_flags_memo_t  *m, *next;

    if (ngx_http_flags_memo_pending == NULL) {
        return;
    }

    now = ngx_http_flags_now_sec();

    for (m = ngx_http_flags_memo_pending; m; m = next) {
        next = m->next_pending;

        ngx_http_flags_memo_fold_one(m, now);

        m->pending = 0;
        m->next_pending = NULL;

        if (m->dead && m->refs == 0) {
            ngx_free(m);
        }
    }

    ngx_http_flags_memo_pending = NULL;
}


static void
ngx_http_flags_memo_fold_one(ngx_http_flags_memo_t *m, int64_t now)
{
    size_t                  i, n;
    uint32_t                hits;
    ngx_http_flags_flag_t  *flag;

    hits = (uint32_t) m->hits;
    m->hits = 0;

    if (hits == 0) {
        return;
    }

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, ngx_cycle->log, 0,
                   "flags: memo fold: %uD answers of project \"%V\" counted",
                   hits, &m->project->name);

    if (m->single >= 0) {
        flag = &m->defs->flags[m->single];

        if (flag->totals) {
            fl_count_evals(flag->totals, flag->window, now, hits,
                           (m->enabled[0] & 1) ? hits : 0);
        }

        return;
    }

    n = m->defs->nflags;

    for (i = 0; i < n; i++) {
        flag = &m->defs->flags[i];

        if (flag->totals) {
            fl_count_evals(flag->totals, flag->window, now, hits,
                           (m->enabled[i / 8] & (1 << (i % 8))) ? hits : 0);
        }
    }
}


static void
ngx_http_flags_memo_release(void *data)
{
    ngx_http_flags_memo_t  *m = data;

    m->refs--;

    if (m->dead && m->refs == 0 && !m->pending) {
        ngx_free(m);
    }
}


/* Out of the table: freed now, or once counted and sent. */

static void
ngx_http_flags_memo_drop(ngx_http_flags_memo_t *m)
{
    ngx_http_flags_memo_used -= m->size;
    m->dead = 1;

    if (m->refs == 0 && !m->pending) {
        ngx_free(m);
    }
}


/* At exit: every hit counted, every entry freed. */

void
ngx_http_flags_memo_exit(void)
{
    ngx_uint_t              i, j;
    ngx_http_flags_memo_t  *m;

    ngx_http_flags_memo_fold();

    for (i = 0; i < NGX_HTTP_FLAGS_MEMO_SETS; i++) {
        for (j = 0; j < NGX_HTTP_FLAGS_MEMO_WAYS; j++) {
            m = ngx_http_flags_memo_table[i][j];

            if (m) {
                ngx_http_flags_memo_table[i][j] = NULL;
                ngx_http_flags_memo_drop(m);
            }
        }
    }
}
