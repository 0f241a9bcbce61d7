// Whisper weights: each tensor of an HF checkpoint or a whisper.cpp file bound to its role through
// the generic binder (core/weight_set: shape validation, quantization at load, upload), from the
// one name table of tensor_names.h.
// Immutable once loaded; shared by every sequence and request (STYLE: weights apart from state).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <ggml-backend.h>
#include <ggml.h>

#include "core/backend.h"
#include "core/tensor_store.h"
#include "core/weight_set.h"
#include "models/whisper/config.h"

namespace parlance::whisper {

struct AttentionWeights {
    ggml_tensor* q_w = nullptr;
    ggml_tensor* q_b = nullptr;
    ggml_tensor* k_w = nullptr;  // Whisper's key projection has no bias
    ggml_tensor* v_w = nullptr;
    ggml_tensor* v_b = nullptr;
    ggml_tensor* o_w = nullptr;
    ggml_tensor* o_b = nullptr;
};

struct LayerWeights {
    ggml_tensor* attn_ln_w = nullptr;
    ggml_tensor* attn_ln_b = nullptr;
    AttentionWeights attn;
    ggml_tensor* cross_ln_w = nullptr;  // decoder only
    ggml_tensor* cross_ln_b = nullptr;
    AttentionWeights cross;             // decoder only
    ggml_tensor* mlp_ln_w = nullptr;
    ggml_tensor* mlp_ln_b = nullptr;
    ggml_tensor* fc1_w = nullptr;
    ggml_tensor* fc1_b = nullptr;
    ggml_tensor* fc2_w = nullptr;
    ggml_tensor* fc2_b = nullptr;
};

struct WeightOptions {
    // Store linear-layer weights in this type ("" = as stored; "f32", "f16", "q8_0", "q5_k",
    // "q4_k"). Rows whose length is not a multiple of the block size keep their stored type.
    std::string quantize;
    // Encode windows of this many seconds instead of the model's own (0: the model's). See
    // WhisperModel::load.
    double audio_window_seconds = 0;
};

class WhisperWeights {
public:
    // Binds every tensor of `store` (HF names or whisper.cpp names), validates shapes against
    // `config`, converts/quantizes and uploads to backend's primary device (WeightSet's type
    // rules: norms, biases and positions f32, bf16 -> f32, convolution kernels float). Throws
    // Error(InvalidModel) naming the file and tensor for missing, unexpected or misshaped
    // tensors, Error(Unsupported) for types we cannot compute with.
    WhisperWeights(const WhisperConfig& config, const TensorStore& store, Backend& backend,
                   const WeightOptions& options);
    ~WhisperWeights();
    WhisperWeights(const WhisperWeights&) = delete;
    WhisperWeights& operator=(const WhisperWeights&) = delete;

    // Encoder
    ggml_tensor* conv1_w = nullptr;  // ne [3, n_mels, d]
    ggml_tensor* conv1_b = nullptr;  // ne [d]
    ggml_tensor* conv2_w = nullptr;  // ne [3, d, d]
    ggml_tensor* conv2_b = nullptr;
    ggml_tensor* enc_pos = nullptr;  // ne [d, n_audio_ctx]
    std::vector<LayerWeights> enc_layers;
    ggml_tensor* enc_ln_w = nullptr;
    ggml_tensor* enc_ln_b = nullptr;
    // Decoder
    ggml_tensor* tok_emb = nullptr;  // ne [d, vocab]
    ggml_tensor* dec_pos = nullptr;  // ne [d, n_text_ctx]
    std::vector<LayerWeights> dec_layers;
    ggml_tensor* dec_ln_w = nullptr;
    ggml_tensor* dec_ln_b = nullptr;
    ggml_tensor* proj_out = nullptr;  // ne [d, vocab]; the token embedding unless untied

    size_t device_bytes() const;
    // Stored type -> tensor count, after conversion, for logs and `parlance info`.
    std::string type_summary() const;

private:
    std::unique_ptr<WeightSet> weights_;  // owns the tensors the members above point to
};

}  // namespace parlance::whisper
