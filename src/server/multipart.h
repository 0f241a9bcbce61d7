// multipart/form-data parsing (RFC 7578) for OpenAI-style uploads: the boundary from the
// Content-Type header, then each part's name, filename, content type and bytes. Bounded: at
// most max_parts parts; the caller bounds the body size. Fuzzed (tests/fuzz/fuzz_multipart.cpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace parlance::server {

struct FormPart {
    std::string name;
    std::string filename;      // empty for plain fields
    std::string content_type;  // of the part, if given
    std::string_view data;     // into the body passed to parse_multipart
};

// The boundary parameter of a multipart/form-data Content-Type, or nullopt when the type is
// something else or has no boundary.
std::optional<std::string> multipart_boundary(std::string_view content_type);

// Parses the whole body. Throws Error(InvalidArgument) naming what is malformed (missing
// boundary line, unterminated headers, no closing delimiter, too many parts).
std::vector<FormPart> parse_multipart(std::string_view body, std::string_view boundary, size_t max_parts = 64);

}  // namespace parlance::server
