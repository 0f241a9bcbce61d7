// Writes safetensors checkpoints: one file, or a sharded set with model.safetensors.index.json.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/tensor_data.h"

namespace parlance {

// Writes `tensors` (in order) to `file` with an optional "__metadata__" object of strings. The
// header is padded with spaces to a multiple of 8 bytes so that data starts aligned. Types:
// those safetensors can name (F32, F16, BF16, F64, I8..I64); others throw Error(Unsupported)
// naming the tensor. Throws Error(Io) naming the file when it cannot be written.
void write_safetensors(const std::filesystem::path& file, const std::vector<TensorData>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Splits `tensors` (in order, contiguous runs of roughly equal bytes) into `n_shards` files
// "model-0000i-of-0000N.safetensors" in `dir` and writes dir/model.safetensors.index.json with
// {"metadata": {"total_size": ...}, "weight_map": {tensor: shard}}. Returns the shard paths.
std::vector<std::filesystem::path> write_safetensors_sharded(
    const std::filesystem::path& dir, const std::vector<TensorData>& tensors, size_t n_shards,
    const std::map<std::string, std::string>& metadata = {});

}  // namespace parlance
