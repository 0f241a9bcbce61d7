// Read-only memory map of a whole file (RAII): the zero-copy backing of every TensorStore.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>

namespace parlance {

class MappedFile {
public:
    // Maps `path` read-only. Throws Error(NotFound) when it does not exist, Error(Io) when it
    // cannot be opened, stat'ed or mapped (both messages name the path). An empty file maps to
    // size() == 0 and data() == nullptr.
    explicit MappedFile(const std::filesystem::path& path);
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const std::filesystem::path& path() const { return path_; }
    const uint8_t* data() const { return data_; }
    size_t size() const { return size_; }

    // Drops the pages of [data, data + bytes) from this process's memory (madvise DONTNEED), for
    // a loader that has copied what it needed: the peak then holds the weights once, not the
    // mapping and the copy together. The range must lie inside data()..data() + size(). The pages
    // are read-only and clean, so a later read of the range faults them in again from the file.
    void release(const void* data, size_t bytes) const;

private:
    std::filesystem::path path_;
    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
};

}  // namespace parlance
