// Resumable Whisper transcription (see session.h).
#include "models/whisper/session.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "decoding/repetition.h"
#include "models/whisper/alignment.h"
#include "models/whisper/timestamp_rules.h"

namespace parlance::whisper {
namespace {

constexpr double kSecondsPerFrame = 0.01;      // mel hop 160 / 16 kHz
constexpr double kSecondsPerTimestamp = 0.02;  // timestamp token resolution
constexpr int kFramesPerTimestamp = 2;         // encoder stride

std::string text_of(const WhisperModel& m, std::span<const int> tokens) {
    std::vector<int32_t> text;
    for (int t : tokens)
        if (t < m.tokens.eot) text.push_back(t);
    return m.tokenizer->decode(text);
}

WindowAlignment align_window(const WhisperModel& model, WhisperRunner& runner, const CrossKv& cross, int slot,
                             const std::vector<int>& prompt, const std::vector<int>& tokens, int content_frames) {
    const SpecialTokens& t = model.tokens;
    const WhisperConfig& c = model.config;
    std::vector<int> seq = prompt;
    seq.insert(seq.end(), tokens.begin(), tokens.end());
    seq.push_back(t.eot);
    const std::vector<std::pair<int, int>> heads = alignment_heads_or_default(t, c);
    std::vector<std::vector<float>> logits;
    std::span<const int> rows(seq.data(), seq.size() - 1);  // the last token is never an input
    std::vector<std::vector<float>> weights = runner.cross_attention(cross, slot, rows, heads, &logits);
    AlignmentOptions ao;
    ao.num_frames = content_frames;
    WindowAlignment out;
    out.timestamps = token_timestamps(weights, static_cast<int>(rows.size()), c.max_source_positions,
                                      static_cast<int>(prompt.size()), ao);
    // OpenAI's word probability: softmax over the text tokens of the logits that predicted it.
    for (size_t k = 0; k < tokens.size(); ++k) {
        const std::vector<float>& l = logits[prompt.size() + k - 1];
        if (tokens[k] >= t.eot) {
            out.token_probs.push_back(0.0f);
            continue;
        }
        float m = kNegInf;
        for (int v = 0; v < t.eot; ++v) m = std::max(m, l[v]);
        double z = 0.0;
        for (int v = 0; v < t.eot; ++v) z += std::exp(double(l[v]) - m);
        out.token_probs.push_back(static_cast<float>(std::exp(double(l[tokens[k]]) - m) / z));
    }
    return out;
}

}  // namespace

Session::Session(const WhisperModel& model, Backend& backend, PcmSource& audio, const TranscribeOptions& o)
    : model_(model),
      audio_(&audio),
      o_(with_model_defaults(o, model.tokens)),
      mel_threads_(std::max(1, backend.threads())) {
    const SpecialTokens& t = model.tokens;
    if (o_.task != "transcribe" && o_.task != "translate")
        throw Error(ErrorKind::InvalidArgument, "task must be transcribe or translate, not '" + o_.task + "'");
    if (o_.task == "translate" && (!t.multilingual || t.translate < 0))
        throw Error(ErrorKind::InvalidArgument, "this English-only model cannot translate");
    if (o_.temperatures.empty()) o_.temperatures = {0.0f};
    const size_t head = audio_->fill(160);
    if (head == 0) throw Error(ErrorKind::InvalidAudio, "the audio is empty");
    if (head < 160) throw Error(ErrorKind::InvalidAudio, "the audio is shorter than 10 ms");
    result_.task = o_.task;
    result_.duration = audio_->seconds_hint();  // the length once the last window is read
    if (t.multilingual) {
        if (!o_.language.empty()) {
            language_token_ = t.language_token(o_.language);
            result_.language = o_.language;
        }
    } else {
        if (!o_.language.empty() && o_.language != "en")
            throw Error(ErrorKind::InvalidArgument,
                        "this English-only model cannot transcribe language '" + o_.language + "'");
        result_.language = "en";
    }
    if (!o_.initial_prompt.empty()) {
        auto ids = model.tokenizer->encode(" " + o_.initial_prompt);
        previous_.assign(ids.begin(), ids.end());
    }
    cross_ = std::make_shared<CrossKv>(model.config, backend);
}

double Session::seconds_done() const {
    const int64_t frames = static_cast<int64_t>(audio_->decoded() / 160);
    return static_cast<double>(audio_->ended() ? std::min(seek_, frames) : seek_) * kSecondsPerFrame;
}

int64_t Session::window_frames() const {
    // Whole 10 ms frames only, as the audio's length in frames rounds down.
    const int64_t window = model_.config.n_mel_frames();
    const size_t have = audio_->fill(static_cast<size_t>(seek_ + window) * 160);
    return std::min<int64_t>(window, static_cast<int64_t>(have / 160) - seek_);
}

std::vector<float> Session::window_mel() const {
    const auto begin = static_cast<size_t>(seek_) * 160;
    std::span<const float> chunk = audio_->view(begin, begin + static_cast<size_t>(window_frames()) * 160);
    return whisper::window_mel(model_, chunk, mel_threads_);
}

void Session::encoded() {
    const SpecialTokens& t = model_.tokens;
    segment_frames_ = window_frames();
    // The prefix up to <|startoftranscript|>: its last logits give the no-speech probability and
    // the language.
    prefix_.clear();
    const int max_context = model_.config.max_target_positions / 2 - 1;
    // A model without <|startofprev|> cannot be prompted; it decodes without context.
    if (!previous_.empty() && t.startofprev >= 0 && (*o_.condition_on_previous_text || seek_ == 0)) {
        prefix_.push_back(t.startofprev);
        size_t n = std::min<size_t>(previous_.size(), max_context);
        prefix_.insert(prefix_.end(), previous_.end() - n, previous_.end());
    }
    prefix_.push_back(t.sot);
    phase_ = Phase::Decoding;
    if (t.multilingual && language_token_ < 0) {
        // The language is not known yet: the prefix runs alone, its row decides the prompt.
        prefix_pending_ = true;
        task_ = DecodeTask{prefix_, std::nullopt, -1, cross_, Priority::Interactive};
        return;
    }
    // The prompt is known: the first attempt's prompt pass returns the prefix's row too.
    build_prompt();
    attempt_ = 0;
    start_attempt(static_cast<int>(prefix_.size()) - 1);
}

std::optional<DecodeTask> Session::take_task() {
    std::optional<DecodeTask> t = std::move(task_);
    task_.reset();
    return t;
}

void Session::read_prefix_row(std::span<const float> logits) {
    const SpecialTokens& t = model_.tokens;
    if (logits.size() != static_cast<size_t>(model_.config.vocab_size))
        throw Error(ErrorKind::Internal, "the decode returned no logits row for the prefix");
    std::vector<float> lp(logits.begin(), logits.end());
    log_softmax(lp);
    no_speech_prob_ = t.nospeech >= 0 ? std::exp(lp[t.nospeech]) : 0.0f;
    if (t.multilingual && language_token_ < 0) {
        result_.language_probs = language_probabilities(logits, t);
        auto best = std::max_element(result_.language_probs.begin(), result_.language_probs.end(),
                                     [](const auto& a, const auto& b) { return a.second < b.second; });
        result_.language = best->first;
        language_token_ = t.language_token(best->first);
    }
}

void Session::build_prompt() {
    const SpecialTokens& t = model_.tokens;
    prompt_ = prefix_;
    if (t.multilingual) {
        prompt_.push_back(language_token_);
        prompt_.push_back(o_.task == "translate" ? t.translate : t.transcribe);
    }
    if (!o_.timestamps) prompt_.push_back(t.notimestamps);
}

void Session::decoded(const DecodeOutcome& outcome) {
    if (phase_ != Phase::Decoding || task_ || outcome.aborted)
        throw Error(ErrorKind::Internal, "a decode's outcome the session was not waiting for");
    if (prefix_pending_) {
        prefix_pending_ = false;
        read_prefix_row(outcome.logits);
        build_prompt();
        attempt_ = 0;
        start_attempt(-1);
        return;
    }
    if (row_pending_) {
        row_pending_ = false;
        read_prefix_row(outcome.logits);
    }
    finish_attempt(outcome.result);
}

void Session::start_attempt(int prefix_row) {
    SearchOptions so;
    so.max_new_tokens =
        std::min(o_.max_new_tokens, model_.config.max_target_positions - static_cast<int>(prompt_.size()));
    so.eos = model_.tokens.eot;
    so.temperature = o_.temperatures[attempt_];
    so.num_beams = so.temperature > 0.0f ? 1 : *o_.beam_size;
    so.length_penalty = o_.length_penalty;
    so.seed = o_.seed + attempt_;
    so.processors = whisper_processors(model_, static_cast<int>(prompt_.size()), o_.timestamps, o_.min_new_tokens,
                                       o_.suppress_blank);
    if (o_.timestamps)
        so.processors.push_back(std::make_shared<EndAtAudioEnd>(model_.tokens, static_cast<int>(prompt_.size()),
                                                                static_cast<int>(segment_frames_)));
    row_pending_ = prefix_row >= 0;
    task_ = DecodeTask{prompt_, std::move(so), prefix_row, cross_, Priority::Interactive};
}

void Session::finish_attempt(SearchResult best) {
    const float temperature = o_.temperatures[attempt_];
    const float ratio = compression_ratio(text_of(model_, best.tokens));
    const bool silent = no_speech_prob_ > o_.no_speech_threshold && best.avg_logprob() < o_.logprob_threshold;
    const bool needs_fallback =
        !silent && (ratio > o_.compression_ratio_threshold || best.avg_logprob() < o_.logprob_threshold);
    if (needs_fallback && attempt_ + 1 < o_.temperatures.size()) {
        ++attempt_;
        start_attempt(-1);
        return;
    }
    if (silent) {
        advance_window(segment_frames_);  // the no-speech gate: nothing said in this window
        return;
    }
    if (o_.word_timestamps) {
        pending_best_ = std::move(best);
        pending_temperature_ = temperature;
        pending_ratio_ = ratio;
        phase_ = Phase::NeedAlign;
        return;
    }
    finish_window(best, temperature, ratio, nullptr);
}

void Session::align(WhisperRunner& runner, int slot) {
    if (phase_ != Phase::NeedAlign) throw Error(ErrorKind::Internal, "align() outside NeedAlign");
    std::vector<int> tokens = window_tokens(pending_best_);
    WindowAlignment a = align_window(model_, runner, *cross_, slot, prompt_, tokens, static_cast<int>(segment_frames_));
    finish_window(pending_best_, pending_temperature_, pending_ratio_, &a);
}

// The chosen attempt's tokens without end-of-text, cut back if they ended in a loop.
std::vector<int> Session::window_tokens(const SearchResult& best) const {
    const SpecialTokens& t = model_.tokens;
    std::vector<int> tokens = best.tokens;
    if (!tokens.empty() && tokens.back() == t.eot) tokens.pop_back();
    if (o_.repetition_cut > 0) {
        // Look for a loop in the text before any closing timestamps.
        size_t text_end = tokens.size();
        while (text_end > 0 && tokens[text_end - 1] >= t.timestamp_begin) --text_end;
        size_t keep = repetition_cut(std::span<const int>(tokens.data(), text_end), o_.repetition_cut);
        if (keep < text_end) tokens.resize(keep);
    }
    return tokens;
}

void Session::advance_window(int64_t frames) {
    seek_ += frames;
    // Nothing before the next window is read again (a window starts at seek_, never before).
    const auto next = static_cast<size_t>(seek_) * 160;
    audio_->release(next);
    const bool more = audio_->fill(next + 160) == next + 160;  // another whole frame
    if (audio_->ended()) result_.duration = static_cast<double>(audio_->decoded()) / 16000.0;
    if (o_.progress) o_.progress(seconds_done(), result_.duration);
    if (more) {
        phase_ = Phase::NeedEncode;
        return;
    }
    phase_ = Phase::Done;
    result_.text.clear();
    for (const Segment& s : result_.segments) result_.text += s.text;
    size_t b = result_.text.find_first_not_of(' ');  // segments start with a space
    result_.text = b == std::string::npos ? "" : result_.text.substr(b);
}

void Session::finish_window(const SearchResult& best, float temperature, float ratio, const WindowAlignment* align) {
    const SpecialTokens& t = model_.tokens;
    const double time_offset = seek_ * kSecondsPerFrame;
    std::vector<int> tokens = window_tokens(best);
    auto decode = [&](std::span<const int> ids) {
        std::vector<int32_t> v(ids.begin(), ids.end());
        return model_.tokenizer->decode(v);
    };
    auto is_ts = [&](int tok) { return tok >= t.timestamp_begin; };
    // Times are clamped to the audio's end once it is known (the window that holds it). Until
    // then a window lies inside the audio, and result_.duration is only the container's
    // declaration, absent (0) for streams such as ADTS AAC or an MP3 without a Xing header.
    const double audio_end =
        audio_->ended() ? static_cast<double>(audio_->decoded()) / 16000.0 : std::numeric_limits<double>::infinity();
    auto add_segment = [&](double start, double end, std::vector<int> seg_tokens, size_t first) {
        Segment s;
        s.id = static_cast<int>(result_.segments.size());
        s.seek = static_cast<int>(seek_);
        s.start = std::min(start, audio_end);  // the last timestamp may lie in the padding
        s.end = std::min(end, audio_end);
        s.text = text_of(model_, seg_tokens);
        s.tokens = std::move(seg_tokens);
        s.temperature = temperature;
        s.avg_logprob = static_cast<float>(best.avg_logprob());
        s.compression_ratio = ratio;
        s.no_speech_prob = no_speech_prob_;
        if (align) {
            std::span<const float> probs(align->token_probs);
            s.words = timed_words(s.tokens, prompt_.size() + first, align->timestamps, time_offset, t.eot, decode,
                                  result_.language, probs.subspan(first, s.tokens.size()));
            for (Word& w : s.words) {
                w.start = std::min(w.start, audio_end);
                w.end = std::min(w.end, audio_end);
            }
        }
        // Text placed entirely in the zero padding after the audio is not speech.
        if (s.text.empty() || start >= audio_end) return;
        result_.segments.push_back(std::move(s));
        if (on_segment) on_segment(result_.segments.back());
    };
    const size_t n = tokens.size();
    const bool single_timestamp_ending = n >= 2 && !is_ts(tokens[n - 2]) && is_ts(tokens[n - 1]);
    std::vector<size_t> cuts;
    for (size_t i = 1; i < n; ++i)
        if (is_ts(tokens[i - 1]) && is_ts(tokens[i])) cuts.push_back(i);
    int64_t advance = segment_frames_;
    if (!cuts.empty()) {
        if (single_timestamp_ending) cuts.push_back(n);
        size_t last = 0;
        for (size_t cut : cuts) {
            std::vector<int> seg(tokens.begin() + last, tokens.begin() + cut);
            add_segment(time_offset + (seg.front() - t.timestamp_begin) * kSecondsPerTimestamp,
                        time_offset + (seg.back() - t.timestamp_begin) * kSecondsPerTimestamp, seg, last);
            last = cut;
        }
        if (!single_timestamp_ending)
            advance = static_cast<int64_t>(tokens[last - 1] - t.timestamp_begin) * kFramesPerTimestamp;
    } else {
        double duration = segment_frames_ * kSecondsPerFrame;
        int last_ts = -1;
        for (int tok : tokens)
            if (is_ts(tok)) last_ts = tok;
        if (last_ts > t.timestamp_begin) duration = (last_ts - t.timestamp_begin) * kSecondsPerTimestamp;
        add_segment(time_offset, time_offset + duration, tokens, 0);
    }
    // Context for the next window; a hot temperature means an unreliable one.
    if (*o_.condition_on_previous_text && temperature <= 0.5f)
        previous_.insert(previous_.end(), tokens.begin(), tokens.end());
    else
        previous_.clear();
    // A window that decoded nothing still moves on (never loop in place).
    advance_window(std::max<int64_t>(advance, 1));
}

}  // namespace parlance::whisper
