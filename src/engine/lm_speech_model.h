// Transcription with an audio language model (models/audio_language_model.h: Qwen3-ASR) on the
// generation engine, as a SpeechModel: audio is cut into pieces the model's prompt holds (at the
// quietest point near each limit), each piece embedded by the model's encoder and decoded as one
// sequence whose prompt carries the audio as an embedding span; up to kPiecesInFlight pieces of a
// request decode together. The server's engine runs many requests' pieces in one GenerationEngine
// (continuous batching, a bounded queue, cancellation and time limits between steps).
//
// open_speech_model is how the CLI and the server load any speech model: audio language models
// come here, the others (Whisper) from the registry directly.
#pragma once

#include <filesystem>
#include <memory>

#include "core/backend.h"
#include "models/audio_language_model.h"
#include "models/registry.h"
#include "models/speech_model.h"

namespace parlance {

// Pieces of one request ahead of its transcript at most (embedded, decoding or finished before an
// earlier piece): they decode in one batch, and a long file's later pieces are embedded only as
// earlier ones are done, so memory does not grow with the audio.
inline constexpr int kPiecesInFlight = 8;

// Pieces the server's engine embeds between two decoder steps at least (EngineOptions::
// max_encode_batch, serve --encode-batch, raises it: 32 on a GPU), taken from the most urgent
// request first (TranscriptionRequest::priority, then arrival) and embedded together
// (AudioLanguageModel::embed_features, their log-mel made ahead: feature_stage.h): a burst of uploads does not stall
// running decodes for all of its encoder passes, and a live item's final decode is embedded before pieces of less
// urgent requests that arrived earlier. One piece a step on a GPU admitted one request a step (the
// H100 run of BENCHMARKS.md's "The GPU: the throughput step" averaged 8 tokens a step at
// concurrency 64); 32 in batched graphs doubled its requests per second.
inline constexpr int kEmbedsPerStep = 1;

class LmSpeechModel : public SpeechModel {
public:
    // kv_type: the decoder's KV cache cells (SpeechModelOptions::kv_cache_type).
    LmSpeechModel(std::unique_ptr<AudioLanguageModel> model, Backend& backend, ggml_type kv_type = GGML_TYPE_F32);

    std::string description() const override { return model_->description(); }
    double load_seconds() const override { return model_->load_seconds(); }
    int default_beam_size() const override { return 1; }
    // A burst of uploads enters the decode batch in a few steps (the encoder batches by chunks).
    int gpu_encode_batch() const override { return 32; }
    // 256 requests at once (a request's decoder state is its KV blocks alone).
    int gpu_cache_slots(size_t) const override { return 512; }
    using SpeechModel::transcribe;
    Transcript transcribe(PcmSource& audio16k, const TranscribeOptions& options) override;
    std::unique_ptr<SpeechEngine> start_engine(const EngineOptions& options, Logger& logger) override;

    AudioLanguageModel& model() { return *model_; }

private:
    std::unique_ptr<AudioLanguageModel> model_;
    Backend& backend_;
    ggml_type kv_type_;
};

// Any speech model by path (Whisper, Qwen3-ASR, ...). Throws as the loaders do.
std::unique_ptr<SpeechModel> open_speech_model(const std::filesystem::path& path, Backend& backend,
                                               const SpeechModelOptions& options);

}  // namespace parlance
