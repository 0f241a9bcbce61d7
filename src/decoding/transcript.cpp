// Transcript rendering (see transcript.h).
#include "decoding/transcript.h"

#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace parlance {
namespace {

std::string trim(const std::string& s) {
    size_t b = s.find_first_not_of(" \t\n\r");
    if (b == std::string::npos) return "";
    size_t e = s.find_last_not_of(" \t\n\r");
    return s.substr(b, e - b + 1);
}

// Keeps JSON numbers readable and stable (OpenAI returns seconds with 2-3 decimals).
double round_to(double x, int digits) {
    double f = std::pow(10.0, digits);
    return std::round(x * f) / f;
}

}  // namespace

ResponseFormat parse_response_format(const std::string& name) {
    if (name == "json") return ResponseFormat::Json;
    if (name == "text") return ResponseFormat::Text;
    if (name == "srt") return ResponseFormat::Srt;
    if (name == "vtt") return ResponseFormat::Vtt;
    if (name == "verbose_json") return ResponseFormat::VerboseJson;
    throw Error(ErrorKind::InvalidArgument,
                "response_format '" + name + "' is not one of json, text, srt, vtt, verbose_json");
}

const char* response_format_name(ResponseFormat f) {
    switch (f) {
        case ResponseFormat::Json: return "json";
        case ResponseFormat::Text: return "text";
        case ResponseFormat::Srt: return "srt";
        case ResponseFormat::Vtt: return "vtt";
        case ResponseFormat::VerboseJson: return "verbose_json";
    }
    return "json";
}

const char* response_content_type(ResponseFormat f) {
    switch (f) {
        case ResponseFormat::Json:
        case ResponseFormat::VerboseJson: return "application/json";
        case ResponseFormat::Vtt: return "text/vtt; charset=utf-8";
        default: return "text/plain; charset=utf-8";
    }
}

std::string format_timestamp(double seconds, char sep) {
    if (seconds < 0) seconds = 0;
    long long ms = std::llround(seconds * 1000.0);
    long long h = ms / 3600000, m = (ms / 60000) % 60, s = (ms / 1000) % 60, r = ms % 1000;
    char buf[48];
    std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld%c%03lld", h, m, s, sep, r);
    return buf;
}

nlohmann::json verbose_json(const Transcript& t, bool include_segments, bool include_words) {
    nlohmann::json j;
    j["task"] = t.task;
    j["language"] = t.language;
    j["duration"] = round_to(t.duration, 3);
    j["text"] = t.text;
    if (include_segments) {
        j["segments"] = nlohmann::json::array();
        for (const Segment& s : t.segments) {
            j["segments"].push_back({{"id", s.id},
                                     {"seek", s.seek},
                                     {"start", round_to(s.start, 3)},
                                     {"end", round_to(s.end, 3)},
                                     {"text", s.text},
                                     {"tokens", s.tokens},
                                     {"temperature", s.temperature},
                                     {"avg_logprob", s.avg_logprob},
                                     {"compression_ratio", s.compression_ratio},
                                     {"no_speech_prob", s.no_speech_prob}});
        }
    }
    if (include_words) {
        j["words"] = nlohmann::json::array();
        for (const Segment& s : t.segments)
            for (const Word& w : s.words)
                j["words"].push_back({{"word", trim(w.word)},
                                      {"start", round_to(w.start, 3)},
                                      {"end", round_to(w.end, 3)}});
    }
    return j;
}

std::string render_transcript(const Transcript& t, ResponseFormat format, bool include_segments,
                              bool include_words) {
    switch (format) {
        // Token boundaries can split a UTF-8 character: invalid bytes become U+FFFD, as in
        // OpenAI's decode(errors="replace"), instead of failing the whole response.
        case ResponseFormat::Json:
            return nlohmann::json{{"text", t.text}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
        case ResponseFormat::Text: return t.text + "\n";
        case ResponseFormat::VerboseJson:
            return verbose_json(t, include_segments, include_words)
                       .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
        case ResponseFormat::Srt: {
            std::string out;
            int n = 1;
            for (const Segment& s : t.segments) {
                out += std::to_string(n++) + "\n" + format_timestamp(s.start, ',') + " --> " +
                       format_timestamp(s.end, ',') + "\n" + trim(s.text) + "\n\n";
            }
            return out;
        }
        case ResponseFormat::Vtt: {
            std::string out = "WEBVTT\n\n";
            for (const Segment& s : t.segments)
                out += format_timestamp(s.start, '.') + " --> " + format_timestamp(s.end, '.') + "\n" +
                       trim(s.text) + "\n\n";
            return out;
        }
    }
    return "";
}

}  // namespace parlance
