// Log-mel parity with transformers' WhisperFeatureExtractor: compares against the reference arrays in
// tests/fixtures/mel (written by tools/reference/mel_reference.py on the GPU machine).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "audio/mel.h"
#include "audio/wav.h"
#include "test_support.h"

namespace parlance {
namespace {

namespace fs = std::filesystem;
constexpr float kTolerance = 1e-4f;

std::vector<float> read_f32(const fs::path& path) {
    const std::string bytes = testing::read_file(path);
    std::vector<float> v(bytes.size() / sizeof(float));
    std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));  // little-endian host assumed
    return v;
}

TEST(MelParity, MatchesTransformersReference) {
    const fs::path dir = testing::fixtures_dir() / "mel";
    if (!fs::exists(dir)) {
        GTEST_SKIP() << dir << " does not exist yet: generate it on the GPU machine with "
                     << "`python3 tools/reference/mel_reference.py --audio-dir tests/fixtures/audio "
                        "--out tests/fixtures/mel` and commit it";
    }
    std::vector<fs::path> sidecars;
    for (const auto& e : fs::directory_iterator(dir)) {
        if (e.path().extension() == ".json") sidecars.push_back(e.path());
    }
    std::sort(sidecars.begin(), sidecars.end());
    ASSERT_FALSE(sidecars.empty()) << dir << " exists but holds no reference (*.json)";

    for (const auto& sidecar : sidecars) {
        SCOPED_TRACE(sidecar.filename().string());
        const auto meta = nlohmann::json::parse(testing::read_file(sidecar));
        const int n_mels = meta.at("feature_size").get<int>();
        const auto shape = meta.at("shape").get<std::vector<int>>();
        ASSERT_EQ(shape.size(), 2u);
        ASSERT_EQ(shape[0], n_mels);
        const int stored = shape[1];
        const auto ref = read_f32(dir / meta.at("file").get<std::string>());
        ASSERT_EQ(ref.size(), static_cast<size_t>(n_mels) * static_cast<size_t>(stored));

        const WavAudio wav = read_wav_file(testing::fixtures_dir() / "audio" / meta.at("source").get<std::string>());
        ASSERT_EQ(wav.channels, 1);
        ASSERT_EQ(wav.sample_rate, 16000);
        ASSERT_EQ(static_cast<int64_t>(wav.samples.size()), meta.at("n_samples").get<int64_t>());

        LogMelOptions options;
        options.pad_or_trim_to = meta.at("pad_or_trim_to").get<int64_t>();
        options.threads = 2;
        int frames = 0;
        const LogMel mel(n_mels);
        const auto got = mel.compute(wav.samples, &frames, options);
        ASSERT_EQ(frames, meta.at("total_frames").get<int>());
        ASSERT_LE(stored, frames);

        float max_diff = 0.0f;
        for (int m = 0; m < n_mels; ++m) {
            for (int f = 0; f < stored; ++f) {
                const float a = got[static_cast<size_t>(m) * frames + f];
                const float b = ref[static_cast<size_t>(m) * stored + f];
                max_diff = std::max(max_diff, std::fabs(a - b));
            }
        }
        EXPECT_LE(max_diff, kTolerance);
        std::printf("[ parity   ] %s: max |diff| = %.3g over %d x %d\n", sidecar.filename().c_str(), max_diff, n_mels, stored);

        // The clamp uses the max over all frames, and frames past the audio sit at the floor.
        const float got_max = *std::max_element(got.begin(), got.end());
        EXPECT_NEAR(got_max, meta.at("full_max").get<float>(), kTolerance);
        EXPECT_NEAR(*std::min_element(got.begin(), got.end()), meta.at("full_min").get<float>(), kTolerance);
        if (meta.contains("tail_frame")) {
            const auto tail = meta.at("tail_frame").get<std::vector<float>>();
            ASSERT_EQ(tail.size(), static_cast<size_t>(n_mels));
            for (int m = 0; m < n_mels; ++m) {
                EXPECT_NEAR(got[static_cast<size_t>(m) * frames + frames - 1], tail[static_cast<size_t>(m)], kTolerance);
            }
        }
    }
}

}  // namespace
}  // namespace parlance
