// The language-model APIs (chat completions, completions, Anthropic messages, Responses) after
// their route (server/chat_routes.h) admitted them: the run made on a worker thread (rendering the
// prompt, tokenizing: an ApiError there is the response), started on the generation service, and
// answered from its callbacks through the connection's sink — the whole response, or events as
// they come and the error, if any, as the stream's last event (in Anthropic's shape for
// /v1/messages).
#pragma once

#include <memory>

#include "server/chat_routes.h"
#include "server/response_sink.h"
#include "server/server_state.h"

namespace parlance::server {

// Returns at once (the run is made and started on the server's workers); request.finished() runs
// once the run has answered, or failed to start.
void start_generation_exchange(ServerState& server, GenerationRoute route, bool anthropic, AdmittedRequest request,
                               std::shared_ptr<ResponseSink> sink);

}  // namespace parlance::server
