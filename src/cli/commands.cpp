// The list of subcommands, in the order --help shows them.
#include "cli/commands.h"

#include "cli/runtime_environment.h"

namespace parlance::cli {

void register_commands(CLI::App& app, GlobalOptions& globals) {
    register_serve(app, globals);
    register_transcribe(app, globals);
    register_info(app, globals);
    register_parity(app, globals);
    register_convert(app, globals);
    register_pull(app, globals);
    register_generate(app, globals);
    register_vad(app, globals);
    register_stream(app, globals);
    register_top(app, globals);
}

void add_deterministic_flag(CLI::App* cmd) {
    cmd->add_flag_callback(
        "--deterministic", [] { apply_deterministic_gpu(); },
        "On a GPU: every result bit-identical alone and batched (each sequence attended by itself, each "
        "product one column at a time; slower under load) instead of the throughput step, whose last bits "
        "follow the batch. The CPU is always bit-identical");
}

}  // namespace parlance::cli
