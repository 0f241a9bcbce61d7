// Parsing of the transcription form (see transcription_form.h).
#include "server/transcription_form.h"

#include <cstdlib>
#include <set>

#include "server/api_error.h"

namespace parlance::server {
namespace {

bool parse_bool(std::string_view v, const char* field) {
    if (v == "true" || v == "True" || v == "1") return true;
    if (v == "false" || v == "False" || v == "0") return false;
    throw ApiError(400, std::string(field) + " must be true or false", field);
}

}  // namespace

TranscriptionForm parse_transcription_form(const std::vector<FormPart>& parts, bool translation) {
    TranscriptionForm f;
    bool have_file = false, have_model = false;
    // Fields that take one value: a second one is refused rather than silently taking the last.
    static const std::set<std::string, std::less<>> kSingle = {
        "model", "language", "prompt", "response_format", "temperature", "stream", "chunking_strategy", "user"};
    std::set<std::string, std::less<>> seen;
    for (const FormPart& p : parts) {
        const std::string v(p.data);
        if (kSingle.count(p.name) && !seen.insert(p.name).second)
            throw ApiError(400, p.name + " is given more than once", p.name, "duplicate_field");
        if (p.name == "file") {
            if (have_file) throw ApiError(400, "more than one file was uploaded", "file");
            have_file = true;
            f.file = p.data;
            f.filename = p.filename;
        } else if (p.name == "model") {
            have_model = true;
            f.model = v;
        } else if (p.name == "language") {
            if (translation) throw ApiError(400, "language is not a parameter of translations", "language");
            if (v.empty() || v.size() > 32)
                throw ApiError(400, "language must be a language code like 'en'", "language", "invalid_value");
            f.language = v;
        } else if (p.name == "prompt") {
            if (v.size() > 4096) throw ApiError(400, "prompt is longer than 4096 bytes", "prompt");
            f.prompt = v;
        } else if (p.name == "response_format") {
            try {
                f.format = parse_response_format(v);
            } catch (const Error& e) {
                throw ApiError(400, e.what(), "response_format");
            }
        } else if (p.name == "temperature") {
            char* end = nullptr;
            double t = std::strtod(v.c_str(), &end);
            if (v.empty() || *end != '\0' || !(t >= 0.0 && t <= 1.0))
                throw ApiError(400, "temperature must be a number between 0 and 1", "temperature");
            f.temperature = static_cast<float>(t);
        } else if (p.name == "timestamp_granularities[]" || p.name == "timestamp_granularities") {
            if (v == "word")
                f.word_timestamps = true;
            else if (v == "segment")
                f.segment_timestamps = true;
            else
                throw ApiError(400, "timestamp_granularities[] values are word and segment",
                               "timestamp_granularities[]");
        } else if (p.name == "stream") {
            f.stream = parse_bool(v, "stream");
        } else if (p.name == "chunking_strategy" || p.name == "include[]" || p.name == "user") {
            // Accepted for compatibility; parlance windows audio itself.
        } else {
            throw ApiError(400, "unknown field " + ApiError::quote(p.name), p.name, "unknown_parameter");
        }
    }
    if (!have_file) throw ApiError(400, "the file field is required", "file");
    if (f.file.empty()) throw ApiError(400, "the uploaded file is empty", "file");
    if (!have_model || f.model.empty()) throw ApiError(400, "the model field is required", "model");
    if ((f.word_timestamps || f.segment_timestamps) && f.format != ResponseFormat::VerboseJson)
        throw ApiError(400, "timestamp_granularities[] requires response_format verbose_json",
                       "timestamp_granularities[]");
    if (f.stream && f.format != ResponseFormat::Json && f.format != ResponseFormat::Text)
        throw ApiError(400, "stream=true supports response_format json or text", "stream");
    return f;
}

}  // namespace parlance::server
