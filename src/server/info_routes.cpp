// The read-only routes (see info_routes.h).
#include "server/info_routes.h"

#include "server/realtime_session.h"

namespace parlance::server {
namespace {

nlohmann::json model_object(const std::string& id) {
    return {{"id", id}, {"object", "model"}, {"created", 0}, {"owned_by", "parlance"}};
}

}  // namespace

bool ready(const ServerState& s) {
    return s.engine.load() != nullptr;
}

nlohmann::json models_list(const ServerState& s) {
    nlohmann::json data = nlohmann::json::array();
    if (ready(s))
        for (const SpeechModelInfo& m : s.speech) data.push_back(model_object(m.id));
    else
        data.push_back(model_object(s.options.model_id));
    if (const ChatModel* c = s.chat.load()) data.push_back(model_object(c->id));
    return {{"object", "list"}, {"data", data}};
}

std::optional<nlohmann::json> model_info(const ServerState& s, const std::string& id) {
    const ChatModel* c = s.chat.load();
    if (c && id == c->id) return model_object(id);
    if (ready(s) ? !s.speech_model(id) : id != s.options.model_id) return std::nullopt;
    return model_object(id);
}

nlohmann::json status_json(ServerState& s) {
    SpeechEngine* e = s.engine.load();
    nlohmann::json j{{"model", s.options.model_id},
                     {"description", s.model_description},
                     {"device", s.options.device},
                     {"ready", e != nullptr},
                     {"uptime_seconds", s.uptime()},
                     {"in_flight_requests", s.in_flight.load()},
                     {"resident_memory_bytes", resident_bytes()},
                     {"audio_memory",
                      {{"capacity_bytes", s.audio_budget.capacity()},
                       {"used_bytes", s.audio_budget.used()},
                       {"waiting_requests", s.audio_budget.waiting()}}}};
    if (e) {
        const EngineStats st = e->stats();
        j["queue"] = st.queued;
        j["active_requests"] = st.active;
        j["free_cache_slots"] = st.free_slots;
        j["completed"] = st.completed;
        j["cancelled"] = st.cancelled;
        j["failed"] = st.failed;
        j["decode_tokens"] = st.decode_tokens;
        j["audio_seconds"] = st.audio_seconds;
        j["kv_cache"] = {{"capacity_bytes", st.kv_capacity_bytes},
                         {"block_bytes", st.kv_block_bytes},
                         {"total_blocks", st.kv.total_blocks},
                         {"used_blocks", st.kv.used_blocks},
                         {"cached_blocks", st.kv.cached_blocks},
                         {"reserved_blocks", st.kv_reserved_blocks},
                         {"hypothesis_blocks", st.kv_hypothesis_blocks},
                         {"prefix_hit_tokens", st.kv.prefix_hits},
                         {"evictions", st.kv.evictions}};
    }
    nlohmann::json devices = nlohmann::json::array();
    for (const DeviceMemory& d : s.devices())
        devices.push_back({{"name", d.name}, {"free_bytes", d.free}, {"total_bytes", d.total}});
    if (!devices.empty()) j["devices"] = devices;
    if (e) {  // every speech model (the fields above are the first's)
        nlohmann::json models = nlohmann::json::array();
        for (const SpeechModelInfo& m : s.speech) {
            const EngineStats ms = m.engine->stats();
            models.push_back({{"id", m.id},
                              {"description", m.description},
                              {"queue", ms.queued},
                              {"active_requests", ms.active},
                              {"completed", ms.completed},
                              {"audio_seconds", ms.audio_seconds}});
        }
        j["speech_models"] = models;
    }
    if (const ChatModel* c = s.chat.load()) {
        const GenerationServiceStats g = c->service->stats();
        j["chat"] = {{"model", c->id},
                     {"queue", g.queued},
                     {"running_sequences", g.running},
                     {"completed", g.completed},
                     {"cancelled", g.cancelled},
                     {"failed", g.failed},
                     {"prompt_tokens", g.prompt_tokens},
                     {"cached_prompt_tokens", g.cached_prompt_tokens},
                     {"generated_tokens", g.generated_tokens},
                     {"kv_cache",
                      {{"capacity_bytes", g.kv_bytes},
                       {"total_blocks", g.kv.total_blocks},
                       {"used_blocks", g.kv.used_blocks},
                       {"cached_blocks", g.kv.cached_blocks},
                       {"prefix_hit_tokens", g.kv.prefix_hits},
                       {"evictions", g.kv.evictions}}}};
    }
    return j;
}

std::string metrics_text(ServerState& s) {
    SpeechEngine* e = s.engine.load();
    EngineStats st;
    if (e) st = e->stats();
    const ChatModel* c = s.chat.load();
    std::string text = s.metrics.render(e ? &st : nullptr, s.uptime()) + s.realtime.metrics_text();
    if (c) text += generation_metrics_text(c->service->stats());
    if (c && c->latency) text += c->latency->render();
    const std::vector<DeviceMemory> devices = s.devices();
    return text + device_memory_text(devices) + gpu_graph_text(devices, gpu_graph_counts());
}

}  // namespace parlance::server
