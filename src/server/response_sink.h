// How a request that runs beyond its route's handler (a transcription, a generation) answers: its
// connection, seen from the request's side. Any thread may call (a worker, an engine's thread);
// each call is carried out in order on the connection's strand, which owns the bytes on the wire
// (HTTP framing, server-sent events, keep-alive, the metrics). The request's files
// (server/transcription_exchange.h, server/generation_exchange.h) know their API and nothing of
// the transport; the connection (http_connection.cpp) knows no API.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

namespace parlance::server {

class ResponseSink {
public:
    virtual ~ResponseSink() = default;

    // The whole response: status, content type and body. `audio_seconds` is the request's audio
    // (metrics).
    virtual void respond(int status, std::string content_type, std::string body, double audio_seconds) = 0;
    // A failed request (status >= 400, `body` the API's JSON error): the error response (with
    // Retry-After on 429), or, once a stream's headers are out, `stream_event` (whole SSE bytes) as
    // the stream's last event.
    virtual void fail(int status, std::string body, std::string stream_event, double audio_seconds) = 0;

    // Server-sent events: the headers once, then events in order ("data: JSON", after an "event:
    // NAME" line when `event` names it); the connection closes after the last.
    virtual void start_stream() = 0;
    virtual void stream_event(std::string json, bool last, std::string event = "") = 0;
    // A stream whose last event went out without an error: its metrics.
    virtual void stream_ended(double audio_seconds) = 0;
};

// The request an exchange runs: counted in flight and cancellable (disconnect, shutdown) from its
// admission by the connection until finished() (once, when nothing of it runs any more).
struct AdmittedRequest {
    std::shared_ptr<std::atomic<bool>> cancelled;
    std::function<void()> finished;
};

}  // namespace parlance::server
