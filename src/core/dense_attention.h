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

namespace parlance {

// Whether the kernel runs on this machine (x86 with AVX2 and FMA, built with SLEEF for exp);
// otherwise callers keep ggml's fused attention.
bool cpu_dense_attention_available();

// q [hd, H, Tq, B], k and v [hd, H, Tk, B], F32 and contiguous (a linear layer's output reshaped:
// no permute). hd a multiple of 8. -> F32 [hd, H, Tq, B]: softmax(scale * q k^T) v per head.
ggml_tensor* cpu_dense_attention(ggml_context* ctx, ggml_tensor* q, ggml_tensor* k, ggml_tensor* v, float scale);

}  // namespace parlance
