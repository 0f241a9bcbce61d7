// A parity report: one row per check of a checkpoint against reference outputs (transformers),
// printed by `parlance parity` and asserted by the golden tests, whatever the architecture.
#pragma once

#include <string>
#include <vector>

namespace parlance {

struct ParityRow {
    std::string clip;       // the input: a clip, a prompt
    std::string check;      // "encoder", "first_step", "greedy_fixed", "logits", ...
    bool pass = false;
    bool near_tie = false;  // diverged where the reference's top-2 margin was < 1e-3
    double value = 0.0;     // relative error, max abs diff, or index of first divergence (-1: none)
    std::string detail;
};

struct ParityReport {
    std::string config;
    std::vector<ParityRow> rows;
    bool all_pass() const;
    std::string table() const;  // human-readable, one line per row
};

}  // namespace parlance
