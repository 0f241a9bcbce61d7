// The model registry: which architectures parlance implements, how each is recognised (HF
// config.json model_type, GGUF general.architecture, whisper.cpp's magic) and what it can do.
// The CLI and the server load through it; outside models/ nothing includes an architecture's
// header.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/model_files.h"
#include "models/language_model.h"

namespace parlance {

struct Capabilities {
    bool transcribe = false;
    bool translate = false;
    bool generate = false;
};

struct ArchitectureEntry {
    std::string name;                   // "whisper", "qwen3"
    std::vector<std::string> hf_types;  // config.json model_type values
    std::vector<std::string> gguf_archs;  // general.architecture values
    Capabilities capabilities;
};

// Every registered architecture.
const std::vector<ArchitectureEntry>& registered_architectures();

// The entry for opened files. Throws Error(Unsupported) naming what the files say and listing the
// registered architectures.
const ArchitectureEntry& identify_architecture(const ModelFiles& files);

struct LanguageModelOptions {
    std::string quantize;  // "" as stored, f32, f16, q8_0, q5_k, q4_k
};

// Loads a model that can generate text (an HF directory or a GGUF file). Throws Error(Unsupported)
// when the architecture cannot ("whisper transcribes; it does not generate text").
std::unique_ptr<LanguageModel> load_language_model(const std::filesystem::path& path, Backend& backend,
                                                   const LanguageModelOptions& options);

}  // namespace parlance
