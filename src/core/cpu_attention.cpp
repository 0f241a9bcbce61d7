// The in-place paged attention op for the CPU (see cpu_attention.h).
#include "core/cpu_attention.h"

#include "core/cpu_attention_kernel.h"
#include "core/cpu_features.h"

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
    const PagedAttentionShape& s, const float* q, int64_t kvh, int64_t first, int64_t count, float* out,
    float* scores) {
    const int64_t G = s.group, hd = s.hd;
    thread_local std::vector<float> buf, inv;
    buf.resize(static_cast<size_t>(hd));
    inv.resize(static_cast<size_t>(G));
    for (int64_t j = 0; j < count; ++j) {
        if (j + kPrefetchCells < count)
            prefetch_head(s.k, s.k_row, s.k_f16, s.read[first + j + kPrefetchCells], kvh, hd);
        const float* kr = head_row(s.k, s.k_row, s.k_f16, s.read[first + j], kvh, hd, buf.data());
        for (int64_t g = 0; g < G; ++g) scores[g * count + j] = dot(q + g * hd, kr, hd) * s.scale;
    }
    softmax_rows(scores, G, count, inv.data());
    std::fill(out, out + G * hd, 0.0f);
    for (int64_t j = 0; j < count; ++j) {
        if (j + kPrefetchCells < count)
            prefetch_head(s.v, s.v_row, s.v_f16, s.read[first + j + kPrefetchCells], kvh, hd);
        const float* vr = head_row(s.v, s.v_row, s.v_f16, s.read[first + j], kvh, hd, buf.data());
        for (int64_t g = 0; g < G; ++g) axpy(out + g * hd, scores[g * count + j], vr, hd);
    }
    for (int64_t g = 0; g < G; ++g)
        for (int64_t d = 0; d < hd; ++d) out[g * hd + d] *= inv[g];
}

// Query heads of kv heads [kvh0, kvh1) of one token (q and out: the token's heads): the AVX2
// kernel where it runs (the same bits), else the loops one kv head at a time.
void attend_heads(const PagedAttentionShape& s, const float* q, int64_t kvh0, int64_t kvh1, int64_t first,
                  int64_t count, float* out) {
    thread_local std::vector<float> scores;
    const int64_t per_kv = s.group * s.hd;
#ifdef PARLANCE_PAGED_ATTENTION_AVX2
    if (avx2_kernel_takes(s) && cpu_has_avx2_kernels()) {
        scores.resize(static_cast<size_t>((kvh1 - kvh0) * s.group * count));
        return attend_heads_avx2(s, q, kvh0, kvh1, first, count, out, scores.data());
    }
#endif
    scores.resize(static_cast<size_t>(s.group * count));
    for (int64_t kvh = kvh0; kvh < kvh1; ++kvh)
        attend_group_loops(s, q + kvh * per_kv, kvh, first, count, out + kvh * per_kv, scores.data());
}

void attention_task(ggml_tensor* dst, int ith, int nth, void* userdata) {
    const ggml_tensor* q = dst->src[0];
    const ggml_tensor* kc = dst->src[1];
    const ggml_tensor* vc = dst->src[2];
    const ggml_tensor* read = dst->src[3];
    const ggml_tensor* visible = dst->src[4];
    PagedAttentionShape s;
    s.hd = q->ne[0];
    s.heads = q->ne[1];
    const int64_t kv_heads = kc->ne[0] / s.hd;
    s.group = s.heads / kv_heads;
    s.k = static_cast<const char*>(kc->data);
    s.v = static_cast<const char*>(vc->data);
    s.k_row = kc->nb[1];
    s.v_row = vc->nb[1];
    s.k_f16 = kc->type == GGML_TYPE_F16;
    s.v_f16 = vc->type == GGML_TYPE_F16;
    s.read = static_cast<const int32_t*>(read->data);
    std::memcpy(&s.scale, &userdata, sizeof(float));
    const auto* vis = static_cast<const int32_t*>(visible->data);
    // Work items: (token, kv head), each the group of query heads that read that kv head; each
    // thread a contiguous range of them, taken a token's kv heads at once (a decode on two threads:
    // kv heads 0-3 and 4-7, each cell's row read as two contiguous halves).
    const int64_t n_items = q->ne[2] * kv_heads;
    const int64_t begin = n_items * ith / nth, end = n_items * (ith + 1) / nth;
    for (int64_t item = begin; item < end;) {
        const int64_t i = item / kv_heads, kvh0 = item % kv_heads;
        const int64_t kvh1 = std::min(kv_heads, kvh0 + (end - item));
        const float* qi = static_cast<const float*>(q->data) + i * s.heads * s.hd;
        float* out = static_cast<float*>(dst->data) + i * s.heads * s.hd;
        attend_heads(s, qi, kvh0, kvh1, vis[2 * i], vis[2 * i + 1], out);
        item += kvh1 - kvh0;
    }
}

}  // namespace

void softmax_rows(float* scores, int64_t rows, int64_t count, float* inv) {
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
        inv[g] = lane[0] > 0.0f ? 1.0f / lane[0] : 0.0f;
    }
}

void attend_group_portable(const PagedAttentionShape& s, const float* q, int64_t kvh, int64_t first, int64_t count,
                           float* out, float* scores) {
    attend_group_loops(s, q, kvh, first, count, out, scores);
}

ggml_tensor* cpu_paged_attention(ggml_context* ctx, ggml_tensor* q, ggml_tensor* k_cells, ggml_tensor* v_cells,
                                 ggml_tensor* read, ggml_tensor* visible, float scale) {
    if (!ggml_is_contiguous(q)) q = ggml_cont(ctx, q);
    ggml_tensor* args[5] = {q, k_cells, v_cells, read, visible};
    // The scale travels in the userdata pointer's bits: the op keeps no other parameter storage.
    void* userdata = nullptr;
    std::memcpy(&userdata, &scale, sizeof(float));
    return ggml_custom_4d(ctx, GGML_TYPE_F32, q->ne[0] * q->ne[1], q->ne[2], 1, 1, args, 5, attention_task,
                          GGML_N_TASKS_MAX, userdata);
}

}  // namespace parlance
