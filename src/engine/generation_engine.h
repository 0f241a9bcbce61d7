// The model-agnostic step loop for decoder language models (vLLM v1's EngineCore shape): each
// step the scheduler picks the tokens to compute, copy-on-write copies are applied, one batched
// model step runs over every scheduled token (a StepBatch built from the KV manager's block
// tables), the next tokens are sampled, and the scheduler updates the sequences. Aborts and
// deadlines land between steps. Memory: a paged KV cache of a fixed byte cap, proportional to
// the tokens in use, shared between sequences with a common prompt prefix.
//
// Thread safety: none. One thread owns an engine (the CLI's, or a server's engine thread).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "core/backend.h"
#include "core/kv_cache_manager.h"
#include "core/kv_storage.h"
#include "core/token_constraint.h"
#include "decoding/logits.h"
#include "engine/draft_model.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "models/language_model.h"

namespace parlance {

struct GenerationEngineOptions {
    size_t kv_cache_bytes = size_t(256) << 20;  // the KV cache's byte cap (--kv-cache-mb)
    int block_size = 16;                        // tokens per KV block
    // The cells' storage type (--kv-cache-type): f16 holds twice the tokens in the same cap; the
    // attention reads them back as f32 (logits move by about 1e-3 of their range).
    ggml_type kv_type = GGML_TYPE_F32;
    int token_budget = 512;       // tokens computed per step (chunked prefill)
    int max_running = 64;         // sequences decoding at once
    int prompt_gather_steps = 0;  // SchedulerOptions::prompt_gather_steps
    // Speculative decoding by prompt lookup (engine/ngram_draft): up to this many draft tokens
    // per decoding sequence and step, verified in the same step (0 = off). Outputs are the same
    // tokens as without (each position's token is chosen from the same logits by the same draw);
    // requests with a repetition penalty decode without drafts.
    int speculative_ngram = 0;
    // Speculative decoding with a draft model (engine/draft_model): a smaller model with the same
    // tokenizer (checked: Error(InvalidModel) otherwise) proposes up to `speculative_draft` tokens
    // per decoding sequence and step, verified like prompt-lookup drafts (which it replaces).
    // The draft runs on `draft_backend` (the engine's when null) with its own KV cache.
    LanguageModel* draft_model = nullptr;
    Backend* draft_backend = nullptr;
    int speculative_draft = 0;
    size_t draft_kv_cache_bytes = size_t(64) << 20;
};

// A generated token's log-probability under the model's raw distribution (log-softmax of its
// logits, before penalties, temperature and stop suppression: what OpenAI's and vLLM's logprobs
// report), with the most likely alternatives.
struct TokenLogprobs {
    int32_t token = 0;
    float logprob = 0.0f;
    std::vector<std::pair<int32_t, float>> top;  // most likely first (ties: lower id first)
};

inline constexpr int kMaxTopLogprobs = 20;

struct GenerationRequest {
    std::vector<int32_t> prompt;
    SamplingParams sampling;
    Priority priority = Priority::Interactive;
    std::vector<EmbeddingSpan> spans;
    std::optional<std::chrono::steady_clock::time_point> deadline;
    std::shared_ptr<std::atomic<bool>> cancelled = std::make_shared<std::atomic<bool>>(false);
    uint64_t cache_key = 0;
    // Called on the engine thread with each generated token (streaming). Must not block.
    std::function<void(int32_t)> on_token;
    // Called with the raw logits row [vocab] each token is chosen from, before stop suppression
    // (parity checks, log-probabilities). Must not block.
    std::function<void(std::span<const float>)> on_logits;
    // -1: none; 0: each generated token's log-probability; N (<= kMaxTopLogprobs): also the N most
    // likely tokens'. Delivered to on_logprobs (engine thread) before on_token for the same token.
    int logprobs = -1;
    std::function<void(const TokenLogprobs&)> on_logprobs;
    // Structured output: the tokens may only follow this constraint (the engine clones it per
    // sequence; null = unconstrained). A constrained sequence decodes without drafts. Greedy: the
    // argmax if allowed, else the argmax of the allowed tokens; sampling: from the allowed ones.
    std::shared_ptr<const TokenConstraint> constraint;
    // Tokens the caller expects the model to generate (a live re-decode's previous hypothesis of
    // the same audio's start: self-speculation). While the generated tokens are its start, its
    // next tokens are the sequence's draft, verified in one step as other drafts are, so the
    // output is what decoding without it gives, in fewer steps where the guess holds. Dropped at
    // the first disagreement (prompt-lookup drafts, if enabled, take over); not used with a
    // repetition penalty or a constraint, as no draft is.
    std::vector<int32_t> expected;
    // The model's per-sequence state (Sequence::model_state: Whisper's encoded audio window),
    // handed to the model in each step's batch (StepBatch::Segment::state). A sequence with one
    // never shares cached blocks: its tokens mean something only with that state.
    std::shared_ptr<void> model_state;
    // Decode with a Search (decoding/search.h: greedy, sampled or beam decoding with its own
    // logits processors, as Whisper decodes) instead of the engine's sampler. The engine makes it
    // over KV sequences of its own (2 x num_beams for beams, else 1) and runs all of its live
    // hypotheses in each step, forking blocks where the search reorders its beams. Its options
    // give the length, the stop and the processors (Whisper's timestamp rules and suppressions):
    // `sampling`, `on_token`, `logprobs`, `constraint` and `expected` do not apply.
    std::optional<SearchOptions> search;
    // With `search`: also keep the raw logits row after this prompt position (0-based; -1: none),
    // computed in the search's prompt step (GenerationResult::prompt_logits).
    int prompt_row = -1;
};

struct GenerationResult {
    SeqId id = 0;
    std::vector<int32_t> prompt;
    std::vector<int32_t> tokens;  // generated (a stop token included, as transformers returns it)
    SeqState state = SeqState::Waiting;
    int cached_prompt_tokens = 0;  // prompt tokens whose K/V came from the prefix cache
    int steps = 0;                 // steps that computed this sequence's tokens
    int draft_tokens = 0;          // speculative tokens it was given, and of them kept
    int draft_accepted = 0;
    double sum_logprob = 0.0;          // a search's (its processed logits' log-probabilities)
    double score = 0.0;                // a search's ranking score (beams: sum_logprob / length^penalty)
    std::vector<float> prompt_logits;  // GenerationRequest::prompt_row's row [vocab]
};

struct GenerationStats {
    uint64_t steps = 0;
    uint64_t tokens_computed = 0;  // prompt and generated tokens through the model
    uint64_t tokens_generated = 0;
    uint64_t preemptions = 0;
    uint64_t draft_tokens = 0;       // speculative tokens proposed and computed
    uint64_t draft_accepted = 0;     // of them, kept
    uint64_t draft_model_steps = 0;  // the draft model's own steps (draft-model speculation)
    double forward_seconds = 0.0;    // in the model's forward passes (build, compute, logits read)
    double compute_seconds = 0.0;    // of them, the backend's compute (Backend::compute_seconds)
    KvCacheStats kv;
    size_t kv_bytes = 0;         // device bytes of the cache
    int kv_reserved_blocks = 0;  // held back for running search groups' worst case
};

class GenerationEngine {
public:
    GenerationEngine(LanguageModel& model, Backend& backend, const GenerationEngineOptions& options);

    // Queues a request; returns its id. Throws Error(InvalidArgument) for ids outside the
    // vocabulary or an empty prompt, Error(TooLarge) when it can never fit (context, cache).
    SeqId submit(GenerationRequest request);
    void abort(SeqId id) { scheduler_.abort(id); }

    // Runs one step; returns the requests that finished in it (or were aborted / timed out).
    std::vector<GenerationResult> step();
    // Steps until every request finished; results in submission order.
    std::vector<GenerationResult> run_to_completion();
    bool has_work() const { return scheduler_.has_work(); }

    GenerationStats stats() const;
    const LanguageModel& model() const { return model_; }
    // KV blocks a search request (GenerationRequest::search) of `beams` beams over `tokens`
    // positions may hold at once: a full context per beam plus the partial blocks a reorder
    // copies on write; one context and a block for greedy or sampled decoding.
    int search_worst_blocks(int beams, int64_t tokens) const;

private:
    struct Extra {
        std::function<void(int32_t)> on_token;
        std::function<void(std::span<const float>)> on_logits;
        int logprobs = -1;
        std::function<void(const TokenLogprobs&)> on_logprobs;
        int cached = -1;
        std::unique_ptr<TokenConstraint> constraint;
        std::vector<int32_t> expected;
        int steps = 0, draft_tokens = 0, draft_accepted = 0;
    };
    StepBatch build_batch(const SchedulerOutput& out) const;
    // Adds the rows search groups asked of their prompts (prompt_row) to the batch's outputs.
    void add_prompt_rows(const SchedulerOutput& out, StepBatch& batch);
    void propose_drafts();
    int32_t choose_constrained(std::span<float> row, const Sequence& s, std::span<const int32_t> tokens,
                               TokenConstraint& c);
    GenerationResult result_of(Sequence& s);
    // Hands a search group its rows of the step's logits (from row k on); finishes it when done.
    void consume_group(Sequence& s, size_t& k);

    LanguageModel& model_;
    Backend& backend_;
    GenerationEngineOptions o_;
    KvCacheManager kv_;
    KvStorage storage_;
    Scheduler scheduler_;
    std::unique_ptr<DraftModel> draft_;
    SeqId next_id_ = 1;
    std::map<SeqId, Extra> extra_;
    GenerationStats stats_;
    std::vector<float> logits_;
    std::vector<uint8_t> greedy_rows_;    // per output row: only its argmax is needed
    std::vector<int32_t> argmax_;         // per output row: its greedy id taken by the model, or -1
    std::vector<float> raw_row_;          // a row before sampling changes it (log-probabilities)
    std::vector<float> constrained_row_;  // the same, to choose again under a constraint
};

}  // namespace parlance
