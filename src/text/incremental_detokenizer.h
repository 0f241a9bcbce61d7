// Turns a stream of token ids into UTF-8 text pieces that never end inside a character.
#pragma once

#include <cstdint>
#include <string>

#include "text/tokenizer.h"

namespace parlance {

// Streaming decode for one sequence. Holds a reference to the tokenizer, which must outlive it.
// Not thread-safe (one per stream); the tokenizer itself may be shared.
//
// Contract: the concatenation of every push() result and the final flush() equals
// utf8::sanitize(tokenizer.decode(all ids, skip_special)); every returned piece is well-formed
// UTF-8. Bytes that can still become a character are held back; bytes that can never become one
// are replaced by U+FFFD as soon as that is certain.
class IncrementalDetokenizer {
public:
    explicit IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special = false)
        : tokenizer_(tokenizer), skip_special_(skip_special) {}

    // Appends one token; returns the text completed by it (possibly empty). Throws
    // Error(InvalidArgument) for an invalid id (the state is then unchanged).
    std::string push(int32_t id);
    // Returns the held-back tail (an incomplete character becomes U+FFFD) and resets the state.
    std::string flush();
    // Bytes currently held back (0..3).
    size_t pending_bytes() const { return pending_.size(); }

private:
    const Tokenizer& tokenizer_;
    bool skip_special_;
    std::string pending_;
};

}  // namespace parlance
