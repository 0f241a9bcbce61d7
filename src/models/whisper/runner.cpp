// Whisper encoder and decoder graphs (see runner.h). Shapes are written as ggml ne (innermost
// first): activations are [d, tokens], so a PyTorch [tokens, d] row is one ggml column.
#include "models/whisper/runner.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/dense_attention.h"
#include "core/error.h"
#include "core/gelu.h"
#include "core/graph_ops.h"
#include "core/step_batch.h"
#include "core/weight_product.h"

namespace parlance::whisper {

namespace {
constexpr int kBlockTokens = 16;
int blocks_per_slot(const WhisperConfig& c) {
    return (c.max_target_positions + kBlockTokens - 1) / kBlockTokens;
}
}  // namespace

WhisperRunner::WhisperRunner(const WhisperConfig& config, const WhisperWeights& weights, Backend& backend,
                             int max_sequences, int kv_blocks)
    : config_(config),
      w_(weights),
      backend_(backend),
      n_slots_(max_sequences),
      pages_(kv_blocks > 0 ? kv_blocks : max_sequences * blocks_per_slot(config), kBlockTokens),
      self_kv_(decoder_kv_spec(config), static_cast<int64_t>(pages_.num_blocks()) * kBlockTokens, backend),
      graph_buf_(graph_context_size()) {
    // A slot's tokens are conditioned on its request's audio: its blocks are never shared.
    for (int s = 0; s < max_sequences; ++s) pages_.open(s, {}, kPrivateBlocks);
}

int WhisperRunner::kv_block_tokens() {
    return kBlockTokens;
}
int WhisperRunner::blocks_per_hypothesis(const WhisperConfig& config) {
    return blocks_per_slot(config) + 2;
}
size_t WhisperRunner::kv_block_bytes() const {
    return self_kv_.spec().bytes_per_token() * kBlockTokens;
}

void WhisperRunner::encode(std::span<const std::vector<float>> mels, std::span<CrossKv* const> crosses,
                           std::vector<std::vector<float>>* encoder_out) {
    const WhisperConfig& c = config_;
    const int B = static_cast<int>(mels.size());
    if (B == 0) return;
    if (crosses.size() != mels.size())
        throw Error(ErrorKind::Internal, "encode: one cross-attention cache per input expected");
    const int64_t frames = c.n_mel_frames(), T = c.max_source_positions, d = c.d_model;
    const int H = c.encoder_heads, hd = c.encoder_head_dim();
    for (const auto& m : mels)
        if (static_cast<int64_t>(m.size()) != frames * c.n_mels)
            throw Error(ErrorKind::Internal, "encode: log-mel must be [n_mels, 3000]");

    // ~35 nodes per encoder layer, 3 + 5 per window per decoder layer's cross K/V (with headroom).
    GraphContext g(graph_buf_, static_cast<size_t>(c.encoder_layers) * 64 +
                                   static_cast<size_t>(c.decoder_layers) * (8 + 8 * B) + 512);
    ggml_context* ctx = g.ctx;
    // On the CPU the encoder is batch-invariant, as the decoder is: a window's output does not
    // depend on the windows encoded beside it (OpenBLAS's products do, in the last bits), so a
    // request's transcript does not depend on the requests it shares an encoder pass with. Its
    // products and convolutions are the multi-column kernel's, its attention core's full-attention
    // kernel (each head of each window on its own; ggml's fused kernel, which takes each query row
    // on its own, where that kernel does not run). Devices keep their own products (the CUDA build
    // has no fused-attention kernels). Quantized weights (--quantize) keep OpenBLAS's products
    // (ggml's own q8_0 ones are slower here), and with them the last-bit dependence on the batch.
    const bool on_cpu = in_cpu_memory(w_.enc_pos);
    const bool invariant_products = !w_.enc_layers.empty() && kernel_takes_weights(w_.enc_layers.front().fc1_w);
    const bool dense_attention = on_cpu && cpu_dense_attention_available() && hd % 8 == 0;
    const Products products = invariant_products ? Products::BatchInvariant : Products::Fast;
    ggml_tensor* mel = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, frames, c.n_mels, B);
    ggml_set_input(mel);

    ggml_tensor* x = conv1d(ctx, products, w_.conv1_w, mel, 1, 1);  // [d, frames*B]
    x = gelu_erf(ctx, ggml_add(ctx, x, w_.conv1_b), w_.conv1_w);
    x = ggml_cont(ctx, ggml_transpose(ctx, ggml_reshape_3d(ctx, x, d, frames, B)));  // [frames, d, B]?
    // transpose swaps the first two dims: [d, frames, B] -> [frames, d, B]
    x = conv1d(ctx, products, w_.conv2_w, x, 2, 1);  // [d, T*B]
    x = gelu_erf(ctx, ggml_add(ctx, x, w_.conv2_b), w_.conv2_w);
    // The first T positions: all of them, or a window shorter than the model's (--audio-window).
    ggml_tensor* pos = ggml_view_2d(ctx, w_.enc_pos, d, T, w_.enc_pos->nb[1], 0);
    x = ggml_add(ctx, ggml_reshape_3d(ctx, x, d, T, B), pos);  // [d, T, B]

    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    for (const LayerWeights& l : w_.enc_layers) {
        ggml_tensor* h = layer_norm(ctx, x, l.attn_ln_w, l.attn_ln_b, c.layer_norm_eps);
        ggml_tensor* q = linear(ctx, products, h, l.attn.q_w, l.attn.q_b);
        ggml_tensor* k = linear(ctx, products, h, l.attn.k_w, nullptr);
        ggml_tensor* v = linear(ctx, products, h, l.attn.v_w, l.attn.v_b);
        ggml_tensor* o;  // [hd, H, T, B]
        if (dense_attention) {
            // Reads each head's rows where the projections wrote them: no permuted copies.
            o = cpu_dense_attention(ctx, ggml_reshape_4d(ctx, q, hd, H, T, B), ggml_reshape_4d(ctx, k, hd, H, T, B),
                                    ggml_reshape_4d(ctx, v, hd, H, T, B), scale);
        } else if (on_cpu) {
            // Contiguous q, k and v: the fused kernel reads each row in one run.
            q = ggml_cont(ctx, ggml_permute(ctx, ggml_reshape_4d(ctx, q, hd, H, T, B), 0, 2, 1, 3));  // [hd, T, H, B]
            k = ggml_cont(ctx, ggml_permute(ctx, ggml_reshape_4d(ctx, k, hd, H, T, B), 0, 2, 1, 3));
            ggml_tensor* vh = ggml_cont(ctx, ggml_permute(ctx, ggml_reshape_4d(ctx, v, hd, H, T, B), 0, 2, 1, 3));
            o = ggml_flash_attn_ext(ctx, q, k, vh, nullptr, scale, 0.0f, 0.0f);
        } else if (encoder_flash_attention(l.attn.q_w)) {  // a device's throughput mode: tensor cores
            o = flash_block_attention(ctx, ggml_reshape_4d(ctx, q, hd, H, T, B), ggml_reshape_4d(ctx, k, hd, H, T, B),
                                      ggml_reshape_4d(ctx, v, hd, H, T, B), nullptr, scale);
        } else {
            // On a device the BLAS products need contiguous q and k (a permuted view fell back to
            // ggml's f32 dot products, BENCHMARKS.md).
            q = ggml_cont(ctx, ggml_permute(ctx, ggml_reshape_4d(ctx, q, hd, H, T, B), 0, 2, 1, 3));
            k = ggml_cont(ctx, ggml_permute(ctx, ggml_reshape_4d(ctx, k, hd, H, T, B), 0, 2, 1, 3));
            ggml_tensor* vt =
                ggml_cont(ctx, ggml_permute(ctx, ggml_reshape_4d(ctx, v, hd, H, T, B), 1, 2, 0, 3));  // [T, hd, H, B]
            ggml_tensor* kq = f32_product(ctx, k, q);                                                 // [T, T, H, B]
            kq = ggml_soft_max_ext(ctx, kq, nullptr, scale, 0.0f);
            o = ggml_cont(ctx, ggml_permute(ctx, f32_product(ctx, vt, kq), 0, 2, 1, 3));
        }
        o = ggml_reshape_3d(ctx, o, d, T, B);
        x = ggml_add(ctx, x, linear(ctx, products, o, l.attn.o_w, l.attn.o_b));

        h = layer_norm(ctx, x, l.mlp_ln_w, l.mlp_ln_b, c.layer_norm_eps);
        h = gelu_erf(ctx, linear(ctx, products, h, l.fc1_w, l.fc1_b), l.fc1_w);
        x = ggml_add(ctx, x, linear(ctx, products, h, l.fc2_w, l.fc2_b));
    }
    x = layer_norm(ctx, x, w_.enc_ln_w, w_.enc_ln_b, c.layer_norm_eps);  // [d, T, B]
    if (encoder_out) {
        ggml_set_output(x);
    }
    ggml_build_forward_expand(g.graph, x);

    // Cross-attention keys/values for every decoder layer, written into each input's cache.
    for (int li = 0; li < c.decoder_layers; ++li) {
        const LayerWeights& l = w_.dec_layers[li];
        ggml_tensor* k = linear(ctx, products, x, l.cross.k_w, nullptr);      // [d, T, B]
        ggml_tensor* v = linear(ctx, products, x, l.cross.v_w, l.cross.v_b);  // [d, T, B]
        for (int b = 0; b < B; ++b) {
            ggml_tensor* kb = ggml_view_2d(ctx, k, d, T, k->nb[1], b * k->nb[2]);
            ggml_tensor* vb = ggml_view_2d(ctx, v, d, T, v->nb[1], b * v->nb[2]);
            if (crosses[b]->packed) {  // in the order the decoder's kernel reads them
                ggml_build_forward_expand(g.graph, pack_keys_f16(ctx, kb, crosses[b]->k[li]));
                ggml_build_forward_expand(g.graph, pack_values_f16(ctx, vb, crosses[b]->v[li]));
            } else {
                ggml_build_forward_expand(g.graph, ggml_cpy(ctx, kb, crosses[b]->k[li]));
                ggml_build_forward_expand(g.graph, ggml_cpy(ctx, ggml_transpose(ctx, vb), crosses[b]->v[li]));
            }
        }
    }

    backend_.alloc_graph(g.graph, invariant_products);
    for (int b = 0; b < B; ++b)
        ggml_backend_tensor_set(mel, mels[b].data(), b * mel->nb[2], mels[b].size() * sizeof(float));
    backend_.compute(g.graph);
    if (encoder_out) {
        encoder_out->assign(B, std::vector<float>(T * d));
        for (int b = 0; b < B; ++b)
            ggml_backend_tensor_get(x, (*encoder_out)[b].data(), b * x->nb[2], T * d * sizeof(float));
    }
}

std::vector<std::vector<float>> WhisperRunner::decode(std::span<const DecodeItem> items) {
    return run_decoder(items, nullptr);
}

std::vector<std::vector<float>> WhisperRunner::cross_attention(const CrossKv& cross, int slot,
                                                               std::span<const int> tokens,
                                                               std::span<const std::pair<int, int>> heads,
                                                               std::vector<std::vector<float>>* logits) {
    for (const auto& lh : heads)
        if (lh.first < 0 || lh.first >= config_.decoder_layers || lh.second < 0 || lh.second >= config_.decoder_heads)
            throw Error(ErrorKind::InvalidArgument, "alignment head (" + std::to_string(lh.first) + ", " +
                                                        std::to_string(lh.second) + ") is outside the decoder's " +
                                                        std::to_string(config_.decoder_layers) + " layers of " +
                                                        std::to_string(config_.decoder_heads) + " heads");
    DecodeItem item{slot, &cross, std::vector<int>(tokens.begin(), tokens.end()), 0};
    std::vector<std::vector<float>> weights;
    Capture capture{heads, &weights, logits != nullptr};
    std::vector<std::vector<float>> out = run_decoder(std::span<const DecodeItem>(&item, 1), &capture);
    if (logits) *logits = std::move(out);
    return weights;
}

std::vector<std::vector<float>> WhisperRunner::run_decoder(std::span<const DecodeItem> items, const Capture* capture) {
    const WhisperConfig& c = config_;
    if (capture && items.size() != 1) throw Error(ErrorKind::Internal, "cross_attention: one sequence at a time");
    // Reserve each sequence's cells: a slot holding more than n_past tokens (a reused or
    // reordered one) is cut back first.
    std::vector<BlockCopy> copies;
    for (const DecodeItem& it : items) {
        if (it.tokens.empty()) throw Error(ErrorKind::Internal, "decode: an item has no tokens");
        if (it.slot < 0 || it.slot >= n_slots_) throw Error(ErrorKind::Internal, "decode: bad slot");
        if (!it.cross) throw Error(ErrorKind::Internal, "decode: an item without its encoded audio");
        if (it.n_past + static_cast<int>(it.tokens.size()) > c.max_target_positions)
            throw Error(ErrorKind::TooLarge,
                        "decoder context of " + std::to_string(c.max_target_positions) + " tokens exceeded");
        for (int t : it.tokens)
            if (t < 0 || t >= c.vocab_size) throw Error(ErrorKind::Internal, "decode: token id out of range");
        const int have = pages_.length(it.slot);
        if (have < it.n_past) throw Error(ErrorKind::Internal, "decode: a slot holds fewer tokens than n_past");
        if (have > it.n_past) pages_.truncate(it.slot, it.n_past);
        std::vector<int32_t> toks(it.tokens.begin(), it.tokens.end());
        if (!pages_.append(it.slot, toks, copies))
            throw Error(ErrorKind::Internal, "decode: the decoder cache is full");
    }
    if (!copies.empty()) {
        std::vector<KvStorage::CellCopy> cells;
        for (const BlockCopy& b : copies)
            cells.push_back({int64_t(b.from) * kBlockTokens, int64_t(b.to) * kBlockTokens, b.n_tokens});
        self_kv_.copy_cells(cells, backend_);
    }
    std::vector<std::vector<int32_t>> token_store;
    token_store.reserve(items.size());
    std::vector<StepSpan> spans;
    for (const DecodeItem& it : items) {
        token_store.emplace_back(it.tokens.begin(), it.tokens.end());
        spans.push_back({it.slot, it.n_past, token_store.back(), !(capture && capture->all_logits)});
    }
    StepBatch batch = build_step_batch(spans, pages_);
    for (size_t i = 0; i < items.size(); ++i) batch.segments[i].state = items[i].cross;
    if (capture && capture->all_logits) {
        batch.outputs.clear();
        for (int i = 0; i < batch.n_tokens(); ++i) batch.outputs.push_back(i);
    }
    std::vector<float> flat;
    if (capture) {
        const CrossAttentionCapture cc{capture->heads, capture->weights};
        decoder_step(c, w_, backend_, graph_buf_, batch, self_kv_, flat, &cc);
    } else {
        decoder_step(c, w_, backend_, graph_buf_, batch, self_kv_, flat);
    }
    const size_t V = static_cast<size_t>(c.vocab_size);
    std::vector<std::vector<float>> out(batch.outputs.size());
    for (size_t i = 0; i < out.size(); ++i)
        out[i].assign(flat.begin() + static_cast<std::ptrdiff_t>(i * V),
                      flat.begin() + static_cast<std::ptrdiff_t>((i + 1) * V));
    return out;
}

void WhisperRunner::copy_slot(int from, int to, int n) {
    pages_.copy_prefix(from, to, n);
}

void WhisperRunner::release_slot(int slot) {
    pages_.truncate(slot, 0);
}

}  // namespace parlance::whisper
