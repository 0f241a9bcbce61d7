// safetensors writer (see safetensors_writer.h).
#include "core/safetensors_writer.h"

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/error.h"

namespace parlance {

namespace fs = std::filesystem;
using nlohmann::json;

void write_safetensors(const fs::path& file, const std::vector<TensorData>& tensors,
                       const std::map<std::string, std::string>& metadata) {
    json header = json::object();
    if (!metadata.empty()) header["__metadata__"] = metadata;
    uint64_t offset = 0;
    for (const auto& t : tensors) {
        t.check();
        auto dtype = safetensors_dtype_name(t.type);
        if (!dtype) {
            throw Error(ErrorKind::Unsupported, "tensor " + t.name + ": safetensors cannot store type " +
                                                    dtype_name(t.type));
        }
        header[t.name] = {{"dtype", *dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
        offset += t.bytes.size();
    }
    std::string text = header.dump();
    while (text.size() % 8 != 0) text.push_back(' ');
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(ErrorKind::Io, file.string() + ": cannot open for writing");
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& t : tensors) {
        out.write(reinterpret_cast<const char*>(t.bytes.data()), static_cast<std::streamsize>(t.bytes.size()));
    }
    out.flush();
    if (!out) throw Error(ErrorKind::Io, file.string() + ": write failed");
}

std::vector<fs::path> write_safetensors_sharded(const fs::path& dir, const std::vector<TensorData>& tensors,
                                                size_t n_shards, const std::map<std::string, std::string>& metadata) {
    if (n_shards == 0 || n_shards > tensors.size()) {
        throw Error(ErrorKind::InvalidArgument, "cannot split " + std::to_string(tensors.size()) +
                                                    " tensors into " + std::to_string(n_shards) + " shards");
    }
    fs::create_directories(dir);
    uint64_t total = 0;
    for (const auto& t : tensors) total += t.bytes.size();

    // Greedy contiguous split: close a shard once it reaches its share, leaving at least one
    // tensor for each remaining shard.
    std::vector<std::vector<TensorData>> shards(n_shards);
    size_t shard = 0;
    uint64_t acc = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
        const size_t left_tensors = tensors.size() - i;
        const size_t left_shards = n_shards - shard;
        if (!shards[shard].empty() &&
            (left_tensors < left_shards || (shard + 1 < n_shards && acc >= total * (shard + 1) / n_shards))) {
            ++shard;
        }
        shards[shard].push_back(tensors[i]);
        acc += tensors[i].bytes.size();
    }
    json weight_map = json::object();
    std::vector<fs::path> paths;
    for (size_t s = 0; s < n_shards; ++s) {
        char name[64];
        std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, n_shards);
        write_safetensors(dir / name, shards[s], metadata);
        for (const auto& t : shards[s]) weight_map[t.name] = name;
        paths.push_back(dir / name);
    }
    json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    std::ofstream out(dir / "model.safetensors.index.json", std::ios::trunc);
    out << index.dump(2) << "\n";
    if (!out) throw Error(ErrorKind::Io, (dir / "model.safetensors.index.json").string() + ": write failed");
    return paths;
}

}  // namespace parlance
