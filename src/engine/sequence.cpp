// Sequence states (see sequence.h).
#include "engine/sequence.h"

namespace parlance {

uint64_t embedding_cache_key(std::span<const float> data) {
    uint64_t h = 0xCBF29CE484222325ULL;
    const auto* b = reinterpret_cast<const unsigned char*>(data.data());
    for (size_t i = 0; i < data.size_bytes(); ++i) h = (h ^ b[i]) * 0x100000001B3ULL;
    return h;
}

bool is_finished(SeqState s) {
    return s != SeqState::Waiting && s != SeqState::Running;
}

const char* finish_reason(SeqState s) {
    switch (s) {
        case SeqState::FinishedStop:
            return "stop";
        case SeqState::FinishedLength:
            return "length";
        case SeqState::FinishedAborted:
            return "abort";
        case SeqState::FinishedTimeout:
            return "timeout";
        case SeqState::Waiting:
        case SeqState::Running:
            break;
    }
    return "";
}

}  // namespace parlance
