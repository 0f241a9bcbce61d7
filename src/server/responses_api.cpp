// The Responses API (see responses_api.h).
#include "server/responses_api.h"

#include "server/api_error.h"
#include "server/json_fields.h"

namespace parlance::server {

using nlohmann::ordered_json;
using namespace fields;

void ResponseStore::put(const std::string& id, ordered_json response, ordered_json conversation) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = entries_.find(id); it != entries_.end()) {
        order_.erase(it->second.age);
        entries_.erase(it);
    }
    order_.push_back(id);
    entries_[id] = Entry{std::move(response), std::move(conversation), std::prev(order_.end())};
    while (entries_.size() > capacity_) {
        entries_.erase(order_.front());
        order_.pop_front();
    }
}

std::optional<ordered_json> ResponseStore::response(const std::string& id) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return std::nullopt;
    return it->second.response;
}

std::optional<ordered_json> ResponseStore::conversation(const std::string& id) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return std::nullopt;
    return it->second.conversation;
}

bool ResponseStore::erase(const std::string& id) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return false;
    order_.erase(it->second.age);
    entries_.erase(it);
    return true;
}

size_t ResponseStore::size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return entries_.size();
}

namespace {

// A message item's content: a string or input_text / output_text parts.
std::string item_text(const ordered_json& c, const std::string& param) {
    if (c.is_string()) return c.get<std::string>();
    if (!c.is_array()) refuse(param, param + " must be a string or an array of content parts", "invalid_type");
    std::string out;
    for (size_t i = 0; i < c.size(); ++i) {
        const std::string p = param + "[" + std::to_string(i) + "]";
        if (!c[i].is_object()) refuse(p, p + " must be an object", "invalid_type");
        const std::string type = string(c[i].value("type", ordered_json()), p + ".type");
        if (type != "input_text" && type != "output_text" && type != "text")
            refuse(p + ".type", "content parts of type " + ApiError::quote(type) + " are not supported by this model");
        out += string(c[i].value("text", ordered_json()), p + ".text");
    }
    return out;
}

// Input items -> chat-template messages, appended to `conv`.
void convert_input(const ordered_json& input, ordered_json& conv) {
    if (input.is_string()) {
        conv.push_back({{"role", "user"}, {"content", input.get<std::string>()}});
        return;
    }
    if (!input.is_array() || input.empty())
        refuse("input", "input must be a string or a non-empty array of items", "invalid_type");
    for (size_t i = 0; i < input.size(); ++i) {
        const std::string p = "input[" + std::to_string(i) + "]";
        const ordered_json& it = input[i];
        if (!it.is_object()) refuse(p, p + " must be an object", "invalid_type");
        const std::string type = it.contains("type") ? string(it["type"], p + ".type") : "message";
        if (type == "message") {
            const std::string role = string(it.value("role", ordered_json()), p + ".role");
            if (role != "user" && role != "system" && role != "developer" && role != "assistant")
                refuse(p + ".role", "role must be user, system, developer or assistant");
            conv.push_back({{"role", role == "developer" ? "system" : role},
                            {"content", item_text(it.value("content", ordered_json()), p + ".content")}});
        } else if (type == "function_call") {
            const std::string args = string(it.value("arguments", ordered_json()), p + ".arguments");
            ordered_json parsed = parse_json(args, p + ".arguments", p + ".arguments");
            if (!parsed.is_object())
                refuse(p + ".arguments", p + ".arguments must be a JSON object serialised as a string");
            ordered_json call{
                {"id", string(it.value("call_id", ordered_json()), p + ".call_id")},
                {"type", "function"},
                {"function", {{"name", string(it.value("name", ordered_json()), p + ".name")}, {"arguments", parsed}}}};
            // Calls follow their assistant message (or start one).
            if (conv.empty() || conv.back()["role"] != "assistant")
                conv.push_back({{"role", "assistant"}, {"content", ""}});
            conv.back()["tool_calls"].push_back(std::move(call));
        } else if (type == "function_call_output") {
            conv.push_back({{"role", "tool"},
                            {"tool_call_id", string(it.value("call_id", ordered_json()), p + ".call_id")},
                            {"content", string(it.value("output", ordered_json()), p + ".output")}});
        } else if (type == "reasoning") {
            // A previous turn's reasoning: Qwen3's template drops it from the history anyway.
        } else {
            refuse(p + ".type", "input items of type " + ApiError::quote(type) + " are not supported");
        }
    }
}

class ResponsesWriter final : public RunSink {
public:
    ResponsesWriter(const ChatModel& m, const ResponsesRequest& r, std::string id, int64_t created,
                    ResponseStore& store, ResponseCallbacks cb)
        : m_(m), r_(r), id_(std::move(id)), created_(created), store_(store), cb_(std::move(cb)) {}

    void delta(const ChoiceDelta& d) override {
        start();
        if (!d.reasoning.empty()) append("reasoning", d.reasoning);
        if (!d.content.empty()) append("message", d.content);
        for (const ParsedToolCall& call : d.tool_calls) {
            close();
            const std::string n = std::to_string(output_.size());
            ordered_json item{{"id", "fc_" + id_.substr(5) + "_" + n},
                              {"type", "function_call"},
                              {"status", "completed"},
                              {"arguments", call.arguments},
                              {"call_id", "call_" + id_.substr(5) + "_" + n},
                              {"name", call.name}};
            output_.push_back(item);
            calls_.push_back(
                {{"id", item["call_id"]},
                 {"type", "function"},
                 {"function",
                  {{"name", call.name}, {"arguments", ordered_json::parse(call.arguments, nullptr, false)}}}});
            if (!r_.chat.stream) continue;
            ordered_json added = item;
            added["status"] = "in_progress";
            added["arguments"] = "";
            event("response.output_item.added", {{"output_index", output_.size() - 1}, {"item", added}});
            event("response.function_call_arguments.delta",
                  {{"item_id", item["id"]}, {"output_index", output_.size() - 1}, {"delta", call.arguments}});
            event("response.function_call_arguments.done",
                  {{"item_id", item["id"]}, {"output_index", output_.size() - 1}, {"arguments", call.arguments}});
            event("response.output_item.done", {{"output_index", output_.size() - 1}, {"item", item}});
        }
    }

    void choice_end(const ChoiceEnd& e) override {
        start();
        close();
        incomplete_ = e.reason == "length";
    }

    void end(int prompt, int completion, int cached) override {
        ordered_json resp = response("completed");
        if (incomplete_) {
            resp["status"] = "incomplete";
            resp["incomplete_details"] = {{"reason", "max_output_tokens"}};
        }
        resp["output"] = output_;
        resp["usage"] = {{"input_tokens", prompt},
                         {"input_tokens_details", {{"cached_tokens", cached}}},
                         {"output_tokens", completion},
                         {"output_tokens_details", {{"reasoning_tokens", 0}}},
                         {"total_tokens", prompt + completion}};
        if (r_.store) {
            // The conversation so far and this turn's answer, for previous_response_id.
            ordered_json conv = r_.conversation;
            ordered_json answer{{"role", "assistant"}, {"content", text_}};
            if (!reasoning_.empty()) answer["reasoning_content"] = reasoning_;
            if (!calls_.empty()) answer["tool_calls"] = calls_;
            conv.push_back(std::move(answer));
            store_.put(id_, resp, std::move(conv));
        }
        if (r_.chat.stream) {
            event(incomplete_ ? "response.incomplete" : "response.completed", {{"response", resp}}, true);
            return cb_.on_done(200, "");
        }
        cb_.on_done(200, dump(resp) + "\n");
    }

    void error(int status, const std::string& message, const std::string& param, const std::string& code) override {
        cb_.on_done(status, ApiError(status, message, param, code).body());
    }

private:
    ordered_json response(const char* status) const {
        return {{"id", id_},
                {"object", "response"},
                {"created_at", created_},
                {"status", status},
                {"error", nullptr},
                {"incomplete_details", nullptr},
                {"instructions", r_.instructions.empty() ? ordered_json(nullptr) : ordered_json(r_.instructions)},
                {"max_output_tokens", r_.chat.max_tokens ? ordered_json(*r_.chat.max_tokens) : ordered_json(nullptr)},
                {"model", m_.id},
                {"output", ordered_json::array()},
                {"parallel_tool_calls", true},
                {"previous_response_id",
                 r_.previous_response_id.empty() ? ordered_json(nullptr) : ordered_json(r_.previous_response_id)},
                {"store", r_.store},
                {"temperature", r_.chat.sampling.temperature},
                {"text", {{"format", r_.text_format}}},
                {"tool_choice", r_.tool_choice_echo},
                {"tools", r_.tools_echo},
                {"top_p", r_.chat.sampling.top_p},
                {"truncation", "disabled"},
                {"usage", nullptr},
                {"metadata", r_.metadata}};
    }
    void event(const std::string& type, ordered_json j, bool last = false) {
        ordered_json e{{"type", type}, {"sequence_number", seq_++}};
        for (auto& [k, v] : j.items()) e[k] = v;
        cb_.on_event(dump(e), last, type);
    }
    void start() {
        if (started_ || !r_.chat.stream) return;
        started_ = true;
        event("response.created", {{"response", response("in_progress")}});
        event("response.in_progress", {{"response", response("in_progress")}});
    }
    std::string item_id() const {
        return (open_ == "reasoning" ? "rs_" : "msg_") + id_.substr(5) + "_" + std::to_string(output_.size() - 1);
    }
    // Appends to the open item of `kind` (reasoning or message), opening it first.
    void append(const std::string& kind, const std::string& text) {
        if (open_ != kind) {
            close();
            open_ = kind;
            ordered_json item =
                kind == "reasoning"
                    ? ordered_json{{"id", ""},
                                   {"type", "reasoning"},
                                   {"summary", ordered_json::array()},
                                   {"content", ordered_json::array({{{"type", "reasoning_text"}, {"text", ""}}})}}
                    : ordered_json{
                          {"id", ""},
                          {"type", "message"},
                          {"status", "in_progress"},
                          {"role", "assistant"},
                          {"content",
                           ordered_json::array(
                               {{{"type", "output_text"}, {"text", ""}, {"annotations", ordered_json::array()}}})}};
            output_.push_back(item);
            output_.back()["id"] = item_id();
            if (r_.chat.stream) {
                ordered_json added = output_.back();
                added["content"] = ordered_json::array();
                event("response.output_item.added", {{"output_index", output_.size() - 1}, {"item", added}});
                event("response.content_part.added", {{"item_id", item_id()},
                                                      {"output_index", output_.size() - 1},
                                                      {"content_index", 0},
                                                      {"part", output_.back()["content"][0]}});
            }
        }
        ordered_json& part = output_.back()["content"][0];
        part["text"] = part["text"].get<std::string>() + text;
        (kind == "reasoning" ? reasoning_ : text_) += text;
        if (r_.chat.stream)
            event(
                kind == "reasoning" ? "response.reasoning_text.delta" : "response.output_text.delta",
                {{"item_id", item_id()}, {"output_index", output_.size() - 1}, {"content_index", 0}, {"delta", text}});
    }
    void close() {
        if (open_.empty()) return;
        if (open_ == "message") output_.back()["status"] = "completed";
        if (r_.chat.stream) {
            const ordered_json& part = output_.back()["content"][0];
            event(open_ == "reasoning" ? "response.reasoning_text.done" : "response.output_text.done",
                  {{"item_id", item_id()},
                   {"output_index", output_.size() - 1},
                   {"content_index", 0},
                   {"text", part["text"]}});
            event("response.content_part.done",
                  {{"item_id", item_id()}, {"output_index", output_.size() - 1}, {"content_index", 0}, {"part", part}});
            event("response.output_item.done", {{"output_index", output_.size() - 1}, {"item", output_.back()}});
        }
        open_.clear();
    }

    const ChatModel& m_;
    ResponsesRequest r_;
    std::string id_;
    int64_t created_;
    ResponseStore& store_;
    ResponseCallbacks cb_;
    ordered_json output_ = ordered_json::array();
    ordered_json calls_ = ordered_json::array();
    std::string open_, text_, reasoning_;
    bool started_ = false, incomplete_ = false;
    int seq_ = 0;
};

}  // namespace

ResponsesRequest parse_responses_request(const std::string& body, const ResponseStore& store) {
    ordered_json j = parse_object(body);
    only_known(j, {"model", "input", "instructions", "previous_response_id", "tools", "tool_choice",
                   "max_output_tokens", "temperature", "top_p", "stream", "store", "metadata", "reasoning", "text",
                   "parallel_tool_calls", "user", "truncation", "include"});
    ResponsesRequest r;
    ChatRequest& c = r.chat;
    if (!has(j, "model")) refuse("model", "model is required", "missing_required_parameter");
    c.model = string(j["model"], "model");
    if (!has(j, "input")) refuse("input", "input is required", "missing_required_parameter");
    r.conversation = ordered_json::array();
    if (has(j, "previous_response_id")) {
        r.previous_response_id = string(j["previous_response_id"], "previous_response_id");
        auto prev = store.conversation(r.previous_response_id);
        if (!prev)
            throw ApiError(404,
                           "no stored response " + ApiError::quote(r.previous_response_id) +
                               " (responses are kept in memory, the oldest dropped past the store's capacity)",
                           "previous_response_id", "not_found");
        r.conversation = *prev;
    }
    convert_input(j["input"], r.conversation);
    if (has(j, "instructions")) r.instructions = string(j["instructions"], "instructions");
    c.messages = ordered_json::array();
    if (!r.instructions.empty()) c.messages.push_back({{"role", "system"}, {"content", r.instructions}});
    for (const auto& m : r.conversation) c.messages.push_back(m);
    if (has(j, "tools")) {
        if (!j["tools"].is_array()) refuse("tools", "tools must be an array", "invalid_type");
        r.tools_echo = j["tools"];
        c.tools = ordered_json::array();
        for (size_t i = 0; i < j["tools"].size(); ++i) {
            const std::string p = "tools[" + std::to_string(i) + "]";
            const ordered_json& t = j["tools"][i];
            if (!t.is_object()) refuse(p, p + " must be an object", "invalid_type");
            if (string(t.value("type", ordered_json()), p + ".type") != "function")
                refuse(p + ".type", "only function tools are supported (no built-in tools)");
            only_known(t, {"type", "name", "description", "parameters", "strict"}, p);
            ordered_json fn{{"name", string(t.value("name", ordered_json()), p + ".name")}};
            if (has(t, "description")) fn["description"] = string(t["description"], p + ".description");
            if (has(t, "parameters")) fn["parameters"] = t["parameters"];
            c.tools.push_back({{"type", "function"}, {"function", fn}});
        }
    }
    if (has(j, "tool_choice")) {
        const ordered_json& tc = j["tool_choice"];
        r.tool_choice_echo = tc;
        if (tc.is_string()) {
            c.tool_choice = tc.get<std::string>();
            if (c.tool_choice != "auto" && c.tool_choice != "none" && c.tool_choice != "required")
                refuse("tool_choice",
                       "tool_choice must be auto, none, required or {\"type\": \"function\", \"name\": ...}");
        } else if (tc.is_object() && tc.value("type", "") == "function") {
            c.tool_choice = "function";
            c.forced_function = string(tc.value("name", ordered_json()), "tool_choice.name");
        } else {
            refuse("tool_choice", "tool_choice must be a string or a function choice", "invalid_type");
        }
        if (c.tool_choice != "auto" && c.tool_choice != "none" && (!c.tools.is_array() || c.tools.empty()))
            refuse("tool_choice", "tool_choice needs tools");
        if (c.tool_choice == "function") {
            bool found = false;
            for (const auto& t : c.tools) found = found || t["function"]["name"] == c.forced_function;
            if (!found)
                refuse("tool_choice",
                       "tool_choice names " + ApiError::quote(c.forced_function) + ", which is not among tools");
        }
    }
    if (has(j, "max_output_tokens")) c.max_tokens = integer(j["max_output_tokens"], "max_output_tokens", 1, 1 << 20);
    if (has(j, "temperature"))
        c.sampling.temperature = static_cast<float>(number(j["temperature"], "temperature", 0, 2));
    if (has(j, "top_p")) {
        c.sampling.top_p = static_cast<float>(number(j["top_p"], "top_p", 0, 1));
        if (c.sampling.top_p <= 0) refuse("top_p", "top_p must be greater than 0");
    }
    if (has(j, "stream")) c.stream = boolean(j["stream"], "stream");
    if (has(j, "store")) r.store = boolean(j["store"], "store");
    if (has(j, "metadata")) {
        if (!j["metadata"].is_object() || j["metadata"].size() > 16)
            refuse("metadata", "metadata is an object of at most 16 strings");
        for (const auto& [k, v] : j["metadata"].items()) string(v, "metadata." + k);
        r.metadata = j["metadata"];
    }
    if (has(j, "reasoning")) {
        const ordered_json& re = j["reasoning"];
        if (!re.is_object()) refuse("reasoning", "reasoning must be an object", "invalid_type");
        only_known(re, {"effort", "summary"}, "reasoning");
        if (has(re, "effort"))
            c.template_kwargs["enable_thinking"] = string(re["effort"], "reasoning.effort") != "none";
    }
    if (has(j, "text")) {
        const ordered_json& t = j["text"];
        if (!t.is_object()) refuse("text", "text must be an object", "invalid_type");
        only_known(t, {"format", "verbosity"}, "text");
        if (has(t, "format")) {
            const ordered_json& f = t["format"];
            if (!f.is_object() || !f.contains("type"))
                refuse("text.format", "text.format must be {\"type\": ...}", "invalid_type");
            const std::string type = string(f["type"], "text.format.type");
            if (type == "json_object") {
                only_known(f, {"type"}, "text.format");
                c.response_schema = {{"type", "object"}};
            } else if (type == "json_schema") {
                c.response_schema = parse_json_schema_format(f, "text.format");
            } else if (type != "text") {
                refuse("text.format.type", "text.format.type must be \"text\", \"json_object\" or \"json_schema\"");
            }
            c.response_schema_param = "text.format";
            if (!c.response_schema.is_null() && (c.tool_choice == "required" || c.tool_choice == "function"))
                refuse("text.format", "text.format cannot be combined with a tool_choice that forces a tool call");
            r.text_format = f;
        }
    }
    if (has(j, "parallel_tool_calls")) boolean(j["parallel_tool_calls"], "parallel_tool_calls");
    if (has(j, "user")) string(j["user"], "user");
    if (has(j, "truncation") && string(j["truncation"], "truncation") != "disabled")
        refuse("truncation", "only truncation \"disabled\" is supported: a conversation that does not fit is refused");
    if (has(j, "include") && !(j["include"].is_array() && j["include"].empty()))
        refuse("include", "include is not supported");
    return r;
}

std::shared_ptr<RunSink> make_responses_writer(const ChatModel& model, const ResponsesRequest& request, std::string id,
                                               int64_t created, ResponseStore& store, ResponseCallbacks callbacks) {
    return std::make_shared<ResponsesWriter>(model, request, std::move(id), created, store, std::move(callbacks));
}

}  // namespace parlance::server
