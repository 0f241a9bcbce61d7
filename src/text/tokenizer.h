// Byte-level BPE tokenizer (GPT-2, Whisper, Qwen2/3) loaded from HF tokenizer.json, a GGUF vocabulary
// or a whisper.cpp-style list of ranked byte strings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace parlance {

// Immutable after loading (except add_special_token, which must happen before sharing).
// Thread safety: all const member functions may be called concurrently from many threads; the
// internal merge cache is guarded by a mutex. Move-only.
//
// Encoding contract:
//  - Added tokens are matched first, leftmost-longest, on the raw text and are never split.
//    Non-special added tokens are always matched (HF behaviour); special ones only when
//    parse_special is true, otherwise their text is tokenized like any other text.
//  - The text between added tokens is normalized (NFC when the tokenizer.json asks for it),
//    pre-tokenized (regex splits) and BPE-encoded over raw bytes.
//    Added-token flags lstrip/rstrip/single_word/normalized are not implemented (content is
//    matched exactly on the raw text); the tokenizers we serve (Qwen, Whisper) do not set them.
//  - encode never adds BOS/EOS or any template (post_processor is ignored).
//  - Invalid UTF-8 is not an error: each maximal ill-formed subpart is cut out of the text and
//    encoded as its own byte tokens (no normalization, no regex), the well-formed stretches around
//    it are encoded normally. Hence decode(encode(x)) == x for any bytes x when the tokenizer has
//    no normalizer (and for NFC-normalized text when it has one).
class Tokenizer {
public:
    // Loads an HF tokenizer.json (model.type "BPE" with a ByteLevel pre-tokenizer/decoder).
    // Throws Error(Io/NotFound) if unreadable, Error(InvalidModel) naming the file and field if
    // malformed, Error(Unsupported) for components we do not implement.
    static Tokenizer from_json_file(const std::filesystem::path& path);
    // Same from the json text; `origin` names the source in error messages.
    static Tokenizer from_json(std::string_view json, std::string_view origin = "tokenizer.json");
    // Loads the tokenizer of a GGUF file (tokenizer.ggml.model == "gpt2"; tokenizer.ggml.pre one
    // of "gpt-2", "qwen2"). Control tokens become special added tokens, user-defined tokens
    // non-special added tokens.
    static Tokenizer from_gguf(const std::filesystem::path& path);
    // token_bytes[i] are the raw bytes of token i; there are no merges: merging the pair (a, b)
    // has the rank of the id of the token a+b (tiktoken / whisper.cpp vocabularies, whose ids
    // follow merge order). Uses the GPT-2 pre-tokenizer regex. Throws Error(InvalidModel) on
    // duplicate or empty byte strings.
    static Tokenizer from_ranked_bytes(std::vector<std::string> token_bytes);

    Tokenizer(Tokenizer&&) noexcept;
    Tokenizer& operator=(Tokenizer&&) noexcept;
    ~Tokenizer();

    // Declares `content` as a special token with this id; id may extend the vocabulary (ids left
    // in between are holes: invalid for decode). If the id already holds a normal token whose
    // bytes equal content, that token becomes special. Throws Error(InvalidArgument) if the id
    // holds a different token or the content is empty or id < 0. Not thread-safe.
    void add_special_token(std::string content, int32_t id);

    // Text (any bytes) to token ids; see the class comment.
    std::vector<int32_t> encode(std::string_view text, bool parse_special = false) const;
    // Token ids to bytes (normally UTF-8, but a prefix of ids may end inside a character). Added
    // tokens decode to their content; skip_special drops special tokens. Throws
    // Error(InvalidArgument) for an id outside the vocabulary or a hole.
    std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

    // Raw bytes of a token (content for added tokens). Throws Error(InvalidArgument) on bad ids.
    std::string token_bytes(int32_t id) const;
    // The id of a token by its text as written in the vocabulary (byte-level form, e.g. "Ġthe")
    // or as an added token's content (e.g. "<|en|>"); nullopt if none.
    std::optional<int32_t> token_to_id(std::string_view token_text) const;
    // The text of a token as written in the vocabulary / added tokens. Throws like token_bytes.
    std::string id_to_token(int32_t id) const;
    // Max id + 1.
    size_t vocab_size() const;
    // True for special added tokens (false for invalid ids).
    bool is_special(int32_t id) const;

    struct Impl;

private:
    explicit Tokenizer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace parlance
