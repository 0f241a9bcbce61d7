// Black-box tests of `parlance serve` against hostile and careless clients (issue 18): bounded
// metrics labels and which endpoints need the key, protocol errors answered with the error body,
// header and body timeouts, errors that quote client values briefly, half-closed clients,
// abandoned SSE streams, a bounded shutdown, and the memory bound for hostile uploads. Each test
// failed on the server before its fix.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <future>
#include <random>

#include "audio/wav.h"
#include "serve_fixture.h"
#include "test_support.h"

namespace {

using namespace parlance::testing;
using nlohmann::json;

json error_of(const RawResponse& r) {
    json j = json::parse(r.body, nullptr, false);
    return j.is_object() && j.contains("error") ? j["error"] : json();
}

// One request on its own connection; the server's whole answer, parsed.
RawResponse exchange(int port, const std::string& request, bool half_close = false) {
    RawClient c(port);
    c.send(request);
    if (half_close) c.shutdown_write();
    return parse_response(c.read_all(30));
}

std::string random_path(std::mt19937& rng, size_t n) {
    std::string s;
    for (size_t i = 0; i < n; ++i) s += static_cast<char>('a' + rng() % 26);
    return s;
}

// 1. Only known routes become metric labels; /metrics needs the key unless --metrics-public.
TEST(ServeHardening, MetricsLabelOnlyKnownRoutesAndNeedTheKey) {
    Server s("--api-key sesame");
    ASSERT_GT(s.port(), 0) << s.read_log();
    std::mt19937 rng(7);
    for (int i = 0; i < 200; ++i) {
        const std::string path = (i % 2 ? "/v1/" : "/") + random_path(rng, 2000);
        RawResponse r = exchange(s.port(), "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        EXPECT_EQ(r.status, i % 2 ? 401 : 404) << r.head;
    }
    const RawResponse open = exchange(s.port(), "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    EXPECT_EQ(open.status, 401) << "/metrics answered without the key";
    const std::string metrics = Server::curl("-s -H 'Authorization: Bearer sesame' " + s.url("/metrics"));
    EXPECT_NE(metrics.find("parlance_requests_total{route=\"other\",status=\"404\"} 100"), std::string::npos)
        << metrics.substr(0, 2000);
    EXPECT_NE(metrics.find("parlance_requests_total{route=\"other\",status=\"401\"} 100"), std::string::npos);
    EXPECT_LT(metrics.size(), 16u << 10) << "the label set grew with the paths";
    // The web page and /health stay open.
    EXPECT_EQ(exchange(s.port(), "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").status, 200);
    EXPECT_EQ(exchange(s.port(), "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").status, 200);

    Server p("--api-key sesame --metrics-public");
    ASSERT_GT(p.port(), 0) << p.read_log();
    EXPECT_EQ(exchange(p.port(), "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").status, 200);
    EXPECT_EQ(exchange(p.port(), "GET /v1/status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").status, 401);
}

// 6. Malformed requests get a status and the OpenAI error body, then the connection closes.
TEST(ServeHardening, ProtocolErrorsAreAnsweredWithTheErrorBody) {
    Server s;
    ASSERT_GT(s.port(), 0) << s.read_log();
    std::string many_headers;
    for (int i = 0; i < 10000; ++i) many_headers += "X-H" + std::to_string(i) + ": v\r\n";
    const std::string post = "POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\n";
    const std::vector<std::pair<std::string, int>> cases = {
        {"GET /" + std::string(100000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n", 414},
        {"GET / HTTP/1.1\r\nHost: x\r\n" + many_headers + "\r\n", 431},
        {"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(100000, 'y') + "\r\n\r\n", 431},
        {"GET / HTTP/1.1\r\nHost: x\r\n" + std::string("X-A: b\r\n").append("X-B: c\r\n") +
             [] {
                 std::string h;
                 for (int i = 0; i < 150; ++i) h += "X-" + std::to_string(i) + ": v\r\n";
                 return h;
             }() +
             "\r\n",
         431},
        {post + "Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", 400},
        {post + "Content-Length: 5\r\nContent-Length: 7\r\n\r\nabcdefg", 400},
        {post + "Content-Length: -5\r\n\r\nabcde", 400},
        {"GET /health HTTP/1.1\nHost: x\n\n", 400},
        {"GET /health HTTP/1.1\r\n\r\n", 400},
    };
    for (const auto& [request, status] : cases) {
        const RawResponse r = exchange(s.port(), request);
        EXPECT_EQ(r.status, status) << request.substr(0, 80) << "\n" << r.head;
        const json e = error_of(r);
        EXPECT_TRUE(e.is_object() && e["message"].is_string() && e["type"].is_string())
            << request.substr(0, 80) << ": " << r.body.substr(0, 200);
        EXPECT_NE(r.head.find("Connection: close"), std::string::npos) << r.head;
    }
    EXPECT_EQ(s.post("/v1/audio/transcriptions", kJfk + kFast).first, 200);  // still serving
}

// Slow clients: the head within --header-timeout, the body within --body-timeout, else 408; an
// idle connection is closed silently.
TEST(ServeHardening, HeaderAndBodyTimeoutsAnswer408) {
    Server s("--header-timeout 1 --body-timeout 1");
    ASSERT_GT(s.port(), 0) << s.read_log();
    // Slowloris: 32 connections that never finish their headers do not stop others being served.
    std::vector<std::unique_ptr<RawClient>> slow;
    for (int i = 0; i < 32; ++i) {
        slow.push_back(std::make_unique<RawClient>(s.port()));
        slow.back()->send("GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ");
    }
    EXPECT_EQ(s.post("/v1/audio/transcriptions", kJfk + kFast).first, 200);
    RawClient head(s.port()), body(s.port()), idle(s.port());
    head.send("GET /health HTTP/1.1\r\nHost: x\r\n");  // never finished
    body.send("POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nabc");
    const RawResponse h = parse_response(head.read_all(10));
    const RawResponse b = parse_response(body.read_all(10));
    // Each read waits up to 10 s for the server to close: it does so at the 1 s timeouts.
    const std::string i = idle.read_all(10);
    EXPECT_EQ(h.status, 408) << h.head;
    EXPECT_EQ(error_of(h)["code"], "request_timeout");
    EXPECT_EQ(b.status, 408) << b.head;
    EXPECT_TRUE(i.empty()) << i;
    EXPECT_TRUE(head.peer_closed() && body.peer_closed() && idle.peer_closed())
        << "the connections were not dropped at their timeouts";
    for (auto& c : slow) EXPECT_EQ(parse_response(c->read_all(5)).status, 408);
    EXPECT_EQ(s.post("/v1/audio/transcriptions", kJfk + kFast).first, 200);
}

// 7. An error quotes at most ~100 characters of any client value.
TEST(ServeHardening, ErrorsQuoteClientValuesBriefly) {
    Server s;
    ASSERT_GT(s.port(), 0) << s.read_log();
    const std::string wav = read_file(fixture("audio/jfk.wav"));
    const std::string huge(1 << 20, 'n');
    RawResponse r =
        exchange(s.port(), multipart_request("/v1/audio/transcriptions", wav, {{"model", "whisper"}, {huge, "1"}}));
    EXPECT_EQ(r.status, 400) << r.head;
    EXPECT_LT(r.body.size(), 1500u);
    r = exchange(s.port(), multipart_request("/v1/audio/transcriptions", wav, {{"model", huge}}));
    EXPECT_EQ(r.status, 404) << r.head;
    EXPECT_LT(r.body.size(), 1500u);
    EXPECT_NE(error_of(r)["message"].get<std::string>().find("(1048576 bytes)"), std::string::npos) << r.body;
    r = exchange(s.port(),
                 "GET /nowhere/" + std::string(6000, 'u') + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    EXPECT_EQ(r.status, 404);
    EXPECT_LT(r.body.size(), 1000u);
    r = exchange(s.port(),
                 "GET /v1/models/" + std::string(6000, 'm') + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    EXPECT_EQ(r.status, 404);
    EXPECT_LT(r.body.size(), 1000u);
}

void write_wav_channels(const std::filesystem::path& path, int channels, int rate, double seconds) {
    const int n = static_cast<int>(rate * seconds);
    std::string data;
    for (int i = 0; i < n; ++i) {
        const auto v = static_cast<int16_t>(8000 * std::sin(2 * M_PI * 440.0 * i / rate));
        for (int c = 0; c < channels; ++c) data.append(reinterpret_cast<const char*>(&v), 2);
    }
    auto u32 = [](uint32_t x) { return std::string(reinterpret_cast<const char*>(&x), 4); };
    auto u16 = [](uint16_t x) { return std::string(reinterpret_cast<const char*>(&x), 2); };
    std::string h = "RIFF" + u32(36 + data.size()) + "WAVEfmt " + u32(16) + u16(1) + u16(channels) + u32(rate) +
                    u32(rate * channels * 2) + u16(channels * 2) + u16(16) + "data" + u32(data.size());
    write_file(path, h + data);
}

// 8. The smaller items: the language error names its field, a duplicate single-valued field is
// refused, a part without headers is called malformed, every channel count the check lets
// through decodes, and the web page works on a server with a key.
TEST(ServeHardening, FieldErrorsChannelsAndThePageWithAKey) {
    Server s;
    ASSERT_GT(s.port(), 0) << s.read_log();
    auto r = s.post("/v1/audio/transcriptions", kJfk + kFast + " -F language=xx");
    EXPECT_EQ(r.first, 400) << r.second;
    EXPECT_EQ(json::parse(r.second)["error"]["param"], "language") << r.second;
    r = s.post("/v1/audio/transcriptions", kJfk + kFast + " -F model=whisper");
    EXPECT_EQ(r.first, 400) << r.second;
    EXPECT_EQ(json::parse(r.second)["error"]["param"], "model") << r.second;

    const std::string wav = read_file(fixture("audio/jfk.wav"));
    const std::string b = "bnd";
    const std::string body = "--" + b + "\r\n" + wav + "\r\n--" + b +
                             "\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper\r\n--" + b + "--\r\n";
    RawResponse m =
        exchange(s.port(),
                 "POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                 "multipart/form-data; boundary=" +
                     b + "\r\nConnection: close\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
    EXPECT_EQ(m.status, 400);
    EXPECT_NE(error_of(m)["message"].get<std::string>().find("malformed"), std::string::npos) << m.body;

    TempDir dir;
    for (int channels : {9, 63, 64}) {
        write_wav_channels(dir / "c.wav", channels, 16000, 1.0);
        r = s.post("/v1/audio/transcriptions", "-F file=@" + (dir / "c.wav").string() + kFast);
        EXPECT_EQ(r.first, 200) << channels << " channels: " << r.second;
    }
    write_wav_channels(dir / "c.wav", 65, 16000, 0.2);
    r = s.post("/v1/audio/transcriptions", "-F file=@" + (dir / "c.wav").string() + kFast);
    EXPECT_EQ(r.first, 400) << r.second;

    Server k("--api-key sesame");
    ASSERT_GT(k.port(), 0) << k.read_log();
    const std::string page = Server::curl("-s " + k.url("/"));
    EXPECT_NE(page.find("id=\"key\""), std::string::npos) << "the page has no field for the key";
    EXPECT_NE(page.find("sessionStorage"), std::string::npos);
    EXPECT_NE(page.find("'Authorization'"), std::string::npos);
}

// 5. A client that half-closes after sending still gets its response, and no interim "100
// Continue" it did not ask for; one that sent "Expect: 100-continue" may get more than one.
TEST(ServeHardening, HalfClosedClientGetsItsResponse) {
    Server s;
    ASSERT_GT(s.port(), 0) << s.read_log();
    const std::string wav = read_file(fixture("audio/jfk.wav"));
    const std::string request =
        multipart_request("/v1/audio/transcriptions", wav, {{"model", "whisper"}, {"temperature", "0"}});
    RawClient c(s.port());
    c.send(request);
    c.shutdown_write();
    const std::string wire = c.read_all(30);
    EXPECT_EQ(wire.rfind("HTTP/1.1 200", 0), 0u) << wire.substr(0, 200);
    const RawResponse r = parse_response(wire);
    EXPECT_EQ(r.status, 200) << r.head << "\n" << r.body;
    EXPECT_TRUE(json::parse(r.body, nullptr, false).contains("text")) << r.body;

    std::string asking = request;
    asking.insert(asking.find("\r\n") + 2, "Expect: 100-Continue\r\n");
    RawClient e(s.port());
    e.send(asking);
    e.shutdown_write();
    const std::string answered = e.read_all(30);
    const RawResponse ra = parse_response(answered);
    EXPECT_EQ(ra.status, 200) << answered.substr(0, 200);
    for (size_t at = 0; answered.compare(at, 9, "HTTP/1.1 ") == 0 && ra.status == 200;) {
        if (answered.compare(at, 12, "HTTP/1.1 200") == 0) break;
        EXPECT_EQ(answered.compare(at, 25, "HTTP/1.1 100 Continue\r\n\r\n"), 0) << answered.substr(at, 40);
        at += 25;
    }
    const json status = json::parse(Server::curl("-s " + s.url("/v1/status")));
    EXPECT_EQ(status["cancelled"], 0);
}

// 4. Clients that disconnect after the first SSE event cancel their requests between steps.
TEST(ServeHardening, AbandonedStreamsAreCancelled) {
    Server s("--cache-slots 8");
    ASSERT_GT(s.port(), 0) << s.read_log();
    // Five minutes of speech (JFK, over and over): ten windows, each with segments to stream.
    const auto jfk = parlance::read_wav_file(fixture("audio/jfk.wav"));
    std::vector<float> pcm;
    while (pcm.size() < 16000u * 300) pcm.insert(pcm.end(), jfk.samples.begin(), jfk.samples.end());
    const std::string wav = [&] {
        auto bytes = parlance::encode_wav(pcm, 16000);
        return std::string(bytes.begin(), bytes.end());
    }();
    const std::string request = multipart_request("/v1/audio/transcriptions", wav,
                                                  {{"model", "whisper"}, {"temperature", "0"}, {"stream", "true"}});
    std::vector<std::unique_ptr<RawClient>> clients;
    for (int i = 0; i < 4; ++i) {
        clients.push_back(std::make_unique<RawClient>(s.port()));
        clients.back()->send(request);
    }
    for (auto& c : clients) {
        const std::string got = c->read_until("data: ", 60);
        EXPECT_NE(got.find("data: "), std::string::npos) << got.substr(0, 300);
        c->close();
    }
    json status;
    for (int i = 0; i < 300; ++i) {
        status = json::parse(Server::curl("-s " + s.url("/v1/status")));
        if (status["active_requests"] == 0 && status["queue"] == 0 && status["in_flight_requests"] == 0) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_EQ(status["cancelled"], 4) << status.dump();
    EXPECT_EQ(status["completed"], 0) << status.dump();
}

std::string noise_wav(const TempDir& dir, double seconds) {
    std::vector<float> noise(static_cast<size_t>(16000 * seconds));
    uint32_t x = 12345;
    for (float& v : noise) v = ((x = x * 1664525u + 1013904223u) >> 8) / float(1 << 24) - 0.5f;
    parlance::write_wav_file(dir / "noise.wav", noise, 16000);
    return (dir / "noise.wav").string();
}

// 3. SIGTERM drains for --shutdown-grace, then cancels what is left with a clean error and exits.
TEST(ServeHardening, ShutdownGraceCancelsWhatIsLeftAndExits) {
    Server s("--shutdown-grace 1 --cache-slots 2");
    ASSERT_GT(s.port(), 0) << s.read_log();
    TempDir dir;
    const std::string file = noise_wav(dir, 300);  // minutes of work on two cores
    auto inflight = std::async(std::launch::async, [&] {
        return s.post("/v1/audio/transcriptions", "-F file=@" + file + " -F model=whisper");
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    s.signal(SIGTERM);
    EXPECT_EQ(s.wait_exit(15), 0) << "not out within the grace period plus a few seconds\n" << s.read_log();
    const auto r = inflight.get();
    EXPECT_EQ(r.first, 503) << r.second;
    json j = json::parse(r.second, nullptr, false);
    ASSERT_TRUE(j.is_object()) << r.second;
    EXPECT_EQ(j["error"]["code"], "shutting_down");
}

TEST(ServeHardening, ASecondSignalExitsAtOnce) {
    Server s("--shutdown-grace 120 --cache-slots 2");
    ASSERT_GT(s.port(), 0) << s.read_log();
    TempDir dir;
    const std::string file = noise_wav(dir, 300);
    auto inflight = std::async(std::launch::async, [&] {
        return s.post("/v1/audio/transcriptions", "-F file=@" + file + " -F model=whisper");
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    s.signal(SIGTERM);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_EQ(s.wait_exit(0.5), -1) << "the first signal should drain, not exit";
    s.signal(SIGTERM);
    EXPECT_EQ(s.wait_exit(5), 128 + SIGTERM) << s.read_log();
    inflight.get();
}

// 2. Hostile uploads: a FLAC that declares hours is refused before decoding; FLACs that declare
// nothing decode only up to the limit, each within 64 MiB above its PCM, and four at once stay
// within the audio memory budget (--audio-memory-mb) plus 16 MiB (without the budget they took
// all four PCMs at once: +113 MiB here).
TEST(ServeHardening, HostileUploadsStayUnderTheMemoryBound) {
    TempDir dir;
    const std::string declared = (dir / "declared.flac").string(), undeclared = (dir / "undeclared.flac").string();
    // 4 h of silence (2.7 MB) with its length in STREAMINFO; 20 min written to a pipe, which
    // leaves the length unknown.
    ASSERT_EQ(run_command("ffmpeg -v error -y -f lavfi -i anullsrc=r=16000:cl=mono -t 14400 -c:a flac " + declared), 0);
    ASSERT_EQ(run_command("ffmpeg -v error -f lavfi -i anullsrc=r=16000:cl=mono -t 1200 -c:a flac -f flac pipe:1 > " +
                          undeclared),
              0);
    const double limit_s = 600;  // 36.6 MiB of 16 kHz float
    const size_t pcm_limit = static_cast<size_t>(limit_s * 16000 * 4), budget = size_t(64) << 20,
                 slack = size_t(64) << 20, budget_slack = size_t(16) << 20;
    Server s("--max-audio-seconds 600 --audio-memory-mb 64");
    ASSERT_GT(s.port(), 0) << s.read_log();
    EXPECT_EQ(s.post("/v1/audio/transcriptions", kJfk + kFast).first, 200);  // warm: buffers, threads
    const size_t base = peak_resident_bytes(s.pid());

    auto r = s.post("/v1/audio/transcriptions", "-F file=@" + declared + " -F model=whisper");
    EXPECT_EQ(r.first, 413) << r.second;
    EXPECT_NE(r.second.find("declares 14400 s"), std::string::npos) << r.second;
    EXPECT_LT(peak_resident_bytes(s.pid()), base + (size_t(16) << 20)) << "the declared file was decoded";

    r = s.post("/v1/audio/transcriptions", "-F file=@" + undeclared + " -F model=whisper");
    EXPECT_EQ(r.first, 413) << r.second;
    const size_t one = peak_resident_bytes(s.pid()) - base;
    EXPECT_LE(one, pcm_limit + slack) << "one request peaked " << (one >> 20) << " MiB above the base";

    std::vector<std::future<std::pair<int, std::string>>> four;
    for (int i = 0; i < 4; ++i)
        four.push_back(std::async(std::launch::async, [&] {
            return s.post("/v1/audio/transcriptions", "-F file=@" + undeclared + " -F model=whisper");
        }));
    for (auto& f : four) EXPECT_EQ(f.get().first, 413);
    const size_t all = peak_resident_bytes(s.pid()) - base;
    EXPECT_LE(all, budget + budget_slack) << "four requests peaked " << (all >> 20) << " MiB above the base";
    const json status = json::parse(Server::curl("-s " + s.url("/v1/status")));
    EXPECT_EQ(status["audio_memory"]["used_bytes"], 0) << "a lease was not returned";
    std::printf(
        "[ memory ] base %zu MiB; one hostile upload +%zu MiB (PCM at the limit %zu MiB); four at once "
        "+%zu MiB (budget %zu MiB)\n",
        base >> 20, one >> 20, pcm_limit >> 20, all >> 20, budget >> 20);
}

}  // namespace

namespace {

// 4. An upload that declares its length is decoded as the model reads it: a 154 s file's request
// holds at most the streamed lease (40 s of samples) of the audio memory budget at any time, not
// its 9.9 MB of PCM, and its windows go on through the file (the fixture's model is random).
TEST(ServeHardening, ALongUploadIsDecodedAsTheModelReadsIt) {
    TempDir dir;
    const std::vector<float> once = parlance::read_wav_file(bundled_model_dir() / "samples" / "long.wav").samples;
    std::vector<float> pcm;
    for (int i = 0; i < 3; ++i) pcm.insert(pcm.end(), once.begin(), once.end());
    const std::string file = (dir / "long3.wav").string();
    parlance::write_wav_file(file, pcm, 16000);
    Server s("");
    ASSERT_GT(s.port(), 0) << s.read_log();
    auto request = std::async(std::launch::async, [&] {
        return s.post("/v1/audio/transcriptions",
                      "-F file=@" + file + " -F model=whisper -F response_format=verbose_json");
    });
    size_t most = 0;
    while (request.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
        const json status = json::parse(Server::curl("-s " + s.url("/v1/status")), nullptr, false);
        if (status.is_object() && status.contains("audio_memory"))
            most = std::max(most, status["audio_memory"]["used_bytes"].get<size_t>());
    }
    const auto r = request.get();
    ASSERT_EQ(r.first, 200) << r.second;
    const json t = json::parse(r.second);
    EXPECT_NEAR(t["duration"].get<double>(), pcm.size() / 16000.0, 0.01);
    ASSERT_FALSE(t["segments"].empty());
    EXPECT_GT(t["segments"].back()["end"].get<double>(), 100.0) << r.second;  // windows far into the file
    EXPECT_GT(most, 0u) << "the request's lease was never seen";
    EXPECT_LE(most, size_t(40 * 16000 * 4)) << "the request held more than a window's audio";
    const json status = json::parse(Server::curl("-s " + s.url("/v1/status")));
    EXPECT_EQ(status["audio_memory"]["used_bytes"], 0) << "the lease was not returned";
}

}  // namespace
