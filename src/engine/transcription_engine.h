// The transcription engine: one thread owns the model runner and advances every admitted
// request together — windows that need encoding are encoded in one batch, then one decoder step
// runs over all live hypotheses of all requests (continuous batching: requests join and leave
// between steps). Requests wait in a bounded queue; a full queue refuses with Overloaded.
// Cancellation (a client that hung up) and time limits take effect between steps and free the
// request's cache slots. Thread-safe: submit/stats/shutdown may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/kv_cache_manager.h"
#include "core/log.h"
#include "models/whisper/model.h"
#include "models/whisper/runner.h"
#include "models/whisper/session.h"

namespace parlance {

struct EngineOptions {
    int max_queue = 32;         // waiting requests beyond the active ones
    int cache_slots = 16;       // decoder cache slots; a request takes 2 * its beam size
    // Byte cap of the decoder's paged KV cache. A request is admitted when its worst case fits
    // (each beam a full context); blocks are taken as its tokens arrive. 0: cache_slots / 2
    // hypotheses' worth, what the slots can hold at once.
    size_t kv_cache_bytes = 0;
    int max_encode_batch = 4;   // windows encoded in one graph
    double request_timeout_seconds = 600.0;  // 0 = none
    int max_new_tokens = 224;   // cap on decoded tokens per 30 s window, whatever a request asks
};

struct TranscriptionRequest {
    std::vector<float> pcm;  // 16 kHz mono
    whisper::TranscribeOptions options;
    // Called on the engine thread as each segment is decided (SSE streaming). Must not block.
    std::function<void(const Segment&)> on_segment;
    // Set by the client side when it goes away; checked between steps.
    std::shared_ptr<std::atomic<bool>> cancelled = std::make_shared<std::atomic<bool>>(false);
};

struct EngineStats {
    int queued = 0;
    int active = 0;
    int free_slots = 0;
    uint64_t completed = 0;
    uint64_t failed = 0;
    uint64_t cancelled = 0;
    uint64_t decode_tokens = 0;     // tokens produced by decoder steps
    uint64_t decoder_steps = 0;
    double audio_seconds = 0.0;     // of completed requests
    double busy_seconds = 0.0;      // engine thread time spent computing
    // The decoder's paged KV cache (as of the last step).
    size_t kv_capacity_bytes = 0;
    size_t kv_block_bytes = 0;
    int kv_reserved_blocks = 0;     // held back for admitted requests' worst case
    int kv_hypothesis_blocks = 0;   // a beam's worst case: a full context
    KvCacheStats kv;
};

class TranscriptionEngine {
public:
    TranscriptionEngine(const whisper::WhisperModel& model, Backend& backend, const EngineOptions& options,
                        Logger& logger);
    ~TranscriptionEngine();  // shutdown(false)
    TranscriptionEngine(const TranscriptionEngine&) = delete;
    TranscriptionEngine& operator=(const TranscriptionEngine&) = delete;

    // Queues a request. Throws Error(Overloaded) when the queue is full, Error(InvalidArgument)
    // for options the engine can never satisfy (e.g. more beams than slots), Error(Cancelled)
    // after shutdown. The future carries the transcript or the request's error.
    std::future<Transcript> submit(TranscriptionRequest request);

    EngineStats stats() const;
    // The largest beam size a request can have: 2 slots per beam, a full context of KV per beam.
    int max_beams() const;
    // Stops accepting; with drain, finishes queued and active requests first; then joins.
    void shutdown(bool drain);

private:
    struct Job;
    void loop();
    void admit_locked();
    void step_once();
    void finish(Job& job, std::exception_ptr error);

    const whisper::WhisperModel& model_;
    Backend& backend_;
    EngineOptions options_;
    Logger& log_;
    whisper::WhisperRunner runner_;
    whisper::WhisperStepModel steps_;

    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::unique_ptr<Job>> queue_;
    std::vector<std::unique_ptr<Job>> active_;  // touched by the engine thread only (and stats)
    std::vector<int> free_slots_;
    int reserved_blocks_ = 0;
    int total_kv_blocks_ = 0;  // fixed at construction (read by submit on any thread)
    bool stopping_ = false;
    bool draining_ = false;
    EngineStats stats_;
    std::thread thread_;
};

}  // namespace parlance
