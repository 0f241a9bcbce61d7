// Process-wide settings of how core computes and what it records, chosen once at start-up, before
// any model loads, by the program's entry point: the CLI reads them from the PARLANCE_* environment
// variables (cli/runtime_environment.h; the tests' support code calls the same reader). Core reads
// this value and never the environment.
#pragma once

#include <string>

namespace parlance {

struct RuntimeSettings {
    // Attention layout for every KV cache (PARLANCE_ATTENTION_LAYOUT): "" by the cache's memory
    // and --deterministic; "gpu" (Segmented) or "padded" runs a GPU's graphs on the CPU (tests).
    std::string attention_layout;
    // The GPU's numerics (the commands' --deterministic): true keeps every result bit-identical
    // alone and batched (Segmented attention, one-column products); false (the default) is the
    // throughput step (Padded). The CPU is bit-identical either way.
    bool deterministic_gpu = false;
    // The CPU kernels' instruction set (PARLANCE_CPU_KERNELS): "" the best cpuid offers, "avx2" or
    // "none" (tests and benchmarks of the narrower paths).
    std::string cpu_kernels;
    // Transparent huge pages for the KV cache and weights (PARLANCE_HUGE_PAGES=off: none).
    bool huge_pages = true;
    // f16 weight products at ggml's default precision on a GPU (PARLANCE_GPU_ACCUMULATION=default:
    // f16 accumulation in cuBLAS) instead of f32 (an experiment's switch; docs/cuda.md).
    bool gpu_default_accumulation = false;
    // Every graph node timed, the ops that took the time printed at exit (PARLANCE_PROFILE_OPS=1).
    bool profile_ops = false;
    // Every graph node's result written under this folder (PARLANCE_TRACE_OPS; "" none).
    std::string trace_ops_dir;
};

// Sets the settings; call once, before anything computes (later calls are refused with
// Error(Internal) once a setting has been read).
void set_runtime_settings(const RuntimeSettings& settings);
// The settings (the defaults above until set).
const RuntimeSettings& runtime_settings();

}  // namespace parlance
