// The HTTP server (see http_server.h).
#include "server/http_server.h"

#include <csignal>
#include <ctime>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>

#include "server/http_connection.h"
#include "server/realtime_connection.h"
#include "server/server_state.h"

namespace parlance::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {
// TLS 1.2 and later, the certificate chain and key from PEM files (refused at start, naming the
// file and OpenSSL's reason).
std::unique_ptr<asio::ssl::context> make_tls_context(const std::string& cert, const std::string& key) {
    auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
    ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                     asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1 |
                     asio::ssl::context::single_dh_use);
    beast::error_code ec;
    ctx->use_certificate_chain_file(cert, ec);
    if (ec) throw Error(ErrorKind::InvalidArgument, "--tls-cert " + cert + ": " + ec.message());
    ctx->use_private_key_file(key, asio::ssl::context::pem, ec);
    if (ec)
        throw Error(ErrorKind::InvalidArgument,
                    "--tls-key " + key + ": " + ec.message() + " (is it the private key of --tls-cert " + cert + "?)");
    if (SSL_CTX_check_private_key(ctx->native_handle()) != 1)
        throw Error(ErrorKind::InvalidArgument, "--tls-key " + key + " does not match the certificate " + cert);
    return ctx;
}
}  // namespace

struct HttpServer::Impl : ServerState {
    asio::io_context io;
    tcp::acceptor acceptor{io};
    std::vector<std::thread> io_threads;
    // --tls-cert / --tls-key: every connection is TLS (HTTPS and WSS on the one port).
    std::unique_ptr<asio::ssl::context> tls;

    Impl(const ServerOptions& o, Logger& l) : ServerState(o, l) {}
    void accept();
};

void HttpServer::Impl::accept() {
    acceptor.async_accept(asio::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
        if (ec) return;  // closed by stop()
        start_http_connection(std::move(socket), tls.get(), *this);
        accept();
    });
}

HttpServer::HttpServer(const ServerOptions& options, Logger& logger) : impl_(std::make_unique<Impl>(options, logger)) {}

HttpServer::~HttpServer() {
    stop();
}

void HttpServer::start() {
    auto& d = *impl_;
    if (d.options.audio_memory_bytes < pcm_bytes(d.options.max_audio_seconds))
        throw Error(ErrorKind::InvalidArgument,
                    "--audio-memory-mb " + std::to_string(d.options.audio_memory_bytes >> 20) +
                        " cannot hold one request at --max-audio-seconds " +
                        std::to_string(static_cast<long long>(d.options.max_audio_seconds)) + " (" +
                        std::to_string((pcm_bytes(d.options.max_audio_seconds) + (1u << 20) - 1) >> 20) +
                        " MiB of 16 kHz float audio)");
    if (d.options.tls_cert.empty() != d.options.tls_key.empty())
        throw Error(ErrorKind::InvalidArgument, "--tls-cert and --tls-key go together");
    if (!d.options.tls_cert.empty()) d.tls = make_tls_context(d.options.tls_cert, d.options.tls_key);
    beast::error_code ec;
    auto address = asio::ip::make_address(d.options.host, ec);
    if (ec) throw Error(ErrorKind::InvalidArgument, "--host '" + d.options.host + "' is not an IP address");
    tcp::endpoint ep(address, static_cast<unsigned short>(d.options.port));
    d.acceptor.open(ep.protocol(), ec);
    if (!ec) d.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) d.acceptor.bind(ep, ec);
    if (!ec) d.acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
        throw Error(ErrorKind::Io,
                    "cannot listen on " + d.options.host + ":" + std::to_string(d.options.port) + ": " + ec.message());
    bound_port_ = d.acceptor.local_endpoint().port();
    d.accept();
    for (int i = 0; i < std::max(1, d.options.io_threads); ++i) d.io_threads.emplace_back([&d] { d.io.run(); });
}

void HttpServer::set_speech_models(std::vector<SpeechModelInfo> models) {
    // options.model_id is read by every request thread from the start: it must already be the
    // first model's id (cmd_serve sets it before the server starts).
    if (models.empty() || impl_->engine.load() || models.front().id != impl_->options.model_id)
        throw Error(ErrorKind::Internal, "set_speech_models: once, the first model under options.model_id");
    impl_->model_description = models.front().description;
    int serving = 0;
    for (const SpeechModelInfo& m : models) serving += std::max(0, m.serving);
    impl_->serving.store(serving);
    impl_->speech = std::move(models);
    impl_->engine.store(impl_->speech.front().engine);
}

void HttpServer::set_chat(const ChatModel* chat) {
    impl_->chat.store(chat);
}

void HttpServer::set_device_memory(std::function<std::vector<DeviceMemory>()> probe) {
    impl_->set_device_memory(std::move(probe));
}

void HttpServer::set_vad(VoiceActivityModel* vad) {
    impl_->vad = vad;
}

void HttpServer::stop() {
    auto& d = *impl_;
    if (d.stopping.exchange(true)) return;
    asio::post(d.io, [&d] {
        beast::error_code ec;
        d.acceptor.close(ec);
    });
    // Live sessions finish the speech they received (its transcript goes out), then close with
    // 1001 (going away); they count as in flight for the grace period.
    RealtimeSession::shut_down_all(d.realtime);
    bool sessions_count = true;  // within the grace period only: after it they are cut off
    auto busy = [&] { return d.in_flight.load() > 0 || (sessions_count && d.realtime.active() > 0); };
    auto wait_idle = [&](std::chrono::milliseconds limit) {
        const auto until = Clock::now() + limit;
        while (busy() && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        return !busy();
    };
    // Drain: in-flight requests finish and their responses are written, for the grace period.
    if (!wait_idle(std::chrono::milliseconds(
            static_cast<int64_t>(std::max(0.0, d.options.shutdown_grace_seconds) * 1000.0)))) {
        sessions_count = false;
        d.log.warn("shutdown grace of ", d.options.shutdown_grace_seconds, " s over: cancelling ", d.in_flight.load(),
                   " requests, closing ", d.realtime.active(), " live sessions");
        // Cancellation is seen between decoder steps and every second of decoded audio.
        d.cancel_all();
        if (!wait_idle(std::chrono::seconds(5))) {
            // A request still waiting on the engine: end the engine's work outright.
            if (d.engine.load())
                for (const SpeechModelInfo& m : d.speech) m.engine->shutdown(false);
            if (const ChatModel* c = d.chat.load()) c->service->shutdown(false);
            wait_idle(std::chrono::seconds(5));
        }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the last responses' bytes
    d.workers.join();
    d.io.stop();
    for (auto& t : d.io_threads)
        if (t.joinable()) t.join();
}

void HttpServer::wait_for_signal() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    int sig = 0;
    sigwait(&set, &sig);
    impl_->log.info("signal ", sig, ": draining ", impl_->in_flight.load(), " in-flight requests for up to ",
                    impl_->options.shutdown_grace_seconds, " s (a second signal exits at once)");
    // A second signal while draining: exit now, without waiting for anything.
    std::thread([set, this] {
        int again = 0;
        sigwait(&set, &again);
        impl_->log.warn("second signal ", again, ": exiting without draining");
        std::_Exit(128 + again);
    }).detach();
    stop();
}

}  // namespace parlance::server
