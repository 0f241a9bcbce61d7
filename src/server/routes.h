// The server's route table: every path the server answers, the label it carries in /metrics and
// the logs, and whether it needs the API key. Unknown paths all share one label ("other"), so no
// client can grow the metrics' label set (each distinct path used to become a series).
#pragma once

#include <string_view>

namespace parlance::server {

enum class RouteId {
    Page,             // GET /  (the web page; carries no data, open)
    Health,           // GET /health  (open: load balancers probe it)
    Metrics,          // GET /metrics  (needs the key unless --metrics-public)
    Models,           // GET /v1/models
    Model,            // GET /v1/models/{id}
    Status,           // GET /v1/status
    Transcriptions,   // POST /v1/audio/transcriptions
    Translations,     // POST /v1/audio/translations
    Realtime,         // GET /v1/realtime (WebSocket: live transcription sessions)
    ChatCompletions,  // POST /v1/chat/completions
    Completions,      // POST /v1/completions
    Messages,         // POST /v1/messages (Anthropic)
    CountTokens,      // POST /v1/messages/count_tokens (Anthropic)
    Responses,        // POST /v1/responses
    Response,         // GET, DELETE /v1/responses/{id}
    Unknown,          // anything else: 404 (401 first under /v1/ when a key is set)
};

struct Route {
    RouteId id;
    std::string_view label;  // the bounded metrics label: a fixed route or "other"
    bool needs_key;          // when the server has an API key
};

// Routes that answer in Anthropic's shapes (errors included) and take its x-api-key header.
inline bool is_anthropic(RouteId id) {
    return id == RouteId::Messages || id == RouteId::CountTokens;
}

// The route of a request path (without the query). metrics_public: /metrics open without a key.
Route find_route(std::string_view path, bool metrics_public);

}  // namespace parlance::server
