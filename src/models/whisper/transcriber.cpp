// Whisper transcription (see transcriber.h).
#include "models/whisper/transcriber.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <string>

#include <zlib.h>

#include "core/error.h"
#include "models/whisper/decoder.h"
#include "models/whisper/session.h"
#include "models/whisper/timestamp_rules.h"

namespace parlance::whisper {
float compression_ratio(const std::string& text) {
    if (text.empty()) return 0.0f;
    uLongf bound = compressBound(text.size());
    std::vector<Bytef> out(bound);
    if (compress2(out.data(), &bound, reinterpret_cast<const Bytef*>(text.data()), text.size(), 9) != Z_OK) return 0.0f;
    return static_cast<float>(text.size()) / static_cast<float>(bound);
}

std::vector<float> window_mel(const WhisperModel& model, std::span<const float> pcm16k, int threads) {
    int frames = 0;
    LogMelOptions o;
    o.threads = threads;
    o.pad_or_trim_to = model.config.n_audio_samples();
    std::vector<float> mel = model.mel->compute(pcm16k, &frames, o);
    if (frames != model.config.n_mel_frames())
        throw Error(ErrorKind::Internal, "log-mel window has " + std::to_string(frames) + " frames");
    return mel;
}

std::map<std::string, float> language_probabilities(std::span<const float> logits, const SpecialTokens& tokens) {
    std::map<std::string, float> probs;
    if (tokens.languages.empty()) return probs;
    float m = kNegInf;
    for (const auto& [code, id] : tokens.languages) m = std::max(m, logits[id]);
    double total = 0.0;
    for (const auto& [code, id] : tokens.languages) total += std::exp(double(logits[id]) - m);
    for (const auto& [code, id] : tokens.languages)
        probs[code] = static_cast<float>(std::exp(double(logits[id]) - m) / total);
    return probs;
}

ProcessorList whisper_processors(const WhisperModel& model, int prompt_length, bool timestamps, int min_new_tokens,
                                 bool suppress_blank) {
    const SpecialTokens& t = model.tokens;
    ProcessorList list;
    if (min_new_tokens > 0) list.push_back(std::make_shared<MinNewTokens>(t.eot, min_new_tokens));
    if (suppress_blank && !t.begin_suppress_tokens.empty())
        list.push_back(std::make_shared<SuppressTokensAtBegin>(t.begin_suppress_tokens, prompt_length));
    if (!t.suppress_tokens.empty()) list.push_back(std::make_shared<SuppressTokens>(t.suppress_tokens));
    if (timestamps) list.push_back(std::make_shared<TimestampRules>(t, prompt_length));
    return list;
}

TranscribeOptions with_model_defaults(TranscribeOptions o, const SpecialTokens& t) {
    if (!o.beam_size) o.beam_size = t.num_beams;
    if (*o.beam_size < 1)  // every entry point (Session, engine, CLI) passes through here
        throw Error(ErrorKind::InvalidArgument, "beam_size must be at least 1, not " + std::to_string(*o.beam_size));
    if (!o.condition_on_previous_text) o.condition_on_previous_text = t.condition_on_previous_text;
    return o;
}

int slots_for_beams(int beams, int available) {
    if (beams < 1 || 2 * beams > available)
        throw Error(ErrorKind::InvalidArgument,
                    "beam_size " + std::to_string(beams) + " must be between 1 and " + std::to_string(available / 2) +
                        " (2 decoder cache slots per beam, " + std::to_string(available) + " available)");
    return 2 * beams;
}

DecodeServiceOptions decoder_service_options(const WhisperConfig& config, int64_t kv_blocks, int max_sequences) {
    DecodeServiceOptions so;
    so.kv_cache_bytes =
        static_cast<size_t>(kv_blocks) * decoder_kv_spec(config).bytes_per_token() * WhisperRunner::kv_block_tokens();
    so.max_sequences = max_sequences;
    so.token_budget = config.max_target_positions;
    return so;
}

std::unique_ptr<DecodeService> transcription_service(const DecodeServiceFactory& factory, LanguageModel& decoder,
                                                     Backend& backend, const WhisperConfig& config, int beams) {
    if (!factory) throw Error(ErrorKind::Internal, "Whisper's decodes need the engine layer's DecodeService");
    return factory(decoder, backend,
                   decoder_service_options(config, int64_t{beams} * WhisperRunner::blocks_per_hypothesis(config),
                                           search_sequences(beams)));
}

Transcript transcribe(const WhisperModel& model, WhisperRunner& runner, DecodeService& decoder,
                      std::span<const float> pcm, const TranscribeOptions& options) {
    PcmSource audio(pcm);
    return transcribe(model, runner, decoder, audio, options);
}

Transcript transcribe(const WhisperModel& model, WhisperRunner& runner, DecodeService& decoder, PcmSource& audio,
                      const TranscribeOptions& options) {
    Session session(model, runner.backend(), audio, options);
    using Clock = std::chrono::steady_clock;
    const auto since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
    TranscribeTimings times;
    // The same loop the engine runs for many sessions, here for one.
    for (;;) {
        const auto t0 = Clock::now();
        switch (session.phase()) {
            case Session::Phase::NeedEncode: {
                std::vector<float> mel = session.window_mel();
                times.features += since(t0);
                const auto t1 = Clock::now();
                CrossKv* cross = session.cross();
                runner.encode(std::span<const std::vector<float>>(&mel, 1), std::span<CrossKv* const>(&cross, 1));
                session.encoded();
                times.encode += since(t1);
                break;
            }
            case Session::Phase::NeedAlign:
                session.align(runner, 0);  // the decoder holds no slot between its decodes
                break;
            case Session::Phase::Decoding: {
                std::optional<DecodeTask> task = session.take_task();
                if (task) decoder.start(std::move(*task));
                const uint64_t before = decoder.stats().tokens_computed;
                std::vector<DecodeOutcome> done = decoder.step();
                const auto computed = static_cast<int>(decoder.stats().tokens_computed - before);
                if (task) {  // a prompt
                    times.prefill_tokens += computed;
                    times.prefill += since(t0);
                } else {
                    times.decode_tokens += computed;
                    times.decode += since(t0);
                }
                for (const DecodeOutcome& o : done) session.decoded(o);
                break;
            }
            case Session::Phase::Done: {
                Transcript t = std::move(session.transcript());
                t.timings = times;
                return t;
            }
        }
    }
}

}  // namespace parlance::whisper
