// The file transcription and translation routes' checks (see transcription_routes.h).
#include "server/transcription_routes.h"

#include "core/error.h"
#include "server/api_error.h"
#include "server/multipart.h"

namespace parlance::server {

TranscriptionRoute transcription_route(const ServerState& s, std::string_view content_type, const std::string& body,
                                       bool translation) {
    if (!s.engine.load()) throw ApiError(503, "the model is still loading", "", "loading");
    if (s.stopping.load()) throw ApiError(503, "the server is shutting down", "", "shutting_down");
    auto boundary = multipart_boundary(content_type);
    if (!boundary) throw ApiError(400, "Content-Type must be multipart/form-data with a boundary", "file");
    // The parts view into the body, as the form's file does; only the file is kept.
    const std::vector<FormPart> parts = parse_multipart(body, *boundary);
    TranscriptionRoute r;
    r.translation = translation;
    r.form = parse_transcription_form(parts, translation);
    if (r.form.chunking && !s.vad)
        throw ApiError(400, "chunking_strategy server_vad needs the Silero VAD model (serve --vad-model)",
                       "chunking_strategy", "unsupported_value");
    const SpeechModelInfo* chosen = s.speech_model(r.form.model);
    if (!chosen)
        throw ApiError(404,
                       "the model " + ApiError::quote(r.form.model) + " does not exist (this server serves " +
                           s.speech_model_ids() + ")",
                       "model", "model_not_found");
    r.engine = chosen->engine;
    ApiError::check_language_text(r.form.language, "language");
    try {
        r.engine->check_language(r.form.language);
    } catch (const Error& e) {
        throw ApiError(400, e.what(), "language", "unsupported_language");
    }
    return r;
}

}  // namespace parlance::server
