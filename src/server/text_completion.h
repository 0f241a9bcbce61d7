// POST /v1/completions (OpenAI's legacy text completions): a raw prompt (a string, or token ids)
// continued with no chat template, on the chat model's GenerationRun. Its own field set, as
// OpenAI defines it (max_tokens defaults to 16, logprobs is a count of alternatives up to 5),
// plus vLLM's extensions.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/generation_run.h"
#include "server/json_fields.h"

namespace parlance::server {

struct CompletionRequest {
    std::string model;
    std::string prompt;               // text, or
    std::vector<int32_t> prompt_ids;  // token ids
    bool echo = false;                // the prompt's text before the completion
    bool stream = false, include_usage = false;
    int max_tokens = 16;
    fields::Sampling sampling;
    int n = 1;
    std::optional<int> logprobs;  // 0..5 alternatives
    bool return_tokens_as_token_ids = false;
};

// Throws ApiError(400) naming the field.
CompletionRequest parse_completion_request(const std::string& body);
RunSettings completion_run_settings(const ChatModel& model, const CompletionRequest& request);
std::shared_ptr<RunSink> make_completion_writer(const ChatModel& model, const CompletionRequest& request,
                                                std::string id, int64_t created, ResponseCallbacks callbacks);

}  // namespace parlance::server
