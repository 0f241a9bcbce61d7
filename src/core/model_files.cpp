// open_model_files (see model_files.h).
#include "core/model_files.h"

#include <algorithm>
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

std::string joined(const std::vector<fs::path>& files) {
    std::string s;
    for (const fs::path& f : files) s += (s.empty() ? "" : ", ") + f.filename().string();
    return s;
}

std::unique_ptr<TensorStore> open_mmproj(const fs::path& file) {
    std::error_code ec;
    if (!fs::exists(file, ec)) throw Error(ErrorKind::NotFound, file.string() + ": no such file (--mmproj)");
    std::unique_ptr<TensorStore> s = TensorStore::open(file);
    if (s->format() != FileFormat::Gguf || !is_mmproj_metadata(s->metadata()))
        throw Error(ErrorKind::InvalidModel,
                    file.string() + ": not a multimodal projector GGUF (general.type is not \"mmproj\")");
    return s;
}

// A llama.cpp download directory: its model GGUF and mmproj GGUF (by their metadata). An explicit
// `mmproj` replaces the directory's (and settles a directory holding several).
void open_gguf_directory(const fs::path& dir, const fs::path& mmproj, ModelFiles& m) {
    std::vector<fs::path> ggufs;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
        if (e.is_regular_file(ec) && e.path().extension() == ".gguf") ggufs.push_back(e.path());
    if (ec) throw Error(ErrorKind::Io, dir.string() + ": cannot list (" + ec.message() + ")");
    std::sort(ggufs.begin(), ggufs.end());
    std::vector<fs::path> models, projectors;
    std::vector<std::unique_ptr<TensorStore>> model_stores, projector_stores;
    for (const fs::path& f : ggufs) {
        std::unique_ptr<TensorStore> s = TensorStore::open(f);
        const bool projector = is_mmproj_metadata(s->metadata());
        (projector ? projectors : models).push_back(f);
        (projector ? projector_stores : model_stores).push_back(std::move(s));
    }
    if (models.size() != 1)
        throw Error(ErrorKind::InvalidModel,
                    dir.string() + (models.empty() ? ": no config.json and no model GGUF file"
                                                   : ": holds several model GGUF files (" + joined(models) +
                                                         "): pass one as --model and its projector as --mmproj"));
    m.tensors = std::move(model_stores[0]);
    if (!mmproj.empty()) {
        m.mmproj = open_mmproj(mmproj);
        return;
    }
    if (projectors.size() > 1)
        throw Error(ErrorKind::InvalidModel, dir.string() + ": holds several mmproj GGUF files (" + joined(projectors) +
                                                 "): name one with --mmproj");
    if (!projector_stores.empty()) m.mmproj = std::move(projector_stores[0]);
}

}  // namespace

bool is_mmproj_metadata(const json& meta) {
    const auto type = meta.find("general.type");
    if (type != meta.end() && type->is_string() && type->get<std::string>() == "mmproj") return true;
    const auto arch = meta.find("general.architecture");
    return arch != meta.end() && arch->is_string() && arch->get<std::string>() == "clip";
}

ModelFiles open_model_files(const fs::path& path, const fs::path& mmproj) {
    std::error_code ec;
    if (!fs::exists(path, ec)) throw Error(ErrorKind::NotFound, path.string() + ": no such file or directory");
    ModelFiles m;
    m.root = path;
    m.is_directory = fs::is_directory(path, ec);
    if (m.is_directory && !fs::exists(path / "config.json")) {
        bool any_gguf = false;
        for (const auto& e : fs::directory_iterator(path, ec)) any_gguf = any_gguf || e.path().extension() == ".gguf";
        if (any_gguf) {
            open_gguf_directory(path, mmproj, m);
            return m;
        }
    }
    if (m.is_directory) {
        m.config = read_json(path / "config.json", true);
        m.generation_config = read_json(path / "generation_config.json", false);
        m.preprocessor_config = read_json(path / "preprocessor_config.json", false);
        m.tokenizer_config = read_json(path / "tokenizer_config.json", false);
        if (fs::exists(path / "tokenizer.json")) m.tokenizer_json = path / "tokenizer.json";
    }
    m.tensors = TensorStore::open(path);  // an mmproj alone opens too: info describes it, loaders refuse it
    if (!mmproj.empty()) {
        if (m.tensors->format() != FileFormat::Gguf)
            throw Error(ErrorKind::InvalidArgument,
                        mmproj.string() + ": --mmproj goes with a GGUF model file (" + path.string() + " is not one)");
        m.mmproj = open_mmproj(mmproj);
    }
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
        for (const char* name : {"config.json", "generation_config.json", "preprocessor_config.json", "tokenizer.json",
                                 "tokenizer_config.json"}) {
            if (fs::exists(root / name)) out.push_back(root / name);
        }
    }
    for (const TensorStore* s : {tensors.get(), mmproj.get()})
        if (s)
            for (const auto& f : s->files()) out.push_back(f);
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
