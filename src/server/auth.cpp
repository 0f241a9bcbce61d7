// API-key checks (see auth.h).
#include "server/auth.h"

#include <cstddef>

namespace parlance::server {

bool constant_time_equal(std::string_view a, std::string_view b) {
    // Every byte of the longer string is visited; the lengths' difference is folded in last.
    const size_t n = a.size() > b.size() ? a.size() : b.size();
    unsigned diff = a.size() == b.size() ? 0u : 1u;
    for (size_t i = 0; i < n; ++i) {
        const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
        const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
        diff |= static_cast<unsigned>(x ^ y);
    }
    return diff == 0;
}

bool bearer_matches(std::string_view authorization, std::string_view key) {
    constexpr std::string_view kScheme = "Bearer ";
    if (authorization.size() < kScheme.size()) return false;
    // The scheme is case-insensitive (RFC 9110 §11.1); the key is compared in constant time.
    for (size_t i = 0; i < kScheme.size(); ++i) {
        char c = authorization[i];
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
        char s = kScheme[i];
        if (s >= 'A' && s <= 'Z') s = static_cast<char>(s - 'A' + 'a');
        if (c != s) return false;
    }
    return constant_time_equal(authorization.substr(kScheme.size()), key);
}

}  // namespace parlance::server
