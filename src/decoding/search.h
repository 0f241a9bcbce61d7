// Decoding strategies as resumable state machines, so that one driver (or the scheduler) can
// step many sequences of many requests in one batched model call: each strategy says which
// inputs it needs next, then consumes their logits. Greedy and beam search follow Hugging Face
// transformers' semantics (processors on logits for greedy, on log-probabilities for beams).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "decoding/logits.h"
#include "decoding/step_model.h"

namespace parlance {

struct SearchOptions {
    int max_new_tokens = 64;
    int eos = -1;                 // end-of-sequence token
    int num_beams = 1;
    float length_penalty = 1.0f;  // beam scores are sum_logprob / generated_length^penalty
    ProcessorList processors;     // applied in order before choosing
    bool record_margins = false;  // keep the top-2 margin of each step (parity diagnostics)
    float temperature = 0.0f;     // > 0: sample from softmax(logits / temperature) (one beam)
    uint64_t seed = 0;            // sampling seed
};

struct SearchResult {
    std::vector<int> tokens;      // generated tokens (eos included when finished)
    double sum_logprob = 0.0;     // of the generated tokens, from processed log-probabilities
    double score = 0.0;           // the strategy's ranking score
    bool finished = false;        // ended with eos (else ran out of tokens)
    std::vector<float> margins;   // per step, if recorded
    double avg_logprob() const { return tokens.empty() ? 0.0 : sum_logprob / tokens.size(); }
};

class Search {
public:
    virtual ~Search() = default;
    // Inputs for the next model step (one per live hypothesis); empty when done.
    virtual std::vector<StepInput> inputs() = 0;
    // The logits for the inputs last returned, in the same order.
    virtual void consume(std::span<std::vector<float>> logits, StepModel& model) = 0;
    virtual bool done() const = 0;
    virtual SearchResult result() const = 0;
};

// Whether `options` ask for a beam search (beams at temperature 0; a sampled search keeps one).
bool is_beam_search(const SearchOptions& options);
// The cache slots (KV sequences) a search holds: a greedy or sampled search one, beams two
// halves of num_beams (survivors move to the other half at each reorder).
int search_sequences(const SearchOptions& options);
int search_sequences(int num_beams, float temperature = 0.0f);

// slots: search_sequences(options): 1 for greedy; 2 * num_beams for beam search (beams move between two halves so a
// reorder never overwrites a slot that is still to be read).
// `cached`: how many leading prompt tokens slots[0] already holds (a shared prefix run once).
std::unique_ptr<Search> make_search(std::vector<int> prompt, std::vector<int> slots,
                                    const SearchOptions& options, int cached = 0);

// Steps all searches together until every one is done (one model call per step).
void run_searches(StepModel& model, std::span<Search* const> searches);

}  // namespace parlance
