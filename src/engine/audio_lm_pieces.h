// What an audio language model's transcription is made of, shared by the CLI's path
// (LmSpeechModel::transcribe) and the server's engine (engine/lm_speech_engine.h): the request's
// options checked, its audio cut into pieces that each decode as one sequence, and each piece's
// result read as a segment of the transcript.
#pragma once

#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "audio/pcm_source.h"
#include "engine/generation_engine.h"
#include "models/audio_language_model.h"
#include "models/speech_model.h"

namespace parlance::audio_lm {

// What an audio LM cannot do is refused before any work; returns the forced language's code
// ("" = the model detects it).
std::string check_options(const AudioLanguageModel& m, const TranscribeOptions& o);

// A request's audio cut into pieces, each cut and embedded only when it is let into the engine:
// memory follows the pieces in flight (kPiecesInFlight), not the audio's length, and a source that
// decodes as it goes is read a piece ahead at most. `audio` must outlive the last next().
class Pieces {
public:
    // Throws Error(InvalidAudio) for empty audio.
    Pieces(AudioLanguageModel& m, PcmSource& audio, const TranscribeOptions& o, std::string forced);
    size_t made() const { return cuts_.size() - 1; }
    // Whether the piece made last ends the audio.
    bool all_made() const { return all_made_; }
    double start(size_t i) const { return static_cast<double>(cuts_[i]) / 16000.0; }
    double end(size_t i) const { return static_cast<double>(cuts_[i + 1]) / 16000.0; }
    // Piece i's generated tokens' log-probabilities (TranscribeOptions::word_probabilities), or
    // null; taken once, when its segment is made.
    std::shared_ptr<std::vector<float>> take_logprobs(size_t i) { return std::move(logprobs_.at(i)); }

    // The next piece, cut (quiet_piece_length), embedded and prompted, ready to submit.
    GenerationRequest next(AudioLanguageModel::EmbedTimes* times = nullptr);
    // The next piece's samples, cut at the quietest point near the model's limit (the source
    // releases them: a copy).
    std::vector<float> cut();
    // The request of piece i (cut already), its audio embedded as `emb` (`n` rows).
    GenerationRequest request(size_t i, std::vector<float> emb, int n);

private:
    AudioLanguageModel& m_;
    PcmSource& audio_;
    TranscribeOptions o_;
    std::string forced_;
    std::vector<size_t> cuts_ = {0};
    std::vector<std::shared_ptr<std::vector<float>>> logprobs_;  // per piece (engine thread fills)
    bool all_made_ = false;
};

// A piece's result as a segment from `start` to `end` seconds; `logprobs`: the generated tokens'
// log-probabilities when the request asked for words. The language the model stated goes to
// *language if that is still empty; *speech says whether the segment holds text.
Segment segment_of(AudioLanguageModel& m, double start, double end, const GenerationResult& r,
                   const std::vector<float>* logprobs, const std::string& forced, std::string* language, bool* speech);
void count_passes(TranscribeTimings& t, const GenerationResult& r);
// The segment appended, numbered and joined to the transcript's text.
void append(Transcript& t, Segment s);
// The finished request's error, if a piece did not finish normally.
std::exception_ptr failure_of(SeqState s);

// A transcription's generation engine: its KV cap (0: 512 MiB) and cell type.
GenerationEngineOptions generation_options(size_t kv_bytes, ggml_type kv_type);
// The server's step: its KV cap and, where set, its width (serve --max-batch-tokens and
// --max-batch-sequences).
GenerationEngineOptions step_options(const EngineOptions& o, ggml_type kv_type);

}  // namespace parlance::audio_lm
