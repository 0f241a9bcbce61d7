// The server's read-only routes, apart from the connection that carries them: GET /health,
// /v1/models, /v1/models/{id}, /v1/status and /metrics. Each builds its answer from ServerState.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "server/server_state.h"

namespace parlance::server {

// /health: whether the speech models are loaded (then 200 {"status": "ok"}, else 503 "loading").
bool ready(const ServerState& s);
// /v1/models: every loaded model (the speech models, then the chat model), OpenAI's list shape.
nlohmann::json models_list(const ServerState& s);
// /v1/models/{id}: the model, or nullopt when no loaded model has that id (a 404).
std::optional<nlohmann::json> model_info(const ServerState& s, const std::string& id);
// /v1/status: the engines' queues, requests, KV caches, memory, devices and the chat model's.
nlohmann::json status_json(ServerState& s);
// /metrics: the Prometheus text (HTTP, the first speech engine, live sessions, chat, devices).
std::string metrics_text(ServerState& s);

}  // namespace parlance::server
