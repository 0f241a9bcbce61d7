// The exact GELU, x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)), as Whisper's and Qwen3-ASR's encoders
// compute it. ggml's CPU kernel calls libm's scalar erff for every value (6 % of a Whisper
// transcription's cycles on 2 cores); on the CPU this one evaluates erf eight or sixteen lanes at a
// time with SLEEF's vectorised erff (max error 1 ulp, Debian's libsleef), elsewhere it is
// ggml_gelu_erf. Each value depends on itself alone (a row's tail goes through the same vector
// code, padded), so results do not depend on the batch or on how rows are split among threads.
#pragma once

#include <cstdint>

#include <ggml.h>

namespace parlance {

// GELU of `x` (f32). `weights`: any weight of the graph; the SIMD kernel is used when it lives in
// CPU memory (the graph runs on the CPU) and SLEEF was found at build time.
ggml_tensor* gelu_erf(ggml_context* ctx, ggml_tensor* x, const ggml_tensor* weights);

// The kernel itself, on n contiguous values (out may equal in). Exposed for tests.
void gelu_erf_values(const float* in, float* out, int64_t n);
// Which kernel gelu_erf_values runs: "avx512", "avx2" or "scalar".
const char* gelu_erf_kernel();

}  // namespace parlance
