/*
 * flags_core.h - the C API of the flags core (C++17, no nginx headers).
 *
 * Everything the nginx glue, the unit tests and the fuzzers need goes through
 * this header: POD types, status codes and functions that never throw.
 *
 * Conventions
 *  - Percentages are carried as "milli-percent": 25 % is 25000, 12.345 % is
 *    12345, 100 % is 100000.  The flags file allows at most 3 decimals, so
 *    this is exact.
 *  - Strings are (pointer, length) pairs and are not NUL-terminated unless
 *    said otherwise.
 *  - Functions that can fail return fl_status_t and, when given an error
 *    buffer, write a NUL-terminated message for a person into it.
 *  - Memory on the request path comes from the caller's allocator
 *    (fl_alloc_t); the core never frees it individually.
 */

#ifndef FLAGS_CORE_H
#define FLAGS_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define FL_NOEXCEPT noexcept
extern "C" {
#else
#define FL_NOEXCEPT
#endif

typedef enum {
    FL_OK = 0,
    FL_ERR_NOMEM,           /* allocation failed */
    FL_ERR_INVALID,         /* invalid definition (flags file, state file) */
    FL_ERR_QUERY,           /* -> 400 invalid_query */
    FL_ERR_JSON,            /* -> 400 invalid_json */
    FL_ERR_FIELD,           /* -> 400 invalid_field */
    FL_ERR_IO,              /* file could not be read */
    FL_ERR_INTERNAL         /* an unexpected exception was caught */
} fl_status_t;

/* Bump allocator supplied by the caller (the nginx request pool). */
typedef struct {
    void   *(*alloc)(void *ctx, size_t size);   /* NULL on failure */
    void    *ctx;
} fl_alloc_t;

#define FL_MILLI_MAX          100000u   /* 100 % */
#define FL_BUCKETS            100000u
#define FL_MAX_VALUE_LEN      1024u     /* userId and trait values */
#define FL_MAX_TRAIT_NAME_LEN 128u
#define FL_MAX_PROJECT_NAME_LEN 64u     /* flags_project NAME */
#define FL_MAX_FLAG_NAME_LEN  128u      /* a flag's "name" */
/* A flag's key in the shared zone: "project\0flag". */
#define FL_KEY_LEN  (FL_MAX_PROJECT_NAME_LEN + 1 + FL_MAX_FLAG_NAME_LEN)
#define FL_WINDOW_MAX         3600u     /* seconds */
#define FL_MAX_FLAG_RULES     1000u     /* a flag's "rules" */
#define FL_MAX_FLAG_TARGETS   10000u    /* a flag's named users, on and off */
#define FL_MAX_FLAGS_FILE_SIZE  (32u * 1024 * 1024)   /* bytes; larger is refused */


/* ---------------------------------------------------------------- hashing */

uint32_t fl_murmur3_32(const void *data, size_t len, uint32_t seed) FL_NOEXCEPT;

/* A 64-bit hash of seed and the bytes (with their length), eight bytes a
 * step: for the worker's own tables (the memo of answers), never kept nor
 * sent, so free to change between versions. */
uint64_t fl_hash64(const void *data, size_t len, uint64_t seed) FL_NOEXCEPT;

/* murmur3_x86_32(name ":" key, 0) % 100000 */
uint32_t fl_bucket(const char *name, size_t name_len,
    const char *key, size_t key_len) FL_NOEXCEPT;

/* <0, 0, >0 like strcmp; returns 0 and sets *ok = 0 when either side does
 * not parse as MAJOR.MINOR.PATCH[-pre][+build] (optional leading v; "1" and
 * "1.2" read as 1.0.0 and 1.2.0). */
int fl_semver_cmp(const char *a, size_t alen, const char *b, size_t blen,
    int *ok) FL_NOEXCEPT;


/* --------------------------------------------------------- percentages */

typedef enum {
    FL_MILLI_OK = 0,
    FL_MILLI_SYNTAX,            /* not a decimal in JSON number syntax */
    FL_MILLI_RANGE,             /* not within [0, 100] */
    FL_MILLI_DECIMALS           /* more than 3 decimals */
} fl_milli_status_t;

/* The one reader of percentages (the flags file's rolloutPercentage and
 * rollback rate, override bodies, flags_rollback rate=): a number in JSON
 * number syntax, optionally followed by '%', in [0, 100] with at most 3
 * decimals, read exactly as milli-percent ("10%" -> 10000, "12.5" and
 * "1.25e1" -> 12500).  Out of range wins over too many decimals
 * ("100.0001" is out of range). */
fl_milli_status_t fl_parse_milli(const char *s, size_t len, uint32_t *milli)
    FL_NOEXCEPT;


/* ------------------------------------------------------- rollback policy */

typedef enum {
    FL_ROLLBACK_INHERIT = 0,    /* flag has no "rollback": use the http one */
    FL_ROLLBACK_OFF,            /* "rollback": false, or flags_rollback off */
    FL_ROLLBACK_ON
} fl_rollback_mode_t;

typedef struct {
    fl_rollback_mode_t  mode;
    uint32_t            min_errors;     /* count, >= 1 */
    uint32_t            rate_milli;     /* percent x 1000: 10 % -> 10000 */
    uint32_t            window;         /* seconds, 1 .. FL_WINDOW_MAX */
    uint32_t            min_sources;    /* distinct sources, 1 ..
                                         * FL_MIN_SOURCES_MAX (0 in a flag's
                                         * object: inherited) */
} fl_rollback_policy_t;

/* At most this many distinct sources can be required: a window block
 * remembers FL_SOURCE_SLOTS of them (docs/rollback.md, sources). */
#define FL_MIN_SOURCES_MAX              32u
#define FL_SOURCE_SLOTS                 64u

/* The built-in policy, flags_rollback's default: min_errors=20 rate=10%
 * window=60s min_sources=1. */
#define FL_ROLLBACK_DEFAULT_MIN_ERRORS  20u
#define FL_ROLLBACK_DEFAULT_RATE_MILLI  10000u
#define FL_ROLLBACK_DEFAULT_WINDOW      60u
#define FL_ROLLBACK_DEFAULT_MIN_SOURCES 1u

/* The built-in policy as a value, mode ON. */
fl_rollback_policy_t fl_rollback_policy_default(void) FL_NOEXCEPT;

/* A flag's policy from what its file says (flag_policy, as in
 * fl_flag_info_t.rollback) and the http-level policy (ON or OFF; NULL
 * reads as the default).  out is ON or OFF:
 *  - no "rollback" (INHERIT): the http policy;
 *  - "rollback": false (OFF): off, with the http policy's numbers (its
 *    window is still the one the flag counts over);
 *  - a "rollback" object (ON): its own fields, each one it leaves out (0)
 *    taken from the http policy, or from the built-in defaults when the
 *    http policy is off.
 * flag_policy and out may be the same object. */
void fl_rollback_policy_resolve(const fl_rollback_policy_t *flag_policy,
    const fl_rollback_policy_t *http_policy, fl_rollback_policy_t *out)
    FL_NOEXCEPT;


/* ------------------------------------------------- project (flags file) */

typedef struct fl_project_s  fl_project_t;   /* immutable after loading */

/* Loads and validates a flags file.  Only a regular file of at most
 * FL_MAX_FLAGS_FILE_SIZE bytes is read: anything else (a FIFO, a device, a
 * directory) is FL_ERR_IO "PATH: not a regular file" and a larger one
 * "PATH: larger than 33554432 bytes", both before a byte is read; a FIFO
 * never blocks.  On failure *out is NULL and err holds
 * "PATH:LINE:COL: reason" for JSON syntax errors, or
 * "PATH: flag \"NAME\": reason" / "PATH: segment \"NAME\": reason" /
 * "PATH: reason" for schema errors. */
fl_status_t fl_project_load(const char *path, fl_project_t **out,
    char *err, size_t err_len) FL_NOEXCEPT;

/* The same from memory; source_name is used in messages instead of PATH. */
fl_status_t fl_project_load_buffer(const char *data, size_t len,
    const char *source_name, fl_project_t **out,
    char *err, size_t err_len) FL_NOEXCEPT;

void fl_project_free(fl_project_t *p) FL_NOEXCEPT;

size_t fl_project_flag_count(const fl_project_t *p) FL_NOEXCEPT;

typedef struct {
    const char             *name;          /* NUL-terminated too */
    size_t                  name_len;
    int                     enabled;       /* the kill switch in the file */
    uint32_t                rollout_milli; /* configured percentage */
    size_t                  nsegments;
    uint64_t                def_hash;      /* hash of the definition */
    fl_rollback_policy_t    rollback;      /* mode INHERIT when absent */
} fl_flag_info_t;

/* 0 on success, -1 when i is out of range. */
int fl_project_flag_info(const fl_project_t *p, size_t i,
    fl_flag_info_t *out) FL_NOEXCEPT;

/* Segment name j of flag i (NUL-terminated), NULL when out of range. */
const char *fl_project_flag_segment(const fl_project_t *p, size_t i,
    size_t j, size_t *len) FL_NOEXCEPT;

/* Flag i's targeting as flags_status shows it (docs/http-api.md), the
 * members it has: `,"rules":[{"segments":[...],"rolloutPercentage":P},
 * ...]` and `,"targets":{"on":N,"off":M}` (counts, never the ids); nothing
 * for a flag with neither.  The bound is 0 for such a flag. */
size_t fl_project_flag_targeting_json_bound(const fl_project_t *p, size_t i)
    FL_NOEXCEPT;
size_t fl_project_flag_targeting_json(const fl_project_t *p, size_t i,
    char *buf) FL_NOEXCEPT;

/* Index of the flag with that name, or -1. */
long fl_project_find_flag(const fl_project_t *p, const char *name,
    size_t len) FL_NOEXCEPT;

/* Unknown fields are loaded and ignored, each named in a warning for
 * nginx -t: "PATH: flag \"NAME\": unknown field \"KEY\" ignored",
 * with "PATH: segment \"NAME\": rule N: ", "PATH: flag \"NAME\":
 * rollback: " or just "PATH: " before "unknown field" for the other
 * objects.  At most FL_MAX_PROJECT_WARNINGS are kept, then one
 * "PATH: and N more unknown fields ignored". */
#define FL_MAX_PROJECT_WARNINGS  32u

size_t fl_project_warning_count(const fl_project_t *p) FL_NOEXCEPT;

/* Warning i (NUL-terminated, owned by p), NULL when out of range. */
const char *fl_project_warning(const fl_project_t *p, size_t i) FL_NOEXCEPT;


/* ------------------------------------------------- caller (query string) */

typedef struct {
    const char  *name;
    size_t       name_len;
    const char  *value;
    size_t       value_len;
} fl_trait_t;

typedef struct {
    const char  *user_id;       /* NULL when absent or empty */
    size_t       user_id_len;
    fl_trait_t  *traits;        /* sorted by name (bytewise), names unique */
    size_t       ntraits;
} fl_user_t;

/* Decodes a raw query string (without '?'): '&'-separated name=value
 * pairs, '%XX' and '+' decoded in names and values, the last of repeated
 * parameters wins, unknown parameters ignored.  A malformed escape, a
 * decoded NUL byte, a userId or trait value over FL_MAX_VALUE_LEN bytes, a
 * trait name over FL_MAX_TRAIT_NAME_LEN bytes or more than max_traits
 * distinct traits give FL_ERR_QUERY with a message.  A name or value that
 * needs no decoding points into args (which must outlive *out); decoded
 * ones, and the traits, come from a. */
fl_status_t fl_parse_query(const char *args, size_t len, size_t max_traits,
    const fl_alloc_t *a, fl_user_t *out, char *err, size_t err_len)
    FL_NOEXCEPT;

/* Finds a trait by name in a fl_user_t (binary search); NULL if absent. */
const fl_trait_t *fl_user_trait(const fl_user_t *u, const char *name,
    size_t len) FL_NOEXCEPT;


/* ------------------------------------ nginx variables (variables.cpp) */

/* The variable name of a flag, without the "flag_" prefix: nginx
 * lowercases variable names, so ASCII letters are lowercased, and '-',
 * '.' and ':' become '_'; other bytes are kept.  out has room for len
 * bytes; returns len. */
size_t fl_flag_var_name(const char *name, size_t len, char *out) FL_NOEXCEPT;

/* The flag of p whose variable name is name (either case), or -1. */
long fl_project_find_var(const fl_project_t *p, const char *name,
    size_t len) FL_NOEXCEPT;

/* 1 when two flags of p have the same variable name: the first such pair
 * in file order (*first < *second); 0 when every name is distinct. */
int fl_project_var_collision(const fl_project_t *p, size_t *first,
    size_t *second) FL_NOEXCEPT;

/* The caller from values an nginx configuration computes (flags_context
 * user= and trait_NAME=): an empty value is an absent userId or trait.
 * The limits of fl_parse_query(): FL_ERR_QUERY with a message for a value
 * over FL_MAX_VALUE_LEN, a NUL byte, a trait name empty or over
 * FL_MAX_TRAIT_NAME_LEN, more than max_traits present traits, a name
 * given twice.  No byte is decoded.  Strings are not copied: *out points
 * into the caller's values; the sorted trait array comes from a. */
fl_status_t fl_user_from_values(const char *user_id, size_t user_id_len,
    const fl_trait_t *traits, size_t ntraits, size_t max_traits,
    const fl_alloc_t *a, fl_user_t *out, char *err, size_t err_len)
    FL_NOEXCEPT;


/* ------------------------------------------------------------ evaluation */

/* Why a flag is off at runtime, beside its effective percentage. */
typedef enum {
    FL_SWITCH_NONE = 0,
    FL_SWITCH_ROLLED_BACK,      /* rolled back (wins over an override) */
    FL_SWITCH_OVERRIDE_OFF,     /* overridden {"enabled": false} */
    FL_SWITCH_OVERRIDE_PERCENT  /* overridden {"rolloutPercentage": N}: N
                                   replaces every percentage of the flag
                                   and sets its named users aside */
} fl_switch_t;

typedef enum {
    FL_REASON_STATIC = 0,
    FL_REASON_TARGETING_MATCH,
    FL_REASON_SPLIT,
    FL_REASON_DISABLED,
    FL_REASON_DEFAULT           /* a flag with rules or targets: its
                                   fallthrough at 0 or 100 % decided */
} fl_reason_t;

typedef struct {
    uint8_t     enabled;            /* the flag's value for the caller */
    uint8_t     reason;             /* fl_reason_t (docs/ofrep.md) */
    uint8_t     has_segments;
    uint8_t     segment_matched;    /* has segments and one matched */
    uint8_t     rolled_back;        /* sw was FL_SWITCH_ROLLED_BACK */
    uint8_t     sw;                 /* the fl_switch_t evaluated with */
    uint8_t     targeted;           /* a named user: targets decided */
    uint16_t    rule;               /* 1 + the index of the rule that
                                       decided; 0: none did */
    uint32_t    rollout_milli;      /* the effective percentage */
} fl_detail_t;

/* Evaluates every flag of p for u (docs/evaluation.md), with the reason
 * OFREP reports (docs/ofrep.md).  effective_milli and sw (fl_switch_t per
 * flag, from fl_control_switch()) may each be NULL: the configured
 * percentages, no switch.  out has fl_project_flag_count(p) entries.
 * The one evaluation of the core: every answer (GET /flags, OFREP, the
 * SDK's, the variables) is written from what it gives. */
void fl_evaluate_detail(const fl_project_t *p, const fl_user_t *u,
    const uint32_t *effective_milli, const uint8_t *sw, fl_detail_t *out)
    FL_NOEXCEPT;

/* The values alone, for answers that show no reason (GET /flags, the
 * SDK's): out[i].enabled, .rollout_milli, .sw, .targeted and .rule as
 * fl_evaluate_detail() gives them; the reason is not meaningful. */
void fl_evaluate_values(const fl_project_t *p, const fl_user_t *u,
    const uint32_t *effective_milli, const uint8_t *sw, fl_detail_t *out)
    FL_NOEXCEPT;

/* The same for flag i alone; -1 when i is out of range. */
int fl_evaluate_flag_detail(const fl_project_t *p, size_t i,
    const fl_user_t *u, uint32_t effective_milli, uint8_t sw,
    fl_detail_t *out) FL_NOEXCEPT;

/* Upper bound of fl_flags_json() output for p. */
size_t fl_flags_json_bound(const fl_project_t *p) FL_NOEXCEPT;

/* Writes {"flags":[...]} for the results; returns the bytes written. */
size_t fl_flags_json(const fl_project_t *p, const fl_detail_t *r,
    char *buf) FL_NOEXCEPT;

/* 64-bit words of a bit set of n flags: bit i % 64 of word i / 64. */
#define FL_BIT_WORDS(n)  (((n) + 63) / 64)

/* GET /flags' answer for u in one pass: what fl_flags_json() writes for
 * fl_evaluate_values()'s results, byte for byte, into buf
 * (fl_flags_json_bound() bytes); enabled (FL_BIT_WORDS(flag count) words)
 * gets each flag's value.  Returns the bytes written. */
size_t fl_flags_answer(const fl_project_t *p, const fl_user_t *u,
    const uint32_t *effective_milli, const uint8_t *sw, uint64_t *enabled,
    char *buf) FL_NOEXCEPT;

/*
 * Per-flag counts of many answers' values, a word of 64 flags at a time:
 * bit-sliced ("vertical") counters, FL_TALLY_PLANES bit planes a word, so
 * adding an answer's bit set costs a few operations a word instead of one
 * increment a flag that was on.  tally holds FL_TALLY_WORDS(n) words,
 * zeroed by the caller; at most FL_TALLY_MAX fl_tally_add() between two
 * fl_tally_drain(), which adds each flag's count to counts[i * stride]
 * and zeroes the tally.
 */
#define FL_TALLY_PLANES   8
#define FL_TALLY_MAX      ((1u << FL_TALLY_PLANES) - 1)
#define FL_TALLY_WORDS(n) (FL_BIT_WORDS(n) * FL_TALLY_PLANES)

void fl_tally_add(uint64_t *tally, const uint64_t *bits, size_t n)
    FL_NOEXCEPT;
void fl_tally_drain(uint64_t *tally, size_t n, uint32_t *counts,
    size_t stride) FL_NOEXCEPT;

/* For tests: 0 turns off the 8-lane buckets of fl_flags_answer() (every
 * bucket then takes the scalar path), 1 turns them back on.  Returns the
 * previous setting, or -1 when this CPU has no AVX2 (the scalar path
 * always answers; nothing changes). */
int fl_lanes_set(int on) FL_NOEXCEPT;

/* For tests: how fl_flags_answer() evaluates the segments of the flags
 * its lanes decide: 1 only for the flags inside their percentage, after
 * the arithmetic; 0 all of them first; -1 (the default) as the project's
 * load chose.  The answer is the same either way.  Returns the previous
 * setting. */
int fl_answer_lazy_set(int mode) FL_NOEXCEPT;

/* Whether fl_flags_answer() evaluates p's segments that way (1) or all
 * first (0), as its load chose or fl_answer_lazy_set() forces. */
int fl_answer_lazy(const fl_project_t *p) FL_NOEXCEPT;

/* The bytes fl_flags_answer() copies for each flag's object where its
 * lanes run (64, 96 or 128, as p's load chose), 0 for no project; the
 * flags whose object is longer, or whose percentage in force is not the
 * configured one, are written one by one. */
unsigned fl_answer_width(const fl_project_t *p) FL_NOEXCEPT;


/* ------------------------------------------------------------------ JSON */

/* Bytes needed to escape len bytes (worst case, without quotes). */
size_t fl_json_escape_bound(size_t len) FL_NOEXCEPT;

/* {"error":code,"message":message} (typed: with "type":"error" first, as
 * sent on a WebSocket); code is a C string of [a-z_], message any bytes
 * (escaped).  Returns the bytes written, at most fl_error_json_bound(). */
size_t fl_error_json_bound(size_t code_len, size_t message_len) FL_NOEXCEPT;
size_t fl_error_json(int typed, const char *code, const char *message,
    size_t message_len, char *buf) FL_NOEXCEPT;

/* The OFREP event-stream event for a change: data: {"type":
 * "refetchEvaluation","etag":"<version>"} and a blank line. */
#define FL_SSE_EVENT_MAX  96u
size_t fl_sse_refetch_event(uint64_t version, char *buf) FL_NOEXCEPT;

/* flags_dashboard's event (docs/dashboard.md): data: {"type":"changed",
 * "seq":N} and a blank line, N the zone's last event. */
size_t fl_sse_changed_event(uint64_t seq, char *buf) FL_NOEXCEPT;

/* Escapes a string for use inside JSON quotes: '"', '\\' and the
 * control characters (\n \r \t \b \f, others as \u00XX), U+2028 and
 * U+2029 as \u2028 / \u2029; well-formed UTF-8 is copied as it is, and
 * each ill-formed part (overlong, surrogate, past U+10FFFF, cut or stray
 * bytes) becomes \ufffd, so the output is always valid UTF-8.  out
 * must have room for fl_json_escape_bound(len) bytes, all of which may be
 * written to (the copy goes sixteen bytes at a time).  Returns the bytes
 * of the escaped text. */
size_t fl_json_escape(const char *s, size_t len, char *out) FL_NOEXCEPT;

/* At most max bytes of s[0..len), never ending inside a UTF-8 sequence
 * (a cut sequence is dropped whole): how a client's name is shortened for
 * a message. */
size_t fl_utf8_prefix(const char *s, size_t len, size_t max) FL_NOEXCEPT;

/* Writes a percentage given in milli-percent as a JSON number: 25000 ->
 * "25", 12500 -> "12.5", 33333 -> "33.333".  Returns bytes written (<= 8). */
size_t fl_json_milli(uint32_t milli, char *out) FL_NOEXCEPT;

/* Writes "2026-11-22T13:05:09.123Z" (24 bytes, no NUL) for a UTC time in
 * milliseconds since the epoch.  Returns 24. */
size_t fl_format_time_ms(uint64_t ms, char *out) FL_NOEXCEPT;


/* ----------------------------------------------- shared per-flag state */

/*
 * A flag's mutable state lives in memory that the caller provides (slabs of
 * the nginx shared zone), in three kinds of block, none holding a pointer:
 *
 *   fl_totals_t     lifetime counters of a (project, flag); they outlive
 *                   definition and window changes;
 *   fl_control_t    the rollback and override of one definition of the
 *                   flag (def_hash): a new definition gets its own, which
 *                   takes the old one's (fl_control_carry());
 *   window block    one-second buckets of enabled evaluations and errors,
 *                   fl_window_size(seconds) bytes.
 *
 * Every operation is safe between processes without a lock: counters use
 * atomic instructions, and the buckets are (second, count) pairs updated
 * with compare-and-swap, so every count is exact.
 *
 * now_sec is a monotonic clock in seconds (it may repeat, and the code
 * tolerates it going backwards: an event is never lost, and buckets stamped
 * "in the future" count as current).
 */

typedef enum {
    FL_OVERRIDE_NONE = 0,
    FL_OVERRIDE_OFF,            /* {"enabled": false} */
    FL_OVERRIDE_PERCENT         /* {"rolloutPercentage": N} */
} fl_override_kind_t;

typedef struct {
    uint64_t    evaluations;
    uint64_t    enabled_evaluations;
    uint64_t    errors;             /* reports and upstream errors */
    uint64_t    errors_upstream;    /* of errors: counted at the log phase */
    /* upstream errors of requests the flag was on for, and off for: the
     * two cohorts' evaluations are enabled_evaluations and the rest */
    uint64_t    on_errors;
    uint64_t    off_errors;
    uint64_t    rollbacks;          /* rollbacks that took effect here */
    uint64_t    rollbacks_fleet;    /* of rollbacks: the fleet decided */
} fl_totals_t;

/* Who decided a rollback (fl_control_t.rb_by, flags_status's
 * "decidedBy", flags_rollbacks_total's "by" label). */
typedef enum {
    FL_DECIDED_UNKNOWN = 0,     /* restored from a state file */
    FL_DECIDED_RULE,            /* this host's rule, on its own counts */
    FL_DECIDED_FLEET            /* the fleet's rule (flags_sync) */
} fl_decided_t;

/* A ramp's state (the ramps section below). */
typedef struct fl_ramp_s  fl_ramp_t;

/* A ramped flag's witnesses (the witnesses section below). */
typedef struct fl_witness_s  fl_witness_t;

/* fl_control_set_ramp(): no ramp in force, the configured percentage
 * applies. */
#define FL_RAMP_NONE  UINT32_MAX

typedef struct {
    uint64_t    def_hash;
    uint64_t    control;        /* rolled back, override kind and value */
    uint64_t    rb_at_ms;
    uint64_t    rb_errors;
    uint64_t    rb_enabled;
    uint64_t    rb_sources;
    uint64_t    rb_by;          /* fl_decided_t */
} fl_control_t;

typedef struct {
    uint64_t    def_hash;
    uint32_t    window_seconds;

    uint64_t    evaluations;            /* lifetime */
    uint64_t    enabled_evaluations;    /* lifetime */
    uint64_t    errors;                 /* lifetime, every source */
    uint64_t    errors_upstream;        /* lifetime, of errors */
    uint64_t    on_evaluations;         /* lifetime: enabled_evaluations */
    uint64_t    on_errors;
    uint64_t    off_evaluations;        /* evaluations - enabled ones */
    uint64_t    off_errors;
    uint64_t    rollbacks;              /* lifetime, fl_count_rollback() */
    uint64_t    rollbacks_fleet;        /* of rollbacks */

    uint64_t    window_enabled;         /* within the window at now_sec */
    uint64_t    window_errors;
    uint64_t    window_sources;         /* distinct, at most FL_SOURCE_SLOTS */
    fl_rollback_policy_t  policy;       /* resolved: the one in force */

    int         rolled_back;
    uint64_t    rollback_at_ms;         /* wall clock, ms since epoch */
    uint64_t    rollback_errors;
    uint64_t    rollback_enabled;
    uint64_t    rollback_sources;
    fl_decided_t rollback_by;

    fl_override_kind_t  override_kind;
    uint32_t            override_milli;
    int                 ramp_in_force;  /* ramp_milli replaces the
                                         * configured percentage */
    uint32_t            ramp_milli;

    /* when this host first committed the definition (0: unknown) */
    uint64_t            defined_ms;

    /* a ramped flag's state (the caller sets both; NULL: no ramp): a
     * copy, or the zone's block read with fl_ramp_read() */
    const fl_ramp_t    *ramp;
    uint64_t            now_ms;         /* wall clock the ramp is read at */

    /* the window's last seconds, one by one (flags_status's
     * "window"."perSecond"; NULL: not read) */
    const struct fl_series_s *series;
} fl_state_snapshot_t;

/* A flag's window second by second: index 0 is the second of now_sec,
 * index k the one k seconds before; the last min(window, FL_SERIES_MAX)
 * seconds. */
#define FL_SERIES_MAX  60u

typedef struct fl_series_s {
    uint32_t    seconds;
    uint32_t    enabled[FL_SERIES_MAX];
    uint32_t    errors[FL_SERIES_MAX];
} fl_series_t;

/* A window block in the caller's memory, laid out by the core. */
typedef struct fl_window_s  fl_window_t;

/* One evaluation (enabled is its result), whatever asked for it: the
 * totals, the cohort it falls in (on: enabled) and, when enabled, the
 * window w. */
void fl_count_eval(fl_totals_t *t, fl_window_t *w, int64_t now_sec,
    int enabled) FL_NOEXCEPT;

/* n evaluations at once, enabled of them answered enabled: what n calls of
 * fl_count_eval() count, with one atomic operation a counter (a second's
 * window count saturates at 2^32 - 1 as one at a time would). */
void fl_count_evals(fl_totals_t *t, fl_window_t *w, int64_t now_sec,
    uint32_t n, uint32_t enabled) FL_NOEXCEPT;

/* Asks for the memory a later fl_count_evals(t, w, now_sec, ...) writes,
 * ahead of it: a fold of many flags would otherwise wait for each flag's
 * lines in turn, behind its locked operations.  Stage 0: the totals and
 * the window's header; stage 1, once the header has come: the second's
 * bucket.  Only a hint: it changes nothing. */
void fl_count_prefetch(const fl_totals_t *t, const fl_window_t *w,
    int64_t now_sec, int stage) FL_NOEXCEPT;


/*
 * One error of the flag in the cohort enabled says (the one rule of
 * reports and upstream errors, docs/rollback.md):
 *  - on: the flag's errors and its window (so it counts toward the
 *    absolute rule; its source is the caller's fl_count_source()), and
 *    the on cohort's errors;
 *  - off: the off cohort's errors, never the window: the flag was not on
 *    for that client.  An accepted report (upstream 0) is still one of
 *    the flag's lifetime errors; an upstream error (a status in
 *    flags_upstream_errors' range of a request that read the flag) of an
 *    off flag is not.
 * upstream also counts an on error as errors_upstream.
 */
void fl_count_error_cohort(fl_totals_t *t, fl_window_t *w, int64_t now_sec,
    int enabled, int upstream) FL_NOEXCEPT;

/* One accepted report of the on cohort: fl_count_error_cohort(t, w,
 * now_sec, 1, 0). */
void fl_count_error(fl_totals_t *t, fl_window_t *w, int64_t now_sec)
    FL_NOEXCEPT;

/* A rollback tripped (fl_control_try_rollback() returned 1): the lifetime
 * count flags_metrics shows.  A rollback restored from the state file is
 * not one. */
void fl_count_rollback(fl_totals_t *t, fl_decided_t by) FL_NOEXCEPT;

/* The source of an error (docs/rollback.md, sources): the user id when
 * there is one (a report's userId, flags_context's user=), else the
 * client address.  A 32-bit key, never 0. */
uint32_t fl_source_key(const char *user_id, size_t user_id_len,
    const char *addr, size_t addr_len) FL_NOEXCEPT;

/* An error of the flag came from source key (fl_source_key()): the
 * window remembers it with its second, in a table of FL_SOURCE_SLOTS. */
void fl_count_source(fl_window_t *w, int64_t now_sec, uint32_t key)
    FL_NOEXCEPT;

/* Adds to keys[0..*n) (at most max) the distinct source keys seen within
 * the last `seconds` seconds that are not there yet; *n is updated.  The
 * count of a flag's distinct sources is *n after every block of its
 * window list was added. */
void fl_window_sources(const fl_window_t *w, int64_t now_sec,
    uint32_t seconds, uint32_t *keys, size_t *n, size_t max) FL_NOEXCEPT;

/* The same with each key's age: ages[i] is how many seconds ago keys[i]
 * was last seen (0 for a second not yet past), the least of its slots
 * and blocks (flags_sync sends them, docs/sync.md). */
void fl_window_source_ages(const fl_window_t *w, int64_t now_sec,
    uint32_t seconds, uint32_t *keys, uint32_t *ages, size_t *n, size_t max)
    FL_NOEXCEPT;

/* A fresh control block: not rolled back, no override. */
void fl_control_init(fl_control_t *c, uint64_t def_hash) FL_NOEXCEPT;

/* 0 when rolled back or overridden off, the override percentage when
 * set, else configured_milli: a rollback takes precedence over an
 * override. */
uint32_t fl_control_effective(const fl_control_t *c,
    uint32_t configured_milli) FL_NOEXCEPT;

/* The effective percentage, as fl_control_effective() gives it, and the
 * switch (*sw, a fl_switch_t) from one read of the control block, so the
 * two always agree.  c NULL (a flag without room in the zone): the
 * configured percentage and FL_SWITCH_NONE. */
uint32_t fl_control_switch(const fl_control_t *c, uint32_t configured_milli,
    uint8_t *sw) FL_NOEXCEPT;

/* Rolls the flag back with this record; returns 1 when this call did it
 * (exactly one caller wins), 0 when it already was. */
int fl_control_try_rollback(fl_control_t *c, uint64_t at_ms,
    uint64_t errors, uint64_t enabled, uint64_t sources, fl_decided_t by)
    FL_NOEXCEPT;

/* Returns 1 if a rollback was cleared.  The caller empties the window. */
int fl_control_clear_rollback(fl_control_t *c) FL_NOEXCEPT;

void fl_control_set_override(fl_control_t *c, fl_override_kind_t kind,
    uint32_t milli) FL_NOEXCEPT;

/* Restores a rollback record (from the state file). */
void fl_control_restore_rollback(fl_control_t *c, uint64_t at_ms,
    uint64_t errors, uint64_t enabled, uint64_t sources, fl_decided_t by)
    FL_NOEXCEPT;

/*
 * A new definition of a flag keeps its mitigations (docs/rollback.md):
 * the rollback (with its record) and the override of from, the control
 * block of the definition it replaces, go into to, the new one's.  What
 * to has already stays unless from overrides it: a rollback of its own
 * keeps its record, an override of from's replaces to's, and nothing of
 * from undoes anything of to's (a block without a rollback or an
 * override carries none).  The ramp's percentage in to's control word
 * and its def_hash stay to's: a changed definition's ramp starts fresh.
 * Lock-free (to's word changes with one compare-and-swap).  Returns what
 * from had that to now holds: FL_CARRIED_ROLLBACK | FL_CARRIED_OVERRIDE,
 * 0 for nothing.  A rollback tripped on from after the call stays there.
 */
#define FL_CARRIED_ROLLBACK  1
#define FL_CARRIED_OVERRIDE  2
int fl_control_carry(fl_control_t *to, const fl_control_t *from) FL_NOEXCEPT;

/* Is the flag rolled back or overridden (what a state file keeps)? */
int fl_control_active(const fl_control_t *c) FL_NOEXCEPT;
int fl_control_rolled_back(const fl_control_t *c) FL_NOEXCEPT;

size_t fl_window_size(uint32_t seconds) FL_NOEXCEPT;

/* Makes fl_window_size(seconds) bytes at mem (8-byte aligned) a window
 * block of that length (1 .. FL_WINDOW_MAX seconds), all zero, and
 * returns it: the same address, typed. */
fl_window_t *fl_window_init(void *mem, uint32_t seconds) FL_NOEXCEPT;
uint32_t fl_window_seconds(const fl_window_t *w) FL_NOEXCEPT;

/* Adds to *enabled and *errors the events of the last `seconds` seconds
 * (at most the block's length) that the block holds. */
void fl_window_sums(const fl_window_t *w, int64_t now_sec, uint32_t seconds,
    uint64_t *enabled, uint64_t *errors) FL_NOEXCEPT;

/* Folds src's buckets into dst, by second: used when a window of another
 * length is retired, once nobody counts into src any more. */
void fl_window_merge(fl_window_t *dst, const fl_window_t *src) FL_NOEXCEPT;

/* Adds to out the block's counts of each of the last out->seconds seconds
 * (at most the block's length; set out->seconds, zero the counts, then
 * call it once a block of the flag). */
void fl_window_series(const fl_window_t *w, int64_t now_sec, fl_series_t *out)
    FL_NOEXCEPT;

void fl_window_clear(fl_window_t *w) FL_NOEXCEPT;

/* Whether a window's counts roll the flag back under a resolved (ON or
 * OFF) policy: errors >= min_errors, errors >= rate x enabled
 * evaluations (with no enabled evaluation, min_errors alone decides) and
 * sources >= min_sources. */
int fl_rollback_decide(uint64_t window_errors, uint64_t window_enabled,
    uint64_t window_sources, const fl_rollback_policy_t *policy)
    FL_NOEXCEPT;

/* What a window still lacks before the rule trips (all 0 when it would
 * trip; flags_status's "waitingFor"): errors to reach min_errors, errors
 * to reach the rate at the current enabled evaluations, distinct
 * sources to reach min_sources. */
typedef struct {
    uint64_t    errors;
    uint64_t    rate_errors;
    uint64_t    sources;
} fl_rollback_wait_t;

void fl_rollback_waiting(uint64_t window_errors, uint64_t window_enabled,
    uint64_t window_sources, const fl_rollback_policy_t *policy,
    fl_rollback_wait_t *out) FL_NOEXCEPT;

/* A snapshot from the three parts; the window sums are the caller's. */
void fl_state_snapshot(const fl_totals_t *t, const fl_control_t *c,
    uint32_t window_seconds, uint64_t window_enabled, uint64_t window_errors,
    fl_state_snapshot_t *out) FL_NOEXCEPT;


/* ------------------------------------------------------- error reports */

typedef struct {
    const char  *flag_name;     size_t flag_name_len;
    const char  *message;       size_t message_len;
    const char  *stack;         size_t stack_len;     /* NULL: absent/null */
    const char  *user_id;       size_t user_id_len;   /* NULL: absent/null */
    const char  *traits_json;   size_t traits_json_len;
                                /* the traits object re-serialized
                                 * compactly, NULL when absent/null */
    const struct fl_report_traits_s  *traits;
                                /* the same traits as read, for the
                                 * report's caller (fl_report_user(),
                                 * fl_report_cohort()) without reading
                                 * traits_json again; NULL: read it */
    int          has_enabled;   /* "enabled" was a boolean (null: absent) */
    int          enabled;       /* then the answer the client got: 0, 1 */
    /* Each NULL, or the string's JSON escaping (without the quotes) as
     * the body wrote it, which the log line copies instead of escaping
     * the string again.  Only in a body of ASCII read by the fast path,
     * and only where the body's text is exactly what fl_json_escape()
     * writes for the string: a string without escapes (then it is the
     * string itself, the same pointer), or one whose escapes are
     * \" \\ \b \f \n \r \t only. */
    const char  *flag_name_json;  size_t flag_name_json_len;
    const char  *message_json;    size_t message_json_len;
    const char  *stack_json;      size_t stack_json_len;
    const char  *user_id_json;    size_t user_id_json_len;
} fl_report_t;

typedef struct fl_report_parser_s  fl_report_parser_t;

#define FL_REPORT_MAX_DEPTH  64

/* A streaming parser: feed the body in any number of pieces, then finish.
 * All memory (yajl's included) comes from a. */
fl_report_parser_t *fl_report_parser_new(const fl_alloc_t *a) FL_NOEXCEPT;

/* FL_OK or FL_ERR_JSON (syntax, nesting over FL_REPORT_MAX_DEPTH, invalid
 * UTF-8); after an error further calls keep returning it. */
fl_status_t fl_report_parser_feed(fl_report_parser_t *rp,
    const unsigned char *data, size_t len) FL_NOEXCEPT;

/* The same as one fl_report_parser_feed() of the whole body, for a body
 * held in one buffer, and faster: a scanner made for this reads it and
 * yajl is used only where that scanner declines (src/core/json_scan.hpp);
 * outcomes and messages are yajl's either way.  Only as the first call
 * after fl_report_parser_new() (otherwise it is a plain feed); nothing
 * may be fed after it.  The report's strings may point into data, which
 * must outlive the report. */
fl_status_t fl_report_parser_feed_whole(fl_report_parser_t *rp,
    const unsigned char *data, size_t len) FL_NOEXCEPT;

/* Completes the parse and validates in the documented order: FL_ERR_JSON (empty
 * body, syntax, not an object), then FL_ERR_FIELD naming the first field
 * at fault.  On FL_OK *out points into memory from the allocator. */
fl_status_t fl_report_parser_finish(fl_report_parser_t *rp,
    fl_report_t *out, char *err, size_t err_len) FL_NOEXCEPT;

/* Bytes needed for fl_report_log_line(). */
size_t fl_report_log_bound(const fl_report_t *r, size_t project_len)
    FL_NOEXCEPT;

/* One log line, '\n' included:
 * {"time":"...","project":"...","flagName":"...","message":"...",
 *  "stack":"...","userId":"...","traits":{...},"enabled":true|false}
 * optional fields omitted when absent.  Returns bytes written. */
size_t fl_report_log_line(const fl_report_t *r, const char *project,
    size_t project_len, uint64_t now_ms, char *buf) FL_NOEXCEPT;

/* The reporter as a caller of the flags (fl_evaluate_detail()): userId
 * and traits read as fl_sdk_parse_request() reads a body (a trait is a
 * string, a number's text or "true" / "false"; null is absent; an empty
 * userId is none), sorted, with the limits of fl_parse_query().  Over a
 * limit (or a NUL byte): FL_ERR_FIELD with a message; the report itself
 * stays valid.  Strings point into r and memory from a. */
fl_status_t fl_report_user(const fl_report_t *r, size_t max_traits,
    const fl_alloc_t *a, fl_user_t *out, char *err, size_t err_len)
    FL_NOEXCEPT;

/* The cohort of an accepted report (docs/http-api.md). */
typedef enum {
    FL_COHORT_OFF = 0,
    FL_COHORT_ON,
    FL_COHORT_EVALUATE          /* the flag's answer for *user, now */
} fl_cohort_t;

/* "enabled" given: that cohort.  Else a userId or traits: evaluate the
 * flag for *user (fl_report_user(); a userId or traits over its limits
 * are left out, as if not sent).  Neither: on.  *user is set whenever the
 * report names a user, "enabled" or not, so that a claimed cohort can be
 * checked against the flag's answer for that user. */
fl_cohort_t fl_report_cohort(const fl_report_t *r, size_t max_traits,
    const fl_alloc_t *a, fl_user_t *user) FL_NOEXCEPT;

/* A report whose "enabled" contradicts what the flag answers the user it
 * names (evaluated, now): its error is counted in the claimed cohort, as
 * every report's is, but witnessed by no cohort of the regression rule
 * (docs/regression.md): a client cannot vouch for a cohort the server
 * does not give its user. */
int fl_report_disputed(const fl_report_t *r, int evaluated) FL_NOEXCEPT;


/* ------------------------------------------------------ admin overrides */

/* Parses a PUT body: {"enabled": false} or {"rolloutPercentage": N} with
 * N in [0, 100], at most 3 decimals.  FL_ERR_JSON or FL_ERR_FIELD with a
 * message otherwise. */
fl_status_t fl_parse_override(const char *body, size_t len,
    fl_override_kind_t *kind, uint32_t *milli, char *err, size_t err_len)
    FL_NOEXCEPT;


/* ------------------------------------------------------------ state file */

typedef struct {
    const char          *project;   size_t project_len;
    const char          *flag;      size_t flag_len;
    uint64_t             def_hash;
    int                  rolled_back;
    uint64_t             rollback_at_ms;
    uint64_t             rollback_errors;
    uint64_t             rollback_enabled;
    uint64_t             rollback_sources;
    fl_decided_t         rollback_by;
    fl_override_kind_t   override_kind;
    uint32_t             override_milli;
    /* a ramp's state, NULL when none is kept: the writer reads it with
     * fl_ramp_read(), the parser allocates it from its allocator */
    fl_ramp_t           *ramp;
} fl_saved_flag_t;

/* Parses a state file's content.  *out (from a) holds *n entries. */
fl_status_t fl_state_file_parse(const char *data, size_t len,
    const fl_alloc_t *a, fl_saved_flag_t **out, size_t *n,
    char *err, size_t err_len) FL_NOEXCEPT;

/* Serializes entries as the state file's content (a JSON document ending
 * in '\n'); returns bytes written.  fl_state_file_bound() first. */
size_t fl_state_file_bound(const fl_saved_flag_t *e, size_t n) FL_NOEXCEPT;
size_t fl_state_file_write(const fl_saved_flag_t *e, size_t n, char *buf)
    FL_NOEXCEPT;


/* ----------------------------------------------------------- status JSON */

/* Upper bound and writer of one flag's object in the flags_status answer
 * (docs/api.md), from the definition (flag i of p) and a snapshot of its state.
 * counted is 0 for a flag that found no room in the shared zone (its
 * snapshot is then all zeroes): the object says "zoneFull": true. */
size_t fl_status_flag_json_bound(const fl_project_t *p, size_t i)
    FL_NOEXCEPT;
size_t fl_status_flag_json(const fl_project_t *p, size_t i,
    const fl_state_snapshot_t *s, int counted, char *buf) FL_NOEXCEPT;

/* The zone's ring of recent control changes (docs/dashboard.md): what
 * flags_status shows as "events" and the operator's page lists. */
#define FL_EVENTS_MAX        64u
#define FL_EVENT_WHO_MAX     64u
#define FL_EVENT_DETAIL_MAX  160u

typedef enum {
    FL_EVENT_ROLLBACK = 0,
    FL_EVENT_CLEAR,
    FL_EVENT_OVERRIDE,
    FL_EVENT_OVERRIDE_REMOVED,
    FL_EVENT_STAGE,             /* a ramp started, advanced, finished */
    FL_EVENT_RAMP,              /* a ramp paused, resumed, restarted */
    FL_EVENT_DEFINITION,        /* a reload committed a new definition */
    FL_EVENT_KINDS
} fl_event_kind_t;

typedef enum {
    FL_EVENT_BY_RULE = 0,
    FL_EVENT_BY_FLEET,
    FL_EVENT_BY_ADMIN,
    FL_EVENT_BY_DEFINITION
} fl_event_by_t;

/* One event as the ring keeps it: fixed-size, no pointer.  Strings are
 * NUL-padded and their lengths are kept (any bytes: escaped when
 * written). */
typedef struct {
    uint64_t    seq;                /* 1, 2, ...; 0: the slot is free or
                                     * being written */
    uint64_t    at_ms;
    uint32_t    kind;               /* fl_event_kind_t */
    uint32_t    by;                 /* fl_event_by_t */
    uint32_t    project_len, flag_len, who_len, detail_len;
    char        project[FL_MAX_PROJECT_NAME_LEN];
    char        flag[FL_MAX_FLAG_NAME_LEN];
    char        who[FL_EVENT_WHO_MAX];
    char        detail[FL_EVENT_DETAIL_MAX];
} fl_event_t;

/* "events":[...] of flags_status, newest first, from n events in any
 * order (those with seq 0 skipped).  Bound first; returns bytes written. */
size_t fl_events_json_bound(size_t n) FL_NOEXCEPT;
size_t fl_events_json(const fl_event_t *e, size_t n, char *buf) FL_NOEXCEPT;


/* ================================================== Prometheus metrics
 *
 * flags_metrics (docs/metrics.md): the text exposition format 0.0.4, every
 * metric family once, with its HELP and TYPE lines, then its samples.
 * metrics.cpp.
 */

/* Why a report was refused: each is the error code of its JSON answer. */
typedef enum {
    FL_REFUSED_UNAUTHORIZED = 0,        /* no or malformed Bearer token */
    FL_REFUSED_INVALID_TOKEN,           /* a token of no project */
    FL_REFUSED_METHOD_NOT_ALLOWED,
    FL_REFUSED_UNSUPPORTED_MEDIA_TYPE,
    FL_REFUSED_PAYLOAD_TOO_LARGE,
    FL_REFUSED_INVALID_JSON,
    FL_REFUSED_INVALID_FIELD,
    FL_REFUSED_UNKNOWN_FLAG,
    FL_REFUSED_INTERNAL_ERROR,          /* the report log could not be written */
    FL_REFUSED_MAX
} fl_refused_t;

/* The error code of a reason ("invalid_json"), NULL when out of range. */
const char *fl_refused_code(unsigned reason) FL_NOEXCEPT;

/* One project: its name, its flags file, and per flag (file order) a
 * snapshot of its state and whether it found room in the zone. */
typedef struct {
    const char                 *name;
    size_t                      name_len;
    const fl_project_t         *project;
    const fl_state_snapshot_t  *snapshots;  /* fl_project_flag_count() */
    const uint8_t              *counted;    /* the same; NULL: all counted */
    /* its definitions (docs/definitions.md): the version served, and the
     * versions refused by reason: invalid, too_large, conflict, signature */
    uint64_t                    defs_version;
    uint64_t                    defs_rejected[4];
} fl_metrics_project_t;

#define FL_DEFS_REJECTED_MAX  4

/* What the module knows beside the flags. */
typedef struct {
    uint64_t    refused[FL_REFUSED_MAX];    /* reports refused, by reason */
    uint64_t    zone_used_bytes;            /* pages of the zone in use */
    uint64_t    zone_free_bytes;            /* free pages */
    /* live push connections of the whole zone; < 0: not rendered (the
     * glue counts them per worker only, see docs/metrics.md) */
    int64_t     push_connections;
    /* flags_sync (docs/sync.md); sync_enabled 0: none rendered */
    int         sync_enabled;
    int         sync_connected;
    uint64_t    sync_last_success_ms;   /* 0: never */
    uint64_t    sync_lag_ms;            /* since the last success */
    uint64_t    sync_failures;
    uint64_t    sync_stale_ms;          /* fl_sync_stale_ms() */
    uint64_t    sync_interval_ms;       /* its interval= */
} fl_metrics_module_t;

/* Upper bound of fl_metrics_write() for these projects. */
size_t fl_metrics_bound(const fl_metrics_project_t *p, size_t n) FL_NOEXCEPT;

/* The whole exposition; returns the bytes written (0 on an internal
 * error). */
size_t fl_metrics_write(const fl_metrics_project_t *p, size_t n,
    const fl_metrics_module_t *m, char *buf) FL_NOEXCEPT;

/* A label value escaped for the text format: a backslash, a double quote
 * and a newline become two bytes each (backslash-backslash,
 * backslash-quote, backslash-n); every other byte is copied.  out has room
 * for 2 x len bytes.  Returns the bytes written. */
size_t fl_prom_escape(const char *s, size_t len, char *out) FL_NOEXCEPT;


/* ==================================================== regression rule
 *
 * A ramp's comparison of its on cohort with its off cohort
 * (docs/regression.md): a mixture sequential probability ratio test on how
 * each tick's errors split between the cohorts, valid under continuous
 * monitoring.  regression.cpp.
 */

#define FL_REGRESSION_GRID  5       /* theta: 1.5, 2, 3, 5, 10 */

typedef struct {
    double      log_lr[FL_REGRESSION_GRID];   /* log likelihood ratios */
    uint64_t    ticks;                        /* ticks seen */
    uint64_t    errors_on;                    /* errors counted, by cohort */
    uint64_t    errors_off;
    uint64_t    decided_tick;                 /* the tick that decided */
    uint32_t    decided;                      /* 1: a regression is proven */
} fl_regression_t;

void fl_regression_init(fl_regression_t *r) FL_NOEXCEPT;

/* The grid's i-th ratio (0 outside it). */
double fl_regression_theta(int i) FL_NOEXCEPT;

/* One tick's counts: requests n1 (on) and n0 (off), errors e1 and e0.
 * A tick without a control group (n1 or n0 zero) or without an error
 * changes no evidence.  dispersion < 1 reads as 1; alpha outside (0, 1)
 * never decides.  Returns 1 once the mean over the grid of the likelihood
 * ratios (each raised to 1 / dispersion) has reached 1 / alpha, on this
 * tick or an earlier one. */
int fl_regression_tick(fl_regression_t *r, uint64_t n1, uint64_t n0,
    uint64_t e1, uint64_t e0, double dispersion, double alpha) FL_NOEXCEPT;

/* The log of the evidence (0 at the start), and the evidence as a share
 * of its bound 1 / alpha (1 decides; at most 1e9). */
double fl_regression_log_evidence(const fl_regression_t *r) FL_NOEXCEPT;
double fl_regression_ratio(const fl_regression_t *r, double alpha)
    FL_NOEXCEPT;


/* ============================================================ witnesses
 *
 * What the regression rule counts (docs/regression.md, "Who can make it
 * act").  An error is witnessed by the one who saw it: for a report the
 * client address (a report's userId and "enabled" are whatever its writer
 * says), for an upstream error flags_context's user, else the address
 * (nginx saw that request fail).  A witness counts at most one error a
 * cohort a tick, and at most FL_WITNESS_PER_EVIDENCE in each cohort of
 * one evidence (from a ramp's start or restart to its decision), so one
 * client, however many reports it writes for however long, moves the
 * evidence by two errors a cohort.  The on cohort's distinct witnesses
 * since the evidence began are kept too: the rule decides only when
 * there are enough of them.
 *
 * A block per ramped flag in the caller's memory (the zone), counted
 * into without a lock (one compare-and-swap a witness); the tick ring is
 * written by the ramp's step, which holds the zone's lock.  witness.cpp.
 */

#define FL_WITNESS_SLOTS        256u    /* a cohort's witnesses */
#define FL_WITNESS_PROBES       8u
#define FL_WITNESS_PER_EVIDENCE 2u      /* errors a witness, a cohort */
#define FL_WITNESS_SET          32u     /* the evidence's on witnesses */
#define FL_WITNESS_FLOOR_MIN    2u      /* never fewer required */
#define FL_WITNESS_RING         16u     /* closed ticks the backstop reads */

/* a tick's counts, as the backstop reads them */
typedef struct {
    uint64_t    n1, n0;         /* evaluations by cohort */
    uint64_t    w1, w0;         /* witnessed errors by cohort */
} fl_witness_tick_t;

struct fl_witness_s {
    uint64_t            errors_on;      /* lifetime, witnessed */
    uint64_t            errors_off;
    uint64_t            disputed;       /* reports whose "enabled" the
                                         * evaluation of their user
                                         * contradicts: not witnessed */
    uint64_t            slots[2][FL_WITNESS_SLOTS];  /* [on, off]: key,
                                         * epoch, count, tick */
    uint64_t            set[FL_WITNESS_SET];    /* epoch << 32 | key */
    /* the backstop's ticks (fl_witness_roll()), of the ramp's length,
     * on the monotonic clock: the next one's end, the totals at the last
     * one's end, how many closed, and the last FL_WITNESS_RING of them */
    uint64_t            roll_next_ms;
    fl_witness_tick_t   base;
    uint64_t            ring_pos;
    fl_witness_tick_t   ring[FL_WITNESS_RING];
};

void fl_witness_init(fl_witness_t *w) FL_NOEXCEPT;

/* The witness key of a report (its client address) and of an upstream
 * error (flags_context's user, else the address): fl_source_key()'s
 * hash, never 0. */
uint32_t fl_witness_key_report(const char *addr, size_t addr_len)
    FL_NOEXCEPT;

/* One error of the flag in the cohort enabled says, witnessed by key at
 * now_ms (a monotonic clock), for the ramp r (its evidence's epoch) of
 * tick seconds: counted when the witness was not counted in that cohort
 * within the tick (ticks are now_ms / (tick * 1000), the same in every
 * process of a host) and has fewer than FL_WITNESS_PER_EVIDENCE errors
 * in the evidence.  An on error's witness joins the evidence's set.
 * Returns 1 when counted. */
int fl_witness_count(fl_witness_t *w, const fl_ramp_t *r, int enabled,
    uint32_t key, uint64_t now_ms, uint32_t tick) FL_NOEXCEPT;


/* The distinct on witnesses of r's current evidence this block holds
 * (at most FL_WITNESS_SET): what a host tells the fleet (flags_sync). */
uint32_t fl_witness_seen(const fl_witness_t *w, const fl_ramp_t *r)
    FL_NOEXCEPT;

/* A report whose cohort was not witnessed (fl_report_disputed()). */
void fl_witness_dispute(fl_witness_t *w) FL_NOEXCEPT;



/* ================================================================ ramps
 *
 * A flag's "ramp" (docs/ramps.md): stages of percentages it climbs on its
 * own while it is healthy, each held for a time and a number of on
 * evaluations, watched by the regression rule above.  The definition
 * comes from the flags file; the state lives in the caller's memory (the
 * shared zone), changed only by the one process holding the zone's lock,
 * read by anyone.  ramp.cpp.
 */

#define FL_RAMP_MAX_STAGES      20u
#define FL_RAMP_MAX_SECONDS     31536000u   /* a year: hold, maxExtend */
#define FL_RAMP_TICK_MAX        3600u
#define FL_RAMP_DEFAULT_ALPHA_PPM       10000u  /* 0.01 */
#define FL_RAMP_DEFAULT_DISPERSION_MILLI 2000u  /* 2 */
#define FL_RAMP_DEFAULT_TICK            10u     /* seconds */

typedef struct {
    uint32_t    milli;          /* percentage, > 0, rising stage by stage */
    uint32_t    hold;           /* seconds; 0 in the last stage */
    uint32_t    min_requests;   /* on evaluations; 0: none */
} fl_ramp_stage_t;

typedef enum {
    FL_RAMP_INSUFFICIENT_HOLD = 0,      /* wait at the stage */
    FL_RAMP_INSUFFICIENT_ROLLBACK
} fl_ramp_insufficient_t;

typedef struct {
    uint32_t            nstages;        /* 1 .. FL_RAMP_MAX_STAGES */
    fl_ramp_stage_t     stages[FL_RAMP_MAX_STAGES];
    uint64_t            start_at_ms;    /* startAt; 0: when committed */
    uint32_t            max_extend;     /* seconds past hold */
    uint32_t            on_insufficient;    /* fl_ramp_insufficient_t */
    uint32_t            alpha_ppm;      /* alpha in millionths, 1 .. 999999 */
    uint32_t            dispersion_milli;   /* phi x 1000, >= 1000 */
    uint32_t            tick;           /* seconds, 1 .. FL_RAMP_TICK_MAX */
} fl_ramp_def_t;

/* Flag i's ramp, NULL when it has none (or i is out of range). */
const fl_ramp_def_t *fl_project_flag_ramp(const fl_project_t *p, size_t i)
    FL_NOEXCEPT;

/* Where a ramp stands (flags_status's "state"). */
typedef enum {
    FL_RAMP_PENDING = 0,        /* not started: startAt is ahead, or no
                                 * tick has run yet ("holding") */
    FL_RAMP_RUNNING,            /* within the stage's hold */
    FL_RAMP_HOLDING,            /* hold over, waiting (minRequests), or
                                 * stopped by a kill switch or override */
    FL_RAMP_PAUSED,             /* by flags_admin */
    FL_RAMP_DONE,               /* the last stage is reached */
    FL_RAMP_ROLLED_BACK         /* the flag was rolled back */
} fl_ramp_state_t;

/* Why a ramp rolled its flag back (fl_ramp_t.cause). */
typedef enum {
    FL_RAMP_CAUSE_NONE = 0,
    FL_RAMP_CAUSE_REGRESSION,   /* the regression rule */
    FL_RAMP_CAUSE_INSUFFICIENT, /* onInsufficient "rollback" */
    FL_RAMP_CAUSE_OTHER         /* another rollback (the absolute rule,
                                 * the fleet) stopped it */
} fl_ramp_cause_t;

/*
 * A ramp's state, in the caller's memory (8-byte aligned, no pointer).
 * Written only by whoever holds the zone's lock; every word is read
 * and written atomically, so a reader without the lock sees each member
 * whole (not always all of them from the same tick).
 */
struct fl_ramp_s {
    uint64_t        state;          /* fl_ramp_state_t */
    uint64_t        stage;          /* index into the definition's stages */
    uint64_t        start_ms;       /* when the ramp started (wall clock,
                                     * as it reads now: fl_ramp_clock()) */
    uint64_t        stage_ms;       /* when the stage started, moved on by
                                     * the time spent paused */
    uint64_t        paused_ms;      /* PAUSED: since when */
    uint64_t        next_tick_ms;   /* the current tick ends */
    uint64_t        stage_on;       /* on evaluations of the stage's ticks */
    uint64_t        stage_off;      /* off evaluations of the same */
    uint64_t        stage_changes;  /* lifetime: advances (flags_metrics) */
    uint64_t        cause;          /* fl_ramp_cause_t */
    uint64_t        decided_ms;     /* when the rule decided */
    uint64_t        stalled;        /* hold + maxExtend passed short of
                                     * minRequests (onInsufficient "hold") */
    /* the totals at the end of the last tick: the next one's counts are
     * the difference; based 0 (a new zone): the next tick takes them */
    uint64_t        based;
    uint64_t        base_on;
    uint64_t        base_off;
    uint64_t        base_on_errors;
    uint64_t        base_off_errors;
    /* the last closed tick's counts */
    uint64_t        last_n1, last_n0, last_e1, last_e0;
    fl_regression_t evidence;       /* since the ramp (re)started */
    /* the tick that decided: its counts */
    uint64_t        decided_n1, decided_n0, decided_e1, decided_e0;
    /* the evidence's witnesses (fl_witness_t): distinct witnesses of its
     * on errors as of the last tick, at most FL_WITNESS_SET; and the
     * evidence's epoch, moved on each time the evidence starts afresh */
    uint64_t        witnesses;
    uint64_t        evidence_epoch;
    /* the decision waits for witnesses: a proof the floor held back
     * (flags_status shows it; 0 once it decided or the evidence reset) */
    uint64_t        floor_held;
    /* the wall clock minus the monotonic clock when the times last moved
     * (fl_ramp_clock(); two's complement; 0: not known yet): how far the
     * wall clock stepped since, which start_ms, stage_ms, paused_ms and
     * next_tick_ms are moved by */
    uint64_t        clock_ms;
};

/* A fresh state: pending, stage 0. */
void fl_ramp_init(fl_ramp_t *r) FL_NOEXCEPT;

/* The distinct witnesses the regression rule needs (docs/regression.md,
 * "Who can make it act"): the policy's minSources, and never fewer than
 * FL_WITNESS_FLOOR_MIN. */
uint32_t fl_ramp_min_witnesses(uint32_t min_sources) FL_NOEXCEPT;

/* A copy read word by word (for a reader without the lock). */
void fl_ramp_read(const fl_ramp_t *r, fl_ramp_t *out) FL_NOEXCEPT;

/*
 * The ramp's durations run on the monotonic clock (docs/ramps.md, "Clocks"):
 * its times are wall-clock ms, and before each fl_ramp_step() and
 * fl_ramp_act() the caller (holding the lock) hands both clocks here, read
 * at the same moment.  When the wall clock stepped since the times last
 * moved (the difference of the two clocks changed by FL_RAMP_CLOCK_SLACK_MS
 * or more), the ramp's times move by the step: a hold, a tick or a pause
 * lasts as long as the monotonic clock says, and the times shown stay on
 * the wall clock as it reads now.
 * mono_ms 0: not known (nothing moves).  The monotonic clock must be one
 * every process of the host shares (CLOCK_MONOTONIC).
 */
void fl_ramp_clock(fl_ramp_t *r, uint64_t wall_ms, uint64_t mono_ms)
    FL_NOEXCEPT;
/* A difference of the clocks that moves less than this is no step (the
 * two are read one after the other, each in whole ms). */
#define FL_RAMP_CLOCK_SLACK_MS  50

/*
 * The ramp follows its flag's rollback at now_ms (wall clock): a rollback
 * (any rule's) makes it ROLLED_BACK at once (cause OTHER when the ramp did
 * not decide it); a cleared rollback leaves it PAUSED at its stage, its
 * clock stopped (PENDING when it never started), waiting for resume
 * (fresh evidence) or restart.  A done ramp stays done.
 * fl_ramp_step() and fl_ramp_act() callers run it first with the control
 * word read under the same lock, so no step or action sees a ramp that
 * disagrees with its flag.  Returns 1 when the state changed.
 */
int fl_ramp_follow(fl_ramp_t *r, uint64_t now_ms, int rolled_back)
    FL_NOEXCEPT;

/* What a tick or an action asks of the caller. */
typedef enum {
    FL_RAMP_EV_NONE = 0,
    FL_RAMP_EV_STARTED,         /* the ramp started: apply the stage */
    FL_RAMP_EV_ADVANCED,        /* a new stage: apply its percentage */
    FL_RAMP_EV_DONE,            /* the last stage is reached (and applied) */
    FL_RAMP_EV_STALLED,         /* hold + maxExtend passed short of
                                 * minRequests; the stage holds */
    FL_RAMP_EV_ROLLBACK         /* roll the flag back (cause says why) */
} fl_ramp_event_t;

/* What else a tick must know of the flag. */
typedef struct {
    uint64_t    on;             /* lifetime totals: on evaluations, */
    uint64_t    off;            /* off evaluations, */
    uint64_t    on_errors;      /* and their errors */
    uint64_t    off_errors;
    int         rolled_back;    /* the flag is rolled back */
    int         stopped;        /* a kill switch or an override holds it */
    int         frozen;         /* the fleet is away: no advancing */
    int         guard;          /* the regression rule may roll back
                                 * (rollback not off) */
    /* the flag's witnesses (NULL: none kept; the counts above are then
     * all the rule has, and no floor applies) and its policy's
     * minSources: the regression rule decides only once its on errors
     * came from fl_ramp_min_witnesses() distinct witnesses */
    fl_witness_t *witness;
    uint32_t    min_sources;
} fl_ramp_input_t;

/*
 * Runs the ramp at now_ms (wall clock, after fl_ramp_clock()): follows
 * the flag's rollback (fl_ramp_follow()), starts it (at startAt, or now
 * when it has none), closes the current tick when it is due (its counts:
 * the totals since the last one; the regression rule reads them while
 * the stage has a control group), and moves the stage on when its hold
 * has passed and it has its minRequests.  At most one event a call, the
 * most important: ROLLBACK, then DONE / ADVANCED / STARTED, then
 * STALLED.  The ramp's percentage afterwards is fl_ramp_milli().
 */
fl_ramp_event_t fl_ramp_step(const fl_ramp_def_t *d, fl_ramp_t *r,
    uint64_t now_ms, const fl_ramp_input_t *in) FL_NOEXCEPT;

typedef enum {
    FL_RAMP_PAUSE = 0,
    FL_RAMP_RESUME,
    FL_RAMP_ADVANCE,
    FL_RAMP_RESTART
} fl_ramp_action_t;

/* "pause", "resume", "advance", "restart" -> 0 and *out; -1 otherwise. */
int fl_ramp_action_parse(const char *s, size_t len, fl_ramp_action_t *out)
    FL_NOEXCEPT;

/* The body of PUT {admin}/ramps/P/F: {"action": "pause" | "resume" |
 * "advance" | "restart"}; FL_ERR_JSON or FL_ERR_FIELD with a message. */
fl_status_t fl_parse_ramp_action(const char *body, size_t len,
    fl_ramp_action_t *action, char *err, size_t err_len) FL_NOEXCEPT;

/* An operator's action (after fl_ramp_clock() and fl_ramp_follow()).
 * Returns the event (ADVANCED, DONE or STARTED when the percentage
 * changes, NONE otherwise) and sets *changed when the state changed at
 * all; -1 when the action does not apply (*why: a sentence), e.g.
 * resuming a ramp that is not paused.  resume after a cleared rollback
 * starts the evidence afresh.  restart begins again at stage 0 with no
 * evidence; the caller clears a rollback. */
int fl_ramp_act(const fl_ramp_def_t *d, fl_ramp_t *r, uint64_t now_ms,
    fl_ramp_action_t action, int *changed, const char **why) FL_NOEXCEPT;

/* The percentage the ramp serves: its stage's once started, else
 * configured_milli. */
uint32_t fl_ramp_milli(const fl_ramp_def_t *d, const fl_ramp_t *r,
    uint32_t configured_milli) FL_NOEXCEPT;

/* Whether the regression rule is the flag's guard now, in place of the
 * absolute rule (docs/ramps.md): started, neither done nor rolled back,
 * the stage below 100 % and its off cohort counted. */
int fl_ramp_guards(const fl_ramp_def_t *d, const fl_ramp_t *r) FL_NOEXCEPT;

/* Closes the backstop's tick when it is due at now_ms (monotonic): the
 * counts since the last one (in: the cohorts' evaluations and witnessed
 * errors) into the ring.  The one who holds the zone's lock calls it:
 * the ramps' timer, or flags_sync's round when the fleet runs the ramp. */
void fl_witness_roll(fl_witness_t *w, const fl_ramp_input_t *in,
    uint64_t now_ms, uint32_t tick) FL_NOEXCEPT;

/* Whether the absolute rule may roll back a flag whose ramp guards it
 * (docs/ramps.md, "The backstop"): its on cohort fails, in the
 * backstop's ticks that cover the window (those closed by
 * fl_witness_roll(), and the open one read from the totals in in), at
 * least FL_BACKSTOP_RATIO times as often as its off
 * cohort, by witnessed errors.  A failure of the whole site fails both
 * alike and is not rolled back; one the off cohort does not share is. */
#define FL_BACKSTOP_RATIO  2u
int fl_ramp_backstop(const fl_ramp_def_t *d, const fl_ramp_t *r,
    const fl_witness_t *w, const fl_ramp_input_t *in, uint32_t window)
    FL_NOEXCEPT;

/* "running", "holding", "paused", "done", "rolledBack" */
const char *fl_ramp_state_name(fl_ramp_state_t s) FL_NOEXCEPT;

/* The ramp's percentage into the control word, which the request path
 * reads in the same load as the rollback and the override: milli, or
 * FL_RAMP_NONE when the configured percentage applies. */
void fl_control_set_ramp(fl_control_t *c, uint32_t milli) FL_NOEXCEPT;
uint32_t fl_control_ramp(const fl_control_t *c) FL_NOEXCEPT;

/* The "ramp" member of flags_status (docs/ramps.md), for flag i of p with
 * its state r read at now_ms.  Upper bound first; returns bytes written. */
#define FL_RAMP_JSON_BOUND  (1500u + 60u * FL_RAMP_MAX_STAGES)
size_t fl_ramp_status_json(const fl_ramp_def_t *d, const fl_ramp_t *r,
    uint64_t now_ms, int rolled_back, char *buf) FL_NOEXCEPT;


/* ============================================================ dashboard
 *
 * flags_dashboard (docs/dashboard.md): the page's files, built into the
 * core, and its config.json.  dashboard.cpp.
 */

typedef struct {
    const unsigned char    *data;
    size_t                  len;
    const char             *type;       /* Content-Type, NUL-terminated */
    uint64_t                etag;       /* strong tag of the bytes */
} fl_asset_t;

/* The file at path below the location ("" and "index.html": the page,
 * "app.js", "app.css"): 0 and *out, or -1. */
int fl_dashboard_asset(const char *path, size_t len, fl_asset_t *out)
    FL_NOEXCEPT;

/* {"admin":"/flags-admin/"|null,"status":"status.json","events":"events"}
 * (admin NULL: the page is read-only). */
size_t fl_dashboard_config_json_bound(size_t admin_len) FL_NOEXCEPT;
size_t fl_dashboard_config_json(const char *admin, size_t admin_len,
    char *buf) FL_NOEXCEPT;


/* ================================================================ OFREP
 *
 * The OpenFeature Remote Evaluation Protocol (docs/ofrep.md): the context
 * of a POST body, a reason per flag, the single and bulk answers, their
 * errors, and the ETag of an answer.  ofrep.cpp, the reason in
 * evaluate.cpp, the ETags (GET /flags' too) in etag.cpp.
 */

/* A 64-bit hash of everything an answer for u depends on: each flag's
 * definition hash, effective percentage and switch (sw may be NULL, as
 * for GET /flags, whose bytes do not tell a rollback from an override)
 * and the normalised caller (userId, then the sorted traits).  The same
 * inputs give the same value in every worker and on every host. */
uint64_t fl_answer_etag(const fl_project_t *p, const fl_user_t *u,
    const uint32_t *effective_milli, const uint8_t *sw) FL_NOEXCEPT;

/* GET /flags' ETag: fl_answer_etag() with only the switches that change
 * its body at the same percentages (an override's percentage on a flag
 * with rules or named users); sw NULL: fl_answer_etag(p, u, eff, NULL). */
uint64_t fl_flags_etag(const fl_project_t *p, const fl_user_t *u,
    const uint32_t *effective_milli, const uint8_t *sw) FL_NOEXCEPT;

/* fl_flags_etag() in two steps: the flags' part, the same for every
 * caller of one answer version, then the caller's:
 * fl_flags_etag_from(prefix of (p, eff, sw), u) == fl_flags_etag(p, u,
 * eff, sw). */
typedef struct {
    uint64_t    h;
    uint64_t    n;
} fl_etag_prefix_t;

void fl_flags_etag_prefix(const fl_project_t *p,
    const uint32_t *effective_milli, const uint8_t *sw,
    fl_etag_prefix_t *out) FL_NOEXCEPT;
uint64_t fl_flags_etag_from(const fl_etag_prefix_t *prefix,
    const fl_user_t *u) FL_NOEXCEPT;

/* A strong entity tag for a header: '"' + 16 lowercase hex digits + '"',
 * 18 bytes, no NUL.  Returns 18. */
#define FL_ETAG_LEN  18u
size_t fl_etag_format(uint64_t etag, char *out) FL_NOEXCEPT;

/* If-None-Match (RFC 9110 13.1.2): 1 when the field value (one header,
 * or several joined with ',') is "*" or lists an entity tag that equals
 * etag by the weak comparison ("W/" ignored), else 0; a malformed list
 * matches nothing. */
int fl_etag_none_match(const char *value, size_t len, uint64_t etag)
    FL_NOEXCEPT;

/* The caller from an OFREP request body, {"context": {...}}: targetingKey
 * is the userId, every other property a trait (strings as they are,
 * numbers as their JSON text, booleans "true"/"false", null absent).
 * An empty body (or whitespace) and a missing or null context are an
 * empty context.  FL_ERR_JSON (-> PARSE_ERROR): not JSON, not well-formed
 * UTF-8, nested deeper than FL_REPORT_MAX_DEPTH, not an object.
 * FL_ERR_FIELD (-> INVALID_CONTEXT): context not an object, a property
 * that is an object or an array, targetingKey not a string, a NUL byte,
 * an empty trait name, or over the limits of fl_parse_query() (values
 * FL_MAX_VALUE_LEN, names FL_MAX_TRAIT_NAME_LEN, max_traits).  The
 * message names the property. */
fl_status_t fl_ofrep_parse_context(const char *body, size_t len,
    size_t max_traits, const fl_alloc_t *a, fl_user_t *out,
    char *err, size_t err_len) FL_NOEXCEPT;

/* The 200 body of a single evaluation of flag i:
 * {"key":..,"value":..,"reason":..,"variant":"on"|"off","metadata":{..}} */
size_t fl_ofrep_flag_json_bound(const fl_project_t *p, size_t i)
    FL_NOEXCEPT;
size_t fl_ofrep_flag_json(const fl_project_t *p, size_t i,
    const fl_detail_t *d, char *buf) FL_NOEXCEPT;

/* The 200 body of a bulk evaluation: {"flags":[...]} in file order, then,
 * when stream_path is not NULL, "eventStreams" with one SSE endpoint whose
 * requestUri is stream_path (the OFREP location's path as nginx decoded
 * it, ending in '/') + "v1/events?token=" + token, both percent-encoded.
 * d has fl_project_flag_count(p) entries. */
size_t fl_ofrep_bulk_json_bound(const fl_project_t *p, size_t path_len,
    size_t token_len) FL_NOEXCEPT;
size_t fl_ofrep_bulk_json(const fl_project_t *p, const fl_detail_t *d,
    const char *stream_path, size_t path_len, const char *token,
    size_t token_len, char *buf) FL_NOEXCEPT;

/* The ETag of a bulk answer: fl_answer_etag() and the bytes that
 * fl_ofrep_bulk_json() adds (the event stream, stream_path NULL: none). */
uint64_t fl_ofrep_bulk_etag(const fl_project_t *p, const fl_user_t *u,
    const uint32_t *effective_milli, const uint8_t *sw,
    const char *stream_path, size_t path_len, const char *token,
    size_t token_len) FL_NOEXCEPT;

/* An error body: {"key":..,"errorCode":..,"errorDetails":..}, or without
 * "key" when key is NULL (the bulk form).  details is a message for a
 * person (ill-formed UTF-8 becomes U+FFFD, as everywhere). */
size_t fl_ofrep_error_json_bound(size_t key_len, size_t details_len)
    FL_NOEXCEPT;
size_t fl_ofrep_error_json(const char *key, size_t key_len, const char *code,
    const char *details, size_t details_len, char *buf) FL_NOEXCEPT;
/* ----------------------------------------- DeployRamp SDK API (sdk.cpp) */

/*
 * POST {loc}flags of flags_sdk (docs/sdk.md): the body
 * {"userId": "...", "traits": {...}} as the caller of fl_evaluate_detail(), with
 * the limits of fl_parse_query().  A trait value may be a string, a number
 * (its text as sent) or a boolean ("true" / "false"); null is the same as
 * leaving the trait (or userId) out; an empty userId is no userId.
 * Unknown members are ignored; of duplicate keys the last one wins.
 * FL_ERR_JSON: empty, not JSON, not well-formed UTF-8, nested deeper than
 * FL_REPORT_MAX_DEPTH, not an object (the messages of a report body).
 * FL_ERR_FIELD: userId not a string, traits not an object, a trait that
 * is an object or an array, an empty trait name, a NUL byte, a limit
 * exceeded.  Strings of *out point into memory from a.
 */
fl_status_t fl_sdk_parse_request(const char *body, size_t len,
    size_t max_traits, const fl_alloc_t *a, fl_user_t *out, char *err,
    size_t err_len) FL_NOEXCEPT;

/*
 * {"flags":[...]} as the DeployRamp SDK reads it, resolved for u: r is
 * what fl_evaluate_detail(p, u, effective, sw, r) gave (its rollout_milli is the
 * effective percentage; r NULL means the configured ones).  Every
 * percentage written is 100 or 0; rules the SDK cannot check are decided
 * for u (docs/sdk.md).  Upper bound first; returns the bytes written.
 */
size_t fl_sdk_flags_json_bound(const fl_project_t *p) FL_NOEXCEPT;
size_t fl_sdk_flags_json(const fl_project_t *p, const fl_user_t *u,
    const fl_detail_t *r, char *buf) FL_NOEXCEPT;

/* The live channel's {"type":"flags_refreshed","flags":[...]} for u: the
 * same flags array as fl_sdk_flags_json(). */
size_t fl_sdk_refresh_json_bound(const fl_project_t *p) FL_NOEXCEPT;
size_t fl_sdk_refresh_json(const fl_project_t *p, const fl_user_t *u,
    const fl_detail_t *r, char *buf) FL_NOEXCEPT;

typedef enum {
    FL_SDK_MSG_UNKNOWN = 0,         /* a type this module does not know */
    FL_SDK_MSG_EVALUATION_BATCH,    /* "evaluation_batch" */
    FL_SDK_MSG_PERFORMANCE_BATCH    /* "performance_batch" */
} fl_sdk_msg_type_t;

/* One evaluation an SDK reports: which flag, and what it answered. */
typedef struct {
    const char         *flag_name;
    size_t              flag_name_len;
    int                 result;
} fl_sdk_eval_t;

typedef struct {
    fl_sdk_msg_type_t   type;
    const char         *type_name;      /* "type" as sent (may hold NUL) */
    size_t              type_name_len;
    size_t              nevents;        /* elements of the batch's array */
    int                 has_user;       /* user below is the last event's */
    fl_user_t           user;
    fl_sdk_eval_t      *evals;          /* evaluation_batch: the events with */
    size_t              nevals;         /* a string flagName and a boolean
                                         * result, in order; others skipped */
} fl_sdk_message_t;

/*
 * A message an SDK sends on the live channel: {"type": ..., ...}.  For
 * "evaluation_batch" ("evaluations": [...]) and "performance_batch"
 * ("performanceEvents": [...]) the userId and traits of the batch's last
 * event are read into out->user like fl_sdk_parse_request() reads a body
 * (same limits; messages name the event, "evaluations[3].userId must be a
 * string").  Another type is FL_OK with FL_SDK_MSG_UNKNOWN and its name.
 * FL_ERR_JSON as for a body (with "message" for "request body");
 * FL_ERR_FIELD: no "type" or not a string, the batch's array not an
 * array, its last event not an object, or that event's userId/traits at
 * fault.  Strings point into memory from a.
 */
fl_status_t fl_sdk_parse_message(const char *data, size_t len,
    size_t max_traits, const fl_alloc_t *a, fl_sdk_message_t *out,
    char *err, size_t err_len) FL_NOEXCEPT;


/* ------------------------------------------------------------ fleet sync */

/* The Lua script flags_sync runs in Redis (src/core/sync_script.cpp,
 * docs/sync.md); *len is set to its length. */
const char *fl_sync_script(size_t *len) FL_NOEXCEPT;

/* The Lua script that keeps a runtime project's definitions in Redis: one
 * version for the fleet, written by compare-and-set (src/core/
 * sync_script.cpp, docs/sync.md "One version for the fleet"). */
const char *fl_sync_defs_script(size_t *len) FL_NOEXCEPT;

/* The bytes a runtime version's signature (HMAC-SHA256 under flags_sync
 * key_file=) covers: "flags-definitions\n" project "\n" version "\n"
 * at_ms "\n" entry "\n" document (numbers in decimal).  Returns the
 * length written, or 0 when cap is less than it; the bound is enough. */
size_t fl_sync_defs_signed_bound(size_t project_len, size_t entry_len,
    size_t doc_len) FL_NOEXCEPT;
size_t fl_sync_defs_signed(const char *project, size_t project_len,
    uint64_t version, uint64_t at_ms, const char *entry, size_t entry_len,
    const char *doc, size_t doc_len, char *out, size_t cap) FL_NOEXCEPT;

/* What the definitions script's "get" answer means to a host serving
 * version mine: fleet is the fleet's version (0: none), carries_version
 * whether the answer holds it (the fleet's is newer), at_ms its time.
 * *refused / *refused_at: the fleet's version this host last refused,
 * forgotten once the fleet holds an older one.  CHECK: verify it (the
 * signature, the entry, the document) and serve it; SEED: send this
 * host's version at the next round (the fleet lacks it; never for
 * version 1, the file); NOTHING: up to date, or refused already. */
typedef enum {
    FL_SYNC_DEFS_NOTHING = 0,
    FL_SYNC_DEFS_CHECK,
    FL_SYNC_DEFS_SEED
} fl_sync_defs_do_t;

fl_sync_defs_do_t fl_sync_defs_get(uint64_t fleet, uint64_t mine,
    int carries_version, uint64_t at_ms, uint64_t *refused,
    uint64_t *refused_at) FL_NOEXCEPT;

/* A host's name in the fleet's records (flags_sync host=, and a name read
 * back from Redis before a log line shows it): 1 to FL_SYNC_HOST_MAX
 * bytes of letters, digits, '.', '-', '_' or ':'.  No space: a space ends
 * a field of a rollback record.  1 when valid. */
#define FL_SYNC_HOST_MAX  64u
int fl_sync_host_valid(const char *name, size_t len) FL_NOEXCEPT;

/* A flag's rollback and override as one number, how a round sees that
 * either changed (src/core/sync_round.cpp): bit 0 rolled back, bits 1-7
 * the override kind, bits 8 and up its milli-percent (FL_OVERRIDE_PERCENT
 * only; the others carry 0). */
uint64_t fl_sync_control(int rolled_back, fl_override_kind_t kind,
    uint32_t milli) FL_NOEXCEPT;

/*
 * A round (src/core/sync_round.cpp): one script call a project, whose
 * KEYS and ARGV the core writes (the glue formats them as a command).
 * The glue fills one fl_sync_flag_t a flag of the project from the zone,
 * fl_sync_round_plan() decides which flags send an entry, the glue reads
 * the window's sources of the entries that want them, and
 * fl_sync_round_args() writes the arguments.
 */
typedef struct {
    const char         *prefix;         /* flags_sync prefix= */
    size_t              prefix_len;
    const char         *project;
    size_t              project_len;
    const char         *host;           /* this host's name (host=) */
    size_t              host_len;
    uint64_t            epoch;          /* the fleet's state last read: */
    uint64_t            ver;            /* 0, 0 before the first answer */
    /* this host's zone's random id and, under it, how many of this
     * project's calls Redis acknowledged (docs/sync.md, "What a failover
     * loses"); resend: Redis lacks calls it had acknowledged, so every
     * counted flag sends its cumulative counts this round */
    uint64_t            incarnation;
    uint64_t            calls;
    int                 resend;
} fl_sync_round_t;

typedef enum {
    FL_SYNC_NO_ENTRY = 0,       /* not counted, or nothing to say: the
                                 * deltas are dropped (baseline := totals) */
    FL_SYNC_ENTRY,              /* an entry, no error delta */
    FL_SYNC_ENTRY_SOURCES       /* an entry with an error delta: the
                                 * window's sources go with it */
} fl_sync_entry_t;

/* One flag of a round: what the zone holds, then what the round decided. */
typedef struct {
    const char             *name;
    size_t                  name_len;
    uint64_t                def_hash;
    int                     counted;    /* 0: the zone had no room for it */
    fl_rollback_policy_t    policy;     /* resolved: mode ON or OFF */
    uint64_t                control;    /* fl_sync_control() of it now */
    uint64_t                known;      /* what the fleet last said of it */
    uint64_t                rb_at_ms;   /* the rollback's record */
    uint64_t                rb_errors;
    uint64_t                rb_enabled;
    uint64_t                rb_sources;
    uint64_t                errors;     /* the lifetime totals */
    uint64_t                enabled;    /* enabled evaluations */
    uint64_t                base_errors;    /* of them, what the fleet */
    uint64_t                base_enabled;   /* has counted */
    /* the cumulative counts this incarnation has had acknowledged: a
     * round sends acked + (totals - base), and acked */
    uint64_t                acked_errors;
    uint64_t                acked_enabled;
    const uint32_t         *source_keys;    /* FL_SYNC_ENTRY_SOURCES: */
    const uint32_t         *source_ages;    /* fl_window_source_ages() */
    size_t                  nsources;       /* at most FL_SOURCE_SLOTS */
    /* a ramped definition (NULL: none): the fleet runs its ramp
     * (docs/sync.md, "Ramps across the fleet"); its cohorts' lifetime
     * totals and, of them, what the fleet has counted */
    const fl_ramp_def_t    *ramp_def;
    uint64_t                on, off, on_errors, off_errors;
    uint64_t                base_on, base_off, base_on_errors,
                            base_off_errors;
    /* of the cohorts, the cumulative counts this incarnation has had
     * acknowledged, as acked_errors is of the errors: a round sends
     * acked + (totals - base) of each, and acked */
    uint64_t                acked_on, acked_off, acked_on_errors,
                            acked_off_errors;
    int                     ramp_stopped;   /* kill switch or override */
    int                     ramp_guard;     /* rollback not off */
    /* this host's distinct witnesses of the evidence's on errors
     * (fl_witness_seen()) and the floor a proof needs
     * (fl_ramp_min_witnesses()); 0 and 0 without a witness block */
    uint32_t                ramp_witnesses;
    uint32_t                ramp_min_witnesses;
    uint64_t                ramp_actions;   /* FL_SYNC_RAMP_ACTIONS */
    const fl_ramp_t        *ramp_seed;      /* non-NULL: this host's copy,
                                             * taken by a fleet without
                                             * one (Redis restarted) */
    fl_sync_entry_t         entry;      /* fl_sync_round_plan() sets it */
} fl_sync_flag_t;

/* Operator actions waiting for the fleet, oldest first: 4 bits each,
 * fl_ramp_action_t + 1, 0 ends them (at most FL_SYNC_RAMP_ACTIONS_MAX).
 * fl_sync_ramp_actions_push() appends one (0 when full), _count() says
 * how many there are, _drop() removes the n oldest (those the fleet
 * acknowledged). */
#define FL_SYNC_RAMP_ACTIONS_MAX  16u
int fl_sync_ramp_actions_push(uint64_t *q, fl_ramp_action_t a) FL_NOEXCEPT;
unsigned fl_sync_ramp_actions_count(uint64_t q) FL_NOEXCEPT;
uint64_t fl_sync_ramp_actions_drop(uint64_t q, unsigned n) FL_NOEXCEPT;

/* The script's arguments an entry, and a round's KEYS and ARGV for
 * `entries` entries: the control hash, three keys an entry (its window,
 * its sources, its ramp), this host's hash; epoch, version, the count,
 * the host and its acknowledged calls, then the entries'. */
#define FL_SYNC_ENTRY_ARGS           15u
#define FL_SYNC_ENTRY_KEYS           3u
#define FL_SYNC_ROUND_ARGC(entries)  (7 + 18 * (size_t) (entries))

/* Whether the counts a flag made while Redis was away for away_ms go to
 * the fleet when it is back (1) or are dropped (0): kept only under an
 * active policy whose window is longer than the outage; older counts
 * would land in the current second as new (docs/sync.md, "What a
 * failover loses").  away_ms UINT64_MAX: never had a round. */
int fl_sync_away_keeps(uint64_t away_ms, const fl_rollback_policy_t *p)
    FL_NOEXCEPT;

/* Sets each flag's entry and returns how many send one; *with_sources
 * (when not NULL) is set to how many of them want their sources.  A flag
 * sends an entry when its control differs from what the fleet last said
 * (taken as none while the epoch is 0), under an active policy and not
 * rolled back when it has a delta (or, with r->resend, acknowledged
 * counts), and always when it is ramped (the fleet steps its ramp). */
size_t fl_sync_round_plan(const fl_sync_round_t *r, fl_sync_flag_t *flags,
    size_t n, size_t *with_sources) FL_NOEXCEPT;

/* Bytes of buf that fl_sync_round_args() may use for these flags. */
size_t fl_sync_round_bound(const fl_sync_round_t *r,
    const fl_sync_flag_t *flags, size_t n) FL_NOEXCEPT;

/*
 * Writes KEYS then ARGV of the round (docs/sync.md, the script) into
 * argv[]/argvlen[]: the strings point into buf, into r's host and the
 * flags' names, or to constants.  Keys are PREFIX{project}:ctl, then
 * PREFIX{project}:w:<def>:<flag> of each entry, then :s:<def>:<flag> of
 * each, then :r:<def>:<flag> of each, then this host's hash
 * PREFIX{project}:h:<host>:<incarnation, 16 hex digits>; ARGV is epoch,
 * version, entries, host, its acknowledged calls, then per entry its
 * name, <def> (16 hex digits), the rollback op ("-", "set", "clr") and
 * record "at_ms errors enabled host sources", the override op ("-",
 * "set", "del") and value ("off" or milli-percent), the error and
 * enabled counts (cumulative: acked + totals - base), the policy
 * "min_errors rate_milli window min_sources" ("" when off) and the
 * sources "key:age ..." (8 hex digits, seconds; "" without an error
 * delta), then the ramp: its definition "tick alpha_ppm
 * dispersion_milli start_at_ms max_extend on_insufficient nstages
 * milli:hold:min_requests ..." ("" when none), this host's part "n1 n0
 * e1 e0 stopped guard actions" (the cohorts' deltas, 0 or 1 twice, the
 * actions' digits or "-") and the seed (FL_SYNC_RAMP_VALUES numbers, ""
 * when none), then the acknowledged error and enabled counts.  *nkeys
 * is set to the number of keys.  Returns argc,
 * FL_SYNC_ROUND_ARGC(entries), or 0 when argv_max or buf_len is short.
 */
size_t fl_sync_round_args(const fl_sync_round_t *r,
    const fl_sync_flag_t *flags, size_t n, char *buf, size_t buf_len,
    const char **argv, size_t *argvlen, size_t argv_max, size_t *nkeys)
    FL_NOEXCEPT;

/*
 * A reply (src/core/sync_reply.cpp), as the glue hands it over from
 * hiredis's reader: its elements in pre-order, each array followed by its
 * elements (and theirs).  Strings point into the reader's reply.
 */
typedef enum {
    FL_SYNC_ELT_OTHER = 0,      /* nil, a status, an error, RESP3's types:
                                 * nothing a round reads */
    FL_SYNC_ELT_INTEGER,
    FL_SYNC_ELT_STRING,         /* a bulk string */
    FL_SYNC_ELT_ARRAY
} fl_sync_elt_type_t;

typedef struct {
    fl_sync_elt_type_t  type;
    int64_t             integer;        /* INTEGER */
    const char         *str;            /* STRING */
    size_t              len;
    size_t              elements;       /* ARRAY: how many follow it */
} fl_sync_elt_t;

typedef enum {
    FL_SYNC_REPLY_OK = 0,
    FL_SYNC_REPLY_MALFORMED,    /* not one whole reply: empty, an array
                                 * with more elements than follow, or
                                 * elements after its end */
    FL_SYNC_REPLY_NOT_ARRAY,    /* the reply is not an array */
    FL_SYNC_REPLY_SHORT,        /* fewer than 2 elements */
    FL_SYNC_REPLY_EPOCH,        /* the first is no number */
    FL_SYNC_REPLY_VERSION,      /* the second is no number */
    FL_SYNC_REPLY_CONTROL       /* the third is not an array of field,
                                 * value pairs; epoch and ver are read */
} fl_sync_reply_status_t;

/* The script's answer {epoch, ver[, HGETALL ctl | 0[, ramps]]}. */
typedef struct {
    uint64_t    epoch;
    uint64_t    ver;
    int         has_control;    /* the control hash follows */
    int         new_epoch;      /* has_control, and the epoch is not the
                                 * one known (nor 0): the fleet's state
                                 * is new, nothing of it is applied */
    size_t      control;        /* has_control: its index in the view */
    int         has_ramps;      /* a fourth element, an array: the ramps */
    size_t      ramps;          /* has_ramps: its index in the view */
    /* a fifth element, bits (docs/sync.md, "What a failover loses"):
     * went_back (1) the store lost versions this host read: apply
     * nothing, take its view as known (fl_sync_back_known()); resend
     * (2) it lacks calls of this host it acknowledged */
    int         went_back;
    int         resend;
} fl_sync_head_t;

/* Reads the head of a reply; known_epoch is the one this host last read
 * (0: none).  The third element is the control hash or the integer 0
 * (none: the ramps follow).  A number is an integer (a negative one read as its two's
 * complement, as before) or a string of 1 to 19 digits up to INT64_MAX.
 * On FL_SYNC_REPLY_OK and FL_SYNC_REPLY_CONTROL, epoch and ver are set
 * (the deltas sent were counted); has_control only on OK. */
fl_sync_reply_status_t fl_sync_reply_head(const fl_sync_elt_t *view,
    size_t n, uint64_t known_epoch, fl_sync_head_t *out) FL_NOEXCEPT;

/* What a status says, for the log: "the reply is not an array", ...; ""
 * for FL_SYNC_REPLY_OK, "unknown status" for a value not listed. */
const char *fl_sync_reply_status_text(fl_sync_reply_status_t st) FL_NOEXCEPT;

/* What the control hash says of one flag of this host's definition. */
typedef struct {
    int                 rolled_back;    /* an "rb:" record: */
    uint64_t            at_ms;          /* its numbers, 0 when missing */
    uint64_t            errors;         /* or not numbers */
    uint64_t            enabled;
    uint64_t            sources;
    fl_override_kind_t  override_kind;  /* "ov:"; NONE when absent */
    uint32_t            override_milli;
    const char         *rb_host;        /* who rolled it back, cleared the */
    size_t              rb_host_len;    /* rollback, set the override: */
    const char         *cb_host;        /* NULL when not recorded or not */
    size_t              cb_host_len;    /* a name fl_sync_host_valid() */
    const char         *ob_host;        /* accepts */
    size_t              ob_host_len;
} fl_sync_fleet_t;

/*
 * Reads the control hash of a reply whose head said has_control into
 * fleets[i] for the flag i of p (nfleets entries, zeroed first): fields
 * "rb:", "ov:", "cb:", "ob:" + 16 hex digits of the definition + ":" +
 * the flag's name, with a string value, for a flag of p of that
 * definition.  Another definition's, an unknown flag's, a malformed or
 * non-string field is skipped, counted in *ignored (when not NULL); so
 * is an "ov:" value neither "off" nor milli-percent.  The hash's own
 * "epoch" and "ver" are neither.  Returns the fields used.
 */
size_t fl_sync_reply_controls(const fl_sync_elt_t *view, size_t n,
    const fl_sync_head_t *head, const fl_project_t *p,
    fl_sync_fleet_t *fleets, size_t nfleets, size_t *ignored) FL_NOEXCEPT;

/* What applying the fleet's answer does to one flag. */
typedef struct {
    int                 rollback;       /* roll back with fleet's record */
    int                 clear;          /* clear the rollback here */
    int                 set_override;   /* set override_kind (NONE:
                                         * remove the override) */
    fl_override_kind_t  override_kind;
    uint32_t            override_milli;
    uint64_t            known;          /* keep as what the fleet said */
} fl_sync_action_t;

/* sent: the flag's control when its round began, now: its control now
 * (fl_sync_control()).  0 when they differ: the change made here during
 * the round wins and goes out next round; nothing is applied.  Else 1 and
 * *out: the fleet's rollback when the flag is not rolled back here, a
 * clear when it is and the fleet holds none, the fleet's override when it
 * differs from the one here. */
int fl_sync_action(const fl_sync_fleet_t *fleet, uint64_t sent, uint64_t now,
    fl_sync_action_t *out) FL_NOEXCEPT;

/* What the host knows of the fleet's control of flag f (planned by
 * fl_sync_round_plan()) after an answer without the control hash: the
 * fleet's version did not move since the host last read it, so each
 * field f published this round ("set", "clr", "del") was the fleet's
 * already, and the fleet says what f sent (f->control); a flag without
 * an entry keeps f->known.  Without it a host that publishes what the
 * fleet holds, a new definition that kept its rollback or override
 * (docs/sync.md), would publish it again every round, and bring it back
 * after another host cleared it. */
uint64_t fl_sync_known_unmoved(const fl_sync_flag_t *f) FL_NOEXCEPT;

/* What the host keeps as the fleet's word of a flag after an answer
 * whose store went back (head went_back): the store's view, applied to
 * nothing, so that each rollback, clear and override the store lost
 * differs from it and is published again at the next round. */
uint64_t fl_sync_back_known(const fl_sync_fleet_t *fleet) FL_NOEXCEPT;

/*
 * Ramps across the fleet (docs/sync.md): the script runs each ramped
 * entry's ramp in Redis (the twin of fl_ramp_step() and fl_ramp_act())
 * and answers, in the reply's fourth element, one item an entry in the
 * round's order: 0 (no ramp) or FL_SYNC_RAMP_VALUES numbers, the fleet's
 * state in this order: state, stage, start_ms, stage_ms, paused_ms,
 * next_tick_ms, stage_on, stage_off, stage_changes, cause, decided_ms,
 * stalled, last_n1, last_n0, last_e1, last_e0, the five log_lr, ticks,
 * errors_on, errors_off, decided_tick, decided, decided_n1, decided_n0,
 * decided_e1, decided_e0 (the seed a round sends is the same list).
 */
#define FL_SYNC_RAMP_VALUES  30u

/* The seed argument: r's FL_SYNC_RAMP_VALUES numbers, space-separated,
 * into buf (FL_SYNC_RAMP_SEED_MAX bytes); returns the bytes written. */
#define FL_SYNC_RAMP_SEED_MAX  (FL_SYNC_RAMP_VALUES * 26)
size_t fl_sync_ramp_seed(const fl_ramp_t *r, char *buf) FL_NOEXCEPT;

typedef struct {
    int         present;        /* the fleet answered this flag's ramp */
    fl_ramp_t   state;          /* its values (the local baselines 0) */
    const char *refused;        /* an item skipped: why (static text) */
} fl_sync_ramp_t;

/* Reads the ramps of a reply whose head said has_ramps into out[i] for
 * flags[i] (the round's flags, nflags, their entries as planned; out
 * zeroed first).  An item of an entry without a ramp, whose numbers do
 * not read (a count, a state or a stage out of range, a log_lr not
 * finite), or whose state does not hold together (docs/sync.md: times
 * out of order, done before the last stage, rolled back or not against
 * the fleet's rollback record) is skipped, counted in *ignored, and
 * out[i].refused says why.  The fleet's rollback of flag i is fleets[i]
 * (this answer's control hash), or, with fleets NULL, what the fleet last
 * said (flags[i].known).  Returns the ramps read. */
size_t fl_sync_reply_ramps(const fl_sync_elt_t *view, size_t n,
    const fl_sync_head_t *head, const fl_sync_flag_t *flags, size_t nflags,
    const fl_sync_fleet_t *fleets, fl_sync_ramp_t *out, size_t *ignored)
    FL_NOEXCEPT;

/* The fleet's state into the zone's r (the caller holds the zone's lock;
 * r's baselines stay), and what changed for the host to apply: STARTED
 * (a start or a restart), ADVANCED or DONE (another stage), STALLED,
 * else NONE.  rolled_here: the flag is rolled back on this host (at
 * rolled_at_ms), which the fleet may not have heard of yet: the copy
 * stays rolled back at the fleet's stage. */
fl_ramp_event_t fl_sync_ramp_copy(const fl_ramp_def_t *d, fl_ramp_t *r,
    const fl_ramp_t *fleet, int rolled_here, uint64_t rolled_at_ms)
    FL_NOEXCEPT;

/* What a ramped flag serves on a host whose copy never heard from the
 * fleet (no answer yet since it started, no state file entry): no more
 * than its first stage, which is no more than the fleet serves once the
 * ramp started; FL_RAMP_NONE (the configured percentage) when that is
 * not above the first stage's. */
uint32_t fl_sync_ramp_unknown_milli(const fl_ramp_def_t *d,
    uint32_t configured_milli) FL_NOEXCEPT;


/* ------------------------------ a host's standing (sync_health.cpp) */

/* Milliseconds this host's view of the fleet is old, from one clock that
 * does not step (the glue's monotonic milliseconds): since last_ok_ms,
 * the end of the last round completed, or, before the first (last_ok_ms
 * 0, *never set to 1), since started_ms, when the host began to sync.
 * 0 when now_ms is not past it (or both are 0). */
uint64_t fl_sync_stale_ms(uint64_t now_ms, uint64_t last_ok_ms,
    uint64_t started_ms, int *never) FL_NOEXCEPT;

/* After a failed connect or round: *backoff_ms (0 after a success)
 * becomes the next backoff, one interval at first, then doubled up to
 * cap_ms; returns the wait before the next connect, in [backoff/2,
 * backoff] as random (any number, uniform: ngx_random()) says. */
uint64_t fl_sync_backoff(uint64_t *backoff_ms, uint64_t interval_ms,
    uint64_t cap_ms, uint64_t random) FL_NOEXCEPT;

/* ------------------------------------- flags_sync sentinel:// (sentinel.cpp) */

/*
 * What flags_sync reads of Redis Sentinel (docs/sync.md "Sentinel"), from
 * replies as the glue hands them over (fl_sync_elt_t, pre-order): the
 * answer to SENTINEL get-master-addr-by-name, the reply to ROLE, and a
 * message of the +switch-master channel.  Nothing in them is trusted.
 */

/* An address a Sentinel gave: an IPv4 or IPv6 address and a port. */
typedef struct {
    int         family;         /* 4 or 6 */
    uint8_t     addr[16];       /* network order; IPv4 in the first 4 */
    uint16_t    port;           /* 1 to 65535 */
} fl_sync_addr_t;

typedef enum {
    FL_SENTINEL_OK = 0,
    FL_SENTINEL_MALFORMED,      /* not one whole reply */
    FL_SENTINEL_NOT_PAIR,       /* not an array of two strings */
    FL_SENTINEL_HOST,           /* the first is no IPv4 or IPv6 address
                                 * (a host name: not resolved) */
    FL_SENTINEL_PORT            /* the second is no port, 1 to 65535 */
} fl_sentinel_status_t;

/* The master in the answer ["IP", "PORT"].  (A nil answer, the name is
 * unknown, and an error reply are the glue's to tell apart.) */
fl_sentinel_status_t fl_sentinel_master(const fl_sync_elt_t *view, size_t n,
    fl_sync_addr_t *out) FL_NOEXCEPT;

/* What a status says, for the log; "" for OK. */
const char *fl_sentinel_status_text(fl_sentinel_status_t st) FL_NOEXCEPT;

typedef enum {
    FL_SYNC_ROLE_MASTER = 0,
    FL_SYNC_ROLE_REPLICA,       /* "slave" */
    FL_SYNC_ROLE_SENTINEL,
    FL_SYNC_ROLE_UNKNOWN        /* anything else, or not an array whose
                                 * first element is a string */
} fl_sync_role_t;

/* The role in a reply to ROLE, and its name for the log ("master",
 * "replica", "sentinel", "unknown"). */
fl_sync_role_t fl_sync_role(const fl_sync_elt_t *view, size_t n) FL_NOEXCEPT;
const char *fl_sync_role_text(fl_sync_role_t role) FL_NOEXCEPT;

/* 1 when the first reply on the subscribed connection confirms it:
 * ["subscribe", "+switch-master", N]. */
int fl_sentinel_subscribed(const fl_sync_elt_t *view, size_t n) FL_NOEXCEPT;

/* 1 when a reply on the subscribed connection is a message of the
 * +switch-master channel about the master named name: ["message",
 * "+switch-master", "NAME OLD-IP OLD-PORT NEW-IP NEW-PORT"]. */
int fl_sentinel_switched(const fl_sync_elt_t *view, size_t n,
    const char *name, size_t name_len) FL_NOEXCEPT;

/* ------------------------------- runtime definitions (definitions.cpp) */

/*
 * The pure parts of definitions=runtime (docs/definitions-core.md): the
 * difference between two versions of a project, the answer of a write,
 * one flag put into or deleted from a document, and a stored version's
 * file (its header line, which is also its history entry).
 */

typedef enum {
    FL_DEFS_SAME = 0,           /* in both, same def_hash */
    FL_DEFS_ADDED,              /* only in the new project */
    FL_DEFS_CHANGED,            /* in both, another def_hash */
    FL_DEFS_REMOVED             /* only in the old project */
} fl_defs_kind_t;

typedef struct {
    fl_defs_kind_t  kind;
    long            old_idx;    /* flag index in the old project, -1: none */
    long            new_idx;    /* flag index in the new project, -1: none */
} fl_defs_change_t;

/* The difference between old and nw by flag name and definition hash
 * (fl_flag_info_t.def_hash, so a change of a segment a flag names
 * changes the flag, and key order or unknown fields do not): one entry
 * per flag of either project, first every flag of nw in its order (SAME,
 * CHANGED or ADDED), then every flag only in old (REMOVED) in old's
 * order.  old NULL: every flag is ADDED.  Writes at most max entries and
 * returns how many there are (max >= count(old) + count(nw) is always
 * enough; out may be NULL when max is 0). */
size_t fl_defs_diff(const fl_project_t *old, const fl_project_t *nw,
    fl_defs_change_t *out, size_t max) FL_NOEXCEPT;

/*
 * The answer of a definitions write, or of its dry run, on one line:
 *   {"version":N,"added":[names],"changed":[names],"removed":[names],
 *    "kept":[{"flag":"x","rolledBack":true,"override":null}],
 *    "dryRun":true}
 * version is the version the write made (or would make); names in the
 * order of c (nw's order, then old's), SAME entries left out.  "kept":
 * the CHANGED flags whose old control block (old_ctl[old_idx]; old_ctl
 * itself, or an element, may be NULL: none) is rolled back or overridden,
 * read in one load as fl_state_snapshot() reads it: "rolledBack" true or
 * false, "override" as flags_status writes it (null, {"enabled":false},
 * {"rolloutPercentage":12.5}).  "dryRun" only when dry_run.  An entry
 * whose index is out of range is left out.  Returns the bytes written,
 * or 0 (nothing written) when cap is less than the bound.
 */
size_t fl_defs_answer_json_bound(const fl_project_t *old,
    const fl_project_t *nw, const fl_defs_change_t *c, size_t n)
    FL_NOEXCEPT;
size_t fl_defs_answer_json(const fl_project_t *old, const fl_project_t *nw,
    const fl_defs_change_t *c, size_t n, uint64_t version,
    const fl_control_t *const *old_ctl, int dry_run, char *out, size_t cap)
    FL_NOEXCEPT;

/*
 * PUT .../definitions/{project}/flags/{name}: a copy of the document doc
 * in which the element of its "flags" array whose "name" is name is
 * replaced by the body (flag, one JSON object), or, when there is none,
 * the body is appended to the array (after the whitespace the last
 * element is preceded by, so an indented array stays indented).  Every
 * other byte of doc is kept as it is.  When the body has no "name", the
 * name is put first in it ("name":"..." after its '{'); when it has one
 * (the last, if several), it must be that string.  Only the shape is
 * checked here; the glue validates the result with
 * fl_project_load_buffer().  On FL_OK *out (NUL-terminated, from a) holds
 * *out_len bytes.  Errors, with a message in err:
 *  - FL_ERR_INVALID: doc is not JSON, not an object, has no "flags"
 *    array (the last "flags" member counts), or the result would be
 *    larger than FL_MAX_FLAGS_FILE_SIZE;
 *  - FL_ERR_JSON: the body is not JSON ("request body is not valid JSON:
 *    ...", "request body is empty") or not an object ("request body must
 *    be a JSON object");
 *  - FL_ERR_FIELD: "flag name \"X\" in the body does not match \"Y\" in
 *    the path", "\"name\" in the body must be a string", or the name in
 *    the path is not UTF-8 ("flag name in the path is not valid UTF-8");
 *  - FL_ERR_NOMEM.
 * A name is matched by its decoded bytes ("\u0061" is "a"); the first
 * element of that name is the one (a valid document has one).
 */
fl_status_t fl_defs_put_flag(const char *doc, size_t len, const char *name,
    size_t name_len, const char *flag, size_t flag_len, const fl_alloc_t *a,
    char **out, size_t *out_len, char *err, size_t err_len) FL_NOEXCEPT;

/* DELETE .../flags/{name}: a copy of doc without the element of "flags"
 * named name, with one comma next to it (the only element: the array
 * becomes []); every other byte kept.  No such element: FL_OK with
 * *found 0 and *out NULL (the glue's 404); else *found 1.  Errors as
 * fl_defs_put_flag() gives them for doc. */
fl_status_t fl_defs_delete_flag(const char *doc, size_t len,
    const char *name, size_t name_len, const fl_alloc_t *a, char **out,
    size_t *out_len, int *found, char *err, size_t err_len) FL_NOEXCEPT;

/*
 * A stored version is one file: its entry (one line of JSON, below),
 * '\n', then the document, byte for byte as it was put.  The entry is
 * one element of GET .../history:
 *   {"version":N,"at":"2026-11-27T21:50:01Z","by":"alice","host":"web1",
 *    "added":[names],"changed":[names],"removed":[names]}
 * at_ms in whole seconds (RFC 3339, UTC); by NULL: null; host NULL:
 * null; the names as fl_defs_answer_json() lists them.  No newline is
 * written.  Returns the bytes written, or 0 when cap is less than the
 * bound.
 */
size_t fl_defs_entry_json_bound(size_t by_len, size_t host_len,
    const fl_project_t *old, const fl_project_t *nw,
    const fl_defs_change_t *c, size_t n) FL_NOEXCEPT;
size_t fl_defs_entry_json(uint64_t version, uint64_t at_ms, const char *by,
    size_t by_len, const char *host, size_t host_len,
    const fl_project_t *old, const fl_project_t *nw,
    const fl_defs_change_t *c, size_t n, char *out, size_t cap) FL_NOEXCEPT;

/* A stored version's file: its first line (up to the first '\n') must be
 * a JSON object whose "version" is a whole number in [1, 2^64 - 1]
 * written in digits, and a document must follow (not only whitespace).
 * On FL_OK: *version, *entry_len (the line without its '\n': the
 * history entry) and *doc_off (where the document starts).  Else
 * FL_ERR_INVALID with a message ("no header line", "header is empty",
 * "header is not valid JSON: ...", "header is not a JSON object", "header has no \"version\"
 * of at least 1", "no document after the header"); FL_ERR_NOMEM. */
fl_status_t fl_defs_file_parse(const char *buf, size_t len,
    uint64_t *version, size_t *entry_len, size_t *doc_off, char *err,
    size_t err_len) FL_NOEXCEPT;

/* GET .../history: {"versions":[e1,e2,...]}, the entries as given
 * (newest first), each trimmed of surrounding whitespace and checked to
 * be one JSON object: one that is not is left out.  An entry may be NULL
 * (left out).  Returns the bytes written, or 0 when cap is less than the
 * bound. */
size_t fl_defs_history_json_bound(const size_t *lens, size_t n) FL_NOEXCEPT;
size_t fl_defs_history_json(const char *const *entries, const size_t *lens,
    size_t n, char *out, size_t cap) FL_NOEXCEPT;


#ifdef __cplusplus
}
#endif

#endif /* FLAGS_CORE_H */
