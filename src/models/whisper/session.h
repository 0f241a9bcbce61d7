// One transcription request as a resumable state machine, so an engine thread can advance many
// requests together: it encodes the windows that need it (batched), then runs one decoder step
// over every request's live hypotheses, and hands each its logits. Same algorithm and results
// as transcribe() (prompt, language detection, temperature fallback, no-speech gate, seek).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "audio/pcm_source.h"
#include "decoding/decode_service.h"
#include "decoding/search.h"
#include "decoding/transcript.h"
#include "models/whisper/model.h"
#include "models/whisper/runner.h"
#include "models/whisper/transcriber.h"

namespace parlance::whisper {

// Token timestamps and probabilities of one window's tokens (word timestamps).
struct WindowAlignment {
    std::vector<float> timestamps;   // per position of prompt + tokens + <|endoftext|>, seconds in the window
    std::vector<float> token_probs;  // per token: its probability among text tokens
};

class Session {
public:
    // Reads windows from `audio` as they come (samples in memory, or a file decoded as it goes),
    // releasing what lies before each window: it must outlive the session. Validates the options
    // (Error(InvalidArgument) naming the field) and the audio's start.
    Session(const WhisperModel& model, Backend& backend, PcmSource& audio, const TranscribeOptions& options);

    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    enum class Phase { NeedEncode, Decoding, NeedAlign, Done };
    Phase phase() const { return phase_; }

    // NeedEncode: the log-mel of the current window and where to put its encoding.
    std::vector<float> window_mel() const;
    CrossKv* cross() { return cross_.get(); }
    // Call after the runner encoded window_mel() into cross().
    void encoded();

    // Decoding: the decode the session waits for next, once (the window's prefix, whose last
    // logits row gives the language and the no-speech probability; then each temperature
    // attempt's search), for a DecodeService (decoding/decode_service.h); then its outcome.
    std::optional<DecodeTask> take_task();
    void decoded(const DecodeOutcome& outcome);
    // The most beams a search of this request runs (its admission's worst case).
    int beams() const { return *o_.beam_size; }

    // NeedAlign (word timestamps): one cross-attention pass over the window's tokens in the
    // runner's cache slot `slot` (overwritten); then the window's segments are final.
    void align(WhisperRunner& runner, int slot);

    // Called with each finished segment as soon as it is decided (streaming).
    std::function<void(const Segment&)> on_segment;

    // Done: the transcript.
    Transcript& transcript() { return result_; }
    double seconds_done() const;

private:
    // Sets the next decode: the attempt's search over prompt_, asking the row after prompt
    // position `prefix_row` too (-1: none).
    void start_attempt(int prefix_row);
    void finish_attempt(SearchResult best);
    // The no-speech probability (and the language, if not known yet) from the row after <|startoftranscript|>.
    void read_prefix_row(std::span<const float> logits);
    // prompt_: the prefix, then the language and task (multilingual), then <|notimestamps|> if asked.
    void build_prompt();
    std::vector<int> window_tokens(const SearchResult& best) const;
    void finish_window(const SearchResult& best, float temperature, float ratio, const WindowAlignment* align);
    void advance_window(int64_t frames);
    // Frames of the window at seek_: the model's window, fewer at the end of the audio.
    int64_t window_frames() const;

    const WhisperModel& model_;
    PcmSource* audio_;
    TranscribeOptions o_;  // with_model_defaults: beam_size and condition_on_previous_text are set
    int mel_threads_;  // the backend's CPU threads: the log-mel runs while the encoder waits for it
    std::shared_ptr<CrossKv> cross_;  // shared with the decodes in flight
    Transcript result_;
    Phase phase_ = Phase::NeedEncode;

    int64_t seek_ = 0;
    int64_t segment_frames_ = 0;
    int language_token_ = -1;
    std::vector<int> previous_;
    std::vector<int> prefix_, prompt_;
    bool prefix_pending_ = false;     // the decode in flight is the prefix's alone
    bool row_pending_ = false;        // the attempt in flight returns the prefix's row too
    std::optional<DecodeTask> task_;  // not yet taken
    float no_speech_prob_ = 0.0f;
    size_t attempt_ = 0;
    // Waiting for align(): the chosen attempt.
    SearchResult pending_best_;
    float pending_temperature_ = 0.0f, pending_ratio_ = 0.0f;
};

}  // namespace parlance::whisper
