// Qwen3-ASR's configuration (see config.h).
#include "models/qwen3_asr/config.h"

#include "core/error.h"

namespace parlance::qwen3_asr {
namespace {

using nlohmann::json;

int need_int(const json& j, const char* key, const std::string& where) {
    if (!j.contains(key) || !j[key].is_number_integer())
        throw Error(ErrorKind::InvalidModel, where + ": missing or non-integer field '" + key + "'");
    return j[key].get<int>();
}

int int_or(const json& j, const char* key, int fallback, const std::string& where) {
    if (!j.contains(key)) return fallback;
    if (!j[key].is_number_integer())
        throw Error(ErrorKind::InvalidModel, where + ": field '" + key + "' is not an integer");
    return j[key].get<int>();
}

std::string shape_of(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

}  // namespace

int AudioEncoderConfig::conv_freq() const {
    int f = num_mel_bins;
    for (int i = 0; i < 3; ++i) f = (f + 1) / 2;  // k3, s2, p1
    return f;
}

int AudioEncoderConfig::chunk_tokens(int frames) {
    for (int i = 0; i < 3; ++i) frames = frames > 0 ? (frames - 1) / 2 + 1 : 0;
    return frames;
}

int AudioEncoderConfig::clip_tokens(int frames) const {
    return frames / chunk_frames() * chunk_tokens(chunk_frames()) + chunk_tokens(frames % chunk_frames());
}

void AudioEncoderConfig::check(const std::string& where) const {
    for (int v : {num_mel_bins, layers, heads, ffn_dim, d_model, n_window, downsample_hidden, output_dim})
        if (v <= 0) throw Error(ErrorKind::InvalidModel, where + ": sizes must be positive");
    if (d_model % heads != 0 || head_dim() % 2 != 0)
        throw Error(ErrorKind::InvalidModel, where + ": d_model " + std::to_string(d_model) +
                                                 " is not an even head size times encoder_attention_heads " +
                                                 std::to_string(heads));
    if (n_window_infer <= 0 || n_window_infer % chunk_frames() != 0)
        throw Error(ErrorKind::InvalidModel, where + ": n_window_infer " + std::to_string(n_window_infer) +
                                                 " is not a multiple of 2 * n_window (" +
                                                 std::to_string(chunk_frames()) + ")");
    if (max_positions < AudioEncoderConfig::chunk_tokens(chunk_frames()))
        throw Error(ErrorKind::InvalidModel, where + ": max_position_embeddings " + std::to_string(max_positions) +
                                                 " is shorter than a chunk's " +
                                                 std::to_string(AudioEncoderConfig::chunk_tokens(chunk_frames())) +
                                                 " tokens");
}

Qwen3AsrConfig Qwen3AsrConfig::parse(const json& c, const std::filesystem::path& file) {
    const std::string f = file.string();
    if (c.value("model_type", std::string()) != "qwen3_asr")
        throw Error(ErrorKind::InvalidModel, f + ": model_type is not qwen3_asr");
    if (c.contains("thinker_config"))
        throw Error(ErrorKind::Unsupported, f + ": an original (thinker_config) Qwen3-ASR checkpoint; convert it with "
                                                "transformers' convert_qwen3_asr_to_hf.py first");
    if (!c.contains("audio_config") || !c["audio_config"].is_object())
        throw Error(ErrorKind::InvalidModel, f + ": missing object 'audio_config'");
    if (!c.contains("text_config") || !c["text_config"].is_object())
        throw Error(ErrorKind::InvalidModel, f + ": missing object 'text_config'");
    Qwen3AsrConfig out;
    const json& a = c["audio_config"];
    const std::string where = f + " audio_config";
    AudioEncoderConfig& e = out.audio;
    e.num_mel_bins = int_or(a, "num_mel_bins", 128, where);
    e.layers = need_int(a, "encoder_layers", where);
    e.heads = need_int(a, "encoder_attention_heads", where);
    e.ffn_dim = need_int(a, "encoder_ffn_dim", where);
    e.d_model = need_int(a, "d_model", where);
    e.n_window = int_or(a, "n_window", 50, where);
    e.n_window_infer = int_or(a, "n_window_infer", 800, where);
    e.downsample_hidden = int_or(a, "downsample_hidden_size", 480, where);
    e.output_dim = need_int(a, "output_dim", where);
    e.max_positions = int_or(a, "max_position_embeddings", 13, where);
    if (a.value("activation_function", std::string("gelu")) != "gelu")
        throw Error(ErrorKind::Unsupported,
                    where + ": activation_function '" + a["activation_function"].get<std::string>() + "' (gelu only)");
    if (a.value("scale_embedding", false)) throw Error(ErrorKind::Unsupported, where + ": scale_embedding true");
    e.check(where);
    out.text_config = c["text_config"];
    const int text_hidden = need_int(out.text_config, "hidden_size", f + " text_config");
    if (e.output_dim != text_hidden)
        throw Error(ErrorKind::InvalidModel, where + ": output_dim " + std::to_string(e.output_dim) +
                                                 " differs from text_config.hidden_size " +
                                                 std::to_string(text_hidden));
    out.audio_token_id = int_or(c, "audio_token_id", 151676, f);
    const int vocab = need_int(out.text_config, "vocab_size", f + " text_config");
    if (out.audio_token_id < 0 || out.audio_token_id >= vocab)
        throw Error(ErrorKind::InvalidModel, f + ": audio_token_id " + std::to_string(out.audio_token_id) +
                                                 " is outside the vocabulary (" + std::to_string(vocab) + ")");
    return out;
}

Qwen3AsrConfig Qwen3AsrConfig::from_gguf(const TensorStore& mmproj) {
    const json& m = mmproj.metadata();
    const std::string where = mmproj.files().front().string();
    auto key_int = [&](const char* key) {
        const auto it = m.find(key);
        if (it == m.end() || !it->is_number_integer())
            throw Error(ErrorKind::InvalidModel, where + ": missing or non-integer field '" + std::string(key) + "'");
        return it->get<int>();
    };
    Qwen3AsrConfig out;
    AudioEncoderConfig& e = out.audio;
    e.num_mel_bins = key_int("clip.audio.num_mel_bins");
    e.layers = key_int("clip.audio.block_count");
    e.heads = key_int("clip.audio.attention.head_count");
    e.ffn_dim = key_int("clip.audio.feed_forward_length");
    e.d_model = key_int("clip.audio.embedding_length");
    e.output_dim = key_int("clip.audio.projection_dim");
    if (const auto it = m.find("clip.audio.attention.layer_norm_epsilon"); it != m.end() && it->is_number())
        e.layer_norm_eps = it->get<float>();
    const TensorInfo& conv = mmproj.get("a.conv2d.1.weight");  // [out, in, kh, kw]
    if (conv.shape.size() != 4 || conv.shape[1] != 1 || conv.shape[2] != 3 || conv.shape[3] != 3)
        throw Error(ErrorKind::InvalidModel,
                    where + ": tensor a.conv2d.1.weight is " + shape_of(conv.shape) + ", not [channels, 1, 3, 3]");
    e.downsample_hidden = static_cast<int>(conv.shape[0]);
    e.check(where);
    return out;
}

}  // namespace parlance::qwen3_asr
