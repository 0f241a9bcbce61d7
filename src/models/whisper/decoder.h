// Whisper's decoder step as one graph over a StepBatch, and the decoder as a LanguageModel, so
// that the generation engine (src/engine) schedules Whisper's sequences as it does Qwen3's. A
// sequence's model state (StepBatch::Segment::state, Sequence::model_state) is its encoded audio
// window: the CrossKv the encoder wrote. Self-attention reads the paged cache (one call per layer
// for the whole step); cross-attention groups consecutive sequences that share a window (a
// request's beams) into runs. On the CPU one op per layer computes every run over windows packed
// when they were encoded (core/dense_attention); elsewhere each run adds its own products, so the
// graph grows with distinct windows, not with sequences.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "core/backend.h"
#include "core/kv_storage.h"
#include "core/step_batch.h"
#include "models/language_model.h"
#include "models/whisper/config.h"
#include "models/whisper/weights.h"

namespace parlance::whisper {

struct WhisperModel;

// Cross-attention keys and values of one encoded audio window, on the device, f16.
// On the CPU (where core/dense_attention's packed kernel runs), packed for it: k[l] and v[l] as
// new_packed_keys/values make them. Elsewhere k[l] ne [d, n_audio_ctx] and v[l] ne
// [n_audio_ctx, d] (stored transposed for the product).
class CrossKv {
public:
    CrossKv(const WhisperConfig& config, Backend& backend);
    ~CrossKv();
    CrossKv(const CrossKv&) = delete;
    CrossKv& operator=(const CrossKv&) = delete;
    std::vector<ggml_tensor*> k, v;
    bool packed = false;

private:
    ggml_context* ctx_ = nullptr;
    ggml_backend_buffer_t buffer_ = nullptr;
};

// What a decoder step additionally reads back for the alignment pass (a batch of one sequence):
// the softmaxed cross-attention of each (layer, head), [heads][n_tokens * n_audio_ctx].
struct CrossAttentionCapture {
    std::span<const std::pair<int, int>> heads;
    std::vector<std::vector<float>>* weights = nullptr;
};

// One decoder step: writes every token's self-attention K/V into its cell of `kv` and returns the
// logits of batch.outputs, [outputs][vocab] row-major. Every segment's state must be the CrossKv
// of its sequence's window. A step past one graph's node capacity runs as several graphs over
// consecutive segments; each sequence's logits depend on it alone, so no bit changes.
void decoder_step(const WhisperConfig& config, const WhisperWeights& weights, Backend& backend,
                  std::vector<uint8_t>& graph_buf, const StepBatch& batch, KvStorage& kv, std::vector<float>& logits,
                  const CrossAttentionCapture* capture = nullptr);

// The KV layout of the decoder's self-attention.
KvSpec decoder_kv_spec(const WhisperConfig& config);

// Whisper's decoder behind the engine's LanguageModel interface. Sequences must carry their
// window's CrossKv as model state (GenerationRequest::model_state); the model is borrowed and
// must outlive the decoder.
class WhisperDecoder final : public LanguageModel {
public:
    WhisperDecoder(const WhisperModel& model, Backend& backend);

    std::string architecture() const override { return "whisper"; }
    int vocab_size() const override;
    int hidden_size() const override;
    int max_context() const override;
    KvSpec kv_spec() const override;
    const Tokenizer& tokenizer() const override;
    std::vector<int32_t> stop_ids() const override;
    void forward(const StepBatch& batch, KvStorage& kv, std::vector<float>& logits) override;
    std::string weight_summary() const override;
    size_t weight_bytes() const override;

private:
    const WhisperModel& model_;
    Backend& backend_;
    std::vector<uint8_t> graph_buf_;
};

}  // namespace parlance::whisper
