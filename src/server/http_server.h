// The OpenAI-compatible HTTP server (Boost.Beast over Asio): routes, authentication, upload
// limits, the transcription endpoints (JSON, text, SRT, VTT, verbose_json, SSE), chat completions
// (JSON and SSE, on a language model's GenerationService), health, models,
// status, metrics and the web page. Network I/O runs on a few Asio threads; audio decoding and
// waiting for the engine run on a bounded worker pool; the engine thread owns the model.
// A client that disconnects cancels its request (a half-closed one that still reads does not).
// Protocol errors get a 4xx with the error body; every limit is in ServerOptions.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/log.h"
#include "models/speech_model.h"
#include "server/generation_run.h"
#include "server/metrics.h"
#include "server/realtime_session.h"

namespace parlance::server {

struct ServerOptions {
    std::string host = "127.0.0.1";
    int port = 8000;      // 0 = any free port (see HttpServer::port)
    std::string api_key;  // empty = no authentication
    // PEM certificate chain and private key: serve HTTPS and WSS (every connection TLS); both or
    // neither.
    std::string tls_cert, tls_key;
    bool metrics_public = false;  // /metrics without the key (when there is one)
    size_t max_upload_bytes = 25u << 20;
    double max_audio_seconds = 3 * 3600.0;
    // Decoded audio all requests may hold at once (decoding, queued, transcribing); a request
    // waits for room. Must hold one request at max_audio_seconds (16 kHz float: 64 KB a second).
    size_t audio_memory_bytes = size_t(2048) << 20;
    int io_threads = 2;
    int worker_threads = 16;  // decoding uploads, rendering answers (no request waits on one for its engine)
    // Requests waiting beyond the ones being served (serve --max-queue): in flight past the
    // workers, the engines' serving capacity (SpeechModelInfo::serving) and this many: 429.
    int max_pending = 32;
    double header_timeout_seconds = 15;            // a request's line and headers (also an idle keep-alive)
    double body_timeout_seconds = 120;             // its body, once the headers are in
    double write_timeout_seconds = 60;             // any one write to a client that stopped reading
    double shutdown_grace_seconds = 30;            // on SIGTERM: in-flight requests finish, then are cancelled
    int max_sessions = 64;                         // live /v1/realtime sessions at once (then 429)
    RealtimeOptions realtime;                      // each session's cadence, commit rule, limits
    size_t max_realtime_message_bytes = 4u << 20;  // one WebSocket message (then close 1009)
    size_t max_stored_responses = 1024;            // /v1/responses kept for previous_response_id and GET
    std::string model_id = "whisper";              // the first speech model's id (set_speech_models' first)
    std::string device = "cpu";
};

// Limits on a request's head, answered 414 / 431 with the OpenAI error body.
inline constexpr size_t kMaxTargetBytes = 8 << 10;
inline constexpr size_t kMaxHeaderBytes = 32 << 10;
inline constexpr int kMaxHeaderFields = 100;

// One loaded speech model as clients name it. The first is the default: OpenAI's own names
// (is_speech_model_alias, realtime_session.h) mean it.
struct SpeechModelInfo {
    std::string id;
    SpeechEngine* engine = nullptr;
    std::string description;
    int serving = 0;  // requests its engine runs at once (SpeechEngine::capacity): not counted as waiting
};

class HttpServer {
public:
    HttpServer(const ServerOptions& options, Logger& logger);
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    // Binds and starts the I/O threads; /health answers 503 until set_speech_models().
    void start();
    // Marks the speech models as loaded (at least one, the first under options.model_id, ids
    // unique; the engines outlive the server): requests are served from now on, a request's
    // `model` picks its engine.
    void set_speech_models(std::vector<SpeechModelInfo> models);
    // The VAD of live sessions' server_vad (null: sessions need turn_detection null). It must
    // outlive the server and run on its own Backend.
    void set_vad(VoiceActivityModel* vad);
    // The chat model of /v1/chat/completions (null: none, the route answers 404). It must
    // outlive the server.
    void set_chat(const ChatModel* chat);
    // Reads the accelerators' memory when /metrics or /v1/status is asked (unset on the CPU: none).
    void set_device_memory(std::function<std::vector<DeviceMemory>()> probe);
    int port() const { return bound_port_; }
    // Stops accepting and lets in-flight requests finish for the shutdown grace period; then
    // cancels what is left (its clients get a 503 "shutting_down") and stops the I/O threads.
    // Returns within the grace period plus a few seconds.
    void stop();
    // Blocks until SIGINT/SIGTERM, then stop(). A second signal during the drain exits the
    // process at once (status 128 + signal).
    void wait_for_signal();

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
    int bound_port_ = 0;
};

}  // namespace parlance::server
