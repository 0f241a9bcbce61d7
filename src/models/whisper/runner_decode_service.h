// A DecodeService over the runner's own cache slots: what Whisper's decodes run on when no
// engine layer handed one in (the library's transcribe(), parity tools, tests). Tasks start in
// (priority, arrival) order while slots are free (a greedy or sampled search takes one, beams
// two per beam); every started task's inputs go into one decoder step. The server runs on the
// generation engine instead (engine/generation_decode_service.h): the same searches, the same
// decoder graph, the same tokens.
#pragma once

#include <list>
#include <memory>
#include <vector>

#include "decoding/decode_service.h"
#include "models/whisper/runner.h"
#include "models/whisper/transcriber.h"

namespace parlance::whisper {

class RunnerDecodeService final : public DecodeService {
public:
    // Uses the runner's slots from `first_slot` on (those before it stay the caller's: the
    // alignment pass).
    explicit RunnerDecodeService(WhisperRunner& runner, int first_slot = 0);

    // Error(InvalidArgument) naming beam_size when the search needs more slots than there are.
    uint64_t start(DecodeTask task) override;
    void abort(uint64_t id) override;
    std::vector<DecodeOutcome> step() override;
    bool has_work() const override { return !tasks_.empty(); }
    DecodeServiceStats stats() const override;
    int worst_blocks(int beams, int tokens) const override;

private:
    struct Task {
        uint64_t id = 0;
        DecodeTask task;
        std::vector<int> slots;  // held while it runs
        std::unique_ptr<Search> search;
        std::vector<float> prompt_logits;  // DecodeTask::prompt_row's row, from its own first step
        bool aborted = false;
    };
    int slots_needed(const DecodeTask& t) const;

    WhisperRunner& runner_;
    WhisperStepModel steps_;
    std::vector<int> free_;
    std::list<Task> tasks_;  // sorted by (priority, arrival)
    uint64_t next_id_ = 1;
    DecodeServiceStats stats_;
};

}  // namespace parlance::whisper
