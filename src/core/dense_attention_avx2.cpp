// core/dense_attention's AVX2 kernel. Compiled with the avx2 flags (CMakeLists.txt) and called
// only on a CPU that has them.
#if defined(PARLANCE_WITH_SLEEF)
#include <immintrin.h>
#include <sleef.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "core/avx_reductions.h"
#include "core/dense_attention_kernel.h"

namespace parlance {
namespace {

constexpr int kQ = 6;          // rows of a register tile (12 accumulators, 2 loads, 1 broadcast)
constexpr int kSubBlocks = 4;  // tiles a block of queries takes
constexpr int64_t kBlock = kDenseQueryBlock;
static_assert(kBlock == kQ * kSubBlocks);
constexpr int64_t kKeyTile = 16;     // keys per score tile: two vectors
constexpr int64_t kValueChunk = 64;  // keys whose values a pass of the weighted sums reads
constexpr int64_t kValueSlice = 16;  // components a pass of the weighted sums computes

int64_t round_up(int64_t n, int64_t m) {
    return (n + m - 1) / m * m;
}

// Eight consecutive keys' or values' components as f32: packed f32 (keys and values the op packs
// itself) or packed f16 (an encoder's cross-attention cache, packed when it was written).
inline __m256 load8(const float* p) {
    return _mm256_loadu_ps(p);
}
inline __m256 load8(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// The head's keys and values packed in the order the tiles read them, so that every read is
// sequential (the hardware prefetcher follows it; a head's rows in place are 1 KB apart and a tile
// reads 64 B of each).
// Keys: tiles of 16 keys, each [hd][16] (component d of 16 consecutive keys as two vectors); zeros
// after tk, up to tp.
void pack_keys(const DenseAttentionJob& job, int64_t b, int64_t h, int64_t tp, float* kt) {
    if (tp > job.tk) {  // the last tile's padding: the loop below writes every other slot
        float* last = kt + (tp - kKeyTile) * job.hd;
        std::fill(last, last + job.hd * kKeyTile, 0.0f);
    }
    const int64_t stride = job.heads * job.hd;
    const float* k = job.k + (b * job.tk * job.heads + h) * job.hd;
    for (int64_t j = 0; j < job.tk; ++j, k += stride) {
        float* tile = kt + (j / kKeyTile) * job.hd * kKeyTile + j % kKeyTile;
        for (int64_t d = 0; d < job.hd; ++d) tile[d * kKeyTile] = k[d];
    }
}

// Values: slices of 16 components (8 for a last slice of 8), each [tk][width]: a pass of the weighted
// sums reads one slice's rows in order.
void pack_values(const DenseAttentionJob& job, int64_t b, int64_t h, float* vp) {
    const int64_t stride = job.heads * job.hd;
    for (int64_t c = 0; c < job.hd; c += kValueSlice) {
        const int64_t width = std::min(kValueSlice, job.hd - c);
        const float* v = job.v + (b * job.tk * job.heads + h) * job.hd + c;
        float* out = vp + c * job.tk;
        for (int64_t j = 0; j < job.tk; ++j, v += stride, out += width) std::memcpy(out, v, width * sizeof(float));
    }
}

// s[r * tp + j] = scale * (q row r . key j) for the block's rows qb[r * hd ...] (n_sub sub-blocks
// of six); each sum runs over d in order. A tile of 16 keys (4 KB of kt at hd 64) serves every
// sub-block while it is in L1.
template <typename E>
void scores(const float* qb, int64_t hd, const E* kt, int64_t tp, float scale, float* s, int n_sub) {
    const __m256 sc = _mm256_set1_ps(scale);
    for (int64_t j = 0; j < tp; j += kKeyTile) {
        for (int sb = 0; sb < n_sub; ++sb) {
            const float* q = qb + sb * kQ * hd;
            float* out = s + sb * kQ * tp + j;
            __m256 acc[kQ][2];
#pragma GCC unroll 6
            for (int r = 0; r < kQ; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
            const E* kp = kt + j * hd;  // tile j / 16
            for (int64_t d = 0; d < hd; ++d, kp += kKeyTile) {
                const __m256 k0 = load8(kp), k1 = load8(kp + 8);
#pragma GCC unroll 6
                for (int r = 0; r < kQ; ++r) {
                    const __m256 x = _mm256_broadcast_ss(q + r * hd + d);
                    acc[r][0] = _mm256_fmadd_ps(x, k0, acc[r][0]);
                    acc[r][1] = _mm256_fmadd_ps(x, k1, acc[r][1]);
                }
            }
#pragma GCC unroll 6
            for (int r = 0; r < kQ; ++r) {
                _mm256_storeu_ps(out + r * tp, _mm256_mul_ps(acc[r][0], sc));
                _mm256_storeu_ps(out + r * tp + 8, _mm256_mul_ps(acc[r][1], sc));
            }
        }
    }
}

// A row of scores becomes exp(s - max) in place (the padding after tk is -inf, exp 0); returns
// 1 / the sum of the row.
float softmax_row(float* row, int64_t tk, int64_t tp) {
    std::fill(row + tk, row + tp, -std::numeric_limits<float>::infinity());
    __m256 mx = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
    for (int64_t j = 0; j < tp; j += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(row + j));
    const __m256 m = _mm256_set1_ps(hmax8(mx));
    __m256 sum = _mm256_setzero_ps();
    for (int64_t j = 0; j < tp; j += 8) {
        const __m256 e = Sleef_expf8_u10avx2(_mm256_sub_ps(_mm256_loadu_ps(row + j), m));
        _mm256_storeu_ps(row + j, e);
        sum = _mm256_add_ps(sum, e);
    }
    return 1.0f / hsum8(sum);
}

// Components [c, c + 8 NV) of six rows' weighted sums over keys [j0, j1): acc[r] += p[r][j] v_j,
// j in order; `slice` is the packed values of those components ([tk][8 NV]). The running sums live
// in `acc_rows` (hd floats a row) between calls, so splitting the keys into chunks changes no bit.
template <int NV, typename E>
void weighted_values(const float* p, int64_t tp, const E* slice, int64_t j0, int64_t j1, int64_t c, float* acc_rows,
                     int64_t hd) {
    __m256 acc[kQ][NV];
#pragma GCC unroll 6
    for (int r = 0; r < kQ; ++r)
#pragma GCC unroll 2
        for (int n = 0; n < NV; ++n) acc[r][n] = _mm256_loadu_ps(acc_rows + r * hd + c + 8 * n);
    const E* vp = slice + j0 * 8 * NV;
    for (int64_t j = j0; j < j1; ++j, vp += 8 * NV) {
        __m256 vv[NV];
#pragma GCC unroll 2
        for (int n = 0; n < NV; ++n) vv[n] = load8(vp + 8 * n);
#pragma GCC unroll 6
        for (int r = 0; r < kQ; ++r) {
            const __m256 x = _mm256_broadcast_ss(p + r * tp + j);
#pragma GCC unroll 2
            for (int n = 0; n < NV; ++n) acc[r][n] = _mm256_fmadd_ps(x, vv[n], acc[r][n]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < kQ; ++r)
#pragma GCC unroll 2
        for (int n = 0; n < NV; ++n) _mm256_storeu_ps(acc_rows + r * hd + c + 8 * n, acc[r][n]);
}

// One block of queries of one head: qb holds n_sub * 6 rows (zeros past the real ones), kt the
// head's packed keys (tp of them, zeros or anything after tk: their scores are replaced by -inf),
// vp its packed values (slices of 16 components, or 8 for a last slice, each [tk][width]).
// Leaves each row's exp(score - max) in s (rows tp apart), its 1 / sum in inv and its unscaled
// weighted sum of values in sums (rows hd apart).
template <typename E>
void attend_block(const float* qb, int n_sub, const E* kt, const E* vp, int64_t tk, int64_t tp, int64_t hd, float scale,
                  float* s, float* inv, float* sums) {
    scores(qb, hd, kt, tp, scale, s, n_sub);
    for (int64_t r = 0; r < n_sub * kQ; ++r) inv[r] = softmax_row(s + r * tp, tk, tp);
    // The weighted values in chunks of keys whose values (16 KB at hd 64) serve every sub-block
    // while they are in L1.
    std::fill(sums, sums + n_sub * kQ * hd, 0.0f);
    for (int64_t j0 = 0; j0 < tk; j0 += kValueChunk) {
        const int64_t j1 = std::min(tk, j0 + kValueChunk);
        for (int sb = 0; sb < n_sub; ++sb) {
            const float* p = s + sb * kQ * tp;
            float* acc = sums + sb * kQ * hd;
            int64_t c = 0;
            for (; c + 16 <= hd; c += 16) weighted_values<2>(p, tp, vp + c * tk, j0, j1, c, acc, hd);
            if (c < hd) weighted_values<1>(p, tp, vp + c * tk, j0, j1, c, acc, hd);
        }
    }
}

// out = sums row times its 1 / sum.
void store_row(const float* sums, float inv, int64_t hd, float* out) {
    const __m256 scale = _mm256_set1_ps(inv);
    for (int64_t c = 0; c < hd; c += 8) _mm256_storeu_ps(out + c, _mm256_mul_ps(_mm256_loadu_ps(sums + c), scale));
}

// Per-thread scratch of a block: its queries, scores, 1 / sums and weighted sums.
struct BlockScratch {
    std::vector<float> qb, s, sums;
    float inv[kBlock];
    void reserve(int64_t hd, int64_t tp) {
        qb.resize(static_cast<size_t>(kBlock * hd));
        s.resize(static_cast<size_t>(kBlock * tp));
        sums.resize(static_cast<size_t>(kBlock * hd));
    }
};

}  // namespace

void dense_attention_avx2(const DenseAttentionJob& job, int64_t begin, int64_t end) {
    const int64_t hd = job.hd, tp = round_up(job.tk, kKeyTile), blocks = (job.tq + kBlock - 1) / kBlock;
    const int64_t stride = job.heads * hd;  // between one token's rows of a head
    thread_local std::vector<float> kt, vp;
    thread_local BlockScratch w;
    kt.resize(static_cast<size_t>(hd * tp));
    vp.resize(static_cast<size_t>(hd * job.tk));
    w.reserve(hd, tp);
    int64_t packed = -1;  // the (batch entry, head) whose keys kt holds
    for (int64_t u = begin; u < end; ++u) {
        const int64_t bh = u / blocks, t0 = (u % blocks) * kBlock;
        const int64_t b = bh / job.heads, h = bh % job.heads;
        if (bh != packed) {
            pack_keys(job, b, h, tp, kt.data());
            pack_values(job, b, h, vp.data());
            packed = bh;
        }
        // The block's queries (zeros past the last one: computed, never stored).
        const int64_t rows = std::min(kBlock, job.tq - t0);
        std::fill(w.qb.begin(), w.qb.end(), 0.0f);
        for (int64_t r = 0; r < rows; ++r)
            std::memcpy(w.qb.data() + r * hd, job.q + (b * job.tq + t0 + r) * stride + h * hd, hd * sizeof(float));
        attend_block(w.qb.data(), kSubBlocks, kt.data(), vp.data(), job.tk, tp, hd, job.scale, w.s.data(), w.inv,
                     w.sums.data());
        for (int64_t r = 0; r < rows; ++r)
            store_row(w.sums.data() + r * hd, w.inv[r], hd, job.o + (b * job.tq + t0 + r) * stride + h * hd);
    }
}

void packed_attention_avx2(const PackedAttentionJob& job, int64_t begin, int64_t end) {
    const int64_t hd = job.hd, tk = job.tk, tp = round_up(tk, kPackedKeyTile);
    const int64_t stride = job.heads * hd;  // between one token's rows
    thread_local BlockScratch w;
    w.reserve(hd, tp);
    // Find the run of unit `begin`, then walk units in order: (run, head, block).
    int64_t run = 0, first = 0;  // first unit of `run`
    while (run < job.n_runs && first + job.run_units(run) <= begin) first += job.run_units(run++);
    for (int64_t u = begin; u < end; ++u) {
        while (u >= first + job.run_units(run)) first += job.run_units(run++);
        const PackedAttentionRun& r = job.runs[run];
        const int64_t blocks = (r.n + kBlock - 1) / kBlock;
        const int64_t h = (u - first) / blocks, t0 = ((u - first) % blocks) * kBlock;
        const int64_t rows = std::min(kBlock, r.n - t0);
        const int n_sub = static_cast<int>((rows + kQ - 1) / kQ);
        std::fill(w.qb.begin(), w.qb.begin() + n_sub * kQ * hd, 0.0f);
        for (int64_t i = 0; i < rows; ++i)
            std::memcpy(w.qb.data() + i * hd, job.q + (r.row + t0 + i) * stride + h * hd, hd * sizeof(float));
        attend_block(w.qb.data(), n_sub, r.k + h * tp * hd, r.v + h * hd * tk, tk, tp, hd, job.scale, w.s.data(), w.inv,
                     w.sums.data());
        for (int64_t i = 0; i < rows; ++i)
            store_row(w.sums.data() + i * hd, w.inv[i], hd, job.o + (r.row + t0 + i) * stride + h * hd);
        float* probabilities = job.probabilities ? job.probabilities[h] : nullptr;
        if (probabilities) {  // the softmaxed weights themselves, rows of tk per query of the run
            for (int64_t i = 0; i < rows; ++i) {
                const float* e = w.s.data() + i * tp;
                float* out = probabilities + (t0 + i) * tk;
                for (int64_t j = 0; j < tk; ++j) out[j] = e[j] * w.inv[i];
            }
        }
    }
}

}  // namespace parlance
#endif
