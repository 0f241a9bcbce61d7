// Graph helpers every architecture builds from (STYLE: llama.cpp's build_norm/build_attn/
// build_ffn): norms, projections, rotary embeddings, MLPs, and attention over the paged KV cache
// for a whole StepBatch in one call per layer. Shapes are ggml ne, innermost first: activations
// are [d, n_tokens], one token per column.
#pragma once

#include <ggml.h>

#include <optional>
#include <span>

#include "core/kv_storage.h"
#include "core/step_batch.h"
#include "core/weight_product.h"

namespace parlance {

// LayerNorm over ne0: norm(x) * w + b.
ggml_tensor* layer_norm(ggml_context* ctx, ggml_tensor* x, ggml_tensor* w, ggml_tensor* b, float eps);
// RMSNorm over ne0: x / sqrt(mean(x^2) + eps) * w (w may be null). For [hd, heads, n] it
// normalises each head (Qwen3's QK-norm).
ggml_tensor* rms_norm(ggml_context* ctx, ggml_tensor* x, ggml_tensor* w, float eps);
// x·Wᵀ (+ b): w ne [in, out], x [in, n] -> [out, n], through weight_product (f32 accumulation;
// `products`: which, see weight_product.h).
ggml_tensor* linear(ggml_context* ctx, Products products, ggml_tensor* x, ggml_tensor* w, ggml_tensor* b = nullptr);
// 1-D convolution computed exactly in f32 (im2col, then one product): x ne [T, C_in, B], kernel
// ne [K, C_in, C_out] (PyTorch's [C_out, C_in, K]) -> ne [C_out, T_out * B], T_out =
// (T + 2 * padding - K) / stride + 1, zero padding on both sides. No bias.
ggml_tensor* conv1d(ggml_context* ctx, Products products, ggml_tensor* kernel, ggml_tensor* x, int stride, int padding);
// 2-D convolution computed in f32 (im2col, then one product with f32 accumulation): x ne [W, H,
// C_in, N], kernel ne [KW, KH, C_in, C_out] (PyTorch's [C_out, C_in, KH, KW]; f32 — with an f16
// kernel ggml's CPU product rounds the columns to f16) -> ne
// [W_out, H_out, C_out, N], the same stride and zero padding on both axes. No bias. Not
// ggml_conv_2d: its im2col columns are f16 for an f32 kernel, which rounds every input to f16 and
// makes ggml-cuda multiply (and accumulate) in f16 — 2e-4 off at the first convolution of the
// Qwen3-ASR encoder (docs/cuda.md, issue 19). A device's throughput step rounds the kernel and
// the columns to f16 and still accumulates in f32 (tensor cores), where the columns' length allows.
// Its product is Products::Fast (the encoders' convolutions keep BLAS: few inputs per output).
ggml_tensor* conv2d(ggml_context* ctx, ggml_tensor* kernel, ggml_tensor* x, int stride, int padding);
// down(silu(gate(x)) * up(x)) (Qwen, Llama).
ggml_tensor* swiglu_mlp(ggml_context* ctx, Products products, ggml_tensor* x, ggml_tensor* gate, ggml_tensor* up,
                        ggml_tensor* down);

struct RopeParams {
    float theta = 10000.0f;   // rope_theta
    float freq_scale = 1.0f;  // 1 / linear scaling factor
    int n_ctx_orig = 0;       // original context (YaRN); 0 = none
    bool neox = true;         // rotate halves (HF rotate_half), not interleaved pairs
};
// Rotary position embedding of x [hd, heads, n] at positions (I32 [n]).
ggml_tensor* rope(ggml_context* ctx, ggml_tensor* x, ggml_tensor* positions, const RopeParams& p);

// How a step's attention is built over a cache:
//  - Host: a host cache read in place by cpu_paged_attention (the CPU's default);
//  - Segmented: each sequence gathered and attended by itself, one product per query, so its
//    result does not depend on the batch (a device cache under --deterministic: batch invariance
//    on a GPU, weight products one column at a time too);
//  - Padded: the whole batch in a constant number of nodes — every sequence's cells gathered into
//    one padded block per sequence and one flash-attention call over all of them (a device
//    cache's default, the throughput layout: weight products then take all of a step's columns
//    at once; a GPU's kernels then follow the batch's width, so a sequence's logits may differ in
//    their last bits with what runs beside it).
// PARLANCE_ATTENTION_LAYOUT=gpu (Segmented) or =padded chooses for every cache, so the tests run
// a GPU's graphs on the CPU (ctest's GpuAttentionLayoutOnCpu.*, PaddedAttentionLayoutOnCpu.*).
enum class AttentionLayout { Host, Segmented, Padded };
AttentionLayout attention_layout(const ggml_tensor* cache_k);
// A device cache's layout follows RuntimeSettings::deterministic_gpu (the commands'
// --deterministic, set once at the CLI boundary before any model loads): Segmented when set, else
// Padded.
// Whether a device's weight products go one column at a time (the Segmented layout's products).
bool device_products_invariant();
// Whether an encoder whose weights include `w` attends with flash attention (its q, k and v
// rounded to f16, f32 accumulation: tensor cores) rather than two exact-f32 products and a softmax:
// a device's throughput mode, or PARLANCE_ATTENTION_LAYOUT=padded on the CPU (so CI builds
// Qwen3-ASR's graph; Whisper's CPU encoder has attention kernels of its own, so its call runs on
// devices only). The CPU's own encoders and --deterministic keep the f32 products.
bool encoder_flash_attention(const ggml_tensor* w);
// Self-attention within an encoder's fixed blocks (Whisper's windows, Qwen3-ASR's attention
// windows) in one ggml_flash_attn_ext at f32 precision: q, k, v [hd, heads, T, B] as the
// projections wrote them (each block's T positions), mask F16 [T, T, 1, B] (0 or -inf; null: none)
// -> [hd, heads, T, B] contiguous. (The exact-f32 form, two products and a softmax, stays with
// each encoder: the CPU's and a device's want their operands laid out differently.)
ggml_tensor* flash_block_attention(ggml_context* ctx, ggml_tensor* q, ggml_tensor* k, ggml_tensor* v, ggml_tensor* mask,
                                   float scale);

// The input tensors of a StepBatch in a graph; create() before building, upload() after the
// graph is allocated.
struct StepTensors {
    ggml_tensor* tokens = nullptr;             // I32 [n_tokens]
    ggml_tensor* positions = nullptr;          // I32 [n_tokens]
    ggml_tensor* write = nullptr;              // I64 [n_tokens]
    ggml_tensor* read = nullptr;               // I32 [n_kv]
    ggml_tensor* mask = nullptr;               // F32 [segment_mask_size()]: GPU caches (segment_masks())
    ggml_tensor* visible = nullptr;            // I32 [2, n_tokens]: host caches (cpu_paged_attention)
    ggml_tensor* outputs = nullptr;            // I32 [n_outputs]
    std::vector<StepBatch::Segment> segments;  // GPU caches: the graph attends per segment
    // The padded layout (StepBatch::Padded): cells read, q's rows per slot, each token's slot, the
    // f16 mask [max_read, max_tokens, 1, sequences]; and those dimensions.
    ggml_tensor* pad_read = nullptr;     // I32 [max_read * sequences]
    ggml_tensor* query_rows = nullptr;   // I32 [max_tokens * sequences]
    ggml_tensor* token_slots = nullptr;  // I32 [n_tokens]
    ggml_tensor* pad_mask = nullptr;     // F16 [max_read, max_tokens, 1, sequences]
    int sequences = 0, max_tokens = 0, max_read = 0;

    // The attention path follows where the cache lives: a host cache is read in place by
    // cpu_paged_attention, a device cache is gathered and masked.
    static StepTensors create(ggml_context* ctx, const StepBatch& batch, const KvStorage& cache);
    // `read` holds room for read_capacity(n_kv) cells; the rest of it is uploaded as zeros (no
    // token's visible range reaches it).
    void upload(const StepBatch& batch) const;
};

// Cells the read tensor holds for n_kv cells read: rounded up to 256, so the decode steps of the
// same sequences build the same graph for 256 steps in a row (StepShape).
int64_t read_capacity(int64_t n_kv);

// What a step's graph depends on besides its inputs' values. Two steps of one shape differ only in
// the tokens, positions and cells uploaded into the same graph: a model keeps the last step's
// graph, built and allocated, and reuses it while the shape holds (a decode step's graph building
// and allocation took ~0.4 ms of each ~27 ms Qwen3-0.6B step on two cores; BENCHMARKS.md).
struct StepShape {
    int64_t tokens = 0, outputs = 0, read = 0;
    uint64_t cache = 0;  // KvStorage::id()
    // The padded layout's blocks: sequences and the longest one's tokens (`read` is then the
    // padded block's cells, read_capacity of the longest segment).
    int64_t sequences = 0, max_tokens = 0;
    bool operator==(const StepShape&) const = default;
};
// The shape of `batch`'s graph, or nullopt where the graph follows more than the shape: the
// segmented layout (its attention is built per sequence) and steps that carry embedding spans.
std::optional<StepShape> reusable_shape(const StepBatch& batch, const KvStorage& cache);

// The sequences a kept decode graph is built for: `sequences` rounded up to 1, 2, 4, 8, 16, then
// steps of a half (24, 32, 48, 64, 96, ...): at most a third of a step's rows are filling.
int64_t sequence_bucket(int64_t sequences);
// A decode step (one token per sequence, no embedding spans) in the padded layout, filled to
// sequence_bucket() sequences, so the graph kept across steps (StepShape), and the CUDA graph
// ggml-cuda captures from it, hold while sequences join and leave. Each added sequence is one
// token (id 0, position 0) that writes and reads the cache's scratch cell only; its output row,
// after the real ones, is computed and never read. Any other step or layout: nullopt.
std::optional<StepBatch> bucketed(const StepBatch& batch, const KvStorage& cache);

// Grouped-query attention of one layer for every token of the batch: writes k and v (this step's,
// [hd, kv_heads, n]) into the layer's cache cells and attends q [hd, heads, n] over each token's
// visible cells — in place on the CPU (cpu_attention.h); on a GPU each sequence's segment is
// gathered and attended by itself, so every product and softmax has that sequence's shape alone
// and its result does not depend on the rest of the batch (batch invariance; a batch-wide call
// changes the GPU kernels' reduction order with the batch's width). heads must be a multiple of
// kv_heads (query head h reads kv head h / (heads / kv_heads), as transformers' repeat_kv).
// -> [hd * heads, n].
ggml_tensor* paged_attention(ggml_context* ctx, ggml_tensor* q, ggml_tensor* k, ggml_tensor* v, const KvStorage& cache,
                             int layer, const StepTensors& in, float scale);
// The GPU path of paged_attention, after the writes: q [hd, heads, n]; the layer's cache cells
// [kv_dim, n_cells]; read I32 [n_kv]; masks F32 (StepBatch::segment_masks()); segments cover q's
// tokens in order. Each segment is attended by itself (get_rows, two products with f32
// accumulation, one per query, a masked softmax), then the outputs are joined. -> [hd * heads, n].
ggml_tensor* segmented_attention(ggml_context* ctx, ggml_tensor* q, ggml_tensor* k_cells, ggml_tensor* v_cells,
                                 ggml_tensor* read, ggml_tensor* masks, std::span<const StepBatch::Segment> segments,
                                 float scale);
// The throughput layout of paged_attention, after the writes: every sequence's cells gathered
// into [hd, max_read, kv_heads, sequences], q's rows into [hd, max_tokens, heads, sequences], one
// ggml_flash_attn_ext (f32 precision) under the padded mask, each token's row taken back. Its
// node count does not depend on the number of sequences. -> [hd * heads, n].
ggml_tensor* padded_attention(ggml_context* ctx, ggml_tensor* q, ggml_tensor* k_cells, ggml_tensor* v_cells,
                              const StepTensors& in, float scale);
// Graph nodes paged_attention adds per layer for this batch (graph capacity); the second form for
// a batch of `segments` sequences not built yet (deciding how to split a step).
size_t paged_attention_nodes(const StepBatch& batch, const KvStorage& cache);
size_t paged_attention_nodes(size_t segments, const KvStorage& cache);

}  // namespace parlance
