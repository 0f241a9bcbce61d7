// GGUF: round trip with quantized tensors and metadata arrays; corrupt and truncated files.
#include <cstring>

#include "core/dtype.h"
#include "core/gguf_writer.h"
#include "core/tensor_store.h"
#include "core_test_util.h"
#include "test_support.h"

namespace parlance {
namespace {

using testing::expect_error;
using testing::ramp;
using testing::TempDir;

void write_sample(const std::filesystem::path& file, std::vector<TensorData>* out = nullptr) {
    GgufWriter w;
    w.set_str("general.architecture", "toy");
    w.set_u32("toy.block_count", 2);
    w.set_f32("toy.eps", 0.5f);
    w.set_bool("toy.flag", true);
    w.set_strs("tokenizer.ggml.tokens", {"a", "b", "\xc4\xa0the"});
    w.set_i32s("toy.ints", {1, -2, 3});
    std::vector<TensorData> tensors = {
        TensorData::from_f32("tok_embd.weight", {3, 256}, ramp(768, 1), GGML_TYPE_Q8_0),
        TensorData::from_f32("blk.0.ffn.weight", {2, 512}, ramp(1024, 2), GGML_TYPE_Q4_K),
        TensorData::from_f32("norm.weight", {256}, ramp(256, 3), GGML_TYPE_F32),
        TensorData::from_f32("out.weight", {4, 32}, ramp(128, 4), GGML_TYPE_F16),
    };
    for (const auto& t : tensors) w.add_tensor(t);
    w.write(file);
    if (out) *out = tensors;
}

TEST(Gguf, RoundTripQuantizedAndMetadata) {
    TempDir dir;
    std::vector<TensorData> tensors;
    write_sample(dir / "m.gguf", &tensors);
    auto store = TensorStore::open(dir / "m.gguf");
    EXPECT_EQ(store->format(), FileFormat::Gguf);
    const auto& meta = store->metadata();
    EXPECT_EQ(meta["general.architecture"], "toy");
    EXPECT_EQ(meta["toy.block_count"], 2);
    EXPECT_EQ(meta["toy.eps"], 0.5);
    EXPECT_EQ(meta["toy.flag"], true);
    EXPECT_EQ(meta["tokenizer.ggml.tokens"].size(), 3u);
    EXPECT_EQ(meta["tokenizer.ggml.tokens"][2], "\xc4\xa0the");
    EXPECT_EQ(meta["toy.ints"], nlohmann::json({1, -2, 3}));
    ASSERT_EQ(store->tensors().size(), tensors.size());
    for (const auto& t : tensors) {
        const TensorInfo& info = store->get(t.name);
        EXPECT_EQ(info.type, t.type) << t.name;
        EXPECT_EQ(info.shape, t.shape) << t.name;
        ASSERT_EQ(info.nbytes, t.bytes.size()) << t.name;
        EXPECT_EQ(std::memcmp(info.data, t.bytes.data(), t.bytes.size()), 0) << t.name;
    }
    // the q4_K tensor dequantizes close to its source values
    auto back = decode_to_f32(store->get("blk.0.ffn.weight").data, GGML_TYPE_Q4_K, 1024);
    auto src = ramp(1024, 2);
    for (size_t i = 0; i < src.size(); ++i) EXPECT_NEAR(back[i], src[i], 0.15);
    EXPECT_EQ(store->parameter_count(), 768 + 1024 + 256 + 128);
}

TEST(Gguf, Garbage) {
    TempDir dir;
    testing::write_file(dir / "g.gguf", std::string(100, 'x'));
    expect_error([&] { TensorStore::open(dir / "g.gguf"); }, ErrorKind::InvalidModel, {"g.gguf", "GGUF"});
    testing::write_file(dir / "h.gguf", "GGUF" + std::string(60, '\xff'));
    expect_error([&] { TensorStore::open(dir / "h.gguf"); }, ErrorKind::InvalidModel, {"h.gguf", "GGUF"});
}

TEST(Gguf, TruncatedData) {
    TempDir dir;
    write_sample(dir / "m.gguf");
    auto bytes = testing::read_file(dir / "m.gguf");
    // Cut into the data section: ggml's parser reads only the header with no_alloc, so our own
    // bounds check must catch it and name the tensor.
    testing::write_file(dir / "cut.gguf", bytes.substr(0, bytes.size() - 100));
    expect_error([&] { TensorStore::open(dir / "cut.gguf"); }, ErrorKind::InvalidModel,
                 {"cut.gguf", "beyond the end"});
    testing::write_file(dir / "cut2.gguf", bytes.substr(0, 40));
    expect_error([&] { TensorStore::open(dir / "cut2.gguf"); }, ErrorKind::InvalidModel, {"cut2.gguf"});
}

TEST(Gguf, WriterRejectsDuplicatesAndSizeMismatch) {
    GgufWriter w;
    w.add_tensor(TensorData::from_f32("x", {4}, ramp(4)));
    expect_error([&] { w.add_tensor(TensorData::from_f32("x", {4}, ramp(4))); }, ErrorKind::InvalidArgument,
                 {"x", "twice"});
    TensorData bad{"y", GGML_TYPE_F32, {4}, std::vector<uint8_t>(3)};
    expect_error([&] { w.add_tensor(bad); }, ErrorKind::InvalidArgument, {"y", "3 bytes"});
}

}  // namespace
}  // namespace parlance
