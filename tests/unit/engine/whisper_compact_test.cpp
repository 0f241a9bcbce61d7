// A Whisper checkpoint with a compact vocabulary (tools/train's layout: 2048 BPE tokens, then
// the special tokens, then 1501 timestamps; 3558 in all). Its special-token ids come from
// generation_config.json and tokenizer.json; nothing may be derived from OpenAI's 51864 layout.
// Fixture: tests/fixtures/whisper/compact (tools/reference/compact_fixture.py; random weights).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <utility>

#include "audio/wav.h"
#include "core/error.h"
#include "models/whisper/convert.h"
#include "models/whisper/model.h"
#include "models/whisper/transcriber.h"
#include "test_support.h"
#include "whisper_on_engine.h"

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
        Transcript r = testing::transcribe_on_engine(*model_, *runner_, pcm_, o);
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
    auto dir =
        edited_copy(tmp, "generation_config.json", [](nlohmann::json& g) { g["condition_on_prev_tokens"] = false; });
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
    auto dir = edited_copy(tmp, "generation_config.json", [](nlohmann::json& g) { g["num_beams"] = 5; });
    EXPECT_EQ(WhisperModel::load(dir, *backend_)->tokens.num_beams, 5);
    for (const char* bad : {"\"five\"", "0", "17", "2.5"}) {
        edited_copy(tmp, "generation_config.json",
                    [&](nlohmann::json& g) { g["num_beams"] = nlohmann::json::parse(bad); });
        const std::string error = load_error(dir);
        EXPECT_NE(error.find("num_beams"), std::string::npos) << bad << ": " << error;
    }
}

// `parlance convert --openai-ids` (the whisper.cpp anchor of bench/serve_bench.sh): the compact
// model written at OpenAI's multilingual ids computes the same logits at the moved ids, and
// exactly 0 at the ids it does not have (which whisper.cpp must suppress: unused_text_ids).
TEST_F(CompactVocabulary, ConvertedAtOpenAisIdsItComputesTheSameLogits) {
    testing::TempDir tmp;
    const auto bin = tmp / "openai-ids.bin";
    WhisperCppConvertOptions o;
    o.dtype = GGML_TYPE_F32;
    o.openai_ids = true;
    const auto r = convert_to_whispercpp(testing::fixtures_dir() / "whisper" / "compact" / "model", bin, o);
    const SpecialTokens& ours = model_->tokens;
    EXPECT_EQ(r.unused_text_ids, (std::pair<int, int>{ours.eot, 50257}));

    auto cpp = WhisperModel::load(bin, *backend_);
    ASSERT_EQ(cpp->config.vocab_size, kOpenAiVocabMultilingual);
    const SpecialTokens& t = cpp->tokens;
    EXPECT_EQ(t.eot, 50257);
    EXPECT_EQ(t.sot, 50258);
    EXPECT_EQ(t.language_token("en"), 50259);
    EXPECT_EQ(t.transcribe, 50359);
    EXPECT_EQ(t.notimestamps, 50363);
    EXPECT_EQ(t.timestamp_begin, 50364);
    // Where each of the compact model's ids went.
    auto moved = [&](int id) {
        if (id < ours.eot) return id;
        if (id >= ours.timestamp_begin) return t.timestamp_begin + (id - ours.timestamp_begin);
        for (auto [a, b] : {std::pair{ours.eot, t.eot},
                            {ours.sot, t.sot},
                            {ours.translate, t.translate},
                            {ours.transcribe, t.transcribe},
                            {ours.startoflm, t.startoflm},
                            {ours.startofprev, t.startofprev},
                            {ours.nospeech, t.nospeech},
                            {ours.notimestamps, t.notimestamps},
                            {ours.languages.at("en"), t.language_token("en")}})
            if (a == id) return b;
        ADD_FAILURE() << "token " << id << " has no place";
        return 0;
    };

    WhisperRunner runner(cpp->config, *cpp->weights, *backend_, 1);
    CrossKv a(model_->config, *backend_), b(cpp->config, *backend_);
    int frames = 0;
    std::vector<std::vector<float>> mel_a{model_->mel->compute(pcm_, &frames)}, mel_b{cpp->mel->compute(pcm_, &frames)};
    CrossKv* ca[] = {&a};
    CrossKv* cb[] = {&b};
    runner_->encode(mel_a, ca);
    runner.encode(mel_b, cb);
    std::vector<int> prompt = {ours.sot, ours.languages.at("en"), ours.transcribe, ours.notimestamps};
    int n_past = 0;
    for (int next : {300, 1200, 45}) {
        std::vector<int> mapped;
        for (int id : prompt) mapped.push_back(moved(id));
        const DecodeItem ia{0, &a, prompt, n_past}, ib{0, &b, mapped, n_past};
        const std::vector<float> la = runner_->decode(std::span<const DecodeItem>(&ia, 1))[0];
        const std::vector<float> lb = runner.decode(std::span<const DecodeItem>(&ib, 1))[0];
        std::vector<bool> used(lb.size(), false);
        for (int id = 0; id < model_->config.vocab_size; ++id) {
            ASSERT_NEAR(lb[moved(id)], la[id], 1e-4f * (1.0f + std::abs(la[id]))) << "token " << id;
            used[moved(id)] = true;
        }
        for (int id = r.unused_text_ids.first; id < r.unused_text_ids.second; ++id) ASSERT_EQ(lb[id], 0.0f) << id;
        for (size_t id = 0; id < lb.size(); ++id) {
            if (!used[id]) {
                ASSERT_EQ(lb[id], 0.0f) << id;
            }
        }
        n_past += static_cast<int>(prompt.size());
        prompt = {next};
    }
    // A model in OpenAI's layout already is refused.
    try {
        convert_to_whispercpp(testing::fixtures_dir() / "whisper" / "tiny-multi" / "model", tmp / "x.bin", o);
        ADD_FAILURE() << "converted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("OpenAI's layout already"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace parlance::whisper
