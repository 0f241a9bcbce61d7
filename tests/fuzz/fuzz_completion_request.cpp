// libFuzzer target for POST /v1/completions' request parser: any body yields a request or an
// ApiError, never a crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "server/api_error.h"
#include "server/text_completion.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string body(reinterpret_cast<const char*>(data), size);
    try {
        parlance::server::parse_completion_request(body);
    } catch (const parlance::server::ApiError&) {
    }
    return 0;
}
