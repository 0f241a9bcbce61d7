// `parlance parity REFERENCE_DIR...`: runs the model of each reference directory against the
// transformers outputs stored there and prints the comparison table. Exit 1 if any check fails.
#include <cstdio>

#include <fstream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "engine/audio_lm_parity.h"
#include "engine/generation_decode_service.h"
#include "engine/lm_parity.h"
#include "models/registry.h"

namespace parlance::cli {
namespace {

// References of tools/reference/qwen3*_reference.py hold no weights: the tests' writer makes them.
[[noreturn]] void refuse_without_weights(const std::string& reference_dir, const std::string& writer_prefix) {
    throw Error(ErrorKind::InvalidArgument,
                reference_dir + " holds no weights: pass --model (build/tests/write_qwen3_fixture " + writer_prefix +
                    std::filesystem::path(reference_dir).filename().string() + " DIR writes them)");
}

}  // namespace

void register_parity(CLI::App& app, GlobalOptions& globals) {
    auto* cmd =
        app.add_subcommand("parity", "Compare a model with reference outputs from transformers (tools/reference/)");
    auto dirs = std::make_shared<std::vector<std::string>>();
    auto opts = std::make_shared<ParityOptions>();
    cmd->add_option("reference", *dirs,
                    "Reference directories (reference.json + model/), e.g. tests/fixtures/whisper/tiny-en")
        ->required()
        ->check(CLI::ExistingDirectory);
    cmd->add_option("-t,--threads", opts->backend.threads, "CPU threads (0 = all, up to 8)");
    cmd->add_option("--device", opts->backend.device, "cpu|cuda|metal")->default_val("cpu");
    add_deterministic_flag(cmd);
    cmd->add_option("--quantize", opts->quantize,
                    "Linear weights at load: f32 (full precision) or quantized f16|q8_0|q5_k|q4_k");
    cmd->add_option("--model", opts->model_override,
                    "Run this model (HF directory, GGUF file or pair directory, whisper.cpp .bin of the same "
                    "weights) instead of each reference's model/");
    auto mmproj = std::make_shared<std::string>();
    cmd->add_option("--mmproj", *mmproj,
                    "With --model TEXT.gguf: llama.cpp's multimodal projector GGUF of the pair (Qwen3-ASR)");
    cmd->add_option("--encoder-tolerance", opts->encoder_tolerance, "Largest relative encoder error")
        ->default_val(1e-3);
    cmd->callback([dirs, opts, mmproj, &globals] {
        for (const auto& d : *dirs) {
            std::ifstream in(std::filesystem::path(d) / "reference.json");
            if (!in) throw Error(ErrorKind::NotFound, "no reference.json in " + d);
            const nlohmann::json ref = nlohmann::json::parse(in);
            ParityReport report;
            const std::string generator = ref.value("generator", std::string());
            if (generator.find("qwen3_asr_reference") != std::string::npos) {
                // Like the language-model references: no weights in the directory. Its clips are
                // the fixtures' recordings (tests/fixtures/audio beside tests/fixtures/qwen3_asr).
                const std::filesystem::path model = opts->model_override;
                if (model.empty() || !std::filesystem::exists(model)) refuse_without_weights(d, "asr:");
                const std::filesystem::path audio =
                    std::filesystem::weakly_canonical(std::filesystem::path(d)).parent_path().parent_path() / "audio";
                Backend backend(opts->backend);
                auto alm = load_audio_language_model(model, backend, {opts->quantize, *mmproj});
                report = run_audio_lm_parity(*alm, backend, ref, audio);
            } else if (generator.find("qwen3_reference") != std::string::npos) {
                // Language-model references hold no weights (tests/write_qwen3_fixture makes them).
                std::filesystem::path model = opts->model_override;
                if (model.empty()) model = std::filesystem::path(d) / "model";
                if (!std::filesystem::exists(model)) refuse_without_weights(d, "");
                Backend backend(opts->backend);
                auto lm = load_language_model(model, backend, {opts->quantize});
                report = run_lm_parity(*lm, backend, ref);
            } else {
                report = run_speech_parity(d, *opts, generation_decode_service_factory());
            }
            std::printf("%s\n", report.table().c_str());
            if (!report.all_pass()) globals.exit_code = 1;
        }
    });
}

}  // namespace parlance::cli
