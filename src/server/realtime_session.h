// One /v1/realtime transcription session, apart from its socket: client events in (JSON text),
// server events out, in OpenAI's GA shapes (session.update) or the beta ones
// (transcription_session.update), answered in the shape the client used.
//
// Audio arrives as base64 PCM16 at 24 kHz (or 16 kHz, an extension), or G.711 mu-law / A-law at
// 8 kHz, and is kept at 16 kHz. With server_vad, Silero VAD finds speech: speech_started opens an
// item; while it lasts the open segment is decoded again every redecode_seconds of new audio and
// the text consecutive decodes agree on goes out as deltas (CommitPolicy); at the end of speech
// (or at max_segment_seconds, cut at a quiet point) the item is committed and decoded once more,
// the rest goes out as a delta, then `completed` with the transcript the deltas join to. A client
// whose session `include`s "parlance.input_audio_transcription.tentative" (an extension) also gets
// that event with the latest hypothesis past the committed text, to show greyed until it commits
// or changes. Without
// turn detection the client commits. A bad message is answered with an `error` event naming the
// offending event; the session stays usable. Decodes of one session run one at a time on the
// worker pool; a decode that decides an item (up to a pause, or final) runs as Priority::Live,
// interim decodes as Interactive, and an item's end cancels an interim decode in flight that does
// not reach it (a final decode follows it anyway).
// Audio before the open segment is dropped, so memory stays flat on long streams.
// Not thread-safe: every call, and every hook's callback, runs on the connection's strand.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "audio/decode.h"
#include "models/speech_model.h"
#include "models/voice_activity.h"
#include "server/live_item.h"
#include "server/realtime_audio_in.h"
#include "server/realtime_protocol.h"
#include "server/realtime_registry.h"
#include "server/session_audio.h"
#include "server/turn_detector.h"

namespace parlance::server {

// Model names that mean the first speech model loaded (or, in a live session, the session's):
// OpenAI's (whisper-1, gpt-4o-transcribe, gpt-4o-mini-transcribe) and "whisper", parlance's
// default id before models were named.
bool is_speech_model_alias(const std::string& name);

struct RealtimeOptions {
    std::string model_id = "whisper";  // transcription.model values accepted (and whisper-1)
    double redecode_seconds = 0.6;     // new speech that triggers a re-decode of the open segment
    // The cadence while the open item has nothing committed yet (its first words come out sooner
    // for a few more decodes per item); 0: redecode_seconds throughout.
    double first_redecode_seconds = 0.0;
    double max_segment_seconds = 30;  // a longer segment is cut at a quiet point (at most the
                                      // model's window: SpeechEngine::window_seconds)
    double max_buffer_seconds = 120;  // uncommitted audio held without turn detection
    double max_session_seconds = 4 * 3600;
    CommitPolicy::Options commit;  // when interim text is final
    // Words an interim decode places ending less than this before the end of the audio it heard
    // are not committed by it (the audio may have cut them); needs word timestamps from the
    // engine (Whisper), else ignored. 0: off.
    double commit_guard_seconds = 0.0;
    // Words an interim decode gives a probability below this (the mean over the word's tokens of
    // each token's probability among the text tokens, as OpenAI's word timestamps report it) are
    // not committed by it, nor anything after them: a word the model hesitates on waits for the
    // item's decode at its end. Needs words with probabilities from the engine (Whisper's word
    // timestamps, an audio LM's token probabilities), else ignored. 0: off. 0.6: with the bundled
    // model on 60 held-out clips the streamed transcript equals the item's own decode on 59
    // instead of 48, the first delta 0.4 s later (BENCHMARKS.md).
    double commit_min_probability = 0.6;
    // Each re-decode of an item is given the previous decode's tokens as the expected output
    // (TranscriptionRequest::expected): models that verify drafts check them in one pass
    // (self-speculation). The text is the same either way.
    bool self_speculation = true;
};

class RealtimeSession : public std::enable_shared_from_this<RealtimeSession> {
public:
    struct Hooks {
        std::function<void(std::string)> send;            // a server event, in order
        std::function<void(std::function<void()>)> post;  // run on the session's strand
        std::function<void(std::function<void()>)> work;  // run on a worker (may block)
        std::function<void(std::string reason)> close;    // end the session (limits)
        // End the session because the server is going away (WebSocket 1001); close when unset.
        std::function<void(std::string reason)> going_away;
        // Steady seconds, for the session's latency statistics and its decodes' pace (whether an
        // interim decode is worth cancelling at a pause); steady_clock when unset. Tests set it to
        // step time without sleeping.
        std::function<double()> now;
    };

    // vad may be null: server_vad is then refused (turn_detection null works).
    // `registry` (the server's) counts the session and its statistics, and outlives it.
    RealtimeSession(SpeechEngine& engine, VoiceActivityModel* vad, RealtimeOptions options, bool beta, Hooks hooks,
                    RealtimeRegistry& registry);
    ~RealtimeSession();

    void start();  // session.created (or transcription_session.created)
    void on_message(std::string_view text);
    void stop();  // the socket closed: cancels what is in flight, sends nothing more
    // The server is shutting down (session's strand): the speech going on is finalized (server VAD;
    // an uncommitted manual buffer stays the client's), its decodes finish and their events go
    // out, then the session ends with going_away. New audio is ignored meanwhile.
    void shut_down();
    // Posts shut_down() to every live session of the registry (SIGTERM).
    static void shut_down_all(RealtimeRegistry& registry);

    // More audio would only queue up: final decodes are waiting. The connection stops reading
    // until it clears, so a client sending faster than the model keeps up is slowed down by TCP
    // (backpressure) instead of growing the server's memory.
    bool congested() const { return decodes_.size() >= 2; }
    // No decode running or waiting (`parlance stream --lockstep` waits for it).
    bool idle() const { return !decoding_ && decodes_.empty(); }

private:
    struct Decode {
        std::string item_id;
        bool final = false;
        // Ends where the speech paused (or is a final decode): if the pause ends the item, its text
        // is the item's transcript, so it runs as Priority::Live. Interim decodes at the cadence
        // only preview text a later decode replaces: Priority::Interactive, beside file requests.
        bool at_pause = false;
        std::vector<float> pcm;
        int64_t end = 0;         // session sample where the audio ends
        double queued_at = 0.0;  // steady seconds: when it was queued (its audio had arrived)
    };

    void update_session(const nlohmann::json& ev, bool beta_shape);
    void append(const nlohmann::json& ev);
    void commit(const nlohmann::json& ev);
    void clear();
    void feed_vad(std::span<const float> pcm16k);
    void open_item(int64_t start, bool speech_started);
    void close_item(int64_t end, int64_t speech_end, bool speech_stopped);
    void complete(LiveItem& it, const std::string& text);
    void send_delta(LiveItem& it, const std::string& delta);
    void send_tentative(LiveItem& it);
    void redecode_to(int64_t end);
    // Interim decodes ask for words: the commit guard is on and the engine times words, or the
    // probability gate is on and the engine gives words probabilities (with times or without).
    bool words_gate_commits() const {
        return (o_.commit_guard_seconds > 0 && engine_.word_timestamps()) ||
               (o_.commit_min_probability > 0 && (engine_.word_timestamps() || engine_.word_probabilities()));
    }
    void maybe_redecode();
    void run_next_decode();
    // Cancels the interim decode in flight if it ends before `end` (the end of a committed item's
    // speech): its text can no longer be used; the engine drops it between steps.
    void cancel_interim_before(int64_t end);
    void on_decoded(const Decode& d, const Transcript& result, const std::string& error);
    void trim();
    void end_if_shut_down();
    void error(const std::string& code, const std::string& message, const std::string& param, const nlohmann::json& ev,
               const std::string& type = "invalid_request_error");
    void emit(nlohmann::json ev);
    double now() const;
    int64_t ms(int64_t samples) const { return samples / 16; }

    SpeechEngine& engine_;
    RealtimeRegistry& registry_;
    VoiceActivityModel* vad_;
    RealtimeOptions o_;
    double max_segment_seconds_;  // o_'s cap, or the model's window when that is shorter
    bool beta_;
    Hooks hooks_;
    std::string id_;
    bool stopped_ = false;
    bool shutting_down_ = false;  // shut_down(): finishing what was received, then going away
    bool ended_ = false;          // going_away was called
    std::shared_ptr<std::atomic<bool>> cancelled_ = std::make_shared<std::atomic<bool>>(false);

    // Configuration (session.update).
    RealtimeSettings settings_;  // what session.update set
    bool tentative_ = false;     // settings_.include names the tentative event

    RealtimeAudioIn audio_in_;  // the format's bytes -> 16 kHz samples (server/realtime_audio_in.h)
    SessionAudio audio_;        // at 16 kHz, from the first sample anything may still need
    int64_t buffer_start_ = 0;  // without turn detection: the first uncommitted sample

    // Server VAD.
    std::unique_ptr<TurnDetector> turns_;  // server VAD's (null without a VAD model)

    // Items: the open one (speech going on) and those waiting for their final decode.
    std::map<std::string, LiveItem> items_;
    std::string open_id_, last_id_;
    int64_t last_redecode_ = 0;
    std::deque<Decode> decodes_;
    bool decoding_ = false;
    // The decode in flight: its own cancellation flag (stop() sets it too), end and kind.
    std::shared_ptr<std::atomic<bool>> inflight_cancel_;
    int64_t inflight_end_ = 0;
    bool inflight_interim_ = false;
    double inflight_started_ = 0.0;  // steady seconds
    // How long this session's decodes take, submit to result (a moving average of the completed
    // ones; 0 before the first): whether the engine keeps up with it.
    double decode_seconds_ = 0.0;
};

}  // namespace parlance::server
