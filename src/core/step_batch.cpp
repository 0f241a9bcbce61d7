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

StepBatch StepBatch::slice(size_t begin, size_t end) const {
    StepBatch b;
    if (begin >= end || end > segments.size()) return b;
    const int t0 = segments[begin].token, t1 = segments[end - 1].token + segments[end - 1].n_tokens;
    const int r0 = segments[begin].read, r1 = segments[end - 1].read + segments[end - 1].n_read;
    b.tokens.assign(tokens.begin() + t0, tokens.begin() + t1);
    b.positions.assign(positions.begin() + t0, positions.begin() + t1);
    b.write_cells.assign(write_cells.begin() + t0, write_cells.begin() + t1);
    b.read_cells.assign(read_cells.begin() + r0, read_cells.begin() + r1);
    for (int t = t0; t < t1; ++t) {
        b.visible.push_back(visible[2 * t] - r0);
        b.visible.push_back(visible[2 * t + 1]);
    }
    for (int32_t o : outputs)
        if (o >= t0 && o < t1) b.outputs.push_back(o - t0);
    // An embedding run lies inside one sequence's rows (the engine adds them per sequence), so a
    // cut between segments never splits one.
    for (const Embeddings& e : embeddings)
        if (e.row >= t0 && e.row < t1) b.embeddings.push_back({e.row - t0, e.rows, e.data});
    for (size_t i = begin; i < end; ++i) {
        Segment g = segments[i];
        g.token -= t0;
        g.read -= r0;
        b.segments.push_back(g);
    }
    return b;
}

StepBatch::Padded StepBatch::padded(int min_read) const {
    constexpr uint16_t kZero = 0x0000, kMinusInf = 0xFC00;  // f16 bits
    Padded p;
    p.sequences = static_cast<int>(segments.size());
    p.max_read = min_read;
    for (const Segment& g : segments) {
        p.max_tokens = std::max(p.max_tokens, g.n_tokens);
        p.max_read = std::max(p.max_read, g.n_read);
    }
    const auto S = static_cast<size_t>(p.sequences), T = static_cast<size_t>(p.max_tokens),
               L = static_cast<size_t>(p.max_read);
    p.read.resize(S * L);
    p.query_rows.resize(S * T);
    p.token_slots.resize(tokens.size());
    p.mask.assign(S * T * L, kMinusInf);
    for (size_t s = 0; s < S; ++s) {
        const Segment& g = segments[s];
        for (size_t j = 0; j < L; ++j)
            p.read[s * L + j] = read_cells[static_cast<size_t>(g.read) + (j < static_cast<size_t>(g.n_read) ? j : 0)];
        for (size_t t = 0; t < T; ++t) {
            const int real = std::min(static_cast<int>(t), g.n_tokens - 1);
            p.query_rows[s * T + t] = g.token + real;
            uint16_t* row = p.mask.data() + (s * T + t) * L;
            if (static_cast<int>(t) < g.n_tokens) {
                const int tok = g.token + real;
                p.token_slots[static_cast<size_t>(tok)] = static_cast<int32_t>(s * T + t);
                std::fill(row, row + visible[2 * static_cast<size_t>(tok) + 1], kZero);
            } else {
                row[0] = kZero;  // padding: one finite weight, never read back
            }
        }
    }
    return p;
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
