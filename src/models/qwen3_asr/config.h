// Qwen3-ASR's configuration (transformers' Qwen3ASRConfig, model_type "qwen3_asr"): the audio
// encoder's (audio_config, Qwen3ASREncoderConfig) and the special token ids; the text decoder's
// text_config is a Qwen3 config, parsed by models/qwen3. Validated at load: a refusal names the
// file and field.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "core/tensor_store.h"

namespace parlance::qwen3_asr {

struct AudioEncoderConfig {
    int num_mel_bins = 128;
    int layers = 0;
    int heads = 0;
    int ffn_dim = 0;
    int d_model = 0;
    int n_window = 50;            // half a conv chunk, in mel frames
    int n_window_infer = 800;     // mel frames one attention window spans
    int downsample_hidden = 480;  // conv channels
    int output_dim = 0;           // the projector's output: the text hidden size
    int max_positions = 13;       // sinusoidal positions per chunk
    float layer_norm_eps = 1e-5f;

    int chunk_frames() const { return 2 * n_window; }
    int head_dim() const { return d_model / heads; }
    // Frequency rows left after the three stride-2 convolutions (128 -> 16).
    int conv_freq() const;
    // Encoder tokens of one chunk with `frames` valid mel frames: three times (n - 1) / 2 + 1; 0 stays 0.
    static int chunk_tokens(int frames);
    // Encoder tokens of a clip of `frames` valid mel frames (13 per full chunk plus the rest's).
    int clip_tokens(int frames) const;

    // Throws Error(InvalidModel) prefixed by `where` for sizes that cannot work together.
    void check(const std::string& where) const;
};

struct Qwen3AsrConfig {
    AudioEncoderConfig audio;
    nlohmann::json text_config;  // model_type qwen3 (HF form; null for a GGUF pair)
    int audio_token_id = 151676;

    // config.json of an HF snapshot (`file` names it in errors).
    static Qwen3AsrConfig parse(const nlohmann::json& config, const std::filesystem::path& file);
    // llama.cpp's mmproj GGUF (clip.audio.* keys, projector qwen3a). It does not store the
    // chunk and window sizes: llama.cpp fixes them at the published models' values (100-frame
    // chunks, 800-frame windows), and so does this. The conv channels come from a.conv2d.1's
    // shape; audio_token_id is left to the tokenizer's <|audio_pad|>.
    static Qwen3AsrConfig from_gguf(const TensorStore& mmproj);
};

}  // namespace parlance::qwen3_asr
