// Whisper transcription: prompt construction, language detection, decoding with temperature
// fallback, the no-speech gate, timestamp segments and long-form audio as sequential 30-second
// windows with seek (OpenAI's algorithm). Runs on one WhisperRunner (one engine thread).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "decoding/search.h"
#include "decoding/step_model.h"
#include "decoding/transcript.h"
#include "models/whisper/model.h"
#include "models/whisper/runner.h"

namespace parlance::whisper {

struct TranscribeOptions {
    std::string language;            // "" = detect on the first window (multilingual models)
    std::string task = "transcribe";  // or "translate"
    bool timestamps = true;          // predict timestamp tokens (segments with times)
    // Beams (1 = greedy); unset: the model's default (SpecialTokens::num_beams).
    std::optional<int> beam_size;
    float length_penalty = 1.0f;
    // Tried in order while a window's result looks wrong (compression or log-probability).
    std::vector<float> temperatures = {0.0f, 0.2f, 0.4f, 0.6f, 0.8f, 1.0f};
    float compression_ratio_threshold = 2.4f;
    float logprob_threshold = -1.0f;
    float no_speech_threshold = 0.6f;
    std::string initial_prompt;
    // Prompt each window with the previous windows' text; unset: the model's default
    // (SpecialTokens::condition_on_previous_text).
    std::optional<bool> condition_on_previous_text;
    int max_new_tokens = 224;        // per window (half the decoder context, as OpenAI)
    bool suppress_blank = true;      // no space or eot as the first token
    int repetition_cut = 4;          // cut a window's output looping >= N times (0 = keep all)
    uint64_t seed = 0;
    // Fill Segment::words: after each window, one alignment pass over its prompt + tokens gives
    // token timestamps by cross-attention DTW (alignment.h; transformers' algorithm, with the
    // weights cropped to the window's real audio as OpenAI does) and per-token probabilities; the
    // tokens are grouped into words as OpenAI whisper does. Models without alignment_heads use all
    // heads of the upper half of the decoder layers (alignment_heads_or_default).
    bool word_timestamps = false;
    // Called after each window with (seconds done, seconds total).
    std::function<void(double, double)> progress;
};

// `o` with what it leaves unset taken from the model's defaults (its generation_config.json):
// the beam size and whether windows are prompted with the text before them.
TranscribeOptions with_model_defaults(TranscribeOptions o, const SpecialTokens& tokens);

// The decoder cache slots `beams` take (2 per beam), checked against the `available` ones:
// Error(InvalidArgument) naming beam_size when it is below 1 or needs more.
int slots_for_beams(int beams, int available);

// The runner as a StepModel whose slots are bound to encoded audio windows.
class WhisperStepModel : public StepModel {
public:
    explicit WhisperStepModel(WhisperRunner& runner) : runner_(runner) {}
    void bind(int slot, const CrossKv* cross);
    int vocab_size() const override { return runner_.config().vocab_size; }
    std::vector<std::vector<float>> step(std::span<const StepInput> inputs) override;
    void copy_slot(int from, int to, int n) override;

private:
    WhisperRunner& runner_;
    std::map<int, const CrossKv*> cross_;
};

// Log-mel of a 30 s window (zero-padded/trimmed), [n_mels, 3000].
std::vector<float> window_mel(const WhisperModel& model, std::span<const float> pcm16k);

// Language probabilities after <|startoftranscript|> (softmax over language tokens only).
std::map<std::string, float> language_probabilities(std::span<const float> sot_logits,
                                                    const SpecialTokens& tokens);

// The logits processors Whisper applies, in transformers' order: begin-suppress, suppress,
// timestamp rules (when timestamps are on), plus min_new_tokens if > 0.
ProcessorList whisper_processors(const WhisperModel& model, int prompt_length, bool timestamps,
                                 int min_new_tokens, bool suppress_blank = true);

// Transcribes 16 kHz mono audio of any length.
Transcript transcribe(const WhisperModel& model, WhisperRunner& runner, std::span<const float> pcm16k,
                      const TranscribeOptions& options);

// len(text) / len(zlib(text)), as OpenAI's fallback rule measures repetitiveness.
float compression_ratio(const std::string& text);

}  // namespace parlance::whisper
