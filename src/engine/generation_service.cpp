// GenerationService (see generation_service.h).
#include "engine/generation_service.h"

#include <optional>

#include "core/error.h"

namespace parlance {

struct GenerationJob {
    ServiceRequest r;
    std::vector<std::optional<GenerationResult>> results;
    int started = 0;            // choices submitted to the engine
    bool leader_ready = false;  // choice 0 has its first token: its prompt blocks are cached
    std::vector<std::shared_ptr<std::atomic<bool>>> choice_flags;
    std::exception_ptr error;  // a callback's
};

GenerationService::GenerationService(LanguageModel& model, Backend& backend, const GenerationServiceOptions& options,
                                     Logger& log)
    : model_(model), log_(log), options_(options), engine_(model, backend, options.engine) {
    const GenerationStats g = engine_.stats();
    stats_.kv = g.kv;
    stats_.kv_bytes = g.kv_bytes;
    requests_.start(*this);
}

GenerationService::~GenerationService() {
    shutdown(false);
}

void GenerationService::submit(ServiceRequest r) {
    if (r.n < 1) throw Error(ErrorKind::InvalidArgument, "n must be at least 1");
    auto job = std::make_unique<Job>();
    job->r = std::move(r);
    job->results.resize(job->r.n);
    const Priority priority = job->r.request.priority;
    requests_.submit(std::move(job), priority, options_.max_queue, "generation queue", [](Job&, uint64_t, int) {});
}

GenerationServiceStats GenerationService::stats() const {
    std::lock_guard<std::mutex> lock(requests_.mutex());
    GenerationServiceStats s = stats_;
    s.queued = requests_.waiting();
    s.busy_seconds = requests_.busy_seconds();
    return s;
}

void GenerationService::shutdown(bool drain) {
    requests_.stop(drain);
}

void GenerationService::start_choice(Job& job, int choice) {
    GenerationRequest g = job.r.request;  // copies the prompt
    g.sampling.seed += static_cast<uint64_t>(choice);
    // Each choice has its own flag, set when the request's is (between steps) or when its
    // on_token asks to end it.
    g.cancelled = std::make_shared<std::atomic<bool>>(job.r.request.cancelled->load());
    job.choice_flags.push_back(g.cancelled);
    Job* j = &job;
    auto flag = g.cancelled;
    // A callback that throws ends its choice and fails the request (never the engine thread).
    g.on_token = [j, choice, flag](int32_t t) {
        if (choice == 0) j->leader_ready = true;
        try {
            if (j->r.on_token && !j->r.on_token(choice, t)) flag->store(true);
        } catch (...) {
            if (!j->error) j->error = std::current_exception();
            j->r.request.cancelled->store(true);
        }
    };
    if (job.r.on_logprobs)
        g.on_logprobs = [j, choice](const TokenLogprobs& l) {
            try {
                j->r.on_logprobs(choice, l);
            } catch (...) {
                if (!j->error) j->error = std::current_exception();
                j->r.request.cancelled->store(true);
            }
        };
    const SeqId id = engine_.submit(std::move(g));  // throws for a prompt that can never fit
    owner_[id] = {j, choice};
    ++job.started;
}

void GenerationService::start(std::unique_ptr<Job> job) {
    try {
        start_choice(*job, 0);
    } catch (...) {
        {
            std::lock_guard<std::mutex> lock(requests_.mutex());
            stats_.failed++;
        }
        if (job->r.on_done) job->r.on_done({}, std::current_exception());
        return;
    }
    jobs_.push_back(std::move(job));
}

void GenerationService::admit(std::unique_ptr<Job> job) {
    fresh_.push_back(std::move(job));
}

bool GenerationService::has_work() const {
    if (!fresh_.empty() || engine_.has_work()) return true;
    for (const auto& job : jobs_)  // a request's other choices are due
        if (job->leader_ready && job->started < job->r.n) return true;
    return false;
}

void GenerationService::reject(Job& job, std::exception_ptr error) {
    if (job.r.on_done) job.r.on_done({}, error);
}

void GenerationService::cancel_all() {
    for (auto& job : fresh_) job->r.request.cancelled->store(true);
    for (auto& job : jobs_) job->r.request.cancelled->store(true);
}

void GenerationService::step() {
    {
        std::vector<std::unique_ptr<Job>> fresh = std::move(fresh_);
        fresh_.clear();
        for (auto& job : fresh) start(std::move(job));
    }
    for (auto& job : jobs_)
        if (job->r.request.cancelled->load())
            for (auto& f : job->choice_flags) f->store(true);
    // The other choices of a request join once the first has computed the prompt.
    for (auto& job : jobs_) {
        if (!job->leader_ready || job->started >= job->r.n) continue;
        try {
            while (job->started < job->r.n) start_choice(*job, job->started);
        } catch (...) {
            job->r.request.cancelled->store(true);  // cannot happen for a prompt that fit once
        }
    }
    std::vector<GenerationResult> done;
    try {
        if (engine_.has_work()) done = engine_.step();
    } catch (const std::exception& e) {
        // A failed model step: every request in the batch fails with it; the sequences are
        // aborted (seen by the next schedule) so the engine can go on with new requests.
        log_.error("generation step failed: ", e.what());
        for (auto& job : jobs_) {
            job->r.request.cancelled->store(true);
            for (auto& f : job->choice_flags) f->store(true);
            if (!job->error) job->error = std::current_exception();
        }
    }
    uint64_t prompt = 0, cached = 0, generated = 0, completed = 0, cancelled = 0;
    for (GenerationResult& res : done) {
        auto it = owner_.find(res.id);
        if (it == owner_.end()) continue;
        auto [job, choice] = it->second;
        owner_.erase(it);
        prompt += res.prompt.size();
        cached += res.cached_prompt_tokens;
        generated += res.tokens.size();
        const SeqState state = res.state;
        job->results[choice] = std::move(res);
        // A first choice that ended before its first token: the others end the same way.
        if (choice == 0 && !job->leader_ready)
            for (int c = job->started; c < job->r.n; ++c) {
                GenerationResult r;
                r.state = state;
                r.prompt = job->results[0]->prompt;
                job->results[c] = std::move(r);
                job->started = job->r.n;
            }
    }
    for (size_t i = 0; i < jobs_.size();) {
        Job& job = *jobs_[i];
        bool all = job.started == job.r.n;
        for (const auto& r : job.results) all = all && r.has_value();
        if (!all) {
            ++i;
            continue;
        }
        std::vector<GenerationResult> results;
        for (auto& r : job.results) results.push_back(std::move(*r));
        if (job.error) {
            std::lock_guard<std::mutex> lock(requests_.mutex());
            stats_.failed++;
        } else {
            (job.r.request.cancelled->load() ? cancelled : completed)++;
        }
        if (job.r.on_done) job.r.on_done(std::move(results), job.error);
        jobs_.erase(jobs_.begin() + static_cast<std::ptrdiff_t>(i));
    }
    const GenerationStats g = engine_.stats();
    std::lock_guard<std::mutex> lock(requests_.mutex());
    stats_.running = static_cast<int>(owner_.size());
    stats_.completed += completed;
    stats_.cancelled += cancelled;
    stats_.prompt_tokens += prompt;
    stats_.cached_prompt_tokens += cached;
    stats_.generated_tokens += generated;
    stats_.steps = g.steps;
    stats_.step_tokens_sampled = g.tokens_generated;
    stats_.step_tokens_computed = g.tokens_computed;
    stats_.draft_tokens = g.draft_tokens;
    stats_.draft_accepted = g.draft_accepted;
    stats_.kv = g.kv;
    stats_.kv_bytes = g.kv_bytes;
}

}  // namespace parlance
