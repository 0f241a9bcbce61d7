// TranscriptPromise: how an engine tells a request's end, through submit()'s future or the
// request's on_finished callback (servers' requests, so no thread waits for the engine).
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
}  // namespace parlance
