// `parlance serve --tls-cert --tls-key`: HTTPS and WSS on one port with a certificate the test
// makes (openssl req): a transcription over HTTPS equals the plain server's, a live session opens
// over wss: (a Beast client verifying the certificate), a client that does not speak TLS gets no
// HTTP answer and the server goes on, and bad TLS options are refused at start naming the file.
#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <nlohmann/json.hpp>

#include "serve_fixture.h"
#include "test_support.h"

namespace {

using namespace parlance::testing;
using nlohmann::json;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;

// A self-signed certificate for localhost: dir/NAME.crt and dir/NAME.key.
void make_certificate(const std::filesystem::path& dir, const std::string& name) {
    const std::string cmd =
        "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost -addext "
        "subjectAltName=DNS:localhost -keyout " +
        quoted((dir / (name + ".key")).string()) + " -out " + quoted((dir / (name + ".crt")).string()) + " 2>/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

TEST(ServeTls, HttpsAndWssOnOnePort) {
    TempDir d;
    make_certificate(d.path(), "a");
    const std::string crt = (d.path() / "a.crt").string(), key = (d.path() / "a.key").string();
    Server s("--tls-cert " + quoted(crt) + " --tls-key " + quoted(key));
    ASSERT_GT(s.port(), 0) << s.read_log();
    EXPECT_NE(s.read_log().find("listening on https://"), std::string::npos);
    const std::string form = "-F file=@" + fixture("audio/jfk.wav") + " -F model=whisper -F temperature=0";
    auto [status, body] = s.post("/v1/audio/transcriptions", form, "--cacert " + quoted(crt));
    ASSERT_EQ(status, 200) << body;
    Server plain;
    auto [pstatus, pbody] = plain.post("/v1/audio/transcriptions", form);
    EXPECT_EQ(json::parse(body)["text"], json::parse(pbody)["text"]);
    // An unverified certificate is the client's refusal (curl without the CA fails).
    int rc = 0;
    Server::curl("-s " + s.url("/health"), &rc);
    EXPECT_NE(rc, 0);
    // A plain-HTTP client gets no HTTP answer; the server goes on.
    const std::string junk =
        Server::curl("-s --max-time 5 http://127.0.0.1:" + std::to_string(s.port()) + "/health", &rc);
    EXPECT_NE(rc, 0);
    EXPECT_EQ(junk.find("ok"), std::string::npos);
    EXPECT_NE(Server::curl("-s --cacert " + quoted(crt) + " " + s.url("/health")).find("\"ok\""), std::string::npos);

    // wss: the handshake, the session's first event.
    asio::io_context io;
    asio::ssl::context ctx(asio::ssl::context::tls_client);
    ctx.load_verify_file(crt);
    websocket::stream<beast::ssl_stream<beast::tcp_stream>> ws(io, ctx);
    beast::get_lowest_layer(ws).expires_after(std::chrono::seconds(20));
    beast::get_lowest_layer(ws).connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(s.port())});
    ws.next_layer().set_verify_mode(asio::ssl::verify_peer);
    ws.next_layer().set_verify_callback(asio::ssl::host_name_verification("localhost"));
    SSL_set_tlsext_host_name(ws.next_layer().native_handle(), "localhost");
    ws.next_layer().handshake(asio::ssl::stream_base::client);
    beast::get_lowest_layer(ws).expires_never();
    ws.handshake("localhost", "/v1/realtime?intent=transcription");
    beast::flat_buffer b;
    ws.read(b);
    EXPECT_EQ(json::parse(beast::buffers_to_string(b.data()))["type"], "session.created");
    ws.close(websocket::close_code::normal);
}

TEST(ServeTls, BadTlsOptionsAreRefusedAtStart) {
    TempDir d;
    make_certificate(d.path(), "a");
    make_certificate(d.path(), "b");
    const std::string a_crt = quoted((d.path() / "a.crt").string());
    const std::string a_key = quoted((d.path() / "a.key").string()), b_key = quoted((d.path() / "b.key").string());
    std::ofstream(d.path() / "junk.pem") << "not a certificate\n";
    const std::string junk = quoted((d.path() / "junk.pem").string());
    struct Case {
        std::string args, says;
    };
    for (const Case& c : {Case{"--tls-cert " + a_crt, "go together"},
                          Case{"--tls-cert " + a_crt + " --tls-key " + b_key, "is it the private key of --tls-cert"},
                          Case{"--tls-cert " + junk + " --tls-key " + a_key, "--tls-cert"}}) {
        Server s(c.args);
        EXPECT_NE(s.wait_exit(10), 0) << c.args;
        EXPECT_NE(s.read_log().find(c.says), std::string::npos) << c.args << ": " << s.read_log();
    }
}

}  // namespace
