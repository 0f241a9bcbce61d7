// One decoder step over many sequences, as a model's graph consumes it: the tokens to compute,
// their positions, the KV-cache cell each one writes, the cells attention reads and the mask that
// lets each token see only its own sequence's cells at positions up to its own. Built by the
// engine from the KV cache manager's block tables; the model never sees blocks or sequences.
//
// Batch invariance: each sequence's cells occupy one segment of `read_cells`, in position order,
// starting at a multiple of kSegmentAlign and padded to one, so every per-token reduction
// (softmax sums, attention·V dot products) sees the same values in the same SIMD lanes whether
// the sequence runs alone or beside others; foreign and padding cells add exact zeros.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/kv_cache_manager.h"

namespace parlance {

struct StepBatch {
    static constexpr int kSegmentAlign = 64;  // >= ggml's widest f32 SIMD step (AVX-512: 64)

    std::vector<int32_t> tokens;       // [n_tokens]
    std::vector<int32_t> positions;    // [n_tokens]
    std::vector<int64_t> write_cells;  // [n_tokens] KV cell of each token
    std::vector<int32_t> read_cells;   // [n_kv] cells attention gathers (segments, padded)
    // [n_tokens][2]: token i sees read_cells[visible[2i] .. visible[2i] + visible[2i+1]) (its own
    // sequence's positions 0 .. its own); every other cell is hidden.
    std::vector<int32_t> visible;
    std::vector<int32_t> outputs;  // token indices whose logits are returned, in order

    // Rows of the input embeddings replaced by given vectors (audio features): tokens
    // [row, row + rows) take data[(i - row) * hidden ...].
    struct Embeddings {
        int row = 0;
        int rows = 0;
        const float* data = nullptr;  // [rows][hidden]; valid for the step
    };
    std::vector<Embeddings> embeddings;

    // Each span's place in the batch: its tokens [token, token + n_tokens) and its read segment
    // read_cells[read, read + n_read). A GPU attends segment by segment (graph_ops.h). `state` is
    // the sequence's model state (Sequence::model_state, e.g. Whisper's encoded audio), opaque
    // here and null for models that keep none.
    struct Segment {
        int token = 0, n_tokens = 0, read = 0, n_read = 0;
        const void* state = nullptr;
    };
    std::vector<Segment> segments;

    int n_tokens() const { return static_cast<int>(tokens.size()); }
    int n_kv() const { return static_cast<int>(read_cells.size()); }
    // The visibility as additive masks, one [n_tokens][n_read] block per segment, in order (0
    // visible, -inf hidden): sum of n_tokens * n_read floats.
    std::vector<float> segment_masks() const;
    size_t segment_mask_size() const;
    // The batch of segments [begin, end) alone, rows and cells renumbered from 0: a step too
    // large for one graph runs as several (each sequence's result depends on it alone).
    StepBatch slice(size_t begin, size_t end) const;

    // The step as one padded block per sequence, for attention over the whole batch in one
    // flash-attention call (graph_ops.h's padded_attention): sequence s reads cells
    // read[s * max_read ...] (its segment, then its first cell again as padding), its query slots
    // are q's rows query_rows[s * max_tokens ...] (its tokens, then its last one again), token i's
    // result is slot token_slots[i], and mask (f16 bits, [S][max_tokens][max_read]) shows each
    // slot its visible cells: 0, else -inf. A padding slot sees its sequence's first cell.
    struct Padded {
        int sequences = 0, max_tokens = 0, max_read = 0;
        std::vector<int32_t> read, query_rows, token_slots;
        std::vector<uint16_t> mask;
    };
    // max_read is at least `min_read` (a graph kept across steps holds room for more).
    Padded padded(int min_read = 0) const;
};

// One sequence's tokens in a step: positions [start, start + tokens.size()) of `seq`, whose cells
// the KV manager has reserved; `output` asks for the logits after its last token.
struct StepSpan {
    SeqId seq = 0;
    int start = 0;
    std::span<const int32_t> tokens;
    bool output = false;
};

// The batch for these spans, in order: token rows, write cells, each sequence's read segment
// (positions 0 .. start + n, aligned and padded to kSegmentAlign) and the causal mask. Embedding
// rows are left to the caller.
StepBatch build_step_batch(std::span<const StepSpan> spans, const KvCacheManager& kv);

}  // namespace parlance
