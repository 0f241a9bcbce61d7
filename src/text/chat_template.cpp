// ChatTemplate (see chat_template.h) over the bundle's Jinja engine.
#include "text/chat_template.h"

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "jinja/lexer.h"
#include "jinja/parser.h"
#include "jinja/runtime.h"
#include "json.h"

namespace parlance {

using nlohmann::ordered_json;
namespace fs = std::filesystem;

struct ChatTemplate::Program {
    jinja::program program;
    std::string lexed_source;
};

ChatTemplate::ChatTemplate(std::string source, ordered_json special_tokens)
    : source_(std::move(source)), special_tokens_(std::move(special_tokens)), program_(std::make_unique<Program>()) {
    try {
        jinja::lexer lexer;
        jinja::lexer_result lexed = lexer.tokenize(source_);
        program_->program = jinja::parse_from_tokens(lexed);
        program_->lexed_source = lexed.source;
    } catch (const std::exception& e) {
        throw Error(ErrorKind::InvalidModel, std::string("the chat template does not parse: ") + e.what());
    }
}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::render(const ChatTemplateInputs& in) const {
    ordered_json globals = special_tokens_;
    if (!globals.is_object()) globals = ordered_json::object();
    globals["messages"] = in.messages;
    // transformers passes tools=None when there are none: the template's `if tools` is false.
    if (in.tools.is_array() && !in.tools.empty()) globals["tools"] = in.tools;
    globals["add_generation_prompt"] = in.add_generation_prompt;
    for (const auto& [k, v] : in.kwargs.items()) globals[k] = v;
    std::lock_guard<std::mutex> lock(*mutex_);
    try {
        jinja::context ctx(program_->lexed_source);
        jinja::global_from_json(ctx, common_json::parse(globals.dump()), /*mark_input=*/false);
        jinja::runtime runtime(ctx);
        const jinja::value result = runtime.execute(program_->program);
        return jinja::runtime::gather_string_parts(result)->as_string().str();
    } catch (const std::exception& e) {
        throw Error(ErrorKind::InvalidArgument,
                    std::string("the model's chat template refused the conversation: ") + e.what());
    }
}

namespace {

std::string read_text(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    if (!in) throw Error(ErrorKind::Io, p.string() + ": cannot read");
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// tokenizer_config.json writes a special token as a string or as an AddedToken object.
std::string token_text(const nlohmann::json& v) {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
    return {};
}

}  // namespace

std::unique_ptr<ChatTemplate> load_chat_template(const ModelFiles& files) {
    std::string source;
    ordered_json special = ordered_json::object();
    const nlohmann::json& tc = files.tokenizer_config;
    if (tc.is_object()) {
        for (const char* name : {"bos_token", "eos_token", "pad_token", "unk_token"}) {
            if (tc.contains(name)) {
                const std::string t = token_text(tc[name]);
                if (!t.empty()) special[name] = t;
            }
        }
    }
    if (files.is_directory && fs::exists(files.root / "chat_template.jinja")) {
        source = read_text(files.root / "chat_template.jinja");
    } else if (tc.is_object() && tc.contains("chat_template")) {
        const nlohmann::json& ct = tc["chat_template"];
        if (ct.is_string()) {
            source = ct.get<std::string>();
        } else if (ct.is_array()) {
            for (const auto& t : ct)
                if (t.is_object() && t.value("name", "") == "default" && t.contains("template") &&
                    t["template"].is_string())
                    source = t["template"].get<std::string>();
            if (source.empty())
                throw Error(ErrorKind::InvalidModel,
                            "tokenizer_config.json: chat_template is a list without a \"default\" template");
        } else {
            throw Error(ErrorKind::InvalidModel, "tokenizer_config.json: chat_template is neither a string nor a list");
        }
    } else if (files.tensors) {
        const nlohmann::json& md = files.tensors->metadata();
        if (md.is_object() && md.contains("tokenizer.chat_template") && md["tokenizer.chat_template"].is_string())
            source = md["tokenizer.chat_template"].get<std::string>();
        if (md.is_object() && md.contains("tokenizer.ggml.tokens") && md["tokenizer.ggml.tokens"].is_array()) {
            const auto& tokens = md["tokenizer.ggml.tokens"];
            auto id_token = [&](const char* key, const char* name) {
                if (!md.contains(key) || !md[key].is_number_integer()) return;
                const int64_t id = md[key].get<int64_t>();
                if (id >= 0 && id < static_cast<int64_t>(tokens.size()) && tokens[id].is_string())
                    special[name] = tokens[id];
            };
            id_token("tokenizer.ggml.bos_token_id", "bos_token");
            id_token("tokenizer.ggml.eos_token_id", "eos_token");
            id_token("tokenizer.ggml.padding_token_id", "pad_token");
            id_token("tokenizer.ggml.unknown_token_id", "unk_token");
        }
    }
    if (source.empty()) return nullptr;
    return std::make_unique<ChatTemplate>(std::move(source), std::move(special));
}

}  // namespace parlance
