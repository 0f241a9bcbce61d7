// Structured output over the real Qwen3 tokenizer (151,669 tokens, byte-level BPE, so CJK text
// splits inside characters): JSON-schema grammars (the bundle's converter), the token constraint
// (the bundle's code-point matcher under our token layer), and the promise that matters — text
// chosen under the constraint, whatever the logits, is JSON of the schema.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <set>

#include "core/error.h"
#include "test_support.h"
#include "text/grammar_constraint.h"
#include "text/structured_output.h"
#include "text/tokenizer.h"

namespace parlance {
namespace {

using json = nlohmann::ordered_json;

constexpr int32_t kImEnd = 151645, kEndOfText = 151643;
constexpr size_t kRows = 151936;  // Qwen3's logits width: more rows than tokens

class StructuredOutput : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        tok_ = new Tokenizer(Tokenizer::from_json_file(testing::assets_dir() / "qwen3" / "tokenizer.json"));
        vocab_ = new std::shared_ptr<const GrammarVocabulary>(
            std::make_shared<GrammarVocabulary>(*tok_, kRows, std::vector<int32_t>{kImEnd, kEndOfText}));
    }
    static void TearDownTestSuite() {
        delete vocab_;
        delete tok_;
    }
    static std::unique_ptr<TokenConstraint> constraint(const StructuredOutputSpec& spec) {
        return make_grammar_constraint(structured_output_grammar(spec), *vocab_);
    }
    // Chooses tokens as the engine does under random logits (the argmax if allowed, else the
    // argmax of the masked row) until an end token; returns the text (nullopt: no end in `limit`).
    static std::optional<std::string> run(TokenConstraint& c, uint32_t seed, int limit = 160) {
        std::mt19937 rng(seed);
        std::normal_distribution<float> noise;
        std::vector<float> row(kRows);
        std::vector<int32_t> out;
        for (int step = 0; step < limit; ++step) {
            for (float& x : row) x = noise(rng);
            int32_t t = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
            if (!c.allows(t)) {
                c.mask(row);
                t = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
                EXPECT_TRUE(std::isfinite(row[static_cast<size_t>(t)])) << "the mask left nothing";
                EXPECT_TRUE(c.allows(t));
            }
            c.accept(t);
            if (t == kImEnd || t == kEndOfText) return tok_->decode(out);
            out.push_back(t);
        }
        return std::nullopt;
    }
    // Whether the constraint lets exactly these tokens through, then an end.
    static bool accepts(TokenConstraint& c, const std::string& text) {
        for (int32_t t : tok_->encode(text, true)) {
            if (!c.allows(t)) return false;
            c.accept(t);
        }
        return c.allows(kImEnd);
    }

    static inline Tokenizer* tok_ = nullptr;
    static inline std::shared_ptr<const GrammarVocabulary>* vocab_ = nullptr;
};

const json kWeather = json::parse(R"({
  "type": "object",
  "properties": {
    "city": {"enum": ["Paris", "東京", "Zürich"]},
    "days": {"type": "integer"},
    "rain": {"type": "boolean"},
    "unit": {"type": "string", "enum": ["c", "f"]}
  },
  "required": ["city", "days", "rain"],
  "additionalProperties": false
})");

TEST_F(StructuredOutput, AnythingChosenUnderTheConstraintIsJsonOfTheSchema) {
    StructuredOutputSpec spec;
    spec.schema = kWeather;
    const auto proto = constraint(spec);
    std::set<std::string> cities;
    for (uint32_t seed = 1; seed <= 6; ++seed) {
        auto c = proto->clone();
        const auto text = run(*c, seed);
        ASSERT_TRUE(text) << "no end within the limit (seed " << seed << ")";
        const json j = json::parse(*text, nullptr, false);
        ASSERT_TRUE(j.is_object()) << *text;
        ASSERT_TRUE(j.contains("city") && j.contains("days") && j.contains("rain")) << *text;
        EXPECT_TRUE(j["days"].is_number_integer()) << *text;
        EXPECT_TRUE(j["rain"].is_boolean()) << *text;
        const std::string city = j["city"];
        EXPECT_TRUE(city == "Paris" || city == "東京" || city == "Zürich") << *text;
        if (j.contains("unit")) {
            EXPECT_TRUE(j["unit"] == "c" || j["unit"] == "f") << *text;
        }
        for (const auto& [k, v] : j.items()) EXPECT_TRUE(kWeather["properties"].contains(k)) << k;
        cities.insert(city);
    }
    // The prototype is untouched by its clones.
    EXPECT_FALSE(proto->allows(kImEnd));
    EXPECT_TRUE(proto->allows(tok_->encode("{")[0]));
}

TEST_F(StructuredOutput, AllowsAgreesWithTheMask) {
    StructuredOutputSpec spec;
    spec.schema = kWeather;
    auto c = constraint(spec);
    std::mt19937 rng(5);
    // States: the start, inside a key, mid-way through a CJK character (a byte-level token that
    // ends inside 東), after the value.
    const std::vector<std::string> prefixes = {"", "{\"ci", "{\"city\": \"", "{\"city\": \"東京\", \"days\": 12"};
    for (const std::string& p : prefixes) {
        auto s = constraint(spec);
        for (int32_t t : tok_->encode(p)) {
            ASSERT_TRUE(s->allows(t)) << p;
            s->accept(t);
        }
        std::vector<float> row(kRows, 0.0f);
        s->mask(row);
        size_t allowed = 0;
        for (size_t t = 0; t < kRows; ++t) {
            const bool finite = std::isfinite(row[t]);
            allowed += finite;
            if (t % 97 == 0 || finite) {
                ASSERT_EQ(s->allows(static_cast<int32_t>(t)), finite) << p << " token " << t;
            }
        }
        EXPECT_GT(allowed, 0u) << p;
        EXPECT_LT(allowed, 20000u) << p;  // a real constraint, not everything
    }
    // Rows past the tokenizer, and special tokens other than the end ones, are never allowed.
    EXPECT_FALSE(c->allows(151900));
    EXPECT_FALSE(c->allows(151644));  // <|im_start|>
}

TEST_F(StructuredOutput, CharactersSplitAcrossTokensStayWhole) {
    StructuredOutputSpec spec;
    spec.schema = {{"enum", {"東京"}}};
    auto c = constraint(spec);
    // Feed 東京's bytes one byte-level token at a time: each prefix is allowed, nothing else.
    const std::string text = "\"東京\"";
    std::vector<int32_t> bytes_tokens;
    for (unsigned char b : text) {
        const auto ids = tok_->encode(std::string(1, static_cast<char>(b)));
        ASSERT_EQ(ids.size(), 1u);
        bytes_tokens.push_back(ids[0]);
    }
    for (size_t i = 0; i < bytes_tokens.size(); ++i) {
        ASSERT_TRUE(c->allows(bytes_tokens[i])) << "byte " << i;
        c->accept(bytes_tokens[i]);
        if (i + 1 < bytes_tokens.size()) {
            EXPECT_FALSE(c->allows(kImEnd)) << "byte " << i;
        }
    }
    EXPECT_TRUE(c->allows(kImEnd));
    // A different character sharing 東's first byte is refused once its last byte differs.
    auto d = constraint(spec);
    ASSERT_TRUE(accepts(*d, "\"東京\""));
    auto e = constraint(spec);
    EXPECT_FALSE(accepts(*e, "\"東亰\""));
}

TEST_F(StructuredOutput, ReasoningAndToolCallsKeepTheirFormat) {
    StructuredOutputSpec spec;
    spec.schema = kWeather;
    spec.reasoning = true;
    spec.tools = {{"get_weather",
                   json::parse(R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})")}};
    const std::string answer = "{\"city\": \"Paris\", \"days\": 3, \"rain\": false}";
    EXPECT_TRUE(accepts(*constraint(spec), answer));
    EXPECT_TRUE(accepts(*constraint(spec), "<think>\nRain in Paris? Let me see: 3 < 4.\n</think>\n\n" + answer));
    EXPECT_TRUE(
        accepts(*constraint(spec),
                "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"));
    EXPECT_FALSE(accepts(*constraint(spec), "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"));
    EXPECT_FALSE(accepts(*constraint(spec), "{\"city\": \"Rome\", \"days\": 3, \"rain\": false}"));
    EXPECT_FALSE(accepts(*constraint(spec), "Sure! " + answer));
    spec.reasoning = false;
    EXPECT_FALSE(accepts(*constraint(spec), "<think>\nx\n</think>\n\n" + answer));
    spec.starts_in_reasoning = true;
    EXPECT_TRUE(accepts(*constraint(spec), "x\n</think>\n\n" + answer));
}

TEST_F(StructuredOutput, JsonObjectIsAnyObject) {
    StructuredOutputSpec spec;
    spec.schema = {{"type", "object"}};
    EXPECT_TRUE(accepts(*constraint(spec), "{\"a\": [1, 2.5, null, {\"b\": \"ü\"}], \"c\": true}"));
    EXPECT_TRUE(accepts(*constraint(spec), "{}"));
    EXPECT_FALSE(accepts(*constraint(spec), "[1]"));
    EXPECT_FALSE(accepts(*constraint(spec), "{\"a\": 1"));
}

// An enum at the default limit (1,000 values, each a parse stack at the start): what is chosen is
// one of its values. The time a mask of the whole vocabulary takes with that many stacks is
// printed (docs/serve.md quotes it), not asserted.
TEST_F(StructuredOutput, AnEnumAtTheLimitChoosesOneOfItsValues) {
    StructuredOutputSpec spec;
    json values = json::array();
    for (int i = 0; i < 1000; ++i) values.push_back("value " + std::to_string(i * 7919 % 100000));
    spec.schema = {{"enum", values}};
    auto c = constraint(spec);
    std::vector<float> row(kRows, 0.0f);
    const auto t0 = std::chrono::steady_clock::now();
    c->mask(row);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    fprintf(stderr, "mask of %zu rows under a 1,000-value enum: %.1f ms\n", kRows, ms);
    const auto text = run(*c, 7);
    ASSERT_TRUE(text.has_value());
    const json value = json::parse(*text, nullptr, false);
    EXPECT_NE(std::find(values.begin(), values.end(), value), values.end()) << *text;
}

TEST_F(StructuredOutput, BadSchemasAndGrammarsAreRefusedWithTheReason) {
    StructuredOutputSpec spec;
    spec.schema = {{"type", "frobnicate"}};
    try {
        structured_output_grammar(spec);
        FAIL() << "accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
        EXPECT_NE(std::string(e.what()).find("frobnicate"), std::string::npos) << e.what();
    }
    try {
        make_grammar_constraint("root ::= \"a\" undefined-rule", *vocab_);
        FAIL() << "accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
        EXPECT_NE(std::string(e.what()).find("grammar"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace parlance
