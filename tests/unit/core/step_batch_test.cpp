// StepBatch: each span is one read segment (aligned, padded) and one block of the GPU masks.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "core/graph_ops.h"
#include "core/kv_cache_manager.h"
#include "core/step_batch.h"
#include "core_test_util.h"

namespace parlance {
namespace {

using testing::iota_tokens;

// Sequence 1 (70 tokens): a prompt chunk of 5 tokens at positions 65..69; sequence 2 (3 tokens): one
// token at 2.
StepBatch chunk_and_one(KvCacheManager& kv) {
    std::vector<BlockCopy> copies;
    const std::vector<int32_t> a = iota_tokens(70), b = iota_tokens(3, 100);
    kv.open(1, a);
    EXPECT_TRUE(kv.append(1, a, copies));
    kv.open(2, b);
    EXPECT_TRUE(kv.append(2, b, copies));
    const std::vector<int32_t> chunk(a.begin() + 65, a.end()), one(b.begin() + 2, b.end());
    const std::vector<StepSpan> spans = {{1, 65, chunk, true}, {2, 2, one, true}};
    return build_step_batch(spans, kv);
}

TEST(StepBatch, EachSpanIsOneSegmentAndOneMaskBlock) {
    KvCacheManager kv(64, 16);
    const StepBatch s = chunk_and_one(kv);
    ASSERT_EQ(s.segments.size(), 2u);
    const int align = StepBatch::kSegmentAlign;
    EXPECT_EQ(s.segments[0].token, 0);
    EXPECT_EQ(s.segments[0].n_tokens, 5);
    EXPECT_EQ(s.segments[0].read, 0);
    EXPECT_EQ(s.segments[0].n_read, 2 * align);  // positions 0..69, padded
    EXPECT_EQ(s.segments[1].token, 5);
    EXPECT_EQ(s.segments[1].n_tokens, 1);
    EXPECT_EQ(s.segments[1].read, 2 * align);
    EXPECT_EQ(s.segments[1].n_read, align);
    EXPECT_EQ(s.n_kv(), 3 * align);
    EXPECT_EQ(s.read_cells[s.segments[1].read + 2], kv.cell(2, 2));

    const std::vector<float> m = s.segment_masks();
    ASSERT_EQ(m.size(), s.segment_mask_size());
    ASSERT_EQ(m.size(), static_cast<size_t>(5 * 2 * align + 1 * align));
    // Token j of the chunk sees positions 0..65+j of its own segment and nothing else.
    for (int j = 0; j < 5; ++j)
        for (int c = 0; c < 2 * align; ++c)
            EXPECT_EQ(m[static_cast<size_t>(j * 2 * align + c)] == 0.0f, c <= 65 + j) << "token " << j << " cell " << c;
    const float* last = m.data() + 5 * 2 * align;
    for (int c = 0; c < align; ++c) EXPECT_EQ(last[c] == 0.0f, c <= 2) << "cell " << c;
    EXPECT_TRUE(std::isinf(last[3]) && last[3] < 0);
}

TEST(StepBatch, ASliceIsTheBatchOfItsSpansAlone) {
    KvCacheManager kv(64, 16);
    std::vector<BlockCopy> copies;
    const std::vector<int32_t> a = iota_tokens(70), b = iota_tokens(3, 100), c = iota_tokens(20, 200);
    kv.open(1, a);
    ASSERT_TRUE(kv.append(1, a, copies));
    kv.open(2, b);
    ASSERT_TRUE(kv.append(2, b, copies));
    kv.open(3, c);
    ASSERT_TRUE(kv.append(3, c, copies));
    const std::vector<int32_t> chunk(a.begin() + 65, a.end()), one(b.begin() + 2, b.end()), pre(c.begin(), c.end());
    const std::vector<StepSpan> spans = {{1, 65, chunk, true}, {2, 2, one, false}, {3, 0, pre, true}};
    StepBatch whole = build_step_batch(spans, kv);
    const float rows[2 * 4] = {};
    whole.embeddings.push_back({6, 2, rows});  // two rows of sequence 3's
    int tag = 0;
    whole.segments[2].state = &tag;

    const StepBatch part = whole.slice(1, 3);
    StepBatch want = build_step_batch(std::span<const StepSpan>(spans).subspan(1), kv);
    EXPECT_EQ(part.tokens, want.tokens);
    EXPECT_EQ(part.positions, want.positions);
    EXPECT_EQ(part.write_cells, want.write_cells);
    EXPECT_EQ(part.read_cells, want.read_cells);
    EXPECT_EQ(part.visible, want.visible);
    EXPECT_EQ(part.outputs, want.outputs);
    EXPECT_EQ(part.segment_masks(), want.segment_masks());
    ASSERT_EQ(part.segments.size(), 2u);
    EXPECT_EQ(part.segments[1].token, want.segments[1].token);
    EXPECT_EQ(part.segments[1].read, want.segments[1].read);
    EXPECT_EQ(part.segments[1].state, &tag);
    ASSERT_EQ(part.embeddings.size(), 1u);
    EXPECT_EQ(part.embeddings[0].row, 1);
    EXPECT_EQ(part.embeddings[0].data, rows);
    EXPECT_TRUE(whole.slice(0, 1).embeddings.empty());
}

// The padded layout: sequence s's cells in its block of max_read (its segment, then its first
// cell again), its query slots, each token's slot, and a mask showing each slot exactly its
// visible cells.
TEST(StepBatch, ThePaddedLayoutGivesEachSequenceOneBlock) {
    KvCacheManager kv(64, 16);
    const StepBatch s = chunk_and_one(kv);
    const StepBatch::Padded p = s.padded();
    const int align = StepBatch::kSegmentAlign;
    ASSERT_EQ(p.sequences, 2);
    ASSERT_EQ(p.max_tokens, 5);
    ASSERT_EQ(p.max_read, 2 * align);
    EXPECT_EQ(p.read[0], kv.cell(1, 0));
    EXPECT_EQ(p.read[69], kv.cell(1, 69));
    EXPECT_EQ(p.read[static_cast<size_t>(2 * align) + 2], kv.cell(2, 2));
    EXPECT_EQ(p.read[static_cast<size_t>(2 * align) + align + 5], kv.cell(2, 0));  // past its segment
    EXPECT_EQ(p.query_rows, (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 5, 5, 5, 5}));
    EXPECT_EQ(p.token_slots, (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
    const auto shown = [&](int slot, int cell) { return p.mask[static_cast<size_t>(slot * 2 * align + cell)] == 0; };
    for (int j = 0; j < 5; ++j)
        for (int c = 0; c < 2 * align; ++c) EXPECT_EQ(shown(j, c), c <= 65 + j) << "token " << j << " cell " << c;
    for (int c = 0; c < 2 * align; ++c) EXPECT_EQ(shown(5, c), c <= 2) << "cell " << c;
    for (int slot = 6; slot < 10; ++slot)  // padding slots: one finite weight
        for (int c = 0; c < 2 * align; ++c) EXPECT_EQ(shown(slot, c), c == 0);
    // A kept graph's room: max_read grows to what it holds.
    EXPECT_EQ(s.padded(4 * align).max_read, 4 * align);
}

// The throughput layout's attention is a constant number of nodes whatever the number of
// sequences (the segmented layout's grows by 24 per sequence per layer).
TEST(PaddedAttention, TheNodeCountDoesNotGrowWithTheSequences) {
    auto nodes = [](int sequences) {
        ggml_init_params params{64 << 20, nullptr, /*no_alloc=*/true};
        ggml_context* ctx = ggml_init(params);
        const int64_t hd = 64, H = 8, Hkv = 2, T = 1, L = 128, n = sequences * T;
        StepTensors in;
        in.sequences = sequences;
        in.max_tokens = static_cast<int>(T);
        in.max_read = static_cast<int>(L);
        in.pad_read = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, L * sequences);
        in.query_rows = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, T * sequences);
        in.token_slots = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n);
        in.pad_mask = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, L, T, 1, sequences);
        ggml_tensor* q = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, hd, H, n);
        ggml_tensor* k = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, hd * Hkv, 4096);
        ggml_tensor* v = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, hd * Hkv, 4096);
        ggml_tensor* out = padded_attention(ctx, q, k, v, in, 0.125f);
        EXPECT_EQ(out->ne[0], hd * H);
        EXPECT_EQ(out->ne[1], n);
        ggml_cgraph* g = ggml_new_graph(ctx);
        ggml_build_forward_expand(g, out);
        const int count = ggml_graph_n_nodes(g);
        ggml_free(ctx);
        return count;
    };
    EXPECT_EQ(nodes(1), nodes(64));
    EXPECT_EQ(nodes(1), nodes(256));
}

}  // namespace
}  // namespace parlance
