// keep_speech and the time mapping (see speech_only.h).
#include "server/speech_only.h"

#include <algorithm>
#include <cmath>

namespace parlance::server {

SpeechOnly keep_speech(std::span<const float> pcm, silero_vad::SileroVad& vad, const VadChunking& c) {
    constexpr int kRate = 16000;
    silero_vad::SegmentOptions o;
    o.threshold = c.threshold;
    o.min_silence_ms = c.silence_duration_ms;
    o.speech_pad_ms = c.prefix_padding_ms;
    const std::vector<float> probs = vad.probabilities(pcm, kRate);
    SpeechOnly s;
    const auto gap = static_cast<size_t>(SpeechOnly::kGapSeconds * kRate);
    for (const silero_vad::SpeechSegment& seg : silero_vad::speech_segments(probs, kRate, pcm.size(), o)) {
        const auto lo = std::min(pcm.size(), static_cast<size_t>(std::llround(seg.start * kRate)));
        const auto hi = std::min(pcm.size(), static_cast<size_t>(std::llround(seg.end * kRate)));
        if (hi <= lo) continue;
        if (!s.pcm.empty()) s.pcm.insert(s.pcm.end(), gap, 0.0f);
        s.pieces.push_back({static_cast<double>(s.pcm.size()) / kRate, static_cast<double>(lo) / kRate,
                            static_cast<double>(hi - lo) / kRate});
        s.pcm.insert(s.pcm.end(), pcm.begin() + static_cast<std::ptrdiff_t>(lo),
                     pcm.begin() + static_cast<std::ptrdiff_t>(hi));
    }
    return s;
}

double SpeechOnly::original_time(double t) const {
    if (pieces.empty()) return t;
    // The last piece that starts at or before t.
    auto it = std::upper_bound(pieces.begin(), pieces.end(), t, [](double x, const Piece& p) { return x < p.at; });
    if (it == pieces.begin()) return pieces.front().from;
    const Piece& p = *std::prev(it);
    return p.from + std::min(t - p.at, p.seconds);
}

void map_to_original(Transcript& t, const SpeechOnly& s) {
    for (Segment& seg : t.segments) {
        seg.start = s.original_time(seg.start);
        seg.end = std::max(seg.start, s.original_time(seg.end));
        for (Word& w : seg.words) {
            w.start = s.original_time(w.start);
            w.end = std::max(w.start, s.original_time(w.end));
        }
    }
}

}  // namespace parlance::server
