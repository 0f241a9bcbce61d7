// Sample-rate bounds shared by the audio decoders (internal to src/audio).
#pragma once

#include <string>

#include "core/error.h"

namespace parlance::audio_detail {

constexpr int kMinRate = 1000;
constexpr int kMaxRate = 768000;

// Throws Error(kind) naming `what` when rate is outside [kMinRate, kMaxRate].
inline void check_rate(int rate, const char* what, ErrorKind kind) {
    if (rate < kMinRate || rate > kMaxRate) {
        throw Error(kind, std::string(what) + " " + std::to_string(rate) + " Hz is outside [" +
                              std::to_string(kMinRate) + ", " + std::to_string(kMaxRate) + "]");
    }
}

}  // namespace parlance::audio_detail
