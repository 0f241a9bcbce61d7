// WhisperEngine serving B concurrent transcriptions of one file (the server's path without HTTP),
// with its decodes on the runner's own cache slots and on the generation engine
// (docs/architecture.md §7). The two alternate, R rounds after a warm-up. Prints one JSON line:
// ms per round each way, the decoder steps each took, and whether every transcript agreed.
//   whisper_serve_bench --model DIR --audio WAV16K [--threads N] [--batch B] [--beams K] [--reps R]
#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "audio/wav.h"
#include "bench/bench_util.h"
#include "core/backend.h"
#include "core/log.h"
#include "engine/generation_decode_service.h"
#include "models/whisper/engine.h"
#include "models/whisper/model.h"

using namespace parlance;

namespace {

struct Round {
    double ms = 0.0;
    std::vector<std::string> texts;
    uint64_t steps = 0;
};

Round serve(whisper::WhisperEngine& engine, const std::vector<float>& pcm, int batch, int beams) {
    const uint64_t steps_before = engine.stats().decoder_steps;
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::future<Transcript>> futures;
    for (int b = 0; b < batch; ++b) {
        TranscriptionRequest r;
        r.pcm = pcm;
        r.options.beam_size = beams;
        futures.push_back(engine.submit(std::move(r)));
    }
    Round out;
    for (auto& f : futures) out.texts.push_back(f.get().text);
    out.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    out.steps = engine.stats().decoder_steps - steps_before;
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    const bench::Args a = bench::parse_args(argc, argv);
    if (a.audio.empty()) {
        std::fprintf(stderr, "--audio FILE is required\n");
        return 2;
    }
    try {
        BackendOptions bo;
        bo.threads = a.threads;
        Backend backend(bo);
        auto model = whisper::WhisperModel::load(a.model, backend);
        const std::vector<float> pcm = read_wav_file(a.audio).samples;
        Logger log(LogLevel::Error);
        EngineOptions eo;
        eo.cache_slots = a.batch * (a.beams > 1 ? 2 * a.beams : 2);
        whisper::WhisperEngine on_slots(*model, backend, eo, log);
        eo.decode_service = generation_decode_service_factory();
        whisper::WhisperEngine on_engine(*model, backend, eo, log);
        for (int w = 0; w < a.warmup; ++w) {
            serve(on_slots, pcm, a.batch, a.beams);
            serve(on_engine, pcm, a.batch, a.beams);
        }
        std::vector<double> slots_ms, engine_ms;
        uint64_t slots_steps = 0, engine_steps = 0;
        bool same = true;
        for (int r = 0; r < a.reps; ++r) {
            const Round x = serve(on_slots, pcm, a.batch, a.beams);
            const Round y = serve(on_engine, pcm, a.batch, a.beams);
            slots_ms.push_back(x.ms);
            engine_ms.push_back(y.ms);
            slots_steps = x.steps;
            engine_steps = y.steps;
            same = same && x.texts == y.texts;
        }
        auto list = [](const std::vector<double>& v) {
            std::string s = "[";
            for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(static_cast<int>(v[i]));
            return s + "]";
        };
        std::printf(
            "{\"batch\": %d, \"beams\": %d, \"threads\": %d, \"slots_ms\": %s, \"engine_ms\": %s, "
            "\"slots_steps\": %llu, \"engine_steps\": %llu, \"same_text\": %s}\n",
            a.batch, a.beams, a.threads, list(slots_ms).c_str(), list(engine_ms).c_str(),
            static_cast<unsigned long long>(slots_steps), static_cast<unsigned long long>(engine_steps),
            same ? "true" : "false");
        return same ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "whisper_serve_bench: %s\n", e.what());
        return 1;
    }
}
