// libFuzzer target for the JSON request parsers of the generation APIs (chat completions,
// completions, Anthropic messages, responses) and the chat output parser: any body yields a
// request or an ApiError, never a crash; any model output yields deltas, never a crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "server/anthropic_messages.h"
#include "server/api_error.h"
#include "server/chat_request.h"
#include "server/responses_api.h"
#include "server/text_completion.h"
#include "text/chat_output.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string body(reinterpret_cast<const char*>(data), size);
    static parlance::server::ResponseStore store(4);
    using parlance::server::ApiError;
    try {
        parlance::server::parse_chat_request(body);
    } catch (const ApiError&) {
    }
    try {
        parlance::server::parse_completion_request(body);
    } catch (const ApiError&) {
    }
    try {
        parlance::server::parse_messages_request(body);
    } catch (const ApiError&) {
    }
    try {
        parlance::server::parse_responses_request(body, store);
    } catch (const ApiError&) {
    }
    parlance::ChatOutputOptions o;
    o.tool_calls = true;
    parlance::ChatOutputParser p(o);
    for (size_t i = 0; i < body.size(); i += 3) p.push(body.substr(i, 3));
    p.finish();
    return 0;
}
