// A live session's audio at 16 kHz, by session sample: what arrived, kept from the first sample
// anything may still need (the open item, an uncommitted buffer, the prefix padding a next speech
// start reaches back into) to the newest, so memory stays flat on long streams.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace parlance::server {

class SessionAudio {
public:
    static constexpr int kRate = 16000;

    void append(std::span<const float> pcm);
    // Samples [from, to), clamped to what is kept.
    std::vector<float> slice(int64_t from, int64_t to) const;
    // Nothing before `keep` is needed any more. Erasing from the front costs a copy of what is
    // kept, so samples go once a second or more can.
    void drop_before(int64_t keep);

    int64_t total() const { return total_; }    // samples received so far
    int64_t origin() const { return origin_; }  // the first sample kept
    size_t kept() const { return samples_.size(); }

private:
    std::vector<float> samples_;  // samples_[0] is session sample origin_
    int64_t origin_ = 0, total_ = 0;
};

}  // namespace parlance::server
