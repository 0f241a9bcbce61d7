// Registration of the parlance subcommands. Each subcommand lives in its own cli/cmd_*.cpp and
// runs inside its CLI11 callback; errors propagate as parlance::Error to main().
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace parlance::cli {

struct GlobalOptions {
    std::string log_level = "info";
    int exit_code = 0;  // set by a subcommand that wants a non-zero exit without throwing
};

void register_commands(CLI::App& app, GlobalOptions& globals);

// --deterministic on a command that computes on a device: the GPU keeps every result bit-identical
// alone and batched (core/graph_ops.h's Segmented layout) instead of the throughput step.
void add_deterministic_flag(CLI::App* cmd);

// One per subcommand file.
void register_info(CLI::App& app, GlobalOptions& globals);
void register_transcribe(CLI::App& app, GlobalOptions& globals);
void register_parity(CLI::App& app, GlobalOptions& globals);
void register_serve(CLI::App& app, GlobalOptions& globals);
void register_convert(CLI::App& app, GlobalOptions& globals);
void register_pull(CLI::App& app, GlobalOptions& globals);
void register_generate(CLI::App& app, GlobalOptions& globals);
void register_vad(CLI::App& app, GlobalOptions& globals);
void register_stream(CLI::App& app, GlobalOptions& globals);
void register_top(CLI::App& app, GlobalOptions& globals);

}  // namespace parlance::cli
