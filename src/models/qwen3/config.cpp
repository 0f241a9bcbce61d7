// Qwen3 hyper-parameters (see config.h).
#include "models/qwen3/config.h"

#include <cmath>

#include "core/error.h"

namespace parlance::qwen3 {
namespace {

using nlohmann::json;

int need_int(const json& j, const std::string& key, const std::string& source, int min_value) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) throw Error(ErrorKind::InvalidModel, source + ": missing field '" + key + "'");
    if (!it->is_number_integer())
        throw Error(ErrorKind::InvalidModel, source + ": field '" + key + "' must be an integer");
    const int64_t v = it->get<int64_t>();
    if (v < min_value || v > (1 << 30))
        throw Error(ErrorKind::InvalidModel,
                    source + ": field '" + key + "' = " + std::to_string(v) + " is out of range");
    return static_cast<int>(v);
}

float need_float(const json& j, const std::string& key, const std::string& source, float fallback, bool required) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
        if (required) throw Error(ErrorKind::InvalidModel, source + ": missing field '" + key + "'");
        return fallback;
    }
    if (!it->is_number()) throw Error(ErrorKind::InvalidModel, source + ": field '" + key + "' must be a number");
    const double v = it->get<double>();
    if (!(v > 0) || !std::isfinite(v))
        throw Error(ErrorKind::InvalidModel, source + ": field '" + key + "' must be positive");
    return static_cast<float>(v);
}

void check(const Qwen3Config& c, const std::string& source) {
    if (c.num_heads % c.num_kv_heads != 0)
        throw Error(ErrorKind::InvalidModel, source + ": num_attention_heads " + std::to_string(c.num_heads) +
                                                 " is not a multiple of num_key_value_heads " +
                                                 std::to_string(c.num_kv_heads));
    if (c.head_dim % 2 != 0)
        throw Error(ErrorKind::InvalidModel,
                    source + ": head_dim " + std::to_string(c.head_dim) + " must be even (rotary)");
}

}  // namespace

Qwen3Config Qwen3Config::from_hf(const json& j, const std::string& source) {
    if (j.value("model_type", std::string()) != "qwen3")
        throw Error(ErrorKind::InvalidModel, source + ": model_type is not \"qwen3\"");
    Qwen3Config c;
    c.vocab_size = need_int(j, "vocab_size", source, 1);
    c.hidden_size = need_int(j, "hidden_size", source, 1);
    c.intermediate_size = need_int(j, "intermediate_size", source, 1);
    c.num_layers = need_int(j, "num_hidden_layers", source, 1);
    c.num_heads = need_int(j, "num_attention_heads", source, 1);
    c.num_kv_heads = j.contains("num_key_value_heads") && !j["num_key_value_heads"].is_null()
                         ? need_int(j, "num_key_value_heads", source, 1)
                         : c.num_heads;
    c.head_dim = j.contains("head_dim") && !j["head_dim"].is_null() ? need_int(j, "head_dim", source, 2)
                                                                    : c.hidden_size / c.num_heads;
    c.max_position_embeddings = need_int(j, "max_position_embeddings", source, 1);
    c.rms_norm_eps = need_float(j, "rms_norm_eps", source, 1e-6f, false);
    c.tie_word_embeddings = j.value("tie_word_embeddings", false);
    if (j.value("attention_bias", false))
        throw Error(ErrorKind::Unsupported, source + ": attention_bias true is not supported for qwen3");
    if (j.value("use_sliding_window", false))
        throw Error(ErrorKind::Unsupported, source + ": use_sliding_window true is not supported for qwen3");
    const std::string act = j.value("hidden_act", std::string("silu"));
    if (act != "silu") throw Error(ErrorKind::Unsupported, source + ": hidden_act '" + act + "' (expected silu)");
    // transformers 5 writes rope_parameters {rope_theta, rope_type}; older files rope_theta and
    // rope_scaling at the top level.
    const json* scaling = nullptr;
    if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
        const json& rp = j["rope_parameters"];
        c.rope_theta = need_float(rp, "rope_theta", source + " rope_parameters", 1000000.0f, false);
        scaling = &rp;
    } else {
        c.rope_theta = need_float(j, "rope_theta", source, 10000.0f, false);
        if (j.contains("rope_scaling") && j["rope_scaling"].is_object()) scaling = &j["rope_scaling"];
    }
    if (scaling) {
        const std::string type = scaling->value("rope_type", scaling->value("type", std::string("default")));
        if (type == "linear") {
            c.rope_freq_scale = 1.0f / need_float(*scaling, "factor", source + " rope scaling", 1.0f, true);
        } else if (type != "default") {
            throw Error(ErrorKind::Unsupported,
                        source + ": rope type '" + type + "' is not supported (default, linear)");
        }
    }
    check(c, source);
    return c;
}

Qwen3Config Qwen3Config::from_gguf(const json& m, const std::string& source) {
    // Keys carry the file's architecture: "qwen3", or "qwen3vl" for the text model of llama.cpp's
    // Qwen3-ASR pair (a Qwen3 decoder; the Qwen3-VL vision extras must be absent).
    const std::string arch = m.contains("general.architecture") && m["general.architecture"].is_string()
                                 ? m["general.architecture"].get<std::string>()
                                 : "qwen3";
    auto key = [&](const char* k) { return arch + "." + k; };
    Qwen3Config c;
    if (m.contains(key("n_deepstack_layers")) && need_int(m, key("n_deepstack_layers"), source, 0) != 0)
        throw Error(ErrorKind::Unsupported, source + ": " + key("n_deepstack_layers") +
                                                " is not 0 (a Qwen3-VL vision model; parlance reads its text "
                                                "decoder only for Qwen3-ASR)");
    c.num_layers = need_int(m, key("block_count"), source, 1);
    c.hidden_size = need_int(m, key("embedding_length"), source, 1);
    c.intermediate_size = need_int(m, key("feed_forward_length"), source, 1);
    c.num_heads = need_int(m, key("attention.head_count"), source, 1);
    c.num_kv_heads = m.contains(key("attention.head_count_kv")) ? need_int(m, key("attention.head_count_kv"), source, 1)
                                                                : c.num_heads;
    c.head_dim = m.contains(key("attention.key_length")) ? need_int(m, key("attention.key_length"), source, 2)
                                                         : c.hidden_size / c.num_heads;
    if (m.contains(key("attention.value_length")) &&
        need_int(m, key("attention.value_length"), source, 1) != c.head_dim)
        throw Error(ErrorKind::Unsupported, source + ": " + key("attention.value_length") + " differs from key_length");
    c.max_position_embeddings = need_int(m, key("context_length"), source, 1);
    c.rms_norm_eps = need_float(m, key("attention.layer_norm_rms_epsilon"), source, 1e-6f, false);
    c.rope_theta = need_float(m, key("rope.freq_base"), source, 1000000.0f, false);
    if (m.contains(key("rope.scaling.type"))) {
        const std::string type =
            m[key("rope.scaling.type")].is_string() ? m[key("rope.scaling.type")].get<std::string>() : "";
        if (type == "linear")
            c.rope_freq_scale = 1.0f / need_float(m, key("rope.scaling.factor"), source, 1.0f, true);
        else if (type != "none" && !type.empty())
            throw Error(ErrorKind::Unsupported, source + ": rope scaling '" + type + "' is not supported");
    }
    // The vocabulary size comes from the embedding tensor (set by the loader).
    check(c, source);
    return c;
}

}  // namespace parlance::qwen3
