// The in-place paged attention op for the CPU (see cpu_attention.h).
#include "core/cpu_attention.h"

#include "core/cpu_attention_kernel.h"
#include "core/cpu_features.h"
#include "core/op_trace.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace parlance {
namespace {

constexpr int kLanes = 16;

// Dot product in 16 independent lanes summed by a fixed tree: the same order for every call, and
// a loop shape the compiler vectorises without reassociating anything. Each step a fused
// multiply-add, written out (std::fma) rather than left to the compiler's contraction, which GCC
// and clang decide differently: so these loops are the AVX2 kernel's bits under either.
inline float dot(const float* a, const float* b, int64_t n) {
    float acc[kLanes] = {};
    int64_t k = 0;
    for (; k + kLanes <= n; k += kLanes)
        for (int l = 0; l < kLanes; ++l) acc[l] = std::fma(a[k + l], b[k + l], acc[l]);
    for (; k < n; ++k) acc[k % kLanes] = std::fma(a[k], b[k], acc[k % kLanes]);
    for (int w = kLanes / 2; w > 0; w /= 2)
        for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
    return acc[0];
}

inline void axpy(float* y, float a, const float* x, int64_t n) {
    for (int64_t k = 0; k < n; ++k) y[k] = std::fma(a, x[k], y[k]);
}

// Asks for one cell's K or V head kPrefetchCells ahead (without this the loops wait on memory —
// perf: the two FMAs that read K and V took 56 % of the attention's cycles at a 450-cell context).
inline void prefetch_head(const char* base, size_t row_bytes, bool f16, int64_t cell, int64_t kv_head, int64_t hd) {
    const size_t elem = f16 ? 2 : 4;
    const char* p = base + static_cast<size_t>(cell) * row_bytes + static_cast<size_t>(kv_head * hd) * elem;
    for (size_t b = 0; b < static_cast<size_t>(hd) * elem; b += 64) __builtin_prefetch(p + b);
}

// One cell's K or V head as f32: in place for f32 caches, converted into buf for f16.
inline const float* head_row(const char* base, size_t row_bytes, bool f16, int64_t cell, int64_t kv_head, int64_t hd,
                             float* buf) {
    const char* row = base + static_cast<size_t>(cell) * row_bytes;
    if (!f16) return reinterpret_cast<const float*>(row) + kv_head * hd;
    ggml_fp16_to_fp32_row(reinterpret_cast<const ggml_fp16_t*>(row) + kv_head * hd, buf, hd);
    return buf;
}

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void attend_group_loops(
    const PagedAttentionShape& s, const float* q, int64_t kvh, int64_t first, int64_t count, float* out, float* stats,
    float* scores) {
    const int64_t G = s.group, hd = s.hd;
    thread_local std::vector<float> buf, max, sum;
    buf.resize(static_cast<size_t>(hd));
    max.resize(static_cast<size_t>(G));
    sum.resize(static_cast<size_t>(G));
    for (int64_t j = 0; j < count; ++j) {
        if (j + kPrefetchCells < count)
            prefetch_head(s.k, s.k_row, s.k_f16, s.read[first + j + kPrefetchCells], kvh, hd);
        const float* kr = head_row(s.k, s.k_row, s.k_f16, s.read[first + j], kvh, hd, buf.data());
        for (int64_t g = 0; g < G; ++g) scores[g * count + j] = dot(q + g * hd, kr, hd) * s.scale;
    }
    softmax_rows(scores, G, count, max.data(), sum.data());
    std::fill(out, out + G * hd, 0.0f);
    for (int64_t j = 0; j < count; ++j) {
        if (j + kPrefetchCells < count)
            prefetch_head(s.v, s.v_row, s.v_f16, s.read[first + j + kPrefetchCells], kvh, hd);
        const float* vr = head_row(s.v, s.v_row, s.v_f16, s.read[first + j], kvh, hd, buf.data());
        for (int64_t g = 0; g < G; ++g) axpy(out + g * hd, scores[g * count + j], vr, hd);
    }
    for (int64_t g = 0; g < G; ++g) {
        stats[2 * g] = max[g];
        stats[2 * g + 1] = sum[g];
    }
}

// Query heads of kv heads [kvh0, kvh1) of one token over one piece of its cells (q, out and stats:
// the token's heads): the AVX2 kernel where it runs (the same bits), else the loops one kv head at
// a time.
void attend_heads(const PagedAttentionShape& s, const float* q, int64_t kvh0, int64_t kvh1, int64_t first,
                  int64_t count, float* out, float* stats) {
    thread_local std::vector<float> scores;
    const int64_t per_kv = s.group * s.hd;
#ifdef PARLANCE_PAGED_ATTENTION_AVX2
    if (avx2_kernel_takes(s) && cpu_has_avx2_kernels()) {
        scores.resize(static_cast<size_t>((kvh1 - kvh0) * s.group * count));
        return attend_heads_avx2(s, q, kvh0, kvh1, first, count, out, stats, scores.data());
    }
#endif
    scores.resize(static_cast<size_t>(s.group * count));
    for (int64_t kvh = kvh0; kvh < kvh1; ++kvh)
        attend_group_loops(s, q + kvh * per_kv, kvh, first, count, out + kvh * per_kv, stats + kvh * s.group * 2,
                           scores.data());
}

// A token's pieces in the pieces tensor: kAttentionPieces slots of heads x (hd + 2) floats each —
// the undivided sums [heads][hd], then {max, sum} per head.
template <class F>  // float, or const float to read them
struct PieceSlots {
    int64_t heads, hd;
    F* data;
    int64_t slot_floats() const { return heads * (hd + 2); }
    F* sums(int64_t token, int64_t piece) const { return data + (token * kAttentionPieces + piece) * slot_floats(); }
    F* stats(int64_t token, int64_t piece) const { return sums(token, piece) + heads * hd; }
};

// One head's pieces combined: with M the largest of their maxima, each piece weighs
// w = softmax_exp(max - M) (1 for the piece that holds M), sum = the w-weighted sums in piece
// order, out = the w-weighted undivided sums in piece order times 1 / sum. A token of one piece
// gets its undivided sums times 1 / its sum: the single pass's result.
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void combine_head(
    const PieceSlots<const float>& slots, int64_t token, int64_t head, int64_t pieces, float* out) {
    const int64_t hd = slots.hd;
    if (pieces == 1) {
        const float sum = slots.stats(token, 0)[2 * head + 1];
        const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
        const float* o = slots.sums(token, 0) + head * hd;
        for (int64_t d = 0; d < hd; ++d) out[d] = o[d] * inv;
        return;
    }
    float m = -INFINITY;
    for (int64_t c = 0; c < pieces; ++c) m = std::max(m, slots.stats(token, c)[2 * head]);
    float sum = 0.0f;
    std::fill(out, out + hd, 0.0f);
    for (int64_t c = 0; c < pieces; ++c) {
        const float* st = slots.stats(token, c) + 2 * head;
        const float w = st[0] == m ? 1.0f : softmax_exp(st[0] - m);
        sum = std::fma(w, st[1], sum);
        const float* o = slots.sums(token, c) + head * hd;
        for (int64_t d = 0; d < hd; ++d) out[d] = std::fma(w, o[d], out[d]);
    }
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    for (int64_t d = 0; d < hd; ++d) out[d] *= inv;
}

// ggml custom-op callbacks of the two ops (cpu_paged_attention).
void attention_pieces_task(ggml_tensor* dst, int ith, int nth, void* userdata) {
    const ggml_tensor* q = dst->src[0];
    const ggml_tensor* kc = dst->src[1];
    const ggml_tensor* vc = dst->src[2];
    PagedAttentionShape s;
    s.hd = q->ne[0];
    s.heads = q->ne[1];
    s.group = s.heads / (kc->ne[0] / s.hd);
    s.k = static_cast<const char*>(kc->data);
    s.v = static_cast<const char*>(vc->data);
    s.k_row = kc->nb[1];
    s.v_row = vc->nb[1];
    s.k_f16 = kc->type == GGML_TYPE_F16;
    s.v_f16 = vc->type == GGML_TYPE_F16;
    s.read = static_cast<const int32_t*>(dst->src[3]->data);
    std::memcpy(&s.scale, &userdata, sizeof(float));
    attend_pieces(s, static_cast<const float*>(q->data), static_cast<const int32_t*>(dst->src[4]->data), q->ne[2],
                  static_cast<float*>(dst->data), ith, nth);
}

void attention_combine_task(ggml_tensor* dst, int ith, int nth, void* /*userdata*/) {
    // pieces ne[0] = heads * (hd + 2) * kAttentionPieces, dst ne[0] = heads * hd.
    const ggml_tensor* pieces = dst->src[0];
    const int64_t heads = (pieces->ne[0] / kAttentionPieces - dst->ne[0]) / 2, hd = dst->ne[0] / heads;
    combine_pieces(heads, hd, static_cast<const float*>(pieces->data), static_cast<const int32_t*>(dst->src[1]->data),
                   dst->ne[1], static_cast<float*>(dst->data), ith, nth);
}

}  // namespace

void attend_pieces(const PagedAttentionShape& s, const float* q, const int32_t* visible, int64_t n, float* pieces,
                   int ith, int nth) {
    const int64_t kv_heads = s.heads / s.group;
    const PieceSlots<float> slots{s.heads, s.hd, pieces};
    // Work items: (token, piece, kv head), each the group of query heads that read that kv head
    // over that piece of the token's cells; each thread a contiguous range of them, taken a
    // piece's kv heads at once. A decode over 256 cells on two threads: one piece of 128 cells
    // each, every cell's row read whole (under 128 cells, one piece: kv heads 0-3 and 4-7; three
    // pieces: the middle one split by kv heads).
    int64_t n_items = 0;
    for (int64_t i = 0; i < n; ++i) n_items += attention_pieces(visible[2 * i + 1]) * kv_heads;
    const int64_t begin = n_items * ith / nth, end = n_items * (ith + 1) / nth;
    int64_t item = 0;  // the first item of token i
    for (int64_t i = 0; i < n && item < end; ++i) {
        const int64_t count = visible[2 * i + 1], n_pieces = attention_pieces(count);
        const int64_t token_items = n_pieces * kv_heads;
        for (int64_t at = std::max(begin, item); at < std::min(end, item + token_items);) {
            const int64_t c = (at - item) / kv_heads, kvh0 = (at - item) % kv_heads;
            const int64_t kvh1 = std::min(kv_heads, kvh0 + (end - at));
            const int64_t p0 = attention_piece_begin(count, n_pieces, c);
            const int64_t p1 = attention_piece_begin(count, n_pieces, c + 1);
            attend_heads(s, q + i * s.heads * s.hd, kvh0, kvh1, visible[2 * i] + p0, p1 - p0, slots.sums(i, c),
                         slots.stats(i, c));
            at += kvh1 - kvh0;
        }
        item += token_items;
    }
}

void combine_pieces(int64_t heads, int64_t hd, const float* pieces, const int32_t* visible, int64_t n, float* out,
                    int ith, int nth) {
    const PieceSlots<const float> slots{heads, hd, pieces};
    const int64_t n_items = n * heads;
    for (int64_t item = n_items * ith / nth, end = n_items * (ith + 1) / nth; item < end; ++item) {
        const int64_t i = item / heads, h = item % heads;
        combine_head(slots, i, h, attention_pieces(visible[2 * i + 1]), out + (i * heads + h) * hd);
    }
}

void softmax_rows(float* scores, int64_t rows, int64_t count, float* max, float* sum) {
    for (int64_t g = 0; g < rows; ++g) {
        float* sc = scores + g * count;
        float m = -INFINITY;
        for (int64_t j = 0; j < count; ++j) m = std::max(m, sc[j]);
        float lane[8] = {};
        for (int64_t j = 0; j < count; ++j) {
            sc[j] = softmax_exp(sc[j] - m);
            lane[j % 8] += sc[j];
        }
        for (int w = 4; w > 0; w /= 2)
            for (int l = 0; l < w; ++l) lane[l] += lane[l + w];
        max[g] = m;
        sum[g] = lane[0];
    }
}

void attend_group_portable(const PagedAttentionShape& s, const float* q, int64_t kvh, int64_t first, int64_t count,
                           float* out, float* stats, float* scores) {
    attend_group_loops(s, q, kvh, first, count, out, stats, scores);
}

ggml_tensor* cpu_paged_attention(ggml_context* ctx, ggml_tensor* q, ggml_tensor* k_cells, ggml_tensor* v_cells,
                                 ggml_tensor* read, ggml_tensor* visible, float scale) {
    if (!ggml_is_contiguous(q)) q = ggml_cont(ctx, q);
    ggml_tensor* args[5] = {q, k_cells, v_cells, read, visible};
    // The scale travels in the userdata pointer's bits: the op keeps no other parameter storage.
    void* userdata = nullptr;
    std::memcpy(&userdata, &scale, sizeof(float));
    const int64_t hd = q->ne[0], heads = q->ne[1], n = q->ne[2];
    ggml_tensor* pieces = ggml_custom_4d(ctx, GGML_TYPE_F32, attention_piece_floats(heads, hd), n, 1, 1, args, 5,
                                         attention_pieces_task, GGML_N_TASKS_MAX, userdata);
    // Slots for kAttentionPieces pieces a token; a token over few cells fills fewer (op_trace.h).
    ggml_format_name(pieces, "%sattention_pieces", kPartlyWrittenPrefix);
    ggml_tensor* combine_args[2] = {pieces, visible};
    return ggml_custom_4d(ctx, GGML_TYPE_F32, hd * heads, n, 1, 1, combine_args, 2, attention_combine_task,
                          GGML_N_TASKS_MAX, nullptr);
}

}  // namespace parlance
