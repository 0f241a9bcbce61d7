// --audio-window: a Whisper model loaded with windows shorter than its own 30 s must be exactly
// the checkpoint whose encoder position table is cut to those positions (what transformers runs
// for max_source_positions = S x 50): same tokens, same log-probabilities, on audio longer than
// the window (two windows) and shorter. Values outside 1 s .. the model's window, or off the
// 20 ms grid, and models it does not apply to are refused by name.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "audio/wav.h"
#include "core/error.h"
#include "core/safetensors_writer.h"
#include "core/tensor_store.h"
#include "models/registry.h"
#include "models/whisper/model.h"
#include "models/whisper/transcriber.h"
#include "qwen3_fixture.h"
#include "test_support.h"
#include "whisper_on_engine.h"

namespace parlance::whisper {
namespace {

namespace fs = std::filesystem;

class WhisperAudioWindow : public ::testing::Test {
protected:
    void SetUp() override {
        BackendOptions bo;
        bo.threads = 2;
        backend_ = std::make_unique<Backend>(bo);
    }

    // tiny-en with max_source_positions = positions and the encoder's table cut to its first rows.
    fs::path cut_checkpoint(int positions) {
        const fs::path dir = tmp_.path() / ("cut" + std::to_string(positions));
        fs::copy(fixture_, dir);
        auto config = nlohmann::json::parse(testing::read_file(dir / "config.json"));
        config["max_source_positions"] = positions;
        testing::write_file(dir / "config.json", config.dump());
        std::vector<TensorData> tensors;
        {
            auto store = TensorStore::open(dir / "model.safetensors");
            for (const TensorInfo& t : store->tensors()) {
                TensorData d{t.name, t.type, t.shape, std::vector<uint8_t>(t.data, t.data + t.nbytes)};
                if (t.name == "model.encoder.embed_positions.weight") {
                    d.shape[0] = positions;
                    d.bytes.resize(d.bytes.size() / t.shape[0] * positions);
                }
                tensors.push_back(std::move(d));
            }
        }
        write_safetensors(dir / "model.safetensors", tensors);
        return dir;
    }

    Transcript run(const WhisperModel& model, const std::vector<float>& pcm) {
        WhisperRunner runner(model.config, *model.weights, *backend_, 1);
        TranscribeOptions o;
        o.temperatures = {0.0};
        o.max_new_tokens = 24;
        return testing::transcribe_on_engine(model, runner, pcm, o);
    }

    std::string load_error(const fs::path& dir, double seconds) {
        WeightOptions wo;
        wo.audio_window_seconds = seconds;
        try {
            WhisperModel::load(dir, *backend_, wo);
        } catch (const Error& e) {
            EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(ErrorKind::InvalidArgument)) << e.what();
            return e.what();
        }
        ADD_FAILURE() << "--audio-window " << seconds << " accepted";
        return "";
    }

    testing::TempDir tmp_;
    std::unique_ptr<Backend> backend_;
    const fs::path fixture_ = testing::fixtures_dir() / "whisper" / "tiny-en" / "model";
};

TEST_F(WhisperAudioWindow, IsTheCheckpointWithItsEncoderPositionsCut) {
    WeightOptions wo;
    wo.audio_window_seconds = 10;
    auto windowed = WhisperModel::load(fixture_, *backend_, wo);
    auto cut = WhisperModel::load(cut_checkpoint(500), *backend_);
    auto full = WhisperModel::load(fixture_, *backend_);
    EXPECT_EQ(windowed->config.max_source_positions, 500);
    EXPECT_EQ(windowed->config.n_audio_samples(), 160000);

    // jfk.wav is 11 s: two 10 s windows. The second clip is a 4.4 s one: one window.
    for (const char* clip : {"jfk.wav", "espeak_quiet_loud.wav"}) {
        SCOPED_TRACE(clip);
        const auto pcm = read_wav_file(testing::fixtures_dir() / "audio" / clip).samples;
        const Transcript a = run(*windowed, pcm), b = run(*cut, pcm), c = run(*full, pcm);
        ASSERT_EQ(a.segments.size(), b.segments.size());
        for (size_t i = 0; i < a.segments.size(); ++i) {
            EXPECT_EQ(a.segments[i].tokens, b.segments[i].tokens);
            EXPECT_EQ(a.segments[i].avg_logprob, b.segments[i].avg_logprob);  // bit for bit
            EXPECT_EQ(a.segments[i].start, b.segments[i].start);
            EXPECT_EQ(a.segments[i].end, b.segments[i].end);
        }
        // And the window is used: the 30 s model's first segment decodes other log-probabilities.
        ASSERT_FALSE(c.segments.empty());
        EXPECT_NE(a.segments[0].avg_logprob, c.segments[0].avg_logprob);
    }
}

TEST_F(WhisperAudioWindow, OutsideTheModelsWindowOrOffTheGridIsRefused) {
    EXPECT_NE(load_error(fixture_, 45).find("--audio-window 45: a window of 1 to 30 seconds"), std::string::npos);
    EXPECT_NE(load_error(fixture_, 0.5).find("--audio-window 0.5"), std::string::npos);
    EXPECT_NE(load_error(fixture_, 10.013).find("in steps of 0.02 s"), std::string::npos);
}

TEST_F(WhisperAudioWindow, AudioLanguageModelsRefuseIt) {
    SpeechModelOptions so;
    so.audio_window_seconds = 10;
    try {
        load_audio_language_model(testing::write_qwen3_asr("tiny", tmp_.path() / "asr"), *backend_, so);
        FAIL() << "accepted";
    } catch (const Error& e) {
        EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(ErrorKind::InvalidArgument));
        EXPECT_NE(std::string(e.what()).find("--audio-window applies to Whisper models"), std::string::npos)
            << e.what();
    }
}

}  // namespace
}  // namespace parlance::whisper
