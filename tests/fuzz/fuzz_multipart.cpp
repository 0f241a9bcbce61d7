// libFuzzer target for the multipart/form-data parser and the transcription form on top of it:
// arbitrary bodies must yield parts or a clean ApiError/Error, never a crash or an overread.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "server/api_error.h"
#include "server/multipart.h"
#include "server/transcription_form.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view body(reinterpret_cast<const char*>(data), size);
    // The first line (if any) is taken as the Content-Type, the rest as the body.
    size_t nl = body.find('\n');
    std::string_view content_type =
        nl == std::string_view::npos ? "multipart/form-data; boundary=b" : body.substr(0, nl);
    std::string_view rest = nl == std::string_view::npos ? body : body.substr(nl + 1);
    auto boundary = parlance::server::multipart_boundary(content_type);
    if (!boundary) return 0;
    try {
        auto parts = parlance::server::parse_multipart(rest, *boundary);
        for (const auto& p : parts) {
            if (p.data.data() < rest.data() || p.data.data() + p.data.size() > rest.data() + rest.size())
                __builtin_trap();  // a part must point inside the body
        }
        parlance::server::parse_transcription_form(parts, false);
    } catch (const parlance::server::ApiError&) {
    } catch (const parlance::Error&) {
    }
    return 0;
}
