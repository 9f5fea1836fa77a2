/*
 * state.cpp - per-flag state in shared memory (docs/evaluation.md,
 * automatic rollback): lifetime totals, the control block of a
 * definition, and window blocks.
 *
 * The blocks are plain data shared by every worker: no pointers, no locks
 * (a worker that dies must never leave a lock behind).
 * Every field is a 64-bit word changed only with __atomic operations.
 *
 * Control word: bit 0 rolled back, bits 1-2 override kind, bit 3 a ramp
 * in force, bits 8-24 the ramp's milli-percent, bits 32-63 override
 * milli-percent.  fl_control_effective() is one atomic load of
 * it, and every change to it is a compare-and-swap, so a rollback, an
 * override change and a clear never undo each other.
 *
 * Window block: its length, then length x { enabled, errors } bucket
 * words.  A bucket word is (32-bit second stamp << 32) | 32-bit count,
 * updated by a CAS loop, so every count is exact without a lock:
 *   stamp == now, or newer (the clock went back)  -> count + 1
 *   stamp older than now, or count 0 (empty)      -> (now, 1)
 * Seconds are the caller's monotonic clock truncated to 32 bits and
 * compared by signed 32-bit difference: correct as long as a bucket is not
 * left untouched for 2^31 s (68 years) and the workers' clocks agree to
 * within that.  The bucket index is stamp % length, so the clock wrapping
 * at 2^32 only shifts the index once.  A count saturates at 2^32 - 1 per
 * second rather than spill into the stamp.
 *
 * Blocks must be 8-byte aligned (slab allocations are).  The init
 * functions run before a block is visible to other processes, so they use
 * plain stores.
 */

#include "flags_core.h"
#include "control.hpp"
#include "murmur3.hpp"

#include <cstring>

namespace {

static_assert(__atomic_always_lock_free(sizeof(uint64_t), 0),
              "shared state needs lock-free 64-bit atomics");

} // namespace

/* A window block's header; its buckets follow. */
struct fl_window_s {
    uint64_t    seconds;                /* 1 .. FL_WINDOW_MAX */
};

namespace {


struct bucket {
    uint64_t    enabled;
    uint64_t    errors;
};

static_assert(sizeof(fl_window_t) % alignof(bucket) == 0, "bucket alignment");
static_assert(sizeof(fl_control_t) == 7 * sizeof(uint64_t), "control block layout");

constexpr uint64_t CTL_ROLLED = 1;
constexpr uint64_t CTL_KIND_SHIFT = 1;
constexpr uint64_t CTL_KIND_MASK = 3u << CTL_KIND_SHIFT;
constexpr unsigned CTL_MILLI_SHIFT = 32;
constexpr uint64_t CTL_RAMP = 8;
constexpr unsigned CTL_RAMP_SHIFT = 8;
constexpr uint64_t CTL_RAMP_MASK = (CTL_RAMP | (0x1ffffull << CTL_RAMP_SHIFT));
static_assert(FL_MILLI_MAX <= 0x1ffff, "a ramp's percentage fits 17 bits");

inline bucket *buckets(fl_window_t *w)
{
    return reinterpret_cast<bucket *>(w + 1);
}

inline const bucket *buckets(const fl_window_t *w)
{
    return reinterpret_cast<const bucket *>(w + 1);
}

/* The source table follows the buckets: FL_SOURCE_SLOTS words of
 * (32-bit key << 32) | 32-bit second stamp, 0 when empty. */
constexpr unsigned SOURCE_PROBES = 8;

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

/* The block's length as stored; clamped again so that a corrupted word
 * cannot send a loop beyond the block. */
inline uint32_t block_seconds(const fl_window_t *w)
{
    uint64_t n = load(&w->seconds);
    return clamp_window(n > FL_WINDOW_MAX ? FL_WINDOW_MAX : static_cast<uint32_t>(n));
}

/* The bucket of second now (a stamp) in the ring of w. */
inline bucket *bucket_of(fl_window_t *w, uint32_t now)
{
    return &buckets(w)[now % block_seconds(w)];
}

inline const bucket *bucket_of(const fl_window_t *w, uint32_t now)
{
    return &buckets(w)[now % block_seconds(w)];
}

inline uint64_t *sources(fl_window_t *w)
{
    return reinterpret_cast<uint64_t *>(buckets(w) + block_seconds(w));
}

inline const uint64_t *sources(const fl_window_t *w)
{
    return reinterpret_cast<const uint64_t *>(buckets(w) + block_seconds(w));
}

inline uint32_t source_key_of(uint64_t word)
{
    return static_cast<uint32_t>(word >> 32);
}

/* A source word's second is live at now for a window of w seconds (the
 * same test as a bucket's, stamps in the future included). */
inline bool source_live(uint64_t word, uint32_t now, uint32_t w)
{
    if (word == 0) {
        return false;
    }
    int32_t age = static_cast<int32_t>(now - static_cast<uint32_t>(word));
    return age < static_cast<int32_t>(w);
}

/* Is stamp a older than stamp b (signed 32-bit difference)? */
inline bool older(uint32_t a, uint32_t b)
{
    return static_cast<int32_t>(a - b) < 0;
}

/* Remembers key at second now (see fl_count_source()): in the key's own
 * slot among the SOURCE_PROBES from key % FL_SOURCE_SLOTS when it is
 * there, else in an empty slot, else in the oldest one. */
void remember_source(uint64_t *table, uint32_t key, uint32_t now)
{
    uint64_t want = (static_cast<uint64_t>(key) << 32) | now;
    uint32_t base = key % FL_SOURCE_SLOTS;

    for ( ;; ) {
        uint64_t *victim = nullptr;
        uint64_t victim_word = 0;

        for (unsigned i = 0; i < SOURCE_PROBES; i++) {
            uint64_t *slot = &table[(base + i) % FL_SOURCE_SLOTS];
            uint64_t word = load(slot);

            if (word != 0 && source_key_of(word) == key) {
                if (!older(static_cast<uint32_t>(word), now)) {
                    return;             /* as new as this one already */
                }
                victim = slot;
                victim_word = word;
                break;
            }
            if (victim == nullptr
                || (victim_word != 0
                    && (word == 0
                        || older(static_cast<uint32_t>(word),
                                 static_cast<uint32_t>(victim_word)))))
            {
                victim = slot;
                victim_word = word;
            }
        }

        if (__atomic_compare_exchange_n(victim, &victim_word, want, false,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        {
            return;
        }
        /* another process changed the slot meanwhile: look again */
    }
}

inline uint32_t stamp_of(int64_t now_sec)
{
    return static_cast<uint32_t>(static_cast<uint64_t>(now_sec));
}

/* One event into a bucket word (see the file comment). */
/* always inlined: with a constant n its saturation test folds away */
__attribute__((always_inline)) inline void bump_by(uint64_t *word,
    uint32_t now, uint32_t n)
{
    uint64_t old = load(word);

    for ( ;; ) {
        uint32_t stamp = static_cast<uint32_t>(old >> 32);
        uint32_t count = static_cast<uint32_t>(old);
        uint64_t next;

        if (count == 0 || static_cast<int32_t>(stamp - now) < 0) {
            next = (static_cast<uint64_t>(now) << 32) | n;
        } else if (count == UINT32_MAX) {
            return;
        } else {
            /* a second's count saturates rather than wraps */
            uint32_t c = count > UINT32_MAX - n ? UINT32_MAX : count + n;
            next = (old & ~static_cast<uint64_t>(UINT32_MAX)) | c;
        }

        if (__atomic_compare_exchange_n(word, &old, next, true,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        {
            return;
        }
    }
}

/* one event: bump_by() inlined with n = 1 (the request path's) */
void bump(uint64_t *word, uint32_t now)
{
    bump_by(word, now, 1);
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

/* Folds src's word into dst's: the newer stamp wins, equal stamps add
 * up. */
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
uint64_t update_control(fl_control_t *c, F f)
{
    uint64_t *ctl = &c->control;
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

/* The percentage a definition configures, or its ramp's when one is in
 * force. */
inline uint32_t ctl_configured(uint64_t c, uint32_t configured_milli)
{
    if (c & CTL_RAMP) {
        uint32_t m = static_cast<uint32_t>((c >> CTL_RAMP_SHIFT) & 0x1ffff);
        return m > FL_MILLI_MAX ? FL_MILLI_MAX : m;
    }
    return configured_milli;
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

void fl_count_eval(fl_totals_t *t, fl_window_t *w, int64_t now_sec, int enabled) noexcept
{
    add(&t->evaluations, 1);
    if (enabled) {
        add(&t->enabled_evaluations, 1);
        uint32_t now = stamp_of(now_sec);
        bump(&bucket_of(w, now)->enabled, now);
    }
}

void fl_count_evals(fl_totals_t *t, fl_window_t *w, int64_t now_sec,
    uint32_t n, uint32_t enabled) noexcept
{
    if (n == 0) {
        return;
    }
    if (enabled > n) {
        enabled = n;
    }
    add(&t->evaluations, n);
    if (enabled) {
        add(&t->enabled_evaluations, enabled);
        uint32_t now = stamp_of(now_sec);
        bump_by(&bucket_of(w, now)->enabled, now, enabled);
    }
}

void fl_count_prefetch(const fl_totals_t *t, const fl_window_t *w,
    int64_t now_sec, int stage) noexcept
{
    if (t == nullptr || w == nullptr) {
        return;
    }
    if (stage == 0) {
        __builtin_prefetch(t, 1, 3);
        __builtin_prefetch(w, 0, 3);
        return;
    }
    uint32_t now = stamp_of(now_sec);
    __builtin_prefetch(bucket_of(w, now), 1, 3);
}

void fl_count_error_cohort(fl_totals_t *t, fl_window_t *w, int64_t now_sec,
    int enabled, int upstream) noexcept
{
    if (!enabled) {
        /* only its cohort: an off client's error is not the flag's (not
         * in "errors", which flags_sync sends to the fleet's window, nor
         * in the window), so it never rolls the flag back */
        add(&t->off_errors, 1);
        return;
    }

    uint32_t now = stamp_of(now_sec);

    add(&t->errors, 1);
    bump(&bucket_of(w, now)->errors, now);
    if (upstream) {
        add(&t->errors_upstream, 1);
    }
    add(&t->on_errors, 1);
}

void fl_count_error(fl_totals_t *t, fl_window_t *w, int64_t now_sec) noexcept
{
    fl_count_error_cohort(t, w, now_sec, 1, 0);
}

void fl_count_rollback(fl_totals_t *t, fl_decided_t by) noexcept
{
    add(&t->rollbacks, 1);
    if (by == FL_DECIDED_FLEET) {
        add(&t->rollbacks_fleet, 1);
    }
}

uint32_t fl_source_key(const char *user_id, size_t user_id_len,
    const char *addr, size_t addr_len) noexcept
{
    /* a user and an address that spell alike are different sources */
    fl::Murmur3 h(0x5eed50u);
    if (user_id != nullptr && user_id_len > 0) {
        h.update("u", 1);
        h.update(user_id, user_id_len);
    } else {
        h.update("a", 1);
        if (addr != nullptr) {
            h.update(addr, addr_len);
        }
    }
    uint32_t k = h.final();
    return k == 0 ? 1 : k;
}

void fl_count_source(fl_window_t *w, int64_t now_sec, uint32_t key) noexcept
{
    remember_source(sources(w), key == 0 ? 1 : key, stamp_of(now_sec));
}

void fl_window_source_ages(const fl_window_t *w, int64_t now_sec,
    uint32_t seconds, uint32_t *keys, uint32_t *ages, size_t *n,
    size_t max) noexcept
{
    const uint64_t *t = sources(w);
    uint32_t len = clamp_window(seconds);
    uint32_t now = stamp_of(now_sec);

    /* the keys already listed, in an open-addressed set of positions + 1
     * (twice the slots, so a probe ends soon): a key counts once, whether
     * it is in another block or in two slots of this one (two processes
     * remembering one new key at once) */
    constexpr uint32_t SET = 2 * FL_SOURCE_SLOTS;
    uint8_t set[SET] = {};
    static_assert(FL_SOURCE_SLOTS < 255, "positions fit a byte");

    auto find = [&](uint32_t key) -> uint8_t * {
        uint32_t h = (key * 2654435761u) >> 25;         /* 7 bits */
        for ( ;; h = (h + 1) % SET) {
            if (set[h] == 0 || keys[set[h] - 1] == key) {
                return &set[h];
            }
        }
    };

    if (max > FL_SOURCE_SLOTS) {
        max = FL_SOURCE_SLOTS;
    }
    for (size_t j = 0; j < *n && j < max; j++) {
        *find(keys[j]) = static_cast<uint8_t>(j + 1);
    }

    for (uint32_t i = 0; i < FL_SOURCE_SLOTS; i++) {
        uint64_t word = load(&t[i]);
        if (!source_live(word, now, len)) {
            continue;
        }
        uint32_t key = source_key_of(word);
        int32_t d = static_cast<int32_t>(now - static_cast<uint32_t>(word));
        uint32_t age = d < 0 ? 0 : static_cast<uint32_t>(d);
        uint8_t *at = find(key);

        if (*at != 0) {
            size_t j = *at - 1u;
            if (ages != nullptr && age < ages[j]) {
                ages[j] = age;          /* its newest second */
            }
        } else if (*n < max) {
            keys[*n] = key;
            if (ages != nullptr) {
                ages[*n] = age;
            }
            (*n)++;
            *at = static_cast<uint8_t>(*n);
        }
    }
}

void fl_window_sources(const fl_window_t *w, int64_t now_sec,
    uint32_t seconds, uint32_t *keys, size_t *n, size_t max) noexcept
{
    fl_window_source_ages(w, now_sec, seconds, keys, nullptr, n, max);
}

void fl_control_init(fl_control_t *c, uint64_t def_hash) noexcept
{
    std::memset(c, 0, sizeof(*c));
    c->def_hash = def_hash;
}

uint32_t fl_control_switch(const fl_control_t *c, uint32_t configured_milli,
    uint8_t *sw) noexcept
{
    if (c == nullptr) {
        *sw = FL_SWITCH_NONE;
        return configured_milli;
    }

    uint64_t w = load_acq(&c->control);
    bool rolled = (w & CTL_ROLLED) != 0;
    fl_override_kind_t kind = ctl_kind(w);

    *sw = rolled ? FL_SWITCH_ROLLED_BACK
          : kind == FL_OVERRIDE_OFF ? FL_SWITCH_OVERRIDE_OFF
          : kind == FL_OVERRIDE_PERCENT ? FL_SWITCH_OVERRIDE_PERCENT
          : FL_SWITCH_NONE;
    return fl::effective_milli(rolled, kind, ctl_milli(w),
                               ctl_configured(w, configured_milli));
}

uint32_t fl_control_effective(const fl_control_t *c, uint32_t configured_milli) noexcept
{
    uint64_t w = load_acq(&c->control);

    return fl::effective_milli((w & CTL_ROLLED) != 0, ctl_kind(w), ctl_milli(w),
                               ctl_configured(w, configured_milli));
}

void fl_control_set_ramp(fl_control_t *c, uint32_t milli) noexcept
{
    uint64_t bits = 0;

    if (milli != FL_RAMP_NONE) {
        bits = CTL_RAMP | (static_cast<uint64_t>(milli > FL_MILLI_MAX
                                                 ? FL_MILLI_MAX : milli)
                           << CTL_RAMP_SHIFT);
    }
    update_control(c, [bits](uint64_t w) {
        return (w & ~CTL_RAMP_MASK) | bits;
    });
}

uint32_t fl_control_ramp(const fl_control_t *c) noexcept
{
    uint64_t w = load_acq(&c->control);

    return (w & CTL_RAMP) ? ctl_configured(w, 0) : FL_RAMP_NONE;
}

int fl_control_try_rollback(fl_control_t *c, uint64_t at_ms, uint64_t errors,
    uint64_t enabled, uint64_t sources, fl_decided_t by) noexcept
{
    if (load_acq(&c->control) & CTL_ROLLED) {
        return 0;
    }
    uint64_t old = update_control(c, [](uint64_t w) { return w | CTL_ROLLED; });
    if (old & CTL_ROLLED) {
        return 0;               /* another worker won the race */
    }

    /* Only the winner writes the record.  A status reader may briefly see
     * the flag rolled back with the previous record: harmless. */
    store(&c->rb_at_ms, at_ms);
    store(&c->rb_errors, errors);
    store(&c->rb_enabled, enabled);
    store(&c->rb_sources, sources);
    store(&c->rb_by, by);
    return 1;
}

int fl_control_clear_rollback(fl_control_t *c) noexcept
{
    uint64_t old = update_control(c, [](uint64_t w) { return w & ~CTL_ROLLED; });
    return (old & CTL_ROLLED) ? 1 : 0;
}

void fl_control_set_override(fl_control_t *c, fl_override_kind_t kind,
    uint32_t milli) noexcept
{
    uint64_t bits = ctl_override(kind, milli);

    update_control(c, [bits](uint64_t w) {
        return (w & (CTL_ROLLED | CTL_RAMP_MASK)) | bits;
    });
}

void fl_control_restore_rollback(fl_control_t *c, uint64_t at_ms,
    uint64_t errors, uint64_t enabled, uint64_t sources, fl_decided_t by)
    noexcept
{
    /* The record before the flag: a reader that sees the flag (acquire)
     * sees the record. */
    store(&c->rb_at_ms, at_ms);
    store(&c->rb_errors, errors);
    store(&c->rb_enabled, enabled);
    store(&c->rb_sources, sources);
    store(&c->rb_by, by);
    update_control(c, [](uint64_t w) { return w | CTL_ROLLED; });
}

int fl_control_carry(fl_control_t *to, const fl_control_t *from) noexcept
{
    if (to == nullptr || from == nullptr || to == from) {
        return 0;
    }

    /* one read of the source's word: the record a rollback wrote before
     * (a restore) or right after (a trip) its bit is read after it */
    uint64_t fw = load_acq(&from->control);
    bool rolled = (fw & CTL_ROLLED) != 0;
    uint64_t ov = fw & (CTL_KIND_MASK | (~0ull << CTL_MILLI_SHIFT));
    int carried = 0;

    if (ctl_kind(fw) == FL_OVERRIDE_NONE) {
        ov = 0;
    } else {
        carried |= FL_CARRIED_OVERRIDE;
    }

    if (rolled) {
        carried |= FL_CARRIED_ROLLBACK;
        if (!(load_acq(&to->control) & CTL_ROLLED)) {
            /* the record before the bit, as a restore writes it; a
             * rollback of to's own (a race) keeps its record */
            store(&to->rb_at_ms, load(&from->rb_at_ms));
            store(&to->rb_errors, load(&from->rb_errors));
            store(&to->rb_enabled, load(&from->rb_enabled));
            store(&to->rb_sources, load(&from->rb_sources));
            store(&to->rb_by, load(&from->rb_by));
        }
    }

    update_control(to, [rolled, ov](uint64_t w) {
        uint64_t next = w;
        if (rolled) {
            next |= CTL_ROLLED;
        }
        if (ov != 0) {
            next = (next & (CTL_ROLLED | CTL_RAMP_MASK)) | ov;
        }
        return next;
    });

    return carried;
}

int fl_control_active(const fl_control_t *c) noexcept
{
    uint64_t w = load_acq(&c->control);

    return (w & CTL_ROLLED) || ctl_kind(w) != FL_OVERRIDE_NONE;
}

int fl_control_rolled_back(const fl_control_t *c) noexcept
{
    return (load_acq(&c->control) & CTL_ROLLED) ? 1 : 0;
}

size_t fl_window_size(uint32_t seconds) noexcept
{
    return sizeof(fl_window_t) + clamp_window(seconds) * sizeof(bucket)
           + FL_SOURCE_SLOTS * sizeof(uint64_t);
}

fl_window_t *fl_window_init(void *mem, uint32_t seconds) noexcept
{
    uint32_t n = clamp_window(seconds);

    std::memset(mem, 0, fl_window_size(n));
    fl_window_t *w = static_cast<fl_window_t *>(mem);
    w->seconds = n;
    return w;
}

uint32_t fl_window_seconds(const fl_window_t *w) noexcept
{
    return block_seconds(w);
}

void fl_window_sums(const fl_window_t *w, int64_t now_sec, uint32_t seconds,
    uint64_t *enabled, uint64_t *errors) noexcept
{
    const bucket *b = buckets(w);
    uint32_t n = block_seconds(w);
    uint32_t len = clamp_window(seconds);
    uint32_t now = stamp_of(now_sec);
    uint64_t en = 0, er = 0;

    for (uint32_t i = 0; i < n; i++) {
        uint64_t we = load(&b[i].enabled);
        uint64_t wr = load(&b[i].errors);
        if (in_window(we, now, len)) {
            en += static_cast<uint32_t>(we);
        }
        if (in_window(wr, now, len)) {
            er += static_cast<uint32_t>(wr);
        }
    }
    *enabled += en;
    *errors += er;
}

void fl_window_series(const fl_window_t *w, int64_t now_sec, fl_series_t *out)
    noexcept
{
    const bucket *b = buckets(w);
    uint32_t n = block_seconds(w);
    uint32_t now = stamp_of(now_sec);
    uint32_t len = out->seconds < FL_SERIES_MAX ? out->seconds : FL_SERIES_MAX;

    if (len > n) {
        len = n;
    }

    for (uint32_t i = 0; i < n; i++) {
        const uint64_t words[2] = {load(&b[i].enabled), load(&b[i].errors)};
        uint32_t *to[2] = {out->enabled, out->errors};

        for (int k = 0; k < 2; k++) {
            uint32_t count = static_cast<uint32_t>(words[k]);
            if (count == 0) {
                continue;
            }
            int32_t age = static_cast<int32_t>(
                now - static_cast<uint32_t>(words[k] >> 32));
            if (age < 0) {
                age = 0;            /* another worker's clock, a step ahead */
            }
            if (age < static_cast<int32_t>(len)) {
                uint32_t &c = to[k][age];
                c = count > UINT32_MAX - c ? UINT32_MAX : c + count;
            }
        }
    }
}

void fl_window_merge(fl_window_t *dst, const fl_window_t *src) noexcept
{
    const bucket *sb = buckets(src);
    bucket *db = buckets(dst);
    uint32_t sn = block_seconds(src);
    uint32_t dn = block_seconds(dst);

    /* Seconds that do not fit are older than dst's whole length. */
    for (uint32_t i = 0; i < sn; i++) {
        uint64_t we = load(&sb[i].enabled);
        uint64_t wr = load(&sb[i].errors);
        merge_word(&db[static_cast<uint32_t>(we >> 32) % dn].enabled, we);
        merge_word(&db[static_cast<uint32_t>(wr >> 32) % dn].errors, wr);
    }

    const uint64_t *ss = sources(src);
    for (uint32_t i = 0; i < FL_SOURCE_SLOTS; i++) {
        uint64_t word = load(&ss[i]);
        if (word != 0) {
            remember_source(sources(dst), source_key_of(word),
                            static_cast<uint32_t>(word));
        }
    }
}

void fl_window_clear(fl_window_t *w) noexcept
{
    bucket *b = buckets(w);
    uint32_t n = block_seconds(w);

    for (uint32_t i = 0; i < n; i++) {
        store(&b[i].enabled, 0);
        store(&b[i].errors, 0);
    }

    uint64_t *t = sources(w);
    for (uint32_t i = 0; i < FL_SOURCE_SLOTS; i++) {
        store(&t[i], 0);
    }
}

void fl_state_snapshot(const fl_totals_t *t, const fl_control_t *c,
    uint32_t window_seconds, uint64_t window_enabled, uint64_t window_errors,
    fl_state_snapshot_t *out) noexcept
{
    std::memset(out, 0, sizeof(*out));

    if (t != nullptr) {
        /* enabled first: an evaluation is counted before its enabled
         * count, so evaluations >= enabled_evaluations as read here */
        out->enabled_evaluations = load(&t->enabled_evaluations);
        out->evaluations = load(&t->evaluations);
        if (out->evaluations < out->enabled_evaluations) {
            out->evaluations = out->enabled_evaluations;
        }
        out->errors = load(&t->errors);
        out->errors_upstream = load(&t->errors_upstream);
        /* the cohorts: every evaluation by its answer, whatever the path
         * (docs/evaluation.md, "Counting") */
        out->on_evaluations = out->enabled_evaluations;
        out->on_errors = load(&t->on_errors);
        out->off_evaluations = out->evaluations - out->enabled_evaluations;
        out->off_errors = load(&t->off_errors);
        out->rollbacks = load(&t->rollbacks);
        out->rollbacks_fleet = load(&t->rollbacks_fleet);
    }
    out->window_seconds = window_seconds;
    out->window_enabled = window_enabled;
    out->window_errors = window_errors;

    if (c == nullptr) {
        return;
    }
    uint64_t w = load_acq(&c->control);

    out->def_hash = load(&c->def_hash);
    if (w & CTL_ROLLED) {
        /* The record of an earlier, cleared rollback is not shown. */
        out->rolled_back = 1;
        out->rollback_at_ms = load(&c->rb_at_ms);
        out->rollback_errors = load(&c->rb_errors);
        out->rollback_enabled = load(&c->rb_enabled);
        out->rollback_sources = load(&c->rb_sources);
        uint64_t by = load(&c->rb_by);
        out->rollback_by = by == FL_DECIDED_RULE ? FL_DECIDED_RULE
                           : by == FL_DECIDED_FLEET ? FL_DECIDED_FLEET
                           : FL_DECIDED_UNKNOWN;
    }
    out->override_kind = ctl_kind(w);
    out->override_milli = out->override_kind == FL_OVERRIDE_PERCENT ? ctl_milli(w) : 0;
    out->ramp_in_force = (w & CTL_RAMP) != 0;
    out->ramp_milli = ctl_configured(w, 0);
}

} // extern "C"
