// OpenAI-style error bodies (see api_error.h).
#include "server/api_error.h"

#include <nlohmann/json.hpp>

namespace parlance::server {

std::string ApiError::default_type(int status) {
    if (status == 401) return "authentication_error";
    if (status == 404) return "not_found_error";
    if (status == 429) return "rate_limit_error";
    if (status >= 500) return "server_error";
    return "invalid_request_error";
}

std::string ApiError::body() const {
    nlohmann::json j{{"error",
                      {{"message", what()},
                       {"type", type},
                       {"param", param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param)},
                       {"code", code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code)}}}};
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ApiError ApiError::from(const Error& e, const std::string& param) {
    switch (e.kind()) {
        case ErrorKind::InvalidArgument: return ApiError(400, e.what(), param, "invalid_value");
        case ErrorKind::InvalidAudio: return ApiError(400, e.what(), param.empty() ? "file" : param, "invalid_audio");
        case ErrorKind::Unsupported: return ApiError(400, e.what(), param, "unsupported");
        case ErrorKind::TooLarge: return ApiError(413, e.what(), param.empty() ? "file" : param, "too_large");
        case ErrorKind::NotFound: return ApiError(404, e.what(), param, "not_found");
        case ErrorKind::Overloaded: return ApiError(429, e.what(), "", "overloaded");
        case ErrorKind::Timeout: return ApiError(504, e.what(), "", "timeout");
        case ErrorKind::Cancelled: return ApiError(503, e.what(), "", "cancelled");
        default: return ApiError(500, e.what(), "", error_kind_name(e.kind()));
    }
}

}  // namespace parlance::server
