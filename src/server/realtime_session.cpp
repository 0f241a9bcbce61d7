// A /v1/realtime transcription session (see realtime_session.h).
#include "server/realtime_session.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iterator>
#include <limits>
#include <mutex>
#include <random>
#include <sstream>

#include "audio/cut_points.h"
#include "core/error.h"
#include "models/voice_activity.h"
#include "server/base64.h"
#include "server/latency_histogram.h"
#include "server/realtime_protocol.h"
#include "server/realtime_registry.h"

namespace parlance::server {

bool is_speech_model_alias(const std::string& name) {
    return name == "whisper-1" || name == "gpt-4o-transcribe" || name == "gpt-4o-mini-transcribe" || name == "whisper";
}
namespace {

using nlohmann::json;

constexpr int kRate = SessionAudio::kRate;
constexpr int64_t kMinCommitSamples = kRate / 10;  // 100 ms
// The extension event (and its `include` value) carrying the uncommitted rest of a hypothesis.
constexpr const char* kTentativeEvent = "parlance.input_audio_transcription.tentative";

std::string random_hex(size_t n) {
    static thread_local std::mt19937_64 rng(std::random_device{}());
    static const char* hex = "0123456789abcdef";
    std::string s;
    for (size_t i = 0; i < n; ++i) s += hex[rng() & 15];
    return s;
}

}  // namespace

RealtimeSession::RealtimeSession(SpeechEngine& engine, VoiceActivityModel* vad, RealtimeOptions options, bool beta,
                                 Hooks hooks, RealtimeRegistry& registry)
    : engine_(engine),
      registry_(registry),
      vad_(vad),
      o_(std::move(options)),
      max_segment_seconds_(engine.window_seconds() > 0 ? std::min(o_.max_segment_seconds, engine.window_seconds())
                                                       : o_.max_segment_seconds),
      beta_(beta),
      hooks_(std::move(hooks)),
      id_("sess_" + random_hex(20)),
      turns_(vad ? std::make_unique<TurnDetector>(*vad) : nullptr) {
    registry_.opened();
    settings_.model = o_.model_id;
    if (!vad_) settings_.server_vad = false;
    audio_in_.set_format(settings_.format);
}

double RealtimeSession::now() const {
    if (hooks_.now) return hooks_.now();
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

RealtimeSession::~RealtimeSession() {
    registry_.closed();
}

void RealtimeSession::shut_down_all(RealtimeRegistry& registry) {
    for (auto& s : registry.live()) s->hooks_.post([s] { s->shut_down(); });
}

void RealtimeSession::shut_down() {
    if (stopped_ || shutting_down_) return;
    shutting_down_ = true;
    if (settings_.server_vad && !open_id_.empty()) {  // the speech going on ends here
        turns_->end_speech();
        close_item(audio_.total(), audio_.total(), false);
    }
    run_next_decode();
    end_if_shut_down();
}

void RealtimeSession::end_if_shut_down() {
    if (!shutting_down_ || ended_ || stopped_ || decoding_ || !decodes_.empty() || !items_.empty()) return;
    ended_ = true;
    const std::string reason = "the server is shutting down";
    if (hooks_.going_away)
        hooks_.going_away(reason);
    else if (hooks_.close)
        hooks_.close(reason);
}

void RealtimeSession::start() {
    registry_.started(weak_from_this());
    emit({{"type", beta_ ? "transcription_session.created" : "session.created"},
          {"session", session_object(settings_, id_, beta_)}});
}

void RealtimeSession::stop() {
    stopped_ = true;
    cancelled_->store(true);
    if (inflight_cancel_) inflight_cancel_->store(true);
}

void RealtimeSession::cancel_interim_before(int64_t end) {
    if (decoding_ && inflight_interim_ && inflight_end_ < end && inflight_cancel_) inflight_cancel_->store(true);
}

void RealtimeSession::emit(json ev) {
    if (stopped_) return;
    ev["event_id"] = "event_" + random_hex(20);
    hooks_.send(ev.dump(-1, ' ', false, json::error_handler_t::replace));
}

void RealtimeSession::error(const std::string& code, const std::string& message, const std::string& param,
                            const json& ev, const std::string& type) {
    json e{{"type", type}, {"code", code}, {"message", message}, {"param", param.empty() ? json() : json(param)}};
    e["event_id"] = ev.is_object() && ev.contains("event_id") && ev["event_id"].is_string() ? ev["event_id"] : json();
    {
        std::lock_guard<std::mutex> lock(registry_.stats().mutex);
        ++registry_.stats().errors;
    }
    emit({{"type", "error"}, {"error", e}});
}

void RealtimeSession::on_message(std::string_view text) {
    if (stopped_ || shutting_down_) return;  // shutting down: only the speech already received counts
    json ev;
    try {
        ev = parse_client_event(text);
    } catch (const RealtimeEventError& e) {
        // The event's id when there is one to name (a JSON object without a type).
        const json parsed = e.code == "missing_type" ? json::parse(text, nullptr, false) : json();
        return error(e.code, e.what(), e.param, parsed.is_object() ? parsed : json());
    }
    const std::string type = ev["type"];
    try {
        if (type == "session.update") return update_session(ev, false);
        if (type == "transcription_session.update") return update_session(ev, true);
        if (type == "input_audio_buffer.append") return append(ev);
        if (type == "input_audio_buffer.commit") return commit(ev);
        if (type == "input_audio_buffer.clear") {
            clear();
            return emit({{"type", "input_audio_buffer.cleared"}});
        }
    } catch (const Error& e) {
        return error("invalid_value", e.what(), "", ev);
    }
    error("unknown_event_type",
          "unknown client event type '" + type.substr(0, 100) +
              "' (a transcription session takes session.update, transcription_session.update and "
              "input_audio_buffer.append/commit/clear)",
          "type", ev);
}

void RealtimeSession::update_session(const json& ev, bool beta_shape) {
    SessionUpdateContext context;
    context.model_id = o_.model_id;
    context.has_vad = vad_ != nullptr;
    context.check_language = [this](const std::string& language) { engine_.check_language(language); };
    RealtimeSettings next;
    try {
        next = parse_session_update(ev, beta_shape, settings_, context);
    } catch (const RealtimeEventError& e) {
        return error(e.code, e.what(), e.param, ev);
    }
    audio_in_.set_format(next.format);
    settings_ = std::move(next);
    tentative_ =
        std::find(settings_.include.begin(), settings_.include.end(), kTentativeEvent) != settings_.include.end();
    emit({{"type", beta_shape ? "transcription_session.updated" : "session.updated"},
          {"session", session_object(settings_, id_, beta_)}});
}

void RealtimeSession::append(const json& ev) {
    if (!ev.contains("audio") || !ev["audio"].is_string())
        return error("missing_audio", "input_audio_buffer.append needs \"audio\" (base64)", "audio", ev);
    std::string bytes;
    if (!base64_decode(ev["audio"].get<std::string>(), &bytes))
        return error("invalid_base64", "audio is not valid base64", "audio", ev);
    if (bytes.empty()) return;
    std::vector<float> out;
    try {
        out = audio_in_.decode({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
    } catch (const Error& e) {
        return error("invalid_audio", std::string(e.what()) + " (audio is 16-bit little-endian PCM)", "audio", ev);
    }
    if (!settings_.server_vad &&
        static_cast<double>(audio_.total() + static_cast<int64_t>(out.size()) - buffer_start_) / kRate >
            o_.max_buffer_seconds)
        return error("input_audio_buffer_full",
                     "more than " + std::to_string(static_cast<int>(o_.max_buffer_seconds)) +
                         " s of uncommitted audio: commit (or use server_vad)",
                     "audio", ev);
    if (static_cast<double>(audio_.total()) / kRate > o_.max_session_seconds) {
        error("session_expired",
              "the session is longer than the server's limit of " +
                  std::to_string(static_cast<int>(o_.max_session_seconds)) + " s",
              "", ev, "invalid_request_error");
        hooks_.close("session length limit");
        return;
    }
    audio_.append(out);
    if (settings_.server_vad) feed_vad(out);
    trim();
}

void RealtimeSession::feed_vad(std::span<const float> pcm) {
    turns_->push(pcm, audio_.total(), audio_.origin(), settings_, [this](const TurnDetector::Window& w) {
        using Turn = TurnDetector::Turn;
        if (w.turn == Turn::SpeechStarted) return open_item(w.start, true);
        if (w.pause_start >= 0) {
            // Decode the speech up to the pause now: if the pause turns out to end the item, this
            // decode is its final one and `completed` follows speech_stopped at once. While the
            // engine keeps up (this session's decodes take less than the silence that ends an
            // item), an interim decode in flight that stops short of the pause is cancelled (it
            // returns after its current engine step) and the pause's decode, which covers its audio
            // and more, takes its place: waiting for it first kept `completed` hundreds of ms behind
            // speech_stopped with four sessions on two cores. When decodes take longer, the pause's
            // decode cannot beat speech_stopped anyway, and the cancelled work and the hypothesis
            // it would have added to the agreement are lost (measured, BENCHMARKS.md): it runs next.
            if (decode_seconds_ < settings_.silence_duration_ms / 1000.0) cancel_interim_before(w.pause_start);
            redecode_to(w.pause_start);
        }
        if (w.turn == Turn::SpeechStopped) return close_item(w.end, w.start, true);
        // A segment at its cap is cut at a quiet point and the speech goes on in a new item.
        LiveItem& it = items_[open_id_];
        if (static_cast<double>(w.end - it.start) / kRate >= max_segment_seconds_) {
            const std::vector<float> seg = audio_.slice(it.start, w.end);
            const auto cuts = quiet_cut_points(seg, max_segment_seconds_ - 1.0, 5.0);
            const int64_t cut = it.start + static_cast<int64_t>(cuts.size() > 2 ? cuts[1] : seg.size());
            close_item(cut, cut, true);
            open_item(cut, true);
        }
        maybe_redecode();
    });
}

void RealtimeSession::open_item(int64_t start, bool speech_started) {
    LiveItem it;
    it.id = "item_" + random_hex(20);
    it.policy = CommitPolicy(o_.commit);
    it.start = start;
    it.opened_at = now();
    open_id_ = it.id;
    last_redecode_ = start;
    if (speech_started)
        emit({{"type", "input_audio_buffer.speech_started"}, {"audio_start_ms", ms(start)}, {"item_id", it.id}});
    items_.emplace(it.id, std::move(it));
}

// Ends the open item at `end`: committed, announced, queued for its final decode.
void RealtimeSession::close_item(int64_t end, int64_t speech_end, bool speech_stopped) {
    auto found = items_.find(open_id_);
    if (found == items_.end()) return;
    LiveItem& it = found->second;
    const LiveItem::Closing closing = it.close(end, speech_end, now());
    if (speech_stopped)
        emit({{"type", "input_audio_buffer.speech_stopped"}, {"audio_end_ms", ms(it.end)}, {"item_id", it.id}});
    emit({{"type", "input_audio_buffer.committed"},
          {"item_id", it.id},
          {"previous_item_id", last_id_.empty() ? json() : json(last_id_)}});
    json item{{"id", it.id},           {"object", "realtime.item"},
              {"type", "message"},     {"role", "user"},
              {"status", "completed"}, {"content", json::array({{{"type", "input_audio"}, {"transcript", nullptr}}})}};
    emit({{"type", beta_ ? "conversation.item.created" : "conversation.item.added"},
          {"previous_item_id", last_id_.empty() ? json() : json(last_id_)},
          {"item", item}});
    last_id_ = it.id;
    open_id_.clear();
    // The final decode supersedes a pending re-decode of this item.
    decodes_.erase(std::remove_if(decodes_.begin(), decodes_.end(),
                                  [&](const Decode& d) { return d.item_id == it.id && !d.final; }),
                   decodes_.end());
    if (closing == LiveItem::Closing::Complete) return complete(it, it.hypothesis);
    if (closing == LiveItem::Closing::AwaitInterim) {
        cancel_interim_before(it.speech_end);  // a final decode follows it anyway
        // Its audio now: by then trim() may have dropped it with the audio before the next item.
        it.final_pcm = audio_.slice(it.start, it.end);
        return;
    }
    decodes_.push_back({it.id, true, true, audio_.slice(it.start, it.end), it.end});
    run_next_decode();
}

void RealtimeSession::send_delta(LiveItem& it, const std::string& delta) {
    if (delta.empty()) return;
    {
        std::lock_guard<std::mutex> lock(registry_.stats().mutex);
        ++registry_.stats().deltas;
        if (!it.delta_sent) registry_.stats().first_delta.observe(now() - it.opened_at);
    }
    it.delta_sent = true;
    emit({{"type", "conversation.item.input_audio_transcription.delta"},
          {"item_id", it.id},
          {"content_index", 0},
          {"delta", delta}});
}

void RealtimeSession::send_tentative(LiveItem& it) {
    if (!tentative_) return;
    if (auto text = it.tentative_update())
        emit({{"type", kTentativeEvent}, {"item_id", it.id}, {"content_index", 0}, {"text", std::move(*text)}});
}

void RealtimeSession::complete(LiveItem& it, const std::string& text) {
    send_delta(it, it.policy.finalize(text));
    {
        std::lock_guard<std::mutex> lock(registry_.stats().mutex);
        ++registry_.stats().items;
        if (it.closed_at > 0) registry_.stats().completed_after_speech.observe(now() - it.closed_at);
    }
    const double seconds = static_cast<double>(it.end - it.start) / kRate;
    emit({{"type", "conversation.item.input_audio_transcription.completed"},
          {"item_id", it.id},
          {"content_index", 0},
          {"transcript", it.policy.transcript()},
          {"usage", {{"type", "duration"}, {"seconds", std::ceil(seconds * 10.0) / 10.0}}}});
    if (!beta_)
        emit({{"type", "conversation.item.done"},
              {"item",
               {{"id", it.id},
                {"object", "realtime.item"},
                {"type", "message"},
                {"role", "user"},
                {"status", "completed"},
                {"content", json::array({{{"type", "input_audio"}, {"transcript", it.policy.transcript()}}})}}}});
    items_.erase(it.id);
}

void RealtimeSession::redecode_to(int64_t end) {
    if (open_id_.empty() || decoding_ || !decodes_.empty()) return;
    LiveItem& it = items_[open_id_];
    if (end - it.start < kMinCommitSamples || end <= it.hypothesis_end) return;
    last_redecode_ = end;
    const bool at_pause = turns_ && turns_->speaking() && turns_->pause_from() == end;
    decodes_.push_back({it.id, false, at_pause, audio_.slice(it.start, end), end, now()});
    run_next_decode();
}

void RealtimeSession::commit(const json& ev) {
    if (settings_.server_vad && !open_id_.empty()) {  // a manual commit ends the speech going on
        turns_->end_speech();
        close_item(audio_.total(), audio_.total(), false);
        return;
    }
    const int64_t from = settings_.server_vad ? std::max(buffer_start_, audio_.origin()) : buffer_start_;
    const int64_t n = audio_.total() - from;
    if (n < kMinCommitSamples)
        return error("input_audio_buffer_commit_empty",
                     "Error committing input audio buffer: buffer too small. Expected at least 100ms of audio, but "
                     "buffer only has " +
                         std::to_string(ms(std::max<int64_t>(n, 0))) + "ms of audio.",
                     "", ev);
    open_item(from, false);
    close_item(audio_.total(), audio_.total(), false);
    buffer_start_ = audio_.total();
    trim();
}

void RealtimeSession::clear() {
    buffer_start_ = audio_.total();
    if (!open_id_.empty()) {  // the speech going on is dropped with the buffer
        items_.erase(open_id_);
        open_id_.clear();
        if (turns_) turns_->end_speech();
    }
    trim();
}

void RealtimeSession::maybe_redecode() {
    if (open_id_.empty() || !turns_) return;
    // In a pause, decode exactly up to it (once): if the pause ends the item, that decode is final.
    if (turns_->speaking() && turns_->pause_from() >= 0) return redecode_to(turns_->pause_from());
    const bool nothing_committed = items_[open_id_].policy.committed_units() == 0;
    const double cadence =
        nothing_committed && o_.first_redecode_seconds > 0 ? o_.first_redecode_seconds : o_.redecode_seconds;
    if (audio_.total() - last_redecode_ >= static_cast<int64_t>(cadence * kRate)) redecode_to(audio_.total());
}

void RealtimeSession::run_next_decode() {
    if (decoding_ || decodes_.empty() || stopped_) return;
    decoding_ = true;
    auto d = std::make_shared<Decode>(std::move(decodes_.front()));
    decodes_.pop_front();
    if (!d->final)
        if (auto it = items_.find(d->item_id); it != items_.end()) it->second.decoding = true;
    TranscriptionRequest req;
    req.pcm = d->pcm;
    req.options.language = settings_.language;
    req.options.initial_prompt = settings_.prompt;
    // Interim and final decodes alike decode as a file request would (the model's beam size,
    // timestamps), so what they agree on is what the final decode says, and the completed
    // transcript is the offline transcript of the same audio.
    req.options.temperatures = {0.0f};
    if (!d->final && words_gate_commits()) {
        if (engine_.word_timestamps())
            req.options.word_timestamps = true;
        else
            req.options.word_probabilities = true;
    }
    inflight_cancel_ = std::make_shared<std::atomic<bool>>(cancelled_->load());
    inflight_end_ = d->end;
    inflight_interim_ = !d->final;
    inflight_started_ = now();
    req.cancelled = inflight_cancel_;
    req.priority = d->final || d->at_pause ? Priority::Live : Priority::Interactive;
    if (o_.self_speculation)
        if (auto it = items_.find(d->item_id); it != items_.end()) req.expected = it->second.hypothesis_tokens;
    auto self = shared_from_this();
    // Queued from a worker (a tail shorter than 10 ms padded there); the engine tells the end
    // through on_finished, so no thread waits for the decode.
    hooks_.work([self, d, req = std::move(req)]() mutable {
        auto answer = [self, d](std::string err, Transcript result) {
            self->hooks_.post(
                [self, d, err = std::move(err), result = std::move(result)] { self->on_decoded(*d, result, err); });
        };
        req.on_finished = [answer](std::exception_ptr error, Transcript result) {
            std::string err;
            if (error) {
                try {
                    std::rethrow_exception(error);
                } catch (const std::exception& e) {
                    err = e.what();
                } catch (...) {
                    err = "the decode failed";
                }
            }
            answer(std::move(err), std::move(result));
        };
        try {
            if (req.pcm.size() < 160) req.pcm.resize(160, 0.0f);  // a tail shorter than 10 ms: padded
            self->engine_.submit(std::move(req));
        } catch (const std::exception& e) {
            answer(e.what(), Transcript{});
        }
    });
}

void RealtimeSession::on_decoded(const Decode& d, const Transcript& result, const std::string& err) {
    decoding_ = false;
    if (stopped_) return;
    if (err.empty()) {  // a cancelled decode says nothing about the engine's pace
        const double took = now() - inflight_started_;
        decode_seconds_ = decode_seconds_ == 0.0 ? took : 0.5 * decode_seconds_ + 0.5 * took;
    }
    const std::string& text = result.text;
    if (err.empty()) {
        std::lock_guard<std::mutex> lock(registry_.stats().mutex);
        ++registry_.stats().decodes;
        registry_.stats().decoder_passes += static_cast<uint64_t>(result.timings.decoder_passes);
        registry_.stats().draft_tokens += static_cast<uint64_t>(result.timings.draft_tokens);
        registry_.stats().draft_accepted += static_cast<uint64_t>(result.timings.draft_accepted);
    }
    auto found = items_.find(d.item_id);
    if (found != items_.end()) {
        LiveItem& it = found->second;
        if (!d.final) {
            size_t stable = std::string_view::npos;
            if (err.empty() && !it.committed && words_gate_commits()) {
                // Words without times (an audio LM's) are not held back by the guard.
                const double limit = engine_.word_timestamps()
                                         ? static_cast<double>(d.pcm.size()) / kRate - o_.commit_guard_seconds
                                         : std::numeric_limits<double>::infinity();
                stable = stable_prefix(result, limit, o_.commit_min_probability);
            }
            const LiveItem::Interim landed = it.interim_landed(err.empty() ? &result : nullptr, d.end, stable);
            if (landed.next == LiveItem::Interim::Next::Complete) {
                complete(it, text);
            } else if (landed.next == LiveItem::Interim::Next::DecodeFinal) {
                decodes_.push_back({it.id, true, true, std::move(it.final_pcm), it.end});
            } else if (err.empty()) {
                if (!landed.delta.empty()) {
                    {
                        std::lock_guard<std::mutex> lock(registry_.stats().mutex);
                        registry_.stats().commit_lag.observe(now() - d.queued_at);
                    }
                    send_delta(it, landed.delta);
                }
                send_tentative(it);
            }
        } else if (!err.empty()) {
            {
                std::lock_guard<std::mutex> lock(registry_.stats().mutex);
                ++registry_.stats().failed;
            }
            emit({{"type", "conversation.item.input_audio_transcription.failed"},
                  {"item_id", it.id},
                  {"content_index", 0},
                  {"error", {{"type", "transcription_error"}, {"code", "decode_failed"}, {"message", err}}}});
            items_.erase(found);
        } else {
            complete(it, text);
        }
    }
    trim();
    run_next_decode();
    maybe_redecode();
    end_if_shut_down();
}

// Drops audio nothing can need any more: before the open item, the uncommitted buffer, and the
// prefix padding a next speech start may reach back into.
void RealtimeSession::trim() {
    int64_t keep = audio_.total() - static_cast<int64_t>(settings_.prefix_padding_ms + 100) * 16;
    if (!settings_.server_vad) keep = std::min(keep, buffer_start_);
    if (!open_id_.empty()) keep = std::min(keep, items_[open_id_].start);
    audio_.drop_before(keep);
}

}  // namespace parlance::server
