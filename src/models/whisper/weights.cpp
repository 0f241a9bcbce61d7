// Whisper weight binding (see weights.h). The tensor names come from tensor_names.h.
#include "models/whisper/weights.h"

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
    const bool cpp_names = store.format() == FileFormat::WhisperCpp;
    std::vector<WeightSpec> table;
    for (const TensorName& n : whisper_tensor_names(c)) {
        const std::string& name = cpp_names ? n.cpp : n.hf;
        if (name.empty()) continue;  // proj_out in whisper.cpp files: always tied
        ggml_tensor** slot = slot_of(*this, n);
        const WeightKind kind = n.linear                                 ? WeightKind::Matrix
                                : slot == &tok_emb || slot == &proj_out ? WeightKind::Embedding
                                                                         : WeightKind::Vector;
        table.push_back({name, n.shape, kind, slot, n.optional});
    }
    weights_ = std::make_unique<WeightSet>(store, table, backend, parse_weight_type(options.quantize), "Whisper");
    if (proj_out == nullptr) proj_out = tok_emb;
}

WhisperWeights::~WhisperWeights() = default;

size_t WhisperWeights::device_bytes() const { return weights_->device_bytes(); }

std::string WhisperWeights::type_summary() const { return weights_->type_summary(); }

}  // namespace parlance::whisper
