// POST /v1/audio/transcriptions and /translations after their route (server/transcription_routes.h)
// admitted them: the upload decoded and queued on the engine on a worker thread
// (server/transcriptions.h; the worker is then free), and the answer through the connection's
// sink — the transcript rendered in the form's format (on a worker: rendering is host work with
// no place on the engine's thread), or, for a streamed request, a delta event per segment and the
// done event; or the error, in OpenAI's shape.
#pragma once

#include <memory>
#include <string>

#include "server/response_sink.h"
#include "server/server_state.h"
#include "server/transcription_routes.h"

namespace parlance::server {

// `body` is the request's body, which route.form's file views into: it moves into a buffer the
// audio's source may share. Returns at once (the work is posted to the server's workers);
// request.finished() runs once the request is answered.
void start_transcription_exchange(ServerState& server, TranscriptionRoute route, std::string&& body,
                                  AdmittedRequest request, std::shared_ptr<ResponseSink> sink);

}  // namespace parlance::server
