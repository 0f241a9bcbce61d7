// The client side of OpenAI's realtime transcription protocol, apart from any session: a client
// event's text parsed (depth-bounded), and a session.update (GA shape) or
// transcription_session.update (beta shape) checked field by field into the settings it asks
// for. Nothing here touches audio or the socket, so every event a client can send is fuzzed
// against it (tests/fuzz/fuzz_realtime_event.cpp).
//
// Validation is as strict as the HTTP routes': a field of the wrong type, an unknown enum value
// or a number out of range is refused with an error naming it (integers are read into their full
// range before they are checked, never narrowed first); a refused update changes nothing.
// Unknown keys are ignored, as OpenAI's SDKs send fields this server has no use for.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace parlance::server {

enum class RealtimeAudioFormat { Pcm24k, Pcm16k, Pcmu, Pcma };

// What a session.update sets (the defaults are a new session's).
struct RealtimeSettings {
    RealtimeAudioFormat format = RealtimeAudioFormat::Pcm24k;
    std::string language, prompt, model;
    bool server_vad = true;
    float threshold = 0.5f;
    int prefix_padding_ms = 300, silence_duration_ms = 500;
    std::vector<std::string> include;
};

// A client event refused: the `error` event's code, message and param.
class RealtimeEventError : public std::runtime_error {
public:
    RealtimeEventError(std::string code, const std::string& message, std::string param = "")
        : std::runtime_error(message), code(std::move(code)), param(std::move(param)) {}
    std::string code, param;
};

// What an update is checked against: the session's model id (other names but OpenAI's aliases are
// refused), whether the server has a VAD model, and the model's language check (throws
// parlance::Error naming an unknown language).
struct SessionUpdateContext {
    std::string model_id;
    bool has_vad = false;
    std::function<void(const std::string&)> check_language;
};

// The event as a JSON object with a string "type"; refused when it is not JSON, nests deeper than
// kMaxJsonDepth ("json_too_deep"), is not an object or has no type.
nlohmann::json parse_client_event(std::string_view text);

// The settings `current` becomes under the update event `ev` (its "session" object).
RealtimeSettings parse_session_update(const nlohmann::json& ev, bool beta_shape, const RealtimeSettings& current,
                                      const SessionUpdateContext& context);

// The session object of session.created / session.updated (the GA shape), or of
// transcription_session.created / .updated (beta): the settings as OpenAI's server reports them.
nlohmann::json session_object(const RealtimeSettings& settings, const std::string& id, bool beta);

// A ?model= value that means a session's default model although it names none loaded: OpenAI's
// transcription aliases (is_speech_model_alias) and its realtime model names (gpt-realtime,
// gpt-4o-realtime-preview, ... — what the official SDKs put there).
bool is_realtime_model_alias(const std::string& name);

}  // namespace parlance::server
