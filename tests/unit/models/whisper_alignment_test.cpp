// Word-level timing: the median filter and DTW on hand-checked matrices (transformers' padding and
// tie-breaking), token timestamps' layout, word grouping as OpenAI whisper does it, the alignment
// pass on the tiny-en fixture, and the alignment-head fallback in transcription.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "audio/wav.h"
#include "core/error.h"
#include "models/whisper/alignment.h"
#include "models/whisper/model.h"
#include "models/whisper/runner.h"
#include "models/whisper/transcriber.h"
#include "test_support.h"

namespace parlance::whisper {
namespace {

TEST(MedianFilter, ReflectPaddingWidth3) {
    // Padded by reflection: [5 | 1 5 2 8 3 | 8]; medians of each run of three.
    std::vector<float> x = {1, 5, 2, 8, 3};
    EXPECT_EQ(median_filter(x, 1, 5, 3), (std::vector<float>{5, 2, 5, 3, 8}));
}

TEST(MedianFilter, ReflectPaddingWidth5AndRowsIndependent) {
    // Row 0 padded: [2 5 | 1 5 2 8 3 | 8 2]. Row 1 is constant.
    std::vector<float> x = {1, 5, 2, 8, 3, 7, 7, 7, 7, 7};
    EXPECT_EQ(median_filter(x, 2, 5, 5), (std::vector<float>{2, 5, 3, 5, 3, 7, 7, 7, 7, 7}));
}

TEST(MedianFilter, ShortRowsUnchangedAndWidthChecked) {
    std::vector<float> x = {3, 1};
    EXPECT_EQ(median_filter(x, 1, 2, 5), x);  // cols <= width / 2: as transformers, untouched
    EXPECT_EQ(median_filter(x, 1, 2, 1), x);
    EXPECT_THROW(median_filter(x, 1, 2, 4), Error);
    EXPECT_THROW(median_filter(x, 1, 2, 0), Error);
}

TEST(MedianFilter, NanSortsLast) {
    const float nan = std::nanf("");
    std::vector<float> x = {nan, 1, 2};
    std::vector<float> y = median_filter(x, 1, 3, 3);  // padded [1 | nan 1 2 | 1]
    EXPECT_EQ(y[0], 1.0f);                             // {1, nan, 1}
    EXPECT_EQ(y[1], 2.0f);                             // {nan, 1, 2}
    EXPECT_EQ(y[2], 1.0f);                             // {1, 2, 1}
}

TEST(Dtw, FollowsTheCheapPath) {
    // Cost 0 along (0,0) (0,1) (1,2).
    std::vector<float> m = {0, 0, 9, 9, 9, 0};
    DtwPath p = dynamic_time_warping(m, 2, 3);
    EXPECT_EQ(p.text, (std::vector<int>{0, 0, 1}));
    EXPECT_EQ(p.time, (std::vector<int>{0, 1, 2}));
}

TEST(Dtw, TiesGoLeft) {
    // All costs equal: at (2,2) the diagonal, up and left predecessors tie, and transformers takes
    // "left" (the else branch), then "up" along the first column. A min() preferring the diagonal
    // would return (0,0) (1,1).
    std::vector<float> m(4, 0.0f);
    DtwPath p = dynamic_time_warping(m, 2, 2);
    EXPECT_EQ(p.text, (std::vector<int>{0, 1, 1}));
    EXPECT_EQ(p.time, (std::vector<int>{0, 0, 1}));
}

TEST(Dtw, DiagonalOnlyWhenStrictlyCheapest) {
    // At the corner the diagonal predecessor costs -5, up and left 0: diagonal.
    std::vector<float> m = {-5, 5, 5, -5};
    DtwPath p = dynamic_time_warping(m, 2, 2);
    EXPECT_EQ(p.text, (std::vector<int>{0, 1}));
    EXPECT_EQ(p.time, (std::vector<int>{0, 1}));
    // With off-diagonal costs of 0 all three predecessors tie at -5: left again.
    m = {-5, 0, 0, -5};
    p = dynamic_time_warping(m, 2, 2);
    EXPECT_EQ(p.text, (std::vector<int>{0, 1, 1}));
    EXPECT_EQ(p.time, (std::vector<int>{0, 0, 1}));
}

// One head whose row r peaks at column centers[r] (plus a per-row offset so no column is constant).
std::vector<float> peaked(int rows, int cols, const std::vector<int>& centers) {
    std::vector<float> w(static_cast<size_t>(rows) * cols);
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c)
            w[r * cols + c] = std::exp(-0.5f * float((c - centers[r]) * (c - centers[r]))) + 0.001f * r;
    return w;
}

TEST(TokenTimestamps, RowTimesFollowThePeaks) {
    std::vector<std::vector<float>> heads = {peaked(3, 12, {1, 5, 9})};
    AlignmentOptions o;
    o.median_filter_width = 1;
    o.time_precision = 1.0;
    std::vector<float> t = dtw_row_times(heads, 3, 12, o);
    ASSERT_EQ(t.size(), 3u);
    EXPECT_EQ(t[0], 0.0f);  // the path starts at (0, 0)
    EXPECT_GE(t[1], 2.0f);
    EXPECT_LE(t[1], 5.0f);
    EXPECT_GE(t[2], 6.0f);
    EXPECT_LE(t[2], 9.0f);
    o.time_precision = 0.02;
    std::vector<float> t2 = dtw_row_times(heads, 3, 12, o);
    for (size_t i = 0; i < t.size(); ++i) EXPECT_FLOAT_EQ(t2[i], static_cast<float>(t[i] * 0.02));
}

TEST(TokenTimestamps, PromptZeroedLastRepeatedAndCropped) {
    // 2 prompt positions + 4 generated tokens = sequence of 6, weights for positions 0..4.
    std::vector<std::vector<float>> heads = {peaked(5, 40, {30, 30, 2, 12, 24}), peaked(5, 40, {30, 30, 3, 13, 25})};
    AlignmentOptions o;
    o.median_filter_width = 3;
    std::vector<float> t = token_timestamps(heads, 5, 40, 2, o);
    ASSERT_EQ(t.size(), 6u);
    EXPECT_EQ(t[0], 0.0f);
    EXPECT_EQ(t[1], 0.0f);
    EXPECT_EQ(t[2], 0.0f);  // first DTW row
    EXPECT_EQ(t[5], t[4]);  // the final token repeats the last time
    EXPECT_GT(t[3], t[2]);
    EXPECT_GT(t[4], t[3]);
    // Prompt rows are not part of the DTW: changing them changes nothing.
    std::vector<std::vector<float>> other = heads;
    for (auto& h : other)
        for (int c = 0; c < 40; ++c) h[c] = h[40 + c] = 0.5f;
    EXPECT_EQ(token_timestamps(other, 5, 40, 2, o), t);
    // Cropped to num_frames / 2 = 10 encoder frames: every time lies inside.
    o.num_frames = 20;
    for (float v : token_timestamps(heads, 5, 40, 2, o)) EXPECT_LE(v, 9 * 0.02f + 1e-6f);
    // Nothing generated past the first token: all zeros.
    EXPECT_EQ(token_timestamps(heads, 2, 40, 2, o), std::vector<float>(3, 0.0f));
}

TEST(AlignmentHeads, FallbackIsUpperHalfOfDecoderLayers) {
    WhisperConfig c;
    c.decoder_layers = 4;
    c.decoder_heads = 2;
    SpecialTokens t;
    auto heads = alignment_heads_or_default(t, c);
    EXPECT_EQ(heads, (std::vector<std::pair<int, int>>{{2, 0}, {2, 1}, {3, 0}, {3, 1}}));
    t.alignment_heads = {{1, 1}};
    EXPECT_EQ(alignment_heads_or_default(t, c), t.alignment_heads);
}

// A toy vocabulary: id -> bytes.
const std::map<int, std::string>& toy_vocab() {
    static const std::map<int, std::string> v = {
        {0, " Hello"},   {1, ","},    {2, " wor"},          {3, "ld"},    {4, "!"},    {5, " ("},  {6, "yes"}, {7, ")"},
        {8, "\xe4\xbd"}, {9, "\xa0"}, {10, "\xe5\xa5\xbd"}, {11, "\xff"}, {12, " \""}, {13, " Hi"}};
    return v;
}

std::string toy_decode(std::span<const int> ids) {
    std::string s;
    for (int id : ids) s += toy_vocab().at(id);
    return s;
}

std::vector<std::string> texts(const std::vector<WordTokens>& words) {
    std::vector<std::string> out;
    for (const auto& w : words) out.push_back(w.text);
    return out;
}

TEST(SplitWords, SpacesAndPunctuation) {
    std::vector<int> tokens = {0, 1, 2, 3, 4, 5, 6, 7};
    auto words = split_words(tokens, toy_decode, "en");
    EXPECT_EQ(texts(words), (std::vector<std::string>{" Hello,", " world!", " (yes)"}));
    ASSERT_EQ(words.size(), 3u);
    EXPECT_EQ(words[0].indices, (std::vector<size_t>{0, 1}));
    EXPECT_EQ(words[1].indices, (std::vector<size_t>{2, 3, 4}));
    EXPECT_EQ(words[2].indices, (std::vector<size_t>{5, 6, 7}));
}

TEST(SplitWords, OpeningPunctuationJoinsTheNextWord) {
    std::vector<int> tokens = {12, 13};
    EXPECT_EQ(texts(split_words(tokens, toy_decode, "en")), (std::vector<std::string>{" \" Hi"}));
}

TEST(SplitWords, TokensInsideACharacterStayTogether) {
    std::vector<int> tokens = {8, 9, 10};  // 你 split over two tokens, then 好
    auto words = split_words(tokens, toy_decode, "zh");
    EXPECT_EQ(texts(words), (std::vector<std::string>{"\xe4\xbd\xa0", "\xe5\xa5\xbd"}));
    EXPECT_EQ(words[0].indices, (std::vector<size_t>{0, 1}));
    // Space-delimited: no space between them, one word.
    EXPECT_EQ(split_words(tokens, toy_decode, "en").size(), 1u);
}

TEST(SplitWords, IllFormedBytesDoNotSwallowTheRest) {
    std::vector<int> tokens = {11, 0, 2, 3};
    EXPECT_EQ(texts(split_words(tokens, toy_decode, "en")), (std::vector<std::string>{"\xff", " Hello", " world"}));
}

TEST(TimedWords, StartAndEndFromTokenTimes) {
    const int eot = 100;
    std::vector<int> tokens = {0, 1, 2, 3, 4, 150};  // text, then a timestamp token
    // Sequence positions 3.. hold these tokens.
    std::vector<float> ts = {0, 0, 0, 1.0f, 1.5f, 2.0f, 2.5f, 3.0f, 3.5f, 3.5f};
    std::vector<float> probs = {0.5f, 0.7f, 0.2f, 0.4f, 0.6f, 0.0f};
    auto words = timed_words(tokens, 3, ts, 10.0, eot, toy_decode, "en", probs);
    ASSERT_EQ(words.size(), 2u);
    EXPECT_EQ(words[0].word, " Hello,");
    EXPECT_DOUBLE_EQ(words[0].start, 11.0);
    EXPECT_DOUBLE_EQ(words[0].end, 12.0);
    EXPECT_FLOAT_EQ(words[0].probability, 0.6f);
    EXPECT_EQ(words[1].word, " world!");
    EXPECT_DOUBLE_EQ(words[1].start, 12.0);
    EXPECT_DOUBLE_EQ(words[1].end, 13.5);
    EXPECT_FLOAT_EQ(words[1].probability, 0.4f);
    EXPECT_EQ(timed_words(tokens, 3, ts, 0.0, eot, toy_decode, "en")[0].probability, 0.0f);
}

class AlignmentPass : public ::testing::Test {
protected:
    void SetUp() override {
        BackendOptions bo;
        bo.threads = 2;
        backend_ = std::make_unique<Backend>(bo);
        model_ = WhisperModel::load(testing::fixtures_dir() / "whisper" / "tiny-en" / "model", *backend_);
        runner_ = std::make_unique<WhisperRunner>(model_->config, *model_->weights, *backend_, 2);
    }
    std::unique_ptr<Backend> backend_;
    std::unique_ptr<WhisperModel> model_;
    std::unique_ptr<WhisperRunner> runner_;
};

TEST_F(AlignmentPass, WeightsAreDistributionsAndLogitsMatchDecode) {
    std::vector<float> pcm = read_wav_file(testing::fixtures_dir() / "audio" / "jfk.wav").samples;
    std::vector<float> mel = window_mel(*model_, pcm);
    CrossKv cross(model_->config, *backend_);
    std::vector<CrossKv*> crosses{&cross};
    runner_->encode(std::span<const std::vector<float>>(&mel, 1), crosses);
    std::vector<int> tokens = {model_->tokens.sot, model_->tokens.notimestamps, 440, 995};
    std::vector<std::pair<int, int>> heads = {{2, 3}, {0, 0}};
    std::vector<std::vector<float>> logits;
    auto w = runner_->cross_attention(cross, 0, tokens, heads, &logits);
    const int T = model_->config.max_source_positions;
    ASSERT_EQ(w.size(), 2u);
    ASSERT_EQ(w[0].size(), tokens.size() * T);
    for (const auto& h : w)
        for (size_t r = 0; r < tokens.size(); ++r) {
            double s = 0;
            for (int c = 0; c < T; ++c) s += h[r * T + c];
            EXPECT_NEAR(s, 1.0, 1e-4);
        }
    EXPECT_NE(w[0], w[1]);
    // The same sequence step by step in another slot gives the same last logits.
    DecodeItem a{1, &cross, {tokens[0], tokens[1], tokens[2]}, 0};
    runner_->decode(std::span<const DecodeItem>(&a, 1));
    DecodeItem b{1, &cross, {tokens[3]}, 3};
    std::vector<float> last = runner_->decode(std::span<const DecodeItem>(&b, 1))[0];
    ASSERT_EQ(logits.size(), tokens.size());
    float max_diff = 0;
    for (size_t v = 0; v < last.size(); ++v) max_diff = std::max(max_diff, std::abs(last[v] - logits.back()[v]));
    EXPECT_LT(max_diff, 1e-3f);

    std::vector<std::pair<int, int>> bad = {{3, 0}};
    EXPECT_THROW(runner_->cross_attention(cross, 0, tokens, bad), Error);
    bad = {{0, 4}};
    EXPECT_THROW(runner_->cross_attention(cross, 0, tokens, bad), Error);
}

}  // namespace
}  // namespace parlance::whisper
