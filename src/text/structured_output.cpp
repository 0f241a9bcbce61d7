// Composes the output grammar with json-schema-to-grammar's builder: the schema becomes the
// rule "content", tool calls a rule over an anyOf of each function's {name, arguments}.
#include "text/structured_output.h"

#include <stdexcept>

#include "core/error.h"
#include "json-schema-to-grammar.h"

namespace parlance {

namespace {

common_json to_common(const nlohmann::ordered_json& j) {
    return common_json::parse(j.dump());
}

nlohmann::ordered_json tool_call_schema(const std::vector<StructuredOutputSpec::Function>& tools) {
    nlohmann::ordered_json any = nlohmann::ordered_json::array();
    for (const auto& f : tools) {
        nlohmann::ordered_json args = f.parameters.is_object() && !f.parameters.empty()
                                          ? f.parameters
                                          : nlohmann::ordered_json{{"type", "object"}};
        any.push_back({{"type", "object"},
                       {"properties", {{"name", {{"const", f.name}}}, {"arguments", args}}},
                       {"required", {"name", "arguments"}},
                       {"additionalProperties", false}});
    }
    return any.size() == 1 ? any[0] : nlohmann::ordered_json{{"anyOf", any}};
}

}  // namespace

std::string structured_output_grammar(const StructuredOutputSpec& spec) {
    std::string grammar;
    try {
        grammar = build_grammar([&](const common_grammar_builder& b) {
            common_json schema = to_common(spec.schema);
            b.resolve_refs(schema);
            std::string body = b.add_schema("content", schema);
            if (!spec.tools.empty()) {
                common_json call = to_common(tool_call_schema(spec.tools));
                b.resolve_refs(call);
                const std::string object = b.add_schema("tool-call-object", call);
                const std::string one = b.add_rule("tool-call", gbnf_format_literal("<tool_call>\n") + " " + object +
                                                                    " " + gbnf_format_literal("\n</tool_call>"));
                body = "( " + body + " | " + one + " ( \"\\n\" " + one + " )* )";
            }
            // Reasoning text: anything but "</" until "</think>", then up to two line breaks.
            const std::string thought = "( [^<] | \"<\" [^/] )* " + gbnf_format_literal("</think>") + " \"\\n\"{0,2} ";
            if (spec.starts_in_reasoning)
                body = b.add_rule("reasoning", thought) + " " + body;
            else if (spec.reasoning)
                body = b.add_rule("reasoning", gbnf_format_literal("<think>") + " " + thought) + "? " + body;
            b.add_rule("root", body);
        });
    } catch (const std::exception& e) {
        throw Error(ErrorKind::InvalidArgument, e.what());
    }
    if (grammar.size() > spec.limits.max_grammar_bytes)
        throw Error(ErrorKind::InvalidArgument,
                    "the schemas make a grammar of " + std::to_string(grammar.size()) + " bytes, over the limit of " +
                        std::to_string(spec.limits.max_grammar_bytes) + " (serve --schema-max-grammar-bytes)");
    return grammar;
}

}  // namespace parlance
