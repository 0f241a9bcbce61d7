// DraftModel (see draft_model.h). One propose() runs k draft steps: the first computes what each
// sequence's draft cache lacks (its whole prompt the first time, else the tokens accepted since)
// and takes the argmax after the last; each further step feeds the previous proposal.
#include "engine/draft_model.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "core/error.h"
#include "core/step_batch.h"
#include "decoding/logits.h"
#include "text/tokenizer.h"

namespace parlance {

namespace {

std::optional<std::string> bytes_of(const Tokenizer& t, int32_t id) {
    try {
        return t.token_bytes(id);
    } catch (const Error&) {
        return std::nullopt;  // a hole in the ids
    }
}

std::string shown(const Tokenizer& t, int32_t id) {
    const auto b = bytes_of(t, id);
    if (!b) return "none";
    return std::string(t.is_special(id) ? "special " : "") + "'" + *b + "'";
}

}  // namespace

void check_draft_compatible(const LanguageModel& target, const LanguageModel& draft) {
    const Tokenizer& a = target.tokenizer();
    const Tokenizer& b = draft.tokenizer();
    auto refuse = [](const std::string& why) {
        throw Error(ErrorKind::InvalidModel, "the draft model cannot draft for this model: " + why);
    };
    if (a.vocab_size() != b.vocab_size())
        refuse("its tokenizer has " + std::to_string(b.vocab_size()) + " tokens, the model's " +
               std::to_string(a.vocab_size()));
    if (draft.vocab_size() < static_cast<int>(a.vocab_size()))
        refuse("it has " + std::to_string(draft.vocab_size()) + " logits per row for " +
               std::to_string(a.vocab_size()) + " tokens");
    for (size_t i = 0; i < a.vocab_size(); ++i) {
        const auto id = static_cast<int32_t>(i);
        if (bytes_of(a, id) != bytes_of(b, id) || a.is_special(id) != b.is_special(id))
            refuse("its token " + std::to_string(id) + " is " + shown(b, id) + ", the model's " + shown(a, id));
    }
    if (target.stop_ids() != draft.stop_ids()) refuse("its end-of-sequence ids differ");
}

DraftModel::DraftModel(LanguageModel& model, Backend& backend, size_t kv_cache_bytes, int block_size)
    : model_(model),
      backend_(backend),
      kv_(kv_blocks_within(kv_cache_bytes, model.kv_spec(), block_size, "the draft model's KV cache cap"), block_size),
      storage_(model.kv_spec(), static_cast<int64_t>(kv_.num_blocks()) * block_size, backend) {}

std::vector<std::vector<int32_t>> DraftModel::propose(std::span<const Ask> asks, int k) {
    std::vector<std::vector<int32_t>> out(asks.size());
    // What each sequence feeds this draft step: its uncomputed tokens, then its last proposal.
    struct Live {
        size_t ask;
        std::vector<int32_t> feed;
        int start;
        int want;
    };
    std::vector<Live> live;
    std::vector<BlockCopy> copies;
    for (size_t i = 0; i < asks.size(); ++i) {
        const Ask& a = asks[i];
        const int want = std::min(k, a.max_draft);
        if (want <= 0 || a.tokens.empty()) continue;
        const int n = static_cast<int>(a.tokens.size());
        if (n + want > model_.max_context()) continue;
        auto c = computed_.find(a.id);
        if (c == computed_.end()) {
            c = computed_.emplace(a.id, kv_.open(a.id, a.tokens, a.cache_key)).first;
        } else if (c->second > n) {  // cannot happen after settle(); keep the cache honest anyway
            kv_.truncate(a.id, n);
            c->second = n;
        }
        // kv_.open leaves the last token to compute; a settled sequence has at least one new one.
        int start = c->second;
        if (start >= n) {
            start = n - 1;
            kv_.truncate(a.id, start);
            c->second = start;
        }
        std::vector<int32_t> feed(a.tokens.begin() + start, a.tokens.end());
        if (!kv_.append(a.id, feed, copies)) {  // no room: no draft for it this time
            drop(a.id);
            continue;
        }
        live.push_back({i, std::move(feed), start, want});
    }
    for (int step = 0; step < k && !live.empty(); ++step) {
        storage_.copy_blocks(copies, kv_.block_size(), backend_);
        copies.clear();
        std::vector<StepSpan> spans;
        for (const Live& l : live) spans.push_back({asks[l.ask].id, l.start, l.feed, true});
        StepBatch b = build_step_batch(spans, kv_);
        model_.forward(b, storage_, logits_);
        ++steps_;
        const size_t V = static_cast<size_t>(model_.vocab_size());
        std::vector<Live> next;
        for (size_t j = 0; j < live.size(); ++j) {
            Live& l = live[j];
            const SeqId id = asks[l.ask].id;
            const int end = l.start + static_cast<int>(l.feed.size());
            kv_.computed(id, end);
            computed_[id] = end;
            const int32_t t = argmax(std::span<const float>(logits_.data() + j * V, V));
            out[l.ask].push_back(t);
            if (static_cast<int>(out[l.ask].size()) >= l.want) continue;
            // Feed the proposal next step (its cell reserved now; released if rejected).
            std::vector<int32_t> f{t};
            if (!kv_.append(id, f, copies)) continue;
            next.push_back({l.ask, std::move(f), end, l.want});
        }
        live = std::move(next);
    }
    return out;
}

void DraftModel::settle(SeqId id, int valid) {
    auto c = computed_.find(id);
    if (c == computed_.end()) return;
    const int keep = std::min(valid, c->second);
    if (kv_.length(id) > keep) kv_.truncate(id, keep);
    c->second = keep;
}

void DraftModel::drop(SeqId id) {
    if (kv_.has(id)) kv_.free(id);
    computed_.erase(id);
}

}  // namespace parlance
