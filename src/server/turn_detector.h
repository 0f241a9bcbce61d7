// Server VAD's turn detection for a live session: its 16 kHz audio in Silero's 512-sample windows
// through the voice-activity model, and OpenAI's hysteresis over each window's speech
// probability: speech starts at `threshold` (the item reaching back `prefix_padding_ms`), a window
// under threshold - 0.15 starts a pause, and `silence_duration_ms` of pause ends the speech.
// It says what each window means; the session (realtime_session) decides what to do about it.
// Not thread-safe: the session's strand owns it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "models/voice_activity.h"
#include "server/realtime_protocol.h"

namespace parlance::server {

class TurnDetector {
public:
    static constexpr int64_t kWindow = 512;  // samples at 16 kHz

    // What one window meant.
    enum class Turn {
        None,           // no turn (speaking goes on, or silence does)
        SpeechStarted,  // Window::start: where the item starts (padding included)
        SpeechStopped,  // the pause lasted: the speech ended at Window::start, the item ends at Window::end
    };
    struct Window {
        Turn turn = Turn::None;
        int64_t start = 0;         // see Turn
        int64_t end = 0;           // the session sample after the window
        int64_t pause_start = -1;  // speaking, and a pause starts with this window: its first sample
    };

    explicit TurnDetector(VoiceActivityModel& vad) : vad_(vad) {}

    // The session's next samples (ending at session sample `total`, the first ever pushed fixing
    // where windows start). `floor`: the earliest sample an item may reach back to. Calls
    // on_window for every whole window, in order, with what it meant under `settings`.
    void push(std::span<const float> pcm, int64_t total, int64_t floor, const RealtimeSettings& settings,
              const std::function<void(const Window&)>& on_window);

    bool speaking() const { return speaking_; }
    // The first window of the current pause while speaking, else -1.
    int64_t pause_from() const { return speaking_ ? silence_from_ : -1; }
    // The speech going on ends now (a manual commit or clear, a shutdown): the next window above
    // threshold starts new speech.
    void end_speech() { speaking_ = false; }

private:
    VoiceActivityModel& vad_;
    std::unique_ptr<VoiceActivityStream> stream_;
    std::vector<float> pending_;  // samples not yet a whole window
    int64_t next_ = 0;            // session sample of the next window's start
    bool speaking_ = false;
    int64_t silence_from_ = -1;  // first silent window while speaking
};

}  // namespace parlance::server
