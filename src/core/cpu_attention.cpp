// The in-place paged attention op for the CPU (see cpu_attention.h).
#include "core/cpu_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace parlance {
namespace {

constexpr int kLanes = 16;

// Dot product in 16 independent lanes summed by a fixed tree: the same order for every call, and
// a loop shape the compiler vectorises without reassociating anything.
inline float dot(const float* a, const float* b, int64_t n) {
    float acc[kLanes] = {};
    int64_t k = 0;
    for (; k + kLanes <= n; k += kLanes)
        for (int l = 0; l < kLanes; ++l) acc[l] += a[k + l] * b[k + l];
    for (; k < n; ++k) acc[k % kLanes] += a[k] * b[k];
    for (int w = kLanes / 2; w > 0; w /= 2)
        for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
    return acc[0];
}

inline void axpy(float* y, float a, const float* x, int64_t n) {
    for (int64_t k = 0; k < n; ++k) y[k] += a * x[k];
}

struct Shape {
    int64_t hd, heads, group;  // group = heads / kv_heads
    const char* k;
    const char* v;
    size_t k_row, v_row;  // bytes per cell
    ggml_type k_type, v_type;
    const int32_t* read;
    float scale;
};

// Asks for one cell's K or V head a few cells ahead: a head is a short piece of each cell's row
// (512 of 4,096 bytes for Qwen3-0.6B), so consecutive cells are a page apart and the hardware
// prefetcher does not follow; without this the loops wait on memory (perf: the two FMAs that read
// K and V took 56 % of the attention's cycles at a 450-cell context).
inline void prefetch_head(const char* base, size_t row_bytes, ggml_type type, int64_t cell, int64_t kv_head,
                          int64_t hd) {
    const size_t elem = type == GGML_TYPE_F32 ? 4 : 2;
    const char* p = base + static_cast<size_t>(cell) * row_bytes + static_cast<size_t>(kv_head * hd) * elem;
    for (size_t b = 0; b < static_cast<size_t>(hd) * elem; b += 64) __builtin_prefetch(p + b);
}
constexpr int64_t kPrefetchCells = 4;

// One cell's K or V head as f32: in place for f32 caches, converted into buf for f16.
inline const float* head_row(const char* base, size_t row_bytes, ggml_type type, int64_t cell, int64_t kv_head,
                             int64_t hd, float* buf) {
    const char* row = base + static_cast<size_t>(cell) * row_bytes;
    if (type == GGML_TYPE_F32) return reinterpret_cast<const float*>(row) + kv_head * hd;
    ggml_fp16_to_fp32_row(reinterpret_cast<const ggml_fp16_t*>(row) + kv_head * hd, buf, hd);
    return buf;
}

// Attention of the query heads of one token that share kv head `kvh` (s.group of them, GQA) over
// cells read[first .. first + count): each cell's K and V rows are read once for the whole group.
// Every head's arithmetic is the same sequence as when it is computed alone (one dot per cell in
// cell order, the softmax, one axpy per cell), so grouping changes no result.
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void attend_group(
    const Shape& s, const float* q, int64_t kvh, int64_t first, int64_t count, float* out, std::vector<float>& scores,
    std::vector<float>& buf) {
    const int64_t G = s.group, hd = s.hd;
    scores.resize(static_cast<size_t>(count * G));
    buf.resize(static_cast<size_t>(hd));
    for (int64_t j = 0; j < count; ++j) {
        if (j + kPrefetchCells < count)
            prefetch_head(s.k, s.k_row, s.k_type, s.read[first + j + kPrefetchCells], kvh, hd);
        const float* kr = head_row(s.k, s.k_row, s.k_type, s.read[first + j], kvh, hd, buf.data());
        for (int64_t g = 0; g < G; ++g) scores[g * count + j] = dot(q + g * hd, kr, hd) * s.scale;
    }
    thread_local std::vector<float> inv;
    inv.resize(static_cast<size_t>(G));
    for (int64_t g = 0; g < G; ++g) {
        float* sc = scores.data() + g * count;
        float m = -INFINITY;
        for (int64_t j = 0; j < count; ++j) m = std::max(m, sc[j]);
        float sum = 0.0f;
        for (int64_t j = 0; j < count; ++j) {
            sc[j] = std::exp(sc[j] - m);
            sum += sc[j];
        }
        inv[g] = sum > 0.0f ? 1.0f / sum : 0.0f;
    }
    std::fill(out, out + G * hd, 0.0f);
    for (int64_t j = 0; j < count; ++j) {
        if (j + kPrefetchCells < count)
            prefetch_head(s.v, s.v_row, s.v_type, s.read[first + j + kPrefetchCells], kvh, hd);
        const float* vr = head_row(s.v, s.v_row, s.v_type, s.read[first + j], kvh, hd, buf.data());
        for (int64_t g = 0; g < G; ++g) axpy(out + g * hd, scores[g * count + j], vr, hd);
    }
    for (int64_t g = 0; g < G; ++g)
        for (int64_t d = 0; d < hd; ++d) out[g * hd + d] *= inv[g];
}

void attention_task(ggml_tensor* dst, int ith, int nth, void* userdata) {
    const ggml_tensor* q = dst->src[0];
    const ggml_tensor* kc = dst->src[1];
    const ggml_tensor* vc = dst->src[2];
    const ggml_tensor* read = dst->src[3];
    const ggml_tensor* visible = dst->src[4];
    Shape s;
    s.hd = q->ne[0];
    s.heads = q->ne[1];
    const int64_t kv_heads = kc->ne[0] / s.hd;
    s.group = s.heads / kv_heads;
    s.k = static_cast<const char*>(kc->data);
    s.v = static_cast<const char*>(vc->data);
    s.k_row = kc->nb[1];
    s.v_row = vc->nb[1];
    s.k_type = kc->type;
    s.v_type = vc->type;
    s.read = static_cast<const int32_t*>(read->data);
    std::memcpy(&s.scale, &userdata, sizeof(float));
    const auto* vis = static_cast<const int32_t*>(visible->data);
    // Work items: (token, kv head), each the group of query heads that read that kv head.
    const int64_t n_items = q->ne[2] * kv_heads;
    thread_local std::vector<float> scores, buf;
    for (int64_t item = ith; item < n_items; item += nth) {
        const int64_t i = item / kv_heads, kvh = item % kv_heads;
        const int64_t head0 = i * s.heads + kvh * s.group;  // query heads are grouped by kv head
        const float* qi = static_cast<const float*>(q->data) + head0 * s.hd;
        float* out = static_cast<float*>(dst->data) + head0 * s.hd;
        attend_group(s, qi, kvh, vis[2 * i], vis[2 * i + 1], out, scores, buf);
    }
}

}  // namespace

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
