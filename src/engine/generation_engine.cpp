// The language-model step loop (see generation_engine.h). One concern, past 500 lines: a step's
// schedule, batch, forward, sampling and bookkeeping read in order, in one place.
#include "engine/generation_engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "engine/ngram_draft.h"
#include "engine/sampler.h"

namespace parlance {
namespace {

// Log-softmax of `row` at `token`, and the `top` most likely ids (in double: a 151,936-wide sum).
TokenLogprobs token_logprobs(std::span<const float> row, int32_t token, int top) {
    float m = -std::numeric_limits<float>::infinity();
    for (float x : row) m = std::max(m, x);
    double sum = 0.0;
    for (float x : row) sum += std::exp(static_cast<double>(x) - m);
    const double lse = m + std::log(sum);
    TokenLogprobs t;
    t.token = token;
    t.logprob = static_cast<float>(row[token] - lse);
    if (top > 0) {
        std::vector<int32_t> idx(row.size());
        std::iota(idx.begin(), idx.end(), 0);
        const size_t k = std::min<size_t>(top, idx.size());
        std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                          [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
        for (size_t i = 0; i < k; ++i) t.top.emplace_back(idx[i], static_cast<float>(row[idx[i]] - lse));
    }
    return t;
}

}  // namespace

namespace {

KvSpec cache_spec(const LanguageModel& model, const GenerationEngineOptions& o) {
    if (o.kv_type != GGML_TYPE_F32 && o.kv_type != GGML_TYPE_F16)
        throw Error(ErrorKind::InvalidArgument, "the KV cache stores f32 or f16 cells");
    KvSpec spec = model.kv_spec();
    spec.type = o.kv_type;
    return spec;
}

}  // namespace

GenerationEngine::GenerationEngine(LanguageModel& model, Backend& backend, const GenerationEngineOptions& options)
    : model_(model),
      backend_(backend),
      o_(options),
      kv_(kv_blocks_within(options.kv_cache_bytes, cache_spec(model, options), options.block_size, "the KV cache cap"),
          options.block_size),
      storage_(cache_spec(model, options), static_cast<int64_t>(kv_.num_blocks()) * options.block_size, backend),
      scheduler_(kv_, SchedulerOptions{options.max_running, options.token_budget, model.max_context(),
                                       options.prompt_gather_steps}) {
    if (o_.draft_model && o_.speculative_draft > 0) {
        check_draft_compatible(model_, *o_.draft_model);
        draft_ = std::make_unique<DraftModel>(*o_.draft_model, o_.draft_backend ? *o_.draft_backend : backend_,
                                              o_.draft_kv_cache_bytes, o_.block_size);
    }
}

SeqId GenerationEngine::submit(GenerationRequest r) {
    if (r.prompt.empty()) throw Error(ErrorKind::InvalidArgument, "the prompt is empty");
    for (int32_t t : r.prompt)
        if (t < 0 || t >= model_.vocab_size())
            throw Error(ErrorKind::InvalidArgument, "prompt token id " + std::to_string(t) +
                                                        " is outside the vocabulary of " +
                                                        std::to_string(model_.vocab_size()));
    for (const EmbeddingSpan& e : r.spans)
        if (e.position < 0 || e.rows < 0 || e.position + e.rows > static_cast<int>(r.prompt.size()) ||
            e.data.size() != static_cast<size_t>(e.rows) * model_.hidden_size())
            throw Error(ErrorKind::InvalidArgument, "an embedding span does not fit the prompt or the model's width");
    auto s = std::make_unique<Sequence>();
    s->id = next_id_++;
    s->priority = r.priority;
    s->tokens = r.prompt;
    s->prompt_length = static_cast<int>(r.prompt.size());
    s->sampling = r.sampling;
    s->spans = std::move(r.spans);
    s->deadline = r.deadline;
    s->cancelled = r.cancelled;
    // Embeddings or a model state make tokens mean something else: such prompts never share
    // cached blocks, and their blocks, which nothing could find, go back to the pool unhashed.
    s->model_state = std::move(r.model_state);
    s->cache_key = s->spans.empty() && !s->model_state ? r.cache_key : kPrivateBlocks;
    if (r.search) {
        // The search's slots 0..n-1 are KV sequences of their own (search_sequences).
        const SearchOptions& so = *r.search;
        const bool beams = is_beam_search(so);
        auto g = std::make_shared<SearchGroup>();
        std::vector<int> numbers;
        for (int i = 0; i < search_sequences(so); ++i) {
            numbers.push_back(i);
            g->slots.push_back(next_id_++);
        }
        g->search = make_search(std::vector<int>(r.prompt.begin(), r.prompt.end()), numbers, so);
        g->worst_blocks = search_worst_blocks(beams ? so.num_beams : 1,
                                              static_cast<int64_t>(r.prompt.size()) + std::max(0, so.max_new_tokens));
        if (r.prompt_row >= static_cast<int>(r.prompt.size()))
            throw Error(ErrorKind::InvalidArgument, "prompt_row lies past the prompt");
        g->prompt_row = r.prompt_row;
        s->group = std::move(g);
        s->sampling.max_tokens = so.max_new_tokens;
        s->cache_key = kPrivateBlocks;
    }
    const SeqId id = s->id;
    scheduler_.add_request(std::move(s));
    extra_[id] = Extra{std::move(r.on_token),
                       std::move(r.on_logits),
                       std::min(r.logprobs, kMaxTopLogprobs),
                       std::move(r.on_logprobs),
                       -1,
                       r.constraint ? r.constraint->clone() : nullptr,
                       std::move(r.expected)};
    return id;
}

StepBatch GenerationEngine::build_batch(const SchedulerOutput& out) const {
    std::vector<StepSpan> spans;
    std::vector<const void*> states;
    for (const ScheduledSeq& it : out.items) {
        if (const SearchGroup* g = it.seq->group.get()) {
            // Every live hypothesis of the search: its slot's tokens, its logits.
            for (const StepInput& in : g->inputs) {
                spans.push_back({g->slots.at(static_cast<size_t>(in.slot)), in.n_past,
                                 std::span<const int32_t>(in.tokens.data(), in.tokens.size()), true});
                states.push_back(it.seq->model_state.get());
            }
            continue;
        }
        spans.push_back(
            {it.seq->id, it.start, std::span<const int32_t>(it.seq->tokens.data() + it.start, it.n), it.sample});
        states.push_back(it.seq->model_state.get());
    }
    StepBatch b = build_step_batch(spans, kv_);
    for (size_t i = 0; i < states.size(); ++i) b.segments[i].state = states[i];
    int row = 0;
    for (const ScheduledSeq& it : out.items) {
        for (const EmbeddingSpan& e : it.seq->spans) {
            const int lo = std::max(e.position, it.start), hi = std::min(e.position + e.rows, it.start + it.n);
            if (lo < hi)
                b.embeddings.push_back({row + (lo - it.start), hi - lo,
                                        e.data.data() + static_cast<size_t>(lo - e.position) * model_.hidden_size()});
        }
        row += it.n;
    }
    return b;
}

GenerationResult GenerationEngine::result_of(Sequence& s) {
    GenerationResult r;
    r.id = s.id;
    r.prompt.assign(s.tokens.begin(), s.tokens.begin() + s.prompt_length);
    r.tokens.assign(s.tokens.begin() + s.prompt_length, s.tokens.end());
    r.state = s.state;
    auto it = extra_.find(s.id);
    if (it != extra_.end()) {
        r.cached_prompt_tokens = std::max(0, it->second.cached);
        r.steps = it->second.steps;
        r.draft_tokens = it->second.draft_tokens;
        r.draft_accepted = it->second.draft_accepted;
        extra_.erase(it);
    }
    if (s.group) {
        r.prompt_logits = std::move(s.group->prompt_logits);
        r.tokens.assign(s.group->result.tokens.begin(), s.group->result.tokens.end());
        r.sum_logprob = s.group->result.sum_logprob;
        r.score = s.group->result.score;
    }
    if (draft_) draft_->drop(s.id);
    return r;
}

namespace {

// The rest of `expected` (up to `room` tokens) while the sequence's generated tokens are its
// start; at the first disagreement it is dropped.
std::vector<int32_t> follow_expected(const Sequence& s, std::vector<int32_t>& expected, int room) {
    const size_t g = static_cast<size_t>(s.generated());
    if (g >= expected.size() || !std::equal(s.tokens.begin() + s.prompt_length, s.tokens.end(), expected.begin())) {
        expected.clear();
        return {};
    }
    const size_t n = std::min(expected.size() - g, static_cast<size_t>(room));
    return {expected.begin() + static_cast<std::ptrdiff_t>(g), expected.begin() + static_cast<std::ptrdiff_t>(g + n)};
}

}  // namespace

// Appends a draft (the request's expected tokens while they hold, else the draft model's or a
// prompt lookup's) to every decoding sequence that can take one: not one with a repetition
// penalty (its logits depend on the tokens before in a way drafts would change), an output
// constraint, or embeddings for a draft model (it cannot see them).
void GenerationEngine::propose_drafts() {
    const int k = draft_ ? o_.speculative_draft : o_.speculative_ngram;
    std::vector<Sequence*> seqs;
    std::vector<DraftModel::Ask> asks;
    for (Sequence* s : scheduler_.running_sequences()) {
        if (s->group || static_cast<int>(s->tokens.size()) - s->num_computed != 1 ||
            s->sampling.repetition_penalty != 1.0f)
            continue;
        auto e = extra_.find(s->id);
        if (e != extra_.end() && e->second.constraint) continue;
        const int space = std::min(s->sampling.max_tokens - s->generated() - 1,
                                   model_.max_context() - static_cast<int>(s->tokens.size()) - 1);
        if (space <= 0) continue;
        if (e != extra_.end() && !e->second.expected.empty()) {
            std::vector<int32_t> d = follow_expected(*s, e->second.expected, space);
            if (!d.empty()) {
                s->tokens.insert(s->tokens.end(), d.begin(), d.end());
                s->draft = static_cast<int>(d.size());
                continue;
            }
        }
        const int room = std::min(k, space);
        if (room <= 0) continue;
        if (!draft_) {
            std::vector<int32_t> d = ngram_draft(s->tokens, room);
            if (d.empty()) continue;
            s->tokens.insert(s->tokens.end(), d.begin(), d.end());
            s->draft = static_cast<int>(d.size());
            continue;
        }
        if (!s->spans.empty()) continue;
        seqs.push_back(s);
        asks.push_back({s->id, s->tokens, s->cache_key, room});
    }
    if (!draft_ || asks.empty()) return;
    const std::vector<std::vector<int32_t>> d = draft_->propose(asks, k);
    for (size_t i = 0; i < seqs.size(); ++i) {
        if (d[i].empty()) continue;
        seqs[i]->tokens.insert(seqs[i]->tokens.end(), d[i].begin(), d[i].end());
        seqs[i]->draft = static_cast<int>(d[i].size());
    }
}

int32_t GenerationEngine::choose_constrained(std::span<float> row, const Sequence& s, std::span<const int32_t> tokens,
                                             TokenConstraint& c) {
    int32_t t = -1;
    if (s.sampling.temperature <= 0.0f) {
        // Greedy: the unconstrained argmax is the constrained one whenever it is allowed, which
        // spares masking the whole vocabulary on most steps.
        constrained_row_.assign(row.begin(), row.end());
        t = sample_next(row, s.sampling, tokens, s.prompt_length);
        if (c.allows(t)) {
            c.accept(t);
            return t;
        }
        std::copy(constrained_row_.begin(), constrained_row_.end(), row.begin());
    }
    c.mask(row);
    t = sample_next(row, s.sampling, tokens, s.prompt_length);
    if (!c.allows(t)) {
        // Nothing allowed survived (min_tokens suppressing the end the constraint requires):
        // the sequence ends rather than break its constraint.
        if (s.sampling.stop_ids.empty() || !c.allows(s.sampling.stop_ids.front()))
            throw Error(ErrorKind::Internal, "the output constraint left no token to generate");
        t = s.sampling.stop_ids.front();
    }
    c.accept(t);
    return t;
}

std::vector<GenerationResult> GenerationEngine::step() {
    std::vector<GenerationResult> done;
    propose_drafts();
    SchedulerOutput out = scheduler_.schedule();
    for (auto& s : out.finished) done.push_back(result_of(*s));
    stats_.preemptions += out.preempted;
    // A draft whose sequence got no room in this step is withdrawn (preempted and finished ones
    // the scheduler withdrew).
    {
        std::vector<Sequence*> in_step;
        for (const ScheduledSeq& it : out.items) in_step.push_back(it.seq);
        for (Sequence* s : scheduler_.running_sequences())
            if (s->draft > 0 && std::find(in_step.begin(), in_step.end(), s) == in_step.end()) {
                s->tokens.erase(s->tokens.end() - s->draft, s->tokens.end());  // (resize: a g++ 12 false warning)
                s->draft = 0;
                if (draft_) draft_->settle(s->id, static_cast<int>(s->tokens.size()));
            }
    }
    if (out.items.empty()) return done;
    for (const ScheduledSeq& it : out.items) {
        Extra& e = extra_[it.seq->id];
        if (e.cached < 0) e.cached = it.start;  // the first schedule starts after the cached prefix
        ++e.steps;
    }
    storage_.copy_blocks(out.copies, kv_.block_size(), backend_);
    StepBatch batch = build_batch(out);
    // A drafted sequence needs the logits of every row: row i verifies draft token i.
    bool any_draft = false;
    for (const ScheduledSeq& it : out.items) any_draft = any_draft || it.seq->draft > 0;
    if (any_draft) {
        batch.outputs.clear();
        int row = 0;
        for (const ScheduledSeq& it : out.items) {
            if (it.seq->draft > 0) {
                for (int i = 0; i < it.n; ++i) batch.outputs.push_back(row + i);
            } else if (it.seq->group) {
                int end = row;
                for (const StepInput& in : it.seq->group->inputs) {
                    end += static_cast<int>(in.tokens.size());
                    batch.outputs.push_back(end - 1);
                }
            } else if (it.sample) {
                batch.outputs.push_back(row + it.n - 1);
            }
            row += it.n;
        }
    }
    add_prompt_rows(out, batch);
    // Prompt chunks only: the step still writes their K/V; one row of logits is asked and ignored.
    if (batch.outputs.empty()) batch.outputs.push_back(0);
    // Rows whose choice is the plain argmax (greedy, no penalty, processor, constraint or
    // log-probabilities asked, past min_tokens): the model may take it where the logits are.
    greedy_rows_.assign(batch.outputs.size(), 0);
    {
        std::vector<const ScheduledSeq*> owner(static_cast<size_t>(batch.n_tokens()), nullptr);
        int row = 0;
        for (const ScheduledSeq& it : out.items) {
            for (int i = 0; i < it.n && row + i < static_cast<int>(owner.size()); ++i) owner[row + i] = &it;
            row += it.n;
        }
        for (size_t i = 0; i < batch.outputs.size(); ++i) {
            const ScheduledSeq* it = owner.at(static_cast<size_t>(batch.outputs[i]));
            if (!it || it->seq->group) continue;
            const Sequence& s = *it->seq;
            const SamplingParams& p = s.sampling;
            if (p.temperature > 0.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f ||
                p.repetition_penalty != 1.0f || s.generated() - s.draft < p.min_tokens)
                continue;
            const auto ex = extra_.find(s.id);
            if (ex != extra_.end()) {
                const Extra& e = ex->second;
                if (e.on_logits || (e.logprobs >= 0 && e.on_logprobs) || e.constraint) continue;
            }
            greedy_rows_[i] = 1;
        }
    }
    const auto forward_start = std::chrono::steady_clock::now();
    const double computed_before = backend_.compute_seconds();  // (the backend may compute others' graphs too)
    model_.forward(batch, storage_, logits_, greedy_rows_, argmax_);
    stats_.forward_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - forward_start).count();
    stats_.compute_seconds += backend_.compute_seconds() - computed_before;
    const size_t V = static_cast<size_t>(model_.vocab_size());
    size_t k = 0;  // logits row
    // Picks the token of one row for `s`, as if its tokens were its first `known` ones.
    auto choose = [&](Sequence& s, Extra* e, size_t known) {
        if (k < argmax_.size() && argmax_[k] >= 0) return argmax_[k++];  // a greedy row (greedy_rows_)
        std::span<float> row(logits_.data() + k * V, V);
        ++k;
        if (e && e->on_logits) e->on_logits(row);
        const bool want_logprobs = e && e->logprobs >= 0 && e->on_logprobs;
        if (want_logprobs) raw_row_.assign(row.begin(), row.end());  // sampling changes the row
        const std::span<const int32_t> tokens(s.tokens.data(), known);
        int32_t t;
        if (TokenConstraint* c = e ? e->constraint.get() : nullptr) {
            t = choose_constrained(row, s, tokens, *c);
        } else {
            t = sample_next(row, s.sampling, tokens, s.prompt_length);
        }
        if (want_logprobs) e->on_logprobs(token_logprobs(raw_row_, t, e->logprobs));
        return t;
    };
    std::vector<int32_t> sampled;
    std::vector<std::vector<int32_t>> emitted(out.items.size());
    for (size_t j = 0; j < out.items.size(); ++j) {
        ScheduledSeq& it = out.items[j];
        Sequence& s = *it.seq;
        auto ex = extra_.find(s.id);
        Extra* e = ex != extra_.end() ? &ex->second : nullptr;
        if (s.group) {
            consume_group(s, k);
            continue;
        }
        if (s.draft == 0) {
            if (!it.sample) continue;
            emitted[j].push_back(choose(s, e, s.tokens.size()));
            sampled.push_back(emitted[j].back());
            continue;
        }
        // Verify the draft: row i's token is what decoding would have produced after the real
        // tokens and drafts 0..i-1; keep drafts while they agree, then the first disagreeing
        // (or the next) token. A stop token or max_tokens ends it where decoding would have.
        const size_t base = s.tokens.size() - static_cast<size_t>(s.draft);  // real tokens
        int accepted = 0;
        for (int i = 0; i < it.n; ++i) {
            const int32_t t = choose(s, e, base + static_cast<size_t>(i));
            emitted[j].push_back(t);
            const auto& stops = s.sampling.stop_ids;
            const bool stop = std::find(stops.begin(), stops.end(), t) != stops.end();
            const int generated = static_cast<int>(base) + i + 1 - s.prompt_length;
            const bool full =
                generated >= s.sampling.max_tokens || static_cast<int>(base) + i + 1 >= model_.max_context();
            if (stop || full || i + 1 >= it.n || i >= s.draft || t != s.tokens[base + static_cast<size_t>(i)]) break;
            ++accepted;
        }
        k += static_cast<size_t>(it.n - static_cast<int>(emitted[j].size()));  // rows left unread
        stats_.draft_tokens += static_cast<uint64_t>(s.draft);
        stats_.draft_accepted += static_cast<uint64_t>(accepted);
        if (e) {
            e->draft_tokens += s.draft;
            e->draft_accepted += accepted;
        }
        // The accepted drafts are tokens now; the last emitted token goes through the scheduler
        // as a decode's sampled token, and the rejected drafts' cells are released.
        s.tokens.resize(base + static_cast<size_t>(accepted));
        s.draft = 0;
        if (draft_) draft_->settle(s.id, static_cast<int>(s.tokens.size()));
        it.n = 1 + accepted;
        it.sample = true;
        kv_.truncate(s.id, it.start + it.n);
        sampled.push_back(emitted[j].back());
    }
    stats_.steps++;
    stats_.tokens_computed += out.tokens;
    for (const auto& v : emitted) stats_.tokens_generated += v.size();
    for (size_t j = 0; j < out.items.size(); ++j) {
        auto e = extra_.find(out.items[j].seq->id);
        if (e == extra_.end() || !e->second.on_token) continue;
        for (int32_t t : emitted[j]) e->second.on_token(t);
    }
    for (auto& s : scheduler_.update_from_output(out, sampled)) done.push_back(result_of(*s));
    return done;
}

namespace {

// A search's view of its KV sequences: a reorder of its beams forks blocks (copy on write of a
// shared partial block when next written) instead of copying a prefix.
class GroupSlots final : public StepModel {
public:
    GroupSlots(KvCacheManager& kv, const SearchGroup& g, int vocab) : kv_(kv), g_(g), vocab_(vocab) {}
    int vocab_size() const override { return vocab_; }
    std::vector<std::vector<float>> step(std::span<const StepInput>) override {
        throw Error(ErrorKind::Internal, "a search on the engine runs in the engine's steps");
    }
    void copy_slot(int from, int to, int n) override {
        kv_.copy_prefix(g_.slots.at(static_cast<size_t>(from)), g_.slots.at(static_cast<size_t>(to)), n);
    }

private:
    KvCacheManager& kv_;
    const SearchGroup& g_;
    int vocab_;
};

}  // namespace

void GenerationEngine::add_prompt_rows(const SchedulerOutput& out, StepBatch& batch) {
    int row = 0;  // the item's first token in the batch
    bool added = false;
    for (const ScheduledSeq& it : out.items) {
        SearchGroup* g = it.seq->group.get();
        if (g) g->prompt_row_in_step = false;
        if (g && g->prompt_row >= 0 && g->prompt_logits.empty()) {
            int at = row;
            for (const StepInput& in : g->inputs) {
                // The prompt's step: slot 0 from position 0 (a group runs its prompt whole).
                if (in.slot == 0 && in.n_past == 0 && static_cast<int>(in.tokens.size()) > g->prompt_row) {
                    batch.outputs.push_back(at + g->prompt_row);
                    g->prompt_row_in_step = added = true;
                }
                at += static_cast<int>(in.tokens.size());
            }
        }
        row += it.n;
    }
    // Rows come back in output order; each group's prompt row lies before its own rows.
    if (added) std::stable_sort(batch.outputs.begin(), batch.outputs.end());
}

void GenerationEngine::consume_group(Sequence& s, size_t& k) {
    SearchGroup& g = *s.group;
    const size_t V = static_cast<size_t>(model_.vocab_size());
    if (g.prompt_row_in_step) {
        g.prompt_logits.assign(logits_.begin() + static_cast<std::ptrdiff_t>(k * V),
                               logits_.begin() + static_cast<std::ptrdiff_t>((k + 1) * V));
        g.prompt_row_in_step = false;
        ++k;
    }
    std::vector<std::vector<float>> rows(g.inputs.size());
    for (auto& row : rows) {
        row.assign(logits_.begin() + static_cast<std::ptrdiff_t>(k * V),
                   logits_.begin() + static_cast<std::ptrdiff_t>((k + 1) * V));
        ++k;
    }
    GroupSlots slots(kv_, g, model_.vocab_size());
    g.search->consume(rows, slots);
    g.inputs.clear();
    if (!g.search->done()) return;
    g.result = g.search->result();
    s.state = g.result.finished ? SeqState::FinishedStop : SeqState::FinishedLength;
}

std::vector<GenerationResult> GenerationEngine::run_to_completion() {
    std::vector<GenerationResult> all;
    while (has_work())
        for (auto& r : step()) all.push_back(std::move(r));
    std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
    return all;
}

int GenerationEngine::search_worst_blocks(int beams, int64_t tokens) const {
    const int64_t total = std::min<int64_t>(tokens, model_.max_context());
    return beams > 1 ? beams * (kv_.blocks_for(total) + 2) : kv_.blocks_for(total) + 1;
}

GenerationStats GenerationEngine::stats() const {
    GenerationStats s = stats_;
    s.kv = kv_.stats();
    s.kv_reserved_blocks = scheduler_.group_reservations();
    s.kv_bytes = storage_.bytes();
    if (draft_) s.draft_model_steps = draft_->steps();
    return s;
}

}  // namespace parlance
