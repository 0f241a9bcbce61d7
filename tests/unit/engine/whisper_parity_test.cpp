// Golden tests: our Whisper on ggml against transformers 5.17 on three random-init checkpoints
// (tests/fixtures/whisper, made by tools/reference/whisper_reference.py): encoder relative error
// <= 1e-3 at f32, first-step logits, identical greedy, beam and timestamp token ids, and token
// timestamps from cross-attention DTW identical to transformers' (word_timestamps rows). The
// decodes run on the generation engine, as every transcription's do.
#include <gtest/gtest.h>

#include "engine/generation_decode_service.h"
#include "models/whisper/parity.h"
#include "test_support.h"

namespace {

using parlance::whisper::ParityOptions;
using parlance::whisper::run_parity;

class WhisperParity : public ::testing::TestWithParam<const char*> {};

TEST_P(WhisperParity, MatchesTransformers) {
    auto dir = parlance::testing::fixtures_dir() / "whisper" / GetParam();
    ASSERT_TRUE(std::filesystem::exists(dir / "reference.json")) << dir;
    ParityOptions o;
    o.backend.threads = 2;
    auto report = run_parity(dir, o, parlance::generation_decode_service_factory());
    int checks = 0, word_checks = 0;
    for (const auto& row : report.rows) {
        ++checks;
        word_checks += row.check.rfind("word_timestamps", 0) == 0;
        EXPECT_TRUE(row.pass) << row.clip << " " << row.check << ": " << row.detail
                              << (row.near_tie ? " (reference margin < 1e-3 at that step)" : "");
    }
    // Every clip must contribute encoder, first-step, five decoding and two word-timing checks.
    EXPECT_GE(checks, 5 * 9) << report.table();
    EXPECT_EQ(word_checks, 5 * 2) << report.table();
    std::printf("%s", report.table().c_str());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, WhisperParity, ::testing::Values("tiny-multi", "tiny-en", "v3-layout"));

}  // namespace
