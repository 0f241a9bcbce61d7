// POSIX implementation of MappedFile (mmap, PROT_READ, MAP_PRIVATE).
#include "core/mapped_file.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

namespace parlance {

namespace {

[[noreturn]] void fail_errno(const std::filesystem::path& path, const char* what, int err) {
    ErrorKind kind = (err == ENOENT || err == ENOTDIR) ? ErrorKind::NotFound : ErrorKind::Io;
    throw Error(kind, path.string() + ": " + what + ": " + std::strerror(err));
}

}  // namespace

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail_errno(path, "cannot open", errno);
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        int err = errno;
        ::close(fd);
        fail_errno(path, "cannot stat", err);
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        throw Error(ErrorKind::Io, path.string() + ": not a regular file");
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) {
        void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int err = errno;
            ::close(fd);
            fail_errno(path, "cannot mmap", err);
        }
        data_ = static_cast<const uint8_t*>(p);
    }
    ::close(fd);  // the mapping stays valid without the descriptor
}

void MappedFile::release(const void* data, size_t bytes) const {
    if (data_ == nullptr || bytes == 0) return;
    const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const auto begin = reinterpret_cast<uintptr_t>(data);
    const auto base = reinterpret_cast<uintptr_t>(data_);
    if (begin < base || begin + bytes > base + size_) return;
    // Rounded outward: a page shared with a neighbour that is still needed is simply read again.
    const uintptr_t lo = begin & ~(page - 1);
    const uintptr_t hi = std::min((begin + bytes + page - 1) & ~(page - 1), (base + size_ + page - 1) & ~(page - 1));
    ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

MappedFile::~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace parlance
