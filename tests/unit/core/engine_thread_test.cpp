// EngineThread: the queue every engine shares orders requests by (priority, arrival), bounds them,
// refuses after a stop, and runs and joins the loop.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "core/engine_thread.h"

namespace parlance {
namespace {

struct Job {
    std::string name;
    uint64_t arrival = 0;
};

std::unique_ptr<Job> job(const char* name) {
    return std::make_unique<Job>(Job{name, 0});
}

}  // namespace

TEST(EngineThread, QueuesByPriorityThenArrivalBoundsAndRefusesAfterAStop) {
    EngineThread<Job> t;
    int waiting = 0;
    auto submit = [&](const char* name, Priority p, int max_queue = 8) {
        t.submit(job(name), p, max_queue, "test queue", [&](Job& j, uint64_t arrival, int n) {
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
    std::vector<std::string> order;
    std::vector<uint64_t> arrivals;
    {
        std::lock_guard<std::mutex> lock(t.mutex());
        for (const auto& j : t.waiting()) {
            order.push_back(j->name);
            arrivals.push_back(j->arrival);
        }
        EXPECT_EQ(t.pop_front()->name, "live");
    }
    submit("urgent", Priority::Live);  // ahead of the rest again: the priorities follow the pops
    EXPECT_EQ(order, (std::vector<std::string>{"live", "first", "second", "bulk"}));
    EXPECT_EQ(arrivals, (std::vector<uint64_t>{3, 2, 4, 1}));
    std::atomic<bool> ran{false};
    t.start([&] {
        std::unique_lock<std::mutex> lock(t.mutex());
        t.wake().wait(lock, [&] { return t.stopping(); });
        EXPECT_TRUE(t.draining());
        std::vector<std::string> rest;
        for (const auto& j : t.take_all()) rest.push_back(j->name);
        EXPECT_EQ(rest, (std::vector<std::string>{"urgent", "first", "second", "bulk"}));
        EXPECT_TRUE(t.waiting().empty());
        ran = true;
    });
    EXPECT_TRUE(t.stop(/*drain=*/true));
    EXPECT_TRUE(ran);
    EXPECT_FALSE(t.stop(false)) << "a second stop has no thread to join";
    try {
        submit("late", Priority::Live);
        FAIL() << "a stopped queue took a request";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::Cancelled);
    }
}

TEST(EngineThread, AStopBeforeTheLoopStartedRefusesLaterSubmits) {
    struct Job {};
    EngineThread<Job> t;
    EXPECT_FALSE(t.stop(false));  // no loop to join
    EXPECT_THROW(t.submit(std::make_unique<Job>(), Priority::Bulk, 8, "queue", [](Job&, uint64_t, int) {}), Error);
    EXPECT_TRUE(t.waiting().empty());
}

}  // namespace parlance
