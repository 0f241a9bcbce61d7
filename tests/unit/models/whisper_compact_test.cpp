// A Whisper checkpoint with a compact vocabulary (tools/train's layout: 2048 BPE tokens, then
// the special tokens, then 1501 timestamps; 3558 in all). Its special-token ids come from
// generation_config.json and tokenizer.json; nothing may be derived from OpenAI's 51864 layout.
// Fixture: tests/fixtures/whisper/compact (tools/reference/compact_fixture.py; random weights).
#include <gtest/gtest.h>

#include <functional>

#include "audio/wav.h"
#include "core/error.h"
#include "models/whisper/model.h"
#include "models/whisper/transcriber.h"
#include "test_support.h"

namespace parlance::whisper {
namespace {

class CompactVocabulary : public ::testing::Test {
protected:
    void SetUp() override {
        BackendOptions bo;
        bo.threads = 2;
        backend_ = std::make_unique<Backend>(bo);
        model_ = WhisperModel::load(testing::fixtures_dir() / "whisper" / "compact" / "model", *backend_);
        runner_ = std::make_unique<WhisperRunner>(model_->config, *model_->weights, *backend_, 4);
        pcm_ = read_wav_file(testing::fixtures_dir() / "audio" / "jfk.wav").samples;
    }
    // A copy of the fixture in `tmp` with one of its JSON files edited; the copy's folder.
    std::filesystem::path edited_copy(const testing::TempDir& tmp, const char* file,
                                      const std::function<void(nlohmann::json&)>& edit) {
        auto dir = tmp.path() / "model";
        if (!std::filesystem::exists(dir))
            std::filesystem::copy(testing::fixtures_dir() / "whisper" / "compact" / "model", dir);
        auto j = nlohmann::json::parse(testing::read_file(dir / file));
        edit(j);
        testing::write_file(dir / file, j.dump());
        return dir;
    }
    // The message of the error loading `dir` throws ("" if it loads).
    std::string load_error(const std::filesystem::path& dir) {
        try {
            WhisperModel::load(dir, *backend_);
        } catch (const Error& e) {
            return e.what();
        }
        return "";
    }
    std::unique_ptr<Backend> backend_;
    std::unique_ptr<WhisperModel> model_;
    std::unique_ptr<WhisperRunner> runner_;
    std::vector<float> pcm_;
};

TEST_F(CompactVocabulary, SpecialTokensComeFromTheFilesNotTheLayout) {
    const SpecialTokens& t = model_->tokens;
    EXPECT_EQ(model_->config.vocab_size, 3558);
    EXPECT_EQ(t.eot, 2048);
    EXPECT_EQ(t.sot, 2049);
    EXPECT_EQ(t.translate, 2051);
    EXPECT_EQ(t.transcribe, 2052);
    EXPECT_EQ(t.startoflm, 2053);
    EXPECT_EQ(t.startofprev, 2054);
    EXPECT_EQ(t.nospeech, 2055);
    EXPECT_EQ(t.notimestamps, 2056);
    EXPECT_EQ(t.timestamp_begin, 2057);
    EXPECT_TRUE(t.multilingual);
    ASSERT_EQ(t.languages.size(), 1u);
    EXPECT_EQ(t.languages.at("en"), 2050);
    EXPECT_EQ(model_->tokenizer->token_to_id("<|30.00|>"), 3557);
}

TEST_F(CompactVocabulary, TranscribesWithPromptTimestampsAndTranslate) {
    TranscribeOptions o;
    o.max_new_tokens = 12;
    o.temperatures = {0.0f};
    o.initial_prompt = "A prompt goes after startofprev.";
    for (const char* task : {"transcribe", "translate"}) {
        o.task = task;
        Transcript r = transcribe(*model_, *runner_, pcm_, o);
        EXPECT_EQ(r.language, "en");
        for (const Segment& s : r.segments)
            for (int id : s.tokens) EXPECT_LT(id, model_->config.vocab_size);
    }
}

TEST_F(CompactVocabulary, TooSmallForTheTimestampsIsRefused) {
    testing::TempDir tmp;
    auto dir = edited_copy(tmp, "config.json", [](nlohmann::json& c) { c["vocab_size"] = 1000; });
    const std::string error = load_error(dir);
    ASSERT_FALSE(error.empty()) << "loaded";
    EXPECT_NE(error.find("vocab_size = 1000"), std::string::npos) << error;
}

// generation_config's condition_on_prev_tokens (HF's name) sets whether windows are prompted with
// the text before them; absent, parlance prompts as OpenAI's transcribe does; not a boolean, the
// load fails naming the field.
TEST_F(CompactVocabulary, ConditionOnPreviousTextFromGenerationConfig) {
    EXPECT_TRUE(model_->tokens.condition_on_previous_text);
    testing::TempDir tmp;
    auto dir = edited_copy(tmp, "generation_config.json",
                           [](nlohmann::json& g) { g["condition_on_prev_tokens"] = false; });
    EXPECT_FALSE(WhisperModel::load(dir, *backend_)->tokens.condition_on_previous_text);
    edited_copy(tmp, "generation_config.json", [](nlohmann::json& g) { g["condition_on_prev_tokens"] = "no"; });
    const std::string error = load_error(dir);
    ASSERT_FALSE(error.empty()) << "loaded";
    EXPECT_NE(error.find("condition_on_prev_tokens"), std::string::npos) << error;
}

// generation_config's num_beams is the default beam size (the engine's tests check that it is
// used); absent, 1; not an integer from 1 to kMaxBeams, the load fails naming the field.
TEST_F(CompactVocabulary, NumBeamsFromGenerationConfig) {
    EXPECT_EQ(model_->tokens.num_beams, 1);
    testing::TempDir tmp;
    auto dir =
        edited_copy(tmp, "generation_config.json", [](nlohmann::json& g) { g["num_beams"] = 5; });
    EXPECT_EQ(WhisperModel::load(dir, *backend_)->tokens.num_beams, 5);
    for (const char* bad : {"\"five\"", "0", "17", "2.5"}) {
        edited_copy(tmp, "generation_config.json",
                    [&](nlohmann::json& g) { g["num_beams"] = nlohmann::json::parse(bad); });
        const std::string error = load_error(dir);
        EXPECT_NE(error.find("num_beams"), std::string::npos) << bad << ": " << error;
    }
}

}  // namespace
}  // namespace parlance::whisper
