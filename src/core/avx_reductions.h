// Horizontal reductions of one AVX vector, shared by the x86 kernels (core/weight_product,
// core/dense_attention_avx2). Their order is part of those kernels' bits: lane j + j+4, then
// + j+2, then + j+1. Compiled for AVX only, so both a target("avx2,...") function and a file built
// with -mavx2 can inline them.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

namespace parlance {

__attribute__((target("avx"))) inline float hsum8(__m256 v) {
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

__attribute__((target("avx"))) inline float hmax8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

}  // namespace parlance
#endif
