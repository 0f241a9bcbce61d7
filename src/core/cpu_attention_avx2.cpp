// core/cpu_attention's AVX2 kernel (see cpu_attention_kernel.h). Compiled with
// -mavx2 -mfma -mf16c in a file of its own; called only on a CPU that has them.
//
// The portable loops take one kv head at a time, so a thread reads every cell's row in pieces
// (512 of 4,096 bytes for Qwen3-0.6B's f32 keys) a page apart, and converts an f16 cache's heads
// through a buffer. Here a thread takes a range of kv heads at once and reads each cell's piece of
// that range in one contiguous run, F16C converting eight values in a register. The arithmetic is
// the loops' own, operation for operation: the dot product's lanes 0-7 and 8-15 are two FMA chains
// in component order, added and summed as hsum8 (the loops' tree: lane l + l+8, then + l+4, + l+2,
// + l+1), times the scale; each weighted sum starts at zero and takes one FMA per cell in cell
// order, then the 1/sum.
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <algorithm>
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

template <class T>
inline void prefetch_piece(const T* p, int64_t n) {
    const char* c = reinterpret_cast<const char*>(p);
    for (int64_t b = 0; b < n * static_cast<int64_t>(sizeof(T)); b += 64) _mm_prefetch(c + b, _MM_HINT_T0);
}

// Query heads [kvh0 * G, kvh1 * G) of one token: those of kv heads kvh0 .. kvh1 - 1.
template <class K, class V>
void attend(const PagedAttentionShape& s, const float* q, int64_t kvh0, int64_t kvh1, int64_t first, int64_t count,
            float* out, float* scores) {
    const int64_t G = s.group, hd = s.hd, kvn = kvh1 - kvh0, H = kvn * G;
    q += kvh0 * G * hd;
    out += kvh0 * G * hd;
    // The range's K heads sit side by side in each cell's row: one contiguous piece per cell.
    for (int64_t j = 0; j < count; ++j) {
        if (j + kPrefetchCells < count)
            prefetch_piece(head<K>(s.k, s.k_row, s.read[first + j + kPrefetchCells], kvh0, hd), kvn * hd);
        const K* kr = head<K>(s.k, s.k_row, s.read[first + j], kvh0, hd);
        for (int64_t kv = 0; kv < kvn; ++kv) {
            const K* kh = kr + kv * hd;
            for (int64_t g = 0; g < G; ++g) {
                const int64_t h = kv * G + g;
                const float* qh = q + h * hd;
                __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
                for (int64_t d = 0; d < hd; d += 16) {
                    lo = _mm256_fmadd_ps(_mm256_loadu_ps(qh + d), load8(kh + d), lo);
                    hi = _mm256_fmadd_ps(_mm256_loadu_ps(qh + d + 8), load8(kh + d + 8), hi);
                }
                scores[h * count + j] = hsum8(_mm256_add_ps(lo, hi)) * s.scale;
            }
        }
    }
    thread_local std::vector<float> inv;
    inv.resize(static_cast<size_t>(H));
    softmax_rows(scores, H, count, inv.data());
    // The weighted sums stay in L1 (a few KB) through one pass over the range's V pieces.
    std::fill(out, out + H * hd, 0.0f);
    for (int64_t j = 0; j < count; ++j) {
        if (j + kPrefetchCells < count)
            prefetch_piece(head<V>(s.v, s.v_row, s.read[first + j + kPrefetchCells], kvh0, hd), kvn * hd);
        const V* vr = head<V>(s.v, s.v_row, s.read[first + j], kvh0, hd);
        for (int64_t kv = 0; kv < kvn; ++kv)
            for (int64_t g = 0; g < G; ++g) {
                const int64_t h = kv * G + g;
                const __m256 p = _mm256_broadcast_ss(scores + h * count + j);
                const V* vh = vr + kv * hd;
                float* o = out + h * hd;
                for (int64_t d = 0; d < hd; d += 8)
                    _mm256_storeu_ps(o + d, _mm256_fmadd_ps(p, load8(vh + d), _mm256_loadu_ps(o + d)));
            }
    }
    for (int64_t h = 0; h < H; ++h) {
        const __m256 scale = _mm256_set1_ps(inv[h]);
        for (int64_t d = 0; d < hd; d += 8)
            _mm256_storeu_ps(out + h * hd + d, _mm256_mul_ps(_mm256_loadu_ps(out + h * hd + d), scale));
    }
}

}  // namespace

void attend_heads_avx2(const PagedAttentionShape& s, const float* q, int64_t kvh0, int64_t kvh1, int64_t first,
                       int64_t count, float* out, float* scores) {
    if (s.k_f16 && s.v_f16) return attend<uint16_t, uint16_t>(s, q, kvh0, kvh1, first, count, out, scores);
    if (s.k_f16) return attend<uint16_t, float>(s, q, kvh0, kvh1, first, count, out, scores);
    if (s.v_f16) return attend<float, uint16_t>(s, q, kvh0, kvh1, first, count, out, scores);
    attend<float, float>(s, q, kvh0, kvh1, first, count, out, scores);
}

}  // namespace parlance

#endif
