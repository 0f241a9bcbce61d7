// Whisper weight binding (see weights.h). All tensor names of both naming schemes live here.
#include "models/whisper/weights.h"

#include <cstring>
#include <map>
#include <set>

#include <ggml-cpu.h>

#include "core/error.h"

namespace parlance::whisper {
namespace {

enum class Kind { Linear, Dense };  // Linear: may be quantized; Dense: kept/converted to f32

struct Binding {
    ggml_tensor** slot;
    std::string hf;                // HF transformers name
    std::string cpp;               // whisper.cpp (OpenAI) name
    std::vector<int64_t> shape;    // expected PyTorch shape
    Kind kind;
    bool optional = false;
};

ggml_type quantize_type(const std::string& name) {
    if (name.empty()) return GGML_TYPE_COUNT;
    if (name == "f32") return GGML_TYPE_F32;
    if (name == "f16") return GGML_TYPE_F16;
    if (name == "q8_0") return GGML_TYPE_Q8_0;
    if (name == "q5_k") return GGML_TYPE_Q5_K;
    if (name == "q4_k") return GGML_TYPE_Q4_K;
    throw Error(ErrorKind::InvalidArgument,
                "unknown quantization '" + name + "' (f32|f16|q8_0|q5_k|q4_k)");
}

std::string shape_str(const std::vector<int64_t>& s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}

// Converts one stored tensor to f32 values.
std::vector<float> to_f32(const TensorInfo& t) {
    std::vector<float> out(static_cast<size_t>(t.elements()));
    const auto* traits = ggml_get_type_traits(t.type);
    if (t.type == GGML_TYPE_F32) {
        std::memcpy(out.data(), t.data, out.size() * sizeof(float));
    } else if (traits && traits->to_float) {
        traits->to_float(t.data, out.data(), static_cast<int64_t>(out.size()));
    } else {
        throw Error(ErrorKind::Unsupported, t.file + ": tensor " + t.name + " has type " +
                                                ggml_type_name(t.type) + ", which cannot be read");
    }
    return out;
}

}  // namespace

WhisperWeights::WhisperWeights(const WhisperConfig& c, const TensorStore& store, Backend& backend,
                               const WeightOptions& options) {
    const int64_t d = c.d_model;
    std::vector<Binding> table;
    auto add = [&](ggml_tensor** slot, std::string hf, std::string cpp, std::vector<int64_t> shape,
                   Kind kind, bool optional = false) {
        table.push_back({slot, std::move(hf), std::move(cpp), std::move(shape), kind, optional});
    };
    add(&conv1_w, "model.encoder.conv1.weight", "encoder.conv1.weight", {d, c.n_mels, 3}, Kind::Linear);
    add(&conv1_b, "model.encoder.conv1.bias", "encoder.conv1.bias", {d}, Kind::Dense);
    add(&conv2_w, "model.encoder.conv2.weight", "encoder.conv2.weight", {d, d, 3}, Kind::Linear);
    add(&conv2_b, "model.encoder.conv2.bias", "encoder.conv2.bias", {d}, Kind::Dense);
    add(&enc_pos, "model.encoder.embed_positions.weight", "encoder.positional_embedding",
        {c.max_source_positions, d}, Kind::Dense);
    add(&enc_ln_w, "model.encoder.layer_norm.weight", "encoder.ln_post.weight", {d}, Kind::Dense);
    add(&enc_ln_b, "model.encoder.layer_norm.bias", "encoder.ln_post.bias", {d}, Kind::Dense);
    add(&tok_emb, "model.decoder.embed_tokens.weight", "decoder.token_embedding.weight",
        {c.vocab_size, d}, Kind::Dense);
    add(&dec_pos, "model.decoder.embed_positions.weight", "decoder.positional_embedding",
        {c.max_target_positions, d}, Kind::Dense);
    add(&dec_ln_w, "model.decoder.layer_norm.weight", "decoder.ln.weight", {d}, Kind::Dense);
    add(&dec_ln_b, "model.decoder.layer_norm.bias", "decoder.ln.bias", {d}, Kind::Dense);
    add(&proj_out, "proj_out.weight", "", {c.vocab_size, d}, Kind::Dense, /*optional=*/true);

    auto add_attention = [&](AttentionWeights& a, const std::string& hf, const std::string& cpp) {
        add(&a.q_w, hf + ".q_proj.weight", cpp + ".query.weight", {d, d}, Kind::Linear);
        add(&a.q_b, hf + ".q_proj.bias", cpp + ".query.bias", {d}, Kind::Dense);
        add(&a.k_w, hf + ".k_proj.weight", cpp + ".key.weight", {d, d}, Kind::Linear);
        add(&a.v_w, hf + ".v_proj.weight", cpp + ".value.weight", {d, d}, Kind::Linear);
        add(&a.v_b, hf + ".v_proj.bias", cpp + ".value.bias", {d}, Kind::Dense);
        add(&a.o_w, hf + ".out_proj.weight", cpp + ".out.weight", {d, d}, Kind::Linear);
        add(&a.o_b, hf + ".out_proj.bias", cpp + ".out.bias", {d}, Kind::Dense);
    };
    auto add_layer = [&](LayerWeights& l, const std::string& hf, const std::string& cpp, int ffn,
                         bool decoder) {
        add(&l.attn_ln_w, hf + ".self_attn_layer_norm.weight", cpp + ".attn_ln.weight", {d}, Kind::Dense);
        add(&l.attn_ln_b, hf + ".self_attn_layer_norm.bias", cpp + ".attn_ln.bias", {d}, Kind::Dense);
        add_attention(l.attn, hf + ".self_attn", cpp + ".attn");
        if (decoder) {
            add(&l.cross_ln_w, hf + ".encoder_attn_layer_norm.weight", cpp + ".cross_attn_ln.weight",
                {d}, Kind::Dense);
            add(&l.cross_ln_b, hf + ".encoder_attn_layer_norm.bias", cpp + ".cross_attn_ln.bias",
                {d}, Kind::Dense);
            add_attention(l.cross, hf + ".encoder_attn", cpp + ".cross_attn");
        }
        add(&l.mlp_ln_w, hf + ".final_layer_norm.weight", cpp + ".mlp_ln.weight", {d}, Kind::Dense);
        add(&l.mlp_ln_b, hf + ".final_layer_norm.bias", cpp + ".mlp_ln.bias", {d}, Kind::Dense);
        add(&l.fc1_w, hf + ".fc1.weight", cpp + ".mlp.0.weight", {ffn, d}, Kind::Linear);
        add(&l.fc1_b, hf + ".fc1.bias", cpp + ".mlp.0.bias", {ffn}, Kind::Dense);
        add(&l.fc2_w, hf + ".fc2.weight", cpp + ".mlp.2.weight", {d, ffn}, Kind::Linear);
        add(&l.fc2_b, hf + ".fc2.bias", cpp + ".mlp.2.bias", {d}, Kind::Dense);
    };
    enc_layers.resize(c.encoder_layers);
    dec_layers.resize(c.decoder_layers);
    for (int i = 0; i < c.encoder_layers; ++i)
        add_layer(enc_layers[i], "model.encoder.layers." + std::to_string(i),
                  "encoder.blocks." + std::to_string(i), c.encoder_ffn, false);
    for (int i = 0; i < c.decoder_layers; ++i)
        add_layer(dec_layers[i], "model.decoder.layers." + std::to_string(i),
                  "decoder.blocks." + std::to_string(i), c.decoder_ffn, true);

    const bool cpp_names = store.format() == FileFormat::WhisperCpp;
    const ggml_type target = quantize_type(options.quantize);

    // Resolve every binding to a stored tensor, validating its shape.
    struct Resolved {
        const Binding* binding;
        const TensorInfo* info;
        ggml_type type;
    };
    std::vector<Resolved> resolved;
    std::set<std::string> used;
    for (const Binding& b : table) {
        const std::string& name = cpp_names ? b.cpp : b.hf;
        const TensorInfo* info = name.empty() ? nullptr : store.find(name);
        if (!info) {
            if (b.optional) continue;
            std::string file = store.files().empty() ? "model" : store.files().front().string();
            throw Error(ErrorKind::InvalidModel, file + ": missing tensor " + name);
        }
        used.insert(name);
        // whisper.cpp stores conv biases as [d, 1]; accept any shape with the right element count
        // for 1-D parameters, exact shapes otherwise.
        bool ok = info->shape == b.shape;
        if (!ok && b.shape.size() == 1) ok = info->elements() == b.shape[0];
        if (!ok)
            throw Error(ErrorKind::InvalidModel, info->file + ": tensor " + name + " has shape " +
                                                     shape_str(info->shape) + ", expected " +
                                                     shape_str(b.shape) + " from the config");
        ggml_type type = info->type;
        if (b.kind == Kind::Dense) {
            // Embeddings may stay f16/bf16 (get_rows and the output product read them); the
            // small vectors become f32 so element-wise ops see one type.
            if (!(b.slot == &tok_emb || b.slot == &proj_out) || ggml_is_quantized(type))
                type = GGML_TYPE_F32;
        } else if (target != GGML_TYPE_COUNT && b.shape.size() == 2 &&
                   b.shape[1] % ggml_blck_size(target) == 0) {
            type = target;
        } else if (ggml_is_quantized(type) && b.shape.size() != 2) {
            type = GGML_TYPE_F32;  // convolutions need a float kernel
        }
        resolved.push_back({&b, info, type});
    }
    for (const TensorInfo& t : store.tensors()) {
        if (!used.count(t.name))
            throw Error(ErrorKind::InvalidModel,
                        t.file + ": unexpected tensor " + t.name + " (not part of the Whisper layout)");
    }

    ggml_init_params params{ggml_tensor_overhead() * (resolved.size() + 8), nullptr, true};
    ctx_ = ggml_init(params);
    for (Resolved& r : resolved) {
        std::vector<int64_t> ne(r.binding->shape.rbegin(), r.binding->shape.rend());
        ggml_tensor* t = ggml_new_tensor(ctx_, r.type, static_cast<int>(ne.size()), ne.data());
        ggml_set_name(t, r.binding->hf.c_str());
        *r.binding->slot = t;
    }
    buffer_ = ggml_backend_alloc_ctx_tensors(ctx_, backend.primary());
    if (!buffer_) throw Error(ErrorKind::Io, "could not allocate device memory for the weights");
    ggml_backend_buffer_set_usage(buffer_, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);

    for (Resolved& r : resolved) {
        ggml_tensor* t = *r.binding->slot;
        if (r.type == r.info->type) {
            ggml_backend_tensor_set(t, r.info->data, 0, r.info->nbytes);
            continue;
        }
        std::vector<float> f = to_f32(*r.info);
        if (r.type == GGML_TYPE_F32) {
            ggml_backend_tensor_set(t, f.data(), 0, f.size() * sizeof(float));
        } else {
            const int64_t row = t->ne[0];
            const int64_t rows = static_cast<int64_t>(f.size()) / row;
            std::vector<uint8_t> q(ggml_row_size(r.type, row) * rows);
            ggml_quantize_chunk(r.type, f.data(), q.data(), 0, rows, row, nullptr);
            ggml_backend_tensor_set(t, q.data(), 0, q.size());
        }
    }
    if (proj_out == nullptr) proj_out = tok_emb;
}

WhisperWeights::~WhisperWeights() {
    if (buffer_) ggml_backend_buffer_free(buffer_);
    if (ctx_) ggml_free(ctx_);
}

size_t WhisperWeights::device_bytes() const { return buffer_ ? ggml_backend_buffer_get_size(buffer_) : 0; }

std::string WhisperWeights::type_summary() const {
    std::map<std::string, int> counts;
    for (ggml_tensor* t = ggml_get_first_tensor(ctx_); t; t = ggml_get_next_tensor(ctx_, t))
        counts[ggml_type_name(t->type)]++;
    std::string out;
    for (const auto& [name, n] : counts) out += (out.empty() ? "" : ", ") + name + "×" + std::to_string(n);
    return out;
}

}  // namespace parlance::whisper
