// The one error type of parlance: a category that the boundary maps to an exit code or an HTTP
// status, and a message that names the file, tensor, field or parameter at fault.
#pragma once

#include <stdexcept>
#include <string>

namespace parlance {

enum class ErrorKind {
    InvalidArgument,  // a caller passed something unusable (CLI flag, request field) -> 400
    InvalidModel,     // a checkpoint or config is malformed or contradicts itself -> load failure
    InvalidAudio,     // bytes that do not decode to usable audio -> 400
    Unsupported,      // well-formed but not something we implement (dtype, architecture) -> 400/501
    NotFound,         // a file, tensor or model that does not exist -> 404
    TooLarge,         // over a configured limit (bytes, seconds, tokens) -> 413
    Io,               // the operating system said no (open, read, mmap)
    Overloaded,       // a bounded queue is full -> 429 with Retry-After
    Cancelled,        // the client went away or the server is shutting down
    Timeout,          // a request ran past its time limit -> 504
    Internal,         // a bug: an invariant of ours broke
};

class Error : public std::runtime_error {
public:
    Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
    ErrorKind kind() const noexcept { return kind_; }

private:
    ErrorKind kind_;
};

// Short name of a kind, for logs and error bodies ("invalid_model", ...).
const char* error_kind_name(ErrorKind kind) noexcept;

}  // namespace parlance
