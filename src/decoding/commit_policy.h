// Which text of a live segment is final. While speech continues the open segment is decoded
// again and again; each decode gives a hypothesis of the segment's whole text so far. Text that
// consecutive hypotheses agree on (Options::agreement of them), within the caller's stable prefix
// of the newest (the session's word-timestamp guard and probability gate), is committed: sent once
// as a delta, never revised. The last unit of a hypothesis (a word the audio may have cut) is
// never committed before the end; units are words with their leading whitespace, or single
// characters of scripts written without spaces (Han, kana, Thai, ...). Units compare case-,
// whitespace- and punctuation-insensitively, so "Ask not," agrees with "ask not". A hypothesis
// ending in a loop (an n-gram repeated) counts only up to the loop's first occurrence. finalize()
// sends the rest once the segment ends: the deltas joined always equal the final transcript, and
// no span is sent twice — also when the final decode revised a committed word (its units up to the
// committed count are skipped).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace parlance {

class CommitPolicy {
public:
    struct Options {
        // Consecutive hypotheses that must agree on a unit. Three, not two: with the bundled model,
        // on held-out speech, two agreeing decodes of partial audio committed early words that
        // the whole item's decode does not say on 11 of 30 clips, three on 8 (BENCHMARKS.md).
        int agreement = 3;
        int held_back = 1;  // units at the end of a hypothesis never committed before the end
    };
    CommitPolicy() = default;
    explicit CommitPolicy(Options o) : o_(o) {}

    // A new hypothesis of the whole segment; returns the newly committed text (a delta, maybe "").
    // Only units that end within the hypothesis's first `stable_bytes` bytes may be committed by
    // it (the words the decoder placed well before the end of the audio it heard; the rest may be
    // a word the audio cut): npos, no such limit.
    std::string update(std::string_view hypothesis, size_t stable_bytes = std::string_view::npos);
    // The segment's final text; returns what is left to send. After it, the policy is finished:
    // transcript() is the completed transcript, further calls return "".
    std::string finalize(std::string_view final_text);

    // The latest hypothesis past what is committed: text that may still change (shown greyed by a
    // live caption, never sent as a delta). Starts with its whitespace, so committed + tentative
    // reads as the hypothesis. "" once finished.
    std::string tentative() const;
    // Everything committed (and sent) so far; after finalize, the whole transcript.
    const std::string& transcript() const { return committed_; }
    bool finished() const { return finished_; }
    int committed_units() const { return committed_units_; }

    struct Unit {
        std::string raw;  // as the hypothesis wrote it, with its leading whitespace
        std::string key;  // case-folded, without whitespace and punctuation
    };
    // The units of a text (exposed for tests).
    static std::vector<Unit> units(std::string_view text);

private:
    std::string append(const std::vector<Unit>& units, size_t from, size_t to);

    Options o_;
    std::vector<std::vector<Unit>> recent_;  // the last agreement - 1 hypotheses, oldest first
    std::vector<Unit> previous_;
    std::string committed_;
    int committed_units_ = 0;
    bool finished_ = false;
};

}  // namespace parlance
