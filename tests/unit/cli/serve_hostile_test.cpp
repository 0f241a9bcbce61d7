// Issue 50's adversarial campaign replayed against a real server under a memory watchdog
// (tests/hostile/hostile_client.py): schema bombs, 50,000-deep JSON on every JSON route, a huge
// enum, 200 concurrent WebSocket opens against --max-sessions, live-session values that wrapped or
// had the wrong type, an unknown ?model=, a 30 MB Anthropic body, count_tokens past the context.
// The server must stay up, its RSS within 200 MB of idle, every answer a 4xx in its route's shape.
#include <gtest/gtest.h>

#include "qwen3_fixture.h"
#include "serve_fixture.h"
#include "test_support.h"

namespace parlance::testing {
namespace {

TEST(ServeHostile, TheCampaignLeavesTheServerUpAndItsMemoryFlat) {
    TempDir dir;
    const auto model = write_qwen3("tiny", dir.path() / "qwen3");
    Server s("--chat-model " + quoted(model.string()) + " --chat-model-id qwen3-tiny --max-sessions 16 --api-key k");
    ASSERT_GT(s.port(), 0) << s.read_log();
    const auto script = fixtures_dir().parent_path() / "hostile" / "hostile_client.py";
    std::string out;
    const int rc = run_command("timeout 600 python3 " + quoted(script.string()) + " --port " +
                                   std::to_string(s.port()) + " --pid " + std::to_string(s.pid()) +
                                   " --api-key k --max-sessions 16 --chat-model qwen3-tiny 2>&1",
                               &out);
    EXPECT_EQ(rc, 0) << out << "\n--- server log:\n" << s.read_log().substr(0, 20000);
    EXPECT_NE(out.find("checks passed"), std::string::npos) << out;
}

}  // namespace
}  // namespace parlance::testing
