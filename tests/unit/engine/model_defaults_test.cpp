// The engine decodes a request that does not choose a beam size with the model's default
// (generation_config.json num_beams, as transformers' generate() reads it), and reserves the
// cache slots for that many beams: the server's clients cannot choose one through the OpenAI API.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "audio/wav.h"
#include "core/error.h"
#include "engine/generation_decode_service.h"
#include "models/whisper/engine.h"
#include "models/whisper/model.h"
#include "models/whisper/transcriber.h"
#include "test_support.h"
#include "whisper_on_engine.h"

namespace parlance {
namespace {

class ModelDefaults : public ::testing::Test {
protected:
    void SetUp() override {
        BackendOptions bo;
        bo.threads = 2;
        backend_ = std::make_unique<Backend>(bo);
        // The compact-vocabulary fixture (random weights) with num_beams 2 in its
        // generation_config.
        dir_ = tmp_.path() / "model";
        std::filesystem::copy(testing::fixtures_dir() / "whisper" / "compact" / "model", dir_);
        auto g = nlohmann::json::parse(testing::read_file(dir_ / "generation_config.json"));
        g["num_beams"] = 2;
        testing::write_file(dir_ / "generation_config.json", g.dump());
        model_ = whisper::WhisperModel::load(dir_, *backend_);
        auto pcm = read_wav_file(testing::fixtures_dir() / "audio" / "jfk.wav").samples;
        clip_.assign(pcm.begin(), pcm.begin() + 16000 * 3);
    }
    TranscriptionRequest request(std::optional<int> beams) const {
        TranscriptionRequest r;
        r.pcm = clip_;
        r.options.temperatures = {0.0f};
        r.options.max_new_tokens = 12;
        r.options.beam_size = beams;
        return r;
    }
    testing::TempDir tmp_;
    std::filesystem::path dir_;
    std::unique_ptr<Backend> backend_;
    std::unique_ptr<whisper::WhisperModel> model_;
    std::vector<float> clip_;
    Logger log_{LogLevel::Error};
};

TEST_F(ModelDefaults, UnsetBeamSizeTakesTheModelsSlots) {
    ASSERT_EQ(model_->tokens.num_beams, 2);
    EngineOptions eo;
    eo.cache_slots = 2;  // one greedy request; two beams need four
    eo.decode_service = generation_decode_service_factory();
    whisper::WhisperEngine engine(*model_, *backend_, eo, log_);
    try {
        engine.submit(request(std::nullopt));
        ADD_FAILURE() << "a request at the model's 2 beams was accepted with 2 cache slots";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
        EXPECT_NE(std::string(e.what()).find("beam_size 2"), std::string::npos) << e.what();
    }
    // An explicit beam size wins over the model's.
    EXPECT_FALSE(engine.submit(request(1)).get().text.empty());
}

TEST_F(ModelDefaults, UnsetBeamSizeDecodesLikeTheExplicitDefault) {
    EngineOptions eo;
    eo.cache_slots = 4;
    eo.decode_service = generation_decode_service_factory();
    whisper::WhisperEngine engine(*model_, *backend_, eo, log_);
    const Transcript by_default = engine.submit(request(std::nullopt)).get();
    const Transcript explicit_two = engine.submit(request(2)).get();
    EXPECT_EQ(by_default.text, explicit_two.text);
    ASSERT_EQ(by_default.segments.size(), explicit_two.segments.size());
    for (size_t i = 0; i < by_default.segments.size(); ++i)
        EXPECT_EQ(by_default.segments[i].tokens, explicit_two.segments[i].tokens) << i;
    // The one-request path (`parlance transcribe`) resolves the same way.
    whisper::WhisperRunner runner(model_->config, *model_->weights, *backend_, 1);
    EXPECT_EQ(testing::transcribe_on_engine(*model_, runner, clip_, request(std::nullopt).options).text,
              by_default.text);
}

}  // namespace
}  // namespace parlance
