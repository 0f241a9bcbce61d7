// What every route of the HTTP server shares (http_connection.cpp's connections and the route
// handlers in their own files read it): the options, the loaded models, the request counters and
// limits, the stores. Owned by the HttpServer; its connections and workers hold references.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/thread_pool.hpp>

#include "core/log.h"
#include "models/speech_model.h"
#include "models/voice_activity.h"
#include "server/audio_budget.h"
#include "server/generation_run.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/realtime_registry.h"
#include "server/responses_api.h"
#include "server/session_slots.h"

namespace parlance::server {

struct ServerState {
    ServerState(const ServerOptions& o, Logger& l);

    ServerOptions options;
    Logger& log;
    // The live sessions (SIGTERM's drain) and their statistics; before the workers, whose pending
    // decodes may hold a session until they are destroyed.
    RealtimeRegistry realtime;
    boost::asio::thread_pool workers;  // uploads decoded, answers rendered: never on I/O threads
    Metrics metrics;
    AudioBudget audio_budget;
    VoiceActivityModel* vad = nullptr;
    // The first speech model's engine, stored last by set_speech_models: non-null means `speech`
    // is complete (it is never changed after).
    std::atomic<SpeechEngine*> engine{nullptr};
    std::vector<SpeechModelInfo> speech;
    std::atomic<const ChatModel*> chat{nullptr};
    ResponseStore responses;
    std::string model_description;
    std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
    std::atomic<int> in_flight{0};
    std::atomic<int> serving{0};  // the speech engines' SpeechModelInfo::serving, summed
    std::atomic<bool> stopping{false};
    SessionSlots sessions;  // --max-sessions, claimed at the upgrade
    // Set when the shutdown grace ran out: cancelled requests then say so to their clients.
    std::atomic<bool> grace_over{false};

    double uptime() const;
    // Whether another request would pass what the server holds: the requests decoding on the
    // workers, the ones its engines serve and --max-queue waiting (then 429).
    bool full() const { return in_flight.load() >= options.worker_threads + serving.load() + options.max_pending; }
    // The loaded speech model a request names: its id, or an alias of the first. Null when none.
    const SpeechModelInfo* speech_model(const std::string& requested) const;
    // "'a', 'b'": the loaded speech models' ids, as a 404 for an unknown one lists them.
    std::string speech_model_ids() const;
    // The accelerators' memory now (none on the CPU); set_device_memory sets how it is read.
    std::vector<DeviceMemory> devices();
    void set_device_memory(std::function<std::vector<DeviceMemory>()> probe);

    // The cancellation flags of the requests in flight: cancel_all() sets them when the shutdown
    // grace runs out (and any tracked after).
    void track(const std::shared_ptr<std::atomic<bool>>& flag);
    void untrack(const std::shared_ptr<std::atomic<bool>>& flag);
    void cancel_all();

private:
    std::mutex device_mutex_;  // device_memory_ is set while requests may be served
    std::function<std::vector<DeviceMemory>()> device_memory_;
    std::mutex active_mutex_;
    std::set<std::shared_ptr<std::atomic<bool>>> active_;
};

}  // namespace parlance::server
