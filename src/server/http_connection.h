// One accepted client connection of the HTTP server (http_server.h): HTTP/1.1 requests read and
// answered on its socket, plain or TLS (HTTPS and WSS on the one port). Each request goes to its
// route (server/router.h); a transcription or generation runs beyond it and answers through the
// connection as its ResponseSink (server/response_sink.h); GET /v1/realtime hands the socket to
// the WebSocket side (server/realtime_connection.h).
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>

#include "server/server_state.h"

namespace parlance::server {

// Serves `socket` until the client or the server closes it; returns at once. `tls`: null for
// plain HTTP; else every byte goes through TLS (the handshake within the header timeout).
void start_http_connection(boost::asio::ip::tcp::socket socket, boost::asio::ssl::context* tls, ServerState& server);

}  // namespace parlance::server
