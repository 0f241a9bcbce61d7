// The live sessions of one server (or of one `parlance stream` run) and their statistics: the
// registry SIGTERM's drain walks, the sessions-per-server count, and the counters and latency
// histograms /metrics shows. Owned by the server object (ServerState), handed to each session.
// Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "server/latency_histogram.h"

namespace parlance::server {

class RealtimeSession;

class RealtimeRegistry {
public:
    // Counters and latency histograms of this registry's sessions (lock `mutex` for the counters;
    // the histograms lock themselves).
    struct Stats {
        std::mutex mutex;
        uint64_t sessions = 0, items = 0, failed = 0, deltas = 0, errors = 0;
        // Decodes (interim and final), their decoder passes, and the expected tokens they verified.
        uint64_t decodes = 0, decoder_passes = 0, draft_tokens = 0, draft_accepted = 0;
        LatencyHistogram completed_after_speech{{0.05, 0.1, 0.15, 0.25, 0.5, 1, 2, 5, 10}};
        LatencyHistogram first_delta{{0.25, 0.5, 1, 1.5, 2, 3, 5, 10}};
        // From the arrival of the last audio a committing re-decode covered to its delta (the
        // words themselves are older: a word is committed once later hypotheses agree on it).
        LatencyHistogram commit_lag{{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10}};
    };
    Stats& stats() { return stats_; }

    // A session was made (counted) and one ended (its destructor); a started one is kept for live().
    void opened();
    void closed() { --active_; }
    void started(const std::weak_ptr<RealtimeSession>& session);
    // Sessions alive now.
    int active() const { return active_.load(); }
    std::vector<std::shared_ptr<RealtimeSession>> live();

    struct DecodeCounts {
        uint64_t decodes = 0, decoder_passes = 0, draft_tokens = 0, draft_accepted = 0;
    };
    // Decodes of live items, their decoder passes, self-speculation's drafted and accepted tokens.
    DecodeCounts decode_counts();
    // Prometheus text: live sessions, items, deltas, errors, decodes, and the latencies end of
    // speech (speech_stopped or the commit) -> completed, speech start -> first delta, commit lag.
    std::string metrics_text();

private:
    Stats stats_;
    std::atomic<int> active_{0};
    std::mutex live_mutex_;
    std::vector<std::weak_ptr<RealtimeSession>> live_;  // expired entries dropped as sessions open
};

}  // namespace parlance::server
