// Byte-level BPE tokenizer: the public interface (encode with added tokens, decode, lookups) and
// the ranked-bytes loader. Loaders of files: tokenizer_json.cpp, tokenizer_gguf.cpp; the encoder:
// tokenizer_impl.cpp.
#include "text/tokenizer.h"

#include <algorithm>

#include "core/error.h"
#include "text/tokenizer_impl.h"

namespace parlance {

using namespace tokenizer_detail;

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_ranked_bytes(std::vector<std::string> token_bytes) {
    auto impl = std::make_unique<Impl>();
    impl->origin = "ranked byte vocabulary";
    impl->tokens.resize(token_bytes.size());
    for (size_t i = 0; i < token_bytes.size(); ++i) {
        std::string text = byte_level_encode(token_bytes[i]);
        impl->tokens[i] = {std::move(token_bytes[i]), std::move(text), TokenKind::Normal};
    }
    impl->index("token_bytes");
    if (impl->bytes_to_id.size() != impl->tokens.size())
        throw Error(ErrorKind::InvalidModel, impl->origin + ": two tokens have the same bytes");
    for (size_t i = 0; i < impl->tokens.size(); ++i) {
        const std::string_view b = impl->tokens[i].bytes;
        for (size_t k = 1; k < b.size(); ++k) {
            auto l = impl->bytes_to_id.find(b.substr(0, k));
            if (l == impl->bytes_to_id.end()) continue;
            auto r = impl->bytes_to_id.find(b.substr(k));
            if (r == impl->bytes_to_id.end()) continue;
            const auto id = static_cast<int32_t>(i);
            impl->add_merge(l->second, r->second, id, id);
        }
    }
    Stage split;
    split.regex = compile_regex(kGpt2Pattern, false, impl->origin);
    impl->stages.push_back(std::move(split));
    return Tokenizer(std::move(impl));
}

void Tokenizer::add_special_token(std::string content, int32_t id) {
    if (id < 0)
        throw Error(ErrorKind::InvalidArgument,
                    "special token id " + std::to_string(id) + " is negative");
    if (content.empty()) throw Error(ErrorKind::InvalidArgument, "special token content is empty");
    Impl& im = *impl_;
    if (static_cast<size_t>(id) < im.tokens.size()) {
        TokenInfo& t = im.tokens[id];
        const bool same = t.bytes == content || t.text == content;
        if (t.kind != TokenKind::Hole && !same)
            throw Error(ErrorKind::InvalidArgument, "token id " + std::to_string(id) +
                                                        " already holds '" + t.text + "', not '" +
                                                        content + "'");
        // A vocabulary token becoming special is no longer produced by BPE (tiktoken keeps special
        // tokens out of its mergeable ranks), only by matching its content with parse_special.
        if (t.kind == TokenKind::Normal) {
            if (auto it = im.bytes_to_id.find(t.bytes);
                it != im.bytes_to_id.end() && it->second == id)
                im.bytes_to_id.erase(it);
            std::erase_if(im.merges, [id](const auto& kv) { return kv.second.id == id; });
        }
        t.kind = TokenKind::Special;
        t.bytes = content;
        t.text = std::move(content);
    } else {
        im.set_token(id, {content, content, TokenKind::Special});
    }
    im.added.insert(im.tokens[id].text, id);
    im.text_to_id[im.tokens[id].text] = id;
    std::lock_guard lock(im.cache_mu);
    im.cache.clear();
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special) const {
    const Impl& im = *impl_;
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 1);
    if (im.added.empty()) {
        im.encode_segment(text, out);
        return out;
    }
    auto accept = [&](int32_t id) {
        return parse_special || im.tokens[id].kind != TokenKind::Special;
    };
    size_t start = 0;
    for (size_t pos = 0; pos < text.size();) {
        const auto [len, id] = im.added.longest(text, pos, accept);
        if (len == 0) {
            ++pos;
            continue;
        }
        im.encode_segment(text.substr(start, pos - start), out);
        out.push_back(id);
        pos += len;
        start = pos;
    }
    im.encode_segment(text.substr(start), out);
    return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
    std::string out;
    for (int32_t id : ids) {
        const TokenInfo& t = impl_->checked(id);
        if (skip_special && t.kind == TokenKind::Special) continue;
        out += t.bytes;
    }
    return out;
}

std::string Tokenizer::token_bytes(int32_t id) const {
    return impl_->checked(id).bytes;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token_text) const {
    auto it = impl_->text_to_id.find(token_text);
    if (it == impl_->text_to_id.end()) return std::nullopt;
    return it->second;
}

std::string Tokenizer::id_to_token(int32_t id) const {
    return impl_->checked(id).text;
}

size_t Tokenizer::vocab_size() const {
    return impl_->tokens.size();
}

bool Tokenizer::is_special(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < impl_->tokens.size() &&
           impl_->tokens[id].kind == TokenKind::Special;
}

}  // namespace parlance
