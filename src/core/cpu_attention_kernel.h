// core/cpu_attention's per-group work: the portable loops (cpu_attention.cpp) and the AVX2 kernel
// (cpu_attention_avx2.cpp, compiled for its instruction set in its own file), which computes the
// same arithmetic in the same order — the same bits — for several kv heads at once, reading each
// cell's piece of them in one run.
#pragma once

#include <cstddef>
#include <cstdint>

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

// Attention of the s.group query heads of one token that share kv head `kvh` (GQA) over cells
// read[first .. first + count): q [group][hd] -> out [group][hd]; scores holds group x count
// floats. Each cell's K and V rows are read once for the whole group; every head's arithmetic is
// the sequence it has alone: a dot per cell in cell order (16 lanes, then a fixed tree) times the
// scale, the softmax (softmax_rows), one multiply-add per cell and component in cell order, then
// the 1/sum.
void attend_group_portable(const PagedAttentionShape& s, const float* q, int64_t kvh, int64_t first, int64_t count,
                           float* out, float* scores);

// The same bits for the query heads of kv heads [kvh0, kvh1) of one token at once (q and out
// [heads][hd] for the token; scores (kvh1 - kvh0) x group x count floats), hd a multiple of 32 and
// 1 to 4 query heads per kv head, f16 or f32 K and V, on a CPU with AVX2, FMA and F16C.
void attend_heads_avx2(const PagedAttentionShape& s, const float* q, int64_t kvh0, int64_t kvh1, int64_t first,
                       int64_t count, float* out, float* scores);
inline bool avx2_kernel_takes(const PagedAttentionShape& s) {
    return s.hd % 32 == 0 && s.group >= 1 && s.group <= 4;
}

// Each of `rows` rows of `count` scores becomes exp(score - max) in place; inv[r] = 1 / the row's
// sum (0 for an empty row). One definition for both paths: the exp and the sum in cell order.
void softmax_rows(float* scores, int64_t rows, int64_t count, float* inv);

// Cells ahead of the one being read whose K or V head is asked for: a head is a short piece of
// each cell's row (512 of 4,096 bytes for Qwen3-0.6B), so consecutive cells are a page apart and
// the hardware prefetcher does not follow.
inline constexpr int64_t kPrefetchCells = 4;

}  // namespace parlance
