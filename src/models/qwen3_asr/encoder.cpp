// Qwen3-ASR's audio encoder (see encoder.h).
#include "models/qwen3_asr/encoder.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/backend.h"
#include "core/error.h"
#include "core/gelu.h"
#include "core/graph_ops.h"
#include "core/weight_product.h"

namespace parlance::qwen3_asr {
namespace {

constexpr const char* kTower = "model.audio_tower.";
constexpr const char* kProjector = "model.multi_modal_projector.";

// transformers' SinusoidsPositionEmbedding: [sin(t * inv), cos(t * inv)], inv_i =
// exp(-i * ln(10000) / (d/2 - 1)); rows t = 0 .. length-1, [length][d] row-major.
std::vector<float> sinusoids(int length, int d) {
    const int half = d / 2;
    const double inc = std::log(10000.0) / (half - 1);
    std::vector<float> out(static_cast<size_t>(length) * d);
    for (int t = 0; t < length; ++t)
        for (int i = 0; i < half; ++i) {
            // float32 as torch computes it: inv in f32, the product in f32.
            const float inv = static_cast<float>(std::exp(static_cast<float>(-inc) * static_cast<float>(i)));
            const float x = static_cast<float>(t) * inv;
            out[static_cast<size_t>(t) * d + i] = std::sin(x);
            out[static_cast<size_t>(t) * d + half + i] = std::cos(x);
        }
    return out;
}

}  // namespace

AudioEncoder::AudioEncoder(const AudioEncoderConfig& config, const TensorStore& store, Backend& backend,
                           ggml_type quantize)
    : c_(config), backend_(backend) {
    const int64_t d = c_.d_model, ch = c_.downsample_hidden, ff = c_.ffn_dim;
    // One table, two namings: transformers' (model.audio_tower.*, model.multi_modal_projector.*)
    // and llama.cpp's mmproj (a.*, mm.a.mlp.*), which stores the conv biases as [ch, 1, 1].
    const bool gguf = store.format() == FileFormat::Gguf;
    std::vector<WeightSpec> t;
    auto add = [&](const std::string& hf, const std::string& gg, std::vector<int64_t> shape, WeightKind kind,
                   ggml_tensor** slot) {
        t.push_back({gguf ? gg : hf, std::move(shape), kind, slot, false});
    };
    const std::string p = kTower;
    for (int i = 0; i < 3; ++i) {
        const std::string n = std::to_string(i + 1);
        // Convolution kernels are never quantized: conv2d multiplies them in f32.
        add(p + "conv2d" + n + ".weight", "a.conv2d." + n + ".weight", {ch, i == 0 ? 1 : ch, 3, 3}, WeightKind::Vector,
            &conv_w_[i]);
        add(p + "conv2d" + n + ".bias", "a.conv2d." + n + ".bias",
            gguf ? std::vector<int64_t>{ch, 1, 1} : std::vector<int64_t>{ch}, WeightKind::Vector, &conv_b_[i]);
    }
    add(p + "conv_out.weight", "a.conv_out.weight", {d, ch * c_.conv_freq()}, WeightKind::Matrix, &conv_out_);
    layers_.resize(c_.layers);
    for (int i = 0; i < c_.layers; ++i) {
        Layer& l = layers_[i];
        const std::string h = p + "layers." + std::to_string(i) + ".", g = "a.blk." + std::to_string(i) + ".";
        add(h + "self_attn_layer_norm.weight", g + "ln1.weight", {d}, WeightKind::Vector, &l.ln1_w);
        add(h + "self_attn_layer_norm.bias", g + "ln1.bias", {d}, WeightKind::Vector, &l.ln1_b);
        add(h + "self_attn.q_proj.weight", g + "attn_q.weight", {d, d}, WeightKind::Matrix, &l.q_w);
        add(h + "self_attn.q_proj.bias", g + "attn_q.bias", {d}, WeightKind::Vector, &l.q_b);
        add(h + "self_attn.k_proj.weight", g + "attn_k.weight", {d, d}, WeightKind::Matrix, &l.k_w);
        add(h + "self_attn.k_proj.bias", g + "attn_k.bias", {d}, WeightKind::Vector, &l.k_b);
        add(h + "self_attn.v_proj.weight", g + "attn_v.weight", {d, d}, WeightKind::Matrix, &l.v_w);
        add(h + "self_attn.v_proj.bias", g + "attn_v.bias", {d}, WeightKind::Vector, &l.v_b);
        add(h + "self_attn.out_proj.weight", g + "attn_out.weight", {d, d}, WeightKind::Matrix, &l.o_w);
        add(h + "self_attn.out_proj.bias", g + "attn_out.bias", {d}, WeightKind::Vector, &l.o_b);
        add(h + "final_layer_norm.weight", g + "ln2.weight", {d}, WeightKind::Vector, &l.ln2_w);
        add(h + "final_layer_norm.bias", g + "ln2.bias", {d}, WeightKind::Vector, &l.ln2_b);
        add(h + "fc1.weight", g + "ffn_up.weight", {ff, d}, WeightKind::Matrix, &l.fc1_w);
        add(h + "fc1.bias", g + "ffn_up.bias", {ff}, WeightKind::Vector, &l.fc1_b);
        add(h + "fc2.weight", g + "ffn_down.weight", {d, ff}, WeightKind::Matrix, &l.fc2_w);
        add(h + "fc2.bias", g + "ffn_down.bias", {d}, WeightKind::Vector, &l.fc2_b);
    }
    add(p + "ln_post.weight", "a.post_ln.weight", {d}, WeightKind::Vector, &ln_post_w_);
    add(p + "ln_post.bias", "a.post_ln.bias", {d}, WeightKind::Vector, &ln_post_b_);
    const std::string q = kProjector;
    add(q + "linear_1.weight", "mm.a.mlp.1.weight", {d, d}, WeightKind::Matrix, &proj1_w_);
    add(q + "linear_1.bias", "mm.a.mlp.1.bias", {d}, WeightKind::Vector, &proj1_b_);
    add(q + "linear_2.weight", "mm.a.mlp.2.weight", {c_.output_dim, d}, WeightKind::Matrix, &proj2_w_);
    add(q + "linear_2.bias", "mm.a.mlp.2.bias", {c_.output_dim}, WeightKind::Vector, &proj2_b_);
    // Everything else in an HF checkpoint is the text model's; an mmproj also holds the
    // converter's table of the sinusoidal positions, which the graph computes itself.
    std::vector<std::string> others;
    if (gguf) {
        others.push_back("a.position_embd.weight");
    } else {
        for (const TensorInfo& ti : store.tensors())
            if (ti.name.rfind(kTower, 0) != 0 && ti.name.rfind(kProjector, 0) != 0) others.push_back(ti.name);
    }
    weights_ = std::make_unique<WeightSet>(store, t, backend, quantize, "Qwen3-ASR audio encoder", others);
    graph_buf_.resize(graph_context_size());
}

AudioEncoder::~AudioEncoder() = default;

std::vector<float> AudioEncoder::encode(const Features& f, std::vector<float>* hidden) {
    const Features* one[] = {&f};
    return std::move(encode_batch(one, hidden).front());
}

std::vector<std::vector<float>> AudioEncoder::encode_batch(std::span<const Features* const> clips,
                                                           std::vector<float>* hidden) {
    const int chunk = c_.chunk_frames(), bins = c_.num_mel_bins;
    if (clips.empty()) return {};
    if (hidden && clips.size() != 1)
        throw Error(ErrorKind::Internal, "qwen3_asr encode: the hidden states are kept for one clip only");
    int n_chunks = 0;
    for (const Features* f : clips) {
        if (f->frames <= 0 || f->frames % chunk != 0 || f->valid_frames <= 0 || f->valid_frames > f->frames ||
            f->mel.size() != static_cast<size_t>(bins) * f->frames)
            throw Error(ErrorKind::Internal, "qwen3_asr encode: features are not [n_mels, a multiple of the chunk]");
        n_chunks += f->frames / chunk;
    }
    const int per_chunk = AudioEncoderConfig::chunk_tokens(chunk);  // 13
    // Per clip: its valid tokens (rows of the [d, 13 * chunks] conv output, the clips' chunks one
    // after the other) and its attention windows over them, window = (the clip's longest chunk's
    // tokens) * (n_window_infer / chunk), as transformers sizes it. Windows never span two clips;
    // every window is padded to the batch's widest (one clip: its own).
    std::vector<int32_t> token_rows;
    std::vector<int> clip_tokens, clip_win;
    int first_chunk = 0, win = 0;
    for (const Features* f : clips) {
        int longest = 0, n_clip = 0;
        for (int c = 0; c < f->frames / chunk; ++c) {
            const int frames = std::clamp(f->valid_frames - c * chunk, 0, chunk);
            const int n = AudioEncoderConfig::chunk_tokens(frames);
            longest = std::max(longest, n);
            for (int t = 0; t < n; ++t) token_rows.push_back((first_chunk + c) * per_chunk + t);
            n_clip += n;
        }
        first_chunk += f->frames / chunk;
        clip_tokens.push_back(n_clip);
        clip_win.push_back(longest * (c_.n_window_infer / chunk));
        win = std::max(win, clip_win.back());
    }
    const int n_tokens = static_cast<int>(token_rows.size());
    // The layers' products and norms run on the valid tokens only; attention alone needs the
    // windows padded to `win` (a 10 s clip's 130 tokens are 2 windows of 104: the padding would be
    // 60 % more work in every product). pad_rows: each padded position's token (the padding's: token 0,
    // hidden by the mask); out_rows: each token's padded position.
    std::vector<std::pair<int, int>> window_spans;  // (first token, tokens) of each window
    for (size_t i = 0, first = 0; i < clips.size(); first += clip_tokens[i], ++i)
        for (int at = 0; at < clip_tokens[i]; at += clip_win[i])
            window_spans.emplace_back(static_cast<int>(first) + at, std::min(clip_win[i], clip_tokens[i] - at));
    const int n_windows = static_cast<int>(window_spans.size());
    std::vector<int32_t> pad_rows(static_cast<size_t>(win) * n_windows, 0), out_rows;
    // 0 or -inf: exact in f16, the type flash attention reads (the softmax reads it as well).
    std::vector<ggml_fp16_t> mask(static_cast<size_t>(win) * win * n_windows, ggml_fp32_to_fp16(0.0f));
    const ggml_fp16_t hidden_key = ggml_fp32_to_fp16(-std::numeric_limits<float>::infinity());
    for (int w = 0; w < n_windows; ++w) {
        const auto [first, len] = window_spans[static_cast<size_t>(w)];
        for (int j = 0; j < len; ++j) {
            pad_rows[static_cast<size_t>(w) * win + j] = first + j;
            out_rows.push_back(w * win + j);
        }
        for (int i = 0; i < win; ++i)  // every query row: keys past the window's tokens hidden
            for (int j = len; j < win; ++j) mask[(static_cast<size_t>(w) * win + i) * win + j] = hidden_key;
    }
    // The chunks' log-mel in the convolutions' layout, [chunk, bins, 1, chunks] (time innermost, as
    // the conv's width): each clip's [bins][frames] cut at every `chunk` frames.
    std::vector<float> chunks(static_cast<size_t>(chunk) * bins * n_chunks);
    {
        size_t c0 = 0;
        for (const Features* f : clips) {
            const int n = f->frames / chunk;
            for (int c = 0; c < n; ++c)
                for (int b = 0; b < bins; ++b)
                    std::copy_n(f->mel.begin() + static_cast<size_t>(b) * f->frames + static_cast<size_t>(c) * chunk,
                                chunk, chunks.begin() + ((c0 + c) * bins + b) * chunk);
            c0 += static_cast<size_t>(n);
        }
    }
    const int64_t d = c_.d_model, H = c_.heads, hd = c_.head_dim(), P = static_cast<int64_t>(win) * n_windows;

    GraphContext gc(graph_buf_, static_cast<size_t>(c_.layers) * 48 + 128);
    ggml_context* ctx = gc.ctx;
    ggml_cgraph* g = gc.graph;
    ggml_tensor* mel = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, chunk, bins, 1, n_chunks);
    ggml_tensor* pos = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, d, per_chunk);
    ggml_tensor* rows_in = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_tokens);
    ggml_tensor* rows_pad = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, P);
    ggml_tensor* rows_out = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_tokens);
    ggml_tensor* mask_in = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, win, win, 1, n_windows);
    for (ggml_tensor* x : {mel, pos, rows_in, rows_pad, rows_out, mask_in}) ggml_set_input(x);

    ggml_tensor* x = mel;
    for (int i = 0; i < 3; ++i) {
        x = conv2d(ctx, conv_w_[i], x, /*stride=*/2, /*padding=*/1);  // [time, freq, ch, chunks]
        x = ggml_add(ctx, x, ggml_reshape_4d(ctx, conv_b_[i], 1, 1, c_.downsample_hidden, 1));
        x = gelu_erf(ctx, x, conv_w_[i]);
    }
    // From here on the CPU multiplies f16 and f32 weights with the multi-column kernel, as Whisper's
    // encoder does: ggml's BLAS path converts each f16 weight matrix to f32 before every product
    // (about a tenth of the encoder's time), and OpenBLAS's sgemm is no faster than the kernel at
    // a clip's hundreds of columns. (The convolutions above keep BLAS: their first has 9 inputs
    // per output.) Quantized weights keep ggml's products, devices their own.
    const Products products = kernel_takes_weights(conv_out_) ? Products::BatchInvariant : Products::Fast;
    // [13, freq, ch, chunks] -> per (time, chunk) the vector ch * freq + f, as transformers flattens.
    x = ggml_cont(ctx, ggml_permute(ctx, x, 2, 0, 1, 3));  // [freq, ch, 13, chunks]
    x = ggml_reshape_2d(ctx, x, x->ne[0] * x->ne[1], x->ne[2] * x->ne[3]);
    x = linear(ctx, products, x, conv_out_);  // [d, 13 * chunks]
    x = ggml_add(ctx, ggml_reshape_3d(ctx, x, d, per_chunk, n_chunks), pos);
    x = ggml_get_rows(ctx, ggml_reshape_2d(ctx, x, d, static_cast<int64_t>(per_chunk) * n_chunks),
                      rows_in);  // [d, tokens]

    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    // [d, tokens] -> [hd, H, win, windows], padded positions holding token 0's row (masked).
    const auto windows = [&](ggml_tensor* t) {
        return ggml_reshape_4d(ctx, ggml_get_rows(ctx, t, rows_pad), hd, H, win, n_windows);
    };
    // A device's throughput mode attends in one flash-attention call per layer (tensor cores; the
    // exact-f32 form is four copies, two products and a softmax per layer).
    const bool flash = encoder_flash_attention(conv_out_);
    for (const Layer& l : layers_) {
        ggml_tensor* h = layer_norm(ctx, x, l.ln1_w, l.ln1_b, c_.layer_norm_eps);
        ggml_tensor* q = windows(linear(ctx, products, h, l.q_w, l.q_b));
        ggml_tensor* k = windows(linear(ctx, products, h, l.k_w, l.k_b));
        ggml_tensor* v = windows(linear(ctx, products, h, l.v_w, l.v_b));
        ggml_tensor* o;  // [hd, H, win, windows]
        if (flash) {
            o = flash_block_attention(ctx, q, k, v, mask_in, scale);
        } else {
            q = ggml_permute(ctx, q, 0, 2, 1, 3);
            k = ggml_permute(ctx, k, 0, 2, 1, 3);
            v = ggml_cont(ctx, ggml_permute(ctx, v, 1, 2, 0, 3));  // [win, hd, H, windows]
            ggml_tensor* kq = f32_product(ctx, k, q);              // [win keys, win queries, H, windows]
            kq = ggml_soft_max_ext(ctx, kq, mask_in, scale, 0.0f);
            o = ggml_cont(ctx, ggml_permute(ctx, f32_product(ctx, v, kq), 0, 2, 1, 3));
        }
        o = ggml_reshape_2d(ctx, o, d, P);
        o = ggml_get_rows(ctx, o, rows_out);  // [d, tokens]
        x = ggml_add(ctx, x, linear(ctx, products, o, l.o_w, l.o_b));
        h = layer_norm(ctx, x, l.ln2_w, l.ln2_b, c_.layer_norm_eps);
        h = gelu_erf(ctx, linear(ctx, products, h, l.fc1_w, l.fc1_b), l.fc1_w);
        x = ggml_add(ctx, x, linear(ctx, products, h, l.fc2_w, l.fc2_b));
    }
    ggml_tensor* enc = layer_norm(ctx, x, ln_post_w_, ln_post_b_, c_.layer_norm_eps);
    ggml_tensor* emb = linear(ctx, products, gelu_erf(ctx, linear(ctx, products, enc, proj1_w_, proj1_b_), proj1_w_),
                              proj2_w_, proj2_b_);
    ggml_set_output(enc);
    ggml_set_output(emb);
    ggml_build_forward_expand(g, enc);
    ggml_build_forward_expand(g, emb);

    backend_.alloc_graph(g);
    ggml_backend_tensor_set(mel, chunks.data(), 0, chunks.size() * sizeof(float));
    const std::vector<float> p = sinusoids(per_chunk, static_cast<int>(d));
    ggml_backend_tensor_set(pos, p.data(), 0, p.size() * sizeof(float));
    ggml_backend_tensor_set(rows_in, token_rows.data(), 0, token_rows.size() * sizeof(int32_t));
    ggml_backend_tensor_set(rows_pad, pad_rows.data(), 0, pad_rows.size() * sizeof(int32_t));
    ggml_backend_tensor_set(rows_out, out_rows.data(), 0, out_rows.size() * sizeof(int32_t));
    ggml_backend_tensor_set(mask_in, mask.data(), 0, mask.size() * sizeof(ggml_fp16_t));
    backend_.compute(g);
    if (hidden) {
        hidden->resize(static_cast<size_t>(d) * n_tokens);
        ggml_backend_tensor_get(enc, hidden->data(), 0, hidden->size() * sizeof(float));
    }
    std::vector<std::vector<float>> out;
    size_t at = 0;
    for (const int n : clip_tokens) {
        out.emplace_back(static_cast<size_t>(c_.output_dim) * n);
        ggml_backend_tensor_get(emb, out.back().data(), at * sizeof(float), out.back().size() * sizeof(float));
        at += out.back().size();
    }
    return out;
}

}  // namespace parlance::qwen3_asr
