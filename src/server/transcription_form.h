// The fields of POST /v1/audio/transcriptions and /v1/audio/translations, parsed once from the
// multipart form into a typed struct. Every invalid field is an ApiError(400) naming it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "decoding/transcript.h"
#include "server/multipart.h"

namespace parlance::server {

struct TranscriptionForm {
    std::string_view file;  // the uploaded bytes (into the request body)
    std::string filename;
    std::string model;
    std::string language;  // "" = detect (transcriptions only)
    std::string prompt;
    ResponseFormat format = ResponseFormat::Json;
    float temperature = -1.0f;  // < 0: not given (default fallback schedule)
    bool word_timestamps = false;
    bool segment_timestamps = false;
    bool stream = false;
};

// translation: the /translations route (no language field; the task is translate).
TranscriptionForm parse_transcription_form(const std::vector<FormPart>& parts, bool translation);

}  // namespace parlance::server
