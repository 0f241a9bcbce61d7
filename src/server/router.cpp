// The route table (see router.h).
#include "server/router.h"

#include <array>
#include <string_view>

#include "server/anthropic_messages.h"
#include "server/api_error.h"
#include "server/auth.h"
#include "server/info_routes.h"
#include "server/web_page.h"

namespace parlance::server {
namespace {

namespace http = boost::beast::http;

// Browsers cannot set headers on a WebSocket: they send the key as a subprotocol,
// "openai-insecure-api-key.KEY" (answered with "realtime"; the key is never echoed).
bool subprotocol_key_matches(const HttpRequest& request, const std::string& key) {
    const std::string list(request[http::field::sec_websocket_protocol]);
    const std::string prefix = "openai-insecure-api-key.";
    size_t pos = 0;
    while (pos < list.size()) {
        size_t comma = list.find(',', pos);
        if (comma == std::string::npos) comma = list.size();
        std::string item = list.substr(pos, comma - pos);
        item.erase(0, item.find_first_not_of(' '));
        item.erase(item.find_last_not_of(' ') + 1);
        if (item.rfind(prefix, 0) == 0 && constant_time_equal(item.substr(prefix.size()), key)) return true;
        pos = comma + 1;
    }
    return false;
}

void check_key(const ServerState& s, const Route& route, const HttpRequest& request) {
    const std::string& key = s.options.api_key;
    if (!route.needs_key || key.empty()) return;
    const auto auth = request[http::field::authorization];
    if (bearer_matches(auth, key)) return;
    if (route.id == RouteId::Realtime && subprotocol_key_matches(request, key)) return;
    if (is_anthropic(route.id) && constant_time_equal(std::string(request["x-api-key"]), key)) return;
    throw ApiError(401, auth.empty() ? "missing API key (Authorization: Bearer ...)" : "invalid API key", "",
                   "invalid_api_key");
}

PlainReply json_reply(int status, const nlohmann::json& j) {
    return {status, "application/json", j.dump() + "\n"};
}

// The chat model, once the request may reach it: loaded, not shutting down, a JSON body.
const ChatModel& chat_model(const ServerState& s, const HttpRequest& request) {
    const ChatModel* chat = s.chat.load();
    if (!chat)
        throw ApiError(404, "this server has no chat model (start it with serve --model LANGUAGE_MODEL)", "model",
                       "model_not_found");
    if (s.stopping.load()) throw ApiError(503, "the server is shutting down", "", "shutting_down");
    const std::string type(request[http::field::content_type]);
    if (!type.empty() && type.find("json") == std::string::npos)
        throw ApiError(415, "Content-Type must be application/json", "", "unsupported_media_type");
    return *chat;
}

RouteReply stored_response(ServerState& s, const HttpRequest& request, std::string_view path) {
    const std::string id(path.substr(14));
    if (request.method() == http::verb::delete_) {
        if (!s.responses.erase(id))
            throw ApiError(404, "no stored response " + ApiError::quote(id), "response_id", "not_found");
        return json_reply(200, {{"id", id}, {"object", "response.deleted"}, {"deleted", true}});
    }
    auto r = s.responses.response(id);
    if (!r) throw ApiError(404, "no stored response " + ApiError::quote(id), "response_id", "not_found");
    return PlainReply{200, "application/json",
                      r->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"};
}

using Handler = RouteReply (*)(ServerState&, const HttpRequest&, std::string_view path);

struct Entry {
    RouteId id;
    std::array<http::verb, 2> methods;  // http::verb::unknown: none
    Handler handle;
};

constexpr http::verb kNone = http::verb::unknown;

const Entry kTable[] = {
    {RouteId::Page,
     {http::verb::get, kNone},
     [](ServerState&, const HttpRequest&, std::string_view) -> RouteReply {
         return PlainReply{200, "text/html; charset=utf-8", web_page_html()};
     }},
    {RouteId::Health,
     {http::verb::get, kNone},
     [](ServerState& s, const HttpRequest&, std::string_view) -> RouteReply {
         return ready(s) ? json_reply(200, {{"status", "ok"}}) : json_reply(503, {{"status", "loading"}});
     }},
    {RouteId::Metrics,
     {http::verb::get, kNone},
     [](ServerState& s, const HttpRequest&, std::string_view) -> RouteReply {
         return PlainReply{200, "text/plain; version=0.0.4", metrics_text(s)};
     }},
    {RouteId::Models,
     {http::verb::get, kNone},
     [](ServerState& s, const HttpRequest&, std::string_view) -> RouteReply {
         return json_reply(200, models_list(s));
     }},
    {RouteId::Model,
     {http::verb::get, kNone},
     [](ServerState& s, const HttpRequest&, std::string_view path) -> RouteReply {
         const std::string id(path.substr(11));
         if (auto m = model_info(s, id)) return json_reply(200, *m);
         throw ApiError(404, "the model " + ApiError::quote(id) + " does not exist", "model", "model_not_found");
     }},
    {RouteId::Status,
     {http::verb::get, kNone},
     [](ServerState& s, const HttpRequest&, std::string_view) -> RouteReply {
         return json_reply(200, status_json(s));
     }},
    {RouteId::Transcriptions,
     {http::verb::post, kNone},
     [](ServerState& s, const HttpRequest& r, std::string_view) -> RouteReply {
         return transcription_route(s, r[http::field::content_type], r.body(), false);
     }},
    {RouteId::Translations,
     {http::verb::post, kNone},
     [](ServerState& s, const HttpRequest& r, std::string_view) -> RouteReply {
         return transcription_route(s, r[http::field::content_type], r.body(), true);
     }},
    {RouteId::Realtime,
     {http::verb::get, kNone},
     [](ServerState& s, const HttpRequest& r, std::string_view) -> RouteReply { return realtime_upgrade_route(s, r); }},
    {RouteId::ChatCompletions,
     {http::verb::post, kNone},
     [](ServerState& s, const HttpRequest& r, std::string_view) -> RouteReply {
         return chat_completions_route(chat_model(s, r), r.body());
     }},
    {RouteId::Completions,
     {http::verb::post, kNone},
     [](ServerState& s, const HttpRequest& r, std::string_view) -> RouteReply {
         return completions_route(chat_model(s, r), r.body());
     }},
    {RouteId::Messages,
     {http::verb::post, kNone},
     [](ServerState& s, const HttpRequest& r, std::string_view) -> RouteReply {
         return messages_route(chat_model(s, r), r.body());
     }},
    {RouteId::CountTokens,
     {http::verb::post, kNone},
     [](ServerState& s, const HttpRequest& r, std::string_view) -> RouteReply {
         return json_reply(200, count_tokens_route(chat_model(s, r), r.body()));
     }},
    {RouteId::Responses,
     {http::verb::post, kNone},
     [](ServerState& s, const HttpRequest& r, std::string_view) -> RouteReply {
         return responses_route(chat_model(s, r), r.body(), s.responses);
     }},
    {RouteId::Response, {http::verb::get, http::verb::delete_}, stored_response},
};

}  // namespace

RouteReply route_request(ServerState& s, const Route& route, const HttpRequest& request) {
    check_key(s, route, request);
    const std::string target(request.target());
    const std::string path = target.substr(0, target.find('?'));
    for (const Entry& e : kTable) {
        if (e.id != route.id) continue;
        const http::verb m = request.method();  // verb::unknown for a method Beast does not know
        if (m == kNone || (m != e.methods[0] && m != e.methods[1]))
            throw ApiError(
                405,
                "method " + ApiError::quote(request.method_string()) + " is not allowed on " + std::string(route.label),
                "", "method_not_allowed");
        return e.handle(s, request, path);
    }
    throw ApiError(404, "no route " + ApiError::quote(path), "", "not_found");
}

}  // namespace parlance::server
