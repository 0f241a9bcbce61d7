// Black-box tests of `parlance info` (and --help/--version) on checkpoints the tests write.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/gguf_writer.h"
#include "core/safetensors_writer.h"
#include "core/whispercpp_writer.h"
#include "test_support.h"

namespace parlance {
namespace {

using testing::TempDir;
using testing::write_file;

std::vector<float> values(size_t n) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 7) * 0.25f - 0.5f;
    return v;
}

using parlance::testing::quoted;

int run_info(std::string args, std::string* out) {
    std::string cmd = quoted(testing::parlance_binary().string());
    cmd.append(" info ").append(args);
    return testing::run_command(cmd, out);
}

int run_info_json(const std::filesystem::path& path, std::string* out) {
    std::string args("--json ");
    args.append(quoted(path.string()));
    return run_info(args, out);
}

void write_hf(const std::filesystem::path& dir, bool sharded) {
    write_file(dir / "config.json",
               R"({"model_type": "whisper", "d_model": 64, "encoder_layers": 2, "decoder_layers": 3,
                   "num_mel_bins": 80, "vocab_size": 51865, "max_source_positions": 1500,
                   "eos_token_id": 50257, "mask_time_length": 10, "classifier_proj_size": 256})");
    write_file(dir / "tokenizer.json",
               R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2}},
                   "added_tokens": [{"id": 3, "content": "<|endoftext|>"}, {"id": 2, "content": "c"}]})");
    std::vector<TensorData> tensors = {TensorData::from_f32("w1", {10, 10}, values(100), GGML_TYPE_F32),
                                       TensorData::from_f32("w2", {20}, values(20), GGML_TYPE_F16),
                                       TensorData::from_f32("w3", {3, 7}, values(21), GGML_TYPE_BF16)};
    if (sharded) {
        write_safetensors_sharded(dir, tensors, 3);
    } else {
        write_safetensors(dir / "model.safetensors", tensors);
    }
}

TEST(CliInfo, HelpAndVersion) {
    std::string out;
    EXPECT_EQ(testing::run_command(quoted(testing::parlance_binary().string()).append(" --help"), &out), 0);
    EXPECT_NE(out.find("info"), std::string::npos) << out;
    EXPECT_EQ(testing::run_command(quoted(testing::parlance_binary().string()).append(" --version"), &out), 0);
    EXPECT_NE(out.find("parlance " PARLANCE_VERSION), std::string::npos) << out;
}

TEST(CliInfo, SafetensorsDirectory) {
    TempDir dir;
    write_hf(dir.path(), false);
    std::string out;
    ASSERT_EQ(run_info(quoted(dir.path().string()), &out), 0) << out;
    EXPECT_NE(out.find("141"), std::string::npos) << out;  // 100 + 20 + 21 parameters
    for (const char* s : {"whisper", "safetensors", "f32", "f16", "bf16", "d_model", "encoder_layers", "51865"}) {
        EXPECT_NE(out.find(s), std::string::npos) << s << "\n" << out;
    }
    ASSERT_EQ(run_info_json(dir.path(), &out), 0) << out;
    auto j = nlohmann::json::parse(out);
    EXPECT_EQ(j["parameters"], 141);
    EXPECT_EQ(j["dtypes"]["f16"]["tensors"], 1);
    EXPECT_EQ(j["dtypes"]["f16"]["bytes"], 40);
    EXPECT_EQ(j["tokenizer_size"], 4);  // ids 0..3: vocab plus one new added token
    EXPECT_EQ(j["files"], 3);
    EXPECT_EQ(j["dimensions"]["decoder_layers"], 3);
    // Token ids and training-time settings are integers too, but not dimensions.
    for (const char* k : {"eos_token_id", "mask_time_length", "classifier_proj_size"})
        EXPECT_FALSE(j["dimensions"].contains(k)) << k;
}

TEST(CliInfo, ShardedDirectory) {
    TempDir dir;
    write_hf(dir.path(), true);
    std::string out;
    ASSERT_EQ(run_info_json(dir.path(), &out), 0) << out;
    auto j = nlohmann::json::parse(out);
    EXPECT_EQ(j["parameters"], 141);
    EXPECT_EQ(j["files"], 6);  // config, tokenizer, index, 3 shards
    EXPECT_EQ(j["dtypes"]["bf16"]["tensors"], 1);
}

TEST(CliInfo, GgufFile) {
    TempDir dir;
    GgufWriter w;
    w.set_str("general.architecture", "qwen3");
    w.set_u32("qwen3.block_count", 4);
    w.set_strs("tokenizer.ggml.tokens", {"a", "b", "c", "d", "e"});
    w.add_tensor(TensorData::from_f32("token_embd.weight", {2, 256}, values(512), GGML_TYPE_Q8_0));
    w.add_tensor(TensorData::from_f32("blk.0.w", {1, 256}, values(256), GGML_TYPE_Q4_K));
    w.write(dir / "m.gguf");
    std::string out;
    ASSERT_EQ(run_info(quoted((dir / "m.gguf").string()), &out), 0) << out;
    for (const char* s : {"768", "q8_0", "q4_K", "qwen3", "qwen3.block_count", "gguf"}) {
        EXPECT_NE(out.find(s), std::string::npos) << s << "\n" << out;
    }
    ASSERT_EQ(run_info_json((dir / "m.gguf"), &out), 0) << out;
    EXPECT_EQ(nlohmann::json::parse(out)["tokenizer_size"], 5);
}

TEST(CliInfo, WhisperCppFile) {
    TempDir dir;
    WhisperCppContents c;
    c.hparams = {3, 8, 16, 2, 1, 6, 16, 2, 1, 80, 1};
    c.vocab = {"a", std::string("\xff", 1), " b"};
    c.tensors = {TensorData::from_f32("encoder.conv1.weight", {16, 3}, values(48), GGML_TYPE_F16)};
    write_whispercpp(dir / "ggml-tiny.bin", c);
    std::string out;
    ASSERT_EQ(run_info(quoted((dir / "ggml-tiny.bin").string()), &out), 0) << out;
    for (const char* s : {"48", "f16", "whisper.cpp", "n_audio_state", "n_mels"}) {
        EXPECT_NE(out.find(s), std::string::npos) << s << "\n" << out;
    }
    ASSERT_EQ(run_info_json((dir / "ggml-tiny.bin"), &out), 0) << out;
    auto j = nlohmann::json::parse(out);
    EXPECT_EQ(j["tokenizer_size"], 3);
    EXPECT_EQ(j["architecture"], "whisper");
    EXPECT_EQ(j["dimensions"]["n_mels"], 80);
}

TEST(CliInfo, CorruptFileFails) {
    TempDir dir;
    write_file(dir / "bad.gguf", "GGUF garbage garbage garbage");
    std::string out;
    EXPECT_NE(run_info(quoted((dir / "bad.gguf").string()), &out), 0) << out;
    EXPECT_NE(out.find("bad.gguf"), std::string::npos) << out;
    write_file(dir / "bad.safetensors", std::string("\x40\x00\x00\x00\x00\x00\x00\x00{", 9));
    EXPECT_NE(run_info(quoted((dir / "bad.safetensors").string()), &out), 0) << out;
    EXPECT_NE(out.find("bad.safetensors"), std::string::npos) << out;
    EXPECT_NE(run_info(quoted((dir / "missing").string()), &out), 0) << out;
    EXPECT_NE(out.find("missing"), std::string::npos) << out;
}

TEST(CliInfo, RealVocabGgufs) {
    for (const char* name : {"ggml-vocab-gpt-2.gguf", "ggml-vocab-qwen2.gguf"}) {
        const auto path = testing::assets_dir() / name;
        if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not fetched (scripts/setup.sh)";
        std::string out;
        ASSERT_EQ(run_info_json(path, &out), 0) << out;
        auto j = nlohmann::json::parse(out);
        EXPECT_EQ(j["tensors"], 0);
        EXPECT_GT(j["tokenizer_size"].get<int>(), 50000) << name;
    }
}

}  // namespace
}  // namespace parlance
