// The model registry (see registry.h): one table, one loader per capability.
#include "models/registry.h"

#include <algorithm>

#include "core/error.h"
#include "models/qwen3/model.h"
#include "models/qwen3_asr/model.h"
#include "models/whisper/convert.h"
#include "models/whisper/parity.h"
#include "models/whisper/speech.h"

namespace parlance {

const std::vector<ArchitectureEntry>& registered_architectures() {
    static const std::vector<ArchitectureEntry> table = {
        {"whisper", {"whisper"}, {"whisper"}, {true, true, false}},
        {"qwen3", {"qwen3"}, {"qwen3"}, {false, false, true}},
        {"qwen3_asr", {"qwen3_asr"}, {}, {true, false, false, true}},
    };
    return table;
}

const ArchitectureEntry& identify_architecture(const ModelFiles& files) {
    const std::string arch = files.architecture();
    const bool gguf = files.tensors && files.tensors->format() == FileFormat::Gguf;
    for (const ArchitectureEntry& e : registered_architectures()) {
        const auto& names = gguf ? e.gguf_archs : e.hf_types;
        if (std::find(names.begin(), names.end(), arch) != names.end()) return e;
        if (files.tensors && files.tensors->format() == FileFormat::WhisperCpp && e.name == "whisper") return e;
    }
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
        throw Error(ErrorKind::Unsupported, path.string() + ": " + e.name +
                                                " models transcribe speech; they do not generate text (use transcribe)");
    if (e.name == "qwen3") {
        qwen3::Qwen3LoadOptions lo;
        lo.quantize = options.quantize;
        return qwen3::Qwen3Model::load(std::move(files), backend, lo);
    }
    throw Error(ErrorKind::Internal, "registry: no loader for " + e.name);
}

const ArchitectureEntry* architecture_of(const std::filesystem::path& path) {
    try {
        return &identify_architecture(open_model_files(path));
    } catch (const Error&) {
        return nullptr;
    }
}

std::unique_ptr<AudioLanguageModel> load_audio_language_model(const std::filesystem::path& path, Backend& backend,
                                                              const SpeechModelOptions& options) {
    const ArchitectureEntry* e = architecture_of(path);
    if (!e || !e->capabilities.audio_lm)
        throw Error(ErrorKind::Unsupported, path.string() + ": not an audio language model (" +
                                                (e ? e->name : std::string("unrecognised")) + ")");
    return qwen3_asr::Qwen3AsrModel::load(path, backend, options.quantize);
}

std::unique_ptr<SpeechModel> load_speech_model(const std::filesystem::path& path, Backend& backend,
                                               const SpeechModelOptions& options) {
    // Files that say what they are are checked against the table; anything else goes to Whisper's
    // loader, whose refusal names the file and field (a missing config.json, a bad tensor).
    const ArchitectureEntry* e = architecture_of(path);
    if (e && e->capabilities.audio_lm)
        throw Error(ErrorKind::Internal, path.string() + ": " + e->name + " opens through open_speech_model");
    if (e && !e->capabilities.transcribe)
        throw Error(ErrorKind::Unsupported, path.string() + ": " + e->name +
                                                " models generate text; they do not transcribe speech (use generate)");
    whisper::WeightOptions wo;
    wo.quantize = options.quantize;
    return std::make_unique<whisper::WhisperSpeechModel>(whisper::WhisperModel::load(path, backend, wo), backend);
}

ParityReport run_speech_parity(const std::filesystem::path& reference_dir, const ParityOptions& options) {
    return whisper::run_parity(reference_dir, options);
}

ConvertResult convert_model(const std::filesystem::path& input, const std::filesystem::path& output,
                            const std::string& target, const ConvertOptions& options) {
    if (target != "whispercpp") throw Error(ErrorKind::InvalidArgument, "--to " + target + ": unknown target (whispercpp)");
    const ArchitectureEntry* e = nullptr;
    try {
        e = &identify_architecture(open_model_files(input));
    } catch (const Error&) {  // the converter's own checks name what is wrong
    }
    if (e && e->name != "whisper")
        throw Error(ErrorKind::Unsupported, input.string() + ": " + e->name + " checkpoints have no whisper.cpp form");
    return whisper::convert_to_whispercpp(input, output, options);
}

}  // namespace parlance
