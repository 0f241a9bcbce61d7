// The language-model APIs' routes (see chat_routes.h).
#include "server/chat_routes.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <random>

#include "server/anthropic_messages.h"
#include "server/api_error.h"
#include "server/chat_completion.h"
#include "server/chat_request.h"
#include "server/text_completion.h"

namespace parlance::server {
namespace {

// A response id no client can guess from another: a per-process salt, a counter.
std::string next_completion_id(const char* prefix) {
    static std::atomic<uint64_t> counter{0};
    static const uint64_t salt = std::random_device{}() * 0x9E3779B97F4A7C15ULL;
    char buf[40];
    std::snprintf(buf, sizeof buf, "%s%016llx", prefix,
                  static_cast<unsigned long long>(salt ^ (++counter * 0xD1B54A32D192ED03ULL)));
    return buf;
}

void check_model_id(const ChatModel& chat, const std::string& requested) {
    if (requested != chat.id)
        throw ApiError(404,
                       "the model " + ApiError::quote(requested) + " does not exist (this server's chat model is '" +
                           chat.id + "')",
                       "model", "model_not_found");
}

int64_t now_seconds() {
    return static_cast<int64_t>(std::time(nullptr));
}

}  // namespace

GenerationRoute chat_completions_route(const ChatModel& chat, const std::string& body) {
    auto req = std::make_shared<ChatRequest>(parse_chat_request(body));
    check_model_id(chat, req->model);
    return {req->stream, [&chat, req](ResponseCallbacks cb) {
                RunSettings settings = chat_run_settings(chat, *req);
                auto writer =
                    make_chat_writer(chat, *req, next_completion_id("chatcmpl-"), now_seconds(), std::move(cb));
                return std::make_shared<GenerationRun>(chat, std::move(settings), std::move(writer));
            }};
}

GenerationRoute completions_route(const ChatModel& chat, const std::string& body) {
    auto req = std::make_shared<CompletionRequest>(parse_completion_request(body));
    check_model_id(chat, req->model);
    return {req->stream, [&chat, req](ResponseCallbacks cb) {
                RunSettings settings = completion_run_settings(chat, *req);
                auto writer =
                    make_completion_writer(chat, *req, next_completion_id("cmpl-"), now_seconds(), std::move(cb));
                return std::make_shared<GenerationRun>(chat, std::move(settings), std::move(writer));
            }};
}

GenerationRoute messages_route(const ChatModel& chat, const std::string& body) {
    auto req = std::make_shared<MessagesRequest>(parse_messages_request(body));
    check_model_id(chat, req->chat.model);
    return {req->chat.stream, [&chat, req](ResponseCallbacks cb) {
                RunSettings settings = chat_run_settings(chat, req->chat);
                auto writer = make_messages_writer(chat, *req, next_completion_id("msg_"),
                                                   static_cast<int>(settings.prompt.size()), std::move(cb));
                return std::make_shared<GenerationRun>(chat, std::move(settings), std::move(writer));
            }};
}

GenerationRoute responses_route(const ChatModel& chat, const std::string& body, ResponseStore& store) {
    auto req = std::make_shared<ResponsesRequest>(parse_responses_request(body, store));
    check_model_id(chat, req->chat.model);
    return {req->chat.stream, [&chat, &store, req](ResponseCallbacks cb) {
                RunSettings settings = chat_run_settings(chat, req->chat);
                auto writer =
                    make_responses_writer(chat, *req, next_completion_id("resp_"), now_seconds(), store, std::move(cb));
                return std::make_shared<GenerationRun>(chat, std::move(settings), std::move(writer));
            }};
}

nlohmann::json count_tokens_route(const ChatModel& chat, const std::string& body) {
    MessagesRequest req = parse_messages_request(body, /*count_tokens=*/true);
    check_model_id(chat, req.chat.model);
    // Counted whatever the length: a conversation longer than the context is a count, not an
    // error (the client asks in order to know whether it fits).
    const std::string text = chat_prompt_text(chat, req.chat);
    return {{"input_tokens", chat.tokenizer->encode(text, /*parse_special=*/true).size()}};
}

}  // namespace parlance::server
