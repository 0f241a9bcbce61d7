// A live session's decodes carry their class (TranscriptionRequest::priority): interim re-decodes at
// the cadence are Interactive (a later decode replaces them), the decode up to a pause — the item's
// final one if the pause ends it — and final decodes are Live; a pause, or an item's end, cancels
// an interim decode in flight that does not reach it. Driven through RealtimeSession with an engine that holds
// every request until the test answers it, so what is in flight when is exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "audio/wav.h"
#include "core/backend.h"
#include "core/error.h"
#include "models/registry.h"
#include "models/voice_activity.h"
#include "server/base64.h"
#include "server/realtime_session.h"
#include "test_support.h"

namespace parlance::testing {
namespace {

using nlohmann::json;

class HeldEngine final : public SpeechEngine {
public:
    struct Call {
        TranscriptionRequest request;
        TranscriptPromise promise;
    };
    std::future<Transcript> submit(TranscriptionRequest request) override {
        auto call = std::make_shared<Call>();
        call->promise = TranscriptPromise(std::move(request.on_finished));
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
    bool word_timestamps() const override { return timed_words; }
    bool word_probabilities() const override { return !timed_words; }
    double window_seconds() const override { return window; }
    void shutdown(bool) override {}

    double window = 0;        // the model's window (0: any length)
    bool timed_words = true;  // words with times (Whisper), else with probabilities only (an audio LM)

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

// A session on the real Silero VAD over jfk.wav (speech from 0.32 s to 2.2 s, then a second of
// silence), with every engine call held until the test answers it; the session's strand is the
// test's thread (posts from workers queue up and run in drain()).
class HeldSession {
public:
    explicit HeldSession(server::RealtimeOptions options = {}, double window_seconds = 0)
        : vad_backend_(BackendOptions{"cpu", 1, true, false}),
          vad_(load_voice_activity_model(assets_dir() / "silero_vad_v5.onnx", vad_backend_)),
          pcm_(read_wav_file(fixtures_dir() / "audio" / "jfk.wav").samples) {
        engine.window = window_seconds;
        server::RealtimeSession::Hooks hooks;
        hooks.send = [this](std::string text) { events_.push_back(json::parse(text)); };
        hooks.post = [this](std::function<void()> fn) {
            std::lock_guard<std::mutex> lock(mutex_);
            posted_.push_back(std::move(fn));
        };
        hooks.work = [this](std::function<void()> fn) { workers_.emplace_back(std::move(fn)); };
        hooks.close = [](std::string) {};
        hooks.now = [this] { return now; };
        session_ = std::make_shared<server::RealtimeSession>(engine, vad_.get(), options, false, hooks, registry);
        session_->start();
        session_->on_message(json{{"type", "session.update"},
                                  {"session",
                                   {{"type", "transcription"},
                                    {"audio",
                                     {{"input",
                                       {{"format", {{"type", "audio/pcm"}, {"rate", 16000}}},
                                        {"turn_detection", {{"type", "server_vad"}}}}}}}}}}
                                 .dump());
    }
    ~HeldSession() {
        session_->stop();
        for (size_t i = 0; i < engine.count(); ++i)
            if (!answered_.count(i)) engine.call(i)->promise.set_value(Transcript{});
        for (std::thread& t : workers_) t.join();
    }

    // Runs what workers posted to the strand.
    void drain() {
        for (;;) {
            std::function<void()> fn;
            {
                std::lock_guard<std::mutex> lock(mutex_);
                if (posted_.empty()) return;
                fn = std::move(posted_.front());
                posted_.pop_front();
            }
            fn();
        }
    }
    // Sends the file up to `seconds` in 100 ms appends; `each` runs after every append.
    void send_until(double seconds, const std::function<void()>& each = {}) {
        const auto end = static_cast<size_t>(seconds * 16000);
        for (; sent_ < end; sent_ += 1600) {
            std::vector<uint8_t> bytes;
            for (size_t j = sent_; j < sent_ + 1600; ++j) {
                const auto v =
                    static_cast<int16_t>(std::lround(std::clamp(pcm_[j], -1.0f, 32767.0f / 32768.0f) * 32768.0f));
                bytes.push_back(static_cast<uint8_t>(v & 0xFF));
                bytes.push_back(static_cast<uint8_t>((v >> 8) & 0xFF));
            }
            session_->on_message(
                json{{"type", "input_audio_buffer.append"}, {"audio", server::base64_encode(bytes)}}.dump());
            drain();
            if (each) each();
        }
    }
    // Waits (draining the strand) until the engine got n calls, or until the session is idle.
    bool wait_for_calls(size_t n) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (engine.count() < n && std::chrono::steady_clock::now() < deadline) {
            drain();
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        return engine.count() >= n;
    }
    // Waits (draining the strand) until the session has no decode running or waiting, or it asked
    // the engine for another one.
    void wait_idle() {
        const size_t calls = engine.count();
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (std::chrono::steady_clock::now() < deadline) {
            drain();
            if (session_->idle() || engine.count() > calls) return;
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
    }
    void answer(size_t i, const std::string& text) {
        Transcript t;
        t.text = text;
        Segment s;
        s.text = text;
        t.segments.push_back(s);
        answer(i, t);
    }
    void answer(size_t i, const Transcript& t) {
        answered_.insert(i);
        engine.call(i)->promise.set_value(t);
    }
    std::string deltas() const {
        std::string d;
        for (const json& e : events_)
            if (e["type"] == "conversation.item.input_audio_transcription.delta") d += e["delta"].get<std::string>();
        return d;
    }
    bool answered(size_t i) const { return answered_.count(i) > 0; }
    // A client event, then what it posted to the strand.
    void message(const json& ev) {
        session_->on_message(ev.dump());
        drain();
    }
    // Answers every decode the session asks for until it has none running or waiting (a decode it
    // starts reaches the engine from a worker thread, a moment later).
    void answer_all() {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (std::chrono::steady_clock::now() < deadline) {
            drain();
            bool any = false;
            for (size_t i = 0; i < engine.count(); ++i)
                if (!answered(i)) {
                    answer(i, "decode " + std::to_string(i));
                    any = true;
                }
            if (!any && idle()) return;
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
    }
    size_t events(const std::string& type) const {
        return static_cast<size_t>(
            std::count_if(events_.begin(), events_.end(), [&](const json& e) { return e["type"] == type; }));
    }
    bool idle() const { return session_->idle(); }
    void fail(size_t i, std::exception_ptr e) {
        answered_.insert(i);
        engine.call(i)->promise.set_exception(e);
    }
    // Decode `i`, the only one in flight, was cancelled by what the test just sent: the engine
    // drops it (as after its current step) and the session's next decode, which must be Live and
    // uncancelled, is returned.
    std::shared_ptr<HeldEngine::Call> expect_superseded(size_t i) {
        EXPECT_TRUE(engine.call(i)->request.cancelled->load());
        EXPECT_EQ(engine.count(), i + 1);  // one decode at a time per session
        fail(i, std::make_exception_ptr(Error(ErrorKind::Cancelled, "the client went away")));
        if (!wait_for_calls(i + 2)) {
            ADD_FAILURE() << "no decode followed the cancelled one";
            return nullptr;
        }
        const auto next = engine.call(i + 1);
        EXPECT_EQ(next->request.priority, Priority::Live);
        EXPECT_FALSE(next->request.cancelled->load());
        return next;
    }
    std::string completed() const {
        std::string t;
        for (const json& e : events_)
            if (e["type"] == "conversation.item.input_audio_transcription.completed") t = e["transcript"];
        return t;
    }
    static double seconds_of(const HeldEngine::Call& c) { return static_cast<double>(c.request.pcm.size()) / 16000.0; }

    server::RealtimeRegistry registry;  // first: it outlives the session and whatever holds it
    HeldEngine engine;
    double now = 1.0;  // the session's clock (steady seconds): a test steps it instead of sleeping

private:
    Backend vad_backend_;
    std::unique_ptr<VoiceActivityModel> vad_;
    std::vector<float> pcm_;
    size_t sent_ = 0;
    std::mutex mutex_;
    std::deque<std::function<void()>> posted_;
    std::vector<std::thread> workers_;
    std::vector<json> events_;
    std::set<size_t> answered_;
    std::shared_ptr<server::RealtimeSession> session_;
};

// Interim decodes at the cadence are Interactive; the decode up to the pause is Live, and when the
// pause ends the item it is the final decode: no other decode follows.
TEST(RealtimeDecodePriority, TheDecodeUpToAPauseIsLiveAndEndsTheItem) {
    HeldSession s;
    auto answer_all = [&] { s.answer_all(); };  // after each append
    s.send_until(2.0, answer_all);              // speech: interim decodes only
    ASSERT_GE(s.engine.count(), 1u);
    for (size_t i = 0; i < s.engine.count(); ++i) {
        EXPECT_EQ(s.engine.call(i)->request.priority, Priority::Interactive) << i;
        EXPECT_LT(HeldSession::seconds_of(*s.engine.call(i)), 2.0) << i;
    }
    const size_t interim = s.engine.count();
    s.send_until(3.3, answer_all);  // the pause (~2.2 s) and the item's end 0.5 s later
    ASSERT_EQ(s.engine.count(), interim + 1);
    const auto pause = s.engine.call(interim);
    EXPECT_EQ(pause->request.priority, Priority::Live);
    EXPECT_GT(HeldSession::seconds_of(*pause), 1.8);
    EXPECT_LT(HeldSession::seconds_of(*pause), 2.4);
    EXPECT_EQ(s.completed(), "decode " + std::to_string(interim));
}

// A pause while an interim decode that stops short of it is in flight: that decode is cancelled
// (the engine drops it after its current step) and the decode up to the pause goes in at once; when
// the pause ends the item, that decode is the final one.
TEST(RealtimeDecodePriority, APauseCancelsTheInterimDecodeItSupersedes) {
    HeldSession s;
    s.send_until(1.5);
    ASSERT_TRUE(s.wait_for_calls(1));
    const auto interim = s.engine.call(0);
    EXPECT_EQ(interim->request.priority, Priority::Interactive);
    EXPECT_FALSE(interim->request.cancelled->load());
    s.send_until(2.5);  // the pause (~2.2 s)
    const auto pause = s.expect_superseded(0);
    ASSERT_TRUE(pause);
    EXPECT_GT(HeldSession::seconds_of(*pause), 1.8);
    EXPECT_LT(HeldSession::seconds_of(*pause), 2.4);
    s.send_until(3.3);  // the item ends (~2.7 s): the pause's decode covers its speech
    EXPECT_FALSE(pause->request.cancelled->load());
    s.answer(1, "And so my fellow Americans");
    s.wait_idle();
    EXPECT_EQ(s.completed(), "And so my fellow Americans");
    EXPECT_EQ(s.engine.count(), 2u);
}

// When this session's decodes take longer than the silence that ends an item (the engine does not
// keep up), a pause leaves the interim decode in flight to finish: the pause's decode could not
// beat speech_stopped anyway, and the interim's text counts towards the agreement.
TEST(RealtimeDecodePriority, APauseLeavesTheInterimDecodeWhenDecodesAreSlow) {
    HeldSession s;
    s.send_until(1.0);
    ASSERT_TRUE(s.wait_for_calls(1));
    s.now += 0.6;  // the decode takes longer than silence_duration_ms
    s.answer(0, "And so");
    s.send_until(1.5);
    ASSERT_TRUE(s.wait_for_calls(2));
    const auto interim = s.engine.call(1);
    EXPECT_EQ(interim->request.priority, Priority::Interactive);
    s.send_until(2.5);  // the pause (~2.2 s)
    EXPECT_FALSE(interim->request.cancelled->load());
    EXPECT_EQ(s.engine.count(), 2u);
    s.answer(1, "And so my fellow");
    ASSERT_TRUE(s.wait_for_calls(3));  // then the pause's decode
    EXPECT_EQ(s.engine.call(2)->request.priority, Priority::Live);
    EXPECT_GT(HeldSession::seconds_of(*s.engine.call(2)), 1.8);
}

// An item that ends (here by the client's commit, in mid-speech) while an interim decode that does
// not reach its end is in flight: that decode is cancelled, and the final decode, Live, follows.
TEST(RealtimeDecodePriority, AnItemsEndCancelsTheInterimDecodeItSupersedes) {
    HeldSession s;
    s.send_until(1.5);
    ASSERT_TRUE(s.wait_for_calls(1));
    const auto interim = s.engine.call(0);
    s.send_until(1.9);  // still speech: no pause yet
    EXPECT_FALSE(interim->request.cancelled->load());
    s.message(json{{"type", "input_audio_buffer.commit"}});
    const auto final_decode = s.expect_superseded(0);
    ASSERT_TRUE(final_decode);
    EXPECT_GT(HeldSession::seconds_of(*final_decode), 1.8);
    s.answer(1, "And so my fellow");
    s.wait_idle();
    EXPECT_EQ(s.completed(), "And so my fellow");
    EXPECT_EQ(s.engine.count(), 2u);
}

// The commit guard: an interim decode asks for word timestamps, and its words that end within the
// guard of the end of its audio are not committed, though nothing else holds them back.
TEST(RealtimeCommitGuard, WordsNearTheEndOfTheDecodedAudioWait) {
    server::RealtimeOptions o;
    o.commit.agreement = 1;
    o.commit.held_back = 0;
    o.commit_guard_seconds = 0.5;
    HeldSession s(o);
    s.send_until(1.5);
    ASSERT_TRUE(s.wait_for_calls(1));
    const auto interim = s.engine.call(0);
    EXPECT_TRUE(interim->request.options.word_timestamps);
    const double heard = HeldSession::seconds_of(*interim);
    Transcript t;
    t.text = " And so my";
    Segment seg;
    seg.text = t.text;
    // The first interim decode hears ~0.6 s: "so" ends just inside the guard's limit, "my" past it.
    seg.words = {{" And", 0.0, heard - 0.56, 0.9f},
                 {" so", heard - 0.56, heard - 0.52, 0.9f},
                 {" my", heard - 0.4, heard - 0.1, 0.9f}};
    t.segments.push_back(seg);
    s.answer(0, t);
    s.wait_idle();
    EXPECT_EQ(s.deltas(), "And so");
}

// The gate's scene: the first interim decode says "And so my fellow" with " my" under the
// minimum (0.5) and every word far from the audio's end (timed words: 0.1 s each; untimed: times 0,
// as words_with_probabilities leaves them, which a guard reading them would pass); only "And so"
// goes out. The item's final decode then sends the rest; the deltas join to `completed`.
server::RealtimeOptions gate_options() {
    server::RealtimeOptions o;
    o.commit.agreement = 1;
    o.commit.held_back = 0;
    o.commit_min_probability = 0.5;
    return o;
}
void expect_gate_holds_back_the_unsure_word(HeldSession& s, bool timed) {
    s.send_until(1.5);
    ASSERT_TRUE(s.wait_for_calls(1));
    Transcript t;
    t.text = "And so my fellow";
    Segment seg;
    seg.text = t.text;
    const double step = timed ? 0.1 : 0.0;
    seg.words = {{"And", 0, step, 0.9f},
                 {" so", step, 2 * step, 0.6f},
                 {" my", 2 * step, 3 * step, 0.3f},
                 {" fellow", 3 * step, 4 * step, 0.95f}};
    t.segments.push_back(seg);
    s.answer(0, t);
    s.wait_idle();
    EXPECT_EQ(s.deltas(), "And so");
    s.message(json{{"type", "input_audio_buffer.commit"}});
    ASSERT_TRUE(s.wait_for_calls(2));
    s.answer(1, "And so my fellow Americans");
    s.wait_idle();
    EXPECT_EQ(s.completed(), "And so my fellow Americans");
    EXPECT_EQ(s.deltas(), "And so my fellow Americans");
}

// The probability gate: an interim decode asks for word timestamps, and nothing from its first word
// below the minimum probability on is committed by it, though nothing else holds them back.
TEST(RealtimeCommitGate, AWordBelowTheMinimumProbabilityWaitsWithTheWordsAfterIt) {
    HeldSession s(gate_options());
    expect_gate_holds_back_the_unsure_word(s, /*timed=*/true);
    EXPECT_TRUE(s.engine.call(0)->request.options.word_timestamps);
}

// An engine whose words have probabilities but no times (Qwen3-ASR's): interim decodes ask for
// word probabilities, the gate holds back the first word under the minimum and the rest as it does
// for Whisper, and the time guard, which needs word times, asks for nothing on its own.
TEST(RealtimeCommitGate, WordsWithoutTimesAreGatedByTheirProbabilities) {
    server::RealtimeOptions o = gate_options();
    o.commit_guard_seconds = 0.5;
    HeldSession s(o);
    s.engine.timed_words = false;
    expect_gate_holds_back_the_unsure_word(s, /*timed=*/false);
    EXPECT_TRUE(s.engine.call(0)->request.options.word_probabilities);
    EXPECT_FALSE(s.engine.call(0)->request.options.word_timestamps);

    o.commit_min_probability = 0;  // the guard alone: no words asked of such an engine
    HeldSession guard_only(o);
    guard_only.engine.timed_words = false;
    guard_only.send_until(1.5);
    ASSERT_TRUE(guard_only.wait_for_calls(1));
    EXPECT_FALSE(guard_only.engine.call(0)->request.options.word_probabilities);
    EXPECT_FALSE(guard_only.engine.call(0)->request.options.word_timestamps);
}

// The first cadence: while the open item has nothing committed it is re-decoded every
// first_redecode_seconds; once a delta went out, every redecode_seconds.
TEST(RealtimeFirstCadence, AnItemIsDecodedSoonerUntilItsFirstDelta) {
    for (double first : {0.0, 0.3}) {
        SCOPED_TRACE(first);
        server::RealtimeOptions o;
        o.redecode_seconds = 0.8;
        o.first_redecode_seconds = first;
        o.commit.agreement = 2;
        o.commit.held_back = 0;
        o.commit_min_probability = 0;
        HeldSession s(o);
        // Every decode says the same words, so the second one commits them. Each decode is
        // answered before the next append (as `parlance stream --lockstep` runs a session).
        size_t answered = 0;
        s.send_until(2.1, [&] {
            if (s.idle()) return;
            ASSERT_TRUE(s.wait_for_calls(answered + 1));
            s.answer(answered++, "And so");
            s.wait_idle();
        });
        // Appends are 100 ms apart: a cadence point falls on the next append.
        ASSERT_GE(s.engine.count(), first > 0 ? 3u : 2u);
        const double a = HeldSession::seconds_of(*s.engine.call(0));
        const double b = HeldSession::seconds_of(*s.engine.call(1));
        const double want = first > 0 ? first : o.redecode_seconds;
        EXPECT_GE(a, want - 1e-9);
        EXPECT_LE(a, want + 0.15);
        EXPECT_GE(b - a, want - 1e-9);  // nothing committed before the second decode's answer
        EXPECT_LE(b - a, want + 0.15);
        if (first > 0) {
            const double c = HeldSession::seconds_of(*s.engine.call(2));
            EXPECT_GE(c - b, o.redecode_seconds - 1e-9);  // the second decode committed "And so"
            EXPECT_LE(c - b, o.redecode_seconds + 0.15);
        }
        EXPECT_EQ(s.deltas(), "And so");
    }
}

// A model whose window is shorter than the session's segment cap (--audio-window) caps the live
// items: speech that goes on past the window is cut into a new item, and no decode is asked for
// more audio than one window. jfk.wav's speech runs from 0.32 s to 2.2 s without a pause.
TEST(RealtimeItemCap, AnItemIsCutAtTheModelsWindow) {
    for (double window : {0.0, 2.0}) {
        SCOPED_TRACE(window);
        HeldSession s({}, window);
        s.send_until(2.15, [&] { s.answer_all(); });
        const size_t committed = s.events("input_audio_buffer.committed");
        if (window == 0.0) {
            EXPECT_EQ(committed, 0u);  // the session's own cap, 30 s
            continue;
        }
        EXPECT_GE(committed, 1u);  // cut at a quiet point in the window's last second, or earlier
        EXPECT_EQ(s.events("input_audio_buffer.speech_started"), committed + 1);  // the speech goes on
        for (size_t i = 0; i < s.engine.count(); ++i) EXPECT_LE(HeldSession::seconds_of(*s.engine.call(i)), 2.0) << i;
    }
}

}  // namespace
}  // namespace parlance::testing
