// whisper.cpp's side of the server throughput benchmark (bench/serve_bench.sh): the same WAV
// file transcribed N times one after another with whisper_full at temperature 0 without
// fallback (as the server requests ask), greedy or with N beams (as the server decodes the
// model's default), the same threads. Prints one JSON line: wall time, each request's
// milliseconds and decoded tokens, and the first request's text.
//
//   whisper_cpp_serial --model base.bin --threads 2 --file jfk.wav --requests 8 [--beam-size 5]
//                      [--suppress-ids FIRST:END] [--gpu 1] [--flash-attn 0|1]
//
// --suppress-ids: token ids [FIRST, END) get -inf logits at every step (whisper.cpp's logits
// filter callback): the ids a compact-vocabulary model written at OpenAI's ids does not have
// (`parlance convert --openai-ids` prints them), whose zero rows would otherwise score 0.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "audio/wav.h"
#include "bench/bench_util.h"
#include "whisper.h"

using bench::now_ms;

namespace {

struct IdRange {
    int first = 0, end = 0;
};

void suppress_ids(whisper_context*, whisper_state*, const whisper_token_data*, int, float* logits, void* user) {
    const IdRange& r = *static_cast<const IdRange*>(user);
    for (int i = r.first; i < r.end; ++i) logits[i] = -INFINITY;
}

std::string json_string(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        if (static_cast<unsigned char>(c) < 0x20) continue;
        out += c;
    }
    return out + "\"";
}

}  // namespace

int main(int argc, char** argv) {
    std::string model, file;
    int threads = 1, requests = 4, beams = 1;
    bool gpu = false;
    int flash_attn = -1;  // -1: whisper.cpp's default
    IdRange suppressed;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i], v = argv[i + 1];
        if (k == "--model")
            model = v;
        else if (k == "--file")
            file = v;
        else if (k == "--threads")
            threads = std::stoi(v);
        else if (k == "--requests")
            requests = std::stoi(v);
        else if (k == "--beam-size")
            beams = std::stoi(v);
        else if (k == "--gpu")
            gpu = v == "1";
        else if (k == "--flash-attn")
            flash_attn = std::stoi(v);
        else if (k == "--suppress-ids" && v.find(':') != std::string::npos) {
            suppressed.first = std::stoi(v.substr(0, v.find(':')));
            suppressed.end = std::stoi(v.substr(v.find(':') + 1));
        } else {
            std::fprintf(stderr, "whisper_cpp_serial: unknown option %s\n", k.c_str());
            return 2;
        }
    }
    if (model.empty() || file.empty()) {
        std::fprintf(stderr,
                     "usage: whisper_cpp_serial --model M.bin --file 16k-mono.wav [--threads N] [--requests N] "
                     "[--beam-size N] [--suppress-ids A:B] [--gpu 1] [--flash-attn 0|1]\n");
        return 2;
    }
    const parlance::WavAudio wav = parlance::read_wav_file(file);  // throws on anything but 16-bit PCM
    if (wav.sample_rate != 16000 || wav.channels != 1) {
        std::fprintf(stderr, "whisper_cpp_serial: %s is not 16 kHz mono\n", file.c_str());
        return 2;
    }
    const std::vector<float>& pcm = wav.samples;
    whisper_context_params cp = whisper_context_default_params();
    cp.use_gpu = gpu;
    if (flash_attn >= 0) cp.flash_attn = flash_attn == 1;
    whisper_context* ctx = whisper_init_from_file_with_params(model.c_str(), cp);
    if (!ctx) return 1;
    whisper_full_params p =
        whisper_full_default_params(beams > 1 ? WHISPER_SAMPLING_BEAM_SEARCH : WHISPER_SAMPLING_GREEDY);
    if (beams > 1) p.beam_search.beam_size = beams;
    if (suppressed.end > suppressed.first) {
        p.logits_filter_callback = suppress_ids;
        p.logits_filter_callback_user_data = &suppressed;
    }
    p.n_threads = threads;
    p.temperature = 0.0f;
    p.temperature_inc = 0.0f;  // no fallback: the server requests fix temperature 0 too
    p.language = "en";
    p.print_progress = false;
    p.print_realtime = false;
    p.print_timestamps = false;
    p.print_special = false;
    std::vector<double> ms;
    std::string toks = "[", text;
    const double t_all = now_ms();
    for (int r = 0; r < requests; ++r) {
        const double t0 = now_ms();
        if (whisper_full(ctx, p, pcm.data(), static_cast<int>(pcm.size())) != 0) return 1;
        int n = 0;
        for (int s = 0; s < whisper_full_n_segments(ctx); ++s) {
            n += whisper_full_n_tokens(ctx, s);
            if (r == 0) text += whisper_full_get_segment_text(ctx, s);
        }
        ms.push_back(now_ms() - t0);
        toks += (r ? "," : "") + std::to_string(n);
    }
    const double wall = now_ms() - t_all;
    std::printf(
        "{\"tool\":\"whisper.cpp\",\"mode\":\"serial\",\"flash_attn\":%d,\"threads\":%d,\"requests\":%d,"
        "\"beams\":%d,\"audio_seconds\":%.3f,\"wall_ms\":%.1f,\"request_ms\":%s,\"tokens\":%s],"
        "\"text\":%s}\n",
        cp.flash_attn ? 1 : 0, threads, requests, beams, pcm.size() / 16000.0, wall, bench::json_array(ms).c_str(),
        toks.c_str(), json_string(text).c_str());
    whisper_free(ctx);
    return 0;
}
