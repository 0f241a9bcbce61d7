// Decode tasks on the runner's cache slots (see runner_decode_service.h).
#include "models/whisper/runner_decode_service.h"

#include <algorithm>

#include "core/error.h"

namespace parlance::whisper {

RunnerDecodeService::RunnerDecodeService(WhisperRunner& runner, int first_slot) : runner_(runner), steps_(runner) {
    for (int s = runner.n_slots() - 1; s >= first_slot; --s) free_.push_back(s);
}

int RunnerDecodeService::slots_needed(const DecodeTask& t) const {
    return t.search ? search_sequences(*t.search) : 1;
}

int RunnerDecodeService::worst_blocks(int beams, int) const {
    return std::max(1, beams) * WhisperRunner::blocks_per_hypothesis(runner_.config());
}

uint64_t RunnerDecodeService::start(DecodeTask task) {
    size_t total = free_.size();
    for (const Task& t : tasks_) total += t.slots.size();
    if (slots_needed(task) > 1) slots_for_beams(task.search->num_beams, static_cast<int>(total));
    if (total == 0) throw Error(ErrorKind::Internal, "the decoder has no cache slot");
    if (!task.model_state) throw Error(ErrorKind::Internal, "a Whisper decode without its encoded window");
    if (task.prompt.empty()) throw Error(ErrorKind::Internal, "a decode task without a prompt");
    if (task.prompt_row >= static_cast<int>(task.prompt.size()))
        throw Error(ErrorKind::InvalidArgument, "prompt_row lies past the prompt");
    Task t;
    t.id = next_id_++;
    t.task = std::move(task);
    const auto at =
        std::find_if(tasks_.begin(), tasks_.end(), [&](const Task& q) { return q.task.priority > t.task.priority; });
    const uint64_t id = t.id;
    tasks_.insert(at, std::move(t));
    return id;
}

void RunnerDecodeService::abort(uint64_t id) {
    for (Task& t : tasks_)
        if (t.id == id) t.aborted = true;
}

std::vector<DecodeOutcome> RunnerDecodeService::step() {
    std::vector<DecodeOutcome> out;
    auto end = [&](std::list<Task>::iterator it, DecodeOutcome o) {
        for (int s : it->slots) {
            runner_.release_slot(s);
            free_.push_back(s);
        }
        o.id = it->id;
        out.push_back(std::move(o));
        return tasks_.erase(it);
    };
    // Aborted tasks leave; waiting ones start while their slots are free, most urgent first.
    for (auto it = tasks_.begin(); it != tasks_.end();) {
        if (it->aborted) {
            it = end(it, DecodeOutcome{0, true, {}, {}});
            continue;
        }
        if (it->slots.empty() && static_cast<int>(free_.size()) >= slots_needed(it->task)) {
            const int n = slots_needed(it->task);
            it->slots.assign(free_.end() - n, free_.end());
            free_.resize(free_.size() - n);
            const auto* cross = static_cast<const CrossKv*>(it->task.model_state.get());
            for (int s : it->slots) steps_.bind(s, cross);
            // A prompt row asked: the prompt up to it runs first in slot 0 (its own step), and the
            // search starts after it; otherwise the search runs the whole prompt.
            if (it->task.search && it->task.prompt_row < 0)
                it->search = make_search(it->task.prompt, it->slots, *it->task.search);
        }
        ++it;
    }
    // One decoder step over every running task's inputs.
    std::vector<StepInput> batch;
    std::vector<std::pair<std::list<Task>::iterator, size_t>> owners;
    for (auto it = tasks_.begin(); it != tasks_.end(); ++it) {
        if (it->slots.empty()) continue;
        std::vector<StepInput> in;
        if (it->search) {
            in = it->search->inputs();
        } else if (it->task.search) {  // the prompt up to its asked row
            const auto end = it->task.prompt.begin() + it->task.prompt_row + 1;
            in.push_back(StepInput{it->slots[0], std::vector<int>(it->task.prompt.begin(), end), 0});
        } else {
            in.push_back(StepInput{it->slots[0], it->task.prompt, 0});
        }
        owners.emplace_back(it, in.size());
        for (StepInput& x : in) {
            stats_.tokens_computed += x.tokens.size();
            batch.push_back(std::move(x));
        }
    }
    if (batch.empty()) return out;
    std::vector<std::vector<float>> logits = steps_.step(batch);
    stats_.steps++;
    size_t off = 0;
    for (auto& [it, n] : owners) {
        std::span<std::vector<float>> rows(logits.data() + off, n);
        off += n;
        DecodeOutcome o;
        if (!it->search && it->task.search) {
            // The asked row; the search goes on from the cached prompt (at least its last token
            // runs again: a search needs one uncached token for its first logits).
            it->prompt_logits = std::move(rows[0]);
            const int cached = std::min(it->task.prompt_row + 1, static_cast<int>(it->task.prompt.size()) - 1);
            it->search = make_search(it->task.prompt, it->slots, *it->task.search, cached);
            continue;
        }
        if (!it->search) {
            o.logits = std::move(rows[0]);
        } else {
            it->search->consume(rows, steps_);
            if (!it->search->done()) continue;
            o.result = it->search->result();
            o.logits = std::move(it->prompt_logits);
            stats_.tokens += o.result.tokens.size();
        }
        end(it, std::move(o));
    }
    return out;
}

DecodeServiceStats RunnerDecodeService::stats() const {
    DecodeServiceStats s = stats_;
    s.kv = runner_.kv_stats();
    s.kv_bytes = runner_.kv_bytes();
    s.block_bytes = runner_.kv_block_bytes();
    return s;
}

}  // namespace parlance::whisper
