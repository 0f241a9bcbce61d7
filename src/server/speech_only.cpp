// keep_speech and the time mapping (see speech_only.h).
#include "server/speech_only.h"

#include <algorithm>
#include <cmath>

namespace parlance::server {

namespace {

constexpr int kVadRate = 16000;
constexpr auto kGapSamples = static_cast<size_t>(SpeechOnly::kGapSeconds * kVadRate);

// The pieces of speech the probabilities of `total` samples hold (windows of `window` samples),
// where each lands back to back.
SpeechOnly plan_speech(std::span<const float> probs, int64_t window, size_t total, const VadChunking& c) {
    SpeechSegmentOptions o;
    o.threshold = c.threshold;
    o.min_silence_ms = c.silence_duration_ms;
    o.speech_pad_ms = c.prefix_padding_ms;
    SpeechOnly s;
    size_t at = 0;  // samples of the back-to-back buffer so far
    for (const SpeechSegment& seg : speech_segments(probs, window, kVadRate, total, o)) {
        const auto lo = std::min(total, static_cast<size_t>(std::llround(seg.start * kVadRate)));
        const auto hi = std::min(total, static_cast<size_t>(std::llround(seg.end * kVadRate)));
        if (hi <= lo) continue;
        if (!s.pieces.empty()) at += kGapSamples;
        s.pieces.push_back({static_cast<double>(at) / kVadRate, static_cast<double>(lo) / kVadRate,
                            static_cast<double>(hi - lo) / kVadRate, lo, hi});
        at += hi - lo;
    }
    return s;
}

}  // namespace

SpeechOnly keep_speech(std::span<const float> pcm, VoiceActivityModel& vad, const VadChunking& c) {
    SpeechOnly s = plan_speech(vad.probabilities(pcm, kVadRate), vad.window_samples(kVadRate), pcm.size(), c);
    for (const SpeechOnly::Piece& p : s.pieces) {
        if (!s.pcm.empty()) s.pcm.insert(s.pcm.end(), kGapSamples, 0.0f);
        s.pcm.insert(s.pcm.end(), pcm.begin() + static_cast<std::ptrdiff_t>(p.begin),
                     pcm.begin() + static_cast<std::ptrdiff_t>(p.end));
    }
    return s;
}

SpeechOnly find_speech(PcmSource& audio, VoiceActivityModel& vad, const VadChunking& c) {
    const std::vector<float> probs = vad.probabilities(audio, kVadRate);
    return plan_speech(probs, vad.window_samples(kVadRate), audio.decoded(), c);
}

std::shared_ptr<PcmSource> speech_source(std::shared_ptr<PcmSource> audio, const SpeechOnly& plan) {
    struct Reader {
        std::shared_ptr<PcmSource> audio;
        std::vector<std::pair<size_t, size_t>> ranges;
        size_t piece = 0, pos = 0, gap = 0;
    };
    auto r = std::make_shared<Reader>();
    r->audio = std::move(audio);
    double seconds = 0.0;
    for (const SpeechOnly::Piece& p : plan.pieces) {
        r->ranges.emplace_back(p.begin, p.end);
        seconds = p.at + p.seconds;
    }
    auto produce = [r](size_t want, std::vector<float>* out) {
        size_t made = 0;
        while (made < want && r->piece < r->ranges.size()) {
            if (r->gap > 0) {  // the pause between two pieces
                const size_t n = std::min(r->gap, want - made);
                out->insert(out->end(), n, 0.0f);
                r->gap -= n;
                made += n;
                continue;
            }
            const auto [lo, hi] = r->ranges[r->piece];
            r->pos = std::max(r->pos, lo);
            const size_t stop = std::min(hi, r->pos + (want - made));
            const size_t have = r->audio->fill(stop);
            if (have > r->pos) {
                const std::span<const float> v = r->audio->view(r->pos, have);
                out->insert(out->end(), v.begin(), v.end());
                made += have - r->pos;
                r->pos = have;
                r->audio->release(r->pos);
            }
            if (r->pos >= hi || have < stop) {  // the piece is done (or the audio ended early)
                ++r->piece;
                if (r->piece < r->ranges.size()) r->gap = kGapSamples;
            }
        }
        return made > 0;
    };
    return std::make_shared<PcmSource>(std::move(produce), seconds);
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
