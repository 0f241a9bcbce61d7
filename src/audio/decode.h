// Audio decoding (any container/codec FFmpeg knows, from memory), raw PCM/G.711, and resampling.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

namespace parlance {

struct DecodeOptions {
    // Output sample rate in Hz, in [1000, 768000]. Whisper-family models want 16000.
    int sample_rate = 16000;
    // Longest accepted duration in seconds. Decoding stops with Error(TooLarge) as soon as the decoded
    // audio passes this, so a huge file costs at most this much work and memory.
    double max_seconds = 3.0 * 3600.0;
    // Called once the container is read and before any audio is decoded, with the duration the
    // file declares in seconds, or -1 when it declares none that can be trusted (none at all, or
    // one FFmpeg estimated from the bit rate). A declared duration over max_seconds is refused
    // before this, without decoding. May throw to refuse the file (a caller's memory budget).
    std::function<void(double declared_seconds)> on_start;
    // Called as the output grows (about every second of audio) with the samples decoded so far;
    // may throw to stop decoding (a cancelled request, a memory budget).
    std::function<void(size_t samples)> on_progress;
    // Called as the demuxer's reads pass each 4 MiB of the input, with the offset reached: a
    // caller that maps a file may drop the pages before it (a demuxer that seeks back reads
    // them again), so the bytes and the decoded audio are not both resident at the peak.
    std::function<void(size_t offset)> on_read;
};

// Decodes a complete audio file held in memory: wav, flac, mp3/mpga, mp4/m4a (AAC), ogg (vorbis,
// opus), webm/mkv, aac, aiff, caf and a few more. The best audio stream is downmixed to mono (channel
// average) and resampled with libswresample. Returns float32 samples at opts.sample_rate, clamped
// to [-1, 1]; non-finite samples (possible in float sources) become 0.
// Throws Error(InvalidAudio) for empty input, unrecognised bytes, no audio stream, sample rates
// outside [1000, 768000] Hz, channel counts outside [1, 64], or input that decodes to no samples.
// Throws Error(TooLarge) when the audio is longer than opts.max_seconds: before decoding when the
// container declares such a duration, else the moment the decoded audio passes the limit.
// Memory: the output is reserved once (the declared duration, else the limit) and filled in place,
// so the peak is the decoded PCM itself plus FFmpeg's bounded state, never a second copy.
// A truncated or partly corrupt file that still yields audio returns what decoded (packets that fail
// to decode are skipped; reading stops at the first demuxer error). Only the given bytes are read:
// demuxers that would open other files or URLs (playlists, concat) are not allowed.
// Thread-safe (no shared state besides FFmpeg's log level, set once to quiet).
std::vector<float> decode_audio(std::span<const uint8_t> bytes, const DecodeOptions& opts = {});

// decode_audio one piece at a time, for readers that go through the audio front to back and
// should not hold all of it decoded (a two-hour file is 460 MB of 16 kHz float). Opening checks
// what decode_audio checks before decoding (format, stream, declared duration; on_start is
// called); decode() then appends the next samples, with decode_audio's clamping, limits and
// errors (TooLarge past max_seconds, InvalidAudio when the whole file yields no sample).
// Concatenating every decode() output equals decode_audio(bytes, opts). `bytes` must outlive the
// decoder. Not thread-safe; one per file.
class AudioStreamDecoder {
public:
    AudioStreamDecoder(std::span<const uint8_t> bytes, const DecodeOptions& opts = {});
    ~AudioStreamDecoder();
    AudioStreamDecoder(const AudioStreamDecoder&) = delete;
    AudioStreamDecoder& operator=(const AudioStreamDecoder&) = delete;

    // The duration the container declares in seconds, -1 when none that can be trusted.
    double declared_seconds() const;
    // What the whole output is expected to hold (the declared duration, else the limit), for a
    // caller that reserves its buffer once.
    size_t expected_samples() const;
    // Appends at least min_samples more samples to *out, fewer only when the audio ends; returns
    // false once it has ended (no sample will follow; the last ones may be in this call's output).
    bool decode(size_t min_samples, std::vector<float>* out);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// Everything `decoder` has left, in one buffer reserved once (what the decoder expects) and filled
// in place: decode_audio after the opening.
std::vector<float> decode_rest(AudioStreamDecoder& decoder);

// Headerless sample encodings accepted by decode_pcm.
enum class PcmEncoding {
    S16LE,  // signed 16-bit little-endian, 2 bytes per sample
    MuLaw,  // ITU-T G.711 mu-law, 1 byte per sample
    ALaw,   // ITU-T G.711 A-law, 1 byte per sample
};

// Decodes headerless mono samples at sample_rate (in [1000, 768000] Hz) to float32 mono at out_rate.
// Integer samples map to value / 32768 (G.711 via its 16-bit linear expansion, so mu-law peaks at
// +-32124/32768 and A-law at +-32256/32768). Throws Error(InvalidAudio) for an odd byte count with
// S16LE and Error(InvalidArgument) for a rate outside the range. Empty input gives empty output.
std::vector<float> decode_pcm(std::span<const uint8_t> bytes, PcmEncoding encoding, int sample_rate,
                              int out_rate = 16000);

// G.711 expansions of one code to 16-bit linear PCM (exposed for tests and streaming).
int16_t mulaw_to_linear(uint8_t code);
int16_t alaw_to_linear(uint8_t code);

// Resamples mono float32 audio from from_rate to to_rate (Hz, each in [1000, 768000]) with
// libswresample's default filter; the output has about n * to_rate / from_rate samples (filter
// delay compensated, tail flushed). Returns a copy when the rates are equal.
std::vector<float> resample(std::span<const float> pcm, int from_rate, int to_rate);

// Stateful mono float32 resampler for streams: push() chunks as they arrive, flush() at the end.
// Concatenating all outputs equals resample() of the concatenated input. Not thread-safe; one per
// stream.
class Resampler {
public:
    Resampler(int from_rate, int to_rate);
    ~Resampler();
    Resampler(const Resampler&) = delete;
    Resampler& operator=(const Resampler&) = delete;

    // Appends the resampled output for this chunk to *out (possibly nothing for tiny chunks).
    void push(std::span<const float> pcm, std::vector<float>* out);
    // Drains the filter's buffered tail into *out; the resampler must not be pushed to afterwards.
    void flush(std::vector<float>* out);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace parlance
