// Tokenizer::from_gguf: the tokenizer.ggml.* keys of a GGUF file (gpt2 model; gpt-2 or qwen2
// pre-tokenizer), each missing or mistyped key refused by name.
#include <gguf.h>

#include <memory>

#include "core/error.h"
#include "text/tokenizer_impl.h"

namespace parlance {

using namespace tokenizer_detail;

Tokenizer Tokenizer::from_gguf(const std::filesystem::path& path) {
    const std::string origin = path.string();
    {
        std::error_code ec;
        if (!std::filesystem::exists(path, ec))
            throw Error(ErrorKind::NotFound, origin + ": no such GGUF file");
    }
    gguf_init_params params{};
    params.no_alloc = true;
    params.ctx = nullptr;
    std::unique_ptr<gguf_context, decltype(&gguf_free)> ctx(
        gguf_init_from_file(origin.c_str(), params), &gguf_free);
    if (!ctx) throw Error(ErrorKind::InvalidModel, origin + ": not a readable GGUF file");
    const gguf_context* g = ctx.get();

    auto key = [&](const char* name, bool required) -> int64_t {
        const int64_t k = gguf_find_key(g, name);
        if (k < 0 && required) bad_field(origin, name, "is missing");
        return k;
    };
    auto str_key = [&](const char* name) -> std::string {
        const int64_t k = key(name, true);
        if (gguf_get_kv_type(g, k) != GGUF_TYPE_STRING) bad_field(origin, name, "is not a string");
        return gguf_get_val_str(g, k);
    };
    auto str_array = [&](const char* name, bool required) -> int64_t {
        const int64_t k = key(name, required);
        if (k >= 0 && (gguf_get_kv_type(g, k) != GGUF_TYPE_ARRAY ||
                       gguf_get_arr_type(g, k) != GGUF_TYPE_STRING))
            bad_field(origin, name, "is not an array of strings");
        return k;
    };

    const std::string model = str_key("tokenizer.ggml.model");
    if (model != "gpt2")
        throw Error(ErrorKind::Unsupported, origin + ": tokenizer.ggml.model '" + model +
                                                "' is not supported (only 'gpt2')");
    const std::string pre =
        gguf_find_key(g, "tokenizer.ggml.pre") >= 0 ? str_key("tokenizer.ggml.pre") : "default";

    auto impl = std::make_unique<Impl>();
    impl->origin = origin;
    Stage split;
    if (pre == "gpt-2") {
        split.regex = compile_regex(kGpt2Pattern, false, origin);
    } else if (pre == "qwen2") {
        split.regex = compile_regex(kQwen2Pattern, false, origin);
        impl->nfc = true;  // Qwen2's tokenizer.json normalizes to NFC; llama.cpp skips it
    } else {
        throw Error(ErrorKind::Unsupported, origin + ": tokenizer.ggml.pre '" + pre +
                                                "' is not supported (known: gpt-2, qwen2)");
    }
    impl->stages.push_back(std::move(split));

    const int64_t tk = str_array("tokenizer.ggml.tokens", true);
    const size_t n = gguf_get_arr_n(g, tk);
    const int64_t tt = key("tokenizer.ggml.token_type", false);
    const int32_t* types = nullptr;
    if (tt >= 0) {
        if (gguf_get_kv_type(g, tt) != GGUF_TYPE_ARRAY ||
            gguf_get_arr_type(g, tt) != GGUF_TYPE_INT32 || gguf_get_arr_n(g, tt) != n)
            bad_field(origin, "tokenizer.ggml.token_type",
                      "is not an int32 array as long as the tokens");
        types = static_cast<const int32_t*>(gguf_get_arr_data(g, tt));
    }
    impl->tokens.resize(n);
    for (size_t i = 0; i < n; ++i) {
        std::string text = gguf_get_arr_str(g, tk, i);
        const int32_t type = types ? types[i] : 1;
        TokenInfo& t = impl->tokens[i];
        if (type == 3 || type == 4) {  // control / user-defined: literal text, matched as a whole
            t = {text, text, type == 3 ? TokenKind::Special : TokenKind::Added};
        } else {
            t = {byte_level_decode(text), text, TokenKind::Normal};
        }
    }
    impl->index("tokenizer.ggml.tokens");
    impl->rebuild_added();

    const int64_t mk = str_array("tokenizer.ggml.merges", true);
    const size_t nm = gguf_get_arr_n(g, mk);
    impl->merges.reserve(nm);
    for (size_t i = 0; i < nm; ++i) {
        const std::string_view s = gguf_get_arr_str(g, mk, i);
        const std::string field = "tokenizer.ggml.merges[" + std::to_string(i) + "]";
        const size_t sp = s.find(' ');
        if (sp == std::string::npos || sp == 0 || sp + 1 >= s.size())
            bad_field(origin, field, "is not of the form 'a b'");
        auto id_of = [&](std::string_view tok) {
            auto it = impl->text_to_id.find(tok);
            if (it == impl->text_to_id.end())
                bad_field(origin, field,
                          "names token '" + std::string(tok) + "' that is not in the vocabulary");
            return it->second;
        };
        const std::string joined = std::string(s.substr(0, sp)) + std::string(s.substr(sp + 1));
        const int32_t a = id_of(s.substr(0, sp));
        const int32_t b = id_of(s.substr(sp + 1));
        impl->add_merge(a, b, static_cast<int32_t>(i), id_of(joined));
    }
    return Tokenizer(std::move(impl));
}

}  // namespace parlance
