// The paged KV cache manager: allocation, freeing, forks with copy-on-write, prefix hashing,
// eviction, and no leaked block after 10,000 random operations.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>

#include "core/error.h"
#include "core/kv_cache_manager.h"
#include "core_test_util.h"

namespace parlance {
namespace {

using testing::iota_tokens;

TEST(KvCacheManager, AppendTakesBlocksAsTokensArrive) {
    KvCacheManager kv(8, 4);
    std::vector<BlockCopy> copies;
    EXPECT_EQ(kv.open(1, iota_tokens(6)), 0);
    ASSERT_TRUE(kv.append(1, iota_tokens(6), copies));
    EXPECT_EQ(kv.block_table(1).size(), 2u);
    EXPECT_EQ(kv.available_blocks(), 6);
    ASSERT_TRUE(kv.append(1, iota_tokens(2, 6), copies));  // fills block 2 exactly
    EXPECT_EQ(kv.block_table(1).size(), 2u);
    EXPECT_EQ(kv.cell(1, 5), kv.block_table(1)[1] * 4 + 1);
    EXPECT_TRUE(copies.empty());
    kv.check_invariants();
    kv.free(1);
    EXPECT_EQ(kv.available_blocks(), 8);
    kv.check_invariants();
}

TEST(KvCacheManager, RefusesWhatDoesNotFitAndChangesNothing) {
    KvCacheManager kv(2, 4);
    std::vector<BlockCopy> copies;
    kv.open(1, iota_tokens(9));
    EXPECT_FALSE(kv.append(1, iota_tokens(9), copies));
    EXPECT_EQ(kv.length(1), 0);
    EXPECT_EQ(kv.available_blocks(), 2);
    EXPECT_TRUE(kv.append(1, iota_tokens(8), copies));
    EXPECT_EQ(kv.available_blocks(), 0);
    kv.check_invariants();
}

TEST(KvCacheManager, ForkSharesBlocksAndCopiesOnWrite) {
    KvCacheManager kv(8, 4);
    std::vector<BlockCopy> copies;
    kv.open(1, iota_tokens(6));
    ASSERT_TRUE(kv.append(1, iota_tokens(6), copies));
    kv.fork(1, 2);
    EXPECT_EQ(kv.block_table(2), kv.block_table(1));
    EXPECT_EQ(kv.available_blocks(), 6);  // shared, not copied
    ASSERT_TRUE(kv.append(2, std::vector<int32_t>{100}, copies));
    ASSERT_EQ(copies.size(), 1u);  // the shared partial block was copied before the write
    EXPECT_EQ(copies[0].from, kv.block_table(1)[1]);
    EXPECT_EQ(copies[0].to, kv.block_table(2)[1]);
    EXPECT_EQ(copies[0].n_tokens, 2);
    EXPECT_EQ(kv.block_table(2)[0], kv.block_table(1)[0]);  // the full block stays shared
    copies.clear();
    ASSERT_TRUE(kv.append(1, std::vector<int32_t>{200}, copies));
    EXPECT_TRUE(copies.empty());  // the parent owns its block alone again
    kv.check_invariants();
    kv.free(1);
    kv.free(2);
    EXPECT_EQ(kv.available_blocks(), 8);
    kv.check_invariants();
}

TEST(KvCacheManager, SharedPrefixReusesComputedFullBlocks) {
    KvCacheManager kv(16, 4);
    std::vector<BlockCopy> copies;
    const std::vector<int32_t> prompt = iota_tokens(10);
    kv.open(1, prompt);
    ASSERT_TRUE(kv.append(1, prompt, copies));
    // Not computed yet: nothing to share.
    EXPECT_EQ(kv.open(2, prompt), 0);
    kv.free(2);
    kv.computed(1, 10);
    EXPECT_EQ(kv.open(3, prompt), 8);  // two full blocks; the partial third is not shared
    EXPECT_EQ(kv.block_table(3)[0], kv.block_table(1)[0]);
    EXPECT_EQ(kv.block_table(3)[1], kv.block_table(1)[1]);
    // Another salt (what the tokens are conditioned on) does not match.
    EXPECT_EQ(kv.open(4, prompt, /*extra_key=*/7), 0);
    // A prompt of exactly two blocks keeps its last token to compute: one block is reused.
    EXPECT_EQ(kv.open(5, iota_tokens(8)), 4);
    // A different second block stops the chain after the first.
    std::vector<int32_t> other = prompt;
    other[5] = 99;
    EXPECT_EQ(kv.open(6, other), 4);
    kv.check_invariants();
    const KvCacheStats st = kv.stats();
    EXPECT_EQ(st.prefix_hits, 8u + 4u + 4u);
    for (SeqId s : {1, 3, 4, 5, 6}) kv.free(s);
    kv.check_invariants();
    // Freed hashed blocks stay cached: a later identical prompt still hits.
    EXPECT_EQ(kv.stats().cached_blocks, 2);
    EXPECT_EQ(kv.open(7, prompt), 8);
    kv.free(7);
    kv.check_invariants();
}

TEST(KvCacheManager, TruncateReleasesBlocksAndNeverOverwritesAHashedOne) {
    KvCacheManager kv(8, 4);
    std::vector<BlockCopy> copies;
    kv.open(1, iota_tokens(10));
    ASSERT_TRUE(kv.append(1, iota_tokens(10), copies));
    kv.computed(1, 10);  // blocks 0 and 1 are hashed
    kv.truncate(1, 6);   // keeps block 0 and half of block 1
    EXPECT_EQ(kv.length(1), 6);
    EXPECT_EQ(kv.block_table(1).size(), 2u);
    const BlockId hashed = kv.block_table(1)[1];
    ASSERT_TRUE(kv.append(1, std::vector<int32_t>{77}, copies));
    ASSERT_EQ(copies.size(), 1u) << "the hashed block is copied, not written";
    EXPECT_EQ(copies[0].from, hashed);
    EXPECT_EQ(copies[0].n_tokens, 2);
    // The old block still answers for its old tokens.
    EXPECT_EQ(kv.open(2, iota_tokens(10)), 8);
    kv.check_invariants();
    kv.truncate(1, 0);
    EXPECT_TRUE(kv.block_table(1).empty());
    kv.free(1);
    kv.free(2);
    kv.check_invariants();
    EXPECT_EQ(kv.stats().used_blocks, 0);
}

TEST(KvCacheManager, EvictsCachedBlocksWhenFreeOnesRunOut) {
    KvCacheManager kv(3, 2);
    std::vector<BlockCopy> copies;
    kv.open(1, iota_tokens(4));
    ASSERT_TRUE(kv.append(1, iota_tokens(4), copies));
    kv.computed(1, 4);
    kv.free(1);
    EXPECT_EQ(kv.stats().cached_blocks, 2);
    EXPECT_EQ(kv.available_blocks(), 3);
    kv.open(2, iota_tokens(6, 50));
    ASSERT_TRUE(kv.append(2, iota_tokens(6, 50), copies));  // needs all three: evicts both cached
    EXPECT_EQ(kv.stats().evictions, 2u);
    EXPECT_EQ(kv.stats().cached_blocks, 0);
    kv.free(2);
    EXPECT_EQ(kv.open(3, iota_tokens(4)), 0);  // the evicted prefix is gone
    kv.check_invariants();
}

// A private sequence (kPrivateBlocks: embeddings in its prompt, or Whisper's audio-conditioned
// tokens) neither finds nor publishes blocks, and its blocks go back to the free pool: the next
// sequence gets the same, already touched, blocks instead of fresh ones — over a long file the
// cache's resident memory stays what one request needs.
TEST(KvCacheManager, PrivateSequencesReuseTheBlocksTheyFree) {
    KvCacheManager kv(16, 4);
    std::vector<BlockCopy> copies;
    EXPECT_EQ(kv.open(1, iota_tokens(10), kPrivateBlocks), 0);
    ASSERT_TRUE(kv.append(1, iota_tokens(10), copies));
    kv.computed(1, 10);
    const std::vector<BlockId> first = kv.block_table(1);
    kv.free(1);
    EXPECT_EQ(kv.stats().cached_blocks, 0);
    // The same tokens again: nothing found (0 tokens cached, no query counted), the same blocks.
    EXPECT_EQ(kv.open(2, iota_tokens(10), kPrivateBlocks), 0);
    ASSERT_TRUE(kv.append(2, iota_tokens(10), copies));
    std::vector<BlockId> second = kv.block_table(2);
    std::vector<BlockId> sorted_first = first;
    std::sort(sorted_first.begin(), sorted_first.end());
    std::sort(second.begin(), second.end());
    EXPECT_EQ(second, sorted_first);
    EXPECT_EQ(kv.stats().prefix_queries, 0u);
    kv.free(2);
    // A shared sequence with those tokens publishes its full blocks; a private one does not see them.
    kv.open(3, iota_tokens(10));
    ASSERT_TRUE(kv.append(3, iota_tokens(10), copies));
    kv.computed(3, 10);
    kv.free(3);
    EXPECT_EQ(kv.stats().cached_blocks, 2);
    EXPECT_EQ(kv.open(4, iota_tokens(10), kPrivateBlocks), 0);
    EXPECT_EQ(kv.open(5, iota_tokens(10)), 8);
    kv.check_invariants();
}

TEST(KvCacheManager, NoLeakAfterTenThousandRandomOperations) {
    KvCacheManager kv(64, 4);
    std::mt19937 rng(1234);
    std::map<SeqId, int> live;  // id -> tokens
    SeqId next = 1;
    std::vector<BlockCopy> copies;
    // A few shared prompt shapes so prefix hits happen.
    auto prompt_of = [&](int kind, int n) {
        std::vector<int32_t> t(n);
        for (int i = 0; i < n; ++i) t[i] = kind * 1000 + i;
        return t;
    };
    for (int op = 0; op < 10000; ++op) {
        const int what = static_cast<int>(rng() % 5);
        if (what == 0 || live.empty()) {
            const SeqId id = next++;
            const int n = 1 + static_cast<int>(rng() % 20);
            const auto p = prompt_of(static_cast<int>(rng() % 3), n);
            const int cached = kv.open(id, p);
            ASSERT_LT(cached, n);
            if (!kv.append(id, std::span(p).subspan(cached), copies)) {
                kv.free(id);
                continue;
            }
            live[id] = n;
        } else {
            auto it = live.begin();
            std::advance(it, rng() % live.size());
            const SeqId id = it->first;
            if (what == 1) {
                const int n = 1 + static_cast<int>(rng() % 6);
                if (kv.append(id, prompt_of(9, n), copies)) it->second += n;
            } else if (what == 2) {
                kv.computed(id, static_cast<int>(rng() % (it->second + 1)));
            } else if (what == 3) {
                const SeqId child = next++;
                kv.fork(id, child);
                live[child] = it->second;
            } else {
                kv.free(id);
                live.erase(it);
            }
        }
        for (const auto& [id, n] : live) ASSERT_EQ(kv.length(id), n);
        if (op % 97 == 0) kv.check_invariants();
    }
    kv.check_invariants();
    for (const auto& [id, n] : live) kv.free(id);
    kv.check_invariants();
    EXPECT_EQ(kv.stats().used_blocks, 0);
    EXPECT_EQ(kv.available_blocks(), 64);
}

}  // namespace
}  // namespace parlance
