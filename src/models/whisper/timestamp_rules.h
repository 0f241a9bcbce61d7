// Whisper's timestamp decoding rules as a logits processor, with the semantics of OpenAI's
// ApplyTimestampRules and transformers' WhisperTimeStampLogitsProcessor: timestamps come in
// pairs, never decrease, the first token is a timestamp no later than max_initial_timestamp,
// and a timestamp is forced when timestamps together outweigh every text token.
#pragma once

#include "decoding/logits.h"
#include "models/whisper/config.h"

namespace parlance::whisper {

class TimestampRules : public LogitsProcessor {
public:
    // begin_index: where sampled tokens start in the sequence (the prompt length).
    TimestampRules(const SpecialTokens& tokens, int begin_index)
        : eot_(tokens.eot), notimestamps_(tokens.notimestamps), ts_begin_(tokens.timestamp_begin),
          max_initial_(tokens.max_initial_timestamp_index), begin_(begin_index) {}
    void apply(std::span<float> logits, std::span<const int> tokens, int prompt_length) const override;

private:
    int eot_, notimestamps_, ts_begin_, max_initial_, begin_;
};

// Ends a window's decoding at the end of its audio: once a sampled timestamp reaches the last
// 20 ms step that holds real audio (`audio_frames` mel frames, 100 per second), only end-of-text
// may follow. What a model would write after that lies in the zero padding of the last window,
// and the session drops segments there anyway; whisper.cpp stops at the same point. Sessions
// use it (not `parlance parity`, whose reference decodes to the token limit).
class EndAtAudioEnd : public LogitsProcessor {
public:
    EndAtAudioEnd(const SpecialTokens& tokens, int begin_index, int audio_frames)
        : eot_(tokens.eot), ts_begin_(tokens.timestamp_begin), begin_(begin_index),
          last_step_((audio_frames + 1) / 2) {}
    void apply(std::span<float> logits, std::span<const int> tokens, int prompt_length) const override;

private:
    int eot_, ts_begin_, begin_, last_step_;
};

}  // namespace parlance::whisper
