// One chat completion, from the validated request to its response: the model's chat template
// renders the messages, the prompt is tokenized, n choices generate on the GenerationService,
// and each choice's tokens become text (stop strings held back and cut, reasoning and tool calls
// split out) that is returned as one body or streamed as chat.completion.chunk events.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/generation_service.h"
#include "server/chat_request.h"
#include "text/chat_output.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace parlance::server {

// What the server knows of its chat model.
struct ChatModel {
    std::string id;  // the `model` clients send
    GenerationService* service = nullptr;
    const ChatTemplate* chat_template = nullptr;
    const Tokenizer* tokenizer = nullptr;
    std::vector<int32_t> stop_ids;
    int max_context = 0;
};

struct ChatCallbacks {
    // A streamed event's JSON (without "data: "); the last is "[DONE]", with last = true.
    // Engine thread.
    std::function<void(std::string, bool last)> on_event;
    // Once: status and body (200 + the completion, or an error body); for a stream, 200 and an
    // empty body after the last event, or an error that the caller sends as an error event.
    std::function<void(int status, std::string body)> on_done;
};

class ChatCompletion : public std::enable_shared_from_this<ChatCompletion> {
public:
    // Renders and tokenizes; ApiError(400) when the template refuses the conversation or the
    // prompt and max_tokens do not fit the model's context.
    ChatCompletion(const ChatModel& model, ChatRequest request, std::string id, int64_t created);
    ~ChatCompletion();

    int prompt_tokens() const { return static_cast<int>(prompt_.size()); }
    const std::string& prompt_text() const { return prompt_text_; }
    // Submits to the service (Error(Overloaded) when its queue is full). `cancelled` is the
    // client's: a disconnect ends every choice between steps.
    void start(std::shared_ptr<std::atomic<bool>> cancelled, ChatCallbacks callbacks);

    struct Choice;

private:
    bool on_token(int choice, int32_t token);
    void on_done(std::vector<GenerationResult> results, std::exception_ptr error);
    nlohmann::ordered_json chunk(nlohmann::ordered_json choices) const;
    nlohmann::ordered_json logprob_entry(const TokenLogprobs& l) const;
    std::string token_text(int32_t id) const;
    std::string token_bytes(int32_t id) const;
    nlohmann::ordered_json add_tool_calls(Choice& c, int choice, const std::vector<ParsedToolCall>& parsed) const;

    const ChatModel& model_;
    ChatRequest req_;
    std::string id_;
    int64_t created_;
    std::string prompt_text_;
    std::vector<int32_t> prompt_;
    int max_tokens_ = 0;
    std::vector<std::unique_ptr<Choice>> choices_;
    ChatCallbacks cb_;
};

// The usage object OpenAI returns (prompt_tokens_details.cached_tokens included).
nlohmann::ordered_json chat_usage(int prompt, int completion, int cached);

}  // namespace parlance::server
