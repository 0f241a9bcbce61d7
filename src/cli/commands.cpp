// The list of subcommands, in the order --help shows them.
#include "cli/commands.h"

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

}  // namespace parlance::cli
