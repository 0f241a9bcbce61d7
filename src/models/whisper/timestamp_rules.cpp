// Whisper timestamp rules (see timestamp_rules.h).
#include "models/whisper/timestamp_rules.h"

#include <algorithm>

namespace parlance::whisper {

void TimestampRules::apply(std::span<float> logits, std::span<const int> tokens, int) const {
    const int V = static_cast<int>(logits.size());
    auto mask = [&](int from, int to) {
        for (int i = std::max(0, from); i < std::min(V, to); ++i) logits[i] = kNegInf;
    };
    logits[notimestamps_] = kNegInf;

    std::span<const int> seq = tokens.size() > static_cast<size_t>(begin_)
                                   ? tokens.subspan(begin_)
                                   : std::span<const int>();
    const size_t n = seq.size();
    const bool last_ts = n >= 1 && seq[n - 1] >= ts_begin_;
    const bool penultimate_ts = n < 2 || seq[n - 2] >= ts_begin_;
    if (last_ts) {
        if (penultimate_ts)
            mask(ts_begin_, V);  // a pair just closed: text must follow
        else
            mask(0, eot_);  // a segment is open: its end timestamp (or eot) must follow
    }
    int last_timestamp = -1;
    for (int t : seq)
        if (t >= ts_begin_) last_timestamp = t;
    if (last_timestamp >= 0) {
        // Timestamps never decrease; a closed pair forbids repeating its end.
        int limit = (last_ts && !penultimate_ts) ? last_timestamp : last_timestamp + 1;
        mask(ts_begin_, limit);
    }
    if (static_cast<int>(tokens.size()) == begin_) {
        mask(0, ts_begin_);
        if (max_initial_ >= 0) mask(ts_begin_ + max_initial_ + 1, V);
    }
    // Force a timestamp when their total probability beats every single text token.
    std::vector<float> lp(logits.begin(), logits.end());
    log_softmax(lp);
    double ts_lp = logsumexp(std::span<const float>(lp).subspan(ts_begin_));
    float max_text = kNegInf;
    for (int i = 0; i < ts_begin_; ++i) max_text = std::max(max_text, lp[i]);
    if (ts_lp > max_text) mask(0, ts_begin_);
}

void EndAtAudioEnd::apply(std::span<float> logits, std::span<const int> tokens, int) const {
    if (tokens.size() <= static_cast<size_t>(begin_)) return;
    const int last = tokens.back();
    if (last < ts_begin_ || last - ts_begin_ < last_step_) return;
    // Forced, whatever earlier rules did to end-of-text (the timestamp rules may have masked it
    // to force another timestamp).
    for (float& l : logits) l = kNegInf;
    logits[eot_] = 0.0f;
}

}  // namespace parlance::whisper
