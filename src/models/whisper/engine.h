// Whisper's transcription engine (a SpeechEngine): one thread owns the model runner (encoder,
// word alignment) and a DecodeService (the generation engine, from open_speech_model) and
// advances every admitted request together — each step encodes the most urgent window(s) that
// need it, hands each request's next decode (a window's prefix, a temperature attempt's search)
// to the service, and runs one service step over every request's live hypotheses (continuous
// batching: requests join and leave between steps). Requests wait in a bounded queue ordered by
// (priority, arrival); a full queue refuses with Overloaded. Cancellation (a client that hung up)
// and time limits take effect between steps and free the request's cache slots. Thread-safe:
// submit/stats/shutdown may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/engine_thread.h"
#include "core/kv_cache_manager.h"
#include "core/log.h"
#include "models/speech_model.h"
#include "models/whisper/decoder.h"
#include "models/whisper/model.h"
#include "models/whisper/runner.h"
#include "models/whisper/session.h"

namespace parlance::whisper {

struct WhisperJob;  // one request on the engine's thread (engine.cpp)

class WhisperEngine : public SpeechEngine, private EngineThread<WhisperJob>::Driver {
public:
    WhisperEngine(const WhisperModel& model, Backend& backend, const EngineOptions& options, Logger& logger);
    ~WhisperEngine() override;  // shutdown(false)
    WhisperEngine(const WhisperEngine&) = delete;
    WhisperEngine& operator=(const WhisperEngine&) = delete;

    // Queues a request. Throws Error(Overloaded) when the queue is full, Error(InvalidArgument)
    // for options the engine can never satisfy (e.g. more beams than slots), Error(Cancelled)
    // after shutdown. The future carries the transcript or the request's error.
    std::future<Transcript> submit(TranscriptionRequest request) override;

    EngineStats stats() const override;
    // The largest beam size a request can have: 2 sequences per beam, a full context of KV per beam.
    int max_beams() const override;
    int capacity() const override;
    void check_language(const std::string& language) const override;
    bool word_timestamps() const override { return true; }
    double window_seconds() const override { return model_.config.max_source_positions / 50.0; }
    // Stops accepting; with drain, finishes queued and active requests first; then joins.
    void shutdown(bool drain) override;

private:
    using Job = WhisperJob;
    // The engine core's driver (core/engine_thread.h). A request is admitted while the sequence
    // budget has room for its search and the KV cache for its worst case, most urgent first (a
    // large beam request at the head waits rather than being overtaken forever by others of its
    // class); it holds its encoded window, and the decode service's scheduler runs its decodes.
    bool fits(const Job& head) const override;
    void admit(std::unique_ptr<Job> job) override;
    bool has_work() const override { return !active_.empty(); }
    bool idle() const override { return active_.empty(); }
    void reject(Job& job, std::exception_ptr error) override;
    void cancel_all() override;
    void step() override;
    void step_once();
    void finish(Job& job, std::exception_ptr error);
    // finish() with the request's error, counted as cancelled or failed.
    void fail(Job& job, std::exception_ptr error);
    // The runner whose slot 0 the word-alignment passes use.
    WhisperRunner& aligner();
    // The KV blocks a request of `beams` beams may hold at once.
    int worst_blocks(int beams) const;

    const WhisperModel& model_;
    Backend& backend_;
    EngineOptions options_;
    Logger& log_;
    std::unique_ptr<WhisperRunner> runner_;          // the encoder
    std::unique_ptr<WhisperRunner> align_runner_;    // word alignment (slot 0), made when first asked
    std::unique_ptr<WhisperDecoder> decoder_model_;  // the decoder the service steps
    std::unique_ptr<DecodeService> decoder_;         // where every decode runs
    std::map<uint64_t, Job*> decoding_;              // this thread's: decode task -> its request
    int total_kv_blocks_ = 0;
    int greedy_blocks_ = 0, beam_blocks_ = 0;   // a request's worst case in the decoder's cache
    EngineThread<Job> requests_;                // the thread, the waiting requests, the stop
    std::vector<std::unique_ptr<Job>> active_;  // touched by the engine thread only (and stats)
    int free_sequences_ = 0;                    // of options_.cache_slots: a greedy request holds one, beams two each
    int reserved_blocks_ = 0;
    EngineStats stats_;  // (requests_.mutex())
};

}  // namespace parlance::whisper
