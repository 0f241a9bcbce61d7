// The grammar (GBNF) of a chat model's output under a response format: one JSON value of a JSON
// schema (json_object is the schema {"type": "object"}), converted by the bundle's
// json-schema-to-grammar, optionally after a reasoning block and optionally replaced by tool
// calls in the Hermes/Qwen format, so a constrained output still parses as chat_output expects.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/schema_check.h"

namespace parlance {

struct StructuredOutputSpec {
    nlohmann::ordered_json schema;  // the content's JSON schema
    // The output may open with "<think>...</think>" (reasoning on), or starts inside one (the
    // prompt opened it). Reasoning text is free except that it cannot contain "</" before the end.
    bool reasoning = false;
    bool starts_in_reasoning = false;
    // Instead of content, the output may be one or more "<tool_call>\n{...}\n</tool_call>"
    // blocks, each naming one of these functions with arguments of its parameters' schema.
    struct Function {
        std::string name;
        nlohmann::ordered_json parameters;  // null: any object
    };
    std::vector<Function> tools;
    // The grammar text's size is checked against limits.max_grammar_bytes (the schemas themselves
    // are checked by check_schema before this is called).
    SchemaLimits limits;
};

// Throws Error(InvalidArgument) naming what of the schema the converter refused, or a grammar
// larger than spec.limits allows.
std::string structured_output_grammar(const StructuredOutputSpec& spec);

}  // namespace parlance
