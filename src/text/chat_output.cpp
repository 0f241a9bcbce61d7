// ChatOutputParser (see chat_output.h).
#include "text/chat_output.h"

#include <nlohmann/json.hpp>

#include "text/json_depth.h"

namespace parlance {
namespace {

constexpr std::string_view kThinkOpen = "<think>", kThinkClose = "</think>";
constexpr std::string_view kCallOpen = "<tool_call>", kCallClose = "</tool_call>";

// The length of the longest tail of `s` that is a proper prefix of `tag`.
size_t partial_tail(std::string_view s, std::string_view tag) {
    for (size_t n = std::min(tag.size() - 1, s.size()); n > 0; --n)
        if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
    return 0;
}

bool all_space(std::string_view s) {
    return s.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

}  // namespace

ChatOutputParser::ChatOutputParser(ChatOutputOptions options) : o_(options) {
    if (o_.starts_in_reasoning) state_ = State::Reasoning;
    if (!o_.forced_call.empty()) {
        state_ = State::ToolCall;
        call_ = o_.forced_call;
    }
}

void ChatOutputParser::emit(ChatOutputDelta& d, std::string_view text) {
    if (text.empty()) return;
    if (state_ == State::Reasoning) {
        d.reasoning.append(text);
        return;
    }
    if (after_reasoning_) {
        const size_t start = text.find_first_not_of("\r\n");
        if (start == std::string_view::npos) return;
        text.remove_prefix(start);
        after_reasoning_ = false;
    }
    d.content.append(text);
}

void ChatOutputParser::end_tool_call(ChatOutputDelta& d, bool closed) {
    bool ok = false;
    // A call nested past kMaxJsonDepth stays text, as a malformed one does (what is parsed here
    // is dumped, templated and parsed again downstream, each recursing once per level).
    if (closed && json_within_depth(call_)) {
        nlohmann::json j = nlohmann::json::parse(call_, nullptr, /*allow_exceptions=*/false);
        if (j.is_object() && j.contains("name") && j["name"].is_string()) {
            nlohmann::json args = j.contains("arguments") ? j["arguments"] : nlohmann::json::object();
            if (args.is_string()) {
                const std::string text = args.get<std::string>();
                args = json_within_depth(text) ? nlohmann::json::parse(text, nullptr, false) : nlohmann::json();
            }
            if (args.is_object()) {
                d.tool_calls.push_back({j["name"].get<std::string>(), args.dump()});
                ++calls_;
                ok = true;
            }
        }
    }
    if (!ok) {
        ++malformed_;
        std::string raw = std::string(kCallOpen) + call_ + (closed ? std::string(kCallClose) : std::string());
        d.content.append(raw);
    }
    call_.clear();
}

ChatOutputDelta ChatOutputParser::push(std::string_view text) {
    ChatOutputDelta d;
    pending_.append(text);
    for (;;) {
        if (state_ == State::Start) {
            // Reasoning opens only at the very start (after whitespace).
            if (!o_.reasoning) {
                state_ = State::Content;
                continue;
            }
            const size_t start = pending_.find_first_not_of(" \t\r\n");
            if (start == std::string::npos) break;  // only whitespace so far
            std::string_view rest = std::string_view(pending_).substr(start);
            if (rest.substr(0, kThinkOpen.size()) == kThinkOpen) {
                pending_.erase(0, start + kThinkOpen.size());
                state_ = State::Reasoning;
                continue;
            }
            if (rest.size() < kThinkOpen.size() && kThinkOpen.substr(0, rest.size()) == rest) break;  // maybe
            state_ = State::Content;
            continue;
        }
        if (state_ == State::Reasoning) {
            const size_t end = pending_.find(kThinkClose);
            if (end == std::string::npos) {
                const size_t hold = partial_tail(pending_, kThinkClose);
                emit(d, std::string_view(pending_).substr(0, pending_.size() - hold));
                pending_.erase(0, pending_.size() - hold);
                break;
            }
            std::string r = pending_.substr(0, end);
            emit(d, r);
            pending_.erase(0, end + kThinkClose.size());
            state_ = State::Content;
            after_reasoning_ = true;
            continue;
        }
        if (state_ == State::ToolCall) {
            const size_t end = pending_.find(kCallClose);
            if (end == std::string::npos) {
                // The body is kept whole until the call closes (it becomes one tool call).
                const size_t hold = partial_tail(pending_, kCallClose);
                call_.append(pending_, 0, pending_.size() - hold);
                pending_.erase(0, pending_.size() - hold);
                break;
            }
            call_.append(pending_, 0, end);
            pending_.erase(0, end + kCallClose.size());
            end_tool_call(d, true);
            state_ = State::Content;
            continue;
        }
        // Content.
        if (!o_.tool_calls) {
            emit(d, pending_);
            pending_.clear();
            break;
        }
        const size_t open = pending_.find(kCallOpen);
        if (open == std::string::npos) {
            const size_t hold = partial_tail(pending_, kCallOpen);
            emit(d, std::string_view(pending_).substr(0, pending_.size() - hold));
            pending_.erase(0, pending_.size() - hold);
            break;
        }
        std::string before = pending_.substr(0, open);
        // Whitespace between calls is not content.
        if (!all_space(before) || (calls_ == 0 && malformed_ == 0)) emit(d, before);
        pending_.erase(0, open + kCallOpen.size());
        state_ = State::ToolCall;
    }
    return d;
}

ChatOutputDelta ChatOutputParser::finish() {
    ChatOutputDelta d;
    if (state_ == State::Start) state_ = State::Content;
    if (state_ == State::ToolCall) {
        call_.append(pending_);
        pending_.clear();
        end_tool_call(d, false);
        state_ = State::Content;
    }
    emit(d, pending_);
    pending_.clear();
    return d;
}

}  // namespace parlance
