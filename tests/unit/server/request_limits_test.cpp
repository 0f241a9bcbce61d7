// What one authenticated request could do to the whole server (issue 50), refused at the parser:
// JSON nested past the limit on every route (the stack overflowed at ~50,000 levels), integers
// past int64 that wrapped, live-session settings that wrapped at 32 bits or were accepted with
// the wrong type, error messages that stopped at a NUL, and concurrent session opens that got
// past --max-sessions.
#include <gtest/gtest.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "server/anthropic_messages.h"
#include "server/api_error.h"
#include "server/chat_request.h"
#include "server/realtime_protocol.h"
#include "server/responses_api.h"
#include "server/session_slots.h"
#include "server/text_completion.h"
#include "text/json_depth.h"

namespace parlance::server {
namespace {

using nlohmann::json;

std::string nested(int depth, const std::string& inner = "") {
    return std::string(static_cast<size_t>(depth), '[') + inner + std::string(static_cast<size_t>(depth), ']');
}

// The ApiError a parser throws for `body` (its code, "" when it parses).
template <typename Parse>
std::string code_of(Parse parse, const std::string& body) {
    try {
        parse(body);
        return "";
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status, 400);
        return e.code;
    }
}

TEST(JsonDepth, CountsBracketsOutsideStrings) {
    EXPECT_EQ(json_depth("{}"), 1);
    EXPECT_EQ(json_depth(R"({"a": [1, {"b": [[]]}]})"), 5);
    EXPECT_EQ(json_depth(R"({"a": "[[[[[[", "b": "\"[[[["})"), 1);
    EXPECT_EQ(json_depth(R"(["\\", [[]]])"), 3);  // an escaped backslash ends before the quote
    EXPECT_EQ(json_depth("12"), 0);
    // A hostile text is scanned only until it passes the limit.
    EXPECT_EQ(json_depth(nested(50000), 64), 65);
    EXPECT_TRUE(json_within_depth(nested(kMaxJsonDepth)));
    EXPECT_FALSE(json_within_depth(nested(kMaxJsonDepth + 1)));
}

TEST(RequestLimits, JsonNestedPastTheLimitIsA400OnEveryRoute) {
    const ResponseStore store(4);
    for (const int depth : {10 * kMaxJsonDepth, 50000}) {
        const std::string deep = nested(depth);
        const std::string user = R"("messages": [{"role": "user", "content": "hi"}])";
        // tools[].function.parameters, an extra field of a message, response_format's schema
        EXPECT_EQ(code_of(parse_chat_request, R"({"model": "m", )" + user +
                                                  R"(, "tools": [{"type": "function", "function": {"name": "f",
                                                  "parameters": {"type": "object", "x": )" +
                                                  deep + "}}}]}"),
                  "json_too_deep");
        EXPECT_EQ(code_of(parse_chat_request,
                          R"({"model": "m", "messages": [{"role": "user", "content": "hi", "x": )" + deep + "}]}"),
                  "json_too_deep");
        EXPECT_EQ(code_of(parse_chat_request, R"({"model": "m", )" + user +
                                                  R"(, "response_format": {"type": "json_schema", "json_schema":
                                                  {"name": "s", "schema": )" +
                                                  deep + "}}}"),
                  "json_too_deep");
        EXPECT_EQ(code_of(parse_completion_request, R"({"model": "m", "prompt": )" + deep + "}"), "json_too_deep");
        const std::string anthropic =
            R"({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}], "tools": [{"name": "f",
            "input_schema": )" +
            deep + "}]}";
        EXPECT_EQ(code_of([](const std::string& b) { return parse_messages_request(b); }, anthropic), "json_too_deep");
        EXPECT_EQ(code_of([](const std::string& b) { return parse_messages_request(b, true); }, anthropic),
                  "json_too_deep");
        EXPECT_EQ(
            code_of([&](const std::string& b) { return parse_responses_request(b, store); },
                    R"({"model": "m", "input": "hi", "tools": [{"type": "function", "name": "f", "parameters": )" +
                        deep + "}]}"),
            "json_too_deep");
        // Inside a JSON string: a tool call's arguments, parsed by the server.
        EXPECT_EQ(code_of(parse_chat_request,
                          R"({"model": "m", "messages": [{"role": "assistant", "tool_calls": [{"function":
                          {"name": "f", "arguments": ")" +
                              nested(depth, "") + R"("}}]}]})"),
                  "json_too_deep");
    }
    // A real schema's depth parses.
    EXPECT_EQ(code_of(parse_chat_request, R"({"model": "m", "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties":
        {"a": {"type": "array", "items": {"type": "object", "properties": {"b": {"type": "string"}}}}}}}}]})"),
              "");
}

TEST(RequestLimits, IntegersPastInt64AreOutOfRangeNotWrapped) {
    // 2^64 - 1 read as int64 was -1: top_k's "all".
    EXPECT_EQ(code_of(parse_chat_request, R"({"model": "m", "messages": [{"role": "user", "content": "hi"}],
        "top_k": 18446744073709551615})"),
              "invalid_value");
    EXPECT_EQ(code_of(parse_chat_request, R"({"model": "m", "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 4294967297})"),
              "invalid_value");
}

TEST(ApiErrorQuote, ControlBytesAreEscapedAndNothingStopsAtANul) {
    EXPECT_EQ(ApiError::quote(std::string("e\0n\n", 4)), "'e\\x00n\\x0a'");
    try {
        ApiError::check_language_text(std::string("e\0n", 3), "language");
        FAIL() << "accepted";
    } catch (const ApiError& e) {
        EXPECT_EQ(e.code, "unsupported_language");
        EXPECT_NE(std::string(e.what()).find("'e\\x00n'"), std::string::npos) << e.what();
    }
    EXPECT_NO_THROW(ApiError::check_language_text("en", "language"));
    EXPECT_NO_THROW(ApiError::check_language_text("", "language"));
}

TEST(SessionSlots, ConcurrentClaimsNeverPassTheLimit) {
    SessionSlots slots(64);
    std::vector<std::shared_ptr<SessionSlots::Slot>> held[16];
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (auto& mine : held)
        threads.emplace_back([&] {
            while (!go.load()) {
            }
            for (int i = 0; i < 50; ++i)
                if (auto s = slots.try_take()) mine.push_back(std::move(s));
        });
    go = true;
    for (auto& t : threads) t.join();
    size_t taken = 0;
    for (const auto& mine : held) taken += mine.size();
    EXPECT_EQ(taken, 64u);
    EXPECT_EQ(slots.taken(), 64);
    EXPECT_EQ(slots.try_take(), nullptr);
    size_t first = 0;
    for (const auto& mine : held)
        if (!mine.empty()) {
            first = static_cast<size_t>(&mine - held);
            break;
        }
    const int given_back = static_cast<int>(held[first].size());
    held[first].clear();  // a connection goes: its slots come back
    EXPECT_EQ(slots.taken(), 64 - given_back);
    EXPECT_NE(slots.try_take(), nullptr);
}

// --- Live sessions' session.update, checked as strictly as the HTTP routes.

SessionUpdateContext context() {
    SessionUpdateContext c;
    c.model_id = "tiny";
    c.has_vad = true;
    c.check_language = [](const std::string& l) {
        if (!l.empty() && l != "en") throw Error(ErrorKind::InvalidArgument, "unknown language '" + l + "'");
    };
    return c;
}

// The update's error (code and param), or the settings it gives.
std::pair<std::string, std::string> refusal(const json& session, bool beta = false) {
    try {
        parse_session_update({{"type", "session.update"}, {"session", session}}, beta, RealtimeSettings{}, context());
        return {"", ""};
    } catch (const RealtimeEventError& e) {
        return {e.code, e.param};
    }
}

json turn_detection(const json& td) {
    return {{"audio", {{"input", {{"turn_detection", td}}}}}};
}

TEST(RealtimeProtocol, DurationsAreCheckedInTheirFullRange) {
    const std::string p = "session.audio.input.turn_detection.silence_duration_ms";
    for (const json& v : {json(4294967296ULL + 700), json(2147483648LL), json(1000000000000000000LL),
                          json(18446744073709551615ULL), json(-1), json(10001)})
        EXPECT_EQ(refusal(turn_detection({{"type", "server_vad"}, {"silence_duration_ms", v}})),
                  std::make_pair(std::string("invalid_value"), p))
            << v;
    EXPECT_EQ(refusal(turn_detection({{"type", "server_vad"}, {"silence_duration_ms", 500.5}})).first, "invalid_type");
    EXPECT_EQ(refusal(turn_detection({{"type", "server_vad"}, {"prefix_padding_ms", 4294967296ULL}})).first,
              "invalid_value");
    const RealtimeSettings s = parse_session_update(
        {{"session",
          turn_detection(
              {{"type", "server_vad"}, {"silence_duration_ms", 700}, {"prefix_padding_ms", 100}, {"threshold", 0.3}})}},
        false, RealtimeSettings{}, context());
    EXPECT_EQ(s.silence_duration_ms, 700);
    EXPECT_EQ(s.prefix_padding_ms, 100);
    EXPECT_FLOAT_EQ(s.threshold, 0.3f);
    EXPECT_TRUE(s.server_vad);
}

TEST(RealtimeProtocol, ValuesOfTheWrongKindAreRefused) {
    EXPECT_EQ(refusal(turn_detection("yes")).first, "invalid_type");
    EXPECT_EQ(
        refusal(turn_detection({{"type", "semantic_vad"}, {"eagerness", "x"}})),
        std::make_pair(std::string("invalid_value"), std::string("session.audio.input.turn_detection.eagerness")));
    EXPECT_EQ(refusal(turn_detection({{"type", 3}})).first, "invalid_type");
    EXPECT_EQ(refusal(turn_detection({{"threshold", "high"}})).first, "invalid_type");
    EXPECT_EQ(refusal(turn_detection({{"threshold", 1.5}})).first, "invalid_value");
    EXPECT_EQ(refusal({{"audio", "pcm"}}).first, "invalid_type");
    EXPECT_EQ(refusal({{"include", "x"}}).first, "invalid_type");
    EXPECT_EQ(refusal({{"audio", {{"input", {{"format", {{"type", "audio/pcm"}, {"rate", 4294983296ULL}}}}}}}}).first,
              "invalid_value");
    EXPECT_EQ(refusal({{"input_audio_transcription", "whisper"}}, true).first, "invalid_type");
    EXPECT_EQ(refusal({{"turn_detection", "yes"}}, true).first, "invalid_type");
    // semantic_vad's eagerness picks the wait; turn_detection null turns detection off.
    const RealtimeSettings s = parse_session_update(
        {{"session", turn_detection({{"type", "semantic_vad"}, {"eagerness", "low"}})}}, false, {}, context());
    EXPECT_EQ(s.silence_duration_ms, 8000);
    EXPECT_FALSE(parse_session_update({{"session", turn_detection(nullptr)}}, false, {}, context()).server_vad);
}

TEST(RealtimeProtocol, LanguagesAndModelsAreCheckedAndQuotedSafely) {
    const json nul = {{"audio", {{"input", {{"transcription", {{"language", std::string("e\0n", 3)}}}}}}}};
    try {
        parse_session_update({{"session", nul}}, false, {}, context());
        FAIL() << "accepted";
    } catch (const RealtimeEventError& e) {
        EXPECT_EQ(e.code, "unsupported_language");
        EXPECT_NE(std::string(e.what()).find("'e\\x00n'"), std::string::npos) << e.what();
    }
    EXPECT_EQ(refusal({{"audio", {{"input", {{"transcription", {{"language", "xx"}}}}}}}}).first,
              "unsupported_language");
    EXPECT_EQ(refusal({{"audio", {{"input", {{"transcription", {{"model", "other"}}}}}}}}).first, "model_not_found");
    EXPECT_EQ(
        refusal({{"audio", {{"input", {{"transcription", {{"model", "whisper-1"}, {"language", "en"}}}}}}}}).first, "");
    EXPECT_TRUE(is_realtime_model_alias("gpt-realtime"));
    EXPECT_TRUE(is_realtime_model_alias("gpt-4o-realtime-preview-2025-06-03"));
    EXPECT_TRUE(is_realtime_model_alias("gpt-4o-transcribe"));
    EXPECT_FALSE(is_realtime_model_alias("nonesuch"));
}

TEST(RealtimeProtocol, EventsNestedPastTheLimitAreRefused) {
    for (const int depth : {10 * kMaxJsonDepth, 50000}) {
        try {
            parse_client_event(R"({"type": "session.update", "session": )" + nested(depth) + "}");
            FAIL() << depth;
        } catch (const RealtimeEventError& e) {
            EXPECT_EQ(e.code, "json_too_deep");
        }
    }
    EXPECT_EQ(parse_client_event(R"({"type": "input_audio_buffer.clear"})")["type"], "input_audio_buffer.clear");
}

}  // namespace
}  // namespace parlance::server
