// safetensors: round trips (single, sharded; f32/f16/bf16) and every malformed-input case.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "core/dtype.h"
#include "core/mapped_file.h"
#include "core/safetensors_writer.h"
#include "core/tensor_store.h"
#include "core_test_util.h"
#include "test_support.h"

namespace parlance {
namespace {

using testing::expect_error;
using testing::ramp;
using testing::TempDir;
using testing::write_file;

// A safetensors file from a literal header and data; `claimed_len` overrides the length field.
std::string raw_file(const std::string& header, const std::string& data, int64_t claimed_len = -1) {
    uint64_t len = claimed_len < 0 ? header.size() : static_cast<uint64_t>(claimed_len);
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(len >> (8 * i));
    return out + header + data;
}

std::vector<TensorData> sample_tensors() {
    return {TensorData::from_f32("a.weight", {4, 8}, ramp(32, 1), GGML_TYPE_F32),
            TensorData::from_f32("b.weight", {8}, ramp(8, 2), GGML_TYPE_F16),
            TensorData::from_f32("c.weight", {2, 3, 4}, ramp(24, 3), GGML_TYPE_BF16)};
}

TEST(Safetensors, RoundTripSingleFile) {
    TempDir dir;
    auto tensors = sample_tensors();
    write_safetensors(dir / "model.safetensors", tensors, {{"format", "pt"}});
    auto store = TensorStore::open(dir.path());
    EXPECT_EQ(store->format(), FileFormat::Safetensors);
    ASSERT_EQ(store->tensors().size(), 3u);
    EXPECT_EQ(store->metadata()["__metadata__"]["format"], "pt");
    for (const auto& t : tensors) {
        const TensorInfo& info = store->get(t.name);
        EXPECT_EQ(info.type, t.type);
        EXPECT_EQ(info.shape, t.shape);
        ASSERT_EQ(info.nbytes, t.bytes.size());
        EXPECT_EQ(std::memcmp(info.data, t.bytes.data(), t.bytes.size()), 0) << t.name;
    }
    // values survive f16/bf16 within their precision
    auto c = decode_to_f32(store->get("c.weight").data, GGML_TYPE_BF16, 24);
    auto expected = ramp(24, 3);
    for (size_t i = 0; i < c.size(); ++i) EXPECT_NEAR(c[i], expected[i], 1e-2);
    EXPECT_EQ(store->parameter_count(), 32 + 8 + 24);
    EXPECT_EQ(store->find("nope"), nullptr);
    expect_error([&] { store->get("nope"); }, ErrorKind::InvalidModel, {"model.safetensors", "nope"});
    // zero copy: data points into the mapping of the file, which is the same size on disk
    EXPECT_EQ(store->bytes_on_disk(), std::filesystem::file_size(dir / "model.safetensors"));
}

// Resident kilobytes of the mapping that contains `p` (/proc/self/smaps), -1 if not found.
long resident_kb(const void* p) {
    std::ifstream in("/proc/self/smaps");
    const auto addr = reinterpret_cast<uintptr_t>(p);
    bool inside = false;
    for (std::string line; std::getline(in, line);) {
        unsigned long lo = 0, hi = 0;
        if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find('-')) {
            inside = addr >= lo && addr < hi;
        } else if (inside && line.rfind("Rss:", 0) == 0) {
            return std::stol(line.substr(4));
        }
    }
    return -1;
}

// Releasing drops the pages from this process: after reading every tensor the mapping is
// resident; after releasing them all, (almost) none of it is.
TEST(Safetensors, ReleaseDropsResidentPages) {
    TempDir dir;
    std::vector<TensorData> tensors = {TensorData::from_f32("a.weight", {256, 1024}, ramp(256 * 1024, 1), GGML_TYPE_F32),
                                       TensorData::from_f32("b.weight", {128, 1024}, ramp(128 * 1024, 2), GGML_TYPE_F32)};
    write_safetensors(dir / "model.safetensors", tensors);
    auto store = TensorStore::open(dir.path());
    volatile uint8_t sink = 0;
    for (const auto& t : tensors) {
        const TensorInfo& info = store->get(t.name);
        for (size_t i = 0; i < info.nbytes; i += 4096) sink = sink + info.data[i];
    }
    const TensorInfo& a = store->get("a.weight");
    const long before = resident_kb(a.data);
    ASSERT_GT(before, 1400) << "1.5 MB of tensors read";
    for (const auto& t : tensors) store->release(store->get(t.name));
    EXPECT_LT(resident_kb(a.data), 16) << "was " << before << " kB";
}

// A loader releases each tensor's pages after copying it; the data stays readable (faulted in
// again from the file), including a neighbour that shares a page with a released tensor.
TEST(Safetensors, ReleasedTensorsStayReadable) {
    TempDir dir;
    std::vector<TensorData> tensors = {TensorData::from_f32("a.weight", {3000}, ramp(3000, 1), GGML_TYPE_F32),
                                       TensorData::from_f32("b.weight", {7}, ramp(7, 2), GGML_TYPE_F16),
                                       TensorData::from_f32("c.weight", {5000}, ramp(5000, 3), GGML_TYPE_F32)};
    write_safetensors(dir / "model.safetensors", tensors);
    auto store = TensorStore::open(dir.path());
    for (const auto& t : tensors) {
        const TensorInfo& info = store->get(t.name);
        store->release(info);
        ASSERT_EQ(std::memcmp(info.data, t.bytes.data(), t.bytes.size()), 0) << t.name;
    }
    for (const auto& t : tensors)
        EXPECT_EQ(std::memcmp(store->get(t.name).data, t.bytes.data(), t.bytes.size()), 0) << t.name;
}

TEST(Safetensors, RoundTripSharded) {
    TempDir dir;
    auto tensors = sample_tensors();
    auto shards = write_safetensors_sharded(dir.path(), tensors, 2);
    ASSERT_EQ(shards.size(), 2u);
    auto store = TensorStore::open(dir.path());
    ASSERT_EQ(store->tensors().size(), 3u);
    EXPECT_EQ(store->files().size(), 3u);  // index + 2 shards
    for (const auto& t : tensors) {
        const TensorInfo& info = store->get(t.name);
        EXPECT_EQ(std::memcmp(info.data, t.bytes.data(), t.bytes.size()), 0) << t.name;
    }
    EXPECT_NE(store->get("a.weight").file, store->get("c.weight").file);
}

TEST(Safetensors, LoadsIntegerDtypes) {
    TempDir dir;
    TensorData ids{"position_ids", GGML_TYPE_I64, {3}, std::vector<uint8_t>(24, 0)};
    ids.bytes[8] = 1;
    ids.bytes[16] = 2;
    write_safetensors(dir / "m.safetensors", {ids});
    auto store = TensorStore::open(dir / "m.safetensors");
    EXPECT_EQ(store->get("position_ids").type, GGML_TYPE_I64);
    EXPECT_EQ(decode_to_f32(store->get("position_ids").data, GGML_TYPE_I64, 3)[2], 2.0f);
}

TEST(Safetensors, MissingFile) {
    TempDir dir;
    expect_error([&] { TensorStore::open(dir / "absent.safetensors"); }, ErrorKind::NotFound, {"absent.safetensors"});
    expect_error([&] { MappedFile f(dir / "absent.bin"); }, ErrorKind::NotFound, {"absent.bin"});
    expect_error([&] { TensorStore::open(dir.path()); }, ErrorKind::NotFound, {dir.path().string()});
}

TEST(Safetensors, TruncatedFile) {
    TempDir dir;
    write_file(dir / "t.safetensors", "abc");
    expect_error([&] { TensorStore::open(dir / "t.safetensors"); }, ErrorKind::InvalidModel,
                 {"t.safetensors", "truncated"});
    // a valid file cut in its data section
    write_safetensors(dir / "full.safetensors", sample_tensors());
    auto bytes = testing::read_file(dir / "full.safetensors");
    write_file(dir / "cut.safetensors", bytes.substr(0, bytes.size() - 10));
    expect_error([&] { TensorStore::open(dir / "cut.safetensors"); }, ErrorKind::InvalidModel,
                 {"cut.safetensors", "c.weight", "beyond"});
}

TEST(Safetensors, HeaderLengthLargerThanFile) {
    TempDir dir;
    write_file(dir / "h.safetensors", raw_file("{}", "", 1000));
    expect_error([&] { TensorStore::open(dir / "h.safetensors"); }, ErrorKind::InvalidModel,
                 {"h.safetensors", "header length 1000"});
}

TEST(Safetensors, HeaderLengthSmallerThanHeader) {
    TempDir dir;
    const std::string header = R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
    write_file(dir / "h.safetensors", raw_file(header, std::string(4, '\0'), 20));
    expect_error([&] { TensorStore::open(dir / "h.safetensors"); }, ErrorKind::InvalidModel,
                 {"h.safetensors", "JSON"});
}

TEST(Safetensors, NonJsonHeader) {
    TempDir dir;
    write_file(dir / "j.safetensors", raw_file("not json at all", ""));
    expect_error([&] { TensorStore::open(dir / "j.safetensors"); }, ErrorKind::InvalidModel,
                 {"j.safetensors", "not valid JSON"});
}

TEST(Safetensors, OffsetsBeyondFile) {
    TempDir dir;
    const std::string header = R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
    write_file(dir / "o.safetensors", raw_file(header, std::string(8, '\0')));
    expect_error([&] { TensorStore::open(dir / "o.safetensors"); }, ErrorKind::InvalidModel,
                 {"o.safetensors", "tensor w", "beyond"});
}

TEST(Safetensors, ShapeDtypeSizeMismatch) {
    TempDir dir;
    const std::string header = R"({"w":{"dtype":"F16","shape":[4],"data_offsets":[0,16]}})";
    write_file(dir / "s.safetensors", raw_file(header, std::string(16, '\0')));
    expect_error([&] { TensorStore::open(dir / "s.safetensors"); }, ErrorKind::InvalidModel,
                 {"s.safetensors", "tensor w", "needs 8 bytes", "span 16"});
}

TEST(Safetensors, OverlappingAndReversedOffsets) {
    TempDir dir;
    const std::string overlap =
        R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
    write_file(dir / "ov.safetensors", raw_file(overlap, std::string(12, '\0')));
    expect_error([&] { TensorStore::open(dir / "ov.safetensors"); }, ErrorKind::InvalidModel,
                 {"ov.safetensors", "tensor b", "overlap", "tensor a"});
    const std::string reversed = R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})";
    write_file(dir / "rev.safetensors", raw_file(reversed, std::string(8, '\0')));
    expect_error([&] { TensorStore::open(dir / "rev.safetensors"); }, ErrorKind::InvalidModel,
                 {"rev.safetensors", "tensor a", "out of order"});
}

TEST(Safetensors, UnsupportedDtype) {
    TempDir dir;
    const std::string header = R"({"mask":{"dtype":"BOOL","shape":[4],"data_offsets":[0,4]}})";
    write_file(dir / "u.safetensors", raw_file(header, std::string(4, '\0')));
    expect_error([&] { TensorStore::open(dir / "u.safetensors"); }, ErrorKind::Unsupported,
                 {"u.safetensors", "mask", "BOOL"});
}

TEST(Safetensors, IndexNamesMissingShard) {
    TempDir dir;
    write_safetensors_sharded(dir.path(), sample_tensors(), 2);
    std::filesystem::remove(dir / "model-00002-of-00002.safetensors");
    expect_error([&] { TensorStore::open(dir.path()); }, ErrorKind::InvalidModel,
                 {"model.safetensors.index.json", "model-00002-of-00002.safetensors", "b.weight"});
}

TEST(Safetensors, TensorMissingFromItsShard) {
    TempDir dir;
    write_safetensors_sharded(dir.path(), sample_tensors(), 2);
    auto index = nlohmann::json::parse(testing::read_file(dir / "model.safetensors.index.json"));
    index["weight_map"]["ghost.weight"] = "model-00001-of-00002.safetensors";
    write_file(dir / "model.safetensors.index.json", index.dump());
    expect_error([&] { TensorStore::open(dir.path()); }, ErrorKind::InvalidModel,
                 {"model.safetensors.index.json", "ghost.weight", "model-00001-of-00002.safetensors"});
}

TEST(Safetensors, WriterRejectsQuantized) {
    TempDir dir;
    auto q = TensorData::from_f32("q", {32}, ramp(32), GGML_TYPE_Q8_0);
    expect_error([&] { write_safetensors(dir / "q.safetensors", {q}); }, ErrorKind::Unsupported, {"q8_0", "q"});
}

}  // namespace
}  // namespace parlance
