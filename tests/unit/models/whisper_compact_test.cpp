// A Whisper checkpoint with a compact vocabulary (tools/train's layout: 2048 BPE tokens, then
// the special tokens, then 1501 timestamps; 3558 in all). Its special-token ids come from
// generation_config.json and tokenizer.json; nothing may be derived from OpenAI's 51864 layout.
// Fixture: tests/fixtures/whisper/compact (tools/reference/compact_fixture.py; random weights).
#include <gtest/gtest.h>

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
    auto dir = tmp.path() / "model";
    std::filesystem::copy(testing::fixtures_dir() / "whisper" / "compact" / "model", dir);
    auto cfg = nlohmann::json::parse(testing::read_file(dir / "config.json"));
    cfg["vocab_size"] = 1000;
    testing::write_file(dir / "config.json", cfg.dump());
    try {
        WhisperModel::load(dir, *backend_);
        FAIL() << "loaded";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("vocab_size = 1000"), std::string::npos) << e.what();
    }
}

// generation_config's condition_on_prev_tokens (HF's name) sets whether windows are prompted with
// the text before them; absent, parlance prompts as OpenAI's transcribe does; not a boolean, the
// load fails naming the field.
TEST_F(CompactVocabulary, ConditionOnPreviousTextFromGenerationConfig) {
    EXPECT_TRUE(model_->tokens.condition_on_previous_text);
    testing::TempDir tmp;
    auto dir = tmp.path() / "model";
    std::filesystem::copy(testing::fixtures_dir() / "whisper" / "compact" / "model", dir);
    auto gen = nlohmann::json::parse(testing::read_file(dir / "generation_config.json"));
    gen["condition_on_prev_tokens"] = false;
    testing::write_file(dir / "generation_config.json", gen.dump());
    EXPECT_FALSE(WhisperModel::load(dir, *backend_)->tokens.condition_on_previous_text);
    gen["condition_on_prev_tokens"] = "no";
    testing::write_file(dir / "generation_config.json", gen.dump());
    try {
        WhisperModel::load(dir, *backend_);
        FAIL() << "loaded";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("condition_on_prev_tokens"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace parlance::whisper
