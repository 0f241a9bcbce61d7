// Whisper's synchronous transcription with its decodes on the generation engine, as
// WhisperSpeechModel::transcribe runs it: for the tests that build or change a WhisperModel and
// transcribe with it (models/ cannot construct the engine's service itself).
#pragma once

#include <span>

#include "engine/generation_decode_service.h"
#include "models/whisper/decoder.h"
#include "models/whisper/model.h"
#include "models/whisper/runner.h"
#include "models/whisper/transcriber.h"

namespace parlance::testing {

inline Transcript transcribe_on_engine(const whisper::WhisperModel& model, whisper::WhisperRunner& runner,
                                       std::span<const float> pcm16k, const TranscribeOptions& options) {
    whisper::WhisperDecoder decoder(model, runner.backend());
    const int beams = *whisper::with_model_defaults(options, model.tokens).beam_size;
    auto service = whisper::transcription_service(generation_decode_service_factory(), decoder, runner.backend(),
                                                  model.config, beams);
    return whisper::transcribe(model, runner, *service, pcm16k, options);
}

}  // namespace parlance::testing
