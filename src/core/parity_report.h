// A parity report: one row per check of a checkpoint against reference outputs (transformers),
// printed by `parlance parity` and asserted by the golden tests, whatever the architecture.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/backend.h"

namespace parlance {

// How `parlance parity` runs a reference directory.
struct ParityOptions {
    BackendOptions backend;
    std::string quantize;             // "" = weights as stored
    double encoder_tolerance = 1e-3;  // relative L2 error
    // Run this model (HF directory or whisper.cpp .bin holding the same weights, e.g. a
    // conversion) instead of the reference directory's model/. Empty = the reference's own.
    std::filesystem::path model_override;
    // Only the encoder check per clip (fast: no decoding), e.g. to measure a weight dtype.
    bool encoder_only = false;
};

struct ParityRow {
    std::string clip;   // the input: a clip, a prompt
    std::string check;  // "encoder", "first_step", "greedy_fixed", "logits", ...
    bool pass = false;
    bool near_tie = false;  // diverged where the reference's top-2 margin was < 1e-3
    double value = 0.0;     // relative error, max abs diff, or index of first divergence (-1: none)
    std::string detail;
};

// A number for a row's detail, printf-formatted ("%.2e").
std::string format_number(const char* format, double v);

struct ParityReport {
    std::string config;
    std::vector<ParityRow> rows;
    bool all_pass() const;
    std::string table() const;  // human-readable, one line per row
};

}  // namespace parlance
