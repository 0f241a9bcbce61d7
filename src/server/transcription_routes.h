// POST /v1/audio/transcriptions and /v1/audio/translations as the router sees them: the checks a
// request passes before it may be queued (the model loaded, a multipart form, a served model, a
// language it knows, server_vad available), each answered with OpenAI's error body naming the
// field. What runs it afterwards is server/transcriptions.h.
#pragma once

#include <string>
#include <string_view>

#include "server/server_state.h"
#include "server/transcription_form.h"

namespace parlance::server {

struct TranscriptionRoute {
    TranscriptionForm form;  // its file views into the request's body
    SpeechEngine* engine = nullptr;
    bool translation = false;  // /v1/audio/translations
};

// Throws ApiError for what the client must change (400, 404, 415) or wait for (503).
TranscriptionRoute transcription_route(const ServerState& s, std::string_view content_type, const std::string& body,
                                       bool translation);

}  // namespace parlance::server
