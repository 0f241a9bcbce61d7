// libFuzzer target for POST /v1/responses' parser (items, tools, text.format, a store to look
// previous_response_id up in), and the structured-output check of what it parsed: a request or an
// ApiError, never a crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_schemas.h"
#include "server/api_error.h"
#include "server/responses_api.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string body(reinterpret_cast<const char*>(data), size);
    static parlance::server::ResponseStore store(4);
    try {
        const parlance::server::ResponsesRequest r = parlance::server::parse_responses_request(body, store);
        parlance::fuzz::check_request_schemas(r.chat);
    } catch (const parlance::server::ApiError&) {
    }
    return 0;
}
