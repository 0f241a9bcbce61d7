// The OpenAI-compatible HTTP server (Boost.Beast over Asio): routes, authentication, upload
// limits, the transcription endpoints (JSON, text, SRT, VTT, verbose_json, SSE), health, models,
// status, metrics and the web page. Network I/O runs on a few Asio threads; audio decoding and
// waiting for the engine run on a bounded worker pool; the engine thread owns the model.
// A client that disconnects cancels its request. stop() drains in-flight requests.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "core/log.h"
#include "models/speech_model.h"
#include "server/metrics.h"

namespace parlance::server {

struct ServerOptions {
    std::string host = "127.0.0.1";
    int port = 8000;                 // 0 = any free port (see HttpServer::port)
    std::string api_key;             // empty = no authentication
    size_t max_upload_bytes = 25u << 20;
    double max_audio_seconds = 3 * 3600.0;
    int io_threads = 2;
    int worker_threads = 16;         // requests decoding audio or waiting for the engine
    int max_pending = 32;            // more requests than workers + this many in flight: 429
    std::string model_id = "whisper";  // the `model` field clients send (also accepts whisper-1)
    std::string device = "cpu";
};

class HttpServer {
public:
    HttpServer(const ServerOptions& options, Logger& logger);
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    // Binds and starts the I/O threads; /health answers 503 until set_engine().
    void start();
    // Marks the model as loaded: requests are served from now on.
    void set_engine(SpeechEngine* engine, const std::string& model_description);
    int port() const { return bound_port_; }
    // Stops accepting, lets in-flight requests finish (drain), then stops the I/O threads.
    void stop();
    // Blocks until SIGINT/SIGTERM, then stop().
    void wait_for_signal();

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
    int bound_port_ = 0;
};

}  // namespace parlance::server
