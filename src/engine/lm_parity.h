// Qualification of a language model against transformers: runs the prompts of a reference
// directory written by tools/reference/qwen3_reference.py (reference.json: prompt ids, the
// last-position logits of transformers in float64, greedy ids at a fixed length and with a stop)
// through the generation engine and compares. Architecture-agnostic: any LanguageModel.
// `parlance parity` prints its report; the golden tests assert on it.
#pragma once

#include <nlohmann/json.hpp>

#include "core/backend.h"
#include "core/parity_report.h"
#include "models/language_model.h"

namespace parlance {

struct LmParityOptions {
    double logits_tolerance = 1e-3;  // max |ours - reference| / max |reference|
};

ParityReport run_lm_parity(LanguageModel& model, Backend& backend, const nlohmann::json& reference,
                           const LmParityOptions& options = {});

}  // namespace parlance
