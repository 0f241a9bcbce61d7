// The model registry: which architectures parlance implements, how each is recognised (HF
// config.json model_type, GGUF general.architecture, whisper.cpp's magic) and what it can do.
// The CLI and the server load through it; outside models/ nothing includes an architecture's
// header.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/model_files.h"
#include "core/parity_report.h"
#include "models/audio_language_model.h"
#include "models/conversion.h"
#include "models/language_model.h"
#include "models/speech_model.h"
#include "models/voice_activity.h"

namespace parlance {

struct Capabilities {
    bool transcribe = false;
    bool translate = false;
    bool generate = false;
    // An AudioLanguageModel: it transcribes by generating text from audio embeddings, through
    // the generation engine (engine/lm_speech_model.h opens it as a SpeechModel).
    bool audio_lm = false;
};

struct ArchitectureEntry {
    std::string name;                     // "whisper", "qwen3"
    std::vector<std::string> hf_types;    // config.json model_type values
    std::vector<std::string> gguf_archs;  // general.architecture values
    Capabilities capabilities;
    // llama.cpp multimodal pairs: the projector types (an mmproj's clip.audio.projector_type or
    // clip.projector_type) this architecture's text GGUF goes with; such a text GGUF without its
    // mmproj is refused.
    std::vector<std::string> mmproj_projectors = {};
};

// Every registered architecture.
const std::vector<ArchitectureEntry>& registered_architectures();

// The entry for opened files. Throws Error(Unsupported) naming what the files say and listing the
// registered architectures; Error(InvalidModel) for a text GGUF of a multimodal pair without its
// mmproj (or an mmproj of another projector type), or an mmproj given to a model that has none.
const ArchitectureEntry& identify_architecture(const ModelFiles& files);

struct LanguageModelOptions {
    std::string quantize;  // "" as stored, f32, f16, q8_0, q5_k, q4_k
};

// Loads a model that can generate text (an HF directory or a GGUF file). Throws Error(Unsupported)
// when the architecture cannot ("whisper transcribes; it does not generate text").
std::unique_ptr<LanguageModel> load_language_model(const std::filesystem::path& path, Backend& backend,
                                                   const LanguageModelOptions& options);

struct SpeechModelOptions {
    std::string quantize;  // "" as stored, f32, f16, q8_0, q5_k, q4_k
    // The projector GGUF of a llama.cpp pair given as a text-model file (--mmproj); empty: none,
    // or found beside the text model when the path is their directory.
    std::filesystem::path mmproj = {};
    // Whisper models: encode windows of this many seconds instead of the model's (0: its own).
    double audio_window_seconds = 0;
    // Storage of the decoder's KV cache cells where the generation engine decodes (Qwen3-ASR;
    // Whisper through open_speech_model): f32, as transformers computes (parity), or f16 — half
    // the bytes every decode step reads, as llama.cpp keeps them (logits move by about 1e-3).
    ggml_type kv_cache_type = GGML_TYPE_F32;
    // Audio language models: where the encoder computes (EncoderStream: Auto, its own stream on
    // CUDA so the server's engine overlaps encoder passes with decode steps).
    EncoderStream encoder_stream = EncoderStream::Auto;
    // Where a Whisper model's decodes run: the engine layer's generation engine (open_speech_model
    // sets it; load_speech_model refuses a Whisper model without it).
    DecodeServiceFactory decode_service = {};
};

// The projector type an mmproj GGUF declares (clip.audio.projector_type, else clip.projector_type);
// empty when it declares none.
std::string mmproj_projector_type(const TensorStore& mmproj);

// The entry for a model path, or nullptr when its files do not say what they are (a loader's own
// checks then name what is missing).
const ArchitectureEntry* architecture_of(const std::filesystem::path& path, const std::filesystem::path& mmproj = {});

// Loads an audio language model (capabilities.audio_lm: Qwen3-ASR). Throws Error(Unsupported)
// for other architectures, Error(InvalidModel) naming the file and field or tensor at fault.
std::unique_ptr<AudioLanguageModel> load_audio_language_model(const std::filesystem::path& path, Backend& backend,
                                                              const SpeechModelOptions& options);

// Loads a model that transcribes speech by itself (an HF directory or a whisper.cpp .bin;
// audio language models open through engine/lm_speech_model.h open_speech_model). Throws
// Error(Unsupported) when the architecture cannot ("qwen3 generates text; it does not
// transcribe"), Error(InvalidModel) naming the file and field or tensor that is wrong.
std::unique_ptr<SpeechModel> load_speech_model(const std::filesystem::path& path, Backend& backend,
                                               const SpeechModelOptions& options);

// Loads a voice-activity model (today Silero VAD v5's silero_vad_v5.onnx). Throws Error(NotFound)
// or Error(InvalidModel) naming the file, or the tensor that is missing or misshaped. Give it a
// Backend of its own, apart from the speech model's (live sessions run it from their threads).
std::unique_ptr<VoiceActivityModel> load_voice_activity_model(const std::filesystem::path& path, Backend& backend);

// Runs a speech model's reference directory (tools/reference: reference.json, model/, the
// clips' encoder arrays) and compares; `parlance parity` prints the report.
// Its decodes run on `decode_service` (the engine layer's: generation_decode_service_factory()).
ParityReport run_speech_parity(const std::filesystem::path& reference_dir, const ParityOptions& options,
                               const DecodeServiceFactory& decode_service);

// Writes a speech checkpoint in another program's format: target "whispercpp" (a Whisper HF
// directory as whisper.cpp's ggml .bin). Throws Error(InvalidArgument) for an unknown target,
// Error(Unsupported) for an architecture the target cannot hold.
ConvertResult convert_model(const std::filesystem::path& input, const std::filesystem::path& output,
                            const std::string& target, const ConvertOptions& options);

}  // namespace parlance
