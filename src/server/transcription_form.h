// The fields of POST /v1/audio/transcriptions and /v1/audio/translations, parsed once from the
// multipart form into a typed struct. Every invalid field is an ApiError(400) naming it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/priority.h"
#include "decoding/transcript.h"
#include "server/multipart.h"

namespace parlance::server {

// chunking_strategy "server_vad" (or "auto", its defaults): OpenAI's names and defaults.
struct VadChunking {
    float threshold = 0.5f;
    int prefix_padding_ms = 300;    // speech kept before (and after) each detected stretch
    int silence_duration_ms = 200;  // a pause this long ends a stretch
};

struct TranscriptionForm {
    std::string_view file;  // the uploaded bytes (into the request body)
    std::string filename;
    std::string model;
    std::string language;  // "" = detect (transcriptions only)
    std::string prompt;
    ResponseFormat format = ResponseFormat::Json;
    float temperature = -1.0f;  // < 0: not given (default fallback schedule)
    Priority priority = Priority::Interactive;  // service_tier (an extension, as chat's): flex = Bulk
    bool word_timestamps = false;
    bool segment_timestamps = false;
    bool stream = false;
    // Only the speech Silero VAD finds is decoded (timestamps stay those of the file).
    std::optional<VadChunking> chunking;
};

// translation: the /translations route (no language field; the task is translate).
TranscriptionForm parse_transcription_form(const std::vector<FormPart>& parts, bool translation);

}  // namespace parlance::server
