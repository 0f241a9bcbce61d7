// A live session's item/commit policy (server/live_item.h) and audio store
// (server/session_audio.h), without a session: how an item closes, what a landed interim decode
// commits or leaves to do, which words a decode places safely, and what audio is kept.
#include <gtest/gtest.h>

#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "server/live_item.h"
#include "server/session_audio.h"

namespace parlance::server {
namespace {

Transcript heard(const std::string& text, std::vector<int> tokens = {}) {
    Transcript t;
    t.text = text;
    Segment s;
    s.text = text;
    s.tokens = std::move(tokens);
    t.segments.push_back(s);
    return t;
}

// An interim decode of the item that heard `text` up to `end` landed.
LiveItem::Interim land(LiveItem& it, const std::string& text, int64_t end, size_t stable = std::string::npos,
                       std::vector<int> tokens = {}) {
    const Transcript t = heard(text, std::move(tokens));
    return it.interim_landed(&t, end, stable);
}

LiveItem open_item() {
    LiveItem it;
    it.id = "item_1";
    it.start = 16000;
    it.policy = CommitPolicy(CommitPolicy::Options{2, 1});
    return it;
}

TEST(LiveItem, AnInterimDecodeThatCoveredTheSpeechCompletesTheItemAtOnce) {
    LiveItem it = open_item();
    it.decoding = true;
    const auto landed = land(it, " Ask not", 40000, std::string::npos, {5, 6});
    EXPECT_EQ(landed.next, LiveItem::Interim::Next::Open);
    EXPECT_EQ(it.hypothesis, " Ask not");
    EXPECT_EQ(it.hypothesis_end, 40000);
    EXPECT_EQ(it.hypothesis_tokens, (std::vector<int>{5, 6}));
    EXPECT_FALSE(it.decoding);
    // The speech ended at 38000, before what the hypothesis heard: it is the transcript.
    EXPECT_EQ(it.close(48000, 38000, 7.5), LiveItem::Closing::Complete);
    EXPECT_TRUE(it.committed);
    EXPECT_EQ(it.end, 48000);
    EXPECT_EQ(it.speech_end, 38000);
    EXPECT_EQ(it.closed_at, 7.5);
}

TEST(LiveItem, AShorterHypothesisNeedsAFinalDecode) {
    LiveItem it = open_item();
    land(it, " Ask", 30000, std::string::npos);
    EXPECT_EQ(it.close(48000, 38000, 1.0), LiveItem::Closing::DecodeFinal);
    // A speech end outside the item is clamped into it.
    LiveItem early = open_item();
    early.close(20000, 100, 1.0);
    EXPECT_EQ(early.speech_end, early.start);
    LiveItem empty = open_item();
    empty.close(100, 100, 1.0);
    EXPECT_EQ(empty.end, empty.start);
}

TEST(LiveItem, AnInterimDecodeInFlightAtTheCommitDecidesWhenItLands) {
    // It covers the speech: its text is final.
    LiveItem covers = open_item();
    covers.decoding = true;
    EXPECT_EQ(covers.close(48000, 38000, 1.0), LiveItem::Closing::AwaitInterim);
    EXPECT_TRUE(covers.await_interim);
    const auto done = land(covers, " Ask not what", 38000, std::string::npos);
    EXPECT_EQ(done.next, LiveItem::Interim::Next::Complete);
    EXPECT_TRUE(done.delta.empty());  // complete() sends the rest
    // It stops short of the speech's end, or failed: a final decode follows.
    LiveItem shorter = open_item();
    shorter.decoding = true;
    shorter.close(48000, 38000, 1.0);
    EXPECT_EQ(land(shorter, " Ask", 37999, std::string::npos).next, LiveItem::Interim::Next::DecodeFinal);
    LiveItem failed = open_item();
    failed.decoding = true;
    failed.close(48000, 38000, 1.0);
    EXPECT_EQ(failed.interim_landed(nullptr, 48000, std::string::npos).next, LiveItem::Interim::Next::DecodeFinal);
    EXPECT_EQ(failed.hypothesis_end, -1);  // a failed decode is no hypothesis
}

TEST(LiveItem, OpenItemsCommitWhatHypothesesAgreeOnWithinTheStablePrefix) {
    LiveItem it = open_item();  // agreement 2, the last word held back
    EXPECT_EQ(land(it, " Ask not what", 30000, std::string::npos).delta, "");
    EXPECT_EQ(it.tentative_update(), "Ask not what");  // the transcript starts without its space
    EXPECT_EQ(it.tentative_update(), std::nullopt);    // the client has it
    // Agreed on " Ask not", but only " Ask" was placed safely.
    EXPECT_EQ(land(it, " Ask not what your", 35000, 4).delta, "Ask");
    EXPECT_TRUE(it.tentative_sent.empty());  // a delta clears the client's tentative text
    EXPECT_EQ(it.tentative_update(), " not what your");
    // " your" was the last word of the one before: held back there, so not agreed on yet.
    EXPECT_EQ(land(it, " Ask not what your country", 40000, std::string::npos).delta, " not what");
    // A failed decode changes nothing.
    const auto failed = it.interim_landed(nullptr, 45000, std::string::npos);
    EXPECT_EQ(failed.next, LiveItem::Interim::Next::Open);
    EXPECT_EQ(it.hypothesis_end, 40000);
}

TEST(StablePrefix, EndsBeforeTheFirstWordTooLateOrTooUnsure) {
    Transcript t = heard(" Ask not, what your");
    t.segments[0].words = {
        {" Ask", 0.0, 0.4, 0.9f}, {" not,", 0.4, 0.8, 0.9f}, {" what", 0.8, 1.2, 0.5f}, {" your", 1.2, 1.5, 0.9f}};
    const double inf = std::numeric_limits<double>::infinity();
    EXPECT_EQ(t.text.substr(0, stable_prefix(t, inf, 0.0f)), " Ask not, what your");
    EXPECT_EQ(t.text.substr(0, stable_prefix(t, 1.0, 0.0f)), " Ask not,");
    EXPECT_EQ(t.text.substr(0, stable_prefix(t, inf, 0.6f)), " Ask not,");  // and nothing after " what"
    // A word not found where expected ends the prefix there.
    t.segments[0].words[1].word = " nought";
    EXPECT_EQ(t.text.substr(0, stable_prefix(t, inf, 0.0f)), " Ask");
}

TEST(SessionAudio, SlicesWhatIsKeptAndDropsOnlyWholeSeconds) {
    SessionAudio audio;
    std::vector<float> pcm(40000);
    std::iota(pcm.begin(), pcm.end(), 0.0f);
    audio.append(pcm);
    EXPECT_EQ(audio.total(), 40000);
    EXPECT_EQ(audio.slice(100, 103), (std::vector<float>{100, 101, 102}));
    audio.drop_before(15999);  // less than a second: kept
    EXPECT_EQ(audio.origin(), 0);
    audio.drop_before(20000);
    EXPECT_EQ(audio.origin(), 20000);
    EXPECT_EQ(audio.kept(), 20000u);
    EXPECT_EQ(audio.slice(19990, 20002), (std::vector<float>{20000, 20001}));  // clamped to what is kept
    EXPECT_TRUE(audio.slice(50000, 60000).empty());
    audio.drop_before(90000);  // never past what arrived
    EXPECT_EQ(audio.origin(), 40000);
    audio.append(std::vector<float>{7.0f});
    EXPECT_EQ(audio.slice(0, 100000), (std::vector<float>{7.0f}));
}

}  // namespace
}  // namespace parlance::server
