// The words of a decoded text with the probabilities of the tokens that spell them, for models
// whose output has no word timestamps (an audio language model's transcription): what a live
// session's probability gate reads (server/realtime_session.h), the same figure OpenAI whisper
// gives a word — the mean of its tokens' probabilities.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "decoding/transcript.h"
#include "text/tokenizer.h"

namespace parlance {

// `text` is what the generated `tokens` say (a part of their decoded bytes, special tokens
// skipped: the transcription after a model's own prefix); `logprobs[i]` is token i's
// log-probability. Each whitespace-separated word of `text`, in order, gets the mean probability
// of the tokens whose bytes overlap it (a token across a word boundary counts for both); times
// stay 0. `text` is placed at its last occurrence in the decoded bytes (it ends the output); when
// it is not there verbatim (a parser rewrote it: a collapsed loop) or the counts differ, there are
// no words, so a caller gating on them holds the text back. Words are split at whitespace only:
// a script written without spaces is one word per run.
std::vector<Word> words_with_probabilities(const Tokenizer& tokenizer, std::span<const int32_t> tokens,
                                           std::span<const float> logprobs, std::string_view text);

}  // namespace parlance
