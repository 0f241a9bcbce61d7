// POST /v1/chat/completions against a real `parlance serve --chat-model` on the tiny random
// Qwen3 (tests/fixtures/qwen3/tiny, its weights written by the tests) with the real Qwen3
// tokenizer and chat template: transformers' greedy ids and top-5 log-probabilities for rendered
// chats (tools/reference/chat_reference.py), streaming, n choices, seeds, stop strings, the
// prefix cache, tool_choice, errors and disconnects.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>

#include "qwen3_fixture.h"
#include "serve_fixture.h"
#include "test_support.h"

namespace parlance::testing {
namespace {

using json = nlohmann::ordered_json;  // key order matters: templates serialise tools with tojson

class Chat : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new TempDir();
        const auto model = write_qwen3("tiny", dir_->path() / "qwen3");
        server_ = new Server("--chat-model " + quoted(model.string()) + " --chat-model-id qwen3-tiny");
        std::ifstream in(fixtures_dir() / "chat" / "qwen3_chat.json");
        ref_ = new json(json::parse(in));
    }
    static void TearDownTestSuite() {
        delete server_;
        delete dir_;
        delete ref_;
    }

    // POSTs a JSON body; returns the status and the body as it came.
    static std::pair<int, std::string> post_raw(const json& body, const std::string& extra = "",
                                                const std::string& path = "/v1/chat/completions") {
        static std::atomic<int> n{0};
        const auto file = dir_->path() / ("body" + std::to_string(++n) + ".json");
        std::ofstream(file) << body.dump();
        const std::string out =
            Server::curl("-s -N -o - -w '\\n%{http_code}' -H 'Content-Type: application/json' " + extra +
                         " --data-binary @" + quoted(file.string()) + " " + server_->url(path));
        const size_t nl = out.rfind('\n');
        return {std::stoi(out.substr(nl + 1)), out.substr(0, nl)};
    }
    static std::pair<int, json> post(const json& body, const std::string& path = "/v1/chat/completions") {
        auto [status, text] = post_raw(body, "", path);
        return {status, json::parse(text, nullptr, false)};
    }
    // An SSE stream's (event name, data) pairs.
    static std::vector<std::pair<std::string, json>> typed_stream(const json& body, const std::string& path) {
        auto [status, text] = post_raw(body, "", path);
        EXPECT_EQ(status, 200) << text;
        std::vector<std::pair<std::string, json>> out;
        std::string name;
        size_t pos = 0;
        while (pos < text.size()) {
            size_t end = text.find('\n', pos);
            if (end == std::string::npos) end = text.size();
            const std::string line = text.substr(pos, end - pos);
            pos = end + 1;
            if (line.rfind("event: ", 0) == 0) name = line.substr(7);
            if (line.rfind("data: ", 0) == 0) out.emplace_back(name, json::parse(line.substr(6), nullptr, false));
        }
        return out;
    }
    // The stream's events, [DONE] excluded (asserted last).
    static std::vector<json> stream(json body) {
        body["stream"] = true;
        auto [status, text] = post_raw(body);
        EXPECT_EQ(status, 200) << text;
        std::vector<json> events;
        size_t pos = 0;
        bool done = false;
        while ((pos = text.find("data: ", pos)) != std::string::npos) {
            const size_t end = text.find("\n\n", pos);
            const std::string payload = text.substr(pos + 6, end - pos - 6);
            pos = end;
            EXPECT_FALSE(done) << "an event after [DONE]";
            if (payload == "[DONE]") {
                done = true;
                continue;
            }
            events.push_back(json::parse(payload));
        }
        EXPECT_TRUE(done) << text;
        return events;
    }
    static json request(const std::string& case_name) {
        for (const auto& t : (*ref_)["templates"])
            if (t["name"] == case_name) {
                json r{{"model", "qwen3-tiny"}, {"messages", t["messages"]}};
                if (!t["tools"].is_null()) r["tools"] = t["tools"];
                return r;
            }
        ADD_FAILURE() << "no case " << case_name;
        return {};
    }
    static json long_system(const std::string& user) {
        std::string sys = "You are a careful assistant.";
        for (int i = 0; i < 12; ++i) sys += " Always answer in complete sentences and check every fact twice.";
        return {
            {"model", "qwen3-tiny"},
            {"messages", json::array({{{"role", "system"}, {"content", sys}}, {{"role", "user"}, {"content", user}}})}};
    }
    static double metric(const std::string& name) {
        const std::string text = Server::curl("-s " + server_->url("/metrics"));
        const size_t at = text.find("\n" + name + " ");
        if (at == std::string::npos) return -1;
        return std::stod(text.substr(at + name.size() + 2));
    }

    static inline TempDir* dir_ = nullptr;
    static inline Server* server_ = nullptr;
    static inline json* ref_ = nullptr;
};

TEST_F(Chat, GreedyIdsAndLogprobsMatchTransformers) {
    ASSERT_EQ((*ref_)["continuations"].size(), 3u);
    for (const auto& c : (*ref_)["continuations"]) {
        SCOPED_TRACE(c["name"].get<std::string>());
        json r = request(c["template_case"]);
        const int n = c["max_tokens"];
        r.update({{"max_tokens", n},
                  {"min_tokens", n},
                  {"temperature", 0},
                  {"logprobs", true},
                  {"top_logprobs", 5},
                  {"return_tokens_as_token_ids", true}});
        auto [status, body] = post(r);
        ASSERT_EQ(status, 200) << body.dump();
        EXPECT_EQ(body["usage"]["prompt_tokens"], c["prompt_ids"].size());  // the rendered chat's ids
        EXPECT_EQ(body["usage"]["completion_tokens"], n);
        const json& lp = body["choices"][0]["logprobs"]["content"];
        ASSERT_EQ(lp.size(), c["ids"].size());
        double worst = 0;
        for (size_t k = 0; k < lp.size(); ++k) {
            EXPECT_EQ(lp[k]["token"], "token_id:" + std::to_string(c["ids"][k].get<int>())) << "step " << k;
            const json& top = lp[k]["top_logprobs"];
            ASSERT_EQ(top.size(), 5u);
            for (size_t i = 0; i < 5; ++i) {
                const double want = c["top5"][k][i][1];
                // Near-equal alternatives may swap places; compare by rank where they are apart.
                const bool apart = i == 4 || std::abs(want - c["top5"][k][i + 1][1].get<double>()) > 2e-3;
                if (apart && (i == 0 || std::abs(want - c["top5"][k][i - 1][1].get<double>()) > 2e-3)) {
                    EXPECT_EQ(top[i]["token"], "token_id:" + std::to_string(c["top5"][k][i][0].get<int>()));
                }
                worst = std::max(worst, std::abs(top[i]["logprob"].get<double>() - want));
            }
        }
        EXPECT_LT(worst, 1e-3);
        std::cout << "[chat parity] " << c["name"].get<std::string>() << ": " << lp.size()
                  << " greedy ids identical, top-5 logprobs within " << worst << "\n";
    }
}

TEST_F(Chat, StreamCarriesTheSameTextAndUsage) {
    json r = request("system_multi_turn");
    r.update({{"max_tokens", 12}, {"temperature", 0}, {"ignore_eos", true}});
    auto [status, body] = post(r);
    ASSERT_EQ(status, 200);
    const std::string text = body["choices"][0]["message"]["content"];
    r["stream_options"] = {{"include_usage", true}};
    const std::vector<json> events = stream(r);
    ASSERT_GE(events.size(), 3u);
    std::string streamed;
    std::string finish;
    for (size_t i = 0; i + 1 < events.size(); ++i) {
        const json& ch = events[i]["choices"][0];
        EXPECT_EQ(events[i]["object"], "chat.completion.chunk");
        EXPECT_EQ(events[i]["id"], events[0]["id"]);
        if (i == 0) {
            EXPECT_EQ(ch["delta"]["role"], "assistant");
        }
        if (ch["delta"].contains("content")) streamed += ch["delta"]["content"].get<std::string>();
        if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
        EXPECT_TRUE(events[i]["usage"].is_null());
    }
    EXPECT_EQ(streamed, text);
    EXPECT_EQ(finish, "length");
    const json& last = events.back();
    EXPECT_TRUE(last["choices"].empty());
    EXPECT_EQ(last["usage"]["completion_tokens"], 12);
    EXPECT_EQ(last["usage"]["prompt_tokens"], body["usage"]["prompt_tokens"]);
}

TEST_F(Chat, ChoicesShareOnePrefillAndSeedsReproduce) {
    json r = long_system("Tell me a story.");
    r.update({{"max_tokens", 8}, {"temperature", 1.0}, {"seed", 11}, {"n", 3}, {"ignore_eos", true}});
    const double hits_before = metric("parlance_chat_prefix_hit_tokens_total");
    auto [status, a] = post(r);
    ASSERT_EQ(status, 200) << a.dump();
    ASSERT_EQ(a["choices"].size(), 3u);
    EXPECT_EQ(a["usage"]["completion_tokens"], 24);
    // The second and third choices took the first one's prompt blocks from the cache.
    const int prompt = a["usage"]["prompt_tokens"];
    EXPECT_GE(metric("parlance_chat_prefix_hit_tokens_total") - hits_before, 2 * (prompt / 16 * 16 - 16));
    auto [status2, b] = post(r);
    ASSERT_EQ(status2, 200);
    std::set<std::string> distinct;
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(a["choices"][i]["index"], i);
        EXPECT_EQ(a["choices"][i]["message"]["content"], b["choices"][i]["message"]["content"])
            << "seeded: reproducible";
        distinct.insert(a["choices"][i]["message"]["content"].get<std::string>());
    }
    EXPECT_EQ(distinct.size(), 3u) << "each choice samples with its own seed";
    r["seed"] = 12;
    auto [status3, c] = post(r);
    EXPECT_NE(c["choices"][0]["message"]["content"], a["choices"][0]["message"]["content"]);
}

TEST_F(Chat, ConcurrentRequestsEqualAlone) {
    std::vector<json> reqs;
    for (int i = 0; i < 4; ++i) {
        json r = long_system("Question number " + std::to_string(i));
        r.update({{"max_tokens", 10}, {"temperature", 0.8}, {"seed", 100 + i}, {"ignore_eos", true}});
        reqs.push_back(r);
    }
    std::vector<std::string> alone;
    for (const auto& r : reqs) alone.push_back(post(r).second["choices"][0]["message"]["content"]);
    std::vector<std::future<std::pair<int, json>>> futures;
    for (const auto& r : reqs) futures.push_back(std::async(std::launch::async, [r] { return post(r); }));
    for (size_t i = 0; i < reqs.size(); ++i)
        EXPECT_EQ(futures[i].get().second["choices"][0]["message"]["content"], alone[i]);
}

TEST_F(Chat, PrefixCacheHitGivesTheSameOutput) {
    json r = long_system("What is the capital of France?");
    r.update({{"max_tokens", 8}, {"temperature", 0}, {"ignore_eos", true}});
    // A system prompt no other test sends: the first request finds nothing cached.
    r["messages"][0]["content"] = "Prefix test. " + r["messages"][0]["content"].get<std::string>();
    auto [s1, first] = post(r);
    auto [s2, second] = post(r);
    ASSERT_EQ(s1, 200);
    const int prompt = first["usage"]["prompt_tokens"];
    EXPECT_EQ(first["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    EXPECT_GE(second["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), prompt / 16 * 16 - 16);
    EXPECT_EQ(first["choices"][0]["message"]["content"], second["choices"][0]["message"]["content"]);
}

TEST_F(Chat, StopStringsAreNeverEmitted) {
    json r = request("one_user_turn");
    r.update({{"max_tokens", 16}, {"temperature", 0}, {"ignore_eos", true}});
    const std::string full = post(r).second["choices"][0]["message"]["content"];
    ASSERT_GT(full.size(), 12u);
    // Two characters from the middle of the greedy text (cut at UTF-8 boundaries).
    size_t p = full.size() / 2;
    while (p > 0 && (static_cast<unsigned char>(full[p]) & 0xC0) == 0x80) --p;
    size_t e = p + 1;
    for (int chars = 0; e < full.size(); ++e)
        if ((static_cast<unsigned char>(full[e]) & 0xC0) != 0x80 && ++chars == 2) break;
    const std::string stop = full.substr(p, e - p);
    r["stop"] = json::array({stop, "never-appears"});
    auto [status, body] = post(r);
    ASSERT_EQ(status, 200);
    EXPECT_EQ(body["choices"][0]["message"]["content"], full.substr(0, full.find(stop)));
    EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
    std::string streamed;
    for (const json& ev : stream(r))
        for (const json& ch : ev["choices"])
            if (ch["delta"].contains("content")) streamed += ch["delta"]["content"].get<std::string>();
    EXPECT_EQ(streamed, full.substr(0, full.find(stop)));
}

TEST_F(Chat, NamedToolChoiceNeverInventsACall) {
    // The prompt opens the named call; the random model's continuation is not JSON, so there is
    // no tool call: the text comes back as content.
    json r = request("tools");
    r.update({{"max_tokens", 6},
              {"temperature", 0},
              {"ignore_eos", true},
              {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}});
    auto [status, body] = post(r);
    ASSERT_EQ(status, 200) << body.dump();
    const json& m = body["choices"][0]["message"];
    EXPECT_FALSE(m.contains("tool_calls"));
    EXPECT_EQ(m["content"].get<std::string>().rfind("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ", 0), 0u)
        << m.dump();
    EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
}

TEST_F(Chat, ErrorsNameTheField) {
    json r = request("one_user_turn");
    auto expect = [&](const json& body, int status, const std::string& param) {
        auto [s, b] = post(body);
        EXPECT_EQ(s, status) << body.dump() << " -> " << b.dump();
        EXPECT_EQ(b["error"]["param"], param) << b.dump();
    };
    json bad = r;
    bad["model"] = "gpt-4o";
    expect(bad, 404, "model");
    bad = r;
    bad["temperature"] = 9;
    expect(bad, 400, "temperature");
    bad = r;
    bad["frobnicate"] = true;
    expect(bad, 400, "frobnicate");
    bad = r;
    bad["max_tokens"] = 5000;  // the tiny model's context is 4096
    expect(bad, 400, "max_tokens");
    bad = r;
    bad["messages"] =
        json::array({{{"role", "user"}, {"content", std::string(30000, 'a') + " " + std::string(30000, 'b')}}});
    bad["max_tokens"] = 1;
    auto [s, b] = post(bad);  // ~4,000+ tokens of prompt: past the context
    EXPECT_EQ(s, 400) << b.dump();
    EXPECT_EQ(b["error"]["code"], "context_length_exceeded");
    // The models list names both models; GET is not allowed.
    const json models = json::parse(Server::curl("-s " + server_->url("/v1/models")));
    EXPECT_EQ(models["data"].size(), 2u);
    EXPECT_EQ(models["data"][1]["id"], "qwen3-tiny");
    EXPECT_NE(Server::curl("-s " + server_->url("/v1/chat/completions")).find("method_not_allowed"), std::string::npos);
}

TEST_F(Chat, ADisconnectCancels) {
    const double before = metric("parlance_chat_requests_total{outcome=\"cancelled\"}");
    json r = request("one_user_turn");
    r.update({{"max_tokens", 3000}, {"ignore_eos", true}, {"stream", true}});
    post_raw(r, "--max-time 1.5");
    double after = before;
    for (int i = 0; i < 100 && after <= before; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        after = metric("parlance_chat_requests_total{outcome=\"cancelled\"}");
    }
    EXPECT_EQ(after, before + 1);
    EXPECT_EQ(metric("parlance_chat_running_sequences"), 0);
}

// POST /v1/completions: a raw prompt, no template: transformers' greedy ids on the qwen3
// reference's prompts, as text or as token ids.
TEST_F(Chat, TextCompletionsGiveTransformersGreedyIds) {
    const json ref = json(qwen3_reference("tiny"));
    for (const auto& c : ref["cases"]) {
        SCOPED_TRACE(c["name"].get<std::string>());
        const int n = c["greedy_fixed"]["max_new_tokens"];
        json r{{"model", "qwen3-tiny"},
               {"prompt", c["text"]},
               {"max_tokens", n},
               {"min_tokens", n},
               {"temperature", 0},
               {"logprobs", 0},
               {"return_tokens_as_token_ids", true}};
        for (int as_ids = 0; as_ids < 2; ++as_ids) {
            if (as_ids) r["prompt"] = c["prompt_ids"];
            auto [status, body] = post(r, "/v1/completions");
            ASSERT_EQ(status, 200) << body.dump();
            EXPECT_EQ(body["object"], "text_completion");
            EXPECT_EQ(body["usage"]["prompt_tokens"], c["prompt_ids"].size());
            const json& tokens = body["choices"][0]["logprobs"]["tokens"];
            ASSERT_EQ(tokens.size(), c["greedy_fixed"]["ids"].size());
            for (size_t k = 0; k < tokens.size(); ++k)
                EXPECT_EQ(tokens[k], "token_id:" + std::to_string(c["greedy_fixed"]["ids"][k].get<int>()));
        }
    }
    // Streamed text equals the whole; echo puts the prompt first.
    json r{{"model", "qwen3-tiny"},
           {"prompt", "The quick brown fox"},
           {"max_tokens", 10},
           {"temperature", 0},
           {"ignore_eos", true}};
    const std::string whole = post(r, "/v1/completions").second["choices"][0]["text"];
    r["stream"] = true;
    std::string streamed;
    for (const auto& [name, ev] : typed_stream(r, "/v1/completions"))
        if (ev.is_object())
            for (const json& ch : ev["choices"]) streamed += ch["text"].get<std::string>();
    EXPECT_EQ(streamed, whole);
    r["stream"] = false;
    r["echo"] = true;
    EXPECT_EQ(post(r, "/v1/completions").second["choices"][0]["text"], "The quick brown fox" + whole);
    r["suffix"] = "x";
    auto [s, b] = post(r, "/v1/completions");
    EXPECT_EQ(s, 400);
    EXPECT_EQ(b["error"]["param"], "suffix");
}

// POST /v1/messages: Anthropic's shapes over the same engine. Without `thinking`, Qwen3 renders
// with enable_thinking false, so the same conversation through chat completions (thinking off)
// gives the same greedy text and prompt length.
TEST_F(Chat, AnthropicMessagesMatchChatCompletions) {
    json msg{{"model", "qwen3-tiny"},
             {"system", "You are a terse assistant."},
             {"messages", json::array({{{"role", "user"}, {"content", "Name a colour."}}})},
             {"max_tokens", 10},
             {"temperature", 0}};
    json chat{{"model", "qwen3-tiny"},
              {"messages", json::array({{{"role", "system"}, {"content", "You are a terse assistant."}},
                                        {{"role", "user"}, {"content", "Name a colour."}}})},
              {"max_tokens", 10},
              {"temperature", 0},
              {"ignore_eos", true},
              {"chat_template_kwargs", {{"enable_thinking", false}}}};
    auto [cs, cb] = post(chat);
    ASSERT_EQ(cs, 200) << cb.dump();
    auto [ms, mb] = post(msg, "/v1/messages");
    ASSERT_EQ(ms, 200) << mb.dump();
    EXPECT_EQ(mb["type"], "message");
    EXPECT_EQ(mb["role"], "assistant");
    EXPECT_EQ(mb["usage"]["input_tokens"].get<int>() + mb["usage"]["cache_read_input_tokens"].get<int>(),
              cb["usage"]["prompt_tokens"]);
    const json count = post({{"model", "qwen3-tiny"}, {"system", msg["system"]}, {"messages", msg["messages"]}},
                            "/v1/messages/count_tokens")
                           .second;
    EXPECT_EQ(count["input_tokens"], cb["usage"]["prompt_tokens"]);
    // The random model may end early on <|im_end|>; both paths see the same ids either way.
    std::string text;
    for (const json& blk : mb["content"])
        if (blk["type"] == "text") text += blk["text"].get<std::string>();
    const std::string chat_text = cb["choices"][0]["message"]["content"];
    EXPECT_EQ(chat_text.substr(0, text.size()), text);
    EXPECT_TRUE(mb["stop_reason"] == "max_tokens" || mb["stop_reason"] == "end_turn");
    // The stream: message_start, one text block, message_delta, message_stop; the same text.
    msg["stream"] = true;
    const auto events = typed_stream(msg, "/v1/messages");
    ASSERT_GE(events.size(), 4u);
    EXPECT_EQ(events.front().first, "message_start");
    EXPECT_EQ(events.front().second["message"]["usage"]["input_tokens"], cb["usage"]["prompt_tokens"]);
    EXPECT_EQ(events.back().first, "message_stop");
    EXPECT_EQ(events[events.size() - 2].first, "message_delta");
    EXPECT_EQ(events[events.size() - 2].second["delta"]["stop_reason"], mb["stop_reason"]);
    std::string streamed;
    for (const auto& [name, ev] : events) {
        EXPECT_EQ(ev["type"], name);
        if (name == "content_block_delta") streamed += ev["delta"]["text"].get<std::string>();
    }
    EXPECT_EQ(streamed, text);
    // Anthropic's error shape.
    json bad = msg;
    bad.erase("max_tokens");
    auto [es, eb] = post(bad, "/v1/messages");
    EXPECT_EQ(es, 400);
    EXPECT_EQ(eb["type"], "error");
    EXPECT_EQ(eb["error"]["type"], "invalid_request_error");
    EXPECT_NE(eb["error"]["message"].get<std::string>().find("max_tokens"), std::string::npos);
    bad = msg;
    bad["model"] = "claude-3";
    auto [ns, nb] = post(bad, "/v1/messages");
    EXPECT_EQ(ns, 404);
    EXPECT_EQ(nb["error"]["type"], "not_found_error");
}

// POST /v1/responses: the same conversation as a chat completion gives the same text; a stored
// response continues through previous_response_id, is read back and deleted.
TEST_F(Chat, ResponsesContinueStoreAndStream) {
    json chat{{"model", "qwen3-tiny"},
              {"messages", json::array({{{"role", "system"}, {"content", "You are a terse assistant."}},
                                        {{"role", "user"}, {"content", "Name a colour."}}})},
              {"max_tokens", 8},
              {"temperature", 0}};
    auto [cs, cb] = post(chat);
    ASSERT_EQ(cs, 200);
    json req{{"model", "qwen3-tiny"},
             {"instructions", "You are a terse assistant."},
             {"input", "Name a colour."},
             {"max_output_tokens", 8},
             {"temperature", 0}};
    auto [rs, r1] = post(req, "/v1/responses");
    ASSERT_EQ(rs, 200) << r1.dump();
    EXPECT_EQ(r1["object"], "response");
    EXPECT_EQ(r1["usage"]["input_tokens"], cb["usage"]["prompt_tokens"]);
    std::string text;
    for (const json& item : r1["output"])
        if (item["type"] == "message") text += item["content"][0]["text"].get<std::string>();
    EXPECT_EQ(text, cb["choices"][0]["message"]["content"]);
    EXPECT_EQ(r1["status"], cb["choices"][0]["finish_reason"] == "length" ? "incomplete" : "completed");
    // Continuation: the history (its input and output) is in the next prompt.
    json next{{"model", "qwen3-tiny"},
              {"previous_response_id", r1["id"]},
              {"input", "Another one."},
              {"max_output_tokens", 4},
              {"temperature", 0}};
    auto [ns, r2] = post(next, "/v1/responses");
    ASSERT_EQ(ns, 200) << r2.dump();
    EXPECT_EQ(r2["previous_response_id"], r1["id"]);
    EXPECT_GT(r2["usage"]["input_tokens"].get<int>(), r1["usage"]["input_tokens"].get<int>());
    // Stored: GET gives it back; DELETE removes it; continuing from it is then a 404.
    const std::string get = Server::curl("-s " + server_->url("/v1/responses/" + r1["id"].get<std::string>()));
    EXPECT_EQ(json::parse(get)["id"], r1["id"]);
    const std::string del =
        Server::curl("-s -X DELETE " + server_->url("/v1/responses/" + r1["id"].get<std::string>()));
    EXPECT_EQ(json::parse(del)["deleted"], true);
    auto [gs, gone] = post(next, "/v1/responses");
    EXPECT_EQ(gs, 404);
    EXPECT_EQ(gone["error"]["param"], "previous_response_id");
    // The stream: response.created first, response.completed / incomplete last, numbered; the same text.
    req["stream"] = true;
    const auto events = typed_stream(req, "/v1/responses");
    ASSERT_GE(events.size(), 4u);
    EXPECT_EQ(events.front().first, "response.created");
    EXPECT_EQ(events.back().second["response"]["status"], r1["status"]);
    std::string streamed;
    for (size_t i = 0; i < events.size(); ++i) {
        EXPECT_EQ(events[i].second["type"], events[i].first);
        EXPECT_EQ(events[i].second["sequence_number"], i);
        if (events[i].first == "response.output_text.delta") streamed += events[i].second["delta"].get<std::string>();
    }
    EXPECT_EQ(streamed, text);
    req.erase("stream");
    req["frobnicate"] = 1;
    auto [bs, bad] = post(req, "/v1/responses");
    EXPECT_EQ(bs, 400);
    EXPECT_EQ(bad["error"]["param"], "frobnicate");
}

// response_format json_schema / json_object and the Responses API's text.format: the random model's
// output, constrained, is JSON of the schema, streamed or not; n choices each; bad formats are 400s.
TEST_F(Chat, StructuredOutputIsJsonOfTheSchema) {
    const json schema = json::parse(R"({"type": "object", "properties": {
        "colour": {"enum": ["red", "green", "bleu clair"]}, "count": {"type": "integer"}, "ok": {"type": "boolean"}},
        "required": ["colour", "count", "ok"], "additionalProperties": false})");
    auto check = [&](const std::string& text) {
        const json j = json::parse(text, nullptr, false);
        ASSERT_TRUE(j.is_object()) << text;
        EXPECT_TRUE(j["count"].is_number_integer() && j["ok"].is_boolean()) << text;
        const json& colours = schema["properties"]["colour"]["enum"];
        EXPECT_NE(std::find(colours.begin(), colours.end(), j["colour"]), colours.end()) << text;
    };
    json r{{"model", "qwen3-tiny"},
           {"messages", json::array({{{"role", "user"}, {"content", "Pick a colour; answer in JSON."}}})},
           {"max_tokens", 200},
           {"reasoning_effort", "none"},
           {"n", 2},
           {"temperature", 0.9},
           {"seed", 4},
           {"response_format",
            {{"type", "json_schema"}, {"json_schema", {{"name", "pick"}, {"strict", true}, {"schema", schema}}}}}};
    auto [status, body] = post(r);
    ASSERT_EQ(status, 200) << body.dump();
    ASSERT_EQ(body["choices"].size(), 2u);
    for (const json& c : body["choices"]) {
        EXPECT_EQ(c["finish_reason"], "stop") << c.dump();
        check(c["message"]["content"]);
    }
    // Streamed: the deltas join to the same content.
    r["n"] = 1;
    auto [s1, one] = post(r);
    std::string streamed;
    for (const json& e : stream(r))
        if (!e["choices"].empty() && e["choices"][0]["delta"].contains("content"))
            streamed += e["choices"][0]["delta"]["content"].get<std::string>();
    EXPECT_EQ(streamed, one["choices"][0]["message"]["content"]);
    // json_object: any object.
    r["response_format"] = {{"type", "json_object"}};
    r["temperature"] = 0;
    auto [s2, obj] = post(r);
    ASSERT_EQ(s2, 200) << obj.dump();
    const std::string content = obj["choices"][0]["message"]["content"];
    if (obj["choices"][0]["finish_reason"] == "stop") {
        EXPECT_TRUE(json::parse(content, nullptr, false).is_object()) << content;
    } else {
        EXPECT_EQ(content.rfind("{", 0), 0u) << content;  // cut by max_tokens, but an object so far
    }
    // The Responses API's text.format.
    json rr{{"model", "qwen3-tiny"},
            {"input", "Pick a colour; answer in JSON."},
            {"max_output_tokens", 200},
            {"reasoning", {{"effort", "none"}}},
            {"text", {{"format", {{"type", "json_schema"}, {"name", "pick"}, {"schema", schema}}}}}};
    auto [s3, resp] = post(rr, "/v1/responses");
    ASSERT_EQ(s3, 200) << resp.dump();
    EXPECT_EQ(resp["text"]["format"]["type"], "json_schema");
    for (const json& item : resp["output"])
        if (item["type"] == "message") check(item["content"][0]["text"]);
    // Errors name the field.
    auto expect = [&](json body, const std::string& param, const std::string& path = "/v1/chat/completions") {
        auto [s, b] = post(body, path);
        EXPECT_EQ(s, 400) << body.dump() << " -> " << b.dump();
        EXPECT_EQ(b["error"]["param"], param) << b.dump();
    };
    json bad = r;
    bad["response_format"] = {{"type", "yaml"}};
    expect(bad, "response_format.type");
    bad["response_format"] = {{"type", "json_schema"},
                              {"json_schema", {{"name", "x"}, {"schema", {{"type", "frob"}}}}}};
    expect(bad, "response_format.json_schema.schema");
    bad["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "no spaces"}, {"schema", schema}}}};
    expect(bad, "response_format.json_schema.name");
    bad = request("tools");
    bad["tool_choice"] = "required";
    bad["response_format"] = {{"type", "json_object"}};
    expect(bad, "response_format");
    json rbad = rr;
    rbad["text"]["format"]["schema"] = {{"type", "frob"}};
    expect(rbad, "text.format", "/v1/responses");
}

// `parlance top` against this server: one frame with --once, and the live monitor in tmux.
TEST_F(Chat, TopShowsTheChatModel) {
    json r = request("one_user_turn");
    r.update({{"max_tokens", 6}, {"temperature", 0}, {"ignore_eos", true}});
    ASSERT_EQ(post(r).first, 200);
    std::string out;
    ASSERT_EQ(run_command(quoted(parlance_binary().string()) + " top --once --url " + server_->url("") + " 2>&1", &out),
              0)
        << out;
    for (const char* want :
         {"chat    qwen3-tiny", "TTFT", "ITL", "E2E", "prefix cache hit", "live sessions", "http    requests"})
        EXPECT_NE(out.find(want), std::string::npos) << want << " in\n" << out;
    // Percentiles of a histogram that has observations are numbers, not "-".
    EXPECT_EQ(out.find("TTFT    p50 -"), std::string::npos) << out;
    EXPECT_NE(out.find("TTFT    p50 "), std::string::npos) << out;
    // A server that is not there is reported, not fatal.
    ASSERT_EQ(run_command(quoted(parlance_binary().string()) + " top --once --url http://127.0.0.1:1 2>&1", &out), 0);
    EXPECT_NE(out.find("UNREACHABLE"), std::string::npos) << out;

    const std::string session = "parlance-top-" + std::to_string(getpid());
    ASSERT_EQ(run_command("tmux new-session -d -s " + session + " -x 180 -y 40 " +
                          quoted(quoted(parlance_binary().string()) + " top --interval 0.3 --url " + server_->url(""))),
              0)
        << "tmux is needed (scripts/setup.sh installs it)";
    std::string screen;
    for (int i = 0; i < 50 && screen.find("prefix cache hit") == std::string::npos; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        run_command("tmux capture-pane -p -t " + session, &screen);
    }
    run_command("tmux kill-session -t " + session);
    EXPECT_NE(screen.find("chat    qwen3-tiny"), std::string::npos) << screen;
    EXPECT_NE(screen.find("prefix cache hit"), std::string::npos) << screen;
    EXPECT_NE(screen.find("% (forward passes "), std::string::npos) << screen;  // the speech engine's busy time
}

// `serve --model` takes any model: a language model there serves the chat endpoints under the
// --model id rule, beside a speech model given the same way (the same answers as --chat-model);
// with no speech model the audio endpoints use the default one; two language models are refused.
TEST_F(Chat, ServeModelTakesALanguageModel) {
    const std::string qwen3 = (dir_->path() / "qwen3").string();
    json r = request("one_user_turn");
    r.update({{"max_tokens", 8}, {"temperature", 0}});
    const auto [s0, expected] = post(r);
    ASSERT_EQ(s0, 200) << expected.dump();
    for (const bool with_speech : {true, false}) {
        SCOPED_TRACE(with_speech ? "with a speech model" : "the default speech model");
        Server both("--model " + quoted("qwen3-tiny=" + qwen3), with_speech ? "whisper/tiny-multi/model" : "");
        ASSERT_GT(both.port(), 0) << both.read_log();
        const json models = json::parse(Server::curl("-s " + both.url("/v1/models")));
        ASSERT_EQ(models["data"].size(), 2u) << models.dump();
        EXPECT_EQ(models["data"][1]["id"], "qwen3-tiny");
        const auto file = dir_->path() / "any_model.json";
        std::ofstream(file) << r.dump();
        const json got = json::parse(Server::curl("-s -H 'Content-Type: application/json' --data-binary @" +
                                                  quoted(file.string()) + " " + both.url("/v1/chat/completions")));
        EXPECT_EQ(got["choices"][0]["message"], expected["choices"][0]["message"]) << got.dump();
        const auto [status, body] =
            both.post("/v1/audio/transcriptions", "-F model=whisper-1 -F file=@" + fixture("audio/jfk.wav"));
        EXPECT_EQ(status, 200) << body;
        EXPECT_NE(both.read_log().find("served as 'qwen3-tiny' on the chat endpoints"), std::string::npos);
    }
    Server two("--model " + quoted(qwen3) + " --chat-model " + quoted(qwen3), "");
    EXPECT_NE(two.wait_exit(30), 0);
    EXPECT_NE(two.read_log().find("serve holds one language model"), std::string::npos) << two.read_log();
}

// --chat-speculative: prompt-lookup drafts change nothing in what comes back (greedy, sampled,
// n choices, logprobs), and their counts reach /metrics.
TEST_F(Chat, SpeculativeDecodingChangesNoOutput) {
    // Prompt lookup, then the same model as its own draft model (every greedy proposal right).
    for (const char* how : {" --chat-speculative 4", " --chat-speculative 3 --chat-draft-model "}) {
        SCOPED_TRACE(how);
        std::string flags = how;
        if (flags.find("draft") != std::string::npos) flags += quoted((dir_->path() / "qwen3").string());
        Server spec("--chat-model " + quoted((dir_->path() / "qwen3").string()) + " --chat-model-id qwen3-tiny" +
                    flags);
        std::string rep;
        for (int i = 0; i < 10; ++i) rep += "red green blue yellow. ";
        for (const json& extra : {json{{"temperature", 0}}, json{{"temperature", 1.0}, {"seed", 5}, {"n", 2}},
                                  json{{"temperature", 0}, {"logprobs", true}, {"top_logprobs", 2}}}) {
            json r{{"model", "qwen3-tiny"},
                   {"messages", json::array({{{"role", "user"}, {"content", rep}}})},
                   {"max_tokens", 24},
                   {"ignore_eos", true}};
            r.update(extra);
            const auto [s1, plain] = post(r);
            const auto file = dir_->path() / "spec.json";
            std::ofstream(file) << r.dump();
            const json fast = json::parse(Server::curl("-s -H 'Content-Type: application/json' --data-binary @" +
                                                       quoted(file.string()) + " " + spec.url("/v1/chat/completions")));
            ASSERT_EQ(s1, 200);
            ASSERT_EQ(fast["choices"].size(), plain["choices"].size()) << fast.dump();
            for (size_t i = 0; i < plain["choices"].size(); ++i) {
                EXPECT_EQ(fast["choices"][i]["message"], plain["choices"][i]["message"]) << extra.dump();
                EXPECT_EQ(fast["choices"][i]["logprobs"], plain["choices"][i]["logprobs"]) << extra.dump();
            }
        }
        const std::string m = Server::curl("-s " + spec.url("/metrics"));
        const size_t at = m.find("parlance_chat_draft_tokens_total{outcome=\"proposed\"} ");
        ASSERT_NE(at, std::string::npos);
        EXPECT_GT(std::stod(m.substr(at + 53)), 0) << m.substr(at, 120);
    }
}

// A bounded load: rounds of 12 concurrent requests (streamed and not, n = 2 among them) leave the
// server's resident memory where the first round left it; nothing stays queued or running. (Not
// under ASan: its quarantine holds freed memory.)
TEST_F(Chat, LoadKeepsMemoryFlat) {
    auto round = [&](int r) {
        std::vector<std::future<int>> f;
        for (int i = 0; i < 12; ++i)
            f.push_back(std::async(std::launch::async, [r, i] {
                json q = long_system("Load round " + std::to_string(r) + " request " + std::to_string(i));
                q.update({{"max_tokens", 12},
                          {"temperature", 0.7},
                          {"seed", i},
                          {"ignore_eos", true},
                          {"n", i % 4 == 0 ? 2 : 1}});
                if (i % 2) q["stream"] = true;
                return post_raw(q).first;
            }));
        for (auto& x : f) EXPECT_EQ(x.get(), 200);
    };
    auto rss = [&] {
        return json::parse(Server::curl("-s " + server_->url("/v1/status")))["resident_memory_bytes"].get<int64_t>();
    };
    round(0);
    const int64_t before = rss();
    for (int r = 1; r <= 4; ++r) round(r);
    const int64_t after = rss();
    std::cout << "[chat load] 48 requests after the first 12: resident " << (before >> 20) << " -> " << (after >> 20)
              << " MiB\n";
    EXPECT_LT(after - before, int64_t(24) << 20);
    const json st = json::parse(Server::curl("-s " + server_->url("/v1/status")));
    EXPECT_EQ(st["chat"]["queue"], 0);
    EXPECT_EQ(st["chat"]["running_sequences"], 0);
    EXPECT_EQ(st["in_flight_requests"], 0);
}

}  // namespace
}  // namespace parlance::testing
