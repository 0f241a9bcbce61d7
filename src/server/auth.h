// API-key checks. The comparison takes the same time wherever the first difference is, so the
// key cannot be guessed byte by byte from response times.
#pragma once

#include <string_view>

namespace parlance::server {

// a == b, in time that depends only on the lengths.
bool constant_time_equal(std::string_view a, std::string_view b);

// Whether an Authorization header value is "Bearer KEY" for this key.
bool bearer_matches(std::string_view authorization, std::string_view key);

}  // namespace parlance::server
