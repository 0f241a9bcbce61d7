// The exact GELU on the CPU (see gelu.h).
#include "core/gelu.h"

#include <algorithm>
#include <cmath>

#include "core/backend.h"
#include "core/gelu_simd.h"

namespace parlance {
namespace {

enum class Kernel { Scalar, Avx2, Avx512 };

Kernel pick() {
#if defined(PARLANCE_WITH_SLEEF)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return Kernel::Avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Kernel::Avx2;
#endif
    return Kernel::Scalar;
}

const Kernel kKernel = pick();

void gelu_task(ggml_tensor* dst, const ggml_tensor* a, int ith, int nth, void*) {
    const int64_t width = a->ne[0], rows = ggml_nrows(a);
    const int64_t per = (rows + nth - 1) / nth;
    const int64_t lo = std::min<int64_t>(rows, per * ith), hi = std::min<int64_t>(rows, lo + per);
    for (int64_t r = lo; r < hi; ++r)
        gelu_erf_values(static_cast<const float*>(a->data) + r * width, static_cast<float*>(dst->data) + r * width,
                        width);
}

}  // namespace

void gelu_erf_values(const float* in, float* out, int64_t n) {
    switch (kKernel) {
#if defined(PARLANCE_WITH_SLEEF)
        case Kernel::Avx512:
            gelu_erf_avx512(in, out, n);
            return;
        case Kernel::Avx2:
            gelu_erf_avx2(in, out, n);
            return;
#endif
        default:
            for (int64_t i = 0; i < n; ++i) out[i] = 0.5f * in[i] * (1.0f + std::erf(in[i] * kGeluSqrtHalf));
    }
}

const char* gelu_erf_kernel() {
    switch (kKernel) {
        case Kernel::Avx512:
            return "avx512";
        case Kernel::Avx2:
            return "avx2";
        default:
            return "scalar";
    }
}

ggml_tensor* gelu_erf(ggml_context* ctx, ggml_tensor* x, const ggml_tensor* weights) {
    if (kKernel == Kernel::Scalar || x->type != GGML_TYPE_F32 || !ggml_is_contiguous(x) || !in_cpu_memory(weights))
        return ggml_gelu_erf(ctx, x);
    return ggml_map_custom1(ctx, x, gelu_task, GGML_N_TASKS_MAX, nullptr);
}

}  // namespace parlance
