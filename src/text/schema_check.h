// A JSON schema for structured output, checked before any grammar is built from it.
//
// The bundle's json-schema-to-grammar trusts its input: minLength 10 with maxLength 2 became a
// repetition llama-grammar expanded without end (memory grew by gigabytes until the kernel killed
// the server), a 100,000-value enum held a core for 44 s in llama-grammar's quadratic set-up, a
// float where an int was read is undefined behaviour, a pattern's nested groups recurse once per
// parenthesis. Here every keyword the converter reads is checked for its type, for bounds that
// contradict each other (no value could satisfy them: a 400, not a grammar that emits "-0"), and
// against SchemaLimits, which bound what the grammar can become: its states and its memory, and so
// the time to build it and to mask the vocabulary with it on every step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace parlance {

// What one request's structured output may ask for (serve --schema-* flags; docs/serve.md).
struct SchemaLimits {
    // enum values across all schemas of a request (OpenAI's structured outputs allow 1,000). Each
    // value is a parse stack the grammar holds at once, matched against the vocabulary every step.
    int64_t max_enum_values = 1000;
    // object properties across all schemas of a request (OpenAI's limit is 5,000).
    int64_t max_properties = 5000;
    // Properties not in their object's `required`, across all schemas of a request: the converter
    // writes every order they may come in as its own rule, and building and parsing the grammar
    // grows faster than their square (400: 0.12 s; 5,000: 186 s on one core of this project's CI
    // machine). OpenAI's strict mode allows none.
    int64_t max_optional_properties = 256;
    // The sum of the repetition counts a request's schemas ask for: minLength/maxLength,
    // minItems/maxItems, min/maxProperties and a pattern's {m,n} (nested ones multiplied).
    // llama-grammar writes each repetition out, so this bounds the grammar's states.
    int64_t max_repetition = 100000;
    // The grammar (GBNF) text the schemas become.
    size_t max_grammar_bytes = 1u << 20;
    // Parse stacks the grammar may hold at once, at the start and after any token: each is matched
    // against the whole vocabulary when a step's choice is masked.
    size_t max_grammar_stacks = 1024;
};

// A schema refused: `path` is a JSON pointer into the schema ("#/properties/name/maxLength").
class SchemaError : public std::runtime_error {
public:
    SchemaError(std::string path, const std::string& message)
        : std::runtime_error("at " + path + ": " + message), path(std::move(path)) {}
    std::string path;
};

// What the schemas of one request have used of the limits so far (a request's tools and its
// response format share one budget).
struct SchemaBudget {
    int64_t enum_values = 0, properties = 0, optional_properties = 0, repetition = 0;
};

// Throws SchemaError for the first keyword that is of the wrong type, contradicts another, names
// what no value satisfies, reaches outside the schema ($ref other than "#..."), or goes past
// `limits` with what `budget` already holds (which it adds to).
void check_schema(const nlohmann::ordered_json& schema, const SchemaLimits& limits, SchemaBudget& budget);

}  // namespace parlance
