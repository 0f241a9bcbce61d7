// Speculative decoding with a draft model: a smaller model of the same family proposes the next
// tokens of every decoding sequence (greedy, several steps of its own, batched over the
// sequences), and the target verifies them in its next step exactly as it verifies prompt-lookup
// drafts (engine/ngram_draft): a proposal is only a guess, so outputs do not change. The draft
// keeps its own paged KV cache (with prefix sharing) mirroring each sequence's tokens; after a
// verification the rejected part is cut off.
//
// Thread safety: none; the engine's thread owns it.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "core/backend.h"
#include "core/kv_cache_manager.h"
#include "core/kv_storage.h"
#include "models/language_model.h"

namespace parlance {

// Throws Error(InvalidModel) saying why `draft` cannot draft for `target`: a different vocabulary
// (size, a token's bytes, which tokens are special) or different end-of-sequence ids.
void check_draft_compatible(const LanguageModel& target, const LanguageModel& draft);

class DraftModel {
public:
    // `kv_cache_bytes` caps the draft's own cache.
    DraftModel(LanguageModel& model, Backend& backend, size_t kv_cache_bytes, int block_size = 16);

    struct Ask {
        SeqId id = 0;
        std::span<const int32_t> tokens;  // the sequence's tokens so far (prompt and generated)
        uint64_t cache_key = 0;           // what its prompt is conditioned on (prefix sharing)
        int max_draft = 0;                // tokens to propose at most (room in max_tokens / context)
    };
    // The draft's greedy continuation of each sequence (empty where its cache has no room).
    std::vector<std::vector<int32_t>> propose(std::span<const Ask> asks, int k);
    // After verification: the sequence's first `valid` tokens are what the draft's cache should
    // hold (its proposals past the accepted ones are cut).
    void settle(SeqId id, int valid);
    // The sequence is gone (finished, aborted).
    void drop(SeqId id);

    uint64_t steps() const { return steps_; }

private:
    LanguageModel& model_;
    Backend& backend_;
    KvCacheManager kv_;
    KvStorage storage_;
    std::map<SeqId, int> computed_;  // tokens of each sequence whose K/V the draft holds
    std::vector<float> logits_;
    uint64_t steps_ = 0;
};

}  // namespace parlance
