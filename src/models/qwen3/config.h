// Qwen3 (dense) hyper-parameters from an HF config.json or llama.cpp's GGUF keys, validated.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace parlance::qwen3 {

struct Qwen3Config {
    int vocab_size = 0;
    int hidden_size = 0;
    int intermediate_size = 0;
    int num_layers = 0;
    int num_heads = 0;
    int num_kv_heads = 0;
    int head_dim = 0;
    int max_position_embeddings = 0;
    float rms_norm_eps = 1e-6f;
    float rope_theta = 1000000.0f;
    float rope_freq_scale = 1.0f;   // 1 / rope_scaling.factor ("linear"); 1 = none
    bool tie_word_embeddings = false;

    // model_type "qwen3". Throws Error(InvalidModel) naming the file and field (missing, wrong
    // type, out of range, heads not a multiple of kv heads), Error(Unsupported) for options we do
    // not implement (attention bias, sliding window, rope types other than default/linear).
    static Qwen3Config from_hf(const nlohmann::json& config, const std::string& source);
    // general.architecture "qwen3": qwen3.block_count, embedding_length, ... Whether embeddings
    // are tied is decided by the tensors (no output.weight).
    static Qwen3Config from_gguf(const nlohmann::json& metadata, const std::string& source);

    int kv_dim() const { return num_kv_heads * head_dim; }
};

}  // namespace parlance::qwen3
