// safetensors reader: 8-byte little-endian header length, JSON header, raw little-endian data.
// Single files and sharded checkpoints (model.safetensors.index.json + shards).
#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "core/dtype.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "core/tensor_readers.h"

namespace parlance::detail {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

[[noreturn]] void invalid(const fs::path& file, const std::string& what) {
    throw Error(ErrorKind::InvalidModel, file.string() + ": " + what);
}

std::string shape_string(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

// Parses one safetensors file into `tensors` (appended, in data order) and its __metadata__ into
// `metadata`. Keeps `mapped` alive through the returned pointers.
void parse_file(const MappedFile& mapped, std::vector<TensorInfo>& tensors, json& metadata) {
    const fs::path& file = mapped.path();
    const size_t size = mapped.size();
    if (size < 8) invalid(file, "truncated: " + std::to_string(size) + " bytes, no header length");
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | mapped.data()[i];
    if (header_len > size - 8) {
        invalid(file, "header length " + std::to_string(header_len) + " exceeds the file (" +
                          std::to_string(size) + " bytes)");
    }
    const char* header_begin = reinterpret_cast<const char*>(mapped.data() + 8);
    json header;
    try {
        header = json::parse(header_begin, header_begin + header_len);
    } catch (const json::parse_error& e) {
        invalid(file, std::string("header is not valid JSON (") + e.what() + ")");
    }
    if (!header.is_object()) invalid(file, "header is not a JSON object");

    const uint8_t* data = mapped.data() + 8 + header_len;
    const size_t data_size = size - 8 - static_cast<size_t>(header_len);
    std::vector<TensorInfo> local;
    std::vector<std::pair<uint64_t, uint64_t>> spans;  // parallel to local
    for (const auto& [name, entry] : header.items()) {
        if (name == "__metadata__") {
            if (!entry.is_object()) invalid(file, "__metadata__ is not an object");
            for (const auto& [k, v] : entry.items()) metadata[k] = v;
            continue;
        }
        const std::string where = "tensor " + name + ": ";
        if (!entry.is_object()) invalid(file, where + "entry is not an object");
        if (!entry.contains("dtype") || !entry["dtype"].is_string()) invalid(file, where + "missing dtype");
        if (!entry.contains("shape") || !entry["shape"].is_array()) invalid(file, where + "missing shape");
        if (!entry.contains("data_offsets") || !entry["data_offsets"].is_array() ||
            entry["data_offsets"].size() != 2 || !entry["data_offsets"][0].is_number_unsigned() ||
            !entry["data_offsets"][1].is_number_unsigned()) {
            invalid(file, where + "data_offsets must be [begin, end] of non-negative integers");
        }
        const std::string dtype = entry["dtype"].get<std::string>();
        auto type = ggml_type_from_safetensors(dtype);
        if (!type) {
            throw Error(ErrorKind::Unsupported,
                        file.string() + ": " + where + "unsupported dtype " + dtype);
        }
        std::vector<int64_t> shape;
        for (const auto& d : entry["shape"]) {
            if (!d.is_number_unsigned()) invalid(file, where + "shape has a non-integer or negative dimension");
            shape.push_back(d.get<int64_t>());
        }
        const uint64_t begin = entry["data_offsets"][0].get<uint64_t>();
        const uint64_t end = entry["data_offsets"][1].get<uint64_t>();
        if (begin > end) {
            invalid(file, where + "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                              "] are out of order");
        }
        if (end > data_size) {
            invalid(file, where + "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                              "] lie beyond the data (" + std::to_string(data_size) + " bytes)");
        }
        size_t expected = 0;
        try {
            expected = tensor_bytes(*type, shape);
        } catch (const Error& e) {
            invalid(file, where + e.what());
        }
        if (end - begin != expected) {
            invalid(file, where + "shape " + shape_string(shape) + " of " + dtype + " needs " +
                              std::to_string(expected) + " bytes but data_offsets span " +
                              std::to_string(end - begin));
        }
        local.push_back(TensorInfo{name, *type, std::move(shape), data + begin,
                                   static_cast<size_t>(end - begin), file.string()});
        spans.emplace_back(begin, end);
    }
    // Tensors must not share bytes: sort by begin and check each starts after the previous end.
    std::vector<size_t> order(local.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return spans[a] < spans[b]; });
    uint64_t max_end = 0;
    const std::string* max_name = nullptr;
    for (size_t i : order) {
        const auto& [begin, end] = spans[i];
        if (begin == end) continue;  // empty tensors occupy no bytes
        if (max_name != nullptr && begin < max_end) {
            invalid(file, "tensor " + local[i].name + ": data_offsets overlap those of tensor " + *max_name);
        }
        max_end = end;
        max_name = &local[i].name;
    }
    for (size_t i : order) tensors.push_back(std::move(local[i]));
}

}  // namespace

std::unique_ptr<TensorStore> read_safetensors(const fs::path& file) {
    auto mapped = std::make_shared<MappedFile>(file);
    std::vector<TensorInfo> tensors;
    json st_meta = json::object();
    parse_file(*mapped, tensors, st_meta);
    json metadata = json::object();
    metadata["__metadata__"] = std::move(st_meta);
    return std::make_unique<TensorStore>(FileFormat::Safetensors,
                                         std::vector<std::shared_ptr<MappedFile>>{mapped},
                                         std::move(tensors), std::move(metadata));
}

std::unique_ptr<TensorStore> read_safetensors_index(const fs::path& index_file) {
    auto index_mapped = std::make_shared<MappedFile>(index_file);
    json index;
    try {
        const char* p = reinterpret_cast<const char*>(index_mapped->data());
        index = json::parse(p, p + index_mapped->size());
    } catch (const json::parse_error& e) {
        invalid(index_file, std::string("not valid JSON (") + e.what() + ")");
    }
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
        invalid(index_file, "missing weight_map object");
    }
    // shard file name -> tensors the index places in it
    std::map<std::string, std::vector<std::string>> shards;
    for (const auto& [tensor, shard] : index["weight_map"].items()) {
        if (!shard.is_string()) invalid(index_file, "weight_map entry for tensor " + tensor + " is not a file name");
        const auto name = shard.get<std::string>();
        if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
            invalid(index_file, "weight_map names tensor " + tensor + " in an invalid shard path '" + name + "'");
        }
        shards[name].push_back(tensor);
    }
    const fs::path dir = index_file.parent_path();
    std::vector<std::shared_ptr<MappedFile>> files{index_mapped};
    std::vector<TensorInfo> tensors;
    json st_meta = json::object();
    for (const auto& [shard, names] : shards) {
        const fs::path shard_path = dir / shard;
        if (!fs::exists(shard_path)) {
            throw Error(ErrorKind::InvalidModel, index_file.string() + ": shard " + shard_path.string() +
                                                     " (holding tensor " + names.front() + ") does not exist");
        }
        auto mapped = std::make_shared<MappedFile>(shard_path);
        std::vector<TensorInfo> shard_tensors;
        parse_file(*mapped, shard_tensors, st_meta);
        std::set<std::string_view> present;
        for (const auto& t : shard_tensors) present.insert(t.name);
        for (const auto& n : names) {
            if (!present.count(n)) {
                throw Error(ErrorKind::InvalidModel, index_file.string() + ": tensor " + n +
                                                         " is missing from its shard " + shard_path.string());
            }
        }
        for (auto& t : shard_tensors) tensors.push_back(std::move(t));
        files.push_back(std::move(mapped));
    }
    json metadata = json::object();
    metadata["__metadata__"] = std::move(st_meta);
    if (index.contains("metadata")) metadata["index_metadata"] = index["metadata"];
    return std::make_unique<TensorStore>(FileFormat::Safetensors, std::move(files), std::move(tensors),
                                         std::move(metadata));
}

}  // namespace parlance::detail
