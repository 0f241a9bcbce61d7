// A sequence: the unit the scheduler schedules and the KV cache stores. Token ids (prompt, then
// generated), how many of them have their K/V computed, sampling parameters, optional embedding
// spans that replace placeholder tokens (audio features), a state that maps to OpenAI's
// finish_reason, and an opaque per-sequence model state (e.g. Whisper's cross-attention K/V).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/kv_cache_manager.h"
#include "core/priority.h"
#include "decoding/search.h"

namespace parlance {

enum class SeqState {
    Waiting,          // queued, no KV cells yet (or preempted: its cells were taken back)
    Running,          // holds KV cells; scheduled every step until finished
    FinishedStop,     // produced a stop token            -> finish_reason "stop"
    FinishedLength,   // reached max_tokens or the context -> "length"
    FinishedAborted,  // cancelled by its client           -> (no response)
    FinishedTimeout,  // ran past its deadline             -> an error
};

bool is_finished(SeqState s);
// OpenAI's finish_reason for a finished state ("stop", "length"), or "abort" / "timeout".
const char* finish_reason(SeqState s);

struct SamplingParams {
    int max_tokens = 16;       // generated tokens at most
    int min_tokens = 0;        // stop tokens are suppressed until this many were generated
    float temperature = 0.0f;  // 0: greedy (argmax, lowest id on ties)
    int top_k = 0;             // 0: all
    float top_p = 1.0f;
    float min_p = 0.0f;  // drop tokens under min_p x the most likely one's probability
    // OpenAI's penalties over the generated tokens: logit -= frequency x count + presence x (count > 0).
    float presence_penalty = 0.0f;
    float frequency_penalty = 0.0f;
    // transformers' / vLLM's over prompt and generated tokens: a seen token's logit is divided by
    // it when positive, multiplied when negative (1 = off).
    float repetition_penalty = 1.0f;
    uint64_t seed = 0;              // sampling seed (per sequence)
    std::vector<int32_t> stop_ids;  // end-of-sequence ids (the model's, unless ignore_eos)
};

// Vectors that replace the embeddings of tokens [position, position + rows) of the prompt.
struct EmbeddingSpan {
    int position = 0;
    int rows = 0;
    std::vector<float> data;  // [rows][hidden], row-major
};

// What a prompt's placeholders stand for, as a prefix-cache key (GenerationRequest::cache_key):
// FNV-1a over the vectors' bytes, so the same audio shares cached blocks and other audio does not.
uint64_t embedding_cache_key(std::span<const float> data);

// A request decoded by a Search (decoding/search.h: Whisper's greedy, sampled and beam
// decoding) over several KV sequences instead of by the engine's sampler: each step the search
// names the tokens each of its slots computes, then chooses from their logits; its slot reorders
// fork KV blocks (copy on write). The scheduler treats the group as one unit: every live slot in
// the same step, admission by its worst case (`worst_blocks`), never preempted.
struct SearchGroup {
    std::unique_ptr<Search> search;
    std::vector<SeqId> slots;       // the KV sequence of the search's slot i
    std::vector<StepInput> inputs;  // this step's, in batch order (set by the scheduler)
    int worst_blocks = 0;           // KV blocks its slots may hold at once, at most
    SearchResult result;            // once the search is done
    // GenerationRequest::prompt_row: the prompt position whose raw logits row is kept (-1: none),
    // the row once the prompt's step ran, and whether this step's batch outputs it.
    int prompt_row = -1;
    std::vector<float> prompt_logits;
    bool prompt_row_in_step = false;
};

struct Sequence {
    SeqId id = 0;
    Priority priority = Priority::Interactive;
    uint64_t arrival = 0;         // set by the scheduler: FIFO order inside a class
    uint64_t last_scheduled = 0;  // the scheduler's step count when it last ran (fairness)
    uint64_t queued_step = 0;     // the scheduler's step count when it last joined the waiting queue
    std::vector<int32_t> tokens;  // prompt + generated
    int prompt_length = 0;
    int num_computed = 0;  // tokens whose K/V are in the cache
    int draft = 0;         // trailing tokens that are a speculative draft (this step only)
    SamplingParams sampling;
    std::vector<EmbeddingSpan> spans;
    SeqState state = SeqState::Waiting;
    uint64_t cache_key = 0;  // what the tokens are conditioned on (prefix-hash salt)
    std::optional<std::chrono::steady_clock::time_point> deadline;
    std::shared_ptr<std::atomic<bool>> cancelled = std::make_shared<std::atomic<bool>>(false);
    std::shared_ptr<void> model_state;  // opaque to the engine
    std::shared_ptr<SearchGroup> group;  // decoded by a Search over several KV sequences

    int generated() const { return static_cast<int>(tokens.size()) - prompt_length; }
};

}  // namespace parlance
