// Type names, sizes and f32 conversions on top of ggml's type traits.
#include "core/dtype.h"

#include <cstring>
#include <limits>

#include "core/error.h"

namespace parlance {

const char* dtype_name(ggml_type type) {
    if (!is_valid_ggml_type(type)) return "invalid";
    return ggml_type_name(type);
}

std::optional<std::string> safetensors_dtype_name(ggml_type type) {
    switch (type) {
        case GGML_TYPE_F32: return "F32";
        case GGML_TYPE_F16: return "F16";
        case GGML_TYPE_BF16: return "BF16";
        case GGML_TYPE_F64: return "F64";
        case GGML_TYPE_I8: return "I8";
        case GGML_TYPE_I16: return "I16";
        case GGML_TYPE_I32: return "I32";
        case GGML_TYPE_I64: return "I64";
        default: return std::nullopt;
    }
}

std::optional<ggml_type> ggml_type_from_safetensors(std::string_view dtype) {
    if (dtype == "F32") return GGML_TYPE_F32;
    if (dtype == "F16") return GGML_TYPE_F16;
    if (dtype == "BF16") return GGML_TYPE_BF16;
    if (dtype == "F64") return GGML_TYPE_F64;
    if (dtype == "I8") return GGML_TYPE_I8;
    if (dtype == "I16") return GGML_TYPE_I16;
    if (dtype == "I32") return GGML_TYPE_I32;
    if (dtype == "I64") return GGML_TYPE_I64;
    return std::nullopt;
}

bool is_valid_ggml_type(int64_t type) {
    if (type < 0 || type >= GGML_TYPE_COUNT) return false;
    auto t = static_cast<ggml_type>(type);
    return ggml_blck_size(t) > 0 && ggml_type_size(t) > 0;
}

size_t row_bytes(ggml_type type, int64_t n_per_row) {
    if (!is_valid_ggml_type(type)) {
        throw Error(ErrorKind::InvalidModel, "invalid ggml type id " + std::to_string(type));
    }
    int64_t block = ggml_blck_size(type);
    if (n_per_row < 0 || n_per_row % block != 0) {
        throw Error(ErrorKind::InvalidModel,
                    "row of " + std::to_string(n_per_row) + " elements is not a whole number of " +
                        dtype_name(type) + " blocks of " + std::to_string(block));
    }
    return ggml_row_size(type, n_per_row);
}

size_t tensor_bytes(ggml_type type, std::span<const int64_t> shape) {
    if (shape.empty()) return row_bytes(type, 1);  // a scalar
    size_t bytes = row_bytes(type, shape.back());
    for (size_t i = 0; i + 1 < shape.size(); ++i) {
        int64_t d = shape[i];
        if (d < 0) throw Error(ErrorKind::InvalidModel, "negative dimension " + std::to_string(d));
        if (d != 0 && bytes > std::numeric_limits<size_t>::max() / static_cast<size_t>(d)) {
            throw Error(ErrorKind::InvalidModel, "tensor size overflows");
        }
        bytes *= static_cast<size_t>(d);
    }
    return bytes;
}

float f16_to_f32(uint16_t bits) { return ggml_fp16_to_fp32(bits); }
uint16_t f32_to_f16(float value) { return ggml_fp32_to_fp16(value); }
float bf16_to_f32(uint16_t bits) { return ggml_bf16_to_fp32(ggml_bf16_t{bits}); }
uint16_t f32_to_bf16(float value) { return ggml_fp32_to_bf16(value).bits; }

std::vector<uint8_t> encode_f32(std::span<const float> values, ggml_type type, int64_t n_per_row) {
    const auto n = static_cast<int64_t>(values.size());
    if (n_per_row <= 0 || n % n_per_row != 0) {
        throw Error(ErrorKind::InvalidArgument,
                    std::to_string(n) + " values are not whole rows of " + std::to_string(n_per_row));
    }
    switch (type) {
        case GGML_TYPE_F32: {
            std::vector<uint8_t> out(values.size() * sizeof(float));
            if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
            return out;
        }
        case GGML_TYPE_F16: {
            std::vector<uint8_t> out(values.size() * 2);
            ggml_fp32_to_fp16_row(values.data(), reinterpret_cast<ggml_fp16_t*>(out.data()), n);
            return out;
        }
        case GGML_TYPE_BF16: {
            std::vector<uint8_t> out(values.size() * 2);
            ggml_fp32_to_bf16_row_ref(values.data(), reinterpret_cast<ggml_bf16_t*>(out.data()), n);
            return out;
        }
        default: break;
    }
    if (!is_valid_ggml_type(type) || !ggml_is_quantized(type) || ggml_quantize_requires_imatrix(type)) {
        throw Error(ErrorKind::Unsupported,
                    std::string("cannot encode f32 values as ") + dtype_name(type));
    }
    const int64_t rows = n / n_per_row;
    std::vector<uint8_t> out(row_bytes(type, n_per_row) * static_cast<size_t>(rows));
    ggml_quantize_chunk(type, values.data(), out.data(), 0, rows, n_per_row, nullptr);
    return out;
}

namespace {

template <typename T>
std::vector<float> widen(const uint8_t* data, int64_t n) {
    std::vector<float> out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        T v;
        std::memcpy(&v, data + i * sizeof(T), sizeof(T));
        out[static_cast<size_t>(i)] = static_cast<float>(v);
    }
    return out;
}

}  // namespace

std::vector<float> decode_to_f32(const uint8_t* data, ggml_type type, int64_t n) {
    switch (type) {
        case GGML_TYPE_F32: return widen<float>(data, n);
        case GGML_TYPE_F64: return widen<double>(data, n);
        case GGML_TYPE_I8: return widen<int8_t>(data, n);
        case GGML_TYPE_I16: return widen<int16_t>(data, n);
        case GGML_TYPE_I32: return widen<int32_t>(data, n);
        case GGML_TYPE_I64: return widen<int64_t>(data, n);
        case GGML_TYPE_F16: {
            std::vector<float> out(static_cast<size_t>(n));
            for (int64_t i = 0; i < n; ++i) {
                uint16_t b;
                std::memcpy(&b, data + 2 * i, 2);
                out[static_cast<size_t>(i)] = f16_to_f32(b);
            }
            return out;
        }
        case GGML_TYPE_BF16: {
            std::vector<float> out(static_cast<size_t>(n));
            for (int64_t i = 0; i < n; ++i) {
                uint16_t b;
                std::memcpy(&b, data + 2 * i, 2);
                out[static_cast<size_t>(i)] = bf16_to_f32(b);
            }
            return out;
        }
        default: break;
    }
    if (!is_valid_ggml_type(type)) {
        throw Error(ErrorKind::Unsupported, "cannot decode invalid ggml type " + std::to_string(type));
    }
    const ggml_type_traits* traits = ggml_get_type_traits(type);
    if (traits == nullptr || traits->to_float == nullptr || n % traits->blck_size != 0) {
        throw Error(ErrorKind::Unsupported, std::string("cannot decode ") + dtype_name(type) + " to f32");
    }
    std::vector<float> out(static_cast<size_t>(n));
    traits->to_float(data, out.data(), n);
    return out;
}

}  // namespace parlance
