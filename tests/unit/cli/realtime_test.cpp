// Black-box tests of /v1/realtime over a real WebSocket (a Beast client against `parlance
// serve`): manual commits, server VAD segmenting speech with streamed deltas that join to each
// item's completed transcript, every invalid input answered with an error event while the
// session goes on, the beta shapes, and the handshake's auth and refusals.
#include <openssl/evp.h>
#include <sys/socket.h>

#include <gtest/gtest.h>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <nlohmann/json.hpp>

#include "audio/decode.h"
#include "audio/wav.h"
#include "qwen3_fixture.h"
#include "serve_fixture.h"
#include "test_support.h"

namespace {

using namespace parlance::testing;
using nlohmann::json;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;

std::string base64(const std::string& bytes) {
    std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
    const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                  reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
    out.resize(static_cast<size_t>(n));
    return out;
}

// 16-bit little-endian PCM of float samples.
std::string pcm16(const std::vector<float>& x) {
    std::string out(x.size() * 2, '\0');
    for (size_t i = 0; i < x.size(); ++i) {
        const auto v = static_cast<int16_t>(std::lround(std::clamp(x[i], -1.0f, 32767.0f / 32768.0f) * 32768.0f));
        out[2 * i] = static_cast<char>(v & 0xFF);
        out[2 * i + 1] = static_cast<char>((v >> 8) & 0xFF);
    }
    return out;
}

class WsClient {
public:
    // Throws beast::system_error when the handshake is refused.
    WsClient(int port, const std::string& target, const std::vector<std::pair<std::string, std::string>>& headers = {},
             std::string* handshake_response_protocol = nullptr)
        : ws_(io_) {
        ws_.next_layer().connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
        timeval tv{20, 0};  // a missing event fails the test instead of hanging it
        setsockopt(ws_.next_layer().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        ws_.set_option(websocket::stream_base::decorator([headers](websocket::request_type& r) {
            for (const auto& [k, v] : headers) r.set(k, v);
        }));
        websocket::response_type res;
        ws_.handshake(res, "127.0.0.1", target);
        if (handshake_response_protocol)
            *handshake_response_protocol = std::string(res[beast::http::field::sec_websocket_protocol]);
    }
    void send(const json& ev) { send_text(ev.dump()); }
    void send_text(const std::string& text) {
        ws_.text(true);
        ws_.write(asio::buffer(text));
    }
    json next() {
        beast::flat_buffer b;
        ws_.read(b);
        return json::parse(beast::buffers_to_string(b.data()));
    }
    // Events until one of `type` (included); fails after 400 events.
    std::vector<json> until(const std::string& type) {
        std::vector<json> got;
        for (int i = 0; i < 400; ++i) {
            got.push_back(next());
            if (got.back()["type"] == type) return got;
        }
        ADD_FAILURE() << "no " << type;
        return got;
    }
    void append(const std::string& pcm_bytes, size_t chunk = 6400) {
        for (size_t i = 0; i < pcm_bytes.size(); i += chunk)
            send({{"type", "input_audio_buffer.append"}, {"audio", base64(pcm_bytes.substr(i, chunk))}});
    }

    // Events until the server closes the socket; `code` gets the close frame's code.
    std::vector<json> until_closed(int* code) {
        std::vector<json> got;
        for (int i = 0; i < 400; ++i) {
            try {
                got.push_back(next());
            } catch (const beast::system_error& e) {
                *code = static_cast<int>(ws_.reason().code);
                return got;
            }
        }
        ADD_FAILURE() << "never closed";
        return got;
    }

private:
    asio::io_context io_;
    websocket::stream<asio::ip::tcp::socket> ws_;
};

std::vector<float> jfk16k() {
    return parlance::read_wav_file(fixture("audio/jfk.wav")).samples;
}

json manual_session(bool rate16k) {
    return {{"type", "session.update"},
            {"session",
             {{"type", "transcription"},
              {"audio",
               {{"input",
                 {{"format", {{"type", "audio/pcm"}, {"rate", rate16k ? 16000 : 24000}}},
                  {"transcription", {{"model", "whisper"}, {"language", "en"}}},
                  {"turn_detection", nullptr}}}}}}}};
}

// Per item: the deltas joined, and the completed transcript.
std::map<std::string, std::pair<std::string, std::string>> transcripts(const std::vector<json>& events) {
    std::map<std::string, std::pair<std::string, std::string>> out;
    for (const auto& e : events) {
        if (e["type"] == "conversation.item.input_audio_transcription.delta")
            out[e["item_id"]].first += e["delta"].get<std::string>();
        if (e["type"] == "conversation.item.input_audio_transcription.completed")
            out[e["item_id"]].second = e["transcript"];
    }
    return out;
}

TEST(Realtime, AManualCommitTranscribesTheBufferAsTheFileEndpointDoes) {
    Server s;
    ASSERT_GT(s.port(), 0) << s.read_log();
    WsClient c(s.port(), "/v1/realtime?intent=transcription");
    json created = c.next();
    EXPECT_EQ(created["type"], "session.created");
    EXPECT_TRUE(created["event_id"].is_string());
    c.send(manual_session(true));
    json updated = c.next();
    ASSERT_EQ(updated["type"], "session.updated") << updated.dump();
    EXPECT_EQ(updated["session"]["audio"]["input"]["format"]["rate"], 16000);
    EXPECT_TRUE(updated["session"]["audio"]["input"]["turn_detection"].is_null());
    c.append(pcm16(jfk16k()));
    c.send({{"type", "input_audio_buffer.commit"}});
    const auto events = c.until("conversation.item.input_audio_transcription.completed");
    std::string item;
    for (const auto& e : events) {
        if (e["type"] == "input_audio_buffer.committed") item = e["item_id"];
        EXPECT_NE(e["type"], "input_audio_buffer.speech_started");  // no VAD: no speech events
    }
    ASSERT_FALSE(item.empty());
    const auto& done = events.back();
    EXPECT_EQ(done["item_id"], item);
    EXPECT_EQ(done["usage"]["type"], "duration");
    const auto t = transcripts(events);
    EXPECT_EQ(t.at(item).first, t.at(item).second) << "the deltas do not join to the transcript";
    // The same audio as a file request (temperature 0) gives the same text.
    auto file = s.post("/v1/audio/transcriptions",
                       "-F file=@" + fixture("audio/jfk.wav") + " -F model=whisper -F temperature=0 -F language=en");
    ASSERT_EQ(file.first, 200);
    EXPECT_EQ(t.at(item).second, json::parse(file.second)["text"]);
}

// SIGTERM while someone speaks: the speech received so far is finalized and its transcript goes
// out (committed, completed), then the server closes with 1001 (going away) and exits 0 within
// its grace period; a second session in manual mode, with nothing committed, is just closed so.
TEST(Realtime, SigtermFinishesTheSpeechGoingOnThenClosesWith1001) {
    Server s;
    ASSERT_GT(s.port(), 0) << s.read_log();
    WsClient c(s.port(), "/v1/realtime?intent=transcription");
    WsClient idle(s.port(), "/v1/realtime?intent=transcription");
    c.next();
    idle.next();
    json update = manual_session(true);
    update["session"]["audio"]["input"]["turn_detection"] = {{"type", "server_vad"}, {"silence_duration_ms", 2000}};
    c.send(update);
    ASSERT_EQ(c.next()["type"], "session.updated");
    // The first 2.5 s of JFK, still speaking when the signal comes.
    std::vector<float> audio = jfk16k();
    audio.resize(40000);
    c.append(pcm16(audio));
    const auto before = c.until("input_audio_buffer.speech_started");
    const std::string item = before.back()["item_id"];
    s.signal(SIGTERM);
    int code = 0;
    const auto after = c.until_closed(&code);
    bool committed = false, completed = false;
    for (const json& e : after) {
        committed |= e["type"] == "input_audio_buffer.committed" && e["item_id"] == item;
        completed |= e["type"] == "conversation.item.input_audio_transcription.completed" && e["item_id"] == item;
    }
    EXPECT_TRUE(committed);
    EXPECT_TRUE(completed);
    EXPECT_EQ(code, 1001);
    int idle_code = 0;
    idle.until_closed(&idle_code);
    EXPECT_EQ(idle_code, 1001);
    EXPECT_EQ(s.wait_exit(30), 0) << s.read_log();
}

TEST(Realtime, ServerVadSegmentsSpeechAndStreamsDeltasThatJoinToEachTranscript) {
    // The most eager commit rule the server takes (every re-decode commits all but its last word)
    // and a short cadence: the deltas must still join to each transcript.
    Server s("--realtime-commit-agreement 1 --realtime-redecode-seconds 0.3");
    ASSERT_GT(s.port(), 0) << s.read_log();
    WsClient c(s.port(), "/v1/realtime?model=whisper");
    c.next();
    json update = manual_session(false);  // GA pcm at 24 kHz
    update["session"]["audio"]["input"]["turn_detection"] = {{"type", "server_vad"}, {"silence_duration_ms", 500}};
    c.send(update);
    ASSERT_EQ(c.next()["type"], "session.updated");
    // JFK (pauses of a second between phrases) at 24 kHz, then two seconds of silence.
    std::vector<float> audio = parlance::resample(jfk16k(), 16000, 24000);
    audio.resize(audio.size() + 48000, 0.0f);
    c.append(pcm16(audio), 4800);  // 100 ms messages
    std::vector<json> events;
    std::map<std::string, int> started, stopped;
    int completed = 0;
    for (int i = 0; i < 2000 && (started.empty() || completed < static_cast<int>(started.size())); ++i) {
        events.push_back(c.next());
        const json& e = events.back();
        if (e["type"] == "input_audio_buffer.speech_started") started[e["item_id"]] = e["audio_start_ms"];
        if (e["type"] == "input_audio_buffer.speech_stopped") stopped[e["item_id"]] = e["audio_end_ms"];
        if (e["type"] == "conversation.item.input_audio_transcription.completed") ++completed;
        ASSERT_NE(e["type"], "error") << e.dump();
    }
    ASSERT_GE(started.size(), 2u) << "JFK's pauses should split the speech";
    int last_end = -1;
    for (const auto& [item, start] : started) {
        ASSERT_TRUE(stopped.count(item)) << item;
        EXPECT_LT(start, stopped[item]);
        EXPECT_LE(stopped[item], 13000);
        last_end = std::max(last_end, stopped[item]);
    }
    for (const auto& [item, t] : transcripts(events)) {
        EXPECT_EQ(t.first, t.second) << item;
        // Sent faster than real time, an item's audio must survive until its final decode.
        EXPECT_FALSE(t.second.empty()) << item;
    }
    EXPECT_EQ(completed, static_cast<int>(started.size()));
}

TEST(Realtime, ServeRefusesLiveSessionSettingsOutOfRangeNamingTheFlag) {
    for (const std::string flag :
         {"--realtime-commit-agreement 0", "--realtime-redecode-seconds 0", "--realtime-max-segment-seconds 31"}) {
        std::string out;
        EXPECT_NE(run_command(quoted(parlance_binary().string()) + " serve --port 0 " + flag + " 2>&1", &out), 0);
        EXPECT_NE(out.find(flag.substr(0, flag.find(' '))), std::string::npos) << out;
    }
}

TEST(Realtime, InvalidEventsGetErrorEventsAndTheSessionGoesOn) {
    Server s;
    ASSERT_GT(s.port(), 0) << s.read_log();
    WsClient c(s.port(), "/v1/realtime?intent=transcription");
    c.next();
    c.send(manual_session(true));
    c.next();
    auto expect_error = [&](const std::string& code, const std::string& event_id) {
        const json e = c.next();
        ASSERT_EQ(e["type"], "error") << e.dump();
        EXPECT_EQ(e["error"]["code"], code) << e.dump();
        EXPECT_TRUE(e["error"]["message"].is_string());
        EXPECT_EQ(e["error"]["type"], "invalid_request_error");
        if (!event_id.empty()) {
            EXPECT_EQ(e["error"]["event_id"], event_id);
        }
    };
    c.send_text("{not json");
    expect_error("invalid_json", "");
    c.send({{"type", "response.create"}, {"event_id", "e1"}});
    expect_error("unknown_event_type", "e1");
    c.send({{"type", "input_audio_buffer.append"}, {"audio", "***"}, {"event_id", "e2"}});
    expect_error("invalid_base64", "e2");
    c.send({{"type", "input_audio_buffer.append"}, {"audio", base64("abc")}, {"event_id", "e3"}});
    expect_error("invalid_audio", "e3");
    json bad = manual_session(true);
    bad["session"]["audio"]["input"]["format"] = {{"type", "audio/flac"}};
    bad["event_id"] = "e4";
    c.send(bad);
    expect_error("invalid_value", "e4");
    json lang = manual_session(true);
    lang["session"]["audio"]["input"]["transcription"]["language"] = "xx";
    c.send(lang);
    expect_error("unsupported_language", "");
    c.append(pcm16(std::vector<float>(800, 0.0f)));  // 50 ms
    c.send({{"type", "input_audio_buffer.commit"}, {"event_id", "e5"}});
    expect_error("input_audio_buffer_commit_empty", "e5");
    // Still usable: a clear, then a real commit.
    c.send({{"type", "input_audio_buffer.clear"}});
    EXPECT_EQ(c.next()["type"], "input_audio_buffer.cleared");
    c.append(pcm16(jfk16k()));
    c.send({{"type", "input_audio_buffer.commit"}});
    const auto events = c.until("conversation.item.input_audio_transcription.completed");
    EXPECT_FALSE(events.back()["transcript"].get<std::string>().empty());
}

TEST(Realtime, BetaClientsGetTheBetaShapes) {
    Server s;
    ASSERT_GT(s.port(), 0) << s.read_log();
    WsClient c(s.port(), "/v1/realtime?model=whisper", {{"OpenAI-Beta", "realtime=v1"}});
    EXPECT_EQ(c.next()["type"], "transcription_session.created");
    c.send({{"type", "transcription_session.update"},
            {"session",
             {{"input_audio_format", "pcm16"},
              {"input_audio_transcription", {{"model", "whisper-1"}, {"language", "en"}}},
              {"turn_detection", nullptr}}}});
    const json u = c.next();
    ASSERT_EQ(u["type"], "transcription_session.updated") << u.dump();
    EXPECT_EQ(u["session"]["object"], "realtime.transcription_session");
    EXPECT_EQ(u["session"]["input_audio_format"], "pcm16");
    c.append(pcm16(parlance::resample(jfk16k(), 16000, 24000)), 9600);
    c.send({{"type", "input_audio_buffer.commit"}});
    const auto events = c.until("conversation.item.input_audio_transcription.completed");
    bool created = false;
    for (const auto& e : events) created |= e["type"] == "conversation.item.created";
    EXPECT_TRUE(created);
}

TEST(Realtime, TheHandshakeTakesTheKeyAsAHeaderOrASubprotocolAndRefusesTheRest) {
    Server s("--api-key sesame --max-sessions 1");
    ASSERT_GT(s.port(), 0) << s.read_log();
    EXPECT_THROW(WsClient(s.port(), "/v1/realtime?intent=transcription"), beast::system_error);
    std::string protocol;
    {
        WsClient browser(s.port(), "/v1/realtime?intent=transcription",
                         {{"Sec-WebSocket-Protocol", "realtime, openai-insecure-api-key.sesame"}}, &protocol);
        EXPECT_EQ(protocol, "realtime");  // never the one carrying the key
        EXPECT_EQ(browser.next()["type"], "session.created");
        // One session at most: a second is refused while this one lives.
        EXPECT_THROW(WsClient(s.port(), "/v1/realtime", {{"Authorization", "Bearer sesame"}}), beast::system_error);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    WsClient node(s.port(), "/v1/realtime?intent=transcription", {{"Authorization", "Bearer sesame"}});
    EXPECT_EQ(node.next()["type"], "session.created");
    // Not an upgrade: 426 with the error body.
    const RawResponse r = parse_response([&] {
        RawClient raw(s.port());
        raw.send("GET /v1/realtime HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sesame\r\nConnection: close\r\n\r\n");
        return raw.read_all(10);
    }());
    EXPECT_EQ(r.status, 426) << r.head;
    const std::string metrics = Server::curl("-s -H 'Authorization: Bearer sesame' " + s.url("/metrics"));
    EXPECT_NE(metrics.find("parlance_realtime_sessions 1"), std::string::npos);
}

// Two sessions at once, with different languages: each sees only its own items, and each
// transcript is what a file request in its language gives.
TEST(Realtime, TwoSessionsAtOnceAreIsolated) {
    Server s;
    ASSERT_GT(s.port(), 0) << s.read_log();
    WsClient a(s.port(), "/v1/realtime?intent=transcription"), b(s.port(), "/v1/realtime?intent=transcription");
    a.next();
    b.next();
    json ua = manual_session(true), ub = manual_session(true);
    ub["session"]["audio"]["input"]["transcription"]["language"] = "de";
    a.send(ua);
    b.send(ub);
    ASSERT_EQ(a.next()["type"], "session.updated");
    ASSERT_EQ(b.next()["session"]["audio"]["input"]["transcription"]["language"], "de");
    const std::string audio = pcm16(jfk16k());
    a.append(audio);
    b.append(audio);
    a.send({{"type", "input_audio_buffer.commit"}});
    b.send({{"type", "input_audio_buffer.commit"}});
    const auto ea = a.until("conversation.item.input_audio_transcription.completed");
    const auto eb = b.until("conversation.item.input_audio_transcription.completed");
    const std::string ia = ea.back()["item_id"], ib = eb.back()["item_id"];
    EXPECT_NE(ia, ib);
    for (const auto& e : ea) {
        if (e.contains("item_id")) {
            EXPECT_EQ(e["item_id"], ia);
        }
    }
    for (const auto& e : eb) {
        if (e.contains("item_id")) {
            EXPECT_EQ(e["item_id"], ib);
        }
    }
    for (const auto& [lang, events] : {std::pair{"en", &ea}, std::pair{"de", &eb}}) {
        auto file = s.post("/v1/audio/transcriptions", "-F file=@" + fixture("audio/jfk.wav") +
                                                           " -F model=whisper -F temperature=0 -F language=" + lang);
        ASSERT_EQ(file.first, 200);
        EXPECT_EQ(events->back()["transcript"], json::parse(file.second)["text"]) << lang;
    }
    const std::string metrics = Server::curl("-s " + s.url("/metrics"));
    for (const char* m :
         {"parlance_realtime_sessions 2", "parlance_realtime_items_total 2",
          "parlance_realtime_completed_after_speech_seconds_count 2", "parlance_realtime_first_delta_seconds_bucket",
          "# TYPE parlance_realtime_commit_lag_seconds histogram", "parlance_realtime_commit_lag_seconds_count ",
          // One decode per manual commit; Whisper's engine reports no decoder passes and takes no guess.
          "\nparlance_realtime_decodes_total 2\n", "\nparlance_realtime_decoder_passes_total 0\n",
          "\nparlance_realtime_draft_tokens_total{kind=\"proposed\"} 0\n",
          "\nparlance_realtime_draft_tokens_total{kind=\"accepted\"} 0\n"})
        EXPECT_NE(metrics.find(m), std::string::npos) << m;
}

// Self-speculation: a Qwen3-ASR session's re-decodes verify the previous hypothesis as a draft.
// `parlance stream --lockstep` (every re-decode at its cadence point) with and without it: the
// same deltas at the same points and the same transcripts; with it, drafted tokens.
TEST(Realtime, SelfSpeculationChangesNoDeltaOrTranscriptOfAQwen3AsrSession) {
    TempDir dir;
    const auto model = write_qwen3_asr("tiny", dir.path());
    auto stream = [&](const std::string& extra, std::string* counts) {
        std::string out;
        const int rc = run_command(quoted(parlance_binary().string()) + " stream " + quoted(fixture("audio/jfk.wav")) +
                                       " --lockstep --threads 2 --model " + quoted(model.string()) + extra + " 2>&1",
                                   &out);
        EXPECT_EQ(rc, 0) << out;
        // "  1.20 s  <item> +\"delta\"" and "... <item> completed in X s ...: \"text\"": the item ids are
        // random and the latency is the machine's, so each line keeps its audio time and text.
        std::string events;
        std::istringstream in(out);
        for (std::string line; std::getline(in, line);) {
            if (line.find(" +\"") != std::string::npos)
                events += line.substr(0, 10) + line.substr(line.find(" +\"")) + "\n";
            if (line.find(" completed in ") != std::string::npos)
                events += line.substr(0, 10) + " completed" + line.substr(line.find(": \"")) + "\n";
            if (line.find("self-speculation") != std::string::npos) *counts = line;
        }
        return events;
    };
    std::string on_counts, off_counts;
    const std::string on = stream("", &on_counts), off = stream(" --no-self-speculation", &off_counts);
    EXPECT_NE(on.find("completed"), std::string::npos) << on;
    EXPECT_EQ(on, off);
    std::printf("[ realtime ] %s\n[ realtime ] %s\n", on_counts.c_str(), off_counts.c_str());
    EXPECT_NE(on_counts.find("self-speculation on"), std::string::npos) << on_counts;
    EXPECT_EQ(on_counts.find(": 0 drafted"), std::string::npos) << "no draft was verified: " << on_counts;
    EXPECT_NE(off_counts.find("self-speculation off: 0 drafted tokens"), std::string::npos) << off_counts;
}

// Ten minutes of a stream (a minute: JFK's 11 s, then silence), sent as fast as the server takes
// it: every item completes, and resident memory after the tenth minute is what it was after the
// first (consumed audio is dropped; a client faster than the decodes meets backpressure).
TEST(Realtime, TenMinutesOfStreamKeepMemoryFlat) {
    Server s;
    ASSERT_GT(s.port(), 0) << s.read_log();
    WsClient c(s.port(), "/v1/realtime?intent=transcription");
    c.next();
    json update = manual_session(true);
    update["session"]["audio"]["input"]["turn_detection"] = {{"type", "server_vad"}};
    c.send(update);
    ASSERT_EQ(c.next()["type"], "session.updated");
    std::vector<float> minute = jfk16k();
    minute.resize(16000 * 60, 0.0f);
    const std::string bytes = pcm16(minute);
    int started = 0, completed = 0;
    size_t after_first = 0;
    for (int m = 0; m < 10; ++m) {
        c.append(bytes, 3200);
        const int before = started;
        while (started == before || completed < started) {
            const json e = c.next();
            ASSERT_NE(e["type"], "error") << e.dump();
            if (e["type"] == "input_audio_buffer.speech_started") ++started;
            if (e["type"] == "conversation.item.input_audio_transcription.completed") ++completed;
        }
        if (m == 0) after_first = resident_bytes_of(s.pid());
    }
    const size_t after_tenth = resident_bytes_of(s.pid());
    std::printf("[ realtime ] %d items in 10 minutes; resident %zu MiB after the first, %zu MiB after the tenth\n",
                completed, after_first >> 20, after_tenth >> 20);
    EXPECT_GE(completed, 10);
    EXPECT_LT(after_tenth, after_first + (size_t(16) << 20)) << "memory grew over the stream";
}

}  // namespace
