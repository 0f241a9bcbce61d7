// Qwen3-ASR's audio encoder and projector, as transformers' Qwen3ASREncoder and
// Qwen3ASRMultiModalProjector compute them: the mel split into 100-frame chunks, each through three
// stride-2 3x3 convolutions with GELU, conv_out and sinusoidal positions restarting per chunk;
// only the valid positions kept; pre-LN transformer layers attending within windows of
// n_window_infer frames' tokens (104 = 8 s), counted from the clip's first token; ln_post; then
// linear -> GELU -> linear into the text model's width. One graph per clip or batch of clips: the
// windows are one batched attention (padded to the window size, padding keys masked).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "core/backend.h"
#include "core/tensor_store.h"
#include "core/weight_set.h"
#include "models/qwen3_asr/config.h"
#include "models/qwen3_asr/features.h"

namespace parlance::qwen3_asr {

class AudioEncoder {
public:
    // Binds model.audio_tower.* and model.multi_modal_projector.* of an HF `store` (other
    // tensors are left to the text model), or every tensor of llama.cpp's mmproj GGUF (a.*,
    // mm.a.mlp.*). Throws Error(InvalidModel) naming a missing, misshaped or unexpected tensor.
    AudioEncoder(const AudioEncoderConfig& config, const TensorStore& store, Backend& backend, ggml_type quantize);
    ~AudioEncoder();

    const AudioEncoderConfig& config() const { return c_; }
    // Tokens a clip of `valid_frames` mel frames becomes.
    int tokens(int valid_frames) const { return c_.clip_tokens(valid_frames); }

    // The audio embeddings of one clip, [tokens][output_dim] row-major. If `hidden` is given it
    // receives the encoder's output before the projector (after ln_post), [tokens][d_model].
    std::vector<float> encode(const Features& features, std::vector<float>* hidden = nullptr);
    // Several clips in one graph (the server's encoder passes batched across requests): each
    // clip's embeddings, as encode gives them. The clips' chunks go through the convolutions and
    // the layers' products together; attention windows stay within their clip. `hidden` only
    // with one clip.
    std::vector<std::vector<float>> encode_batch(std::span<const Features* const> clips,
                                                 std::vector<float>* hidden = nullptr);

    std::string weight_summary() const { return weights_->type_summary(); }

private:
    struct Layer {
        ggml_tensor *ln1_w = nullptr, *ln1_b = nullptr;
        ggml_tensor *q_w = nullptr, *q_b = nullptr, *k_w = nullptr, *k_b = nullptr;
        ggml_tensor *v_w = nullptr, *v_b = nullptr, *o_w = nullptr, *o_b = nullptr;
        ggml_tensor *ln2_w = nullptr, *ln2_b = nullptr;
        ggml_tensor *fc1_w = nullptr, *fc1_b = nullptr, *fc2_w = nullptr, *fc2_b = nullptr;
    };

    AudioEncoderConfig c_;
    Backend& backend_;
    ggml_tensor* conv_w_[3] = {};
    ggml_tensor* conv_b_[3] = {};
    ggml_tensor* conv_out_ = nullptr;
    std::vector<Layer> layers_;
    ggml_tensor *ln_post_w_ = nullptr, *ln_post_b_ = nullptr;
    ggml_tensor *proj1_w_ = nullptr, *proj1_b_ = nullptr, *proj2_w_ = nullptr, *proj2_b_ = nullptr;
    std::unique_ptr<WeightSet> weights_;
    std::vector<uint8_t> graph_buf_;
};

}  // namespace parlance::qwen3_asr
