// core/cpu_attention's AVX2 kernel (see cpu_attention_kernel.h). Compiled with
// -mavx2 -mfma -mf16c in a file of its own; called only on a CPU that has them.
//
// The portable loops take one kv head at a time, so a thread reads every cell's row in pieces
// (512 of 4,096 bytes for Qwen3-0.6B's f32 keys) a page apart, and converts an f16 cache's heads
// through a buffer, and keeps the weighted sums in memory (a load, an FMA and a store per component
// and cell). Here a thread takes a range of kv heads at once and reads each cell's piece of that
// range in one contiguous run, F16C converting eight values in a register; a K piece serves every
// query head of its group; the weighted sums stay in registers across blocks of 32 cells whose V
// pieces stay in L1 for every slice of components. The arithmetic is the loops' own, operation for
// operation: the dot product's lanes 0-7 and 8-15 are two FMA chains in component order, added and
// summed as hsum8 (the loops' tree: lane l + l+8, then + l+4, + l+2, + l+1), times the scale; each
// weighted sum starts at zero and takes one FMA per cell in cell order (left undivided: the pieces
// of a token's cells are combined after, cpu_attention.cpp).
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/avx_reductions.h"
#include "core/cpu_attention_kernel.h"

namespace parlance {
namespace {

// A cell's kv head: T = uint16_t for f16 caches, float for f32.
template <class T>
inline const T* head(const char* base, size_t row_bytes, int64_t cell, int64_t kv_head, int64_t hd) {
    return reinterpret_cast<const T*>(base + static_cast<size_t>(cell) * row_bytes) + kv_head * hd;
}

inline __m256 load8(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 load8(const float* p) {
    return _mm256_loadu_ps(p);
}

// Asks for n elements from p: into L1, or into L2 (a block ahead, more than L1 holds).
template <bool ToL2 = false, class T>
inline void prefetch_piece(const T* p, int64_t n) {
    const char* c = reinterpret_cast<const char*>(p);
    for (int64_t b = 0; b < n * static_cast<int64_t>(sizeof(T)); b += 64) {
        if constexpr (ToL2)
            _mm_prefetch(c + b, _MM_HINT_T1);
        else
            _mm_prefetch(c + b, _MM_HINT_T0);
    }
}

// Scores of one cell for the G query heads of a kv head: the K piece is loaded (and converted)
// once for all G heads; each head's dot keeps its own two chains (lanes 0-7, 8-15).
template <class K, int G>
inline void cell_scores(const float* q, const K* k, int64_t hd, float scale, float* scores, int64_t count) {
    __m256 lo[G], hi[G];
    for (int g = 0; g < G; ++g) lo[g] = hi[g] = _mm256_setzero_ps();
    for (int64_t d = 0; d < hd; d += 16) {
        const __m256 k0 = load8(k + d), k1 = load8(k + d + 8);
        for (int g = 0; g < G; ++g) {
            lo[g] = _mm256_fmadd_ps(_mm256_loadu_ps(q + g * hd + d), k0, lo[g]);
            hi[g] = _mm256_fmadd_ps(_mm256_loadu_ps(q + g * hd + d + 8), k1, hi[g]);
        }
    }
    for (int g = 0; g < G; ++g) scores[g * count] = hsum8(_mm256_add_ps(lo[g], hi[g])) * scale;
}

// Cells a block of the weighted sums takes: their V pieces stay in L1 while every slice of
// components passes over them.
constexpr int64_t kValueBlock = 32;

// out[g][d0 .. d0 + 32) += sum over cells [j0, j1) of p[g][j] v_j (G heads of one kv head), the
// sums in registers across the block, in cell order.
template <class V, int G>
inline void weighted_slice(const PagedAttentionShape& s, int64_t kvh, int64_t first, int64_t j0, int64_t j1,
                           const float* p, int64_t count, int64_t d0, float* out) {
    __m256 acc[G][4];
    for (int g = 0; g < G; ++g)
        for (int i = 0; i < 4; ++i) acc[g][i] = _mm256_loadu_ps(out + g * s.hd + d0 + 8 * i);
    for (int64_t j = j0; j < j1; ++j) {
        const V* v = head<V>(s.v, s.v_row, s.read[first + j], kvh, s.hd) + d0;
        __m256 x[4];
        for (int i = 0; i < 4; ++i) x[i] = load8(v + 8 * i);
        for (int g = 0; g < G; ++g) {
            const __m256 w = _mm256_broadcast_ss(p + g * count + j);
            for (int i = 0; i < 4; ++i) acc[g][i] = _mm256_fmadd_ps(w, x[i], acc[g][i]);
        }
    }
    for (int g = 0; g < G; ++g)
        for (int i = 0; i < 4; ++i) _mm256_storeu_ps(out + g * s.hd + d0 + 8 * i, acc[g][i]);
}

// Query heads [kvh0 * G, kvh1 * G) of one token: those of kv heads kvh0 .. kvh1 - 1.
template <class K, class V, int G>
void attend(const PagedAttentionShape& s, const float* q, int64_t kvh0, int64_t kvh1, int64_t first, int64_t count,
            float* out, float* stats, float* scores) {
    const int64_t hd = s.hd, kvn = kvh1 - kvh0, H = kvn * G;
    q += kvh0 * G * hd;
    out += kvh0 * G * hd;
    stats += kvh0 * G * 2;
    // The range's K heads sit side by side in each cell's row: one contiguous piece per cell.
    for (int64_t j = 0; j < count; ++j) {
        if (j + kPrefetchCells < count)
            prefetch_piece(head<K>(s.k, s.k_row, s.read[first + j + kPrefetchCells], kvh0, hd), kvn * hd);
        const K* kr = head<K>(s.k, s.k_row, s.read[first + j], kvh0, hd);
        for (int64_t kv = 0; kv < kvn; ++kv)
            cell_scores<K, G>(q + kv * G * hd, kr + kv * hd, hd, s.scale, scores + kv * G * count + j, count);
    }
    thread_local std::vector<float> max, sum;
    max.resize(static_cast<size_t>(H));
    sum.resize(static_cast<size_t>(H));
    softmax_rows_avx2(scores, H, count, max.data(), sum.data());
    // The weighted sums: blocks of cells, each block's V pieces read from memory once (fetched a
    // block ahead) and then from L1 by every slice of 32 components.
    std::fill(out, out + H * hd, 0.0f);
    for (int64_t j0 = 0; j0 < count; j0 += kValueBlock) {
        const int64_t j1 = std::min(count, j0 + kValueBlock);
        for (int64_t j = j1; j < std::min(count, j1 + kValueBlock); ++j)
            prefetch_piece<true>(head<V>(s.v, s.v_row, s.read[first + j], kvh0, hd), kvn * hd);
        for (int64_t kv = 0; kv < kvn; ++kv)
            for (int64_t d0 = 0; d0 < hd; d0 += 32)
                weighted_slice<V, G>(s, kvh0 + kv, first, j0, j1, scores + kv * G * count, count, d0,
                                     out + kv * G * hd);
    }
    for (int64_t h = 0; h < H; ++h) {
        stats[2 * h] = max[h];
        stats[2 * h + 1] = sum[h];
    }
}

template <class K, class V>
void attend_heads(const PagedAttentionShape& s, const float* q, int64_t kvh0, int64_t kvh1, int64_t first,
                  int64_t count, float* out, float* stats, float* scores) {
    switch (s.group) {  // avx2_kernel_takes: 1 to 4
        case 1:
            return attend<K, V, 1>(s, q, kvh0, kvh1, first, count, out, stats, scores);
        case 2:
            return attend<K, V, 2>(s, q, kvh0, kvh1, first, count, out, stats, scores);
        case 3:
            return attend<K, V, 3>(s, q, kvh0, kvh1, first, count, out, stats, scores);
        default:
            return attend<K, V, 4>(s, q, kvh0, kvh1, first, count, out, stats, scores);
    }
}

// softmax_exp eight values at a time, the same operations in the same order.
inline __m256 exp8(__m256 x) {
    using E = SoftmaxExp;
    x = _mm256_max_ps(x, _mm256_set1_ps(E::kLowest));
    const __m256 n =
        _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(E::kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-E::kLn2Hi), x);
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(-E::kLn2Lo), r);
    const __m256 r2 = _mm256_mul_ps(r, r);
    __m256 y = _mm256_fmadd_ps(_mm256_set1_ps(E::kP0), r, _mm256_set1_ps(E::kP1));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(E::kP2));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(E::kP3));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(E::kP4));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(E::kP5));
    y = _mm256_add_ps(_mm256_fmadd_ps(y, r2, r), _mm256_set1_ps(1.0f));
    const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(bits));
}

}  // namespace

void softmax_rows_avx2(float* scores, int64_t rows, int64_t count, float* max, float* sum) {
    const int64_t whole = count / 8 * 8;
    // The last cells' lanes: loaded, computed and stored only where they are cells.
    alignas(32) int32_t lanes[8];
    for (int l = 0; l < 8; ++l) lanes[l] = l < count - whole ? -1 : 0;
    const __m256i tail = _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes));
    for (int64_t g = 0; g < rows; ++g) {
        float* sc = scores + g * count;
        __m256 mv = _mm256_set1_ps(-INFINITY);
        for (int64_t j = 0; j < whole; j += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(sc + j));
        float m = hmax8(mv);
        for (int64_t j = whole; j < count; ++j) m = std::max(m, sc[j]);
        const __m256 mb = _mm256_set1_ps(m);
        __m256 lanes_sum = _mm256_setzero_ps();
        for (int64_t j = 0; j < whole; j += 8) {
            const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(sc + j), mb));
            _mm256_storeu_ps(sc + j, e);
            lanes_sum = _mm256_add_ps(lanes_sum, e);
        }
        if (whole < count) {
            const __m256 e =
                _mm256_and_ps(exp8(_mm256_sub_ps(_mm256_maskload_ps(sc + whole, tail), mb)), _mm256_castsi256_ps(tail));
            _mm256_maskstore_ps(sc + whole, tail, e);
            lanes_sum = _mm256_add_ps(lanes_sum, e);
        }
        max[g] = m;
        sum[g] = hsum8(lanes_sum);
    }
}

void attend_heads_avx2(const PagedAttentionShape& s, const float* q, int64_t kvh0, int64_t kvh1, int64_t first,
                       int64_t count, float* out, float* stats, float* scores) {
    if (s.k_f16 && s.v_f16) return attend_heads<uint16_t, uint16_t>(s, q, kvh0, kvh1, first, count, out, stats, scores);
    if (s.k_f16) return attend_heads<uint16_t, float>(s, q, kvh0, kvh1, first, count, out, stats, scores);
    if (s.v_f16) return attend_heads<float, uint16_t>(s, q, kvh0, kvh1, first, count, out, stats, scores);
    attend_heads<float, float>(s, q, kvh0, kvh1, first, count, out, stats, scores);
}

}  // namespace parlance

#endif
