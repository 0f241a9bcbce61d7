// Client events of a live session, parsed and checked (see realtime_protocol.h).
#include "server/realtime_protocol.h"

#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "server/api_error.h"
#include "server/realtime_session.h"
#include "text/json_depth.h"

namespace parlance::server {

using nlohmann::json;

// Named, not anonymous: a unity build joins this file with others that have helpers of these names.
namespace session_update {

[[noreturn]] void refuse(const std::string& code, const std::string& message, const std::string& param) {
    throw RealtimeEventError(code, message, param);
}

std::string text_of(const json& v, const std::string& param) {
    if (!v.is_string()) refuse("invalid_type", param + " must be a string", param);
    return v.get<std::string>();
}

// A string, or null for "none" (language, prompt).
std::string text_or_null(const json& v, const std::string& param) {
    if (v.is_null()) return "";
    if (!v.is_string()) refuse("invalid_type", param + " must be a string or null", param);
    return v.get<std::string>();
}

// An integer read in its full range (a value past int64 is out of range, never wrapped), then
// checked against [lo, hi].
int64_t integer_in(const json& v, const std::string& param, int64_t lo, int64_t hi) {
    const std::string range = " must be an integer between " + std::to_string(lo) + " and " + std::to_string(hi);
    if (!v.is_number_integer()) refuse("invalid_type", param + range, param);
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
        refuse("invalid_value", param + range, param);
    const int64_t x = v.get<int64_t>();
    if (x < lo || x > hi) refuse("invalid_value", param + range, param);
    return x;
}

const json* member(const json& obj, const char* key) {
    return obj.is_object() && obj.contains(key) ? &obj[key] : nullptr;
}

void read_transcription(const json& tr, const std::string& param, const SessionUpdateContext& c, RealtimeSettings& s) {
    if (tr.is_null()) return;
    if (!tr.is_object()) refuse("invalid_type", param + " must be an object", param);
    if (const json* m = member(tr, "model"); m && !m->is_null()) {
        const std::string name = text_of(*m, param + ".model");
        if (name != c.model_id && !is_speech_model_alias(name))
            refuse("model_not_found",
                   "the model " + ApiError::quote(name) + " is not this session's ('" + c.model_id +
                       "'; a session's model is chosen when it opens: /v1/realtime?model=ID)",
                   param + ".model");
        s.model = name;
    }
    if (const json* l = member(tr, "language")) {
        const std::string language = text_or_null(*l, param + ".language");
        try {
            ApiError::check_language_text(language, param + ".language");
        } catch (const ApiError& e) {
            refuse("unsupported_language", e.what(), param + ".language");
        }
        if (c.check_language) {
            try {
                c.check_language(language);
            } catch (const Error& e) {
                refuse("unsupported_language", e.what(), param + ".language");
            }
        }
        s.language = language;
    }
    if (const json* p = member(tr, "prompt")) s.prompt = text_or_null(*p, param + ".prompt");
}

void read_turn_detection(const json& td, const std::string& param, const SessionUpdateContext& c, RealtimeSettings& s) {
    if (td.is_null()) {
        s.server_vad = false;
        return;
    }
    if (!td.is_object()) refuse("invalid_type", param + " must be an object or null", param);
    const json* type = member(td, "type");
    const std::string t = type && !type->is_null() ? text_of(*type, param + ".type") : "server_vad";
    if (t != "server_vad" && t != "semantic_vad")
        refuse("invalid_value", param + ".type is server_vad, semantic_vad or null", param + ".type");
    if (!c.has_vad)
        refuse("vad_unavailable", "this server has no VAD model (serve --vad-model); use turn_detection null", param);
    s.server_vad = true;
    std::string eagerness = "auto";
    if (const json* e = member(td, "eagerness"); e && !e->is_null()) {
        eagerness = text_of(*e, param + ".eagerness");
        if (eagerness != "low" && eagerness != "medium" && eagerness != "high" && eagerness != "auto")
            refuse("invalid_value", param + ".eagerness is low, medium, high or auto", param + ".eagerness");
        if (t != "semantic_vad") refuse("invalid_value", param + ".eagerness is semantic_vad's", param + ".eagerness");
    }
    if (t == "semantic_vad")  // eagerness as the longest wait: low 8 s, medium 4 s, high 2 s, auto 1 s
        s.silence_duration_ms = eagerness == "low"      ? 8000
                                : eagerness == "high"   ? 2000
                                : eagerness == "medium" ? 4000
                                                        : 1000;
    if (const json* x = member(td, "threshold"); x && !x->is_null()) {
        if (!x->is_number()) refuse("invalid_type", param + ".threshold must be a number", param + ".threshold");
        const double v = x->get<double>();
        if (!(v > 0.0 && v < 1.0))
            refuse("invalid_value", param + ".threshold must be between 0 and 1", param + ".threshold");
        s.threshold = static_cast<float>(v);
    }
    if (const json* x = member(td, "prefix_padding_ms"); x && !x->is_null())
        s.prefix_padding_ms = static_cast<int>(integer_in(*x, param + ".prefix_padding_ms", 0, 5000));
    if (const json* x = member(td, "silence_duration_ms"); x && !x->is_null())
        s.silence_duration_ms = static_cast<int>(integer_in(*x, param + ".silence_duration_ms", 0, 10000));
}

RealtimeAudioFormat ga_format(const json& f, const std::string& param) {
    if (!f.is_object() || !f.contains("type") || !f["type"].is_string())
        refuse("invalid_value",
               "audio.input.format is {type: audio/pcm, rate: 24000 (or 16000)}, audio/pcmu or audio/pcma", param);
    const std::string t = f["type"];
    if (t == "audio/pcm") {
        const json* r = member(f, "rate");
        const int64_t rate = r && !r->is_null() ? integer_in(*r, param + ".rate", 8000, 48000) : 24000;
        if (rate == 24000) return RealtimeAudioFormat::Pcm24k;
        if (rate == 16000) return RealtimeAudioFormat::Pcm16k;
        refuse("invalid_value", param + ".rate is 24000 or 16000", param + ".rate");
    }
    if (t == "audio/pcmu") return RealtimeAudioFormat::Pcmu;
    if (t == "audio/pcma") return RealtimeAudioFormat::Pcma;
    refuse("invalid_value", "audio.input.format is {type: audio/pcm, rate: 24000 (or 16000)}, audio/pcmu or audio/pcma",
           param);
}

}  // namespace session_update

bool is_realtime_model_alias(const std::string& name) {
    return is_speech_model_alias(name) || (name.rfind("gpt-", 0) == 0 && name.find("realtime") != std::string::npos);
}

json parse_client_event(std::string_view text) {
    if (!json_within_depth(text))
        session_update::refuse(
            "json_too_deep",
            "the message nests deeper than " + std::to_string(kMaxJsonDepth) + " levels of arrays and objects", "");
    json ev = json::parse(text, nullptr, false);
    if (ev.is_discarded() || !ev.is_object())
        session_update::refuse("invalid_json", "the message is not a JSON object", "");
    if (!ev.contains("type") || !ev["type"].is_string())
        session_update::refuse("missing_type", "the event has no \"type\"", "type");
    return ev;
}

RealtimeSettings parse_session_update(const json& ev, bool beta_shape, const RealtimeSettings& current,
                                      const SessionUpdateContext& c) {
    if (!ev.contains("session") || !ev["session"].is_object())
        session_update::refuse("missing_session", "the event has no \"session\" object", "session");
    const json& s = ev["session"];
    RealtimeSettings next = current;
    if (beta_shape) {
        if (const json* f = session_update::member(s, "input_audio_format"); f && !f->is_null()) {
            const std::string v = f->is_string() ? f->get<std::string>() : "";
            if (v == "pcm16")
                next.format = RealtimeAudioFormat::Pcm24k;
            else if (v == "g711_ulaw")
                next.format = RealtimeAudioFormat::Pcmu;
            else if (v == "g711_alaw")
                next.format = RealtimeAudioFormat::Pcma;
            else
                session_update::refuse("invalid_value", "input_audio_format is pcm16, g711_ulaw or g711_alaw",
                                       "session.input_audio_format");
        }
        if (const json* tr = session_update::member(s, "input_audio_transcription"))
            session_update::read_transcription(*tr, "session.input_audio_transcription", c, next);
        if (const json* td = session_update::member(s, "turn_detection"))
            session_update::read_turn_detection(*td, "session.turn_detection", c, next);
        return next;
    }
    if (const json* t = session_update::member(s, "type"); t && !t->is_null() && *t != "transcription")
        session_update::refuse("invalid_value",
                               "this server serves transcription sessions (session.type \"transcription\")",
                               "session.type");
    const json* audio = session_update::member(s, "audio");
    if (audio && !audio->is_null() && !audio->is_object())
        session_update::refuse("invalid_type", "session.audio must be an object", "session.audio");
    const json* in = audio ? session_update::member(*audio, "input") : nullptr;
    if (in && !in->is_null() && !in->is_object())
        session_update::refuse("invalid_type", "session.audio.input must be an object", "session.audio.input");
    const std::string where = "session.audio.input.";
    if (in && in->is_object()) {
        if (const json* f = session_update::member(*in, "format"); f && !f->is_null())
            next.format = session_update::ga_format(*f, where + "format");
        if (const json* tr = session_update::member(*in, "transcription"))
            session_update::read_transcription(*tr, where + "transcription", c, next);
        if (const json* td = session_update::member(*in, "turn_detection"))
            session_update::read_turn_detection(*td, where + "turn_detection", c, next);
    }
    if (const json* inc = session_update::member(s, "include"); inc && !inc->is_null()) {
        if (!inc->is_array())
            session_update::refuse("invalid_type", "session.include must be an array of strings", "session.include");
        if (inc->size() > 16)
            session_update::refuse("invalid_value", "session.include has at most 16 entries", "session.include");
        next.include.clear();
        for (size_t i = 0; i < inc->size(); ++i)
            next.include.push_back(session_update::text_of((*inc)[i], "session.include[" + std::to_string(i) + "]"));
    }
    return next;
}

json session_object(const RealtimeSettings& settings, const std::string& id, bool beta) {
    json td = settings.server_vad ? json{{"type", "server_vad"},
                                         {"threshold", settings.threshold},
                                         {"prefix_padding_ms", settings.prefix_padding_ms},
                                         {"silence_duration_ms", settings.silence_duration_ms}}
                                  : json();
    json transcription{{"model", settings.model},
                       {"language", settings.language.empty() ? json() : json(settings.language)},
                       {"prompt", settings.prompt}};
    if (beta) {
        const char* fmt = settings.format == RealtimeAudioFormat::Pcmu   ? "g711_ulaw"
                          : settings.format == RealtimeAudioFormat::Pcma ? "g711_alaw"
                                                                         : "pcm16";
        return {{"id", id},
                {"object", "realtime.transcription_session"},
                {"input_audio_format", fmt},
                {"input_audio_transcription", transcription},
                {"turn_detection", td},
                {"input_audio_noise_reduction", nullptr},
                {"include", settings.include}};
    }
    json format =
        settings.format == RealtimeAudioFormat::Pcmu ? json{{"type", "audio/pcmu"}}
        : settings.format == RealtimeAudioFormat::Pcma
            ? json{{"type", "audio/pcma"}}
            : json{{"type", "audio/pcm"}, {"rate", settings.format == RealtimeAudioFormat::Pcm16k ? 16000 : 24000}};
    return {{"type", "transcription"},
            {"id", id},
            {"object", "realtime.transcription_session"},
            {"audio",
             {{"input",
               {{"format", format},
                {"transcription", transcription},
                {"noise_reduction", nullptr},
                {"turn_detection", td}}}}},
            {"include", settings.include}};
}

}  // namespace parlance::server
