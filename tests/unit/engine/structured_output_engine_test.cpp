// The engine under a token constraint (structured output), on the tiny random Qwen3 with the real
// tokenizer: whatever its logits, greedy and sampled outputs are JSON of the schema and end with
// an end-of-sequence token; a constrained greedy token is the argmax of the allowed ones; an
// unconstrained request batched with constrained ones is unchanged; each choice constrains its
// own sequence (the prototype is cloned).
#include <gtest/gtest.h>

#include "core/backend.h"
#include "engine/generation_engine.h"
#include "models/registry.h"
#include "qwen3_fixture.h"
#include "test_support.h"
#include "text/grammar_constraint.h"
#include "text/structured_output.h"

namespace parlance {
namespace {

using json = nlohmann::ordered_json;

TEST(StructuredOutputEngine, OutputsAreJsonOfTheSchemaAloneAndBatched) {
    testing::TempDir d;
    Backend backend(BackendOptions{"cpu", 0, true});
    auto model = load_language_model(testing::write_qwen3("tiny", d.path()), backend, {});
    const Tokenizer& tok = model->tokenizer();
    auto vocab = std::make_shared<GrammarVocabulary>(tok, static_cast<size_t>(model->vocab_size()), model->stop_ids());
    StructuredOutputSpec spec;
    spec.schema = json::parse(R"({"type": "object", "properties": {
        "answer": {"enum": ["yes", "no", "ça dépend"]}, "score": {"type": "integer"}, "sure": {"type": "boolean"}},
        "required": ["answer", "score", "sure"], "additionalProperties": false})");
    std::shared_ptr<const TokenConstraint> constraint = make_grammar_constraint(structured_output_grammar(spec), vocab);
    const auto prompt =
        tok.encode("<|im_start|>user\nIs it raining? Answer in JSON.<|im_end|>\n<|im_start|>assistant\n", true);
    auto request = [&](float temperature, uint64_t seed, bool constrained) {
        GenerationRequest r;
        r.prompt = prompt;
        r.sampling.max_tokens = 160;
        r.sampling.temperature = temperature;
        r.sampling.seed = seed;
        r.sampling.stop_ids = model->stop_ids();
        if (constrained) r.constraint = constraint;
        return r;
    };
    GenerationEngineOptions o;
    o.kv_cache_bytes = size_t(64) << 20;
    o.speculative_ngram = 4;  // constrained sequences must decode without drafts
    auto run = [&](const std::vector<GenerationRequest>& reqs) {
        GenerationEngine e(*model, backend, o);
        for (const auto& r : reqs) e.submit(r);
        return e.run_to_completion();
    };
    const std::vector<GenerationRequest> reqs = {request(0.0f, 0, true), request(0.8f, 1, true), request(1.5f, 2, true),
                                                 request(0.0f, 0, false)};
    const auto together = run(reqs);
    ASSERT_EQ(together.size(), reqs.size());
    for (size_t i = 0; i + 1 < reqs.size(); ++i) {
        const auto& t = together[i].tokens;
        ASSERT_EQ(together[i].state, SeqState::FinishedStop) << i;
        const std::string text = tok.decode(std::span<const int32_t>(t.data(), t.size() - 1));
        const json j = json::parse(text, nullptr, false);
        ASSERT_TRUE(j.is_object()) << text;
        EXPECT_TRUE(j["score"].is_number_integer() && j["sure"].is_boolean()) << text;
        const std::string a = j["answer"];
        EXPECT_TRUE(a == "yes" || a == "no" || a == "ça dépend") << text;
        std::cout << "[structured] request " << i << ": " << text << "\n";
        // The same alone.
        EXPECT_EQ(run({reqs[i]})[0].tokens, t) << i;
    }
    // The unconstrained request is what it is alone.
    EXPECT_EQ(run({reqs.back()})[0].tokens, together.back().tokens);

    // Greedy under the constraint: each token is the argmax of the allowed tokens of its row.
    auto c = constraint->clone();
    std::vector<std::vector<float>> rows;
    GenerationRequest g = request(0.0f, 0, true);
    g.on_logits = [&](std::span<const float> row) { rows.emplace_back(row.begin(), row.end()); };
    GenerationEngine e(*model, backend, o);
    e.submit(g);
    const auto out = e.run_to_completion()[0].tokens;
    ASSERT_EQ(rows.size(), out.size());
    for (size_t k = 0; k < out.size(); ++k) {
        c->mask(rows[k]);
        const auto best = static_cast<int32_t>(std::max_element(rows[k].begin(), rows[k].end()) - rows[k].begin());
        ASSERT_EQ(out[k], best) << "token " << k;
        c->accept(out[k]);
    }
}

}  // namespace
}  // namespace parlance
