// Server VAD's turn detection (see turn_detector.h).
#include "server/turn_detector.h"

#include <algorithm>

namespace parlance::server {

void TurnDetector::push(std::span<const float> pcm, int64_t total, int64_t floor, const RealtimeSettings& settings,
                        const std::function<void(const Window&)>& on_window) {
    if (!stream_) {
        stream_ = vad_.stream(16000);
        next_ = total - static_cast<int64_t>(pcm.size());
    }
    pending_.insert(pending_.end(), pcm.begin(), pcm.end());
    const float neg = std::max(settings.threshold - 0.15f, 0.01f);
    size_t used = 0;
    while (pending_.size() - used >= static_cast<size_t>(kWindow)) {
        const float p = stream_->push({pending_.data() + used, static_cast<size_t>(kWindow)});
        const int64_t at = next_;
        used += kWindow;
        next_ += kWindow;
        Window w;
        w.end = next_;
        if (!speaking_) {
            if (p >= settings.threshold) {
                speaking_ = true;
                silence_from_ = -1;
                w.turn = Turn::SpeechStarted;
                w.start = std::max<int64_t>({0, at - static_cast<int64_t>(settings.prefix_padding_ms) * 16, floor});
            }
            if (w.turn != Turn::None) on_window(w);
            continue;
        }
        if (p >= neg) {
            silence_from_ = -1;
        } else if (silence_from_ < 0) {
            silence_from_ = at;
            w.pause_start = at;
        }
        if (silence_from_ >= 0 && next_ - silence_from_ >= static_cast<int64_t>(settings.silence_duration_ms) * 16) {
            speaking_ = false;
            w.turn = Turn::SpeechStopped;
            w.start = silence_from_;
        }
        on_window(w);
    }
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(used));
}

}  // namespace parlance::server
