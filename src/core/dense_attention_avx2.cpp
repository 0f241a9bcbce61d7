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

// s[r * tp + j] = scale * (q row r . key j) for the block's rows qb[r * hd ...]; each sum runs
// over d in order. A tile of 16 keys (4 KB of kt at hd 64) serves every sub-block of six rows
// while it is in L1.
void scores(const float* qb, int64_t hd, const float* kt, int64_t tp, float scale, float* s) {
    const __m256 sc = _mm256_set1_ps(scale);
    for (int64_t j = 0; j < tp; j += kKeyTile) {
        for (int sb = 0; sb < kSubBlocks; ++sb) {
            const float* q = qb + sb * kQ * hd;
            float* out = s + sb * kQ * tp + j;
            __m256 acc[kQ][2];
#pragma GCC unroll 6
            for (int r = 0; r < kQ; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
            const float* kp = kt + j * hd;  // tile j / 16
            for (int64_t d = 0; d < hd; ++d, kp += kKeyTile) {
                const __m256 k0 = _mm256_loadu_ps(kp), k1 = _mm256_loadu_ps(kp + 8);
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
template <int NV>
void weighted_values(const float* p, int64_t tp, const float* slice, int64_t j0, int64_t j1, int64_t c, float* acc_rows,
                     int64_t hd) {
    __m256 acc[kQ][NV];
#pragma GCC unroll 6
    for (int r = 0; r < kQ; ++r)
#pragma GCC unroll 2
        for (int n = 0; n < NV; ++n) acc[r][n] = _mm256_loadu_ps(acc_rows + r * hd + c + 8 * n);
    const float* vp = slice + j0 * 8 * NV;
    for (int64_t j = j0; j < j1; ++j, vp += 8 * NV) {
        __m256 vv[NV];
#pragma GCC unroll 2
        for (int n = 0; n < NV; ++n) vv[n] = _mm256_loadu_ps(vp + 8 * n);
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

}  // namespace

void dense_attention_avx2(const DenseAttentionJob& job, int64_t begin, int64_t end) {
    const int64_t hd = job.hd, tp = round_up(job.tk, kKeyTile), blocks = (job.tq + kBlock - 1) / kBlock;
    const int64_t stride = job.heads * hd;  // between one token's rows of a head
    thread_local std::vector<float> kt, vp, s, qb, sums;
    kt.resize(static_cast<size_t>(hd * tp));
    vp.resize(static_cast<size_t>(hd * job.tk));
    s.resize(static_cast<size_t>(kBlock * tp));
    qb.resize(static_cast<size_t>(kBlock * hd));
    sums.resize(static_cast<size_t>(kBlock * hd));
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
        std::fill(qb.begin(), qb.end(), 0.0f);
        for (int64_t r = 0; r < rows; ++r)
            std::memcpy(qb.data() + r * hd, job.q + (b * job.tq + t0 + r) * stride + h * hd, hd * sizeof(float));
        scores(qb.data(), hd, kt.data(), tp, job.scale, s.data());
        float inv[kBlock];
        for (int64_t r = 0; r < kBlock; ++r) inv[r] = softmax_row(s.data() + r * tp, job.tk, tp);
        // The weighted values in chunks of keys whose values (16 KB at hd 64) serve every sub-block
        // while they are in L1.
        std::fill(sums.begin(), sums.end(), 0.0f);
        for (int64_t j0 = 0; j0 < job.tk; j0 += kValueChunk) {
            const int64_t j1 = std::min(job.tk, j0 + kValueChunk);
            for (int sb = 0; sb < kSubBlocks; ++sb) {
                const float* p = s.data() + sb * kQ * tp;
                float* acc = sums.data() + sb * kQ * hd;
                int64_t c = 0;
                for (; c + 16 <= hd; c += 16) weighted_values<2>(p, tp, vp.data() + c * job.tk, j0, j1, c, acc, hd);
                if (c < hd) weighted_values<1>(p, tp, vp.data() + c * job.tk, j0, j1, c, acc, hd);
            }
        }
        for (int64_t r = 0; r < rows; ++r) {
            float* out = job.o + (b * job.tq + t0 + r) * stride + h * hd;
            const __m256 scale = _mm256_set1_ps(inv[r]);
            for (int64_t c = 0; c < hd; c += 8)
                _mm256_storeu_ps(out + c, _mm256_mul_ps(_mm256_loadu_ps(sums.data() + r * hd + c), scale));
        }
    }
}

}  // namespace parlance
#endif
