// Element types: names, storage sizes, and conversions between f32 and the stored ggml types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <ggml.h>

namespace parlance {

// ggml's name of a type ("f32", "f16", "bf16", "q8_0", "q4_K", ...).
const char* dtype_name(ggml_type type);

// The safetensors dtype string of a type ("F32", "F16", "BF16", "F64", "I8".."I64"), or nullopt
// when safetensors cannot express it (quantized types).
std::optional<std::string> safetensors_dtype_name(ggml_type type);
// The ggml type of a safetensors dtype string, or nullopt for dtypes we do not load (BOOL, U8,
// F8_*, U16..U64, ...).
std::optional<ggml_type> ggml_type_from_safetensors(std::string_view dtype);

// True for a type id that ggml knows and can size (excludes removed ids such as Q4_2).
bool is_valid_ggml_type(int64_t type);

// Bytes of one row of `n_per_row` elements; throws Error(InvalidModel) when n_per_row is not a
// multiple of the type's block size.
size_t row_bytes(ggml_type type, int64_t n_per_row);
// Bytes of a tensor of `shape` (PyTorch order: the last dimension is the row, ggml's ne[0]).
// Throws Error(InvalidModel) when the row is not a whole number of blocks or the size overflows.
size_t tensor_bytes(ggml_type type, std::span<const int64_t> shape);

// Scalar conversions (exact for f16/bf16 -> f32; round-to-nearest-even for f32 -> f16/bf16).
float f16_to_f32(uint16_t bits);
uint16_t f32_to_f16(float value);
float bf16_to_f32(uint16_t bits);
uint16_t f32_to_bf16(float value);

// Encodes f32 values as `type`: f32/f16/bf16 directly, quantized types through
// ggml_quantize_chunk with rows of `n_per_row` elements (the innermost dimension).
// values.size() must be a multiple of n_per_row. Throws Error(Unsupported) for types that cannot
// be produced this way (integer types, types needing an importance matrix).
std::vector<uint8_t> encode_f32(std::span<const float> values, ggml_type type, int64_t n_per_row);

// Decodes `n` elements of `type` at `data` to f32 (f32, f16, bf16, f64, integer types, and any
// quantized type with a ggml to_float). Throws Error(Unsupported) otherwise.
std::vector<float> decode_to_f32(const uint8_t* data, ggml_type type, int64_t n);

}  // namespace parlance
