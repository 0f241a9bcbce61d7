// Qwen3-ASR's audio path against transformers 5.17 (tests/fixtures/qwen3_asr, made by
// tools/reference/qwen3_asr_reference.py): the features of three real clips (one of several
// attention windows, one whose last chunk is partial, one under the 0.5 s minimum), the encoder's
// output and the projected audio embeddings, and the load-time refusals of a bad config.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "audio/wav.h"
#include "core/backend.h"
#include "core/error.h"
#include "core/model_files.h"
#include "models/qwen3_asr/config.h"
#include "models/qwen3_asr/encoder.h"
#include "models/qwen3_asr/features.h"
#include "qwen3_fixture.h"
#include "test_support.h"

namespace parlance::testing {
namespace {

using nlohmann::json;

json read_json_file(const std::filesystem::path& p) {
    return json::parse(read_file(p));
}
using qwen3_asr::AudioEncoder;
using qwen3_asr::AudioEncoderConfig;
using qwen3_asr::Qwen3AsrConfig;

std::vector<float> clip_samples(const json& c) {
    std::vector<float> pcm = read_wav_file(fixtures_dir() / "audio" / c["file"].get<std::string>()).samples;
    const size_t first = c["first_sample"].get<size_t>(), repeats = c.value("repeats", 1);
    const size_t n = c["samples"].get<size_t>() / repeats;
    std::vector<float> out;
    for (size_t r = 0; r < repeats; ++r) out.insert(out.end(), pcm.begin() + first, pcm.begin() + first + n);
    return out;
}

// Relative L2 error ||a - b|| / ||b|| over the reference's elements (every stride-th of a): the
// encoder metric of every architecture's parity (parlance parity's "encoder" row).
double rel_error(const std::vector<float>& a, const std::vector<double>& b, size_t stride = 1) {
    EXPECT_EQ((a.size() + stride - 1) / stride, b.size());
    double d = 0, m = 0;
    for (size_t i = 0; i < b.size() && i * stride < a.size(); ++i) {
        d += (a[i * stride] - b[i]) * (a[i * stride] - b[i]);
        m += b[i] * b[i];
    }
    return std::sqrt(d / m);
}

TEST(Qwen3AsrConfig, TokenCountsFollowTheConvolutions) {
    EXPECT_EQ(AudioEncoderConfig::chunk_tokens(100), 13);
    EXPECT_EQ(AudioEncoderConfig::chunk_tokens(37), 5);
    EXPECT_EQ(AudioEncoderConfig::chunk_tokens(1), 1);
    EXPECT_EQ(AudioEncoderConfig::chunk_tokens(0), 0);
    const Qwen3AsrConfig c =
        Qwen3AsrConfig::parse(read_json_file(fixtures_dir() / "qwen3_asr/tiny/config.json"), "config.json");
    EXPECT_EQ(c.audio.clip_tokens(1100), 143);  // 11 full chunks
    EXPECT_EQ(c.audio.clip_tokens(237), 31);    // 2 full + 37 frames
    EXPECT_EQ(c.audio.conv_freq(), 16);
    const json ref = qwen3_asr_reference("tiny");  // a named copy: the loop must not outlive it
    for (const json& cs : ref["cases"])
        EXPECT_EQ(c.audio.clip_tokens(cs["valid_frames"]), cs["audio_tokens"]) << cs["name"];
}

TEST(Qwen3AsrConfig, RefusalsNameTheField) {
    const json good = read_json_file(fixtures_dir() / "qwen3_asr/tiny/config.json");
    auto refused = [&](const json& patch, const std::string& what) {
        json c = good;
        c.merge_patch(patch);
        try {
            Qwen3AsrConfig::parse(c, "config.json");
            ADD_FAILURE() << "accepted: " << patch.dump();
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
        }
    };
    refused({{"audio_config", {{"n_window_infer", 750}}}}, "n_window_infer 750");
    refused({{"audio_config", {{"output_dim", 24}}}}, "output_dim 24");
    refused({{"audio_token_id", 200000}}, "audio_token_id 200000");
    refused({{"audio_config", {{"encoder_layers", nullptr}}}}, "encoder_layers");
    refused({{"thinker_config", json::object()}}, "thinker_config");
}

class Qwen3AsrAudio : public ::testing::TestWithParam<std::string> {};

// A fixture's checkpoint written, its audio encoder on the CPU, and its transformers reference.
struct EncoderFixture {
    explicit EncoderFixture(const std::string& name)
        : files(open_model_files(write_qwen3_asr(name, dir.path()))),
          cfg(Qwen3AsrConfig::parse(files.config, files.root / "config.json")),
          enc(cfg.audio, *files.tensors, backend, GGML_TYPE_COUNT),
          mel(cfg.audio.num_mel_bins),
          ref(qwen3_asr_reference(name)) {}
    TempDir dir;
    ModelFiles files;
    Qwen3AsrConfig cfg;
    Backend backend{BackendOptions{"cpu", 2, true, false}};
    AudioEncoder enc;
    LogMel mel;
    json ref;
};

TEST_P(Qwen3AsrAudio, FeaturesEncoderAndEmbeddingsMatchTransformers) {
    EncoderFixture fx(GetParam());
    const Qwen3AsrConfig& cfg = fx.cfg;
    AudioEncoder& enc = fx.enc;
    const LogMel& mel = fx.mel;
    const json& ref = fx.ref;
    const int stride = ref["feature_stride"];
    const size_t every = ref["array_stride"];
    for (const json& c : ref["cases"]) {
        SCOPED_TRACE(c["name"].get<std::string>());
        const qwen3_asr::Features f = qwen3_asr::compute_features(mel, clip_samples(c), cfg.audio.chunk_frames());
        ASSERT_EQ(cfg.audio.num_mel_bins, c["features_shape"][0].get<int>());
        ASSERT_EQ(f.frames, c["features_shape"][1].get<int>());
        ASSERT_EQ(f.valid_frames, c["valid_frames"].get<int>());
        const auto strided = c["features_strided"].get<std::vector<double>>();
        double worst = 0;
        for (size_t i = 0; i < strided.size(); ++i) worst = std::max(worst, std::abs(f.mel[i * stride] - strided[i]));
        EXPECT_LT(worst, 1e-4) << "features";
        if (std::getenv("PARLANCE_DEBUG_LOGITS")) std::fprintf(stderr, "features: max abs diff %.3g\n", worst);

        // End to end: our features through our encoder. The random-weight encoder amplifies its
        // input's noise (1e-5 of noise on these features moves its output by 2e-4 (tiny) to 6e-4
        // (layout-0.6b) in relative L2, measured), so the residual below is the features'
        // float32 noise, not the encoder's: transformers' own float32 run is 1e-6 from float64.
        std::vector<float> hidden;
        const std::vector<float> emb = enc.encode(f, &hidden);
        ASSERT_EQ(static_cast<int>(hidden.size()), c["audio_tokens"].get<int>() * cfg.audio.d_model);
        EXPECT_LT(rel_error(hidden, c["encoder_f64"].get<std::vector<double>>(), every), 1e-3) << "encoder";
        EXPECT_LT(rel_error(emb, c["audio_embeddings_f64"].get<std::vector<double>>(), every), 1e-3) << "embeddings";
        if (std::getenv("PARLANCE_DEBUG_LOGITS"))
            std::fprintf(stderr, "%s: encoder %.3g, embeddings %.3g\n", c["name"].get<std::string>().c_str(),
                         rel_error(hidden, c["encoder_f64"].get<std::vector<double>>(), every),
                         rel_error(emb, c["audio_embeddings_f64"].get<std::vector<double>>(), every));
    }
}

// The server's encoder passes batched across requests (serve --encode-batch): the three clips in
// one graph — several windows, a partial last chunk, and one under a chunk whose window is
// narrower than the others' (its windows padded to theirs) — each give what they give alone, and
// transformers' embeddings.
TEST_P(Qwen3AsrAudio, ClipsEncodedTogetherMatchEachAlone) {
    EncoderFixture fx(GetParam());
    const Qwen3AsrConfig& cfg = fx.cfg;
    AudioEncoder& enc = fx.enc;
    const LogMel& mel = fx.mel;
    const json& ref = fx.ref;
    std::vector<qwen3_asr::Features> f;
    for (const json& c : ref["cases"])
        f.push_back(qwen3_asr::compute_features(mel, clip_samples(c), cfg.audio.chunk_frames()));
    ASSERT_GE(f.size(), 3u);
    std::vector<const qwen3_asr::Features*> all;
    for (const auto& x : f) all.push_back(&x);
    const std::vector<std::vector<float>> together = enc.encode_batch(all);
    ASSERT_EQ(together.size(), f.size());
    const size_t every = ref["array_stride"];
    for (size_t i = 0; i < f.size(); ++i) {
        const json& c = ref["cases"][i];
        SCOPED_TRACE(c["name"].get<std::string>());
        const std::vector<float> alone = enc.encode(f[i]);
        ASSERT_EQ(together[i].size(), alone.size());
        double d = 0, m = 0;
        for (size_t k = 0; k < alone.size(); ++k) {
            d += (together[i][k] - alone[k]) * (together[i][k] - alone[k]);
            m += alone[k] * alone[k];
        }
        EXPECT_LT(std::sqrt(d / m), 1e-6) << "batched vs alone";
        EXPECT_LT(rel_error(together[i], c["audio_embeddings_f64"].get<std::vector<double>>(), every), 1e-3);
    }
    EXPECT_TRUE(enc.encode_batch({}).empty());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Qwen3AsrAudio, ::testing::Values("tiny", "layout-0.6b"), [](const auto& info) {
    return info.param == "tiny" ? std::string("tiny") : std::string("layout_06b");
});

}  // namespace
}  // namespace parlance::testing
