// libFuzzer target for POST /v1/chat/completions' request parser, and the structured-output check
// of what it parsed (its response_format schema and its tools' parameters), and the chat output
// parser over the same bytes as model output: any body yields a request or an ApiError, any
// schema passes or is a SchemaError, any model output yields deltas — never a crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_schemas.h"
#include "server/api_error.h"
#include "server/chat_request.h"
#include "text/chat_output.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string body(reinterpret_cast<const char*>(data), size);
    try {
        const parlance::server::ChatRequest r = parlance::server::parse_chat_request(body);
        parlance::fuzz::check_request_schemas(r);
    } catch (const parlance::server::ApiError&) {
    }
    parlance::ChatOutputOptions o;
    o.tool_calls = true;
    parlance::ChatOutputParser p(o);
    for (size_t i = 0; i < body.size(); i += 3) p.push(body.substr(i, 3));
    p.finish();
    return 0;
}
