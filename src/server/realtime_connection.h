// The WebSocket side of /v1/realtime: accepts the upgrade of a request the HTTP connection has
// read (answering the "realtime" subprotocol when offered, never the one carrying a key), then
// reads client events into a RealtimeSession and writes its server events in order, one write at
// a time. Bounded: a message over the size limit closes with 1009 (too big); a client that does
// not read its events (more than 8 MiB queued) is closed; an idle peer is pinged and dropped by
// Beast's suggested server timeouts; while the session's decodes lag behind, the socket is not
// read (backpressure).
#pragma once

#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include "core/log.h"
#include "server/realtime_session.h"

namespace parlance::server {

struct RealtimeContext {
    SpeechEngine* engine = nullptr;
    VoiceActivityModel* vad = nullptr;  // may be null (no server_vad)
    RealtimeOptions options;
    size_t max_message_bytes = 4u << 20;
    boost::asio::thread_pool* workers = nullptr;  // where decodes' samples are queued on the engine
    RealtimeRegistry* registry = nullptr;         // the server's sessions and their statistics
    Logger* log = nullptr;
    std::shared_ptr<const void> slot;  // the session's --max-sessions slot, held for its life
};

// Takes over the connection (ws: or, after the TLS handshake, wss:). beta: the client speaks the
// beta shapes (OpenAI-Beta: realtime=v1 or the openai-beta.realtime-v1 subprotocol).
void start_realtime_connection(boost::beast::tcp_stream stream,
                               boost::beast::http::request<boost::beast::http::string_body> request,
                               const RealtimeContext& context, bool beta);
void start_realtime_connection(boost::beast::ssl_stream<boost::beast::tcp_stream> stream,
                               boost::beast::http::request<boost::beast::http::string_body> request,
                               const RealtimeContext& context, bool beta);

}  // namespace parlance::server
