// What the routes share (see server_state.h).
#include "server/server_state.h"

#include <algorithm>

#include "server/realtime_session.h"

namespace parlance::server {

ServerState::ServerState(const ServerOptions& o, Logger& l)
    : options(o),
      log(l),
      workers(std::max(1, o.worker_threads)),
      audio_budget(o.audio_memory_bytes),
      responses(o.max_stored_responses),
      sessions(o.max_sessions) {}

double ServerState::uptime() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
}

const SpeechModelInfo* ServerState::speech_model(const std::string& requested) const {
    for (const SpeechModelInfo& m : speech)
        if (m.id == requested) return &m;
    return is_speech_model_alias(requested) && !speech.empty() ? &speech.front() : nullptr;
}

std::string ServerState::speech_model_ids() const {
    std::string s;
    for (const SpeechModelInfo& m : speech) s += (s.empty() ? "'" : ", '") + m.id + "'";
    return s;
}

std::vector<DeviceMemory> ServerState::devices() {
    std::lock_guard<std::mutex> lock(device_mutex_);
    return device_memory_ ? device_memory_() : std::vector<DeviceMemory>{};
}

void ServerState::set_device_memory(std::function<std::vector<DeviceMemory>()> probe) {
    std::lock_guard<std::mutex> lock(device_mutex_);
    device_memory_ = std::move(probe);
}

void ServerState::track(const std::shared_ptr<std::atomic<bool>>& flag) {
    std::lock_guard<std::mutex> lock(active_mutex_);
    active_.insert(flag);
    if (grace_over.load()) flag->store(true);
}

void ServerState::untrack(const std::shared_ptr<std::atomic<bool>>& flag) {
    std::lock_guard<std::mutex> lock(active_mutex_);
    active_.erase(flag);
}

void ServerState::cancel_all() {
    std::lock_guard<std::mutex> lock(active_mutex_);
    grace_over.store(true);
    for (const auto& f : active_) f->store(true);
}

}  // namespace parlance::server
