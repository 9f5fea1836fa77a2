/*
 * state.cpp - the per-flag state block in shared memory (SPEC B4, B7, B8).
 *
 * The block is plain data shared by every worker: no pointers, no locks
 * (a worker that dies must never leave a lock behind, CRAFT pitfall 6).
 * Every field is a 64-bit word changed only with __atomic operations:
 *
 *   header   def_hash, window length, lifetime counters, the control word
 *            and the rollback record;
 *   buckets  window_seconds x { enabled, errors }, one per second.
 *
 * Control word: bit 0 rolled back, bits 1-2 override kind, bits 32-63
 * override milli-percent.  fl_state_effective() is one atomic load of it,
 * and every change to it is a compare-and-swap, so a rollback, an override
 * change and a clear never undo each other.
 *
 * Bucket word: (32-bit second stamp << 32) | 32-bit count, updated by a CAS
 * loop, so every count is exact without a lock:
 *   stamp == now, or newer (the clock went back)  -> count + 1
 *   stamp older than now, or count 0 (empty)      -> (now, 1)
 * Seconds are the caller's monotonic clock truncated to 32 bits and
 * compared by signed 32-bit difference: correct as long as a bucket is not
 * left untouched for 2^31 s (68 years) and the workers' clocks agree to
 * within that.  The bucket index is stamp % window_seconds, so the clock
 * wrapping at 2^32 only shifts the index once.  A count saturates at
 * 2^32 - 1 per second rather than spill into the stamp.
 *
 * The block must be 8-byte aligned (slab allocations are).  fl_state_init()
 * runs before the block is visible to other processes (init_zone, before
 * the workers start), so it uses plain stores.
 */

#include "flags_core.h"

#include <cstring>

namespace {

static_assert(__atomic_always_lock_free(sizeof(uint64_t), 0),
              "shared state needs lock-free 64-bit atomics");

struct state_header {
    uint64_t    def_hash;
    uint64_t    window;                 /* seconds, 1 .. FL_WINDOW_MAX */
    uint64_t    evaluations;
    uint64_t    enabled_evaluations;
    uint64_t    errors;
    uint64_t    control;
    uint64_t    rb_at_ms;
    uint64_t    rb_errors;
    uint64_t    rb_enabled;
};

struct bucket {
    uint64_t    enabled;
    uint64_t    errors;
};

static_assert(sizeof(state_header) % alignof(bucket) == 0, "bucket alignment");

constexpr uint64_t CTL_ROLLED = 1;
constexpr uint64_t CTL_KIND_SHIFT = 1;
constexpr uint64_t CTL_KIND_MASK = 3u << CTL_KIND_SHIFT;
constexpr unsigned CTL_MILLI_SHIFT = 32;

inline state_header *hdr(void *mem)
{
    return static_cast<state_header *>(mem);
}

inline const state_header *hdr(const void *mem)
{
    return static_cast<const state_header *>(mem);
}

inline bucket *buckets(void *mem)
{
    return reinterpret_cast<bucket *>(static_cast<char *>(mem) + sizeof(state_header));
}

inline const bucket *buckets(const void *mem)
{
    return reinterpret_cast<const bucket *>(
        static_cast<const char *>(mem) + sizeof(state_header));
}

inline uint64_t load(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

inline uint64_t load_acq(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

inline void store(uint64_t *p, uint64_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELAXED);
}

inline void add(uint64_t *p, uint64_t v)
{
    __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}

inline uint32_t clamp_window(uint32_t w)
{
    return w == 0 ? 1 : w > FL_WINDOW_MAX ? FL_WINDOW_MAX : w;
}

/* The block's window as stored; clamped again so that a corrupted word
 * cannot send a loop beyond the block. */
inline uint32_t block_window(const void *mem)
{
    uint64_t w = load(&hdr(mem)->window);
    return clamp_window(w > FL_WINDOW_MAX ? FL_WINDOW_MAX : static_cast<uint32_t>(w));
}

inline uint32_t stamp_of(int64_t now_sec)
{
    return static_cast<uint32_t>(static_cast<uint64_t>(now_sec));
}

/* One event into a bucket word (see the file comment). */
void bump(uint64_t *word, uint32_t now)
{
    uint64_t old = load(word);

    for ( ;; ) {
        uint32_t stamp = static_cast<uint32_t>(old >> 32);
        uint32_t count = static_cast<uint32_t>(old);
        uint64_t next;

        if (count == 0 || static_cast<int32_t>(stamp - now) < 0) {
            next = (static_cast<uint64_t>(now) << 32) | 1;
        } else if (count == UINT32_MAX) {
            return;
        } else {
            next = old + 1;
        }

        if (__atomic_compare_exchange_n(word, &old, next, true,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        {
            return;
        }
    }
}

/* Does a word stamped s count at now for a window of w seconds?  Yes when
 * now - w < s, stamps in the future included. */
inline bool in_window(uint64_t word, uint32_t now, uint32_t w)
{
    if (static_cast<uint32_t>(word) == 0) {
        return false;
    }
    int32_t age = static_cast<int32_t>(now - static_cast<uint32_t>(word >> 32));
    return age < static_cast<int32_t>(w);
}

void window_sums(const void *mem, int64_t now_sec, uint32_t w,
    uint64_t *enabled, uint64_t *errors)
{
    const bucket *b = buckets(mem);
    uint32_t n = block_window(mem);
    uint32_t now = stamp_of(now_sec);
    uint64_t en = 0, er = 0;

    for (uint32_t i = 0; i < n; i++) {
        uint64_t we = load(&b[i].enabled);
        uint64_t wr = load(&b[i].errors);
        if (in_window(we, now, w)) {
            en += static_cast<uint32_t>(we);
        }
        if (in_window(wr, now, w)) {
            er += static_cast<uint32_t>(wr);
        }
    }
    *enabled = en;
    *errors = er;
}

void window_clear(void *mem)
{
    bucket *b = buckets(mem);
    uint32_t n = block_window(mem);

    for (uint32_t i = 0; i < n; i++) {
        store(&b[i].enabled, 0);
        store(&b[i].errors, 0);
    }
}

/* Folds src's word into dst's (used when the window length changes): the
 * newer stamp wins, equal stamps add up. */
void merge_word(uint64_t *dst, uint64_t src)
{
    uint32_t scount = static_cast<uint32_t>(src);
    if (scount == 0) {
        return;
    }
    uint32_t sstamp = static_cast<uint32_t>(src >> 32);
    uint64_t old = load(dst);

    for ( ;; ) {
        uint32_t stamp = static_cast<uint32_t>(old >> 32);
        uint32_t count = static_cast<uint32_t>(old);
        uint64_t next;

        if (count == 0 || static_cast<int32_t>(stamp - sstamp) < 0) {
            next = src;
        } else if (stamp == sstamp) {
            uint64_t sum = static_cast<uint64_t>(count) + scount;
            next = (old & 0xffffffff00000000ull)
                   | (sum > UINT32_MAX ? UINT32_MAX : sum);
        } else {
            return;                     /* dst holds a newer second */
        }
        if (__atomic_compare_exchange_n(dst, &old, next, true,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        {
            return;
        }
    }
}

/* CAS loop applying f to the control word; returns the previous value. */
template <class F>
uint64_t update_control(void *mem, F f)
{
    uint64_t *ctl = &hdr(mem)->control;
    uint64_t old = load_acq(ctl);

    while (!__atomic_compare_exchange_n(ctl, &old, f(old), true,
                                        __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    {
    }
    return old;
}

inline fl_override_kind_t ctl_kind(uint64_t c)
{
    switch ((c & CTL_KIND_MASK) >> CTL_KIND_SHIFT) {
    case FL_OVERRIDE_OFF:
        return FL_OVERRIDE_OFF;
    case FL_OVERRIDE_PERCENT:
        return FL_OVERRIDE_PERCENT;
    default:
        return FL_OVERRIDE_NONE;
    }
}

inline uint32_t ctl_milli(uint64_t c)
{
    uint32_t m = static_cast<uint32_t>(c >> CTL_MILLI_SHIFT);
    return m > FL_MILLI_MAX ? FL_MILLI_MAX : m;
}

inline uint64_t ctl_override(fl_override_kind_t kind, uint32_t milli)
{
    switch (kind) {
    case FL_OVERRIDE_OFF:
        return static_cast<uint64_t>(FL_OVERRIDE_OFF) << CTL_KIND_SHIFT;
    case FL_OVERRIDE_PERCENT:
        if (milli > FL_MILLI_MAX) {
            milli = FL_MILLI_MAX;
        }
        return (static_cast<uint64_t>(FL_OVERRIDE_PERCENT) << CTL_KIND_SHIFT)
               | (static_cast<uint64_t>(milli) << CTL_MILLI_SHIFT);
    default:
        return 0;
    }
}

} // namespace

extern "C" {

size_t fl_state_size(uint32_t window_seconds) noexcept
{
    return sizeof(state_header) + clamp_window(window_seconds) * sizeof(bucket);
}

void fl_state_init(void *mem, uint32_t window_seconds, uint64_t def_hash) noexcept
{
    uint32_t w = clamp_window(window_seconds);

    std::memset(mem, 0, sizeof(state_header) + w * sizeof(bucket));
    hdr(mem)->def_hash = def_hash;
    hdr(mem)->window = w;
}

uint32_t fl_state_window(const void *mem) noexcept
{
    return block_window(mem);
}

uint64_t fl_state_def_hash(const void *mem) noexcept
{
    return load_acq(&hdr(mem)->def_hash);
}

void fl_state_redefine(void *mem, uint64_t def_hash) noexcept
{
    __atomic_store_n(&hdr(mem)->def_hash, def_hash, __ATOMIC_RELEASE);
    window_clear(mem);
    update_control(mem, [](uint64_t) { return static_cast<uint64_t>(0); });
}

void fl_state_copy(void *dst, const void *src) noexcept
{
    state_header *d = hdr(dst);
    const state_header *s = hdr(src);

    store(&d->evaluations, load(&s->evaluations));
    store(&d->enabled_evaluations, load(&s->enabled_evaluations));
    store(&d->errors, load(&s->errors));
    store(&d->rb_at_ms, load(&s->rb_at_ms));
    store(&d->rb_errors, load(&s->rb_errors));
    store(&d->rb_enabled, load(&s->rb_enabled));
    __atomic_store_n(&d->control, load_acq(&s->control), __ATOMIC_RELEASE);

    /* The window too, re-bucketed by stamp for the new length: a reload
     * that changes only the window length should not forget recent
     * errors.  Seconds that no longer fit are older than the new window. */
    const bucket *sb = buckets(src);
    bucket *db = buckets(dst);
    uint32_t sn = block_window(src);
    uint32_t dn = block_window(dst);

    for (uint32_t i = 0; i < sn; i++) {
        uint64_t we = load(&sb[i].enabled);
        uint64_t wr = load(&sb[i].errors);
        merge_word(&db[static_cast<uint32_t>(we >> 32) % dn].enabled, we);
        merge_word(&db[static_cast<uint32_t>(wr >> 32) % dn].errors, wr);
    }
}

uint32_t fl_state_effective(const void *mem, uint32_t configured_milli) noexcept
{
    uint64_t c = __atomic_load_n(&hdr(mem)->control, __ATOMIC_ACQUIRE);

    if (c & CTL_ROLLED) {
        return 0;               /* a rollback takes precedence (B8) */
    }
    switch (ctl_kind(c)) {
    case FL_OVERRIDE_OFF:
        return 0;
    case FL_OVERRIDE_PERCENT:
        return ctl_milli(c);
    default:
        return configured_milli;
    }
}

void fl_state_count_eval(void *mem, int64_t now_sec, int enabled) noexcept
{
    state_header *h = hdr(mem);

    add(&h->evaluations, 1);
    if (enabled) {
        add(&h->enabled_evaluations, 1);
        uint32_t now = stamp_of(now_sec);
        bump(&buckets(mem)[now % block_window(mem)].enabled, now);
    }
}

int fl_rollback_decide(uint64_t window_errors, uint64_t window_enabled,
    const fl_rollback_policy_t *policy) noexcept
{
    /* Only an explicit OFF disables: INHERIT should have been resolved by
     * the caller, and treating it as ON fails safe for the users. */
    if (policy == nullptr || policy->mode == FL_ROLLBACK_OFF) {
        return 0;
    }
    uint64_t min_errors = policy->min_errors == 0 ? 1 : policy->min_errors;

    if (window_errors < min_errors) {
        return 0;
    }
    if (window_enabled == 0) {
        return 1;
    }
    /* errors >= rate% x enabled, i.e. errors x 100000 >= rate_milli x
     * enabled; 128-bit products cannot overflow. */
    unsigned __int128 lhs = static_cast<unsigned __int128>(window_errors) * FL_MILLI_MAX;
    unsigned __int128 rhs = static_cast<unsigned __int128>(policy->rate_milli)
                            * window_enabled;
    return lhs >= rhs;
}

int fl_state_record_error(void *mem, int64_t now_sec, uint64_t now_ms,
    const fl_rollback_policy_t *policy) noexcept
{
    state_header *h = hdr(mem);
    uint32_t now = stamp_of(now_sec);
    uint32_t n = block_window(mem);

    add(&h->errors, 1);
    bump(&buckets(mem)[now % n].errors, now);

    if (policy == nullptr || policy->mode == FL_ROLLBACK_OFF) {
        return 0;
    }
    if (load_acq(&h->control) & CTL_ROLLED) {
        return 0;
    }

    uint32_t w = clamp_window(policy->window);
    if (w > n) {
        w = n;
    }
    uint64_t enabled, errors;
    window_sums(mem, now_sec, w, &enabled, &errors);

    if (!fl_rollback_decide(errors, enabled, policy)) {
        return 0;
    }

    uint64_t old = update_control(mem, [](uint64_t c) { return c | CTL_ROLLED; });
    if (old & CTL_ROLLED) {
        return 0;               /* another worker won the race */
    }

    /* Only the winner writes the record.  A status reader may briefly see
     * the flag rolled back with the previous record: harmless. */
    store(&h->rb_at_ms, now_ms);
    store(&h->rb_errors, errors);
    store(&h->rb_enabled, enabled);
    return 1;
}

int fl_state_clear_rollback(void *mem) noexcept
{
    /* Empty the window first so that the next report, seeing the flag no
     * longer rolled back, does not trip it again on the old counts. */
    window_clear(mem);
    uint64_t old = update_control(mem, [](uint64_t c) { return c & ~CTL_ROLLED; });
    return (old & CTL_ROLLED) ? 1 : 0;
}

void fl_state_set_override(void *mem, fl_override_kind_t kind, uint32_t milli) noexcept
{
    uint64_t bits = ctl_override(kind, milli);

    update_control(mem, [bits](uint64_t c) { return (c & CTL_ROLLED) | bits; });
}

void fl_state_restore_rollback(void *mem, uint64_t at_ms, uint64_t errors,
    uint64_t enabled) noexcept
{
    state_header *h = hdr(mem);

    /* The record before the flag: a reader that sees the flag (acquire)
     * sees the record. */
    store(&h->rb_at_ms, at_ms);
    store(&h->rb_errors, errors);
    store(&h->rb_enabled, enabled);
    update_control(mem, [](uint64_t c) { return c | CTL_ROLLED; });
}

void fl_state_snapshot(const void *mem, int64_t now_sec,
    fl_state_snapshot_t *out) noexcept
{
    const state_header *h = hdr(mem);
    uint64_t c = load_acq(&h->control);

    std::memset(out, 0, sizeof(*out));
    out->def_hash = load(&h->def_hash);
    out->window_seconds = block_window(mem);
    out->evaluations = load(&h->evaluations);
    out->enabled_evaluations = load(&h->enabled_evaluations);
    out->errors = load(&h->errors);
    window_sums(mem, now_sec, out->window_seconds,
                &out->window_enabled, &out->window_errors);
    if (c & CTL_ROLLED) {
        /* The record of an earlier, cleared rollback is not shown. */
        out->rolled_back = 1;
        out->rollback_at_ms = load(&h->rb_at_ms);
        out->rollback_errors = load(&h->rb_errors);
        out->rollback_enabled = load(&h->rb_enabled);
    }
    out->override_kind = ctl_kind(c);
    out->override_milli = out->override_kind == FL_OVERRIDE_PERCENT ? ctl_milli(c) : 0;
}

} // extern "C"
