// Internal: one reader per container format behind TensorStore::open (not for other layers).
#pragma once

#include <filesystem>
#include <memory>

#include "core/tensor_store.h"

namespace parlance::detail {

// A single .safetensors file (safetensors.cpp).
std::unique_ptr<TensorStore> read_safetensors(const std::filesystem::path& file);
// model.safetensors.index.json and the shards its weight_map names (safetensors.cpp).
std::unique_ptr<TensorStore> read_safetensors_index(const std::filesystem::path& index_file);
// A GGUF file, any version ggml reads (gguf_file.cpp).
std::unique_ptr<TensorStore> read_gguf(const std::filesystem::path& file);
// A whisper.cpp ggml .bin file (whispercpp_file.cpp).
std::unique_ptr<TensorStore> read_whispercpp(const std::filesystem::path& file);

}  // namespace parlance::detail
