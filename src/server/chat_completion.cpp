// ChatCompletion (see chat_completion.h).
#include "server/chat_completion.h"

#include <algorithm>

#include "core/error.h"
#include "server/api_error.h"
#include "text/chat_output.h"
#include "text/incremental_detokenizer.h"
#include "text/stop_strings.h"

namespace parlance::server {

using nlohmann::ordered_json;

struct ChatCompletion::Choice {
    Choice(const Tokenizer& tok, const ChatRequest& r, ChatOutputOptions o)
        : detok(tok, /*skip_special=*/true), stops(r.stop), parser(std::move(o)) {}
    IncrementalDetokenizer detok;
    StopStrings stops;
    ChatOutputParser parser;
    std::string reasoning, content;
    ordered_json tool_calls = ordered_json::array();
    ordered_json logprobs = ordered_json::array();  // every token's entry (non-stream)
    ordered_json pending_logprobs = ordered_json::array();  // the next chunk's (stream)
    std::vector<TokenLogprobs> token_logprobs;  // awaiting their token
    bool started = false;   // the role chunk went out
    bool stopped = false;   // a stop string matched
    int generated = 0;
};

namespace {

std::string dump(const ordered_json& j) {
    return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

ordered_json bytes_of(const std::string& s) {
    ordered_json a = ordered_json::array();
    for (unsigned char c : s) a.push_back(static_cast<int>(c));
    return a;
}

}  // namespace

// Records the calls a piece of output completed; returns them as stream deltas (with "index").
// Ids are unique within the response: call_<request>_<choice>_<k>.
ordered_json ChatCompletion::add_tool_calls(Choice& c, int choice, const std::vector<ParsedToolCall>& parsed) const {
    ordered_json deltas = ordered_json::array();
    for (const ParsedToolCall& call : parsed) {
        const int k = static_cast<int>(c.tool_calls.size());
        ordered_json t{{"id", "call_" + id_.substr(std::min<size_t>(id_.size(), 9)) + "_" + std::to_string(choice) + "_" +
                                  std::to_string(k)},
                       {"type", "function"},
                       {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
        c.tool_calls.push_back(t);
        t["index"] = k;
        deltas.push_back(std::move(t));
    }
    return deltas;
}

ordered_json chat_usage(int prompt, int completion, int cached) {
    return {{"prompt_tokens", prompt},
            {"completion_tokens", completion},
            {"total_tokens", prompt + completion},
            {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

ChatCompletion::ChatCompletion(const ChatModel& model, ChatRequest request, std::string id, int64_t created)
    : model_(model), req_(std::move(request)), id_(std::move(id)), created_(created) {
    ChatTemplateInputs in;
    in.messages = req_.messages;
    if (req_.tool_choice != "none") in.tools = req_.tools;
    in.add_generation_prompt = req_.add_generation_prompt;
    in.kwargs = req_.template_kwargs;
    try {
        prompt_text_ = model_.chat_template->render(in);
    } catch (const Error& e) {
        throw ApiError(400, e.what(), "messages", "invalid_value");
    }
    // tool_choice required / named: the assistant's turn starts inside a tool call.
    std::string forced;
    if (req_.tool_choice == "required") forced = "\n{\"name\": \"";
    if (req_.tool_choice == "function") forced = "\n{\"name\": " + ordered_json(req_.forced_function).dump() + ", \"arguments\": ";
    if (!forced.empty()) prompt_text_ += "<tool_call>" + forced;
    prompt_ = model_.tokenizer->encode(prompt_text_, /*parse_special=*/true);
    if (prompt_.empty()) throw ApiError(400, "the conversation renders to an empty prompt", "messages");
    const int room = model_.max_context - static_cast<int>(prompt_.size());
    if (room < 1)
        throw ApiError(400,
                       "this model's maximum context length is " + std::to_string(model_.max_context) +
                           " tokens; the messages take " + std::to_string(prompt_.size()),
                       "messages", "context_length_exceeded");
    if (req_.max_tokens && *req_.max_tokens > room)
        throw ApiError(400,
                       "this model's maximum context length is " + std::to_string(model_.max_context) +
                           " tokens; you asked for " + std::to_string(prompt_.size() + *req_.max_tokens) + " (" +
                           std::to_string(prompt_.size()) + " in the messages, " + std::to_string(*req_.max_tokens) +
                           " in the completion)",
                       "max_tokens", "context_length_exceeded");
    max_tokens_ = req_.max_tokens.value_or(room);
    const bool thinking = !(req_.template_kwargs.contains("enable_thinking") && req_.template_kwargs["enable_thinking"] == false);
    ChatOutputOptions o;
    o.reasoning = thinking;
    const std::string tail = prompt_text_.substr(prompt_text_.size() - std::min<size_t>(prompt_text_.size(), 9));
    o.starts_in_reasoning = thinking && tail.find("<think>") != std::string::npos;
    o.tool_calls = req_.tools.is_array() && !req_.tools.empty() && req_.tool_choice != "none";
    o.forced_call = forced;
    for (int i = 0; i < req_.n; ++i) choices_.push_back(std::make_unique<Choice>(*model_.tokenizer, req_, o));
}

ChatCompletion::~ChatCompletion() = default;

void ChatCompletion::start(std::shared_ptr<std::atomic<bool>> cancelled, ChatCallbacks callbacks) {
    cb_ = std::move(callbacks);
    ServiceRequest s;
    s.n = req_.n;
    GenerationRequest& g = s.request;
    g.prompt = prompt_;
    g.cancelled = std::move(cancelled);
    g.sampling.max_tokens = max_tokens_;
    g.sampling.min_tokens = req_.min_tokens;
    g.sampling.temperature = req_.temperature;
    g.sampling.top_k = req_.top_k;
    g.sampling.top_p = req_.top_p;
    g.sampling.min_p = req_.min_p;
    g.sampling.presence_penalty = req_.presence_penalty;
    g.sampling.frequency_penalty = req_.frequency_penalty;
    g.sampling.repetition_penalty = req_.repetition_penalty;
    // Without a seed every request draws its own.
    g.sampling.seed = req_.seed ? *req_.seed : std::hash<std::string>{}(id_);
    if (!req_.ignore_eos) g.sampling.stop_ids = model_.stop_ids;
    g.logprobs = req_.logprobs ? req_.top_logprobs : -1;
    auto self = shared_from_this();
    s.on_token = [self](int choice, int32_t t) { return self->on_token(choice, t); };
    if (req_.logprobs)
        s.on_logprobs = [self](int choice, const TokenLogprobs& l) { self->choices_[choice]->token_logprobs.push_back(l); };
    s.on_done = [self](std::vector<GenerationResult> r, std::exception_ptr e) { self->on_done(std::move(r), e); };
    model_.service->submit(std::move(s));
}

// A model's embedding has more rows than its tokenizer has ids (Qwen3: 151,936 and 151,669); an
// id without a token is generated text of no bytes.
std::string ChatCompletion::token_bytes(int32_t id) const {
    try {
        return model_.tokenizer->token_bytes(id);
    } catch (const Error&) {
        return {};
    }
}

std::string ChatCompletion::token_text(int32_t id) const {
    if (req_.return_tokens_as_token_ids) return "token_id:" + std::to_string(id);
    return token_bytes(id);
}

ordered_json ChatCompletion::logprob_entry(const TokenLogprobs& l) const {
    const std::string t = token_text(l.token);
    ordered_json e{{"token", t}, {"logprob", l.logprob}, {"bytes", bytes_of(token_bytes(l.token))}};
    ordered_json top = ordered_json::array();
    for (const auto& [id, lp] : l.top)
        top.push_back({{"token", token_text(id)}, {"logprob", lp}, {"bytes", bytes_of(token_bytes(id))}});
    e["top_logprobs"] = std::move(top);
    return e;
}

ordered_json ChatCompletion::chunk(ordered_json choices) const {
    ordered_json c{{"id", id_},
                   {"object", "chat.completion.chunk"},
                   {"created", created_},
                   {"model", model_.id},
                   {"system_fingerprint", "parlance"},
                   {"choices", std::move(choices)}};
    if (req_.include_usage) c["usage"] = nullptr;
    return c;
}

bool ChatCompletion::on_token(int index, int32_t token) {
    Choice& c = *choices_[index];
    if (c.stopped) return false;
    ++c.generated;
    const bool is_stop = std::find(model_.stop_ids.begin(), model_.stop_ids.end(), token) != model_.stop_ids.end() &&
                         !req_.ignore_eos && c.generated > req_.min_tokens;
    if (req_.logprobs && !c.token_logprobs.empty()) {
        if (!is_stop) {
            ordered_json e = logprob_entry(c.token_logprobs.back());
            c.logprobs.push_back(e);
            c.pending_logprobs.push_back(std::move(e));
        }
        c.token_logprobs.clear();
    }
    std::string text;
    if (!is_stop) {
        try {
            text = c.detok.push(token);
        } catch (const Error&) {
            // no token for this id: no text (the detokenizer's state is unchanged)
        }
    }
    std::string shown = c.stops.push(text);
    if (c.stops.matched()) c.stopped = true;
    ChatOutputDelta d = c.parser.push(shown);
    c.reasoning += d.reasoning;
    c.content += d.content;
    ordered_json calls = add_tool_calls(c, index, d.tool_calls);
    if (req_.stream) {
        ordered_json delta = ordered_json::object();
        if (!c.started) {
            delta["role"] = "assistant";
            delta["content"] = "";
            c.started = true;
        }
        if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
        if (!d.content.empty()) delta["content"] = d.content;
        if (!calls.empty()) delta["tool_calls"] = std::move(calls);
        if (delta.size() > 0 || !c.pending_logprobs.empty()) {
            ordered_json ch{{"index", index}, {"delta", std::move(delta)}};
            ch["logprobs"] = c.pending_logprobs.empty() ? ordered_json(nullptr) : ordered_json{{"content", c.pending_logprobs}};
            ch["finish_reason"] = nullptr;
            c.pending_logprobs = ordered_json::array();
            cb_.on_event(dump(chunk(ordered_json::array({std::move(ch)}))), false);
        }
    }
    return !c.stopped;
}

void ChatCompletion::on_done(std::vector<GenerationResult> results, std::exception_ptr error) {
    if (error) {
        try {
            std::rethrow_exception(error);
        } catch (const Error& e) {
            ApiError a = ApiError::from(e);
            if (e.kind() == ErrorKind::TooLarge) a = ApiError(400, e.what(), "messages", "context_length_exceeded");
            return cb_.on_done(a.status, a.body());
        } catch (const std::exception& e) {
            ApiError a(500, std::string("internal error: ") + e.what());
            return cb_.on_done(a.status, a.body());
        }
    }
    int completion = 0;
    ordered_json choices = ordered_json::array();
    for (size_t i = 0; i < results.size() && i < choices_.size(); ++i) {
        Choice& c = *choices_[i];
        const GenerationResult& r = results[i];
        completion += static_cast<int>(r.tokens.size());
        if (r.state == SeqState::FinishedTimeout) {
            ApiError a(504, "the completion ran past its deadline", "", "timeout");
            return cb_.on_done(a.status, a.body());
        }
        // What was held back: an unfinished character, a tail that was not a stop string, an
        // open tag.
        std::string tail = c.stopped ? std::string() : c.stops.push(c.detok.flush());
        if (!c.stopped) tail += c.stops.flush();
        ChatOutputDelta d = c.parser.push(tail);
        ChatOutputDelta e = c.parser.finish();
        d.reasoning += e.reasoning;
        d.content += e.content;
        for (auto& t : e.tool_calls) d.tool_calls.push_back(std::move(t));
        c.reasoning += d.reasoning;
        c.content += d.content;
        ordered_json calls = add_tool_calls(c, static_cast<int>(i), d.tool_calls);
        std::string finish = c.stopped ? "stop" : finish_reason(r.state);
        if (finish == "abort") finish = "stop";  // the client is gone; nobody reads this
        if (!c.tool_calls.empty() && finish == "stop") finish = "tool_calls";
        if (req_.stream) {
            ordered_json delta = ordered_json::object();
            if (!c.started) {
                delta["role"] = "assistant";
                delta["content"] = "";
                c.started = true;
            }
            if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
            if (!d.content.empty()) delta["content"] = d.content;
            if (!calls.empty()) delta["tool_calls"] = std::move(calls);
            ordered_json ch{{"index", i}, {"delta", std::move(delta)}};
            ch["logprobs"] = c.pending_logprobs.empty() ? ordered_json(nullptr) : ordered_json{{"content", c.pending_logprobs}};
            ch["finish_reason"] = finish;
            cb_.on_event(dump(chunk(ordered_json::array({std::move(ch)}))), false);
            continue;
        }
        ordered_json message{{"role", "assistant"}};
        const bool blank = c.content.find_first_not_of(" \t\r\n") == std::string::npos;
        message["content"] = (blank && !c.tool_calls.empty()) ? ordered_json(nullptr) : ordered_json(c.content);
        if (!c.reasoning.empty()) message["reasoning_content"] = c.reasoning;
        if (!c.tool_calls.empty()) message["tool_calls"] = c.tool_calls;
        ordered_json ch{{"index", i}, {"message", std::move(message)}};
        ch["logprobs"] = req_.logprobs ? ordered_json{{"content", c.logprobs}} : ordered_json(nullptr);
        ch["finish_reason"] = finish;
        choices.push_back(std::move(ch));
    }
    const int cached = results.empty() ? 0 : results[0].cached_prompt_tokens;
    const ordered_json usage = chat_usage(prompt_tokens(), completion, cached);
    if (req_.stream) {
        if (req_.include_usage) {
            ordered_json last = chunk(ordered_json::array());
            last["usage"] = usage;
            cb_.on_event(dump(last), false);
        }
        cb_.on_event("[DONE]", true);
        return cb_.on_done(200, "");
    }
    ordered_json body{{"id", id_},
                      {"object", "chat.completion"},
                      {"created", created_},
                      {"model", model_.id},
                      {"system_fingerprint", "parlance"},
                      {"choices", std::move(choices)},
                      {"usage", usage}};
    cb_.on_done(200, dump(body) + "\n");
}

}  // namespace parlance::server
