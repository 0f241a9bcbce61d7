// OpenAI's Responses API on the chat model: POST /v1/responses (input as text or items:
// messages, function_call, function_call_output; instructions; tools; previous_response_id),
// typed SSE (response.created ... response.completed), and GET / DELETE /v1/responses/{id} over
// a bounded in-process store (the oldest responses go first past its capacity).
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "server/chat_request.h"
#include "server/generation_run.h"

namespace parlance::server {

// Stored responses: each one's response object and the conversation it continued plus its own
// output, as chat-template messages (what previous_response_id continues from). Thread-safe.
class ResponseStore {
public:
    explicit ResponseStore(size_t capacity = 1024) : capacity_(capacity) {}
    void put(const std::string& id, nlohmann::ordered_json response, nlohmann::ordered_json conversation);
    std::optional<nlohmann::ordered_json> response(const std::string& id) const;
    std::optional<nlohmann::ordered_json> conversation(const std::string& id) const;
    bool erase(const std::string& id);
    size_t size() const;

private:
    struct Entry {
        nlohmann::ordered_json response, conversation;
        std::list<std::string>::iterator age;
    };
    size_t capacity_;
    mutable std::mutex mutex_;
    std::map<std::string, Entry> entries_;
    std::list<std::string> order_;  // oldest first
};

struct ResponsesRequest {
    ChatRequest chat;                     // the messages with the history and instructions in
    nlohmann::ordered_json conversation;  // history + this input, without instructions (stored)
    std::string instructions;
    std::string previous_response_id;
    bool store = true;
    nlohmann::ordered_json metadata = nlohmann::ordered_json::object();
    nlohmann::ordered_json tools_echo = nlohmann::ordered_json::array();  // as the client gave them
    nlohmann::ordered_json tool_choice_echo = "auto";
    nlohmann::ordered_json text_format = {{"type", "text"}};  // text.format, echoed
};

// Throws ApiError(400) naming the field; 404 for an unknown previous_response_id.
ResponsesRequest parse_responses_request(const std::string& body, const ResponseStore& store);
std::shared_ptr<RunSink> make_responses_writer(const ChatModel& model, const ResponsesRequest& request, std::string id,
                                               int64_t created, ResponseStore& store, ResponseCallbacks callbacks);

}  // namespace parlance::server
