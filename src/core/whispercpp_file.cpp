// whisper.cpp ggml .bin reader: magic, 11 int32 hparams, mel filters, vocabulary, then tensors
// (n_dims, name length, ggml type, ne[n_dims], name, data) back to back until the end of file.
// All integers are little-endian int32; tensor data is not aligned.
#include <cstring>
#include <limits>

#include "core/dtype.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "core/tensor_readers.h"

namespace parlance::detail {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr uint32_t kMagic = 0x67676d6c;  // "ggml"
constexpr int32_t kMaxNameLength = 4096;

const char* const kHparamNames[] = {"n_vocab",      "n_audio_ctx",  "n_audio_state", "n_audio_head",
                                    "n_audio_layer", "n_text_ctx",  "n_text_state",  "n_text_head",
                                    "n_text_layer",  "n_mels",      "ftype"};

// Bounds-checked sequential reads over the mapped file; every failure names the file, what was
// being read and the offset.
class Cursor {
public:
    explicit Cursor(const MappedFile& f) : file_(f) {}
    size_t offset() const { return pos_; }
    size_t remaining() const { return file_.size() - pos_; }
    bool at_end() const { return pos_ == file_.size(); }

    [[noreturn]] void fail(const std::string& what) const {
        throw Error(ErrorKind::InvalidModel,
                    file_.path().string() + ": " + what + " at offset " + std::to_string(pos_));
    }
    const uint8_t* take(size_t n, const std::string& what) {
        if (n > remaining()) {
            fail("truncated " + what + " (needs " + std::to_string(n) + " bytes, " +
                 std::to_string(remaining()) + " left)");
        }
        const uint8_t* p = file_.data() + pos_;
        pos_ += n;
        return p;
    }
    int32_t i32(const std::string& what) {
        int32_t v;
        std::memcpy(&v, take(4, what), 4);
        return v;
    }

private:
    const MappedFile& file_;
    size_t pos_ = 0;
};

}  // namespace

std::unique_ptr<TensorStore> read_whispercpp(const fs::path& file) {
    auto mapped = std::make_shared<MappedFile>(file);
    Cursor in(*mapped);
    const auto magic = static_cast<uint32_t>(in.i32("magic"));
    if (magic != kMagic) {
        char hex[16];
        std::snprintf(hex, sizeof hex, "0x%08x", magic);
        throw Error(ErrorKind::InvalidModel, file.string() + ": bad magic " + hex +
                                                 " (not a whisper.cpp ggml file; expected 0x67676d6c)");
    }
    json metadata = json::object();
    json hparams = json::object();
    for (const char* name : kHparamNames) hparams[name] = in.i32(std::string("hparams.") + name);
    metadata["hparams"] = hparams;

    const int32_t n_mel = in.i32("mel_filters.n_mel");
    const int32_t n_fft = in.i32("mel_filters.n_fft");
    if (n_mel < 0 || n_fft < 0 || (n_fft > 0 && n_mel > std::numeric_limits<int32_t>::max() / n_fft)) {
        in.fail("invalid mel filter size " + std::to_string(n_mel) + "x" + std::to_string(n_fft));
    }
    const size_t n_filters = static_cast<size_t>(n_mel) * static_cast<size_t>(n_fft);
    const uint8_t* filters = in.take(n_filters * sizeof(float), "mel filters");
    std::vector<float> filter_values(n_filters);
    if (n_filters > 0) std::memcpy(filter_values.data(), filters, n_filters * sizeof(float));
    metadata["mel_filters"] = {{"n_mel", n_mel}, {"n_fft", n_fft}, {"data", std::move(filter_values)}};

    const int32_t n_vocab = in.i32("vocab size");
    if (n_vocab < 0) in.fail("negative vocab size " + std::to_string(n_vocab));
    std::vector<std::string> vocab;
    vocab.reserve(static_cast<size_t>(std::min<int64_t>(n_vocab, in.remaining() / 4)));
    for (int32_t i = 0; i < n_vocab; ++i) {
        const std::string what = "vocab token " + std::to_string(i);
        const auto len = static_cast<uint32_t>(in.i32(what + " length"));
        const uint8_t* bytes = in.take(len, what);
        vocab.emplace_back(reinterpret_cast<const char*>(bytes), len);
    }

    std::vector<TensorInfo> tensors;
    while (!in.at_end()) {
        const size_t start = in.offset();
        const std::string nth = "tensor #" + std::to_string(tensors.size());
        const int32_t n_dims = in.i32(nth + " header");
        const int32_t name_len = in.i32(nth + " header");
        const int32_t ttype = in.i32(nth + " header");
        if (n_dims < 1 || n_dims > 4) in.fail(nth + ": n_dims " + std::to_string(n_dims) + " out of range 1..4");
        if (name_len < 1 || name_len > kMaxNameLength) {
            in.fail(nth + ": name length " + std::to_string(name_len) + " out of range");
        }
        int64_t ne[4] = {1, 1, 1, 1};
        for (int32_t d = 0; d < n_dims; ++d) {
            ne[d] = in.i32(nth + " dimensions");
            if (ne[d] < 0) in.fail(nth + ": negative dimension " + std::to_string(ne[d]));
        }
        const uint8_t* name_bytes = in.take(static_cast<size_t>(name_len), nth + " name");
        const std::string name(reinterpret_cast<const char*>(name_bytes), static_cast<size_t>(name_len));
        const std::string where = "tensor " + name;
        if (!is_valid_ggml_type(ttype)) in.fail(where + ": unknown ggml type " + std::to_string(ttype));
        const auto type = static_cast<ggml_type>(ttype);
        std::vector<int64_t> shape;
        for (int32_t d = n_dims - 1; d >= 0; --d) shape.push_back(ne[d]);
        size_t nbytes = 0;
        try {
            nbytes = tensor_bytes(type, shape);
        } catch (const Error& e) {
            in.fail(where + ": " + e.what());
        }
        if (nbytes > in.remaining()) {
            in.fail(where + " (header at offset " + std::to_string(start) + "): data of " +
                    std::to_string(nbytes) + " bytes runs past the end of the file (" +
                    std::to_string(in.remaining()) + " bytes left)");
        }
        const uint8_t* data = in.take(nbytes, where + " data");
        tensors.push_back(TensorInfo{name, type, std::move(shape), data, nbytes, file.string()});
    }
    return std::make_unique<TensorStore>(FileFormat::WhisperCpp,
                                         std::vector<std::shared_ptr<MappedFile>>{mapped},
                                         std::move(tensors), std::move(metadata), std::move(vocab));
}

}  // namespace parlance::detail
