// Qualification against transformers: runs a Whisper checkpoint on the inputs of a reference
// directory written by tools/reference/whisper_reference.py and compares encoder outputs,
// first-step logits, greedy/beam token ids, timestamp tokens, the detected language and token
// timestamps from cross-attention DTW (word_timestamps, word_timestamps_cropped).
// `parlance parity` prints its report; the golden tests assert on it.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/parity_report.h"
#include "models/speech_model.h"

namespace parlance::whisper {

using parlance::ParityReport;
using parlance::ParityRow;

using parlance::ParityOptions;

// reference_dir holds reference.json, model/ and the encoder arrays; clips are looked up next to
// it, in its parent, and in tests/fixtures/audio-style sibling directories named in the JSON. The
// decodes (first-step logits, language, every search) run on a service from `decode_service`, the
// one transcriptions decode on; the runner encodes and computes the alignment's cross-attention.
ParityReport run_parity(const std::filesystem::path& reference_dir, const ParityOptions& options,
                        const DecodeServiceFactory& decode_service);

}  // namespace parlance::whisper
