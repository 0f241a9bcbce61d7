// Speech segments from a voice-activity model's probabilities (see voice_activity.h).
#include "models/voice_activity.h"

#include <algorithm>
#include <utility>

namespace parlance {

std::vector<SpeechSegment> speech_segments(std::span<const float> probs, int64_t window, int sample_rate,
                                           size_t total_samples, const SpeechSegmentOptions& o) {
    const float neg = o.neg_threshold >= 0.0f ? o.neg_threshold : std::max(o.threshold - 0.15f, 0.01f);
    const int64_t min_speech = static_cast<int64_t>(sample_rate) * o.min_speech_ms / 1000;
    const int64_t min_silence = static_cast<int64_t>(sample_rate) * o.min_silence_ms / 1000;
    const int64_t pad = static_cast<int64_t>(sample_rate) * o.speech_pad_ms / 1000;
    const int64_t total = static_cast<int64_t>(total_samples);
    // Hysteresis over the windows, in samples: speech starts at a window >= threshold and ends at
    // the first window < neg once the pause has lasted min_silence.
    std::vector<std::pair<int64_t, int64_t>> spans;
    bool in_speech = false;
    int64_t start = 0, pause_from = -1;
    for (size_t i = 0; i < probs.size(); ++i) {
        const int64_t at = static_cast<int64_t>(i) * window;
        if (probs[i] >= o.threshold) pause_from = -1;
        if (!in_speech) {
            if (probs[i] >= o.threshold) {
                in_speech = true;
                start = at;
            }
            continue;
        }
        if (probs[i] < neg) {
            if (pause_from < 0) pause_from = at;
            if (at - pause_from < min_silence) continue;
            if (pause_from - start > min_speech) spans.emplace_back(start, pause_from);
            in_speech = false;
            pause_from = -1;
        }
    }
    if (in_speech && total - start > min_speech) spans.emplace_back(start, total);
    // Padding: pad both sides, or split the gap between neighbours closer than two pads.
    for (size_t i = 0; i < spans.size(); ++i) {
        if (i == 0) spans[i].first = std::max<int64_t>(0, spans[i].first - pad);
        if (i + 1 < spans.size()) {
            const int64_t gap = spans[i + 1].first - spans[i].second;
            if (gap < 2 * pad) {
                spans[i].second += gap / 2;
                spans[i + 1].first = std::max<int64_t>(0, spans[i + 1].first - gap / 2);
            } else {
                spans[i].second = std::min(total, spans[i].second + pad);
                spans[i + 1].first = std::max<int64_t>(0, spans[i + 1].first - pad);
            }
        } else {
            spans[i].second = std::min(total, spans[i].second + pad);
        }
    }
    std::vector<SpeechSegment> out;
    for (const auto& [s, e] : spans)
        out.push_back({static_cast<double>(s) / sample_rate, static_cast<double>(e) / sample_rate});
    return out;
}

}  // namespace parlance
