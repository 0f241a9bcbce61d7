// The WebSocket transport of live sessions (see realtime_connection.h).
#include "server/realtime_connection.h"

#include <deque>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>

namespace parlance::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;

constexpr size_t kMaxQueuedBytes = 8u << 20;

bool offers(std::string_view list, std::string_view protocol) {
    size_t pos = 0;
    while (pos <= list.size()) {
        size_t comma = list.find(',', pos);
        if (comma == std::string_view::npos) comma = list.size();
        std::string_view item = list.substr(pos, comma - pos);
        while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
        while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
        if (item == protocol) return true;
        pos = comma + 1;
    }
    return false;
}

// Over Stream: beast::tcp_stream (ws:) or beast::ssl_stream<beast::tcp_stream> (wss:).
template <class Stream>
class RealtimeConnection : public std::enable_shared_from_this<RealtimeConnection<Stream>> {
public:
    RealtimeConnection(Stream stream, http::request<http::string_body> request, const RealtimeContext& c, bool beta)
        : ws_(std::move(stream)), wait_(ws_.get_executor()), request_(std::move(request)), c_(c), beta_(beta) {}

    void start() {
        beast::get_lowest_layer(ws_).expires_never();
        ws_.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
        ws_.read_message_max(c_.max_message_bytes);
        const bool realtime = offers(request_[http::field::sec_websocket_protocol], "realtime");
        ws_.set_option(websocket::stream_base::decorator([realtime](websocket::response_type& res) {
            res.set(http::field::server, "parlance/" PARLANCE_VERSION);
            if (realtime) res.set(http::field::sec_websocket_protocol, "realtime");
        }));
        ws_.async_accept(request_, [self = this->shared_from_this()](beast::error_code ec) {
            if (ec) return;
            self->open();
        });
    }

private:
    void open() {
        std::weak_ptr<RealtimeConnection<Stream>> weak = this->shared_from_this();
        RealtimeSession::Hooks hooks;
        auto ex = ws_.get_executor();
        hooks.send = [weak](std::string ev) {
            if (auto self = weak.lock()) self->queue(std::move(ev));
        };
        hooks.post = [ex](std::function<void()> fn) { asio::post(ex, std::move(fn)); };
        hooks.work = [pool = c_.workers](std::function<void()> fn) { asio::post(*pool, std::move(fn)); };
        hooks.close = [weak](std::string reason) {
            if (auto self = weak.lock()) self->close(websocket::close_code::policy_error, reason);
        };
        // Server shutdown: the events already queued go out first, then 1001.
        hooks.going_away = [weak](std::string reason) {
            auto self = weak.lock();
            if (!self) return;
            self->going_away_ = std::move(reason);
            if (self->writes_.empty()) self->close(websocket::close_code::going_away, self->going_away_);
        };
        session_ =
            std::make_shared<RealtimeSession>(*c_.engine, c_.vad, c_.options, beta_, std::move(hooks), *c_.registry);
        if (c_.log) c_.log->info("realtime session opened (", beta_ ? "beta" : "GA", " events)");
        session_->start();
        read();
    }

    void read() {
        if (session_->congested()) {  // backpressure: read again once the decodes caught up
            wait_.expires_after(std::chrono::milliseconds(10));
            wait_.async_wait([self = this->shared_from_this()](beast::error_code ec) {
                if (!ec) self->read();
            });
            return;
        }
        ws_.async_read(buffer_, [self = this->shared_from_this()](beast::error_code ec, size_t) {
            if (ec) return self->end(ec);
            const std::string text = beast::buffers_to_string(self->buffer_.data());
            self->buffer_.consume(self->buffer_.size());
            if (!self->ws_.got_text()) {
                nlohmann::json e{{"type", "error"},
                                 {"error",
                                  {{"type", "invalid_request_error"},
                                   {"code", "binary_message"},
                                   {"message", "client events are JSON text messages, not binary"}}}};
                self->queue(e.dump());
            } else {
                self->session_->on_message(text);
            }
            self->read();
        });
    }

    void queue(std::string ev) {
        if (closing_) return;
        queued_bytes_ += ev.size();
        if (queued_bytes_ > kMaxQueuedBytes) return close(websocket::close_code::policy_error, "client not reading");
        writes_.push_back(std::move(ev));
        if (writes_.size() == 1) write_next();
    }

    void write_next() {
        ws_.text(true);
        ws_.async_write(asio::buffer(writes_.front()), [self = this->shared_from_this()](beast::error_code ec, size_t) {
            if (ec) return self->end(ec);
            self->queued_bytes_ -= self->writes_.front().size();
            self->writes_.pop_front();
            if (!self->writes_.empty()) return self->write_next();
            if (!self->going_away_.empty()) self->close(websocket::close_code::going_away, self->going_away_);
        });
    }

    void close(websocket::close_code code, const std::string& reason) {
        if (closing_) return;
        closing_ = true;
        if (session_) session_->stop();
        ws_.async_close(websocket::close_reason(code, reason), [self = this->shared_from_this()](beast::error_code) {});
    }

    void end(beast::error_code ec) {
        if (session_) session_->stop();
        if (c_.log && ec != websocket::error::closed) c_.log->info("realtime session ended: ", ec.message());
    }

    websocket::stream<Stream> ws_;
    asio::steady_timer wait_;
    http::request<http::string_body> request_;
    RealtimeContext c_;
    bool beta_;
    beast::flat_buffer buffer_;
    std::shared_ptr<RealtimeSession> session_;
    std::deque<std::string> writes_;
    size_t queued_bytes_ = 0;
    bool closing_ = false;
    std::string going_away_;  // set: close with 1001 once the write queue is empty
};

}  // namespace

void start_realtime_connection(beast::tcp_stream stream, http::request<http::string_body> request,
                               const RealtimeContext& context, bool beta) {
    std::make_shared<RealtimeConnection<beast::tcp_stream>>(std::move(stream), std::move(request), context, beta)
        ->start();
}

void start_realtime_connection(beast::ssl_stream<beast::tcp_stream> stream, http::request<http::string_body> request,
                               const RealtimeContext& context, bool beta) {
    std::make_shared<RealtimeConnection<beast::ssl_stream<beast::tcp_stream>>>(std::move(stream), std::move(request),
                                                                               context, beta)
        ->start();
}

}  // namespace parlance::server
