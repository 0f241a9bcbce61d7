// The multi-column weight product (see weight_product.h). One concern, past 500 lines: the tile
// kernels of each instruction set (f32, f16, q8_0) beside the one loop that drives them.
//
// Tiles of R weight rows x C columns keep one vector accumulator per (row, column). The k loop,
// the zero-filled tail and the final horizontal sum are the same for every tile shape, so an
// output element does not depend on which tile computed it, nor on how many columns the step has.
#include "core/weight_product.h"

#include "core/avx_reductions.h"
#include "core/backend.h"
#include "core/cpu_features.h"
#include "core/graph_ops.h"
#include "core/runtime_settings.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define PARLANCE_X86_KERNELS 1
#if !defined(__clang__)
// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_ps in the masked intrinsics:
// GCC bug 105593); nothing in this file reads an uninitialised value.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#endif

namespace parlance {
namespace {

#ifdef PARLANCE_X86_KERNELS

// Weight rows a tile call fetches into cache while it computes: a share of the next row block
// (see weight_product_rows), spread evenly over the call's k loop. A model's weight rows are
// short streams the hardware prefetcher barely follows; without this the loads and the FMAs take
// turns instead of overlapping.
// A 1/parts share of `bytes`, in whole cache lines (at least one line when bytes > 0).
inline size_t share_in_lines(size_t bytes, int64_t parts) {
    return bytes == 0 ? 0 : (bytes / static_cast<size_t>(parts) + 64) / 64 * 64;
}

struct Prefetch {
    const char* p = nullptr;
    size_t bytes = 0;
    // Bytes per k step for a loop of `steps` steps.
    size_t step_for(int64_t steps) const { return share_in_lines(bytes, steps); }
    inline void issue(size_t step) {
        if (bytes == 0) return;
        const size_t n = std::min(step, bytes);
        for (size_t b = 0; b < n; b += 64) _mm_prefetch(p + b, _MM_HINT_T0);
        p += n;
        bytes -= n;
    }
};

// ---- AVX-512F: 16 lanes ------------------------------------------------------------------------

template <ggml_type W>
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m512 load_w16(const void* w, int64_t k, __mmask16 m) {
    if constexpr (W == GGML_TYPE_F16) {
        const auto* p = static_cast<const uint16_t*>(w) + k;
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
    } else {
        return _mm512_maskz_loadu_ps(m, static_cast<const float*>(w) + k);
    }
}

// Tiles with at least this many accumulators sum them jointly (reduce16); below, one by one.
constexpr int kJointReduceMin = 8;

// The horizontal sums of 16 accumulators at once, lane i = the sum of v[i]. Each sum is added in
// exactly _mm512_reduce_add_ps's order (lane j + lane j+8, then + j+4, + j+2, + j+1; every add of
// the same two values, and float addition is commutative), so it is bit for bit the one-by-one
// result, in 31 shuffles and 15 adds instead of 16 x 7 dependent steps. Rows only 64 long (the
// cross-attention's per-head scores) spend more time here than in their FMAs one by one.
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m512 reduce16(const __m512 (&v)[16]) {
    __m512 u[8], w[4], z[2];
    // Lanes 0-7: v[2p]'s lane j + lane j+8; lanes 8-15: the same for v[2p+1].
#pragma GCC unroll 8
    for (int p = 0; p < 8; ++p)
        u[p] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], 0x44),
                             _mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], 0xEE));
        // Quarter q: v[4p+q]'s four (j + j+4) sums.
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p)
        w[p] = _mm512_add_ps(_mm512_shuffle_f32x4(u[2 * p], u[2 * p + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(u[2 * p], u[2 * p + 1], _MM_SHUFFLE(3, 1, 3, 1)));
        // Quarter q: (j + j+2) sums, two of v[8p+q], then two of v[8p+4+q].
#pragma GCC unroll 2
    for (int p = 0; p < 2; ++p)
        z[p] = _mm512_add_ps(_mm512_shuffle_ps(w[2 * p], w[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(w[2 * p], w[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    // Lane 4q+m: the sum of v[4m+q]; a 4x4 lane transpose puts sum i in lane i.
    const __m512 r = _mm512_add_ps(_mm512_shuffle_ps(z[0], z[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_ps(z[0], z[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm512_permutexvar_ps(order, r);
}

// y[c * y_stride + r] = the sum of acc[r][c]'s lanes (_mm512_reduce_add_ps's order), joint
// reductions for larger tiles (the same bits); store_sums8 is its AVX2 twin.
template <int R, int C>
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline void store_sums16(const __m512 (&acc)[R][C],
                                                                                             float* y,
                                                                                             int64_t y_stride) {
    if constexpr (R * C < kJointReduceMin) {
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c)
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) y[c * y_stride + r] = _mm512_reduce_add_ps(acc[r][c]);
    } else {
        // Accumulator (r, c) is entry c * R + r, so a column's rows come out side by side.
        constexpr int N = R * C, G = (N + 15) / 16;
        alignas(64) float sums[G * 16];
#pragma GCC unroll 4
        for (int g = 0; g < G; ++g) {
            __m512 v[16];
#pragma GCC unroll 16
            for (int i = 0; i < 16; ++i) {
                const int e = g * 16 + i;
                v[i] = e < N ? acc[e % R][e / R] : _mm512_setzero_ps();
            }
            _mm512_store_ps(sums + g * 16, reduce16(v));
        }
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c)
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) y[c * y_stride + r] = sums[c * R + r];
    }
}

template <ggml_type W, int R, int C>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void tile_avx512(const char* w, size_t w_row_bytes, int64_t in,
                                                                      const float* x, int64_t x_stride, float* y,
                                                                      int64_t y_stride, Prefetch pf) {
    __m512 acc[R][C];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
    const size_t pf_step = pf.step_for((in + 15) / 16);
    for (int64_t k = 0; k < in; k += 16) {
        const int64_t left = in - k;
        const __mmask16 m = left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
        pf.issue(pf_step);
        __m512 wv[R];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) wv[r] = load_w16<W>(w + r * w_row_bytes, k, m);
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) {
            const __m512 xv = _mm512_maskz_loadu_ps(m, x + c * x_stride + k);
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) acc[r][c] = _mm512_fmadd_ps(wv[r], xv, acc[r][c]);
        }
    }
    store_sums16(acc, y, y_stride);
}

// ---- AVX2 + FMA + F16C: 8 lanes ----------------------------------------------------------------

template <ggml_type W>
__attribute__((target("avx2,fma,f16c"))) inline __m256 load_w8(const void* w, int64_t k, int64_t left) {
    if constexpr (W == GGML_TYPE_F16) {
        const auto* p = static_cast<const uint16_t*>(w) + k;
        if (left >= 8) return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        alignas(16) uint16_t tmp[8] = {};
        std::memcpy(tmp, p, static_cast<size_t>(left) * sizeof(uint16_t));
        return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(tmp)));
    } else {
        const float* p = static_cast<const float*>(w) + k;
        if (left >= 8) return _mm256_loadu_ps(p);
        alignas(32) float tmp[8] = {};
        std::memcpy(tmp, p, static_cast<size_t>(left) * sizeof(float));
        return _mm256_load_ps(tmp);
    }
}

__attribute__((target("avx2,fma,f16c"))) inline __m256 load_x8(const float* p, int64_t left) {
    if (left >= 8) return _mm256_loadu_ps(p);
    alignas(32) float tmp[8] = {};
    std::memcpy(tmp, p, static_cast<size_t>(left) * sizeof(float));
    return _mm256_load_ps(tmp);
}

constexpr int kJointReduceMin8 = 6;

// hsum8 of 8 accumulators at once, each in hsum8's order (lane j + j+4, + j+2, + j+1): lane i =
// the sum of v[i], bit for bit hsum8(v[i]) (see reduce16).
__attribute__((target("avx2,fma,f16c"))) inline __m256 reduce8(const __m256 (&v)[8]) {
    __m256 u[4], w[2];
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p)  // lanes 0-3: v[2p]'s j + j+4; lanes 4-7: v[2p+1]'s
        u[p] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * p], v[2 * p + 1], 0x20),
                             _mm256_permute2f128_ps(v[2 * p], v[2 * p + 1], 0x31));
#pragma GCC unroll 2
    for (int p = 0; p < 2; ++p)  // half h: two (j + j+2) sums of v[4p+h], then two of v[4p+2+h]
        w[p] = _mm256_add_ps(_mm256_shuffle_ps(u[2 * p], u[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm256_shuffle_ps(u[2 * p], u[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    // Lane 4h+m: the sum of v[2m+h].
    const __m256 r = _mm256_add_ps(_mm256_shuffle_ps(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm256_shuffle_ps(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm256_permutevar8x32_ps(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// y[c * y_stride + r] = hsum8(acc[r][c]), joint reductions for larger tiles (the same bits);
// store_sums16's AVX2 twin.
template <int R, int C>
__attribute__((target("avx2,fma,f16c"), always_inline)) inline void store_sums8(const __m256 (&acc)[R][C], float* y,
                                                                                int64_t y_stride) {
    if constexpr (R * C < kJointReduceMin8) {
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c)
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) y[c * y_stride + r] = hsum8(acc[r][c]);
    } else {
        constexpr int N = R * C, G = (N + 7) / 8;  // entry c * R + r, as store_sums16
        alignas(32) float sums[G * 8];
#pragma GCC unroll 4
        for (int g = 0; g < G; ++g) {
            __m256 v[8];
#pragma GCC unroll 8
            for (int i = 0; i < 8; ++i) {
                const int e = g * 8 + i;
                v[i] = e < N ? acc[e % R][e / R] : _mm256_setzero_ps();
            }
            _mm256_store_ps(sums + g * 8, reduce8(v));
        }
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c)
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) y[c * y_stride + r] = sums[c * R + r];
    }
}

// One k step of every accumulator of a tile, the same for whole vectors and the tail (`left` below
// 8 zero-fills the rest), so the loop over whole vectors carries no tail check.
template <ggml_type W, int R, int C>
__attribute__((target("avx2,fma,f16c"), always_inline)) inline void step_avx2(__m256 (&acc)[R][C],
                                                                              const char* const (&wr)[R],
                                                                              const float* const (&xc)[C], int64_t k,
                                                                              int64_t left) {
    __m256 wv[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) wv[r] = load_w8<W>(wr[r], k, left);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
        const __m256 xv = load_x8(xc[c] + k, left);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[r][c] = _mm256_fmadd_ps(wv[r], xv, acc[r][c]);
    }
}

template <ggml_type W, int R, int C>
__attribute__((target("avx2,fma,f16c"))) void tile_avx2(const char* w, size_t w_row_bytes, int64_t in, const float* x,
                                                        int64_t x_stride, float* y, int64_t y_stride, Prefetch pf) {
    __m256 acc[R][C];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
    const char* wr[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) wr[r] = w + r * w_row_bytes;
    const float* xc[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) xc[c] = x + c * x_stride;
    const size_t pf_step = pf.step_for((in + 7) / 8);
    const int64_t whole = in & ~int64_t{7};
    int64_t k = 0;
    for (; k < whole; k += 8) {
        pf.issue(pf_step);
        step_avx2<W, R, C>(acc, wr, xc, k, 8);
    }
    if (k < in) {
        pf.issue(pf_step);
        step_avx2<W, R, C>(acc, wr, xc, k, in - k);
    }
    store_sums8(acc, y, y_stride);
}

// ---- q8_0 weights times q8_0 activations: ggml's own q8_0 product, AVX2 ------------------------
//
// llama.cpp's q8_0 block is an f16 scale d then 32 int8 q (weight d·q). ggml multiplies such
// weights by activations it first rounds to the same blocks (quantize_row_q8_0), and on AVX2 sums
// each dot product this way: per block, the 32 int8 products in 8 exact int32 lanes, converted to
// f32 and added into 8 f32 lanes times d_w·d_x with one FMA; the lanes summed as hsum8 at the end.
// These tiles round the activations the same way and compute the same sums, bit for bit — a q8_0
// model computes here what it computes in llama.cpp on the CPU — but read each weight block once
// for all of a step's columns (ggml: once per column) with several rows in flight. An int8
// product per 32 weights is a few instructions where decoding them to f32 took about twenty: the
// kernel keeps up with the memory that streams the weights.
constexpr int64_t kQ8Block = 32;
constexpr size_t kQ8BlockBytes = 34;

// Activation columns rounded to q8_0: block b of column c is q[(c * blocks + b) * 32 ...] (32-byte
// aligned) with scale d[c * blocks + b], the f16 scale as f32.
struct Q8Columns {
    const int8_t* q;
    const float* d;
    int64_t blocks;
};

// quantize_row_q8_0's rounding: per block of 32, d = max|x| / 127 stored as f16, and each value
// round-half-even(x · 127 / max|x|) (the unrounded reciprocal, as ggml).
__attribute__((target("avx2,fma,f16c"))) void quantize_q8(const float* x, int64_t blocks, int8_t* q, float* d) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);  // undoes the packs' lane interleave
    for (int64_t b = 0; b < blocks; ++b, x += kQ8Block, q += kQ8Block) {
        __m256 v[4];
        __m256 m = _mm256_setzero_ps();
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i) {
            v[i] = _mm256_loadu_ps(x + 8 * i);
            m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[i]));
        }
        const float amax = hmax8(m);
        d[b] = _cvtsh_ss(_cvtss_sh(amax / 127.f, _MM_FROUND_TO_NEAREST_INT));
        const __m256 mul = _mm256_set1_ps(amax != 0.0f ? 127.f / amax : 0.0f);
        __m256i n[4];
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i)
            n[i] = _mm256_cvtps_epi32(
                _mm256_round_ps(_mm256_mul_ps(v[i], mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(n[0], n[1]), _mm256_packs_epi32(n[2], n[3]));
        _mm256_store_si256(reinterpret_cast<__m256i*>(q), _mm256_permutevar8x32_epi32(packed, order));
    }
}

// A q8_0 weight block: its f16 scale in every lane, its 32 int8.
__attribute__((target("avx2,fma,f16c"), always_inline)) inline void load_q8_block(const char* block, __m256& d,
                                                                                  __m256i& q) {
    uint16_t h;
    std::memcpy(&h, block, sizeof h);
    d = _mm256_set1_ps(_cvtsh_ss(h));
    q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
}

// Zeroed R x C accumulators.
template <int R, int C>
__attribute__((target("avx2,fma,f16c"), always_inline)) inline void zero_sums(__m256 (&acc)[R][C]) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
}

template <int R, int C>
__attribute__((target("avx2,fma,f16c"))) void tile_q8(const char* w, size_t w_row_bytes, int64_t blocks,
                                                      const Q8Columns& x, float* y, int64_t y_stride, Prefetch pf) {
    __m256 acc[R][C];
    zero_sums(acc);
    const __m256i ones = _mm256_set1_epi16(1);
    const size_t pf_step = pf.step_for(blocks);
    for (int64_t b = 0; b < blocks; ++b) {
        pf.issue(pf_step);
        __m256i wq[R], wabs[R];
        __m256 wd[R];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            load_q8_block(w + r * w_row_bytes + b * kQ8BlockBytes, wd[r], wq[r]);
            wabs[r] = _mm256_sign_epi8(wq[r], wq[r]);
        }
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) {
            const int64_t at = c * x.blocks + b;
            const __m256i xq = _mm256_load_si256(reinterpret_cast<const __m256i*>(x.q + at * kQ8Block));
            const __m256 xd = _mm256_broadcast_ss(x.d + at);
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) {
                // |w| (unsigned) times x with w's sign: pairs summed to int16, then quads to int32.
                const __m256i pairs = _mm256_maddubs_epi16(wabs[r], _mm256_sign_epi8(xq, wq[r]));
                const __m256 sums = _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, ones));
                acc[r][c] = _mm256_fmadd_ps(_mm256_mul_ps(wd[r], xd), sums, acc[r][c]);
            }
        }
    }
    store_sums8(acc, y, y_stride);
}

// ---- q8_0 with AVX-512 VNNI: the same sums in fewer instructions ------------------------------
//
// VPDPBUSD multiplies unsigned bytes by signed ones and adds each group of four products to an
// int32 lane. x + 128 (x with its sign bit flipped) is unsigned, so it multiplies the signed
// weights directly; each lane starts at -128 × (the sum of its four weights), computed once per
// weight block for all columns, and ends at exactly the sum of its four x·w — the integers the
// AVX2 tile's maddubs/madd pair makes, so every later step and every bit is the same: four
// instructions per (row, column) and block where the AVX2 tile takes six. AVX-512VL's 32 vector
// registers hold taller tiles.
template <int R, int C>
__attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512vnni"))) void tile_q8_vnni(
    const char* w, size_t w_row_bytes, int64_t blocks, const Q8Columns& x, float* y, int64_t y_stride, Prefetch pf) {
    __m256 acc[R][C];
    zero_sums(acc);
    const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
    const __m256i zero = _mm256_setzero_si256();
    const size_t pf_step = pf.step_for(blocks);
    for (int64_t b = 0; b < blocks; ++b) {
        pf.issue(pf_step);
        __m256i wq[R], start[R];
        __m256 wd[R];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            load_q8_block(w + r * w_row_bytes + b * kQ8BlockBytes, wd[r], wq[r]);
            start[r] = _mm256_sub_epi32(zero, _mm256_dpbusd_epi32(zero, bias, wq[r]));
        }
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) {
            const int64_t at = c * x.blocks + b;
            const __m256i xu =
                _mm256_xor_si256(_mm256_load_si256(reinterpret_cast<const __m256i*>(x.q + at * kQ8Block)), bias);
            const __m256 xd = _mm256_broadcast_ss(x.d + at);
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) {
                const __m256 sums = _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(start[r], xu, wq[r]));
                acc[r][c] = _mm256_fmadd_ps(_mm256_mul_ps(wd[r], xd), sums, acc[r][c]);
            }
        }
    }
    store_sums8(acc, y, y_stride);
}

// ---- Tiling, shared by both ISAs ---------------------------------------------------------------

constexpr int64_t kRowBlock = 24;  // a multiple of every tile height

using TileFn = void (*)(const char*, size_t, int64_t, const float*, int64_t, float*, int64_t, Prefetch);
using Q8TileFn = void (*)(const char*, size_t, int64_t, const Q8Columns&, float*, int64_t, Prefetch);

// Tile functions for C = 1..max_cols columns: a wide row tile (rows[C-1] rows, sized to the
// vector registers: R*C accumulators + R weight vectors + 1) and a single-row tile for the rest.
template <class Fn>
struct TileSet {
    int max_cols;
    int rows[8];
    Fn wide[8];
    Fn single[8];
    // Whether one-column calls fetch the next row block ahead (see for_each_tile); a one-row tile
    // reads its rows as one sequential stream, which the hardware prefetchers follow by themselves.
    bool prefetch_one_column = true;
};
using Tiles = TileSet<TileFn>;

template <ggml_type W>
Tiles avx512_tiles() {  // 32 registers
    return {8,
            {2, 6, 4, 4, 4, 4, 3, 3},
            {tile_avx512<W, 2, 1>, tile_avx512<W, 6, 2>, tile_avx512<W, 4, 3>, tile_avx512<W, 4, 4>,
             tile_avx512<W, 4, 5>, tile_avx512<W, 4, 6>, tile_avx512<W, 3, 7>, tile_avx512<W, 3, 8>},
            {tile_avx512<W, 1, 1>, tile_avx512<W, 1, 2>, tile_avx512<W, 1, 3>, tile_avx512<W, 1, 4>,
             tile_avx512<W, 1, 5>, tile_avx512<W, 1, 6>, tile_avx512<W, 1, 7>, tile_avx512<W, 1, 8>}};
}

template <ggml_type W>
Tiles avx2_tiles() {  // 16 registers
    return {4,
            {4, 4, 3, 3},
            {tile_avx2<W, 4, 1>, tile_avx2<W, 4, 2>, tile_avx2<W, 3, 3>, tile_avx2<W, 3, 4>},
            {tile_avx2<W, 1, 1>, tile_avx2<W, 1, 2>, tile_avx2<W, 1, 3>, tile_avx2<W, 1, 4>}};
}

// q8_0: R weight blocks, their absolute values and scales, R x C sums and the constant, in 16
// registers; one column reuses nothing, so it takes more rows in flight.
TileSet<Q8TileFn> avx2_q8_tiles() {
    return {4,
            {4, 3, 2, 2},
            {tile_q8<4, 1>, tile_q8<3, 2>, tile_q8<2, 3>, tile_q8<2, 4>},
            {tile_q8<1, 1>, tile_q8<1, 2>, tile_q8<1, 3>, tile_q8<1, 4>}};
}
// VNNI: R x C sums, R weight blocks, their starts and scales in 32 registers. One column (a decode
// step of one sequence) goes one row at a time and without fetching ahead: its weights are then
// read as one sequential stream, which the hardware prefetchers follow best (Qwen3-ASR 1.7B q8_0
// decode on a Zen 4 EPYC: 39-58 ms/token, against 63-73 with the fetching ahead and 91-111 with
// 2 or 4 rows in flight without it; BENCHMARKS.md).
TileSet<Q8TileFn> vnni_q8_tiles() {
    return {4,
            {1, 4, 4, 3},
            {tile_q8_vnni<1, 1>, tile_q8_vnni<4, 2>, tile_q8_vnni<4, 3>, tile_q8_vnni<3, 4>},
            {tile_q8_vnni<1, 1>, tile_q8_vnni<1, 2>, tile_q8_vnni<1, 3>, tile_q8_vnni<1, 4>},
            /*prefetch_one_column=*/false};
}

const Tiles* tiles_for(ggml_type w_type) {
    static const Tiles f16_512 = avx512_tiles<GGML_TYPE_F16>(), f32_512 = avx512_tiles<GGML_TYPE_F32>();
    static const Tiles f16_256 = avx2_tiles<GGML_TYPE_F16>(), f32_256 = avx2_tiles<GGML_TYPE_F32>();
    if (w_type != GGML_TYPE_F16 && w_type != GGML_TYPE_F32) return nullptr;
    switch (cpu_kernels()) {
        case CpuKernels::avx512:
            return w_type == GGML_TYPE_F16 ? &f16_512 : &f32_512;
        case CpuKernels::avx2:
            return w_type == GGML_TYPE_F16 ? &f16_256 : &f32_256;
        case CpuKernels::none:
            return nullptr;
    }
    return nullptr;
}

// q8_0 takes 8-lane tiles on AVX-512 CPUs too (ggml's sums are the AVX2 ones), with VNNI's
// instructions where the CPU has them (the same bits).
const TileSet<Q8TileFn>* q8_tiles() {
    static const TileSet<Q8TileFn> plain = avx2_q8_tiles(), vnni = vnni_q8_tiles();
    if (!cpu_has_avx2_kernels()) return nullptr;
    return cpu_has_avx512_vnni() ? &vnni : &plain;
}

bool has_kernel(ggml_type w_type) {
    return w_type == GGML_TYPE_Q8_0 ? q8_tiles() != nullptr : tiles_for(w_type) != nullptr;
}

// The q8_0 rounding of n_cols activation columns, in this thread's buffers (reused: a decoder
// step rounds a few columns per product, every product of the step).
Q8Columns quantize_columns(const float* x, int64_t x_stride, int64_t n_cols, int64_t in) {
    struct alignas(32) Block {
        int8_t q[kQ8Block];
    };
    struct Buffers {
        std::vector<Block> q;
        std::vector<float> d;
    };
    thread_local Buffers buf;
    const int64_t blocks = in / kQ8Block;
    buf.q.resize(static_cast<size_t>(n_cols * blocks));
    buf.d.resize(static_cast<size_t>(n_cols * blocks));
    for (int64_t c = 0; c < n_cols; ++c)
        quantize_q8(x + c * x_stride, blocks, buf.q[static_cast<size_t>(c * blocks)].q, buf.d.data() + c * blocks);
    return {buf.q.data()->q, buf.d.data(), blocks};
}

// Rows [row_begin, row_end) in blocks of 24 (a multiple of every tile height): each block meets
// every column group while its weights are still in cache, and its tile calls share out the
// fetching of the next block (rows stored back to back only; strided rows are attention heads,
// already in cache; and not for one column where the tile set says so). The order of the loops
// changes no result. call(fn, row, c, cols, pf) runs
// one tile: rows from `row`, columns [c, c + cols).
template <class Fn, class Call>
void for_each_tile(const TileSet<Fn>& t, const char* wb, size_t row_bytes, bool contiguous, int64_t n_cols,
                   int64_t row_begin, int64_t row_end, Call&& call) {
    for (int64_t b = row_begin; b < row_end; b += kRowBlock) {
        const int64_t b_end = std::min(row_end, b + kRowBlock);
        int64_t calls = 0;
        for (int64_t c = 0; c < n_cols; c += t.max_cols) {
            const int64_t wide = t.rows[std::min<int64_t>(t.max_cols, n_cols - c) - 1];
            calls += (b_end - b) / wide + (b_end - b) % wide;
        }
        const bool fetch = contiguous && calls > 0 && (n_cols > 1 || t.prefetch_one_column);
        const size_t next_bytes =
            fetch ? static_cast<size_t>(std::min(row_end, b_end + kRowBlock) - b_end) * row_bytes : 0;
        const size_t share = share_in_lines(next_bytes, calls);
        const char* next = wb + b_end * row_bytes;
        size_t fetched = 0;
        auto prefetch = [&] {
            Prefetch pf{next + fetched, std::min(share, next_bytes - fetched)};
            fetched += pf.bytes;
            return pf;
        };
        for (int64_t c = 0; c < n_cols; c += t.max_cols) {
            const int cols = static_cast<int>(std::min<int64_t>(t.max_cols, n_cols - c));
            const int64_t wide = t.rows[cols - 1];
            int64_t r = b;
            for (; r + wide <= b_end; r += wide) call(t.wide[cols - 1], r, c, prefetch());
            for (; r < b_end; ++r) call(t.single[cols - 1], r, c, prefetch());
        }
    }
}

#else

bool has_kernel(ggml_type) {
    return false;
}

#endif  // PARLANCE_X86_KERNELS

// How a (possibly batched) product is laid out: mats matrices of rows x in weights, each times
// n_cols activation columns.
struct Layout {
    int64_t in, rows, n_cols, mats;
    int64_t w_mats;        // weight matrices (1: broadcast over every activation matrix)
    size_t w_row, w_mat;   // weight strides, bytes
    int64_t x_col, x_mat;  // activation strides, floats
};

Layout layout_of(const ggml_tensor* w, const ggml_tensor* x) {
    Layout l;
    l.in = w->ne[0];
    l.rows = w->ne[1];
    l.w_row = w->nb[1];
    l.w_mat = w->nb[2];
    l.w_mats = w->ne[2];
    l.x_col = static_cast<int64_t>(x->nb[1] / sizeof(float));
    if (w->ne[2] == 1 && ggml_is_contiguous(x)) {  // one matrix times every column of x
        l.n_cols = ggml_nrows(x);
        l.mats = 1;
        l.x_mat = 0;
    } else {
        l.n_cols = x->ne[1];
        l.mats = x->ne[2];
        l.x_mat = static_cast<int64_t>(x->nb[2] / sizeof(float));
    }
    return l;
}

// ggml custom-op callback: dst = src[0] (weights) · src[1] (activations), contiguous [rows,
// n_cols, mats]; 24-row blocks of every matrix split evenly over the threads, columns taken in
// panels of 64 so a long prompt chunk's activations stay in L2 while the weights stream past.
void weight_product_task(ggml_tensor* dst, int ith, int nth, void* /*userdata*/) {
    const ggml_tensor* w = dst->src[0];
    const ggml_tensor* x = dst->src[1];
    const Layout l = layout_of(w, x);
    const int64_t blocks = (l.rows + kRowBlock - 1) / kRowBlock, total = blocks * l.mats;
    const int64_t b0 = total * ith / nth, b1 = total * (ith + 1) / nth;
    constexpr int64_t kPanel = 64;
    for (int64_t p = 0; p < l.n_cols; p += kPanel) {
        const int64_t cols = std::min(kPanel, l.n_cols - p);
        // One call per matrix: the thread's consecutive blocks of it (the kernel fetches each
        // block's successor while it computes).
        for (int64_t b = b0; b < b1;) {
            const int64_t m = b / blocks, r0 = b % blocks * kRowBlock;
            const int64_t b_end = std::min(b1, (m + 1) * blocks);
            const char* wm = static_cast<const char*>(w->data) + static_cast<size_t>(m % l.w_mats) * l.w_mat;
            const float* xm = static_cast<const float*>(x->data) + m * l.x_mat + p * l.x_col;
            float* ym = static_cast<float*>(dst->data) + (m * l.n_cols + p) * l.rows;
            weight_product_rows(w->type, wm, l.w_row, l.in, xm, l.x_col, cols, ym, l.rows, r0,
                                std::min(l.rows, (b_end - m * blocks) * kRowBlock));
            b = b_end;
        }
    }
}

}  // namespace

bool weight_product_kernel_available() {
    return has_kernel(GGML_TYPE_F16);
}

bool kernel_takes_weights(const ggml_tensor* w) {
    return w && (w->type == GGML_TYPE_F16 || w->type == GGML_TYPE_F32) && in_cpu_memory(w) &&
           weight_product_kernel_available();
}

bool weight_product_rows(ggml_type w_type, const void* w, size_t row_bytes, int64_t in, const float* x,
                         int64_t x_stride, int64_t n_cols, float* y, int64_t y_stride, int64_t row_begin,
                         int64_t row_end) {
#ifdef PARLANCE_X86_KERNELS
    const char* wb = static_cast<const char*>(w);
    const bool contiguous = row_bytes == ggml_row_size(w_type, in);
    if (w_type == GGML_TYPE_Q8_0) {
        const TileSet<Q8TileFn>* t = q8_tiles();
        if (!t) return false;
        const Q8Columns xq = quantize_columns(x, x_stride, n_cols, in);
        for_each_tile(*t, wb, row_bytes, contiguous, n_cols, row_begin, row_end,
                      [&](Q8TileFn fn, int64_t r, int64_t c, Prefetch pf) {
                          const Q8Columns cols{xq.q + c * xq.blocks * kQ8Block, xq.d + c * xq.blocks, xq.blocks};
                          fn(wb + r * row_bytes, row_bytes, xq.blocks, cols, y + c * y_stride + r, y_stride, pf);
                      });
        return true;
    }
    const Tiles* t = tiles_for(w_type);
    if (!t) return false;
    for_each_tile(
        *t, wb, row_bytes, contiguous, n_cols, row_begin, row_end, [&](TileFn fn, int64_t r, int64_t c, Prefetch pf) {
            fn(wb + r * row_bytes, row_bytes, in, x + c * x_stride, x_stride, y + c * y_stride + r, y_stride, pf);
        });
    return true;
#else
    (void)w_type, (void)w, (void)row_bytes, (void)in, (void)x, (void)x_stride, (void)n_cols, (void)y, (void)y_stride,
        (void)row_begin, (void)row_end;
    return false;
#endif
}

namespace {

bool gpu_default_accumulation() {
    return runtime_settings().gpu_default_accumulation;
}

}  // namespace

ggml_tensor* f32_product(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b) {
    ggml_tensor* y = ggml_mul_mat(ctx, a, b);
    ggml_mul_mat_set_prec(y, gpu_default_accumulation() ? GGML_PREC_DEFAULT : GGML_PREC_F32);
    return y;
}

ggml_tensor* weight_product(ggml_context* ctx, Products products, ggml_tensor* w, ggml_tensor* x) {
    const bool invariant = products == Products::BatchInvariant;
    auto ggml_product = [&] { return f32_product(ctx, w, x); };
    const bool host_weights = in_cpu_memory(w);
    const bool types = (w->type == GGML_TYPE_F16 || w->type == GGML_TYPE_F32 || w->type == GGML_TYPE_Q8_0) &&
                       x->type == GGML_TYPE_F32 && has_kernel(w->type);
    const bool shapes = w->nb[0] == ggml_type_size(w->type) && x->nb[0] == sizeof(float) && w->ne[3] == 1 &&
                        x->ne[3] == 1 && x->ne[2] % w->ne[2] == 0 &&
                        (w->ne[2] > 1 || x->ne[2] == 1 || ggml_is_contiguous(x)) && x->nb[1] % sizeof(float) == 0 &&
                        x->nb[2] % sizeof(float) == 0;
    if (!host_weights && invariant && device_products_invariant()) {
        // A GPU's ggml_mul_mat picks its kernel by the number of columns (CUDA: a vector kernel for
        // one, tensor-core tiles for a few, cuBLAS, whose algorithm follows the shape, beyond), so a
        // column's result would depend on what else is in the step. Each column as its own matrix
        // of one column always takes the vector kernel, whose reduction depends only on the row
        // length; with f32 accumulation.
        const bool columns = w->ne[2] == 1 && w->ne[3] == 1 && x->type == GGML_TYPE_F32 &&
                             (ggml_is_contiguous(x) || (x->ne[2] == 1 && x->ne[3] == 1));
        if (columns) {
            const int64_t n = ggml_nrows(x);
            ggml_tensor* cols = ggml_view_3d(ctx, x, x->ne[0], 1, n, x->nb[1], x->nb[1], 0);  // [in, 1, n]
            ggml_tensor* y = f32_product(ctx, w, cols);                                       // [out, 1, n]
            return ggml_reshape_4d(ctx, y, w->ne[1], x->ne[1], x->ne[2], x->ne[3]);
        }
    }
    if (!host_weights || !types || !shapes || !weight_product_kernel_available()) return ggml_product();
    const Layout l = layout_of(w, x);
    if (!invariant && l.n_cols >= kWeightProductMaxColumns) return ggml_product();
    ggml_tensor* args[2] = {w, x};
    return ggml_custom_4d(ctx, GGML_TYPE_F32, w->ne[1], x->ne[1], x->ne[2], x->ne[3], args, 2, weight_product_task,
                          GGML_N_TASKS_MAX, nullptr);
}

}  // namespace parlance
