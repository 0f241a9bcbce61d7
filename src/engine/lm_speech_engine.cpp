// The server's engine for an audio language model (see lm_speech_engine.h).
#include "engine/lm_speech_engine.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>

#include "core/engine_thread.h"
#include "core/error.h"
#include "core/graph_ops.h"
#include "engine/audio_lm_pieces.h"
#include "engine/feature_stage.h"
#include "engine/generation_engine.h"
#include "engine/lm_speech_model.h"

namespace parlance {
namespace {

using Clock = std::chrono::steady_clock;
using namespace audio_lm;

// One transcription request on the engine's thread.
struct LmSpeechJob {
    TranscriptionRequest request;
    std::string forced;
    TranscriptPromise promise;
    std::shared_ptr<PcmSource> audio;  // what the pieces are cut from: request.audio, or over request.pcm
    std::optional<Pieces> pieces;      // reset when the job is abandoned after an error
    std::vector<std::optional<GenerationResult>> results;
    size_t emitted = 0;  // pieces whose segments went out (in order)
    int in_flight = 0;   // pieces cut and not finished (being embedded or in the engine)
    int encoding = 0;    // of them, at the encoder's thread: the job outlives them
    std::optional<Clock::time_point> deadline;
    std::string language;
    Transcript transcript;
    std::exception_ptr error;
    Clock::time_point submitted = Clock::now();
    uint64_t arrival = 0;  // submission order: FIFO inside a priority class

    auto urgency() const { return std::make_tuple(static_cast<int>(request.priority), arrival); }
};

// The server's engine: one thread, one GenerationEngine; admitted requests' pieces decode in the
// same steps as every other request's. It drives the engine core (core/engine_thread.h): up to
// max_active_ requests admitted, each step cutting their next pieces, embedding them (here, or on
// the encoder's thread) and running one decoder step.
class LmSpeechEngine final : public SpeechEngine, private EngineThread<LmSpeechJob>::Driver {
public:
    LmSpeechEngine(AudioLanguageModel& model, Backend& backend, ggml_type kv_type, const EngineOptions& options,
                   Logger& log)
        : model_(model),
          options_(options),
          log_(log),
          max_active_(std::max(1, options.cache_slots / 2)),
          overlap_(options.overlap_encoder && model.encodes_beside_decoder()),
          features_(model, static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))),
          engine_(model.decoder(), backend, step_options(options, kv_type)) {
        const GenerationStats g = engine_.stats();
        stats_.kv = g.kv;
        stats_.kv_capacity_bytes = g.kv_bytes;
        stats_.kv_block_bytes = g.kv.total_blocks > 0 ? g.kv_bytes / static_cast<size_t>(g.kv.total_blocks) : 0;
        stats_.free_slots = max_active_;
        if (overlap_) encoder_thread_ = std::thread([this] { encode_loop(); });
        try {
            requests_.start(*this);
        } catch (...) {
            stop_encoder();
            throw;
        }
    }
    ~LmSpeechEngine() override { shutdown(false); }

    std::future<Transcript> submit(TranscriptionRequest request) override {
        auto job = std::make_unique<Job>();
        job->forced = check_options(model_, request.options);
        return queue_transcription(requests_, std::move(job), std::move(request), options_);
    }

    EngineStats stats() const override {
        std::lock_guard<std::mutex> lock(requests_.mutex());
        EngineStats s = stats_;
        s.queued = requests_.waiting();
        s.busy_seconds = requests_.busy_seconds();
        return s;
    }
    int max_beams() const override { return 1; }
    int capacity() const override { return max_active_; }
    bool word_probabilities() const override { return true; }
    void check_language(const std::string& language) const override {
        if (!language.empty()) model_.language_code(language);
    }

    void shutdown(bool drain) override {
        requests_.stop(drain);
        stop_encoder();  // after the engine's loop: its last jobs waited for their pieces at the encoder
    }

private:
    using Job = LmSpeechJob;

    void stop_encoder() {
        if (!encoder_thread_.joinable()) return;
        {
            std::lock_guard<std::mutex> lock(encode_mutex_);
            encoder_stopping_ = true;
        }
        encode_wake_.notify_all();
        encoder_thread_.join();
    }

    void fail(Job& j, std::exception_ptr e) {
        j.promise.set_exception(e);
        bool cancelled = false;
        try {
            std::rethrow_exception(e);
        } catch (const Error& err) {
            cancelled = err.kind() == ErrorKind::Cancelled;
            if (!cancelled) log_.debug("transcription failed: ", err.what());
        } catch (...) {
        }
        std::lock_guard<std::mutex> lock(requests_.mutex());
        (cancelled ? stats_.cancelled : stats_.failed)++;
    }

    // A newly admitted job: its audio source and piece cutter (this thread).
    void start(Job& j) {
        const TranscribeOptions& o = j.request.options;
        if (options_.request_timeout_seconds > 0)
            j.deadline = j.submitted + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(options_.request_timeout_seconds));
        j.audio =
            j.request.audio ? j.request.audio : std::make_shared<PcmSource>(std::span<const float>(j.request.pcm));
        j.pieces.emplace(model_, *j.audio, o, j.forced);
        j.transcript.task = o.task;
    }

    // A piece cut and waiting for this step's encoder passes.
    struct Cut {
        Job* job;
        size_t index;
        std::future<FeatureStage::Features> features;  // made on features_ meanwhile
        std::shared_ptr<std::atomic<bool>> cancelled;  // the job's request's: read by the encoder's thread
    };

    // Pieces embedded together: the cuts of one step (or, on the encoder's thread, of one pass),
    // their embeddings, or the pass's failure.
    struct Encoded {
        std::vector<Cut> cuts;
        // Per cut: its embedding, or none where its request was cancelled before the pass.
        std::vector<std::optional<AudioLanguageModel::AudioEmbedding>> emb;
        std::exception_ptr error;
    };

    // Cuts the job's next pieces into `cuts` while fewer than kPiecesInFlight are ahead of its
    // transcript (waiting to be embedded, in the engine, or finished and waiting for an earlier
    // piece) and the step's encoder budget lasts (each piece takes one).
    void feed(Job& j, int& embed_budget, std::vector<Cut>& cuts) {
        if (!j.pieces) return;
        // A cancelled or timed-out job cuts no new piece (the engine sweeps those in flight);
        // with none in flight, nothing else ends it.
        const auto ended = [&j] { return j.request.cancelled->load() || (j.deadline && Clock::now() >= *j.deadline); };
        if (ended()) {
            const bool cancelled = j.request.cancelled->load();
            if (!j.error && j.in_flight == 0)
                j.error = failure_of(cancelled ? SeqState::FinishedAborted : SeqState::FinishedTimeout);
            return;
        }
        while (embed_budget > 0 && !j.error && !j.pieces->all_made() &&
               j.pieces->made() - j.emitted < static_cast<size_t>(kPiecesInFlight)) {
            --embed_budget;
            const size_t i = j.pieces->made();
            cuts.push_back({&j, i, features_.add(j.pieces->cut(), j.request.cancelled), j.request.cancelled});
            j.results.emplace_back();
            ++j.in_flight;
        }
        if (j.pieces->all_made() && j.audio) {  // the audio is in the cuts now
            j.transcript.duration = static_cast<double>(j.audio->decoded()) / 16000.0;
            j.audio.reset();
            j.request.audio.reset();
            std::vector<float>().swap(j.request.pcm);
        }
    }

    // Every cut piece embedded (in one batch, as many to a graph as the model takes; one each under
    // --deterministic, whose results must not depend on what else is encoded). Touches no job:
    // it runs on the encoder's thread where the encoder has a stream of its own.
    // A cancelled request's pieces are not embedded (Encoded::emb holds none for them).
    Encoded encode(std::vector<Cut> cuts) {
        Encoded e;
        e.cuts = std::move(cuts);
        AudioLanguageModel::EmbedTimes times;
        size_t embedded = 0;
        try {
            // The cuts' features, made on features_ since they were cut (the wait is the pass's
            // features time); a cancelled request's are neither waited for nor embedded.
            std::vector<FeatureStage::Features> made;
            std::vector<const AudioLanguageModel::AudioFeatures*> clips;
            std::vector<size_t> live;
            const auto t0 = Clock::now();
            for (size_t k = 0; k < e.cuts.size(); ++k) {
                if (e.cuts[k].cancelled->load()) continue;
                FeatureStage::Features f = e.cuts[k].features.get();
                if (!f) continue;  // cancelled before its features were made
                clips.push_back(f.get());
                made.push_back(std::move(f));
                live.push_back(k);
            }
            times.features = std::chrono::duration<double>(Clock::now() - t0).count();
            const int per_pass = device_products_invariant() ? 1 : std::max(1, options_.max_encode_batch);
            std::vector<AudioLanguageModel::AudioEmbedding> emb;
            if (!clips.empty()) emb = model_.embed_features(clips, per_pass, &times);
            if (emb.size() != clips.size())
                throw Error(ErrorKind::Internal, "the encoder returned " + std::to_string(emb.size()) +
                                                     " embeddings for " + std::to_string(clips.size()) + " clips");
            e.emb.assign(e.cuts.size(), std::nullopt);
            for (size_t k = 0; k < live.size(); ++k) e.emb[live[k]] = std::move(emb[k]);
            embedded = live.size();
        } catch (...) {
            e.error = std::current_exception();
        }
        for (Cut& c : e.cuts) c.features = {};  // a cancelled cut's, made or not
        std::lock_guard<std::mutex> lock(requests_.mutex());
        stats_.encoder_seconds += times.features + times.encode;
        stats_.features_seconds += times.features;
        stats_.encoded_pieces += embedded;
        if (overlap_) stats_.encoded_beside_steps += embedded;
        return e;
    }

    // The encoder's thread (overlap_): passes over the cuts the engine's thread hands it, one
    // batch at a time, each batch's embeddings handed back (embedded_) and the engine woken.
    void encode_loop() {
        const size_t per_batch = static_cast<size_t>(encode_budget()) / 2;
        for (;;) {
            std::vector<Cut> cuts;
            {
                std::unique_lock<std::mutex> lock(encode_mutex_);
                encode_wake_.wait(lock, [&] { return encoder_stopping_ || !to_encode_.empty(); });
                if (to_encode_.empty()) return;  // stopping, and nothing left
                while (!to_encode_.empty() && cuts.size() < per_batch) {
                    cuts.push_back(std::move(to_encode_.front()));
                    to_encode_.pop_front();
                }
            }
            Encoded e = encode(std::move(cuts));  // (catches what the passes throw)
            for (;;) {  // handed back whatever happens: the engine's jobs wait for these pieces
                try {
                    std::lock_guard<std::mutex> lock(requests_.mutex());
                    embedded_.push_back(std::move(e));
                    break;
                } catch (...) {  // no memory for the list's growth: try again shortly
                    std::this_thread::sleep_for(std::chrono::milliseconds(10));
                }
            }
            requests_.notify();
        }
    }

    // Pieces at the encoder at most: a batch computing and the next one cut (each a step's
    // budget of kEmbedsPerStep or --encode-batch pieces); inline, one step's.
    int encode_budget() const {
        const int per_step = std::max(kEmbedsPerStep, options_.max_encode_batch);
        return overlap_ ? 2 * per_step : per_step;
    }

    // The embedded pieces prompted and submitted (this thread). A failed pass fails the jobs whose
    // pieces it held.
    void submit_embedded(Encoded& e) {
        for (Cut& c : e.cuts)
            if (c.job->encoding > 0) --c.job->encoding, --encoding_;
        if (e.error) {
            for (Cut& c : e.cuts)
                if (c.job->pieces) {
                    try {
                        std::rethrow_exception(e.error);
                    } catch (...) {
                        abandon(*c.job);
                    }
                }
            return;
        }
        std::vector<Cut>& cuts = e.cuts;
        for (size_t k = 0; k < cuts.size(); ++k) {
            Job& j = *cuts[k].job;
            if (!j.pieces) continue;  // abandoned by an earlier piece's failure
            std::optional<AudioLanguageModel::AudioEmbedding>& emb = e.emb[k];
            if (!emb) {  // cancelled: never submitted (feed ends the job once none is in flight)
                --j.in_flight;
                continue;
            }
            try {
                GenerationRequest r = j.pieces->request(cuts[k].index, std::move(emb->rows), emb->tokens);
                if (cuts[k].index == 0) r.expected.assign(j.request.expected.begin(), j.request.expected.end());
                r.priority = j.request.priority;
                r.cancelled = j.request.cancelled;
                r.deadline = j.deadline;
                owner_[engine_.submit(std::move(r))] = {&j, cuts[k].index};
            } catch (...) {
                abandon(j);
            }
        }
    }

    // This step's cut pieces: handed to the encoder's thread (overlap_), or embedded and
    // submitted now.
    void embed(std::vector<Cut>& cuts) {
        if (cuts.empty()) return;
        if (overlap_) {
            for (Cut& c : cuts) ++c.job->encoding, ++encoding_;
            {
                std::lock_guard<std::mutex> lock(encode_mutex_);
                for (Cut& c : cuts) to_encode_.push_back(std::move(c));
            }
            encode_wake_.notify_one();
        } else {
            Encoded e = encode(std::move(cuts));
            submit_embedded(e);
        }
        cuts.clear();
    }

    // After a failure to embed or submit: the job's pieces in the engine come out again.
    void abandon(Job& j) {
        j.error = std::current_exception();
        for (auto it = owner_.begin(); it != owner_.end();) {
            if (it->second.first == &j) {
                engine_.abort(it->first);
                it = owner_.erase(it);
            } else {
                ++it;
            }
        }
        j.pieces.reset();
        j.results.clear();
        j.in_flight = 0;
    }

    // Segments of the finished pieces at the front go out; returns true when the job is done.
    bool advance(Job& j) {
        if (j.encoding > 0) return false;  // the encoder's thread holds its pieces
        if (!j.pieces) return true;
        while (j.emitted < j.pieces->made() && j.results[j.emitted]) {
            const GenerationResult& r = *j.results[j.emitted];
            if (std::exception_ptr e = failure_of(r.state)) j.error = e;
            count_passes(j.transcript.timings, r);
            bool speech = false;
            Segment s = segment_of(model_, j.pieces->start(j.emitted), j.pieces->end(j.emitted), r,
                                   j.pieces->take_logprobs(j.emitted).get(), j.forced, &j.language, &speech);
            if (speech) {
                if (j.request.on_segment) j.request.on_segment(s);
                append(j.transcript, std::move(s));
            }
            ++j.emitted;
        }
        return j.in_flight == 0 && (j.error || (j.pieces->all_made() && j.emitted == j.pieces->made()));
    }

    // The engine core's driver.
    bool fits(const Job&) const override { return static_cast<int>(active_.size()) < max_active_; }
    void admit(std::unique_ptr<Job> job) override {
        active_.push_back(std::move(job));
        admitted_.push_back(active_.back().get());
    }
    bool has_work() const override {
        if (!embedded_.empty()) return true;
        // Nothing to step while pieces are at the encoder's thread: every active job waits for
        // them (the last step cut what the budget and kPiecesInFlight allowed), so the loop sleeps
        // until it hands pieces back (notify), a request arrives or the server stops.
        const bool waiting = overlap_ && encoding_ > 0 && !engine_.has_work();
        return !active_.empty() && !waiting;
    }
    bool idle() const override { return active_.empty(); }
    void reject(Job& j, std::exception_ptr error) override { j.promise.set_exception(error); }
    // Each active job ends, cancelled, once none of its pieces is in flight (feed, advance).
    void cancel_all() override {
        for (auto& j : active_) j->request.cancelled->store(true);
    }

    void step() override {
        std::vector<Job*> admitted;
        admitted.swap(admitted_);
        std::vector<Encoded> embedded;
        {
            std::lock_guard<std::mutex> lock(requests_.mutex());
            embedded.swap(embedded_);
        }
        for (Encoded& e : embedded) submit_embedded(e);
        for (Job* j : admitted) {
            try {
                start(*j);
            } catch (...) {
                abandon(*j);
            }
        }
        std::stable_sort(active_.begin(), active_.end(),
                         [](const auto& a, const auto& b) { return a->urgency() < b->urgency(); });
        // This step's pieces, the most urgent jobs' first (see kEmbedsPerStep), embedded together.
        int embed_budget = encode_budget() - encoding_;
        std::vector<Cut> cuts;
        for (auto& j : active_) {
            try {
                feed(*j, embed_budget, cuts);
            } catch (...) {
                abandon(*j);
            }
        }
        embed(cuts);
        try {
            if (engine_.has_work())
                for (GenerationResult& r : engine_.step()) {
                    const auto it = owner_.find(r.id);
                    if (it == owner_.end()) continue;
                    Job& j = *it->second.first;
                    j.results[it->second.second] = std::move(r);
                    --j.in_flight;
                    owner_.erase(it);
                }
        } catch (...) {  // a failed step (device error) fails every active request
            // The step's swept sequences never report back, so no job waits for its pieces:
            // each is abandoned (its sequences aborted, nothing left in flight).
            for (auto& j : active_) {
                j->request.cancelled->store(true);
                abandon(*j);
            }
        }
        std::vector<std::unique_ptr<Job>> done;
        for (auto& j : active_) {
            if (!advance(*j)) continue;
            if (j->error) {
                fail(*j, j->error);
            } else {
                j->transcript.language = j->forced.empty() ? j->language : j->forced;
                std::lock_guard<std::mutex> lock(requests_.mutex());
                stats_.completed++;
                stats_.audio_seconds += j->transcript.duration;
                j->promise.set_value(std::move(j->transcript));
            }
            done.push_back(std::move(j));
        }
        const GenerationStats g = engine_.stats();
        std::lock_guard<std::mutex> lock(requests_.mutex());
        active_.erase(std::remove(active_.begin(), active_.end(), nullptr), active_.end());
        stats_.active = static_cast<int>(active_.size());
        stats_.free_slots = max_active_ - stats_.active;
        stats_.decode_tokens = g.tokens_generated;
        stats_.decoder_steps = g.steps;
        stats_.decoder_forward_seconds = g.forward_seconds;
        stats_.decoder_compute_seconds = g.compute_seconds;
        stats_.kv = g.kv;
    }

    AudioLanguageModel& model_;
    EngineOptions options_;
    Logger& log_;
    const int max_active_;
    const bool overlap_;                              // encoder passes on encoder_thread_
    FeatureStage features_;                           // the cut pieces' log-mel, ahead of the passes
    GenerationEngine engine_;                         // this thread's
    std::map<SeqId, std::pair<Job*, size_t>> owner_;  // this thread's: sequence -> piece
    EngineThread<Job> requests_;                      // the thread, the waiting requests, the stop
    std::vector<std::unique_ptr<Job>> active_;        // this thread's (fits, idle: under requests_.mutex())
    std::vector<Job*> admitted_;                      // this thread's: of active_, not yet started
    EngineStats stats_;                               // (requests_.mutex())
    std::vector<Encoded> embedded_;  // (requests_.mutex()) the encoder's thread's passes, for this thread to submit
    int encoding_ = 0;               // this thread's: pieces handed to the encoder's thread, not back
    std::mutex encode_mutex_;
    std::condition_variable encode_wake_;
    std::deque<Cut> to_encode_;  // (encode_mutex_) in the order cut: the most urgent job's first
    bool encoder_stopping_ = false;
    std::thread encoder_thread_;
};

}  // namespace

std::unique_ptr<SpeechEngine> start_lm_speech_engine(AudioLanguageModel& model, Backend& backend, ggml_type kv_type,
                                                     const EngineOptions& options, Logger& logger) {
    return std::make_unique<LmSpeechEngine>(model, backend, kv_type, options, logger);
}

}  // namespace parlance
