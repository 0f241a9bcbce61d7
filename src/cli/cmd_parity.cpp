// `parlance parity REFERENCE_DIR...`: runs the model of each reference directory against the
// transformers outputs stored there and prints the comparison table. Exit 1 if any check fails.
#include <cstdio>

#include "cli/commands.h"
#include "models/whisper/parity.h"

namespace parlance::cli {

void register_parity(CLI::App& app, GlobalOptions& globals) {
    auto* cmd = app.add_subcommand(
        "parity", "Compare a model with reference outputs from transformers (tools/reference/)");
    auto dirs = std::make_shared<std::vector<std::string>>();
    auto opts = std::make_shared<whisper::ParityOptions>();
    cmd->add_option("reference", *dirs,
                    "Reference directories (reference.json + model/), e.g. tests/fixtures/whisper/tiny-en")
        ->required()
        ->check(CLI::ExistingDirectory);
    cmd->add_option("-t,--threads", opts->backend.threads, "CPU threads (0 = all, up to 8)");
    cmd->add_option("--device", opts->backend.device, "cpu|cuda|metal")->default_val("cpu");
    cmd->add_option("--quantize", opts->quantize,
                    "Linear weights at load: f32 (full precision) or quantized f16|q8_0|q5_k|q4_k");
    cmd->add_option("--model", opts->model_override,
                    "Run this model (HF directory or whisper.cpp .bin of the same weights) instead of "
                    "each reference's model/");
    cmd->add_option("--encoder-tolerance", opts->encoder_tolerance, "Largest relative encoder error")
        ->default_val(1e-3);
    cmd->callback([dirs, opts, &globals] {
        for (const auto& d : *dirs) {
            auto report = whisper::run_parity(d, *opts);
            std::printf("%s\n", report.table().c_str());
            if (!report.all_pass()) globals.exit_code = 1;
        }
    });
}

}  // namespace parlance::cli
