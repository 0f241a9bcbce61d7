// Building a StepBatch from the KV manager's block tables (see step_batch.h).
#include "core/step_batch.h"

#include <algorithm>
#include <limits>

namespace parlance {

StepBatch build_step_batch(std::span<const StepSpan> spans, const KvCacheManager& kv) {
    StepBatch b;
    const int align = StepBatch::kSegmentAlign;
    for (const StepSpan& sp : spans) {
        const int n = static_cast<int>(sp.tokens.size());
        for (int j = 0; j < n; ++j) {
            b.tokens.push_back(sp.tokens[j]);
            b.positions.push_back(sp.start + j);
            b.write_cells.push_back(kv.cell(sp.seq, sp.start + j));
        }
        const int end = sp.start + n;
        const int seg_len = (end + align - 1) / align * align;
        const int read_start = static_cast<int>(b.read_cells.size());
        b.segments.push_back({b.n_tokens() - n, n, read_start, seg_len});
        for (int j = 0; j < n; ++j) {
            b.visible.push_back(read_start);
            b.visible.push_back(sp.start + j + 1);  // its own positions 0 .. its own
        }
        const auto pad = static_cast<int32_t>(kv.cell(sp.seq, 0));  // finite, weight 0
        for (int p = 0; p < seg_len; ++p)
            b.read_cells.push_back(p < end ? static_cast<int32_t>(kv.cell(sp.seq, p)) : pad);
        if (sp.output) b.outputs.push_back(static_cast<int32_t>(b.tokens.size()) - 1);
    }
    return b;
}

size_t StepBatch::segment_mask_size() const {
    size_t n = 0;
    for (const Segment& g : segments) n += static_cast<size_t>(g.n_tokens) * static_cast<size_t>(g.n_read);
    return n;
}

std::vector<float> StepBatch::segment_masks() const {
    std::vector<float> m(segment_mask_size(), -std::numeric_limits<float>::infinity());
    float* block = m.data();
    for (const Segment& g : segments) {
        for (int i = 0; i < g.n_tokens; ++i) {
            const int t = g.token + i;  // sees its segment's first visible[2t + 1] cells
            std::fill(block + static_cast<size_t>(i) * g.n_read,
                      block + static_cast<size_t>(i) * g.n_read + visible[2 * t + 1], 0.0f);
        }
        block += static_cast<size_t>(g.n_tokens) * g.n_read;
    }
    return m;
}

}  // namespace parlance
