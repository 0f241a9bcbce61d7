// Names of error kinds.
#include "core/error.h"

namespace parlance {

const char* error_kind_name(ErrorKind kind) noexcept {
    switch (kind) {
        case ErrorKind::InvalidArgument: return "invalid_argument";
        case ErrorKind::InvalidModel: return "invalid_model";
        case ErrorKind::InvalidAudio: return "invalid_audio";
        case ErrorKind::Unsupported: return "unsupported";
        case ErrorKind::NotFound: return "not_found";
        case ErrorKind::TooLarge: return "too_large";
        case ErrorKind::Io: return "io_error";
        case ErrorKind::Overloaded: return "overloaded";
        case ErrorKind::Cancelled: return "cancelled";
        case ErrorKind::Timeout: return "timeout";
        case ErrorKind::Internal: return "internal_error";
    }
    return "unknown";
}

}  // namespace parlance
