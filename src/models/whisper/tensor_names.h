// The one table of Whisper tensor names: each parameter's role, its HF transformers name, its
// whisper.cpp (OpenAI) name and its expected shape. The loader (weights.cpp) and the converter
// (convert.cpp) both read it, so the two naming schemes cannot drift apart.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/whisper/config.h"

namespace parlance::whisper {

// What a tensor is, independent of how a file names it. Per-layer roles carry the layer index
// and stack in TensorName; attention roles come in a self (Attn*) and a cross (Cross*) set.
enum class TensorRole {
    Conv1W, Conv1B, Conv2W, Conv2B, EncPos, EncLnW, EncLnB,
    TokEmb, DecPos, DecLnW, DecLnB, ProjOut,
    AttnLnW, AttnLnB, AttnQW, AttnQB, AttnKW, AttnVW, AttnVB, AttnOW, AttnOB,
    CrossLnW, CrossLnB, CrossQW, CrossQB, CrossKW, CrossVW, CrossVB, CrossOW, CrossOB,
    MlpLnW, MlpLnB, Fc1W, Fc1B, Fc2W, Fc2B,
};

struct TensorName {
    TensorRole role;
    int layer = -1;                // block index for per-layer roles, -1 for the others
    bool decoder = false;          // the stack a per-layer tensor belongs to
    std::string hf;                // HF transformers name
    std::string cpp;               // whisper.cpp name; empty when whisper.cpp files omit it
    std::vector<int64_t> shape;    // PyTorch shape (outermost first) implied by the config
    bool linear = false;           // a weight matrix or convolution kernel (quantizable)
    bool optional = false;         // may be absent (proj_out: tied to the token embedding)
};

// Every parameter of a Whisper model with this configuration, encoder first, in a fixed order.
std::vector<TensorName> whisper_tensor_names(const WhisperConfig& config);

}  // namespace parlance::whisper
