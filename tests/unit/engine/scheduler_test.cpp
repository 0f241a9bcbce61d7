// The scheduler with a fake model (the "model" answers every sampling sequence with token 7):
// chunked prefill under the budget, decodes before prompt chunks, priority classes, fairness
// inside a class, aborts of queued and running requests, deadlines, admission under memory
// pressure, requests that can never fit, prefix sharing and preemption, and search groups (beams
// scheduled as one unit, admitted by their worst case, never preempted).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "decoding/search.h"
#include "engine/scheduler.h"

namespace parlance {
namespace {

std::unique_ptr<Sequence> make_seq(SeqId id, int prompt, int max_tokens, Priority p = Priority::Interactive,
                                   int first_token = 0) {
    auto s = std::make_unique<Sequence>();
    s->id = id;
    s->priority = p;
    s->tokens.resize(prompt);
    std::iota(s->tokens.begin(), s->tokens.end(), first_token);
    s->prompt_length = prompt;
    s->sampling.max_tokens = max_tokens;
    s->sampling.stop_ids = {99999};
    return s;
}

// One fake step: every sampling item gets token 7. Returns the ids that finished.
std::vector<SeqId> fake_step(Scheduler& sch, SchedulerOutput& out) {
    std::vector<int32_t> sampled;
    for (const auto& it : out.items)
        if (it.sample) sampled.push_back(7);
    std::vector<SeqId> done;
    for (auto& s : out.finished) done.push_back(s->id);
    for (auto& s : sch.update_from_output(out, sampled)) done.push_back(s->id);
    return done;
}

int tokens_of(const SchedulerOutput& out, SeqId id) {
    for (const auto& it : out.items)
        if (it.seq->id == id) return it.n;
    return 0;
}

TEST(Scheduler, ChunkedPrefillNeverStallsRunningDecodes) {
    KvCacheManager kv(64, 16);
    Scheduler sch(kv, {8, 32, 0});
    sch.add_request(make_seq(1, 3, 50));
    SchedulerOutput out = sch.schedule();
    EXPECT_EQ(tokens_of(out, 1), 3);
    EXPECT_TRUE(out.items[0].sample);
    fake_step(sch, out);
    sch.add_request(make_seq(2, 100, 5));  // a long prompt arrives
    std::vector<int> chunks;
    while (true) {
        out = sch.schedule();
        EXPECT_EQ(tokens_of(out, 1), 1) << "the running decode is scheduled every step";
        EXPECT_LE(out.tokens, 32);
        const int n = tokens_of(out, 2);
        chunks.push_back(n);
        const bool sampled2 = std::any_of(out.items.begin(), out.items.end(),
                                          [](const auto& it) { return it.seq->id == 2 && it.sample; });
        fake_step(sch, out);
        if (sampled2) break;
    }
    EXPECT_EQ(chunks, (std::vector<int>{31, 31, 31, 7}));
}

// SchedulerOptions::prompt_gather_steps: while a sequence decodes, new prompts wait (decode-only
// steps) until the oldest has waited that many steps or they fill half the budget; a live one
// never waits, and with nothing decoding none does.
TEST(Scheduler, PromptsGatherOverDecodeStepsWhileOthersDecode) {
    KvCacheManager kv(256, 16);
    Scheduler sch(kv, {8, 64, 0, 3});
    sch.add_request(make_seq(1, 4, 100));
    SchedulerOutput out = sch.schedule();  // nothing decodes yet: the prompt goes at once
    EXPECT_EQ(tokens_of(out, 1), 4);
    fake_step(sch, out);
    sch.add_request(make_seq(2, 5, 100));
    std::vector<int> taken;  // sequence 2's tokens per step
    for (int i = 0; i < 5; ++i) {
        out = sch.schedule();
        EXPECT_EQ(tokens_of(out, 1), 1) << "step " << i;
        taken.push_back(tokens_of(out, 2));
        fake_step(sch, out);
    }
    EXPECT_EQ(taken, (std::vector<int>{0, 0, 0, 5, 1})) << "three decode-only steps, then the prompt, then its decode";

    // Prompts that fill half the budget go at once.
    sch.add_request(make_seq(3, 20, 100));
    sch.add_request(make_seq(4, 12, 100));
    out = sch.schedule();
    EXPECT_EQ(tokens_of(out, 3), 20);
    EXPECT_EQ(tokens_of(out, 4), 12);
    fake_step(sch, out);

    // A live sequence's prompt goes at once, and takes the others waiting with it.
    sch.add_request(make_seq(5, 3, 100));
    out = sch.schedule();
    EXPECT_EQ(tokens_of(out, 5), 0);
    fake_step(sch, out);
    sch.add_request(make_seq(6, 3, 100, Priority::Live));
    out = sch.schedule();
    EXPECT_EQ(tokens_of(out, 6), 3);
    EXPECT_EQ(tokens_of(out, 5), 3);
    EXPECT_EQ(tokens_of(out, 1), 1);
    fake_step(sch, out);

    // A prompt longer than the budget, once started, goes on every step (its chunks are never
    // held back), beside the decodes.
    sch.add_request(make_seq(7, 150, 100));
    std::vector<int> chunks;
    for (int i = 0; i < 8 && chunks.size() < 3; ++i) {
        out = sch.schedule();
        if (const int n = tokens_of(out, 7); n > 0 || !chunks.empty()) chunks.push_back(n);
        fake_step(sch, out);
    }
    ASSERT_EQ(chunks.size(), 3u);
    for (int n : chunks) EXPECT_GT(n, 0) << "a started prompt waits no step";

    // Off (0): every step takes what arrived.
    Scheduler off(kv, {8, 64, 0, 0});
    off.add_request(make_seq(11, 4, 100));
    out = off.schedule();
    fake_step(off, out);
    off.add_request(make_seq(12, 5, 100));
    out = off.schedule();
    EXPECT_EQ(tokens_of(out, 12), 5);
}

TEST(Scheduler, PriorityClassesAndFairnessInsideAClass) {
    KvCacheManager kv(256, 16);
    Scheduler sch(kv, {2, 64, 0});
    sch.add_request(make_seq(1, 4, 3, Priority::Bulk));
    sch.add_request(make_seq(2, 4, 3, Priority::Interactive));
    sch.add_request(make_seq(3, 4, 3, Priority::Live));
    SchedulerOutput out = sch.schedule();  // two may run: live first, then interactive
    ASSERT_EQ(out.items.size(), 2u);
    EXPECT_EQ(out.items[0].seq->id, 3);
    EXPECT_EQ(out.items[1].seq->id, 2);
    fake_step(sch, out);
}

TEST(Scheduler, LongPromptsOfOneClassTakeTurns) {
    KvCacheManager kv(64, 16);
    Scheduler sch(kv, {8, 32, 0});
    sch.add_request(make_seq(1, 100, 1));
    sch.add_request(make_seq(2, 100, 1, Priority::Interactive, 1000));
    std::vector<SeqId> who;
    for (int step = 0; step < 6; ++step) {
        SchedulerOutput out = sch.schedule();
        ASSERT_EQ(out.items.size(), 1u);
        EXPECT_EQ(out.items[0].n, 32);
        who.push_back(out.items[0].seq->id);
        fake_step(sch, out);
    }
    EXPECT_EQ(who, (std::vector<SeqId>{1, 2, 1, 2, 1, 2}));
}

TEST(Scheduler, AbortsQueuedAndRunningBetweenSteps) {
    KvCacheManager kv(16, 16);
    Scheduler sch(kv, {1, 64, 0});
    sch.add_request(make_seq(1, 4, 100));
    sch.add_request(make_seq(2, 4, 100));  // queued: max_running 1
    SchedulerOutput out = sch.schedule();
    fake_step(sch, out);
    EXPECT_EQ(sch.running(), 1u);
    EXPECT_EQ(sch.waiting(), 1u);
    sch.abort(2);
    sch.abort(1);
    out = sch.schedule();
    ASSERT_EQ(out.finished.size(), 2u);
    for (auto& s : out.finished) EXPECT_EQ(s->state, SeqState::FinishedAborted);
    EXPECT_TRUE(out.items.empty());
    EXPECT_FALSE(sch.has_work());
    EXPECT_EQ(kv.available_blocks(), 16);  // the running one's blocks came back
}

TEST(Scheduler, DeadlinesApplyToQueuedAndRunning) {
    KvCacheManager kv(16, 16);
    Scheduler sch(kv, {4, 64, 0});
    auto a = make_seq(1, 4, 100);
    a->deadline = std::chrono::steady_clock::now() - std::chrono::seconds(1);
    sch.add_request(std::move(a));
    SchedulerOutput out = sch.schedule();
    ASSERT_EQ(out.finished.size(), 1u);
    EXPECT_EQ(out.finished[0]->state, SeqState::FinishedTimeout);
    EXPECT_STREQ(finish_reason(SeqState::FinishedTimeout), "timeout");
}

TEST(Scheduler, AdmissionWaitsForBlocksAndRefusesWhatCanNeverFit) {
    KvCacheManager kv(4, 4);  // 16 tokens in all
    Scheduler sch(kv, {8, 64, 0});
    try {
        sch.add_request(make_seq(9, 10, 20));
        FAIL() << "a request of 30 tokens cannot fit 16";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::TooLarge);
        EXPECT_NE(std::string(e.what()).find("4 blocks"), std::string::npos) << e.what();
    }
    sch.add_request(make_seq(1, 12, 4));  // a 12-token prompt: 3 blocks
    sch.add_request(make_seq(2, 8, 4));   // its prompt needs 2 blocks: it waits for the first
    SchedulerOutput out = sch.schedule();
    ASSERT_EQ(out.items.size(), 1u);
    EXPECT_EQ(out.items[0].seq->id, 1);
    int steps = 0;
    bool second_ran = false;
    while (sch.has_work() && steps < 50) {
        fake_step(sch, out);
        out = sch.schedule();
        second_ran = second_ran || tokens_of(out, 2) > 0;
        ++steps;
    }
    EXPECT_TRUE(second_ran);
    EXPECT_FALSE(sch.has_work());
    EXPECT_EQ(kv.stats().used_blocks, 0);
}

TEST(Scheduler, PreemptsTheLeastUrgentWhenARunningSequenceCannotGrow) {
    KvCacheManager kv(4, 4);
    Scheduler sch(kv, {8, 64, 0});
    sch.add_request(make_seq(1, 4, 8, Priority::Live));  // grows to 12 tokens: 3 blocks
    sch.add_request(make_seq(2, 4, 8, Priority::Bulk));  // 1 block now, more later
    SchedulerOutput out = sch.schedule();
    ASSERT_EQ(out.items.size(), 2u);
    int preempted = 0;
    std::vector<SeqId> finished;
    for (int step = 0; step < 60 && sch.has_work(); ++step) {
        for (SeqId id : fake_step(sch, out)) finished.push_back(id);
        out = sch.schedule();
        preempted += out.preempted;
    }
    EXPECT_GE(preempted, 1);
    ASSERT_EQ(finished.size(), 2u);
    EXPECT_EQ(finished[0], 1) << "the live sequence finishes first";
    EXPECT_EQ(kv.stats().used_blocks, 0);
}

TEST(Scheduler, SharedPromptPrefixIsComputedOnce) {
    KvCacheManager kv(64, 16);
    Scheduler sch(kv, {8, 512, 0});
    sch.add_request(make_seq(1, 40, 2));
    SchedulerOutput out = sch.schedule();
    EXPECT_EQ(tokens_of(out, 1), 40);
    fake_step(sch, out);
    sch.add_request(make_seq(2, 40, 2));  // same prompt
    out = sch.schedule();
    EXPECT_EQ(tokens_of(out, 2), 8) << "32 of 40 prompt tokens come from the prefix cache";
    EXPECT_EQ(kv.stats().prefix_hits, 32u);
}

// A search's slots as KV sequences (what the engine gives a search group): a reorder forks.
class ForkingSlots final : public StepModel {
public:
    ForkingSlots(KvCacheManager& kv, const SearchGroup& g) : kv_(kv), g_(g) {}
    int vocab_size() const override { return 16; }
    std::vector<std::vector<float>> step(std::span<const StepInput>) override { return {}; }
    void copy_slot(int from, int to, int n) override { kv_.copy_prefix(g_.slots[from], g_.slots[to], n); }

private:
    KvCacheManager& kv_;
    const SearchGroup& g_;
};

TEST(Scheduler, ASearchGroupRunsWholeEveryStepAndKeepsItsWorstCaseFromOthers) {
    KvCacheManager kv(12, 4);  // 48 tokens
    Scheduler sch(kv, {8, 64, 0});
    // Two beams over a 4-token prompt, 8 new tokens: a full context (3 blocks) plus 2 per beam.
    auto group = make_seq(1, 4, 8, Priority::Interactive);
    auto g = std::make_shared<SearchGroup>();
    g->slots = {101, 102, 103, 104};
    SearchOptions so;
    so.max_new_tokens = 8;
    so.eos = 15;
    so.num_beams = 2;
    g->search = make_search({0, 1, 2, 3}, {0, 1, 2, 3}, so);
    g->worst_blocks = 2 * (3 + 2);
    group->group = g;
    sch.add_request(std::move(group));
    // A more urgent plain sequence that would grow to 6 blocks: the group's reservation leaves
    // it 2, so it waits for the group instead of taking what the beams will need.
    sch.add_request(make_seq(2, 4, 20, Priority::Live, 50));

    SchedulerOutput out = sch.schedule();
    int group_steps = 0, step = 0;
    bool group_done = false;
    std::vector<SeqId> finished;
    for (; step < 200 && sch.has_work(); ++step) {
        std::vector<int32_t> sampled;
        for (const auto& it : out.items) {
            if (!it.seq->group) {
                if (it.sample) sampled.push_back(7);
                continue;
            }
            // Every live beam is in the step, each with its tokens reserved.
            SearchGroup& sg = *it.seq->group;
            ASSERT_FALSE(sg.inputs.empty());
            int n = 0;
            for (const StepInput& in : sg.inputs) {
                n += static_cast<int>(in.tokens.size());
                EXPECT_EQ(kv.length(sg.slots[in.slot]), in.n_past + static_cast<int>(in.tokens.size()));
            }
            EXPECT_EQ(it.n, n);
            std::vector<std::vector<float>> rows(sg.inputs.size(), std::vector<float>(16));
            for (size_t r = 0; r < rows.size(); ++r)
                for (int t = 0; t < 16; ++t) rows[r][t] = static_cast<float>((t * 7 + step + 3 * r) % 16) * 0.1f;
            for (auto& row : rows) row[15] = kNegInf;  // never the end: 8 tokens
            ForkingSlots slots(kv, sg);
            sg.search->consume(rows, slots);
            ++group_steps;
            if (sg.search->done()) {
                it.seq->state = SeqState::FinishedLength;
                group_done = true;
            }
        }
        for (auto& s : out.finished) finished.push_back(s->id);
        for (auto& s : sch.update_from_output(out, sampled)) finished.push_back(s->id);
        if (!group_done) {
            EXPECT_LE(kv.stats().used_blocks, 12);
        }
        out = sch.schedule();
        // Until it is done, the group is in every step (never preempted, never starved).
        if (!group_done) {
            const bool in_step = std::any_of(out.items.begin(), out.items.end(),
                                             [](const auto& it) { return it.seq->group != nullptr; });
            EXPECT_TRUE(in_step) << "step " << step;
        }
    }
    EXPECT_EQ(group_steps, 8);  // the prompt with the first token, then one token per step
    ASSERT_EQ(finished.size(), 2u);
    EXPECT_EQ(finished[0], 1) << "the group finishes first: the live sequence could not grow into its reservation";
    EXPECT_EQ(kv.stats().used_blocks, 0);

    // A group whose worst case exceeds the whole cache is refused, naming the blocks.
    auto big = make_seq(3, 4, 8);
    auto bg = std::make_shared<SearchGroup>();
    bg->slots = {201, 202, 203, 204};
    bg->worst_blocks = 13;
    bg->search = make_search({0, 1, 2, 3}, {0, 1, 2, 3}, so);
    big->group = bg;
    try {
        sch.add_request(std::move(big));
        FAIL() << "13 blocks cannot fit 12";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::TooLarge);
        EXPECT_NE(std::string(e.what()).find("13 blocks"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace parlance
