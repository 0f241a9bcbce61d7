// A loaded Qwen3-ASR checkpoint — an HF snapshot (model_type qwen3_asr) or llama.cpp's GGUF pair
// (a qwen3vl text model + an mmproj with projector qwen3a): the audio encoder and projector
// (encoder.h) and the Qwen3 text decoder (models/qwen3) that reads the audio through the engine's
// embedding spans, plus the toolkit's prompt. Immutable after load.
#pragma once

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "audio/mel.h"
#include "core/backend.h"
#include "core/model_files.h"
#include "models/audio_language_model.h"
#include "models/qwen3/model.h"
#include "models/qwen3_asr/config.h"
#include "models/qwen3_asr/encoder.h"
#include "models/qwen3_asr/features.h"

namespace parlance::qwen3_asr {

// The tokens the prompt and the output use, resolved from the tokenizer by their text.
struct SpecialIds {
    int32_t im_start = -1, im_end = -1, audio_start = -1, audio_end = -1, audio_pad = -1, asr_text = -1;
};

class Qwen3AsrModel final : public AudioLanguageModel {
public:
    // Audio per prompt: 30 s, the decoder's per-window token cap's span (the toolkit takes up to
    // 1200 s on a GPU; 30 s keeps a piece's KV cache small and the pieces of a file in one batch).
    static constexpr double kMaxPieceSeconds = 30.0;

    // Throws Error(InvalidModel) naming the file and field or tensor at fault: the config's
    // checks (config.h), every tensor of both parts, the special tokens missing from the
    // tokenizer, audio_token_id not the tokenizer's <|audio_pad|>, a projector whose output is
    // not the decoder's width.
    // `encoder_stream`: where the audio encoder computes (EncoderStream, models/registry.h's
    // SpeechModelOptions says what each means).
    static std::unique_ptr<Qwen3AsrModel> load(ModelFiles files, Backend& backend, const std::string& quantize = "",
                                               EncoderStream encoder_stream = EncoderStream::Auto);
    // An HF snapshot directory, or a GGUF pair's directory.
    static std::unique_ptr<Qwen3AsrModel> load(const std::filesystem::path& dir, Backend& backend,
                                               const std::string& quantize = "",
                                               EncoderStream encoder_stream = EncoderStream::Auto);

    const Qwen3AsrConfig& config() const { return config_; }
    const SpecialIds& special() const { return special_; }
    AudioEncoder& encoder() { return *encoder_; }

    Features features(std::span<const float> pcm16k, int threads = 1) const;

    // The toolkit's prompt for `n_audio` audio tokens: a system turn with `context`, the user turn
    // holding the audio placeholders, the assistant turn opened — and, when `language_name` (a
    // canonical name: "English") is given, "language English<asr_text>" after it. The first
    // placeholder's index goes to *audio_position.
    std::vector<int32_t> prompt_for(int n_audio, const std::string& context, const std::string& language_name,
                                    int* audio_position) const;

    // AudioLanguageModel
    std::string description() const override;
    // "HF snapshot" or "GGUF pair (text + mmproj)".
    const std::string& form() const { return form_; }
    double load_seconds() const override { return load_seconds_; }
    qwen3::Qwen3Model& decoder() override { return *decoder_; }
    double max_piece_seconds() const override { return kMaxPieceSeconds; }
    std::vector<float> embed_audio(std::span<const float> pcm16k, int* n_tokens, EmbedTimes* times) override;
    // A clip's log-mel (Features), on `threads` threads.
    std::unique_ptr<AudioFeatures> audio_features(std::span<const float> pcm16k, int threads) const override;
    // The clips' chunks through the encoder together, kMaxChunksPerPass chunks (100 s of audio) per
    // graph at most (the convolutions' intermediates are ~25 MB a chunk).
    std::vector<AudioEmbedding> embed_features(std::span<const AudioFeatures* const> clips, int max_per_pass,
                                               EmbedTimes* times) override;
    static constexpr int kMaxChunksPerPass = 100;
    bool encodes_beside_decoder() const override { return encoder_backend_ != nullptr; }
    std::string language_code(const std::string& code_or_name) const override;
    std::vector<int32_t> prompt(int n_audio, const std::string& context, const std::string& language_code,
                                int* audio_position) const override;
    Output parse(std::span<const int32_t> generated, const std::string& forced_language_code) const override;

private:
    double load_seconds_ = 0.0;
    std::string form_;
    Qwen3AsrConfig config_;
    SpecialIds special_;
    std::unique_ptr<LogMel> mel_;
    std::unique_ptr<Backend> encoder_backend_;  // the encoder's own instance, or null: the decoder's
    std::unique_ptr<AudioEncoder> encoder_;
    std::unique_ptr<qwen3::Qwen3Model> decoder_;
};

}  // namespace parlance::qwen3_asr
