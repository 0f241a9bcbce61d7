// A language model that listens: an audio encoder whose output enters a decoder LanguageModel
// through embedding spans (Qwen3-ASR; later other audio LMs). All the engine's transcription
// front end (engine/lm_speech_model.h) knows of one: how to embed audio, the prompt around it,
// the languages it takes and what its output means.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "models/language_model.h"

namespace parlance {

// Where an audio language model's encoder computes. Auto: on a backend instance of its own where
// the device has streams to spare (CUDA: Backend::companion), so an engine overlaps encoder passes
// with decode steps; elsewhere on the decoder's. Own: its own instance on any device (tests run
// the overlapped engine on the CPU). Shared: the decoder's instance, passes and steps in turn.
enum class EncoderStream { Auto, Own, Shared };

class AudioLanguageModel {
public:
    virtual ~AudioLanguageModel() = default;

    // "qwen3_asr: audio encoder 18 layers, d_model 896; qwen3 decoder 28 layers, hidden 1024".
    virtual std::string description() const = 0;
    virtual double load_seconds() const = 0;
    virtual LanguageModel& decoder() = 0;

    // Longest audio one prompt holds (longer audio is cut into pieces), seconds.
    virtual double max_piece_seconds() const = 0;
    // Where embed_audio's time went, seconds (benchmarks: `transcribe --timings`).
    struct EmbedTimes {
        double features = 0.0;  // log-mel
        double encode = 0.0;    // audio encoder and projector
    };
    // The decoder-width vectors of 16 kHz mono audio, [tokens][hidden] row-major; times, when
    // given, get the phases' seconds added.
    virtual std::vector<float> embed_audio(std::span<const float> pcm16k, int* n_tokens,
                                           EmbedTimes* times = nullptr) = 0;
    struct AudioEmbedding {
        std::vector<float> rows;  // [tokens][hidden]
        int tokens = 0;
    };
    // Embedding in two halves, so an engine makes the next pass's features on host threads while
    // the current pass computes (engine/feature_stage.h). The host half: what the encoder reads of
    // one clip (Qwen3-ASR: its log-mel), made on any thread, with `threads` of its own, touching no
    // backend. The default keeps the samples for embed_audio.
    struct AudioFeatures {
        virtual ~AudioFeatures() = default;
    };
    virtual std::unique_ptr<AudioFeatures> audio_features(std::span<const float> pcm16k, int threads) const;
    // The device half: clips' features (this model's audio_features) through the encoder, each
    // clip's embed_audio result, `max_per_pass` clips per encoder graph at most (1: each clip
    // alone, as embed_audio computes it). A model whose encoder batches clips overrides it; the
    // default runs embed_audio on each clip's samples. `times->features` is not touched: the
    // features were made before.
    virtual std::vector<AudioEmbedding> embed_features(std::span<const AudioFeatures* const> clips, int max_per_pass,
                                                       EmbedTimes* times = nullptr);

    // Whether embed_features may run on another thread while the decoder steps: the encoder
    // computes on a backend instance of its own (Backend::companion), so an engine can overlap its
    // passes with decode steps instead of running them in turn.
    virtual bool encodes_beside_decoder() const { return false; }

    // A language as the caller names it (ISO code or name, any case) -> the model's code for it.
    // Throws Error(InvalidArgument) naming the languages it supports.
    virtual std::string language_code(const std::string& code_or_name) const = 0;
    // The prompt around `n_audio` audio placeholders: `context` biases the transcription,
    // `language_code` ("" = detect) forces the language. The first placeholder's index goes to
    // *audio_position.
    virtual std::vector<int32_t> prompt(int n_audio, const std::string& context, const std::string& language_code,
                                        int* audio_position) const = 0;

    struct Output {
        std::string language_code;  // "" when not stated or not one of the model's
        std::string text;
        bool no_speech = false;  // the model said it heard no speech
    };
    // The generated ids (a stop id may end them) read as a transcription.
    virtual Output parse(std::span<const int32_t> generated, const std::string& forced_language_code) const = 0;
};

}  // namespace parlance
