// Both speech engines serve queued requests in (priority, arrival) order: with room for one
// request at a time, a Live request submitted last runs before the Interactive and Bulk ones
// queued ahead of it, and Interactive before Bulk (FIFO inside a class). What is observed is the
// order in which the engine thread reaches each request (its first segment, its encoder pass), not
// timing.
#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include "audio/wav.h"
#include "core/backend.h"
#include "core/log.h"
#include "engine/generation_decode_service.h"
#include "engine/lm_speech_model.h"
#include "models/registry.h"
#include "models/whisper/engine.h"
#include "models/whisper/model.h"
#include "qwen3_fixture.h"
#include "test_support.h"

namespace parlance::testing {
namespace {

// The requests of both tests: A first (the engine may take it before the others arrive), then B
// (bulk), C (interactive), L (live).
struct PriorityCase {
    char name;
    Priority priority;
};
constexpr PriorityCase kPriorityCases[] = {
    {'A', Priority::Interactive}, {'B', Priority::Bulk}, {'C', Priority::Interactive}, {'L', Priority::Live}};

// A before C (same class, earlier), L before C and B, C before B.
void expect_priority_order(const std::string& order) {
    ASSERT_EQ(order.size(), 4u) << order;
    const auto at = [&](char c) { return order.find(c); };
    EXPECT_LT(at('L'), at('C')) << order;
    EXPECT_LT(at('L'), at('B')) << order;
    EXPECT_LT(at('A'), at('C')) << order;
    EXPECT_LT(at('C'), at('B')) << order;
}

TEST(SpeechEnginePriority, WhisperServesTheQueueByClassThenArrival) {
    Backend backend(BackendOptions{"cpu", 2, true, false});
    auto model = whisper::WhisperModel::load(fixtures_dir() / "whisper" / "compact" / "model", backend);
    auto pcm = read_wav_file(fixtures_dir() / "audio" / "jfk.wav").samples;
    pcm.resize(16000 * 3);
    Logger log(LogLevel::Error);
    EngineOptions eo;
    eo.cache_slots = 1;  // one greedy request (one sequence) at a time: the rest wait in the queue
    eo.decode_service = generation_decode_service_factory();
    whisper::WhisperEngine engine(*model, backend, eo, log);

    std::mutex mutex;
    std::string order;
    std::vector<std::future<Transcript>> futures;
    for (const PriorityCase& c : kPriorityCases) {
        TranscriptionRequest r;
        r.pcm = pcm;
        r.options.beam_size = 1;
        r.options.temperatures = {0.0f};
        r.options.max_new_tokens = 6;
        r.priority = c.priority;
        r.on_segment = [&mutex, &order, name = c.name](const Segment&) {
            std::lock_guard<std::mutex> lock(mutex);
            if (order.find(name) == std::string::npos) order += name;
        };
        futures.push_back(engine.submit(std::move(r)));
    }
    for (auto& f : futures) EXPECT_FALSE(f.get().segments.empty());
    expect_priority_order(order);
}

// Records the order of encoder passes by the audio's length (each request has its own).
class EmbedOrderModel final : public AudioLanguageModel {
public:
    explicit EmbedOrderModel(std::unique_ptr<AudioLanguageModel> m) : m_(std::move(m)) {}
    std::string description() const override { return m_->description(); }
    double load_seconds() const override { return m_->load_seconds(); }
    LanguageModel& decoder() override { return m_->decoder(); }
    double max_piece_seconds() const override { return m_->max_piece_seconds(); }
    std::vector<float> embed_audio(std::span<const float> pcm16k, int* n_tokens, EmbedTimes* times) override {
        {
            std::lock_guard<std::mutex> lock(mutex);
            lengths.push_back(pcm16k.size());
        }
        return m_->embed_audio(pcm16k, n_tokens, times);
    }
    std::string language_code(const std::string& c) const override { return m_->language_code(c); }
    std::vector<int32_t> prompt(int n_audio, const std::string& context, const std::string& code,
                                int* audio_position) const override {
        return m_->prompt(n_audio, context, code, audio_position);
    }
    Output parse(std::span<const int32_t> generated, const std::string& forced) const override {
        return m_->parse(generated, forced);
    }
    std::mutex mutex;
    std::vector<size_t> lengths;

private:
    std::unique_ptr<AudioLanguageModel> m_;
};

TEST(SpeechEnginePriority, AudioLanguageModelServesTheQueueByClassThenArrival) {
    TempDir dir;
    Backend backend(BackendOptions{"cpu", 2, true, false});
    auto recording =
        std::make_unique<EmbedOrderModel>(load_audio_language_model(write_qwen3_asr("tiny", dir.path()), backend, {}));
    EmbedOrderModel* recorder = recording.get();
    LmSpeechModel model(std::move(recording), backend);
    const std::vector<float> clip = read_wav_file(fixtures_dir() / "audio" / "jfk.wav").samples;  // 11 s
    Logger log(LogLevel::Error);
    EngineOptions eo;
    eo.cache_slots = 2;  // one request at a time
    auto engine = model.start_engine(eo, log);

    std::vector<std::future<Transcript>> futures;
    std::vector<size_t> lengths;
    for (size_t i = 0; i < std::size(kPriorityCases); ++i) {
        TranscriptionRequest r;
        r.pcm.assign(clip.begin(), clip.begin() + static_cast<std::ptrdiff_t>(16000 * (2 + i)));  // 2, 3, 4, 5 s
        lengths.push_back(r.pcm.size());
        r.options.max_new_tokens = 2;
        r.priority = kPriorityCases[i].priority;
        futures.push_back(engine->submit(std::move(r)));
    }
    for (auto& f : futures) f.get();
    std::string order;
    for (size_t n : recorder->lengths) {
        const size_t i = static_cast<size_t>(std::find(lengths.begin(), lengths.end(), n) - lengths.begin());
        ASSERT_LT(i, lengths.size()) << n;
        order += kPriorityCases[i].name;
    }
    expect_priority_order(order);
    engine->shutdown(true);
}

}  // namespace
}  // namespace parlance::testing
