// The live sessions of a server and their statistics (see realtime_registry.h).
#include "server/realtime_registry.h"

#include <algorithm>
#include <sstream>

namespace parlance::server {

void RealtimeRegistry::opened() {
    ++active_;
    std::lock_guard<std::mutex> lock(stats_.mutex);
    ++stats_.sessions;
}

void RealtimeRegistry::started(const std::weak_ptr<RealtimeSession>& session) {
    std::lock_guard<std::mutex> lock(live_mutex_);
    std::erase_if(live_, [](const auto& w) { return w.expired(); });
    live_.push_back(session);
}

std::vector<std::shared_ptr<RealtimeSession>> RealtimeRegistry::live() {
    std::vector<std::shared_ptr<RealtimeSession>> out;
    std::lock_guard<std::mutex> lock(live_mutex_);
    for (const auto& w : live_)
        if (auto s = w.lock()) out.push_back(std::move(s));
    return out;
}

RealtimeRegistry::DecodeCounts RealtimeRegistry::decode_counts() {
    std::lock_guard<std::mutex> lock(stats_.mutex);
    return {stats_.decodes, stats_.decoder_passes, stats_.draft_tokens, stats_.draft_accepted};
}

std::string RealtimeRegistry::metrics_text() {
    Stats& st = stats_;
    std::lock_guard<std::mutex> lock(st.mutex);
    std::ostringstream os;
    os << "# HELP parlance_realtime_sessions Live /v1/realtime sessions.\n"
          "# TYPE parlance_realtime_sessions gauge\nparlance_realtime_sessions "
       << active() << "\n";
    auto counter = [&](const char* name, const char* help, uint64_t v) {
        os << "# HELP " << name << " " << help << "\n# TYPE " << name << " counter\n" << name << " " << v << "\n";
    };
    counter("parlance_realtime_sessions_total", "Live sessions opened.", st.sessions);
    counter("parlance_realtime_items_total", "Items (speech turns or commits) transcribed.", st.items);
    counter("parlance_realtime_items_failed_total", "Items whose transcription failed.", st.failed);
    counter("parlance_realtime_deltas_total", "Transcription deltas sent.", st.deltas);
    counter("parlance_realtime_errors_total", "Error events sent for invalid client events.", st.errors);
    counter("parlance_realtime_decodes_total", "Decodes of live items (interim re-decodes and final ones).",
            st.decodes);
    counter("parlance_realtime_decoder_passes_total",
            "Decoder passes of those decodes (models on the generation engine; Whisper reports none).",
            st.decoder_passes);
    os << "# HELP parlance_realtime_draft_tokens_total Self-speculation: tokens of the previous hypothesis "
          "verified as drafts by re-decodes, proposed and accepted.\n"
          "# TYPE parlance_realtime_draft_tokens_total counter\n"
       << "parlance_realtime_draft_tokens_total{kind=\"proposed\"} " << st.draft_tokens << "\n"
       << "parlance_realtime_draft_tokens_total{kind=\"accepted\"} " << st.draft_accepted << "\n";
    os << st.completed_after_speech.render("parlance_realtime_completed_after_speech_seconds",
                                           "From speech_stopped (or the commit) to the item's completed event.")
       << st.first_delta.render("parlance_realtime_first_delta_seconds",
                                "From speech_started to the item's first delta.")
       << st.commit_lag.render("parlance_realtime_commit_lag_seconds",
                               "From the arrival of the last audio the committing re-decode covered to its delta.");
    return os.str();
}

}  // namespace parlance::server
