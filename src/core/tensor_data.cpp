// TensorData construction and checks.
#include "core/tensor_data.h"

#include "core/dtype.h"
#include "core/error.h"

namespace parlance {

int64_t TensorData::elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

TensorData TensorData::from_f32(std::string name, std::vector<int64_t> shape, std::span<const float> values,
                                ggml_type type) {
    TensorData t{std::move(name), type, std::move(shape), {}};
    if (static_cast<int64_t>(values.size()) != t.elements()) {
        throw Error(ErrorKind::InvalidArgument, "tensor " + t.name + ": " + std::to_string(values.size()) +
                                                    " values for " + std::to_string(t.elements()) + " elements");
    }
    const int64_t row = t.shape.empty() ? 1 : t.shape.back();
    if (values.empty()) return t;
    try {
        t.bytes = encode_f32(values, type, row);
    } catch (const Error& e) {
        throw Error(e.kind(), "tensor " + t.name + ": " + e.what());
    }
    return t;
}

void TensorData::check() const {
    size_t expected = 0;
    try {
        expected = tensor_bytes(type, shape);
    } catch (const Error& e) {
        throw Error(ErrorKind::InvalidArgument, "tensor " + name + ": " + e.what());
    }
    if (bytes.size() != expected) {
        throw Error(ErrorKind::InvalidArgument, "tensor " + name + ": " + std::to_string(bytes.size()) +
                                                    " bytes, its shape and type need " + std::to_string(expected));
    }
}

}  // namespace parlance
