// The sampler's penalties and min-p, on hand-made logits whose right answers are known.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "engine/sampler.h"

namespace parlance {
namespace {

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegative) {
    // Token 0 leads; it was in the prompt. A penalty of 2 halves its logit (3 -> 1.5 < 2).
    std::vector<float> logits{3.0f, 2.0f, -1.0f};
    SamplingParams p;
    p.repetition_penalty = 2.0f;
    const std::vector<int32_t> tokens{0, 2};
    EXPECT_EQ(sample_next(logits, p, tokens, 2), 1);
    EXPECT_FLOAT_EQ(logits[0], 1.5f);
    EXPECT_FLOAT_EQ(logits[2], -2.0f);  // negative: multiplied
    EXPECT_FLOAT_EQ(logits[1], 2.0f);   // unseen: untouched
}

TEST(Sampler, FrequencyAndPresenceCountOnlyGeneratedTokens) {
    std::vector<float> logits{3.0f, 2.5f, 0.0f};
    SamplingParams p;
    p.frequency_penalty = 0.4f;
    p.presence_penalty = 0.1f;
    // Prompt [1]; generated [0, 0]: token 0 loses 2 x 0.4 + 0.1; token 1 (prompt only) nothing.
    const std::vector<int32_t> tokens{1, 0, 0};
    EXPECT_EQ(sample_next(logits, p, tokens, 1), 1);
    EXPECT_FLOAT_EQ(logits[0], 3.0f - 0.9f);
    EXPECT_FLOAT_EQ(logits[1], 2.5f);
}

TEST(Sampler, MinPKeepsOnlyTokensNearTheBest) {
    // Probabilities at temperature 1: exp(0) : exp(-1) : exp(-5). min_p 0.3 keeps ids 0 and 1
    // (e^-1 = 0.37 >= 0.3), never id 2, whatever the seed.
    SamplingParams p;
    p.temperature = 1.0f;
    p.min_p = 0.3f;
    std::set<int32_t> seen;
    for (uint64_t seed = 0; seed < 400; ++seed) {
        std::vector<float> logits{0.0f, -1.0f, -5.0f};
        p.seed = seed;
        seen.insert(sample_next(logits, p, std::vector<int32_t>{7}, 1));
    }
    EXPECT_EQ(seen, (std::set<int32_t>{0, 1}));
    p.min_p = 0.0f;
    for (uint64_t seed = 0; seed < 2000 && seen.size() < 3; ++seed) {
        std::vector<float> logits{0.0f, -1.0f, -5.0f};
        p.seed = seed;
        seen.insert(sample_next(logits, p, std::vector<int32_t>{7}, 1));
    }
    EXPECT_EQ(seen.size(), 3u);  // without min_p the unlikely one does come up
}

TEST(Sampler, StopIdsSuppressedUntilMinTokens) {
    SamplingParams p;
    p.min_tokens = 2;
    p.stop_ids = {0};
    std::vector<float> logits{5.0f, 1.0f};
    EXPECT_EQ(sample_next(logits, p, std::vector<int32_t>{3, 4}, 1), 1);  // 1 generated < 2
    std::vector<float> again{5.0f, 1.0f};
    EXPECT_EQ(sample_next(again, p, std::vector<int32_t>{3, 4, 1}, 1), 0);  // 2 generated
}

}  // namespace
}  // namespace parlance
