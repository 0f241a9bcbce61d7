// Writes the Qwen3 checkpoints of tests/fixtures/qwen3/<config>: the weights come from the same
// counter-based generator as tools/reference/qwen3_reference.py (synthetic_weight), so the files
// hold exactly the values transformers computed the reference with, in any dtype and layout.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <ggml.h>
#include <nlohmann/json.hpp>

namespace parlance {
class GgufWriter;
}

namespace parlance::testing {

// splitmix64 of the reference script (state += golden ratio, then the finaliser).
uint64_t splitmix64_ref(uint64_t x);
// Element values of tensor `name` with PyTorch `shape` under `seed` (see the Python docstring).
std::vector<float> synthetic_weight(const std::string& name, const std::vector<int64_t>& shape, uint64_t seed);

struct Qwen3Checkpoint {
    ggml_type dtype = GGML_TYPE_BF16;  // matrices and embeddings; norms are stored alike (HF) or f32 (GGUF)
    int shards = 1;                    // > 1: model-0000i-of-0000N.safetensors + index
    bool gguf = false;                 // llama.cpp's names, keys and token arrays instead
    // Matrices rounded through this quantized type before being stored as `dtype` (the exact
    // values a quantized file of the same weights holds; GGML_TYPE_COUNT = none).
    ggml_type rounded_through = GGML_TYPE_COUNT;
};

nlohmann::json qwen3_reference(const std::string& config);
// Writes config `config` into `dir`; returns what --model takes (dir, or dir/model.gguf).
// `edit` changes the config.json before the weights are made (e.g. more layers for a stress
// test; such a checkpoint has no reference outputs).
std::filesystem::path write_qwen3(const std::string& config, const std::filesystem::path& dir,
                                  const Qwen3Checkpoint& how = {}, const nlohmann::json& edit = nullptr);

// Qwen3-ASR (tests/fixtures/qwen3_asr/<config>, tools/reference/qwen3_asr_reference.py): the same
// generator over every parameter of Qwen3ASRForConditionalGeneration, convolution kernels drawn as
// [out, in*kh*kw], ln_post's weight near 1. Writes an HF snapshot (config.json, bf16
// model.safetensors, the Qwen3 tokenizer) into `dir` and returns it.
// With `gguf_pair`, writes llama.cpp's form of the same weights instead: model.gguf (qwen3vl, bf16)
// and mmproj.gguf (clip, projector qwen3a, f16 matrices), every key, name, shape and type as the
// bundle's converter wrote them (tests/fixtures/qwen3_asr/gguf_pair_layout.json, made by
// tools/reference/qwen3_asr_gguf_pair.py), the dimensions from the config.
nlohmann::json qwen3_asr_reference(const std::string& config);
// `edit` is merged into the config first (e.g. the 0.6B's full widths for a benchmark; such a
// checkpoint has no reference); `gguf_text_type` is the text GGUF's matrix type (bf16 as the
// converter's default; f16 or q8_0 as the published files).
std::filesystem::path write_qwen3_asr(const std::string& config, const std::filesystem::path& dir,
                                      bool gguf_pair = false, const nlohmann::json& edit = nullptr,
                                      ggml_type gguf_text_type = GGML_TYPE_BF16);
// Sets every scalar key of a recorded layout (or of a GGUF's metadata, as TensorStore reads it):
// strings, booleans, integers (as u32), floats, small integer arrays; token arrays are skipped.
void set_gguf_keys(GgufWriter& w, const nlohmann::json& keys);
// The converter's recorded layout (see above).
nlohmann::json qwen3_asr_gguf_layout();

}  // namespace parlance::testing
