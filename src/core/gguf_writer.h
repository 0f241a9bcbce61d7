// Writes GGUF files: a thin owner of a gguf_context (gguf.h) that keeps tensor bytes alive.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor_data.h"

struct gguf_context;
struct ggml_context;

namespace parlance {

// Usage: set key-values, add tensors (copied), write(). Not thread-safe.
class GgufWriter {
public:
    GgufWriter();
    ~GgufWriter();
    GgufWriter(const GgufWriter&) = delete;
    GgufWriter& operator=(const GgufWriter&) = delete;

    // Key-values; setting a key again replaces it.
    void set_u32(const std::string& key, uint32_t value);
    void set_i32(const std::string& key, int32_t value);
    void set_u64(const std::string& key, uint64_t value);
    void set_f32(const std::string& key, float value);
    void set_bool(const std::string& key, bool value);
    void set_str(const std::string& key, const std::string& value);
    void set_strs(const std::string& key, const std::vector<std::string>& values);
    void set_i32s(const std::string& key, const std::vector<int32_t>& values);
    void set_f32s(const std::string& key, const std::vector<float>& values);

    // Adds a tensor of any ggml type (shape in PyTorch order, at most 4 dimensions). Throws
    // Error(InvalidArgument) naming the tensor on a size mismatch or a duplicate name.
    void add_tensor(TensorData tensor);

    // Writes the file (header, key-values, tensor infos, aligned data). Throws Error(Io).
    void write(const std::filesystem::path& file) const;

private:
    gguf_context* gguf_;
    std::vector<ggml_context*> contexts_;    // hold the ggml_tensor headers gguf copies from
    size_t tensors_in_last_context_ = 0;
    std::vector<std::unique_ptr<TensorData>> tensors_;  // stable addresses for the data pointers
};

}  // namespace parlance
