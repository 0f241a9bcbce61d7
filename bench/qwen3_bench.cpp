// parlance's side of the language-model benchmark (bench/qwen3_bench.sh): prefill of --prompt
// tokens in one step (tokens/s) and batch-1 decoding of --tokens tokens (ms per token) through the
// generation engine, on the protocol of llama.cpp's llama-bench (pp P / tg N, an empty cache before
// each run). Prints one JSON line.
#include <numeric>

#include "bench/bench_util.h"
#include "core/backend.h"
#include "engine/generation_engine.h"
#include "models/registry.h"

using namespace parlance;

namespace {

// Seconds of one request of `prompt` tokens generating `n` tokens, on a fresh engine.
double run_once(LanguageModel& model, Backend& backend, int prompt, int n) {
    GenerationEngineOptions o;
    o.token_budget = std::max(prompt, 1);
    o.kv_cache_bytes = model.kv_spec().bytes_per_token() * static_cast<size_t>(prompt + n + 64);
    GenerationEngine e(model, backend, o);
    GenerationRequest r;
    for (int i = 0; i < prompt; ++i) r.prompt.push_back(1000 + (i * 7919) % 100000);
    r.sampling.max_tokens = n;  // stop ids left empty: exactly n tokens
    const double t0 = bench::now_ms();
    e.submit(std::move(r));
    e.run_to_completion();
    return (bench::now_ms() - t0) / 1000.0;
}

}  // namespace

int main(int argc, char** argv) {
    const bench::Args a = bench::parse_args(argc, argv);
    try {
        BackendOptions bo;
        bo.threads = a.threads;
        Backend backend(bo);
        const double t0 = bench::now_ms();
        auto model = load_language_model(a.model, backend, {a.quantize});
        const double load_ms = bench::now_ms() - t0;
        std::vector<double> pp, tg;
        for (int r = 0; r < a.warmup + a.reps; ++r) {
            // pp: the prompt in one step (and its one sampled token).
            const double p = run_once(*model, backend, a.prompt, 1);
            // tg: one prompt token, then a.tokens decode steps; the first step is the prompt's.
            const double g = run_once(*model, backend, 1, a.tokens);
            if (r < a.warmup) continue;
            pp.push_back(a.prompt / p);
            tg.push_back(g * 1000.0 / a.tokens);
        }
        std::printf("{\"tool\":\"parlance\",\"model\":\"%s\",\"threads\":%d,\"quantize\":\"%s\",\"load_ms\":%.1f,"
                    "\"prompt\":%d,\"tokens\":%d,\"pp_tokens_per_s\":%s,\"tg_ms_per_token\":%s,"
                    "\"weights\":\"%s\",\"peak_rss_mib\":%.1f}\n",
                    a.model.c_str(), a.threads, a.quantize.c_str(), load_ms, a.prompt, a.tokens,
                    bench::json_array(pp).c_str(), bench::json_array(tg).c_str(), model->weight_summary().c_str(),
                    bench::peak_rss_mib());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "qwen3_bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
