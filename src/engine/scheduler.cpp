// The step scheduler (see scheduler.h).
#include "engine/scheduler.h"

#include <algorithm>
#include <string>
#include <tuple>

#include "core/error.h"

namespace parlance {
namespace {

// Smaller = more urgent.
auto urgency(const Sequence& s) {
    return std::make_tuple(static_cast<int>(s.priority), s.arrival);
}

}  // namespace

Scheduler::Scheduler(KvCacheManager& kv, const SchedulerOptions& options) : kv_(kv), o_(options) {
    if (o_.max_running < 1) throw Error(ErrorKind::InvalidArgument, "the scheduler needs max_running >= 1");
    if (o_.token_budget < 1) throw Error(ErrorKind::InvalidArgument, "the scheduler needs a token budget >= 1");
}

void Scheduler::insert_waiting(std::unique_ptr<Sequence> seq) {
    seq->queued_step = step_;
    // Sorted by (priority, arrival): a preempted sequence keeps its arrival, so it goes back ahead
    // of everything of its class that came after it.
    auto pos = std::upper_bound(waiting_.begin(), waiting_.end(), seq,
                                [](const auto& a, const auto& b) { return urgency(*a) < urgency(*b); });
    waiting_.insert(pos, std::move(seq));
}

void Scheduler::add_request(std::unique_ptr<Sequence> seq) {
    if (seq->tokens.empty()) throw Error(ErrorKind::InvalidArgument, "a sequence needs at least one prompt token");
    const int64_t prompt = static_cast<int64_t>(seq->tokens.size());
    if (o_.max_context > 0 && prompt >= o_.max_context)
        throw Error(ErrorKind::TooLarge, "the prompt has " + std::to_string(prompt) +
                                             " tokens; the model's context is " + std::to_string(o_.max_context));
    int64_t total = prompt + std::max(0, seq->sampling.max_tokens);
    if (o_.max_context > 0) total = std::min<int64_t>(total, o_.max_context);
    if (seq->group && seq->group->worst_blocks > kv_.num_blocks())
        throw Error(ErrorKind::TooLarge,
                    "the request's " + std::to_string(seq->group->slots.size()) + " decoding sequences need up to " +
                        std::to_string(seq->group->worst_blocks) + " blocks of KV cache; the whole cache holds " +
                        std::to_string(kv_.num_blocks()) + " (raise --kv-cache-mb)");
    const int need = kv_.blocks_for(total);
    if (!seq->group && need > kv_.num_blocks())
        throw Error(ErrorKind::TooLarge, "the request needs " + std::to_string(total) + " tokens of KV cache (" +
                                             std::to_string(need) + " blocks); the whole cache holds " +
                                             std::to_string(kv_.num_blocks()) + " blocks of " +
                                             std::to_string(kv_.block_size()) + " tokens (raise --kv-cache-mb)");
    seq->state = SeqState::Waiting;
    seq->num_computed = 0;
    seq->arrival = arrivals_++;
    insert_waiting(std::move(seq));
}

void Scheduler::abort(SeqId id) {
    for (auto& s : waiting_)
        if (s->id == id) s->cancelled->store(true);
    for (auto& s : running_)
        if (s->id == id) s->cancelled->store(true);
}

void Scheduler::sweep(SchedulerOutput& out) {
    const auto now = std::chrono::steady_clock::now();
    auto verdict = [&](const Sequence& s) {
        if (s.cancelled && s.cancelled->load()) return SeqState::FinishedAborted;
        if (s.deadline && now >= *s.deadline) return SeqState::FinishedTimeout;
        return s.state;
    };
    for (auto it = waiting_.begin(); it != waiting_.end();) {
        const SeqState v = verdict(**it);
        if (is_finished(v)) {
            (*it)->state = v;
            out.finished.push_back(std::move(*it));
            it = waiting_.erase(it);
        } else {
            ++it;
        }
    }
    for (auto it = running_.begin(); it != running_.end();) {
        const SeqState v = verdict(**it);
        if (is_finished(v)) {
            (*it)->state = v;
            withdraw_draft(**it);
            release(**it);
            out.finished.push_back(std::move(*it));
            it = running_.erase(it);
        } else {
            ++it;
        }
    }
}

void Scheduler::release(Sequence& s) {
    if (!s.group) {
        kv_.free(s.id);
        return;
    }
    for (SeqId slot : s.group->slots) kv_.free(slot);
}

int Scheduler::group_reservations() const {
    int total = 0;
    for (const auto& s : running_) {
        if (!s->group) continue;
        // Beams share blocks: count each once.
        std::vector<BlockId> held;
        for (SeqId slot : s->group->slots)
            if (kv_.has(slot)) held.insert(held.end(), kv_.block_table(slot).begin(), kv_.block_table(slot).end());
        std::sort(held.begin(), held.end());
        const int unique = static_cast<int>(std::unique(held.begin(), held.end()) - held.begin());
        total += std::max(0, s->group->worst_blocks - unique);
    }
    return total;
}

bool Scheduler::schedule_group(Sequence& s, int& budget, SchedulerOutput& out) {
    SearchGroup& g = *s.group;
    std::vector<StepInput> inputs = g.search->inputs();
    int n = 0;
    for (const StepInput& in : inputs) n += static_cast<int>(in.tokens.size());
    if (n == 0) return false;  // the search is done; the engine finishes it
    // A group larger than the whole budget runs in a step of its own rather than never.
    if (n > budget && budget < o_.token_budget) return false;
    for (size_t i = 0; i < inputs.size(); ++i) {
        const StepInput& in = inputs[i];
        const SeqId slot = g.slots.at(static_cast<size_t>(in.slot));
        if (kv_.length(slot) > in.n_past) kv_.truncate(slot, in.n_past);
        const std::span<const int32_t> toks(in.tokens.data(), in.tokens.size());
        while (!kv_.append(slot, toks, out.copies)) {
            if (preempt_one(&s, out)) continue;
            for (size_t j = 0; j < i; ++j)
                kv_.truncate(g.slots.at(static_cast<size_t>(inputs[j].slot)), inputs[j].n_past);
            return false;
        }
    }
    g.inputs = std::move(inputs);
    s.last_scheduled = step_;
    out.items.push_back({&s, 0, n, true});
    budget -= std::min(n, budget);
    return true;
}

void Scheduler::withdraw_draft(Sequence& s) {
    s.tokens.resize(s.tokens.size() - static_cast<size_t>(s.draft));
    s.draft = 0;
}

bool Scheduler::preempt_one(const Sequence* keep, SchedulerOutput& out) {
    // The least urgent running sequence not already part of this step; never one more urgent
    // than the sequence that needs the room (equal class: only later arrivals).
    auto victim = running_.end();
    for (auto it = running_.begin(); it != running_.end(); ++it) {
        Sequence& s = **it;
        // A search group is admitted by its worst case and never sent back: its search has no
        // way to start again.
        if (&s == keep || s.last_scheduled == step_ || s.group) continue;
        if (keep && !(urgency(*keep) < urgency(s))) continue;
        if (victim == running_.end() || urgency(**victim) < urgency(s)) victim = it;
    }
    if (victim == running_.end()) return false;
    std::unique_ptr<Sequence> s = std::move(*victim);
    running_.erase(victim);
    kv_.free(s->id);
    withdraw_draft(*s);
    s->num_computed = 0;
    s->last_scheduled = 0;  // back in the queue: it competes as a newcomer of its arrival
    s->state = SeqState::Waiting;
    out.preempted++;
    insert_waiting(std::move(s));
    return true;
}

bool Scheduler::reserve(Sequence& s, int n, SchedulerOutput& out) {
    std::span<const int32_t> toks(s.tokens.data() + s.num_computed, static_cast<size_t>(n));
    // Growth leaves running search groups the blocks their worst case may still take (a partial
    // block's copy on write counted).
    auto leaves_reservations = [&] {
        const int reserved = group_reservations();
        if (reserved == 0) return true;
        const int len = kv_.length(s.id);
        return kv_.blocks_for(len + n) - kv_.blocks_for(len) + 1 <= kv_.available_blocks() - reserved;
    };
    while (!(leaves_reservations() && kv_.append(s.id, toks, out.copies))) {
        if (!preempt_one(&s, out)) return false;
    }
    return true;
}

bool Scheduler::admit(Sequence& s, int& budget, SchedulerOutput& out) {
    if (s.group) {
        // Its worst case beside what running groups may still take: it can always grow.
        auto fits = [&] { return s.group->worst_blocks <= kv_.available_blocks() - group_reservations(); };
        bool ok = fits();
        while (!ok && preempt_one(&s, out)) ok = fits();
        if (!ok) return false;
        for (SeqId slot : s.group->slots) kv_.open(slot, {}, kPrivateBlocks);
        auto pos = std::find_if(waiting_.begin(), waiting_.end(), [&](const auto& w) { return w.get() == &s; });
        std::unique_ptr<Sequence> owned = std::move(*pos);
        waiting_.erase(pos);
        owned->state = SeqState::Running;
        Sequence& running = *owned;
        running_.push_back(std::move(owned));
        schedule_group(running, budget, out);  // else in the next step
        return true;
    }
    const int cached = kv_.open(s.id, s.tokens, s.cache_key);
    s.num_computed = cached;
    // Admit only when the whole remaining prompt fits (else it would preempt itself later).
    const int need = kv_.blocks_for(static_cast<int64_t>(s.tokens.size())) - kv_.blocks_for(cached);
    bool fits = need <= kv_.available_blocks() - group_reservations();
    while (!fits && preempt_one(&s, out)) fits = need <= kv_.available_blocks() - group_reservations();
    const int n = std::min(static_cast<int>(s.tokens.size()) - cached, budget);
    std::span<const int32_t> toks(s.tokens.data() + cached, static_cast<size_t>(n));
    if (!fits || !kv_.append(s.id, toks, out.copies)) {
        kv_.free(s.id);
        s.num_computed = 0;
        return false;
    }
    auto pos = std::find_if(waiting_.begin(), waiting_.end(), [&](const auto& w) { return w.get() == &s; });
    std::unique_ptr<Sequence> owned = std::move(*pos);
    waiting_.erase(pos);
    owned->state = SeqState::Running;
    owned->last_scheduled = step_;
    out.items.push_back({owned.get(), cached, n, cached + n == static_cast<int>(owned->tokens.size())});
    budget -= n;
    running_.push_back(std::move(owned));
    return true;
}

std::vector<Sequence*> Scheduler::running_sequences() const {
    std::vector<Sequence*> out;
    for (const auto& s : running_) out.push_back(s.get());
    return out;
}

SchedulerOutput Scheduler::schedule() {
    ++step_;
    SchedulerOutput out;
    sweep(out);
    int budget = o_.token_budget;
    auto key = [](const Sequence* s) {
        return std::make_tuple(static_cast<int>(s->priority), s->last_scheduled, s->arrival);
    };

    // 1. Running decodes (one token each, plus a speculative draft's tokens when the engine
    // proposed one): by class, least recently scheduled first.
    std::vector<Sequence*> decodes, chunks;
    for (auto& s : running_) {
        const int remaining = static_cast<int>(s->tokens.size()) - s->num_computed;
        (s->group || remaining == 1 + s->draft ? decodes : chunks).push_back(s.get());
    }
    std::stable_sort(decodes.begin(), decodes.end(), [&](auto a, auto b) { return key(a) < key(b); });
    for (Sequence* s : decodes) {
        if (budget == 0) break;
        if (s->state != SeqState::Running) continue;  // preempted by an earlier one this step
        if (s->group) {
            schedule_group(*s, budget, out);
            continue;
        }
        const int n = std::min(1 + s->draft, budget);
        if (!reserve(*s, n, out)) continue;
        s->last_scheduled = step_;
        out.items.push_back({s, s->num_computed, n, n == 1 + s->draft});
        budget -= n;
    }

    // 2. Prompt chunks of running sequences and admissions of waiting ones, in one order: by
    // class, then least recently scheduled (a waiting sequence never was), then arrival. Two
    // long prompts of one class thus take turns instead of the first one finishing first.
    // Gathered over a few steps while others decode (SchedulerOptions::prompt_gather_steps).
    if (!out.items.empty() && !take_prompts(chunks)) {
        for (const ScheduledSeq& it : out.items) out.tokens += it.n;
        return out;
    }
    std::vector<Sequence*> order = chunks;
    for (auto& w : waiting_) order.push_back(w.get());
    std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return key(a) < key(b); });
    bool admitting = true;
    for (Sequence* s : order) {
        if (budget == 0) break;
        if (s->state == SeqState::Running) {
            if (s->last_scheduled == step_) continue;
            const int remaining = static_cast<int>(s->tokens.size()) - s->num_computed;
            const int n = std::min(remaining, budget);
            if (n <= 0 || !reserve(*s, n, out)) continue;
            s->last_scheduled = step_;
            out.items.push_back({s, s->num_computed, n, s->num_computed + n == static_cast<int>(s->tokens.size())});
            budget -= n;
        } else if (admitting && static_cast<int>(running_.size()) < o_.max_running) {
            // A sequence that cannot get blocks waits, and nothing less urgent jumps the queue.
            if (!admit(*s, budget, out)) admitting = false;
        }
    }
    for (const ScheduledSeq& it : out.items) out.tokens += it.n;
    return out;
}

bool Scheduler::take_prompts(const std::vector<Sequence*>& chunks) const {
    // A prompt already started goes on: it holds its blocks, and a sequence left out of a step is
    // the first a preemption would take.
    if (o_.prompt_gather_steps <= 0 || !chunks.empty()) return true;
    int64_t pending = 0;
    uint64_t oldest = step_;
    auto count = [&](const Sequence& s) {
        if (s.priority == Priority::Live) pending += o_.token_budget;  // never waits
        pending += static_cast<int64_t>(s.tokens.size()) - s.num_computed;
        oldest = std::min(oldest, s.queued_step);
    };
    for (const auto& w : waiting_) count(*w);
    if (pending == 0) return false;
    // (The first step after its arrival counts 1: it goes after N decode-only steps.)
    return 2 * pending >= o_.token_budget || step_ - oldest > static_cast<uint64_t>(o_.prompt_gather_steps);
}

std::vector<std::unique_ptr<Sequence>> Scheduler::update_from_output(const SchedulerOutput& out,
                                                                     std::span<const int32_t> sampled) {
    size_t k = 0;
    for (const ScheduledSeq& it : out.items) {
        Sequence& s = *it.seq;
        if (s.group) continue;  // its search chose (the engine); its state says whether it is done
        s.num_computed += it.n;
        kv_.computed(s.id, s.num_computed);
        if (!it.sample) continue;
        if (k >= sampled.size())
            throw Error(ErrorKind::Internal, "scheduler: fewer sampled tokens than sampling sequences");
        const int32_t tok = sampled[k++];
        s.tokens.push_back(tok);
        const auto& stops = s.sampling.stop_ids;
        if (std::find(stops.begin(), stops.end(), tok) != stops.end()) {
            s.state = SeqState::FinishedStop;
        } else if (s.generated() >= s.sampling.max_tokens ||
                   (o_.max_context > 0 && static_cast<int>(s.tokens.size()) >= o_.max_context)) {
            s.state = SeqState::FinishedLength;
        }
    }
    if (k != sampled.size()) throw Error(ErrorKind::Internal, "scheduler: more sampled tokens than sampling sequences");
    std::vector<std::unique_ptr<Sequence>> done;
    for (auto it = running_.begin(); it != running_.end();) {
        if (is_finished((*it)->state)) {
            release(**it);
            done.push_back(std::move(*it));
            it = running_.erase(it);
        } else {
            ++it;
        }
    }
    return done;
}

}  // namespace parlance
