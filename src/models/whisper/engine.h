// Whisper's transcription engine (a SpeechEngine): one thread owns the model runner and advances every admitted
// request together — each step encodes the most urgent window(s) that need it, then one decoder
// step runs over all live hypotheses of all requests (continuous batching: requests join and
// leave between steps). Requests wait in a bounded queue ordered by (priority, arrival); a full
// queue refuses with Overloaded.
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
#include "models/speech_model.h"
#include "models/whisper/model.h"
#include "models/whisper/runner.h"
#include "models/whisper/session.h"

namespace parlance::whisper {

class WhisperEngine : public SpeechEngine {
public:
    WhisperEngine(const WhisperModel& model, Backend& backend, const EngineOptions& options,
                        Logger& logger);
    ~WhisperEngine() override;  // shutdown(false)
    WhisperEngine(const WhisperEngine&) = delete;
    WhisperEngine& operator=(const WhisperEngine&) = delete;

    // Queues a request. Throws Error(Overloaded) when the queue is full, Error(InvalidArgument)
    // for options the engine can never satisfy (e.g. more beams than slots), Error(Cancelled)
    // after shutdown. The future carries the transcript or the request's error.
    std::future<Transcript> submit(TranscriptionRequest request) override;

    EngineStats stats() const override;
    // The largest beam size a request can have: 2 slots per beam, a full context of KV per beam.
    int max_beams() const override;
    void check_language(const std::string& language) const override;
    bool word_timestamps() const override { return true; }
    double window_seconds() const override { return model_.config.max_source_positions / 50.0; }
    // Stops accepting; with drain, finishes queued and active requests first; then joins.
    void shutdown(bool drain) override;

private:
    struct Job;
    void loop();
    void admit_locked();
    void step_once();
    void finish(Job& job, std::exception_ptr error);
    // finish() with the request's error, counted as cancelled or failed.
    void fail(Job& job, std::exception_ptr error);

    const WhisperModel& model_;
    Backend& backend_;
    EngineOptions options_;
    Logger& log_;
    WhisperRunner runner_;
    WhisperStepModel steps_;

    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::unique_ptr<Job>> queue_;
    std::vector<std::unique_ptr<Job>> active_;  // touched by the engine thread only (and stats)
    std::vector<int> free_slots_;
    int reserved_blocks_ = 0;
    int total_kv_blocks_ = 0;
    uint64_t arrivals_ = 0;  // fixed at construction (read by submit on any thread)
    bool stopping_ = false;
    bool draining_ = false;
    EngineStats stats_;
    std::thread thread_;
};

}  // namespace parlance::whisper
