// Whisper's requests on the generation engine (issue 14, docs/architecture.md §7 step 4): the
// WhisperEngine hands every decode — each window's prefix for its language and no-speech
// probability, each temperature attempt's search — to a DecodeService. The server's is the
// generation engine (engine/generation_decode_service.h). Many requests of every kind decoding in
// the same steps must give each one's transcript alone — the same Session stepped without a
// thread on a service of its own (`parlance transcribe`'s path) — bit for bit (tokens, times,
// avg_logprob, word timestamps and probabilities), and the engine must hand back every KV block. The bundled model on
// real speech, so the texts are real and the windows, prompts and fallbacks are those of a real transcription.
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <vector>

#include "audio/wav.h"
#include "core/backend.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/generation_decode_service.h"
#include "models/whisper/engine.h"
#include "models/whisper/model.h"
#include "test_support.h"
#include "whisper_on_engine.h"

namespace parlance {
namespace {

struct Named {
    std::string name;
    TranscriptionRequest request;
};

std::vector<Named> requests() {
    const std::vector<float> jfk = read_wav_file(testing::fixtures_dir() / "audio" / "jfk.wav").samples;
    const std::vector<float> longform = read_wav_file(testing::fixtures_dir() / "whisper" / "longform.wav").samples;
    std::vector<Named> out;
    auto add = [&](std::string name, const std::vector<float>& pcm, auto&& set) {
        TranscriptionRequest r;
        r.pcm = pcm;
        r.options.beam_size = 1;
        r.options.temperatures = {0.0f};
        set(r.options);
        out.push_back({std::move(name), std::move(r)});
    };
    add("greedy", jfk, [](TranscribeOptions&) {});
    add("words", jfk, [](TranscribeOptions& o) { o.word_timestamps = true; });
    add("beams", jfk, [](TranscribeOptions& o) { o.beam_size = 3; });
    add("no-timestamps", jfk, [](TranscribeOptions& o) { o.timestamps = false; });
    // Every window's first attempt falls back (no average log-probability reaches 0).
    add("fallback", jfk, [](TranscribeOptions& o) {
        o.temperatures = {0.0f, 0.6f};
        o.logprob_threshold = 0.0f;
        o.seed = 7;
    });
    add("long-prompted", longform, [](TranscribeOptions& o) {
        o.initial_prompt = "A reading of a novel.";
        o.condition_on_previous_text = true;
    });
    add("long-beams-words", longform, [](TranscribeOptions& o) {
        o.beam_size = 2;
        o.word_timestamps = true;
    });
    return out;
}

std::vector<Transcript> serve(whisper::WhisperEngine& engine, std::vector<Named> batch) {
    std::vector<std::future<Transcript>> futures;
    for (Named& n : batch) futures.push_back(engine.submit(std::move(n.request)));
    std::vector<Transcript> out;
    for (auto& f : futures) out.push_back(f.get());
    return out;
}

// The bundled model on two threads, and a quiet log, for the engines under test.
struct Bundled {
    Backend backend{BackendOptions{"cpu", 2, true, false}};
    std::unique_ptr<whisper::WhisperModel> model = whisper::WhisperModel::load(testing::bundled_model_dir(), backend);
    Logger log{LogLevel::Error};
};

TEST(WhisperEngineOnGenerationEngine, TranscriptsAreEachRequestAloneBitForBit) {
    Bundled b;
    auto& [backend, model, log] = b;
    EngineOptions eo;
    eo.cache_slots = 16;
    eo.decode_service = generation_decode_service_factory();
    whisper::WhisperEngine on_engine(*model, backend, eo, log);

    const std::vector<Named> batch = requests();
    std::vector<Transcript> want;
    whisper::WhisperRunner runner(model->config, *model->weights, backend, 1);
    for (const Named& n : batch)
        want.push_back(testing::transcribe_on_engine(*model, runner, n.request.pcm, n.request.options));
    const std::vector<Transcript> got = serve(on_engine, requests());
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < want.size(); ++i) {
        SCOPED_TRACE(batch[i].name);
        const Transcript &a = want[i], &b = got[i];
        EXPECT_FALSE(a.text.empty());
        EXPECT_EQ(a.text, b.text);
        EXPECT_EQ(a.language, b.language);
        ASSERT_EQ(a.segments.size(), b.segments.size());
        for (size_t k = 0; k < a.segments.size(); ++k) {
            const Segment &x = a.segments[k], &y = b.segments[k];
            EXPECT_EQ(x.tokens, y.tokens) << k;
            EXPECT_EQ(x.start, y.start) << k;
            EXPECT_EQ(x.end, y.end) << k;
            EXPECT_EQ(x.avg_logprob, y.avg_logprob) << k;
            EXPECT_EQ(x.no_speech_prob, y.no_speech_prob) << k;
            EXPECT_EQ(x.temperature, y.temperature) << k;
            ASSERT_EQ(x.words.size(), y.words.size()) << k;
            for (size_t w = 0; w < x.words.size(); ++w) {
                EXPECT_EQ(x.words[w].word, y.words[w].word);
                EXPECT_EQ(x.words[w].start, y.words[w].start);
                EXPECT_EQ(x.words[w].probability, y.words[w].probability);
            }
        }
    }
    // The fallback request's windows were decoded again at the hotter temperature.
    EXPECT_EQ(got[4].segments.at(0).temperature, 0.6f);
    EXPECT_GT(got[5].segments.size(), 1u);  // two windows, the second prompted with the first
    const EngineStats s = on_engine.stats();
    EXPECT_EQ(s.completed, batch.size());
    EXPECT_EQ(s.kv.used_blocks, 0);  // every request's blocks went back to the pool
    EXPECT_EQ(s.kv_reserved_blocks, 0);
    EXPECT_EQ(s.free_slots, 16);
    EXPECT_GT(s.decoder_steps, 0u);
}

// A greedy request holds one decoder sequence: with one cache slot it is served (the slot-based
// engine took two), and a beam request, which needs two per beam, is refused naming beam_size.
TEST(WhisperEngineOnGenerationEngine, AGreedyRequestHoldsOneSequence) {
    Bundled b;
    auto& [backend, model, log] = b;
    EngineOptions eo;
    eo.cache_slots = 1;
    eo.decode_service = generation_decode_service_factory();
    whisper::WhisperEngine engine(*model, backend, eo, log);
    std::vector<Named> batch = requests();
    EXPECT_FALSE(engine.submit(std::move(batch[0].request)).get().text.empty());
    try {
        engine.submit(std::move(batch[2].request));
        ADD_FAILURE() << "three beams were accepted with one cache slot";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
        EXPECT_NE(std::string(e.what()).find("beam_size 3"), std::string::npos) << e.what();
    }
    EXPECT_EQ(engine.max_beams(), 1);
}

}  // namespace
}  // namespace parlance
