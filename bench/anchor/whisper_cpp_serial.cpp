// whisper.cpp's side of the server throughput benchmark (bench/serve_bench.sh): the same WAV
// file transcribed N times one after another with whisper_full, greedy at temperature 0 without
// fallback (as the server requests ask), the same threads. Prints one JSON line: wall time, each
// request's milliseconds and decoded tokens.
//
//   whisper_cpp_serial --model base.bin --threads 2 --file jfk.wav --requests 8
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "audio/wav.h"
#include "whisper.h"

using bench::now_ms;

int main(int argc, char** argv) {
    std::string model, file;
    int threads = 1, requests = 4;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i], v = argv[i + 1];
        if (k == "--model") model = v;
        else if (k == "--file") file = v;
        else if (k == "--threads") threads = std::stoi(v);
        else if (k == "--requests") requests = std::stoi(v);
        else {
            std::fprintf(stderr, "whisper_cpp_serial: unknown option %s\n", k.c_str());
            return 2;
        }
    }
    if (model.empty() || file.empty()) {
        std::fprintf(stderr, "usage: whisper_cpp_serial --model M.bin --file 16k-mono.wav [--threads N] [--requests N]\n");
        return 2;
    }
    const parlance::WavAudio wav = parlance::read_wav_file(file);  // throws on anything but 16-bit PCM
    if (wav.sample_rate != 16000 || wav.channels != 1) {
        std::fprintf(stderr, "whisper_cpp_serial: %s is not 16 kHz mono\n", file.c_str());
        return 2;
    }
    const std::vector<float>& pcm = wav.samples;
    whisper_context_params cp = whisper_context_default_params();
    cp.use_gpu = false;
    whisper_context* ctx = whisper_init_from_file_with_params(model.c_str(), cp);
    if (!ctx) return 1;
    whisper_full_params p = whisper_full_default_params(WHISPER_SAMPLING_GREEDY);
    p.n_threads = threads;
    p.temperature = 0.0f;
    p.temperature_inc = 0.0f;  // no fallback: the server requests fix temperature 0 too
    p.language = "en";
    p.print_progress = false;
    p.print_realtime = false;
    p.print_timestamps = false;
    p.print_special = false;
    std::vector<double> ms;
    std::string toks = "[";
    const double t_all = now_ms();
    for (int r = 0; r < requests; ++r) {
        const double t0 = now_ms();
        if (whisper_full(ctx, p, pcm.data(), static_cast<int>(pcm.size())) != 0) return 1;
        int n = 0;
        for (int s = 0; s < whisper_full_n_segments(ctx); ++s) n += whisper_full_n_tokens(ctx, s);
        ms.push_back(now_ms() - t0);
        toks += (r ? "," : "") + std::to_string(n);
    }
    const double wall = now_ms() - t_all;
    std::printf("{\"tool\":\"whisper.cpp\",\"mode\":\"serial\",\"threads\":%d,\"requests\":%d,"
                "\"audio_seconds\":%.3f,\"wall_ms\":%.1f,\"request_ms\":%s,\"tokens\":%s]}\n",
                threads, requests, pcm.size() / 16000.0, wall, bench::json_array(ms).c_str(), toks.c_str());
    whisper_free(ctx);
    return 0;
}
