// Repetition-loop detection.
#include <gtest/gtest.h>

#include "decoding/repetition.h"

using parlance::repetition_cut;

TEST(Repetition, NoLoopKeepsEverything) {
    std::vector<int> t{1, 2, 3, 4, 5, 6, 7, 8};
    EXPECT_EQ(repetition_cut(t), t.size());
}

TEST(Repetition, SingleTokenLoopIsCutToOne) {
    std::vector<int> t{9, 8, 7, 5, 5, 5, 5, 5, 5};
    EXPECT_EQ(repetition_cut(t), 4u);  // 9 8 7 5
}

TEST(Repetition, PhraseLoopIsCutToFirstOccurrence) {
    std::vector<int> t{1, 2, 10, 11, 12, 10, 11, 12, 10, 11, 12, 10, 11, 12};
    EXPECT_EQ(repetition_cut(t), 5u);  // 1 2 10 11 12
}

TEST(Repetition, ThreeRepeatsAreNotALoop) {
    std::vector<int> t{1, 7, 7, 7};
    EXPECT_EQ(repetition_cut(t), t.size());
}
