// `parlance convert HF_DIR --to whispercpp -o OUT.bin [--dtype f32|f16] [--openai-ids]`: writes a Whisper HF
// checkpoint as a whisper.cpp ggml file (for the whisper.cpp bench anchor and for users of it).
#include <cstdio>

#include "cli/commands.h"
#include "core/error.h"
#include "models/registry.h"

namespace parlance::cli {
namespace {

struct ConvertArgs {
    std::string input;
    std::string to;
    std::string output;
    std::string dtype = "f16";
    bool openai_ids = false;
};

void run(const ConvertArgs& a) {
    ConvertOptions o;
    if (a.dtype == "f32") {
        o.dtype = GGML_TYPE_F32;
    } else if (a.dtype == "f16") {
        o.dtype = GGML_TYPE_F16;
    } else {
        throw Error(ErrorKind::InvalidArgument, "--dtype " + a.dtype + ": use f32 or f16");
    }
    o.openai_ids = a.openai_ids;
    const ConvertResult r = convert_model(a.input, a.output, a.to, o);
    for (const auto& w : r.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
    std::fprintf(stderr, "wrote %s: %d tensors (%s), %d vocabulary tokens, %.1f MB\n", a.output.c_str(),
                 r.tensors, a.dtype.c_str(), r.vocab, static_cast<double>(r.bytes) / 1e6);
    if (r.unused_text_ids.second > r.unused_text_ids.first)
        std::printf("suppress-ids %d:%d\n", r.unused_text_ids.first, r.unused_text_ids.second);
}

}  // namespace

void register_convert(CLI::App& app, GlobalOptions&) {
    auto a = std::make_shared<ConvertArgs>();
    auto* cmd = app.add_subcommand("convert", "Convert a Whisper HF checkpoint to another format");
    cmd->add_option("input", a->input, "HF snapshot directory (config.json, tokenizer.json, model.safetensors)")
        ->required();
    cmd->add_option("--to", a->to, "Target format: whispercpp")->required();
    cmd->add_option("-o,--output", a->output, "Output file (e.g. ggml-model.bin)")->required();
    cmd->add_option("--dtype", a->dtype, "Weight matrices as f32|f16 (vectors stay f32)")->default_val("f16");
    cmd->add_flag("--openai-ids", a->openai_ids,
                  "For a model with its own compact vocabulary (the bundled one): write it at OpenAI's "
                  "multilingual token ids, the only layout whisper.cpp decodes. Ids the model lacks get "
                  "zero rows, which whisper.cpp must suppress with a logits filter (the benchmark anchor "
                  "bench/anchor/whisper_cpp_serial does: --suppress-ids FIRST:END, printed here)");
    cmd->callback([a] { run(*a); });
}

}  // namespace parlance::cli
