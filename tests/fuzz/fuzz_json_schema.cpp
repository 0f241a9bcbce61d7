// libFuzzer target for structured output's schemas, end to end as the server takes them: the
// bytes as JSON (depth-bounded), check_schema, the grammar the bundle's converter builds from what
// passed, and llama-grammar's parse of it. What passes the check must build within the limits
// (a grammar larger than the byte limit or opening more stacks than allowed is refused, never
// built past them) — never a crash, an unbounded allocation or a hang.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "text/grammar_constraint.h"
#include "text/json_depth.h"
#include "text/schema_check.h"
#include "text/structured_output.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace parlance;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    if (!json_within_depth(text)) return 0;
    const nlohmann::ordered_json schema = nlohmann::ordered_json::parse(text, nullptr, false);
    if (schema.is_discarded()) return 0;
    StructuredOutputSpec spec;
    spec.schema = schema;
    spec.reasoning = size % 2 == 0;
    try {
        SchemaBudget budget;
        check_schema(schema, spec.limits, budget);
        const std::string g = structured_output_grammar(spec);
        if (g.size() > spec.limits.max_grammar_bytes) __builtin_trap();
        grammar_start_stacks(g);
    } catch (const SchemaError&) {
    } catch (const Error&) {
    }
    return 0;
}
