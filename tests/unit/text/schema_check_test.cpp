// Structured output's schemas checked before grammar work (text/schema_check.h): each schema an
// adversarial client sent to a server that then grew by gigabytes, or held a core for 44 s, is a
// SchemaError naming the keyword's path; schemas at the limits build bounded grammars.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "core/error.h"
#include "text/grammar_constraint.h"
#include "text/schema_check.h"
#include "text/structured_output.h"

namespace parlance {
namespace {

using json = nlohmann::ordered_json;

// The path of the SchemaError `schema` raises ("" when it passes).
std::string refusal(const json& schema, const SchemaLimits& limits = {}) {
    SchemaBudget budget;
    try {
        check_schema(schema, limits, budget);
    } catch (const SchemaError& e) {
        EXPECT_NE(std::string(e.what()).find(e.path), std::string::npos) << e.what();
        return e.path;
    }
    return "";
}

json object_with(const std::string& name, const json& property) {
    return {{"type", "object"}, {"properties", {{name, property}}}, {"required", {name}}};
}

TEST(SchemaCheck, BoundsNoValueSatisfiesAreRefusedAtTheirPath) {
    EXPECT_EQ(refusal(object_with("name", {{"type", "string"}, {"minLength", 10}, {"maxLength", 2}})),
              "#/properties/name/minLength");
    EXPECT_EQ(refusal({{"type", "array"}, {"minItems", 5}, {"maxItems", 1}}), "#/minItems");
    EXPECT_EQ(refusal({{"type", "object"}, {"minProperties", 3}, {"maxProperties", 2}}), "#/minProperties");
    EXPECT_EQ(refusal({{"type", "string"}, {"pattern", "^a{5,2}$"}}), "#/pattern");
    EXPECT_EQ(refusal({{"type", "integer"}, {"minimum", 10}, {"maximum", -5}}), "#");
    EXPECT_EQ(refusal({{"type", "integer"}, {"exclusiveMinimum", 3}, {"exclusiveMaximum", 4}}), "#");
    EXPECT_EQ(refusal({{"type", "number"}, {"minimum", 1.5}, {"exclusiveMaximum", 1.5}}), "#");
    // What a value can satisfy passes.
    EXPECT_EQ(refusal({{"type", "integer"}, {"minimum", -5}, {"maximum", 10}}), "");
    EXPECT_EQ(refusal({{"type", "number"}, {"minimum", 1.5}, {"maximum", 1.5}}), "");
    EXPECT_EQ(refusal({{"type", "string"}, {"minLength", 2}, {"maxLength", 2}, {"pattern", "^[a-z]{2}$"}}), "");
}

TEST(SchemaCheck, KeywordsOfTheWrongTypeAreRefused) {
    EXPECT_EQ(refusal({{"type", "string"}, {"maxLength", 2.5}}), "#/maxLength");
    EXPECT_EQ(refusal({{"type", "string"}, {"minLength", -1}}), "#/minLength");
    EXPECT_EQ(refusal({{"type", "string"}, {"maxLength", "3"}}), "#/maxLength");
    EXPECT_EQ(refusal({{"type", "integer"}, {"minimum", 1e300}}), "#/minimum");
    EXPECT_EQ(refusal({{"type", "integer"}, {"minimum", 0.5}}), "#/minimum");
    EXPECT_EQ(refusal({{"type", "frobnicate"}}), "#/type");
    EXPECT_EQ(refusal({{"$ref", "https://example.com/schema.json"}}), "#/$ref");
    EXPECT_EQ(refusal({{"enum", json::array()}}), "#/enum");
    EXPECT_EQ(refusal({{"anyOf", {{{"type", "string"}}, 3}}}), "#/anyOf/1");
    EXPECT_EQ(refusal({{"type", "object"}, {"properties", {{"a/b", {{"pattern", 7}}}}}}), "#/properties/a~1b/pattern");
    EXPECT_EQ(refusal({{"type", "string"}, {"pattern", "^(a$"}}), "#/pattern");
    EXPECT_EQ(refusal({{"type", "string"}, {"pattern", "^a{x}$"}}), "#/pattern");
    EXPECT_EQ(refusal({{"type", "string"}, {"pattern", "^[ab$"}}), "#/pattern");
}

TEST(SchemaCheck, LimitsBoundEnumsPropertiesAndRepetitions) {
    json values = json::array();
    for (int i = 0; i < 1000; ++i) values.push_back("v" + std::to_string(i));
    EXPECT_EQ(refusal({{"enum", values}}), "");
    values.push_back("one more");
    EXPECT_EQ(refusal({{"enum", values}}), "#/enum");
    // The budget is the request's: two schemas of 600 values each pass alone, not together.
    json six = json::array();
    for (int i = 0; i < 600; ++i) six.push_back(i);
    SchemaBudget budget;
    check_schema({{"enum", six}}, {}, budget);
    EXPECT_THROW(check_schema({{"enum", six}}, {}, budget), SchemaError);

    SchemaLimits small;
    small.max_properties = 3;
    EXPECT_EQ(
        refusal({{"type", "object"}, {"properties", {{"a", true}, {"b", true}, {"c", true}, {"d", true}}}}, small),
        "#/properties");
    json optional = json::object();
    for (int i = 0; i < 257; ++i) optional["p" + std::to_string(i)] = {{"type", "integer"}};
    EXPECT_EQ(refusal({{"type", "object"}, {"properties", optional}}), "#/properties");
    json required = json::array();
    for (int i = 0; i < 257; ++i) required.push_back("p" + std::to_string(i));
    EXPECT_EQ(refusal({{"type", "object"}, {"properties", optional}, {"required", required}}), "");
    EXPECT_EQ(refusal({{"type", "string"}, {"maxLength", 100001}}), "#/maxLength");
    EXPECT_EQ(refusal({{"type", "string"}, {"maxLength", 100000}}), "");
    // Nested counts multiply as llama-grammar writes them out: (a{100}){100} is 10,000 copies.
    EXPECT_EQ(refusal({{"type", "string"}, {"pattern", "^((a{100}){100}){100}$"}}), "#/pattern");
    EXPECT_EQ(refusal({{"type", "string"}, {"pattern", "^(a{100}){100}$"}}), "");
    EXPECT_EQ(refusal({{"type", "string"}, {"pattern", "^a{99999999999999}$"}}), "#/pattern");
    EXPECT_EQ(refusal({{"type", "string"}, {"pattern", "^" + std::string(40, '(') + "a" + std::string(40, ')') + "$"}}),
              "#/pattern");
    EXPECT_EQ(refusal({{"type", "string"}, {"pattern", "^" + std::string(5000, 'a') + "$"}}), "#/pattern");
}

// What passes the check builds a grammar within the byte limit whose start holds at most the
// stack limit — the largest schemas the defaults allow, each one kind at its limit (llama-grammar
// itself refuses a count above 2,000 and reads a larger maximum as unbounded: minLength 100,000 is
// its 400).
TEST(SchemaCheck, SchemasAtTheLimitsBuildBoundedGrammars) {
    const SchemaLimits limits;
    json values = json::array();
    for (int i = 0; i < 1000; ++i) values.push_back("value number " + std::to_string(i));
    json props = json::object();
    for (int i = 0; i < 5000; ++i) props["p" + std::to_string(i)] = {{"type", "integer"}};
    json optional = json::object();
    for (int i = 0; i < 256; ++i) optional["p" + std::to_string(i)] = {{"type", "integer"}};
    json required = json::array();
    for (int i = 0; i < 5000; ++i) required.push_back("p" + std::to_string(i));
    for (const json& schema : {json{{"enum", values}}, json{{"type", "string"}, {"maxLength", 100000}},
                               json{{"type", "string"}, {"minLength", 100000}},
                               json{{"type", "array"}, {"items", {{"type", "integer"}}}, {"maxItems", 100000}},
                               json{{"type", "string"}, {"pattern", "^(ab{99}){990}$"}},
                               json{{"type", "object"}, {"properties", props}, {"required", required}},
                               json{{"type", "object"}, {"properties", optional}}}) {
        const auto t0 = std::chrono::steady_clock::now();
        SchemaBudget budget;
        check_schema(schema, limits, budget);
        StructuredOutputSpec spec;
        spec.schema = schema;
        try {
            const std::string g = structured_output_grammar(spec);
            EXPECT_LE(g.size(), limits.max_grammar_bytes);
            EXPECT_LE(grammar_start_stacks(g), limits.max_grammar_stacks) << schema.dump().substr(0, 80);
        } catch (const Error& e) {  // refused by a limit of ours or llama-grammar's: also bounded
            const std::string why = e.what();
            EXPECT_NE(why.find("grammar does not parse"), std::string::npos) << why;
        }
        // Printed, not asserted (a benchmark is never a test): docs/serve.md quotes these.
        fprintf(stderr, "built %s... in %.1f ms\n", schema.dump().substr(0, 60).c_str(),
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
}

}  // namespace
}  // namespace parlance
