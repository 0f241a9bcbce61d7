// EndAtAudioEnd: after a timestamp at or past the window's last step of real audio, only
// end-of-text may follow (whatever the timestamp rules did to it); before that, nothing changes.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "models/whisper/timestamp_rules.h"

namespace parlance::whisper {
namespace {

SpecialTokens tiny_layout() {
    SpecialTokens t;
    t.eot = 10;
    t.notimestamps = 19;
    t.timestamp_begin = 20;
    return t;
}

TEST(EndAtAudioEnd, OnlyEndOfTextAfterATimestampPastTheAudio) {
    const SpecialTokens t = tiny_layout();
    // 11 s of audio = 1100 mel frames = timestamp step 550 (<|11.00|>).
    EndAtAudioEnd rule(t, /*begin_index=*/2, /*audio_frames=*/1100);
    std::vector<float> logits(t.timestamp_begin + 1501, 1.0f);
    logits[t.eot] = -INFINITY;  // as the timestamp rules may leave it

    std::vector<int> before = {1, 2, t.timestamp_begin + 549};
    rule.apply(logits, before, 2);
    EXPECT_EQ(logits[5], 1.0f);
    EXPECT_TRUE(std::isinf(logits[t.eot]));

    std::vector<int> at_end = {1, 2, t.timestamp_begin + 550};
    rule.apply(logits, at_end, 2);
    for (size_t i = 0; i < logits.size(); ++i) {
        if (static_cast<int>(i) == t.eot)
            EXPECT_EQ(logits[i], 0.0f);
        else
            EXPECT_TRUE(std::isinf(logits[i]) && logits[i] < 0) << i;
    }
}

TEST(EndAtAudioEnd, TextTokensAndThePromptAreLeftAlone) {
    const SpecialTokens t = tiny_layout();
    EndAtAudioEnd rule(t, 3, 100);
    std::vector<float> logits(t.timestamp_begin + 1501, 1.0f);
    std::vector<int> prompt_only = {1, 2, t.timestamp_begin + 1000};  // a timestamp in the prompt
    rule.apply(logits, prompt_only, 3);
    std::vector<int> text_last = {1, 2, 3, t.timestamp_begin + 60, 7};
    rule.apply(logits, text_last, 3);
    for (float l : logits) EXPECT_EQ(l, 1.0f);
}

}  // namespace
}  // namespace parlance::whisper
