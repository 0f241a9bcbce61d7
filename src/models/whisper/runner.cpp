// Whisper encoder and decoder graphs (see runner.h). Shapes are written as ggml ne (innermost
// first): activations are [d, tokens], so a PyTorch [tokens, d] row is one ggml column.
#include "models/whisper/runner.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/gelu.h"
#include "core/graph_ops.h"
#include "core/step_batch.h"
#include "core/weight_product.h"

namespace parlance::whisper {
namespace {

struct GraphContext {
    GraphContext(std::vector<uint8_t>& buf, size_t estimated_nodes) {
        const size_t capacity = graph_capacity(estimated_nodes);  // throws before a context exists
        ggml_init_params p{buf.size(), buf.data(), true};
        ctx = ggml_init(p);
        graph = ggml_new_graph_custom(ctx, capacity, false);
    }
    ~GraphContext() { ggml_free(ctx); }
    ggml_context* ctx;
    ggml_cgraph* graph;
};

}  // namespace

CrossKv::CrossKv(const WhisperConfig& c, Backend& backend) {
    ggml_init_params p{ggml_tensor_overhead() * (2 * c.decoder_layers + 2), nullptr, true};
    ctx_ = ggml_init(p);
    // f16, as whisper.cpp keeps them: every decoder step reads all of them, and f32 made batch-1
    // decode ~12% slower (BENCHMARKS.md); parity still identical (logit error ~4e-4).
    for (int l = 0; l < c.decoder_layers; ++l) {
        k.push_back(ggml_new_tensor_2d(ctx_, GGML_TYPE_F16, c.d_model, c.max_source_positions));
        vt.push_back(ggml_new_tensor_2d(ctx_, GGML_TYPE_F16, c.max_source_positions, c.d_model));
    }
    buffer_ = ggml_backend_alloc_ctx_tensors(ctx_, backend.primary());
    if (!buffer_) throw Error(ErrorKind::Io, "could not allocate the cross-attention cache");
}

CrossKv::~CrossKv() {
    if (buffer_) ggml_backend_buffer_free(buffer_);
    ggml_free(ctx_);
}

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
      self_kv_(KvSpec{config.decoder_layers, config.d_model, GGML_TYPE_F32},
               static_cast<int64_t>(pages_.num_blocks()) * kBlockTokens, backend),
      graph_buf_(graph_context_size()) {
    // A slot's tokens are conditioned on its request's audio: its blocks are never shared.
    for (int s = 0; s < max_sequences; ++s) pages_.open(s, {}, kPrivateBlocks);
}

int WhisperRunner::kv_block_tokens() {
    return kBlockTokens;
}
int WhisperRunner::blocks_per_hypothesis() const {
    return blocks_per_slot(config_) + 2;
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
    ggml_tensor* mel = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, frames, c.n_mels, B);
    ggml_set_input(mel);

    ggml_tensor* x = conv1d(ctx, w_.conv1_w, mel, 1, 1);  // [d, frames*B]
    x = gelu_erf(ctx, ggml_add(ctx, x, w_.conv1_b), w_.conv1_w);
    x = ggml_cont(ctx, ggml_transpose(ctx, ggml_reshape_3d(ctx, x, d, frames, B)));  // [frames, d, B]?
    // transpose swaps the first two dims: [d, frames, B] -> [frames, d, B]
    x = conv1d(ctx, w_.conv2_w, x, 2, 1);  // [d, T*B]
    x = gelu_erf(ctx, ggml_add(ctx, x, w_.conv2_b), w_.conv2_w);
    // The first T positions: all of them, or a window shorter than the model's (--audio-window).
    ggml_tensor* pos = ggml_view_2d(ctx, w_.enc_pos, d, T, w_.enc_pos->nb[1], 0);
    x = ggml_add(ctx, ggml_reshape_3d(ctx, x, d, T, B), pos);  // [d, T, B]

    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    for (const LayerWeights& l : w_.enc_layers) {
        ggml_tensor* h = layer_norm(ctx, x, l.attn_ln_w, l.attn_ln_b, c.layer_norm_eps);
        ggml_tensor* q = linear(ctx, h, l.attn.q_w, l.attn.q_b);
        ggml_tensor* k = linear(ctx, h, l.attn.k_w, nullptr);
        ggml_tensor* v = linear(ctx, h, l.attn.v_w, l.attn.v_b);
        // Contiguous q and k let the BLAS backend take the [T, T] products (a permuted view
        // falls back to ggml's f32 dot products, ~25% of the encoder's time; BENCHMARKS.md).
        q = ggml_cont(ctx, ggml_permute(ctx, ggml_reshape_4d(ctx, q, hd, H, T, B), 0, 2, 1, 3));  // [hd, T, H, B]
        k = ggml_cont(ctx, ggml_permute(ctx, ggml_reshape_4d(ctx, k, hd, H, T, B), 0, 2, 1, 3));
        ggml_tensor* vt =
            ggml_cont(ctx, ggml_permute(ctx, ggml_reshape_4d(ctx, v, hd, H, T, B), 1, 2, 0, 3));  // [T, hd, H, B]
        ggml_tensor* kq = f32_product(ctx, k, q);                                                 // [T, T, H, B]
        kq = ggml_soft_max_ext(ctx, kq, nullptr, scale, 0.0f);
        ggml_tensor* o = f32_product(ctx, vt, kq);             // [hd, T, H, B]
        o = ggml_cont(ctx, ggml_permute(ctx, o, 0, 2, 1, 3));  // [hd, H, T, B]
        o = ggml_reshape_3d(ctx, o, d, T, B);
        x = ggml_add(ctx, x, linear(ctx, o, l.attn.o_w, l.attn.o_b));

        h = layer_norm(ctx, x, l.mlp_ln_w, l.mlp_ln_b, c.layer_norm_eps);
        h = gelu_erf(ctx, linear(ctx, h, l.fc1_w, l.fc1_b), l.fc1_w);
        x = ggml_add(ctx, x, linear(ctx, h, l.fc2_w, l.fc2_b));
    }
    x = layer_norm(ctx, x, w_.enc_ln_w, w_.enc_ln_b, c.layer_norm_eps);  // [d, T, B]
    if (encoder_out) {
        ggml_set_output(x);
    }
    ggml_build_forward_expand(g.graph, x);

    // Cross-attention keys/values for every decoder layer, written into each input's cache.
    for (int li = 0; li < c.decoder_layers; ++li) {
        const LayerWeights& l = w_.dec_layers[li];
        ggml_tensor* k = linear(ctx, x, l.cross.k_w, nullptr);      // [d, T, B]
        ggml_tensor* v = linear(ctx, x, l.cross.v_w, l.cross.v_b);  // [d, T, B]
        for (int b = 0; b < B; ++b) {
            ggml_tensor* kb = ggml_view_2d(ctx, k, d, T, k->nb[1], b * k->nb[2]);
            ggml_build_forward_expand(g.graph, ggml_cpy(ctx, kb, crosses[b]->k[li]));
            ggml_tensor* vb = ggml_view_2d(ctx, v, d, T, v->nb[1], b * v->nb[2]);
            ggml_build_forward_expand(g.graph, ggml_cpy(ctx, ggml_transpose(ctx, vb), crosses[b]->vt[li]));
        }
    }

    backend_.alloc_graph(g.graph);
    for (int b = 0; b < B; ++b)
        ggml_backend_tensor_set(mel, mels[b].data(), b * mel->nb[2], mels[b].size() * sizeof(float));
    backend_.compute(g.graph);
    if (encoder_out) {
        encoder_out->assign(B, std::vector<float>(T * d));
        for (int b = 0; b < B; ++b)
            ggml_backend_tensor_get(x, (*encoder_out)[b].data(), b * x->nb[2], T * d * sizeof(float));
    }
}

size_t WhisperRunner::decoder_nodes(size_t runs, size_t sequences) const {
    // ~80 nodes per layer, up to 20 per run of cross-attention, the self-attention's, and as many
    // leaves (with headroom).
    return static_cast<size_t>(config_.decoder_layers) * (80 + 20 * runs + paged_attention_nodes(sequences, self_kv_)) +
           512;
}

std::vector<std::vector<float>> WhisperRunner::decode(std::span<const DecodeItem> items) {
    // A step too large for one graph (many distinct windows on a deep decoder) runs as several
    // graphs over consecutive items. An item's logits depend on it alone (batch invariance), so
    // the split changes no bit; it only costs the weights being read once per graph.
    std::vector<std::vector<float>> out;
    out.reserve(items.size());
    size_t begin = 0;
    while (begin < items.size()) {
        size_t end = begin + 1, runs = 1;
        while (end < items.size()) {
            const size_t more = items[end].cross != items[end - 1].cross ? 1 : 0;
            if (decoder_nodes(runs + more, end + 1 - begin) > kMaxGraphNodes) break;
            runs += more;
            ++end;
        }
        for (auto& logits : run_decoder(items.subspan(begin, end - begin), nullptr)) out.push_back(std::move(logits));
        begin = end;
    }
    return out;
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
    const int64_t d = c.d_model;
    const int H = c.decoder_heads, hd = c.decoder_head_dim();
    const int n_items = static_cast<int>(items.size());
    if (capture && n_items != 1) throw Error(ErrorKind::Internal, "cross_attention: one sequence at a time");
    // Reserve each sequence's cells: a slot holding more than n_past tokens (a reused or
    // reordered one) is cut back first.
    std::vector<BlockCopy> copies;
    std::vector<StepSpan> spans;
    for (const DecodeItem& it : items) {
        if (it.tokens.empty()) throw Error(ErrorKind::Internal, "decode: an item has no tokens");
        if (it.slot < 0 || it.slot >= n_slots_) throw Error(ErrorKind::Internal, "decode: bad slot");
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
    for (const DecodeItem& it : items) {
        token_store.emplace_back(it.tokens.begin(), it.tokens.end());
        spans.push_back({it.slot, it.n_past, token_store.back(), !(capture && capture->all_logits)});
    }
    StepBatch batch = build_step_batch(spans, pages_);
    if (capture && capture->all_logits) {
        batch.outputs.clear();
        for (int i = 0; i < batch.n_tokens(); ++i) batch.outputs.push_back(i);
    }
    const int n_out = static_cast<int>(batch.outputs.size());
    const int64_t N = batch.n_tokens();
    std::vector<ggml_tensor*> captured(c.decoder_layers, nullptr);  // softmaxed kq per layer, [T, n, H]

    // Runs of consecutive items that attend to the same encoded window (a request's beams):
    // cross-attention is one product per run, not per hypothesis.
    struct Run {
        const CrossKv* cross;
        int64_t row, n;
    };
    std::vector<Run> runs;
    int64_t row = 0;
    for (const DecodeItem& it : items) {
        const int64_t n = static_cast<int64_t>(it.tokens.size());
        if (!runs.empty() && runs.back().cross == it.cross) {
            runs.back().n += n;
        } else {
            runs.push_back({it.cross, row, n});
        }
        row += n;
    }

    GraphContext g(graph_buf_, decoder_nodes(runs.size(), batch.segments.size()));
    ggml_context* ctx = g.ctx;
    const BatchInvariantProducts invariant;  // allocated with batch_invariant below
    const StepTensors in = StepTensors::create(ctx, batch, self_kv_);
    ggml_tensor* x =
        ggml_add(ctx, ggml_get_rows(ctx, w_.tok_emb, in.tokens), ggml_get_rows(ctx, w_.dec_pos, in.positions));
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const int64_t T = c.max_source_positions;

    for (int li = 0; li < c.decoder_layers; ++li) {
        const LayerWeights& l = w_.dec_layers[li];
        // Self-attention over the paged cache: one call for every sequence of the step.
        ggml_tensor* h = layer_norm(ctx, x, l.attn_ln_w, l.attn_ln_b, c.layer_norm_eps);
        ggml_tensor* q = ggml_reshape_3d(ctx, linear(ctx, h, l.attn.q_w, l.attn.q_b), hd, H, N);
        ggml_tensor* k = ggml_reshape_3d(ctx, linear(ctx, h, l.attn.k_w, nullptr), hd, H, N);
        ggml_tensor* v = ggml_reshape_3d(ctx, linear(ctx, h, l.attn.v_w, l.attn.v_b), hd, H, N);
        ggml_tensor* att = paged_attention(ctx, q, k, v, self_kv_, li, in, scale);
        x = ggml_add(ctx, x, linear(ctx, att, l.attn.o_w, l.attn.o_b));

        // Cross-attention over each run's encoded audio.
        h = layer_norm(ctx, x, l.cross_ln_w, l.cross_ln_b, c.layer_norm_eps);
        q = linear(ctx, h, l.cross.q_w, l.cross.q_b);
        att = nullptr;
        for (const Run& r : runs) {
            ggml_tensor* K = ggml_reshape_3d(ctx, r.cross->k[li], hd, H, T);
            K = ggml_permute(ctx, K, 0, 2, 1, 3);                               // [hd, T, H]
            ggml_tensor* Vt = ggml_reshape_3d(ctx, r.cross->vt[li], T, hd, H);  // [T, hd, H]
            ggml_tensor* qi = ggml_view_3d(ctx, q, hd, H, r.n, hd * ggml_element_size(q), q->nb[1], r.row * q->nb[1]);
            qi = ggml_permute(ctx, qi, 0, 2, 1, 3);
            // The cache is f16: weight_product asks for f32 accumulation, without which ggml-cuda's
            // cuBLAS path computes in f16 (issue 19: the decoder's first step ~5e-3 off on CUDA).
            ggml_tensor* kq = weight_product(ctx, K, qi);
            kq = ggml_soft_max_ext(ctx, kq, nullptr, scale, 0.0f);  // [T, n, H]
            if (capture) {
                for (const auto& lh : capture->heads) {
                    if (lh.first != li) continue;
                    // The whole (contiguous) tensor stays allocated; heads are read as slabs of it.
                    ggml_set_output(kq);
                    captured[li] = kq;
                }
            }
            ggml_tensor* o = weight_product(ctx, Vt, kq);  // [hd, n, H]
            o = ggml_reshape_2d(ctx, ggml_cont(ctx, ggml_permute(ctx, o, 0, 2, 1, 3)), d, r.n);
            att = att ? ggml_concat(ctx, att, o, 1) : o;
        }
        x = ggml_add(ctx, x, linear(ctx, att, l.cross.o_w, l.cross.o_b));

        h = layer_norm(ctx, x, l.mlp_ln_w, l.mlp_ln_b, c.layer_norm_eps);
        h = gelu_erf(ctx, linear(ctx, h, l.fc1_w, l.fc1_b), l.fc1_w);
        x = ggml_add(ctx, x, linear(ctx, h, l.fc2_w, l.fc2_b));
    }
    x = ggml_get_rows(ctx, x, in.outputs);  // [d, n_out]
    x = layer_norm(ctx, x, w_.dec_ln_w, w_.dec_ln_b, c.layer_norm_eps);
    ggml_tensor* logits = weight_product(ctx, w_.proj_out, x);  // [vocab, n_out]
    ggml_set_output(logits);
    ggml_build_forward_expand(g.graph, logits);
    for (ggml_tensor* kq : captured)
        if (kq) ggml_build_forward_expand(g.graph, kq);

    backend_.alloc_graph(g.graph, /*batch_invariant=*/true);
    in.upload(batch);
    backend_.compute(g.graph);

    std::vector<std::vector<float>> out(n_out, std::vector<float>(c.vocab_size));
    for (int i = 0; i < n_out; ++i)
        ggml_backend_tensor_get(logits, out[i].data(), i * logits->nb[1], c.vocab_size * sizeof(float));
    if (capture) {
        // kq ne [T, n, H]: head h is the contiguous slab of n rows of T at h * nb[2].
        const size_t slab = static_cast<size_t>(N) * c.max_source_positions;
        capture->weights->assign(capture->heads.size(), std::vector<float>(slab));
        for (size_t i = 0; i < capture->heads.size(); ++i) {
            const auto& lh = capture->heads[i];
            ggml_tensor* kq = captured[lh.first];
            ggml_backend_tensor_get(kq, (*capture->weights)[i].data(), lh.second * kq->nb[2], slab * sizeof(float));
        }
    }
    return out;
}

void WhisperRunner::copy_slot(int from, int to, int n) {
    if (from == to) return;  // the next step's n_past cuts it back
    pages_.free(to);
    pages_.fork(from, to);
    pages_.truncate(to, std::min(n, pages_.length(to)));
}

void WhisperRunner::release_slot(int slot) {
    pages_.truncate(slot, 0);
}

}  // namespace parlance::whisper
