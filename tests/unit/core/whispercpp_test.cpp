// whisper.cpp .bin: round trip (hparams, mel filters, raw-byte vocab, f32/f16 tensors) and
// malformed files (bad magic, truncation at each section, bad tensor headers).
#include <cstring>

#include "core/tensor_store.h"
#include "core/whispercpp_writer.h"
#include "core_test_util.h"
#include "test_support.h"

namespace parlance {
namespace {

using testing::expect_error;
using testing::ramp;
using testing::TempDir;

WhisperCppContents sample() {
    WhisperCppContents c;
    c.hparams = {4, 8, 16, 2, 1, 6, 16, 2, 1, 4, 1};
    c.n_mel = 4;
    c.n_fft = 5;
    c.mel_filters = ramp(20, 9);
    c.vocab = {"!", " the", std::string("\xff\xfe", 2), ""};
    c.tensors = {TensorData::from_f32("encoder.conv1.weight", {16, 4, 3}, ramp(192, 1), GGML_TYPE_F16),
                 TensorData::from_f32("encoder.conv1.bias", {1, 16}, ramp(16, 2), GGML_TYPE_F32),
                 TensorData::from_f32("decoder.token_embedding.weight", {4, 32}, ramp(128, 3), GGML_TYPE_Q8_0)};
    return c;
}

TEST(WhisperCpp, RoundTrip) {
    TempDir dir;
    auto c = sample();
    write_whispercpp(dir / "ggml-tiny.bin", c);
    auto store = TensorStore::open(dir / "ggml-tiny.bin");
    EXPECT_EQ(store->format(), FileFormat::WhisperCpp);
    const auto& h = store->metadata()["hparams"];
    EXPECT_EQ(h["n_vocab"], 4);
    EXPECT_EQ(h["n_audio_state"], 16);
    EXPECT_EQ(h["n_text_ctx"], 6);
    EXPECT_EQ(h["n_mels"], 4);
    EXPECT_EQ(h["ftype"], 1);
    const auto& mel = store->metadata()["mel_filters"];
    EXPECT_EQ(mel["n_mel"], 4);
    EXPECT_EQ(mel["n_fft"], 5);
    ASSERT_EQ(mel["data"].size(), 20u);
    EXPECT_FLOAT_EQ(mel["data"][7].get<float>(), c.mel_filters[7]);
    EXPECT_EQ(store->vocab_bytes(), c.vocab);
    ASSERT_EQ(store->tensors().size(), 3u);
    for (const auto& t : c.tensors) {
        const TensorInfo& info = store->get(t.name);
        EXPECT_EQ(info.type, t.type);
        EXPECT_EQ(info.shape, t.shape);
        ASSERT_EQ(info.nbytes, t.bytes.size());
        EXPECT_EQ(std::memcmp(info.data, t.bytes.data(), t.bytes.size()), 0) << t.name;
    }
}

TEST(WhisperCpp, BadMagic) {
    TempDir dir;
    testing::write_file(dir / "x.bin", std::string("abcdefghijklmnop"));
    expect_error([&] { TensorStore::open(dir / "x.bin"); }, ErrorKind::InvalidModel, {"x.bin", "bad magic"});
}

TEST(WhisperCpp, Truncation) {
    TempDir dir;
    write_whispercpp(dir / "m.bin", sample());
    const auto bytes = testing::read_file(dir / "m.bin");
    struct Case { size_t keep; const char* names; };
    // 4 magic + 44 hparams = 48; mel header 8 + 80 floats bytes -> vocab at 136
    const Case cases[] = {{20, "hparams.n_audio_layer"}, {60, "mel filters"}, {140, "vocab token 0"},
                          {bytes.size() - 5, "decoder.token_embedding.weight"}};
    for (const auto& k : cases) {
        testing::write_file(dir / "cut.bin", bytes.substr(0, k.keep));
        expect_error([&] { TensorStore::open(dir / "cut.bin"); }, ErrorKind::InvalidModel,
                     {"cut.bin", k.names, "offset"});
    }
}

// Byte offset of the first tensor header in a sample file.
size_t first_tensor_offset(const WhisperCppContents& c) {
    size_t off = 4 + 44 + 8 + c.mel_filters.size() * 4 + 4;
    for (const auto& v : c.vocab) off += 4 + v.size();
    return off;
}

TEST(WhisperCpp, BadTensorHeaders) {
    TempDir dir;
    auto c = sample();
    write_whispercpp(dir / "m.bin", c);
    const auto bytes = testing::read_file(dir / "m.bin");
    const size_t off = first_tensor_offset(c);
    auto patched = [&](size_t at, int32_t v) {
        std::string b = bytes;
        std::memcpy(b.data() + at, &v, 4);
        testing::write_file(dir / "p.bin", b);
    };
    patched(off, 7);  // n_dims
    expect_error([&] { TensorStore::open(dir / "p.bin"); }, ErrorKind::InvalidModel, {"p.bin", "n_dims 7", "offset"});
    patched(off + 8, 99);  // ttype
    expect_error([&] { TensorStore::open(dir / "p.bin"); }, ErrorKind::InvalidModel,
                 {"p.bin", "encoder.conv1.weight", "unknown ggml type 99"});
    patched(off + 12, 1 << 30);  // ne[0] huge: data past EOF
    expect_error([&] { TensorStore::open(dir / "p.bin"); }, ErrorKind::InvalidModel,
                 {"p.bin", "encoder.conv1.weight", "past the end"});
}

}  // namespace
}  // namespace parlance
