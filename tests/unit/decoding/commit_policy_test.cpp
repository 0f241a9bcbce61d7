// The commit policy of live transcription on scripted hypotheses: what consecutive decodes agree
// on is committed once and never revised, the deltas joined equal the completed transcript, and
// no span is ever sent twice.
#include <gtest/gtest.h>

#include "decoding/commit_policy.h"

namespace {

using parlance::CommitPolicy;
// The scripted cases below are written for agreement of two hypotheses (the rules are the same
// with more; the default's own test is ThreeHypothesesAgreeByDefault).
const CommitPolicy::Options kTwo{.agreement = 2, .held_back = 1};

// Runs hypotheses then the final text; returns the deltas (the last one from finalize).
std::vector<std::string> run(CommitPolicy& p, const std::vector<std::string>& hyps, const std::string& final_text) {
    std::vector<std::string> deltas;
    for (const auto& h : hyps) deltas.push_back(p.update(h));
    deltas.push_back(p.finalize(final_text));
    std::string joined;
    for (const auto& d : deltas) joined += d;
    EXPECT_EQ(joined, p.transcript());
    return deltas;
}

TEST(CommitPolicy, CommitsWhatTwoHypothesesAgreeOnButNotTheirLastWord) {
    CommitPolicy p(kTwo);
    EXPECT_EQ(p.update(" And so my"), "");               // nothing to agree with yet
    EXPECT_EQ(p.update(" And so my fellow"), "And so");  // "my" is the previous one's last word
    EXPECT_EQ(p.update(" And so my fellow Americans"), " my");
    EXPECT_EQ(p.finalize(" And so my fellow Americans, ask not."), " fellow Americans, ask not.");
    EXPECT_EQ(p.transcript(), "And so my fellow Americans, ask not.");
    EXPECT_EQ(p.finalize("again"), "");  // once
    EXPECT_EQ(p.update("again"), "");
}

// A hypothesis commits only units that end inside its stable prefix (the words its decoder placed
// well before the end of the audio): agreement alone is not enough.
TEST(CommitPolicy, OnlyUnitsInsideTheStablePrefixCommit) {
    CommitPolicy p(kTwo);
    const std::string h1 = " And so my fellow", h2 = " And so my fellow Americans";
    EXPECT_EQ(p.update(h1, h1.size()), "");
    EXPECT_EQ(p.update(h2, h2.find(" so")), "And");          // "so" ends past the stable prefix
    EXPECT_EQ(p.update(h2, 0), "");                          // nothing stable: nothing commits
    EXPECT_EQ(p.update(h2, h2.find(" fellow") - 1), " so");  // "my" is cut by the prefix's end
    EXPECT_EQ(p.update(h2, h2.find(" fellow")), " my");
    EXPECT_EQ(p.update(h2), " fellow");  // no limit: up to the held-back last word
    EXPECT_EQ(p.finalize(h2), " Americans");
    EXPECT_EQ(p.transcript(), "And so my fellow Americans");
}

TEST(CommitPolicy, ThreeHypothesesAgreeByDefault) {
    CommitPolicy p;
    EXPECT_EQ(p.update(" Be it"), "");
    EXPECT_EQ(p.update(" Be it not"), "");  // two agree on "Be": not enough
    EXPECT_EQ(p.update(" It is not good"), "");
    EXPECT_EQ(p.update(" It is not good for"), "");  // "It" agreed by two only
    EXPECT_EQ(p.update(" It is not good for a"), "It is not");
    EXPECT_EQ(p.finalize(" It is not good for a man."), " good for a man.");
    CommitPolicy held({.agreement = 2, .held_back = 2});
    EXPECT_EQ(held.update(" one two three"), "");
    EXPECT_EQ(held.update(" one two three four"), "one");  // "two three" held back in the first
}

TEST(CommitPolicy, TentativeIsTheHypothesisPastTheCommittedText) {
    CommitPolicy p(kTwo);
    EXPECT_EQ(p.tentative(), "");
    p.update(" And so my");
    EXPECT_EQ(p.tentative(), "And so my");  // nothing committed: the whole hypothesis, no leading space
    p.update(" And so my fellow");
    EXPECT_EQ(p.transcript() + p.tentative(), "And so my fellow");
    EXPECT_EQ(p.tentative(), " my fellow");
    p.update(" And so my fellow Americans, ask");
    EXPECT_EQ(p.transcript() + p.tentative(), "And so my fellow Americans, ask");
    p.update(" And so");  // a shorter hypothesis: nothing past the committed units
    EXPECT_EQ(p.tentative(), "");
    p.finalize(" And so my fellow Americans, ask not.");
    EXPECT_EQ(p.tentative(), "");
}

TEST(CommitPolicy, AnEarlyWordRevisedAfterItWasCommittedIsNotSentAgain) {
    CommitPolicy p(kTwo);
    auto d = run(p, {" I scream for", " I scream for ice", " Ice cream for ice cream"}, " Ice cream for ice cream.");
    // "I scream" was committed; the final decode's first two units are skipped, not re-sent.
    EXPECT_EQ(d[1], "I scream");
    EXPECT_EQ(p.transcript(), "I scream for ice cream.");
}

TEST(CommitPolicy, CapitalisationAndPunctuationChangesStillAgree) {
    CommitPolicy p(kTwo);
    auto d = run(p, {" ask not what", " Ask not, what your"}, " Ask not what your country can do.");
    EXPECT_EQ(d[1], "Ask not,");  // the newer spelling is sent; "what" was the last word before
    EXPECT_EQ(p.transcript(), "Ask not, what your country can do.");
}

TEST(CommitPolicy, ScriptsWithoutSpacesCommitCharacterByCharacter) {
    CommitPolicy p(kTwo);
    EXPECT_EQ(CommitPolicy::units("我们今天").size(), 4u);
    EXPECT_EQ(CommitPolicy::units("我们。今天").size(), 4u);  // 。stays with 们
    EXPECT_EQ(p.update("我们今"), "");
    EXPECT_EQ(p.update("我们今天很"), "我们");
    EXPECT_EQ(p.finalize("我们今天很好。"), "今天很好。");
    EXPECT_EQ(p.transcript(), "我们今天很好。");
}

TEST(CommitPolicy, ALoopIsNeverCommitted) {
    CommitPolicy p(kTwo);
    auto d = run(p,
                 {" the end the end the end the end the end the end",
                  " the end the end the end the end the end the end the end"},
                 " the end.");
    // Cut back to the loop's first occurrence, and that occurrence's last unit held back.
    EXPECT_EQ(d[1], "the");
    EXPECT_EQ(p.transcript(), "the end.");
}

TEST(CommitPolicy, AShortTailAndAnEmptyStablePrefix) {
    CommitPolicy p(kTwo);
    // Hypotheses that never agree commit nothing; the final text goes out whole, once.
    auto d = run(p, {" hello", " yellow world", " mellow word"}, " Hello world.");
    for (size_t i = 0; i + 1 < d.size(); ++i) EXPECT_EQ(d[i], "");
    EXPECT_EQ(p.transcript(), "Hello world.");
    // A final text shorter than what was committed adds nothing (and repeats nothing).
    CommitPolicy q(kTwo);
    auto e = run(q, {" one two three four", " one two three four five"}, " one");
    EXPECT_EQ(q.transcript(), "one two three");
    EXPECT_EQ(e.back(), "");
    // An empty segment.
    CommitPolicy r;
    EXPECT_EQ(r.finalize(""), "");
    EXPECT_EQ(r.transcript(), "");
}

TEST(CommitPolicy, FinalizeAfterCommitsSendsOnlyTheRest) {
    CommitPolicy p(kTwo);
    auto d = run(p, {" a b c d", " a b c d e", " a b c d e f"}, " a b c d e f g");
    EXPECT_EQ(d[1], "a b c");
    EXPECT_EQ(d[2], " d");
    EXPECT_EQ(d[3], " e f g");
    EXPECT_EQ(p.committed_units(), 7);
}

}  // namespace
