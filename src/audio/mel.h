// Whisper log-mel spectrogram matching transformers' WhisperFeatureExtractor (numpy path) to <= 1e-4.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace parlance {

// Whisper's fixed front-end constants (16 kHz audio, 25 ms window, 10 ms hop, 30 s chunks).
inline constexpr int kWhisperSampleRate = 16000;
inline constexpr int kWhisperNfft = 400;
inline constexpr int kWhisperHop = 160;
inline constexpr int kWhisperFreqBins = kWhisperNfft / 2 + 1;  // 201
inline constexpr int64_t kWhisperChunkSamples = 30 * kWhisperSampleRate;  // 480000 -> 3000 frames

// Builds the Slaney-scale, Slaney-normalised triangular mel filter bank over 0..8000 Hz exactly as
// transformers' audio_utils.mel_filter_bank(num_frequency_bins=201, num_mel_filters=n_mels,
// min_frequency=0, max_frequency=8000, sampling_rate=16000, norm="slaney", mel_scale="slaney"), in
// double precision. Returns [n_mels, 201] row-major (the transpose of transformers' layout).
std::vector<double> whisper_mel_filters(int n_mels);

struct LogMelOptions {
    // Before the STFT the input is zero-padded or truncated to exactly this many samples. The default,
    // 480000 (30 s), is what WhisperFeatureExtractor does by default (padding="max_length",
    // truncation=True): every input becomes a 3000-frame array and the "max - 8" clamp is taken over
    // the whole padded array (padding frames included, they are log10(1e-10) = -10 before the clamp).
    // 0 = use the input as it is: this is transformers' long-form mode (truncation=False,
    // padding="longest" with a single input), where the whole recording is one array, the frame count
    // is n_samples / 160 and the clamp's maximum is taken over the whole recording.
    int64_t pad_or_trim_to = kWhisperChunkSamples;
    // Worker threads for the STFT (frames are independent). 1 = run on the calling thread.
    int threads = 1;
};

// Computes log-mel features: periodic Hann window (400), center=True with reflect padding of 200
// samples each side, |rfft|^2 (rounded through complex64 as numpy stores it), mel projection in
// double, log10(max(x, 1e-10)), the last STFT frame dropped, then in float32:
// y = (max(x, max_all - 8) + 4) / 4.
// Immutable after construction; compute() is const and thread-safe.
class LogMel {
public:
    // n_mels: 80 (Whisper v1-v3 large-v2 and smaller) or 128 (large-v3); other values >= 1 also work.
    explicit LogMel(int n_mels);

    int n_mels() const { return n_mels_; }

    // pcm16k: mono float samples at 16 kHz, nominally in [-1, 1].
    // Returns [n_mels, n_frames] row-major, n_frames = L / 160 (integer division) where L is the
    // length after pad_or_trim_to (3000 for the default). *n_frames receives the count if non-null.
    // Input of length 0 with pad_or_trim_to == 0 returns an empty array and 0 frames.
    std::vector<float> compute(std::span<const float> pcm16k, int* n_frames,
                               const LogMelOptions& options = {}) const;

    // Same, before the final clamp and rescale: log10(max(mel, 1e-10)) as float32, [n_mels, n_frames].
    // Exposed so that streaming callers can choose their own clamp window.
    std::vector<float> compute_log10(std::span<const float> pcm16k, int* n_frames,
                                     const LogMelOptions& options = {}) const;

    // The filter bank in use, [n_mels, 201] row-major.
    const std::vector<double>& filters() const { return filters_; }

private:
    struct Band {
        int first_bin = 0;  // first non-zero frequency bin
        int count = 0;      // number of consecutive bins from first_bin (zeros inside are kept)
        size_t offset = 0;  // into band_weights_
    };

    int n_mels_;
    std::vector<double> filters_;
    std::vector<Band> bands_;
    std::vector<double> band_weights_;
    std::vector<double> window_;  // periodic Hann, 400 taps
};

}  // namespace parlance
