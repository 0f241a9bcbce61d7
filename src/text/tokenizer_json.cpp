// Tokenizer::from_json: HF tokenizer.json (model BPE, normalizer, pre-tokenizer, added tokens),
// every malformed field refused with its path.
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "text/tokenizer_impl.h"

namespace parlance {

using namespace tokenizer_detail;

namespace {

using json = nlohmann::json;

const json& member(const json& obj, const char* key, const std::string& origin,
                   std::string_view path) {
    if (!obj.is_object()) bad_field(origin, path, "is not an object");
    auto it = obj.find(key);
    if (it == obj.end()) bad_field(origin, std::string(path) + "." + key, "is missing");
    return *it;
}

std::string type_of(const json& obj, const std::string& origin, std::string_view path) {
    const json& t = member(obj, "type", origin, path);
    if (!t.is_string()) bad_field(origin, std::string(path) + ".type", "is not a string");
    return t.get<std::string>();
}

bool flag(const json& obj, const char* key, bool fallback, const std::string& origin,
          std::string_view path) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) bad_field(origin, std::string(path) + "." + key, "is not a boolean");
    return it->get<bool>();
}

void parse_normalizer(const json& n, Tokenizer::Impl& impl, const std::string& path) {
    if (n.is_null()) return;
    const std::string type = type_of(n, impl.origin, path);
    if (type == "NFC") {
        impl.nfc = true;
    } else if (type == "Sequence") {
        const json& list = member(n, "normalizers", impl.origin, path);
        if (!list.is_array()) bad_field(impl.origin, path + ".normalizers", "is not an array");
        for (size_t i = 0; i < list.size(); ++i)
            parse_normalizer(list[i], impl, path + ".normalizers[" + std::to_string(i) + "]");
    } else {
        unsupported(impl.origin, path + ".type", "normalizer '" + type + "'");
    }
}

// Returns whether a ByteLevel step was seen.
bool parse_pre_tokenizer(const json& p, Tokenizer::Impl& impl, const std::string& path) {
    if (p.is_null()) return false;
    const std::string type = type_of(p, impl.origin, path);
    if (type == "Sequence") {
        const json& list = member(p, "pretokenizers", impl.origin, path);
        if (!list.is_array()) bad_field(impl.origin, path + ".pretokenizers", "is not an array");
        bool byte_level = false;
        for (size_t i = 0; i < list.size(); ++i)
            byte_level |= parse_pre_tokenizer(list[i], impl,
                                              path + ".pretokenizers[" + std::to_string(i) + "]");
        return byte_level;
    }
    if (type == "ByteLevel") {
        // HF defaults: add_prefix_space = true, use_regex = true.
        if (flag(p, "add_prefix_space", true, impl.origin, path)) {
            Stage s;
            s.kind = Stage::Kind::PrefixSpace;
            impl.stages.push_back(std::move(s));
        }
        if (flag(p, "use_regex", true, impl.origin, path)) {
            Stage s;
            s.regex = compile_regex(kGpt2Pattern, false, impl.origin);
            impl.stages.push_back(std::move(s));
        }
        return true;
    }
    if (type == "Split") {
        const json& pattern = member(p, "pattern", impl.origin, path);
        Stage s;
        if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
            s.regex = compile_regex(pattern["Regex"].get<std::string>(), false,
                                    impl.origin + ": " + path);
        } else if (pattern.contains("String") && pattern["String"].is_string()) {
            s.regex = compile_regex(pattern["String"].get<std::string>(), true,
                                    impl.origin + ": " + path);
        } else {
            bad_field(impl.origin, path + ".pattern", "has neither a Regex nor a String");
        }
        const json& behavior = member(p, "behavior", impl.origin, path);
        const std::string b = behavior.is_string() ? behavior.get<std::string>() : "";
        if (b == "Isolated") {
            s.behavior = Stage::Behavior::Isolated;
        } else if (b == "Removed") {
            s.behavior = Stage::Behavior::Removed;
        } else {
            unsupported(impl.origin, path + ".behavior", "split behavior '" + b + "'");
        }
        s.invert = flag(p, "invert", false, impl.origin, path);
        if (s.invert && s.behavior == Stage::Behavior::Removed)
            unsupported(impl.origin, path + ".invert", "inverted Removed split");
        impl.stages.push_back(std::move(s));
        return false;
    }
    unsupported(impl.origin, path + ".type", "pre-tokenizer '" + type + "'");
}

}  // namespace

Tokenizer Tokenizer::from_json_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        std::error_code ec;
        throw Error(std::filesystem::exists(path, ec) ? ErrorKind::Io : ErrorKind::NotFound,
                    path.string() + ": cannot open tokenizer file");
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) throw Error(ErrorKind::Io, path.string() + ": read failed");
    return from_json(ss.str(), path.string());
}

Tokenizer Tokenizer::from_json(std::string_view text, std::string_view origin_view) {
    auto impl = std::make_unique<Impl>();
    impl->origin = std::string(origin_view);
    const std::string& origin = impl->origin;
    json j;
    try {
        j = json::parse(text);
    } catch (const json::parse_error& e) {
        throw Error(ErrorKind::InvalidModel, origin + ": malformed JSON: " + e.what());
    }
    if (!j.is_object()) bad_field(origin, "(root)", "is not an object");

    const json& model = member(j, "model", origin, "(root)");
    const std::string type = model.contains("type") ? type_of(model, origin, "model") : "BPE";
    if (type != "BPE")
        throw Error(ErrorKind::InvalidModel,
                    origin + ": field 'model.type' is '" + type + "'; only 'BPE' is supported");
    if (flag(model, "byte_fallback", false, origin, "model"))
        unsupported(origin, "model.byte_fallback", "byte fallback (SentencePiece-style BPE)");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
        auto it = model.find(key);
        if (it != model.end() && it->is_string() && !it->get<std::string>().empty())
            unsupported(origin, std::string("model.") + key, "a non-empty subword affix");
    }
    impl->ignore_merges = flag(model, "ignore_merges", false, origin, "model");

    const json& vocab = member(model, "vocab", origin, "model");
    if (!vocab.is_object()) bad_field(origin, "model.vocab", "is not an object");
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
        if (!it.value().is_number_integer())
            bad_field(origin, "model.vocab[\"" + it.key() + "\"]", "is not an integer id");
        const auto id = it.value().get<int64_t>();
        if (id < 0 || id > INT32_MAX)
            bad_field(origin, "model.vocab[\"" + it.key() + "\"]", "is out of range");
        impl->set_token(static_cast<int32_t>(id),
                        {byte_level_decode(it.key()), it.key(), TokenKind::Normal});
    }
    impl->index("model.vocab");

    const json& merges = member(model, "merges", origin, "model");
    if (!merges.is_array()) bad_field(origin, "model.merges", "is not an array");
    impl->merges.reserve(merges.size());
    // The index just built holds exactly model.vocab (no added tokens yet): a hash lookup, where the
    // JSON object's ordered map made the three lookups per merge a fifth of a 151k-token load.
    // (A key whose id a later key reused is not in the index: the JSON object still has it.)
    auto vocab_id = [&](const std::string& tok, size_t i) -> int32_t {
        if (auto it = impl->text_to_id.find(std::string_view(tok)); it != impl->text_to_id.end()) return it->second;
        auto it = vocab.find(tok);
        if (it == vocab.end())
            bad_field(origin, "model.merges[" + std::to_string(i) + "]",
                      "names token '" + tok + "' that is not in model.vocab");
        return it->get<int32_t>();
    };
    for (size_t i = 0; i < merges.size(); ++i) {
        const json& m = merges[i];
        std::string a, b;
        if (m.is_string()) {
            const std::string& s = m.get_ref<const std::string&>();
            const size_t sp = s.find(' ');
            if (sp == std::string::npos || sp == 0 || sp + 1 >= s.size())
                bad_field(origin, "model.merges[" + std::to_string(i) + "]",
                          "is not of the form 'a b'");
            a = s.substr(0, sp);
            b = s.substr(sp + 1);
        } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
            a = m[0].get<std::string>();
            b = m[1].get<std::string>();
        } else {
            bad_field(origin, "model.merges[" + std::to_string(i) + "]",
                      "is neither 'a b' nor [a, b]");
        }
        const int32_t ia = vocab_id(a, i), ib = vocab_id(b, i);
        const int32_t ir = vocab_id(a + b, i);
        impl->add_merge(ia, ib, static_cast<int32_t>(i), ir);
    }

    if (auto it = j.find("added_tokens"); it != j.end() && !it->is_null()) {
        if (!it->is_array()) bad_field(origin, "added_tokens", "is not an array");
        for (size_t i = 0; i < it->size(); ++i) {
            const json& t = (*it)[i];
            const std::string path = "added_tokens[" + std::to_string(i) + "]";
            const json& id = member(t, "id", origin, path);
            const json& content = member(t, "content", origin, path);
            if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
                bad_field(origin, path + ".id", "is not a valid id");
            if (!content.is_string()) bad_field(origin, path + ".content", "is not a string");
            const bool special = flag(t, "special", false, origin, path);
            const std::string c = content.get<std::string>();
            impl->set_token(id.get<int32_t>(),
                            {c, c, special ? TokenKind::Special : TokenKind::Added});
        }
    }
    impl->rebuild_added();

    if (auto it = j.find("normalizer"); it != j.end()) parse_normalizer(*it, *impl, "normalizer");
    const json pre = j.contains("pre_tokenizer") ? j["pre_tokenizer"] : json();
    if (!parse_pre_tokenizer(pre, *impl, "pre_tokenizer"))
        unsupported(origin, "pre_tokenizer", "a BPE tokenizer without a ByteLevel pre-tokenizer");
    return Tokenizer(std::move(impl));
}

}  // namespace parlance
