// The server's engine for an audio language model (see lm_speech_model.h): one thread, one
// GenerationEngine; admitted requests' pieces decode in the same steps as every other request's,
// their audio encoded between the steps or, where the model's encoder has a stream of its own
// (AudioLanguageModel::encodes_beside_decoder), on a thread of its own beside them.
#pragma once

#include <memory>

#include "core/backend.h"
#include "core/log.h"
#include "models/audio_language_model.h"
#include "models/speech_model.h"

namespace parlance {

// kv_type: the decoder's KV cache cells. The model and the backend outlive the engine.
std::unique_ptr<SpeechEngine> start_lm_speech_engine(AudioLanguageModel& model, Backend& backend, ggml_type kv_type,
                                                     const EngineOptions& options, Logger& logger);

}  // namespace parlance
