// OpenAI-style error bodies (see api_error.h).
#include "server/api_error.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace parlance::server {

void ApiError::check_language_text(std::string_view language, const std::string& param) {
    const bool control = std::any_of(language.begin(), language.end(), [](char ch) {
        const auto c = static_cast<unsigned char>(ch);
        return c < 0x20 || c == 0x7f;
    });
    if (control || language.size() > 64)
        throw ApiError(400, "the language " + quote(language) + " is not a language code or name", param,
                       "unsupported_language");
}

std::string ApiError::default_type(int status) {
    if (status == 401) return "authentication_error";
    if (status == 404) return "not_found_error";
    if (status == 429) return "rate_limit_error";
    if (status >= 500) return "server_error";
    return "invalid_request_error";
}

namespace {

// The longest prefix of s of at most n bytes that does not split a UTF-8 character.
std::string_view utf8_prefix(std::string_view s, size_t n) {
    if (s.size() <= n) return s;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
    return s.substr(0, n);
}

}  // namespace

std::string ApiError::quote(std::string_view value) {
    constexpr size_t kMax = 100;
    const std::string_view shown = utf8_prefix(value, kMax);
    std::string out;
    out.reserve(shown.size() + 32);
    out += '\'';
    // Control bytes (a NUL among them) are written as \xNN: a message stays one readable line,
    // and no consumer that reads it as a C string stops short.
    static const char* hex = "0123456789abcdef";
    for (const char ch : shown) {
        const auto c = static_cast<unsigned char>(ch);
        if (c < 0x20 || c == 0x7f) {
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
        } else {
            out += ch;
        }
    }
    if (shown.size() < value.size()) {
        out += "...' (";
        out += std::to_string(value.size());
        out += " bytes)";
    } else {
        out += '\'';
    }
    return out;
}

std::string ApiError::body() const {
    constexpr size_t kMaxMessage = 1000, kMaxParam = 100;
    const std::string_view message = what();
    std::string shown(utf8_prefix(message, kMaxMessage));
    if (shown.size() < message.size()) shown += "...";
    nlohmann::json j{{"error",
                      {{"message", shown},
                       {"type", type},
                       {"param", param.empty() ? nlohmann::json(nullptr)
                                               : nlohmann::json(std::string(utf8_prefix(param, kMaxParam)))},
                       {"code", code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code)}}}};
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ApiError ApiError::from(const Error& e, const std::string& param) {
    switch (e.kind()) {
        case ErrorKind::InvalidArgument:
            return ApiError(400, e.what(), param, "invalid_value");
        case ErrorKind::InvalidAudio:
            return ApiError(400, e.what(), param.empty() ? "file" : param, "invalid_audio");
        case ErrorKind::Unsupported:
            return ApiError(400, e.what(), param, "unsupported");
        case ErrorKind::TooLarge:
            return ApiError(413, e.what(), param.empty() ? "file" : param, "too_large");
        case ErrorKind::NotFound:
            return ApiError(404, e.what(), param, "not_found");
        case ErrorKind::Overloaded:
            return ApiError(429, e.what(), "", "overloaded");
        case ErrorKind::Timeout:
            return ApiError(504, e.what(), "", "timeout");
        case ErrorKind::Cancelled:
            return ApiError(503, e.what(), "", "cancelled");
        default:
            return ApiError(500, e.what(), "", error_kind_name(e.kind()));
    }
}

}  // namespace parlance::server
