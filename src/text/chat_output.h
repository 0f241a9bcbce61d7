// Splits a chat model's streamed output into what OpenAI's API returns separately: reasoning
// (`<think>...</think>`, into reasoning_content), content, and tool calls in the Hermes/Qwen
// format (`<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`). Tags split across
// tokens are recognised: a tail that could be the start of a tag is held back. A tool call whose
// body is not a JSON object with a string "name" is never turned into a call: its text stays in
// the content and it is counted as malformed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace parlance {

struct ParsedToolCall {
    std::string name;
    std::string arguments;  // a JSON object, serialised (OpenAI sends arguments as a string)
};

struct ChatOutputDelta {
    std::string reasoning;
    std::string content;
    std::vector<ParsedToolCall> tool_calls;  // calls completed by this piece of text
    bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

struct ChatOutputOptions {
    bool reasoning = true;             // recognise <think>...</think> at the start
    bool starts_in_reasoning = false;  // the prompt already opened <think>
    bool tool_calls = false;           // recognise <tool_call> blocks (the request has tools)
    // The prompt already opened a tool call with this text (tool_choice required or named:
    // "\n{\"name\": \"" ...): the output continues its body.
    std::string forced_call;
};

class ChatOutputParser {
public:
    explicit ChatOutputParser(ChatOutputOptions options);
    ChatOutputDelta push(std::string_view text);
    // The end of the output: held-back text, an unfinished reasoning block (as reasoning) or
    // tool call (as content, malformed).
    ChatOutputDelta finish();
    int malformed_tool_calls() const { return malformed_; }
    int tool_calls() const { return calls_; }

private:
    enum class State { Start, Content, Reasoning, ToolCall };
    void emit(ChatOutputDelta& d, std::string_view text);
    void end_tool_call(ChatOutputDelta& d, bool closed);

    ChatOutputOptions o_;
    State state_ = State::Start;
    std::string pending_;           // text not yet classified (may hold a tag's start)
    std::string call_;              // the body of the open tool call
    bool after_reasoning_ = false;  // strip the blank lines that follow </think>
    int malformed_ = 0, calls_ = 0;
};

}  // namespace parlance
