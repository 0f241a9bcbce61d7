// Attention over the paged KV cache, computed in place on the CPU (vLLM's paged-attention idea,
// as two ggml custom ops): each (token, head) reads its own sequence's cells straight from the
// cache through the step's read list, scores them, softmaxes and sums V, with no gather, no
// transposed V copy and no mask over the whole batch's cells.
//
// Two nodes: a token's cells are attended in up to four pieces of consecutive cells, which the
// threads share with the kv heads (each thread reading whole rows of the cache), and then each
// head's pieces are combined (their maxima, sums and undivided weighted sums: the softmax of the
// whole row). How a token's cells are cut depends on their count alone (cpu_attention_kernel.h),
// and every piece is computed in a fixed order, so every output depends only on that token's query
// and its own cells: a sequence's results are identical whatever else is in the step, however its
// prompt was chunked and on any number of threads. graph_ops' paged_attention uses it whenever the
// cache lives in host memory; the GPU backends keep the gather-and-mask graph.
#pragma once

#include <ggml.h>

namespace parlance {

// q F32 [hd, heads, n]; k_cells, v_cells the layer's cache [kv_dim, n_cells] (F32 or F16, after
// this step's writes); read I32 [n_kv]; visible I32 [2, n]: token i attends cells
// read[visible[2i] .. visible[2i] + visible[2i+1]). Query head h uses kv head h / (heads /
// kv_heads).
// -> F32 [hd * heads, n].
ggml_tensor* cpu_paged_attention(ggml_context* ctx, ggml_tensor* q, ggml_tensor* k_cells, ggml_tensor* v_cells,
                                 ggml_tensor* read, ggml_tensor* visible, float scale);

}  // namespace parlance
