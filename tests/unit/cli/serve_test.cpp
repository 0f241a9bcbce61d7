// Black-box tests of `parlance serve`: a real server process on a loopback port with a fixture
// model, driven with curl. Success paths for every format and both endpoints, SSE, models,
// health, status, metrics; every invalid input's status and OpenAI error body; overload (429),
// cancel on disconnect, and batching equivalence (concurrent == one at a time, byte for byte).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "audio/wav.h"
#include "qwen3_fixture.h"
#include "serve_fixture.h"
#include "test_support.h"

namespace {

using namespace parlance::testing;
using nlohmann::json;

void expect_error(const std::pair<int, std::string>& r, int status, const std::string& param) {
    EXPECT_EQ(r.first, status) << r.second;
    json j = json::parse(r.second, nullptr, false);
    ASSERT_TRUE(j.is_object() && j.contains("error")) << r.second;
    EXPECT_TRUE(j["error"]["message"].is_string());
    EXPECT_TRUE(j["error"]["type"].is_string());
    if (!param.empty()) {
        EXPECT_EQ(j["error"]["param"], param) << r.second;
    }
}

TEST(Serve, HealthModelsStatusMetricsAndPage) {
    Server s;
    ASSERT_GT(s.port(), 0) << s.read_log();
    EXPECT_NE(Server::curl("-s " + s.url("/health")).find("ok"), std::string::npos);
    json models = json::parse(Server::curl("-s " + s.url("/v1/models")));
    EXPECT_EQ(models["object"], "list");
    // The id is the model's directory name (no --model-id, no ID=PATH).
    EXPECT_EQ(models["data"][0]["id"], "model");
    EXPECT_EQ(json::parse(Server::curl("-s " + s.url("/v1/models/model")))["id"], "model");
    EXPECT_EQ(json::parse(Server::curl("-s " + s.url("/v1/models/whisper-1")))["id"], "whisper-1");
    json status = json::parse(Server::curl("-s " + s.url("/v1/status")));
    EXPECT_EQ(status["ready"], true);
    EXPECT_TRUE(status.contains("queue") && status.contains("active_requests") &&
                status.contains("resident_memory_bytes"));
    EXPECT_NE(Server::curl("-s " + s.url("/")).find("<form"), std::string::npos);
    s.post("/v1/audio/transcriptions", kJfk + kFast);
    std::string metrics = Server::curl("-s " + s.url("/metrics"));
    for (const char* name : {"parlance_requests_total{route=\"/v1/audio/transcriptions\",status=\"200\"} 1",
                             "parlance_request_duration_seconds_bucket", "parlance_audio_seconds_total 11",
                             "parlance_queue_depth", "parlance_active_requests", "parlance_decode_tokens_total",
                             "parlance_resident_memory_bytes", "parlance_real_time_factor",
                             "parlance_encoded_pieces_total 1\n"})
        EXPECT_NE(metrics.find(name), std::string::npos) << name;
    // The engine's phases: the encoder's and the decoder's passes are parts of its busy time.
    const auto seconds = [&](const std::string& phase) {
        const std::string key = "parlance_engine_seconds_total{phase=\"" + phase + "\"} ";
        const size_t at = metrics.find(key);
        return at == std::string::npos ? -1.0 : std::stod(metrics.substr(at + key.size()));
    };
    EXPECT_GT(seconds("encoder"), 0.0);
    EXPECT_GT(seconds("decoder_forward"), 0.0);
    EXPECT_LE(seconds("encoder") + seconds("decoder_forward"), seconds("busy"));
}

TEST(Serve, EveryResponseFormatOnBothEndpoints) {
    Server s;
    for (const char* route : {"/v1/audio/transcriptions", "/v1/audio/translations"}) {
        auto r = s.post(route, kJfk + kFast + " -F response_format=json");
        ASSERT_EQ(r.first, 200) << r.second;
        EXPECT_TRUE(json::parse(r.second)["text"].is_string());
        r = s.post(route, kJfk + kFast + " -F response_format=text");
        ASSERT_EQ(r.first, 200);
        EXPECT_FALSE(r.second.empty());
        r = s.post(route, kJfk + kFast + " -F response_format=srt");
        ASSERT_EQ(r.first, 200);
        EXPECT_TRUE(std::regex_search(r.second, std::regex("^1\n\\d\\d:\\d\\d:\\d\\d,\\d{3} --> ")));
        r = s.post(route, kJfk + kFast + " -F response_format=vtt");
        ASSERT_EQ(r.first, 200);
        EXPECT_EQ(r.second.rfind("WEBVTT", 0), 0u);
        r = s.post(route, kJfk + kFast + " -F response_format=verbose_json -F 'timestamp_granularities[]=segment'");
        ASSERT_EQ(r.first, 200) << r.second;
        json v = json::parse(r.second);
        EXPECT_EQ(v["task"], std::string(route).find("translations") != std::string::npos ? "translate" : "transcribe");
        EXPECT_NEAR(v["duration"].get<double>(), 11.0, 0.01);
        ASSERT_FALSE(v["segments"].empty());
        for (const char* k : {"id", "seek", "start", "end", "text", "tokens", "temperature", "avg_logprob",
                              "compression_ratio", "no_speech_prob"})
            EXPECT_TRUE(v["segments"][0].contains(k)) << k;
    }
}

TEST(Serve, StreamDeltasAddUpToTheDoneText) {
    Server s;
    auto r = s.post("/v1/audio/transcriptions", kJfk + kFast + " -F stream=true");
    ASSERT_EQ(r.first, 200) << r.second;
    std::string deltas, done;
    bool saw_done = false;
    std::istringstream in(r.second);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("data: ", 0) != 0) continue;
        json ev = json::parse(line.substr(6));
        ASSERT_FALSE(saw_done) << "event after transcript.text.done";
        if (ev["type"] == "transcript.text.delta") deltas += ev["delta"].get<std::string>();
        if (ev["type"] == "transcript.text.done") {
            saw_done = true;
            done = ev["text"];
            EXPECT_TRUE(ev.contains("usage"));
        }
    }
    ASSERT_TRUE(saw_done);
    // The done text is the deltas joined, without the leading space Whisper segments carry.
    size_t b = deltas.find_first_not_of(' ');
    EXPECT_EQ(done, b == std::string::npos ? "" : deltas.substr(b));
}

// chunking_strategy server_vad: only what Silero VAD calls speech is decoded, and the times are the
// file's. jfk between 3 s of silence on each side: every segment lies inside the speech (plus
// padding); a file of silence is not decoded (no text, no segments, its duration); the SDKs'
// bracket form and "auto" are accepted; bad strategies are 400s naming the field.
TEST(Serve, ChunkingStrategyServerVadDecodesOnlyTheSpeech) {
    TempDir d;
    const std::vector<float> jfk = parlance::read_wav_file(fixture("audio/jfk.wav")).samples;
    std::vector<float> padded(48000, 0.0f);
    padded.insert(padded.end(), jfk.begin(), jfk.end());
    padded.insert(padded.end(), 48000, 0.0f);
    parlance::write_wav_file(d.path() / "padded.wav", padded, 16000);
    parlance::write_wav_file(d.path() / "silence.wav", std::vector<float>(96000, 0.0f), 16000);
    const std::string speech_end = std::to_string(3.0 + jfk.size() / 16000.0 + 0.35);
    Server s;
    const std::string padded_form = "-F file=@" + quoted((d.path() / "padded.wav").string()) +
                                    " -F model=whisper -F temperature=0 -F response_format=verbose_json";
    for (const std::string& strategy :
         {std::string("-F chunking_strategy=auto"),
          std::string("-F 'chunking_strategy={\"type\": \"server_vad\", \"silence_duration_ms\": 500}'"),
          std::string("-F 'chunking_strategy[type]=server_vad' -F 'chunking_strategy[threshold]=0.6'")}) {
        auto [status, body] = s.post("/v1/audio/transcriptions", padded_form + " " + strategy);
        ASSERT_EQ(status, 200) << strategy << ": " << body;
        const json j = json::parse(body);
        EXPECT_NEAR(j["duration"].get<double>(), padded.size() / 16000.0, 0.01);
        for (const json& seg : j["segments"]) {
            EXPECT_GE(seg["start"].get<double>(), 2.6) << strategy << ": " << seg.dump();
            EXPECT_LE(seg["end"].get<double>(), std::stod(speech_end)) << strategy << ": " << seg.dump();
        }
    }
    auto [ss, silent] = s.post("/v1/audio/transcriptions", "-F file=@" + quoted((d.path() / "silence.wav").string()) +
                                                               " -F model=whisper -F chunking_strategy=auto"
                                                               " -F response_format=verbose_json");
    ASSERT_EQ(ss, 200) << silent;
    const json sj = json::parse(silent);
    EXPECT_EQ(sj["text"], "");
    EXPECT_TRUE(sj["segments"].empty());
    EXPECT_NEAR(sj["duration"].get<double>(), 6.0, 0.01);
    for (auto [args, param] :
         {std::pair{std::string("-F chunking_strategy=manual"), "chunking_strategy"},
          std::pair{std::string("-F 'chunking_strategy={\"type\": \"x\"}'"), "chunking_strategy.type"},
          std::pair{std::string("-F 'chunking_strategy[type]=server_vad' -F 'chunking_strategy[threshold]=2'"),
                    "chunking_strategy.threshold"},
          std::pair{std::string("-F 'chunking_strategy[frob]=1' -F 'chunking_strategy[type]=server_vad'"),
                    "chunking_strategy.frob"},
          std::pair{std::string("-F 'chunking_strategy[threshold]=0.4'"), "chunking_strategy.type"}}) {
        auto [status, body] = s.post("/v1/audio/transcriptions", padded_form + " " + args);
        EXPECT_EQ(status, 400) << args << ": " << body;
        EXPECT_EQ(json::parse(body)["error"]["param"], param) << args << ": " << body;
    }
}

TEST(Serve, InvalidRequestsGetTheirStatusAndErrorBody) {
    Server s("--max-upload-mb 1");
    expect_error(s.post("/v1/audio/transcriptions", "-F model=whisper"), 400, "file");
    expect_error(s.post("/v1/audio/transcriptions", kJfk), 400, "model");
    expect_error(s.post("/v1/audio/transcriptions", kJfk + kFast + " -F response_format=xml"), 400, "response_format");
    expect_error(s.post("/v1/audio/transcriptions", kJfk + kFast + " -F 'timestamp_granularities[]=word'"), 400,
                 "timestamp_granularities[]");
    expect_error(s.post("/v1/audio/transcriptions", kJfk + kFast + " -F temperature=7"), 400, "temperature");
    expect_error(s.post("/v1/audio/transcriptions", kJfk + kFast + " -F stream=maybe"), 400, "stream");
    expect_error(s.post("/v1/audio/transcriptions", kJfk + kFast + " -F colour=blue"), 400, "colour");
    expect_error(s.post("/v1/audio/translations", kJfk + kFast + " -F language=en"), 400, "language");
    expect_error(s.post("/v1/audio/transcriptions", "-F file=@" + fixture("whisper/tiny-en/reference.json") + kFast),
                 400, "file");
    expect_error(s.post("/v1/audio/transcriptions",
                        "-H 'Content-Type: multipart/form-data; boundary=XX' --data-binary 'garbage'"),
                 400, "");
    expect_error(s.post("/v1/audio/transcriptions", "-H 'Content-Type: application/json' --data-binary '{}'"), 400,
                 "file");
    expect_error(s.post("/v1/audio/transcriptions", kJfk + " -F model=gpt-9"), 404, "model");
    expect_error(s.post("/v1/models", "-X POST"), 405, "");
    expect_error(s.post("/v1/nothing", "-X POST"), 404, "");
    TempDir big;
    write_file(big / "big.wav", std::string(2u << 20, 'x'));
    expect_error(s.post("/v1/audio/transcriptions", "-F file=@" + (big / "big.wav").string() + kFast), 413, "file");
    // The server still serves after all that.
    EXPECT_EQ(s.post("/v1/audio/transcriptions", kJfk + kFast).first, 200);
}

// Content: the bundled default model (no --model) transcribes its held-out samples, in json and
// in the SSE stream. Skipped only while no model is bundled.
TEST(Serve, DefaultModelTranscribesHeldOutSamples) {
    const auto samples = bundled_model_dir() / "samples";
    if (!std::filesystem::exists(bundled_model_dir() / "config.json")) GTEST_SKIP() << "no bundled model";
    Server s("", "", 224);  // a trained model's sentence needs its full token budget
    ASSERT_GT(s.port(), 0) << s.read_log();
    for (const char* name : {"heldout_voice", "seen_voice"}) {
        const std::string ref = read_file(samples / (std::string(name) + ".txt"));
        const std::string file = "-F file=@" + (samples / (std::string(name) + ".wav")).string();
        auto r = s.post("/v1/audio/transcriptions", file + " -F model=whisper-1");
        ASSERT_EQ(r.first, 200) << r.second;
        const std::string text = json::parse(r.second).at("text");
        EXPECT_TRUE(words_match(ref, text)) << name << ": reference '" << ref << "', got '" << text << "'";
        // The stream's deltas carry the same words.
        auto st = s.post("/v1/audio/transcriptions", file + " -F model=whisper-1 -F stream=true");
        ASSERT_EQ(st.first, 200) << st.second;
        std::string streamed;
        std::istringstream lines(st.second);
        for (std::string line; std::getline(lines, line);) {
            if (line.rfind("data: ", 0) != 0) continue;
            json ev = json::parse(line.substr(6), nullptr, false);
            if (ev.is_object() && ev.value("type", "") == "transcript.text.delta") streamed += ev.value("delta", "");
        }
        EXPECT_TRUE(words_match(ref, streamed)) << name << ": stream gave '" << streamed << "'";
    }
}

TEST(Serve, ApiKey) {
    Server s("--api-key sesame");
    expect_error(s.post("/v1/audio/transcriptions", kJfk + kFast), 401, "");
    expect_error(s.post("/v1/audio/transcriptions", kJfk + kFast, "-H 'Authorization: Bearer wrong'"), 401, "");
    EXPECT_EQ(s.post("/v1/audio/transcriptions", kJfk + kFast, "-H 'Authorization: Bearer sesame'").first, 200);
    EXPECT_NE(Server::curl("-s " + s.url("/health")).find("ok"), std::string::npos);  // health stays open
}

TEST(Serve, ConcurrentRequestsGiveTheSameBytesAsOneAtATime) {
    Server s("--cache-slots 8");
    const std::vector<std::string> clips = {"audio/jfk.wav", "audio/sense_and_sensibility_01_austen_64kb-0880.wav",
                                            "audio/espeak_quiet_loud.wav",
                                            "audio/sense_and_sensibility_01_austen_64kb-0930.wav"};
    auto form = [&](const std::string& clip) {
        return "-F file=@" + fixture(clip) + kFast + " -F response_format=verbose_json";
    };
    std::vector<std::string> alone;
    for (const auto& c : clips) alone.push_back(s.post("/v1/audio/transcriptions", form(c)).second);
    std::vector<std::future<std::pair<int, std::string>>> together;
    for (const auto& c : clips)
        together.push_back(
            std::async(std::launch::async, [&, c] { return s.post("/v1/audio/transcriptions", form(c)); }));
    for (size_t i = 0; i < clips.size(); ++i) {
        auto r = together[i].get();
        EXPECT_EQ(r.first, 200);
        EXPECT_EQ(r.second, alone[i]) << clips[i];
    }
}

TEST(Serve, OverloadIs429WithRetryAfter) {
    Server s("--cache-slots 2 --max-queue 0");
    std::string slow = "-F file=@" + fixture("whisper/longform.wav") + " -F model=whisper";
    auto first = std::async(std::launch::async, [&] { return s.post("/v1/audio/transcriptions", slow); });
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    std::string out = Server::curl("-s -i " + kJfk + kFast + " " + s.url("/v1/audio/transcriptions"));
    EXPECT_NE(out.find("429"), std::string::npos) << out;
    EXPECT_NE(out.find("Retry-After"), std::string::npos) << out;
    first.get();
}

TEST(Serve, DisconnectCancelsAndFreesTheRequest) {
    Server s("--cache-slots 2");
    // Five minutes of noise (ten windows, each through the whole temperature fallback): far longer
    // than the client's one second of patience.
    TempDir dir;
    std::vector<float> noise(16000 * 300);
    uint32_t x = 12345;
    for (float& v : noise) v = ((x = x * 1664525u + 1013904223u) >> 8) / float(1 << 24) - 0.5f;
    parlance::write_wav_file(dir / "long.wav", noise, 16000);
    Server::curl("-s --max-time 1 -F file=@" + (dir / "long.wav").string() + " -F model=whisper " +
                 s.url("/v1/audio/transcriptions"));
    json status;
    for (int i = 0; i < 200; ++i) {
        status = json::parse(Server::curl("-s " + s.url("/v1/status")));
        if (status["cancelled"].get<int>() >= 1 && status["active_requests"].get<int>() == 0) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_EQ(status["cancelled"], 1) << status.dump();
    EXPECT_EQ(status["active_requests"], 0);
    EXPECT_EQ(status["free_cache_slots"], 2);
    EXPECT_EQ(s.post("/v1/audio/transcriptions", kJfk + kFast).first, 200);
}

// --kv-cache-mb caps the decoder's paged KV cache: a request is admitted when its worst case (a
// full context per beam) fits, so with room for one the second waits and both still come out
// exactly as alone; the cache's state is in /v1/status and /metrics, and every block comes back.
TEST(Serve, KvCacheCapAdmitsWhatFitsAndReportsItsBlocks) {
    // tiny-multi: 2 layers x 32 wide -> 512 bytes per token, 8 KiB per block of 16, 30 blocks a
    // beam; 0.35 MiB = 44 blocks, one greedy request's worth and not two.
    Server s("--cache-slots 8 --kv-cache-mb 0.35");
    ASSERT_GT(s.port(), 0) << s.read_log();
    json kv = json::parse(Server::curl("-s " + s.url("/v1/status")))["kv_cache"];
    ASSERT_TRUE(kv.is_object()) << s.read_log();
    const int total = kv["total_blocks"], per_beam = kv["hypothesis_blocks"];
    EXPECT_EQ(total, static_cast<int>(0.35 * 1024 * 1024 / kv["block_bytes"].get<double>()));
    EXPECT_EQ(kv["capacity_bytes"].get<double>(), total * kv["block_bytes"].get<double>());
    ASSERT_TRUE(per_beam <= total && total < 2 * per_beam) << kv.dump();

    const std::string a = "-F file=@" + fixture("audio/jfk.wav") + kFast + " -F response_format=verbose_json";
    const std::string b = "-F file=@" + fixture("audio/sense_and_sensibility_01_austen_64kb-0880.wav") + kFast +
                          " -F response_format=verbose_json";
    const std::string alone_a = s.post("/v1/audio/transcriptions", a).second;
    const std::string alone_b = s.post("/v1/audio/transcriptions", b).second;
    auto fa = std::async(std::launch::async, [&] { return s.post("/v1/audio/transcriptions", a); });
    auto fb = std::async(std::launch::async, [&] { return s.post("/v1/audio/transcriptions", b); });
    int max_reserved = 0;
    while (fa.wait_for(std::chrono::milliseconds(20)) != std::future_status::ready ||
           fb.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready) {
        const json now = json::parse(Server::curl("-s " + s.url("/v1/status")))["kv_cache"];
        max_reserved = std::max(max_reserved, now["reserved_blocks"].get<int>());
        EXPECT_LE(now["used_blocks"].get<int>(), total);
    }
    EXPECT_LE(max_reserved, total);  // never both admitted at once
    EXPECT_EQ(fa.get().second, alone_a);
    EXPECT_EQ(fb.get().second, alone_b);

    kv = json::parse(Server::curl("-s " + s.url("/v1/status")))["kv_cache"];
    EXPECT_EQ(kv["used_blocks"], 0) << kv.dump();
    EXPECT_EQ(kv["reserved_blocks"], 0) << kv.dump();
    const std::string metrics = Server::curl("-s " + s.url("/metrics"));
    for (const std::string& name :
         {"parlance_kv_cache_capacity_bytes " +
              std::to_string(static_cast<long long>(kv["capacity_bytes"].get<double>())),
          std::string("parlance_kv_cache_blocks{state=\"used\"} 0"),
          "parlance_kv_cache_blocks{state=\"free\"} " + std::to_string(total),
          std::string("parlance_kv_cache_usage_ratio 0"), std::string("parlance_kv_prefix_hit_tokens_total"),
          std::string("parlance_kv_cache_evictions_total")})
        EXPECT_NE(metrics.find(name), std::string::npos) << name << "\n" << metrics;
}

TEST(Serve, KvCacheCapBelowOneContextIsRefusedAtStartup) {
    Server s("--kv-cache-mb 0.1");
    EXPECT_NE(s.stop(), 0);
    EXPECT_NE(s.read_log().find("KV cache"), std::string::npos) << s.read_log();
}

// A Qwen3-ASR checkpoint behind the same API: the registry opens it, requests decode on the
// generation engine (concurrent ones in the same steps, with the same bytes as alone), and what
// it cannot do is a 400 naming why.
// Several speech models in one server (issue 15): `--model` repeated, ids from ID=PATH or the
// directory name; a request's `model` picks one, OpenAI's names mean the first, an unknown id is a
// 404 in OpenAI's shape; /v1/models and /v1/status list them all; a live session picks its model
// when it opens (?model=ID).
TEST(Serve, SeveralSpeechModelsEachRequestPicksItsModel) {
    TempDir dir;
    const auto asr = write_qwen3_asr("tiny", dir / "qwen3-asr-tiny");
    const std::string whisper_dir = fixture("whisper/tiny-en/model");
    Server s("--model en=" + whisper_dir + " --model " + asr.string(), "");
    ASSERT_GT(s.port(), 0) << s.read_log();
    const json models = json::parse(Server::curl("-s " + s.url("/v1/models")));
    ASSERT_EQ(models["data"].size(), 2u) << models.dump();
    EXPECT_EQ(models["data"][0]["id"], "en");
    EXPECT_EQ(models["data"][1]["id"], "qwen3-asr-tiny");
    const json status = json::parse(Server::curl("-s " + s.url("/v1/status")));
    ASSERT_EQ(status["speech_models"].size(), 2u) << status.dump();
    EXPECT_EQ(status["model"], "en");
    EXPECT_NE(status["speech_models"][1]["description"].get<std::string>().find("qwen3_asr"), std::string::npos);
    auto transcribe = [&](const std::string& model) {
        return s.post("/v1/audio/transcriptions",
                      kJfk + " -F temperature=0 -F response_format=verbose_json -F model=" + model);
    };
    const auto en = transcribe("en"), first = transcribe("whisper-1"), qwen = transcribe("qwen3-asr-tiny");
    ASSERT_EQ(en.first, 200) << en.second << s.read_log();
    ASSERT_EQ(qwen.first, 200) << qwen.second << s.read_log();
    EXPECT_EQ(first, en) << "whisper-1 is the first model";
    EXPECT_NE(json::parse(qwen.second)["text"], json::parse(en.second)["text"]);
    // The same requests to servers holding one of the models each give the same answers.
    {
        Server alone("", "whisper/tiny-en/model");
        ASSERT_GT(alone.port(), 0) << alone.read_log();
        EXPECT_EQ(alone.post("/v1/audio/transcriptions",
                             kJfk + " -F temperature=0 -F response_format=verbose_json -F model=whisper-1"),
                  en);
    }
    const auto unknown = transcribe("nope");
    EXPECT_EQ(unknown.first, 404);
    const json e = json::parse(unknown.second);
    EXPECT_EQ(e["error"]["code"], "model_not_found");
    EXPECT_EQ(e["error"]["param"], "model");
    EXPECT_NE(e["error"]["message"].get<std::string>().find("'en', 'qwen3-asr-tiny'"), std::string::npos)
        << unknown.second;
    // A live session takes the model ?model= names; OpenAI's realtime models (which the SDKs put
    // there) the first. session.created (the server's first frame, unmasked text)
    // says which.
    const std::string ws =
        " -H 'Connection: Upgrade' -H 'Upgrade: websocket' -H 'Sec-WebSocket-Version: 13'"
        " -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=='";
    for (const auto& [query, model] : std::vector<std::pair<std::string, std::string>>{
             {"intent=transcription&model=qwen3-asr-tiny", "qwen3-asr-tiny"},
             {"x_model=en&model=qwen3-asr-tiny", "qwen3-asr-tiny"},
             {"model=gpt-realtime", "en"},
             {"intent=transcription", "en"}}) {
        const std::string frames = Server::curl("-s -i -m 2" + ws + " '" + s.url("/v1/realtime?" + query) + "'");
        EXPECT_NE(frames.find("101"), std::string::npos) << query << ": " << frames;
        EXPECT_NE(frames.find("\"model\":\"" + model + "\""), std::string::npos) << query << ": " << frames;
    }
    // Any other name is refused before the upgrade, as session.update refuses it.
    const std::string refused = Server::curl("-s -i -m 2" + ws + " '" + s.url("/v1/realtime?model=nonesuch") + "'");
    EXPECT_NE(refused.find("404"), std::string::npos) << refused;
    EXPECT_NE(refused.find("\"model_not_found\""), std::string::npos) << refused;
}

TEST(Serve, TwoModelsWithOneIdAreRefusedAtStart) {
    const std::string m = fixture("whisper/tiny-en/model");
    std::string out;
    const int rc = run_command("timeout 60 " + parlance_binary().string() + " serve --port 0 --model a=" + m +
                                   " --model a=" + fixture("whisper/tiny-multi/model") + " 2>&1",
                               &out);
    EXPECT_NE(rc, 0);
    EXPECT_NE(out.find("two models with the id 'a'"), std::string::npos) << out;
}

TEST(Serve, Qwen3AsrCheckpointServesTheSameApi) {
    TempDir dir;
    const auto model = write_qwen3_asr("tiny", dir.path());
    Server s("--model " + model.string(), "");
    ASSERT_GT(s.port(), 0) << s.read_log();
    const json status = json::parse(Server::curl("-s " + s.url("/v1/status")));
    EXPECT_NE(status["description"].get<std::string>().find("qwen3_asr"), std::string::npos) << status.dump();
    const std::string form = kJfk + kFast + " -F response_format=verbose_json";
    const auto alone = s.post("/v1/audio/transcriptions", form);
    ASSERT_EQ(alone.first, 200) << alone.second << s.read_log();
    const json j = json::parse(alone.second);
    EXPECT_NEAR(j["duration"].get<double>(), 11.0, 1e-9);
    ASSERT_EQ(j["segments"].size(), 1u);
    EXPECT_DOUBLE_EQ(j["segments"][0]["end"].get<double>(), 11.0);
    std::vector<std::future<std::pair<int, std::string>>> together;
    for (int i = 0; i < 3; ++i)
        together.push_back(std::async(std::launch::async, [&] { return s.post("/v1/audio/transcriptions", form); }));
    for (auto& f : together) EXPECT_EQ(f.get(), alone);
    // Streamed: the pieces' text as deltas, then the whole text.
    const auto streamed = s.post("/v1/audio/transcriptions", kJfk + kFast + " -F stream=true");
    ASSERT_EQ(streamed.first, 200) << streamed.second;
    std::string deltas, done;
    std::istringstream in(streamed.second);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("data: ", 0) != 0) continue;
        const json ev = json::parse(line.substr(6), nullptr, false);
        if (ev.is_discarded()) continue;
        if (ev["type"] == "transcript.text.delta") deltas += ev["delta"].get<std::string>();
        if (ev["type"] == "transcript.text.done") done = ev["text"];
    }
    EXPECT_EQ(done, j["text"]);
    EXPECT_NE(deltas.find(j["segments"][0]["text"].get<std::string>()), std::string::npos) << deltas;
    const auto forced =
        s.post("/v1/audio/transcriptions", kJfk + kFast + " -F language=fr -F response_format=verbose_json");
    ASSERT_EQ(forced.first, 200) << forced.second;
    EXPECT_EQ(json::parse(forced.second)["language"], "fr");
    auto bad = s.post("/v1/audio/transcriptions", kJfk + kFast + " -F language=xx");
    EXPECT_EQ(bad.first, 400);
    EXPECT_NE(bad.second.find("English (en)"), std::string::npos) << bad.second;
    bad = s.post("/v1/audio/translations", kJfk + kFast);
    EXPECT_EQ(bad.first, 400);
    EXPECT_NE(bad.second.find("translate"), std::string::npos) << bad.second;
}

TEST(Serve, LoadOf32ClientsTimes8RequestsHasNoErrorsAndMemoryStaysFlat) {
    Server s("--cache-slots 16");
    const std::string form = "-F file=@" + fixture("audio/sense_and_sensibility_01_austen_64kb-0880.wav") + kFast;
    auto rss = [&] {
        return json::parse(Server::curl("-s " + s.url("/v1/status")))["resident_memory_bytes"].get<double>();
    };
    auto load = [&](int clients, int requests) {
        std::vector<std::future<int>> futures;
        for (int c = 0; c < clients; ++c)
            futures.push_back(std::async(std::launch::async, [&] {
                int errors = 0;
                for (int i = 0; i < requests; ++i) errors += s.post("/v1/audio/transcriptions", form).first != 200;
                return errors;
            }));
        int errors = 0;
        for (auto& f : futures) errors += f.get();
        return errors;
    };
    // A short burst at the same concurrency first: the compute buffers grow once to the largest
    // batch (bounded by --cache-slots and the encode batch) and stay; that is the baseline.
    EXPECT_EQ(load(32, 2), 0);
    const double baseline = rss();
    // 256 more requests: a leak of 128 KiB per request would cross the bound below (ASan's leak
    // checker covers smaller ones in the unit tests).
    EXPECT_EQ(load(32, 8), 0);
    json status = json::parse(Server::curl("-s " + s.url("/v1/status")));
    EXPECT_EQ(status["completed"].get<int>(), 32 * 10);
    EXPECT_EQ(status["active_requests"], 0);
    EXPECT_EQ(status["free_cache_slots"], 16);
    const double after = rss();
    std::printf("resident memory: %.1f MiB after the warm-up burst, %.1f MiB after 256 more requests\n",
                baseline / 1048576, after / 1048576);
    EXPECT_LT(after, baseline + 32.0 * 1048576) << "memory grew by " << (after - baseline) / 1048576 << " MiB";
}

// A model whose generation_config.json asks for beam search: requests (the OpenAI API has no beam
// size) decode with it, as `parlance transcribe` does by default; the server makes room for four
// such requests, and refuses to start with too few cache slots for one.
TEST(Serve, TheModelsDefaultBeamSizeDecodesRequests) {
    TempDir dir;
    const auto model = dir.path() / "model";
    std::filesystem::copy(fixture("whisper/tiny-multi/model"), model);
    auto g = json::parse(read_file(model / "generation_config.json"));
    g["num_beams"] = 3;
    write_file(model / "generation_config.json", g.dump());
    {
        Server s("--model " + model.string(), "");
        EXPECT_EQ(json::parse(Server::curl("-s " + s.url("/v1/status")))["free_cache_slots"], 24);
        auto r = s.post("/v1/audio/transcriptions", kJfk + kFast + " -F response_format=text");
        EXPECT_EQ(r.first, 200) << r.second;
        const auto cli = dir.path() / "cli.txt";
        ASSERT_EQ(run_command(parlance_binary().string() + " transcribe --model " + model.string() +
                              " --beam-size 3 --temperature 0 --max-new-tokens 24 -f text -o " + cli.string() + " " +
                              fixture("audio/jfk.wav")),
                  0);
        EXPECT_EQ(r.second, read_file(cli));
    }
    std::string out;
    EXPECT_NE(run_command("timeout 60 " + parlance_binary().string() + " serve --port 0 --threads 2 --model " +
                              model.string() + " --cache-slots 4",
                          &out),
              0);
    EXPECT_NE(out.find("--cache-slots 4 is too few for the model's default beam size 3"), std::string::npos) << out;
}

TEST(Serve, SigtermDrainsInFlightRequests) {
    Server s;
    auto inflight = std::async(std::launch::async, [&] { return s.post("/v1/audio/transcriptions", kJfk + kFast); });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_EQ(s.stop(), 0);
    EXPECT_EQ(inflight.get().first, 200);
}

}  // namespace

// --max-queue bounds what the server holds: its worker threads' requests plus that many waiting
// (it once never reached the HTTP bound, which stayed at the default's 48: 80 of 128 concurrent
// requests got 429 under --max-queue 1024). 150 uploads at once under --max-queue 200 are all
// served; under --max-queue 4, what is past the workers plus 4 is told to come back.
// A request the engine runs holds no thread while it runs (the engine tells its end through a
// callback): more requests than the server's 16 worker threads are in the engine at once, which
// is what lets a GPU batch them (the workers capped its batch at 16 before).
TEST(Serve, MoreRequestsThanWorkerThreadsAreInTheEngineAtOnce) {
    Server s("--cache-slots 64 --max-queue 64");
    ASSERT_GT(s.port(), 0) << s.read_log();
    constexpr int kRequests = 28;
    std::atomic<bool> done{false};
    int most = 0;
    std::thread watch([&] {
        while (!done.load()) {
            const json st = json::parse(Server::curl("-s " + s.url("/v1/status")), nullptr, false);
            if (st.is_object() && st.contains("queue"))
                most = std::max(most, st["queue"].get<int>() + st["active_requests"].get<int>());
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    });
    std::string out;
    run_command("seq " + std::to_string(kRequests) + " | xargs -P " + std::to_string(kRequests) +
                    " -I{} curl -s -m 300 -o /dev/null -w '%{http_code}\\n' " + kJfk + kFast + " " +
                    s.url("/v1/audio/transcriptions"),
                &out);
    done = true;
    watch.join();
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), kRequests);
    EXPECT_EQ(out.find_first_not_of("200\n"), std::string::npos) << out;
    EXPECT_GT(most, 16) << "requests in the engine at once, at most";
}

TEST(Serve, MaxQueueBoundsTheRequestsInFlight) {
    auto burst = [](const Server& s, int n) {
        std::string out;
        run_command("seq " + std::to_string(n) + " | xargs -P " + std::to_string(n) +
                        " -I{} curl -s -m 300 -o /dev/null -w '%{http_code}\\n' " + kJfk + kFast + " " +
                        s.url("/v1/audio/transcriptions"),
                    &out);
        std::map<std::string, int> codes;
        std::istringstream in(out);
        for (std::string line; std::getline(in, line);) ++codes[line];
        return codes;
    };
    {
        Server s("--max-queue 200");
        ASSERT_GT(s.port(), 0) << s.read_log();
        auto codes = burst(s, 150);
        EXPECT_EQ(codes["200"], 150) << "429: " << codes["429"] << ", others: " << codes.size();
    }
    {
        Server s("--max-queue 4");
        ASSERT_GT(s.port(), 0) << s.read_log();
        auto codes = burst(s, 60);
        EXPECT_GT(codes["429"], 0);
        EXPECT_EQ(codes["200"] + codes["429"], 60);
        EXPECT_GE(codes["200"], 4);
    }
}
