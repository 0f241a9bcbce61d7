// Audio read front to back (see pcm_source.h).
#include "audio/pcm_source.h"

#include <algorithm>

#include "core/error.h"

namespace parlance {
namespace {

// The decoder is asked for at least this much at a time (a second at 16 kHz): one call per
// window or piece rather than per packet.
constexpr size_t kDecodeChunk = 16000;

}  // namespace

PcmSource::PcmSource(std::span<const float> pcm) : memory_(pcm) {}

PcmSource::PcmSource(std::unique_ptr<AudioStreamDecoder> decoder, std::shared_ptr<const void> bytes_owner)
    : bytes_owner_(std::move(bytes_owner)), decoder_(std::move(decoder)), ended_(false) {}

PcmSource::PcmSource(Producer produce, double declared_seconds)
    : produce_(std::move(produce)), declared_seconds_(declared_seconds), ended_(false) {}

size_t PcmSource::fill(size_t end) {
    while (!ended_ && decoded() < end) {
        const size_t want = std::max(kDecodeChunk, end - decoded());
        if (!(decoder_ ? decoder_->decode(want, &buffer_) : produce_(want, &buffer_))) {
            ended_ = true;
            decoder_.reset();
            produce_ = nullptr;
        }
    }
    return std::min(end, decoded());
}

double PcmSource::seconds_hint(int sample_rate) const {
    if (ended_) return static_cast<double>(decoded()) / sample_rate;
    return decoder_ ? std::max(0.0, decoder_->declared_seconds()) : declared_seconds_;
}

std::span<const float> PcmSource::view(size_t begin, size_t end) const {
    if (begin > end || begin < released_ || end > decoded())
        throw Error(ErrorKind::Internal, "audio samples " + std::to_string(begin) + ".." + std::to_string(end) +
                                             " are not held (released up to " + std::to_string(released_) +
                                             ", decoded " + std::to_string(decoded()) + ")");
    if (!memory_.empty()) return memory_.subspan(begin, end - begin);
    return std::span<const float>(buffer_).subspan(begin - base_, end - begin);
}

void PcmSource::release(size_t position) {
    released_ = std::max(released_, std::min(position, decoded()));
    if (!memory_.empty()) return;
    // Dropped when they are half the buffer: each sample is moved at most once on average.
    const size_t drop = released_ - base_;
    if (drop == 0 || drop < buffer_.size() / 2) return;
    buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(drop));
    base_ = released_;
    if (buffer_.capacity() > 4 * std::max(buffer_.size(), kDecodeChunk)) buffer_.shrink_to_fit();
}

}  // namespace parlance
