// parlance's side of the Whisper benchmark (bench/run.sh): load, log-mel, encoder on one 30 s
// window, and batch-1 decoder steps with a growing self-attention cache, on the same protocol as
// bench/anchor/whisper_cpp_bench.cpp. Prints one JSON line. With --bandwidth, measures the
// streaming-read bandwidth of this machine instead (the batch-1 decode floor's denominator).
#include <atomic>
#include <cstring>
#include <thread>

#include "bench/bench_util.h"
#include "bench/read_speed.h"
#include "core/backend.h"
#include "models/whisper/model.h"
#include "models/whisper/runner.h"

using namespace parlance;
using namespace parlance::whisper;

namespace {

// Streaming reads of 1 GiB by `threads` threads (bench/read_speed.h's protocol), best of 7, in GB/s.
double read_bandwidth_gbs(int threads) {
    const size_t bytes = size_t{1} << 30;
    return static_cast<double>(bytes) / (bench::time_streaming_read(bytes, threads, 7).best_ms * 1e6);
}

size_t nbytes(const ggml_tensor* t) { return t ? ggml_nbytes(t) : 0; }

// Bytes of weights one batch-1 decoder step must read: every decoder matrix and vector except the
// cross-attention key/value projections (applied once per window, at encode), plus the output
// projection. The token and position embeddings contribute one row each (negligible).
size_t decoder_step_weight_bytes(const WhisperWeights& w) {
    size_t b = nbytes(w.proj_out) + nbytes(w.dec_ln_w) + nbytes(w.dec_ln_b);
    for (const LayerWeights& l : w.dec_layers) {
        for (const ggml_tensor* t : {l.attn_ln_w, l.attn_ln_b, l.attn.q_w, l.attn.q_b, l.attn.k_w, l.attn.v_w,
                                     l.attn.v_b, l.attn.o_w, l.attn.o_b, l.cross_ln_w, l.cross_ln_b, l.cross.q_w,
                                     l.cross.q_b, l.cross.o_w, l.cross.o_b, l.mlp_ln_w, l.mlp_ln_b, l.fc1_w,
                                     l.fc1_b, l.fc2_w, l.fc2_b})
            b += nbytes(t);
    }
    return b;
}

// `batch` sequences (one slot each, the same audio) take the prompt step, then `toks.size()`
// one-token steps in one graph each, as the engine runs concurrent requests; batch 1 is the
// plain decoder. Appends each timed repetition's prompt time and mean ms per step.
void time_decode(WhisperRunner& runner, const CrossKv& cross, int sot, const std::vector<int>& toks,
                 int batch, int warmup, int reps, std::vector<double>& prompt_ms, std::vector<double>& step_ms) {
    std::vector<DecodeItem> items(batch);
    const int n = static_cast<int>(toks.size());
    for (int r = 0; r < warmup + reps; ++r) {
        for (int b = 0; b < batch; ++b) items[b] = DecodeItem{b, &cross, {sot}, 0};
        double t0 = bench::now_ms();
        runner.decode(items);
        const double p = bench::now_ms() - t0;
        t0 = bench::now_ms();
        for (int i = 0; i < n; ++i) {
            for (int b = 0; b < batch; ++b) items[b] = DecodeItem{b, &cross, {toks[i]}, 1 + i};
            runner.decode(items);
        }
        if (r >= warmup) {
            prompt_ms.push_back(p);
            step_ms.push_back((bench::now_ms() - t0) / n);
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    const bench::Args a = bench::parse_args(argc, argv);
    if (a.bandwidth) {
        std::printf("{\"tool\":\"bandwidth\",\"threads\":%d,\"read_gbs\":%.2f}\n", a.threads,
                    read_bandwidth_gbs(a.threads));
        return 0;
    }
    try {
        BackendOptions bo;
        bo.threads = a.threads;
        double t0 = bench::now_ms();
        Backend backend(bo);
        auto model = WhisperModel::load(a.model, backend);
        WhisperRunner runner(model->config, *model->weights, backend, std::max(1, a.batch));
        CrossKv cross(model->config, backend);
        const double load_ms = bench::now_ms() - t0;

        const std::vector<float> pcm = bench::test_signal();
        std::vector<double> mel_ms, enc_ms, dec_ms, prompt_ms;
        std::vector<std::vector<float>> mels(1);
        LogMelOptions mo;
        mo.threads = a.threads;
        for (int r = 0; r < a.reps; ++r) {
            t0 = bench::now_ms();
            int frames = 0;
            mels[0] = model->mel->compute(pcm, &frames, mo);
            mel_ms.push_back(bench::now_ms() - t0);
        }
        CrossKv* crosses[] = {&cross};
        for (int r = 0; r < a.warmup + a.reps; ++r) {  // warm-up runs first (allocations, page faults)
            t0 = bench::now_ms();
            runner.encode(mels, crosses);
            if (r >= a.warmup) enc_ms.push_back(bench::now_ms() - t0);
        }
        const std::vector<int> toks = bench::decode_tokens(a.tokens);
        const int dw = std::max(1, a.warmup);  // decoding always warms up once (cheap)
        time_decode(runner, cross, model->tokens.sot, toks, 1, dw, a.reps, prompt_ms, dec_ms);
        std::vector<double> batch_prompt_ms, batch_ms;
        if (a.batch > 1) time_decode(runner, cross, model->tokens.sot, toks, a.batch, dw, a.reps, batch_prompt_ms, batch_ms);
        const WhisperConfig& c = model->config;
        const size_t cross_kv_bytes = 2ull * c.decoder_layers * c.max_source_positions * c.d_model *
                                      ggml_type_size(cross.k[0]->type);
        std::printf("{\"tool\":\"parlance\",\"model\":\"%s\",\"threads\":%d,\"tokens\":%d,\"load_ms\":%.1f,"
                    "\"mel_ms\":%s,\"encode_ms\":%s,\"prompt_ms\":%s,\"decode_ms_per_token\":%s,"
                    "\"peak_rss_mib\":%.1f,\"decoder_step_weight_bytes\":%zu,\"cross_kv_bytes\":%zu,"
                    "\"weight_bytes\":%zu,\"batch\":%d,\"batch_decode_ms_per_step\":%s}\n",
                    a.model.c_str(), a.threads, a.tokens, load_ms, bench::json_array(mel_ms).c_str(),
                    bench::json_array(enc_ms).c_str(), bench::json_array(prompt_ms).c_str(),
                    bench::json_array(dec_ms).c_str(), bench::peak_rss_mib(),
                    decoder_step_weight_bytes(*model->weights), cross_kv_bytes,
                    model->weights->device_bytes(), a.batch, bench::json_array(batch_ms).c_str());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "parlance_bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
