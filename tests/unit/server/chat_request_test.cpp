// Chat request validation: every invalid body is a 400 naming its field, before any engine work.
#include <gtest/gtest.h>

#include <string>

#include "server/api_error.h"
#include "server/chat_request.h"

namespace parlance::server {
namespace {

// The param of the 400 a body draws ("" when it is accepted).
std::string refused(const std::string& body) {
    try {
        parse_chat_request(body);
        return "";
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status, 400) << body;
        return e.param.empty() ? "(none)" : e.param;
    }
}

const std::string kUser = R"("messages": [{"role": "user", "content": "hi"}])";

TEST(ChatRequest, AcceptsTheFullShape) {
    ChatRequest r = parse_chat_request(R"({"model": "m", "messages": [
        {"role": "developer", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "f", "arguments": "{\"x\": 1}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "42"}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
      "tool_choice": {"type": "function", "function": {"name": "f"}},
      "stream": true, "stream_options": {"include_usage": true}, "max_completion_tokens": 9,
      "temperature": 0.5, "top_p": 0.9, "top_k": 20, "min_p": 0.05, "presence_penalty": 0.5,
      "frequency_penalty": -0.5, "repetition_penalty": 1.1, "seed": 7, "stop": ["x", "yy"], "n": 3,
      "logprobs": true, "top_logprobs": 5, "return_tokens_as_token_ids": true, "min_tokens": 2,
      "ignore_eos": false, "reasoning_effort": "none", "response_format": {"type": "text"}, "user": "u"})");
    EXPECT_EQ(r.messages[0]["role"], "system");  // developer -> system for the template
    EXPECT_EQ(r.messages[1]["content"], "ab");
    EXPECT_EQ(r.messages[2]["tool_calls"][0]["function"]["arguments"]["x"], 1);  // parsed for tojson
    EXPECT_EQ(r.tool_choice, "function");
    EXPECT_EQ(r.forced_function, "f");
    EXPECT_TRUE(r.include_usage);
    EXPECT_EQ(*r.max_tokens, 9);
    EXPECT_EQ(r.n, 3);
    EXPECT_EQ(r.sampling.stop.size(), 2u);
    EXPECT_EQ(*r.sampling.seed, 7u);
    EXPECT_EQ(r.template_kwargs["enable_thinking"], false);
}

// OpenAI's service_tier picks the scheduling class: "flex" queues as bulk work behind
// interactive requests; "auto", "default" and "priority" are interactive; others are refused.
TEST(ChatRequest, ServiceTierIsTheSchedulingClass) {
    auto tier = [](const std::string& t) {
        return parse_chat_request(R"({"model": "m", )" + kUser + R"(, "service_tier": ")" + t + R"("})")
            .sampling.priority;
    };
    EXPECT_EQ(parse_chat_request(R"({"model": "m", )" + kUser + "}").sampling.priority, Priority::Interactive);
    EXPECT_EQ(tier("flex"), Priority::Bulk);
    for (const char* t : {"auto", "default", "priority"}) EXPECT_EQ(tier(t), Priority::Interactive) << t;
    EXPECT_EQ(refused(R"({"model": "m", )" + kUser + R"(, "service_tier": "scale"})"), "service_tier");
    EXPECT_EQ(refused(R"({"model": "m", )" + kUser + R"(, "service_tier": 1})"), "service_tier");
}

TEST(ChatRequest, RefusalsNameTheField) {
    EXPECT_EQ(refused("not json"), "(none)");
    EXPECT_EQ(refused(R"({"messages": []})"), "model");
    EXPECT_EQ(refused(R"({"model": "m"})"), "messages");
    EXPECT_EQ(refused(R"({"model": "m", "messages": []})"), "messages");
    EXPECT_EQ(refused(R"({"model": "m", "messages": [{"role": "wizard", "content": "x"}]})"), "messages[0].role");
    EXPECT_EQ(refused(R"({"model": "m", "messages": [{"role": "user", "content": 3}]})"), "messages[0].content");
    EXPECT_EQ(refused(R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]})"),
              "messages[0].content[0].type");
    EXPECT_EQ(refused(R"({"model": "m", "messages": [{"role": "tool", "content": "x"}]})"), "messages[0].tool_call_id");
    EXPECT_EQ(refused(R"({"model": "m", "messages": [{"role": "assistant", "tool_calls": [{"function":
        {"name": "f", "arguments": "{broken"}}]}]})"),
              "messages[0].tool_calls[0].function.arguments");
    EXPECT_EQ(refused(R"({"model": "m", "messages": [{"role": "user", "content": "x", "colour": 1}]})"),
              "messages[0].colour");
    EXPECT_EQ(refused("{\"model\": \"m\", " + kUser + ", \"frobnicate\": 1}"), "frobnicate");
    EXPECT_EQ(refused("{\"model\": \"m\", " + kUser + ", \"temperature\": 3}"), "temperature");
    EXPECT_EQ(refused("{\"model\": \"m\", " + kUser + ", \"temperature\": \"hot\"}"), "temperature");
    EXPECT_EQ(refused("{\"model\": \"m\", " + kUser + ", \"top_p\": 0}"), "top_p");
    EXPECT_EQ(refused("{\"model\": \"m\", " + kUser + ", \"n\": 9}"), "n");
    EXPECT_EQ(refused("{\"model\": \"m\", " + kUser + ", \"max_tokens\": 0}"), "max_tokens");
    EXPECT_EQ(refused("{\"model\": \"m\", " + kUser + ", \"max_tokens\": 5, \"max_completion_tokens\": 6}"),
              "max_tokens");
    EXPECT_EQ(refused("{\"model\": \"m\", " + kUser + ", \"max_tokens\": 5, \"min_tokens\": 6}"), "min_tokens");
    EXPECT_EQ(refused("{\"model\": \"m\", " + kUser + ", \"top_logprobs\": 3}"), "top_logprobs");
    EXPECT_EQ(refused("{\"model\": \"m\", " + kUser + ", \"logprobs\": true, \"top_logprobs\": 21}"), "top_logprobs");
    EXPECT_EQ(refused("{\"model\": \"m\", " + kUser + ", \"stop\": [\"\"]}"), "stop");
    EXPECT_EQ(refused("{\"model\": \"m\", " + kUser + ", \"stop\": 5}"), "stop");
    EXPECT_EQ(refused("{\"model\": \"m\", " + kUser + ", \"stream_options\": {\"include_usage\": true}}"),
              "stream_options");
    EXPECT_EQ(refused("{\"model\": \"m\", " + kUser + ", \"tool_choice\": \"required\"}"), "tool_choice");
    EXPECT_EQ(refused("{\"model\": \"m\", " + kUser +
                      ", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}], \"tool_choice\": "
                      "{\"type\": \"function\", \"function\": {\"name\": \"g\"}}}"),
              "tool_choice");
    EXPECT_EQ(refused("{\"model\": \"m\", " + kUser +
                      ", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}, {\"type\": "
                      "\"function\", \"function\": {\"name\": \"f\"}}]}"),
              "tools[1].function.name");
    EXPECT_EQ(refused("{\"model\": \"m\", " + kUser + ", \"response_format\": {\"type\": \"xml\"}}"),
              "response_format.type");
    EXPECT_EQ(refused("{\"model\": \"m\", " + kUser + ", \"response_format\": {\"type\": \"json_schema\"}}"),
              "response_format.json_schema");
    EXPECT_EQ(refused("{\"model\": \"m\", " + kUser +
                      ", \"response_format\": {\"type\": \"json_object\", \"json_schema\": {}}}"),
              "response_format.json_schema");
    EXPECT_EQ(refused("{\"model\": \"m\", " + kUser +
                      ", \"ignore_eos\": true, \"response_format\": {\"type\": \"json_object\"}}"),
              "ignore_eos");
    EXPECT_EQ(refused("{\"model\": \"m\", " + kUser +
                      ", \"reasoning_effort\": \"high\", \"chat_template_kwargs\": {\"enable_thinking\": false}}"),
              "reasoning_effort");
    EXPECT_EQ(refused("{\"model\": \"m\", " + kUser + ", \"chat_template_kwargs\": {\"messages\": []}}"),
              "chat_template_kwargs.messages");
    EXPECT_EQ(refused("{\"model\": \"m\", " + kUser + "}"), "");
}

}  // namespace
}  // namespace parlance::server
