// Full (unmasked) attention of every query over every key, computed on the CPU as one ggml custom
// op: an audio encoder's self-attention (Whisper's over its 1500 positions). A work unit is 24
// queries of one head: their scores against all keys come from register tiles of 6 queries x 16
// keys over the head's keys packed transposed once (no horizontal sums), an exact softmax over
// each whole row (max, exp, sum; no running rescale), and the rows times V from tiles of 6 queries
// x 16 components over the head's values packed once. Packing makes every read sequential; the
// [T, T] scores of a head are never written whole (a unit's 24 rows stay in L2).
//
// Every output row depends only on its own query and the keys and values of its own head and
// batch entry, in a fixed order: the result is the same bits whatever is batched beside it and
// however the threads split the work.
#pragma once

#include <ggml.h>

#include <cstdint>
#include <vector>

#include "core/dense_attention_kernel.h"

namespace parlance {

// Whether the kernel runs on this machine (x86 with AVX2, FMA and F16C — cpu_features.h — built
// with SLEEF for exp); otherwise callers keep ggml's fused attention.
bool cpu_dense_attention_available();

// q [hd, H, Tq, B], k and v [hd, H, Tk, B], F32 and contiguous (a linear layer's output reshaped:
// no permute). hd a multiple of 8. -> F32 [hd, H, Tq, B]: softmax(scale * q k^T) v per head.
ggml_tensor* cpu_dense_attention(ggml_context* ctx, ggml_tensor* q, ggml_tensor* k, ggml_tensor* v, float scale);

// Attention over keys and values that many steps read — a decoder's cross-attention over its
// encoded audio — with the same tiles: the window's K and V are packed as f16 once, when the
// encoder writes them, so a step reads them in order and packs nothing. A step's queries come in
// runs, each over its own window (a request's beams share one); one op computes every run of a
// layer. Each output row depends only on its own query and its window, in a fixed order.
// It runs where cpu_dense_attention does (cpu_dense_attention_available: the same instructions).

// f16 tensors that hold one window's packed keys or values: tk keys of `heads` heads of hd
// components (hd a multiple of 16). Keys ne [16, hd, tiles, heads], values ne [16, tk, hd / 16, heads].
ggml_tensor* new_packed_keys(ggml_context* ctx, int64_t hd, int64_t heads, int64_t tk);
ggml_tensor* new_packed_values(ggml_context* ctx, int64_t hd, int64_t heads, int64_t tk);

// Graph nodes that write k or v (F32 [hd * heads, tk], contiguous) into such a tensor.
ggml_tensor* pack_keys_f16(ggml_context* ctx, ggml_tensor* k, ggml_tensor* packed);
ggml_tensor* pack_values_f16(ggml_context* ctx, ggml_tensor* v, ggml_tensor* packed);

// What one cpu_packed_attention op reads besides its queries. The op keeps a pointer to it: it
// must live until the graph has been computed.
struct PackedAttentionArgs {
    float scale = 1.0f;
    int64_t hd = 0, heads = 0, tk = 0;  // from the runs' tensors
    std::vector<PackedAttentionRun> runs;
    // Empty, or one entry per head: where that head's softmaxed weights go ([query][tk]; for an
    // op of one run — the alignment pass reads them).
    std::vector<float*> probabilities;
    // Queries [row, row + n) attend to the window packed in k and v (tensors made by
    // new_packed_keys/values, in CPU memory, written before the op runs).
    void add_run(int64_t row, int64_t n, const ggml_tensor* k, const ggml_tensor* v);
};

// q F32 [hd * heads, tokens], contiguous; every token row in exactly one run. -> F32 [hd * heads,
// tokens]: per run and head, softmax(scale * q k^T) v.
ggml_tensor* cpu_packed_attention(ggml_context* ctx, ggml_tensor* q, const PackedAttentionArgs& args);

}  // namespace parlance
