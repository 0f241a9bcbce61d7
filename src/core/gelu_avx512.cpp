// core/gelu's avx512 kernel: erf from SLEEF, 16 lanes at a time. Compiled with the avx512 flags
// (CMakeLists.txt), and called only on a CPU that has them.
#if defined(PARLANCE_WITH_SLEEF)
#include <immintrin.h>
#include <sleef.h>

#include "core/gelu_lanes.h"
#include "core/gelu_simd.h"

namespace parlance {
namespace {

struct Lanes16 {
    static constexpr int64_t W = 16;
    static __m512 load(const float* p) { return _mm512_loadu_ps(p); }
    static void store(float* p, __m512 v) { _mm512_storeu_ps(p, v); }
    // 0.5 * x * (1 + erf(x / sqrt 2)), in ggml's order of operations.
    static __m512 gelu(__m512 x) {
        const __m512 e = Sleef_erff16_u10avx512f(_mm512_mul_ps(x, _mm512_set1_ps(kGeluSqrtHalf)));
        return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    }
};

}  // namespace

void gelu_erf_avx512(const float* in, float* out, int64_t n) {
    gelu_lanes<Lanes16>(in, out, n);
}

}  // namespace parlance
#endif
