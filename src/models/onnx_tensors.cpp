// ONNX float tensors (see onnx_tensors.h).
#include "models/onnx_tensors.h"

#include <cstring>
#include <fstream>

#include <onnx/onnx_pb.h>

#include "core/error.h"

namespace parlance {
namespace {

// A TensorProto of FLOAT as values: raw little-endian bytes or the repeated float field.
bool to_float(const onnx::TensorProto& t, OnnxTensor* out, const std::string& file) {
    if (t.data_type() != onnx::TensorProto::FLOAT) return false;
    int64_t n = 1;
    for (int64_t d : t.dims()) {
        if (d < 0) throw Error(ErrorKind::InvalidModel, file + ": tensor " + t.name() + " has a negative dimension");
        n *= d;
    }
    out->shape.assign(t.dims().begin(), t.dims().end());
    out->values.resize(static_cast<size_t>(n));
    if (t.has_raw_data()) {
        if (t.raw_data().size() != static_cast<size_t>(n) * sizeof(float))
            throw Error(ErrorKind::InvalidModel, file + ": tensor " + t.name() + " holds " +
                                                     std::to_string(t.raw_data().size()) + " bytes, not " +
                                                     std::to_string(n * 4));
        std::memcpy(out->values.data(), t.raw_data().data(), t.raw_data().size());
    } else {
        if (t.float_data_size() != n)
            throw Error(ErrorKind::InvalidModel, file + ": tensor " + t.name() + " holds " +
                                                     std::to_string(t.float_data_size()) + " floats, not " +
                                                     std::to_string(n));
        std::copy(t.float_data().begin(), t.float_data().end(), out->values.begin());
    }
    return true;
}

void collect(const onnx::GraphProto& g, std::map<std::string, OnnxTensor>* out, const std::string& file) {
    for (const onnx::TensorProto& t : g.initializer()) {
        OnnxTensor v;
        if (to_float(t, &v, file)) (*out)[t.name()] = std::move(v);
    }
    for (const onnx::NodeProto& n : g.node()) {
        for (const onnx::AttributeProto& a : n.attribute()) {
            if (n.op_type() == "Constant" && a.name() == "value" && a.has_t() && n.output_size() == 1) {
                OnnxTensor v;
                if (to_float(a.t(), &v, file)) (*out)[n.output(0)] = std::move(v);
            }
            if (a.has_g()) collect(a.g(), out, file);
            for (const onnx::GraphProto& sub : a.graphs()) collect(sub, out, file);
        }
    }
}

}  // namespace

std::map<std::string, OnnxTensor> read_onnx_float_tensors(const std::filesystem::path& path) {
    const std::string file = path.string();
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(ErrorKind::NotFound, file + ": cannot open the ONNX file");
    onnx::ModelProto model;
    if (!model.ParseFromIstream(&in) || !model.has_graph())
        throw Error(ErrorKind::InvalidModel, file + ": not an ONNX model (the protobuf does not parse as ModelProto)");
    std::map<std::string, OnnxTensor> out;
    collect(model.graph(), &out, file);
    return out;
}

}  // namespace parlance
