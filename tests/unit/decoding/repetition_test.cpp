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

TEST(Repetition, LongRunAfterOtherText) {
    std::vector<int> t{25166, 10437, 10437, 10437, 35254, 35254, 35254, 35254, 35254, 35254, 9054, 22080, 22080};
    for (int i = 0; i < 27; ++i) t.push_back(35254);
    const size_t keep = repetition_cut(t);
    EXPECT_EQ(keep, 14u);  // ... 22080 22080 35254
}
