// Read-only, memory-mapped view of the tensors and metadata of a model on disk, whatever the
// format: safetensors (single or sharded), GGUF, or whisper.cpp's ggml .bin. Validation of the
// container itself (truncation, lying header lengths, unknown dtypes) happens at open; validation
// against an architecture (which tensors, which shapes) belongs to models/<arch>.
//
// Thread safety: immutable after open; any number of threads may read it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <ggml.h>
#include <nlohmann/json.hpp>

namespace parlance {

enum class FileFormat { Safetensors, Gguf, WhisperCpp };
const char* file_format_name(FileFormat format) noexcept;

struct TensorInfo {
    std::string name;            // exactly as stored in the file
    ggml_type type;              // storage type: GGML_TYPE_F32, F16, BF16, or a ggml quantized type
    std::vector<int64_t> shape;  // PyTorch order, outermost dimension first (ggml's ne reversed)
    const uint8_t* data;         // into the mapped file; valid while the store lives
    size_t nbytes;               // bytes of data
    std::string file;            // the file it came from, for error messages

    int64_t elements() const;
};

class MappedFile;  // see core/mapped_file.h

class TensorStore {
public:
    // Opens a single .safetensors / .gguf / whisper.cpp .bin file, or a directory holding
    // model.safetensors or model.safetensors.index.json (+ shards). Throws Error(InvalidModel)
    // naming the file (and tensor) for anything malformed, Error(NotFound)/Error(Io) if absent.
    static std::unique_ptr<TensorStore> open(const std::filesystem::path& path);

    ~TensorStore();
    TensorStore(const TensorStore&) = delete;
    TensorStore& operator=(const TensorStore&) = delete;

    FileFormat format() const { return format_; }
    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    // nullptr when absent.
    const TensorInfo* find(std::string_view name) const;
    // Throws Error(InvalidModel) "FILE: missing tensor NAME" when absent.
    const TensorInfo& get(std::string_view name) const;

    // Container metadata as JSON: GGUF key-values (arrays of tokens included; strings are the
    // file's bytes, not guaranteed UTF-8: dump with error_handler_t::replace), whisper.cpp
    // hparams under "hparams" (whisper.cpp's field names) plus "mel_filters" {n_mel, n_fft,
    // data}, safetensors "__metadata__" (an object of strings; merged over all shards).
    const nlohmann::json& metadata() const { return metadata_; }

    // The vocabulary embedded in a whisper.cpp .bin, token id -> raw bytes (not valid UTF-8 in
    // general, so kept out of the JSON). Empty for other formats.
    const std::vector<std::string>& vocab_bytes() const { return vocab_bytes_; }

    // Sum of elements() over all tensors.
    int64_t parameter_count() const;

    std::vector<std::filesystem::path> files() const;
    uint64_t bytes_on_disk() const;

    // Drops the tensor's mapped pages from memory once a loader has copied it (see
    // MappedFile::release); its data stays readable, from the file.
    void release(const TensorInfo& tensor) const;

    // Used by the format readers. Throws Error(InvalidModel) naming both files when two tensors
    // share a name.
    TensorStore(FileFormat format, std::vector<std::shared_ptr<MappedFile>> files,
                std::vector<TensorInfo> tensors, nlohmann::json metadata,
                std::vector<std::string> vocab_bytes = {});

private:
    FileFormat format_;
    std::vector<std::shared_ptr<MappedFile>> files_;
    std::vector<TensorInfo> tensors_;
    nlohmann::json metadata_;
    std::vector<std::string> vocab_bytes_;
    std::unordered_map<std::string_view, size_t> index_;  // name -> position in tensors_
};

}  // namespace parlance
