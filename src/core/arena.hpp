/*
 * arena.hpp - the core's one allocator abstraction (internal, not part of
 * the C API).
 *
 *  - typed allocation from a caller's fl_alloc_t, a bump allocator that
 *    never frees (the nginx request pool);
 *  - yajl_alloc_funcs over such an allocator, so yajl's buffers come from
 *    the same place (sizes are kept in a header so realloc can copy);
 *  - malloc_arena: an fl_alloc_t for callers that have none (configuration
 *    time, the admin PUT body), freed at once when it goes out of scope.
 *
 * Everything here is inline: nothing leaves libflagscore.a.
 */

#ifndef FLAGS_ARENA_HPP
#define FLAGS_ARENA_HPP

#include "flags_core.h"

#include <yajl/yajl_parse.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>

namespace fl {

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

} // namespace fl

#endif /* FLAGS_ARENA_HPP */
