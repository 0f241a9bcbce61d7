// The model parlance uses when no --model is given: our own small English Whisper, trained on
// synthetic speech by tools/train and shipped in models/ (its card: models/<name>/README.md).
#pragma once

#include <string>

#include <ggml.h>

namespace parlance::cli {

// Name of the bundled model's folder under models/.
inline constexpr const char* kDefaultModelName = "parlance-synth-en";

// --help of --model and --mmproj wherever a speech model is loaded (transcribe, serve).
inline constexpr const char* kSpeechModelHelp =
    "Speech model: HF snapshot directory (Whisper, Qwen3-ASR), whisper.cpp .bin, or llama.cpp's Qwen3-ASR GGUF "
    "pair (their directory, or the text GGUF with --mmproj) (default: $PARLANCE_MODEL, else the bundled default "
    "models/parlance-synth-en when it is there)";
inline constexpr const char* kMmprojHelp =
    "With --model TEXT.gguf: the pair's multimodal projector GGUF (llama.cpp's mmproj-*.gguf)";
inline constexpr const char* kAudioWindowHelp =
    "Whisper models: encode windows of S seconds instead of the model's own 30 (its encoder positions cut to "
    "the first S x 50, as whisper.cpp's --audio-ctx). Each encoder pass costs about S/30 as much, which pays "
    "for short audio and live sessions; longer audio is decoded in more windows. Check the accuracy on your "
    "audio first: BENCHMARKS.md measures the bundled model at 10 s";

inline constexpr const char* kKvCacheTypeHelp =
    "The decoder's KV cache cells where the generation engine decodes (Qwen3-ASR, Whisper): f32, as transformers "
    "computes (parity), or f16: half the bytes every decode step reads and twice the tokens per MiB, as llama.cpp "
    "keeps them; logits move by about 1e-3 (BENCHMARKS.md)";

// --kv-cache-type's value (checked by the option: f32 or f16) as a ggml type.
ggml_type kv_cache_type_of(const std::string& name);
// serve's, which also takes "auto": f16 on a GPU's throughput step (half the bytes its batched
// attention gathers and reads), f32 on the CPU and under --deterministic (parity).
ggml_type kv_cache_type_of(const std::string& name, bool gpu);

// `given` when it is not empty; otherwise $PARLANCE_MODEL, otherwise the bundled model found
// next to the executable (installed: <prefix>/share/parlance/models/NAME) or in the source tree
// it was built from. Throws InvalidArgument naming every place it looked when none has it.
std::string resolve_model(const std::string& given);

// The Silero VAD weights: `given` when not empty; otherwise $PARLANCE_VAD_MODEL, otherwise
// silero_vad_v5.onnx where scripts/setup.sh puts it ($PARLANCE_CACHE, default
// ~/.cache/parlance, under assets/). Throws InvalidArgument naming where it looked.
std::string resolve_vad_model(const std::string& given);

}  // namespace parlance::cli
