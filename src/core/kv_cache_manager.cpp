// Paged KV-cache bookkeeping (see kv_cache_manager.h).
#include "core/kv_cache_manager.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace parlance {
namespace {

uint64_t mix(uint64_t h, uint64_t v) {
    // splitmix64's finaliser over h ^ v: a well-spread 64-bit combine.
    uint64_t z = h ^ (v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2));
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

[[noreturn]] void broken(const std::string& what) {
    throw Error(ErrorKind::Internal, "KV cache invariant broken: " + what);
}

}  // namespace

KvCacheManager::KvCacheManager(int num_blocks, int block_size) : block_size_(block_size) {
    if (num_blocks < 1 || block_size < 1)
        throw Error(ErrorKind::InvalidArgument, "the KV cache needs at least one block of one token");
    blocks_.resize(num_blocks);
    free_.reserve(num_blocks);
    for (int b = num_blocks - 1; b >= 0; --b) free_.push_back(b);  // hand out 0, 1, 2... first
}

int KvCacheManager::blocks_for(int64_t n_tokens) const {
    return static_cast<int>((n_tokens + block_size_ - 1) / block_size_);
}

uint64_t KvCacheManager::chain_hash(uint64_t parent, std::span<const int32_t> tokens, uint64_t extra) const {
    uint64_t h = mix(parent, extra);
    for (int32_t t : tokens) h = mix(h, static_cast<uint32_t>(t));
    return h;
}

KvCacheManager::Seq& KvCacheManager::get(SeqId seq) {
    auto it = seqs_.find(seq);
    if (it == seqs_.end()) throw Error(ErrorKind::Internal, "KV cache: unknown sequence " + std::to_string(seq));
    return it->second;
}

const KvCacheManager::Seq& KvCacheManager::get(SeqId seq) const {
    auto it = seqs_.find(seq);
    if (it == seqs_.end()) throw Error(ErrorKind::Internal, "KV cache: unknown sequence " + std::to_string(seq));
    return it->second;
}

int KvCacheManager::open(SeqId seq, std::span<const int32_t> prompt, uint64_t extra_key) {
    if (seqs_.count(seq)) throw Error(ErrorKind::Internal, "KV cache: sequence opened twice");
    Seq s;
    s.extra_key = extra_key;
    const int bs = block_size_;
    const int max_blocks = prompt.empty() ? 0 : static_cast<int>((prompt.size() - 1) / bs);
    uint64_t parent = 0;
    if (extra_key == kPrivateBlocks) {
        seqs_.emplace(seq, std::move(s));
        return 0;
    }
    queries_ += prompt.size();
    for (int i = 0; i < max_blocks; ++i) {
        std::span<const int32_t> toks = prompt.subspan(static_cast<size_t>(i) * bs, bs);
        const uint64_t h = chain_hash(parent, toks, extra_key);
        auto it = by_hash_.find(h);
        if (it == by_hash_.end()) break;
        Block& b = blocks_[it->second];
        if (b.parent_hash != parent || !std::equal(toks.begin(), toks.end(), b.tokens.begin(), b.tokens.end()))
            break;  // a 64-bit collision: treat as a miss
        if (b.ref == 0) lru_.erase(b.lru);
        b.ref++;
        s.table.push_back(it->second);
        s.tokens.insert(s.tokens.end(), toks.begin(), toks.end());
        s.hashes.push_back(h);
        parent = h;
    }
    s.n_hashed_blocks = static_cast<int>(s.table.size());
    const int cached = static_cast<int>(s.tokens.size());
    hits_ += cached;
    seqs_.emplace(seq, std::move(s));
    return cached;
}

BlockId KvCacheManager::take_block() {
    BlockId b;
    if (!free_.empty()) {
        b = free_.back();
        free_.pop_back();
    } else if (!lru_.empty()) {
        b = lru_.front();
        lru_.pop_front();
        Block& old = blocks_[b];
        by_hash_.erase(old.hash);
        old.hashed = false;
        old.tokens.clear();
        evictions_++;
    } else {
        throw Error(ErrorKind::Internal, "KV cache: no block to take");
    }
    blocks_[b].ref = 1;
    return b;
}

void KvCacheManager::release(BlockId id) {
    Block& b = blocks_[id];
    if (b.ref <= 0) broken("release of an unreferenced block");
    if (--b.ref > 0) return;
    if (b.hashed) {
        b.lru = lru_.insert(lru_.end(), id);
    } else {
        free_.push_back(id);
    }
}

bool KvCacheManager::append(SeqId seq, std::span<const int32_t> tokens, std::vector<BlockCopy>& copies) {
    Seq& s = get(seq);
    const int bs = block_size_;
    const int len = static_cast<int>(s.tokens.size());
    const int n = static_cast<int>(tokens.size());
    if (n == 0) return true;
    const int have = static_cast<int>(s.table.size());
    const int need_blocks = blocks_for(len + n) - have;
    const bool partial = len % bs != 0;
    // A partial last block that is shared, or hashed (a truncated sequence's: other sequences may
    // find it by its old tokens), is copied before it is written.
    const bool cow = partial && (blocks_[s.table.back()].ref > 1 || blocks_[s.table.back()].hashed);
    if (need_blocks + (cow ? 1 : 0) > available_blocks()) return false;
    if (cow) {
        const BlockId old = s.table.back();
        const BlockId fresh = take_block();
        copies.push_back({old, fresh, len % bs});
        release(old);
        s.table.back() = fresh;
    }
    for (int i = 0; i < need_blocks; ++i) s.table.push_back(take_block());
    s.tokens.insert(s.tokens.end(), tokens.begin(), tokens.end());
    return true;
}

void KvCacheManager::computed(SeqId seq, int n_computed) {
    Seq& s = get(seq);
    if (s.extra_key == kPrivateBlocks) return;
    const int bs = block_size_;
    n_computed = std::min<int>(n_computed, static_cast<int>(s.tokens.size()));
    const int full = n_computed / bs;
    for (int i = s.n_hashed_blocks; i < full; ++i) {
        const uint64_t parent = i == 0 ? 0 : s.hashes[i - 1];
        std::span<const int32_t> toks(s.tokens.data() + static_cast<size_t>(i) * bs, bs);
        const uint64_t h = chain_hash(parent, toks, s.extra_key);
        s.hashes.push_back(h);
        Block& b = blocks_[s.table[i]];
        if (!b.hashed && !by_hash_.count(h)) {
            b.hashed = true;
            b.hash = h;
            b.parent_hash = parent;
            b.tokens.assign(toks.begin(), toks.end());
            by_hash_[h] = s.table[i];
        }
    }
    s.n_hashed_blocks = std::max(s.n_hashed_blocks, full);
}

void KvCacheManager::fork(SeqId parent, SeqId child) {
    if (seqs_.count(child)) throw Error(ErrorKind::Internal, "KV cache: fork into an existing sequence");
    Seq copy = get(parent);
    for (BlockId b : copy.table) blocks_[b].ref++;
    seqs_.emplace(child, std::move(copy));
}

void KvCacheManager::copy_prefix(SeqId from, SeqId to, int n) {
    if (from == to) return;
    free(to);
    fork(from, to);
    truncate(to, std::min(n, length(to)));
}

void KvCacheManager::free(SeqId seq) {
    auto it = seqs_.find(seq);
    if (it == seqs_.end()) return;
    // Released last block first, so the LRU evicts a chain's tail before its head.
    for (auto b = it->second.table.rbegin(); b != it->second.table.rend(); ++b) release(*b);
    seqs_.erase(it);
}

void KvCacheManager::truncate(SeqId seq, int n) {
    Seq& s = get(seq);
    if (n < 0 || n > static_cast<int>(s.tokens.size()))
        throw Error(ErrorKind::Internal, "KV cache: truncate past the sequence's end");
    const int keep = blocks_for(n);
    while (static_cast<int>(s.table.size()) > keep) {
        release(s.table.back());
        s.table.pop_back();
    }
    s.tokens.resize(n);
    const int full = n / block_size_;
    s.n_hashed_blocks = std::min(s.n_hashed_blocks, full);
    if (static_cast<int>(s.hashes.size()) > s.n_hashed_blocks) s.hashes.resize(s.n_hashed_blocks);
}

int KvCacheManager::length(SeqId seq) const {
    return static_cast<int>(get(seq).tokens.size());
}

const std::vector<BlockId>& KvCacheManager::block_table(SeqId seq) const {
    return get(seq).table;
}

int64_t KvCacheManager::cell(SeqId seq, int position) const {
    const Seq& s = get(seq);
    if (position < 0 || position >= static_cast<int>(s.tokens.size()))
        throw Error(ErrorKind::Internal, "KV cache: position outside the sequence");
    return static_cast<int64_t>(s.table[position / block_size_]) * block_size_ + position % block_size_;
}

KvCacheStats KvCacheManager::stats() const {
    KvCacheStats st;
    st.total_blocks = num_blocks();
    st.cached_blocks = static_cast<int>(lru_.size());
    st.used_blocks = st.total_blocks - st.cached_blocks - static_cast<int>(free_.size());
    st.prefix_queries = queries_;
    st.prefix_hits = hits_;
    st.evictions = evictions_;
    return st;
}

void KvCacheManager::check_invariants() const {
    std::vector<int> refs(blocks_.size(), 0);
    for (const auto& [id, s] : seqs_) {
        if (static_cast<int>(s.table.size()) != blocks_for(static_cast<int64_t>(s.tokens.size())))
            broken("sequence " + std::to_string(id) + " has a table of the wrong length");
        for (BlockId b : s.table) refs.at(b)++;
    }
    std::vector<int> where(blocks_.size(), 0);  // 1 free, 2 lru
    for (BlockId b : free_) {
        if (where.at(b)) broken("block listed twice");
        where[b] = 1;
    }
    for (BlockId b : lru_) {
        if (where.at(b)) broken("block listed twice");
        where[b] = 2;
    }
    for (size_t b = 0; b < blocks_.size(); ++b) {
        const Block& blk = blocks_[b];
        if (blk.ref != refs[b]) broken("block " + std::to_string(b) + " reference count");
        if (blk.ref > 0 && where[b]) broken("referenced block on a free list");
        if (blk.ref == 0 && !where[b]) broken("leaked block " + std::to_string(b));
        if (where[b] == 1 && blk.hashed) broken("hashed block on the free list");
        if (where[b] == 2 && !blk.hashed) broken("unhashed block on the LRU");
        if (blk.hashed) {
            auto it = by_hash_.find(blk.hash);
            if (it == by_hash_.end() || it->second != static_cast<BlockId>(b)) broken("hash index");
        }
    }
    for (const auto& [h, b] : by_hash_)
        if (!blocks_.at(b).hashed || blocks_[b].hash != h) broken("stale hash entry");
}

}  // namespace parlance
