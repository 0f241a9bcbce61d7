// Whisper transcription (see transcriber.h).
#include "models/whisper/transcriber.h"

#include <algorithm>
#include <cmath>

#include <zlib.h>

#include "core/error.h"
#include "decoding/repetition.h"
#include "models/whisper/alignment.h"
#include "models/whisper/timestamp_rules.h"

namespace parlance::whisper {
namespace {

constexpr double kSecondsPerFrame = 0.01;        // mel hop 160 / 16 kHz
constexpr double kSecondsPerTimestamp = 0.02;    // timestamp token resolution
constexpr int kFramesPerTimestamp = 2;           // encoder stride

std::string text_of(const WhisperModel& m, std::span<const int> tokens) {
    std::vector<int32_t> text;
    for (int t : tokens)
        if (t < m.tokens.eot) text.push_back(t);
    return m.tokenizer->decode(text);
}

// Token timestamps and probabilities of one window's tokens (see TranscribeOptions::word_timestamps).
struct WindowAlignment {
    std::vector<float> timestamps;   // per position of prompt + tokens + <|endoftext|>, seconds in the window
    std::vector<float> token_probs;  // per token of `tokens`: its probability among text tokens
};

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

void WhisperStepModel::bind(int slot, const CrossKv* cross) { cross_[slot] = cross; }

std::vector<std::vector<float>> WhisperStepModel::step(std::span<const StepInput> inputs) {
    std::vector<DecodeItem> items;
    items.reserve(inputs.size());
    for (const StepInput& in : inputs) {
        auto it = cross_.find(in.slot);
        if (it == cross_.end()) throw Error(ErrorKind::Internal, "slot has no encoded audio bound");
        items.push_back({in.slot, it->second, in.tokens, in.n_past});
    }
    return runner_.decode(items);
}

void WhisperStepModel::copy_slot(int from, int to, int n) {
    runner_.copy_slot(from, to, n);
    cross_[to] = cross_.at(from);
}

float compression_ratio(const std::string& text) {
    if (text.empty()) return 0.0f;
    uLongf bound = compressBound(text.size());
    std::vector<Bytef> out(bound);
    if (compress2(out.data(), &bound, reinterpret_cast<const Bytef*>(text.data()), text.size(), 9) != Z_OK)
        return 0.0f;
    return static_cast<float>(text.size()) / static_cast<float>(bound);
}

std::vector<float> window_mel(const WhisperModel& model, std::span<const float> pcm16k) {
    int frames = 0;
    LogMelOptions o;
    o.pad_or_trim_to = model.config.n_audio_samples();
    std::vector<float> mel = model.mel->compute(pcm16k, &frames, o);
    if (frames != model.config.n_mel_frames())
        throw Error(ErrorKind::Internal, "log-mel window has " + std::to_string(frames) + " frames");
    return mel;
}

std::map<std::string, float> language_probabilities(std::span<const float> logits,
                                                    const SpecialTokens& tokens) {
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

ProcessorList whisper_processors(const WhisperModel& model, int prompt_length, bool timestamps,
                                 int min_new_tokens, bool suppress_blank) {
    const SpecialTokens& t = model.tokens;
    ProcessorList list;
    if (min_new_tokens > 0) list.push_back(std::make_shared<MinNewTokens>(t.eot, min_new_tokens));
    if (suppress_blank && !t.begin_suppress_tokens.empty())
        list.push_back(std::make_shared<SuppressTokensAtBegin>(t.begin_suppress_tokens, prompt_length));
    if (!t.suppress_tokens.empty()) list.push_back(std::make_shared<SuppressTokens>(t.suppress_tokens));
    if (timestamps) list.push_back(std::make_shared<TimestampRules>(t, prompt_length));
    return list;
}

Transcript transcribe(const WhisperModel& model, WhisperRunner& runner, std::span<const float> pcm,
                      const TranscribeOptions& o) {
    const SpecialTokens& t = model.tokens;
    const WhisperConfig& c = model.config;
    if (o.task != "transcribe" && o.task != "translate")
        throw Error(ErrorKind::InvalidArgument, "task must be transcribe or translate, not '" + o.task + "'");
    if (o.task == "translate" && !t.multilingual)
        throw Error(ErrorKind::InvalidArgument, "this English-only model cannot translate");
    if (o.beam_size < 1 || 2 * o.beam_size > runner.kv().n_slots())
        throw Error(ErrorKind::InvalidArgument,
                    "beam_size must be between 1 and " + std::to_string(runner.kv().n_slots() / 2));
    if (pcm.empty()) throw Error(ErrorKind::InvalidAudio, "the audio is empty");

    Transcript result;
    result.task = o.task;
    result.duration = static_cast<double>(pcm.size()) / 16000.0;
    const int64_t total_frames = static_cast<int64_t>(pcm.size()) / 160;
    const int window = c.n_mel_frames();

    int language_token = -1;
    if (t.multilingual) {
        if (!o.language.empty()) {
            language_token = t.language_token(o.language);
            result.language = o.language;
        }
    } else {
        if (!o.language.empty() && o.language != "en")
            throw Error(ErrorKind::InvalidArgument,
                        "this English-only model cannot transcribe language '" + o.language + "'");
        result.language = "en";
    }

    std::vector<int> previous;  // text and timestamp tokens of earlier windows (the context)
    if (!o.initial_prompt.empty()) {
        auto ids = model.tokenizer->encode(" " + o.initial_prompt);
        previous.assign(ids.begin(), ids.end());
    }

    CrossKv cross(c, runner.backend());
    WhisperStepModel steps(runner);
    auto decode_fn = [&](std::span<const int> ids) {
        std::vector<int32_t> v(ids.begin(), ids.end());
        return model.tokenizer->decode(v);
    };
    std::vector<int> slots;
    for (int i = 0; i < 2 * o.beam_size; ++i) {
        slots.push_back(i);
        steps.bind(i, &cross);
    }
    const int max_context = c.max_target_positions / 2 - 1;

    int64_t seek = 0;
    while (seek < total_frames) {
        const int64_t segment_frames = std::min<int64_t>(window, total_frames - seek);
        const double time_offset = seek * kSecondsPerFrame;
        std::span<const float> chunk = pcm.subspan(static_cast<size_t>(seek * 160),
                                                   static_cast<size_t>(segment_frames * 160));
        std::vector<float> mel = window_mel(model, chunk);
        runner.encode(std::span<const std::vector<float>>(&mel, 1), std::span<CrossKv* const>(std::vector<CrossKv*>{&cross}));

        // The prefix up to <|startoftranscript|> runs once: its last logits give the
        // no-speech probability and the language.
        std::vector<int> prefix;
        if (o.condition_on_previous_text && !previous.empty()) {
            prefix.push_back(t.startofprev);
            size_t n = std::min<size_t>(previous.size(), max_context);
            prefix.insert(prefix.end(), previous.end() - n, previous.end());
        } else if (!o.initial_prompt.empty() && seek == 0) {
            prefix.push_back(t.startofprev);
            prefix.insert(prefix.end(), previous.begin(), previous.end());
        }
        prefix.push_back(t.sot);
        StepInput first{slots[0], prefix, 0};
        std::vector<float> sot_logits = steps.step(std::span<const StepInput>(&first, 1))[0];
        float no_speech_prob = 0.0f;
        {
            std::vector<float> lp = sot_logits;
            log_softmax(lp);
            if (t.nospeech >= 0) no_speech_prob = std::exp(lp[t.nospeech]);
        }
        if (t.multilingual && language_token < 0) {
            result.language_probs = language_probabilities(sot_logits, t);
            auto best = std::max_element(result.language_probs.begin(), result.language_probs.end(),
                                         [](auto& a, auto& b) { return a.second < b.second; });
            result.language = best->first;
            language_token = t.language_token(best->first);
        }
        std::vector<int> prompt = prefix;
        if (t.multilingual) {
            prompt.push_back(language_token);
            prompt.push_back(o.task == "translate" ? t.translate : t.transcribe);
        }
        if (!o.timestamps) prompt.push_back(t.notimestamps);

        // Decode with temperature fallback.
        SearchResult best;
        float used_temperature = 0.0f, ratio = 0.0f;
        for (size_t ti = 0; ti < o.temperatures.size(); ++ti) {
            SearchOptions so;
            so.max_new_tokens = std::min(o.max_new_tokens, c.max_target_positions - static_cast<int>(prompt.size()));
            so.eos = t.eot;
            so.temperature = o.temperatures[ti];
            so.num_beams = so.temperature > 0.0f ? 1 : o.beam_size;
            so.length_penalty = o.length_penalty;
            so.seed = o.seed + ti;
            so.processors = whisper_processors(model, static_cast<int>(prompt.size()), o.timestamps, 0,
                                               o.suppress_blank);
            // The search needs at least one uncached prompt token to get its first logits; when
            // the prompt is the prefix itself (.en with timestamps), it re-runs the last one.
            const int cached = static_cast<int>(std::min(prefix.size(), prompt.size() - 1));
            auto search = make_search(prompt, slots, so, cached);
            Search* sp = search.get();
            run_searches(steps, std::span<Search* const>(&sp, 1));
            best = search->result();
            used_temperature = so.temperature;
            ratio = compression_ratio(text_of(model, best.tokens));
            bool needs_fallback = ratio > o.compression_ratio_threshold ||
                                  best.avg_logprob() < o.logprob_threshold;
            if (no_speech_prob > o.no_speech_threshold && best.avg_logprob() < o.logprob_threshold)
                needs_fallback = false;  // silence: no point retrying
            if (!needs_fallback) break;
        }

        // The no-speech gate: skip the window when it is silence by both measures.
        if (no_speech_prob > o.no_speech_threshold && best.avg_logprob() < o.logprob_threshold) {
            seek += segment_frames;
            if (o.progress) o.progress(std::min<double>(seek, total_frames) * kSecondsPerFrame, result.duration);
            continue;
        }

        std::vector<int> tokens = best.tokens;
        if (!tokens.empty() && tokens.back() == t.eot) tokens.pop_back();
        if (o.repetition_cut > 0) {
            // Look for a loop in the text before any closing timestamps.
            size_t text_end = tokens.size();
            while (text_end > 0 && tokens[text_end - 1] >= t.timestamp_begin) --text_end;
            size_t keep = repetition_cut(std::span<const int>(tokens.data(), text_end), o.repetition_cut);
            if (keep < text_end) tokens.resize(keep);
        }
        auto is_ts = [&](int tok) { return tok >= t.timestamp_begin; };
        WindowAlignment align;
        if (o.word_timestamps)
            align = align_window(model, runner, cross, slots[0], prompt, tokens, static_cast<int>(segment_frames));
        auto add_segment = [&](double start, double end, std::vector<int> seg_tokens, size_t first) {
            Segment s;
            s.id = static_cast<int>(result.segments.size());
            s.seek = static_cast<int>(seek);
            // A window's last timestamp can lie in the zero padding after the audio.
            s.start = std::min(start, result.duration);
            s.end = std::min(end, result.duration);
            s.text = text_of(model, seg_tokens);
            s.tokens = std::move(seg_tokens);
            s.temperature = used_temperature;
            s.avg_logprob = static_cast<float>(best.avg_logprob());
            s.compression_ratio = ratio;
            s.no_speech_prob = no_speech_prob;
            if (o.word_timestamps) {
                std::span<const float> probs(align.token_probs);
                s.words = timed_words(s.tokens, prompt.size() + first, align.timestamps, time_offset, t.eot,
                                      decode_fn, result.language, probs.subspan(first, s.tokens.size()));
                for (Word& w : s.words) {
                    w.start = std::min(w.start, result.duration);
                    w.end = std::min(w.end, result.duration);
                }
            }
            if (!s.text.empty()) result.segments.push_back(std::move(s));
        };
        const size_t n = tokens.size();
        const bool single_timestamp_ending = n >= 2 && !is_ts(tokens[n - 2]) && is_ts(tokens[n - 1]);
        std::vector<size_t> cuts;
        for (size_t i = 1; i < n; ++i)
            if (is_ts(tokens[i - 1]) && is_ts(tokens[i])) cuts.push_back(i);
        if (!cuts.empty()) {
            if (single_timestamp_ending) cuts.push_back(n);
            size_t last = 0;
            for (size_t cut : cuts) {
                std::vector<int> seg(tokens.begin() + last, tokens.begin() + cut);
                double start = time_offset + (seg.front() - t.timestamp_begin) * kSecondsPerTimestamp;
                double end = time_offset + (seg.back() - t.timestamp_begin) * kSecondsPerTimestamp;
                add_segment(start, end, seg, last);
                last = cut;
            }
            if (single_timestamp_ending) {
                seek += segment_frames;
            } else {
                seek += static_cast<int64_t>(tokens[last - 1] - t.timestamp_begin) * kFramesPerTimestamp;
            }
        } else {
            double duration = segment_frames * kSecondsPerFrame;
            int last_ts = -1;
            for (int tok : tokens)
                if (is_ts(tok)) last_ts = tok;
            if (last_ts > t.timestamp_begin) duration = (last_ts - t.timestamp_begin) * kSecondsPerTimestamp;
            add_segment(time_offset, time_offset + duration, tokens, 0);
            seek += segment_frames;
        }
        // Remember the context for the next window; a hot temperature means an unreliable one.
        if (o.condition_on_previous_text && used_temperature <= 0.5f)
            previous.insert(previous.end(), tokens.begin(), tokens.end());
        else
            previous.clear();
        if (o.progress) o.progress(std::min<double>(seek, total_frames) * kSecondsPerFrame, result.duration);
    }

    for (const Segment& s : result.segments) result.text += s.text;
    // Trim the leading space every Whisper segment starts with.
    size_t b = result.text.find_first_not_of(' ');
    result.text = b == std::string::npos ? "" : result.text.substr(b);
    return result;
}

}  // namespace parlance::whisper
