/*
 * report.cpp - the error report body (docs/api.md, docs/errors.md): a
 * streaming yajl parser fed piece by piece as nginx reads the body, and
 * the line appended to flags_error_log.
 *
 * Decisions:
 *  - JSON problems win over field problems (the order of docs/errors.md):
 *    a field at fault is only remembered while parsing and reported by
 *    finish() once the whole body has proved to be one valid JSON object.
 *  - Nesting deeper than FL_REPORT_MAX_DEPTH stops the parse at once, so
 *    "[[[[..." costs neither stack nor memory.
 *  - Duplicate keys: the last occurrence wins, for its value and for its
 *    validation ({"flagName":1,"flagName":"x"} is valid).  Duplicate trait
 *    names keep the position of the first and the value of the last, as
 *    JavaScript's JSON.parse does.
 *  - The field error reported is the first in document order among the
 *    fields' final occurrences; then a missing flagName, then a missing
 *    message.  null for a field reads as absent, so a null flagName is
 *    "flagName is required".
 *  - An empty flagName is valid here: no flag has that name, the caller
 *    answers 404 unknown_flag.
 *  - A body of only whitespace counts as empty.
 *  - "enabled" (the answer the client got for the flag) is a boolean, or
 *    null for absent.  It names the report's cohort; without it the
 *    userId and traits do, read as the SDK reads a caller
 *    (fl::user_from_json(), sdk.cpp) from the traits' compact text.  A
 *    caller over the limits of a query string is not refused: the part
 *    at fault is left out of the cohort's caller (fl_report_cohort()).
 *  - UTF-8 is checked strictly before yajl sees a byte (utf8.hpp): yajl
 *    lets overlong forms, surrogates and lone surrogate escapes through.
 *    Where both a syntax error and bad UTF-8 exist, the earlier one is
 *    reported: yajl is given the bytes before the bad ones first.
 *
 * Memory: everything, yajl included, comes from the caller's allocator and
 * is bounded by a small multiple of the body size; unknown fields are
 * parsed but not stored.
 */

#include "flags_core.h"
#include "arena.hpp"
#include "json_reader.hpp"
#include "json_scan.hpp"
#include "json_writer.hpp"
#include "text.hpp"
#include "utf8.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace {

enum field_id {
    F_FLAG_NAME,
    F_MESSAGE,
    F_STACK,
    F_USER_ID,
    F_TRAITS,
    F_ENABLED,
    F_COUNT,
    F_UNKNOWN = F_COUNT
};

struct field_name {
    const char *name;
    size_t      len;
};

constexpr field_name field_names[F_COUNT] = {
    { "flagName", 8 }, { "message", 7 }, { "stack", 5 }, { "userId", 6 },
    { "traits", 6 }, { "enabled", 7 }
};

using fl::jkind;

enum field_state {
    S_ABSENT = 0,           /* not sent, or null */
    S_OK,
    S_BAD                   /* wrong type */
};

struct field {
    field_state  state;
    size_t       seq;       /* position among top-level keys */
    const char  *str;       /* string fields: the decoded value */
    size_t       len;
    bool         boolean;   /* enabled: the value */
    const char  *json;      /* or nullptr: str's JSON escaping as the body */
    size_t       json_len;  /* wrote it (parser::text, fl_report_t's
                             * *_json); str itself where it has no escape */
};

struct trait {
    const char  *key;
    size_t       key_len;
    jkind   kind;      /* fl::J_OBJECT / fl::J_ARRAY: at fault */
    const char  *val;       /* string: decoded; number: its text */
    size_t       val_len;
    size_t       seq;
    const char  *val_json;  /* val (a string) as the body wrote it, where */
    size_t       val_json_len;  /* that is its fl_json_escape(); nullptr: */
                                /*   escape it (a key: verbatim() or not) */
    bool         dropped;   /* an earlier occurrence took its value */
    trait       *next;
};

enum top_kind {
    TOP_NONE, TOP_OBJECT, TOP_OTHER
};

} // namespace

/* A report's traits as the parser read them: an object of members in
 * order of first appearance, the tree fl::json_read() would make of
 * traits_json. */
struct fl_report_traits_s {
    fl::jval    obj;
};

struct fl_report_parser_s {
    fl_alloc_t      alloc;          /* a copy: yajl keeps a pointer to it */
    yajl_handle     yajl;           /* made at the first piece yajl reads */
    bool            scanned;        /* json_scan() read the whole body */
    fl_status_t     status = FL_OK; /* sticky once not FL_OK */
    bool            finished;
    bool            saw_content;    /* a byte other than JSON whitespace */
    top_kind        top = TOP_NONE;
    unsigned        depth;
    field_id        cur_field = F_UNKNOWN;  /* the top-level key being read */
    size_t          key_seq;
    bool            in_traits;      /* directly inside the latest traits */
    const char     *trait_key;
    size_t          trait_key_len;
    const unsigned char *raw;       /* the body json_scan() reads, when */
    size_t          raw_len;        /* it is ASCII throughout (verbatim()) */
    /* the string value being handed over, as the body wrote it, when
     * that is exactly its fl_json_escape() (json_scan()'s string text,
     * in a body of ASCII): the report log copies it */
    const char     *text = nullptr;
    size_t          text_len = 0;
    uint64_t        fed;            /* bytes before the current piece */
    fl::Utf8JsonCheck  utf8;        /* strict UTF-8 and \u pairs */
    field           fields[F_COUNT];
    trait          *traits;
    trait          *traits_tail;
    size_t          ntraits;
    char            msg[256];
};

namespace {

using parser = fl_report_parser_s;

inline parser *P(void *ctx)
{
    return static_cast<parser *>(ctx);
}

/* Everything but the allocator and the yajl handle, as new (a parser
 * is made by value-initialization: zeros, and the members' defaults). */
void init_state(parser *p)
{
    fl_alloc_t a = p->alloc;
    yajl_handle y = p->yajl;

    *p = parser();
    p->alloc = a;
    p->yajl = y;
}

int fail_nomem(parser *p)
{
    p->status = FL_ERR_NOMEM;
    fl::set_err(p->msg, sizeof(p->msg), "out of memory");
    return 0;
}

/* Is s, a string or number a callback was given, the body's own bytes,
 * in a body of ASCII only?  json_scan() hands a string over in place
 * only when it holds no escape (the decoded ones come from its own
 * buffer), and such a string has no '"', '\\' or control byte: it is its
 * own JSON escaping, and lives as long as the body. */
bool verbatim(const parser *p, const char *s)
{
    return p->raw != nullptr
           && reinterpret_cast<uintptr_t>(s) - reinterpret_cast<uintptr_t>(p->raw)
              < p->raw_len;
}

/* s kept for the report: the body's own bytes where verbatim(), else a
 * copy (yajl's buffers do not last).  nullptr: out of memory. */
const char *keep(parser *p, const char *s, size_t len)
{
    return verbatim(p, s) ? s : fl::dup_bytes(&p->alloc, s, len);
}

/* Appends the string s as JSON: json, the body's own text of it, copied
 * where there is one (p->text), else s escaped. */
char *put_text(char *o, const char *s, size_t len, const char *json,
    size_t json_len)
{
    return json != nullptr ? fl::put_verbatim(o, json, json_len)
                           : fl::put_str(o, s, len);
}

field_id lookup_field(const unsigned char *key, size_t len)
{
    /* the one name of each length and first letter, then its bytes: one
     * compare a key instead of one a field */
    int i;

    switch (len) {
    case 8: i = F_FLAG_NAME; break;
    case 7: i = key[0] == 'm' ? F_MESSAGE : F_ENABLED; break;
    case 5: i = F_STACK; break;
    case 6: i = key[0] == 'u' ? F_USER_ID : F_TRAITS; break;
    default: return F_UNKNOWN;
    }
    return std::memcmp(field_names[i].name, key, len) == 0
           ? static_cast<field_id>(i) : F_UNKNOWN;
}

void reset_traits(parser *p)
{
    p->traits = nullptr;
    p->traits_tail = nullptr;
    p->ntraits = 0;
    p->in_traits = false;
}

/* A scalar, or a container's opening, as the value of a top-level key
 * (except traits: {...}, handled by on_open). */
int set_field(parser *p, jkind k, const char *s, size_t len)
{
    if (p->cur_field == F_UNKNOWN) {
        return 1;
    }
    field &f = p->fields[p->cur_field];

    f.seq = p->key_seq;
    f.str = nullptr;
    f.len = 0;
    f.json = nullptr;
    f.json_len = 0;

    if (p->cur_field == F_TRAITS) {
        reset_traits(p);
        f.state = k == fl::J_NULL ? S_ABSENT : S_BAD;
        return 1;
    }
    if (k == fl::J_NULL) {
        f.state = S_ABSENT;
    } else if (p->cur_field == F_ENABLED) {
        f.state = k == fl::J_TRUE || k == fl::J_FALSE ? S_OK : S_BAD;
        f.boolean = k == fl::J_TRUE;
    } else if (k == fl::J_STRING) {
        f.str = keep(p, s, len);
        if (f.str == nullptr) {
            return fail_nomem(p);
        }
        f.len = len;
        f.state = S_OK;
        f.json = p->text;
        f.json_len = p->text != nullptr ? p->text_len : 0;
    } else {
        f.state = S_BAD;
    }
    return 1;
}

int add_trait(parser *p, jkind k, const char *s, size_t len)
{
    trait *t = fl::alloc_obj<trait>(&p->alloc);
    if (t == nullptr) {
        return fail_nomem(p);
    }
    t->key = p->trait_key;
    t->key_len = p->trait_key_len;
    t->kind = k;
    if (k == fl::J_STRING || k == fl::J_NUMBER) {
        t->val = keep(p, s, len);
        if (t->val == nullptr) {
            return fail_nomem(p);
        }
        t->val_len = len;
    }
    if (k == fl::J_STRING) {
        t->val_json = p->text;
        t->val_json_len = p->text != nullptr ? p->text_len : 0;
    }
    t->seq = p->ntraits++;
    if (p->traits_tail != nullptr) {
        p->traits_tail->next = t;
    } else {
        p->traits = t;
    }
    p->traits_tail = t;
    return 1;
}

int on_scalar(parser *p, jkind k, const char *s, size_t len)
{
    if (p->depth == 0) {
        p->top = TOP_OTHER;
    } else if (p->depth == 1 && p->top == TOP_OBJECT) {
        return set_field(p, k, s, len);
    } else if (p->depth == 2 && p->in_traits) {
        return add_trait(p, k, s, len);
    }
    return 1;
}

int on_open(parser *p, jkind k)
{
    if (p->depth >= FL_REPORT_MAX_DEPTH) {
        p->status = FL_ERR_JSON;
        fl::set_err(p->msg, sizeof(p->msg), "JSON nesting is deeper than %u levels",
                    static_cast<unsigned>(FL_REPORT_MAX_DEPTH));
        return 0;
    }

    if (p->depth == 0) {
        p->top = k == fl::J_OBJECT ? TOP_OBJECT : TOP_OTHER;
    } else if (p->depth == 1 && p->top == TOP_OBJECT) {
        if (p->cur_field == F_TRAITS && k == fl::J_OBJECT) {
            /* A new traits object replaces any earlier one. */
            reset_traits(p);
            field &f = p->fields[F_TRAITS];
            f.state = S_OK;
            f.seq = p->key_seq;
            p->in_traits = true;
        } else if (!set_field(p, k, nullptr, 0)) {
            return 0;
        }
    } else if (p->depth == 2 && p->in_traits) {
        if (!add_trait(p, k, nullptr, 0)) {
            return 0;
        }
    }

    p->depth++;
    return 1;
}

int on_close(parser *p)
{
    p->depth--;
    if (p->depth == 1) {
        p->in_traits = false;       /* whatever closed was a field's value */
    }
    return 1;
}

int cb_null(void *ctx)
{
    return on_scalar(P(ctx), fl::J_NULL, nullptr, 0);
}

int cb_boolean(void *ctx, int v)
{
    return on_scalar(P(ctx), v ? fl::J_TRUE : fl::J_FALSE, nullptr, 0);
}

int cb_number(void *ctx, const char *s, size_t len)
{
    return on_scalar(P(ctx), fl::J_NUMBER, s, len);
}

int cb_string(void *ctx, const unsigned char *s, size_t len)
{
    return on_scalar(P(ctx), fl::J_STRING, reinterpret_cast<const char *>(s), len);
}

int cb_start_map(void *ctx)
{
    return on_open(P(ctx), fl::J_OBJECT);
}

int cb_start_array(void *ctx)
{
    return on_open(P(ctx), fl::J_ARRAY);
}

int cb_end(void *ctx)
{
    return on_close(P(ctx));
}

int cb_map_key(void *ctx, const unsigned char *key, size_t len)
{
    parser *p = P(ctx);

    if (p->depth == 1 && p->top == TOP_OBJECT) {
        p->cur_field = lookup_field(key, len);
        p->key_seq++;
    } else if (p->depth == 2 && p->in_traits) {
        p->trait_key = keep(p, reinterpret_cast<const char *>(key), len);
        if (p->trait_key == nullptr) {
            return fail_nomem(p);
        }
        p->trait_key_len = len;
    }
    return 1;
}

const yajl_callbacks callbacks = {
    cb_null, cb_boolean, nullptr, nullptr, cb_number, cb_string,
    cb_start_map, cb_map_key, cb_end, cb_start_array, cb_end
};

/* The same callbacks for json_scan(), called directly (json_scan.hpp). */
struct scan_handler {
    parser *p;

    bool null() const { return cb_null(p); }
    bool boolean(int v) const { return cb_boolean(p, v); }
    bool number(const char *s, size_t n) const { return cb_number(p, s, n); }
    bool string(const unsigned char *s, size_t n, const unsigned char *text,
        size_t text_n) const
    {
        if (text == nullptr || p->raw == nullptr) {
            return cb_string(p, s, n);
        }
        p->text = reinterpret_cast<const char *>(text);
        p->text_len = text_n;
        int ok = cb_string(p, s, n);
        p->text = nullptr;
        return ok;
    }
    bool start_map() const { return cb_start_map(p); }
    bool map_key(const unsigned char *s, size_t n) const
    {
        return cb_map_key(p, s, n);
    }
    bool end_map() const { return cb_end(p); }
    bool start_array() const { return cb_start_array(p); }
    bool end_array() const { return cb_end(p); }
};

void syntax_error(parser *p, uint64_t at)
{
    char why[128];

    fl::yajl_error_text(p->yajl, why, sizeof(why));
    p->status = FL_ERR_JSON;
    fl::set_err(p->msg, sizeof(p->msg),
                "request body is not valid JSON: %s (near byte %llu)",
                why, static_cast<unsigned long long>(at));
}

int key_cmp(const trait *a, const trait *b)
{
    return fl::bytes_cmp(a->key, a->key_len, b->key, b->key_len);
}

/* Duplicate trait names: the first occurrence takes the last one's value,
 * the others are dropped.  Sorting keeps this O(n log n) for a body full
 * of traits. */
bool dedupe_traits(parser *p)
{
    if (p->ntraits < 2) {
        return true;
    }
    trait **v = fl::alloc_array<trait *>(&p->alloc, p->ntraits);
    if (v == nullptr) {
        return false;
    }
    size_t n = 0;
    for (trait *t = p->traits; t != nullptr; t = t->next) {
        v[n++] = t;
    }
    std::sort(v, v + n, [](const trait *a, const trait *b) {
        int c = key_cmp(a, b);
        return c < 0 || (c == 0 && a->seq < b->seq);
    });
    for (size_t i = 0; i < n; ) {
        size_t j = i + 1;
        while (j < n && key_cmp(v[i], v[j]) == 0) {
            v[j]->dropped = true;
            j++;
        }
        if (j - i > 1) {
            const trait *last = v[j - 1];
            v[i]->kind = last->kind;
            v[i]->val = last->val;
            v[i]->val_len = last->val_len;
            v[i]->val_json = last->val_json;
            v[i]->val_json_len = last->val_json_len;
        }
        i = j;
    }
    return true;
}

/* {"name":value,...} in order of first appearance. */
fl_status_t serialize_traits(parser *p, fl_report_t *out)
{
    size_t bound = 2;

    for (const trait *t = p->traits; t != nullptr; t = t->next) {
        if (t->dropped) {
            continue;
        }
        bound += fl::str_bound(t->key_len) + 2;     /* ':' and ',' */
        bound += t->kind == fl::J_STRING ? fl::str_bound(t->val_len)
                 : t->kind == fl::J_NUMBER ? t->val_len : 5;
    }

    char *buf = static_cast<char *>(fl::alloc_bytes(&p->alloc, bound + 1));
    if (buf == nullptr) {
        return FL_ERR_NOMEM;
    }
    char *o = buf;
    bool first = true;

    *o++ = '{';
    for (const trait *t = p->traits; t != nullptr; t = t->next) {
        if (t->dropped) {
            continue;
        }
        if (!first) {
            *o++ = ',';
        }
        first = false;
        /* a name kept in place (verbatim()) has no escape: it is its own
         * text.  The scanner's text of keys is not asked for: names with
         * escapes are rare, and every key would pay for it */
        o = put_text(o, t->key, t->key_len,
                     verbatim(p, t->key) ? t->key : nullptr, t->key_len);
        *o++ = ':';
        switch (t->kind) {
        case fl::J_STRING:
            o = put_text(o, t->val, t->val_len, t->val_json, t->val_json_len);
            break;
        case fl::J_NUMBER:
            std::memcpy(o, t->val, t->val_len);
            o += t->val_len;
            break;
        case fl::J_TRUE:
            o = fl::put_lit(o, "true");
            break;
        case fl::J_FALSE:
            o = fl::put_lit(o, "false");
            break;
        default:
            o = fl::put_lit(o, "null");
            break;
        }
    }
    *o++ = '}';
    *o = '\0';

    out->traits_json = buf;
    out->traits_json_len = static_cast<size_t>(o - buf);

    /* the same members as a tree, read back by report_user() */
    size_t n = 0;
    for (const trait *t = p->traits; t != nullptr; t = t->next) {
        n += !t->dropped;
    }
    fl_report_traits_s *tree = fl::alloc_obj<fl_report_traits_s>(&p->alloc);
    fl::jval *m = fl::alloc_array<fl::jval>(&p->alloc, n);
    if (tree == nullptr || (n != 0 && m == nullptr)) {
        return FL_ERR_NOMEM;
    }
    tree->obj.kind = fl::J_OBJECT;
    for (const trait *t = p->traits; t != nullptr; t = t->next) {
        if (t->dropped) {
            continue;
        }
        fl::jval &v = *m++;
        v = fl::jval{};
        v.kind = t->kind;
        if (t->kind == fl::J_STRING || t->kind == fl::J_NUMBER) {
            v.str = t->val;
            v.len = t->val_len;
        }
        v.key = t->key;
        v.key_len = t->key_len;
        v.parent = &tree->obj;
        if (tree->obj.last != nullptr) {
            tree->obj.last->next = &v;
        } else {
            tree->obj.first = &v;
        }
        tree->obj.last = &v;
        tree->obj.count++;
    }
    out->traits = tree;
    return FL_OK;
}

/* The first field at fault, else a missing required one. */
fl_status_t check_fields(parser *p, char *err, size_t err_len)
{
    const field *bad = nullptr;
    int bad_id = -1;

    for (int i = 0; i < F_COUNT; i++) {
        const field &f = p->fields[i];
        if (f.state == S_BAD && (bad == nullptr || f.seq < bad->seq)) {
            bad = &f;
            bad_id = i;
        }
    }

    const trait *bad_trait = nullptr;
    const field &tf = p->fields[F_TRAITS];
    if (tf.state == S_OK && (bad == nullptr || tf.seq < bad->seq)) {
        for (const trait *t = p->traits; t != nullptr; t = t->next) {
            if (!t->dropped && (t->kind == fl::J_OBJECT || t->kind == fl::J_ARRAY)) {
                bad_trait = t;
                break;
            }
        }
    }

    if (bad_trait != nullptr) {
        /* Show at most 64 bytes of a client-chosen name, escaped so the
         * message stays one line with no NUL or control byte in it. */
        size_t shown = fl::utf8_prefix(bad_trait->key, bad_trait->key_len, 64);
        char name[64 * 6 + 1];
        size_t name_len = fl_json_escape(bad_trait->key, shown, name);
        fl::set_err(err, err_len,
                    "traits.%.*s%s must be a string, number, boolean or null",
                    static_cast<int>(name_len), name,
                    shown < bad_trait->key_len ? "..." : "");
        return FL_ERR_FIELD;
    }
    if (bad != nullptr) {
        fl::set_err(err, err_len, "%s must be %s", field_names[bad_id].name,
                    bad_id == F_TRAITS ? "an object"
                    : bad_id == F_ENABLED ? "a boolean" : "a string");
        return FL_ERR_FIELD;
    }
    if (p->fields[F_FLAG_NAME].state != S_OK) {
        fl::set_err(err, err_len, "flagName is required");
        return FL_ERR_FIELD;
    }
    if (p->fields[F_MESSAGE].state != S_OK) {
        fl::set_err(err, err_len, "message is required");
        return FL_ERR_FIELD;
    }
    return FL_OK;
}

fl_status_t finish(parser *p, fl_report_t *out, char *err, size_t err_len)
{
    if (p->finished && p->status == FL_OK) {
        fl::set_err(err, err_len, "the report parser was already finished");
        return FL_ERR_INTERNAL;
    }
    p->finished = true;

    if (p->status == FL_OK) {
        if (!p->saw_content) {
            p->status = FL_ERR_JSON;
            fl::set_err(p->msg, sizeof(p->msg), "request body is empty");
        } else if (!p->scanned
                   && yajl_complete_parse(p->yajl) != yajl_status_ok
                   && p->status == FL_OK)
        {
            syntax_error(p, p->fed);
        } else if (p->status == FL_OK && !p->utf8.complete()) {
            /* unreachable with a JSON text yajl accepted: kept so that
             * no open sequence can ever pass */
            p->status = FL_ERR_JSON;
            p->utf8.message(p->msg, sizeof(p->msg));
        }
    }
    if (p->status == FL_OK && p->top != TOP_OBJECT) {
        p->status = FL_ERR_JSON;
        fl::set_err(p->msg, sizeof(p->msg), "request body must be a JSON object");
    }
    if (p->status != FL_OK) {
        fl::set_err(err, err_len, "%s", p->msg);
        return p->status;
    }

    if (!dedupe_traits(p)) {
        fl::set_err(err, err_len, "out of memory");
        return FL_ERR_NOMEM;
    }
    fl_status_t rc = check_fields(p, err, err_len);
    if (rc != FL_OK) {
        return rc;
    }

    fl_report_t r;
    std::memset(&r, 0, sizeof(r));
    const field *f = p->fields;
    r.flag_name = f[F_FLAG_NAME].str;
    r.flag_name_len = f[F_FLAG_NAME].len;
    r.message = f[F_MESSAGE].str;
    r.message_len = f[F_MESSAGE].len;
    r.flag_name_json = f[F_FLAG_NAME].json;
    r.flag_name_json_len = f[F_FLAG_NAME].json_len;
    r.message_json = f[F_MESSAGE].json;
    r.message_json_len = f[F_MESSAGE].json_len;
    if (f[F_STACK].state == S_OK) {
        r.stack = f[F_STACK].str;
        r.stack_len = f[F_STACK].len;
        r.stack_json = f[F_STACK].json;
        r.stack_json_len = f[F_STACK].json_len;
    }
    if (f[F_USER_ID].state == S_OK) {
        r.user_id = f[F_USER_ID].str;
        r.user_id_len = f[F_USER_ID].len;
        r.user_id_json = f[F_USER_ID].json;
        r.user_id_json_len = f[F_USER_ID].json_len;
    }
    if (f[F_TRAITS].state == S_OK) {
        rc = serialize_traits(p, &r);
        if (rc != FL_OK) {
            fl::set_err(err, err_len, "out of memory");
            return rc;
        }
    }
    if (f[F_ENABLED].state == S_OK) {
        r.has_enabled = 1;
        r.enabled = f[F_ENABLED].boolean ? 1 : 0;
    }
    *out = r;
    return FL_OK;
}

/* The reporter as fl::user_from_json() reads a caller: the userId (when
 * uid) as a string value, the traits (when traits) read back from their
 * compact text, which finish() wrote and so is valid JSON. */
fl_status_t report_user(const fl_report_t *r, bool uid, bool traits,
    size_t max_traits, const fl_alloc_t *a, fl_user_t *out, char *err,
    size_t err_len)
{
    fl::jval id{};
    const fl::jval *obj = nullptr;

    if (uid && r->user_id != nullptr) {
        id.kind = fl::J_STRING;
        id.str = r->user_id;
        id.len = r->user_id_len;
    }
    if (traits && r->traits != nullptr) {
        /* as the parser read them: the same tree as below, without
         * reading traits_json again */
        obj = &r->traits->obj;

    } else if (traits && r->traits_json != nullptr) {
        fl::jread_error e;
        fl::jval *read = nullptr;
        fl::json_read(r->traits_json, r->traits_json_len, a,
                      FL_REPORT_MAX_DEPTH, &read, &e);
        obj = read;
        if (obj == nullptr) {
            *out = fl_user_t{nullptr, 0, nullptr, 0};
            fl::set_err(err, err_len, e.kind == fl::jread_error::NOMEM
                        ? "out of memory" : "traits could not be read");
            return e.kind == fl::jread_error::NOMEM ? FL_ERR_NOMEM
                                                    : FL_ERR_INTERNAL;
        }
    }
    return fl::user_from_json(id.kind == fl::J_STRING ? &id : nullptr, obj,
                              max_traits, a, "", out, err, err_len);
}

/* Appends "name":"escaped" with a leading comma: json copied where the
 * body's text is already the escaping (fl_report_t's *_json), else s
 * escaped. */
char *put_member(char *o, const char *lit, size_t lit_len, const char *s,
    size_t len, const char *json, size_t json_len)
{
    std::memcpy(o, lit, lit_len);
    o += lit_len;
    if (json == nullptr && s == nullptr) {
        return fl::put_lit(o, "\"\"");
    }
    return put_text(o, s, len, json, json_len);
}

} // namespace

extern "C" {

fl_report_parser_t *fl_report_parser_new(const fl_alloc_t *a) noexcept
{
    try {
        /* as new: init_state()'s state, without making it twice */
        parser *p = fl::alloc_obj<parser>(a);
        if (p == nullptr) {
            return nullptr;
        }
        p->alloc = *a;
        return p;
    } catch (...) {
        return nullptr;
    }
}

fl_status_t fl_report_parser_feed(fl_report_parser_t *rp,
    const unsigned char *data, size_t len) noexcept
{
    try {
        if (rp == nullptr) {
            return FL_ERR_INTERNAL;
        }
        parser *p = rp;
        if (p->status != FL_OK) {
            return p->status;
        }
        if (p->finished || (p->scanned && len > 0)) {
            return FL_ERR_INTERNAL;     /* the whole body was given */
        }
        if (len == 0) {
            return FL_OK;
        }
        if (!p->saw_content) {
            for (size_t i = 0; i < len; i++) {
                if (!fl::json_space(data[i])) {
                    p->saw_content = true;
                    break;
                }
            }
        }

        if (p->yajl == nullptr) {
            yajl_alloc_funcs funcs = fl::yajl_funcs(&p->alloc);
            /* funcs are copied; the defaults are kept on purpose: strings
             * are UTF-8 validated, no comments, one value, no trailing
             * garbage */
            p->yajl = yajl_alloc(&callbacks, &funcs, p);
            if (p->yajl == nullptr) {
                fail_nomem(p);
                return p->status;
            }
        }

        size_t good = p->utf8.feed(data, len);

        if (good > 0) {
            yajl_status st = yajl_parse(p->yajl, data, good);
            if (st != yajl_status_ok && p->status == FL_OK) {
                syntax_error(p, p->fed + yajl_get_bytes_consumed(p->yajl));
            }
        }
        if (good < len && p->status == FL_OK) {
            p->status = FL_ERR_JSON;
            p->utf8.message(p->msg, sizeof(p->msg));
        }
        p->fed += len;
        return p->status;
    } catch (...) {
        return FL_ERR_INTERNAL;
    }
}

fl_status_t fl_report_parser_feed_whole(fl_report_parser_t *rp,
    const unsigned char *data, size_t len) noexcept
{
    try {
        if (rp == nullptr) {
            return FL_ERR_INTERNAL;
        }
        parser *p = rp;
        if (p->fed != 0 || p->finished || p->status != FL_OK || p->yajl != nullptr) {
            return fl_report_parser_feed(rp, data, len);
        }

        /* the fast path, for a text the strict UTF-8 check passes whole;
         * declined, everything the callbacks built is forgotten and yajl
         * reads the same bytes from the start.  A text of ASCII only
         * passes but for an unpaired surrogate escape, which json_scan()
         * declines: the check is left out, and the strings the text holds
         * without escapes are kept where they are (verbatim()) */
        bool ascii = fl::all_ascii(data, len);
        if (ascii) {
            p->raw = data;
            p->raw_len = len;
        }
        scan_handler h{p};
        if ((ascii || (p->utf8.feed(data, len) == len && p->utf8.complete()))
            && fl::json_scan(data, len, h, &p->alloc) == fl::JSON_SCAN_OK)
        {
            p->scanned = true;
            p->saw_content = true;
            p->fed = len;
            return FL_OK;
        }

        init_state(p);
        return fl_report_parser_feed(rp, data, len);
    } catch (...) {
        return FL_ERR_INTERNAL;
    }
}

fl_status_t fl_report_parser_finish(fl_report_parser_t *rp, fl_report_t *out,
    char *err, size_t err_len) noexcept
{
    try {
        if (rp == nullptr || out == nullptr) {
            fl::set_err(err, err_len, "internal error");
            return FL_ERR_INTERNAL;
        }
        return finish(rp, out, err, err_len);
    } catch (...) {
        fl::set_err(err, err_len, "internal error");
        return FL_ERR_INTERNAL;
    }
}

fl_status_t fl_report_user(const fl_report_t *r, size_t max_traits,
    const fl_alloc_t *a, fl_user_t *out, char *err, size_t err_len) noexcept
{
    try {
        if (r == nullptr || out == nullptr || a == nullptr
            || a->alloc == nullptr)
        {
            fl::set_err(err, err_len, "internal error");
            return FL_ERR_INTERNAL;
        }
        return report_user(r, true, true, max_traits, a, out, err, err_len);
    } catch (...) {
        fl::set_err(err, err_len, "internal error");
        return FL_ERR_INTERNAL;
    }
}

fl_cohort_t fl_report_cohort(const fl_report_t *r, size_t max_traits,
    const fl_alloc_t *a, fl_user_t *user) noexcept
{
    static const bool parts[][2] = {        /* userId, traits */
        { true, true }, { true, false }, { false, true }
    };
    char err[8];

    *user = fl_user_t{nullptr, 0, nullptr, 0};
    if (a == nullptr || a->alloc == nullptr) {
        return r->has_enabled && !r->enabled ? FL_COHORT_OFF : FL_COHORT_ON;
    }

    try {
        /* a part over fl_report_user()'s limits is left out, as if not
         * sent; a report is never refused for it */
        for (const auto &part : parts) {
            if (report_user(r, part[0], part[1], max_traits, a, user, err,
                            sizeof(err))
                == FL_OK)
            {
                break;
            }
            *user = fl_user_t{nullptr, 0, nullptr, 0};
        }
    } catch (...) {
        *user = fl_user_t{nullptr, 0, nullptr, 0};
    }

    if (r->has_enabled) {
        /* the claim decides the cohort; *user, when there is one, lets
         * the caller check it (fl_report_disputed()) */
        return r->enabled ? FL_COHORT_ON : FL_COHORT_OFF;
    }
    return user->user_id != nullptr || user->ntraits > 0
           ? FL_COHORT_EVALUATE : FL_COHORT_ON;
}

int fl_report_disputed(const fl_report_t *r, int evaluated) noexcept
{
    return r->has_enabled && (r->enabled != 0) != (evaluated != 0);
}

size_t fl_report_log_bound(const fl_report_t *r, size_t project_len) noexcept
{
    /* The fixed text ({"time":"<24 bytes>","project":...}\n with every
     * optional member, "enabled":false the longest) is 116 bytes without
     * the quotes of the strings, which str_bound() counts. */
    size_t n = 128 + fl::str_bound(project_len)
               + fl::str_bound(r->flag_name_len) + fl::str_bound(r->message_len);

    if (r->stack != nullptr) {
        n += fl::str_bound(r->stack_len);
    }
    if (r->user_id != nullptr) {
        n += fl::str_bound(r->user_id_len);
    }
    if (r->traits_json != nullptr) {
        n += r->traits_json_len;
    }
    return n;
}

size_t fl_report_log_line(const fl_report_t *r, const char *project,
    size_t project_len, uint64_t now_ms, char *buf) noexcept
{
    char *o = buf;

    o = fl::put_lit(o, "{\"time\":\"");
    o += fl_format_time_ms(now_ms, o);
    *o++ = '"';

#define MEMBER(lit, field)                                                \
    o = put_member(o, lit, sizeof(lit) - 1, r->field, r->field##_len,       \
                   r->field##_json, r->field##_json_len)
    o = put_member(o, ",\"project\":", sizeof(",\"project\":") - 1, project,
                   project_len, nullptr, 0);
    MEMBER(",\"flagName\":", flag_name);
    MEMBER(",\"message\":", message);
    if (r->stack != nullptr) {
        MEMBER(",\"stack\":", stack);
    }
    if (r->user_id != nullptr) {
        MEMBER(",\"userId\":", user_id);
    }
#undef MEMBER
    if (r->traits_json != nullptr) {
        o = fl::put_lit(o, ",\"traits\":");
        std::memcpy(o, r->traits_json, r->traits_json_len);
        o += r->traits_json_len;
    }
    if (r->has_enabled && r->enabled) {
        o = fl::put_lit(o, ",\"enabled\":true");
    } else if (r->has_enabled) {
        o = fl::put_lit(o, ",\"enabled\":false");
    }
    *o++ = '}';
    *o++ = '\n';
    return static_cast<size_t>(o - buf);
}

} // extern "C"
