// Qwen3-ASR end to end against transformers 5.17 (tests/fixtures/qwen3_asr): our features and
// encoder, the toolkit's prompt, the audio embeddings entering the Qwen3 decoder through the
// engine's embedding spans — the prompt's last-position logits and greedy continuations, with
// the language detected and forced.
#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "audio/wav.h"
#include "core/backend.h"
#include "engine/generation_engine.h"
#include "models/qwen3_asr/model.h"
#include "qwen3_fixture.h"
#include "test_support.h"

namespace parlance::testing {
namespace {

using nlohmann::json;

std::vector<float> clip_samples(const json& c) {
    std::vector<float> pcm = read_wav_file(fixtures_dir() / "audio" / c["file"].get<std::string>()).samples;
    const size_t first = c["first_sample"].get<size_t>(), n = c["samples"].get<size_t>();
    return std::vector<float>(pcm.begin() + first, pcm.begin() + first + n);
}

uint64_t key_of(const std::vector<float>& v) {  // what the prompt is conditioned on: the audio
    uint64_t h = 0xCBF29CE484222325ULL;
    const auto* b = reinterpret_cast<const unsigned char*>(v.data());
    for (size_t i = 0; i < v.size() * sizeof(float); ++i) h = (h ^ b[i]) * 0x100000001B3ULL;
    return h;
}

TEST(Qwen3Asr, LogitsAndGreedyIdsMatchTransformers) {
    TempDir dir;
    Backend backend(BackendOptions{"cpu", 2, true, false});
    auto m = qwen3_asr::Qwen3AsrModel::load(write_qwen3_asr("tiny", dir.path()), backend);
    const json ref = qwen3_asr_reference("tiny");
    const int stride = ref["logit_stride"];
    for (const json& c : ref["cases"]) {
        SCOPED_TRACE(c["name"].get<std::string>());
        const qwen3_asr::Features f = m->features(clip_samples(c));
        const std::vector<float> emb = m->encoder().encode(f);
        const int n_audio = m->encoder().tokens(f.valid_frames);
        ASSERT_EQ(n_audio, c["audio_tokens"].get<int>());
        int at = -1;
        const std::vector<int32_t> auto_prompt = m->prompt(n_audio, "", "", &at);
        EXPECT_EQ(auto_prompt, c["prompt_ids"].get<std::vector<int32_t>>());
        const std::vector<int32_t> forced_prompt = m->prompt(n_audio, "", "English", nullptr);
        EXPECT_EQ(forced_prompt, c["greedy_forced_english"]["prompt_ids"].get<std::vector<int32_t>>());

        for (const char* which : {"greedy_auto", "greedy_forced_english"}) {
            const bool forced = std::string(which) == "greedy_forced_english";
            GenerationEngine e(m->decoder(), backend, {});
            GenerationRequest r;
            r.prompt = forced ? forced_prompt : auto_prompt;
            r.spans.push_back({at, n_audio, emb});
            r.cache_key = key_of(emb);
            r.sampling.max_tokens = c[which]["max_new_tokens"];
            r.sampling.min_tokens = r.sampling.max_tokens;
            r.sampling.stop_ids = m->decoder().stop_ids();
            std::vector<float> first;
            r.on_logits = [&](std::span<const float> l) {
                if (first.empty()) first.assign(l.begin(), l.end());
            };
            e.submit(std::move(r));
            const GenerationResult out = e.run_to_completion().at(0);
            EXPECT_EQ(out.tokens, c[which]["ids"].get<std::vector<int32_t>>()) << which;
            if (forced) continue;
            const auto strided = c["logits_strided_f64"].get<std::vector<double>>();
            double diff = 0, scale = 0;
            for (size_t i = 0; i < strided.size(); ++i) {
                diff = std::max(diff, std::abs(first[i * stride] - strided[i]));
                scale = std::max(scale, std::abs(strided[i]));
            }
            const auto top = c["top10_ids"].get<std::vector<int>>();
            const auto top_v = c["top10_logits_f64"].get<std::vector<double>>();
            for (size_t i = 0; i < top.size(); ++i) diff = std::max(diff, std::abs(first[top[i]] - top_v[i]));
            EXPECT_LT(diff / scale, 1e-3) << "logits";
            if (std::getenv("PARLANCE_DEBUG_LOGITS")) std::fprintf(stderr, "logits rel %.3g\n", diff / scale);
        }
    }
}

}  // namespace
}  // namespace parlance::testing
