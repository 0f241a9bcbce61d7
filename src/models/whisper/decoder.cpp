// Whisper's decoder step graph and the decoder as a LanguageModel (see decoder.h). Shapes are
// ggml ne (innermost first): activations are [d, tokens].
#include "models/whisper/decoder.h"

#include <cmath>

#include "core/dense_attention.h"
#include "core/error.h"
#include "core/gelu.h"
#include "core/graph_ops.h"
#include "core/weight_product.h"
#include "models/whisper/model.h"

namespace parlance::whisper {

CrossKv::CrossKv(const WhisperConfig& c, Backend& backend) {
    ggml_init_params p{ggml_tensor_overhead() * (2 * c.decoder_layers + 2), nullptr, true};
    ctx_ = ggml_init(p);
    const int64_t hd = c.decoder_head_dim(), heads = c.decoder_heads, T = c.max_source_positions;
    packed = cpu_buffer_type(backend.primary_buffer_type()) && cpu_dense_attention_available() &&
             hd % kPackedValueSlice == 0;
    // f16, as whisper.cpp keeps them: every decoder step reads all of them, and f32 made batch-1
    // decode ~12% slower (BENCHMARKS.md); parity still identical (logit error ~4e-4).
    for (int l = 0; l < c.decoder_layers; ++l) {
        if (packed) {
            k.push_back(new_packed_keys(ctx_, hd, heads, T));
            v.push_back(new_packed_values(ctx_, hd, heads, T));
        } else {
            k.push_back(ggml_new_tensor_2d(ctx_, GGML_TYPE_F16, c.d_model, T));
            v.push_back(ggml_new_tensor_2d(ctx_, GGML_TYPE_F16, T, c.d_model));
        }
    }
    buffer_ = ggml_backend_alloc_ctx_tensors(ctx_, backend.primary());
    if (!buffer_) throw Error(ErrorKind::Io, "could not allocate the cross-attention cache");
    // The packed keys' last tile has slots past the last key that the kernel reads (and then
    // ignores): defined bytes, not whatever the allocation held.
    if (packed) ggml_backend_buffer_clear(buffer_, 0);
}

CrossKv::~CrossKv() {
    if (buffer_) ggml_backend_buffer_free(buffer_);
    ggml_free(ctx_);
}

KvSpec decoder_kv_spec(const WhisperConfig& c) {
    return KvSpec{c.decoder_layers, c.d_model, GGML_TYPE_F32};
}

namespace {

// Graph nodes of a step over `segments` sequences in `runs` runs of one encoded window: ~80 per
// layer, up to 20 per run of cross-attention, the self-attention's, and as many leaves (with
// headroom).
size_t decoder_nodes(const WhisperConfig& c, size_t runs, size_t segments, const KvStorage& kv) {
    return static_cast<size_t>(c.decoder_layers) * (80 + 20 * runs + paged_attention_nodes(segments, kv)) + 512;
}

// Runs of consecutive segments that attend to the same encoded window: [first token row, rows).
struct CrossRun {
    const CrossKv* cross;
    int64_t row, n;
};

std::vector<CrossRun> cross_runs(const StepBatch& b) {
    std::vector<CrossRun> runs;
    for (const StepBatch::Segment& g : b.segments) {
        const auto* cross = static_cast<const CrossKv*>(g.state);
        if (!cross) throw Error(ErrorKind::Internal, "whisper decoder: a sequence without its encoded audio");
        if (!runs.empty() && runs.back().cross == cross && runs.back().row + runs.back().n == g.token)
            runs.back().n += g.n_tokens;
        else
            runs.push_back({cross, g.token, g.n_tokens});
    }
    return runs;
}

// Cross-attention as products over the plain layout (devices): each run's per-head K q and
// softmax, then V times the weights. With `captured`, the layer's softmaxed weights stay an output
// ([T, n, H]; the alignment pass reads them).
ggml_tensor* cross_attention_products(ggml_context* ctx, Products products, const WhisperConfig& c,
                                      const std::vector<CrossRun>& runs, ggml_tensor* q, int li,
                                      ggml_tensor** captured) {
    const int H = c.decoder_heads, hd = c.decoder_head_dim();
    const int64_t T = c.max_source_positions;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    ggml_tensor* att = nullptr;
    for (const CrossRun& r : runs) {
        ggml_tensor* K = ggml_reshape_3d(ctx, r.cross->k[li], hd, H, T);
        K = ggml_permute(ctx, K, 0, 2, 1, 3);                              // [hd, T, H]
        ggml_tensor* Vt = ggml_reshape_3d(ctx, r.cross->v[li], T, hd, H);  // [T, hd, H]
        ggml_tensor* qi = ggml_view_3d(ctx, q, hd, H, r.n, hd * ggml_element_size(q), q->nb[1], r.row * q->nb[1]);
        qi = ggml_permute(ctx, qi, 0, 2, 1, 3);
        // The cache is f16: weight_product asks for f32 accumulation, without which ggml-cuda's
        // cuBLAS path computes in f16 (issue 19: the decoder's first step ~5e-3 off on CUDA).
        ggml_tensor* kq = weight_product(ctx, products, K, qi);
        kq = ggml_soft_max_ext(ctx, kq, nullptr, scale, 0.0f);  // [T, n, H]
        if (captured) {
            // The whole (contiguous) tensor stays allocated; heads are read as slabs of it.
            ggml_set_output(kq);
            *captured = kq;
        }
        ggml_tensor* o = weight_product(ctx, products, Vt, kq);  // [hd, n, H]
        o = ggml_reshape_2d(ctx, ggml_cont(ctx, ggml_permute(ctx, o, 0, 2, 1, 3)), c.d_model, r.n);
        att = att ? ggml_concat(ctx, att, o, 1) : o;
    }
    return att;
}

// One graph over the whole batch.
void decoder_graph(const WhisperConfig& c, const WhisperWeights& w, Backend& backend, std::vector<uint8_t>& graph_buf,
                   const StepBatch& batch, KvStorage& kv, std::vector<float>& logits,
                   const CrossAttentionCapture* capture) {
    const int H = c.decoder_heads, hd = c.decoder_head_dim();
    const std::vector<CrossRun> runs = cross_runs(batch);
    const int n_out = static_cast<int>(batch.outputs.size());
    const int64_t N = batch.n_tokens();
    std::vector<ggml_tensor*> captured(c.decoder_layers, nullptr);  // softmaxed kq per layer, [T, n, H]
    // Every window of a step is packed or none is (they come from one backend).
    const bool packed = runs.front().cross->packed;
    for (const CrossRun& r : runs)
        if (r.cross->packed != packed)
            throw Error(ErrorKind::Internal, "whisper decoder: mixed cross-attention layouts");
    std::vector<PackedAttentionArgs> packed_args(packed ? c.decoder_layers : 0);  // read while the graph runs
    // Each captured head's weights, N rows of max_source_positions: the packed kernel writes them
    // straight into these rows while the graph runs; the products' path copies them in after it.
    const size_t slab = static_cast<size_t>(N) * c.max_source_positions;
    if (capture) capture->weights->assign(capture->heads.size(), std::vector<float>(slab));

    GraphContext g(graph_buf, decoder_nodes(c, runs.size(), batch.segments.size(), kv));
    ggml_context* ctx = g.ctx;
    const Products products = Products::BatchInvariant;  // allocated with batch_invariant below
    const StepTensors in = StepTensors::create(ctx, batch, kv);
    ggml_tensor* x =
        ggml_add(ctx, ggml_get_rows(ctx, w.tok_emb, in.tokens), ggml_get_rows(ctx, w.dec_pos, in.positions));
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));

    for (int li = 0; li < c.decoder_layers; ++li) {
        const LayerWeights& l = w.dec_layers[li];
        // Self-attention over the paged cache: one call for every sequence of the step.
        ggml_tensor* h = layer_norm(ctx, x, l.attn_ln_w, l.attn_ln_b, c.layer_norm_eps);
        ggml_tensor* q = ggml_reshape_3d(ctx, linear(ctx, products, h, l.attn.q_w, l.attn.q_b), hd, H, N);
        ggml_tensor* k = ggml_reshape_3d(ctx, linear(ctx, products, h, l.attn.k_w, nullptr), hd, H, N);
        ggml_tensor* v = ggml_reshape_3d(ctx, linear(ctx, products, h, l.attn.v_w, l.attn.v_b), hd, H, N);
        ggml_tensor* att = paged_attention(ctx, q, k, v, kv, li, in, scale);
        x = ggml_add(ctx, x, linear(ctx, products, att, l.attn.o_w, l.attn.o_b));

        // Cross-attention over each run's encoded audio.
        h = layer_norm(ctx, x, l.cross_ln_w, l.cross_ln_b, c.layer_norm_eps);
        q = linear(ctx, products, h, l.cross.q_w, l.cross.q_b);
        if (packed) {
            // Every run of the layer in one op, over the windows packed when they were encoded.
            PackedAttentionArgs& a = packed_args[li];
            a.scale = scale;
            for (const CrossRun& r : runs) a.add_run(r.row, r.n, r.cross->k[li], r.cross->v[li]);
            if (capture) {
                a.probabilities.assign(H, nullptr);
                for (size_t i = 0; i < capture->heads.size(); ++i)
                    if (capture->heads[i].first == li)
                        a.probabilities[capture->heads[i].second] = (*capture->weights)[i].data();
            }
            att = cpu_packed_attention(ctx, q, a);
        } else {
            bool layer_captured = false;
            if (capture)
                for (const auto& lh : capture->heads) layer_captured = layer_captured || lh.first == li;
            att = cross_attention_products(ctx, products, c, runs, q, li, layer_captured ? &captured[li] : nullptr);
        }
        x = ggml_add(ctx, x, linear(ctx, products, att, l.cross.o_w, l.cross.o_b));

        h = layer_norm(ctx, x, l.mlp_ln_w, l.mlp_ln_b, c.layer_norm_eps);
        h = gelu_erf(ctx, linear(ctx, products, h, l.fc1_w, l.fc1_b), l.fc1_w);
        x = ggml_add(ctx, x, linear(ctx, products, h, l.fc2_w, l.fc2_b));
    }
    x = ggml_get_rows(ctx, x, in.outputs);  // [d, n_out]
    x = layer_norm(ctx, x, w.dec_ln_w, w.dec_ln_b, c.layer_norm_eps);
    ggml_tensor* out = weight_product(ctx, products, w.proj_out, x);  // [vocab, n_out]
    ggml_set_output(out);
    ggml_build_forward_expand(g.graph, out);
    for (ggml_tensor* kq : captured)
        if (kq) ggml_build_forward_expand(g.graph, kq);

    backend.alloc_graph(g.graph, /*batch_invariant=*/true);
    in.upload(batch);
    backend.compute(g.graph);

    const size_t first = logits.size();
    logits.resize(first + static_cast<size_t>(n_out) * c.vocab_size);
    ggml_backend_tensor_get(out, logits.data() + first, 0, static_cast<size_t>(n_out) * c.vocab_size * sizeof(float));
    if (capture && !packed) {
        // kq ne [T, n, H]: head h is the contiguous slab of n rows of T at h * nb[2].
        for (size_t i = 0; i < capture->heads.size(); ++i) {
            const auto& lh = capture->heads[i];
            ggml_tensor* kq = captured[lh.first];
            ggml_backend_tensor_get(kq, (*capture->weights)[i].data(), lh.second * kq->nb[2], slab * sizeof(float));
        }
    }
}

}  // namespace

void decoder_step(const WhisperConfig& c, const WhisperWeights& w, Backend& backend, std::vector<uint8_t>& graph_buf,
                  const StepBatch& batch, KvStorage& kv, std::vector<float>& logits,
                  const CrossAttentionCapture* capture) {
    logits.clear();
    if (batch.n_tokens() == 0 || batch.outputs.empty())
        throw Error(ErrorKind::Internal, "whisper decoder: an empty step");
    for (int32_t t : batch.tokens)
        if (t < 0 || t >= c.vocab_size) throw Error(ErrorKind::Internal, "whisper decoder: token id out of range");
    for (int32_t p : batch.positions)
        if (p < 0 || p >= c.max_target_positions)
            throw Error(ErrorKind::TooLarge,
                        "decoder context of " + std::to_string(c.max_target_positions) + " tokens exceeded");
    if (capture) {
        if (batch.segments.size() != 1)
            throw Error(ErrorKind::Internal, "whisper decoder: cross-attention is read for one sequence at a time");
        decoder_graph(c, w, backend, graph_buf, batch, kv, logits, capture);
        return;
    }
    // A step too large for one graph (many distinct windows on a deep decoder) runs as several
    // graphs over consecutive segments; outputs are in token order, so the logits concatenate.
    const size_t n = batch.segments.size();
    size_t begin = 0;
    while (begin < n) {
        size_t end = begin + 1, runs = 1;
        while (end < n) {
            const size_t more = batch.segments[end].state != batch.segments[end - 1].state ? 1 : 0;
            if (decoder_nodes(c, runs + more, end + 1 - begin, kv) > kMaxGraphNodes) break;
            runs += more;
            ++end;
        }
        if (begin == 0 && end == n) {
            decoder_graph(c, w, backend, graph_buf, batch, kv, logits, nullptr);
            return;
        }
        StepBatch part = batch.slice(begin, end);
        if (part.outputs.empty()) {
            // Prompt chunks only: the graph still writes their K/V; one row is computed and dropped.
            part.outputs.push_back(0);
            std::vector<float> dropped;
            decoder_graph(c, w, backend, graph_buf, part, kv, dropped, nullptr);
        } else {
            decoder_graph(c, w, backend, graph_buf, part, kv, logits, nullptr);
        }
        begin = end;
    }
}

WhisperDecoder::WhisperDecoder(const WhisperModel& model, Backend& backend)
    : model_(model), backend_(backend), graph_buf_(graph_context_size()) {}

int WhisperDecoder::vocab_size() const {
    return model_.config.vocab_size;
}
int WhisperDecoder::hidden_size() const {
    return model_.config.d_model;
}
int WhisperDecoder::max_context() const {
    return model_.config.max_target_positions;
}
KvSpec WhisperDecoder::kv_spec() const {
    return decoder_kv_spec(model_.config);
}
const Tokenizer& WhisperDecoder::tokenizer() const {
    return *model_.tokenizer;
}
std::vector<int32_t> WhisperDecoder::stop_ids() const {
    return {model_.tokens.eot};
}
void WhisperDecoder::forward(const StepBatch& batch, KvStorage& kv, std::vector<float>& logits) {
    decoder_step(model_.config, *model_.weights, backend_, graph_buf_, batch, kv, logits);
}
std::string WhisperDecoder::weight_summary() const {
    return model_.weights->type_summary();
}
size_t WhisperDecoder::weight_bytes() const {
    return model_.weights->device_bytes();
}

}  // namespace parlance::whisper
