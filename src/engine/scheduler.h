// The scheduler, in the shape of vLLM v1's: each step it gives every running sequence a number of
// tokens to compute (a prompt chunk or one decode token: the same thing) under a token budget,
// admits waiting sequences while KV blocks and the budget allow, and preempts the least urgent
// sequence when a running one cannot grow. Decodes are scheduled before prompt chunks, so a long
// prompt or a batch of uploads never stalls running decodes. Priority classes (live, interactive,
// bulk) order everything; inside a class the least recently scheduled goes first (fairness).
// Cancellations and deadlines are applied between steps, to queued and running sequences alike.
// It never sees the block layout: it asks the KvCacheManager to reserve tokens, nothing more.
//
// Thread safety: none; the engine thread owns it.
#pragma once

#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "core/kv_cache_manager.h"
#include "engine/sequence.h"

namespace parlance {

struct SchedulerOptions {
    int max_running = 64;    // sequences holding KV cells at once
    int token_budget = 512;  // tokens computed per step, prompt chunks and decodes together
    int max_context = 0;     // positions a sequence may reach (the model's); 0 = unlimited
    // Prompts gathered over steps (0 = off: every step takes what the budget allows). While
    // sequences decode, admissions wait until the waiting prompts' tokens fill half the budget,
    // the longest-waiting one has waited this many decode-only steps, or a live one is among them;
    // a prompt already started is never held back. On a GPU a step costs about the same for
    // one prompt as for several, and a decode-only step keeps its graph (replayed), where a step
    // with a prompt is built and launched afresh (BENCHMARKS.md, session 40).
    int prompt_gather_steps = 0;
};

// One sequence's share of a step: compute tokens [start, start + n) of seq->tokens.
struct ScheduledSeq {
    Sequence* seq = nullptr;
    int start = 0;
    int n = 0;
    bool sample = false;  // the step reaches the last known token: its logits pick the next
};

struct SchedulerOutput {
    std::vector<ScheduledSeq> items;                  // running sequences in this step, in batch order
    std::vector<BlockCopy> copies;                    // copy-on-write copies to apply before the step
    std::vector<std::unique_ptr<Sequence>> finished;  // aborted or timed out since the last step
    int tokens = 0;                                   // sum of items' n
    int preempted = 0;                                // sequences sent back to waiting this step
};

class Scheduler {
public:
    Scheduler(KvCacheManager& kv, const SchedulerOptions& options);

    // Queues a sequence (state Waiting, non-empty prompt). Throws Error(TooLarge) when it could
    // never fit: its prompt reaches the context, or prompt + max_tokens needs more KV blocks than
    // the whole cache has (the message names both numbers).
    void add_request(std::unique_ptr<Sequence> seq);

    // Plans the next step (see the file comment).
    SchedulerOutput schedule();

    // After the step ran: every item's tokens are computed; each sampling item (in items order)
    // receives sampled[k] (k counts sampling items only). Returns the sequences that finished
    // (stop token, max_tokens, context), their KV cells freed.
    std::vector<std::unique_ptr<Sequence>> update_from_output(const SchedulerOutput& out,
                                                              std::span<const int32_t> sampled);

    // Marks a sequence cancelled; it leaves at the next schedule(). Unknown ids are ignored.
    void abort(SeqId id);

    // The running sequences (the engine appends speculative drafts to decoding ones before a
    // schedule and settles them after the step).
    std::vector<Sequence*> running_sequences() const;

    bool has_work() const { return !waiting_.empty() || !running_.empty(); }
    size_t waiting() const { return waiting_.size(); }
    size_t running() const { return running_.size(); }
    uint64_t steps() const { return step_; }
    // Blocks running search groups may still take up to their worst case.
    int group_reservations() const;

private:
    void sweep(SchedulerOutput& out);
    // Returns every KV sequence a sequence holds (a search group's slots) to the cache.
    void release(Sequence& s);
    // Schedules every live slot of a search group, or nothing (budget, blocks).
    bool schedule_group(Sequence& s, int& budget, SchedulerOutput& out);
    bool reserve(Sequence& s, int n, SchedulerOutput& out);
    bool admit(Sequence& s, int& budget, SchedulerOutput& out);
    bool preempt_one(const Sequence* keep, SchedulerOutput& out);
    // Whether this step takes prompt work, given the running sequences' pending prompt chunks
    // (SchedulerOptions::prompt_gather_steps).
    bool take_prompts(const std::vector<Sequence*>& chunks) const;
    void insert_waiting(std::unique_ptr<Sequence> seq);
    // Drops a speculative draft from the sequence's tokens (preempted, finished).
    static void withdraw_draft(Sequence& s);

    KvCacheManager& kv_;
    SchedulerOptions o_;
    std::deque<std::unique_ptr<Sequence>> waiting_;  // sorted by (priority, arrival)
    std::vector<std::unique_ptr<Sequence>> running_;
    uint64_t arrivals_ = 0;
    uint64_t step_ = 0;
};

}  // namespace parlance
