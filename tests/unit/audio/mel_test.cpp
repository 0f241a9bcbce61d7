// Log-mel front end checked without a Python reference: FFT vs DFT, filter bank properties, known
// signals (silence, sine), frame counts, the clamp, threading, and the first frame against a naive
// re-derivation of the whole pipeline.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <complex>
#include <numbers>
#include <random>
#include <vector>

#include "audio/fft.h"
#include "audio/mel.h"
#include "core/error.h"

namespace parlance {
namespace {

std::vector<std::complex<double>> naive_dft(const std::vector<std::complex<double>>& x) {
    const size_t n = x.size();
    std::vector<std::complex<double>> out(n);
    for (size_t k = 0; k < n; ++k) {
        std::complex<double> acc = 0.0;
        for (size_t t = 0; t < n; ++t) {
            const double a = -2.0 * std::numbers::pi * static_cast<double>((k * t) % n) / static_cast<double>(n);
            acc += x[t] * std::complex<double>(std::cos(a), std::sin(a));
        }
        out[k] = acc;
    }
    return out;
}

std::vector<float> sine(double hz, double amplitude, int n, int rate = 16000) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) x[static_cast<size_t>(i)] = static_cast<float>(amplitude * std::sin(2 * std::numbers::pi * hz * i / rate));
    return x;
}

TEST(Fft, MatchesNaiveDftForMixedRadixLengths) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    for (int n : {1, 2, 3, 4, 5, 7, 12, 49, 200, 400, 405}) {
        std::vector<std::complex<double>> x(static_cast<size_t>(n)), y(static_cast<size_t>(n)), scratch;
        for (auto& v : x) v = {u(rng), u(rng)};
        Fft fft(n);
        fft.forward(x.data(), y.data(), scratch);
        const auto ref = naive_dft(x);
        double max_err = 0.0;
        for (int k = 0; k < n; ++k) max_err = std::max(max_err, std::abs(y[static_cast<size_t>(k)] - ref[static_cast<size_t>(k)]));
        EXPECT_LT(max_err, 1e-11 * n) << "n=" << n;
    }
    EXPECT_THROW(Fft(0), Error);
}

TEST(MelFilters, ShapeAndSlaneyNormalisation) {
    for (int n_mels : {80, 128}) {
        const auto f = whisper_mel_filters(n_mels);
        ASSERT_EQ(f.size(), static_cast<size_t>(n_mels) * kWhisperFreqBins);
        int checked = 0;
        for (int m = 0; m < n_mels; ++m) {
            double sum = 0.0, peak = 0.0;
            for (int k = 0; k < kWhisperFreqBins; ++k) {
                const double w = f[static_cast<size_t>(m) * kWhisperFreqBins + k];
                ASSERT_GE(w, 0.0);
                sum += w;
                peak = std::max(peak, w);
            }
            EXPECT_GT(peak, 0.0) << "empty filter " << m;
            // Slaney norm: each triangle has unit area in Hz; sampled every 40 Hz, wide ones sum to 1/40.
            const double peak_width_hz = 2.0 / peak;  // lower bound on (hi - lo)
            if (peak_width_hz > 300.0) {
                EXPECT_NEAR(sum * 40.0, 1.0, 0.03) << "n_mels=" << n_mels << " m=" << m << " width>=" << peak_width_hz;
                ++checked;
            }
        }
        EXPECT_GE(checked, 10);  // the wide (high-frequency) filters
        // 0 Hz (bin 0) gets no weight and the top filter ends at 8 kHz (bin 200).
        for (int m = 0; m < n_mels; ++m) EXPECT_EQ(f[static_cast<size_t>(m) * kWhisperFreqBins], 0.0);
        EXPECT_EQ(f[static_cast<size_t>(n_mels - 1) * kWhisperFreqBins + 200], 0.0);
        EXPECT_GT(f[static_cast<size_t>(n_mels - 1) * kWhisperFreqBins + 199], 0.0);
    }
    // Slaney scale: linear below 1 kHz (3 mels per 200 Hz), so for 80 mels the first band edges are
    // k * 45.2456/81 mel -> k * 37.24 Hz; filter 0 peaks at 37.24 Hz, between bins 0 and 1.
    const auto f80 = whisper_mel_filters(80);
    const double mel_max = 15.0 + std::log(8.0) * 27.0 / std::log(6.4);
    const double e1 = 200.0 * (mel_max / 81.0) / 3.0, e2 = 2 * e1;
    const double expected = std::min(40.0 / e1, (e2 - 40.0) / (e2 - e1)) * (2.0 / e2);
    EXPECT_NEAR(f80[1], expected, 1e-15);
    EXPECT_THROW(whisper_mel_filters(0), Error);
}

TEST(LogMel, SilenceIsTheConstantFloor) {
    // All-zero mel power -> log10(1e-10) = -10 everywhere; max = -10, clamp floor -18 has no effect,
    // so every value is (-10 + 4) / 4 = -1.5.
    const LogMel mel(80);
    std::vector<float> zeros(16000, 0.0f);
    int frames = 0;
    const auto out = mel.compute(zeros, &frames);
    ASSERT_EQ(frames, 3000);
    ASSERT_EQ(out.size(), 80u * 3000u);
    for (float v : out) ASSERT_EQ(v, -1.5f);
}

TEST(LogMel, FrameCounts) {
    const LogMel mel(80);
    int frames = -1;
    EXPECT_EQ(mel.compute(std::vector<float>(480000, 0.1f), &frames).size(), 80u * 3000u);
    EXPECT_EQ(frames, 3000);
    mel.compute(std::vector<float>(7, 0.1f), &frames);  // padded to 30 s whatever the length
    EXPECT_EQ(frames, 3000);
    LogMelOptions longest;
    longest.pad_or_trim_to = 0;
    for (auto [n, want] : {std::pair{16000, 100}, {16159, 100}, {16160, 101}, {176000, 1100}, {100, 0}}) {
        mel.compute(std::vector<float>(static_cast<size_t>(n), 0.1f), &frames, longest);
        EXPECT_EQ(frames, want) << "n=" << n;
    }
    LogMelOptions ten_seconds;
    ten_seconds.pad_or_trim_to = 160000;
    mel.compute(std::vector<float>(10, 0.1f), &frames, ten_seconds);
    EXPECT_EQ(frames, 1000);
}

TEST(LogMel, LongInputIsTrimmedToThirtySeconds) {
    const LogMel mel(80);
    std::mt19937 rng(3);
    std::normal_distribution<float> noise(0.0f, 0.1f);
    std::vector<float> x(600000);
    for (auto& v : x) v = noise(rng);
    int f1 = 0, f2 = 0;
    const auto a = mel.compute(x, &f1);
    const auto b = mel.compute(std::span<const float>(x).first(480000), &f2);
    ASSERT_EQ(f1, 3000);
    EXPECT_EQ(a, b);
}

TEST(LogMel, OneKilohertzSinePeaksInTheFilterCoveringOneKilohertz) {
    for (int n_mels : {80, 128}) {
        const LogMel mel(n_mels);
        LogMelOptions o;
        o.pad_or_trim_to = 0;
        int frames = 0;
        const auto out = mel.compute(sine(1000.0, 0.5, 16000), &frames, o);
        ASSERT_EQ(frames, 100);
        const int f = 50;
        int best = 0;
        for (int m = 1; m < n_mels; ++m) {
            if (out[static_cast<size_t>(m) * frames + f] > out[static_cast<size_t>(best) * frames + f]) best = m;
        }
        // 1 kHz is FFT bin 25; the winning band must be the one whose filter weighs bin 25 most.
        int expected = 0;
        const auto& w = mel.filters();
        for (int m = 1; m < n_mels; ++m) {
            if (w[static_cast<size_t>(m) * kWhisperFreqBins + 25] > w[static_cast<size_t>(expected) * kWhisperFreqBins + 25]) expected = m;
        }
        EXPECT_EQ(best, expected) << "n_mels=" << n_mels;
        // The loudest value is the global max, and it maps to (max + 4) / 4.
        EXPECT_GT(out[static_cast<size_t>(best) * frames + f], 0.5f);
    }
}

TEST(LogMel, ClampIsMaxMinusEightOverThePaddedArray) {
    const LogMel mel(80);
    const auto x = sine(440.0, 0.8, 32000);
    int frames = 0;
    const auto raw = mel.compute_log10(x, &frames);
    const auto out = mel.compute(x, &frames);
    float max_raw = -100.0f;
    for (float v : raw) max_raw = std::max(max_raw, v);
    const float floor_value = (max_raw - 8.0f + 4.0f) / 4.0f;
    // Frames 250.. cover only zero padding: their raw value is -10, below the floor, so clamped.
    for (int m = 0; m < 80; ++m) {
        EXPECT_EQ(raw[static_cast<size_t>(m) * frames + 2999], -10.0f);
        EXPECT_EQ(out[static_cast<size_t>(m) * frames + 2999], floor_value);
    }
    float min_out = 100.0f, max_out = -100.0f;
    for (float v : out) {
        min_out = std::min(min_out, v);
        max_out = std::max(max_out, v);
    }
    EXPECT_EQ(min_out, floor_value);
    EXPECT_EQ(max_out, (max_raw + 4.0f) / 4.0f);
    EXPECT_NEAR(max_out - min_out, 2.0f, 1e-6f);
}

TEST(LogMel, ThreadsGiveIdenticalResults) {
    const LogMel mel(128);
    std::mt19937 rng(11);
    std::normal_distribution<float> noise(0.0f, 0.2f);
    std::vector<float> x(250000);
    for (auto& v : x) v = noise(rng);
    int f1 = 0, f4 = 0;
    LogMelOptions one, four;
    four.threads = 4;
    EXPECT_EQ(mel.compute(x, &f1, one), mel.compute(x, &f4, four));
}

// Frames wholly inside the zero padding skip the FFT (their spectrum is zero): the result is bit
// for bit the one of the same audio with the zeros written out (every frame through the FFT).
TEST(LogMel, PaddingIsTheSameAsExplicitZeros) {
    const LogMel mel(80);
    std::mt19937 rng(3);
    std::normal_distribution<float> noise(0.0f, 0.2f);
    for (size_t n : {size_t(1), size_t(1000), size_t(16000 * 3 + 77), size_t(479800)}) {
        std::vector<float> x(n);
        for (auto& v : x) v = noise(rng);
        std::vector<float> zeros = x;
        zeros.resize(480000, 0.0f);
        LogMelOptions padded;
        padded.pad_or_trim_to = 480000;
        int f1 = 0, f2 = 0;
        EXPECT_EQ(mel.compute(x, &f1, padded), mel.compute(zeros, &f2, padded)) << n << " samples";
        EXPECT_EQ(f1, f2);
    }
}

// Re-derives frame 0 (which needs reflect padding) and frame 7 with a naive DFT and the dense
// filter bank, in double, from the definition.
TEST(LogMel, FramesMatchANaiveDerivation) {
    const LogMel mel(80);
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(-0.5f, 0.5f);
    std::vector<float> x(4000);
    for (auto& v : x) v = u(rng);
    LogMelOptions o;
    o.pad_or_trim_to = 0;
    int frames = 0;
    const auto got = mel.compute_log10(x, &frames, o);
    ASSERT_EQ(frames, 25);
    const auto filters = whisper_mel_filters(80);
    for (int f : {0, 7, 24}) {
        std::vector<std::complex<double>> buf(400);
        for (int t = 0; t < 400; ++t) {
            int i = f * 160 - 200 + t;
            if (i < 0) i = -i;                                   // reflect, edge not repeated
            if (i >= 4000) i = 2 * 3999 - i;
            const double w = 0.5 - 0.5 * std::cos(2 * std::numbers::pi * t / 400.0);  // periodic Hann
            buf[static_cast<size_t>(t)] = x[static_cast<size_t>(i)] * w;
        }
        const auto spec = naive_dft(buf);
        for (int m = 0; m < 80; ++m) {
            double acc = 0.0;
            for (int k = 0; k < 201; ++k) acc += filters[static_cast<size_t>(m) * 201 + k] * std::norm(spec[static_cast<size_t>(k)]);
            const double want = std::log10(std::max(acc, 1e-10));
            EXPECT_NEAR(got[static_cast<size_t>(m) * frames + f], want, 2e-6) << "frame " << f << " mel " << m;
        }
    }
}

// Thirty seconds of noise at 80 and 128 bins: one thread and two give the same frames bit for bit
// (the frames are split between threads, each computed whole). Its speed is a benchmark's
// (bench/parlance_bench), not a test's.
TEST(LogMel, ThirtySecondsGiveTheSameBitsOnOneThreadAndTwo) {
    std::mt19937 rng(1);
    std::normal_distribution<float> noise(0.0f, 0.1f);
    std::vector<float> x(480000);
    for (auto& v : x) v = noise(rng);
    for (int n_mels : {80, 128}) {
        const LogMel mel(n_mels);
        std::vector<float> by_threads[2];
        for (int threads : {1, 2}) {
            LogMelOptions o;
            o.threads = threads;
            int frames = 0;
            by_threads[threads - 1] = mel.compute(x, &frames, o);
            EXPECT_EQ(frames, 3000);
        }
        EXPECT_EQ(by_threads[0], by_threads[1]) << n_mels << " bins";
    }
}

}  // namespace
}  // namespace parlance
