// The Qwen3 causal language model (dense): GQA with QK-norm, RMSNorm, SwiGLU, rotary positions,
// tied or untied output projection. Loads HF snapshot directories (single or sharded
// safetensors, f32/f16/bf16) and llama.cpp GGUF files (its `qwen3` tensor names). The weights
// are immutable after load; forward() runs one batched step over the paged KV cache.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/graph_ops.h"
#include "core/model_files.h"
#include "core/weight_set.h"
#include "models/language_model.h"
#include "models/qwen3/config.h"
#include "text/tokenizer.h"

namespace parlance::qwen3 {

struct Qwen3LoadOptions {
    std::string quantize;  // "" as stored (bf16 -> f32), "f32", "f16", "q8_0", "q5_k", "q4_k"
    // A Qwen3 decoder inside another HF checkpoint (Qwen3-ASR's text model): its config object
    // instead of config.json's, the prefix its tensor names carry instead of "model." (e.g.
    // "model.language_model."), and the stored tensors of the other parts, left to their loaders.
    const nlohmann::json* config = nullptr;
    std::string hf_prefix = "model.";
    std::vector<std::string> foreign_tensors;
    // Token texts that also end a sequence when the tokenizer has them (a GGUF names one
    // eos_token_id; the checkpoint it came from may have stopped on several).
    std::vector<std::string> stop_tokens;
};

class Qwen3Model final : public LanguageModel {
public:
    // `files`: an opened HF directory (config.json model_type qwen3, tokenizer.json) or GGUF
    // file (general.architecture qwen3, its tokenizer). Throws Error(InvalidModel) naming the
    // file and the field or tensor at fault (missing/unexpected/misshaped tensors, a vocabulary
    // smaller than the tokenizer, stop ids outside the vocabulary).
    static std::unique_ptr<Qwen3Model> load(ModelFiles files, Backend& backend, const Qwen3LoadOptions& options);
    ~Qwen3Model() override;

    const Qwen3Config& config() const { return c_; }

    std::string architecture() const override { return "qwen3"; }
    int vocab_size() const override { return c_.vocab_size; }
    int hidden_size() const override { return c_.hidden_size; }
    int max_context() const override { return c_.max_position_embeddings; }
    KvSpec kv_spec() const override { return {c_.num_layers, c_.kv_dim(), GGML_TYPE_F32}; }
    const Tokenizer& tokenizer() const override { return *tokenizer_; }
    std::vector<int32_t> stop_ids() const override { return stop_ids_; }
    void forward(const StepBatch& batch, KvStorage& kv, std::vector<float>& logits) override;
    // In the throughput layout (AttentionLayout::Padded: a GPU outside --deterministic) greedy
    // rows' argmax is taken in the graph (ggml_argmax; CUDA's may pick another of exactly tied
    // maxima than the lowest id).
    void forward(const StepBatch& batch, KvStorage& kv, std::vector<float>& logits,
                 const std::vector<uint8_t>& greedy_rows, std::vector<int32_t>& argmax) override;
    // Step graphs built so far (the others were kept ones, reused): what a test of the kept graphs
    // and a profile of a server's steps read.
    uint64_t graphs_built() const { return graphs_built_; }

    std::string weight_summary() const override { return weights_->type_summary(); }
    size_t weight_bytes() const override { return weights_->device_bytes(); }

private:
    struct Layer {
        ggml_tensor* attn_norm = nullptr;
        ggml_tensor* q = nullptr;
        ggml_tensor* k = nullptr;
        ggml_tensor* v = nullptr;
        ggml_tensor* o = nullptr;
        ggml_tensor* q_norm = nullptr;
        ggml_tensor* k_norm = nullptr;
        ggml_tensor* mlp_norm = nullptr;
        ggml_tensor* gate = nullptr;
        ggml_tensor* up = nullptr;
        ggml_tensor* down = nullptr;
    };

    // A step's graph, built in a metadata buffer of its own and allocated. Decode steps' graphs
    // (a reusable StepShape whose every token is an output) are kept, a few shapes at once, so a
    // decode step of a kept shape only uploads its inputs. They stay across the other steps
    // (prompts, embedding spans), which are built for their step alone: each keeps its nodes and,
    // reallocated, its place in the compute buffer, and with them the CUDA graph ggml-cuda
    // recorded of it (ggml-cuda knows a graph by its first node's address, so a prompt step built
    // where a kept graph lived would make it record the kept one afresh).
    struct StepGraph;
    std::unique_ptr<StepGraph> build_step(const StepBatch& b, const KvStorage& kv,
                                          const std::optional<StepShape>& shape, std::vector<uint8_t> meta);
    StepGraph& step_graph(const StepBatch& b, const KvStorage& kv, const std::optional<StepShape>& shape);

    Qwen3Model(Backend& backend);

    Backend& backend_;
    ModelFiles files_;
    Qwen3Config c_;
    std::unique_ptr<Tokenizer> tokenizer_;
    std::vector<int32_t> stop_ids_;
    ggml_tensor* embed_ = nullptr;
    ggml_tensor* output_ = nullptr;  // == embed_ when tied
    ggml_tensor* final_norm_ = nullptr;
    std::vector<Layer> layers_;
    std::unique_ptr<WeightSet> weights_;
    std::vector<std::unique_ptr<StepGraph>> kept_;  // least recently used first
    std::unique_ptr<StepGraph> once_;               // the last one-off step's (its buffer reused)
    uint64_t graphs_built_ = 0;
};

}  // namespace parlance::qwen3
