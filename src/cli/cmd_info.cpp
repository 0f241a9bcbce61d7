// parlance info PATH [--mmproj FILE] [--json]: what a model directory or file holds (format,
// architecture, key dimensions, parameters, dtypes, files, tokenizer size; a GGUF pair's projector
// too), without interpreting the architecture.
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/format.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/model_files.h"

namespace parlance::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Integers of an HF config that are not dimensions: token ids, and training-time settings that
// transformers writes into every config (SpecAugment masks, the classifier head's size).
bool is_dimension(const std::string& key) {
    return !key.ends_with("_token_id") && !key.starts_with("mask_") && !key.starts_with("classifier_");
}

// Integer fields of an HF config, one level of nested objects included ("text_config.x").
json config_dimensions(const json& config) {
    json dims = json::object();
    for (const auto& [k, v] : config.items()) {
        if (v.is_number_integer() && is_dimension(k)) {
            dims[k] = v;
        } else if (v.is_object()) {
            for (const auto& [k2, v2] : v.items()) {
                if (v2.is_number_integer() && is_dimension(k2)) dims[k + "." + k2] = v2;
            }
        }
    }
    return dims;
}

// Integer scalars of GGUF metadata under "<arch>." (block_count, context_length, ...).
json gguf_dimensions(const json& meta, const std::string& arch) {
    json dims = json::object();
    const std::string prefix = arch.empty() ? std::string() : arch + ".";
    for (const auto& [k, v] : meta.items()) {
        if (v.is_number_integer() && !prefix.empty() && k.starts_with(prefix)) dims[k] = v;
    }
    return dims;
}

// Distinct token ids of a tokenizer.json: model.vocab (object or Unigram list) plus
// added_tokens. -1 when it cannot be read.
int64_t tokenizer_json_size(const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    json tok = json::parse(in, nullptr, false);
    if (tok.is_discarded() || !tok.is_object()) {
        throw Error(ErrorKind::InvalidModel, file.string() + ": not valid JSON");
    }
    std::set<int64_t> ids;
    if (tok.contains("model") && tok["model"].is_object() && tok["model"].contains("vocab")) {
        const json& vocab = tok["model"]["vocab"];
        if (vocab.is_object()) {
            for (const auto& [piece, id] : vocab.items()) {
                if (id.is_number_integer()) ids.insert(id.get<int64_t>());
            }
        } else if (vocab.is_array()) {
            for (size_t i = 0; i < vocab.size(); ++i) ids.insert(static_cast<int64_t>(i));
        }
    }
    if (tok.contains("added_tokens") && tok["added_tokens"].is_array()) {
        for (const auto& t : tok["added_tokens"]) {
            if (t.is_object() && t.contains("id") && t["id"].is_number_integer()) ids.insert(t["id"].get<int64_t>());
        }
    }
    return static_cast<int64_t>(ids.size());
}

json dtype_histogram(const TensorStore& store) {
    std::map<std::string, std::pair<uint64_t, uint64_t>> hist;  // type -> (tensors, bytes)
    for (const auto& t : store.tensors()) {
        auto& [count, bytes] = hist[dtype_name(t.type)];
        ++count;
        bytes += t.nbytes;
    }
    json dtypes = json::object();
    for (const auto& [name, cb] : hist) dtypes[name] = {{"tensors", cb.first}, {"bytes", cb.second}};
    return dtypes;
}

// llama.cpp's projector file of a multimodal pair: its type and encoder dimensions (clip.*).
json describe_mmproj(const TensorStore& mmproj) {
    const json& meta = mmproj.metadata();
    json out = json::object();
    out["path"] = mmproj.files().front().string();
    std::string type;
    for (const char* key : {"clip.audio.projector_type", "clip.projector_type"})
        if (type.empty() && meta.contains(key) && meta[key].is_string()) type = meta[key].get<std::string>();
    out["projector_type"] = type.empty() ? json(nullptr) : json(type);
    out["dimensions"] = gguf_dimensions(meta, "clip");
    out["tensors"] = mmproj.tensors().size();
    out["parameters"] = mmproj.parameter_count();
    out["dtypes"] = dtype_histogram(mmproj);
    return out;
}

json describe(const ModelFiles& m) {
    const TensorStore& store = *m.tensors;
    json out = json::object();
    out["path"] = m.root.string();
    out["format"] = file_format_name(store.format());
    const std::string arch = m.architecture();
    out["architecture"] = arch.empty() ? json(nullptr) : json(arch);
    if (m.config.is_object()) {  // an HF snapshot (a GGUF pair's directory has no config.json)
        out["dimensions"] = config_dimensions(m.config);
    } else if (store.format() == FileFormat::WhisperCpp) {
        out["dimensions"] = store.metadata().value("hparams", json::object());
    } else {
        out["dimensions"] = gguf_dimensions(store.metadata(), arch);
    }
    out["tensors"] = store.tensors().size();
    out["parameters"] = store.parameter_count();
    out["dtypes"] = dtype_histogram(store);
    if (m.mmproj) out["mmproj"] = describe_mmproj(*m.mmproj);
    const auto files = m.files();
    out["files"] = files.size();
    out["bytes_on_disk"] = m.bytes_on_disk();
    json tokenizer_size = nullptr;
    if (!m.tokenizer_json.empty()) {
        tokenizer_size = tokenizer_json_size(m.tokenizer_json);
    } else if (store.format() == FileFormat::WhisperCpp) {
        tokenizer_size = store.vocab_bytes().size();
    } else if (auto it = store.metadata().find("tokenizer.ggml.tokens");
               it != store.metadata().end() && it->is_array()) {
        tokenizer_size = it->size();
    }
    out["tokenizer_size"] = tokenizer_size;
    return out;
}

std::string with_commas(uint64_t n) {
    const std::string digits = std::to_string(n);
    std::string out;
    for (size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
        out.push_back(digits[i]);
    }
    return out;
}

void print_dtypes(const json& dtypes) {
    if (dtypes.empty()) return;
    std::printf("\n  %-10s %8s %20s\n", "dtype", "tensors", "bytes");
    for (const auto& [k, v] : dtypes.items())
        std::printf("  %-10s %8s %20s\n", k.c_str(), std::to_string(v["tensors"].get<uint64_t>()).c_str(),
                    with_commas(v["bytes"].get<uint64_t>()).c_str());
}

void print_table(const json& info) {
    auto row = [](const std::string& key, const std::string& value) {
        std::printf("%-16s %s\n", key.c_str(), value.c_str());
    };
    row("path", info["path"].get<std::string>());
    row("format", info["format"].get<std::string>());
    row("architecture", info["architecture"].is_null() ? "unknown" : info["architecture"].get<std::string>());
    row("parameters", with_commas(info["parameters"].get<uint64_t>()));
    row("tensors", std::to_string(info["tensors"].get<uint64_t>()));
    row("files", std::to_string(info["files"].get<uint64_t>()));
    row("bytes on disk", with_commas(info["bytes_on_disk"].get<uint64_t>()) + " (" +
                             human_bytes(info["bytes_on_disk"].get<uint64_t>()) + ")");
    row("tokenizer size",
        info["tokenizer_size"].is_null() ? "-" : std::to_string(info["tokenizer_size"].get<int64_t>()));
    if (!info["dimensions"].empty()) {
        std::printf("\ndimensions\n");
        for (const auto& [k, v] : info["dimensions"].items()) std::printf("  %-30s %s\n", k.c_str(), v.dump().c_str());
    }
    print_dtypes(info["dtypes"]);
    if (info.contains("mmproj")) {
        const json& p = info["mmproj"];
        std::printf("\nmultimodal projector (mmproj)\n");
        row("  path", p["path"].get<std::string>());
        row("  projector", p["projector_type"].is_null() ? "unknown" : p["projector_type"].get<std::string>());
        row("  parameters", with_commas(p["parameters"].get<uint64_t>()));
        row("  tensors", std::to_string(p["tensors"].get<uint64_t>()));
        for (const auto& [k, v] : p["dimensions"].items()) std::printf("  %-30s %s\n", k.c_str(), v.dump().c_str());
        print_dtypes(p["dtypes"]);
    }
}

}  // namespace

void register_info(CLI::App& app, GlobalOptions& /*globals*/) {
    struct Options {
        std::string path;
        std::string mmproj;
        bool json = false;
    };
    auto opts = std::make_shared<Options>();
    CLI::App* cmd = app.add_subcommand("info", "Describe a model directory, GGUF or whisper.cpp file");
    cmd->add_option("path", opts->path,
                    "HF snapshot directory, .safetensors, .gguf (or a directory of llama.cpp GGUFs: the model and "
                    "its mmproj) or whisper.cpp .bin")
        ->required();
    cmd->add_option("--mmproj", opts->mmproj, "With a .gguf path: the multimodal projector GGUF of its pair");
    cmd->add_flag("--json", opts->json, "Print one JSON object instead of a table");
    cmd->callback([opts] {
        const ModelFiles m = open_model_files(opts->path, opts->mmproj);
        const json info = describe(m);
        if (opts->json) {
            std::printf("%s\n", info.dump(2, ' ', false, json::error_handler_t::replace).c_str());
        } else {
            print_table(info);
        }
    });
}

}  // namespace parlance::cli
