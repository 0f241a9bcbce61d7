// The server's routes as one table: for each path (server/routes.h), the methods it takes and the
// handler that turns a request into what the connection does next — a plain answer, a generation
// run, a transcription, or a live session's upgrade. The handlers live in their route files
// (info_routes, chat_routes, transcription_routes, realtime_upgrade); the connection
// (http_connection.cpp) carries requests and answers and knows no API.
#pragma once

#include <string>
#include <variant>

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "server/chat_routes.h"
#include "server/realtime_upgrade.h"
#include "server/routes.h"
#include "server/server_state.h"
#include "server/transcription_routes.h"

namespace parlance::server {

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;

// An answer the route has whole (a status, a content type and the body).
struct PlainReply {
    int status = 200;
    std::string content_type = "application/json";
    std::string body;
};

using RouteReply = std::variant<PlainReply, GenerationRoute, TranscriptionRoute, RealtimeUpgrade>;

// The API key first (401, when the server has one and the route needs it), then the method (405),
// then the route's handler. Throws ApiError (or Error) for what is answered as an error.
RouteReply route_request(ServerState& s, const Route& route, const HttpRequest& request);

}  // namespace parlance::server
