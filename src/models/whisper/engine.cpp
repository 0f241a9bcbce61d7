// The transcription engine's step loop (see transcription_engine.h).
#include "models/whisper/engine.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <tuple>

#include <malloc.h>

#include "core/error.h"
#include "decoding/search.h"

namespace parlance::whisper {

using Clock = std::chrono::steady_clock;

struct WhisperJob {
    TranscriptionRequest request;
    std::shared_ptr<PcmSource> audio;  // the request's source, or one over its samples
    TranscriptPromise promise;
    std::unique_ptr<Session> session;
    int sequences = 0;         // of the cache_slots budget, while active
    int kv_blocks = 0;         // reserved while active: its beams' worst case
    uint64_t task = 0;         // its decode in flight on the service (0: none)
    bool done = false;         // finished; leaves the active set after the step
    std::exception_ptr error;  // when done: its failure, else its session's transcript
    // Kept until the step's stats are in: a client that has its result sees them counted.
    void deliver() {
        if (error)
            promise.set_exception(error);
        else
            promise.set_value(std::move(session->transcript()));
    }
    Clock::time_point submitted = Clock::now();
    uint64_t arrival = 0;  // submission order: FIFO inside a priority class

    auto urgency() const { return std::make_tuple(static_cast<int>(request.priority), arrival); }
};

namespace {

int cache_slots_of(const EngineOptions& o) {
    return std::max(1, o.cache_slots);
}

int kv_blocks_for(const EngineOptions& o, const WhisperConfig& c) {
    const int slots = cache_slots_of(o);
    const int block_tokens = WhisperRunner::kv_block_tokens();
    const int per_hypothesis = WhisperRunner::blocks_per_hypothesis(c);
    // Unset: as many full contexts as beams fit in the slots (what the old two-slots-per-request
    // engine allocated); greedy requests are then admitted as their worst cases fit in it.
    if (o.kv_cache_bytes == 0) return std::max(1, slots / 2) * per_hypothesis;
    const size_t block_bytes = decoder_kv_spec(c).bytes_per_token() * block_tokens;
    const size_t blocks = o.kv_cache_bytes / block_bytes;
    if (blocks < static_cast<size_t>(per_hypothesis))
        throw Error(ErrorKind::InvalidArgument,
                    "the KV cache of " + std::to_string(o.kv_cache_bytes >> 20) +
                        " MiB holds no full decoder context (" +
                        std::to_string((block_bytes * per_hypothesis + (1 << 20) - 1) >> 20) +
                        " MiB for one sequence of this model)");
    return static_cast<int>(std::min<size_t>(blocks, 1 << 24));
}

}  // namespace

WhisperEngine::WhisperEngine(const WhisperModel& model, Backend& backend, const EngineOptions& options, Logger& logger)
    : model_(model),
      backend_(backend),
      options_(options),
      log_(logger),
      // The encoder: a one-block cache it never uses (word alignment gets a runner of its own).
      runner_(std::make_unique<WhisperRunner>(model.config, *model.weights, backend, 1, 1)) {
    const WhisperConfig& c = model.config;
    if (!options.decode_service)
        throw Error(ErrorKind::Internal, "WhisperEngine needs the engine layer's DecodeService (EngineOptions)");
    decoder_model_ = std::make_unique<WhisperDecoder>(model, backend);
    decoder_ = options.decode_service(*decoder_model_, backend,
                                      decoder_service_options(c, kv_blocks_for(options, c), cache_slots_of(options)));
    const DecodeServiceStats d = decoder_->stats();
    total_kv_blocks_ = d.kv.total_blocks;
    greedy_blocks_ = decoder_->worst_blocks(1, c.max_target_positions);
    beam_blocks_ = decoder_->worst_blocks(2, c.max_target_positions) / 2;
    free_sequences_ = cache_slots_of(options);
    stats_.free_slots = free_sequences_;
    stats_.kv_block_bytes = d.block_bytes;
    stats_.kv_hypothesis_blocks = beam_blocks_;
    stats_.kv_capacity_bytes = d.kv_bytes;
    stats_.kv = d.kv;
    requests_.start(*this);
}

WhisperRunner& WhisperEngine::aligner() {
    if (!align_runner_)  // a full context of KV, only once a request asks for word timestamps
        align_runner_ = std::make_unique<WhisperRunner>(model_.config, *model_.weights, backend_, 1);
    return *align_runner_;
}

int WhisperEngine::worst_blocks(int beams) const {
    return beams > 1 ? beams * beam_blocks_ : greedy_blocks_;
}

WhisperEngine::~WhisperEngine() {
    shutdown(false);
}

std::future<Transcript> WhisperEngine::submit(TranscriptionRequest request) {
    // The model's defaults first: the sequences a request takes depend on its beam size.
    request.options = with_model_defaults(std::move(request.options), model_.tokens);
    const int beams = *request.options.beam_size;  // at least 1 (with_model_defaults)
    if (beams > 1) slots_for_beams(beams, cache_slots_of(options_));
    const int blocks = worst_blocks(beams);
    if (blocks > total_kv_blocks_)
        throw Error(ErrorKind::InvalidArgument,
                    "beam_size " + std::to_string(beams) + " needs " +
                        std::to_string(blocks * stats_.kv_block_bytes >> 20) + " MiB of KV cache; the server has " +
                        std::to_string(stats_.kv_capacity_bytes >> 20) + " MiB (--kv-cache-mb)");
    return queue_transcription(requests_, std::make_unique<Job>(), std::move(request), options_);
}

void WhisperEngine::check_language(const std::string& language) const {
    if (language.empty()) return;
    if (model_.tokens.multilingual) {
        model_.tokens.language_token(language);  // throws for a code the model does not know
    } else if (language != "en") {
        throw Error(ErrorKind::InvalidArgument,
                    "this English-only model cannot transcribe language '" + language.substr(0, 100) + "'");
    }
}

int WhisperEngine::capacity() const {
    const int beams = std::max(1, model_.tokens.num_beams);
    return std::max(1, cache_slots_of(options_) / search_sequences(beams));
}

int WhisperEngine::max_beams() const {
    int beams = std::max(1, cache_slots_of(options_) / 2);
    while (beams > 1 && worst_blocks(beams) > total_kv_blocks_) --beams;
    return beams;
}

EngineStats WhisperEngine::stats() const {
    std::lock_guard<std::mutex> lock(requests_.mutex());
    EngineStats s = stats_;
    s.queued = requests_.waiting();
    s.busy_seconds = requests_.busy_seconds();
    return s;
}

void WhisperEngine::shutdown(bool drain) {
    requests_.stop(drain);
}

void WhisperEngine::fail(Job& job, std::exception_ptr error) {
    if (job.done) return;
    // A client that went away while its upload was being read (the decoder checks the flag) is a
    // cancellation, not a failure, whichever check saw it first.
    bool cancelled = false;
    try {
        std::rethrow_exception(error);
    } catch (const Error& e) {
        cancelled = e.kind() == ErrorKind::Cancelled;
    } catch (...) {
    }
    finish(job, error);
    std::lock_guard<std::mutex> lock(requests_.mutex());
    (cancelled ? stats_.cancelled : stats_.failed)++;
}

void WhisperEngine::finish(Job& job, std::exception_ptr error) {
    if (job.done) return;
    job.done = true;
    job.error = error;
    if (job.task != 0) {  // its KV blocks go back to the pool at the service's next step
        decoder_->abort(job.task);
        decoding_.erase(job.task);
        job.task = 0;
    }
    std::lock_guard<std::mutex> lock(requests_.mutex());
    free_sequences_ += job.sequences;
    job.sequences = 0;
    reserved_blocks_ -= job.kv_blocks;
    job.kv_blocks = 0;
    stats_.free_slots = free_sequences_;
    stats_.kv_reserved_blocks = reserved_blocks_;
}

bool WhisperEngine::fits(const Job& head) const {
    const int beams = *head.request.options.beam_size;  // set by submit
    return free_sequences_ >= search_sequences(beams) && reserved_blocks_ + worst_blocks(beams) <= total_kv_blocks_;
}

void WhisperEngine::admit(std::unique_ptr<Job> job) {
    const int beams = *job->request.options.beam_size;
    job->sequences = search_sequences(beams);
    free_sequences_ -= job->sequences;
    job->kv_blocks = worst_blocks(beams);
    reserved_blocks_ += job->kv_blocks;
    active_.push_back(std::move(job));
    stats_.kv_reserved_blocks = reserved_blocks_;
    stats_.active = static_cast<int>(active_.size());
    stats_.free_slots = free_sequences_;
}

void WhisperEngine::reject(Job& job, std::exception_ptr error) {
    job.promise.set_exception(error);
}

void WhisperEngine::cancel_all() {
    for (auto& j : active_) {  // none is done: each step's finished jobs left the set
        finish(*j, std::make_exception_ptr(Error(ErrorKind::Cancelled, "the server is shutting down")));
        j->deliver();
    }
    active_.clear();
    std::lock_guard<std::mutex> lock(requests_.mutex());
    stats_.active = 0;
}

void WhisperEngine::step() {
    // Create sessions for newly admitted jobs (validation errors fail only that request).
    for (auto& j : active_) {
        if (j->session || j->done) continue;
        try {
            j->audio = j->request.audio ? j->request.audio
                                        : std::make_shared<PcmSource>(std::span<const float>(j->request.pcm));
            j->session = std::make_unique<Session>(model_, backend_, *j->audio, j->request.options);
            j->session->on_segment = j->request.on_segment;
        } catch (...) {
            fail(*j, std::current_exception());
        }
    }
    try {
        step_once();
    } catch (...) {
        // A failure of the shared step (device error): fail every active request.
        auto error = std::current_exception();
        for (auto& j : active_) finish(*j, error);
    }
    const DecodeServiceStats d = decoder_->stats();  // the service is this thread's
    std::vector<std::unique_ptr<Job>> finished;
    {
        std::lock_guard<std::mutex> lock(requests_.mutex());
        stats_.kv = d.kv;
        stats_.decoder_steps = d.steps;
        stats_.decode_tokens = d.tokens;
        stats_.decoder_forward_seconds = d.forward_seconds;
        const auto end = std::stable_partition(active_.begin(), active_.end(),
                                               [](const std::unique_ptr<Job>& j) { return !j->done; });
        std::move(end, active_.end(), std::back_inserter(finished));
        active_.erase(end, active_.end());
        stats_.active = static_cast<int>(active_.size());
    }
    // Results go out once the stats count them and their blocks are back in the pool.
    if (finished.empty()) return;
    for (auto& j : finished) j->deliver();
    finished.clear();  // the finished requests' buffers, before the trim below
    // Idle again: hand the freed request buffers (audio, caches of finished requests) back
    // to the system, so resident memory returns to its baseline between bursts.
    std::lock_guard<std::mutex> lock(requests_.mutex());
    if (active_.empty() && requests_.waiting() == 0) malloc_trim(0);
}

void WhisperEngine::step_once() {
    // Cancellations and time limits land between steps.
    const auto now = Clock::now();
    for (auto& j : active_) {
        if (j->done || !j->session) continue;
        bool timed_out = options_.request_timeout_seconds > 0 &&
                         std::chrono::duration<double>(now - j->submitted).count() > options_.request_timeout_seconds;
        if (j->request.cancelled->load() || timed_out) {
            finish(*j,
                   std::make_exception_ptr(timed_out ? Error(ErrorKind::Timeout, "the request ran past its time limit")
                                                     : Error(ErrorKind::Cancelled, "the client went away")));
            std::lock_guard<std::mutex> lock(requests_.mutex());
            stats_.cancelled++;
        }
    }
    auto live = [](const std::unique_ptr<Job>& j, Session::Phase phase) {
        return !j->done && j->session && j->session->phase() == phase;
    };
    // One encoder graph per step (up to max_encode_batch windows), the most urgent windows first:
    // a burst of uploads does not stall the running decodes for all of its encoder passes, and a
    // live item's final decode is encoded before the windows queued ahead of it in lower classes.
    std::vector<Job*> pending;
    for (auto& j : active_)
        if (live(j, Session::Phase::NeedEncode)) pending.push_back(j.get());
    std::sort(pending.begin(), pending.end(), [](const Job* a, const Job* b) { return a->urgency() < b->urgency(); });
    if (pending.size() > static_cast<size_t>(options_.max_encode_batch)) pending.resize(options_.max_encode_batch);
    std::vector<std::vector<float>> mels;
    std::vector<CrossKv*> crosses;
    std::vector<Job*> encoding;
    for (Job* j : pending) {
        try {  // reading the window may decode a file, whose errors are this request's alone
            mels.push_back(j->session->window_mel());
        } catch (...) {
            fail(*j, std::current_exception());
            continue;
        }
        crosses.push_back(j->session->cross());
        encoding.push_back(j);
    }
    if (!encoding.empty()) {
        const auto t0 = Clock::now();
        runner_->encode(mels, crosses);
        for (Job* j : encoding) j->session->encoded();
        std::lock_guard<std::mutex> lock(requests_.mutex());
        stats_.encoder_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
        stats_.encoded_pieces += encoding.size();
    }
    // Word-timestamp alignment passes (one sequence each, between steps, in a runner's slot 0).
    for (auto& j : active_) {
        if (!live(j, Session::Phase::NeedAlign)) continue;
        try {
            j->session->align(aligner(), 0);
        } catch (...) {
            fail(*j, std::current_exception());
        }
    }
    // Each request's next decode goes to the service, in its request's class.
    for (auto& j : active_) {
        if (!live(j, Session::Phase::Decoding)) continue;
        std::optional<DecodeTask> task = j->session->take_task();
        if (!task) continue;
        task->priority = j->request.priority;
        try {
            j->task = decoder_->start(std::move(*task));
            decoding_[j->task] = j.get();
        } catch (...) {
            fail(*j, std::current_exception());
        }
    }
    // One decoder step over every request's live hypotheses.
    if (decoder_->has_work()) {
        for (const DecodeOutcome& o : decoder_->step()) {
            const auto it = decoding_.find(o.id);
            if (it == decoding_.end()) continue;  // its request ended before it
            Job& job = *it->second;
            decoding_.erase(it);
            job.task = 0;
            try {
                job.session->decoded(o);
            } catch (...) {
                fail(job, std::current_exception());
            }
        }
    }
    for (auto& j : active_) {
        if (live(j, Session::Phase::Done)) {
            double seconds = j->session->transcript().duration;
            finish(*j, nullptr);
            std::lock_guard<std::mutex> lock(requests_.mutex());
            stats_.completed++;
            stats_.audio_seconds += seconds;
        }
    }
}

}  // namespace parlance::whisper
