// Whisper encoder and decoder graphs (see runner.h). Shapes are written as ggml ne (innermost
// first): activations are [d, tokens], so a PyTorch [tokens, d] row is one ggml column.
#include "models/whisper/runner.h"

#include <cmath>
#include <cstring>

#include "core/error.h"

namespace parlance::whisper {
namespace {

ggml_tensor* layer_norm(ggml_context* ctx, ggml_tensor* x, ggml_tensor* w, ggml_tensor* b, float eps) {
    return ggml_add(ctx, ggml_mul(ctx, ggml_norm(ctx, x, eps), w), b);
}

ggml_tensor* linear(ggml_context* ctx, ggml_tensor* x, ggml_tensor* w, ggml_tensor* b) {
    ggml_tensor* y = ggml_mul_mat(ctx, w, x);
    return b ? ggml_add(ctx, y, b) : y;
}

// 1-D convolution with "same"-style padding 1 and kernel 3, computed exactly in f32:
// x ne [T, C_in, B], kernel ne [3, C_in, C_out] -> ne [C_out, T_out * B].
ggml_tensor* conv1d(ggml_context* ctx, ggml_tensor* kernel, ggml_tensor* x, int stride) {
    ggml_tensor* cols = ggml_im2col(ctx, kernel, x, stride, 0, 1, 0, 1, 0, false, GGML_TYPE_F32);
    ggml_tensor* k2 = ggml_reshape_2d(ctx, kernel, kernel->ne[0] * kernel->ne[1], kernel->ne[2]);
    ggml_tensor* c2 = ggml_reshape_2d(ctx, cols, cols->ne[0], cols->ne[1] * cols->ne[2]);
    return ggml_mul_mat(ctx, k2, c2);
}

struct GraphContext {
    explicit GraphContext(std::vector<uint8_t>& buf) {
        ggml_init_params p{buf.size(), buf.data(), true};
        ctx = ggml_init(p);
        graph = ggml_new_graph_custom(ctx, kMaxGraphNodes, false);
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

SelfKvCache::SelfKvCache(const WhisperConfig& c, Backend& backend, int n_slots) : n_slots_(n_slots) {
    ggml_init_params p{ggml_tensor_overhead() * (2 * c.decoder_layers + 2), nullptr, true};
    ctx_ = ggml_init(p);
    for (int l = 0; l < c.decoder_layers; ++l) {
        k.push_back(ggml_new_tensor_3d(ctx_, GGML_TYPE_F32, c.d_model, c.max_target_positions, n_slots));
        // V transposed (a row of positions per channel): a step reads it as the left operand of
        // attention·V in place, where the [d, positions] layout needed a growing copy each step
        // (~15 % of base's decode time at 200 tokens).
        v.push_back(ggml_new_tensor_3d(ctx_, GGML_TYPE_F32, c.max_target_positions, c.d_model, n_slots));
    }
    buffer_ = ggml_backend_alloc_ctx_tensors(ctx_, backend.primary());
    if (!buffer_) throw Error(ErrorKind::Io, "could not allocate the decoder cache");
    ggml_backend_buffer_clear(buffer_, 0);
}

SelfKvCache::~SelfKvCache() {
    if (buffer_) ggml_backend_buffer_free(buffer_);
    ggml_free(ctx_);
}

size_t SelfKvCache::bytes() const { return buffer_ ? ggml_backend_buffer_get_size(buffer_) : 0; }

WhisperRunner::WhisperRunner(const WhisperConfig& config, const WhisperWeights& weights,
                             Backend& backend, int max_sequences)
    : config_(config), w_(weights), backend_(backend), kv_(config, backend, max_sequences),
      graph_buf_(graph_context_size()) {}

void WhisperRunner::encode(std::span<const std::vector<float>> mels,
                           std::span<CrossKv* const> crosses,
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

    GraphContext g(graph_buf_);
    ggml_context* ctx = g.ctx;
    ggml_tensor* mel = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, frames, c.n_mels, B);
    ggml_set_input(mel);

    ggml_tensor* x = conv1d(ctx, w_.conv1_w, mel, 1);  // [d, frames*B]
    x = ggml_gelu_erf(ctx, ggml_add(ctx, x, w_.conv1_b));
    x = ggml_cont(ctx, ggml_transpose(ctx, ggml_reshape_3d(ctx, x, d, frames, B)));  // [frames, d, B]?
    // transpose swaps the first two dims: [d, frames, B] -> [frames, d, B]
    x = conv1d(ctx, w_.conv2_w, x, 2);  // [d, T*B]
    x = ggml_gelu_erf(ctx, ggml_add(ctx, x, w_.conv2_b));
    x = ggml_add(ctx, ggml_reshape_3d(ctx, x, d, T, B), w_.enc_pos);  // [d, T, B]

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
        ggml_tensor* vt = ggml_cont(ctx, ggml_permute(ctx, ggml_reshape_4d(ctx, v, hd, H, T, B), 1, 2, 0, 3));  // [T, hd, H, B]
        ggml_tensor* kq = ggml_mul_mat(ctx, k, q);                   // [T, T, H, B]
        kq = ggml_soft_max_ext(ctx, kq, nullptr, scale, 0.0f);
        ggml_tensor* o = ggml_mul_mat(ctx, vt, kq);                  // [hd, T, H, B]
        o = ggml_cont(ctx, ggml_permute(ctx, o, 0, 2, 1, 3));        // [hd, H, T, B]
        o = ggml_reshape_3d(ctx, o, d, T, B);
        x = ggml_add(ctx, x, linear(ctx, o, l.attn.o_w, l.attn.o_b));

        h = layer_norm(ctx, x, l.mlp_ln_w, l.mlp_ln_b, c.layer_norm_eps);
        h = ggml_gelu_erf(ctx, linear(ctx, h, l.fc1_w, l.fc1_b));
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

std::vector<std::vector<float>> WhisperRunner::decode(std::span<const DecodeItem> items) {
    return run_decoder(items, nullptr);
}

std::vector<std::vector<float>> WhisperRunner::cross_attention(const CrossKv& cross, int slot,
                                                               std::span<const int> tokens,
                                                               std::span<const std::pair<int, int>> heads,
                                                               std::vector<std::vector<float>>* logits) {
    for (const auto& lh : heads)
        if (lh.first < 0 || lh.first >= config_.decoder_layers || lh.second < 0 ||
            lh.second >= config_.decoder_heads)
            throw Error(ErrorKind::InvalidArgument,
                        "alignment head (" + std::to_string(lh.first) + ", " + std::to_string(lh.second) +
                            ") is outside the decoder's " + std::to_string(config_.decoder_layers) +
                            " layers of " + std::to_string(config_.decoder_heads) + " heads");
    DecodeItem item{slot, &cross, std::vector<int>(tokens.begin(), tokens.end()), 0};
    std::vector<std::vector<float>> weights;
    Capture capture{heads, &weights, logits != nullptr};
    std::vector<std::vector<float>> out = run_decoder(std::span<const DecodeItem>(&item, 1), &capture);
    if (logits) *logits = std::move(out);
    return weights;
}

std::vector<std::vector<float>> WhisperRunner::run_decoder(std::span<const DecodeItem> items,
                                                           const Capture* capture) {
    const WhisperConfig& c = config_;
    const int64_t d = c.d_model;
    const int H = c.decoder_heads, hd = c.decoder_head_dim();
    const int n_items = static_cast<int>(items.size());
    std::vector<int32_t> ids, pos, last;
    for (const DecodeItem& it : items) {
        if (it.tokens.empty()) throw Error(ErrorKind::Internal, "decode: an item has no tokens");
        if (it.slot < 0 || it.slot >= kv_.n_slots()) throw Error(ErrorKind::Internal, "decode: bad slot");
        if (it.n_past + static_cast<int>(it.tokens.size()) > c.max_target_positions)
            throw Error(ErrorKind::TooLarge, "decoder context of " +
                                                 std::to_string(c.max_target_positions) +
                                                 " tokens exceeded");
        for (size_t i = 0; i < it.tokens.size(); ++i) {
            if (it.tokens[i] < 0 || it.tokens[i] >= c.vocab_size)
                throw Error(ErrorKind::Internal, "decode: token id out of range");
            ids.push_back(it.tokens[i]);
            pos.push_back(it.n_past + static_cast<int>(i));
            if (capture && capture->all_logits) last.push_back(static_cast<int32_t>(ids.size()) - 1);
        }
        if (!(capture && capture->all_logits)) last.push_back(static_cast<int32_t>(ids.size()) - 1);
    }
    if (capture && n_items != 1) throw Error(ErrorKind::Internal, "cross_attention: one sequence at a time");
    const int n_out = static_cast<int>(last.size());
    std::vector<ggml_tensor*> captured(c.decoder_layers, nullptr);  // softmaxed kq per layer, [T, n, H]
    const int64_t N = static_cast<int64_t>(ids.size());

    GraphContext g(graph_buf_);
    ggml_context* ctx = g.ctx;
    ggml_tensor* t_ids = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, N);
    ggml_tensor* t_pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, N);
    ggml_tensor* t_last = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_out);
    ggml_set_input(t_ids);
    ggml_set_input(t_pos);
    ggml_set_input(t_last);

    ggml_tensor* x = ggml_add(ctx, ggml_get_rows(ctx, w_.tok_emb, t_ids), ggml_get_rows(ctx, w_.dec_pos, t_pos));
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));

    for (int li = 0; li < c.decoder_layers; ++li) {
        const LayerWeights& l = w_.dec_layers[li];
        // Self-attention over each item's cache.
        ggml_tensor* h = layer_norm(ctx, x, l.attn_ln_w, l.attn_ln_b, c.layer_norm_eps);
        ggml_tensor* q = linear(ctx, h, l.attn.q_w, l.attn.q_b);
        ggml_tensor* k = linear(ctx, h, l.attn.k_w, nullptr);
        ggml_tensor* v = linear(ctx, h, l.attn.v_w, l.attn.v_b);
        ggml_tensor* att = nullptr;
        int64_t off = 0;
        for (const DecodeItem& it : items) {
            const int64_t n = static_cast<int64_t>(it.tokens.size()), L = it.n_past + n;
            ggml_tensor* kc = kv_.k[li];
            ggml_tensor* vc = kv_.v[li];
            const size_t slot_off = static_cast<size_t>(it.slot) * kc->nb[2];
            const size_t slot_voff = static_cast<size_t>(it.slot) * vc->nb[2];
            ggml_build_forward_expand(g.graph, ggml_cpy(ctx, ggml_view_2d(ctx, k, d, n, k->nb[1], off * k->nb[1]),
                ggml_view_2d(ctx, kc, d, n, kc->nb[1], slot_off + it.n_past * kc->nb[1])));
            ggml_build_forward_expand(g.graph,
                ggml_cpy(ctx, ggml_transpose(ctx, ggml_view_2d(ctx, v, d, n, v->nb[1], off * v->nb[1])),
                         ggml_view_2d(ctx, vc, n, d, vc->nb[1], slot_voff + it.n_past * vc->nb[0])));
            ggml_tensor* K = ggml_view_3d(ctx, kc, hd, H, L, hd * ggml_element_size(kc), kc->nb[1], slot_off);
            K = ggml_permute(ctx, K, 0, 2, 1, 3);  // [hd, L, H]
            ggml_tensor* Vt = ggml_view_3d(ctx, vc, L, hd, H, vc->nb[1], hd * vc->nb[1], slot_voff);  // [L, hd, H]
            ggml_tensor* qi = ggml_view_3d(ctx, q, hd, H, n, hd * ggml_element_size(q), q->nb[1], off * q->nb[1]);
            qi = ggml_permute(ctx, qi, 0, 2, 1, 3);  // [hd, n, H]
            ggml_tensor* kq = ggml_mul_mat(ctx, K, qi);  // [L, n, H]
            if (n == 1) {
                kq = ggml_soft_max_ext(ctx, kq, nullptr, scale, 0.0f);  // one new token sees every cached one
            } else {
                kq = ggml_soft_max(ctx, ggml_diag_mask_inf(ctx, ggml_scale(ctx, kq, scale), it.n_past));
            }
            ggml_tensor* o = ggml_mul_mat(ctx, Vt, kq);  // [hd, n, H]
            o = ggml_reshape_2d(ctx, ggml_cont(ctx, ggml_permute(ctx, o, 0, 2, 1, 3)), d, n);
            att = att ? ggml_concat(ctx, att, o, 1) : o;
            off += n;
        }
        x = ggml_add(ctx, x, linear(ctx, att, l.attn.o_w, l.attn.o_b));

        // Cross-attention over each item's encoded audio.
        h = layer_norm(ctx, x, l.cross_ln_w, l.cross_ln_b, c.layer_norm_eps);
        q = linear(ctx, h, l.cross.q_w, l.cross.q_b);
        att = nullptr;
        off = 0;
        const int64_t T = c.max_source_positions;
        for (const DecodeItem& it : items) {
            const int64_t n = static_cast<int64_t>(it.tokens.size());
            ggml_tensor* K = ggml_reshape_3d(ctx, it.cross->k[li], hd, H, T);
            K = ggml_permute(ctx, K, 0, 2, 1, 3);                         // [hd, T, H]
            ggml_tensor* Vt = ggml_reshape_3d(ctx, it.cross->vt[li], T, hd, H);  // [T, hd, H]
            ggml_tensor* qi = ggml_view_3d(ctx, q, hd, H, n, hd * ggml_element_size(q), q->nb[1], off * q->nb[1]);
            qi = ggml_permute(ctx, qi, 0, 2, 1, 3);
            ggml_tensor* kq = ggml_soft_max_ext(ctx, ggml_mul_mat(ctx, K, qi), nullptr, scale, 0.0f);  // [T, n, H]
            if (capture) {
                for (const auto& lh : capture->heads) {
                    if (lh.first != li) continue;
                    // The whole (contiguous) tensor stays allocated; heads are read as slabs of it.
                    ggml_set_output(kq);
                    captured[li] = kq;
                }
            }
            ggml_tensor* o = ggml_mul_mat(ctx, Vt, kq);  // [hd, n, H]
            o = ggml_reshape_2d(ctx, ggml_cont(ctx, ggml_permute(ctx, o, 0, 2, 1, 3)), d, n);
            att = att ? ggml_concat(ctx, att, o, 1) : o;
            off += n;
        }
        x = ggml_add(ctx, x, linear(ctx, att, l.cross.o_w, l.cross.o_b));

        h = layer_norm(ctx, x, l.mlp_ln_w, l.mlp_ln_b, c.layer_norm_eps);
        h = ggml_gelu_erf(ctx, linear(ctx, h, l.fc1_w, l.fc1_b));
        x = ggml_add(ctx, x, linear(ctx, h, l.fc2_w, l.fc2_b));
    }
    x = ggml_get_rows(ctx, x, t_last);  // [d, n_out]
    x = layer_norm(ctx, x, w_.dec_ln_w, w_.dec_ln_b, c.layer_norm_eps);
    ggml_tensor* logits = ggml_mul_mat(ctx, w_.proj_out, x);  // [vocab, n_out]
    ggml_set_output(logits);
    ggml_build_forward_expand(g.graph, logits);
    for (ggml_tensor* kq : captured)
        if (kq) ggml_build_forward_expand(g.graph, kq);

    backend_.alloc_graph(g.graph, /*batch_invariant=*/true);
    ggml_backend_tensor_set(t_ids, ids.data(), 0, ids.size() * sizeof(int32_t));
    ggml_backend_tensor_set(t_pos, pos.data(), 0, pos.size() * sizeof(int32_t));
    ggml_backend_tensor_set(t_last, last.data(), 0, last.size() * sizeof(int32_t));
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
    if (from == to || n <= 0) return;
    GraphContext g(graph_buf_);
    ggml_context* ctx = g.ctx;
    for (int li = 0; li < config_.decoder_layers; ++li) {
        ggml_tensor* k = kv_.k[li];  // [d, positions]: the first n rows
        ggml_build_forward_expand(g.graph,
            ggml_cpy(ctx, ggml_view_2d(ctx, k, k->ne[0], n, k->nb[1], from * k->nb[2]),
                     ggml_view_2d(ctx, k, k->ne[0], n, k->nb[1], to * k->nb[2])));
        ggml_tensor* v = kv_.v[li];  // [positions, d]: the first n columns
        ggml_build_forward_expand(g.graph,
            ggml_cpy(ctx, ggml_view_2d(ctx, v, n, v->ne[1], v->nb[1], from * v->nb[2]),
                     ggml_view_2d(ctx, v, n, v->ne[1], v->nb[1], to * v->nb[2])));
    }
    backend_.alloc_graph(g.graph);
    backend_.compute(g.graph);
}

}  // namespace parlance::whisper
