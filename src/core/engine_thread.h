// What every engine in front of a model shares: one thread that owns the model's steps, the bounded
// queue of requests waiting for it in (priority, arrival) order, and the stop. WhisperEngine,
// LmSpeechEngine and GenerationService each keep their own loop (what a step does differs) and
// their own statistics; submitting, ordering, bounding and stopping are this class's, written once.
//
// The loop reads waiting() and the flags under mutex() and waits on wake(); submit() and stop()
// notify it. A job a submit has queued is the loop's from then on: stop() only asks the loop to end (drain:
// after what was submitted; otherwise at once, failing what it holds) and joins it.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "core/error.h"
#include "core/priority.h"

namespace parlance {

template <typename Job>
class EngineThread {
public:
    EngineThread() = default;
    EngineThread(const EngineThread&) = delete;
    EngineThread& operator=(const EngineThread&) = delete;
    ~EngineThread() { stop(false); }  // the owner stops first: its loop reads the owner's members

    // Runs `loop` on the thread (once).
    template <typename Loop>
    void start(Loop&& loop) {
        thread_ = std::thread(std::forward<Loop>(loop));
    }

    // Queues `job` behind every waiting job of its priority and ahead of all less urgent ones, then
    // calls adopt(queued job, its arrival number, jobs waiting) under the lock: what must hold only
    // once the job is queued (its promise: a submit that throws never answers), so adopt must not
    // throw. Arrival numbers count submissions from 1 (FIFO order inside a class). Throws
    // Error(Cancelled) once stopping, Error(Overloaded) when max_queue jobs wait (`what` names the
    // queue in the message).
    template <typename Adopt>
    void submit(std::unique_ptr<Job> job, Priority priority, int max_queue, const char* what, Adopt&& adopt) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (stopping_) throw Error(ErrorKind::Cancelled, "the server is shutting down");
            if (static_cast<int>(queue_.size()) >= max_queue)
                throw Error(ErrorKind::Overloaded,
                            std::string("the ") + what + " is full (" + std::to_string(max_queue) + " waiting)");
            const auto at = std::upper_bound(priorities_.begin(), priorities_.end(), priority);
            const auto offset = at - priorities_.begin();
            priorities_.insert(at, priority);
            Job& queued = **queue_.insert(queue_.begin() + offset, std::move(job));
            adopt(queued, ++arrivals_, static_cast<int>(queue_.size()));
        }
        wake_.notify_one();
    }

    // The waiting jobs, most urgent first (under mutex()).
    const std::deque<std::unique_ptr<Job>>& waiting() const { return queue_; }
    // The front job, taken out of the queue (the loop's, under mutex()).
    std::unique_ptr<Job> pop_front() {
        std::unique_ptr<Job> job = std::move(queue_.front());
        queue_.pop_front();
        priorities_.pop_front();
        return job;
    }
    // Every waiting job, taken out in order (the loop's, under mutex()).
    std::deque<std::unique_ptr<Job>> take_all() {
        priorities_.clear();
        return std::exchange(queue_, {});
    }

    // Asks the loop to end and joins it (idempotent; false when it was not running). drain: after
    // every submitted job; otherwise at once. Later submits are refused, also when the loop never
    // started.
    bool stop(bool drain) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stopping_ = true;
            if (!thread_.joinable()) return false;
            draining_ = drain;
        }
        wake_.notify_all();
        thread_.join();
        return true;
    }

    std::mutex& mutex() const { return mutex_; }
    std::condition_variable& wake() { return wake_; }
    void notify() { wake_.notify_one(); }

    // Under mutex(): stop() was called; and with drain.
    bool stopping() const { return stopping_; }
    bool draining() const { return draining_; }

private:
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::unique_ptr<Job>> queue_;  // sorted by (priority, arrival)
    std::deque<Priority> priorities_;         // queue_'s, in step
    uint64_t arrivals_ = 0;
    bool stopping_ = false, draining_ = false;
    std::thread thread_;
};

}  // namespace parlance
