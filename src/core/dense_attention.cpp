// Full attention on the CPU (see dense_attention.h).
#include "core/dense_attention.h"

#include <cstring>

#include "core/cpu_features.h"
#include "core/dense_attention_kernel.h"

namespace parlance {
namespace {

// The kernels need SLEEF's exp as well as the instructions.
bool dense_kernels_usable() {
#if defined(PARLANCE_WITH_SLEEF) && (defined(__x86_64__) || defined(__i386__))
    return cpu_has_avx2_kernels();
#else
    return false;
#endif
}

void dense_attention_task(ggml_tensor* dst, int ith, int nth, void* userdata) {
    const ggml_tensor* q = dst->src[0];
    const ggml_tensor* k = dst->src[1];
    const ggml_tensor* v = dst->src[2];
    DenseAttentionJob job{};
    job.q = static_cast<const float*>(q->data);
    job.k = static_cast<const float*>(k->data);
    job.v = static_cast<const float*>(v->data);
    job.o = static_cast<float*>(dst->data);
    job.hd = q->ne[0];
    job.heads = q->ne[1];
    job.tq = q->ne[2];
    job.tk = k->ne[2];
    job.batch = q->ne[3];
    std::memcpy(&job.scale, &userdata, sizeof(float));
    // Contiguous shares: a thread packs a head's keys once for all of its blocks of that head.
    const int64_t units = job.units();
    dense_attention_units(job, units * ith / nth, units * (ith + 1) / nth);
}

void packed_attention_task(ggml_tensor* dst, int ith, int nth, void* userdata) {
    const auto& args = *static_cast<const PackedAttentionArgs*>(userdata);
    const ggml_tensor* q = dst->src[0];
    PackedAttentionJob job{};
    job.q = static_cast<const float*>(q->data);
    job.o = static_cast<float*>(dst->data);
    job.hd = args.hd;
    job.heads = args.heads;
    job.tk = args.tk;
    job.scale = args.scale;
    job.runs = args.runs.data();
    job.n_runs = static_cast<int64_t>(args.runs.size());
    job.probabilities = args.probabilities.empty() ? nullptr : args.probabilities.data();
    const int64_t units = job.units();
    packed_attention_units(job, units * ith / nth, units * (ith + 1) / nth);
}

}  // namespace

void dense_attention_units(const DenseAttentionJob& job, int64_t begin, int64_t end) {
#if defined(PARLANCE_WITH_SLEEF) && (defined(__x86_64__) || defined(__i386__))
    if (begin < end && cpu_dense_attention_available()) dense_attention_avx2(job, begin, end);
#else
    (void)job, (void)begin, (void)end;
#endif
}

void packed_attention_units(const PackedAttentionJob& job, int64_t begin, int64_t end) {
#if defined(PARLANCE_WITH_SLEEF) && (defined(__x86_64__) || defined(__i386__))
    if (begin < end && cpu_dense_attention_available()) packed_attention_avx2(job, begin, end);
#else
    (void)job, (void)begin, (void)end;
#endif
}

bool cpu_dense_attention_available() {
    static const bool value = dense_kernels_usable();
    return value;
}

ggml_tensor* cpu_dense_attention(ggml_context* ctx, ggml_tensor* q, ggml_tensor* k, ggml_tensor* v, float scale) {
    GGML_ASSERT(cpu_dense_attention_available());
    GGML_ASSERT(q->type == GGML_TYPE_F32 && k->type == GGML_TYPE_F32 && v->type == GGML_TYPE_F32);
    GGML_ASSERT(ggml_is_contiguous(q) && ggml_is_contiguous(k) && ggml_is_contiguous(v));
    GGML_ASSERT(q->ne[0] % 8 == 0 && ggml_are_same_shape(k, v) && k->ne[0] == q->ne[0] && k->ne[1] == q->ne[1] &&
                k->ne[3] == q->ne[3]);
    ggml_tensor* args[3] = {q, k, v};
    // The scale travels in the userdata pointer's bits: the op keeps no other parameter storage.
    void* userdata = nullptr;
    std::memcpy(&userdata, &scale, sizeof(float));
    return ggml_custom_4d(ctx, GGML_TYPE_F32, q->ne[0], q->ne[1], q->ne[2], q->ne[3], args, 3, dense_attention_task,
                          GGML_N_TASKS_MAX, userdata);
}

ggml_tensor* new_packed_keys(ggml_context* ctx, int64_t hd, int64_t heads, int64_t tk) {
    GGML_ASSERT(hd % kPackedValueSlice == 0);
    return ggml_new_tensor_4d(ctx, GGML_TYPE_F16, kPackedKeyTile, hd, (tk + kPackedKeyTile - 1) / kPackedKeyTile,
                              heads);
}

ggml_tensor* new_packed_values(ggml_context* ctx, int64_t hd, int64_t heads, int64_t tk) {
    GGML_ASSERT(hd % kPackedValueSlice == 0);
    return ggml_new_tensor_4d(ctx, GGML_TYPE_F16, kPackedValueSlice, tk, hd / kPackedValueSlice, heads);
}

ggml_tensor* pack_keys_f16(ggml_context* ctx, ggml_tensor* k, ggml_tensor* packed) {
    const int64_t lanes = packed->ne[0], hd = packed->ne[1], tiles = packed->ne[2], heads = packed->ne[3];
    GGML_ASSERT(k->type == GGML_TYPE_F32 && ggml_is_contiguous(k) && k->ne[0] == hd * heads);
    GGML_ASSERT(k->ne[1] <= tiles * lanes && k->ne[1] > (tiles - 1) * lanes);
    // Zero keys up to whole tiles, then [hd, heads, lane, tile] -> [lane, hd, tile, head].
    ggml_tensor* padded = ggml_pad(ctx, k, 0, static_cast<int>(tiles * lanes - k->ne[1]), 0, 0);
    ggml_tensor* split = ggml_reshape_4d(ctx, padded, hd, heads, lanes, tiles);
    return ggml_cpy(ctx, ggml_permute(ctx, split, 1, 3, 0, 2), packed);
}

ggml_tensor* pack_values_f16(ggml_context* ctx, ggml_tensor* v, ggml_tensor* packed) {
    const int64_t width = packed->ne[0], tk = packed->ne[1], slices = packed->ne[2], heads = packed->ne[3];
    GGML_ASSERT(v->type == GGML_TYPE_F32 && ggml_is_contiguous(v) && v->ne[0] == width * slices * heads &&
                v->ne[1] == tk);
    // [component, slice, head, key] -> [component, key, slice, head].
    ggml_tensor* split = ggml_reshape_4d(ctx, v, width, slices, heads, tk);
    return ggml_cpy(ctx, ggml_permute(ctx, split, 0, 2, 3, 1), packed);
}

void PackedAttentionArgs::add_run(int64_t row, int64_t n, const ggml_tensor* k, const ggml_tensor* v) {
    GGML_ASSERT(k->type == GGML_TYPE_F16 && v->type == GGML_TYPE_F16 && k->ne[0] == kPackedKeyTile &&
                v->ne[0] == kPackedValueSlice && k->ne[1] == v->ne[2] * kPackedValueSlice && k->ne[3] == v->ne[3]);
    GGML_ASSERT(runs.empty() || (tk == v->ne[1] && hd == k->ne[1] && heads == k->ne[3]));
    tk = v->ne[1];
    hd = k->ne[1];
    heads = k->ne[3];
    runs.push_back({row, n, static_cast<const uint16_t*>(k->data), static_cast<const uint16_t*>(v->data)});
}

ggml_tensor* cpu_packed_attention(ggml_context* ctx, ggml_tensor* q, const PackedAttentionArgs& args) {
    const int64_t hd = args.hd;
    GGML_ASSERT(cpu_dense_attention_available());
    GGML_ASSERT(q->type == GGML_TYPE_F32 && ggml_is_contiguous(q) && ggml_n_dims(q) <= 2);
    GGML_ASSERT(!args.runs.empty() && q->ne[0] == hd * args.heads);
    GGML_ASSERT(args.probabilities.empty() || static_cast<int64_t>(args.probabilities.size()) == args.heads);
    int64_t covered = 0;
    for (const PackedAttentionRun& r : args.runs) {
        GGML_ASSERT(r.k && r.v && r.row >= 0 && r.n > 0 && r.row + r.n <= q->ne[1]);
        covered += r.n;
    }
    GGML_ASSERT(covered == q->ne[1]);
    ggml_tensor* args_q[1] = {q};
    return ggml_custom_4d(ctx, GGML_TYPE_F32, q->ne[0], q->ne[1], 1, 1, args_q, 1, packed_attention_task,
                          GGML_N_TASKS_MAX, const_cast<PackedAttentionArgs*>(&args));
}

}  // namespace parlance
