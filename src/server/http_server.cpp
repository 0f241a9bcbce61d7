// The HTTP server (see http_server.h).
#include "server/http_server.h"

#include <array>
#include <condition_variable>
#include <cstring>
#include <csignal>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "audio/decode.h"
#include "server/api_error.h"
#include "server/multipart.h"
#include "server/transcription_form.h"
#include "server/web_page.h"

namespace parlance::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

struct HttpServer::Impl {
    ServerOptions options;
    Logger& log;
    asio::io_context io;
    tcp::acceptor acceptor{io};
    std::vector<std::thread> io_threads;
    asio::thread_pool workers;
    Metrics metrics;
    std::atomic<SpeechEngine*> engine{nullptr};
    std::string model_description;
    Clock::time_point started = Clock::now();
    std::atomic<int> in_flight{0};
    std::atomic<bool> stopping{false};

    Impl(const ServerOptions& o, Logger& l) : options(o), log(l), workers(std::max(1, o.worker_threads)) {}
    void accept();
};

namespace {

class Connection : public std::enable_shared_from_this<Connection> {
public:
    Connection(tcp::socket socket, HttpServer::Impl& server)
        : stream_(std::move(socket)), server_(server) {}

    void start() { read_request(); }

private:
    using Response = http::response<http::string_body>;

    void read_request() {
        parser_.emplace();
        parser_->body_limit(server_.options.max_upload_bytes + (1u << 20));
        parser_->header_limit(64 * 1024);
        stream_.expires_after(std::chrono::seconds(120));
        http::async_read_header(stream_, buffer_, *parser_,
                                beast::bind_front_handler(&Connection::on_header, shared_from_this()));
    }

    // Answers "Expect: 100-continue" (curl sends it for uploads and would otherwise wait a
    // second), then reads the body.
    void on_header(beast::error_code ec, size_t) {
        if (ec) return on_read(ec, 0);
        auto read_body = [self = shared_from_this()] {
            http::async_read(self->stream_, self->buffer_, *self->parser_,
                             beast::bind_front_handler(&Connection::on_read, self));
        };
        if (parser_->get()[http::field::expect] == "100-continue" && !parser_->is_done()) {
            auto cont = std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
            http::async_write(stream_, *cont, [self = shared_from_this(), cont, read_body](beast::error_code e, size_t) {
                if (e) return self->close();
                read_body();
            });
            return;
        }
        read_body();
    }

    void on_read(beast::error_code ec, size_t) {
        if (ec == http::error::end_of_stream || ec == asio::error::eof) return close();
        if (ec == http::error::body_limit) {
            started_ = Clock::now();
            route_ = "upload";
            return send_error(ApiError(413, "the upload is larger than " +
                                                std::to_string(server_.options.max_upload_bytes >> 20) + " MB",
                                       "file", "too_large"),
                              false);
        }
        if (ec) return close();
        request_ = parser_->release();
        started_ = Clock::now();
        stream_.expires_never();
        try {
            dispatch();
        } catch (const ApiError& e) {
            send_error(e, request_.keep_alive());
        } catch (const Error& e) {
            send_error(ApiError::from(e), request_.keep_alive());
        } catch (const std::exception& e) {
            send_error(ApiError(500, std::string("internal error: ") + e.what()), false);
        }
    }

    void dispatch() {
        std::string target(request_.target());
        std::string path = target.substr(0, target.find('?'));
        const auto method = request_.method();
        auto only = [&](http::verb v) {
            if (method != v)
                throw ApiError(405, "method " + std::string(request_.method_string()) + " is not allowed on " + path,
                               "", "method_not_allowed");
        };
        route_ = path;
        if (path == "/health") {
            only(http::verb::get);
            if (!server_.engine.load()) return send_json(503, {{"status", "loading"}});
            return send_json(200, {{"status", "ok"}});
        }
        if (path == "/" || path == "/index.html") {
            only(http::verb::get);
            return send(200, "text/html; charset=utf-8", web_page_html());
        }
        if (path == "/metrics") {
            only(http::verb::get);
            SpeechEngine* e = server_.engine.load();
            EngineStats s;
            if (e) s = e->stats();
            return send(200, "text/plain; version=0.0.4",
                        server_.metrics.render(e ? &s : nullptr, uptime()));
        }
        // Everything under /v1 needs the API key when one is set.
        if (path.rfind("/v1/", 0) == 0 && !server_.options.api_key.empty()) {
            auto auth = request_[http::field::authorization];
            if (auth != "Bearer " + server_.options.api_key)
                throw ApiError(401, auth.empty() ? "missing API key (Authorization: Bearer ...)" : "invalid API key",
                               "", "invalid_api_key");
        }
        if (path == "/v1/models") {
            only(http::verb::get);
            return send_json(200, {{"object", "list"}, {"data", nlohmann::json::array({model_object()})}});
        }
        if (path.rfind("/v1/models/", 0) == 0) {
            only(http::verb::get);
            std::string id = path.substr(11);
            if (id != server_.options.model_id)
                throw ApiError(404, "the model '" + id + "' does not exist", "model", "model_not_found");
            return send_json(200, model_object());
        }
        if (path == "/v1/status") {
            only(http::verb::get);
            SpeechEngine* e = server_.engine.load();
            nlohmann::json j{{"model", server_.options.model_id},
                             {"description", server_.model_description},
                             {"device", server_.options.device},
                             {"ready", e != nullptr},
                             {"uptime_seconds", uptime()},
                             {"in_flight_requests", server_.in_flight.load()},
                             {"resident_memory_bytes", resident_bytes()}};
            if (e) {
                EngineStats s = e->stats();
                j["queue"] = s.queued;
                j["active_requests"] = s.active;
                j["free_cache_slots"] = s.free_slots;
                j["completed"] = s.completed;
                j["cancelled"] = s.cancelled;
                j["failed"] = s.failed;
                j["decode_tokens"] = s.decode_tokens;
                j["audio_seconds"] = s.audio_seconds;
                j["kv_cache"] = {{"capacity_bytes", s.kv_capacity_bytes},
                                 {"block_bytes", s.kv_block_bytes},
                                 {"total_blocks", s.kv.total_blocks},
                                 {"used_blocks", s.kv.used_blocks},
                                 {"cached_blocks", s.kv.cached_blocks},
                                 {"reserved_blocks", s.kv_reserved_blocks},
                                 {"hypothesis_blocks", s.kv_hypothesis_blocks},
                                 {"prefix_hit_tokens", s.kv.prefix_hits},
                                 {"evictions", s.kv.evictions}};
            }
            return send_json(200, j);
        }
        if (path == "/v1/audio/transcriptions" || path == "/v1/audio/translations") {
            only(http::verb::post);
            return transcribe(path == "/v1/audio/translations");
        }
        throw ApiError(404, "no route " + path, "", "not_found");
    }

    nlohmann::json model_object() const {
        return {{"id", server_.options.model_id}, {"object", "model"}, {"created", 0}, {"owned_by", "parlance"}};
    }

    void transcribe(bool translation) {
        SpeechEngine* engine = server_.engine.load();
        if (!engine) throw ApiError(503, "the model is still loading", "", "loading");
        auto boundary = multipart_boundary(request_[http::field::content_type]);
        if (!boundary) throw ApiError(400, "Content-Type must be multipart/form-data with a boundary", "file");
        parts_ = parse_multipart(request_.body(), *boundary);
        form_ = parse_transcription_form(parts_, translation);
        if (form_.model != server_.options.model_id && form_.model != "whisper-1")
            throw ApiError(404, "the model '" + form_.model + "' does not exist (this server serves '" +
                                    server_.options.model_id + "')",
                           "model", "model_not_found");
        // Bounded: requests decoding or waiting for the engine never exceed the worker pool plus
        // the engine's queue; beyond that the client is told to come back (nothing is buffered).
        if (server_.in_flight.load() >= server_.options.worker_threads + server_.options.max_pending)
            throw ApiError(429, "too many requests in flight; retry shortly", "", "overloaded");
        cancelled_ = std::make_shared<std::atomic<bool>>(false);
        watch_disconnect();
        ++server_.in_flight;
        // Decoding and waiting for the engine happen on the worker pool, never on I/O threads.
        asio::post(server_.workers, [self = shared_from_this(), engine, translation] {
            self->run_transcription(engine, translation);
        });
    }

    // A readable socket while we work means the client closed (or pipelined): either way,
    // EOF with nothing available cancels the request.
    void watch_disconnect() {
        probe_pending_ = true;
        stream_.socket().async_read_some(
            asio::buffer(probe_), [self = shared_from_this()](beast::error_code ec, size_t n) {
                self->probe_pending_ = false;
                if (n > 0) {
                    // The start of the client's next request: keep it for the parser.
                    auto dst = self->buffer_.prepare(n);
                    std::memcpy(dst.data(), self->probe_.data(), n);
                    self->buffer_.commit(n);
                } else if (ec && ec != asio::error::operation_aborted && !self->responded_) {
                    self->cancelled_->store(true);  // EOF or reset: the client hung up
                }
                if (self->resume_after_probe_) {
                    self->resume_after_probe_ = false;
                    self->read_request();
                }
            });
    }

    void run_transcription(SpeechEngine* engine, bool translation) {
        double audio_seconds = 0.0;
        try {
            DecodeOptions d;
            d.max_seconds = server_.options.max_audio_seconds;
            std::vector<float> pcm;
            try {
                pcm = decode_audio(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(form_.file.data()),
                                                            form_.file.size()),
                                   d);
            } catch (const Error& e) {
                throw ApiError::from(e, "file");
            }
            if (pcm.size() < 160) throw ApiError(400, "the audio is empty or shorter than 10 ms", "file", "invalid_audio");
            audio_seconds = pcm.size() / 16000.0;
            TranscriptionRequest req;
            req.pcm = std::move(pcm);
            req.options.language = form_.language;
            req.options.task = translation ? "translate" : "transcribe";
            req.options.initial_prompt = form_.prompt;
            if (form_.temperature >= 0.0f) req.options.temperatures = {form_.temperature};
            req.options.timestamps = true;
            req.options.word_timestamps = form_.word_timestamps;
            req.cancelled = cancelled_;
            if (form_.stream) {
                start_sse();
                req.on_segment = [self = shared_from_this()](const Segment& s) {
                    nlohmann::json ev{{"type", "transcript.text.delta"}, {"delta", s.text}};
                    self->queue_write("data: " + ev.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n");
                };
            }
            std::future<Transcript> future;
            try {
                future = engine->submit(std::move(req));
            } catch (const Error& e) {
                if (e.kind() == ErrorKind::Overloaded) throw ApiError(429, e.what(), "", "overloaded");
                throw;
            }
            Transcript t = future.get();
            if (!form_.stream && t.language.empty()) t.language = form_.language;
            finish_transcription(t, audio_seconds);
        } catch (const ApiError& e) {
            fail_transcription(e, audio_seconds);
        } catch (const Error& e) {
            fail_transcription(ApiError::from(e), audio_seconds);
        } catch (const std::exception& e) {
            fail_transcription(ApiError(500, std::string("internal error: ") + e.what()), audio_seconds);
        }
        --server_.in_flight;
    }

    void finish_transcription(const Transcript& t, double audio_seconds) {
        if (form_.stream) {
            nlohmann::json ev{{"type", "transcript.text.done"},
                              {"text", t.text},
                              {"usage", {{"type", "duration"}, {"seconds", std::ceil(t.duration)}}}};
            queue_write("data: " + ev.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n", true);
            record(200, audio_seconds);
            return;
        }
        std::string body = render_transcript(t, form_.format, true, form_.word_timestamps);
        asio::post(stream_.get_executor(), [self = shared_from_this(), body = std::move(body), audio_seconds] {
            self->send(200, response_content_type(self->form_.format), body, audio_seconds);
        });
    }

    void fail_transcription(const ApiError& e, double audio_seconds) {
        if (sse_started_) {
            nlohmann::json ev{{"type", "error"}, {"error", nlohmann::json::parse(e.body())["error"]}};
            queue_write("data: " + ev.dump() + "\n\n", true);
            record(e.status, audio_seconds);
            return;
        }
        asio::post(stream_.get_executor(), [self = shared_from_this(), e] {
            self->send_error(e, self->request_.keep_alive() && e.status < 500);
        });
    }

    // --- SSE: raw bytes on the socket, written in order from a queue on the connection's strand.
    void start_sse() {
        sse_started_ = true;
        queue_write(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
            "Connection: close\r\n\r\n");
    }

    void queue_write(std::string data, bool last = false) {
        asio::post(stream_.get_executor(), [self = shared_from_this(), data = std::move(data), last] {
            self->writes_.push_back(std::move(data));
            if (last) self->close_after_writes_ = true;
            if (self->writes_.size() == 1) self->write_next();
        });
    }

    void write_next() {
        responded_ = true;
        asio::async_write(stream_.socket(), asio::buffer(writes_.front()),
                          [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (ec) {
                                  self->cancelled_->store(true);  // the client went away mid-stream
                                  self->writes_.clear();
                                  return self->close();
                              }
                              self->writes_.pop_front();
                              if (!self->writes_.empty()) return self->write_next();
                              if (self->close_after_writes_) self->close();
                          });
    }

    // --- Plain responses.
    void send_json(int status, const nlohmann::json& j) { send(status, "application/json", j.dump() + "\n"); }

    void send_error(const ApiError& e, bool keep_alive) {
        auto extra = [&](Response& r) {
            if (e.status == 429) r.set(http::field::retry_after, "1");
            if (e.status == 401) r.set(http::field::www_authenticate, "Bearer");
        };
        send(e.status, "application/json", e.body() + "\n", 0.0, keep_alive, extra);
    }

    template <typename Extra = void (*)(Response&)>
    void send(int status, const std::string& content_type, std::string body, double audio_seconds = 0.0,
              bool keep_alive = true, Extra extra = [](Response&) {}) {
        responded_ = true;
        auto res = std::make_shared<Response>(static_cast<http::status>(status), request_.version());
        res->set(http::field::server, "parlance/" PARLANCE_VERSION);
        res->set(http::field::content_type, content_type);
        extra(*res);
        res->keep_alive(keep_alive && request_.keep_alive());
        res->body() = std::move(body);
        res->prepare_payload();
        record(status, audio_seconds);
        http::async_write(stream_, *res, [self = shared_from_this(), res](beast::error_code ec, size_t) {
            if (ec || !res->keep_alive()) return self->close();
            self->responded_ = false;
            if (self->probe_pending_) {
                // Stop watching for a hang-up; the probe's handler then reads the next request.
                self->resume_after_probe_ = true;
                beast::error_code ignored;
                self->stream_.socket().cancel(ignored);
                return;
            }
            self->read_request();
        });
    }

    void record(int status, double audio_seconds) {
        double seconds = std::chrono::duration<double>(Clock::now() - started_).count();
        std::string route = route_.rfind("/v1/models/", 0) == 0 ? "/v1/models/{id}" : route_;
        if (status == 404 && route.rfind("/v1/", 0) != 0 && route != "/") route = "other";
        server_.metrics.observe(route, status, seconds, audio_seconds);
        server_.log.info(std::string(request_.method_string()), " ", route, " ", status, " audio=", audio_seconds,
                         "s time=", seconds, "s");
    }

    double uptime() const { return std::chrono::duration<double>(Clock::now() - server_.started).count(); }

    void close() {
        beast::error_code ec;
        stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
        stream_.socket().close(ec);
    }

    beast::tcp_stream stream_;
    HttpServer::Impl& server_;
    beast::flat_buffer buffer_;
    std::optional<http::request_parser<http::string_body>> parser_;
    http::request<http::string_body> request_;
    std::vector<FormPart> parts_;
    TranscriptionForm form_;
    std::shared_ptr<std::atomic<bool>> cancelled_ = std::make_shared<std::atomic<bool>>(false);
    std::deque<std::string> writes_;
    bool close_after_writes_ = false;
    bool sse_started_ = false;
    std::atomic<bool> responded_{false};
    std::array<char, 1> probe_{};
    bool probe_pending_ = false;
    bool resume_after_probe_ = false;
    std::string route_;
    Clock::time_point started_ = Clock::now();
};

}  // namespace

void HttpServer::Impl::accept() {
    acceptor.async_accept(asio::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
        if (ec) return;  // closed by stop()
        std::make_shared<Connection>(std::move(socket), *this)->start();
        accept();
    });
}

HttpServer::HttpServer(const ServerOptions& options, Logger& logger)
    : impl_(std::make_unique<Impl>(options, logger)) {}

HttpServer::~HttpServer() { stop(); }

void HttpServer::start() {
    auto& d = *impl_;
    beast::error_code ec;
    auto address = asio::ip::make_address(d.options.host, ec);
    if (ec) throw Error(ErrorKind::InvalidArgument, "--host '" + d.options.host + "' is not an IP address");
    tcp::endpoint ep(address, static_cast<unsigned short>(d.options.port));
    d.acceptor.open(ep.protocol(), ec);
    if (!ec) d.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) d.acceptor.bind(ep, ec);
    if (!ec) d.acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
        throw Error(ErrorKind::Io, "cannot listen on " + d.options.host + ":" + std::to_string(d.options.port) +
                                       ": " + ec.message());
    bound_port_ = d.acceptor.local_endpoint().port();
    d.accept();
    for (int i = 0; i < std::max(1, d.options.io_threads); ++i) d.io_threads.emplace_back([&d] { d.io.run(); });
}

void HttpServer::set_engine(SpeechEngine* engine, const std::string& description) {
    impl_->model_description = description;
    impl_->engine.store(engine);
}

void HttpServer::stop() {
    auto& d = *impl_;
    if (d.stopping.exchange(true)) return;
    asio::post(d.io, [&d] {
        beast::error_code ec;
        d.acceptor.close(ec);
    });
    // Drain: in-flight requests finish and their responses are written.
    for (int i = 0; i < 6000 && d.in_flight.load() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
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
    impl_->log.info("signal ", sig, ": draining ", impl_->in_flight.load(), " in-flight requests");
    stop();
}

}  // namespace parlance::server
