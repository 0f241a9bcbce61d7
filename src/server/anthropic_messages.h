// Anthropic's Messages API on the chat model: POST /v1/messages (content blocks: text,
// tool_use, tool_result, thinking; typed SSE events) and POST /v1/messages/count_tokens, with
// Anthropic's error shape. The request is converted to the chat template's messages (system,
// tool calls and tool results as the template knows them) and runs on GenerationRun.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/chat_request.h"
#include "server/generation_run.h"

namespace parlance::server {

struct MessagesRequest {
    ChatRequest chat;  // messages, tools, tool_choice, sampling, stop, stream as the chat path has them
    bool thinking = false;
};

// Throws ApiError(400) naming the field. count_tokens: the count_tokens subset (no max_tokens).
MessagesRequest parse_messages_request(const std::string& body, bool count_tokens = false);
// `prompt_tokens` goes into message_start's usage (the prompt is tokenized before the writer).
std::shared_ptr<RunSink> make_messages_writer(const ChatModel& model, const MessagesRequest& request, std::string id,
                                              int prompt_tokens, ResponseCallbacks callbacks);
// {"type": "error", "error": {"type": "invalid_request_error", "message": ...}}
std::string anthropic_error_body(const ApiError& e);

}  // namespace parlance::server
