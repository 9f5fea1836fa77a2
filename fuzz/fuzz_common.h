/*
 * fuzz_common.h - shared helpers of the libFuzzer targets in fuzz/.
 *
 *  - Arena: a bump allocator over malloc'd chunks (like an nginx request
 *    pool: 8-byte aligned, nothing freed individually), released after each
 *    input.  Under ASan the unused part of every chunk and a 16-byte gap
 *    after every allocation stay poisoned, so an overrun of one allocation
 *    into the next is still reported.
 *  - FUZZ_CHECK: an invariant; prints what failed and abort()s, which
 *    libFuzzer reports as a crash.
 *  - json_valid: whether a buffer is one complete JSON value (yajl, UTF-8
 *    validated), to check what the core writes.
 */

#ifndef FLAGS_FUZZ_COMMON_H
#define FLAGS_FUZZ_COMMON_H

#include "../src/core/flags_core.h"

#include <yajl/yajl_parse.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FUZZ_ASAN 1
#endif
#endif
#if !defined(FUZZ_ASAN) && defined(__SANITIZE_ADDRESS__)
#define FUZZ_ASAN 1
#endif

#ifdef FUZZ_ASAN
#include <sanitizer/asan_interface.h>
#define FUZZ_POISON(p, n)    ASAN_POISON_MEMORY_REGION((p), (n))
#define FUZZ_UNPOISON(p, n)  ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define FUZZ_POISON(p, n)    ((void) (p), (void) (n))
#define FUZZ_UNPOISON(p, n)  ((void) (p), (void) (n))
#endif

#define FUZZ_CHECK(cond, ...)                                               \
    do {                                                                    \
        if (!(cond)) {                                                      \
            std::fprintf(stderr, "\n*** fuzz check failed at %s:%d: %s\n",  \
                         __FILE__, __LINE__, #cond);                        \
            std::fprintf(stderr, "*** " __VA_ARGS__);                       \
            std::fprintf(stderr, "\n");                                     \
            std::abort();                                                   \
        }                                                                   \
    } while (0)

namespace fuzz {

class Arena {
public:
    static constexpr size_t chunk_size = 64 * 1024;
    static constexpr size_t align = 8;          /* NGX_ALIGNMENT */
    static constexpr size_t gap = 16;           /* poisoned after each block */

    Arena() noexcept
    {
        handle_.alloc = &Arena::alloc_cb;
        handle_.ctx = this;
    }

    ~Arena() { release(); }

    Arena(const Arena &) = delete;
    Arena &operator=(const Arena &) = delete;

    const fl_alloc_t *handle() const noexcept { return &handle_; }

    /* Bytes handed out since the last release (what a pool would hold). */
    size_t requested() const noexcept { return requested_; }

    void *alloc(size_t size) noexcept
    {
        requested_ += size;

        /* Large blocks get a chunk of their own, as ngx_palloc_large. */
        if (size > chunk_size / 4) {
            chunk *c = new_chunk(size + gap);
            if (c == nullptr) {
                return nullptr;
            }
            c->used = c->size;
            FUZZ_UNPOISON(c->data(), size);
            return c->data();
        }

        size_t off = cur_ ? (cur_->used + align - 1) & ~(align - 1) : 0;
        if (cur_ == nullptr || off + size + gap > cur_->size) {
            chunk *c = new_chunk(chunk_size);
            if (c == nullptr) {
                return nullptr;
            }
            cur_ = c;
            off = 0;
        }
        char *p = cur_->data() + off;
        cur_->used = off + size + gap;
        FUZZ_UNPOISON(p, size);
        return p;
    }

    void release() noexcept
    {
        while (chunks_ != nullptr) {
            chunk *next = chunks_->next;
            FUZZ_UNPOISON(chunks_->data(), chunks_->size);
            std::free(chunks_);
            chunks_ = next;
        }
        cur_ = nullptr;
        requested_ = 0;
    }

private:
    struct chunk {
        chunk   *next;
        size_t   size;
        size_t   used;
        size_t   pad;               /* data() stays 16-byte aligned */
        char *data() { return reinterpret_cast<char *>(this + 1); }
    };

    chunk *new_chunk(size_t size) noexcept
    {
        chunk *c = static_cast<chunk *>(std::malloc(sizeof(chunk) + size));
        if (c == nullptr) {
            return nullptr;
        }
        c->next = chunks_;
        c->size = size;
        c->used = 0;
        chunks_ = c;
        FUZZ_POISON(c->data(), size);
        return c;
    }

    static void *alloc_cb(void *ctx, size_t size)
    {
        return static_cast<Arena *>(ctx)->alloc(size);
    }

    fl_alloc_t  handle_;
    chunk      *chunks_ = nullptr;
    chunk      *cur_ = nullptr;
    size_t      requested_ = 0;
};

/* FNV-1a 64: decisions "derived from the input" that leave the input
 * itself untouched (so seeds and regressions stay plain bodies). */
inline uint64_t hash64(const uint8_t *d, size_t n, uint64_t h = 0xcbf29ce484222325ull)
{
    for (size_t i = 0; i < n; i++) {
        h ^= d[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

/* One complete JSON value (yajl defaults: UTF-8 checked, no comments, no
 * trailing garbage). */
inline bool json_valid(const char *s, size_t n)
{
    yajl_handle h = yajl_alloc(nullptr, nullptr, nullptr);
    if (h == nullptr) {
        std::abort();
    }
    bool ok = yajl_parse(h, reinterpret_cast<const unsigned char *>(s), n)
                  == yajl_status_ok
              && yajl_complete_parse(h) == yajl_status_ok;
    yajl_free(h);
    return ok;
}

/* A message for a person: NUL-terminated inside its buffer and, when
 * one_line (messages that go to the error log as they are), without a line
 * break.  Messages that are only sent JSON-escaped in a 400 answer (report
 * and override bodies) may quote a client's decoded name, "\n" included. */
inline void check_message(const char *err, size_t err_len, const char *what,
    bool one_line = true)
{
    const void *nul = std::memchr(err, '\0', err_len);
    FUZZ_CHECK(nul != nullptr, "%s: error message not NUL-terminated", what);
    FUZZ_CHECK(err[0] != '\0', "%s: empty error message", what);
    FUZZ_CHECK(!one_line || (std::strchr(err, '\n') == nullptr
               && std::strchr(err, '\r') == nullptr),
               "%s: error message has a line break: %s", what, err);
}

/* Heap copy of exactly n bytes, so ASan sees a read past the end. */
struct Exact {
    char *p;
    explicit Exact(const uint8_t *d, size_t n)
        : p(static_cast<char *>(std::malloc(n ? n : 1)))
    {
        if (p == nullptr) std::abort();
        if (n) std::memcpy(p, d, n);
    }
    ~Exact() { std::free(p); }
    Exact(const Exact &) = delete;
    Exact &operator=(const Exact &) = delete;
};

/* The /flags answer for results r fits fl_flags_json_bound() exactly and is
 * valid JSON. */
inline void check_flags_json(const fl_project_t *p, const fl_detail_t *r)
{
    size_t bound = fl_flags_json_bound(p);
    char *buf = static_cast<char *>(std::malloc(bound));
    FUZZ_CHECK(buf != nullptr, "malloc");
    size_t n = fl_flags_json(p, r, buf);
    FUZZ_CHECK(n <= bound, "fl_flags_json wrote %zu bytes, bound %zu", n, bound);
    FUZZ_CHECK(json_valid(buf, n), "/flags answer is not valid JSON: %.*s",
               static_cast<int>(n), buf);
    std::free(buf);
}

} // namespace fuzz

#endif /* FLAGS_FUZZ_COMMON_H */
