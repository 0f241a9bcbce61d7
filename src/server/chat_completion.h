// POST /v1/chat/completions on top of GenerationRun: the chat request rendered by the model's own
// template and tokenized, and the writer of OpenAI's chat.completion body and
// chat.completion.chunk stream.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "server/chat_request.h"
#include "server/generation_run.h"

namespace parlance::server {

// The conversation rendered by the model's chat template, with the opening of a forced tool call
// (tool_choice required / named); ApiError(400) when the template refuses it. Any length.
std::string chat_prompt_text(const ChatModel& model, const ChatRequest& request);

// Renders and tokenizes the conversation (tool_choice required / named opens the call in the
// prompt); ApiError(400) when the template refuses it or it does not fit the context.
RunSettings chat_run_settings(const ChatModel& model, const ChatRequest& request);

// The token constraint of a request's response_schema (JSON of that schema, after reasoning or
// as tool calls when the output allows them); ApiError(400) when the schema cannot be enforced.
std::shared_ptr<const TokenConstraint> structured_output_constraint(const ChatModel& model, const ChatRequest& request,
                                                                    const ChatOutputOptions& output);

std::shared_ptr<RunSink> make_chat_writer(const ChatModel& model, const ChatRequest& request, std::string id,
                                          int64_t created, ResponseCallbacks callbacks);

// The usage object OpenAI returns (prompt_tokens_details.cached_tokens included).
nlohmann::ordered_json openai_usage(int prompt, int completion, int cached);
// An OpenAI logprobs entry {token, logprob, bytes, top_logprobs}; token_id:N with as_ids.
nlohmann::ordered_json openai_logprob(const Tokenizer& tok, const TokenLogprobs& l, bool as_ids);

}  // namespace parlance::server
