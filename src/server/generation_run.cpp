// GenerationRun (see generation_run.h).
#include "server/generation_run.h"

#include <algorithm>
#include <deque>
#include <optional>
#include <random>

#include "core/error.h"
#include "server/api_error.h"
#include "text/incremental_detokenizer.h"
#include "text/stop_strings.h"

namespace parlance::server {

struct GenerationRun::Choice {
    Choice(const Tokenizer& tok, const RunSettings& s)
        : detok(tok, /*skip_special=*/true), stops(s.stop), parser(s.output) {}
    IncrementalDetokenizer detok;
    StopStrings stops;
    ChatOutputParser parser;
    std::deque<TokenLogprobs> pending_logprobs;  // arrived before their tokens, in order
    int generated = 0;
    bool stopped = false;  // a stop string matched
    std::chrono::steady_clock::time_point last_token{};
};

std::string token_bytes_or_empty(const Tokenizer& tok, int32_t id) {
    try {
        return tok.token_bytes(id);
    } catch (const Error&) {
        return {};
    }
}

void ResponseCallbacks::end_openai_stream(const std::string* usage_chunk) const {
    if (usage_chunk) on_event(*usage_chunk, false, "");
    on_event("[DONE]", true, "");
    on_done(200, "");
}

std::string logprob_token_name(const Tokenizer& tok, int32_t id, bool as_ids) {
    return as_ids ? "token_id:" + std::to_string(id) : token_bytes_or_empty(tok, id);
}

void apply_sampling(const fields::Sampling& f, const ChatModel& model, RunSettings& s) {
    s.sampling.min_tokens = f.min_tokens;
    s.sampling.temperature = f.temperature;
    s.sampling.top_k = f.top_k;
    s.sampling.top_p = f.top_p;
    s.sampling.min_p = f.min_p;
    s.sampling.presence_penalty = f.presence_penalty;
    s.sampling.frequency_penalty = f.frequency_penalty;
    s.sampling.repetition_penalty = f.repetition_penalty;
    s.sampling.seed = f.seed ? *f.seed : (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
    if (!f.ignore_eos) s.sampling.stop_ids = model.stop_ids;
    s.stop = f.stop;
    s.priority = f.priority;
}

int fit_context(const ChatModel& model, size_t prompt_tokens, std::optional<int> max_tokens,
                const std::string& prompt_param, const std::string& max_tokens_param) {
    const int room = model.max_context - static_cast<int>(prompt_tokens);
    if (room < 1)
        throw ApiError(400,
                       "this model's maximum context length is " + std::to_string(model.max_context) +
                           " tokens; the prompt takes " + std::to_string(prompt_tokens),
                       prompt_param, "context_length_exceeded");
    if (max_tokens && *max_tokens > room)
        throw ApiError(400,
                       "this model's maximum context length is " + std::to_string(model.max_context) +
                           " tokens; you asked for " + std::to_string(prompt_tokens + *max_tokens) + " (" +
                           std::to_string(prompt_tokens) + " in the prompt, " + std::to_string(*max_tokens) +
                           " in the completion)",
                       max_tokens_param, "context_length_exceeded");
    return max_tokens.value_or(room);
}

GenerationRun::GenerationRun(const ChatModel& model, RunSettings settings, std::shared_ptr<RunSink> sink)
    : model_(model), s_(std::move(settings)), sink_(std::move(sink)) {
    for (int i = 0; i < s_.n; ++i) choices_.push_back(std::make_unique<Choice>(*model_.tokenizer, s_));
}

GenerationRun::~GenerationRun() = default;

void GenerationRun::start(std::shared_ptr<std::atomic<bool>> cancelled) {
    started_ = std::chrono::steady_clock::now();
    ServiceRequest r;
    r.n = s_.n;
    r.request.prompt = s_.prompt;
    r.request.sampling = s_.sampling;
    r.request.constraint = s_.constraint;
    r.request.cancelled = std::move(cancelled);
    r.request.logprobs = s_.logprobs;
    r.request.priority = s_.priority;
    auto self = shared_from_this();
    r.on_token = [self](int choice, int32_t t) { return self->on_token(choice, t); };
    if (s_.logprobs >= 0)
        r.on_logprobs = [self](int choice, const TokenLogprobs& l) {
            self->choices_[choice]->pending_logprobs.push_back(l);
        };
    r.on_done = [self](std::vector<GenerationResult> res, std::exception_ptr e) { self->on_done(std::move(res), e); };
    model_.service->submit(std::move(r));
}

bool GenerationRun::on_token(int index, int32_t token) {
    Choice& c = *choices_[index];
    if (c.stopped) return false;
    ++c.generated;
    if (model_.latency) {
        const auto now = std::chrono::steady_clock::now();
        if (c.generated == 1 && index == 0)
            model_.latency->first_token.observe(std::chrono::duration<double>(now - started_).count());
        else if (c.generated > 1)
            model_.latency->inter_token.observe(std::chrono::duration<double>(now - c.last_token).count());
        c.last_token = now;
    }
    const auto& stops = s_.sampling.stop_ids;
    const bool is_eos =
        std::find(stops.begin(), stops.end(), token) != stops.end() && c.generated > s_.sampling.min_tokens;
    ChoiceDelta d;
    d.choice = index;
    // Each token's log-probabilities arrive before it (a verified draft delivers several first).
    if (!c.pending_logprobs.empty()) {
        if (!is_eos) d.logprobs.push_back(std::move(c.pending_logprobs.front()));
        c.pending_logprobs.pop_front();
    }
    std::string text;
    if (!is_eos) {
        try {
            text = c.detok.push(token);
        } catch (const Error&) {
            // an id without a token: no text (the detokenizer's state is unchanged)
        }
    }
    const std::string shown = c.stops.push(text);
    if (c.stops.matched()) c.stopped = true;
    ChatOutputDelta out = c.parser.push(shown);
    d.reasoning = std::move(out.reasoning);
    d.content = std::move(out.content);
    d.tool_calls = std::move(out.tool_calls);
    if (!d.reasoning.empty() || !d.content.empty() || !d.tool_calls.empty() || !d.logprobs.empty()) sink_->delta(d);
    return !c.stopped;
}

void GenerationRun::on_done(std::vector<GenerationResult> results, std::exception_ptr error) {
    if (error) {
        try {
            std::rethrow_exception(error);
        } catch (const ApiError& e) {
            return sink_->error(e.status, e.what(), e.param, e.code);
        } catch (const Error& e) {
            if (e.kind() == ErrorKind::TooLarge)
                return sink_->error(400, e.what(), "messages", "context_length_exceeded");
            ApiError a = ApiError::from(e);
            return sink_->error(a.status, a.what(), a.param, a.code);
        } catch (const std::exception& e) {
            return sink_->error(500, std::string("internal error: ") + e.what(), "", "");
        }
    }
    if (model_.latency)
        model_.latency->end_to_end.observe(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
    int completion = 0;
    for (size_t i = 0; i < results.size() && i < choices_.size(); ++i) {
        Choice& c = *choices_[i];
        const GenerationResult& r = results[i];
        completion += static_cast<int>(r.tokens.size());
        if (r.state == SeqState::FinishedTimeout)
            return sink_->error(504, "the completion ran past its deadline", "", "timeout");
        // What was held back: an unfinished character, a tail that was not a stop string, an open tag.
        std::string tail;
        if (!c.stopped) {
            tail = c.stops.push(c.detok.flush());
            tail += c.stops.flush();
        }
        ChatOutputDelta a = c.parser.push(tail);
        ChatOutputDelta b = c.parser.finish();
        ChoiceDelta d;
        d.choice = static_cast<int>(i);
        d.reasoning = a.reasoning + b.reasoning;
        d.content = a.content + b.content;
        d.tool_calls = std::move(a.tool_calls);
        for (auto& t : b.tool_calls) d.tool_calls.push_back(std::move(t));
        if (!d.reasoning.empty() || !d.content.empty() || !d.tool_calls.empty()) sink_->delta(d);
        ChoiceEnd e;
        e.choice = static_cast<int>(i);
        e.tokens = static_cast<int>(r.tokens.size());
        if (c.stopped) {
            e.reason = "stop";
            e.stop_sequence = c.stops.which();
        } else {
            e.reason = r.state == SeqState::FinishedLength ? "length" : "stop";  // aborted: the client is gone
        }
        if (c.parser.tool_calls() > 0 && e.reason == "stop" && e.stop_sequence.empty()) e.reason = "tool_calls";
        sink_->choice_end(e);
    }
    sink_->end(static_cast<int>(s_.prompt.size()), completion, results.empty() ? 0 : results[0].cached_prompt_tokens);
}

}  // namespace parlance::server
