// A model that turns speech into text, as the CLI and the server see it: the registry loads one
// (models/registry.h load_speech_model) and nothing above models/ knows its architecture. It
// transcribes one request on the calling thread (the CLI), or starts an engine that serves many
// at once (the server: continuous batching on the engine's own thread).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "audio/pcm_source.h"
#include "core/engine_thread.h"
#include "core/error.h"
#include "core/kv_cache_manager.h"
#include "core/log.h"
#include "core/priority.h"
#include "decoding/decode_service.h"
#include "decoding/transcribe_options.h"
#include "decoding/transcript.h"
#include "models/language_model.h"

namespace parlance {

class Backend;

// What a decode service is made with (models/<arch> asks for one over its decoder).
struct DecodeServiceOptions {
    size_t kv_cache_bytes = 0;  // the decoder's KV cache cap
    int max_sequences = 16;     // decoding at once (a greedy search is one, beams two per beam)
    int token_budget = 512;     // tokens computed per step at most (a larger prompt runs alone)
};

// Makes the DecodeService a model's engine runs its decodes on (decoding/decode_service.h). The
// engine layer provides it (engine/generation_decode_service.h: the generation engine), as
// models/ cannot see engine/; open_speech_model hands it to the models it loads.
using DecodeServiceFactory = std::function<std::unique_ptr<DecodeService>(LanguageModel& decoder, Backend& backend,
                                                                          const DecodeServiceOptions&)>;

struct EngineOptions {
    int max_queue = 32;    // waiting requests beyond the active ones
    int cache_slots = 16;  // decoder sequences at once: a greedy request takes 1, beams 2 per beam
    // Byte cap of the decoder's paged KV cache. A request is admitted when its worst case fits
    // (each beam a full context); blocks are taken as its tokens arrive. 0: cache_slots / 2
    // hypotheses' worth, what the slots can hold at once.
    size_t kv_cache_bytes = 0;
    // Windows of different requests encoded in one graph. 1 keeps every request's result
    // identical whatever else runs: the encoder's large products go to OpenBLAS, whose blocking
    // follows the product's width, so a batch of windows changes the last bits of each (seen on
    // an AVX-512 machine with 2 threads: log-probabilities 1e-6 apart, the same tokens).
    // Qwen3-ASR: the audio pieces embedded between two decoder steps, in one encoder graph (as
    // many as fit its chunk cap) unless device products are batch-invariant (--deterministic).
    int max_encode_batch = 1;
    // Audio LMs whose encoder computes on a stream of its own (AudioLanguageModel::
    // encodes_beside_decoder: CUDA): encoder passes run on a thread of their own, beside the
    // decoder's steps, instead of between them. false (serve --serial-encoder) runs them in turn.
    bool overlap_encoder = true;
    // The decoder step's width on the generation engine (audio LMs): tokens computed per step
    // (decodes and prompt chunks together) and sequences decoding at once; 0 = the engine's
    // defaults (GenerationEngineOptions: 512 and 64).
    int max_batch_tokens = 0;
    int max_batch_sequences = 0;
    // Audio LMs: prompts gathered over up to this many decode steps before a step takes them
    // (SchedulerOptions::prompt_gather_steps; 0 = every step takes what arrived).
    int prompt_gather_steps = 0;
    double request_timeout_seconds = 600.0;  // 0 = none
    int max_new_tokens = 224;                // cap on decoded tokens per 30 s window, whatever a request asks
    // Floor on decoded tokens per window or piece (end-of-text suppressed until then), whatever a
    // request asks, at most max_new_tokens: serve --min-new-tokens, for benchmarks of random-weight
    // layouts, whose end-of-text comes at random (bench/gpu_bench.sh).
    int min_new_tokens = 0;
    // Where Whisper's decodes run: the generation engine (open_speech_model hands it in; a
    // WhisperEngine without one is refused).
    DecodeServiceFactory decode_service;
};

struct TranscriptionRequest {
    std::vector<float> pcm;  // 16 kHz mono
    // The audio as a source instead (pcm unused): a server's upload decoded on the engine's
    // thread as the model reads it, so a long file holds about a window of samples, not all of
    // them. Decoding errors fail the request where the reading meets them.
    std::shared_ptr<PcmSource> audio;
    TranscribeOptions options;
    // Called on the engine thread as each segment is decided (SSE streaming). Must not block.
    std::function<void(const Segment&)> on_segment;
    // Set by the client side when it goes away; checked between steps.
    std::shared_ptr<std::atomic<bool>> cancelled = std::make_shared<std::atomic<bool>>(false);
    // The tokens the model is expected to generate for the audio's first piece (Segment::tokens of
    // a live session's previous decode of the same audio's start): engines that verify drafts
    // (audio language models on the generation engine) compute them in one pass and keep what the
    // model agrees with — self-speculation; the transcript is the same as without. Whisper's
    // engine decodes with beams and ignores it.
    std::vector<int> expected;
    // Its class: queued requests are admitted and their audio encoded in (priority, arrival)
    // order, so a live item's final decode does not wait behind uploads or interim decodes.
    Priority priority = Priority::Interactive;
    // When set, the request's end is told here instead of through submit()'s future (which is
    // then not valid), so no thread has to wait on it: called once, on the engine's thread and
    // possibly under its lock, with the transcript or the error (a null `error` means success).
    // Must not block, throw or call into the engine; servers post the result to their own threads.
    std::function<void(std::exception_ptr error, Transcript transcript)> on_finished;
};

// The end of one request as an engine keeps it: submit()'s future, or the request's on_finished.
// An engine adopts the callback only once it has queued the request (a submit that throws never
// calls it). One destroyed unanswered tells its request so, as a broken std::promise would.
class TranscriptPromise {
public:
    TranscriptPromise() = default;
    explicit TranscriptPromise(std::function<void(std::exception_ptr, Transcript)> on_finished)
        : on_finished_(std::move(on_finished)) {}
    TranscriptPromise(TranscriptPromise&& o) noexcept
        : on_finished_(std::exchange(o.on_finished_, nullptr)), promise_(std::move(o.promise_)) {}
    TranscriptPromise& operator=(TranscriptPromise&& o) noexcept {
        if (this != &o) {
            abandon();
            on_finished_ = std::exchange(o.on_finished_, nullptr);
            promise_ = std::move(o.promise_);
        }
        return *this;
    }
    ~TranscriptPromise() { abandon(); }

    // What submit() returns: not valid when the request has on_finished.
    std::future<Transcript> get_future() { return on_finished_ ? std::future<Transcript>() : promise_.get_future(); }
    void set_value(Transcript t) {
        if (auto f = std::exchange(on_finished_, nullptr))
            f(nullptr, std::move(t));
        else
            promise_.set_value(std::move(t));
    }
    void set_exception(std::exception_ptr e) {
        if (auto f = std::exchange(on_finished_, nullptr))
            f(std::move(e), Transcript{});
        else
            promise_.set_exception(std::move(e));
    }

private:
    void abandon() {
        if (auto f = std::exchange(on_finished_, nullptr))
            f(std::make_exception_ptr(Error(ErrorKind::Internal, "the engine dropped the request unanswered")),
              Transcript{});
    }

    std::function<void(std::exception_ptr, Transcript)> on_finished_;
    std::promise<Transcript> promise_;
};

// Queues `job` (its other fields already set) for `request` on an engine's thread: the request's
// max_new_tokens capped at the engine's (and min_new_tokens raised to the engine's floor), and its answer —
// on_finished, or the future returned — adopted only once the job is queued, so a submit that throws (Overloaded,
// shutting down) never answers through both. Job has `request`, `arrival` and `promise` (a TranscriptPromise).
template <class Job>
std::future<Transcript> queue_transcription(EngineThread<Job>& requests, std::unique_ptr<Job> job,
                                            TranscriptionRequest request, const EngineOptions& engine) {
    auto on_finished = std::move(request.on_finished);
    job->request = std::move(request);
    TranscribeOptions& o = job->request.options;
    o.max_new_tokens = std::min(o.max_new_tokens, engine.max_new_tokens);
    o.min_new_tokens = std::min(std::max(o.min_new_tokens, engine.min_new_tokens), o.max_new_tokens);
    std::future<Transcript> future;
    const Priority priority = job->request.priority;
    requests.submit(std::move(job), priority, engine.max_queue, "request queue", [&](Job& q, uint64_t arrival, int) {
        q.arrival = arrival;
        q.promise = TranscriptPromise(std::move(on_finished));
        future = q.promise.get_future();
    });
    return future;
}

struct EngineStats {
    int queued = 0;
    int active = 0;
    int free_slots = 0;
    uint64_t completed = 0;
    uint64_t failed = 0;
    uint64_t cancelled = 0;
    uint64_t decode_tokens = 0;  // tokens generated (of finished decodes: a search counts its best hypothesis)
    uint64_t decoder_steps = 0;
    double audio_seconds = 0.0;  // of completed requests
    double busy_seconds = 0.0;   // the engine thread's time in its steps (EngineThread::busy_seconds)
    // Of it: the encoder's passes (features included) and the decoder's forward passes (graph,
    // compute, logits read back); the rest is scheduling, sampling and the requests' bookkeeping.
    // (With the encoder on its own thread, EngineOptions::overlap_encoder, its seconds are that
    // thread's, not part of busy.)
    double encoder_seconds = 0.0;
    // Of encoder_seconds: the log-mel (Whisper's, made in its pass), or the wait for it (an audio
    // LM's, made ahead of the passes on host threads: engine/feature_stage.h).
    double features_seconds = 0.0;
    uint64_t encoded_pieces = 0;        // clips or windows through the encoder
    uint64_t encoded_beside_steps = 0;  // of them, on the encoder's own thread (overlap_encoder)
    double decoder_forward_seconds = 0.0;
    double decoder_compute_seconds = 0.0;  // of them, launching the graphs and waiting for the device
    // The decoder's paged KV cache (as of the last step).
    size_t kv_capacity_bytes = 0;
    size_t kv_block_bytes = 0;
    int kv_reserved_blocks = 0;    // held back for admitted requests' worst case
    int kv_hypothesis_blocks = 0;  // a beam's worst case: a full context
    KvCacheStats kv;
};

// Serves transcription requests of one model: requests wait in a bounded queue, are admitted
// while their decoder state fits, and advance together. Thread-safe: submit/stats/shutdown may be
// called from any thread.
class SpeechEngine {
public:
    virtual ~SpeechEngine() = default;

    // Queues a request. Throws Error(Overloaded) when the queue is full, Error(InvalidArgument)
    // for options the engine can never satisfy (e.g. more beams than it holds), Error(Cancelled)
    // after shutdown. The future carries the transcript or the request's error; for a request
    // with on_finished it is not valid, and the callback carries them.
    virtual std::future<Transcript> submit(TranscriptionRequest request) = 0;
    virtual EngineStats stats() const = 0;
    // Requests at the model's default beam size it runs at once at most (its cache slots'
    // worth); more wait in its queue (EngineOptions::max_queue). 0: not known.
    virtual int capacity() const { return 0; }
    // The largest beam size a request can have.
    virtual int max_beams() const = 0;
    // Throws Error(InvalidArgument) when the model cannot transcribe this language (a code or a
    // name, as requests give it; "" = detect is always accepted). Servers call it before queueing
    // a request, so the client's 400 names the field.
    virtual void check_language(const std::string& language) const = 0;
    // Whether requests may ask for word timestamps (TranscribeOptions::word_timestamps).
    virtual bool word_timestamps() const { return false; }
    // Whether requests may ask for words with probabilities only (TranscribeOptions::
    // word_probabilities): models that cannot time words but know their tokens' probabilities.
    virtual bool word_probabilities() const { return false; }
    // The audio one encoder pass covers, in seconds (Whisper's window); 0: audio of any length.
    // Live sessions cap their items at it, so each item is decoded in one window.
    virtual double window_seconds() const { return 0.0; }
    // Stops accepting; with drain, finishes queued and active requests first; then joins.
    virtual void shutdown(bool drain) = 0;
};

class SpeechModel {
public:
    virtual ~SpeechModel() = default;

    // What it is, for logs and /v1/status: "whisper 4+4 layers, d_model 384, English".
    virtual std::string description() const = 0;
    virtual double load_seconds() const = 0;
    // The beam size of requests that do not set one (the checkpoint's generation config).
    virtual int default_beam_size() const = 0;
    // EngineOptions::max_encode_batch when serve's --encode-batch is left to the device on a GPU:
    // Whisper's 30 s windows (an encoder graph's attention grows with each), 4.
    virtual int gpu_encode_batch() const { return 4; }
    // serve's --cache-slots when left to the device on a GPU, where `spare_bytes` of its memory
    // are left to what requests hold beside the KV cache (half the free memory by default).
    virtual int gpu_cache_slots(size_t spare_bytes) const {
        (void)spare_bytes;
        return 16;
    }

    // Transcribes 16 kHz mono audio of any length on the calling thread, reading it front to
    // back as the model needs it (a file decoded as it goes: memory follows the window, not the
    // file). Throws Error(InvalidArgument) naming the option the model cannot honour, and what
    // reading the audio throws.
    virtual Transcript transcribe(PcmSource& audio16k, const TranscribeOptions& options) = 0;
    // The same for audio in memory.
    Transcript transcribe(std::span<const float> pcm16k, const TranscribeOptions& options) {
        PcmSource audio(pcm16k);
        return transcribe(audio, options);
    }

    // An engine for this model's requests, running until shutdown; the model must outlive it.
    virtual std::unique_ptr<SpeechEngine> start_engine(const EngineOptions& options, Logger& logger) = 0;
};

}  // namespace parlance
