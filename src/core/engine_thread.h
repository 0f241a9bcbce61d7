// The engine core every model's requests run on: one thread that owns the model's steps, the
// bounded queue of requests waiting for it in (priority, arrival) order, admission, the stop and
// its drain, written once. What a step does is a Driver's: WhisperEngine's windows, LmSpeechEngine's
// pieces, GenerationService's choices. A new kind of work adds a driver, not a loop. (It lives in
// core/ because Whisper's driver is in models/, which cannot see engine/.)
//
// submit() queues a job and wakes the loop; from then on the job is the loop's. The loop admits the
// most urgent waiting jobs while the driver says they fit, and steps the driver while it has work;
// otherwise it sleeps until a submit, a notify() (a driver's other thread handing work back) or a
// stop. stop() asks the loop to end and joins it: with drain, after every submitted job; without,
// the waiting jobs are refused and the driver's own are cancelled, and the loop ends once the
// driver holds none.
#pragma once

#include <algorithm>
#include <chrono>
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

    // What one kind of request does on the thread. Members marked (locked) run under mutex(), the
    // others without it; all of them on the thread, which owns the driver's state.
    class Driver {
    public:
        // (locked) Whether the most urgent waiting job may start now.
        virtual bool fits(const Job& head) const = 0;
        // (locked) An admitted job, the driver's from now on: it holds what fits() counted. Starting
        // it (anything that may fail or take time) belongs to the next step().
        virtual void admit(std::unique_ptr<Job> job) = 0;
        // (locked) Whether a step has something to do without a new request; false sleeps the loop.
        virtual bool has_work() const = 0;
        // (locked) Whether the driver holds no job: a stop ends the loop only then.
        virtual bool idle() const = 0;
        // A waiting job a stop without drain refused: answer it with `error` (Error(Cancelled)).
        virtual void reject(Job& job, std::exception_ptr error) = 0;
        // A stop without drain: every job the driver holds ends as soon as it can, cancelled.
        virtual void cancel_all() = 0;
        // One iteration: start what was admitted, one step of the model, answer what finished.
        // Must not throw (a failed step fails the requests it held, not the thread).
        virtual void step() = 0;

    protected:
        ~Driver() = default;
    };

    // Runs the loop for `driver` on the thread (once). The driver outlives the loop: its owner
    // calls stop() before destroying it.
    void start(Driver& driver) {
        thread_ = std::thread([this, &driver] { run(driver); });
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

    // How many jobs wait (under mutex()).
    int waiting() const { return static_cast<int>(queue_.size()); }
    // Seconds the thread spent in the driver's step() (under mutex()): every driver's "busy" time,
    // one definition (starting what was admitted, the model's step, answering what finished).
    double busy_seconds() const { return busy_seconds_; }

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
    // Wakes the loop to ask the driver again (a driver's other thread handed work back).
    void notify() { wake_.notify_one(); }

private:
    void run(Driver& d) {
        bool cancelled = false;  // the stop's cancel_all() was made
        for (;;) {
            std::deque<std::unique_ptr<Job>> refused;
            bool cancel = false;
            {
                std::unique_lock<std::mutex> lock(mutex_);
                const auto admitting = [&] {
                    return !queue_.empty() && (!stopping_ || draining_) && d.fits(*queue_.front());
                };
                const auto ended = [&] { return stopping_ && d.idle() && (queue_.empty() || !draining_); };
                const auto cancelling = [&] { return stopping_ && !draining_ && !cancelled; };
                wake_.wait(lock, [&] { return cancelling() || ended() || admitting() || d.has_work(); });
                if (cancelling()) {
                    refused = take_all();
                    cancel = cancelled = true;
                } else if (ended()) {
                    return;
                }
                while (admitting()) d.admit(pop_front());
            }
            for (auto& j : refused)
                d.reject(*j, std::make_exception_ptr(Error(ErrorKind::Cancelled, "the server is shutting down")));
            refused.clear();
            if (cancel) d.cancel_all();
            const auto t0 = std::chrono::steady_clock::now();
            d.step();
            const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            std::lock_guard<std::mutex> lock(mutex_);
            busy_seconds_ += took;
        }
    }
    std::unique_ptr<Job> pop_front() {
        std::unique_ptr<Job> job = std::move(queue_.front());
        queue_.pop_front();
        priorities_.pop_front();
        return job;
    }
    std::deque<std::unique_ptr<Job>> take_all() {
        priorities_.clear();
        return std::exchange(queue_, {});
    }

    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::unique_ptr<Job>> queue_;  // sorted by (priority, arrival)
    std::deque<Priority> priorities_;         // queue_'s, in step
    uint64_t arrivals_ = 0;
    double busy_seconds_ = 0.0;  // in step()
    bool stopping_ = false, draining_ = false;
    std::thread thread_;
};

}  // namespace parlance
