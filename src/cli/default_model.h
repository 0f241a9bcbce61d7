// The model parlance uses when no --model is given: our own small English Whisper, trained on
// synthetic speech by tools/train and shipped in models/ (its card: models/<name>/README.md).
#pragma once

#include <string>

namespace parlance::cli {

// Name of the bundled model's folder under models/.
inline constexpr const char* kDefaultModelName = "parlance-synth-en";

// `given` when it is not empty; otherwise $PARLANCE_MODEL, otherwise the bundled model found
// next to the executable (installed: <prefix>/share/parlance/models/NAME) or in the source tree
// it was built from. Throws InvalidArgument naming every place it looked when none has it.
std::string resolve_model(const std::string& given);

// The Silero VAD weights: `given` when not empty; otherwise $PARLANCE_VAD_MODEL, otherwise
// silero_vad_v5.onnx where scripts/setup.sh puts it ($PARLANCE_CACHE, default
// ~/.cache/parlance, under assets/). Throws InvalidArgument naming where it looked.
std::string resolve_vad_model(const std::string& given);

}  // namespace parlance::cli
