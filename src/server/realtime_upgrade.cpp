// The live-session upgrade's checks (see realtime_upgrade.h).
#include "server/realtime_upgrade.h"

#include <algorithm>
#include <cctype>

#include <boost/beast/websocket/rfc6455.hpp>

#include "server/api_error.h"
#include "server/realtime_protocol.h"

namespace parlance::server {
namespace {

namespace http = boost::beast::http;

// %XX and + of a query value (a model id such as org%2Fname).
std::string url_decode(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '+') {
            out.push_back(' ');
        } else if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
                   std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
            out.push_back(static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16)));
            i += 2;
        } else {
            out.push_back(s[i]);
        }
    }
    return out;
}

}  // namespace

RealtimeUpgrade realtime_upgrade_route(ServerState& s, const http::request<http::string_body>& request) {
    if (!boost::beast::websocket::is_upgrade(request))
        throw ApiError(426, "GET /v1/realtime is a WebSocket endpoint: connect with Upgrade: websocket", "",
                       "upgrade_required");
    if (!s.engine.load()) throw ApiError(503, "the model is still loading", "", "loading");
    if (s.stopping.load()) throw ApiError(503, "the server is shutting down", "", "shutting_down");
    // Held by the connection for the session's life (released if a check below refuses it).
    std::shared_ptr<SessionSlots::Slot> slot = s.sessions.try_take();
    if (!slot)
        throw ApiError(429,
                       "too many live sessions (" + std::to_string(s.options.max_sessions) +
                           ", serve --max-sessions); retry shortly",
                       "", "too_many_sessions");
    const std::string target(request.target());
    const size_t q = target.find('?');
    const std::string query = q == std::string::npos ? "" : target.substr(q + 1);
    const size_t intent = query.find("intent=");
    if (intent != std::string::npos && query.compare(intent + 7, 13, "transcription") != 0)
        throw ApiError(400, "this server serves transcription sessions (?intent=transcription)", "intent",
                       "invalid_value");
    const std::string beta_header(request["OpenAI-Beta"]);
    const std::string protocols(request[http::field::sec_websocket_protocol]);
    RealtimeUpgrade up;
    up.beta = beta_header.find("realtime=v1") != std::string::npos ||
              protocols.find("openai-beta.realtime-v1") != std::string::npos;
    // ?model=ID picks the session's speech model; absent, OpenAI's names, or a realtime model such
    // as gpt-realtime that SDKs put there mean the first. Any other name is refused as in
    // session.update (model_not_found), before the upgrade.
    const SpeechModelInfo* chosen = &s.speech.front();
    for (size_t at = 0; at <= query.size();) {
        const size_t end = std::min(query.find('&', at), query.size());
        if (query.compare(at, 6, "model=") == 0) {
            const std::string name = url_decode(query.substr(at + 6, end - at - 6));
            if (const SpeechModelInfo* m = s.speech_model(name))
                chosen = m;
            else if (!is_realtime_model_alias(name))
                throw ApiError(404,
                               "the model " + ApiError::quote(name) + " does not exist (this server serves " +
                                   s.speech_model_ids() + ")",
                               "model", "model_not_found");
        }
        at = end + 1;
    }
    RealtimeContext& c = up.context;
    c.engine = chosen->engine;
    c.vad = s.vad;
    c.options = s.options.realtime;
    c.options.model_id = chosen->id;
    c.max_message_bytes = s.options.max_realtime_message_bytes;
    c.workers = &s.workers;
    c.registry = &s.realtime;
    c.log = &s.log;
    c.slot = std::move(slot);
    return up;
}

}  // namespace parlance::server
