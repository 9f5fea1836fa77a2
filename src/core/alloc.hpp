/*
 * alloc.hpp - internal helpers shared by the core's JSON readers (report,
 * override and state file parsers).  Not part of the C API.
 *
 *  - yajl_alloc_funcs over a caller's fl_alloc_t (a bump allocator that
 *    never frees: sizes are kept in a header so realloc can copy);
 *  - malloc_arena: an fl_alloc_t for callers that have none, freed at once;
 *  - a small tree reader (jparse) with a nesting limit, for documents whose
 *    shape is known and small: yajl_tree has no depth limit and frees
 *    recursively, so a hostile "[[[[..." could exhaust the stack;
 *  - exact decimal readers for JSON number text;
 *  - error messages that never end in a cut UTF-8 sequence.
 *
 * Everything here is inline or hidden: nothing leaves libflagscore.a.
 */

#ifndef FLAGS_ALLOC_HPP
#define FLAGS_ALLOC_HPP

#include "flags_core.h"
#include "number.hpp"

#include <yajl/yajl_parse.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>

namespace fl {

/* ------------------------------------------------------------ allocation */

/* Bytes from a, or nullptr on failure. */
inline void *alloc_bytes(const fl_alloc_t *a, size_t n) noexcept
{
    if (a == nullptr || a->alloc == nullptr) {
        return nullptr;
    }
    return a->alloc(a->ctx, n == 0 ? 1 : n);
}

/* A value-initialised T from a; T is never destroyed, so it must be
 * trivially destructible (the allocator frees nothing individually). */
template <class T>
inline T *alloc_obj(const fl_alloc_t *a) noexcept
{
    static_assert(std::is_trivially_destructible<T>::value,
                  "allocator memory is never destroyed");
    void *p = alloc_bytes(a, sizeof(T));
    return p == nullptr ? nullptr : new (p) T();
}

template <class T>
inline T *alloc_array(const fl_alloc_t *a, size_t n) noexcept
{
    static_assert(std::is_trivially_destructible<T>::value,
                  "allocator memory is never destroyed");
    if (n > SIZE_MAX / sizeof(T)) {
        return nullptr;
    }
    return static_cast<T *>(alloc_bytes(a, n * sizeof(T)));
}

/* A NUL-terminated copy of s[0..n) (which may itself hold NUL bytes). */
inline char *dup_bytes(const fl_alloc_t *a, const void *s, size_t n) noexcept
{
    if (n == SIZE_MAX) {
        return nullptr;
    }
    char *p = static_cast<char *>(alloc_bytes(a, n + 1));
    if (p != nullptr) {
        if (n != 0) {
            std::memcpy(p, s, n);
        }
        p[n] = '\0';
    }
    return p;
}

/*
 * yajl over an fl_alloc_t.  Each block carries its size in a 16-byte header
 * (keeps 16-byte alignment) so realloc can copy; free does nothing because
 * the allocator releases everything at once (the nginx request pool).
 * yajl's buffers grow by doubling, so the waste is bounded by the largest
 * token times two.
 *
 * yajl does not check allocation results; the callers keep what yajl must
 * hold small (strings and numbers of a bounded body), so a failure here is
 * a process-wide out-of-memory condition.
 */
struct yajl_block_hdr {
    size_t  size;
    size_t  pad;
};

inline void *yajl_fl_malloc(void *ctx, size_t sz) noexcept
{
    const fl_alloc_t *a = static_cast<const fl_alloc_t *>(ctx);

    if (sz > SIZE_MAX - sizeof(yajl_block_hdr)) {
        return nullptr;
    }
    void *p = alloc_bytes(a, sz + sizeof(yajl_block_hdr));
    if (p == nullptr) {
        return nullptr;
    }
    static_cast<yajl_block_hdr *>(p)->size = sz;
    return static_cast<char *>(p) + sizeof(yajl_block_hdr);
}

inline void *yajl_fl_realloc(void *ctx, void *ptr, size_t sz) noexcept
{
    if (ptr == nullptr) {
        return yajl_fl_malloc(ctx, sz);
    }
    const yajl_block_hdr *h = reinterpret_cast<const yajl_block_hdr *>(
        static_cast<char *>(ptr) - sizeof(yajl_block_hdr));
    if (sz <= h->size) {
        return ptr;                     /* shrinking: keep the block */
    }
    void *n = yajl_fl_malloc(ctx, sz);
    if (n != nullptr) {
        std::memcpy(n, ptr, h->size);
    }
    return n;
}

inline void yajl_fl_free(void *, void *) noexcept
{
}

/* ctx must outlive the yajl handle: point it at a copy of the caller's
 * fl_alloc_t kept next to the handle, not at the caller's own struct. */
inline yajl_alloc_funcs yajl_funcs(const fl_alloc_t *ctx) noexcept
{
    yajl_alloc_funcs f;
    f.malloc = yajl_fl_malloc;
    f.realloc = yajl_fl_realloc;
    f.free = yajl_fl_free;
    f.ctx = const_cast<fl_alloc_t *>(ctx);
    return f;
}

/* An fl_alloc_t over malloc'd chunks, released when the arena goes out of
 * scope: for the API calls that are not given an allocator. */
class malloc_arena {
public:
    malloc_arena() noexcept
    {
        handle_.alloc = &malloc_arena::alloc_cb;
        handle_.ctx = this;
    }

    ~malloc_arena()
    {
        while (chunks_ != nullptr) {
            chunk *next = chunks_->next;
            std::free(chunks_);
            chunks_ = next;
        }
    }

    malloc_arena(const malloc_arena &) = delete;
    malloc_arena &operator=(const malloc_arena &) = delete;

    const fl_alloc_t *handle() const noexcept { return &handle_; }

private:
    struct chunk {
        chunk   *next;
        size_t   size;
        size_t   used;
        size_t   pad;               /* keeps data 16-byte aligned */
    };

    static constexpr size_t chunk_size = 16384;

    static void *alloc_cb(void *ctx, size_t n) noexcept
    {
        return static_cast<malloc_arena *>(ctx)->alloc(n);
    }

    void *alloc(size_t n) noexcept
    {
        if (n > SIZE_MAX - 15 - sizeof(chunk)) {
            return nullptr;
        }
        n = (n + 15) & ~static_cast<size_t>(15);

        if (chunks_ == nullptr || chunks_->size - chunks_->used < n) {
            size_t size = n > chunk_size / 4 ? n : chunk_size;
            chunk *c = static_cast<chunk *>(std::malloc(sizeof(chunk) + size));
            if (c == nullptr) {
                return nullptr;
            }
            c->size = size;
            c->used = 0;
            if (size == n && chunks_ != nullptr) {
                /* A big block of its own: keep the current chunk in use. */
                c->next = chunks_->next;
                chunks_->next = c;
                c->used = n;
                return reinterpret_cast<char *>(c + 1);
            }
            c->next = chunks_;
            chunks_ = c;
        }
        void *p = reinterpret_cast<char *>(chunks_ + 1) + chunks_->used;
        chunks_->used += n;
        return p;
    }

    fl_alloc_t  handle_;
    chunk      *chunks_ = nullptr;
};


/* ---------------------------------------------------------------- errors */

/* Length of the longest prefix of s[0..len) of at most max bytes that does
 * not end inside a UTF-8 sequence. */
inline size_t utf8_prefix(const char *s, size_t len, size_t max) noexcept
{
    if (len <= max) {
        return len;
    }
    size_t n = max;
    /* Step back over continuation bytes to the start of the cut sequence. */
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xc0) == 0x80) {
        n--;
    }
    return n;
}

/* snprintf into err; a truncated message is cut before any incomplete
 * UTF-8 sequence (messages quote client-supplied names). */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
inline void set_err(char *err, size_t err_len, const char *fmt, ...) noexcept
{
    if (err == nullptr || err_len == 0) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = std::vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
    if (n < 0) {
        err[0] = '\0';
        return;
    }
    if (static_cast<size_t>(n) >= err_len) {
        size_t len = err_len - 1;
        size_t end = len;
        /* Find the lead byte of the last sequence and check it is whole. */
        size_t i = len;
        while (i > 0 && (static_cast<unsigned char>(err[i - 1]) & 0xc0) == 0x80
               && len - i < 3) {
            i--;
        }
        if (i > 0) {
            unsigned char lead = static_cast<unsigned char>(err[i - 1]);
            size_t need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
            if (len - (i - 1) < need) {
                end = i - 1;
            }
        }
        err[end] = '\0';
    }
}

/* The text of yajl's current error, without its trailing newline. */
inline void yajl_error_text(yajl_handle h, char *out, size_t out_len) noexcept
{
    unsigned char *e = yajl_get_error(h, 0, nullptr, 0);
    if (e == nullptr) {
        set_err(out, out_len, "syntax error");
        return;
    }
    size_t n = std::strlen(reinterpret_cast<char *>(e));
    while (n > 0 && (e[n - 1] == '\n' || e[n - 1] == ' ')) {
        n--;
    }
    set_err(out, out_len, "%.*s", static_cast<int>(n), reinterpret_cast<char *>(e));
    yajl_free_error(h, e);
}

inline bool json_space(unsigned char c) noexcept
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}


/* -------------------------------------------------------------- numbers */

enum milli_status {
    MILLI_OK = 0,
    MILLI_RANGE,            /* not within [0, 100] */
    MILLI_DECIMALS          /* more than 3 decimals */
};

/* A percentage in [0, 100] with at most 3 decimals, from JSON number text,
 * exactly (12.5, 1.25e1 and 1250e-2 all give 12500), read the same way as
 * the flags file's rolloutPercentage. */
inline milli_status parse_milli(const char *s, size_t len, uint32_t *out) noexcept
{
    DecimalView d;
    uint64_t v;
    bool exact;

    if (!parse_decimal(s, len, &d)
        || !decimal_scaled(d, 3, FL_MILLI_MAX, &v, &exact))
    {
        return MILLI_RANGE;
    }
    if (!exact) {
        return MILLI_DECIMALS;
    }
    *out = static_cast<uint32_t>(v);
    return MILLI_OK;
}

/* A non-negative JSON integer written with digits only (what our writers
 * produce); false on anything else or overflow. */
inline bool parse_u64(const char *s, size_t len, uint64_t *out) noexcept
{
    if (len == 0 || (len > 1 && s[0] == '0')) {
        return false;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return false;
        }
        uint64_t d = static_cast<uint64_t>(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10) {
            return false;
        }
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

/* Appends a literal without its NUL. */
template <size_t N>
inline char *put_lit(char *o, const char (&lit)[N]) noexcept
{
    std::memcpy(o, lit, N - 1);
    return o + N - 1;
}

/* Appends "escaped s" with the quotes. */
inline char *put_str(char *o, const char *s, size_t len) noexcept
{
    *o++ = '"';
    o += fl_json_escape(s, len, o);
    *o++ = '"';
    return o;
}

inline size_t str_bound(size_t len) noexcept
{
    return fl_json_escape_bound(len) + 2;
}


/* ---------------------------------------------------------- tree reader */

struct jval {
    enum kind_t : unsigned char {
        J_NULL, J_FALSE, J_TRUE, J_NUMBER, J_STRING, J_OBJECT, J_ARRAY
    };

    kind_t       kind;
    const char  *str;       /* J_STRING: decoded; J_NUMBER: its text */
    size_t       len;
    const char  *key;       /* member name inside an object */
    size_t       key_len;
    jval        *parent;
    jval        *first;     /* children in document order */
    jval        *last;
    jval        *next;
    size_t       count;
};

/* The last member named key (duplicate keys: the last one wins), or
 * nullptr.  A null value reads as absent. */
inline const jval *jget(const jval *obj, const char *key) noexcept
{
    size_t klen = std::strlen(key);
    const jval *found = nullptr;
    for (const jval *v = obj->first; v != nullptr; v = v->next) {
        if (v->key_len == klen && std::memcmp(v->key, key, klen) == 0) {
            found = v;
        }
    }
    return found != nullptr && found->kind == jval::J_NULL ? nullptr : found;
}

namespace detail {

struct jbuilder {
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

inline int jadd(jbuilder *b, jval::kind_t kind, const void *s, size_t len) noexcept
{
    jval *v = alloc_obj<jval>(b->alloc);
    if (v == nullptr) {
        b->nomem = true;
        return 0;
    }
    v->kind = kind;
    if (kind == jval::J_STRING || kind == jval::J_NUMBER) {
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
        if (b->cur->kind == jval::J_OBJECT) {
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
    if (kind == jval::J_OBJECT || kind == jval::J_ARRAY) {
        if (++b->depth > b->max_depth) {
            b->too_deep = true;
            return 0;           /* stop at once: no growth, no recursion */
        }
        b->cur = v;
    }
    return 1;
}

inline int jb_null(void *ctx) noexcept
{
    return jadd(static_cast<jbuilder *>(ctx), jval::J_NULL, nullptr, 0);
}

inline int jb_bool(void *ctx, int v) noexcept
{
    return jadd(static_cast<jbuilder *>(ctx), v ? jval::J_TRUE : jval::J_FALSE,
                nullptr, 0);
}

inline int jb_number(void *ctx, const char *s, size_t len) noexcept
{
    return jadd(static_cast<jbuilder *>(ctx), jval::J_NUMBER, s, len);
}

inline int jb_string(void *ctx, const unsigned char *s, size_t len) noexcept
{
    return jadd(static_cast<jbuilder *>(ctx), jval::J_STRING, s, len);
}

inline int jb_start_map(void *ctx) noexcept
{
    return jadd(static_cast<jbuilder *>(ctx), jval::J_OBJECT, nullptr, 0);
}

inline int jb_start_array(void *ctx) noexcept
{
    return jadd(static_cast<jbuilder *>(ctx), jval::J_ARRAY, nullptr, 0);
}

inline int jb_key(void *ctx, const unsigned char *s, size_t len) noexcept
{
    jbuilder *b = static_cast<jbuilder *>(ctx);
    b->key = dup_bytes(b->alloc, s, len);
    b->key_len = len;
    if (b->key == nullptr) {
        b->nomem = true;
        return 0;
    }
    return 1;
}

inline int jb_end(void *ctx) noexcept
{
    jbuilder *b = static_cast<jbuilder *>(ctx);
    b->cur = b->cur->parent;
    b->depth--;
    return 1;
}

} // namespace detail

/*
 * Parses a whole document into a tree in a's memory.  subject names the
 * input in messages ("request body", "state file"), except the nesting
 * one, which reads as the report parser's.  FL_ERR_JSON for an
 * empty input, a syntax error (with yajl's reason and the byte offset) or
 * nesting deeper than max_depth; FL_ERR_NOMEM.
 */
inline fl_status_t jparse(const char *data, size_t len, const fl_alloc_t *a,
    unsigned max_depth, const char *subject, jval **root,
    char *err, size_t err_len) noexcept
{
    static const yajl_callbacks cbs = {
        detail::jb_null, detail::jb_bool, nullptr, nullptr, detail::jb_number,
        detail::jb_string, detail::jb_start_map, detail::jb_key,
        detail::jb_end, detail::jb_start_array, detail::jb_end
    };

    *root = nullptr;

    size_t i = 0;
    while (i < len && json_space(static_cast<unsigned char>(data[i]))) {
        i++;
    }
    if (i == len) {
        set_err(err, err_len, "%s is empty", subject);
        return FL_ERR_JSON;
    }

    /* yajl keeps ctx pointers: both live on this frame for the parse. */
    fl_alloc_t copy = *a;
    yajl_alloc_funcs funcs = yajl_funcs(&copy);
    detail::jbuilder b = { &copy, nullptr, nullptr, nullptr, 0, 0, max_depth,
                           false, false };

    yajl_handle h = yajl_alloc(&cbs, &funcs, &b);
    if (h == nullptr) {
        set_err(err, err_len, "out of memory");
        return FL_ERR_NOMEM;
    }

    const unsigned char *u = reinterpret_cast<const unsigned char *>(data);
    yajl_status st = yajl_parse(h, u, len);
    size_t at = yajl_get_bytes_consumed(h);
    if (st == yajl_status_ok) {
        st = yajl_complete_parse(h);
        at = len;
    }

    fl_status_t rc = FL_OK;
    if (b.nomem) {
        set_err(err, err_len, "out of memory");
        rc = FL_ERR_NOMEM;
    } else if (b.too_deep) {
        set_err(err, err_len, "JSON nesting is deeper than %u levels", max_depth);
        rc = FL_ERR_JSON;
    } else if (st != yajl_status_ok) {
        char why[128];
        yajl_error_text(h, why, sizeof(why));
        set_err(err, err_len, "%s is not valid JSON: %s (near byte %zu)",
                subject, why, at);
        rc = FL_ERR_JSON;
    } else {
        *root = b.root;
    }

    yajl_free(h);
    return rc;
}

/* An override object, {"enabled": false} or {"rolloutPercentage": N}:
 * FL_OK, or FL_ERR_FIELD with a message naming the field.  Shared by the
 * admin PUT body and the state file; defined in override.cpp. */
fl_status_t override_from_json(const jval *obj, fl_override_kind_t *kind,
    uint32_t *milli, char *err, size_t err_len) noexcept;

} // namespace fl

#endif /* FLAGS_ALLOC_HPP */
