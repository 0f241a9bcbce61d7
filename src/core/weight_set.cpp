// The generic weight binder (see weight_set.h).
#include "core/weight_set.h"

#include <cstring>
#include <map>
#include <set>

#include "core/error.h"

namespace parlance {
std::string shape_string(const std::vector<int64_t>& s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}

std::vector<float> tensor_to_f32(const TensorInfo& t) {
    std::vector<float> out(static_cast<size_t>(t.elements()));
    const auto* traits = ggml_get_type_traits(t.type);
    if (t.type == GGML_TYPE_F32) {
        std::memcpy(out.data(), t.data, out.size() * sizeof(float));
    } else if (traits && traits->to_float) {
        traits->to_float(t.data, out.data(), static_cast<int64_t>(out.size()));
    } else {
        throw Error(ErrorKind::Unsupported,
                    t.file + ": tensor " + t.name + " has type " + ggml_type_name(t.type) + ", which cannot be read");
    }
    return out;
}

void upload_weight(ggml_tensor* t, const TensorInfo& stored) {
    if (t->type == stored.type) {
        ggml_backend_tensor_set(t, stored.data, 0, stored.nbytes);
        return;
    }
    std::vector<float> f = tensor_to_f32(stored);
    if (t->type == GGML_TYPE_F32) {
        ggml_backend_tensor_set(t, f.data(), 0, f.size() * sizeof(float));
        return;
    }
    const int64_t row = t->ne[0];
    const int64_t rows = static_cast<int64_t>(f.size()) / row;
    std::vector<uint8_t> q(ggml_row_size(t->type, row) * rows);
    ggml_quantize_chunk(t->type, f.data(), q.data(), 0, rows, row, nullptr);
    ggml_backend_tensor_set(t, q.data(), 0, q.size());
}

std::string tensor_type_summary(ggml_context* ctx) {
    std::map<std::string, int> counts;
    for (ggml_tensor* t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t))
        counts[ggml_type_name(t->type)]++;
    std::string out;
    for (const auto& [name, n] : counts) out += (out.empty() ? "" : ", ") + name + "×" + std::to_string(n);
    return out;
}

ggml_type parse_weight_type(const std::string& name) {
    if (name.empty()) return GGML_TYPE_COUNT;
    if (name == "f32") return GGML_TYPE_F32;
    if (name == "f16") return GGML_TYPE_F16;
    if (name == "q8_0") return GGML_TYPE_Q8_0;
    if (name == "q5_k") return GGML_TYPE_Q5_K;
    if (name == "q4_k") return GGML_TYPE_Q4_K;
    throw Error(ErrorKind::InvalidArgument, "unknown quantization '" + name + "' (f32|f16|q8_0|q5_k|q4_k)");
}

WeightSet::WeightSet(const TensorStore& store, std::span<const WeightSpec> table, Backend& backend, ggml_type quantize,
                     std::string_view what, std::span<const std::string> ignored) {
    struct Resolved {
        const WeightSpec* spec;
        const TensorInfo* info;
        ggml_type type;
    };
    std::vector<Resolved> resolved;
    std::set<std::string> used(ignored.begin(), ignored.end());
    const std::string first_file = store.files().empty() ? "model" : store.files().front().string();
    for (const WeightSpec& s : table) {
        const TensorInfo* info = store.find(s.name);
        if (!info) {
            if (s.optional) continue;
            throw Error(ErrorKind::InvalidModel, first_file + ": missing tensor " + s.name);
        }
        used.insert(s.name);
        bool ok = info->shape == s.shape;
        if (!ok && s.shape.size() == 1) ok = info->elements() == s.shape[0];
        if (!ok)
            throw Error(ErrorKind::InvalidModel, info->file + ": tensor " + s.name + " has shape " +
                                                     shape_string(info->shape) + ", expected " + shape_string(s.shape) +
                                                     " from the config");
        ggml_type type = info->type;
        if (type == GGML_TYPE_BF16) type = GGML_TYPE_F32;
        switch (s.kind) {
            case WeightKind::Vector:
                type = GGML_TYPE_F32;
                break;
            case WeightKind::Embedding:
                if (quantize == GGML_TYPE_F32 || quantize == GGML_TYPE_F16) type = quantize;
                break;
            case WeightKind::Matrix:
                if (s.shape.size() != 2) {
                    // A convolution kernel: ggml's convolutions need a float kernel.
                    if (ggml_is_quantized(type)) type = GGML_TYPE_F32;
                } else if (quantize != GGML_TYPE_COUNT && s.shape.back() % ggml_blck_size(quantize) == 0) {
                    type = quantize;
                }
                break;
        }
        resolved.push_back({&s, info, type});
    }
    for (const TensorInfo& t : store.tensors())
        if (!used.count(t.name))
            throw Error(ErrorKind::InvalidModel, t.file + ": unexpected tensor " + t.name + " (not part of the " +
                                                     std::string(what) + " layout)");

    ggml_init_params params{ggml_tensor_overhead() * (resolved.size() + 8), nullptr, true};
    ctx_ = ggml_init(params);
    for (Resolved& r : resolved) {
        std::vector<int64_t> ne(r.spec->shape.rbegin(), r.spec->shape.rend());
        ggml_tensor* t = ggml_new_tensor(ctx_, r.type, static_cast<int>(ne.size()), ne.data());
        ggml_set_name(t, r.spec->name.c_str());
        *r.spec->slot = t;
    }
    buffer_ = ggml_backend_alloc_ctx_tensors(ctx_, backend.primary());
    if (!buffer_) throw Error(ErrorKind::Io, "could not allocate device memory for the weights");
    ggml_backend_buffer_set_usage(buffer_, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    prefer_huge_pages(buffer_);
    for (Resolved& r : resolved) {
        upload_weight(*r.spec->slot, *r.info);
        store.release(*r.info);  // its mapped pages leave memory: the peak holds the weights once
    }
}

WeightSet::~WeightSet() {
    if (buffer_) ggml_backend_buffer_free(buffer_);
    if (ctx_) ggml_free(ctx_);
}

size_t WeightSet::device_bytes() const {
    return buffer_ ? ggml_backend_buffer_get_size(buffer_) : 0;
}

std::string WeightSet::type_summary() const {
    return tensor_type_summary(ctx_);
}

}  // namespace parlance
