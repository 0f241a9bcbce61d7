// Whisper's decoding on the generation engine next to its own path (docs/architecture.md §7):
// B concurrent requests, each its own encoded window, decoded with K beams (or greedy) to exactly
// T new tokens, once by the runner's searches in one loop (what WhisperEngine runs today), once as
// search groups on GenerationEngine (KV forks, the scheduler). The two alternate, R rounds after a
// warm-up. Prints one JSON line: ms per round each way and whether every token agreed.
//   whisper_engine_bench --model FILE [--threads N] [--batch B] [--beams K] [--tokens T] [--reps R]
#include <algorithm>
#include <cstdio>
#include <memory>

#include "bench/bench_util.h"
#include "core/backend.h"
#include "decoding/search.h"
#include "engine/generation_engine.h"
#include "models/whisper/decoder.h"
#include "models/whisper/model.h"
#include "models/whisper/runner.h"
#include "models/whisper/transcriber.h"

using namespace parlance;
using namespace parlance::whisper;

int main(int argc, char** argv) {
    const bench::Args a = bench::parse_args(argc, argv);
    const int beams = a.beams;
    try {
        BackendOptions bo;
        bo.threads = a.threads;
        Backend backend(bo);
        auto model = WhisperModel::load(a.model, backend);
        const int B = a.batch, slots_per = beams > 1 ? 2 * beams : 1;
        WhisperRunner runner(model->config, *model->weights, backend, B * slots_per);
        // B different windows: the test signal shifted by a quarter second per request.
        std::vector<std::shared_ptr<CrossKv>> crosses;
        const std::vector<float> pcm = bench::test_signal();
        for (int b = 0; b < B; ++b) {
            std::vector<float> shifted(pcm.begin() + std::min<size_t>(pcm.size(), size_t(4000) * b), pcm.end());
            const std::vector<float> mel = window_mel(*model, shifted, a.threads);
            crosses.push_back(std::make_shared<CrossKv>(model->config, backend));
            CrossKv* c[] = {crosses.back().get()};
            runner.encode(std::span<const std::vector<float>>(&mel, 1), c);
        }
        const SpecialTokens& t = model->tokens;
        std::vector<int> prompt = {t.sot};
        if (t.multilingual) prompt.insert(prompt.end(), {t.language_token("en"), t.transcribe});
        prompt.push_back(t.notimestamps);
        SearchOptions so;
        so.max_new_tokens = a.tokens;
        so.eos = t.eot;
        so.num_beams = beams;
        so.processors = whisper_processors(*model, static_cast<int>(prompt.size()), false, a.tokens);

        auto run_runner = [&](std::vector<std::vector<int32_t>>& out) {
            WhisperStepModel steps(runner);
            std::vector<std::unique_ptr<Search>> searches;
            std::vector<Search*> ptrs;
            for (int b = 0; b < B; ++b) {
                std::vector<int> slots;
                for (int i = 0; i < slots_per; ++i) {
                    slots.push_back(b * slots_per + i);
                    steps.bind(b * slots_per + i, crosses[b].get());
                }
                searches.push_back(make_search(prompt, slots, so));
                ptrs.push_back(searches.back().get());
            }
            run_searches(steps, ptrs);
            out.clear();
            for (auto& s : searches) {
                const auto r = s->result().tokens;
                out.emplace_back(r.begin(), r.end());
            }
            for (int s = 0; s < B * slots_per; ++s) runner.release_slot(s);
        };
        WhisperDecoder decoder(*model, backend);
        GenerationEngineOptions eo;
        eo.kv_cache_bytes = static_cast<size_t>(runner.kv_block_bytes()) * static_cast<size_t>(B) *
                            static_cast<size_t>(beams * WhisperRunner::blocks_per_hypothesis(runner.config()) + 4);
        GenerationEngine engine(decoder, backend, eo);
        auto run_engine = [&](std::vector<std::vector<int32_t>>& out) {
            for (int b = 0; b < B; ++b) {
                GenerationRequest r;
                r.prompt.assign(prompt.begin(), prompt.end());
                r.model_state = crosses[b];
                r.search = so;
                engine.submit(std::move(r));
            }
            out.clear();
            for (auto& r : engine.run_to_completion()) out.push_back(r.tokens);
        };

        std::vector<std::vector<int32_t>> ra, rb;
        std::vector<double> runner_ms, engine_ms;
        bool same = true;
        for (int r = 0; r < a.warmup + a.reps; ++r) {
            double t0 = bench::now_ms();
            run_runner(ra);
            const double ta = bench::now_ms() - t0;
            t0 = bench::now_ms();
            run_engine(rb);
            const double tb = bench::now_ms() - t0;
            same = same && ra == rb;
            if (r >= a.warmup) {
                runner_ms.push_back(ta);
                engine_ms.push_back(tb);
            }
        }
        std::printf(
            "{\"tool\":\"whisper_engine_bench\",\"model\":\"%s\",\"threads\":%d,\"requests\":%d,\"beams\":%d,"
            "\"tokens\":%d,\"runner_ms\":%s,\"engine_ms\":%s,\"same_tokens\":%s,\"engine_steps_per_round\":%llu}\n",
            a.model.c_str(), a.threads, B, beams, a.tokens, bench::json_array(runner_ms).c_str(),
            bench::json_array(engine_ms).c_str(), same ? "true" : "false",
            static_cast<unsigned long long>(engine.stats().steps / static_cast<uint64_t>(a.warmup + a.reps)));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "whisper_engine_bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
