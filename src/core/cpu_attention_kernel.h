// core/cpu_attention's per-group work: the portable loops (cpu_attention.cpp) and the AVX2 kernel
// (cpu_attention_avx2.cpp, compiled for its instruction set in its own file), which computes the
// same arithmetic in the same order — the same bits — for several kv heads at once, reading each
// cell's piece of them in one run.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace parlance {

struct PagedAttentionShape {
    int64_t hd, heads, group;  // group = heads / kv_heads
    const char* k;
    const char* v;
    size_t k_row, v_row;  // bytes per cell
    bool k_f16, v_f16;    // else f32
    const int32_t* read;
    float scale;
};

// One piece of a token's attention: the s.group query heads that share kv head `kvh` (GQA) over
// cells read[first .. first + count): q [group][hd] -> out [group][hd], the weighted sums of V not
// yet divided by the softmax's sum, and stats [group][2] = {max score, sum of exp(score - max)}
// (combine_pieces finishes them); scores holds group x count floats. Each cell's K and V
// rows are read once for the whole group; every head's arithmetic is the sequence it has alone: a
// dot per cell in cell order (16 lanes, then a fixed tree) times the scale, the softmax's exps and
// sum (softmax_rows), one multiply-add per cell and component in cell order.
void attend_group_portable(const PagedAttentionShape& s, const float* q, int64_t kvh, int64_t first, int64_t count,
                           float* out, float* stats, float* scores);

// The same bits for the query heads of kv heads [kvh0, kvh1) of one token at once (q and out
// [heads][hd], stats [heads][2] for the token; scores (kvh1 - kvh0) x group x count floats), hd a
// multiple of 32 and 1 to 4 query heads per kv head, f16 or f32 K and V, on a CPU with AVX2, FMA
// and F16C.
void attend_heads_avx2(const PagedAttentionShape& s, const float* q, int64_t kvh0, int64_t kvh1, int64_t first,
                       int64_t count, float* out, float* stats, float* scores);
void softmax_rows_avx2(float* scores, int64_t rows, int64_t count, float* max, float* sum);
inline bool avx2_kernel_takes(const PagedAttentionShape& s) {
    return s.hd % 32 == 0 && s.group >= 1 && s.group <= 4;
}

// exp(x) for the softmax's x = score - max <= 0, one definition that the portable loops and the
// AVX2 kernel compute operation for operation (libm's expf is neither vectorisable nor the same on
// every system; SLEEF's vector exp, the dense kernel's, has no scalar twin promised to give its
// bits): x = n ln2 + r with n = round(x / ln2) and ln2 in two parts, e^r a degree-7 polynomial in
// r (minimax coefficients, as in Cephes' expf), times 2^n built in the exponent bits. Relative
// error below 1e-7 against the exact value (ctest PagedAttentionKernel.SoftmaxExpIsExpToAFewUlps);
// x = 0 gives exactly 1; x is taken no lower than -87 (2^-126 e^r, ~1e-38: nothing beside the
// row's 1 notices it).
struct SoftmaxExp {
    static constexpr float kLowest = -87.0f;
    static constexpr float kLog2e = 1.44269504088896341f;
    static constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
    // e^r = 1 + r + r^2 (p5 + p4 r + ... + p0 r^5) on |r| <= ln2/2.
    static constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f,
                           kP3 = 4.1665795894e-2f, kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;
};

inline float softmax_exp(float x) {
    using E = SoftmaxExp;
    x = x < E::kLowest ? E::kLowest : x;
    const float n = std::nearbyint(x * E::kLog2e);
    float r = std::fma(n, -E::kLn2Hi, x);
    r = std::fma(n, -E::kLn2Lo, r);
    const float r2 = r * r;
    float y = std::fma(E::kP0, r, E::kP1);
    y = std::fma(y, r, E::kP2);
    y = std::fma(y, r, E::kP3);
    y = std::fma(y, r, E::kP4);
    y = std::fma(y, r, E::kP5);
    y = std::fma(y, r2, r) + 1.0f;
    const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return y * scale;
}

// Each of `rows` rows of `count` scores becomes softmax_exp(score - max) in place; max[r] = the
// row's largest score (-inf for an empty row), sum[r] = the sum of its exps (0 for an empty row),
// in eight lanes (cell j into lane j % 8) added as hsum8 adds them (lane l + l+4, then + l+2, then
// + l+1): the AVX2 kernel's softmax_rows_avx2 computes the same bits eight cells at a time.
void softmax_rows(float* scores, int64_t rows, int64_t count, float* max, float* sum);

// A token's cells are attended in pieces of consecutive cells (at most kAttentionPieces, none under
// kAttentionPieceCells unless the token has fewer cells), so that the threads can share one
// token's cells — each reading whole rows of the cache (every kv head of a cell: one run) rather
// than every cell's share of the heads — and then the pieces are combined. How a token's cells are
// cut depends on their count alone, never on the threads or the rest of the step, so a token's
// result stays the same bits alone or in any batch.
inline constexpr int64_t kAttentionPieces = 4;
inline constexpr int64_t kAttentionPieceCells = 64;
inline int64_t attention_pieces(int64_t count) {
    const int64_t n = count / kAttentionPieceCells;
    return n < 1 ? 1 : (n > kAttentionPieces ? kAttentionPieces : n);
}
// Piece c of `pieces` over `count` cells: [begin, end).
inline int64_t attention_piece_begin(int64_t count, int64_t pieces, int64_t c) {
    return count * c / pieces;
}

// The op's two passes, callable without ggml (bench/paged_attention_bench): thread ith of nth
// attends its share of the pieces of n tokens (q [n][heads][hd]; visible [n][2]: token i attends
// cells read[visible[2i] .. + visible[2i+1])) into `pieces` [n][kAttentionPieces][heads * (hd + 2)]
// (each piece's undivided sums [heads][hd], then {max, sum} per head); then, after every thread's
// pieces are written, its share of combining them into out [n][heads][hd].
void attend_pieces(const PagedAttentionShape& s, const float* q, const int32_t* visible, int64_t n, float* pieces,
                   int ith, int nth);
void combine_pieces(int64_t heads, int64_t hd, const float* pieces, const int32_t* visible, int64_t n, float* out,
                    int ith, int nth);
inline int64_t attention_piece_floats(int64_t heads, int64_t hd) {
    return kAttentionPieces * heads * (hd + 2);
}

// Cells ahead of the one being read whose K or V head is asked for: a head is a short piece of
// each cell's row (512 of 4,096 bytes for Qwen3-0.6B), so consecutive cells are a page apart and
// the hardware prefetcher does not follow.
inline constexpr int64_t kPrefetchCells = 4;

}  // namespace parlance
