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

// Keys and values packed as f16 when they are written (dense_attention.h's pack_keys_f16 and
// pack_values_f16): per head, the keys in tiles of 16, each [hd][16] (component d of 16
// consecutive keys), tiles up to tp = tk rounded up to 16; the values in slices of 16 components,
// each [tk][16].
inline constexpr int64_t kPackedKeyTile = 16;
inline constexpr int64_t kPackedValueSlice = 16;

// Consecutive queries that attend to one packed window.
struct PackedAttentionRun {
    int64_t row, n;     // token rows [row, row + n) of q and o
    const uint16_t* k;  // [heads][tp / 16][hd][16] f16
    const uint16_t* v;  // [heads][hd / 16][tk][16] f16
};

struct PackedAttentionJob {
    const float* q;  // [hd, heads, tokens]
    float* o;        // [hd, heads, tokens]
    int64_t hd, heads, tk;
    float scale;
    const PackedAttentionRun* runs;
    int64_t n_runs;
    // Optional, per head (null: not wanted): the softmaxed weights of the runs' queries, [query of
    // its run][tk] (meant for a job of one run).
    float* const* probabilities = nullptr;
    // Work units: (run, head, block of kDenseQueryBlock queries), in that nesting.
    int64_t run_units(int64_t r) const { return heads * ((runs[r].n + kDenseQueryBlock - 1) / kDenseQueryBlock); }
    int64_t units() const {
        int64_t n = 0;
        for (int64_t r = 0; r < n_runs; ++r) n += run_units(r);
        return n;
    }
};

// Units [begin, end) of the job (AVX2 + FMA + F16C, exp from SLEEF).
void packed_attention_avx2(const PackedAttentionJob& job, int64_t begin, int64_t end);

// Units [begin, end) of the job with the kernel this build and CPU have (cpu_dense_attention_available();
// nothing otherwise): what each thread of the op runs.
void dense_attention_units(const DenseAttentionJob& job, int64_t begin, int64_t end);
void packed_attention_units(const PackedAttentionJob& job, int64_t begin, int64_t end);

}  // namespace parlance
