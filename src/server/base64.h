// Base64 (RFC 4648) through OpenSSL's EVP block coder: realtime audio arrives and, from
// `parlance stream` and the tests, leaves as base64 in JSON events.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace parlance::server {

// Padded base64 of the bytes.
std::string base64_encode(std::span<const uint8_t> bytes);
// Strict base64, padding optional; false for anything else.
bool base64_decode(std::string_view in, std::string* out);

}  // namespace parlance::server
