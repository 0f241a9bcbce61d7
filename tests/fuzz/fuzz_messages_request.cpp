// libFuzzer target for Anthropic's POST /v1/messages and /v1/messages/count_tokens parsers, and
// the structured-output check of the tools they parsed: a request or an ApiError, never a crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_schemas.h"
#include "server/anthropic_messages.h"
#include "server/api_error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string body(reinterpret_cast<const char*>(data), size);
    for (const bool count_tokens : {false, true}) {
        try {
            const parlance::server::MessagesRequest r = parlance::server::parse_messages_request(body, count_tokens);
            parlance::fuzz::check_request_schemas(r.chat);
        } catch (const parlance::server::ApiError&) {
        }
    }
    return 0;
}
