// Paged KV-cache bookkeeping: fixed-size blocks of token cells, reference counts, copy-on-write
// forks and hashing of full blocks so sequences that share a prefix share its blocks. It knows
// nothing of tensors: block b holds cells [b * block_size, (b + 1) * block_size) of a model's
// KvStorage (core/kv_storage.h), and the copies it asks for are applied there by the engine.
// The scheduler asks it only "can this fit" and "reserve n tokens"; it never sees a block table.
//
// It lives in core (not engine) because a model's own step driver may page its cache too (Whisper's
// slots, until Whisper runs on the generation engine). Thread safety: none; one thread owns it.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

namespace parlance {

using SeqId = int64_t;
using BlockId = int32_t;

// A device copy the engine applies before the step that writes into `to`: cells
// [0, n_tokens) of block `from` into block `to` (copy-on-write of a shared partial block).
struct BlockCopy {
    BlockId from = 0;
    BlockId to = 0;
    int n_tokens = 0;
};

struct KvCacheStats {
    int total_blocks = 0;
    int used_blocks = 0;          // referenced by at least one sequence
    int cached_blocks = 0;        // unreferenced but holding a hashed prefix (reusable, evictable)
    uint64_t prefix_queries = 0;  // prompt tokens looked up
    uint64_t prefix_hits = 0;     // prompt tokens found cached
    uint64_t evictions = 0;       // cached blocks reused for other tokens
};

// The extra_key of a sequence whose blocks are its own: no prefix of it is looked up or published
// (prompts carrying embeddings, Whisper's audio-conditioned tokens), so its blocks go straight back
// to the free pool when released, and the pool hands the most recently freed out first — memory
// the process has already touched, instead of cached blocks nobody can ever find.
inline constexpr uint64_t kPrivateBlocks = ~uint64_t{0};

class KvCacheManager {
public:
    // num_blocks >= 1, block_size >= 1.
    KvCacheManager(int num_blocks, int block_size);

    int block_size() const { return block_size_; }
    int num_blocks() const { return static_cast<int>(blocks_.size()); }
    // Blocks a reservation may take now: free ones plus cached ones it may evict.
    int available_blocks() const { return static_cast<int>(free_.size() + lru_.size()); }
    int blocks_for(int64_t n_tokens) const;

    // Starts sequence `seq` (which must not exist) on `prompt`: attaches the cached blocks of the
    // longest prefix of whole blocks whose hash chain (with `extra_key`, e.g. what the tokens are
    // conditioned on) matches, and returns how many prompt tokens they hold. At least the last
    // prompt token is always left to compute, so a step produces its logits. With
    // kPrivateBlocks nothing is looked up (returns 0) and the sequence's blocks are never hashed.
    int open(SeqId seq, std::span<const int32_t> prompt, uint64_t extra_key = 0);

    // Reserves cells for `tokens` at positions [length, length + n) of the sequence and records
    // their ids (for hashing). Returns false and changes nothing when the blocks do not suffice.
    // A shared partial last block is first copied (copy-on-write): the copy is appended to
    // `copies`, which the engine applies before the step.
    bool append(SeqId seq, std::span<const int32_t> tokens, std::vector<BlockCopy>& copies);

    // After a step: the sequence's first n_computed tokens have their K/V written; its full
    // blocks among them become findable by open() of another sequence.
    void computed(SeqId seq, int n_computed);

    // Makes `child` (new) share every block of `parent` (copy-on-write on its next append).
    void fork(SeqId parent, SeqId child);

    // Makes `to` hold the first n tokens of `from` (n is cut to from's length), sharing its blocks:
    // what `to` held is released, and a shared partial last block is copied on its next append
    // (a beam search's reorder). Nothing happens when from == to (the next append's truncate
    // cuts it back).
    void copy_prefix(SeqId from, SeqId to, int n);

    // Drops the sequence; unreferenced hashed blocks stay cached (LRU) until evicted.
    void free(SeqId seq);

    // Keeps the sequence's first n tokens (n <= length); blocks wholly past them are released.
    // A shared last block is copied on the next append, as after a fork.
    void truncate(SeqId seq, int n);

    bool has(SeqId seq) const { return seqs_.count(seq) != 0; }
    int length(SeqId seq) const;  // tokens reserved
    const std::vector<BlockId>& block_table(SeqId seq) const;
    // Cell index (block * block_size + offset) of the sequence's token at `position`.
    int64_t cell(SeqId seq, int position) const;

    KvCacheStats stats() const;
    // Checks every invariant (reference counts equal table occurrences, free/LRU/used partition
    // the blocks, hash index consistent). Throws Error(Internal) naming the broken one. Tests.
    void check_invariants() const;

private:
    struct Block {
        int ref = 0;
        bool hashed = false;
        uint64_t hash = 0;
        uint64_t parent_hash = 0;
        std::vector<int32_t> tokens;       // ids of a hashed block (verified on a hit)
        std::list<BlockId>::iterator lru;  // valid while cached (ref 0 and hashed)
    };
    struct Seq {
        std::vector<BlockId> table;
        std::vector<int32_t> tokens;  // every reserved token's id
        uint64_t extra_key = 0;
        int n_hashed_blocks = 0;       // leading blocks already registered
        std::vector<uint64_t> hashes;  // chain hash of each full, computed block
    };

    BlockId take_block();  // throws Error(Internal) if none (callers check)
    void release(BlockId b);
    uint64_t chain_hash(uint64_t parent, std::span<const int32_t> tokens, uint64_t extra) const;
    Seq& get(SeqId seq);
    const Seq& get(SeqId seq) const;

    int block_size_;
    std::vector<Block> blocks_;
    std::vector<BlockId> free_;  // never hashed, unreferenced
    std::list<BlockId> lru_;     // hashed, unreferenced; front = least recently used
    std::unordered_map<uint64_t, BlockId> by_hash_;
    std::unordered_map<SeqId, Seq> seqs_;
    uint64_t queries_ = 0, hits_ = 0, evictions_ = 0;
};

}  // namespace parlance
