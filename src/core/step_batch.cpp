// Building a StepBatch from the KV manager's block tables (see step_batch.h).
#include "core/step_batch.h"

#include <algorithm>
#include <limits>

namespace parlance {

StepBatch build_step_batch(std::span<const StepSpan> spans, const KvCacheManager& kv) {
    StepBatch b;
    const int align = StepBatch::kSegmentAlign;
    struct Seg {
        int read_start, first_row;
    };
    std::vector<Seg> segs;
    segs.reserve(spans.size());
    for (const StepSpan& sp : spans) {
        const int first = static_cast<int>(b.tokens.size());
        const int n = static_cast<int>(sp.tokens.size());
        for (int j = 0; j < n; ++j) {
            b.tokens.push_back(sp.tokens[j]);
            b.positions.push_back(sp.start + j);
            b.write_cells.push_back(kv.cell(sp.seq, sp.start + j));
        }
        const int end = sp.start + n;
        const int seg_len = (end + align - 1) / align * align;
        segs.push_back({static_cast<int>(b.read_cells.size()), first});
        const auto pad = static_cast<int32_t>(kv.cell(sp.seq, 0));  // finite, weight 0
        for (int p = 0; p < seg_len; ++p) b.read_cells.push_back(p < end ? static_cast<int32_t>(kv.cell(sp.seq, p)) : pad);
        if (sp.output) b.outputs.push_back(static_cast<int32_t>(b.tokens.size()) - 1);
    }
    const size_t n_kv = b.read_cells.size();
    b.mask.assign(b.tokens.size() * n_kv, -std::numeric_limits<float>::infinity());
    for (size_t i = 0; i < spans.size(); ++i) {
        const StepSpan& sp = spans[i];
        for (int j = 0; j < static_cast<int>(sp.tokens.size()); ++j) {
            float* row = b.mask.data() + static_cast<size_t>(segs[i].first_row + j) * n_kv + segs[i].read_start;
            std::fill(row, row + sp.start + j + 1, 0.0f);  // its own positions 0 .. its own
        }
    }
    return b;
}

}  // namespace parlance
