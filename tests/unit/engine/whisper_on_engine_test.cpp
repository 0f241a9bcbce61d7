// Whisper's decoder on the generation engine (issue 14, docs/architecture.md §7 steps 1 to 3):
// each sequence carries its encoded window as model state; a request decoded by Whisper's own
// Search (greedy or beams, with Whisper's logits processors) runs as a group of KV sequences
// whose beams fork blocks; the engine batches every clip's requests into one
// step. Checked against transformers 5.17's ids (tests/fixtures/whisper: greedy at a fixed length
// and to the real stop, timestamp tokens, beams of 4 at a fixed length and to the stop) with all
// of a fixture's clips decoding in the same steps, and against the Whisper path's own searches
// (tokens, summed log-probability, beam score) bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <ggml-cpu.h>
#include <nlohmann/json.hpp>

#include "audio/wav.h"
#include "core/backend.h"
#include "core/error.h"
#include "decoding/search.h"
#include "decoding/step_model.h"
#include "engine/generation_engine.h"
#include "models/whisper/decoder.h"
#include "models/whisper/model.h"
#include "models/whisper/runner.h"
#include "models/whisper/transcriber.h"
#include "test_support.h"

namespace parlance::whisper {
namespace {

using nlohmann::json;

struct Case {
    std::string name;  // clip/check
    std::vector<int32_t> prompt, want;
    int max_new = 0, min_new = 0, beams = 1;
    bool timestamps = false;
    std::shared_ptr<CrossKv> cross;
};

// The fixture's greedy cases (greedy_fixed, greedy_stop, timestamps) with each clip's window
// encoded once.
std::vector<Case> greedy_cases(const std::filesystem::path& dir, const WhisperModel& model, WhisperRunner& runner,
                               Backend& backend) {
    std::ifstream in(dir / "reference.json");
    const json ref = json::parse(in);
    std::vector<Case> cases;
    for (const auto& [clip, c] : ref.at("clips").items()) {
        std::filesystem::path wav = dir / c.at("wav").get<std::string>();
        for (const auto& d : {dir.parent_path(), testing::fixtures_dir() / "audio"})
            if (!std::filesystem::exists(wav)) wav = d / c.at("wav").get<std::string>();
        const std::vector<float> mel = window_mel(model, read_wav_file(wav).samples);
        auto cross = std::make_shared<CrossKv>(model.config, backend);
        CrossKv* crosses[] = {cross.get()};
        runner.encode(std::span<const std::vector<float>>(&mel, 1), crosses);
        for (const char* name : {"greedy_fixed", "greedy_stop", "timestamps", "beam", "beam_stop"}) {
            if (!c.contains(name) || c.at(name).value("status", "") != "ok") continue;
            const json& cj = c.at(name);
            const json& p = cj.at("params");
            Case k;
            k.name = clip + "/" + name;
            k.timestamps = std::string(name) == "timestamps";
            const json& call = k.timestamps ? cj.at("calls").at(0) : cj;
            k.prompt = call.at(k.timestamps ? "decoder_input_ids" : "prompt_ids").get<std::vector<int32_t>>();
            k.want = call.at("generated_ids").get<std::vector<int32_t>>();
            k.max_new = p.value("max_new_tokens", 24);
            k.beams = p.value("num_beams", 1);
            k.min_new = p.contains("min_new_tokens") && p.at("min_new_tokens").is_number()
                            ? p.at("min_new_tokens").get<int>()
                            : 0;
            k.cross = cross;
            cases.push_back(std::move(k));
        }
    }
    return cases;
}

SearchOptions search_options(const Case& k, const WhisperModel& model) {
    SearchOptions so;
    so.max_new_tokens = k.max_new;
    so.eos = model.tokens.eot;
    so.num_beams = k.beams;
    so.processors = whisper_processors(model, static_cast<int>(k.prompt.size()), k.timestamps, k.min_new);
    return so;
}

// Decoded by Whisper's Search as a group of the engine's KV sequences.
GenerationRequest search_request(const Case& k, const WhisperModel& model) {
    GenerationRequest r;
    r.prompt = k.prompt;
    r.model_state = k.cross;
    r.search = search_options(k, model);
    return r;
}

// The runner as a StepModel whose slots are bound to encoded audio windows: a second
// implementation of the decodes (the runner's own cache slots), for the cross-check below.
class RunnerSteps : public StepModel {
public:
    RunnerSteps(WhisperRunner& runner, const CrossKv* cross) : runner_(runner), cross_(cross) {}
    int vocab_size() const override { return runner_.config().vocab_size; }
    std::vector<std::vector<float>> step(std::span<const StepInput> inputs) override {
        std::vector<DecodeItem> items;
        for (const StepInput& in : inputs) items.push_back({in.slot, cross_, in.tokens, in.n_past});
        return runner_.decode(items);
    }
    void copy_slot(int from, int to, int n) override { runner_.copy_slot(from, to, n); }

private:
    WhisperRunner& runner_;
    const CrossKv* cross_;
};

// The same search over the runner's slots (one request at a time).
SearchResult search_on_runner(const Case& k, const WhisperModel& model, WhisperRunner& runner) {
    RunnerSteps steps(runner, k.cross.get());
    std::vector<int> slots;
    for (int i = 0; i < runner.n_slots(); ++i) slots.push_back(i);
    auto search = make_search(std::vector<int>(k.prompt.begin(), k.prompt.end()), slots, search_options(k, model));
    Search* sp = search.get();
    run_searches(steps, std::span<Search* const>(&sp, 1));
    return search->result();
}

// A fixture directory's model, a runner of `slots` slots (which encodes each clip once) and its
// cases.
struct Loaded {
    Backend backend;
    std::unique_ptr<WhisperModel> model;
    std::unique_ptr<WhisperRunner> runner;
    std::vector<Case> cases;
    Loaded(const std::filesystem::path& dir, int threads, int slots)
        : backend(BackendOptions{"cpu", threads, true}),
          model(WhisperModel::load(dir / "model", backend)),
          runner(std::make_unique<WhisperRunner>(model->config, *model->weights, backend, slots)),
          cases(greedy_cases(dir, *model, *runner, backend)) {}
};

class WhisperOnEngine : public ::testing::TestWithParam<const char*> {};

TEST_P(WhisperOnEngine, EveryClipsRequestsInOneBatchGiveTransformersIdsAndTheSearchsScores) {
    Loaded f(testing::fixtures_dir() / "whisper" / GetParam(), 2, 8);
    Backend& backend = f.backend;
    const auto& model = f.model;
    WhisperRunner& runner = *f.runner;
    const std::vector<Case>& cases = f.cases;
    ASSERT_GE(cases.size(), 20u);

    WhisperDecoder decoder(*model, backend);
    GenerationEngine engine(decoder, backend, GenerationEngineOptions{});
    // Every case as a Search group (greedy: one KV sequence; beams of 4: eight, forking).
    std::vector<SeqId> grouped;
    for (const Case& k : cases) grouped.push_back(engine.submit(search_request(k, *model)));
    std::map<SeqId, GenerationResult> results;
    for (GenerationResult& r : engine.run_to_completion()) results[r.id] = std::move(r);
    ASSERT_EQ(results.size(), grouped.size());
    for (size_t i = 0; i < cases.size(); ++i)
        EXPECT_EQ(results[grouped[i]].tokens, cases[i].want) << cases[i].name << " (search group)";
    // The KV blocks of every finished group went back to the cache.
    EXPECT_EQ(engine.stats().kv.used_blocks, 0);

    // Scores bit for bit: the engine's batch changes no logit. llamafile's tiled products sum in
    // an order that depends on the number of columns; setup.sh builds ggml without them, a
    // system ggml may have them.
    if (ggml_cpu_has_llamafile()) GTEST_SKIP() << "ggml built with llamafile: no bit-identical batching";
    for (size_t i = 0; i < cases.size(); ++i) {
        const SearchResult want = search_on_runner(cases[i], *model, runner);
        const GenerationResult& got = results[grouped[i]];
        EXPECT_EQ(std::vector<int32_t>(want.tokens.begin(), want.tokens.end()), got.tokens) << cases[i].name;
        EXPECT_EQ(want.sum_logprob, got.sum_logprob) << cases[i].name;
        EXPECT_EQ(want.score, got.score) << cases[i].name;
    }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, WhisperOnEngine, ::testing::Values("tiny-multi", "tiny-en", "v3-layout"));

TEST(WhisperOnEngine, ASequenceWithoutItsEncodedAudioIsRefused) {
    const auto dir = testing::fixtures_dir() / "whisper" / "tiny-en";
    Backend backend(BackendOptions{"cpu", 1, true});
    auto model = WhisperModel::load(dir / "model", backend);
    WhisperDecoder decoder(*model, backend);
    GenerationEngine engine(decoder, backend, GenerationEngineOptions{});
    GenerationRequest r;
    r.prompt = {model->tokens.sot};
    r.sampling.max_tokens = 2;
    engine.submit(std::move(r));
    EXPECT_THROW(engine.run_to_completion(), Error);
}

// A search group's prompt_row: the raw row after that prompt position, taken from the search's
// own prompt step, is the row of that prefix run as a request of its own (batch invariance),
// for greedy and beam groups, beside other groups in the same step.
TEST(WhisperOnEngine, APromptRowIsThePrefixsOwnRow) {
    Loaded f(testing::fixtures_dir() / "whisper" / "tiny-multi", 1, 1);
    Backend& backend = f.backend;
    const auto& model = f.model;
    std::vector<Case>& cases = f.cases;
    ASSERT_GE(cases.size(), 2u);
    WhisperDecoder decoder(*model, backend);
    GenerationEngine engine(decoder, backend, GenerationEngineOptions{});
    std::map<SeqId, std::pair<Case, int>> asked;                // group -> its case and prompt row
    std::map<SeqId, SeqId> alone;                               // group -> the prefix's own request
    std::map<SeqId, std::shared_ptr<std::vector<float>>> rows;  // the prefix requests' rows
    for (size_t i = 0; i < 2; ++i) {
        Case k = cases[i];
        k.beams = i == 0 ? 1 : 3;
        k.max_new = 4;
        const int row = 0;  // <|startoftranscript|>
        GenerationRequest r = search_request(k, *model);
        r.prompt_row = row;
        const SeqId g = engine.submit(std::move(r));
        asked[g] = {k, row};
        GenerationRequest p;
        p.prompt.assign(k.prompt.begin(), k.prompt.begin() + row + 1);
        p.model_state = k.cross;
        p.sampling.max_tokens = 1;
        auto sink = std::make_shared<std::vector<float>>();
        p.on_logits = [sink](std::span<const float> l) { sink->assign(l.begin(), l.end()); };
        const SeqId id = engine.submit(std::move(p));
        alone[g] = id;
        rows[id] = sink;
        engine.step();  // the second pair's prompts then run beside the first group's decode
    }
    std::map<SeqId, GenerationResult> done;
    for (GenerationResult& r : engine.run_to_completion()) done[r.id] = std::move(r);
    for (const auto& [g, kr] : asked) {
        SCOPED_TRACE(kr.first.name);
        ASSERT_EQ(done.at(g).prompt_logits.size(), static_cast<size_t>(model->config.vocab_size));
        EXPECT_EQ(done.at(g).prompt_logits, *rows.at(alone.at(g)));
        EXPECT_FALSE(done.at(g).tokens.empty());
    }
    GenerationRequest bad = search_request(cases[0], *model);
    bad.prompt_row = static_cast<int>(bad.prompt.size());
    EXPECT_THROW(engine.submit(std::move(bad)), Error);
}

TEST(WhisperOnEngine, AnAbortedBeamGroupReturnsEveryBlock) {
    Loaded f(testing::fixtures_dir() / "whisper" / "tiny-en", 1, 1);
    Backend& backend = f.backend;
    const auto& model = f.model;
    std::vector<Case>& cases = f.cases;
    Case k = cases.front();
    k.beams = 4;
    k.max_new = 40;
    WhisperDecoder decoder(*model, backend);
    GenerationEngine engine(decoder, backend, GenerationEngineOptions{});
    const SeqId id = engine.submit(search_request(k, *model));
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(engine.step().empty());
    EXPECT_GT(engine.stats().kv.used_blocks, 0);
    engine.abort(id);
    const std::vector<GenerationResult> done = engine.step();
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].state, SeqState::FinishedAborted);
    EXPECT_EQ(engine.stats().kv.used_blocks, 0);
    EXPECT_FALSE(engine.has_work());
}

}  // namespace
}  // namespace parlance::whisper
