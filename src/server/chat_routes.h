// The language-model APIs as routes, apart from the connection that carries them: each parses its
// request (a 400 names the field), checks the model id (404), and says how to make its run once
// the callbacks that write the answer exist (the connection writes them on its strand; the run is
// made on a worker: rendering and tokenizing a long prompt is not I/O-thread work).
// Anthropic's count_tokens answers at once.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "server/generation_run.h"
#include "server/responses_api.h"

namespace parlance::server {

struct GenerationRoute {
    bool stream = false;
    std::function<std::shared_ptr<GenerationRun>(ResponseCallbacks)> make;
};

// POST /v1/chat/completions (OpenAI).
GenerationRoute chat_completions_route(const ChatModel& chat, const std::string& body);
// POST /v1/completions (OpenAI's legacy text completions).
GenerationRoute completions_route(const ChatModel& chat, const std::string& body);
// POST /v1/messages (Anthropic).
GenerationRoute messages_route(const ChatModel& chat, const std::string& body);
// POST /v1/responses (OpenAI's Responses API; `store` keeps responses for previous_response_id).
GenerationRoute responses_route(const ChatModel& chat, const std::string& body, ResponseStore& store);
// POST /v1/messages/count_tokens (Anthropic): the rendered prompt's length, nothing generated.
nlohmann::json count_tokens_route(const ChatModel& chat, const std::string& body);

}  // namespace parlance::server
