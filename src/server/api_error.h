// Errors as the OpenAI API reports them: an HTTP status and the body
// {"error":{"message","type","param","code"}}. Raised at the request boundary; internal
// parlance::Error values are mapped here and nowhere else.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include "core/error.h"

namespace parlance::server {

class ApiError : public std::runtime_error {
public:
    ApiError(int status, std::string message, std::string param = "", std::string code = "", std::string type = "")
        : std::runtime_error(message),
          status(status),
          param(std::move(param)),
          code(std::move(code)),
          type(type.empty() ? default_type(status) : std::move(type)) {}
    int status;
    std::string param;
    std::string code;
    std::string type;

    // The JSON error object. The message is cut at 1,000 bytes and the param at 100: whatever a
    // handler put in, an error never echoes a client's input at length.
    std::string body() const;
    // A client-supplied value for an error message: single-quoted, at most 100 bytes of it (cut
    // at a UTF-8 character boundary), with its length when it was cut; control bytes as \xNN.
    static std::string quote(std::string_view value);
    static std::string default_type(int status);
    // Maps an internal error (invalid audio -> 400, too large -> 413, overloaded -> 429, ...).
    static ApiError from(const Error& e, const std::string& param = "");
    // Refuses (400 unsupported_language) a language field that cannot name a language: control
    // bytes or more than 64 bytes. The models' own checks quote the value in their messages,
    // which travel as C strings; this one quotes it safely.
    static void check_language_text(std::string_view language, const std::string& param);
};

}  // namespace parlance::server
