// open_model_files (see model_files.h).
#include "core/model_files.h"

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace parlance {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Parses a JSON file; null when absent and optional. Errors name the file.
json read_json(const fs::path& file, bool required) {
    if (!fs::exists(file)) {
        if (required) throw Error(ErrorKind::InvalidModel, file.string() + ": missing (required)");
        return nullptr;
    }
    std::ifstream in(file, std::ios::binary);
    if (!in) throw Error(ErrorKind::Io, file.string() + ": cannot read");
    try {
        json j = json::parse(in);
        if (!j.is_object()) throw Error(ErrorKind::InvalidModel, file.string() + ": not a JSON object");
        return j;
    } catch (const json::parse_error& e) {
        throw Error(ErrorKind::InvalidModel, file.string() + ": not valid JSON (" + e.what() + ")");
    }
}

}  // namespace

ModelFiles open_model_files(const fs::path& path) {
    std::error_code ec;
    if (!fs::exists(path, ec)) throw Error(ErrorKind::NotFound, path.string() + ": no such file or directory");
    ModelFiles m;
    m.root = path;
    m.is_directory = fs::is_directory(path, ec);
    if (m.is_directory) {
        m.config = read_json(path / "config.json", true);
        m.generation_config = read_json(path / "generation_config.json", false);
        m.preprocessor_config = read_json(path / "preprocessor_config.json", false);
        m.tokenizer_config = read_json(path / "tokenizer_config.json", false);
        if (fs::exists(path / "tokenizer.json")) m.tokenizer_json = path / "tokenizer.json";
    }
    m.tensors = TensorStore::open(path);
    return m;
}

std::string ModelFiles::architecture() const {
    if (config.is_object()) {
        if (config.contains("model_type") && config["model_type"].is_string()) {
            return config["model_type"].get<std::string>();
        }
        const json& archs = config.value("architectures", json());
        if (archs.is_array() && !archs.empty() && archs[0].is_string()) return archs[0].get<std::string>();
        return {};
    }
    if (!tensors) return {};
    if (tensors->format() == FileFormat::WhisperCpp) return "whisper";
    const json& meta = tensors->metadata();
    auto it = meta.find("general.architecture");
    if (it != meta.end() && it->is_string()) return it->get<std::string>();
    return {};
}

std::vector<fs::path> ModelFiles::files() const {
    std::vector<fs::path> out;
    if (is_directory) {
        for (const char* name : {"config.json", "generation_config.json", "preprocessor_config.json",
                                 "tokenizer.json", "tokenizer_config.json"}) {
            if (fs::exists(root / name)) out.push_back(root / name);
        }
    }
    if (tensors) {
        for (const auto& f : tensors->files()) out.push_back(f);
    }
    return out;
}

uint64_t ModelFiles::bytes_on_disk() const {
    uint64_t n = 0;
    std::error_code ec;
    for (const auto& f : files()) {
        auto s = fs::file_size(f, ec);
        if (!ec) n += s;
    }
    return n;
}

}  // namespace parlance
