// The parlance command: parses the global flags and dispatches to one subcommand per file
// (cli/cmd_*.cpp). Errors become a message on stderr and a non-zero exit status.
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/runtime_environment.h"
#include "core/error.h"

int main(int argc, char** argv) {
    // The PARLANCE_* variables, the only environment core's settings come from, before anything
    // computes.
    try {
        parlance::cli::apply_runtime_environment();
    } catch (const parlance::Error& e) {
        std::fprintf(stderr, "parlance: error: %s\n", e.what());
        return 2;
    }
    CLI::App app{
        "parlance " PARLANCE_VERSION
        " - a native inference server for open speech and language models on ggml.\n"
        "Loads HF snapshot directories, GGUF and whisper.cpp files; serves OpenAI-compatible APIs."};
    app.set_version_flag("-V,--version", "parlance " PARLANCE_VERSION);
    app.require_subcommand(1);
    app.footer("Run 'parlance COMMAND --help' for the options of a command.");

    parlance::cli::GlobalOptions globals;
    app.add_option("--log-level", globals.log_level, "debug|info|warn|error|off")
        ->default_val("info");

    parlance::cli::register_commands(app, globals);

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    } catch (const parlance::Error& e) {
        std::fprintf(stderr, "parlance: error: %s\n", e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "parlance: internal error: %s\n", e.what());
        return 70;
    }
    return globals.exit_code;
}
