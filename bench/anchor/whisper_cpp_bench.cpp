// whisper.cpp's side of the Whisper benchmark (bench/run.sh), built against parlance's ggml from
// the whisper.cpp sources in npm @fugood/whisper.node. Same protocol as bench/parlance_bench.cpp:
// load, log-mel, encoder on one 30 s window, batch-1 decoder steps with a growing cache; prints
// one JSON line.
#include <cstdio>

#include "bench/bench_util.h"
#include "whisper.h"

int main(int argc, char** argv) {
    const bench::Args a = bench::parse_args(argc, argv);
    whisper_context_params cp = whisper_context_default_params();
    cp.use_gpu = false;
    cp.flash_attn = a.flash_attn;
    double t0 = bench::now_ms();
    whisper_context* ctx = whisper_init_from_file_with_params(a.model.c_str(), cp);
    if (!ctx) {
        std::fprintf(stderr, "whisper_cpp_bench: could not load %s\n", a.model.c_str());
        return 1;
    }
    const double load_ms = bench::now_ms() - t0;

    const std::vector<float> pcm = bench::test_signal();
    std::vector<double> mel_ms, enc_ms, dec_ms, prompt_ms;
    for (int r = 0; r < a.reps; ++r) {
        t0 = bench::now_ms();
        if (whisper_pcm_to_mel(ctx, pcm.data(), static_cast<int>(pcm.size()), a.threads) != 0) return 1;
        mel_ms.push_back(bench::now_ms() - t0);
    }
    for (int r = 0; r < a.warmup + a.reps; ++r) {  // warm-up runs first
        t0 = bench::now_ms();
        if (whisper_encode(ctx, 0, a.threads) != 0) return 1;
        if (r >= a.warmup) enc_ms.push_back(bench::now_ms() - t0);
    }
    const std::vector<int> toks = bench::decode_tokens(a.tokens);
    const whisper_token sot = whisper_token_sot(ctx);
    const int dw = std::max(1, a.warmup);  // decoding always warms up once (cheap)
    for (int r = 0; r < dw + a.reps; ++r) {
        t0 = bench::now_ms();
        if (whisper_decode(ctx, &sot, 1, 0, a.threads) != 0) return 1;
        const double p = bench::now_ms() - t0;
        t0 = bench::now_ms();
        for (int i = 0; i < a.tokens; ++i) {
            const whisper_token t = toks[i];
            if (whisper_decode(ctx, &t, 1, 1 + i, a.threads) != 0) return 1;
        }
        if (r > 0) {
            prompt_ms.push_back(p);
            dec_ms.push_back((bench::now_ms() - t0) / a.tokens);
        }
    }
    std::printf("{\"tool\":\"whisper.cpp\",\"flash_attn\":%s,\"model\":\"%s\",\"threads\":%d,\"tokens\":%d,"
                "\"load_ms\":%.1f,\"mel_ms\":%s,\"encode_ms\":%s,\"prompt_ms\":%s,\"decode_ms_per_token\":%s,"
                "\"peak_rss_mib\":%.1f}\n",
                a.flash_attn ? "true" : "false", a.model.c_str(), a.threads, a.tokens, load_ms,
                bench::json_array(mel_ms).c_str(), bench::json_array(enc_ms).c_str(),
                bench::json_array(prompt_ms).c_str(), bench::json_array(dec_ms).c_str(), bench::peak_rss_mib());
    whisper_free(ctx);
    return 0;
}
