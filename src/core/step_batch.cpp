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

std::vector<float> StepBatch::mask() const {
    const size_t n_kv = read_cells.size();
    std::vector<float> m(tokens.size() * n_kv, -std::numeric_limits<float>::infinity());
    for (size_t i = 0; i < tokens.size(); ++i) {
        float* row = m.data() + i * n_kv + visible[2 * i];
        std::fill(row, row + visible[2 * i + 1], 0.0f);
    }
    return m;
}

}  // namespace parlance
