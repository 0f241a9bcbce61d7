// decode_audio and resampling for builds without FFmpeg (cmake -DPARLANCE_FFMPEG=OFF), e.g. GPU
// machines that lack FFmpeg's development packages. Only 16-bit integer PCM WAV is decoded, and
// resampling is the identity: a rate change throws Error(Unsupported) instead of resampling.
#include "audio/decode.h"

#if !PARLANCE_WITH_FFMPEG

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "audio/rate_check.h"
#include "audio/wav.h"
#include "core/error.h"

namespace parlance {
namespace {

using audio_detail::check_rate;

constexpr const char* kNoFfmpeg = "this build has no FFmpeg (PARLANCE_FFMPEG=OFF)";

uint32_t le32(const uint8_t* p) {
    return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
uint16_t le16(const uint8_t* p) {
    return static_cast<uint16_t>(p[0] | (p[1] << 8));
}

// Throws Error(Unsupported) for input this build cannot decode but an FFmpeg build could: anything
// that is not RIFF/WAVE, and WAVs whose fmt chunk names another sample format than 16-bit integer.
// Malformed WAVs are left to read_wav, which reports them as InvalidAudio.
void require_pcm16_wav(std::span<const uint8_t> bytes) {
    if (bytes.size() < 12 || std::memcmp(bytes.data(), "RIFF", 4) != 0 ||
        std::memcmp(bytes.data() + 8, "WAVE", 4) != 0) {
        throw Error(ErrorKind::Unsupported, std::string(kNoFfmpeg) + ": only 16-bit PCM WAV audio is accepted");
    }
    size_t pos = 12;
    while (pos + 8 <= bytes.size()) {
        const uint8_t* chunk = bytes.data() + pos;
        const uint64_t size = le32(chunk + 4);
        const size_t body = pos + 8;
        if (std::memcmp(chunk, "fmt ", 4) == 0) {
            if (bytes.size() - body < 16) return;
            const uint8_t* f = bytes.data() + body;
            uint16_t tag = le16(f);
            if (tag == 0xFFFE && size >= 40 && bytes.size() - body >= 40) tag = le16(f + 24);
            const int bits = le16(f + 14);
            if (tag != 1 || bits != 16) {
                throw Error(ErrorKind::Unsupported, std::string(kNoFfmpeg) +
                                                        ": only 16-bit PCM WAV is accepted (format tag " +
                                                        std::to_string(tag) + ", " + std::to_string(bits) + " bits)");
            }
            return;
        }
        pos = body + static_cast<size_t>(size) + (size & 1);
        if (pos < body) return;
    }
}

}  // namespace

std::vector<float> decode_audio(std::span<const uint8_t> bytes, const DecodeOptions& opts) {
    check_rate(opts.sample_rate, "output sample rate", ErrorKind::InvalidArgument);
    if (!(opts.max_seconds > 0.0)) throw Error(ErrorKind::InvalidArgument, "max_seconds must be > 0");
    if (bytes.empty()) throw Error(ErrorKind::InvalidAudio, "audio input is empty");
    require_pcm16_wav(bytes);
    const WavAudio wav = read_wav(bytes);
    const size_t channels = static_cast<size_t>(wav.channels);
    const size_t frames = wav.samples.size() / channels;
    if (frames == 0) throw Error(ErrorKind::InvalidAudio, "no audio samples could be decoded");
    if (static_cast<double>(frames) / wav.sample_rate > opts.max_seconds) {
        throw Error(ErrorKind::TooLarge, "the audio is longer than the limit of " +
                                             std::to_string(static_cast<long long>(opts.max_seconds)) + " s");
    }
    if (opts.on_start) opts.on_start(static_cast<double>(frames) / wav.sample_rate);
    std::vector<float> mono(frames);
    for (size_t i = 0; i < frames; ++i) {
        float sum = 0.0f;
        for (size_t c = 0; c < channels; ++c) sum += wav.samples[i * channels + c];
        mono[i] = std::clamp(sum / static_cast<float>(channels), -1.0f, 1.0f);
    }
    std::vector<float> out =
        wav.sample_rate == opts.sample_rate ? std::move(mono) : resample(mono, wav.sample_rate, opts.sample_rate);
    if (opts.on_progress) opts.on_progress(out.size());
    return out;
}

// Without FFmpeg the file is decoded whole when opened and handed out in pieces.
struct AudioStreamDecoder::Impl {
    std::vector<float> pcm;
    size_t next = 0;
    size_t total = 0;
    int rate = 0;
};

AudioStreamDecoder::AudioStreamDecoder(std::span<const uint8_t> bytes, const DecodeOptions& opts)
    : impl_(std::make_unique<Impl>()) {
    impl_->pcm = decode_audio(bytes, opts);
    impl_->total = impl_->pcm.size();
    impl_->rate = opts.sample_rate;
}

AudioStreamDecoder::~AudioStreamDecoder() = default;

double AudioStreamDecoder::declared_seconds() const {
    return static_cast<double>(impl_->total) / impl_->rate;
}

size_t AudioStreamDecoder::expected_samples() const {
    return impl_->total;
}

bool AudioStreamDecoder::decode(size_t min_samples, std::vector<float>* out) {
    Impl& s = *impl_;
    const size_t n = std::min(min_samples, s.pcm.size() - s.next);
    out->insert(out->end(), s.pcm.begin() + static_cast<std::ptrdiff_t>(s.next),
                s.pcm.begin() + static_cast<std::ptrdiff_t>(s.next + n));
    s.next += n;
    if (s.next < s.pcm.size()) return true;
    std::vector<float>().swap(s.pcm);
    s.next = 0;
    return false;
}

struct Resampler::Impl {};

Resampler::Resampler(int from_rate, int to_rate) {
    check_rate(from_rate, "resampler input rate", ErrorKind::InvalidArgument);
    check_rate(to_rate, "resampler output rate", ErrorKind::InvalidArgument);
    if (from_rate != to_rate) {
        throw Error(ErrorKind::Unsupported, std::string(kNoFfmpeg) + ": cannot resample " + std::to_string(from_rate) +
                                                " Hz to " + std::to_string(to_rate) + " Hz");
    }
}

Resampler::~Resampler() = default;

void Resampler::push(std::span<const float> pcm, std::vector<float>* out) {
    out->insert(out->end(), pcm.begin(), pcm.end());
}

void Resampler::flush(std::vector<float>*) {}

std::vector<float> resample(std::span<const float> pcm, int from_rate, int to_rate) {
    Resampler check(from_rate, to_rate);  // throws unless the rates are equal and valid
    return {pcm.begin(), pcm.end()};
}

}  // namespace parlance

#endif  // !PARLANCE_WITH_FFMPEG
