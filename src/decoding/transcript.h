// The result of a transcription, whatever the model: segments with times, tokens and quality
// figures, optional words; and its renderings in the response formats OpenAI's API defines
// (json, text, srt, vtt, verbose_json).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace parlance {

struct Word {
    std::string word;
    double start = 0.0;  // seconds
    double end = 0.0;
    float probability = 0.0f;
};

struct Segment {
    int id = 0;
    int seek = 0;  // window start, in mel frames (10 ms)
    double start = 0.0;
    double end = 0.0;
    std::string text;
    std::vector<int> tokens;
    float temperature = 0.0f;
    float avg_logprob = 0.0f;
    float compression_ratio = 0.0f;
    float no_speech_prob = 0.0f;
    std::vector<Word> words;
};

// Where a transcription's time went, for benchmarks (`parlance transcribe --timings`); a model
// that does not measure a phase leaves it 0.
struct TranscribeTimings {
    double features = 0.0;   // seconds: log-mel
    double encode = 0.0;     // seconds: audio encoder (and projector)
    int prefill_tokens = 0;  // tokens computed by steps that held prompt tokens (audio included)
    double prefill = 0.0;    // seconds of those steps (they sample each prompt's first token)
    int decode_tokens = 0;   // tokens sampled by steps that computed only generated tokens
    double decode = 0.0;     // seconds of those steps
    // Decoder passes that computed the request's tokens (an audio language model's: the sum over
    // its pieces), and the speculative tokens they verified (TranscriptionRequest::expected) and
    // kept.
    int decoder_passes = 0;
    int draft_tokens = 0;
    int draft_accepted = 0;
};

struct Transcript {
    std::string task = "transcribe";
    std::string language;   // code, e.g. "en"
    double duration = 0.0;  // seconds of input audio
    std::string text;
    std::vector<Segment> segments;
    std::map<std::string, float> language_probs;  // when detected
    TranscribeTimings timings;
};

enum class ResponseFormat { Json, Text, Srt, Vtt, VerboseJson };

// Parses "json|text|srt|vtt|verbose_json"; throws Error(InvalidArgument) naming the value.
ResponseFormat parse_response_format(const std::string& name);
const char* response_format_name(ResponseFormat format);
// The MIME type OpenAI's API answers with for the format.
const char* response_content_type(ResponseFormat format);

// Renders the transcript. `include_words`/`include_segments` select verbose_json's optional
// arrays (timestamp_granularities[]).
std::string render_transcript(const Transcript& t, ResponseFormat format, bool include_segments = true,
                              bool include_words = false);
nlohmann::json verbose_json(const Transcript& t, bool include_segments, bool include_words);

// "HH:MM:SS,mmm" (srt) or "HH:MM:SS.mmm" (vtt).
std::string format_timestamp(double seconds, char decimal_separator);

}  // namespace parlance
