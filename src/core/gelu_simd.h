// The vector kernels of core/gelu (each in its own file, compiled for its instruction set).
#pragma once

#include <cstdint>

namespace parlance {

inline constexpr float kGeluSqrtHalf = 0.70710678118654752440f;  // 1 / sqrt(2), as ggml's kernel uses

void gelu_erf_avx2(const float* in, float* out, int64_t n);    // AVX2 + FMA
void gelu_erf_avx512(const float* in, float* out, int64_t n);  // AVX-512F

}  // namespace parlance
