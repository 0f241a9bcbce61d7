// core/gelu's avx2 kernel: erf from SLEEF, 8 lanes at a time. Compiled with the avx2 flags
// (CMakeLists.txt), and called only on a CPU that has them.
#if defined(PARLANCE_WITH_SLEEF)
#include <immintrin.h>
#include <sleef.h>

#include "core/gelu_lanes.h"
#include "core/gelu_simd.h"

namespace parlance {
namespace {

struct Lanes8 {
    static constexpr int64_t W = 8;
    static __m256 load(const float* p) { return _mm256_loadu_ps(p); }
    static void store(float* p, __m256 v) { _mm256_storeu_ps(p, v); }
    // 0.5 * x * (1 + erf(x / sqrt 2)), in ggml's order of operations.
    static __m256 gelu(__m256 x) {
        const __m256 e = Sleef_erff8_u10avx2(_mm256_mul_ps(x, _mm256_set1_ps(kGeluSqrtHalf)));
        return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
    }
};

}  // namespace

void gelu_erf_avx2(const float* in, float* out, int64_t n) {
    gelu_lanes<Lanes8>(in, out, n);
}

}  // namespace parlance
#endif
