/*
 * lanes.cpp - murmur3 of 8 flags at once for one caller (lanes.hpp).
 *
 * Each lane runs KeyMix::bucket() (rollout.hpp) for its own flag: the
 * flag's waiting bytes completed by the caller's first bytes, the
 * caller's premixed blocks, the tail, the length, the finalizer, then
 * % FL_BUCKETS.  The remainder uses the quotient a compiler derives for a
 * division by 100000 of a 32-bit value: ((h >> 5) * 0x0A7C5AC5) >> 39, in
 * 64-bit products, exact for all 2^32 values (checked one by one when
 * this was written).  t/unit/test_answer.c compares the lanes' answers
 * with the scalar path's for ids of every length and every alignment.
 */

#include "lanes.hpp"

#include <atomic>

#ifdef FL_LANES_AVX2
#include <immintrin.h>
#endif

static_assert(FL_BUCKETS == 100000, "the remainder's constants are for 100000");

namespace {

/* -1 not yet asked, 0 off, 1 on */
std::atomic<int> lanes_state{-1};
std::atomic<int> lanes_wanted{1};
/* fl_answer_lazy_set(): -1 the project's choice, 0 never, 1 always */
std::atomic<int> lazy_wanted{-1};

bool cpu_has_avx2() noexcept
{
#ifdef FL_LANES_AVX2
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
#else
    return false;
#endif
}

#ifdef FL_LANES_AVX2

#define FL_AVX2 __attribute__((target("avx2"), always_inline)) inline

template <int R>
FL_AVX2 __m256i rotl(__m256i x)
{
    return _mm256_or_si256(_mm256_slli_epi32(x, R), _mm256_srli_epi32(x, 32 - R));
}

/* fold_block() (murmur3.hpp) in each lane */
FL_AVX2 __m256i fold(__m256i h, __m256i k, __m256i n)
{
    h = rotl<13>(_mm256_xor_si256(h, k));
    return _mm256_add_epi32(_mm256_add_epi32(h, _mm256_slli_epi32(h, 2)), n);
}

__attribute__((target("avx2")))
void buckets_avx2(const fl_project_s &p, size_t c, const fl::KeyMix &km,
    uint32_t *out) noexcept
{
    const __m256i c1 = _mm256_set1_epi32(static_cast<int>(fl::c1));
    const __m256i c2 = _mm256_set1_epi32(static_cast<int>(fl::c2));
    const __m256i n = _mm256_set1_epi32(static_cast<int>(fl::n_block));
    const __m256i f1 = _mm256_set1_epi32(static_cast<int>(fl::f1));
    const __m256i f2 = _mm256_set1_epi32(static_cast<int>(fl::f2));
    const __m256i magic = _mm256_set1_epi32(0x0A7C5AC5);
    const __m256i buckets = _mm256_set1_epi32(static_cast<int>(FL_BUCKETS));
    const __m256i len = _mm256_set1_epi32(static_cast<int>(km.len));

    if (p.lane_chunk[c] == p.lane_chunk[c + 1]) {
        return;
    }
    /* a lane's bucket goes to its distance from the chunk's first lane */
    uint32_t first = p.lane_groups[p.lane_chunk[c]].at;

    for (uint32_t gi = p.lane_chunk[c]; gi < p.lane_chunk[c + 1]; gi++) {
        const fl::LaneGroup &g = p.lane_groups[gi];
        unsigned a = g.align;
        unsigned nb = km.nblocks[a];
        const __m256i head = _mm256_set1_epi32(static_cast<int>(km.head[a]));
        const __m256i tail = _mm256_set1_epi32(
            static_cast<int>(km.has_tail[a] ? km.tail[a] : 0));
        const uint32_t *blocks = km.blocks[a];

        for (uint32_t k = 0; k < g.count; k += 8) {
            size_t at = g.at + k;
            __m256i h = _mm256_loadu_si256(
                reinterpret_cast<const __m256i *>(&p.lane_h[at]));

            if (a != 0) {
                __m256i w = _mm256_or_si256(head, _mm256_loadu_si256(
                    reinterpret_cast<const __m256i *>(&p.lane_wait[at])));
                w = _mm256_mullo_epi32(rotl<15>(_mm256_mullo_epi32(w, c1)), c2);
                h = fold(h, w, n);
            }
            for (unsigned j = 0; j < nb; j++) {
                h = fold(h, _mm256_set1_epi32(static_cast<int>(blocks[j])), n);
            }
            /* a missing tail is 0: h ^ 0 */
            h = _mm256_xor_si256(h, tail);
            h = _mm256_xor_si256(h, _mm256_add_epi32(len, _mm256_loadu_si256(
                reinterpret_cast<const __m256i *>(&p.lane_total[at]))));
            h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 16));
            h = _mm256_mullo_epi32(h, f1);
            h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 13));
            h = _mm256_mullo_epi32(h, f2);
            h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 16));

            /* h / 100000: the even lanes' 64-bit products, then the odd
             * lanes' (moved down), each >> 39, the odd ones put back */
            __m256i x = _mm256_srli_epi32(h, 5);
            __m256i qe = _mm256_srli_epi64(_mm256_mul_epu32(x, magic), 39);
            __m256i qo = _mm256_srli_epi64(
                _mm256_mul_epu32(_mm256_srli_epi64(x, 32), magic), 39);
            __m256i q = _mm256_or_si256(qe, _mm256_slli_epi64(qo, 32));
            __m256i r = _mm256_sub_epi32(h, _mm256_mullo_epi32(q, buckets));

            _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + at - first),
                                r);
        }
    }
}

/* lane_values() (lanes.hpp), 8 flags a step */
__attribute__((target("avx2")))
uint64_t values_avx2(const fl_project_s &p, size_t w, const uint32_t *eff,
    const uint8_t *sw, const uint32_t *lanes, uint64_t seg_yes,
    uint64_t *redo, uint64_t *configured) noexcept
{
    const __m256i sign = _mm256_set1_epi32(INT32_MIN);
    const __m256i all = _mm256_set1_epi32(static_cast<int>(FL_MILLI_MAX));
    const __m256i zero = _mm256_setzero_si256();
    const __m256i back = _mm256_set1_epi32(FL_SWITCH_ROLLED_BACK);
    const __m256i off = _mm256_set1_epi32(FL_SWITCH_OVERRIDE_OFF);
    const __m256i yes = _mm256_set1_epi64x(static_cast<long long>(seg_yes));
    const __m256i none = _mm256_set1_epi32(fl::lane_none);
    const uint16_t *slots = p.lane_slot.data() + w * 64;
    const uint64_t *seg = p.val_seg.data() + w * 64;
    const uint32_t *conf = p.val_rollout.data() + w * 64;
    uint64_t on = 0, partial = 0, outside = 0, same = 0;

    for (unsigned k = 0; k < 64; k += 8) {
        __m256i e = _mm256_loadu_si256(
            reinterpret_cast<const __m256i *>(eff + k));
        __m256i s = _mm256_cvtepu8_epi32(_mm_loadl_epi64(
            reinterpret_cast<const __m128i *>(sw + k)));
        __m256i slot = _mm256_cvtepu16_epi32(_mm_loadu_si128(
            reinterpret_cast<const __m128i *>(slots + k)));
        __m256i b = _mm256_i32gather_epi32(
            reinterpret_cast<const int *>(lanes), slot, 4);

        /* eff >= 100 %, and bucket < eff, unsigned */
        __m256i full = _mm256_cmpeq_epi32(_mm256_max_epu32(e, all), e);
        __m256i in = _mm256_or_si256(full, _mm256_cmpgt_epi32(
            _mm256_xor_si256(e, sign), _mm256_xor_si256(b, sign)));
        __m256i stop = _mm256_or_si256(_mm256_cmpeq_epi32(s, back),
                                       _mm256_cmpeq_epi32(s, off));
        unsigned bits = static_cast<unsigned>(_mm256_movemask_ps(
            _mm256_castsi256_ps(_mm256_andnot_si256(stop, in))));

        /* segments, none of them matched */
        __m256i m0 = _mm256_loadu_si256(
            reinterpret_cast<const __m256i *>(seg + k));
        __m256i m1 = _mm256_loadu_si256(
            reinterpret_cast<const __m256i *>(seg + k + 4));
        __m256i x0 = _mm256_andnot_si256(_mm256_cmpeq_epi64(m0, zero),
            _mm256_cmpeq_epi64(_mm256_and_si256(m0, yes), zero));
        __m256i x1 = _mm256_andnot_si256(_mm256_cmpeq_epi64(m1, zero),
            _mm256_cmpeq_epi64(_mm256_and_si256(m1, yes), zero));
        unsigned shut = static_cast<unsigned>(
            _mm256_movemask_pd(_mm256_castsi256_pd(x0))
            | _mm256_movemask_pd(_mm256_castsi256_pd(x1)) << 4);

        /* a percentage that needs a bucket: neither 0 nor 100 % */
        unsigned fixed = static_cast<unsigned>(_mm256_movemask_ps(
            _mm256_castsi256_ps(_mm256_or_si256(full,
                                _mm256_cmpeq_epi32(e, zero)))));

        on |= static_cast<uint64_t>(bits & ~shut & 0xffu) << k;
        partial |= static_cast<uint64_t>(~fixed & 0xffu) << k;
        outside |= static_cast<uint64_t>(static_cast<unsigned>(
            _mm256_movemask_ps(_mm256_castsi256_ps(
                _mm256_cmpeq_epi32(slot, none))))) << k;
        same |= static_cast<uint64_t>(static_cast<unsigned>(
            _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(e,
                _mm256_loadu_si256(
                    reinterpret_cast<const __m256i *>(conf + k)))))))
                << k;
    }

    *configured = same;
    *redo = ~p.val_fast[w] | (partial & outside);
    return on & p.val_enabled[w];
}

#endif

} // namespace

namespace fl {

namespace {

bool cpu_lanes() noexcept
{
    int s = lanes_state.load(std::memory_order_relaxed);
    if (s < 0) {
        s = cpu_has_avx2() ? 1 : 0;
        lanes_state.store(s, std::memory_order_relaxed);
    }
    return s == 1;
}

} // namespace

bool lanes_ready() noexcept
{
    return cpu_lanes() && lanes_wanted.load(std::memory_order_relaxed) == 1;
}

bool answer_lazy(const fl_project_s &p) noexcept
{
    int m = lazy_wanted.load(std::memory_order_relaxed);
    return m < 0 ? p.val_lazy : m == 1;
}

void lane_buckets(const fl_project_s &p, size_t c, const KeyMix &km,
    uint32_t *out) noexcept
{
#ifdef FL_LANES_AVX2
    buckets_avx2(p, c, km, out);
#else
    (void) p; (void) c; (void) km; (void) out;
#endif
}

uint64_t lane_values(const fl_project_s &p, size_t w, const uint32_t *eff,
    const uint8_t *sw, const uint32_t *lanes, uint64_t seg_yes,
    uint64_t *redo, uint64_t *configured) noexcept
{
#ifdef FL_LANES_AVX2
    return values_avx2(p, w, eff, sw, lanes, seg_yes, redo, configured);
#else
    (void) p; (void) w; (void) eff; (void) sw; (void) lanes; (void) seg_yes;
    *redo = ~uint64_t(0);
    *configured = 0;
    return 0;
#endif
}

} // namespace fl

extern "C" {

int fl_lanes_set(int on) noexcept
{
    if (!fl::cpu_lanes()) {
        return -1;
    }
    return lanes_wanted.exchange(on ? 1 : 0);
}

int fl_answer_lazy_set(int mode) noexcept
{
    return lazy_wanted.exchange(mode < 0 ? -1 : mode ? 1 : 0);
}

int fl_answer_lazy(const fl_project_t *p) noexcept
{
    return p != nullptr && fl::answer_lazy(*p) ? 1 : 0;
}

unsigned fl_answer_width(const fl_project_t *p) noexcept
{
    return p != nullptr ? p->json_width : 0;
}

} // extern "C"
