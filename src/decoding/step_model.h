// The interface between decoding strategies and a model: one batched decoder step over many
// sequences, each in its own cache slot. Whisper (and later Qwen3-ASR, LLMs) implement it;
// greedy and beam search, and the scheduler that batches requests, only see this.
#pragma once

#include <span>
#include <vector>

namespace parlance {

struct StepInput {
    int slot = 0;             // cache slot of the sequence
    std::vector<int> tokens;  // tokens to append (the prompt first, then one per step)
    int n_past = 0;           // tokens already cached in the slot
};

class StepModel {
public:
    virtual ~StepModel() = default;
    virtual int vocab_size() const = 0;
    // Appends every input's tokens to its slot and returns the logits after each one's last
    // token, in input order: [inputs][vocab].
    virtual std::vector<std::vector<float>> step(std::span<const StepInput> inputs) = 0;
    // Makes slot `to` hold the first n cached tokens of slot `from`.
    virtual void copy_slot(int from, int to, int n) = 0;
};

}  // namespace parlance
