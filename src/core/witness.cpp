/*
 * witness.cpp - what the regression rule counts, and who may move it
 * (docs/regression.md, "Who can make it act").
 *
 * Anyone with a project's public token can write an error report, with
 * any userId and any "enabled".  The regression rule has no window: left
 * to raw counts, one client that sends one report a minute for ten
 * minutes proves a "regression" at a 5 % stage, and one that sends
 * reports of the off cohort hides a real one.  So the rule counts
 * witnessed errors: within one tick a witness counts at most one error
 * in each cohort.  A report's witness is its client address, which the
 * client cannot choose freely; an upstream error's is flags_context's
 * user (else the address), since nginx itself saw that request fail.
 *
 * Per cohort a table of FL_WITNESS_SLOTS words, each a 32-bit witness key
 * and the 32-bit tick it was last counted in.  A key looks at
 * FL_WITNESS_PROBES slots from key % FL_WITNESS_SLOTS: its own slot says
 * whether it was counted this tick; otherwise it takes an empty slot or
 * the oldest slot of an earlier tick.  When every probe holds another
 * witness of this very tick (more than the table has room for), the error
 * is counted: forgetting errors of a real incident costs power, and a
 * single witness cannot fill eight slots by itself.
 *
 * The evidence's on witnesses (set[]) answer "how many distinct
 * witnesses make up this proof"; the ramp's step reads their number at
 * each tick.  Every entry carries the evidence's epoch: an entry of an
 * earlier evidence is free, so nothing needs emptying when a ramp
 * restarts.
 */

#include "flags_core.h"

#include <cstring>

namespace {

inline uint64_t load(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

inline bool cas(uint64_t *p, uint64_t expected, uint64_t desired)
{
    return __atomic_compare_exchange_n(p, &expected, desired, false,
                                       __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

inline void add(uint64_t *p, uint64_t v)
{
    __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}

inline uint32_t key_of(uint64_t word)
{
    return static_cast<uint32_t>(word >> 32);
}

/* A slot: the witness key, the evidence epoch it was counted in, how
 * many of its errors the evidence took, and the tick it was last seen
 * in (its low 16 bits).  0 is an empty slot. */
inline uint64_t slot_word(uint32_t key, uint32_t epoch, uint32_t count,
    uint32_t stamp)
{
    return static_cast<uint64_t>(key) << 32 | (epoch & 0xffu) << 24
           | (count & 0xffu) << 16 | (stamp & 0xffffu);
}

inline uint32_t epoch_of(uint64_t word)
{
    return static_cast<uint32_t>(word >> 24) & 0xffu;
}

inline uint32_t count_of(uint64_t word)
{
    return static_cast<uint32_t>(word >> 16) & 0xffu;
}

inline uint32_t stamp_of(uint64_t word)
{
    return static_cast<uint32_t>(word) & 0xffffu;
}

/* The tick of now_ms (16 bits of it: ages compare modulo 2^16). */
uint32_t tick_stamp(uint64_t now_ms, uint32_t tick)
{
    uint64_t len = static_cast<uint64_t>(tick ? tick : 1) * 1000;
    return static_cast<uint32_t>(now_ms / len) & 0xffffu;
}

/*
 * Whether the evidence of epoch takes this error of key at tick stamp:
 * not when the witness was counted in this tick already, nor once it has
 * FL_WITNESS_PER_EVIDENCE errors in it.  Seen either way, the witness's
 * slot is refreshed, so a witness that keeps sending keeps its slot (the
 * slot taken for a newcomer is an empty one, one of an older evidence, or
 * the one seen longest ago, never one seen in this tick).
 */
bool admit(uint64_t *table, uint32_t key, uint32_t epoch, uint32_t stamp)
{
    uint32_t base = key % FL_WITNESS_SLOTS;
    epoch &= 0xffu;

    for (int attempt = 0; attempt < 4; attempt++) {
        uint64_t *victim = nullptr;
        uint64_t victim_word = 0;
        uint32_t victim_age = 0;

        for (uint32_t i = 0; i < FL_WITNESS_PROBES; i++) {
            uint64_t *slot = &table[(base + i) % FL_WITNESS_SLOTS];
            uint64_t word = load(slot);

            if (word != 0 && key_of(word) == key && epoch_of(word) == epoch) {
                uint32_t n = count_of(word);
                bool take = stamp_of(word) != stamp
                            && n < FL_WITNESS_PER_EVIDENCE;
                uint64_t next = slot_word(key, epoch, take ? n + 1 : n,
                                          stamp);
                if (next == word || cas(slot, word, next)) {
                    return take;
                }
                victim = nullptr;
                goto again;         /* changed meanwhile: look again */
            }

            /* an empty slot, or one of an older evidence, is free; else
             * the one seen longest ago, if not in this tick */
            uint32_t age = word == 0 || epoch_of(word) != epoch
                           ? 0x10000u
                           : (stamp - stamp_of(word)) & 0xffffu;
            if (age > 0 && (victim == nullptr || age > victim_age)) {
                victim = slot;
                victim_word = word;
                victim_age = age;
            }
        }

        if (victim == nullptr) {
            /* every probe is another witness of this tick: more than the
             * table holds; counted, as a real incident's are */
            return true;
        }
        if (cas(victim, victim_word, slot_word(key, epoch, 1, stamp))) {
            return true;
        }
    again:;
    }
    return true;
}

/* Adds key to the set of the evidence of epoch, if there is room: an
 * entry is the key and the epoch, and an entry of another epoch is
 * free. */
void remember(uint64_t *set, uint32_t key, uint32_t epoch)
{
    uint64_t mine = static_cast<uint64_t>(epoch & 0xffu) << 32 | key;

    for (uint32_t i = 0; i < FL_WITNESS_SET; i++) {
        uint64_t word = load(&set[i]);
        if (word == mine) {
            return;
        }
        if (word == 0 || (word >> 32) != (epoch & 0xffu)) {
            if (cas(&set[i], word, mine) || load(&set[i]) == mine) {
                return;
            }
        }
    }
}

} // namespace


extern "C" {

void fl_witness_init(fl_witness_t *w) noexcept
{
    std::memset(w, 0, sizeof(*w));
}

uint32_t fl_witness_key_report(const char *addr, size_t addr_len) noexcept
{
    /* the address alone: a report's userId is whatever its writer says */
    return fl_source_key(nullptr, 0, addr, addr_len);
}

int fl_witness_count(fl_witness_t *w, const fl_ramp_t *r, int enabled,
    uint32_t key, uint64_t now_ms, uint32_t tick) noexcept
{
    if (w == nullptr || r == nullptr) {
        return 0;
    }
    if (key == 0) {
        key = 1;
    }

    uint32_t epoch = static_cast<uint32_t>(
        __atomic_load_n(&r->evidence_epoch, __ATOMIC_RELAXED));

    if (!admit(w->slots[enabled ? 0 : 1], key, epoch,
               tick_stamp(now_ms, tick)))
    {
        return 0;
    }

    if (enabled) {
        add(&w->errors_on, 1);
        remember(w->set, key, epoch);
    } else {
        add(&w->errors_off, 1);
    }
    return 1;
}

uint32_t fl_witness_seen(const fl_witness_t *w, const fl_ramp_t *r) noexcept
{
    if (w == nullptr || r == nullptr) {
        return 0;
    }

    uint64_t epoch = __atomic_load_n(&r->evidence_epoch, __ATOMIC_RELAXED)
                     & 0xffu;
    uint32_t n = 0;

    for (uint32_t i = 0; i < FL_WITNESS_SET; i++) {
        uint64_t word = load(&w->set[i]);
        n += word != 0 && (word >> 32) == epoch;
    }
    return n;
}

void fl_witness_dispute(fl_witness_t *w) noexcept
{
    if (w != nullptr) {
        add(&w->disputed, 1);
    }
}

} // extern "C"


/* The backstop's ticks (closed under the zone's lock), and what ramp.cpp
 * reads of them. */

/* A total since its base; a total below it (a new block) counts 0. */
static uint64_t since(uint64_t total, uint64_t base)
{
    return total >= base ? total - base : 0;
}

extern "C" void fl_witness_roll(fl_witness_t *w, const fl_ramp_input_t *in,
    uint64_t now_ms, uint32_t tick) noexcept
{
    if (w == nullptr) {
        return;
    }

    uint64_t next = load(&w->roll_next_ms);
    uint64_t len = static_cast<uint64_t>(tick ? tick : 1) * 1000;

    if (next != 0 && now_ms < next) {
        return;
    }

    if (next != 0) {
        uint64_t pos = load(&w->ring_pos);
        fl_witness_tick_t *t = &w->ring[pos % FL_WITNESS_RING];
        __atomic_store_n(&t->n1, since(in->on, load(&w->base.n1)),
                         __ATOMIC_RELAXED);
        __atomic_store_n(&t->n0, since(in->off, load(&w->base.n0)),
                         __ATOMIC_RELAXED);
        __atomic_store_n(&t->w1, since(in->on_errors, load(&w->base.w1)),
                         __ATOMIC_RELAXED);
        __atomic_store_n(&t->w0, since(in->off_errors, load(&w->base.w0)),
                         __ATOMIC_RELAXED);
        __atomic_store_n(&w->ring_pos, pos + 1, __ATOMIC_RELEASE);
    }

    __atomic_store_n(&w->base.n1, in->on, __ATOMIC_RELAXED);
    __atomic_store_n(&w->base.n0, in->off, __ATOMIC_RELAXED);
    __atomic_store_n(&w->base.w1, in->on_errors, __ATOMIC_RELAXED);
    __atomic_store_n(&w->base.w0, in->off_errors, __ATOMIC_RELAXED);
    /* a tick missed (nobody held the lock) closes as one */
    __atomic_store_n(&w->roll_next_ms,
                     next != 0 && now_ms < next + len ? next + len
                                                      : now_ms + len,
                     __ATOMIC_RELAXED);
}

/* The last k closed ticks of the ring and the open one, summed into
 * sum; 0 when no tick has begun. */
int fl_witness_recent(const fl_witness_t *w, const fl_ramp_input_t *in,
    uint64_t k, fl_witness_tick_t *sum) noexcept
{
    if (load(&w->roll_next_ms) == 0) {
        return 0;
    }

    uint64_t pos = __atomic_load_n(&w->ring_pos, __ATOMIC_ACQUIRE);

    if (k > pos) {
        k = pos;
    }
    if (k > FL_WITNESS_RING) {
        k = FL_WITNESS_RING;
    }
    for (uint64_t i = 1; i <= k; i++) {
        const fl_witness_tick_t *t = &w->ring[(pos - i) % FL_WITNESS_RING];
        sum->n1 += load(&t->n1);
        sum->n0 += load(&t->n0);
        sum->w1 += load(&t->w1);
        sum->w0 += load(&t->w0);
    }
    sum->n1 += since(in->on, load(&w->base.n1));
    sum->n0 += since(in->off, load(&w->base.n0));
    sum->w1 += since(in->on_errors, load(&w->base.w1));
    sum->w0 += since(in->off_errors, load(&w->base.w0));
    return 1;
}
