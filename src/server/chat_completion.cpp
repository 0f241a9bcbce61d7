// The chat completion request's prompt and its OpenAI response writer (see chat_completion.h).
#include "server/chat_completion.h"

#include <functional>

#include "core/error.h"
#include "server/api_error.h"
#include "server/json_fields.h"
#include "text/structured_output.h"

namespace parlance::server {

using fields::dump;
using nlohmann::ordered_json;

namespace {

ordered_json bytes_of(const std::string& s) {
    ordered_json a = ordered_json::array();
    for (unsigned char c : s) a.push_back(static_cast<int>(c));
    return a;
}

class ChatWriter final : public RunSink {
public:
    ChatWriter(const ChatModel& m, const ChatRequest& r, std::string id, int64_t created, ResponseCallbacks cb)
        : m_(m),
          stream_(r.stream),
          usage_chunk_(r.include_usage),
          logprobs_(r.logprobs),
          as_ids_(r.return_tokens_as_token_ids),
          id_(std::move(id)),
          created_(created),
          cb_(std::move(cb)),
          choices_(r.n) {}

    void delta(const ChoiceDelta& d) override {
        Choice& c = choices_[d.choice];
        ordered_json lp = ordered_json::array();
        for (const TokenLogprobs& l : d.logprobs) lp.push_back(openai_logprob(*m_.tokenizer, l, as_ids_));
        ordered_json calls = add_calls(c, d.choice, d.tool_calls);
        if (!stream_) {
            c.reasoning += d.reasoning;
            c.content += d.content;
            for (auto& e : lp) c.logprobs.push_back(std::move(e));
            return;
        }
        ordered_json delta = ordered_json::object();
        if (!c.started) {
            delta["role"] = "assistant";
            delta["content"] = "";
            c.started = true;
        }
        if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
        if (!d.content.empty()) delta["content"] = d.content;
        if (!calls.empty()) delta["tool_calls"] = std::move(calls);
        ordered_json ch{{"index", d.choice}, {"delta", std::move(delta)}};
        ch["logprobs"] = lp.empty() ? ordered_json(nullptr) : ordered_json{{"content", std::move(lp)}};
        ch["finish_reason"] = nullptr;
        cb_.on_event(dump(chunk(ordered_json::array({std::move(ch)}))), false, "");
    }

    void choice_end(const ChoiceEnd& e) override {
        Choice& c = choices_[e.choice];
        c.finish = e.reason;
        if (!stream_) return;
        ordered_json delta = ordered_json::object();
        if (!c.started) {
            delta["role"] = "assistant";
            delta["content"] = "";
            c.started = true;
        }
        ordered_json ch{
            {"index", e.choice}, {"delta", std::move(delta)}, {"logprobs", nullptr}, {"finish_reason", e.reason}};
        cb_.on_event(dump(chunk(ordered_json::array({std::move(ch)}))), false, "");
    }

    void end(int prompt, int completion, int cached) override {
        const ordered_json usage = openai_usage(prompt, completion, cached);
        if (stream_) {
            ordered_json last = chunk(ordered_json::array());
            last["usage"] = usage;
            const std::string text = dump(last);
            return cb_.end_openai_stream(usage_chunk_ ? &text : nullptr);
        }
        ordered_json choices = ordered_json::array();
        for (size_t i = 0; i < choices_.size(); ++i) {
            Choice& c = choices_[i];
            ordered_json message{{"role", "assistant"}};
            const bool blank = c.content.find_first_not_of(" \t\r\n") == std::string::npos;
            message["content"] = (blank && !c.tool_calls.empty()) ? ordered_json(nullptr) : ordered_json(c.content);
            if (!c.reasoning.empty()) message["reasoning_content"] = c.reasoning;
            if (!c.tool_calls.empty()) message["tool_calls"] = c.tool_calls;
            ordered_json ch{{"index", i}, {"message", std::move(message)}};
            ch["logprobs"] = logprobs_ ? ordered_json{{"content", c.logprobs}} : ordered_json(nullptr);
            ch["finish_reason"] = c.finish;
            choices.push_back(std::move(ch));
        }
        ordered_json body{{"id", id_},      {"object", "chat.completion"},      {"created", created_},
                          {"model", m_.id}, {"system_fingerprint", "parlance"}, {"choices", std::move(choices)},
                          {"usage", usage}};
        cb_.on_done(200, dump(body) + "\n");
    }

    void error(int status, const std::string& message, const std::string& param, const std::string& code) override {
        cb_.on_done(status, ApiError(status, message, param, code).body());
    }

private:
    struct Choice {
        bool started = false;  // the role chunk went out
        std::string reasoning, content, finish;
        ordered_json tool_calls = ordered_json::array();
        ordered_json logprobs = ordered_json::array();
    };

    // Records completed calls; returns them as stream deltas (with "index"). Ids are unique
    // within the response: call_<request>_<choice>_<k>.
    ordered_json add_calls(Choice& c, int choice, const std::vector<ParsedToolCall>& parsed) const {
        ordered_json deltas = ordered_json::array();
        for (const ParsedToolCall& call : parsed) {
            const int k = static_cast<int>(c.tool_calls.size());
            ordered_json t{{"id", "call_" + id_.substr(std::min<size_t>(id_.size(), 9)) + "_" + std::to_string(choice) +
                                      "_" + std::to_string(k)},
                           {"type", "function"},
                           {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
            c.tool_calls.push_back(t);
            t["index"] = k;
            deltas.push_back(std::move(t));
        }
        return deltas;
    }

    ordered_json chunk(ordered_json choices) const {
        ordered_json c{{"id", id_},      {"object", "chat.completion.chunk"}, {"created", created_},
                       {"model", m_.id}, {"system_fingerprint", "parlance"},  {"choices", std::move(choices)}};
        if (usage_chunk_) c["usage"] = nullptr;
        return c;
    }

    const ChatModel& m_;
    bool stream_, usage_chunk_, logprobs_, as_ids_;
    std::string id_;
    int64_t created_;
    ResponseCallbacks cb_;
    std::vector<Choice> choices_;
};

}  // namespace

ordered_json openai_usage(int prompt, int completion, int cached) {
    return {{"prompt_tokens", prompt},
            {"completion_tokens", completion},
            {"total_tokens", prompt + completion},
            {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

ordered_json openai_logprob(const Tokenizer& tok, const TokenLogprobs& l, bool as_ids) {
    auto text = [&](int32_t id) { return logprob_token_name(tok, id, as_ids); };
    ordered_json e{
        {"token", text(l.token)}, {"logprob", l.logprob}, {"bytes", bytes_of(token_bytes_or_empty(tok, l.token))}};
    ordered_json top = ordered_json::array();
    for (const auto& [id, lp] : l.top)
        top.push_back({{"token", text(id)}, {"logprob", lp}, {"bytes", bytes_of(token_bytes_or_empty(tok, id))}});
    e["top_logprobs"] = std::move(top);
    return e;
}

namespace {

// tool_choice required / named: the assistant's turn starts inside a tool call.
std::string forced_call_opening(const ChatRequest& req) {
    if (req.tool_choice == "required") return "\n{\"name\": \"";
    if (req.tool_choice == "function")
        return "\n{\"name\": " + ordered_json(req.forced_function).dump() + ", \"arguments\": ";
    return "";
}

}  // namespace

std::string chat_prompt_text(const ChatModel& model, const ChatRequest& req) {
    ChatTemplateInputs in;
    in.messages = req.messages;
    if (req.tool_choice != "none") in.tools = req.tools;
    in.add_generation_prompt = req.add_generation_prompt;
    in.kwargs = req.template_kwargs;
    std::string text;
    try {
        text = model.chat_template->render(in);
    } catch (const Error& e) {
        throw ApiError(400, e.what(), "messages", "invalid_value");
    }
    const std::string forced = forced_call_opening(req);
    if (!forced.empty()) text += "<tool_call>" + forced;
    return text;
}

RunSettings chat_run_settings(const ChatModel& model, const ChatRequest& req) {
    const std::string text = chat_prompt_text(model, req);
    const std::string forced = forced_call_opening(req);
    RunSettings s;
    s.prompt = model.tokenizer->encode(text, /*parse_special=*/true);
    if (s.prompt.empty()) throw ApiError(400, "the conversation renders to an empty prompt", "messages");
    s.sampling.max_tokens = fit_context(model, s.prompt.size(), req.max_tokens, "messages", "max_tokens");
    apply_sampling(req.sampling, model, s);
    s.n = req.n;
    s.logprobs = req.logprobs ? req.top_logprobs : -1;
    const bool thinking =
        !(req.template_kwargs.contains("enable_thinking") && req.template_kwargs["enable_thinking"] == false);
    s.output.reasoning = thinking;
    const std::string tail = text.substr(text.size() - std::min<size_t>(text.size(), 9));
    s.output.starts_in_reasoning = thinking && forced.empty() && tail.find("<think>") != std::string::npos;
    s.output.tool_calls = req.tools.is_array() && !req.tools.empty() && req.tool_choice != "none";
    s.output.forced_call = forced;
    if (!req.response_schema.is_null()) s.constraint = structured_output_constraint(model, req, s.output);
    return s;
}

std::shared_ptr<const TokenConstraint> structured_output_constraint(const ChatModel& model, const ChatRequest& req,
                                                                    const ChatOutputOptions& output) {
    if (!model.grammar_vocabulary)
        throw ApiError(400, "this model does not support structured output", req.response_schema_param,
                       "unsupported_value");
    const std::string param = req.response_schema_param == "response_format" ? "response_format.json_schema.schema"
                                                                             : req.response_schema_param;
    StructuredOutputSpec spec;
    spec.schema = req.response_schema;
    spec.reasoning = output.reasoning;
    spec.starts_in_reasoning = output.starts_in_reasoning;
    spec.limits = model.schema_limits;
    // Every schema is checked, against one budget for the request, before any grammar work.
    SchemaBudget budget;
    if (output.tool_calls)
        for (size_t i = 0; i < req.tools.size(); ++i) {
            const ordered_json& f = req.tools[i]["function"];
            spec.tools.push_back({f["name"], f.value("parameters", ordered_json())});
            try {
                check_schema(spec.tools.back().parameters, model.schema_limits, budget);
            } catch (const SchemaError& e) {
                throw ApiError(400, "the parameters of tool " + std::to_string(i) + " cannot be enforced: " + e.what(),
                               "tools[" + std::to_string(i) + "]", "invalid_value");
            }
        }
    try {
        check_schema(spec.schema, model.schema_limits, budget);
    } catch (const SchemaError& e) {
        throw ApiError(400, std::string("the schema cannot be enforced: ") + e.what(), param, "invalid_value");
    }
    std::string grammar;
    try {
        grammar = structured_output_grammar(spec);
        return make_grammar_constraint(grammar, model.grammar_vocabulary, model.schema_limits.max_grammar_stacks);
    } catch (const Error& e) {
        throw ApiError(400, std::string("the schema cannot be enforced: ") + e.what(), param, "invalid_value");
    }
}

std::shared_ptr<RunSink> make_chat_writer(const ChatModel& model, const ChatRequest& request, std::string id,
                                          int64_t created, ResponseCallbacks callbacks) {
    return std::make_shared<ChatWriter>(model, request, std::move(id), created, std::move(callbacks));
}

}  // namespace parlance::server
