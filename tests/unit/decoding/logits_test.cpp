// Logit arithmetic: argmax against the one-pass loop it replaces.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "decoding/logits.h"

namespace {

// The definition: the first index whose value no later value exceeds, NaNs passed over (and a
// NaN first value kept, since nothing compares greater than it).
int first_greatest(const std::vector<float>& x) {
    int best = 0;
    for (size_t i = 1; i < x.size(); ++i)
        if (x[i] > x[static_cast<size_t>(best)]) best = static_cast<int>(i);
    return best;
}

}  // namespace

TEST(Argmax, IsTheFirstGreatestValueOnRandomRowsOfEveryLength) {
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 4.0f);
    std::uniform_int_distribution<int> few(0, 5);
    for (size_t n = 1; n <= 40; ++n)
        for (int trial = 0; trial < 50; ++trial) {
            std::vector<float> x(n);
            // Few distinct values make ties common; normal ones make a unique maximum.
            for (float& v : x) v = trial % 2 ? static_cast<float>(few(rng)) : normal(rng);
            ASSERT_EQ(parlance::argmax(x), first_greatest(x)) << "n " << n << " trial " << trial;
        }
    std::vector<float> vocab(151936);
    for (float& v : vocab) v = normal(rng);
    EXPECT_EQ(parlance::argmax(vocab), first_greatest(vocab));
    vocab[151935] = 100.0f;  // in the tail after the last whole group of lanes
    EXPECT_EQ(parlance::argmax(vocab), 151935);
}

TEST(Argmax, SpecialValuesAsTheOnePassLoop) {
    const float inf = std::numeric_limits<float>::infinity();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const std::vector<std::vector<float>> rows = {
        {-inf, -inf, -inf},                              // all masked: the first
        {-inf, 3.0f, -inf, 3.0f},                        // ties: the first
        {nan, 1.0f, 2.0f},                               // a NaN first value stays
        {1.0f, nan, 2.0f, nan, 2.0f},                    // NaNs elsewhere passed over
        {nan, nan, nan},                                 // all NaN
        {-inf, nan, -inf},                               // NaN among masked values
        {-0.0f, 0.0f, -1.0f},                            // signed zeros are equal
        {-1.0f, 0.0f, -0.0f, -2.0f},                     // the first zero
        {1, 2, 3, 4, 5, 6, 7, 8, 9, inf, 9, 8, 7, inf},  // +inf, twice
        {nan, -inf},
    };
    for (size_t r = 0; r < rows.size(); ++r)
        EXPECT_EQ(parlance::argmax(rows[r]), first_greatest(rows[r])) << "row " << r;
}
