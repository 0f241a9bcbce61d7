// One request's generation on the chat model, whatever API asked for it (OpenAI chat or text
// completions, Anthropic messages): n choices of a tokenized prompt on the GenerationService,
// each choice's tokens turned into text (incremental detokenizer, stop strings held back and
// cut, reasoning and tool calls split out by text/chat_output), reported to a RunSink that
// writes the API's own response shape.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/generation_service.h"
#include "server/json_fields.h"
#include "server/latency_histogram.h"
#include "text/chat_output.h"
#include "text/chat_template.h"
#include "text/grammar_constraint.h"
#include "text/tokenizer.h"

namespace parlance::server {

// What the server knows of its chat model.
struct ChatModel {
    std::string id;  // the `model` clients send
    GenerationService* service = nullptr;
    const ChatTemplate* chat_template = nullptr;
    const Tokenizer* tokenizer = nullptr;
    std::vector<int32_t> stop_ids;
    int max_context = 0;
    GenerationLatency* latency = nullptr;  // where runs record their latencies (optional)
    // The vocabulary as code points, for structured output (null: response formats refused).
    std::shared_ptr<const GrammarVocabulary> grammar_vocabulary;
    // What a request's structured-output schemas may ask for (serve --schema-*).
    SchemaLimits schema_limits;
};

struct RunSettings {
    std::vector<int32_t> prompt;
    SamplingParams sampling;  // stop_ids set unless the request ignores end-of-sequence
    int n = 1;
    int logprobs = -1;                                  // as GenerationRequest::logprobs
    std::vector<std::string> stop;                      // stop strings
    ChatOutputOptions output;                           // reasoning / tool-call parsing
    std::shared_ptr<const TokenConstraint> constraint;  // structured output (each choice its copy)
    Priority priority = Priority::Interactive;          // from service_tier
};

// How a writer's output reaches the HTTP connection.
struct ResponseCallbacks {
    // A streamed event's JSON (without "data: "); the last is "[DONE]", with last = true.
    // `event` names it for APIs with typed events (Anthropic's "event: ..." line), else empty.
    std::function<void(std::string json, bool last, std::string event)> on_event;
    // Once: status and body (200 + the response, or an error body); for a stream, 200 and an
    // empty body after the last event, or an error the caller sends as the stream's last event.
    std::function<void(int status, std::string body)> on_done;

    // The end of an OpenAI stream: the usage chunk (when the request asked for it: the caller's
    // last chunk, else none), "[DONE]", then on_done(200).
    void end_openai_stream(const std::string* usage_chunk) const;
};

// A piece of one choice's output.
struct ChoiceDelta {
    int choice = 0;
    std::string reasoning, content;
    std::vector<ParsedToolCall> tool_calls;
    std::vector<TokenLogprobs> logprobs;  // the tokens this piece came from (end-of-sequence excluded)
};

struct ChoiceEnd {
    int choice = 0;
    std::string reason;         // "stop", "length" or "tool_calls"
    std::string stop_sequence;  // the stop string that ended it, if one did
    int tokens = 0;             // generated (an end-of-sequence token included)
};

// The response writer of one API. Called on the engine thread, in order: deltas and choice ends
// as they happen, then end() or error() once.
class RunSink {
public:
    virtual ~RunSink() = default;
    virtual void delta(const ChoiceDelta& d) = 0;
    virtual void choice_end(const ChoiceEnd& e) = 0;
    virtual void end(int prompt_tokens, int completion_tokens, int cached_tokens) = 0;
    virtual void error(int status, const std::string& message, const std::string& param, const std::string& code) = 0;
};

class GenerationRun : public std::enable_shared_from_this<GenerationRun> {
public:
    GenerationRun(const ChatModel& model, RunSettings settings, std::shared_ptr<RunSink> sink);
    ~GenerationRun();
    // Submits (Error(Overloaded) when the service's queue is full). `cancelled` is the client's.
    void start(std::shared_ptr<std::atomic<bool>> cancelled);

    struct Choice;

private:
    bool on_token(int choice, int32_t token);
    void on_done(std::vector<GenerationResult> results, std::exception_ptr error);

    const ChatModel& model_;
    std::chrono::steady_clock::time_point started_;
    RunSettings s_;
    std::shared_ptr<RunSink> sink_;
    std::vector<std::unique_ptr<Choice>> choices_;
};

// Fills the sampling parameters (all but max_tokens), the end-of-sequence ids (unless the request
// ignores them) and the stop strings; without a seed every request draws its own.
void apply_sampling(const fields::Sampling& f, const ChatModel& model, RunSettings& s);

// Checks that the prompt and max_tokens fit the model's context (ApiError 400
// context_length_exceeded naming `max_tokens_param` or `prompt_param`); returns max_tokens, or
// the room left when the request gave none.
int fit_context(const ChatModel& model, size_t prompt_tokens, std::optional<int> max_tokens,
                const std::string& prompt_param, const std::string& max_tokens_param);

// A token's bytes, or none for an id the tokenizer lacks (Qwen3's embedding has 151,936 rows for
// 151,669 tokens).
std::string token_bytes_or_empty(const Tokenizer& tok, int32_t id);
// How a logprobs entry names a token: its text, or "token_id:N" when the request asked for ids
// (vLLM's return_tokens_as_token_ids).
std::string logprob_token_name(const Tokenizer& tok, int32_t id, bool as_ids);

}  // namespace parlance::server
