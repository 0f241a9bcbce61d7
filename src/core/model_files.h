// The files of one model on disk: the configs of an HF snapshot directory (or the metadata of a
// single GGUF / whisper.cpp file) and its TensorStore — plus, for llama.cpp's multimodal pairs, the
// projector GGUF ("mmproj") beside the text model's. Architecture-agnostic: interpreting the
// hyper-parameters belongs to models/<arch>.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tensor_store.h"

namespace parlance {

struct ModelFiles {
    std::filesystem::path root;  // the directory, or the single weights file
    bool is_directory = false;

    // HF directory only; JSON null when the file is absent (single files: always null).
    nlohmann::json config;               // config.json (required for a directory)
    nlohmann::json generation_config;    // generation_config.json
    nlohmann::json preprocessor_config;  // preprocessor_config.json
    nlohmann::json tokenizer_config;     // tokenizer_config.json
    // tokenizer.json is large and parsed by the text layer: only its path (empty when absent).
    std::filesystem::path tokenizer_json;

    std::unique_ptr<TensorStore> tensors;
    // llama.cpp's multimodal projector file (general.type "mmproj", general.architecture "clip")
    // of a GGUF pair; null otherwise.
    std::unique_ptr<TensorStore> mmproj;

    // "whisper", "qwen3", ...: HF config "model_type" (else "architectures"[0]); GGUF
    // "general.architecture"; whisper.cpp "whisper". Empty when the files do not say.
    std::string architecture() const;
    // Every file that belongs to the model (configs, tokenizer, weights), for accounting.
    std::vector<std::filesystem::path> files() const;
    uint64_t bytes_on_disk() const;
};

// Opens a directory (config.json required: Error(InvalidModel) naming it when missing or not
// JSON; the optional configs likewise when present but not JSON) or a single .safetensors /
// .gguf / .bin file. A directory without config.json that holds GGUF files is a llama.cpp
// download: its one model GGUF and its one mmproj GGUF, if any (several model GGUFs are refused
// naming them; several mmprojs unless `mmproj` names one). `mmproj` names the projector of a GGUF file
// explicitly (refused unless it is an mmproj GGUF). Tensor errors propagate from
// TensorStore::open; a missing path throws Error(NotFound) naming it.
ModelFiles open_model_files(const std::filesystem::path& path, const std::filesystem::path& mmproj = {});

// True when the GGUF metadata says it is a multimodal projector (general.type "mmproj" or
// general.architecture "clip").
bool is_mmproj_metadata(const nlohmann::json& gguf_metadata);

}  // namespace parlance
