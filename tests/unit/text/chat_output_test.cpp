// Stop strings and the chat output parser over text cut at every possible place: what comes out
// must not depend on how the model's tokens split the text.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "text/chat_output.h"
#include "text/stop_strings.h"

namespace parlance {
namespace {

// Feeds `text` to a StopStrings in pieces of `step` bytes; returns everything shown.
std::string stop_run(const std::vector<std::string>& stops, const std::string& text, size_t step, bool* matched) {
    StopStrings s(stops);
    std::string out;
    for (size_t i = 0; i < text.size(); i += step) out += s.push(text.substr(i, step));
    out += s.flush();
    *matched = s.matched();
    return out;
}

TEST(StopStrings, NeverEmittedWhateverTheSplit) {
    for (size_t step = 1; step <= 9; ++step) {
        bool m = false;
        EXPECT_EQ(stop_run({"END"}, "hello ENDworld", step, &m), "hello ") << step;
        EXPECT_TRUE(m);
        EXPECT_EQ(stop_run({"END", "lo E"}, "hello ENDworld", step, &m), "hel") << step;  // the earliest wins
        EXPECT_EQ(stop_run({"xyz"}, "hello ENDworld", step, &m), "hello ENDworld") << step;
        EXPECT_FALSE(m);
        // A tail that looks like a stop string's start is released when it turns out not to be.
        EXPECT_EQ(stop_run({"ENDX"}, "an END", step, &m), "an END") << step;
        EXPECT_EQ(stop_run({"\n\n"}, "line one\nline two\n\nthree", step, &m), "line one\nline two") << step;
    }
}

TEST(StopStrings, HoldsBackOnlyAPossibleStart) {
    StopStrings s({"</stop>"});
    EXPECT_EQ(s.push("abc</st"), "abc");
    EXPECT_EQ(s.push("x"), "</stx");
    EXPECT_EQ(s.push("</stop>tail"), "");
    EXPECT_TRUE(s.matched());
    EXPECT_EQ(s.which(), "</stop>");
    EXPECT_EQ(s.push("more"), "");
    EXPECT_EQ(s.flush(), "");
}

ChatOutputDelta run(ChatOutputOptions o, const std::string& text, size_t step, ChatOutputParser** keep = nullptr) {
    static std::unique_ptr<ChatOutputParser> last;
    last = std::make_unique<ChatOutputParser>(o);
    ChatOutputDelta all;
    auto add = [&](ChatOutputDelta d) {
        all.reasoning += d.reasoning;
        all.content += d.content;
        for (auto& c : d.tool_calls) all.tool_calls.push_back(c);
    };
    for (size_t i = 0; i < text.size(); i += step) add(last->push(text.substr(i, step)));
    add(last->finish());
    if (keep) *keep = last.get();
    return all;
}

TEST(ChatOutput, ReasoningAndContent) {
    for (size_t step = 1; step <= 12; ++step) {
        ChatOutputDelta d = run({}, "<think>\nLet me see.\n</think>\n\nThe answer is 4.", step);
        EXPECT_EQ(d.reasoning, "\nLet me see.\n") << step;
        EXPECT_EQ(d.content, "The answer is 4.") << step;
        d = run({}, "Plain answer, no <think> here.", step);
        EXPECT_EQ(d.reasoning, "");
        EXPECT_EQ(d.content, "Plain answer, no <think> here.") << step;
        ChatOutputOptions in;
        in.starts_in_reasoning = true;  // the prompt opened <think>
        d = run(in, "thinking</think>done", step);
        EXPECT_EQ(d.reasoning, "thinking");
        EXPECT_EQ(d.content, "done") << step;
        ChatOutputOptions off;
        off.reasoning = false;
        d = run(off, "<think>x</think>y", step);
        EXPECT_EQ(d.content, "<think>x</think>y") << step;
    }
    // Reasoning cut by max_tokens stays reasoning.
    EXPECT_EQ(run({}, "<think>unfinished", 3).reasoning, "unfinished");
}

TEST(ChatOutput, ToolCalls) {
    ChatOutputOptions o;
    o.tool_calls = true;
    const std::string text =
        "<think>\nweather needed\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
        "\"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
    for (size_t step = 1; step <= 13; ++step) {
        ChatOutputParser* p = nullptr;
        ChatOutputDelta d = run(o, text, step, &p);
        ASSERT_EQ(d.tool_calls.size(), 2u) << step;
        EXPECT_EQ(d.tool_calls[0].name, "get_weather");
        EXPECT_EQ(d.tool_calls[0].arguments, "{\"city\":\"Paris\"}");
        EXPECT_EQ(d.tool_calls[1].name, "get_time");
        EXPECT_EQ(d.tool_calls[1].arguments, "{}");
        EXPECT_EQ(d.reasoning, "\nweather needed\n");
        EXPECT_EQ(d.content.find_first_not_of(" \n"), std::string::npos) << "[" << d.content << "]";
        EXPECT_EQ(p->malformed_tool_calls(), 0);
    }
    // Content before a call is content.
    ChatOutputDelta d = run(o, "Let me check.<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</tool_call>", 4);
    EXPECT_EQ(d.content, "Let me check.");
    ASSERT_EQ(d.tool_calls.size(), 1u);
    // Without tools the tags are text.
    d = run({}, "<tool_call>{\"name\": \"f\"}</tool_call>", 2);
    EXPECT_EQ(d.content, "<tool_call>{\"name\": \"f\"}</tool_call>");
    EXPECT_TRUE(d.tool_calls.empty());
}

TEST(ChatOutput, MalformedCallsAreReportedNeverInvented) {
    ChatOutputOptions o;
    o.tool_calls = true;
    for (const std::string body :
         {"{\"name\": 3}", "not json", "{\"arguments\": {}}", "{\"name\": \"f\", \"arguments\": [1]}"}) {
        ChatOutputParser* p = nullptr;
        ChatOutputDelta d = run(o, "<tool_call>" + body + "</tool_call>", 3, &p);
        EXPECT_TRUE(d.tool_calls.empty()) << body;
        EXPECT_EQ(d.content, "<tool_call>" + body + "</tool_call>");
        EXPECT_EQ(p->malformed_tool_calls(), 1);
    }
    // Cut off mid-call (max_tokens): the text is content, not a call.
    ChatOutputParser* p = nullptr;
    ChatOutputDelta d = run(o, "<tool_call>{\"name\": \"f\", \"argu", 5, &p);
    EXPECT_TRUE(d.tool_calls.empty());
    EXPECT_EQ(d.content, "<tool_call>{\"name\": \"f\", \"argu");
    EXPECT_EQ(p->malformed_tool_calls(), 1);
    // Arguments as a JSON string (some models write them so) are accepted when they hold an object.
    d = run(o, "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 2}\"}</tool_call>", 1);
    ASSERT_EQ(d.tool_calls.size(), 1u);
    EXPECT_EQ(d.tool_calls[0].arguments, "{\"a\":2}");
    // A forced call (tool_choice named): the prompt opened the body.
    ChatOutputOptions f = o;
    f.forced_call = "\n{\"name\": \"f\", \"arguments\": ";
    d = run(f, "{\"x\": true}}\n</tool_call>", 2);
    ASSERT_EQ(d.tool_calls.size(), 1u);
    EXPECT_EQ(d.tool_calls[0].name, "f");
    EXPECT_EQ(d.tool_calls[0].arguments, "{\"x\":true}");
}

}  // namespace
}  // namespace parlance
