// One item of a live transcription session: the speech from its start (speech_started, or the
// client's commit) to its commit, the hypotheses its interim decodes give, and which of their text
// is final. This is the session's item/commit policy; the session (server/realtime_session.h)
// owns the protocol, the audio and the decodes and sends what the item decides.
//
// While the item is open, each interim decode's text is a hypothesis of its whole speech so far;
// CommitPolicy commits what consecutive hypotheses agree on (within the words a decode placed
// safely: stable_prefix) and the session sends it as deltas. When the item is committed, an
// interim decode that covered all of its speech is its final decode (landed or still running);
// otherwise a final decode of the item's audio follows. complete() sends the rest.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "decoding/commit_policy.h"
#include "decoding/transcript.h"

namespace parlance::server {

struct LiveItem {
    std::string id;
    int64_t start = 0, end = 0;  // session samples at 16 kHz
    CommitPolicy policy;
    bool committed = false;
    int64_t speech_end = 0;              // where the speech ended (the silence began)
    std::string hypothesis;              // the latest interim decode's text
    std::vector<int> hypothesis_tokens;  // its tokens (the next decode's expected output)
    int64_t hypothesis_end = -1;         // the audio it covered, [start, hypothesis_end)
    bool decoding = false;               // an interim decode of it is in flight
    bool await_interim = false;          // committed, and that decode covers its speech: it is final
    std::vector<float> final_pcm;        // the item's audio, kept while await_interim
    double opened_at = 0.0;              // steady seconds: speech_started
    double closed_at = 0.0;              // steady seconds: speech_stopped / committed
    bool delta_sent = false;
    std::string tentative_sent;  // the last tentative text sent (opted in by `include`)

    // How a committed item gets its transcript.
    enum class Closing {
        Complete,      // an interim decode that landed covered all its speech: its text is final
        AwaitInterim,  // the interim decode in flight will; keep the item's audio (final_pcm) meanwhile
        DecodeFinal,   // a decode of the item's audio follows
    };
    // The item is committed at `end`, its speech having ended at `speech_end` (clamped into it).
    Closing close(int64_t end, int64_t speech_end, double now);

    // What an interim decode that landed leaves to do.
    struct Interim {
        enum class Next {
            Open,         // the item is still open: send `delta` (maybe "") and the tentative text
            Complete,     // the item was committed meanwhile and this decode covered its speech
            DecodeFinal,  // the item was committed meanwhile and needs its final decode (final_pcm)
        } next;
        std::string delta;
    };
    // An interim decode of [start, end) landed: `result` (null when it failed or was cancelled)
    // becomes the hypothesis; while the item is open, `stable` bytes of its text at most
    // (stable_prefix; npos: no limit) may be committed by it.
    Interim interim_landed(const Transcript* result, int64_t end, size_t stable);

    // The tentative text to send (CommitPolicy::tentative), or nullopt when the client has it.
    std::optional<std::string> tentative_update();
};

// The bytes of t.text up to the end of its last word that ends by `limit` seconds, with every word
// before it at least `min_probability`, words taken in order (a word not found where expected ends
// the prefix there).
size_t stable_prefix(const Transcript& t, double limit, double min_probability);

}  // namespace parlance::server
