// parse_chat_request (see chat_request.h).
#include "server/chat_request.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "server/api_error.h"
#include "server/json_fields.h"

namespace parlance::server {

using nlohmann::ordered_json;

namespace {

using namespace fields;

void bad(const std::string& param, const std::string& message, const std::string& code = "invalid_value") {
    refuse(param, message, code);
}

// A message's content: a string, or an array of {"type": "text", "text": ...} parts (joined).
std::string text_content(const ordered_json& c, const std::string& param, bool null_ok) {
    if (c.is_null() && null_ok) return {};
    if (c.is_string()) return c.get<std::string>();
    if (!c.is_array()) bad(param, param + " must be a string or an array of text parts", "invalid_type");
    std::string out;
    for (size_t i = 0; i < c.size(); ++i) {
        const std::string p = param + "[" + std::to_string(i) + "]";
        const auto& part = c[i];
        if (!part.is_object() || !part.contains("type")) bad(p, p + " must be an object with a type", "invalid_type");
        const std::string type = string(part["type"], p + ".type");
        if (type != "text")
            bad(p + ".type",
                "content parts of type " + ApiError::quote(type) + " are not supported by this model (text only)",
                "unsupported_value");
        out += string(part.value("text", ordered_json()), p + ".text");
    }
    return out;
}

ordered_json parse_tool_calls(const ordered_json& calls, const std::string& param) {
    if (!calls.is_array()) bad(param, param + " must be an array", "invalid_type");
    ordered_json out = ordered_json::array();
    for (size_t i = 0; i < calls.size(); ++i) {
        const std::string p = param + "[" + std::to_string(i) + "]";
        const auto& c = calls[i];
        if (!c.is_object() || !c.contains("function") || !c["function"].is_object())
            bad(p, p + " must be an object with a function", "invalid_type");
        if (c.contains("type") && string(c["type"], p + ".type") != "function")
            bad(p + ".type", p + ".type must be \"function\"");
        const auto& f = c["function"];
        const std::string name = string(f.value("name", ordered_json()), p + ".function.name");
        ordered_json args = ordered_json::object();
        if (f.contains("arguments")) {
            const std::string a = string(f["arguments"], p + ".function.arguments");
            args = parse_json(a, p + ".function.arguments", p + ".function.arguments");
            if (!args.is_object())
                bad(p + ".function.arguments", p + ".function.arguments must be a JSON object serialised as a string");
        }
        ordered_json call{{"id", c.value("id", "call_" + std::to_string(i))},
                          {"type", "function"},
                          {"function", {{"name", name}, {"arguments", args}}}};
        out.push_back(std::move(call));
    }
    return out;
}

ordered_json parse_messages(const ordered_json& m) {
    if (!m.is_array() || m.empty()) bad("messages", "messages must be a non-empty array", "invalid_type");
    ordered_json out = ordered_json::array();
    for (size_t i = 0; i < m.size(); ++i) {
        const std::string p = "messages[" + std::to_string(i) + "]";
        const auto& msg = m[i];
        if (!msg.is_object()) bad(p, p + " must be an object", "invalid_type");
        const std::string role = string(msg.value("role", ordered_json()), p + ".role");
        static const std::set<std::string> known{"role",         "content",           "name",   "tool_calls",
                                                 "tool_call_id", "reasoning_content", "refusal"};
        for (const auto& [k, v] : msg.items())
            if (!known.count(k))
                bad(p + "." + k, "unrecognized field " + ApiError::quote(k) + " in " + p, "unknown_parameter");
        ordered_json o;
        if (role == "system" || role == "developer" || role == "user") {
            o["role"] = role == "developer" ? "system" : role;
            o["content"] = text_content(msg.value("content", ordered_json()), p + ".content", false);
            if (msg.contains("tool_calls")) bad(p + ".tool_calls", "only assistant messages carry tool_calls");
        } else if (role == "assistant") {
            o["role"] = "assistant";
            o["content"] = text_content(msg.value("content", ordered_json()), p + ".content", true);
            if (msg.contains("reasoning_content") && !msg["reasoning_content"].is_null())
                o["reasoning_content"] = string(msg["reasoning_content"], p + ".reasoning_content");
            if (msg.contains("tool_calls") && !msg["tool_calls"].is_null())
                o["tool_calls"] = parse_tool_calls(msg["tool_calls"], p + ".tool_calls");
            if (o["content"].get<std::string>().empty() && !o.contains("tool_calls") &&
                !o.contains("reasoning_content") && !msg.contains("content"))
                bad(p + ".content", "an assistant message needs content or tool_calls");
        } else if (role == "tool") {
            o["role"] = "tool";
            o["content"] = text_content(msg.value("content", ordered_json()), p + ".content", false);
            o["tool_call_id"] = string(msg.value("tool_call_id", ordered_json()), p + ".tool_call_id");
        } else {
            bad(p + ".role", "unknown role " + ApiError::quote(role) + " (system, developer, user, assistant, tool)");
        }
        if (msg.contains("name") && !msg["name"].is_null()) o["name"] = string(msg["name"], p + ".name");
        out.push_back(std::move(o));
    }
    return out;
}

ordered_json parse_tools(const ordered_json& t) {
    if (!t.is_array()) bad("tools", "tools must be an array", "invalid_type");
    ordered_json out = ordered_json::array();
    std::set<std::string> names;
    for (size_t i = 0; i < t.size(); ++i) {
        const std::string p = "tools[" + std::to_string(i) + "]";
        const auto& tool = t[i];
        if (!tool.is_object()) bad(p, p + " must be an object", "invalid_type");
        if (string(tool.value("type", ordered_json()), p + ".type") != "function")
            bad(p + ".type", "only tools of type \"function\" are supported");
        if (!tool.contains("function") || !tool["function"].is_object())
            bad(p + ".function", p + ".function must be an object", "invalid_type");
        const auto& f = tool["function"];
        const std::string name = string(f.value("name", ordered_json()), p + ".function.name");
        if (name.empty() || name.size() > 64) bad(p + ".function.name", "a function name is 1 to 64 characters");
        if (!names.insert(name).second) bad(p + ".function.name", "two tools are named " + ApiError::quote(name));
        if (f.contains("parameters") && !f["parameters"].is_object())
            bad(p + ".function.parameters", p + ".function.parameters must be a JSON schema object", "invalid_type");
        if (f.contains("description")) string(f["description"], p + ".function.description");
        ordered_json fn{{"name", name}};
        if (f.contains("description")) fn["description"] = f["description"];
        if (f.contains("parameters")) fn["parameters"] = f["parameters"];
        out.push_back({{"type", "function"}, {"function", fn}});
    }
    return out;
}

}  // namespace

ChatRequest parse_chat_request(const std::string& body) {
    ordered_json j = parse_object(body);
    static const std::set<std::string> known = with_sampling(
        {"model", "messages", "tools", "tool_choice", "parallel_tool_calls", "stream", "stream_options", "max_tokens",
         "max_completion_tokens", "n", "logprobs", "top_logprobs", "return_tokens_as_token_ids", "chat_template_kwargs",
         "reasoning_effort", "response_format", "user", "add_generation_prompt"});
    only_known(j, known);
    ChatRequest r;
    if (!j.contains("model")) bad("model", "model is required", "missing_required_parameter");
    r.model = string(j["model"], "model");
    if (!j.contains("messages")) bad("messages", "messages is required", "missing_required_parameter");
    r.messages = parse_messages(j["messages"]);
    auto has = [&](const char* k) { return fields::has(j, k); };
    if (has("tools")) r.tools = parse_tools(j["tools"]);
    if (has("tool_choice")) {
        const auto& tc = j["tool_choice"];
        if (tc.is_string()) {
            r.tool_choice = tc.get<std::string>();
            if (r.tool_choice != "auto" && r.tool_choice != "none" && r.tool_choice != "required")
                bad("tool_choice", "tool_choice must be \"auto\", \"none\", \"required\" or a named function");
        } else if (tc.is_object() && tc.value("type", "") == "function" && tc.contains("function") &&
                   tc["function"].is_object()) {
            r.tool_choice = "function";
            r.forced_function = string(tc["function"].value("name", ordered_json()), "tool_choice.function.name");
        } else {
            bad("tool_choice",
                "tool_choice must be a string or {\"type\": \"function\", \"function\": {\"name\": ...}}",
                "invalid_type");
        }
        if (r.tool_choice != "auto" && r.tool_choice != "none" && (!r.tools.is_array() || r.tools.empty()))
            bad("tool_choice", "tool_choice " + ApiError::quote(r.tool_choice) + " needs tools");
        if (r.tool_choice == "function") {
            bool found = false;
            for (const auto& t : r.tools) found = found || t["function"]["name"] == r.forced_function;
            if (!found)
                bad("tool_choice",
                    "tool_choice names " + ApiError::quote(r.forced_function) + ", which is not among tools");
        }
    }
    if (has("parallel_tool_calls")) boolean(j["parallel_tool_calls"], "parallel_tool_calls");
    if (has("stream")) r.stream = boolean(j["stream"], "stream");
    if (has("stream_options")) {
        const auto& so = j["stream_options"];
        if (!so.is_object()) bad("stream_options", "stream_options must be an object", "invalid_type");
        if (!r.stream) bad("stream_options", "stream_options is only allowed with stream: true");
        for (const auto& [k, v] : so.items()) {
            if (k == "include_usage")
                r.include_usage = boolean(v, "stream_options.include_usage");
            else
                bad("stream_options." + k, "unrecognized stream option " + ApiError::quote(k), "unknown_parameter");
        }
    }
    if (has("max_tokens") && has("max_completion_tokens") && j["max_tokens"] != j["max_completion_tokens"])
        bad("max_tokens", "max_tokens and max_completion_tokens disagree: give one");
    for (const char* k : {"max_completion_tokens", "max_tokens"})
        if (has(k)) r.max_tokens = integer(j[k], k, 1, 1 << 20);
    read_sampling(j, r.sampling, kMaxStopStrings);
    if (r.max_tokens && r.sampling.min_tokens > *r.max_tokens) bad("min_tokens", "min_tokens is more than max_tokens");
    if (has("n")) r.n = integer(j["n"], "n", 1, kMaxChoices);
    if (has("logprobs")) r.logprobs = boolean(j["logprobs"], "logprobs");
    if (has("top_logprobs")) {
        r.top_logprobs = integer(j["top_logprobs"], "top_logprobs", 0, 20);
        if (!r.logprobs) bad("top_logprobs", "top_logprobs needs logprobs: true");
    }
    if (has("return_tokens_as_token_ids"))
        r.return_tokens_as_token_ids = boolean(j["return_tokens_as_token_ids"], "return_tokens_as_token_ids");
    if (has("chat_template_kwargs")) {
        if (!j["chat_template_kwargs"].is_object())
            bad("chat_template_kwargs", "chat_template_kwargs must be an object", "invalid_type");
        r.template_kwargs = j["chat_template_kwargs"];
        for (const char* reserved : {"messages", "tools", "add_generation_prompt"})
            if (r.template_kwargs.contains(reserved))
                bad(std::string("chat_template_kwargs.") + reserved,
                    "set " + std::string(reserved) + " at the top level");
    }
    if (has("reasoning_effort")) {
        // Qwen3 thinks or does not: "none" turns thinking off; any effort turns it on.
        const std::string e = string(j["reasoning_effort"], "reasoning_effort");
        if (e != "none" && e != "minimal" && e != "low" && e != "medium" && e != "high")
            bad("reasoning_effort", "reasoning_effort must be none, minimal, low, medium or high");
        if (r.template_kwargs.contains("enable_thinking") &&
            r.template_kwargs["enable_thinking"] != ordered_json(e != "none"))
            bad("reasoning_effort", "reasoning_effort and chat_template_kwargs.enable_thinking disagree");
        r.template_kwargs["enable_thinking"] = e != "none";
    }
    if (has("response_format")) {
        const auto& rf = j["response_format"];
        if (!rf.is_object() || !rf.contains("type"))
            bad("response_format", "response_format must be {\"type\": ...}", "invalid_type");
        const std::string type = string(rf["type"], "response_format.type");
        for (const auto& [k, v] : rf.items())
            if (k != "type" && !(type == "json_schema" && k == "json_schema"))
                bad("response_format." + k, "unknown field response_format." + k + " for type " + ApiError::quote(type),
                    "unknown_parameter");
        if (type == "json_object") {
            r.response_schema = {{"type", "object"}};
        } else if (type == "json_schema") {
            if (!rf.contains("json_schema"))
                bad("response_format.json_schema", "response_format json_schema needs a json_schema object",
                    "missing_required_parameter");
            r.response_schema = parse_json_schema_format(rf["json_schema"], "response_format.json_schema");
        } else if (type != "text") {
            bad("response_format.type",
                "response_format.type must be \"text\", \"json_object\" or \"json_schema\", not " +
                    ApiError::quote(type));
        }
        r.response_schema_param = "response_format";
        if (!r.response_schema.is_null() && (r.tool_choice == "required" || r.tool_choice == "function"))
            bad("response_format", "response_format cannot be combined with a tool_choice that forces a tool call");
        if (!r.response_schema.is_null() && r.sampling.ignore_eos)
            bad("ignore_eos", "ignore_eos cannot be combined with a structured response_format (it must end)");
    }
    if (has("user")) string(j["user"], "user");
    if (has("add_generation_prompt"))
        r.add_generation_prompt = boolean(j["add_generation_prompt"], "add_generation_prompt");
    return r;
}

ordered_json parse_json_schema_format(const ordered_json& f, const std::string& param) {
    if (!f.is_object()) bad(param, param + " must be an object", "invalid_type");
    for (const auto& [k, v] : f.items())
        if (k != "name" && k != "schema" && k != "strict" && k != "description" && k != "type")
            bad(param + "." + k, "unknown field " + param + "." + k, "unknown_parameter");
    // OpenAI requires a name of letters, digits, '_' and '-' (64 at most).
    const std::string name = string(f.value("name", ordered_json()), param + ".name");
    if (name.empty() || name.size() > 64 || !std::all_of(name.begin(), name.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
        }))
        bad(param + ".name", param + ".name must be 1-64 letters, digits, '_' or '-'");
    if (f.contains("strict") && !f["strict"].is_null()) boolean(f["strict"], param + ".strict");
    if (f.contains("description") && !f["description"].is_null()) string(f["description"], param + ".description");
    if (!f.contains("schema") || f["schema"].is_null()) return ordered_json::object();
    if (!f["schema"].is_object())
        bad(param + ".schema", param + ".schema must be a JSON schema object", "invalid_type");
    return f["schema"];
}

}  // namespace parlance::server
