// Whisper's tensor-name table (see tensor_names.h).
#include "models/whisper/tensor_names.h"

namespace parlance::whisper {

std::vector<TensorName> whisper_tensor_names(const WhisperConfig& c) {
    using R = TensorRole;
    const int64_t d = c.d_model;
    std::vector<TensorName> t;
    int layer = -1;
    bool decoder = false;
    auto add = [&](R role, std::string hf, std::string cpp, std::vector<int64_t> shape, bool linear,
                   bool optional = false) {
        t.push_back({role, layer, decoder, std::move(hf), std::move(cpp), std::move(shape), linear, optional});
    };
    add(R::Conv1W, "model.encoder.conv1.weight", "encoder.conv1.weight", {d, c.n_mels, 3}, true);
    add(R::Conv1B, "model.encoder.conv1.bias", "encoder.conv1.bias", {d}, false);
    add(R::Conv2W, "model.encoder.conv2.weight", "encoder.conv2.weight", {d, d, 3}, true);
    add(R::Conv2B, "model.encoder.conv2.bias", "encoder.conv2.bias", {d}, false);
    add(R::EncPos, "model.encoder.embed_positions.weight", "encoder.positional_embedding",
        {c.max_source_positions, d}, false);
    add(R::EncLnW, "model.encoder.layer_norm.weight", "encoder.ln_post.weight", {d}, false);
    add(R::EncLnB, "model.encoder.layer_norm.bias", "encoder.ln_post.bias", {d}, false);
    add(R::TokEmb, "model.decoder.embed_tokens.weight", "decoder.token_embedding.weight",
        {c.vocab_size, d}, false);
    add(R::DecPos, "model.decoder.embed_positions.weight", "decoder.positional_embedding",
        {c.max_target_positions, d}, false);
    add(R::DecLnW, "model.decoder.layer_norm.weight", "decoder.ln.weight", {d}, false);
    add(R::DecLnB, "model.decoder.layer_norm.bias", "decoder.ln.bias", {d}, false);
    add(R::ProjOut, "proj_out.weight", "", {c.vocab_size, d}, false, /*optional=*/true);

    auto attention = [&](bool cross, const std::string& hf, const std::string& cpp) {
        add(cross ? R::CrossQW : R::AttnQW, hf + ".q_proj.weight", cpp + ".query.weight", {d, d}, true);
        add(cross ? R::CrossQB : R::AttnQB, hf + ".q_proj.bias", cpp + ".query.bias", {d}, false);
        add(cross ? R::CrossKW : R::AttnKW, hf + ".k_proj.weight", cpp + ".key.weight", {d, d}, true);
        add(cross ? R::CrossVW : R::AttnVW, hf + ".v_proj.weight", cpp + ".value.weight", {d, d}, true);
        add(cross ? R::CrossVB : R::AttnVB, hf + ".v_proj.bias", cpp + ".value.bias", {d}, false);
        add(cross ? R::CrossOW : R::AttnOW, hf + ".out_proj.weight", cpp + ".out.weight", {d, d}, true);
        add(cross ? R::CrossOB : R::AttnOB, hf + ".out_proj.bias", cpp + ".out.bias", {d}, false);
    };
    auto block = [&](const std::string& hf, const std::string& cpp, int64_t ffn) {
        add(R::AttnLnW, hf + ".self_attn_layer_norm.weight", cpp + ".attn_ln.weight", {d}, false);
        add(R::AttnLnB, hf + ".self_attn_layer_norm.bias", cpp + ".attn_ln.bias", {d}, false);
        attention(false, hf + ".self_attn", cpp + ".attn");
        if (decoder) {
            add(R::CrossLnW, hf + ".encoder_attn_layer_norm.weight", cpp + ".cross_attn_ln.weight", {d}, false);
            add(R::CrossLnB, hf + ".encoder_attn_layer_norm.bias", cpp + ".cross_attn_ln.bias", {d}, false);
            attention(true, hf + ".encoder_attn", cpp + ".cross_attn");
        }
        add(R::MlpLnW, hf + ".final_layer_norm.weight", cpp + ".mlp_ln.weight", {d}, false);
        add(R::MlpLnB, hf + ".final_layer_norm.bias", cpp + ".mlp_ln.bias", {d}, false);
        add(R::Fc1W, hf + ".fc1.weight", cpp + ".mlp.0.weight", {ffn, d}, true);
        add(R::Fc1B, hf + ".fc1.bias", cpp + ".mlp.0.bias", {ffn}, false);
        add(R::Fc2W, hf + ".fc2.weight", cpp + ".mlp.2.weight", {d, ffn}, true);
        add(R::Fc2B, hf + ".fc2.bias", cpp + ".mlp.2.bias", {d}, false);
    };
    for (layer = 0; layer < c.encoder_layers; ++layer)
        block("model.encoder.layers." + std::to_string(layer), "encoder.blocks." + std::to_string(layer),
              c.encoder_ffn);
    decoder = true;
    for (layer = 0; layer < c.decoder_layers; ++layer)
        block("model.decoder.layers." + std::to_string(layer), "decoder.blocks." + std::to_string(layer),
              c.decoder_ffn);
    return t;
}

}  // namespace parlance::whisper
