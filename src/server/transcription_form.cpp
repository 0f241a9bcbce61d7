// Parsing of the transcription form (see transcription_form.h).
#include "server/transcription_form.h"

#include <cstdlib>
#include <set>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/json_fields.h"
#include "text/json_depth.h"

namespace parlance::server {
namespace {

// One field of a server_vad chunking strategy, as a JSON value or the text of a form part.
void set_chunking_field(VadChunking& c, const std::string& key, const nlohmann::json& v) {
    const std::string param = "chunking_strategy." + key;
    auto number = [&](double lo, double hi) {
        double x;
        if (v.is_number()) {
            x = v.get<double>();
        } else if (v.is_string()) {
            const std::string t = v.get<std::string>();
            char* end = nullptr;
            x = std::strtod(t.c_str(), &end);
            if (t.empty() || *end != '\0') throw ApiError(400, param + " must be a number", param);
        } else {
            throw ApiError(400, param + " must be a number", param);
        }
        if (!(x >= lo && x <= hi))
            throw ApiError(400,
                           param + " must be between " + std::to_string(static_cast<int>(lo)) + " and " +
                               std::to_string(static_cast<int>(hi)),
                           param);
        return x;
    };
    if (key == "type") {
        if (v != "server_vad") throw ApiError(400, "chunking_strategy.type must be \"server_vad\"", param);
    } else if (key == "threshold") {
        c.threshold = static_cast<float>(number(0, 1));
    } else if (key == "prefix_padding_ms") {
        c.prefix_padding_ms = static_cast<int>(number(0, 10000));
    } else if (key == "silence_duration_ms") {
        c.silence_duration_ms = static_cast<int>(number(0, 10000));
    } else {
        throw ApiError(400, "unknown field " + param, param, "unknown_parameter");
    }
}

// chunking_strategy: "auto", or a server_vad object as JSON text.
VadChunking parse_chunking(const std::string& v) {
    VadChunking c;
    if (v == "auto") return c;
    if (!json_within_depth(v))
        throw ApiError(400, "chunking_strategy nests deeper than " + std::to_string(kMaxJsonDepth) + " levels",
                       "chunking_strategy", "json_too_deep");
    const nlohmann::json j = nlohmann::json::parse(v, nullptr, false);
    if (!j.is_object() || !j.contains("type"))
        throw ApiError(400, "chunking_strategy must be \"auto\" or {\"type\": \"server_vad\", ...}",
                       "chunking_strategy");
    for (const auto& [k, x] : j.items()) set_chunking_field(c, k, x);
    return c;
}

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
        "model",  "language",          "prompt", "response_format", "temperature",
        "stream", "chunking_strategy", "user",   "service_tier"};
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
        } else if (p.name == "service_tier") {
            f.priority = fields::service_tier(v);
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
        } else if (p.name == "chunking_strategy") {
            if (f.chunking)
                throw ApiError(400, "chunking_strategy is given twice", "chunking_strategy", "duplicate_field");
            f.chunking = parse_chunking(v);
        } else if (p.name.rfind("chunking_strategy[", 0) == 0 && p.name.back() == ']') {
            // The SDKs' form encoding of an object: chunking_strategy[type]=server_vad, ...
            const std::string key = p.name.substr(18, p.name.size() - 19);
            if (!seen.insert(p.name).second)
                throw ApiError(400, p.name + " is given more than once", p.name, "duplicate_field");
            if (!f.chunking) f.chunking = VadChunking{};
            set_chunking_field(*f.chunking, key, nlohmann::json(v));
            if (key == "type") seen.insert("chunking_strategy[type]");
        } else if (p.name == "include[]" || p.name == "user") {
            // Accepted for compatibility (logprobs are not returned by this endpoint).
        } else {
            throw ApiError(400, "unknown field " + ApiError::quote(p.name), p.name, "unknown_parameter");
        }
    }
    if (f.chunking && seen.count("chunking_strategy") == 0 && seen.count("chunking_strategy[type]") == 0)
        throw ApiError(400, "chunking_strategy[type] is required (\"server_vad\")", "chunking_strategy.type");
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
