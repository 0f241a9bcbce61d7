// The pieces of an audio language model's transcription (see audio_lm_pieces.h).
#include "engine/audio_lm_pieces.h"

#include <algorithm>

#include "audio/cut_points.h"
#include "core/error.h"
#include "decoding/token_words.h"

namespace parlance::audio_lm {
namespace {
constexpr size_t kDefaultKvBytes = size_t(512) << 20;
}  // namespace

std::string check_options(const AudioLanguageModel& m, const TranscribeOptions& o) {
    if (o.task != "transcribe")
        throw Error(ErrorKind::InvalidArgument,
                    "task '" + o.task.substr(0, 100) +
                        "': this model transcribes in the spoken language; it does not translate");
    if (o.beam_size && *o.beam_size != 1)
        throw Error(ErrorKind::InvalidArgument,
                    "beam_size " + std::to_string(*o.beam_size) + ": this model decodes greedily (beam_size 1)");
    if (o.word_timestamps)
        throw Error(ErrorKind::InvalidArgument, "word timestamps are not available for this model (segments only)");
    if (o.max_new_tokens < 1) throw Error(ErrorKind::InvalidArgument, "max_new_tokens must be >= 1");
    if (o.min_new_tokens < 0 || o.min_new_tokens > o.max_new_tokens)
        throw Error(ErrorKind::InvalidArgument, "min_new_tokens must be between 0 and max_new_tokens");
    return o.language.empty() ? std::string() : m.language_code(o.language);
}

Pieces::Pieces(AudioLanguageModel& m, PcmSource& audio, const TranscribeOptions& o, std::string forced)
    : m_(m), audio_(audio), o_(o), forced_(std::move(forced)) {
    if (audio_.fill(1) == 0) throw Error(ErrorKind::InvalidAudio, "the audio is empty");
}

GenerationRequest Pieces::next(AudioLanguageModel::EmbedTimes* times) {
    const std::vector<float> piece = cut();
    int n = 0;
    std::vector<float> emb = m_.embed_audio(piece, &n, times);
    return request(made() - 1, std::move(emb), n);
}

std::vector<float> Pieces::cut() {
    const size_t at = cuts_.back();
    const auto max_len = static_cast<size_t>(m_.max_piece_seconds() * 16000);
    const size_t have = audio_.fill(at + max_len + 1);
    const std::span<const float> piece =
        audio_.view(at, at + quiet_piece_length(audio_.view(at, have), m_.max_piece_seconds()));
    std::vector<float> samples(piece.begin(), piece.end());
    cuts_.push_back(at + piece.size());
    audio_.release(cuts_.back());
    all_made_ = audio_.ended() && cuts_.back() == audio_.decoded();
    logprobs_.emplace_back();
    return samples;
}

GenerationRequest Pieces::request(size_t i, std::vector<float> emb, int n) {
    int at_token = 0;
    GenerationRequest r;
    r.prompt = m_.prompt(n, o_.initial_prompt, forced_, &at_token);
    r.cache_key = embedding_cache_key(emb);
    r.spans.push_back({at_token, n, std::move(emb)});
    r.sampling.max_tokens = o_.max_new_tokens;
    r.sampling.min_tokens = std::min(o_.min_new_tokens, o_.max_new_tokens);
    r.sampling.temperature = o_.temperatures.empty() ? 0.0f : o_.temperatures.front();
    r.sampling.seed = o_.seed;
    r.sampling.stop_ids = m_.decoder().stop_ids();
    if (o_.word_probabilities) {  // each generated token's log-probability, for its words
        auto kept = std::make_shared<std::vector<float>>();
        logprobs_.at(i) = kept;
        r.logprobs = 0;
        r.on_logprobs = [kept](const TokenLogprobs& t) { kept->push_back(t.logprob); };
    }
    return r;
}

Segment segment_of(AudioLanguageModel& m, double start, double end, const GenerationResult& r,
                   const std::vector<float>* logprobs, const std::string& forced, std::string* language, bool* speech) {
    const AudioLanguageModel::Output out = m.parse(r.tokens, forced);
    if (language->empty()) *language = out.language_code;
    Segment s;
    s.seek = static_cast<int>(start * 100.0 + 0.5);
    s.start = start;
    s.end = end;
    s.text = out.no_speech ? std::string() : out.text;
    s.tokens.assign(r.tokens.begin(), r.tokens.end());
    s.no_speech_prob = out.no_speech ? 1.0f : 0.0f;
    if (logprobs && !s.text.empty())
        s.words = words_with_probabilities(m.decoder().tokenizer(), r.tokens, *logprobs, s.text);
    *speech = !s.text.empty();
    return s;
}

void count_passes(TranscribeTimings& t, const GenerationResult& r) {
    t.decoder_passes += r.steps;
    t.draft_tokens += r.draft_tokens;
    t.draft_accepted += r.draft_accepted;
}

void append(Transcript& t, Segment s) {
    s.id = static_cast<int>(t.segments.size());
    if (!t.text.empty()) t.text += " ";
    t.text += s.text;
    t.segments.push_back(std::move(s));
}

std::exception_ptr failure_of(SeqState s) {
    if (s == SeqState::FinishedAborted)
        return std::make_exception_ptr(Error(ErrorKind::Cancelled, "the request was cancelled"));
    if (s == SeqState::FinishedTimeout)
        return std::make_exception_ptr(Error(ErrorKind::Timeout, "the request ran past its time limit"));
    return nullptr;
}

GenerationEngineOptions generation_options(size_t kv_bytes, ggml_type kv_type) {
    GenerationEngineOptions g;
    g.kv_cache_bytes = kv_bytes > 0 ? kv_bytes : kDefaultKvBytes;
    g.kv_type = kv_type;
    return g;
}

GenerationEngineOptions step_options(const EngineOptions& o, ggml_type kv_type) {
    GenerationEngineOptions g = generation_options(o.kv_cache_bytes, kv_type);
    if (o.max_batch_tokens > 0) g.token_budget = o.max_batch_tokens;
    if (o.max_batch_sequences > 0) g.max_running = o.max_batch_sequences;
    g.prompt_gather_steps = o.prompt_gather_steps;
    return g;
}

}  // namespace parlance::audio_lm
