// Shared graph helpers (see graph_ops.h).
#include "core/graph_ops.h"

#include "core/backend.h"
#include "core/cpu_attention.h"
#include "core/error.h"
#include "core/runtime_settings.h"
#include "core/weight_product.h"

#include <ggml-backend.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

namespace parlance {

ggml_tensor* layer_norm(ggml_context* ctx, ggml_tensor* x, ggml_tensor* w, ggml_tensor* b, float eps) {
    return ggml_add(ctx, ggml_mul(ctx, ggml_norm(ctx, x, eps), w), b);
}

ggml_tensor* rms_norm(ggml_context* ctx, ggml_tensor* x, ggml_tensor* w, float eps) {
    ggml_tensor* y = ggml_rms_norm(ctx, x, eps);
    return w ? ggml_mul(ctx, y, w) : y;
}

ggml_tensor* linear(ggml_context* ctx, Products products, ggml_tensor* x, ggml_tensor* w, ggml_tensor* b) {
    ggml_tensor* y = weight_product(ctx, products, w, x);
    return b ? ggml_add(ctx, y, b) : y;
}

ggml_tensor* conv1d(ggml_context* ctx, Products products, ggml_tensor* kernel, ggml_tensor* x, int stride,
                    int padding) {
    ggml_tensor* cols = ggml_im2col(ctx, kernel, x, stride, 0, padding, 0, 1, 0, false, GGML_TYPE_F32);
    ggml_tensor* k2 = ggml_reshape_2d(ctx, kernel, kernel->ne[0] * kernel->ne[1], kernel->ne[2]);
    ggml_tensor* c2 = ggml_reshape_2d(ctx, cols, cols->ne[0], cols->ne[1] * cols->ne[2]);
    // BatchInvariant (an encoder on the CPU): the multi-column kernel, f32 columns (ggml's f16 path
    // rounds them to f16) and the same bits whatever the batch. Fast: ggml's product whatever the
    // number of columns (the kernel would take a few), so a short input (the VAD's 512-sample
    // window) keeps the path it was qualified on.
    if (products == Products::BatchInvariant) return weight_product(ctx, products, k2, c2);
    return f32_product(ctx, k2, c2);
}

ggml_tensor* conv2d(ggml_context* ctx, ggml_tensor* kernel, ggml_tensor* x, int stride, int padding) {
    const int64_t k = kernel->ne[0] * kernel->ne[1] * kernel->ne[2], c_out = kernel->ne[3];
    // A device's throughput step multiplies as f16 with f32 accumulation (tensor cores; in f32 the
    // Qwen3-ASR encoder's convolutions ran at the FP32 roof, ~7 ms for 99 chunks on an H100): the
    // kernel cast, the columns written as f16 by im2col (the rounding the product would apply,
    // without a second copy of the columns). Only where rows of k halves stay 16-byte aligned:
    // cuBLAS's tensor-core GEMM wants that, and the first convolution's 9 inputs per output ran
    // 10x slower than their f32 product (op profile under load, 2026-12-07). The CPU and
    // --deterministic keep the f32 kernel and columns.
    const bool on_device = !in_cpu_memory(kernel) && !device_products_invariant();
    const bool half = on_device && k % 8 == 0;
    ggml_tensor* w = kernel;
    if (on_device && kernel->type != (half ? GGML_TYPE_F16 : GGML_TYPE_F32))
        w = ggml_cast(ctx, kernel, half ? GGML_TYPE_F16 : GGML_TYPE_F32);
    // cols ne [C_in * KH * KW, W_out, H_out, N], in the kernel's memory order.
    ggml_tensor* cols = ggml_im2col(ctx, kernel, x, stride, stride, padding, padding, 1, 1, /*is_2D=*/true,
                                    half ? GGML_TYPE_F16 : GGML_TYPE_F32);
    const int64_t w_out = cols->ne[1], h_out = cols->ne[2], n = cols->ne[3];
    ggml_tensor* y = weight_product(ctx, Products::Fast, ggml_reshape_2d(ctx, w, k, c_out),
                                    ggml_reshape_2d(ctx, cols, k, w_out * h_out * n));
    // [C_out, W_out, H_out, N] -> [W_out, H_out, C_out, N]
    y = ggml_reshape_4d(ctx, y, c_out, w_out, h_out, n);
    return ggml_cont(ctx, ggml_permute(ctx, y, 2, 0, 1, 3));
}

ggml_tensor* swiglu_mlp(ggml_context* ctx, Products products, ggml_tensor* x, ggml_tensor* gate, ggml_tensor* up,
                        ggml_tensor* down) {
    ggml_tensor* g = ggml_silu(ctx, weight_product(ctx, products, gate, x));
    return weight_product(ctx, products, down, ggml_mul(ctx, g, weight_product(ctx, products, up, x)));
}

ggml_tensor* rope(ggml_context* ctx, ggml_tensor* x, ggml_tensor* positions, const RopeParams& p) {
    const int mode = p.neox ? GGML_ROPE_TYPE_NEOX : 0;
    return ggml_rope_ext(ctx, x, positions, nullptr, static_cast<int>(x->ne[0]), mode, p.n_ctx_orig, p.theta,
                         p.freq_scale, /*ext_factor=*/0.0f, /*attn_factor=*/1.0f,
                         /*beta_fast=*/32.0f,
                         /*beta_slow=*/1.0f);
}

namespace {

// PARLANCE_ATTENTION_LAYOUT, read once: "gpu" (Segmented) or "padded" for every cache.
std::optional<AttentionLayout> forced_layout() {
    const std::string& want = runtime_settings().attention_layout;
    if (want == "gpu") return AttentionLayout::Segmented;
    if (want == "padded") return AttentionLayout::Padded;
    return std::nullopt;
}

// Whether attention over this cache is built as on a GPU (any layout but the host's).
bool gpu_layout(const ggml_tensor* cache_k) {
    return attention_layout(cache_k) != AttentionLayout::Host;
}

}  // namespace

AttentionLayout attention_layout(const ggml_tensor* cache_k) {
    if (const auto forced = forced_layout()) return *forced;
    if (in_cpu_memory(cache_k)) return AttentionLayout::Host;
    return runtime_settings().deterministic_gpu ? AttentionLayout::Segmented : AttentionLayout::Padded;
}

bool device_products_invariant() {
    if (const auto forced = forced_layout()) return *forced == AttentionLayout::Segmented;
    return runtime_settings().deterministic_gpu;
}

bool encoder_flash_attention(const ggml_tensor* w) {
    return attention_layout(w) == AttentionLayout::Padded;  // the choice a cache in w's memory gets
}

ggml_tensor* flash_block_attention(ggml_context* ctx, ggml_tensor* q, ggml_tensor* k, ggml_tensor* v, ggml_tensor* mask,
                                   float scale) {
    // Permuted views [hd, T, heads, B]: the kernel reads strided rows.
    ggml_tensor* o = ggml_flash_attn_ext(ctx, ggml_permute(ctx, q, 0, 2, 1, 3), ggml_permute(ctx, k, 0, 2, 1, 3),
                                         ggml_permute(ctx, v, 0, 2, 1, 3), mask, scale, 0.0f, 0.0f);
    ggml_flash_attn_ext_set_prec(o, GGML_PREC_F32);
    return o;  // [hd, heads, T, B]
}

namespace {
// The padded block's cells for this batch: its longest segment's, rounded as read_capacity rounds
// (a kept graph holds the decode steps of the same sequences for 256 steps in a row).
int64_t padded_read_capacity(const StepBatch& b) {
    int64_t longest = 0;
    for (const StepBatch::Segment& g : b.segments) longest = std::max<int64_t>(longest, g.n_read);
    return read_capacity(longest);
}
}  // namespace

StepTensors StepTensors::create(ggml_context* ctx, const StepBatch& b, const KvStorage& cache) {
    StepTensors t;
    const int64_t n = b.n_tokens();
    t.tokens = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n);
    t.positions = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n);
    t.write = ggml_new_tensor_1d(ctx, GGML_TYPE_I64, n);
    const AttentionLayout layout = attention_layout(cache.k(0));
    // The padded layout reads through pad_read instead (an input no node reads is never allocated).
    if (layout != AttentionLayout::Padded) t.read = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, read_capacity(b.n_kv()));
    if (layout == AttentionLayout::Host) {
        t.visible = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 2, n);
    } else if (layout == AttentionLayout::Segmented) {
        t.mask = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, static_cast<int64_t>(b.segment_mask_size()));
        t.segments = b.segments;
    } else {
        const StepBatch::Padded p = b.padded(static_cast<int>(padded_read_capacity(b)));
        t.sequences = p.sequences;
        t.max_tokens = p.max_tokens;
        t.max_read = p.max_read;
        t.pad_read = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, static_cast<int64_t>(p.read.size()));
        t.query_rows = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, static_cast<int64_t>(p.query_rows.size()));
        t.token_slots = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n);
        t.pad_mask = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, p.max_read, p.max_tokens, 1, p.sequences);
    }
    t.outputs = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, static_cast<int64_t>(b.outputs.size()));
    for (ggml_tensor* x : {t.tokens, t.positions, t.write, t.read, t.mask, t.visible, t.outputs, t.pad_read,
                           t.query_rows, t.token_slots, t.pad_mask})
        if (x) ggml_set_input(x);
    return t;
}

void StepTensors::upload(const StepBatch& b) const {
    ggml_backend_tensor_set(tokens, b.tokens.data(), 0, b.tokens.size() * sizeof(int32_t));
    ggml_backend_tensor_set(positions, b.positions.data(), 0, b.positions.size() * sizeof(int32_t));
    ggml_backend_tensor_set(write, b.write_cells.data(), 0, b.write_cells.size() * sizeof(int64_t));
    // The cells read, then zeros up to the tensor's capacity (read_capacity): set in place, not
    // through a padded copy of the list (a decode step of a long context would copy it every step).
    const size_t read_bytes = b.read_cells.size() * sizeof(int32_t);
    if (read && read_bytes > ggml_nbytes(read))
        throw Error(ErrorKind::Internal, "step: more cells read than the graph holds");
    if (read && read_bytes > 0) ggml_backend_tensor_set(read, b.read_cells.data(), 0, read_bytes);
    if (read && read_bytes < ggml_nbytes(read))
        ggml_backend_tensor_memset(read, 0, read_bytes, ggml_nbytes(read) - read_bytes);
    if (mask) {
        const std::vector<float> m = b.segment_masks();
        ggml_backend_tensor_set(mask, m.data(), 0, m.size() * sizeof(float));
    }
    if (visible) ggml_backend_tensor_set(visible, b.visible.data(), 0, b.visible.size() * sizeof(int32_t));
    if (pad_read) {
        const StepBatch::Padded p = b.padded(max_read);
        if (p.sequences != sequences || p.max_tokens != max_tokens || p.max_read != max_read)
            throw Error(ErrorKind::Internal, "step: the padded layout does not fit the graph");
        ggml_backend_tensor_set(pad_read, p.read.data(), 0, ggml_nbytes(pad_read));
        ggml_backend_tensor_set(query_rows, p.query_rows.data(), 0, ggml_nbytes(query_rows));
        ggml_backend_tensor_set(token_slots, p.token_slots.data(), 0, ggml_nbytes(token_slots));
        ggml_backend_tensor_set(pad_mask, p.mask.data(), 0, ggml_nbytes(pad_mask));
    }
    ggml_backend_tensor_set(outputs, b.outputs.data(), 0, b.outputs.size() * sizeof(int32_t));
}

int64_t read_capacity(int64_t n_kv) {
    constexpr int64_t kRound = 256;
    return std::max<int64_t>(1, (n_kv + kRound - 1) / kRound * kRound);
}

std::optional<StepShape> reusable_shape(const StepBatch& b, const KvStorage& cache) {
    if (!b.embeddings.empty()) return std::nullopt;
    const AttentionLayout layout = attention_layout(cache.k(0));
    if (layout == AttentionLayout::Segmented) return std::nullopt;
    StepShape s{b.n_tokens(), static_cast<int64_t>(b.outputs.size()), read_capacity(b.n_kv()), cache.id()};
    if (layout == AttentionLayout::Padded) {
        s.read = padded_read_capacity(b);
        s.sequences = static_cast<int64_t>(b.segments.size());
        for (const StepBatch::Segment& g : b.segments) s.max_tokens = std::max<int64_t>(s.max_tokens, g.n_tokens);
    }
    return s;
}

int64_t sequence_bucket(int64_t sequences) {
    int64_t b = 1;
    while (b < sequences && b < 16) b *= 2;
    if (b >= sequences) return b;
    for (int64_t p = 16;; p *= 2) {  // 16, 24, 32, 48, 64, 96, ...
        if (p >= sequences) return p;
        if (p + p / 2 >= sequences) return p + p / 2;
    }
}

std::optional<StepBatch> bucketed(const StepBatch& b, const KvStorage& cache) {
    if (!b.embeddings.empty() || attention_layout(cache.k(0)) != AttentionLayout::Padded) return std::nullopt;
    for (const StepBatch::Segment& g : b.segments)
        if (g.n_tokens != 1) return std::nullopt;
    const int64_t S = static_cast<int64_t>(b.segments.size());
    if (S == 0 || b.n_tokens() != S || b.visible.size() != 2 * static_cast<size_t>(S)) return std::nullopt;
    const int64_t want = sequence_bucket(S);
    if (want == S) return std::nullopt;
    StepBatch p = b;
    const auto scratch = static_cast<int32_t>(cache.scratch_cell());
    for (int64_t s = S; s < want; ++s) {
        const int row = static_cast<int>(s), read = static_cast<int>(p.read_cells.size());
        p.tokens.push_back(0);
        p.positions.push_back(0);
        p.write_cells.push_back(scratch);
        p.read_cells.push_back(scratch);
        p.visible.push_back(read);
        p.visible.push_back(1);
        p.outputs.push_back(row);
        p.segments.push_back({row, 1, read, 1, nullptr});
    }
    return p;
}

ggml_tensor* paged_attention(ggml_context* ctx, ggml_tensor* q, ggml_tensor* k, ggml_tensor* v, const KvStorage& cache,
                             int layer, const StepTensors& in, float scale) {
    const int64_t hd = q->ne[0], H = q->ne[1], n = q->ne[2];
    const int64_t Hkv = k->ne[1], kv_dim = hd * Hkv;
    if (H % Hkv != 0) throw Error(ErrorKind::Internal, "attention: heads not a multiple of kv heads");
    // This step's K/V into their cells; the gathers read the result, so they run after the writes.
    ggml_tensor* kc = ggml_set_rows(ctx, cache.k(layer), ggml_reshape_2d(ctx, k, kv_dim, n), in.write);
    ggml_tensor* vc = ggml_set_rows(ctx, cache.v(layer), ggml_reshape_2d(ctx, v, kv_dim, n), in.write);
    if (in.visible) return cpu_paged_attention(ctx, q, kc, vc, in.read, in.visible, scale);
    if (in.pad_read) return padded_attention(ctx, q, kc, vc, in, scale);
    return segmented_attention(ctx, q, kc, vc, in.read, in.mask, in.segments, scale);
}

// Rows of `cells` in the cache's own type where the device can: ggml_get_rows types its result
// f32 whatever it reads, so gathering an f16 cache writes twice the bytes and flash attention
// converts them back to f16 (measured on an H100: the f16 cache was slower than the f32 one,
// BENCHMARKS.md session 39). ggml-cuda's get_rows kernel writes f16 from f16, so in CUDA's
// memory the result keeps the cache's type; the CPU's and Metal's kernels write f32 only.
namespace {
ggml_tensor* gather_rows(ggml_context* ctx, ggml_tensor* cells, ggml_tensor* rows_index) {
    ggml_tensor* rows = ggml_get_rows(ctx, cells, rows_index);
    const ggml_tensor* base = cells->view_src ? cells->view_src : cells;
    // CUDA's device buffers only (not its pinned host ones, which the CPU computes on): Metal's
    // f16 get_rows kernel writes f32 whatever the result's type.
    if (cells->type != GGML_TYPE_F16 || !base->buffer || ggml_backend_buffer_is_host(base->buffer) ||
        std::strncmp(ggml_backend_buft_name(ggml_backend_buffer_get_type(base->buffer)), "CUDA", 4) != 0)
        return rows;
    rows->type = GGML_TYPE_F16;
    rows->nb[0] = ggml_type_size(GGML_TYPE_F16);
    for (int d = 1; d < GGML_MAX_DIMS; ++d) rows->nb[d] = rows->nb[d - 1] * rows->ne[d - 1];
    return rows;
}
}  // namespace

ggml_tensor* padded_attention(ggml_context* ctx, ggml_tensor* q, ggml_tensor* k_cells, ggml_tensor* v_cells,
                              const StepTensors& in, float scale) {
    const int64_t hd = q->ne[0], H = q->ne[1], n = q->ne[2];
    const int64_t Hkv = k_cells->ne[0] / hd, S = in.sequences, T = in.max_tokens, L = in.max_read;
    // [kv_dim, L * S] -> [hd, Hkv, L, S] -> [hd, L, Hkv, S]: flash attention's key layout (a view).
    auto gather = [&](ggml_tensor* cells) {
        return ggml_permute(ctx, ggml_reshape_4d(ctx, gather_rows(ctx, cells, in.pad_read), hd, Hkv, L, S), 0, 2, 1, 3);
    };
    ggml_tensor* K = gather(k_cells);
    ggml_tensor* V = gather(v_cells);
    // q's rows per slot: [hd * H, T * S] -> [hd, H, T, S] -> [hd, T, H, S].
    ggml_tensor* Q = ggml_get_rows(ctx, ggml_reshape_2d(ctx, q, hd * H, n), in.query_rows);
    Q = ggml_permute(ctx, ggml_reshape_4d(ctx, Q, hd, H, T, S), 0, 2, 1, 3);
    ggml_tensor* o = ggml_flash_attn_ext(ctx, Q, K, V, in.pad_mask, scale, 0.0f, 0.0f);  // [hd, H, T, S]
    ggml_flash_attn_ext_set_prec(o, GGML_PREC_F32);
    return ggml_get_rows(ctx, ggml_reshape_2d(ctx, o, hd * H, T * S), in.token_slots);  // [hd * H, n]
}

ggml_tensor* segmented_attention(ggml_context* ctx, ggml_tensor* q, ggml_tensor* k_cells, ggml_tensor* v_cells,
                                 ggml_tensor* read, ggml_tensor* masks, std::span<const StepBatch::Segment> segments,
                                 float scale) {
    const int64_t hd = q->ne[0], H = q->ne[1], n = q->ne[2];
    const int64_t Hkv = k_cells->ne[0] / hd;
    // A GPU's product kernel follows its number of columns (ggml-cuda: a vector kernel for one
    // query, tiles or cuBLAS beyond), so a prompt token's attention would round differently when a
    // prefix-cache hit leaves fewer of its sequence's queries in the step. Each query is its own
    // one-column product — the vector kernel, whose reduction depends only on hd and on the keys
    // read — as weight_product() does for the weights in a batch-invariant step.
    // One sequence at a time: its cells gathered, its rows of q, its block of the masks.
    std::vector<ggml_tensor*> outs;
    size_t mask_at = 0;
    for (const StepBatch::Segment& g : segments) {
        const int64_t L = g.n_read, n_s = g.n_tokens;
        ggml_tensor* cells = ggml_view_1d(ctx, read, L, static_cast<size_t>(g.read) * sizeof(int32_t));
        ggml_tensor* rows = ggml_get_rows(ctx, k_cells, cells);  // [kv_dim, L]
        ggml_tensor* V = ggml_get_rows(ctx, v_cells, cells);
        V = ggml_cont(ctx, ggml_permute(ctx, ggml_reshape_3d(ctx, V, hd, Hkv, L), 1, 2, 0, 3));  // [L, hd, Hkv]
        ggml_tensor* mask =
            ggml_view_2d(ctx, masks, L, n_s, static_cast<size_t>(L) * sizeof(float), mask_at * sizeof(float));
        mask_at += static_cast<size_t>(L) * static_cast<size_t>(n_s);
        // K [hd, L, 1, Hkv] times each query [hd, 1] of [hd, 1, n_s, H] (heads broadcast as GQA).
        ggml_tensor* K = ggml_view_4d(ctx, rows, hd, L, 1, Hkv, rows->nb[1], rows->nb[1] * L,
                                      static_cast<size_t>(hd) * ggml_element_size(rows), 0);
        ggml_tensor* Q =
            ggml_view_4d(ctx, q, hd, 1, n_s, H, q->nb[2], q->nb[2], q->nb[1], static_cast<size_t>(g.token) * q->nb[2]);
        ggml_tensor* kq = f32_product(ctx, K, Q);  // [L, 1, n_s, H]
        kq = ggml_soft_max_ext(ctx, ggml_reshape_3d(ctx, kq, L, n_s, H), mask, scale, 0.0f);
        // The vector kernel takes rows of even length: an odd L gets one zero key and weight.
        int64_t Lp = L;
        if (L % 2 != 0) {
            V = ggml_pad(ctx, V, 1, 0, 0, 0);
            kq = ggml_pad(ctx, kq, 1, 0, 0, 0);
            Lp = L + 1;
        }
        ggml_tensor* o = f32_product(ctx, ggml_reshape_4d(ctx, V, Lp, hd, 1, Hkv),
                                     ggml_reshape_4d(ctx, kq, Lp, 1, n_s, H));                   // [hd, 1, n_s, H]
        o = ggml_cont(ctx, ggml_permute(ctx, ggml_reshape_3d(ctx, o, hd, n_s, H), 0, 2, 1, 3));  // [hd, H, n_s]
        outs.push_back(ggml_reshape_2d(ctx, o, hd * H, n_s));
    }
    if (outs.empty()) throw Error(ErrorKind::Internal, "attention: a step without sequences");
    // Joined pairwise (a balanced tree: each token's row is copied log2(segments) times).
    while (outs.size() > 1) {
        std::vector<ggml_tensor*> next;
        for (size_t i = 0; i + 1 < outs.size(); i += 2) next.push_back(ggml_concat(ctx, outs[i], outs[i + 1], 1));
        if (outs.size() % 2) next.push_back(outs.back());
        outs = std::move(next);
    }
    if (outs.front()->ne[1] != n) throw Error(ErrorKind::Internal, "attention: segments do not cover the batch");
    return outs.front();
}

size_t paged_attention_nodes(const StepBatch& batch, const KvStorage& cache) {
    return paged_attention_nodes(batch.segments.size(), cache);
}

size_t paged_attention_nodes(size_t segments, const KvStorage& cache) {
    // Host caches: two reshapes and two set_rows (this step's K/V into their cells), q's cont, the
    // attention's pieces and their combine (cpu_paged_attention) — 7, and one spare.
    if (!gpu_layout(cache.k(0))) return 8;
    // Two set_rows, three gathers, their reshapes and permutes, flash attention, the rows taken back.
    if (attention_layout(cache.k(0)) == AttentionLayout::Padded) return 24;
    // Per segment: the gathers, views, pads and reshapes of segmented_attention.
    return 4 + 24 * segments;
}

}  // namespace parlance
