// The transcription engine's step loop (see transcription_engine.h).
#include "models/whisper/engine.h"

#include <algorithm>
#include <chrono>
#include <tuple>

#include <malloc.h>

#include "core/error.h"

namespace parlance::whisper {

using Clock = std::chrono::steady_clock;

struct WhisperEngine::Job {
    TranscriptionRequest request;
    std::shared_ptr<PcmSource> audio;  // the request's source, or one over its samples
    std::promise<Transcript> promise;
    std::unique_ptr<Session> session;
    std::vector<int> slots;
    int kv_blocks = 0;  // reserved while active: its beams' worst case
    Clock::time_point submitted = Clock::now();
    uint64_t arrival = 0;  // submission order: FIFO inside a priority class

    auto urgency() const { return std::make_tuple(static_cast<int>(request.priority), arrival); }
};

namespace {

int kv_blocks_for(const EngineOptions& o, const WhisperConfig& c) {
    const int slots = std::max(2, o.cache_slots);
    const int block_tokens = WhisperRunner::kv_block_tokens();
    const int per_hypothesis = (c.max_target_positions + block_tokens - 1) / block_tokens + 2;
    if (o.kv_cache_bytes == 0) return slots / 2 * per_hypothesis;
    const size_t block_bytes = decoder_kv_spec(c).bytes_per_token() * block_tokens;
    const size_t blocks = o.kv_cache_bytes / block_bytes;
    if (blocks < static_cast<size_t>(per_hypothesis))
        throw Error(ErrorKind::InvalidArgument,
                    "the KV cache of " + std::to_string(o.kv_cache_bytes >> 20) + " MiB holds no full decoder context (" +
                        std::to_string((block_bytes * per_hypothesis + (1 << 20) - 1) >> 20) +
                        " MiB for one sequence of this model)");
    return static_cast<int>(std::min<size_t>(blocks, 1 << 24));
}

}  // namespace

WhisperEngine::WhisperEngine(const WhisperModel& model, Backend& backend,
                                         const EngineOptions& options, Logger& logger)
    : model_(model), backend_(backend), options_(options), log_(logger),
      runner_(model.config, *model.weights, backend, std::max(2, options.cache_slots),
              kv_blocks_for(options, model.config)),
      steps_(runner_) {
    for (int i = 0; i < runner_.n_slots(); ++i) free_slots_.push_back(i);
    stats_.free_slots = static_cast<int>(free_slots_.size());
    stats_.kv_block_bytes = runner_.kv_block_bytes();
    stats_.kv_hypothesis_blocks = runner_.blocks_per_hypothesis();
    stats_.kv_capacity_bytes = runner_.kv_bytes();
    stats_.kv = runner_.kv_stats();
    total_kv_blocks_ = stats_.kv.total_blocks;
    thread_ = std::thread([this] { loop(); });
}

WhisperEngine::~WhisperEngine() { shutdown(false); }

std::future<Transcript> WhisperEngine::submit(TranscriptionRequest request) {
    // The model's defaults first: the cache slots a request takes depend on its beam size.
    request.options = with_model_defaults(std::move(request.options), model_.tokens);
    slots_for_beams(*request.options.beam_size, runner_.n_slots());
    const int blocks = *request.options.beam_size * runner_.blocks_per_hypothesis();
    if (blocks > total_kv_blocks_)
        throw Error(ErrorKind::InvalidArgument,
                    "beam_size " + std::to_string(*request.options.beam_size) + " needs " +
                        std::to_string(blocks * runner_.kv_block_bytes() >> 20) + " MiB of KV cache; the server has " +
                        std::to_string(runner_.kv_bytes() >> 20) + " MiB (--kv-cache-mb)");
    auto job = std::make_unique<Job>();
    job->request = std::move(request);
    job->request.options.max_new_tokens = std::min(job->request.options.max_new_tokens, options_.max_new_tokens);
    auto future = job->promise.get_future();
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stopping_) throw Error(ErrorKind::Cancelled, "the server is shutting down");
        if (static_cast<int>(queue_.size()) >= options_.max_queue)
            throw Error(ErrorKind::Overloaded, "the request queue is full (" +
                                                   std::to_string(options_.max_queue) + " waiting)");
        // The queue stays sorted by (priority, arrival): a request goes behind every one of its
        // class and ahead of all less urgent ones.
        job->arrival = ++arrivals_;
        const auto at = std::find_if(queue_.begin(), queue_.end(), [&](const std::unique_ptr<Job>& q) {
            return q->request.priority > job->request.priority;
        });
        queue_.insert(at, std::move(job));
        stats_.queued = static_cast<int>(queue_.size());
    }
    wake_.notify_one();
    return future;
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

int WhisperEngine::max_beams() const {
    return std::min(runner_.n_slots() / 2, total_kv_blocks_ / runner_.blocks_per_hypothesis());
}

EngineStats WhisperEngine::stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
}

void WhisperEngine::shutdown(bool drain) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!thread_.joinable()) return;
        stopping_ = true;
        draining_ = drain;
    }
    wake_.notify_all();
    thread_.join();
}

void WhisperEngine::fail(Job& job, std::exception_ptr error) {
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
    std::lock_guard<std::mutex> lock(mutex_);
    (cancelled ? stats_.cancelled : stats_.failed)++;
}

void WhisperEngine::finish(Job& job, std::exception_ptr error) {
    if (error) {
        job.promise.set_exception(error);
    } else {
        job.promise.set_value(std::move(job.session->transcript()));
    }
    for (int s : job.slots) runner_.release_slot(s);  // its KV blocks go back to the pool now
    std::lock_guard<std::mutex> lock(mutex_);
    for (int s : job.slots) free_slots_.push_back(s);
    job.slots.clear();
    reserved_blocks_ -= job.kv_blocks;
    job.kv_blocks = 0;
    stats_.free_slots = static_cast<int>(free_slots_.size());
    stats_.kv_reserved_blocks = reserved_blocks_;
}

// Moves queued jobs into the active set while their cache slots are free and the KV cache can
// hold their worst case, most urgent first (the queue's order; a large beam request at the head
// waits rather than being overtaken forever by others of its class).
void WhisperEngine::admit_locked() {
    while (!queue_.empty()) {
        Job& head = *queue_.front();
        const int beams = *head.request.options.beam_size;  // set by submit
        const size_t need = 2 * static_cast<size_t>(beams);
        const int blocks = beams * runner_.blocks_per_hypothesis();
        if (free_slots_.size() < need) break;
        if (reserved_blocks_ + blocks > total_kv_blocks_) break;
        std::unique_ptr<Job> job = std::move(queue_.front());
        queue_.pop_front();
        job->slots.assign(free_slots_.end() - need, free_slots_.end());
        free_slots_.resize(free_slots_.size() - need);
        job->kv_blocks = blocks;
        reserved_blocks_ += blocks;
        active_.push_back(std::move(job));
    }
    stats_.kv_reserved_blocks = reserved_blocks_;
    stats_.queued = static_cast<int>(queue_.size());
    stats_.active = static_cast<int>(active_.size());
    stats_.free_slots = static_cast<int>(free_slots_.size());
}

void WhisperEngine::loop() {
    for (;;) {
        {
            std::unique_lock<std::mutex> lock(mutex_);
            wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || !active_.empty(); });
            if (stopping_ && !draining_) {
                for (auto& j : queue_)
                    j->promise.set_exception(std::make_exception_ptr(
                        Error(ErrorKind::Cancelled, "the server is shutting down")));
                queue_.clear();
                lock.unlock();
                for (auto& j : active_)
                    finish(*j, std::make_exception_ptr(Error(ErrorKind::Cancelled, "the server is shutting down")));
                active_.clear();
                return;
            }
            if (stopping_ && queue_.empty() && active_.empty()) return;
            size_t before = active_.size();
            admit_locked();
            // Sessions are created outside the lock below; mark new ones.
            for (size_t i = before; i < active_.size(); ++i) active_[i]->session.reset();
        }
        // Create sessions for newly admitted jobs (validation errors fail only that request).
        for (auto& j : active_) {
            if (j->session || j->slots.empty()) continue;
            try {
                j->audio = j->request.audio ? j->request.audio
                                            : std::make_shared<PcmSource>(std::span<const float>(j->request.pcm));
                j->session = std::make_unique<Session>(model_, backend_, *j->audio, j->request.options, j->slots);
                j->session->on_segment = j->request.on_segment;
                for (int s : j->slots) steps_.bind(s, j->session->cross());
            } catch (...) {
                fail(*j, std::current_exception());
            }
        }
        auto t0 = Clock::now();
        try {
            step_once();
        } catch (...) {
            // A failure of the shared step (device error): fail every active request.
            auto error = std::current_exception();
            for (auto& j : active_)
                if (!j->slots.empty()) finish(*j, error);
        }
        const KvCacheStats kv = runner_.kv_stats();  // the runner is this thread's
        std::lock_guard<std::mutex> lock(mutex_);
        stats_.kv = kv;
        stats_.busy_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
        const size_t before = active_.size();
        active_.erase(std::remove_if(active_.begin(), active_.end(),
                                     [](const std::unique_ptr<Job>& j) { return j->slots.empty(); }),
                      active_.end());
        stats_.active = static_cast<int>(active_.size());
        // Idle again: hand the freed request buffers (audio, caches of finished requests) back
        // to the system, so resident memory returns to its baseline between bursts.
        if (before > 0 && active_.empty() && queue_.empty()) malloc_trim(0);
    }
}

void WhisperEngine::step_once() {
    // Cancellations and time limits land between steps.
    const auto now = Clock::now();
    for (auto& j : active_) {
        if (j->slots.empty() || !j->session) continue;
        bool timed_out = options_.request_timeout_seconds > 0 &&
                         std::chrono::duration<double>(now - j->submitted).count() > options_.request_timeout_seconds;
        if (j->request.cancelled->load() || timed_out) {
            finish(*j, std::make_exception_ptr(timed_out ? Error(ErrorKind::Timeout, "the request ran past its time limit")
                                                         : Error(ErrorKind::Cancelled, "the client went away")));
            std::lock_guard<std::mutex> lock(mutex_);
            stats_.cancelled++;
        }
    }
    // One encoder graph per step (up to max_encode_batch windows), the most urgent windows first:
    // a burst of uploads does not stall the running decodes for all of its encoder passes, and a
    // live item's final decode is encoded before the windows queued ahead of it in lower classes.
    std::vector<Job*> pending;
    for (auto& j : active_)
        if (!j->slots.empty() && j->session && j->session->phase() == Session::Phase::NeedEncode)
            pending.push_back(j.get());
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
        runner_.encode(mels, crosses);
        for (Job* j : encoding) j->session->encoded();
    }
    // Word-timestamp alignment passes (one sequence each, between steps).
    for (auto& j : active_) {
        if (j->slots.empty() || !j->session || j->session->phase() != Session::Phase::NeedAlign) continue;
        try {
            j->session->align(runner_);
        } catch (...) {
            fail(*j, std::current_exception());
        }
    }
    // One decoder step over all live hypotheses of all requests.
    std::vector<StepInput> batch;
    std::vector<std::pair<Job*, size_t>> owners;
    for (auto& j : active_) {
        if (j->slots.empty() || !j->session || j->session->phase() != Session::Phase::Decoding) continue;
        auto in = j->session->inputs();
        owners.emplace_back(j.get(), in.size());
        for (auto& x : in) batch.push_back(std::move(x));
    }
    if (!batch.empty()) {
        auto logits = steps_.step(batch);
        size_t off = 0;
        uint64_t produced = 0;
        for (auto& [job, n] : owners) {
            try {
                job->session->consume(std::span<std::vector<float>>(logits.data() + off, n), steps_);
            } catch (...) {
                fail(*job, std::current_exception());
            }
            off += n;
            produced += n;
        }
        std::lock_guard<std::mutex> lock(mutex_);
        stats_.decoder_steps++;
        stats_.decode_tokens += produced;
    }
    for (auto& j : active_) {
        if (!j->slots.empty() && j->session && j->session->phase() == Session::Phase::Done) {
            double seconds = j->session->transcript().duration;
            finish(*j, nullptr);
            std::lock_guard<std::mutex> lock(mutex_);
            stats_.completed++;
            stats_.audio_seconds += seconds;
        }
    }
}

}  // namespace parlance::whisper
