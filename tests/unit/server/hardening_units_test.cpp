// Units of the server's defences: the constant-time key comparison, brief quoting of client
// values in errors, and the decoded-audio memory budget.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <future>
#include <thread>

#include "core/error.h"
#include "server/api_error.h"
#include "server/audio_budget.h"
#include "server/auth.h"
#include "server/routes.h"

namespace {

using namespace parlance::server;

TEST(Auth, ConstantTimeEqualIsEquality) {
    EXPECT_TRUE(constant_time_equal("", ""));
    EXPECT_TRUE(constant_time_equal("sesame", "sesame"));
    EXPECT_FALSE(constant_time_equal("sesame", "sesamf"));
    EXPECT_FALSE(constant_time_equal("sesame", "sesam"));
    EXPECT_FALSE(constant_time_equal("sesam", "sesame"));
    EXPECT_FALSE(constant_time_equal(std::string("a\0b", 3), "a"));
    EXPECT_TRUE(bearer_matches("Bearer sesame", "sesame"));
    EXPECT_TRUE(bearer_matches("bearer sesame", "sesame"));  // the scheme is case-insensitive
    EXPECT_FALSE(bearer_matches("Bearer sesame2", "sesame"));
    EXPECT_FALSE(bearer_matches("Basic sesame", "sesame"));
    EXPECT_FALSE(bearer_matches("", "sesame"));
}

TEST(ApiErrorQuote, CutsLongValuesAtACharacterBoundary) {
    EXPECT_EQ(ApiError::quote("en"), "'en'");
    const std::string q = ApiError::quote(std::string(5000, 'x'));
    EXPECT_EQ(q, "'" + std::string(100, 'x') + "...' (5000 bytes)");
    // 'é' is two bytes: a cut after 99 ASCII bytes must not split it.
    const std::string mixed = std::string(99, 'a') + "\xC3\xA9" + std::string(50, 'b');
    const std::string m = ApiError::quote(mixed);
    EXPECT_EQ(m.substr(0, 103), "'" + std::string(99, 'a') + "...");
    EXPECT_EQ(m.find('\xC3'), std::string::npos);
    // However a handler built it, the body stays short.
    ApiError e(400, std::string(1 << 20, 'm'), std::string(1 << 20, 'p'));
    EXPECT_LT(e.body().size(), 1300u);
    EXPECT_FALSE(nlohmann::json::parse(e.body()).is_discarded());
}

TEST(Routes, UnknownPathsShareOneLabel) {
    EXPECT_EQ(find_route("/v1/audio/transcriptions", false).label, "/v1/audio/transcriptions");
    EXPECT_EQ(find_route("/v1/models/whisper", false).label, "/v1/models/{id}");
    EXPECT_EQ(find_route("/v1/models/a/b", false).label, "other");
    EXPECT_EQ(find_route("/v1/zzz", false).label, "other");
    EXPECT_TRUE(find_route("/v1/zzz", false).needs_key);
    EXPECT_FALSE(find_route("/zzz", false).needs_key);
    EXPECT_TRUE(find_route("/metrics", false).needs_key);
    EXPECT_FALSE(find_route("/metrics", true).needs_key);
    EXPECT_FALSE(find_route("/health", false).needs_key);
    EXPECT_FALSE(find_route("/", false).needs_key);
}

// Until `budget` has `n` waiters (a waiter is counted once it blocks): no fixed sleep.
void until_waiting(const AudioBudget& budget, int n) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (budget.waiting() < n && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
    ASSERT_EQ(budget.waiting(), n);
}

TEST(AudioBudget, LeasesWaitForRoomAndComeBack) {
    AudioBudget budget(100);
    auto a = budget.acquire(60, nullptr);
    EXPECT_EQ(budget.used(), 60u);
    // A second lease that does not fit waits until the first is returned.
    auto waiter = std::async(std::launch::async, [&] { return budget.acquire(50, nullptr).bytes(); });
    until_waiting(budget, 1);
    EXPECT_EQ(waiter.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
    a.release();
    EXPECT_EQ(waiter.get(), 50u);
    EXPECT_EQ(budget.used(), 0u);  // the waiter's lease died with its task
    EXPECT_THROW(budget.acquire(101, nullptr), parlance::Error);
}

TEST(AudioBudget, AWaitEndsOnCancellationAndResizeTimesOut) {
    AudioBudget budget(100);
    auto a = budget.acquire(90, nullptr);
    std::atomic<bool> cancelled{false};
    auto waiter = std::async(std::launch::async, [&] { budget.acquire(20, &cancelled); });
    until_waiting(budget, 1);
    cancelled = true;
    try {
        waiter.get();
        ADD_FAILURE() << "the wait did not end";
    } catch (const parlance::Error& e) {
        EXPECT_EQ(e.kind(), parlance::ErrorKind::Cancelled);
    }
    EXPECT_FALSE(a.resize(120, nullptr, std::chrono::milliseconds(50)));
    EXPECT_EQ(a.bytes(), 90u);
    EXPECT_TRUE(a.resize(40, nullptr, std::chrono::milliseconds(0)));
    EXPECT_EQ(budget.used(), 40u);
}

}  // namespace
