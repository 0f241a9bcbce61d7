// Decode tasks as generation requests (see generation_decode_service.h).
#include "engine/generation_decode_service.h"

#include <algorithm>

namespace parlance {

GenerationDecodeService::GenerationDecodeService(LanguageModel& model, Backend& backend,
                                                 const GenerationEngineOptions& options)
    : engine_(model, backend, options) {}

uint64_t GenerationDecodeService::start(DecodeTask task) {
    GenerationRequest r;
    r.prompt.assign(task.prompt.begin(), task.prompt.end());
    r.priority = task.priority;
    r.model_state = std::move(task.model_state);
    std::shared_ptr<std::vector<float>> row;
    if (task.search) {
        r.search = std::move(task.search);
        r.prompt_row = task.prompt_row;
    } else {
        // One token chosen and dropped: the prompt's last row is what the task wants.
        row = std::make_shared<std::vector<float>>();
        r.sampling.max_tokens = 1;
        r.on_logits = [row](std::span<const float> logits) { row->assign(logits.begin(), logits.end()); };
    }
    const SeqId id = engine_.submit(std::move(r));
    if (row) rows_[id] = std::move(row);
    return id;
}

std::vector<DecodeOutcome> GenerationDecodeService::step() {
    std::vector<DecodeOutcome> out;
    for (GenerationResult& r : engine_.step()) {
        DecodeOutcome o;
        o.id = r.id;
        const auto row = rows_.find(r.id);
        o.aborted = r.state == SeqState::FinishedAborted || r.state == SeqState::FinishedTimeout;
        if (row != rows_.end()) {
            if (!o.aborted) o.logits = std::move(*row->second);
            rows_.erase(row);
        } else if (!o.aborted) {
            o.result.tokens.assign(r.tokens.begin(), r.tokens.end());
            o.result.sum_logprob = r.sum_logprob;
            o.result.score = r.score;
            o.result.finished = r.state == SeqState::FinishedStop;
            o.logits = std::move(r.prompt_logits);
            tokens_ += r.tokens.size();
        }
        out.push_back(std::move(o));
    }
    return out;
}

DecodeServiceStats GenerationDecodeService::stats() const {
    const GenerationStats g = engine_.stats();
    DecodeServiceStats s;
    s.kv = g.kv;
    s.kv_bytes = g.kv_bytes;
    s.block_bytes = g.kv.total_blocks > 0 ? g.kv_bytes / static_cast<size_t>(g.kv.total_blocks) : 0;
    s.reserved_blocks = g.kv_reserved_blocks;
    s.steps = g.steps;
    s.tokens_computed = g.tokens_computed;
    s.tokens = tokens_;
    s.forward_seconds = g.forward_seconds;
    return s;
}

DecodeServiceFactory generation_decode_service_factory(ggml_type kv_type) {
    return [kv_type](LanguageModel& model, Backend& backend, const DecodeServiceOptions& o) {
        GenerationEngineOptions g;
        g.kv_cache_bytes = o.kv_cache_bytes;
        g.kv_type = kv_type;
        g.max_running = std::max(1, o.max_sequences);
        g.token_budget = std::max(g.token_budget, o.token_budget);
        return std::make_unique<GenerationDecodeService>(model, backend, g);
    };
}

}  // namespace parlance
