// core/gelu's avx512 kernel: erf from SLEEF, 16 lanes at a time. Compiled with the avx512 flags
// (CMakeLists.txt), and called only on a CPU that has them.
#if defined(PARLANCE_WITH_SLEEF)
#include <immintrin.h>
#include <sleef.h>

#include <algorithm>

#include "core/gelu_simd.h"

namespace parlance {
namespace {

inline __m512 gelu16(__m512 x) {
    const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
    const __m512 e = Sleef_erff16_u10avx512f(_mm512_mul_ps(x, _mm512_set1_ps(kGeluSqrtHalf)));
    return _mm512_mul_ps(_mm512_mul_ps(half, x),
                         _mm512_add_ps(one, e));  // 0.5 * x * (1 + erf(x / sqrt 2)), as ggml orders it
}

}  // namespace

void gelu_erf_avx512(const float* in, float* out, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, gelu16(_mm512_loadu_ps(in + i)));
    if (i < n) {  // the tail through the same lanes, padded with zeros
        alignas(64) float buf[16] = {};
        std::copy(in + i, in + n, buf);
        _mm512_storeu_ps(buf, gelu16(_mm512_loadu_ps(buf)));
        std::copy(buf, buf + (n - i), out + i);
    }
}

}  // namespace parlance
#endif
