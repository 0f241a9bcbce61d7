// An owned tensor (name, type, shape, bytes) as the checkpoint writers take it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <ggml.h>

namespace parlance {

struct TensorData {
    std::string name;
    ggml_type type = GGML_TYPE_F32;
    std::vector<int64_t> shape;  // PyTorch order, outermost first (ggml's ne reversed)
    std::vector<uint8_t> bytes;  // exactly tensor_bytes(type, shape) bytes, little-endian

    // Encodes f32 `values` (row-major, shape.back() per row) as `type`: f32, f16, bf16 or a
    // quantized type that needs no importance matrix. Throws Error(InvalidArgument) when the
    // count does not match the shape, Error(Unsupported) for types that cannot be encoded.
    static TensorData from_f32(std::string name, std::vector<int64_t> shape, std::span<const float> values,
                               ggml_type type = GGML_TYPE_F32);

    int64_t elements() const;
    // Throws Error(InvalidArgument) naming the tensor when bytes.size() does not match shape/type.
    void check() const;
};

}  // namespace parlance
