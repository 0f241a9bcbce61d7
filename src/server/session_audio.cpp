// A live session's audio (see session_audio.h).
#include "server/session_audio.h"

#include <algorithm>

namespace parlance::server {

void SessionAudio::append(std::span<const float> pcm) {
    samples_.insert(samples_.end(), pcm.begin(), pcm.end());
    total_ += static_cast<int64_t>(pcm.size());
}

std::vector<float> SessionAudio::slice(int64_t from, int64_t to) const {
    const int64_t end = origin_ + static_cast<int64_t>(samples_.size());
    from = std::clamp(from, origin_, end);
    to = std::clamp(to, from, end);
    return {samples_.begin() + (from - origin_), samples_.begin() + (to - origin_)};
}

void SessionAudio::drop_before(int64_t keep) {
    keep = std::clamp(keep, origin_, total_);
    const int64_t drop = keep - origin_;
    if (drop < kRate) return;
    samples_.erase(samples_.begin(), samples_.begin() + drop);
    origin_ = keep;
}

}  // namespace parlance::server
