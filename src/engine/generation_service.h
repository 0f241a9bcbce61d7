// A GenerationEngine on its own thread, for servers: requests come from any thread, wait in a
// bounded queue, join the running batch between steps (continuous batching) and report through
// callbacks on the engine thread (tokens as they come, then the result). A request may ask for
// n > 1 completions of one prompt: the first computes the prompt, the others join after its
// first token and take its K/V blocks from the prefix cache (only the prompt's last partial block
// is computed again), each with its own seed.
// Thread safety: submit, stats and shutdown may be called from any thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/engine_thread.h"
#include "core/log.h"
#include "engine/generation_engine.h"

namespace parlance {

struct GenerationServiceOptions {
    GenerationEngineOptions engine;
    int max_queue = 32;  // requests waiting to join the batch (then Error(Overloaded))
};

struct GenerationServiceStats {
    int queued = 0;   // requests waiting
    int running = 0;  // sequences in the engine
    uint64_t completed = 0, cancelled = 0, failed = 0;
    uint64_t prompt_tokens = 0, cached_prompt_tokens = 0, generated_tokens = 0;
    uint64_t steps = 0;
    uint64_t step_tokens_sampled = 0;               // over all steps: tokens sampled (the decode batch widths' sum)
    uint64_t step_tokens_computed = 0;              // over all steps: tokens through the model (prompt chunks included)
    uint64_t draft_tokens = 0, draft_accepted = 0;  // speculative decoding (prompt lookup)
    double busy_seconds = 0.0;                      // the thread's time in its steps (EngineThread::busy_seconds)
    size_t kv_bytes = 0;
    KvCacheStats kv;
};

// One submission: `n` completions of `request` (choice i samples with seed + i).
struct ServiceRequest {
    GenerationRequest request;
    int n = 1;
    // Engine thread. `choice` is 0..n-1. Must not block. Returning false ends that choice (a stop
    // string matched): it finishes as FinishedAborted after this step; the others go on.
    std::function<bool(int choice, int32_t token)> on_token;
    std::function<void(int choice, const TokenLogprobs&)> on_logprobs;
    // Engine thread, once per request: every choice's result in order, or the error that ended it
    // (Error(TooLarge) for a prompt that can never fit, Error(Cancelled) at shutdown, ...).
    std::function<void(std::vector<GenerationResult>, std::exception_ptr)> on_done;
};

struct GenerationJob;  // one submission, on the service's thread (generation_service.cpp)

class GenerationService : private EngineThread<GenerationJob>::Driver {
public:
    GenerationService(LanguageModel& model, Backend& backend, const GenerationServiceOptions& options, Logger& log);
    ~GenerationService();
    GenerationService(const GenerationService&) = delete;
    GenerationService& operator=(const GenerationService&) = delete;

    // Queues; Error(Overloaded) when the queue is full, Error(Cancelled) after shutdown.
    // Cancel through request.cancelled (seen between steps, queued requests included).
    void submit(ServiceRequest r);
    GenerationServiceStats stats() const;
    // drain: finish what was submitted first; otherwise abort it (on_done gets Error(Cancelled)).
    void shutdown(bool drain);
    const LanguageModel& model() const { return model_; }

private:
    using Job = GenerationJob;
    // The engine core's driver (core/engine_thread.h): every submission is admitted at once (the
    // scheduler bounds what runs); a step starts the new requests' first choices, the others'
    // once the first has its prompt cached, and runs one engine step.
    bool fits(const Job&) const override { return true; }
    void admit(std::unique_ptr<Job> job) override;
    bool has_work() const override;
    bool idle() const override { return fresh_.empty() && jobs_.empty() && !engine_.has_work(); }
    void reject(Job& job, std::exception_ptr error) override;
    void cancel_all() override;
    void step() override;
    void start(std::unique_ptr<Job> job);
    void start_choice(Job& job, int choice);

    LanguageModel& model_;
    Logger& log_;
    GenerationServiceOptions options_;
    GenerationEngine engine_;                      // the thread's
    std::map<SeqId, std::pair<Job*, int>> owner_;  // the thread's: sequence -> (job, choice)
    std::vector<std::unique_ptr<Job>> fresh_;      // the thread's: admitted, not started
    std::vector<std::unique_ptr<Job>> jobs_;       // the thread's: started
    EngineThread<Job> requests_;                   // the thread, the waiting requests, the stop
    GenerationServiceStats stats_;                 // (requests_.mutex())
};

}  // namespace parlance
