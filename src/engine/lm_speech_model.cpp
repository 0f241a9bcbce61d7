// Transcription with an audio language model on the generation engine (see lm_speech_model.h).
#include "engine/lm_speech_model.h"

#include <chrono>
#include <map>
#include <optional>

#include "engine/audio_lm_pieces.h"
#include "engine/generation_decode_service.h"
#include "engine/generation_engine.h"
#include "engine/lm_speech_engine.h"

namespace parlance {

using namespace audio_lm;
namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

LmSpeechModel::LmSpeechModel(std::unique_ptr<AudioLanguageModel> model, Backend& backend, ggml_type kv_type)
    : model_(std::move(model)), backend_(backend), kv_type_(kv_type) {}

Transcript LmSpeechModel::transcribe(PcmSource& audio16k, const TranscribeOptions& options) {
    const std::string forced = check_options(*model_, options);
    Pieces pieces(*model_, audio16k, options, forced);
    GenerationEngine engine(model_->decoder(), backend_, generation_options(0, kv_type_));
    AudioLanguageModel::EmbedTimes embed_times;
    std::map<SeqId, size_t> index;
    size_t emitted = 0;
    std::vector<std::optional<GenerationResult>> results;
    auto feed = [&] {  // while fewer than kPiecesInFlight are ahead of the transcript
        while (!pieces.all_made() && pieces.made() - emitted < static_cast<size_t>(kPiecesInFlight)) {
            const size_t i = pieces.made();
            index[engine.submit(pieces.next(&embed_times))] = i;
            results.emplace_back();
        }
    };
    Transcript t;
    t.task = options.task;
    std::string language;
    feed();
    while (engine.has_work()) {
        const GenerationStats before = engine.stats();
        const auto t0 = Clock::now();
        std::vector<GenerationResult> finished = engine.step();
        const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
        // A step that computed more tokens than it sampled held prompt tokens.
        const GenerationStats after = engine.stats();
        const auto computed = static_cast<int>(after.tokens_computed - before.tokens_computed);
        const auto sampled = static_cast<int>(after.tokens_generated - before.tokens_generated);
        if (computed > sampled) {
            t.timings.prefill_tokens += computed;
            t.timings.prefill += seconds;
        } else {
            t.timings.decode_tokens += sampled;
            t.timings.decode += seconds;
        }
        for (GenerationResult& r : finished) {
            count_passes(t.timings, r);
            results[index.at(r.id)] = std::move(r);
        }
        while (emitted < pieces.made() && results[emitted]) {
            bool speech = false;
            Segment s = segment_of(*model_, pieces.start(emitted), pieces.end(emitted), *results[emitted],
                                   pieces.take_logprobs(emitted).get(), forced, &language, &speech);
            if (speech) append(t, std::move(s));
            results[emitted].reset();
            ++emitted;
            if (options.progress) options.progress(pieces.end(emitted - 1), audio16k.seconds_hint());
        }
        feed();
    }
    t.duration = static_cast<double>(audio16k.decoded()) / 16000.0;  // every piece read: the length
    t.timings.features = embed_times.features;
    t.timings.encode = embed_times.encode;
    t.language = forced.empty() ? language : forced;
    return t;
}

std::unique_ptr<SpeechEngine> LmSpeechModel::start_engine(const EngineOptions& options, Logger& logger) {
    return start_lm_speech_engine(*model_, backend_, kv_type_, options, logger);
}

std::unique_ptr<SpeechModel> open_speech_model(const std::filesystem::path& path, Backend& backend,
                                               const SpeechModelOptions& options) {
    const ArchitectureEntry* e = architecture_of(path, options.mmproj);
    if (e && e->capabilities.audio_lm)
        return std::make_unique<LmSpeechModel>(load_audio_language_model(path, backend, options), backend,
                                               options.kv_cache_type);
    // Whisper's decodes run on the generation engine (models/ cannot see it: handed in).
    SpeechModelOptions o = options;
    if (!o.decode_service) o.decode_service = generation_decode_service_factory(options.kv_cache_type);
    return load_speech_model(path, backend, o);
}

}  // namespace parlance
