// EngineThread, the engine core: its queue orders requests by (priority, arrival), bounds them and
// refuses after a stop; its loop admits the most urgent while the driver says they fit, steps the
// driver while it has work (timing its steps: every driver's busy time), and stops with a drain
// (every job finished) or without (the waiting refused, the held cancelled), ending once the
// driver holds none.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/engine_thread.h"

namespace parlance {
namespace {

struct Job {
    std::string name;
    int steps = 1;  // steps it takes
    uint64_t arrival = 0;
    bool cancelled = false;
};

// Holds up to `budget` jobs; a step advances each; a cancelled job ends at the next step.
class CountingDriver final : public EngineThread<Job>::Driver {
public:
    explicit CountingDriver(size_t budget) : budget_(budget) {}
    bool fits(const Job&) const override { return held_.size() < budget_; }
    void admit(std::unique_ptr<Job> job) override {
        admitted.push_back(job->name);
        held_.push_back(std::move(job));
        ++admissions;
    }
    bool has_work() const override { return !held_.empty(); }
    bool idle() const override { return held_.empty(); }
    void reject(Job& job, std::exception_ptr error) override {
        try {
            std::rethrow_exception(error);
        } catch (const Error& e) {
            if (e.kind() == ErrorKind::Cancelled) rejected.push_back(job.name);
        }
    }
    void cancel_all() override {
        for (auto& j : held_) j->cancelled = true;
    }
    void step() override {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        for (auto it = held_.begin(); it != held_.end();) {
            Job& j = **it;
            if (j.cancelled) {
                cancelled.push_back(j.name);
            } else if (--j.steps == 0) {
                finished.push_back(j.name);
            } else {
                ++it;
                continue;
            }
            it = held_.erase(it);
        }
    }
    // Read after the loop is joined.
    std::vector<std::string> admitted, finished, rejected, cancelled;
    std::atomic<int> admissions{0};

private:
    size_t budget_;
    std::vector<std::unique_ptr<Job>> held_;
};

}  // namespace

TEST(EngineThread, AdmitsByPriorityThenArrivalWhileJobsFitAndDrains) {
    EngineThread<Job> t;
    int waiting = 0;
    auto submit = [&](const char* name, Priority p, int max_queue = 8) {
        t.submit(std::make_unique<Job>(Job{name, 2}), p, max_queue, "test queue", [&](Job& j, uint64_t arrival, int n) {
            j.arrival = arrival;
            waiting = n;
        });
    };
    submit("bulk", Priority::Bulk);
    submit("first", Priority::Interactive);
    submit("live", Priority::Live);
    submit("second", Priority::Interactive);
    EXPECT_EQ(waiting, 4);
    try {
        submit("refused", Priority::Live, /*max_queue=*/4);
        FAIL() << "a full queue took a request";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::Overloaded);
        EXPECT_NE(std::string(e.what()).find("the test queue is full (4 waiting)"), std::string::npos) << e.what();
    }
    CountingDriver d(/*budget=*/1);  // one job at a time: the admission order is the queue's
    t.start(d);
    EXPECT_TRUE(t.stop(/*drain=*/true));
    EXPECT_EQ(d.admitted, (std::vector<std::string>{"live", "first", "second", "bulk"}));
    EXPECT_EQ(d.finished, d.admitted);
    EXPECT_TRUE(d.rejected.empty());
    EXPECT_TRUE(d.cancelled.empty());
    {
        // Every driver's busy time is the loop's: eight steps, each sleeping at least 1 ms.
        std::lock_guard<std::mutex> lock(t.mutex());
        EXPECT_GE(t.busy_seconds(), 0.008);
    }
    EXPECT_FALSE(t.stop(false)) << "a second stop has no thread to join";
    try {
        submit("late", Priority::Live);
        FAIL() << "a stopped queue took a request";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::Cancelled);
    }
}

TEST(EngineThread, AStopWithoutDrainRefusesTheWaitingAndCancelsTheHeld) {
    EngineThread<Job> t;
    CountingDriver d(/*budget=*/2);
    t.start(d);
    auto submit = [&](const char* name, int steps) {
        t.submit(std::make_unique<Job>(Job{name, steps}), Priority::Interactive, 8, "test queue",
                 [](Job&, uint64_t, int) {});
    };
    submit("quick", 1);
    for (int i = 0; i < 2000 && d.admissions.load() < 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    for (const char* name : {"long 1", "long 2", "waiting 1", "waiting 2"}) submit(name, 1 << 30);
    for (int i = 0; i < 2000 && d.admissions.load() < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    {
        std::lock_guard<std::mutex> lock(t.mutex());
        EXPECT_EQ(t.waiting(), 2);  // the budget holds two
    }
    EXPECT_TRUE(t.stop(/*drain=*/false));
    EXPECT_EQ(d.finished, (std::vector<std::string>{"quick"}));
    EXPECT_EQ(d.cancelled, (std::vector<std::string>{"long 1", "long 2"}));
    EXPECT_EQ(d.rejected, (std::vector<std::string>{"waiting 1", "waiting 2"}));
}

TEST(EngineThread, AStopBeforeTheLoopStartedRefusesLaterSubmits) {
    struct Job {};
    EngineThread<Job> t;
    EXPECT_FALSE(t.stop(false));  // no loop to join
    EXPECT_THROW(t.submit(std::make_unique<Job>(), Priority::Bulk, 8, "queue", [](Job&, uint64_t, int) {}), Error);
    std::lock_guard<std::mutex> lock(t.mutex());
    EXPECT_EQ(t.waiting(), 0);
}

}  // namespace parlance
