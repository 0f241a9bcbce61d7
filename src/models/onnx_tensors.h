// The float tensors of an ONNX model file, read with the ONNX project's own protobuf schema
// (Debian's libonnx-dev): graph initializers and the values of Constant nodes, in the main graph
// and in every subgraph (If / Loop / Scan branches), by the name they carry. For models whose
// weights an exporter inlined as constants (Silero VAD keeps each sample rate's weights in one
// branch of an If), this is how the weights are found; the graph itself is not executed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace parlance {

struct OnnxTensor {
    std::vector<int64_t> shape;  // ONNX dims, outermost first (PyTorch order)
    std::vector<float> values;   // row-major
};

// Throws Error(NotFound) when the file is absent, Error(InvalidModel) naming the file when it is
// not an ONNX model. Tensors of other element types are skipped.
std::map<std::string, OnnxTensor> read_onnx_float_tensors(const std::filesystem::path& path);

}  // namespace parlance
