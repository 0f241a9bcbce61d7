// Full attention on the CPU (see dense_attention.h).
#include "core/dense_attention.h"

#include <cstring>

#include "core/dense_attention_kernel.h"

namespace parlance {
namespace {

bool detect() {
#if defined(PARLANCE_WITH_SLEEF) && (defined(__x86_64__) || defined(__i386__))
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
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

}  // namespace

void dense_attention_units(const DenseAttentionJob& job, int64_t begin, int64_t end) {
#if defined(PARLANCE_WITH_SLEEF) && (defined(__x86_64__) || defined(__i386__))
    if (begin < end && cpu_dense_attention_available()) dense_attention_avx2(job, begin, end);
#else
    (void)job, (void)begin, (void)end;
#endif
}

bool cpu_dense_attention_available() {
    static const bool value = detect();
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

}  // namespace parlance
