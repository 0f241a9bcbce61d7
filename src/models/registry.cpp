// The model registry (see registry.h): one table, one loader per capability.
#include "models/registry.h"

#include <algorithm>

#include "core/error.h"
#include "models/qwen3/model.h"

namespace parlance {

const std::vector<ArchitectureEntry>& registered_architectures() {
    static const std::vector<ArchitectureEntry> table = {
        {"whisper", {"whisper"}, {"whisper"}, {true, true, false}},
        {"qwen3", {"qwen3"}, {"qwen3"}, {false, false, true}},
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
    if (e.name == "qwen3") return qwen3::Qwen3Model::load(std::move(files), backend, {options.quantize});
    throw Error(ErrorKind::Internal, "registry: no loader for " + e.name);
}

}  // namespace parlance
