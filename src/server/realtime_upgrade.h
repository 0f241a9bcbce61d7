// GET /v1/realtime before the WebSocket upgrade: what HTTP can still answer with a status and
// OpenAI's error body (not an upgrade, no model yet, shutting down, too many sessions, an intent
// other than transcription, an unknown ?model=), and the session's context when all pass.
#pragma once

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "server/realtime_connection.h"
#include "server/server_state.h"

namespace parlance::server {

struct RealtimeUpgrade {
    RealtimeContext context;  // holds the session's --max-sessions slot
    bool beta = false;        // the client speaks the beta shapes
};

// Throws ApiError (426, 503, 429, 400, 404). The slot is claimed here, atomically.
RealtimeUpgrade realtime_upgrade_route(ServerState& s,
                                       const boost::beast::http::request<boost::beast::http::string_body>& request);

}  // namespace parlance::server
