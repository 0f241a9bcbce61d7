// A transcription request's run and answer (see transcription_exchange.h).
#include "server/transcription_exchange.h"

#include <cmath>
#include <exception>

#include <boost/asio/post.hpp>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "server/api_error.h"
#include "server/transcriptions.h"

namespace parlance::server {
namespace {

std::string event_text(const nlohmann::json& ev) {
    return ev.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// On a worker, with the engine's end: the transcript rendered, or the error mapped to its answer.
void answer(ServerState& server, const TranscriptionForm& form, const std::exception_ptr& error, const Transcript& t,
            double audio_seconds, ResponseSink& sink) {
    auto fail = [&](const ApiError& e) {
        const nlohmann::json ev{{"type", "error"}, {"error", nlohmann::json::parse(e.body())["error"]}};
        sink.fail(e.status, e.body() + "\n", "data: " + ev.dump() + "\n\n", audio_seconds);
    };
    try {
        if (error) std::rethrow_exception(error);
        if (form.stream) {
            const nlohmann::json ev{{"type", "transcript.text.done"},
                                    {"text", t.text},
                                    {"usage", {{"type", "duration"}, {"seconds", std::ceil(t.duration)}}}};
            sink.stream_event(event_text(ev), true);
            sink.stream_ended(audio_seconds);
            return;
        }
        sink.respond(200, response_content_type(form.format),
                     render_transcript(t, form.format, true, form.word_timestamps), audio_seconds);
    } catch (const ApiError& e) {
        fail(e);
    } catch (const Error& e) {
        if (e.kind() == ErrorKind::Cancelled && server.grace_over.load())
            fail(ApiError(503,
                          "the server is shutting down; the request was cancelled at the end of the shutdown grace "
                          "period",
                          "", "shutting_down"));
        else
            fail(ApiError::from(e));
    } catch (const std::exception& e) {
        fail(ApiError(500, std::string("internal error: ") + e.what()));
    }
}

}  // namespace

void start_transcription_exchange(ServerState& server, TranscriptionRoute route, std::string&& body,
                                  AdmittedRequest request, std::shared_ptr<ResponseSink> sink) {
    // The file's place in the body, before the body moves (a short body's bytes move with it).
    const size_t offset = route.form.file.empty() ? 0 : static_cast<size_t>(route.form.file.data() - body.data());
    const size_t size = route.form.file.size();
    auto upload = std::make_shared<const std::string>(std::move(body));
    route.form.file = std::string_view(*upload).substr(offset, size);
    auto form = std::make_shared<const TranscriptionForm>(std::move(route.form));
    // Decoding the upload happens on the worker pool, never on I/O threads.
    boost::asio::post(server.workers, [&server, form, engine = route.engine, translation = route.translation,
                                       upload = std::move(upload), request = std::move(request),
                                       sink = std::move(sink)]() mutable {
        const TranscriptionContext context{
            *engine,
            server.audio_budget,
            server.options.max_audio_seconds,
            server.vad,
            request.cancelled,
            [sink] { sink->start_stream(); },
            [sink](const Segment& s) {
                sink->stream_event(event_text({{"type", "transcript.text.delta"}, {"delta", s.text}}), false);
            }};
        // The engine's end comes back to the pool (rendering a transcript is host work that has
        // no place on the engine's thread).
        start_transcription(
            *form, translation, std::move(upload), context,
            [&server, form, request, sink](std::exception_ptr error, Transcript t, double seconds) {
                boost::asio::post(server.workers,
                                  [&server, form, request, sink, error = std::move(error), t = std::move(t), seconds] {
                                      // Finished also when answering throws (no memory).
                                      const std::shared_ptr<void> finish(nullptr, [&](void*) { request.finished(); });
                                      answer(server, *form, error, t, seconds, *sink);
                                  });
            });
    });
}

}  // namespace parlance::server
