// The audio of one transcription as its model reads it: front to back, a window or a piece at a
// time. Either all of it in memory (a caller's buffer), or decoded from a file's bytes as the
// reader advances and dropped behind it, so a two-hour file costs what its current window does
// instead of 460 MB of decoded float.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "audio/decode.h"

namespace parlance {

class PcmSource {
public:
    // The caller's samples, read in place: they must outlive the source.
    explicit PcmSource(std::span<const float> pcm);
    // Samples decoded on demand by `decoder` (opened on bytes that outlive it; `bytes_owner`,
    // when given, is what holds them: the source keeps it until the decoder is gone).
    explicit PcmSource(std::unique_ptr<AudioStreamDecoder> decoder, std::shared_ptr<const void> bytes_owner = {});
    // Samples made on demand by `produce`, called as AudioStreamDecoder::decode is: append about
    // `want` samples (at least one) to *out and return true, or return false at the end (e.g. the
    // speech of a file picked out as it is decoded). `declared_seconds`: the expected length, for
    // seconds_hint (0: unknown).
    using Producer = std::function<bool(size_t want, std::vector<float>* out)>;
    PcmSource(Producer produce, double declared_seconds);

    PcmSource(const PcmSource&) = delete;
    PcmSource& operator=(const PcmSource&) = delete;

    // Makes samples up to `end` readable, decoding as needed (at least a second at a time), and
    // returns how many the audio has up to there: `end`, or fewer when the audio ends before it
    // (then ended() is true and that is the length). Decoding errors propagate (TooLarge past the
    // decoder's limit, InvalidAudio for a file without a single sample).
    size_t fill(size_t end);
    // Whether the whole audio has been decoded (always true in memory).
    bool ended() const { return ended_; }
    // Samples decoded so far: the audio's length once ended().
    size_t decoded() const { return base_ + buffer_.size() + memory_.size(); }
    // The length when known, else the declared one (the container's duration; 0 when none):
    // for progress reports, never for decisions.
    double seconds_hint(int sample_rate = 16000) const;

    // Samples [begin, end): begin at or after the released point, end at most decoded(). Valid
    // until the next fill() or release().
    std::span<const float> view(size_t begin, size_t end) const;
    // The reader will not ask for samples before `position` again; their memory may go.
    void release(size_t position);
    // Samples held in memory now (tests; a decoding source's bound).
    size_t held() const { return buffer_.size(); }

private:
    std::shared_ptr<const void> bytes_owner_;  // declared first: destroyed after the decoder
    std::span<const float> memory_;
    std::unique_ptr<AudioStreamDecoder> decoder_;
    Producer produce_;
    double declared_seconds_ = 0.0;
    std::vector<float> buffer_;  // decoded samples [base_, base_ + buffer_.size())
    size_t base_ = 0;
    size_t released_ = 0;
    bool ended_ = true;
};

}  // namespace parlance
