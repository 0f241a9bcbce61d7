// The route table (see routes.h).
#include "server/routes.h"

namespace parlance::server {

Route find_route(std::string_view path, bool metrics_public) {
    if (path == "/" || path == "/index.html") return {RouteId::Page, "/", false};
    if (path == "/health") return {RouteId::Health, "/health", false};
    if (path == "/metrics") return {RouteId::Metrics, "/metrics", !metrics_public};
    if (path == "/v1/models") return {RouteId::Models, "/v1/models", true};
    if (path.starts_with("/v1/models/") && path.size() > 11 && path.find('/', 11) == std::string_view::npos)
        return {RouteId::Model, "/v1/models/{id}", true};
    if (path == "/v1/status") return {RouteId::Status, "/v1/status", true};
    if (path == "/v1/audio/transcriptions") return {RouteId::Transcriptions, "/v1/audio/transcriptions", true};
    if (path == "/v1/audio/translations") return {RouteId::Translations, "/v1/audio/translations", true};
    if (path == "/v1/realtime") return {RouteId::Realtime, "/v1/realtime", true};
    if (path == "/v1/chat/completions") return {RouteId::ChatCompletions, "/v1/chat/completions", true};
    if (path == "/v1/completions") return {RouteId::Completions, "/v1/completions", true};
    if (path == "/v1/messages") return {RouteId::Messages, "/v1/messages", true};
    if (path == "/v1/messages/count_tokens") return {RouteId::CountTokens, "/v1/messages/count_tokens", true};
    if (path == "/v1/responses") return {RouteId::Responses, "/v1/responses", true};
    if (path.starts_with("/v1/responses/") && path.size() > 14 && path.find('/', 14) == std::string_view::npos)
        return {RouteId::Response, "/v1/responses/{id}", true};
    // Unknown paths under /v1/ still ask for the key first: without it, a client learns nothing
    // about which routes exist.
    return {RouteId::Unknown, "other", path.starts_with("/v1/")};
}

}  // namespace parlance::server
