// core/dense_attention's vector kernel (compiled for its instruction set in its own file) and the
// job it is given.
#pragma once

#include <cstdint>

namespace parlance {

// Queries a work unit takes at once: every key and value row a unit reads from L2 serves them all.
inline constexpr int64_t kDenseQueryBlock = 24;

struct DenseAttentionJob {
    const float* q;  // [hd, heads, tq, batch]
    const float* k;  // [hd, heads, tk, batch]
    const float* v;  // [hd, heads, tk, batch]
    float* o;        // [hd, heads, tq, batch]
    int64_t hd, heads, tq, tk, batch;
    float scale;
    // Work units: (batch entry, head, block of kDenseQueryBlock queries), in that nesting.
    int64_t units() const { return batch * heads * ((tq + kDenseQueryBlock - 1) / kDenseQueryBlock); }
};

// Units [begin, end) of the job (AVX2 + FMA, exp from SLEEF).
void dense_attention_avx2(const DenseAttentionJob& job, int64_t begin, int64_t end);

// Units [begin, end) of the job with the kernel this build and CPU have (cpu_dense_attention_available();
// nothing otherwise): what each thread of the op runs.
void dense_attention_units(const DenseAttentionJob& job, int64_t begin, int64_t end);

}  // namespace parlance
