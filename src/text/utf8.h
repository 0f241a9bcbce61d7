// Small UTF-8 helpers shared by the tokenizer and the incremental detokenizer (strict RFC 3629).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace parlance::utf8 {

// Result of looking at the bytes starting at some offset.
struct Scan {
    enum class Status {
        Valid,       // `length` bytes form one well-formed code point `code_point`
        Incomplete,  // the bytes run out inside a well-formed prefix of a code point (`length` bytes)
        Invalid,     // `length` (>= 1) bytes can never start a well-formed code point
    };
    Status status;
    size_t length;
    char32_t code_point;
};

// Scans one code point at text[pos] (pos < text.size()). Rejects overlong forms, surrogates and
// values above U+10FFFF, like PCRE2 and utf8proc do. An Invalid scan's length is the maximal
// ill-formed subpart (W3C/Unicode "substitution of maximal subparts"), so that replacing each
// Invalid run by one U+FFFD matches what browsers and Python do.
Scan scan(std::string_view text, size_t pos) noexcept;

// Length of the longest prefix of text that is well-formed UTF-8.
size_t valid_prefix(std::string_view text) noexcept;

// Appends the UTF-8 encoding of cp (cp must be a scalar value).
void append(std::string& out, char32_t cp);

// text with every ill-formed subpart replaced by U+FFFD (including a truncated tail).
std::string sanitize(std::string_view text);

}  // namespace parlance::utf8
