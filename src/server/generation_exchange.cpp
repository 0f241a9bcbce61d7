// A generation request's run and answer (see generation_exchange.h).
#include "server/generation_exchange.h"

#include <boost/asio/post.hpp>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "server/anthropic_messages.h"
#include "server/api_error.h"
#include "server/generation_run.h"

namespace parlance::server {
namespace {

// The stream's last event for an error body ({"error": {...}}, or Anthropic's typed shape).
std::string error_event(const std::string& body) {
    const nlohmann::json ev = nlohmann::json::parse(body, nullptr, false);
    if (ev.is_object() && ev.value("type", "") == "error") return "event: error\ndata: " + ev.dump() + "\n\n";
    return "data: " + ev.dump() + "\n\n";
}

// On a worker: the run made from its callbacks and started; false (answered with the error)
// when either fails.
bool run(const GenerationRoute& route, bool anthropic, const AdmittedRequest& request,
         const std::shared_ptr<ResponseSink>& sink) {
    auto fail = [&](const ApiError& e) {
        const std::string body = anthropic ? anthropic_error_body(e) : e.body();
        sink->fail(e.status, body + "\n", error_event(body), 0.0);
    };
    try {
        ResponseCallbacks cb;
        cb.on_event = [sink](std::string json, bool last, std::string event) {
            sink->stream_event(std::move(json), last, std::move(event));
        };
        cb.on_done = [sink, stream = route.stream, finished = request.finished](int status, std::string body) {
            if (stream && status == 200)
                sink->stream_ended(0.0);
            else if (status == 200)
                sink->respond(200, "application/json", std::move(body), 0.0);
            else
                sink->fail(status, body, error_event(body), 0.0);
            finished();
        };
        std::shared_ptr<GenerationRun> r = route.make(std::move(cb));
        if (route.stream) sink->start_stream();
        try {
            r->start(request.cancelled);
        } catch (const Error& e) {
            if (e.kind() == ErrorKind::Overloaded) throw ApiError(429, e.what(), "", "overloaded");
            throw;
        }
        return true;
    } catch (const ApiError& e) {
        fail(e);
    } catch (const Error& e) {
        fail(ApiError::from(e));
    } catch (const std::exception& e) {
        fail(ApiError(500, std::string("internal error: ") + e.what()));
    }
    return false;
}

}  // namespace

void start_generation_exchange(ServerState& server, GenerationRoute route, bool anthropic, AdmittedRequest request,
                               std::shared_ptr<ResponseSink> sink) {
    boost::asio::post(server.workers,
                      [route = std::move(route), anthropic, request = std::move(request), sink = std::move(sink)] {
                          if (!run(route, anthropic, request, sink)) request.finished();
                      });
}

}  // namespace parlance::server
