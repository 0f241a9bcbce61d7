// Whisper log-mel features: filter bank construction, framed STFT, mel projection, log and clamp.
#include "audio/mel.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <numbers>
#include <string>
#include <thread>

#include "audio/fft.h"
#include "core/error.h"

namespace parlance {
namespace {

// Slaney mel scale (librosa's default, htk=False): linear below 1 kHz, logarithmic above.
constexpr double kMinLogHz = 1000.0;
constexpr double kMinLogMel = 15.0;

double hz_to_mel_slaney(double hz) {
    if (hz >= kMinLogHz) return kMinLogMel + std::log(hz / kMinLogHz) * (27.0 / std::log(6.4));
    return 3.0 * hz / 200.0;
}

double mel_to_hz_slaney(double mel) {
    if (mel >= kMinLogMel) return kMinLogHz * std::exp((std::log(6.4) / 27.0) * (mel - kMinLogMel));
    return 200.0 * mel / 3.0;
}

// Index into x[0..n) of position i in numpy's reflect padding (edge not repeated), for any i.
int64_t reflect_index(int64_t i, int64_t n) {
    if (n == 1) return 0;
    const int64_t period = 2 * (n - 1);
    i %= period;
    if (i < 0) i += period;
    return i < n ? i : period - i;
}

}  // namespace

std::vector<double> whisper_mel_filters(int n_mels) {
    if (n_mels < 1 || n_mels > 1024) {
        throw Error(ErrorKind::InvalidArgument, "n_mels must be in [1, 1024], got " + std::to_string(n_mels));
    }
    const int n_bins = kWhisperFreqBins;
    // Band edges: n_mels + 2 points evenly spaced in mel (numpy.linspace: i * step, last == stop).
    const double mel_min = hz_to_mel_slaney(0.0);
    const double mel_max = hz_to_mel_slaney(8000.0);
    const int n_points = n_mels + 2;
    const double step = (mel_max - mel_min) / static_cast<double>(n_points - 1);
    std::vector<double> edges(static_cast<size_t>(n_points));
    for (int i = 0; i < n_points; ++i) {
        const double mel = i == n_points - 1 ? mel_max : static_cast<double>(i) * step + mel_min;
        edges[static_cast<size_t>(i)] = mel_to_hz_slaney(mel);
    }
    std::vector<double> filters(static_cast<size_t>(n_mels) * n_bins, 0.0);
    const double bin_hz = static_cast<double>(kWhisperSampleRate / 2) / static_cast<double>(n_bins - 1);
    for (int m = 0; m < n_mels; ++m) {
        const double lo = edges[static_cast<size_t>(m)];
        const double mid = edges[static_cast<size_t>(m) + 1];
        const double hi = edges[static_cast<size_t>(m) + 2];
        const double enorm = 2.0 / (hi - lo);
        for (int k = 0; k < n_bins; ++k) {
            const double f = static_cast<double>(k) * bin_hz;
            const double down = -(lo - f) / (mid - lo);
            const double up = (hi - f) / (hi - mid);
            const double w = std::max(0.0, std::min(down, up));
            filters[static_cast<size_t>(m) * n_bins + k] = w * enorm;
        }
    }
    return filters;
}

LogMel::LogMel(int n_mels) : n_mels_(n_mels), filters_(whisper_mel_filters(n_mels)) {
    // Sparse view of the filter bank: each row's non-zero span.
    bands_.resize(static_cast<size_t>(n_mels));
    for (int m = 0; m < n_mels; ++m) {
        const double* row = filters_.data() + static_cast<size_t>(m) * kWhisperFreqBins;
        int first = kWhisperFreqBins, last = -1;
        for (int k = 0; k < kWhisperFreqBins; ++k) {
            if (row[k] != 0.0) {
                first = std::min(first, k);
                last = k;
            }
        }
        Band& band = bands_[static_cast<size_t>(m)];
        band.offset = band_weights_.size();
        if (last >= first) {
            band.first_bin = first;
            band.count = last - first + 1;
            band_weights_.insert(band_weights_.end(), row + first, row + last + 1);
        }
    }
    // numpy.hanning(401)[:-1]: 0.5 + 0.5 * cos(pi * n / 400), n = -400, -398, ...
    window_.resize(kWhisperNfft);
    for (int j = 0; j < kWhisperNfft; ++j) {
        const double n = static_cast<double>(2 * j - kWhisperNfft);
        window_[static_cast<size_t>(j)] = 0.5 + 0.5 * std::cos(std::numbers::pi * n / kWhisperNfft);
    }
}

std::vector<float> LogMel::compute_log10(std::span<const float> pcm16k, int* n_frames_out,
                                         const LogMelOptions& options) const {
    if (options.pad_or_trim_to < 0) {
        throw Error(ErrorKind::InvalidArgument, "pad_or_trim_to must be >= 0");
    }
    // Length after padding/trimming; samples past the input are zeros.
    const int64_t input_len = static_cast<int64_t>(pcm16k.size());
    const int64_t len = options.pad_or_trim_to > 0 ? options.pad_or_trim_to : input_len;
    const int64_t avail = std::min(input_len, len);
    const int64_t frames64 = len / kWhisperHop;  // 1 + len/hop STFT frames, minus the dropped last one
    if (frames64 > std::numeric_limits<int>::max()) throw Error(ErrorKind::TooLarge, "audio too long for log-mel");
    const int frames = static_cast<int>(frames64);
    if (n_frames_out) *n_frames_out = frames;
    std::vector<float> out(static_cast<size_t>(n_mels_) * static_cast<size_t>(frames));
    if (frames == 0) return out;

    auto sample = [&](int64_t i) -> double {
        // Reflection happens over the padded/trimmed array (zeros included), as np.pad sees it.
        const int64_t j = reflect_index(i, len);
        return j < avail ? static_cast<double>(pcm16k[static_cast<size_t>(j)]) : 0.0;
    };

    const Fft fft(kWhisperNfft);
    // A frame wholly inside the zero padding has a zero spectrum: every band is log10 of the
    // floor. Written directly (the same value the FFT path gives), which spares most of the work
    // for short audio padded to a 30-second window, e.g. a live session's re-decodes.
    constexpr double kPowerFloor = 1e-10;  // log10 of a band is taken of max(power, this)
    const float silent = static_cast<float>(std::log10(kPowerFloor));
    auto run = [&](int begin, int end) {
        std::vector<std::complex<double>> in(kWhisperNfft), spec(kWhisperNfft), scratch;
        std::vector<double> power(kWhisperFreqBins);
        for (int f = begin; f < end; ++f) {
            const int64_t start = static_cast<int64_t>(f) * kWhisperHop - kWhisperNfft / 2;
            if (start >= avail && start + kWhisperNfft <= len) {
                for (int m = 0; m < n_mels_; ++m) out[static_cast<size_t>(m) * frames + f] = silent;
                continue;
            }
            const bool interior = start >= 0 && start + kWhisperNfft <= avail;
            for (int t = 0; t < kWhisperNfft; ++t) {
                const double x = interior ? static_cast<double>(pcm16k[static_cast<size_t>(start + t)])
                                          : sample(start + t);
                in[static_cast<size_t>(t)] = {x * window_[static_cast<size_t>(t)], 0.0};
            }
            fft.forward(in.data(), spec.data(), scratch);
            for (int k = 0; k < kWhisperFreqBins; ++k) {
                // transformers stores the STFT as complex64 before taking |.|^2 in float64.
                const double re = static_cast<float>(spec[static_cast<size_t>(k)].real());
                const double im = static_cast<float>(spec[static_cast<size_t>(k)].imag());
                power[static_cast<size_t>(k)] = re * re + im * im;
            }
            for (int m = 0; m < n_mels_; ++m) {
                const Band& band = bands_[static_cast<size_t>(m)];
                const double* w = band_weights_.data() + band.offset;
                const double* p = power.data() + band.first_bin;
                double acc = 0.0;
                for (int i = 0; i < band.count; ++i) acc += w[i] * p[i];
                out[static_cast<size_t>(m) * frames + f] = static_cast<float>(std::log10(std::max(acc, kPowerFloor)));
            }
        }
    };

    const int threads = std::clamp(options.threads, 1, std::max(1, frames / 16));
    if (threads == 1) {
        run(0, frames);
    } else {
        std::vector<std::jthread> workers;
        const int per = (frames + threads - 1) / threads;
        for (int t = 1; t < threads; ++t) {
            const int b = t * per, e = std::min(frames, b + per);
            if (b < e) workers.emplace_back(run, b, e);
        }
        run(0, std::min(frames, per));
    }
    return out;
}

std::vector<float> LogMel::compute(std::span<const float> pcm16k, int* n_frames, const LogMelOptions& options) const {
    std::vector<float> out = compute_log10(pcm16k, n_frames, options);
    if (out.empty()) return out;
    const float max_value = *std::max_element(out.begin(), out.end());
    const float floor_value = max_value - 8.0f;  // float32 arithmetic, as numpy does it
    for (float& v : out) v = (std::max(v, floor_value) + 4.0f) / 4.0f;
    return out;
}

}  // namespace parlance
