// The generic weight binder: one table per architecture (name, shape, kind, where the tensor
// goes) checked against a TensorStore — missing, unexpected and misshaped tensors are refused
// naming the file and tensor — then converted (quantized at load when asked) and uploaded to the
// compute device. Immutable once built; shared by every sequence and request.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <ggml-backend.h>
#include <ggml.h>

#include "core/backend.h"
#include "core/tensor_store.h"

namespace parlance {

enum class WeightKind {
    Matrix,     // a product's weight: may be quantized at load; one of more than 2 dims is a
                // convolution kernel, kept as stored (a quantized one becomes f32), never quantized
    Embedding,  // rows read by get_rows (and the output product when tied): f32/f16/quantized kept
    Vector,     // norms, biases: always f32
};

struct WeightSpec {
    std::string name;               // as stored in the file
    std::vector<int64_t> shape;     // PyTorch order, from the config
    WeightKind kind = WeightKind::Matrix;
    ggml_tensor** slot = nullptr;   // receives the device tensor
    bool optional = false;          // absent -> *slot stays null
};

// "[3, 80, 384]": a PyTorch-order shape for error messages.
std::string shape_string(const std::vector<int64_t>& shape);
// A stored tensor's values as f32 (any type with a ggml to_float). Throws Error(Unsupported)
// naming the file and tensor otherwise.
std::vector<float> tensor_to_f32(const TensorInfo& tensor);

// Writes a stored tensor into the device tensor `t`, converting (and quantizing) to t's type.
void upload_weight(ggml_tensor* t, const TensorInfo& stored);
// "f32×10, q8_0×28": tensor type -> count over every tensor of a context.
std::string tensor_type_summary(ggml_context* ctx);

// "" (as stored), "f32", "f16", "q8_0", "q5_k", "q4_k" -> GGML_TYPE_COUNT for "as stored".
// Throws Error(InvalidArgument) naming the accepted values.
ggml_type parse_weight_type(const std::string& name);

class WeightSet {
public:
    // `what` names the architecture in errors ("not part of the Qwen3 layout"). `ignored`: stored
    // tensors that may be present and are not loaded (e.g. rotary tables some converters write).
    // Types: 2-D Matrix -> `quantize` if set and its rows are whole blocks, else as stored, except
    // bf16, which becomes f32 (exact; ggml's bf16 products would round the activations too);
    // Embedding -> f32/f16/quantized as stored (bf16 -> f32; `quantize` f32/f16 applies).
    WeightSet(const TensorStore& store, std::span<const WeightSpec> table, Backend& backend,
              ggml_type quantize, std::string_view what, std::span<const std::string> ignored = {});
    ~WeightSet();
    WeightSet(const WeightSet&) = delete;
    WeightSet& operator=(const WeightSet&) = delete;

    size_t device_bytes() const;
    // "f32×10, q8_0×28": stored type -> tensor count after conversion.
    std::string type_summary() const;

private:
    ggml_context* ctx_ = nullptr;
    ggml_backend_buffer_t buffer_ = nullptr;
};

}  // namespace parlance
