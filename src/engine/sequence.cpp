// Sequence states (see sequence.h).
#include "engine/sequence.h"

namespace parlance {

bool is_finished(SeqState s) { return s != SeqState::Waiting && s != SeqState::Running; }

const char* finish_reason(SeqState s) {
    switch (s) {
        case SeqState::FinishedStop: return "stop";
        case SeqState::FinishedLength: return "length";
        case SeqState::FinishedAborted: return "abort";
        case SeqState::FinishedTimeout: return "timeout";
        case SeqState::Waiting:
        case SeqState::Running: break;
    }
    return "";
}

}  // namespace parlance
