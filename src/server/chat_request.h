// POST /v1/chat/completions: the request body, validated before anything reaches the engine.
// Every field OpenAI defines is either honoured or refused with a 400 naming it (never silently
// ignored); unknown fields are refused too. Extensions as vLLM names them: min_tokens,
// ignore_eos, top_k, min_p, repetition_penalty, return_tokens_as_token_ids,
// chat_template_kwargs (e.g. {"enable_thinking": false}).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/json_fields.h"

namespace parlance::server {

struct ChatRequest {
    std::string model;
    // Messages as the chat template expects them: content as a string, "developer" as "system",
    // tool-call arguments parsed into objects (templates serialise them with tojson).
    nlohmann::ordered_json messages;
    nlohmann::ordered_json tools;  // null, or an array of {"type": "function", "function": {...}}
    // "auto", "none", "required", or the name of the function that must be called.
    std::string tool_choice = "auto";
    std::string forced_function;
    bool stream = false;
    bool include_usage = false;
    std::optional<int> max_tokens;  // max_completion_tokens (or the older max_tokens)
    fields::Sampling sampling;
    int n = 1;
    bool logprobs = false;
    int top_logprobs = 0;
    bool return_tokens_as_token_ids = false;
    nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();
    bool add_generation_prompt = true;
    // response_format json_object / json_schema (Responses: text.format): the content's JSON
    // schema, decoded under its grammar (null: free text); the field it came from, for errors.
    nlohmann::ordered_json response_schema;
    std::string response_schema_param;
};

// A json_schema format's {name, schema, strict, description} (`param` names it in errors): its
// schema ({} when absent, which allows any JSON value).
nlohmann::ordered_json parse_json_schema_format(const nlohmann::ordered_json& format, const std::string& param);

inline constexpr int kMaxChoices = 8;
inline constexpr int kMaxStopStrings = 16;

// Throws ApiError(400) naming the offending field ("messages[2].content", "temperature", ...).
ChatRequest parse_chat_request(const std::string& body);

}  // namespace parlance::server
