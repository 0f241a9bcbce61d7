// Black-box tests of `parlance vad`: segments as text and JSON, the per-window probabilities
// (--frames) equal to onnxruntime's reference, and its refusals.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <sstream>

#include "test_support.h"

namespace {

using namespace parlance::testing;

std::string vad(const std::string& args, int* rc = nullptr) {
    std::string out;
    const int r = run_command("env PARLANCE_VAD_MODEL=" + quoted((assets_dir() / "silero_vad_v5.onnx").string()) + " " +
                                  quoted(parlance_binary().string()) + " vad " + args + " 2>&1",
                              &out);
    if (rc) *rc = r;
    return out;
}

TEST(Vad, SegmentsAsTextAndJson) {
    const std::string jfk = quoted((fixtures_dir() / "audio" / "jfk.wav").string());
    int rc = 0;
    const nlohmann::json j = nlohmann::json::parse(vad(jfk + " --format json", &rc));
    ASSERT_EQ(rc, 0);
    EXPECT_NEAR(j["duration"].get<double>(), 11.0, 0.01);
    ASSERT_GE(j["segments"].size(), 2u);  // JFK pauses between phrases
    double last = 0.0;
    for (const auto& s : j["segments"]) {
        EXPECT_GE(s["start"].get<double>(), last);
        EXPECT_GT(s["end"].get<double>(), s["start"].get<double>());
        last = s["end"];
    }
    EXPECT_LE(last, 11.0);
    // Text: one "start<TAB>end" line per segment, the same segments.
    std::istringstream text(vad(jfk));
    size_t lines = 0;
    for (std::string line; std::getline(text, line);) {
        double a = 0, b = 0;
        ASSERT_EQ(std::sscanf(line.c_str(), "%lf\t%lf", &a, &b), 2) << line;
        EXPECT_NEAR(a, j["segments"][lines]["start"].get<double>(), 1e-3);
        ++lines;
    }
    EXPECT_EQ(lines, j["segments"].size());
    // A higher threshold finds no more speech than the default.
    const nlohmann::json strict = nlohmann::json::parse(vad(jfk + " --format json --threshold 0.95"));
    double speech = 0, strict_speech = 0;
    for (const auto& s : j["segments"]) speech += s["end"].get<double>() - s["start"].get<double>();
    for (const auto& s : strict["segments"]) strict_speech += s["end"].get<double>() - s["start"].get<double>();
    EXPECT_LT(strict_speech, speech);
}

TEST(Vad, FramesAreOnnxruntimesProbabilities) {
    const nlohmann::json ref = nlohmann::json::parse(read_file(fixtures_dir() / "silero_vad" / "reference.json"));
    const std::vector<float> want = ref["clips"]["jfk.wav"]["probabilities"];
    const nlohmann::json got =
        nlohmann::json::parse(vad(quoted((fixtures_dir() / "audio" / "jfk.wav").string()) + " --frames"));
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i].get<double>(), want[i], 1e-4) << i;
}

TEST(Vad, RefusesWhatItCannotDo) {
    const std::string jfk = quoted((fixtures_dir() / "audio" / "jfk.wav").string());
    int rc = 0;
    EXPECT_NE(vad(jfk + " --sample-rate 44100", &rc).find("16000 or 8000"), std::string::npos);
    EXPECT_NE(rc, 0);
    EXPECT_NE(vad(jfk + " --format xml", &rc).find("--format"), std::string::npos);
    EXPECT_NE(rc, 0);
    EXPECT_NE(vad(jfk + " --vad-model /nonexistent.onnx", &rc).find("/nonexistent.onnx"), std::string::npos);
    EXPECT_NE(rc, 0);
}

}  // namespace
