// libFuzzer target for a live session's client events (server/realtime_protocol.h): any text
// yields an event or a RealtimeEventError, and any session.update (GA and beta shapes) settings or
// a RealtimeEventError — never a crash, and never settings outside their ranges.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "server/realtime_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace parlance::server;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    SessionUpdateContext c;
    c.model_id = "whisper";
    c.has_vad = size % 2 == 0;
    c.check_language = [](const std::string& l) {
        if (!l.empty() && l != "en" && l != "fr")
            throw parlance::Error(parlance::ErrorKind::InvalidArgument, "unknown language '" + l + "'");
    };
    try {
        const nlohmann::json ev = parse_client_event(text);
        for (const bool beta : {false, true}) {
            try {
                RealtimeSettings current;
                current.server_vad = c.has_vad;  // as a session without a VAD model starts
                const RealtimeSettings s = parse_session_update(ev, beta, current, c);
                if (s.prefix_padding_ms < 0 || s.prefix_padding_ms > 5000 || s.silence_duration_ms < 0 ||
                    s.silence_duration_ms > 10000 || !(s.threshold > 0 && s.threshold < 1) ||
                    (s.server_vad && !c.has_vad))
                    __builtin_trap();
            } catch (const RealtimeEventError&) {
            }
        }
    } catch (const RealtimeEventError&) {
    }
    return 0;
}
