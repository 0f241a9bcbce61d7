// What a transcription request asks, whatever the model: language, task, timestamps, prompt,
// search and the fallback heuristics of OpenAI's long-form algorithm. The CLI and the API fill it;
// each speech model reads what applies to it (models/speech_model.h).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace parlance {

struct TranscribeOptions {
    std::string language;             // "" = detect on the first window (multilingual models)
    std::string task = "transcribe";  // or "translate"
    bool timestamps = true;           // predict timestamp tokens (segments with times)
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
    int max_new_tokens = 224;    // per window (half the decoder context, as OpenAI)
    // End-of-text suppressed until this many tokens per window (transformers' min_new_tokens).
    int min_new_tokens = 0;
    bool suppress_blank = true;  // no space or eot as the first token
    int repetition_cut = 4;      // cut a window's output looping >= N times (0 = keep all)
    uint64_t seed = 0;
    // Fill Segment::words: after each window, one alignment pass over its prompt + tokens gives
    // token timestamps by cross-attention DTW (alignment.h; transformers' algorithm, with the
    // weights cropped to the window's real audio as OpenAI does) and per-token probabilities; the
    // tokens are grouped into words as OpenAI whisper does. Models without alignment_heads use all
    // heads of the upper half of the decoder layers (alignment_heads_or_default).
    bool word_timestamps = false;
    // Fill Segment::words with each word's probability but no times (start and end 0), for models
    // that cannot time words (SpeechEngine::word_probabilities): the mean probability of the
    // generated tokens that spell the word (decoding/token_words.h). word_timestamps gives both.
    bool word_probabilities = false;
    // Called after each window with (seconds done, seconds total).
    std::function<void(double, double)> progress;
};

}  // namespace parlance
