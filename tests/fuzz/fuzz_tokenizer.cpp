// libFuzzer target: encodes and decodes arbitrary bytes with the real Qwen3 tokenizer.
//
// The tokenizer is loaded once from $PARLANCE_ASSETS/qwen3/tokenizer.json; without it every
// input is skipped. Arbitrary bytes, including invalid UTF-8, are valid input to encode (ill-formed
// subparts become byte tokens, see tokenizer.h), so any exception here is a bug and crashes.
// Invariants checked (abort on violation):
//  - every id is inside the vocabulary, and decode accepts them;
//  - ASCII-only input (which NFC cannot change) round-trips exactly, with and without parse_special;
//  - the incremental detokenizer's pieces are well-formed UTF-8 and add up to the sanitized decode.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "text/incremental_detokenizer.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace {

std::unique_ptr<parlance::Tokenizer> load_tokenizer() {
    const char* assets = std::getenv("PARLANCE_ASSETS");
    if (!assets) {
        std::fprintf(stderr, "fuzz_tokenizer: PARLANCE_ASSETS is not set; skipping every input\n");
        return nullptr;
    }
    const std::filesystem::path path = std::filesystem::path(assets) / "qwen3" / "tokenizer.json";
    if (!std::filesystem::exists(path)) {
        std::fprintf(stderr, "fuzz_tokenizer: %s not found; skipping every input\n", path.c_str());
        return nullptr;
    }
    return std::make_unique<parlance::Tokenizer>(parlance::Tokenizer::from_json_file(path));
}

void check(bool ok, const char* what) {
    if (!ok) {
        std::fprintf(stderr, "fuzz_tokenizer: invariant violated: %s\n", what);
        std::abort();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    // Loaded on first use and kept for the process (the fuzzer's lifetime), not a library global.
    static const std::unique_ptr<parlance::Tokenizer> tok = load_tokenizer();
    if (!tok || size > (1u << 16)) return 0;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    bool ascii = true;
    for (char c : text) ascii &= static_cast<unsigned char>(c) < 0x80;

    for (bool parse_special : {false, true}) {
        const std::vector<int32_t> ids = tok->encode(text, parse_special);
        for (int32_t id : ids) check(id >= 0 && static_cast<size_t>(id) < tok->vocab_size(), "id in range");
        const std::string decoded = tok->decode(ids);
        if (ascii) check(decoded == text, "ASCII round trip");

        parlance::IncrementalDetokenizer detok(*tok);
        std::string streamed;
        for (int32_t id : ids) {
            const std::string piece = detok.push(id);
            check(parlance::utf8::valid_prefix(piece) == piece.size(), "piece is well-formed UTF-8");
            streamed += piece;
        }
        streamed += detok.flush();
        check(streamed == parlance::utf8::sanitize(decoded), "streamed == sanitize(decode)");
    }
    return 0;
}
