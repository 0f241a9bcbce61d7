// A live session's decodes carry their class (TranscriptionRequest::priority): interim re-decodes at
// the cadence are Interactive (a later decode replaces them), the decode up to a pause — the item's
// final one if the pause ends it — is Live, and the pause cancels an interim decode still in
// flight, which it supersedes. Driven through RealtimeSession with an engine that holds every
// request until the test answers it, so what is in flight when is exact.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "audio/wav.h"
#include "core/backend.h"
#include "core/error.h"
#include "models/silero_vad/vad.h"
#include "server/realtime_session.h"
#include "test_support.h"

namespace parlance::testing {
namespace {

using nlohmann::json;

class HeldEngine final : public SpeechEngine {
public:
    struct Call {
        TranscriptionRequest request;
        std::promise<Transcript> promise;
    };
    std::future<Transcript> submit(TranscriptionRequest request) override {
        auto call = std::make_shared<Call>();
        call->request = std::move(request);
        auto future = call->promise.get_future();
        {
            std::lock_guard<std::mutex> lock(mutex_);
            calls_.push_back(std::move(call));
        }
        return future;
    }
    EngineStats stats() const override { return {}; }
    int max_beams() const override { return 1; }
    void check_language(const std::string&) const override {}
    void shutdown(bool) override {}

    size_t count() {
        std::lock_guard<std::mutex> lock(mutex_);
        return calls_.size();
    }
    std::shared_ptr<Call> call(size_t i) {
        std::lock_guard<std::mutex> lock(mutex_);
        return calls_.at(i);
    }

private:
    std::mutex mutex_;
    std::vector<std::shared_ptr<Call>> calls_;
};

std::string base64_of(const std::vector<uint8_t>& in) {
    static const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    size_t i = 0;
    for (; i + 2 < in.size(); i += 3) {
        const uint32_t v = (in[i] << 16) | (in[i + 1] << 8) | in[i + 2];
        out += {t[v >> 18], t[(v >> 12) & 63], t[(v >> 6) & 63], t[v & 63]};
    }
    if (i + 1 == in.size()) {
        const uint32_t v = in[i] << 16;
        out += {t[v >> 18], t[(v >> 12) & 63], '=', '='};
    } else if (i + 2 == in.size()) {
        const uint32_t v = (in[i] << 16) | (in[i + 1] << 8);
        out += {t[v >> 18], t[(v >> 12) & 63], t[(v >> 6) & 63], '='};
    }
    return out;
}

TEST(RealtimeDecodePriority, APauseCancelsTheInterimDecodeAndDecodesAsLive) {
    Backend vad_backend(BackendOptions{"cpu", 1, true, false});
    silero_vad::SileroVad vad(assets_dir() / "silero_vad_v5.onnx", vad_backend);
    HeldEngine engine;

    // The session's strand is this thread: posts from workers queue here and run in drain().
    std::mutex mutex;
    std::deque<std::function<void()>> posted;
    std::vector<std::thread> workers;
    std::vector<json> events;
    server::RealtimeSession::Hooks hooks;
    hooks.send = [&](std::string text) { events.push_back(json::parse(text)); };
    hooks.post = [&](std::function<void()> fn) {
        std::lock_guard<std::mutex> lock(mutex);
        posted.push_back(std::move(fn));
    };
    hooks.work = [&](std::function<void()> fn) { workers.emplace_back(std::move(fn)); };
    hooks.close = [](std::string) {};
    auto drain = [&] {
        for (;;) {
            std::function<void()> fn;
            {
                std::lock_guard<std::mutex> lock(mutex);
                if (posted.empty()) return;
                fn = std::move(posted.front());
                posted.pop_front();
            }
            fn();
        }
    };
    auto session = std::make_shared<server::RealtimeSession>(engine, &vad, server::RealtimeOptions{}, false, hooks);
    session->start();
    session->on_message(json{
        {"type", "session.update"},
        {"session",
         {{"type", "transcription"},
          {"audio",
           {{"input",
             {{"format", {{"type", "audio/pcm"}, {"rate", 16000}}}, {"turn_detection", {{"type", "server_vad"}}}}}}}}}}
                            .dump());

    // jfk.wav: speech from 0.32 s to 2.2 s, then a second of silence (Silero, 32 ms windows).
    const std::vector<float> pcm = read_wav_file(fixtures_dir() / "audio" / "jfk.wav").samples;
    size_t sent = 0;
    auto send_until = [&](double seconds) {
        const auto end = static_cast<size_t>(seconds * 16000);
        for (; sent < end; sent += 1600) {
            std::vector<uint8_t> bytes;
            for (size_t j = sent; j < sent + 1600; ++j) {
                const auto v =
                    static_cast<int16_t>(std::lround(std::clamp(pcm[j], -1.0f, 32767.0f / 32768.0f) * 32768.0f));
                bytes.push_back(static_cast<uint8_t>(v & 0xFF));
                bytes.push_back(static_cast<uint8_t>((v >> 8) & 0xFF));
            }
            session->on_message(json{{"type", "input_audio_buffer.append"}, {"audio", base64_of(bytes)}}.dump());
            drain();
        }
    };
    auto wait_for_calls = [&](size_t n) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (engine.count() < n && std::chrono::steady_clock::now() < deadline) {
            drain();
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        return engine.count() >= n;
    };

    // While the speech goes on: an interim decode at the cadence, Interactive, held in flight.
    send_until(1.5);
    ASSERT_TRUE(wait_for_calls(1));
    const auto interim = engine.call(0);
    EXPECT_EQ(interim->request.priority, Priority::Interactive);
    EXPECT_FALSE(interim->request.cancelled->load());

    // The pause begins (~2.2 s): the interim decode is cancelled; nothing new is queued while it
    // is still in flight (one decode at a time per session).
    send_until(2.5);
    EXPECT_TRUE(interim->request.cancelled->load());
    EXPECT_EQ(engine.count(), 1u);

    // The engine drops it between steps, as a cancelled request; then the decode up to the pause
    // goes in as Live.
    interim->promise.set_exception(std::make_exception_ptr(Error(ErrorKind::Cancelled, "the client went away")));
    ASSERT_TRUE(wait_for_calls(2));
    const auto pause = engine.call(1);
    EXPECT_EQ(pause->request.priority, Priority::Live);
    EXPECT_FALSE(pause->request.cancelled->load());
    const double pause_seconds = static_cast<double>(pause->request.pcm.size()) / 16000.0;
    EXPECT_GT(pause_seconds, 1.8);
    EXPECT_LT(pause_seconds, 2.4);
    Transcript said;
    said.text = "And so my fellow Americans";
    Segment seg;
    seg.text = said.text;
    said.segments.push_back(seg);
    pause->promise.set_value(said);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {  // its answer lands on the strand
        drain();
        if (session->idle()) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }

    // The silence ends the item: that decode covered its speech, so it is final — no other decode.
    send_until(3.3);
    EXPECT_EQ(engine.count(), 2u);
    std::string completed;
    for (const json& e : events)
        if (e["type"] == "conversation.item.input_audio_transcription.completed") completed = e["transcript"];
    EXPECT_EQ(completed, said.text);

    session->stop();
    for (size_t i = 2; i < engine.count(); ++i) engine.call(i)->promise.set_value(Transcript{});
    for (std::thread& t : workers) t.join();
}

}  // namespace
}  // namespace parlance::testing
