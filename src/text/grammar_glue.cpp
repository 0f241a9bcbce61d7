// The symbols llama-grammar.cpp and json-schema-to-grammar.cpp take from the rest of libllama
// and common: cmake/llama_common builds the two alone as llama::llama_grammar, and this file,
// compiled into parlance's text layer, links beside it:
//  - llama_log_internal: collected per thread for llama_grammar_take_log() (a bad grammar's
//    reason reaches the API error, not the server's stderr);
//  - llama_vocab's token_to_piece / is_eog / tokenize: only called by the vocabulary-level entry
//    points (llama_grammar_apply_impl, llama_grammar_accept_impl, <[token]> literals), which
//    parlance does not use: it matches each token's code points itself over its own tokenizer.
//    They throw, so a use that slips in fails loudly instead of reading a vocabulary;
//  - string_join / string_split / string_repeat from common.cpp.
#include <cstdarg>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "text/grammar_glue.h"

#include "llama-impl.h"
#include "llama-vocab.h"

namespace parlance_grammar_glue {
thread_local std::string g_log;
[[noreturn]] void no_vocab() {
    throw std::logic_error("llama-grammar was asked for a llama_vocab; parlance matches tokens itself");
}
}  // namespace parlance_grammar_glue

using parlance_grammar_glue::g_log;
using parlance_grammar_glue::no_vocab;

std::string llama_grammar_take_log() {
    std::string s;
    s.swap(g_log);
    return s;
}

void llama_log_internal(ggml_log_level level, const char* format, ...) {
    if (level == GGML_LOG_LEVEL_DEBUG) return;
    char buf[1024];
    va_list args;
    va_start(args, format);
    std::vsnprintf(buf, sizeof buf, format, args);
    va_end(args);
    g_log += buf;
}

const std::string& llama_vocab::token_to_piece(llama_token) const {
    no_vocab();
}
bool llama_vocab::is_eog(llama_token) const {
    no_vocab();
}
int32_t llama_vocab::tokenize(const char*, int32_t, llama_token*, int32_t, bool, bool) const {
    no_vocab();
}

std::string string_join(const std::vector<std::string>& values, const std::string& separator) {
    std::string out;
    for (size_t i = 0; i < values.size(); ++i) {
        if (i) out += separator;
        out += values[i];
    }
    return out;
}

std::vector<std::string> string_split(const std::string& str, const std::string& delimiter) {
    std::vector<std::string> parts;
    size_t from = 0;
    for (size_t at; (at = str.find(delimiter, from)) != std::string::npos; from = at + delimiter.size())
        parts.push_back(str.substr(from, at - from));
    parts.push_back(str.substr(from));
    return parts;
}

std::string string_repeat(const std::string& str, size_t n) {
    std::string out;
    out.reserve(str.size() * n);
    for (size_t i = 0; i < n; ++i) out += str;
    return out;
}
