// A model's own chat template (Hugging Face's `chat_template`: tokenizer_config.json, a
// chat_template.jinja beside it, or a GGUF's tokenizer.chat_template), rendered by a real Jinja
// engine (the pinned llama.cpp bundle's common/jinja, built as a library by setup.sh) the way
// transformers' apply_chat_template renders it: trim_blocks and lstrip_blocks on, the special
// tokens (bos_token, eos_token, ...) and the caller's keyword arguments as globals.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "core/model_files.h"

namespace parlance {

struct ChatTemplateInputs {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // OpenAI-shaped messages
    nlohmann::ordered_json tools;                                       // null, or the request's tools (an array)
    bool add_generation_prompt = true;                                  // end with the assistant's turn header
    nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();   // e.g. {"enable_thinking": false}
};

class ChatTemplate {
public:
    // Parses `source`; Error(InvalidModel) with the engine's message (and position) when it does
    // not parse. `special_tokens` are globals every render sees ({"bos_token": "...", ...}).
    ChatTemplate(std::string source, nlohmann::ordered_json special_tokens);
    ~ChatTemplate();
    ChatTemplate(ChatTemplate&&) noexcept;

    // Error(InvalidArgument) when the template refuses the conversation (its raise_exception, a
    // type error on the caller's data): the message says so, for a 400. Thread-safe (renders are
    // serialised: the engine's program is not documented as safe to run concurrently).
    std::string render(const ChatTemplateInputs& in) const;

    const std::string& source() const { return source_; }

private:
    struct Program;
    std::string source_;
    nlohmann::ordered_json special_tokens_;
    std::unique_ptr<Program> program_;
    std::unique_ptr<std::mutex> mutex_ = std::make_unique<std::mutex>();
};

// The template a model ships, or nullptr when it has none: chat_template.jinja, else
// tokenizer_config.json's chat_template (a string, or a list of {name, template} whose "default"
// is taken), else a GGUF's tokenizer.chat_template. Special tokens from tokenizer_config.json
// (strings or {"content": ...}) or the GGUF's token ids.
std::unique_ptr<ChatTemplate> load_chat_template(const ModelFiles& files);

}  // namespace parlance
