// GGUF writer over ggml's gguf.h (see gguf_writer.h).
#include "core/gguf_writer.h"

#include <gguf.h>

#include "core/dtype.h"
#include "core/error.h"

namespace parlance {

namespace {
constexpr size_t kTensorsPerContext = 256;
}

GgufWriter::GgufWriter() : gguf_(gguf_init_empty()) {
    if (gguf_ == nullptr) throw Error(ErrorKind::Internal, "gguf_init_empty failed");
}

GgufWriter::~GgufWriter() {
    gguf_free(gguf_);
    for (ggml_context* ctx : contexts_) ggml_free(ctx);
}

void GgufWriter::set_u32(const std::string& key, uint32_t value) { gguf_set_val_u32(gguf_, key.c_str(), value); }
void GgufWriter::set_i32(const std::string& key, int32_t value) { gguf_set_val_i32(gguf_, key.c_str(), value); }
void GgufWriter::set_u64(const std::string& key, uint64_t value) { gguf_set_val_u64(gguf_, key.c_str(), value); }
void GgufWriter::set_f32(const std::string& key, float value) { gguf_set_val_f32(gguf_, key.c_str(), value); }
void GgufWriter::set_bool(const std::string& key, bool value) { gguf_set_val_bool(gguf_, key.c_str(), value); }
void GgufWriter::set_str(const std::string& key, const std::string& value) {
    gguf_set_val_str(gguf_, key.c_str(), value.c_str());
}
void GgufWriter::set_strs(const std::string& key, const std::vector<std::string>& values) {
    std::vector<const char*> ptrs;
    ptrs.reserve(values.size());
    for (const auto& v : values) ptrs.push_back(v.c_str());
    gguf_set_arr_str(gguf_, key.c_str(), ptrs.data(), ptrs.size());
}
void GgufWriter::set_i32s(const std::string& key, const std::vector<int32_t>& values) {
    gguf_set_arr_data(gguf_, key.c_str(), GGUF_TYPE_INT32, values.data(), values.size());
}
void GgufWriter::set_f32s(const std::string& key, const std::vector<float>& values) {
    gguf_set_arr_data(gguf_, key.c_str(), GGUF_TYPE_FLOAT32, values.data(), values.size());
}

void GgufWriter::add_tensor(TensorData tensor) {
    tensor.check();
    if (tensor.shape.size() > GGML_MAX_DIMS) {
        throw Error(ErrorKind::InvalidArgument, "tensor " + tensor.name + ": more than 4 dimensions");
    }
    if (tensor.name.size() >= GGML_MAX_NAME) {
        throw Error(ErrorKind::InvalidArgument, "tensor " + tensor.name + ": name longer than " +
                                                    std::to_string(GGML_MAX_NAME - 1) + " bytes");
    }
    if (gguf_find_tensor(gguf_, tensor.name.c_str()) >= 0) {
        throw Error(ErrorKind::InvalidArgument, "tensor " + tensor.name + " added twice");
    }
    if (contexts_.empty() || tensors_in_last_context_ == kTensorsPerContext) {
        ggml_init_params params{kTensorsPerContext * ggml_tensor_overhead(), nullptr, true};
        ggml_context* ctx = ggml_init(params);
        if (ctx == nullptr) throw Error(ErrorKind::Internal, "ggml_init failed");
        contexts_.push_back(ctx);
        tensors_in_last_context_ = 0;
    }
    int64_t ne[GGML_MAX_DIMS] = {1, 1, 1, 1};
    const int n_dims = tensor.shape.empty() ? 1 : static_cast<int>(tensor.shape.size());
    for (size_t i = 0; i < tensor.shape.size(); ++i) ne[i] = tensor.shape[tensor.shape.size() - 1 - i];
    ggml_tensor* t = ggml_new_tensor(contexts_.back(), tensor.type, n_dims, ne);
    ++tensors_in_last_context_;
    ggml_set_name(t, tensor.name.c_str());
    auto owned = std::make_unique<TensorData>(std::move(tensor));
    t->data = owned->bytes.data();
    gguf_add_tensor(gguf_, t);
    tensors_.push_back(std::move(owned));
}

void GgufWriter::write(const std::filesystem::path& file) const {
    if (!gguf_write_to_file(gguf_, file.c_str(), false)) {
        throw Error(ErrorKind::Io, file.string() + ": cannot write GGUF file");
    }
}

}  // namespace parlance
