// Whisper weight binding (see weights.h). The tensor names come from tensor_names.h.
#include "models/whisper/weights.h"

#include <cstring>
#include <set>

#include <ggml-cpu.h>

#include "core/error.h"
#include "core/weight_set.h"
#include "models/whisper/tensor_names.h"

namespace parlance::whisper {
namespace {

// The member of `w` that holds the tensor `n` names.
ggml_tensor** slot_of(WhisperWeights& w, const TensorName& n) {
    using R = TensorRole;
    LayerWeights* l = n.layer < 0 ? nullptr : n.decoder ? &w.dec_layers.at(n.layer) : &w.enc_layers.at(n.layer);
    switch (n.role) {
        case R::Conv1W: return &w.conv1_w;
        case R::Conv1B: return &w.conv1_b;
        case R::Conv2W: return &w.conv2_w;
        case R::Conv2B: return &w.conv2_b;
        case R::EncPos: return &w.enc_pos;
        case R::EncLnW: return &w.enc_ln_w;
        case R::EncLnB: return &w.enc_ln_b;
        case R::TokEmb: return &w.tok_emb;
        case R::DecPos: return &w.dec_pos;
        case R::DecLnW: return &w.dec_ln_w;
        case R::DecLnB: return &w.dec_ln_b;
        case R::ProjOut: return &w.proj_out;
        case R::AttnLnW: return &l->attn_ln_w;
        case R::AttnLnB: return &l->attn_ln_b;
        case R::AttnQW: return &l->attn.q_w;
        case R::AttnQB: return &l->attn.q_b;
        case R::AttnKW: return &l->attn.k_w;
        case R::AttnVW: return &l->attn.v_w;
        case R::AttnVB: return &l->attn.v_b;
        case R::AttnOW: return &l->attn.o_w;
        case R::AttnOB: return &l->attn.o_b;
        case R::CrossLnW: return &l->cross_ln_w;
        case R::CrossLnB: return &l->cross_ln_b;
        case R::CrossQW: return &l->cross.q_w;
        case R::CrossQB: return &l->cross.q_b;
        case R::CrossKW: return &l->cross.k_w;
        case R::CrossVW: return &l->cross.v_w;
        case R::CrossVB: return &l->cross.v_b;
        case R::CrossOW: return &l->cross.o_w;
        case R::CrossOB: return &l->cross.o_b;
        case R::MlpLnW: return &l->mlp_ln_w;
        case R::MlpLnB: return &l->mlp_ln_b;
        case R::Fc1W: return &l->fc1_w;
        case R::Fc1B: return &l->fc1_b;
        case R::Fc2W: return &l->fc2_w;
        case R::Fc2B: return &l->fc2_b;
    }
    throw Error(ErrorKind::Internal, "unhandled Whisper tensor role for " + n.hf);
}

}  // namespace

WhisperWeights::WhisperWeights(const WhisperConfig& c, const TensorStore& store, Backend& backend,
                               const WeightOptions& options) {
    enc_layers.resize(c.encoder_layers);
    dec_layers.resize(c.decoder_layers);
    const std::vector<TensorName> table = whisper_tensor_names(c);

    const bool cpp_names = store.format() == FileFormat::WhisperCpp;
    const ggml_type target = parse_weight_type(options.quantize);

    // Resolve every binding to a stored tensor, validating its shape.
    struct Resolved {
        const TensorName* binding;
        ggml_tensor** slot;
        const TensorInfo* info;
        ggml_type type;
    };
    std::vector<Resolved> resolved;
    std::set<std::string> used;
    for (const TensorName& b : table) {
        const std::string& name = cpp_names ? b.cpp : b.hf;
        const TensorInfo* info = name.empty() ? nullptr : store.find(name);
        if (!info) {
            if (b.optional) continue;
            std::string file = store.files().empty() ? "model" : store.files().front().string();
            throw Error(ErrorKind::InvalidModel, file + ": missing tensor " + name);
        }
        used.insert(name);
        // whisper.cpp stores conv biases as [d, 1]; accept any shape with the right element count
        // for 1-D parameters, exact shapes otherwise.
        bool ok = info->shape == b.shape;
        if (!ok && b.shape.size() == 1) ok = info->elements() == b.shape[0];
        if (!ok)
            throw Error(ErrorKind::InvalidModel, info->file + ": tensor " + name + " has shape " +
                                                     shape_string(info->shape) + ", expected " +
                                                     shape_string(b.shape) + " from the config");
        ggml_type type = info->type;
        ggml_tensor** slot = slot_of(*this, b);
        if (!b.linear) {
            // Embeddings may stay f16/bf16 (get_rows and the output product read them); the
            // small vectors become f32 so element-wise ops see one type.
            if (!(slot == &tok_emb || slot == &proj_out) || ggml_is_quantized(type))
                type = GGML_TYPE_F32;
        } else if (target != GGML_TYPE_COUNT && b.shape.size() == 2 &&
                   b.shape[1] % ggml_blck_size(target) == 0) {
            type = target;
        } else if (ggml_is_quantized(type) && b.shape.size() != 2) {
            type = GGML_TYPE_F32;  // convolutions need a float kernel
        }
        resolved.push_back({&b, slot, info, type});
    }
    for (const TensorInfo& t : store.tensors()) {
        if (!used.count(t.name))
            throw Error(ErrorKind::InvalidModel,
                        t.file + ": unexpected tensor " + t.name + " (not part of the Whisper layout)");
    }

    ggml_init_params params{ggml_tensor_overhead() * (resolved.size() + 8), nullptr, true};
    ctx_ = ggml_init(params);
    for (Resolved& r : resolved) {
        std::vector<int64_t> ne(r.binding->shape.rbegin(), r.binding->shape.rend());
        ggml_tensor* t = ggml_new_tensor(ctx_, r.type, static_cast<int>(ne.size()), ne.data());
        ggml_set_name(t, r.binding->hf.c_str());
        *r.slot = t;
    }
    buffer_ = ggml_backend_alloc_ctx_tensors(ctx_, backend.primary());
    if (!buffer_) throw Error(ErrorKind::Io, "could not allocate device memory for the weights");
    ggml_backend_buffer_set_usage(buffer_, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);

    for (Resolved& r : resolved) {
        upload_weight(*r.slot, *r.info);
        // Copied: its mapped pages leave memory now, so the peak holds the weights once.
        store.release(*r.info);
    }
    if (proj_out == nullptr) proj_out = tok_emb;
}

WhisperWeights::~WhisperWeights() {
    if (buffer_) ggml_backend_buffer_free(buffer_);
    if (ctx_) ggml_free(ctx_);
}

size_t WhisperWeights::device_bytes() const { return buffer_ ? ggml_backend_buffer_get_size(buffer_) : 0; }

std::string WhisperWeights::type_summary() const { return tensor_type_summary(ctx_); }

}  // namespace parlance::whisper
