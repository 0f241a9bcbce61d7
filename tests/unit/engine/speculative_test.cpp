// Speculative decoding by prompt lookup: drafts, and the promise that they change nothing but
// speed: on the tiny Qwen3 (tests/fixtures/qwen3/tiny), greedy and sampled continuations with
// drafts are the tokens decoding gives without them, alone and batched, with stops and
// max_tokens landing where they would, and stop tokens inside a draft honoured.
#include <gtest/gtest.h>

#include <fstream>

#include "core/backend.h"
#include "core/core_test_util.h"
#include "core/error.h"
#include "engine/generation_engine.h"
#include "engine/ngram_draft.h"
#include "models/registry.h"
#include "qwen3_fixture.h"
#include "test_support.h"

namespace parlance {
namespace {

using nlohmann::json;

TEST(NgramDraft, ProposesWhatFollowedTheLastMatch) {
    using V = std::vector<int32_t>;
    // ... 1 2 3 [4 5 6] ... 1 2 3 -> 4 5 6 (the 3-gram), capped at max_draft.
    EXPECT_EQ(ngram_draft(V{1, 2, 3, 4, 5, 6, 9, 1, 2, 3}, 3), (V{4, 5, 6}));
    EXPECT_EQ(ngram_draft(V{1, 2, 3, 4, 5, 6, 9, 1, 2, 3}, 2), (V{4, 5}));
    // The most recent occurrence wins; shorter n-grams when longer ones do not recur.
    EXPECT_EQ(ngram_draft(V{7, 1, 8, 7, 2, 9, 7}, 2), (V{2, 9}));
    EXPECT_EQ(ngram_draft(V{1, 2, 3, 4}, 4), V{});
    EXPECT_EQ(ngram_draft(V{5}, 4), V{});
    EXPECT_EQ(ngram_draft(V{5, 5}, 4), (V{5}));
    EXPECT_EQ(ngram_draft(V{1, 2, 1, 2}, 0), V{});
}

struct Outcome {
    std::vector<std::vector<int32_t>> tokens;
    std::vector<SeqState> states;
    GenerationStats stats;
};

Outcome generate(LanguageModel& m, Backend& b, const std::vector<GenerationRequest>& reqs, int speculative,
                 bool together, LanguageModel* draft = nullptr) {
    GenerationEngineOptions o;
    o.kv_cache_bytes = size_t(64) << 20;
    o.speculative_ngram = draft ? 0 : speculative;
    o.draft_model = draft;
    o.speculative_draft = draft ? speculative : 0;
    o.draft_kv_cache_bytes = size_t(16) << 20;
    Outcome out;
    auto collect = [&](GenerationEngine& e) {
        for (auto& r : e.run_to_completion()) {
            out.tokens.push_back(r.tokens);
            out.states.push_back(r.state);
        }
        const GenerationStats s = e.stats();
        out.stats.draft_tokens += s.draft_tokens;
        out.stats.draft_accepted += s.draft_accepted;
        out.stats.draft_model_steps += s.draft_model_steps;
    };
    if (together) {
        GenerationEngine e(m, b, o);
        for (const auto& r : reqs) e.submit(r);
        collect(e);
    } else {
        for (const auto& r : reqs) {
            GenerationEngine e(m, b, o);
            e.submit(r);
            collect(e);
        }
    }
    return out;
}

TEST(Speculative, SameTokensAsDecodingAloneAndBatched) {
    testing::TempDir d;
    Backend backend(BackendOptions{"cpu", 0, true});
    auto model = load_language_model(testing::write_qwen3("tiny", d.path()), backend, {});
    const json ref = testing::qwen3_reference("tiny");
    const auto tok = [&](const std::string& s) { return model->tokenizer().encode(s, true); };
    std::vector<GenerationRequest> reqs;
    auto add = [&](std::vector<int32_t> prompt, float temperature, uint64_t seed, std::vector<int32_t> stops, int max) {
        GenerationRequest r;
        r.prompt = std::move(prompt);
        r.sampling.max_tokens = max;
        r.sampling.temperature = temperature;
        r.sampling.seed = seed;
        r.sampling.stop_ids = std::move(stops);
        reqs.push_back(std::move(r));
    };
    for (int i : {0, 2, 4}) {  // one token, two KV blocks, non-ASCII
        const auto prompt = ref["cases"][i]["prompt_ids"].get<std::vector<int32_t>>();
        add(prompt, 0.0f, 0, {}, 32);
        add(prompt, 0.9f, 7, {}, 32);
    }
    // Text that repeats itself, so drafts are proposed (and some accepted) on every step.
    std::string rep;
    for (int i = 0; i < 12; ++i) rep += "one two three four five six. ";
    add(tok(rep), 0.0f, 0, {}, 48);
    add(tok(rep), 1.2f, 3, {}, 48);
    // A stop: the greedy run's 10th token; drafts that hold it must end the sequence there.
    const auto plain = generate(*model, backend, {reqs.back()}, 0, false);
    add(tok(rep), 1.2f, 3, {plain.tokens[0][9]}, 48);
    const Outcome off = generate(*model, backend, reqs, 0, false);
    EXPECT_EQ(off.states.back(), SeqState::FinishedStop);
    for (bool together : {false, true}) {
        const Outcome on = generate(*model, backend, reqs, 4, together);
        ASSERT_EQ(on.tokens.size(), off.tokens.size());
        for (size_t i = 0; i < reqs.size(); ++i) {
            EXPECT_EQ(on.tokens[i], off.tokens[i]) << "request " << i << (together ? " (batched)" : " (alone)");
            EXPECT_EQ(on.states[i], off.states[i]) << i;
        }
        EXPECT_GT(on.stats.draft_tokens, 0u);
        std::cout << "[speculative] " << (together ? "batched" : "alone") << ": " << on.stats.draft_accepted << " of "
                  << on.stats.draft_tokens << " draft tokens accepted\n";
    }
}

// Self-speculation (GenerationRequest::expected, a live re-decode's previous hypothesis): the
// right guess is verified in one step; a guess wrong from some token on, a wrong one, one longer
// than the output and one past a stop change nothing but the steps — alone and beside others,
// greedy and sampled.
TEST(Speculative, ExpectedTokensAreVerifiedInOneStepAndChangeNoOutput) {
    testing::TempDir d;
    Backend backend(BackendOptions{"cpu", 0, true});
    auto model = load_language_model(testing::write_qwen3("tiny", d.path()), backend, {});
    const json ref = testing::qwen3_reference("tiny");
    GenerationEngineOptions o;
    o.kv_cache_bytes = size_t(64) << 20;
    auto run = [&](std::vector<GenerationRequest> reqs) {
        GenerationEngine e(*model, backend, o);
        for (auto& r : reqs) e.submit(std::move(r));
        return e.run_to_completion();
    };
    auto request = [&](int c, float temperature, std::vector<int32_t> expected, std::vector<int32_t> stops = {}) {
        GenerationRequest r;
        r.prompt = ref["cases"][c]["prompt_ids"].get<std::vector<int32_t>>();
        r.sampling.max_tokens = 24;
        r.sampling.temperature = temperature;
        r.sampling.seed = 11;
        r.sampling.stop_ids = std::move(stops);
        r.expected = std::move(expected);
        return r;
    };
    for (float temperature : {0.0f, 0.8f}) {
        const GenerationResult plain = run({request(0, temperature, {})}).front();
        ASSERT_EQ(plain.tokens.size(), 24u);
        EXPECT_EQ(plain.steps, 24);  // the prompt step samples the first token, then one step each
        EXPECT_EQ(plain.draft_tokens, 0);
        std::vector<int32_t> half_right = plain.tokens, longer = plain.tokens, wrong(24, 17);
        half_right[12] = half_right[12] == 5 ? 6 : 5;
        longer.insert(longer.end(), {1, 2, 3});
        const GenerationResult right = run({request(0, temperature, plain.tokens)}).front();
        EXPECT_EQ(right.tokens, plain.tokens);
        // The prompt step samples the first token; one step then verifies 22 drafts (max_tokens
        // leaves room for no more) and samples the 24th after them.
        EXPECT_EQ(right.steps, 2);
        EXPECT_EQ(right.draft_tokens, 22);
        EXPECT_EQ(right.draft_accepted, 22);
        const GenerationResult half = run({request(0, temperature, half_right)}).front();
        EXPECT_EQ(half.tokens, plain.tokens);
        EXPECT_EQ(half.draft_accepted, 11);  // drafts 1..11 held; the 13th token is decoding's own
        EXPECT_LT(half.steps, plain.steps);
        for (const auto& guess : {wrong, longer})
            EXPECT_EQ(run({request(0, temperature, guess)}).front().tokens, plain.tokens);
        // A stop inside the guess ends the sequence where decoding would.
        const GenerationResult stopped = run({request(0, temperature, plain.tokens, {plain.tokens[6]})}).front();
        const GenerationResult stopped_plain = run({request(0, temperature, {}, {plain.tokens[6]})}).front();
        EXPECT_EQ(stopped.tokens, stopped_plain.tokens);
        EXPECT_EQ(stopped.state, SeqState::FinishedStop);
        // Beside other sequences (one with its own guess, one without): each gets its own tokens.
        const GenerationResult other = run({request(2, temperature, {})}).front();
        const auto together = run(
            {request(0, temperature, half_right), request(2, temperature, other.tokens), request(4, temperature, {})});
        EXPECT_EQ(together[0].tokens, plain.tokens);
        EXPECT_EQ(together[1].tokens, other.tokens);
        EXPECT_EQ(together[2].tokens, run({request(4, temperature, {})}).front().tokens);
        std::cout << "[self-speculation] temperature " << temperature << ": plain " << plain.steps
                  << " steps, right guess " << right.steps << ", half right " << half.steps << "\n";
    }
}

// A draft model: the same tiny Qwen3 (every greedy proposal right) and a one-layer variant with the
// same tokenizer (many wrong): outputs are the tokens decoding gives without drafts, greedy and
// sampled, alone and batched.
TEST(Speculative, DraftModelChangesNoOutput) {
    testing::TempDir d;
    Backend backend(BackendOptions{"cpu", 0, true});
    auto model = load_language_model(testing::write_qwen3("tiny", d.path() / "target"), backend, {});
    auto same = load_language_model(testing::write_qwen3("tiny", d.path() / "same"), backend, {});
    auto other =
        load_language_model(testing::write_qwen3("tiny", d.path() / "other", {},
                                                 {{"num_hidden_layers", 1}, {"layer_types", {"full_attention"}}}),
                            backend, {});
    const json ref = testing::qwen3_reference("tiny");
    std::vector<GenerationRequest> greedy, mixed;
    for (int i : {0, 2, 4}) {
        GenerationRequest r;
        r.prompt = ref["cases"][i]["prompt_ids"].get<std::vector<int32_t>>();
        r.sampling.max_tokens = 24;
        greedy.push_back(r);
        mixed.push_back(r);
        r.sampling.temperature = 0.9f;
        r.sampling.seed = 11;
        r.sampling.stop_ids = model->stop_ids();
        mixed.push_back(r);
    }
    const Outcome g_off = generate(*model, backend, greedy, 0, false);
    const Outcome m_off = generate(*model, backend, mixed, 0, false);
    for (bool together : {false, true}) {
        const Outcome g = generate(*model, backend, greedy, 4, together, same.get());
        EXPECT_EQ(g.tokens, g_off.tokens) << (together ? "batched" : "alone");
        // The same model proposes what the target decodes: every proposal is accepted.
        EXPECT_GT(g.stats.draft_tokens, 0u);
        EXPECT_EQ(g.stats.draft_accepted, g.stats.draft_tokens);
        EXPECT_GT(g.stats.draft_model_steps, 0u);
        const Outcome m = generate(*model, backend, mixed, 3, together, other.get());
        EXPECT_EQ(m.tokens, m_off.tokens) << (together ? "batched" : "alone");
        EXPECT_EQ(m.states, m_off.states);
        EXPECT_LT(m.stats.draft_accepted, m.stats.draft_tokens);
        std::cout << "[speculative] draft model, " << (together ? "batched" : "alone") << ": same model "
                  << g.stats.draft_accepted << "/" << g.stats.draft_tokens << ", one-layer model "
                  << m.stats.draft_accepted << "/" << m.stats.draft_tokens << " accepted\n";
    }
}

TEST(Speculative, ADraftWithAnotherTokenizerIsRefusedWithTheReason) {
    testing::TempDir d;
    Backend backend(BackendOptions{"cpu", 0, true});
    auto model = load_language_model(testing::write_qwen3("tiny", d.path() / "target"), backend, {});
    const auto dir = testing::write_qwen3("tiny", d.path() / "draft");
    // The draft's tokenizer marks <think> (151667) special.
    json tj = json::parse(std::ifstream(dir / "tokenizer.json"));
    for (auto& t : tj["added_tokens"])
        if (t["id"] == 151667) t["special"] = !t["special"].get<bool>();
    std::ofstream(dir / "tokenizer.json") << tj.dump();
    auto draft = load_language_model(dir, backend, {});
    GenerationEngineOptions o;
    o.kv_cache_bytes = size_t(16) << 20;
    o.draft_model = draft.get();
    o.speculative_draft = 4;
    testing::expect_error([&] { GenerationEngine e(*model, backend, o); }, ErrorKind::InvalidModel,
                          {"draft model", "151667"});
}

}  // namespace
}  // namespace parlance
