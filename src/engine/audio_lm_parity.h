// Qualification of an audio language model (Qwen3-ASR) against transformers: for each clip of a
// reference directory written by tools/reference/qwen3_asr_reference.py, the audio embedding's
// length, the prompts (language detected, forced to English, with a context), the last-position
// logits of the detected-language prompt and four greedy continuations, run through the
// generation engine with the audio entering as an embedding span. Architecture-agnostic: any
// AudioLanguageModel. `parlance parity` prints its report.
#pragma once

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/backend.h"
#include "core/parity_report.h"
#include "models/audio_language_model.h"

namespace parlance {

struct AudioLmParityOptions {
    double logits_tolerance = 1e-3;  // max |ours - reference| / max |reference|
};

// Clips are read from `audio_dir` (the reference's "file" names).
ParityReport run_audio_lm_parity(AudioLanguageModel& model, Backend& backend, const nlohmann::json& reference,
                                 const std::filesystem::path& audio_dir, const AudioLmParityOptions& options = {});

}  // namespace parlance
