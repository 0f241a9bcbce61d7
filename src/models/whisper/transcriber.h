// Whisper transcription: prompt construction, language detection, decoding with temperature
// fallback, the no-speech gate, timestamp segments and long-form audio as sequential 30-second
// windows with seek (OpenAI's algorithm). Runs on one WhisperRunner (one engine thread).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "audio/pcm_source.h"
#include "decoding/decode_service.h"
#include "decoding/search.h"
#include "decoding/transcribe_options.h"
#include "decoding/transcript.h"
#include "models/speech_model.h"
#include "models/whisper/model.h"
#include "models/whisper/runner.h"

namespace parlance::whisper {

using parlance::TranscribeOptions;

// `o` with what it leaves unset taken from the model's defaults (its generation_config.json):
// the beam size and whether windows are prompted with the text before them.
TranscribeOptions with_model_defaults(TranscribeOptions o, const SpecialTokens& tokens);

// The decoder cache slots `beams` take (2 per beam), checked against the `available` ones:
// Error(InvalidArgument) naming beam_size when it is below 1 or needs more.
int slots_for_beams(int beams, int available);

// Log-mel of a window (zero-padded/trimmed to the model's), [n_mels, n_mel_frames], its frames
// computed by `threads` threads (the same values whatever the count).
std::vector<float> window_mel(const WhisperModel& model, std::span<const float> pcm16k, int threads = 1);

// Language probabilities after <|startoftranscript|> (softmax over language tokens only).
std::map<std::string, float> language_probabilities(std::span<const float> sot_logits, const SpecialTokens& tokens);

// The logits processors Whisper applies, in transformers' order: begin-suppress, suppress,
// timestamp rules (when timestamps are on), plus min_new_tokens if > 0.
ProcessorList whisper_processors(const WhisperModel& model, int prompt_length, bool timestamps, int min_new_tokens,
                                 bool suppress_blank = true);

// What a DecodeService over Whisper's decoder is made with: a KV cache of `kv_blocks` blocks (of
// WhisperRunner::kv_block_tokens() cells), up to `max_sequences` at once, and any window's prompt
// in one step.
DecodeServiceOptions decoder_service_options(const WhisperConfig& config, int64_t kv_blocks, int max_sequences);

// A DecodeService from `factory` (the engine layer's generation engine) over `decoder`, sized for
// one transcription of up to `beams` beams: a full context for each hypothesis.
std::unique_ptr<DecodeService> transcription_service(const DecodeServiceFactory& factory, LanguageModel& decoder,
                                                     Backend& backend, const WhisperConfig& config, int beams);

// Transcribes 16 kHz mono audio of any length, reading its windows as they come (PcmSource: a
// file decoded as it goes): the runner encodes the windows and aligns words (in its slot 0), and
// every decode runs on `decoder`. The same Session the engine steps for many requests, stepped
// here for one without a thread.
Transcript transcribe(const WhisperModel& model, WhisperRunner& runner, DecodeService& decoder, PcmSource& audio,
                      const TranscribeOptions& options);
Transcript transcribe(const WhisperModel& model, WhisperRunner& runner, DecodeService& decoder,
                      std::span<const float> pcm16k, const TranscribeOptions& options);

// len(text) / len(zlib(text)), as OpenAI's fallback rule measures repetitiveness.
float compression_ratio(const std::string& text);

}  // namespace parlance::whisper
