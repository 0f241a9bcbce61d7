// Server VAD's turn detection (server/turn_detector.h) over scripted probabilities: a fake voice-
// activity model whose probability for a window is the window's first sample, so each test's audio
// is its script. Speech starts at the threshold (reaching back the prefix padding, never before
// the floor), a window under threshold - 0.15 starts a pause, the pause's length ends the speech,
// and windows split across pushes count once.
#include <gtest/gtest.h>

#include <vector>

#include "server/turn_detector.h"

namespace parlance::server {
namespace {

class ScriptedStream final : public VoiceActivityStream {
public:
    float push(std::span<const float> window) override { return window.front(); }
    void reset() override {}
    int sample_rate() const override { return 16000; }
};

class ScriptedVad final : public VoiceActivityModel {
public:
    int window_samples(int) const override { return 512; }
    std::vector<float> probabilities(std::span<const float>, int) override { return {}; }
    std::vector<float> probabilities(PcmSource&, int) override { return {}; }
    std::unique_ptr<VoiceActivityStream> stream(int) override { return std::make_unique<ScriptedStream>(); }
};

// One window of each probability, in order.
std::vector<float> windows(std::initializer_list<float> probabilities) {
    std::vector<float> pcm;
    for (float p : probabilities) pcm.insert(pcm.end(), TurnDetector::kWindow, p);
    return pcm;
}

struct Seen {
    TurnDetector::Turn turn;
    int64_t start, end, pause_start;
    bool operator==(const Seen&) const = default;
};

TEST(TurnDetector, SpeechStartsPausesAndStopsWithHysteresis) {
    ScriptedVad vad;
    TurnDetector turns(vad);
    RealtimeSettings s;
    s.threshold = 0.5f;
    s.prefix_padding_ms = 40;    // 640 samples
    s.silence_duration_ms = 96;  // three windows
    using T = TurnDetector::Turn;
    constexpr int64_t W = TurnDetector::kWindow;
    std::vector<Seen> seen;
    auto record = [&](const TurnDetector::Window& w) { seen.push_back({w.turn, w.start, w.end, w.pause_start}); };
    // Windows 0-1 quiet, 2 at 0.45 (under the threshold: no start), 3 speech.
    std::vector<float> pcm = windows({0.1f, 0.1f, 0.45f, 0.9f});
    int64_t total = static_cast<int64_t>(pcm.size());
    turns.push(pcm, total, 0, s, record);
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0], (Seen{T::SpeechStarted, 3 * W - 640, 4 * W, -1}));
    EXPECT_TRUE(turns.speaking());
    // Speaking: 0.4 is above threshold - 0.15 (no pause); 0.2 starts one, 0.6 ends it; then a
    // pause of three windows stops the speech, in a push cut mid-window.
    seen.clear();
    pcm = windows({0.4f, 0.2f, 0.6f, 0.2f, 0.1f, 0.1f});
    const size_t cut = 2 * W + 100;
    turns.push({pcm.data(), cut}, total + static_cast<int64_t>(cut), 0, s, record);
    EXPECT_EQ(turns.pause_from(), 5 * W);
    turns.push({pcm.data() + cut, pcm.size() - cut}, total + static_cast<int64_t>(pcm.size()), 0, s, record);
    total += static_cast<int64_t>(pcm.size());
    const std::vector<Seen> want = {
        {T::None, 0, 5 * W, -1},    {T::None, 0, 6 * W, 5 * W}, {T::None, 0, 7 * W, -1},
        {T::None, 0, 8 * W, 7 * W}, {T::None, 0, 9 * W, -1},    {T::SpeechStopped, 7 * W, 10 * W, -1},
    };
    EXPECT_EQ(seen, want);
    EXPECT_FALSE(turns.speaking());
    EXPECT_EQ(turns.pause_from(), -1);
    // Quiet windows say nothing; speech again starts no earlier than the floor.
    seen.clear();
    pcm = windows({0.1f, 0.7f});
    total += static_cast<int64_t>(pcm.size());
    turns.push(pcm, total, 11 * W + 300, s, record);
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0], (Seen{T::SpeechStarted, 11 * W + 300, 12 * W, -1}));
    // A manual commit ends the speech: the next window above the threshold starts anew.
    turns.end_speech();
    seen.clear();
    pcm = windows({0.8f});
    total += static_cast<int64_t>(pcm.size());
    turns.push(pcm, total, 0, s, record);
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0].turn, T::SpeechStarted);
}

}  // namespace
}  // namespace parlance::server
