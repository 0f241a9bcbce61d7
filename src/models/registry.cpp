// The model registry (see registry.h): one table, one loader per capability.
#include "models/registry.h"

#include <algorithm>

#include "core/error.h"
#include "models/qwen3/model.h"
#include "models/qwen3_asr/model.h"
#include "models/silero_vad/vad.h"
#include "models/whisper/convert.h"
#include "models/whisper/parity.h"
#include "models/whisper/speech.h"

namespace parlance {

const std::vector<ArchitectureEntry>& registered_architectures() {
    static const std::vector<ArchitectureEntry> table = {
        {"whisper", {"whisper"}, {"whisper"}, {true, true, false}},
        {"qwen3", {"qwen3"}, {"qwen3"}, {false, false, true}},
        // llama.cpp writes Qwen3-ASR as a Qwen3-VL text model plus an audio mmproj (qwen3a).
        {"qwen3_asr", {"qwen3_asr"}, {"qwen3vl"}, {true, false, false, true}, {"qwen3a"}},
    };
    return table;
}

std::string mmproj_projector_type(const TensorStore& mmproj) {
    for (const char* key : {"clip.audio.projector_type", "clip.projector_type"}) {
        const auto it = mmproj.metadata().find(key);
        if (it != mmproj.metadata().end() && it->is_string()) return it->get<std::string>();
    }
    return {};
}

namespace {

// A GGUF pair must be what the entry expects: its projector type, or no mmproj at all.
const ArchitectureEntry& checked_pair(const ArchitectureEntry& e, const ModelFiles& files, const std::string& arch) {
    const std::string text = files.tensors->files().front().string();
    if (e.mmproj_projectors.empty()) {
        if (files.mmproj)
            throw Error(ErrorKind::InvalidModel, files.mmproj->files().front().string() + ": " + e.name +
                                                     " models take no multimodal projector (--mmproj)");
        return e;
    }
    std::string wanted;
    for (const std::string& p : e.mmproj_projectors) wanted += (wanted.empty() ? "" : ", ") + p;
    if (!files.mmproj)
        throw Error(ErrorKind::InvalidModel, text + ": a " + arch +
                                                 " text model needs its multimodal projector GGUF (" + wanted +
                                                 "): pass --mmproj FILE, or --model the directory holding both");
    const std::string type = mmproj_projector_type(*files.mmproj);
    if (std::find(e.mmproj_projectors.begin(), e.mmproj_projectors.end(), type) == e.mmproj_projectors.end())
        throw Error(ErrorKind::Unsupported, files.mmproj->files().front().string() + ": projector type '" + type +
                                                "' is not supported with a " + arch +
                                                " text model (parlance reads: " + wanted + ")");
    return e;
}

// The entry for opened files; nullptr when no registered architecture has their name. A pair that
// is recognised but wrong (a missing or foreign mmproj) throws with its reason.
const ArchitectureEntry* find_architecture(const ModelFiles& files) {
    const std::string arch = files.architecture();
    const bool gguf = files.tensors && files.tensors->format() == FileFormat::Gguf;
    if (gguf && is_mmproj_metadata(files.tensors->metadata()))
        throw Error(ErrorKind::InvalidModel,
                    files.root.string() +
                        ": a multimodal projector (mmproj) GGUF: pass the model GGUF as --model "
                        "and this file as --mmproj");
    for (const ArchitectureEntry& e : registered_architectures()) {
        const auto& names = gguf ? e.gguf_archs : e.hf_types;
        if (std::find(names.begin(), names.end(), arch) != names.end())
            return gguf ? &checked_pair(e, files, arch) : &e;
        if (files.tensors && files.tensors->format() == FileFormat::WhisperCpp && e.name == "whisper") return &e;
    }
    return nullptr;
}

}  // namespace

const ArchitectureEntry& identify_architecture(const ModelFiles& files) {
    if (const ArchitectureEntry* e = find_architecture(files)) return *e;
    const std::string arch = files.architecture();
    std::string known;
    for (const ArchitectureEntry& e : registered_architectures()) known += (known.empty() ? "" : ", ") + e.name;
    throw Error(ErrorKind::Unsupported, files.root.string() + ": architecture '" + (arch.empty() ? "unknown" : arch) +
                                            "' is not supported (parlance implements: " + known + ")");
}

std::unique_ptr<LanguageModel> load_language_model(const std::filesystem::path& path, Backend& backend,
                                                   const LanguageModelOptions& options) {
    ModelFiles files = open_model_files(path);
    const ArchitectureEntry& e = identify_architecture(files);
    if (!e.capabilities.generate)
        throw Error(
            ErrorKind::Unsupported,
            path.string() + ": " + e.name + " models transcribe speech; they do not generate text (use transcribe)");
    if (e.name == "qwen3") {
        qwen3::Qwen3LoadOptions lo;
        lo.quantize = options.quantize;
        return qwen3::Qwen3Model::load(std::move(files), backend, lo);
    }
    throw Error(ErrorKind::Internal, "registry: no loader for " + e.name);
}

const ArchitectureEntry* architecture_of(const std::filesystem::path& path, const std::filesystem::path& mmproj) {
    ModelFiles files;
    try {
        files = open_model_files(path, mmproj);
    } catch (const Error&) {
        if (!mmproj.empty()) throw;  // the projector the user named is wrong: say so
        return nullptr;              // the loader's own checks name what is missing
    }
    return find_architecture(files);
}

std::unique_ptr<AudioLanguageModel> load_audio_language_model(const std::filesystem::path& path, Backend& backend,
                                                              const SpeechModelOptions& options) {
    ModelFiles files = open_model_files(path, options.mmproj);
    const ArchitectureEntry& e = identify_architecture(files);
    if (!e.capabilities.audio_lm)
        throw Error(ErrorKind::Unsupported, path.string() + ": not an audio language model (" + e.name + ")");
    if (options.audio_window_seconds > 0)
        throw Error(ErrorKind::InvalidArgument,
                    "--audio-window applies to Whisper models; " + e.name + " encodes audio of any length");
    return qwen3_asr::Qwen3AsrModel::load(std::move(files), backend, options.quantize, options.encoder_stream);
}

std::unique_ptr<SpeechModel> load_speech_model(const std::filesystem::path& path, Backend& backend,
                                               const SpeechModelOptions& options) {
    // Files that say what they are are checked against the table; anything else goes to Whisper's
    // loader, whose refusal names the file and field (a missing config.json, a bad tensor).
    const ArchitectureEntry* e = architecture_of(path, options.mmproj);
    if (e && e->capabilities.audio_lm)
        throw Error(ErrorKind::Internal, path.string() + ": " + e->name + " opens through open_speech_model");
    if (e && !e->capabilities.transcribe)
        throw Error(ErrorKind::Unsupported, path.string() + ": " + e->name +
                                                " models generate text; they do not transcribe speech (use generate)");
    whisper::WeightOptions wo;
    wo.quantize = options.quantize;
    wo.audio_window_seconds = options.audio_window_seconds;
    return std::make_unique<whisper::WhisperSpeechModel>(whisper::WhisperModel::load(path, backend, wo), backend,
                                                         options.decode_service);
}

ParityReport run_speech_parity(const std::filesystem::path& reference_dir, const ParityOptions& options,
                               const DecodeServiceFactory& decode_service) {
    return whisper::run_parity(reference_dir, options, decode_service);
}

ConvertResult convert_model(const std::filesystem::path& input, const std::filesystem::path& output,
                            const std::string& target, const ConvertOptions& options) {
    if (target != "whispercpp")
        throw Error(ErrorKind::InvalidArgument, "--to " + target + ": unknown target (whispercpp)");
    const ArchitectureEntry* e = nullptr;
    try {
        e = &identify_architecture(open_model_files(input));
    } catch (const Error&) {  // the converter's own checks name what is wrong
    }
    if (e && e->name != "whisper")
        throw Error(ErrorKind::Unsupported, input.string() + ": " + e->name + " checkpoints have no whisper.cpp form");
    return whisper::convert_to_whispercpp(input, output, options);
}

std::unique_ptr<VoiceActivityModel> load_voice_activity_model(const std::filesystem::path& path, Backend& backend) {
    return std::make_unique<silero_vad::SileroVad>(path, backend);
}

}  // namespace parlance
