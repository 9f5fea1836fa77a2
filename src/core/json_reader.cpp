/*
 * json_reader.cpp - the JSON tree reader of json_reader.hpp.
 */

#include "json_reader.hpp"
#include "arena.hpp"
#include "text.hpp"

#include <cstring>

namespace fl {

namespace {

struct builder {
    const fl_alloc_t   *alloc;
    jval               *root;
    jval               *cur;            /* innermost open container */
    const char         *key;
    size_t              key_len;
    unsigned            depth;
    unsigned            max_depth;
    bool                too_deep;
    bool                nomem;
};

int add(builder *b, jkind kind, const void *s, size_t len) noexcept
{
    jval *v = alloc_obj<jval>(b->alloc);
    if (v == nullptr) {
        b->nomem = true;
        return 0;
    }
    v->kind = kind;
    if (kind == J_STRING || kind == J_NUMBER) {
        v->str = dup_bytes(b->alloc, s, len);
        if (v->str == nullptr) {
            b->nomem = true;
            return 0;
        }
        v->len = len;
    }
    if (b->cur == nullptr) {
        b->root = v;
    } else {
        if (b->cur->kind == J_OBJECT) {
            v->key = b->key;
            v->key_len = b->key_len;
        }
        v->parent = b->cur;
        if (b->cur->last != nullptr) {
            b->cur->last->next = v;
        } else {
            b->cur->first = v;
        }
        b->cur->last = v;
        b->cur->count++;
    }
    if (kind == J_OBJECT || kind == J_ARRAY) {
        if (++b->depth > b->max_depth) {
            b->too_deep = true;
            return 0;           /* stop at once: no growth, no recursion */
        }
        b->cur = v;
    }
    return 1;
}

inline builder *B(void *ctx)
{
    return static_cast<builder *>(ctx);
}

int cb_null(void *ctx)
{
    return add(B(ctx), J_NULL, nullptr, 0);
}

int cb_bool(void *ctx, int v)
{
    return add(B(ctx), v ? J_TRUE : J_FALSE, nullptr, 0);
}

int cb_number(void *ctx, const char *s, size_t len)
{
    return add(B(ctx), J_NUMBER, s, len);
}

int cb_string(void *ctx, const unsigned char *s, size_t len)
{
    return add(B(ctx), J_STRING, s, len);
}

int cb_start_map(void *ctx)
{
    return add(B(ctx), J_OBJECT, nullptr, 0);
}

int cb_start_array(void *ctx)
{
    return add(B(ctx), J_ARRAY, nullptr, 0);
}

int cb_key(void *ctx, const unsigned char *s, size_t len)
{
    builder *b = B(ctx);
    b->key = dup_bytes(b->alloc, s, len);
    b->key_len = len;
    if (b->key == nullptr) {
        b->nomem = true;
        return 0;
    }
    return 1;
}

int cb_end(void *ctx)
{
    builder *b = B(ctx);
    b->cur = b->cur->parent;
    b->depth--;
    return 1;
}

const yajl_callbacks callbacks = {
    cb_null, cb_bool, nullptr, nullptr, cb_number, cb_string,
    cb_start_map, cb_key, cb_end, cb_start_array, cb_end
};

/* p on a string's opening quote: the offset after its closing one. */
size_t skip_string(const char *d, size_t n, size_t p) noexcept
{
    for (p++; p < n; p++) {
        if (d[p] == '\\') {
            p++;
        } else if (d[p] == '"') {
            return p + 1;
        }
    }
    return n;
}

/* After a value yajl accepted: where the first byte other than
 * whitespace is (len when none). */
size_t garbage_at(const char *data, size_t len) noexcept
{
    size_t i = 0;

    while (i < len && yajl_space(static_cast<unsigned char>(data[i]))) {
        i++;
    }
    i = json_skip_value(data, len, i);
    while (i < len && yajl_space(static_cast<unsigned char>(data[i]))) {
        i++;
    }
    return i;
}

} // namespace

size_t json_skip_value(const char *d, size_t n, size_t p) noexcept
{
    if (p >= n) {
        return n;
    }
    if (d[p] == '"') {
        return skip_string(d, n, p);
    }
    if (d[p] != '{' && d[p] != '[') {
        while (p < n && d[p] != ',' && d[p] != '}' && d[p] != ']'
               && !yajl_space(static_cast<unsigned char>(d[p])))
        {
            p++;
        }
        return p;
    }
    size_t depth = 0;
    while (p < n) {
        char ch = d[p];
        if (ch == '"') {
            p = skip_string(d, n, p);
            continue;
        }
        if (ch == '{' || ch == '[') {
            depth++;
        } else if (ch == '}' || ch == ']') {
            if (--depth == 0) {
                return p + 1;
            }
        }
        p++;
    }
    return n;
}

const jval *jmember(const jval *obj, const char *key, size_t key_len) noexcept
{
    const jval *found = nullptr;

    for (const jval *v = obj->first; v != nullptr; v = v->next) {
        if (v->key_len == key_len
            && (key_len == 0 || std::memcmp(v->key, key, key_len) == 0))
        {
            found = v;
        }
    }
    return found;
}

const jval *jget(const jval *obj, const char *key) noexcept
{
    const jval *v = jmember(obj, key, std::strlen(key));
    return v != nullptr && v->kind == J_NULL ? nullptr : v;
}

void yajl_error_text(yajl_handle h, char *out, size_t out_len) noexcept
{
    unsigned char *e = yajl_get_error(h, 0, nullptr, 0);
    if (e == nullptr) {
        set_err(out, out_len, "syntax error");
        return;
    }
    size_t n = std::strlen(reinterpret_cast<char *>(e));
    /* yajl ends with a newline; keep the message on one line */
    for (size_t i = 0; i < n; i++) {
        if (e[i] == '\n' || e[i] == '\r') {
            e[i] = ' ';
        }
    }
    while (n > 0 && e[n - 1] == ' ') {
        n--;
    }
    if (n == 0) {
        set_err(out, out_len, "syntax error");
    } else {
        set_err(out, out_len, "%.*s", static_cast<int>(n),
                reinterpret_cast<char *>(e));
    }
    yajl_free_error(h, e);
}

void json_read(const char *data, size_t len, const fl_alloc_t *a,
    unsigned max_depth, jval **root, jread_error *e) noexcept
{
    *root = nullptr;
    e->kind = jread_error::NONE;
    e->consumed = 0;
    e->at_end = false;
    e->why[0] = '\0';

    /* yajl keeps ctx pointers: both live on this frame for the parse. */
    fl_alloc_t copy = *a;
    yajl_alloc_funcs funcs = yajl_funcs(&copy);
    builder b = { &copy, nullptr, nullptr, nullptr, 0, 0, max_depth,
                  false, false };

    yajl_handle h = yajl_alloc(&callbacks, &funcs, &b);
    if (h == nullptr) {
        e->kind = jread_error::NOMEM;
        return;
    }

    yajl_status st = yajl_parse(h, reinterpret_cast<const unsigned char *>(data),
                                len);
    e->consumed = yajl_get_bytes_consumed(h);
    if (st == yajl_status_ok) {
        st = yajl_complete_parse(h);
        e->at_end = true;
    }

    if (b.nomem) {
        e->kind = jread_error::NOMEM;
    } else if (b.too_deep) {
        e->kind = jread_error::TOO_DEEP;
    } else if (st != yajl_status_ok) {
        e->kind = jread_error::SYNTAX;
        yajl_error_text(h, e->why, sizeof(e->why));
    } else if (b.root != nullptr && garbage_at(data, len) < len) {
        e->kind = jread_error::SYNTAX;
        e->consumed = garbage_at(data, len);
        e->at_end = false;
        set_err(e->why, sizeof(e->why), "parse error: trailing garbage");
    } else {
        *root = b.root;
    }

    yajl_free(h);
}

size_t json_error_offset(const char *data, size_t len) noexcept
{
    yajl_handle h = yajl_alloc(nullptr, nullptr, nullptr);
    size_t i = 0;

    if (h == nullptr) {
        return len;
    }
    for (; i < len; i++) {
        if (yajl_parse(h, reinterpret_cast<const unsigned char *>(data + i), 1)
            != yajl_status_ok)
        {
            break;
        }
    }
    yajl_free(h);
    if (i == len && len > 0) {
        /* accepted to the end: an unterminated string after the value
         * (json_read) is where the error is */
        i = garbage_at(data, len);
    }
    return i;
}

fl_status_t jparse(const char *data, size_t len, const fl_alloc_t *a,
    unsigned max_depth, const char *subject, jval **root,
    char *err, size_t err_len) noexcept
{
    *root = nullptr;

    size_t i = 0;
    while (i < len && json_space(static_cast<unsigned char>(data[i]))) {
        i++;
    }
    if (i == len) {
        set_err(err, err_len, "%s is empty", subject);
        return FL_ERR_JSON;
    }

    jread_error e;
    json_read(data, len, a, max_depth, root, &e);

    switch (e.kind) {
    case jread_error::NONE:
        return FL_OK;
    case jread_error::NOMEM:
        set_err(err, err_len, "out of memory");
        return FL_ERR_NOMEM;
    case jread_error::TOO_DEEP:
        set_err(err, err_len, "JSON nesting is deeper than %u levels", max_depth);
        return FL_ERR_JSON;
    default:
        set_err(err, err_len, "%s is not valid JSON: %s (near byte %zu)",
                subject, e.why, e.at_end ? len : e.consumed);
        return FL_ERR_JSON;
    }
}

} // namespace fl
