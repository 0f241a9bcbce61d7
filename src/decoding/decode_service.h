// The seam between a model's own request driver and whatever batches decoder steps for it:
// Whisper's sessions (models/whisper) hand their decodes — a window's prompt run for its
// last logits row (language detection, no-speech probability), then one Search per temperature
// attempt — to a DecodeService and collect the results. The server's implementation is the
// generation engine (engine/generation_decode_service.h: scheduled sequences, paged KV blocks,
// beams as forks); models/ cannot see engine/, so the engine layer hands it in (a
// DecodeServiceFactory in EngineOptions / SpeechModelOptions). Not thread-safe: the driver's
// thread owns a service.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/kv_cache_manager.h"
#include "core/priority.h"
#include "decoding/search.h"

namespace parlance {

struct DecodeTask {
    std::vector<int> prompt;
    // The search that decodes after the prompt (greedy, sampled or beams, with its processors);
    // none: the prompt is computed and its last logits row returned, nothing generated.
    std::optional<SearchOptions> search;
    // With a search: also return the raw logits row after this prompt position (Whisper's
    // <|startoftranscript|>: the no-speech probability), computed in the search's own prompt pass.
    int prompt_row = -1;
    // The model's per-sequence state (Whisper's encoded window), kept alive until the task ends.
    std::shared_ptr<void> model_state;
    Priority priority = Priority::Interactive;
};

struct DecodeOutcome {
    uint64_t id = 0;
    bool aborted = false;       // abort() was called; nothing else is set
    SearchResult result;        // a search's tokens, summed log-probability and score
    std::vector<float> logits;  // the raw row after the prompt (no search) or after prompt_row [vocab]
};

struct DecodeServiceStats {
    KvCacheStats kv;
    size_t kv_bytes = 0;           // device bytes of the decoder's KV cache
    size_t block_bytes = 0;        // of one block
    int reserved_blocks = 0;       // held back for running searches' worst case
    uint64_t steps = 0;            // decoder steps run
    uint64_t tokens_computed = 0;  // prompt and generated tokens through the decoder
    uint64_t tokens = 0;           // tokens chosen by finished searches
    double forward_seconds = 0.0;  // in the decoder's forward passes
};

class DecodeService {
public:
    virtual ~DecodeService() = default;

    // Queues a task; returns its id. Throws Error(InvalidArgument) for ids outside the vocabulary,
    // Error(TooLarge) when it can never fit the cache or the context.
    virtual uint64_t start(DecodeTask task) = 0;
    // Ends a task; its outcome (aborted) comes from a later step() and its blocks return.
    virtual void abort(uint64_t id) = 0;
    // One decoder step over every task that can run; the tasks that ended in it.
    virtual std::vector<DecodeOutcome> step() = 0;
    virtual bool has_work() const = 0;
    virtual DecodeServiceStats stats() const = 0;
    // KV blocks a search of `beams` beams over `tokens` positions may hold at once, at most (a
    // driver's admission: what its requests' worst cases add up to).
    virtual int worst_blocks(int beams, int tokens) const = 0;
};

}  // namespace parlance
