// Anthropic's Messages API (see anthropic_messages.h).
#include "server/anthropic_messages.h"

#include "server/json_fields.h"

namespace parlance::server {

using nlohmann::ordered_json;
using namespace fields;

namespace {

// Text of a string or of an array of {"type": "text"} blocks.
std::string block_text(const ordered_json& c, const std::string& param) {
    if (c.is_string()) return c.get<std::string>();
    if (!c.is_array()) refuse(param, param + " must be a string or an array of content blocks", "invalid_type");
    std::string out;
    for (size_t i = 0; i < c.size(); ++i) {
        const std::string p = param + "." + std::to_string(i);
        if (!c[i].is_object()) refuse(p, p + " must be a content block", "invalid_type");
        const std::string type = string(c[i].value("type", ordered_json()), p + ".type");
        if (type != "text")
            refuse(p + ".type", "content blocks of type " + ApiError::quote(type) + " are not supported here");
        out += string(c[i].value("text", ordered_json()), p + ".text");
    }
    return out;
}

// One Anthropic message -> the chat template's messages (a user turn with tool results becomes
// one "tool" message per result, then the text).
void convert_message(const ordered_json& m, size_t i, ordered_json& out) {
    const std::string p = "messages." + std::to_string(i);
    if (!m.is_object()) refuse(p, p + " must be an object", "invalid_type");
    only_known(m, {"role", "content"}, p);
    const std::string role = string(m.value("role", ordered_json()), p + ".role");
    if (role != "user" && role != "assistant") refuse(p + ".role", "role must be \"user\" or \"assistant\"");
    const ordered_json& c = m.value("content", ordered_json());
    if (c.is_string()) {
        out.push_back({{"role", role}, {"content", c.get<std::string>()}});
        return;
    }
    if (!c.is_array()) refuse(p + ".content", p + ".content must be a string or an array of blocks", "invalid_type");
    std::string text, thinking;
    ordered_json calls = ordered_json::array();
    for (size_t k = 0; k < c.size(); ++k) {
        const std::string b = p + ".content." + std::to_string(k);
        const ordered_json& blk = c[k];
        if (!blk.is_object()) refuse(b, b + " must be a content block", "invalid_type");
        const std::string type = string(blk.value("type", ordered_json()), b + ".type");
        if (type == "text") {
            text += string(blk.value("text", ordered_json()), b + ".text");
        } else if (type == "tool_use" && role == "assistant") {
            const ordered_json& input = blk.value("input", ordered_json::object());
            if (!input.is_object()) refuse(b + ".input", b + ".input must be an object", "invalid_type");
            calls.push_back(
                {{"id", string(blk.value("id", ordered_json()), b + ".id")},
                 {"type", "function"},
                 {"function",
                  {{"name", string(blk.value("name", ordered_json()), b + ".name")}, {"arguments", input}}}});
        } else if (type == "tool_result" && role == "user") {
            const ordered_json& rc = blk.value("content", ordered_json(""));
            out.push_back({{"role", "tool"},
                           {"tool_call_id", string(blk.value("tool_use_id", ordered_json()), b + ".tool_use_id")},
                           {"content", block_text(rc, b + ".content")}});
        } else if (type == "thinking" && role == "assistant") {
            thinking += string(blk.value("thinking", ordered_json()), b + ".thinking");
        } else if (type == "redacted_thinking" && role == "assistant") {
            // opaque to us: nothing to render
        } else {
            refuse(b + ".type", "content blocks of type " + ApiError::quote(type) + " are not supported in " + role +
                                    " messages by this model");
        }
    }
    if (role == "user" && text.empty() && !out.empty() && out.back()["role"] == "tool") return;  // results only
    ordered_json msg{{"role", role}, {"content", text}};
    if (!thinking.empty()) msg["reasoning_content"] = thinking;
    if (!calls.empty()) msg["tool_calls"] = std::move(calls);
    out.push_back(std::move(msg));
}

std::string anthropic_error_type(int status) {
    switch (status) {
        case 400:
            return "invalid_request_error";
        case 401:
            return "authentication_error";
        case 403:
            return "permission_error";
        case 404:
            return "not_found_error";
        case 413:
            return "request_too_large";
        case 429:
            return "rate_limit_error";
        case 503:
            return "overloaded_error";
        default:
            return "api_error";
    }
}

// Content blocks as Anthropic streams them: at most one open at a time (thinking, then text,
// then tool_use blocks, in the order the model wrote them).
class MessagesWriter final : public RunSink {
public:
    MessagesWriter(const ChatModel& m, const MessagesRequest& r, std::string id, int prompt_tokens,
                   ResponseCallbacks cb)
        : m_(m), stream_(r.chat.stream), id_(std::move(id)), cb_(std::move(cb)), prompt_(prompt_tokens) {}

    void delta(const ChoiceDelta& d) override {
        start();
        if (!d.reasoning.empty()) append("thinking", d.reasoning);
        if (!d.content.empty()) append("text", d.content);
        for (const ParsedToolCall& call : d.tool_calls) {
            close();
            const std::string tid =
                "toolu_" + id_.substr(std::min<size_t>(id_.size(), 4)) + "_" + std::to_string(++calls_);
            ordered_json input = ordered_json::parse(call.arguments, nullptr, false);
            blocks_.push_back({{"type", "tool_use"}, {"id", tid}, {"name", call.name}, {"input", input}});
            if (stream_) {
                event("content_block_start",
                      {{"type", "content_block_start"},
                       {"index", blocks_.size() - 1},
                       {"content_block",
                        {{"type", "tool_use"}, {"id", tid}, {"name", call.name}, {"input", ordered_json::object()}}}});
                event("content_block_delta",
                      {{"type", "content_block_delta"},
                       {"index", blocks_.size() - 1},
                       {"delta", {{"type", "input_json_delta"}, {"partial_json", call.arguments}}}});
                event("content_block_stop", {{"type", "content_block_stop"}, {"index", blocks_.size() - 1}});
            }
        }
    }

    void choice_end(const ChoiceEnd& e) override {
        start();
        close();
        if (e.reason == "length")
            stop_reason_ = "max_tokens";
        else if (!e.stop_sequence.empty())
            stop_reason_ = "stop_sequence", stop_sequence_ = e.stop_sequence;
        else if (e.reason == "tool_calls")
            stop_reason_ = "tool_use";
        else
            stop_reason_ = "end_turn";
    }

    void end(int prompt, int completion, int cached) override {
        ordered_json seq = stop_sequence_.empty() ? ordered_json(nullptr) : ordered_json(stop_sequence_);
        if (stream_) {
            event("message_delta", {{"type", "message_delta"},
                                    {"delta", {{"stop_reason", stop_reason_}, {"stop_sequence", seq}}},
                                    {"usage", {{"output_tokens", completion}}}});
            cb_.on_event(dump({{"type", "message_stop"}}), true, "message_stop");
            return cb_.on_done(200, "");
        }
        ordered_json body = message_head(prompt, cached);
        body["content"] = blocks_;
        body["stop_reason"] = stop_reason_;
        body["stop_sequence"] = seq;
        body["usage"]["output_tokens"] = completion;
        cb_.on_done(200, dump(body) + "\n");
    }

    void error(int status, const std::string& message, const std::string& param, const std::string& code) override {
        cb_.on_done(status, anthropic_error_body(ApiError(status, message, param, code)));
    }

private:
    ordered_json message_head(int prompt, int cached) const {
        return {{"id", id_},
                {"type", "message"},
                {"role", "assistant"},
                {"model", m_.id},
                {"content", ordered_json::array()},
                {"stop_reason", nullptr},
                {"stop_sequence", nullptr},
                {"usage",
                 {{"input_tokens", prompt - cached},
                  {"cache_creation_input_tokens", 0},
                  {"cache_read_input_tokens", cached},
                  {"output_tokens", 0}}}};
    }
    void event(const char* name, const ordered_json& j) { cb_.on_event(dump(j), false, name); }
    void start() {
        if (!stream_ || started_) return;
        started_ = true;
        event("message_start", {{"type", "message_start"}, {"message", message_head(prompt_, 0)}});
    }
    // Appends text to the open block of `type`, opening it (and closing another) first.
    void append(const std::string& type, const std::string& text) {
        const char* field = type == "thinking" ? "thinking" : "text";
        if (open_ != type) {
            close();
            open_ = type;
            ordered_json blk{{"type", type}, {field, ""}};
            if (type == "thinking") blk["signature"] = "";
            blocks_.push_back(blk);
            if (stream_)
                event("content_block_start",
                      {{"type", "content_block_start"}, {"index", blocks_.size() - 1}, {"content_block", blk}});
        }
        blocks_.back()[field] = blocks_.back()[field].get<std::string>() + text;
        if (stream_)
            event("content_block_delta",
                  {{"type", "content_block_delta"},
                   {"index", blocks_.size() - 1},
                   {"delta", {{"type", type == "thinking" ? "thinking_delta" : "text_delta"}, {field, text}}}});
    }
    void close() {
        if (open_.empty()) return;
        if (stream_) event("content_block_stop", {{"type", "content_block_stop"}, {"index", blocks_.size() - 1}});
        open_.clear();
    }

    const ChatModel& m_;
    bool stream_;
    std::string id_;
    ResponseCallbacks cb_;
    ordered_json blocks_ = ordered_json::array();
    std::string open_;  // the open block's type ("" none)
    bool started_ = false;
    int calls_ = 0;
    int prompt_ = 0;
    std::string stop_reason_ = "end_turn", stop_sequence_;
};

}  // namespace

std::string anthropic_error_body(const ApiError& e) {
    std::string message = e.what();
    if (!e.param.empty()) message += " (" + e.param + ")";
    ordered_json j{{"type", "error"}, {"error", {{"type", anthropic_error_type(e.status)}, {"message", message}}}};
    return dump(j);
}

MessagesRequest parse_messages_request(const std::string& body, bool count_tokens) {
    ordered_json j = parse_object(body);
    if (count_tokens)
        only_known(j, {"model", "messages", "system", "tools", "tool_choice", "thinking"});
    else
        only_known(j, {"model", "messages", "system", "max_tokens", "stop_sequences", "stream", "temperature", "top_p",
                       "top_k", "tools", "tool_choice", "thinking", "metadata"});
    MessagesRequest r;
    ChatRequest& c = r.chat;
    c.sampling.temperature = 1.0f;
    if (!has(j, "model")) refuse("model", "model: field required", "missing_required_parameter");
    c.model = string(j["model"], "model");
    if (!count_tokens) {
        if (!has(j, "max_tokens")) refuse("max_tokens", "max_tokens: field required", "missing_required_parameter");
        c.max_tokens = integer(j["max_tokens"], "max_tokens", 1, 1 << 20);
    }
    c.messages = ordered_json::array();
    if (has(j, "system")) c.messages.push_back({{"role", "system"}, {"content", block_text(j["system"], "system")}});
    if (!has(j, "messages") || !j["messages"].is_array() || j["messages"].empty())
        refuse("messages", "messages: a non-empty array is required", "invalid_type");
    for (size_t i = 0; i < j["messages"].size(); ++i) convert_message(j["messages"][i], i, c.messages);
    if (has(j, "stop_sequences"))
        c.sampling.stop = stop_strings(j["stop_sequences"], "stop_sequences", kMaxStopStrings);
    if (has(j, "stream")) c.stream = boolean(j["stream"], "stream");
    if (has(j, "temperature"))
        c.sampling.temperature = static_cast<float>(number(j["temperature"], "temperature", 0, 1));
    if (has(j, "top_p")) {
        c.sampling.top_p = static_cast<float>(number(j["top_p"], "top_p", 0, 1));
        if (c.sampling.top_p <= 0) refuse("top_p", "top_p must be greater than 0");
    }
    if (has(j, "top_k")) c.sampling.top_k = integer(j["top_k"], "top_k", 0, 1 << 20);
    if (has(j, "tools")) {
        if (!j["tools"].is_array()) refuse("tools", "tools must be an array", "invalid_type");
        c.tools = ordered_json::array();
        for (size_t i = 0; i < j["tools"].size(); ++i) {
            const std::string p = "tools." + std::to_string(i);
            const ordered_json& t = j["tools"][i];
            if (!t.is_object()) refuse(p, p + " must be an object", "invalid_type");
            only_known(t, {"name", "description", "input_schema", "type", "cache_control"}, p);
            if (has(t, "type") && string(t["type"], p + ".type") != "custom")
                refuse(p + ".type", "server tools are not supported; give custom tools with an input_schema");
            ordered_json fn{{"name", string(t.value("name", ordered_json()), p + ".name")}};
            if (has(t, "description")) fn["description"] = string(t["description"], p + ".description");
            if (!has(t, "input_schema") || !t["input_schema"].is_object())
                refuse(p + ".input_schema", p + ".input_schema: a JSON schema object is required", "invalid_type");
            fn["parameters"] = t["input_schema"];
            c.tools.push_back({{"type", "function"}, {"function", fn}});
        }
    }
    if (has(j, "tool_choice")) {
        const ordered_json& tc = j["tool_choice"];
        if (!tc.is_object()) refuse("tool_choice", "tool_choice must be an object", "invalid_type");
        const std::string type = string(tc.value("type", ordered_json()), "tool_choice.type");
        if (type == "auto")
            c.tool_choice = "auto";
        else if (type == "any")
            c.tool_choice = "required";
        else if (type == "none")
            c.tool_choice = "none";
        else if (type == "tool")
            c.tool_choice = "function",
            c.forced_function = string(tc.value("name", ordered_json()), "tool_choice.name");
        else
            refuse("tool_choice.type", "tool_choice.type must be auto, any, tool or none");
        if (c.tool_choice != "auto" && c.tool_choice != "none" && (!c.tools.is_array() || c.tools.empty()))
            refuse("tool_choice", "tool_choice " + ApiError::quote(type) + " needs tools");
        if (c.tool_choice == "function") {
            bool found = false;
            for (const auto& t : c.tools) found = found || t["function"]["name"] == c.forced_function;
            if (!found)
                refuse("tool_choice.name",
                       "tool_choice names " + ApiError::quote(c.forced_function) + ", which is not among tools");
        }
    }
    // Anthropic's default is no extended thinking; Qwen3's template thinks unless told not to.
    if (has(j, "thinking")) {
        const ordered_json& t = j["thinking"];
        if (!t.is_object()) refuse("thinking", "thinking must be an object", "invalid_type");
        const std::string type = string(t.value("type", ordered_json()), "thinking.type");
        if (type == "enabled") {
            r.thinking = true;
            if (has(t, "budget_tokens")) integer(t["budget_tokens"], "thinking.budget_tokens", 1, 1 << 20);
        } else if (type != "disabled") {
            refuse("thinking.type", "thinking.type must be enabled or disabled");
        }
    }
    c.template_kwargs["enable_thinking"] = r.thinking;
    if (has(j, "metadata") && !j["metadata"].is_object())
        refuse("metadata", "metadata must be an object", "invalid_type");
    return r;
}

std::shared_ptr<RunSink> make_messages_writer(const ChatModel& model, const MessagesRequest& request, std::string id,
                                              int prompt_tokens, ResponseCallbacks callbacks) {
    return std::make_shared<MessagesWriter>(model, request, std::move(id), prompt_tokens, std::move(callbacks));
}

}  // namespace parlance::server
