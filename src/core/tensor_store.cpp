// TensorStore: format detection, lookup and accounting; the parsing lives in one file per format.
#include "core/tensor_store.h"

#include <cstring>
#include <fstream>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/tensor_readers.h"

namespace parlance {

namespace fs = std::filesystem;

const char* file_format_name(FileFormat format) noexcept {
    switch (format) {
        case FileFormat::Safetensors: return "safetensors";
        case FileFormat::Gguf: return "gguf";
        case FileFormat::WhisperCpp: return "whisper.cpp";
    }
    return "unknown";
}

int64_t TensorInfo::elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

namespace {

// The first 4 bytes of a file (fewer if it is shorter).
std::string read_magic(const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    char buf[4] = {};
    in.read(buf, 4);
    return std::string(buf, static_cast<size_t>(in.gcount()));
}

std::unique_ptr<TensorStore> open_file(const fs::path& file) {
    if (file.filename() == "model.safetensors.index.json" ||
        file.string().ends_with(".safetensors.index.json")) {
        return detail::read_safetensors_index(file);
    }
    const std::string magic = read_magic(file);
    if (magic == "GGUF") return detail::read_gguf(file);
    if (magic == "lmgg") return detail::read_whispercpp(file);  // 0x67676d6c little-endian
    const std::string ext = file.extension().string();
    if (ext == ".gguf") return detail::read_gguf(file);
    if (ext == ".bin") return detail::read_whispercpp(file);
    return detail::read_safetensors(file);
}

}  // namespace

std::unique_ptr<TensorStore> TensorStore::open(const fs::path& path) {
    std::error_code ec;
    auto status = fs::status(path, ec);
    if (!fs::exists(status)) {
        throw Error(ErrorKind::NotFound, path.string() + ": no such file or directory");
    }
    if (!fs::is_directory(status)) return open_file(path);

    if (fs::exists(path / "model.safetensors.index.json")) {
        return detail::read_safetensors_index(path / "model.safetensors.index.json");
    }
    if (fs::exists(path / "model.safetensors")) return detail::read_safetensors(path / "model.safetensors");
    // Otherwise accept exactly one *.safetensors or *.gguf file (e.g. a renamed export).
    std::vector<fs::path> candidates;
    for (const auto& entry : fs::directory_iterator(path)) {
        auto ext = entry.path().extension();
        if (entry.is_regular_file() && (ext == ".safetensors" || ext == ".gguf")) {
            candidates.push_back(entry.path());
        }
    }
    if (candidates.size() == 1) return open_file(candidates.front());
    throw Error(ErrorKind::NotFound,
                path.string() + ": no model.safetensors or model.safetensors.index.json" +
                    (candidates.empty() ? std::string() : " (and several other weight files)"));
}

TensorStore::TensorStore(FileFormat format, std::vector<std::shared_ptr<MappedFile>> files,
                         std::vector<TensorInfo> tensors, nlohmann::json metadata,
                         std::vector<std::string> vocab_bytes)
    : format_(format),
      files_(std::move(files)),
      tensors_(std::move(tensors)),
      metadata_(std::move(metadata)),
      vocab_bytes_(std::move(vocab_bytes)) {
    index_.reserve(tensors_.size());
    for (size_t i = 0; i < tensors_.size(); ++i) {
        auto [it, inserted] = index_.emplace(tensors_[i].name, i);
        if (!inserted) {
            const TensorInfo& first = tensors_[it->second];
            throw Error(ErrorKind::InvalidModel,
                        tensors_[i].file + ": tensor " + tensors_[i].name + " is also in " + first.file);
        }
    }
}

TensorStore::~TensorStore() = default;

const TensorInfo* TensorStore::find(std::string_view name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& TensorStore::get(std::string_view name) const {
    if (const TensorInfo* t = find(name)) return *t;
    std::string where = files_.empty() ? std::string("model") : files_.front()->path().string();
    throw Error(ErrorKind::InvalidModel, where + ": missing tensor " + std::string(name));
}

int64_t TensorStore::parameter_count() const {
    int64_t n = 0;
    for (const auto& t : tensors_) n += t.elements();
    return n;
}

std::vector<fs::path> TensorStore::files() const {
    std::vector<fs::path> out;
    for (const auto& f : files_) out.push_back(f->path());
    return out;
}

uint64_t TensorStore::bytes_on_disk() const {
    uint64_t n = 0;
    for (const auto& f : files_) n += f->size();
    return n;
}

void TensorStore::release(const TensorInfo& tensor) const {
    for (const auto& f : files_) {
        if (tensor.data >= f->data() && tensor.data + tensor.nbytes <= f->data() + f->size()) {
            f->release(tensor.data, tensor.nbytes);
            return;
        }
    }
}

}  // namespace parlance
