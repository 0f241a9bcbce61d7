// ModelFiles: HF directories (configs, architecture), single files, config errors.
#include "core/model_files.h"

#include "core/gguf_writer.h"
#include "core/safetensors_writer.h"
#include "core/whispercpp_writer.h"
#include "core_test_util.h"
#include "test_support.h"

namespace parlance {
namespace {

using testing::expect_error;
using testing::ramp;
using testing::TempDir;
using testing::write_file;

void write_hf_dir(const std::filesystem::path& dir) {
    write_file(dir / "config.json", R"({"model_type": "whisper", "d_model": 8, "architectures": ["WhisperForConditionalGeneration"]})");
    write_file(dir / "generation_config.json", R"({"max_length": 448})");
    write_file(dir / "tokenizer.json", R"({"model": {"vocab": {"a": 0}}})");
    write_safetensors(dir / "model.safetensors", {TensorData::from_f32("w", {2, 4}, ramp(8))});
}

TEST(ModelFiles, HfDirectory) {
    TempDir dir;
    write_hf_dir(dir.path());
    auto m = open_model_files(dir.path());
    EXPECT_TRUE(m.is_directory);
    EXPECT_EQ(m.architecture(), "whisper");
    EXPECT_EQ(m.config["d_model"], 8);
    EXPECT_EQ(m.generation_config["max_length"], 448);
    EXPECT_TRUE(m.preprocessor_config.is_null());
    EXPECT_EQ(m.tokenizer_json, dir / "tokenizer.json");
    ASSERT_TRUE(m.tensors);
    EXPECT_EQ(m.tensors->tensors().size(), 1u);
    EXPECT_EQ(m.files().size(), 4u);
    EXPECT_GT(m.bytes_on_disk(), m.tensors->bytes_on_disk());
}

TEST(ModelFiles, ArchitectureFallsBackToArchitecturesList) {
    TempDir dir;
    write_hf_dir(dir.path());
    write_file(dir / "config.json", R"({"architectures": ["Qwen3ForCausalLM"]})");
    EXPECT_EQ(open_model_files(dir.path()).architecture(), "Qwen3ForCausalLM");
}

TEST(ModelFiles, ConfigMissingOrInvalid) {
    TempDir dir;
    write_hf_dir(dir.path());
    std::filesystem::remove(dir / "config.json");
    expect_error([&] { open_model_files(dir.path()); }, ErrorKind::InvalidModel, {"config.json", "missing"});
    write_file(dir / "config.json", "{ not json");
    expect_error([&] { open_model_files(dir.path()); }, ErrorKind::InvalidModel, {"config.json", "not valid JSON"});
    write_file(dir / "config.json", "{}");
    write_file(dir / "generation_config.json", "[1,");
    expect_error([&] { open_model_files(dir.path()); }, ErrorKind::InvalidModel, {"generation_config.json"});
    expect_error([&] { open_model_files(dir / "nothing"); }, ErrorKind::NotFound, {"nothing"});
}

TEST(ModelFiles, SingleFiles) {
    TempDir dir;
    GgufWriter w;
    w.set_str("general.architecture", "qwen3");
    w.write(dir / "m.gguf");
    auto g = open_model_files(dir / "m.gguf");
    EXPECT_FALSE(g.is_directory);
    EXPECT_EQ(g.architecture(), "qwen3");
    EXPECT_TRUE(g.config.is_null());

    WhisperCppContents c;
    c.vocab = {"a"};
    write_whispercpp(dir / "w.bin", c);
    EXPECT_EQ(open_model_files(dir / "w.bin").architecture(), "whisper");
}

}  // namespace
}  // namespace parlance
