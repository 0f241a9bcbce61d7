// core/gelu's avx2 kernel: erf from SLEEF, 8 lanes at a time. Compiled with the avx2 flags
// (CMakeLists.txt), and called only on a CPU that has them.
#if defined(PARLANCE_WITH_SLEEF)
#include <immintrin.h>
#include <sleef.h>

#include <algorithm>

#include "core/gelu_simd.h"

namespace parlance {
namespace {

inline __m256 gelu8(__m256 x) {
    const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
    const __m256 e = Sleef_erff8_u10avx2(_mm256_mul_ps(x, _mm256_set1_ps(kGeluSqrtHalf)));
    return _mm256_mul_ps(_mm256_mul_ps(half, x),
                         _mm256_add_ps(one, e));  // 0.5 * x * (1 + erf(x / sqrt 2)), as ggml orders it
}

}  // namespace

void gelu_erf_avx2(const float* in, float* out, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, gelu8(_mm256_loadu_ps(in + i)));
    if (i < n) {  // the tail through the same lanes, padded with zeros
        alignas(64) float buf[8] = {};
        std::copy(in + i, in + n, buf);
        _mm256_storeu_ps(buf, gelu8(_mm256_loadu_ps(buf)));
        std::copy(buf, buf + (n - i), out + i);
    }
}

}  // namespace parlance
#endif
