// TranscriptPromise: how an engine tells a request's end, through submit()'s future or the
// request's on_finished callback (servers' requests, so no thread waits for the engine); and
// queue_transcription, which queues a request with the engine's bounds applied to its options.
#include <gtest/gtest.h>

#include "models/speech_model.h"

namespace parlance {
namespace {

struct Calls {
    int count = 0;
    std::exception_ptr error;
    std::string text;
};

std::function<void(std::exception_ptr, Transcript)> recorder(Calls& c) {
    return [&c](std::exception_ptr e, Transcript t) {
        ++c.count;
        c.error = e;
        c.text = t.text;
    };
}

TEST(TranscriptPromise, WithoutACallbackTheFutureCarriesTheResult) {
    TranscriptPromise p;
    auto f = p.get_future();
    ASSERT_TRUE(f.valid());
    Transcript t;
    t.text = "hello";
    p.set_value(t);
    EXPECT_EQ(f.get().text, "hello");
}

TEST(TranscriptPromise, ACallbackIsCalledOnceAndTheFutureIsNotValid) {
    Calls c;
    {
        TranscriptPromise p(recorder(c));
        EXPECT_FALSE(p.get_future().valid());
        Transcript t;
        t.text = "hi";
        p.set_value(t);
        EXPECT_EQ(c.count, 1);
        EXPECT_EQ(c.text, "hi");
        EXPECT_FALSE(c.error);
    }
    EXPECT_EQ(c.count, 1) << "answered: destroying it calls nothing more";
}

TEST(TranscriptPromise, AnErrorReachesTheCallback) {
    Calls c;
    TranscriptPromise p(recorder(c));
    p.set_exception(std::make_exception_ptr(Error(ErrorKind::Cancelled, "gone")));
    ASSERT_EQ(c.count, 1);
    try {
        std::rethrow_exception(c.error);
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::Cancelled);
    }
}

// A request its engine drops (a job destroyed without an answer) is told so, as a broken
// std::promise tells its future: a server's request never waits forever. A moved-from promise
// tells nothing; the one it moved to tells once.
TEST(TranscriptPromise, OneDestroyedUnansweredTellsItsRequestOnce) {
    Calls c;
    {
        TranscriptPromise a(recorder(c));
        TranscriptPromise b(std::move(a));
        TranscriptPromise d;
        d = std::move(b);
        EXPECT_EQ(c.count, 0);
    }
    ASSERT_EQ(c.count, 1);
    try {
        std::rethrow_exception(c.error);
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::Internal);
    }
}

}  // namespace
// What queue_transcription queued: the request as an engine's driver admits it.
struct QueuedJob {
    TranscriptionRequest request;
    TranscriptPromise promise;
    uint64_t arrival = 0;
};

class Admitted final : public EngineThread<QueuedJob>::Driver {
public:
    bool fits(const QueuedJob&) const override { return true; }
    void admit(std::unique_ptr<QueuedJob> job) override { jobs.push_back(std::move(job)); }
    bool has_work() const override { return false; }
    bool idle() const override { return true; }
    void reject(QueuedJob&, std::exception_ptr) override {}
    void cancel_all() override {}
    void step() override {}
    std::vector<std::unique_ptr<QueuedJob>> jobs;  // read once the loop is joined
};

// The engine's max_new_tokens caps a request's; its min_new_tokens (serve --min-new-tokens) raises
// a request's floor, never above the request's own cap.
TEST(QueueTranscription, TheEnginesTokenBoundsApplyToEveryRequest) {
    EngineOptions eo;
    eo.max_new_tokens = 100;
    eo.min_new_tokens = 40;
    EngineThread<QueuedJob> t;
    Admitted d;
    t.start(d);
    auto submit = [&](int asked_min, int asked_max) {
        TranscriptionRequest r;
        r.options.min_new_tokens = asked_min;
        r.options.max_new_tokens = asked_max;
        return queue_transcription(t, std::make_unique<QueuedJob>(), std::move(r), eo);
    };
    auto f1 = submit(0, 224);   // capped at 100, raised to 40
    auto f2 = submit(60, 224);  // its own floor is higher
    auto f3 = submit(0, 20);    // the floor stops at its cap
    t.stop(/*drain=*/true);
    ASSERT_EQ(d.jobs.size(), 3u);
    EXPECT_EQ(d.jobs[0]->request.options.max_new_tokens, 100);
    EXPECT_EQ(d.jobs[0]->request.options.min_new_tokens, 40);
    EXPECT_EQ(d.jobs[1]->request.options.min_new_tokens, 60);
    EXPECT_EQ(d.jobs[2]->request.options.max_new_tokens, 20);
    EXPECT_EQ(d.jobs[2]->request.options.min_new_tokens, 20);
    EXPECT_EQ(d.jobs[2]->arrival, 3u);
}

}  // namespace parlance
