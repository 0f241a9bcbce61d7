// /v1/completions: the request, its prompt and its response writer (see text_completion.h).
#include "server/text_completion.h"

#include "server/api_error.h"
#include "server/chat_completion.h"
#include "server/chat_request.h"
#include "server/json_fields.h"

namespace parlance::server {

using nlohmann::ordered_json;
using namespace fields;

CompletionRequest parse_completion_request(const std::string& body) {
    ordered_json j = parse_object(body);
    static const std::set<std::string> known =
        with_sampling({"model", "prompt", "echo", "stream", "stream_options", "max_tokens", "n", "best_of", "logprobs",
                       "return_tokens_as_token_ids", "suffix", "logit_bias", "user"});
    only_known(j, known);
    CompletionRequest r;
    if (!has(j, "model")) refuse("model", "model is required", "missing_required_parameter");
    r.model = string(j["model"], "model");
    if (!has(j, "prompt")) refuse("prompt", "prompt is required", "missing_required_parameter");
    const ordered_json& p = j["prompt"];
    if (p.is_string()) {
        r.prompt = p.get<std::string>();
        if (r.prompt.empty()) refuse("prompt", "prompt is empty");
    } else if (p.is_array() && !p.empty() && p[0].is_number_integer()) {
        for (size_t i = 0; i < p.size(); ++i)
            r.prompt_ids.push_back(integer(p[i], "prompt[" + std::to_string(i) + "]", 0, INT32_MAX));
    } else if (p.is_array() && p.size() == 1 && p[0].is_string()) {
        r.prompt = p[0].get<std::string>();
    } else {
        refuse("prompt", "prompt must be a string or an array of token ids (one prompt per request)", "invalid_type");
    }
    if (has(j, "suffix")) refuse("suffix", "suffix (insertion) is not supported by this model", "unsupported_value");
    if (has(j, "logit_bias") && !(j["logit_bias"].is_object() && j["logit_bias"].empty()))
        refuse("logit_bias", "logit_bias is not supported yet", "unsupported_value");
    if (has(j, "echo")) r.echo = boolean(j["echo"], "echo");
    if (has(j, "stream")) r.stream = boolean(j["stream"], "stream");
    if (has(j, "stream_options")) {
        const auto& so = j["stream_options"];
        if (!so.is_object()) refuse("stream_options", "stream_options must be an object", "invalid_type");
        if (!r.stream) refuse("stream_options", "stream_options is only allowed with stream: true");
        only_known(so, {"include_usage"}, "stream_options");
        if (has(so, "include_usage")) r.include_usage = boolean(so["include_usage"], "stream_options.include_usage");
    }
    if (has(j, "max_tokens")) r.max_tokens = integer(j["max_tokens"], "max_tokens", 1, 1 << 20);
    read_sampling(j, r.sampling, kMaxStopStrings);
    if (r.sampling.min_tokens > r.max_tokens) refuse("min_tokens", "min_tokens is more than max_tokens");
    if (has(j, "n")) r.n = integer(j["n"], "n", 1, kMaxChoices);
    if (has(j, "best_of") && integer(j["best_of"], "best_of", 1, kMaxChoices) != r.n)
        refuse("best_of", "best_of other than n is not supported");
    if (has(j, "logprobs")) r.logprobs = integer(j["logprobs"], "logprobs", 0, 5);
    if (r.echo && r.logprobs)
        refuse("echo", "echo with logprobs (the prompt's log-probabilities) is not supported yet");
    if (has(j, "return_tokens_as_token_ids"))
        r.return_tokens_as_token_ids = boolean(j["return_tokens_as_token_ids"], "return_tokens_as_token_ids");
    if (has(j, "user")) string(j["user"], "user");
    return r;
}

RunSettings completion_run_settings(const ChatModel& model, const CompletionRequest& req) {
    RunSettings s;
    s.prompt = req.prompt_ids.empty() ? model.tokenizer->encode(req.prompt, /*parse_special=*/true) : req.prompt_ids;
    if (s.prompt.empty()) throw ApiError(400, "the prompt encodes to no tokens", "prompt");
    for (size_t i = 0; i < s.prompt.size(); ++i)
        if (s.prompt[i] >= model.service->model().vocab_size())
            throw ApiError(400, "prompt token id " + std::to_string(s.prompt[i]) + " is outside the vocabulary",
                           "prompt[" + std::to_string(i) + "]");
    s.sampling.max_tokens = fit_context(model, s.prompt.size(), req.max_tokens, "prompt", "max_tokens");
    apply_sampling(req.sampling, model, s);
    s.n = req.n;
    s.logprobs = req.logprobs ? *req.logprobs : -1;
    s.output.reasoning = false;  // raw text: nothing is split out
    s.output.tool_calls = false;
    return s;
}

namespace {

// OpenAI's legacy logprobs: parallel arrays, top_logprobs as {token: logprob} objects.
class CompletionWriter final : public RunSink {
public:
    CompletionWriter(const ChatModel& m, const CompletionRequest& r, std::string id, int64_t created,
                     ResponseCallbacks cb)
        : m_(m), r_(r), id_(std::move(id)), created_(created), cb_(std::move(cb)), choices_(r.n) {
        if (r_.echo) {
            echo_ = r_.prompt_ids.empty() ? r_.prompt : m_.tokenizer->decode(r_.prompt_ids, /*skip_special=*/false);
            for (auto& c : choices_) c.text = echo_;
        }
    }

    void delta(const ChoiceDelta& d) override {
        Choice& c = choices_[d.choice];
        Logprobs lp;
        for (const TokenLogprobs& l : d.logprobs) add_logprob(lp, l, c.offset);
        c.offset += d.content.size();
        if (!r_.stream) {
            c.text += d.content;
            append(c.logprobs, lp);
            return;
        }
        std::string text = d.content;
        if (!c.started && r_.echo) text = echo_ + text;
        c.started = true;
        cb_.on_event(dump(chunk(d.choice, text, r_.logprobs ? lp.json() : ordered_json(nullptr), nullptr)), false, "");
    }

    void choice_end(const ChoiceEnd& e) override {
        Choice& c = choices_[e.choice];
        c.finish = e.reason;
        if (!r_.stream) return;
        std::string text = (!c.started && r_.echo) ? echo_ : std::string();
        c.started = true;
        cb_.on_event(dump(chunk(e.choice, text, nullptr, e.reason)), false, "");
    }

    void end(int prompt, int completion, int cached) override {
        const ordered_json usage = openai_usage(prompt, completion, cached);
        if (r_.stream) {
            ordered_json last = base();
            last["choices"] = ordered_json::array();
            last["usage"] = usage;
            const std::string text = dump(last);
            return cb_.end_openai_stream(r_.include_usage ? &text : nullptr);
        }
        ordered_json choices = ordered_json::array();
        for (size_t i = 0; i < choices_.size(); ++i) {
            const Choice& c = choices_[i];
            choices.push_back({{"text", c.text},
                               {"index", i},
                               {"logprobs", r_.logprobs ? c.logprobs.json() : ordered_json(nullptr)},
                               {"finish_reason", c.finish}});
        }
        ordered_json body = base();
        body["choices"] = std::move(choices);
        body["usage"] = usage;
        cb_.on_done(200, dump(body) + "\n");
    }

    void error(int status, const std::string& message, const std::string& param, const std::string& code) override {
        cb_.on_done(status, ApiError(status, message, param, code).body());
    }

private:
    struct Logprobs {
        ordered_json tokens = ordered_json::array(), token_logprobs = ordered_json::array(),
                     top_logprobs = ordered_json::array(), text_offset = ordered_json::array();
        ordered_json json() const {
            return {{"tokens", tokens},
                    {"token_logprobs", token_logprobs},
                    {"top_logprobs", top_logprobs},
                    {"text_offset", text_offset}};
        }
    };
    struct Choice {
        std::string text, finish;
        Logprobs logprobs;
        size_t offset = 0;
        bool started = false;
    };

    std::string token(int32_t id) const { return logprob_token_name(*m_.tokenizer, id, r_.return_tokens_as_token_ids); }
    void add_logprob(Logprobs& lp, const TokenLogprobs& l, size_t offset) const {
        lp.tokens.push_back(token(l.token));
        lp.token_logprobs.push_back(l.logprob);
        ordered_json top = ordered_json::object();
        for (const auto& [id, v] : l.top) top[token(id)] = v;
        lp.top_logprobs.push_back(std::move(top));
        lp.text_offset.push_back(echo_.size() + offset);
    }
    static void append(Logprobs& to, const Logprobs& from) {
        for (const auto& v : from.tokens) to.tokens.push_back(v);
        for (const auto& v : from.token_logprobs) to.token_logprobs.push_back(v);
        for (const auto& v : from.top_logprobs) to.top_logprobs.push_back(v);
        for (const auto& v : from.text_offset) to.text_offset.push_back(v);
    }
    ordered_json base() const {
        return {{"id", id_},
                {"object", "text_completion"},
                {"created", created_},
                {"model", m_.id},
                {"system_fingerprint", "parlance"}};
    }
    ordered_json chunk(int index, const std::string& text, ordered_json logprobs, ordered_json finish) const {
        ordered_json c = base();
        c["choices"] = ordered_json::array({{{"text", text},
                                             {"index", index},
                                             {"logprobs", std::move(logprobs)},
                                             {"finish_reason", std::move(finish)}}});
        if (r_.include_usage) c["usage"] = nullptr;
        return c;
    }

    const ChatModel& m_;
    CompletionRequest r_;
    std::string id_;
    int64_t created_;
    ResponseCallbacks cb_;
    std::vector<Choice> choices_;
    std::string echo_;
};

}  // namespace

std::shared_ptr<RunSink> make_completion_writer(const ChatModel& model, const CompletionRequest& request,
                                                std::string id, int64_t created, ResponseCallbacks callbacks) {
    return std::make_shared<CompletionWriter>(model, request, std::move(id), created, std::move(callbacks));
}

}  // namespace parlance::server
