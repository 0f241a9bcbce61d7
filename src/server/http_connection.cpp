// One client's HTTP connection (see http_connection.h). A single concern over ~500 lines: the
// transport of HTTP/1.1 requests and answers on one socket (TLS or not) — reading under deadlines
// and limits, protocol errors, the write queue, server-sent events, hang-up probes, keep-alive and
// closing — and nothing of any API (router.h, the route files and the exchanges hold those).
#include "server/http_connection.h"

#include <array>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <optional>
#include <sstream>
#include <variant>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <nlohmann/json.hpp>

#include "server/anthropic_messages.h"
#include "server/api_error.h"
#include "server/generation_exchange.h"
#include "server/realtime_connection.h"
#include "server/response_sink.h"
#include "server/router.h"
#include "server/routes.h"
#include "server/transcription_exchange.h"

namespace parlance::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

std::chrono::milliseconds deadline_ms(double seconds) {
    return std::chrono::milliseconds(static_cast<int64_t>(std::max(0.0, seconds) * 1000.0));
}

using TlsStream = beast::ssl_stream<beast::tcp_stream>;

// One client connection over `Stream`: beast::tcp_stream (plain HTTP) or TlsStream (HTTPS).
// Reads and writes go through the stream; socket operations (cancel, shutdown, close, draining
// what a client still sends after the response) through its TCP layer.
template <class Stream>
class Connection : public ResponseSink, public std::enable_shared_from_this<Connection<Stream>> {
    static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

public:
    Connection(tcp::socket socket, ServerState& server) requires(!kTls)
        : stream_(std::move(socket)),
          server_(server),
          read_timer_(stream_.get_executor()),
          probe_timer_(stream_.get_executor()) {}
    Connection(tcp::socket socket, asio::ssl::context& tls, ServerState& server) requires(kTls)
        : stream_(std::move(socket), tls),
          server_(server),
          read_timer_(stream_.get_executor()),
          probe_timer_(stream_.get_executor()) {}

    void start() {
        if constexpr (kTls) {
            // The handshake within the header timeout; a client that is not speaking TLS is closed.
            arm_read_deadline(server_.options.header_timeout_seconds);
            stream_.async_handshake(asio::ssl::stream_base::server,
                                    [self = this->shared_from_this()](beast::error_code ec) {
                                        self->read_timer_.cancel();
                                        if (ec) {
                                            self->server_.log.debug("TLS handshake failed: ", ec.message());
                                            return self->hard_close();
                                        }
                                        self->read_request();
                                    });
        } else {
            read_request();
        }
    }

private:
    using Response = http::response<http::string_body>;
    // One queued write; `then` runs on the strand once it is on the wire.
    struct Write {
        std::string bytes;
        std::function<void()> then;
    };

    // --- Reading a request: the head within the header timeout, the body within the body timeout.
    void read_request() {
        parser_.emplace();
        parser_->body_limit(server_.options.max_upload_bytes + (1u << 20));
        parser_->header_limit(kMaxHeaderBytes);
        arm_read_deadline(server_.options.header_timeout_seconds);
        http::async_read_header(reader(), buffer_, *parser_,
                                beast::bind_front_handler(&Connection<Stream>::on_header, this->shared_from_this()));
    }

    // Our own timer rather than the stream's: when it fires the socket stays open, so a client
    // that was sending gets its 408 before the connection closes.
    void arm_read_deadline(double seconds) {
        timed_out_ = false;
        read_timer_.expires_after(deadline_ms(seconds));
        read_timer_.async_wait([self = this->shared_from_this()](beast::error_code ec) {
            if (ec) return;  // cancelled: the read finished in time
            self->timed_out_ = true;
            beast::error_code ignored;
            self->socket().cancel(ignored);
        });
    }

    void on_header(beast::error_code ec, size_t) {
        if (ec) return on_read_error(ec);
        auto& req = parser_->get();
        // What Beast accepts but HTTP/1.1 does not (or we bound tighter).
        if (req.target().size() > kMaxTargetBytes)
            return protocol_error(
                414, "the request target is longer than " + std::to_string(kMaxTargetBytes) + " bytes", "uri_too_long");
        if (std::distance(req.begin(), req.end()) > kMaxHeaderFields)
            return protocol_error(431, "more than " + std::to_string(kMaxHeaderFields) + " header fields",
                                  "header_fields_too_large");
        if (req.version() >= 11 && req.find(http::field::host) == req.end())
            return protocol_error(400, "an HTTP/1.1 request needs a Host header", "bad_request");
        arm_read_deadline(server_.options.body_timeout_seconds);
        auto read_body = [self = this->shared_from_this()] {
            http::async_read(self->reader(), self->buffer_, *self->parser_,
                             beast::bind_front_handler(&Connection<Stream>::on_read, self));
        };
        if (asked_continue(req) && !parser_->is_done()) return push_write({"HTTP/1.1 100 Continue\r\n\r\n", read_body});
        read_body();
    }

    void on_read(beast::error_code ec, size_t) {
        if (ec) return on_read_error(ec);
        read_timer_.cancel();
        request_ = parser_->release();
        started_ = Clock::now();
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

    // A request that could not be read: a timeout, a limit, a malformed head or body, or a
    // client that went away. Whatever can be answered is answered, then the connection closes.
    void on_read_error(beast::error_code ec) {
        read_timer_.cancel();
        const bool partial = parser_ && parser_->got_some();
        if (timed_out_) {
            if (!partial) return close();  // an idle keep-alive connection: nothing to answer
            return protocol_error(408, "the request was not received in time (--header-timeout, --body-timeout)",
                                  "request_timeout");
        }
        if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == http::error::partial_message ||
            ec == asio::error::operation_aborted)
            return close();
        if (ec == http::error::body_limit) {
            // The request line was read: the error names what the route takes (a file, or a JSON body).
            const RouteId id = head_route().id;
            const bool upload = id == RouteId::Transcriptions || id == RouteId::Translations;
            const std::string mb = std::to_string(server_.options.max_upload_bytes >> 20) + " MB";
            return protocol_error(413,
                                  upload ? "the upload is larger than " + mb
                                         : "the request body is larger than " + mb + " (serve --max-upload-mb)",
                                  "too_large", upload ? "file" : "");
        }
        if (ec == http::error::header_limit) {
            // Too long before the end of the request line (Beast has not parsed a target yet), or
            // in the fields after it.
            if (parser_->get().target().empty())
                return protocol_error(414,
                                      "the request line is longer than " + std::to_string(kMaxTargetBytes) + " bytes",
                                      "uri_too_long");
            return protocol_error(
                431, "the request's header fields are larger than " + std::to_string(kMaxHeaderBytes >> 10) + " KiB",
                "header_fields_too_large");
        }
        if (ec.category() == http::make_error_code(http::error::bad_method).category())
            return protocol_error(400, "malformed HTTP request: " + ec.message(), "bad_request");
        close();  // reset or other socket errors: nobody to answer
    }

    // The route of the request line read so far (Beast refuses a too-large Content-Length before
    // the head is done, with the target read), or Unknown when there is none yet.
    Route head_route() const {
        if (!parser_ || parser_->get().target().empty()) return {RouteId::Unknown, "other", false};
        const std::string target(parser_->get().target());
        return find_route(target.substr(0, target.find('?')), server_.options.metrics_public);
    }

    void protocol_error(int status, const std::string& message, const std::string& code,
                        const std::string& param = "") {
        read_timer_.cancel();
        request_ = {};
        request_.version(11);
        request_.keep_alive(false);
        started_ = Clock::now();
        // Answered in the shape of the route the request line named (Anthropic's for
        // /v1/messages); a request line too long to read (414) names none.
        route_ = head_route();
        send_error(ApiError(status, message, param, code), false);
    }

    // The route's handler says what to do (server/router.h); the connection does it.
    void dispatch() {
        const std::string target(request_.target());
        route_ = find_route(target.substr(0, target.find('?')), server_.options.metrics_public);
        RouteReply reply = route_request(server_, route_, request_);
        if (auto* plain = std::get_if<PlainReply>(&reply))
            return send(plain->status, plain->content_type, std::move(plain->body));
        if (auto* generation = std::get_if<GenerationRoute>(&reply)) return admit_generation(std::move(*generation));
        if (auto* transcription = std::get_if<TranscriptionRoute>(&reply)) return transcribe(std::move(*transcription));
        upgrade_realtime(std::move(std::get<RealtimeUpgrade>(reply)));
    }

    void upgrade_realtime(RealtimeUpgrade up);

    // --- A request that runs beyond its route (a transcription, a generation): admitted here,
    // bounded and cancelled by a disconnect, run by its exchange, answered through this
    // connection as its ResponseSink.
    // Bounded: requests decoding, running and queued never exceed the workers, the engines'
    // capacity and --max-queue; beyond that the client is told to come back (nothing is buffered).
    AdmittedRequest admit() {
        if (server_.full()) throw ApiError(429, "too many requests in flight; retry shortly", "", "overloaded");
        // The request's own flag travels with it: cancelled_ is the next request's once this one
        // is answered, which may come before its run has finished.
        cancelled_ = std::make_shared<std::atomic<bool>>(false);
        server_.track(cancelled_);
        watch_disconnect();
        ++server_.in_flight;
        return {cancelled_, [server = &server_, cancelled = cancelled_] {
                    server->untrack(cancelled);
                    --server->in_flight;
                }};
    }

    // Admits the request and hands it to its exchange, `start(request, sink)`. An exchange that
    // throws before it posted its work (no memory) leaves the request to the caller's error
    // answer: it is finished here.
    template <typename Start>
    void run_admitted(Start&& start) {
        AdmittedRequest request = admit();
        const std::function<void()> finished = request.finished;
        try {
            start(std::move(request), this->shared_from_this());
        } catch (...) {
            finished();
            throw;
        }
    }

    void transcribe(TranscriptionRoute route) {
        run_admitted([&](AdmittedRequest request, std::shared_ptr<ResponseSink> sink) {
            start_transcription_exchange(server_, std::move(route), std::move(request_.body()), std::move(request),
                                         std::move(sink));
        });
    }

    void admit_generation(GenerationRoute route) {
        run_admitted([&](AdmittedRequest request, std::shared_ptr<ResponseSink> sink) {
            start_generation_exchange(server_, std::move(route), is_anthropic(route_.id), std::move(request),
                                      std::move(sink));
        });
    }

public:
    // --- ResponseSink: any thread, carried out on the strand.
    void respond(int status, std::string content_type, std::string body, double audio_seconds) override {
        asio::post(stream_.get_executor(),
                   [self = this->shared_from_this(), status, content_type = std::move(content_type),
                    body = std::move(body), audio_seconds] { self->send(status, content_type, body, audio_seconds); });
    }

    void fail(int status, std::string body, std::string stream_event, double audio_seconds) override {
        asio::post(stream_.get_executor(), [self = this->shared_from_this(), status, body = std::move(body),
                                            stream_event = std::move(stream_event), audio_seconds] {
            if (self->sse_started_) {
                // Headers are out: the error goes as the stream's last event.
                self->final_queued_ = true;
                self->push_write({stream_event, [self] { self->close(); }});
                return self->record(status, audio_seconds);
            }
            self->send(status, "application/json", body, audio_seconds, self->request_.keep_alive() && status < 500);
        });
    }

    // Server-sent events, written in order from the connection's queue.
    void start_stream() override {
        asio::post(stream_.get_executor(), [self = this->shared_from_this()] {
            self->sse_started_ = true;
            self->push_write(
                {"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                 "Connection: close\r\n\r\n",
                 {}});
        });
    }

    // One SSE event: "data: JSON", after an "event: NAME" line for typed streams (Anthropic).
    void stream_event(std::string json, bool last, std::string event = "") override {
        asio::post(stream_.get_executor(), [self = this->shared_from_this(), json = std::move(json), last,
                                            event = std::move(event)] {
            if (self->final_queued_) return;
            if (last) self->final_queued_ = true;
            self->push_write({(event.empty() ? std::string() : "event: " + event + "\n") + "data: " + json + "\n\n",
                              last ? std::function<void()>([self] { self->close(); }) : std::function<void()>()});
        });
    }

    void stream_ended(double audio_seconds) override {
        asio::post(stream_.get_executor(),
                   [self = this->shared_from_this(), audio_seconds] { self->record(200, audio_seconds); });
    }

private:
    // "Expect: 100-continue" (case-insensitive) on an HTTP/1.1 request: curl sends it for uploads
    // and would otherwise wait a second; HTTP/1.0 clients may not receive 1xx responses.
    static bool asked_continue(const http::request_header<>& req) {
        return req.version() >= 11 && beast::iequals(req[http::field::expect], "100-continue");
    }

    // While a request works, a read on the socket tells whether the client is still there. Data
    // is the start of its next request (kept for the parser). EOF is ambiguous: the client closed
    // the connection, or only its sending side (shutdown(SHUT_WR), which proxies and tools do and
    // HTTP/1.1 allows) and still reads. Only a write can tell: see probe_peer().
    void watch_disconnect() {
        probe_pending_ = true;
        reader().async_read_some(asio::buffer(probe_),
                                 [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                                     self->probe_pending_ = false;
                                     if (n > 0) {
                                         auto dst = self->buffer_.prepare(n);
                                         std::memcpy(dst.data(), self->probe_.data(), n);
                                         self->buffer_.commit(n);
                                     } else if (ec == asio::error::eof || ec == asio::ssl::error::stream_truncated) {
                                         self->read_closed_ = true;
                                         self->probe_peer();
                                     } else if (ec && ec != asio::error::operation_aborted && !self->final_queued_) {
                                         self->cancelled_->store(true);  // reset: the client is gone
                                     }
                                     if (self->resume_after_probe_) {
                                         self->resume_after_probe_ = false;
                                         self->read_request();
                                     }
                                 });
    }

    // Writes something the client ignores (an SSE comment in a stream; another interim "100
    // Continue" to a request that sent "Expect: 100-continue", which already got one), twice,
    // 250 ms apart: to a closed socket the first write draws a reset and the second fails, which
    // cancels the request; a half-closed client reads on. Nothing is sent that a request did not
    // ask for, so a request without either runs to the end after its client's EOF (bounded by its
    // limits; the answer's write then fails and frees it).
    void probe_peer() {
        if (final_queued_ || (!sse_started_ && !asked_continue(request_))) return;
        auto probe = [this] { push_write({sse_started_ ? ": ping\n\n" : "HTTP/1.1 100 Continue\r\n\r\n", {}}); };
        probe();
        probe_timer_.expires_after(std::chrono::milliseconds(250));
        probe_timer_.async_wait([self = this->shared_from_this(), probe](beast::error_code ec) {
            if (!ec && !self->final_queued_) probe();
        });
    }

    // --- The write queue (strand only): one write on the wire at a time, each within the write
    // timeout; a failed write means the client is gone, which cancels its request.
    void push_write(Write w) {
        writes_.push_back(std::move(w));
        if (writes_.size() == 1) write_next();
    }

    void write_next() {
        beast::get_lowest_layer(stream_).expires_after(deadline_ms(server_.options.write_timeout_seconds));
        asio::async_write(stream_, asio::buffer(writes_.front().bytes),
                          [self = this->shared_from_this()](beast::error_code ec, size_t) {
                              beast::get_lowest_layer(self->stream_).expires_never();
                              if (ec) {
                                  self->cancelled_->store(true);
                                  self->writes_.clear();
                                  return self->close();
                              }
                              auto then = std::move(self->writes_.front().then);
                              self->writes_.pop_front();
                              if (!self->writes_.empty()) self->write_next();
                              if (then) then();
                          });
    }

    // --- Plain responses (strand only).
    void send_json(int status, const nlohmann::json& j) { send(status, "application/json", j.dump() + "\n"); }

    void send_error(const ApiError& e, bool keep_alive) {
        send(e.status, "application/json", (is_anthropic(route_.id) ? anthropic_error_body(e) : e.body()) + "\n", 0.0,
             keep_alive);
    }

    void send(int status, const std::string& content_type, std::string body, double audio_seconds = 0.0,
              bool keep_alive = true) {
        final_queued_ = true;
        Response res(static_cast<http::status>(status), request_.version());
        res.set(http::field::server, "parlance/" PARLANCE_VERSION);
        res.set(http::field::content_type, content_type);
        if (status == 429) res.set(http::field::retry_after, "1");
        if (status == 401) res.set(http::field::www_authenticate, "Bearer");
        // A client that closed its sending side cannot send another request.
        res.keep_alive(keep_alive && request_.keep_alive() && !read_closed_);
        res.body() = std::move(body);
        res.prepare_payload();
        record(status, audio_seconds);
        std::ostringstream wire;
        wire << res;
        const bool again = res.keep_alive();
        push_write({wire.str(), [self = this->shared_from_this(), again] {
                        if (!again) return self->close();
                        self->next_request();
                    }});
    }

    void next_request() {
        final_queued_ = false;
        sse_started_ = false;
        probe_timer_.cancel();
        if (probe_pending_) {
            // Stop watching for a hang-up; the probe's handler then reads the next request.
            resume_after_probe_ = true;
            beast::error_code ignored;
            socket().cancel(ignored);
            return;
        }
        read_request();
    }

    void record(int status, double audio_seconds) {
        const double seconds = std::chrono::duration<double>(Clock::now() - started_).count();
        server_.metrics.observe(std::string(route_.label), status, seconds, audio_seconds);
        server_.log.info(std::string(request_.method_string()), " ", route_.label, " ", status,
                         " audio=", audio_seconds, "s time=", seconds, "s");
    }

    // Closes after what was written: the sending side first, then whatever the client still sends
    // is read and dropped for up to a second, so a response to a request whose body was not read
    // (413, 408, a malformed request) is not destroyed by a reset.
    void close() {
        if (closing_) return;
        closing_ = true;
        read_timer_.cancel();
        probe_timer_.cancel();
        beast::error_code ec;
        socket().shutdown(tcp::socket::shutdown_send, ec);
        // A pending hang-up watch is already reading (two reads at once are not allowed); the
        // request's body was read in full then, so there is nothing to drain.
        if (ec || probe_pending_) return hard_close();
        read_timer_.expires_after(std::chrono::seconds(1));
        read_timer_.async_wait([self = this->shared_from_this()](beast::error_code e) {
            if (!e) self->hard_close();
        });
        drain();
    }

    void drain() {
        socket().async_read_some(asio::buffer(discard_),
                                 [self = this->shared_from_this()](beast::error_code ec, size_t) {
                                     if (ec) return self->hard_close();
                                     self->drain();
                                 });
    }

    void hard_close() {
        read_timer_.cancel();
        beast::error_code ec;
        socket().close(ec);
    }

    // What requests are read through: the TLS stream, or the socket itself (the plain stream's own
    // timeouts are not used for reads: read_timer_ is).
    auto& reader() {
        if constexpr (kTls)
            return stream_;
        else
            return stream_.socket();
    }
    tcp::socket& socket() { return beast::get_lowest_layer(stream_).socket(); }

    Stream stream_;
    ServerState& server_;
    asio::steady_timer read_timer_;
    asio::steady_timer probe_timer_;
    bool timed_out_ = false;
    beast::flat_buffer buffer_;
    std::optional<http::request_parser<http::string_body>> parser_;
    http::request<http::string_body> request_;
    std::shared_ptr<std::atomic<bool>> cancelled_ = std::make_shared<std::atomic<bool>>(false);
    std::deque<Write> writes_;
    bool final_queued_ = false;  // the response (or the stream's last event) is queued
    bool sse_started_ = false;
    bool read_closed_ = false;  // the client closed its sending side
    bool closing_ = false;
    std::array<char, 1> probe_{};
    std::array<char, 4096> discard_{};
    bool probe_pending_ = false;
    bool resume_after_probe_ = false;
    Route route_{RouteId::Unknown, "other", false};
    Clock::time_point started_ = Clock::now();
};

// GET /v1/realtime: what HTTP can still answer is checked (server/realtime_upgrade.h), then the
// socket goes to the WebSocket side.
template <class Stream>
void Connection<Stream>::upgrade_realtime(RealtimeUpgrade up) {
    read_timer_.cancel();
    final_queued_ = true;
    record(101, 0.0);
    start_realtime_connection(std::move(stream_), std::move(request_), up.context, up.beta);
}

}  // namespace

void start_http_connection(tcp::socket socket, asio::ssl::context* tls, ServerState& server) {
    if (tls)
        std::make_shared<Connection<TlsStream>>(std::move(socket), *tls, server)->start();
    else
        std::make_shared<Connection<beast::tcp_stream>>(std::move(socket), server)->start();
}

}  // namespace parlance::server
