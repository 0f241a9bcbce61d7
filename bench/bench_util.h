// Shared by bench/parlance_bench.cpp and bench/anchor/whisper_cpp_bench.cpp, so both sides run
// the same protocol on the same input: a fixed 30 s signal, fixed decoder tokens, wall-clock
// timing, peak RSS, and a JSON line on stdout.
#pragma once

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace bench {

inline double now_ms() {
    using namespace std::chrono;
    return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

inline double median(std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Peak resident set size of this process so far, in MiB.
inline double peak_rss_mib() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_maxrss) / 1024.0;  // Linux: KiB
}

// 30 s of 16 kHz audio: two tones, a chirp and low noise (deterministic), so the log-mel has
// structure; the encoder's cost does not depend on it.
inline std::vector<float> test_signal() {
    const int n = 30 * 16000;
    std::vector<float> pcm(n);
    uint32_t s = 12345;
    for (int i = 0; i < n; ++i) {
        const double t = i / 16000.0;
        s = s * 1664525u + 1013904223u;
        const double noise = (static_cast<double>(s >> 8) / 16777216.0 - 0.5) * 0.02;
        pcm[i] = static_cast<float>(0.2 * std::sin(2 * M_PI * 220 * t) + 0.1 * std::sin(2 * M_PI * 1234 * t) +
                                    0.1 * std::sin(2 * M_PI * (100 + 100 * t) * t) + noise);
    }
    return pcm;
}

// The decoder input: a start-of-transcript prompt, then `n` fixed text tokens fed one at a time
// (the same ids on both sides; their values do not change the work).
inline std::vector<int> decode_tokens(int n) {
    std::vector<int> t(n);
    for (int i = 0; i < n; ++i) t[i] = 220 + (i * 7919) % 50000;
    return t;
}

inline std::string json_array(const std::vector<double>& v) {
    std::string s = "[";
    char buf[64];
    for (size_t i = 0; i < v.size(); ++i) {
        std::snprintf(buf, sizeof buf, "%s%.3f", i ? "," : "", v[i]);
        s += buf;
    }
    return s + "]";
}

struct Args {
    std::string model;
    int threads = 1;
    int reps = 3;
    int warmup = 1;           // untimed encoder/decoder runs before the timed ones
    int tokens = 64;
    bool flash_attn = false;  // whisper.cpp only
    bool bandwidth = false;   // parlance_bench only: measure streaming-read bandwidth and exit
    int batch = 1;            // parlance_bench only: also time decoder steps of this many sequences
    int prompt = 512;         // qwen3_bench only: prompt tokens of the prefill measurement
    std::string quantize;     // qwen3_bench only: weights at load ("" as stored)
};

inline Args parse_args(int argc, char** argv) {
    Args a;
    for (int i = 1; i < argc; ++i) {
        std::string k = argv[i];
        auto val = [&]() -> std::string {
            if (i + 1 >= argc) { std::fprintf(stderr, "%s needs a value\n", k.c_str()); std::exit(2); }
            return argv[++i];
        };
        if (k == "--model") a.model = val();
        else if (k == "--threads") a.threads = std::stoi(val());
        else if (k == "--reps") a.reps = std::stoi(val());
        else if (k == "--warmup") a.warmup = std::stoi(val());
        else if (k == "--tokens") a.tokens = std::stoi(val());
        else if (k == "--flash-attn") a.flash_attn = std::stoi(val()) != 0;
        else if (k == "--bandwidth") a.bandwidth = true;
        else if (k == "--prompt") a.prompt = std::stoi(val());
        else if (k == "--quantize") a.quantize = val();
        else if (k == "--batch") a.batch = std::max(1, std::stoi(val()));
        else { std::fprintf(stderr, "unknown argument %s\n", k.c_str()); std::exit(2); }
    }
    if (a.model.empty() && !a.bandwidth) {
        std::fprintf(stderr, "usage: %s --model FILE [--threads N] [--reps R] [--warmup W] [--tokens T] [--flash-attn 0|1]\n", argv[0]);
        std::exit(2);
    }
    return a;
}

}  // namespace bench
