// `parlance generate --model PATH (--prompt TEXT | --prompt-file FILE) --max-tokens N ...`: raw
// completion of a language model (no chat template), through the generation engine. The
// qualification tool for language models, as `transcribe` is for speech.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/default_model.h"
#include "core/backend.h"
#include "core/error.h"
#include "engine/generation_engine.h"
#include "models/registry.h"
#include "text/incremental_detokenizer.h"

namespace parlance::cli {
namespace {

struct GenerateArgs {
    std::string model, prompt, prompt_file, format = "text", quantize, device = "cpu", kv_cache_type = "f32";
    int max_tokens = 16, min_tokens = 0, threads = 0, kv_cache_mb = 256, speculative = 0;
    std::string draft_model;
    float temperature = 0.0f, top_p = 1.0f;
    int top_k = 0;
    uint64_t seed = 0;
    bool ignore_eos = false, stream = false;
};

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(ErrorKind::NotFound, "cannot read the prompt file " + path);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

void run(const GenerateArgs& a) {
    if (a.prompt.empty() == a.prompt_file.empty())
        throw Error(ErrorKind::InvalidArgument, "give exactly one of --prompt and --prompt-file");
    if (a.min_tokens > a.max_tokens)
        throw Error(ErrorKind::InvalidArgument, "--min-tokens " + std::to_string(a.min_tokens) +
                                                    " is more than --max-tokens " + std::to_string(a.max_tokens));
    const std::string text = a.prompt.empty() ? read_file(a.prompt_file) : a.prompt;
    Backend backend(BackendOptions{a.device, a.threads, true});
    std::unique_ptr<LanguageModel> model = load_language_model(a.model, backend, {a.quantize});
    GenerationEngineOptions eo;
    eo.kv_cache_bytes = static_cast<size_t>(a.kv_cache_mb) << 20;
    eo.kv_type = kv_cache_type_of(a.kv_cache_type);
    std::unique_ptr<LanguageModel> draft;
    if (!a.draft_model.empty()) {
        if (a.speculative <= 0) throw Error(ErrorKind::InvalidArgument, "--draft-model needs --speculative N (N > 0)");
        draft = load_language_model(a.draft_model, backend, {a.quantize});
        eo.draft_model = draft.get();
        eo.speculative_draft = a.speculative;
    } else {
        eo.speculative_ngram = a.speculative;
    }
    GenerationEngine engine(*model, backend, eo);

    GenerationRequest r;
    r.prompt = model->tokenizer().encode(text, /*parse_special=*/true);
    if (r.prompt.empty()) throw Error(ErrorKind::InvalidArgument, "the prompt encodes to no tokens");
    r.sampling.max_tokens = a.max_tokens;
    r.sampling.min_tokens = a.min_tokens;
    r.sampling.temperature = a.temperature;
    r.sampling.top_k = a.top_k;
    r.sampling.top_p = a.top_p;
    r.sampling.seed = a.seed;
    if (!a.ignore_eos) r.sampling.stop_ids = model->stop_ids();
    IncrementalDetokenizer detok(model->tokenizer());
    const bool stream_text = a.format == "text" && a.stream;
    const std::vector<int32_t> stops = r.sampling.stop_ids;
    if (stream_text)
        r.on_token = [&](int32_t t) {
            if (std::find(stops.begin(), stops.end(), t) != stops.end()) return;  // not text
            std::fputs(detok.push(t).c_str(), stdout);
            std::fflush(stdout);
        };
    engine.submit(std::move(r));
    GenerationResult res = engine.run_to_completion().at(0);
    std::vector<int32_t> shown = res.tokens;
    if (res.state == SeqState::FinishedStop && !shown.empty()) shown.pop_back();  // the stop token is not text
    const std::string out = model->tokenizer().decode(shown, /*skip_special=*/false);
    if (a.format == "json") {
        nlohmann::ordered_json j;
        j["prompt_ids"] = res.prompt;
        j["ids"] = res.tokens;
        j["text"] = out;
        j["finish_reason"] = finish_reason(res.state);
        if (a.speculative > 0) {
            const GenerationStats st = engine.stats();
            j["draft_tokens"] = st.draft_tokens;
            j["draft_accepted"] = st.draft_accepted;
        }
        std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else if (stream_text) {
        std::fputs(detok.flush().c_str(), stdout);
        std::fputs("\n", stdout);
    } else {
        std::printf("%s\n", out.c_str());
    }
}

}  // namespace

void register_generate(CLI::App& app, GlobalOptions& /*globals*/) {
    auto* cmd =
        app.add_subcommand("generate",
                           "Continue a prompt with a language model (raw completion, no chat template).\n"
                           "Example: parlance generate --model DIR --prompt 'The capital of France is' --max-tokens 8");
    auto a = std::make_shared<GenerateArgs>();
    cmd->add_option("-m,--model", a->model, "HF directory (config.json model_type qwen3) or a GGUF file")->required();
    cmd->add_option("-p,--prompt", a->prompt, "Prompt text (special tokens such as <|im_start|> are recognised)");
    cmd->add_option("--prompt-file", a->prompt_file, "Read the prompt from this file instead")
        ->check(CLI::ExistingFile);
    cmd->add_option("-n,--max-tokens", a->max_tokens, "Tokens to generate at most")
        ->default_val(16)
        ->check(CLI::Range(1, 1 << 20));
    cmd->add_option("--min-tokens", a->min_tokens, "End-of-sequence is suppressed until this many tokens")
        ->default_val(0)
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--temperature", a->temperature, "0 = greedy (argmax); > 0 samples")
        ->default_val(0.0f)
        ->check(CLI::Range(0.0f, 100.0f));
    cmd->add_option("--top-k", a->top_k, "Sample among the k most likely tokens (0 = all)")
        ->default_val(0)
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--top-p", a->top_p, "Nucleus: the smallest set whose probability reaches p")
        ->default_val(1.0f)
        ->check(CLI::Range(0.0f, 1.0f));
    cmd->add_option("--seed", a->seed, "Sampling seed (the same seed gives the same text)")->default_val(0);
    cmd->add_flag("--ignore-eos", a->ignore_eos, "Never stop at the model's end-of-sequence tokens");
    cmd->add_option("--format", a->format, "text, or json: {\"prompt_ids\", \"ids\", \"text\", \"finish_reason\"}")
        ->default_val("text")
        ->check(CLI::IsMember({"text", "json"}));
    cmd->add_flag("--stream", a->stream, "Print text as tokens are generated (--format text)");
    cmd->add_option("--quantize", a->quantize,
                    "Weights at load: f32|f16|q8_0|q5_k|q4_k (default: as stored; bf16 -> f32)");
    cmd->add_option("--speculative", a->speculative,
                    "Speculative decoding: up to N draft tokens per step, from --draft-model or else by prompt "
                    "lookup (same output; 0 = off)")
        ->default_val(0)
        ->check(CLI::Range(0, 16));
    cmd->add_option("--draft-model", a->draft_model,
                    "A smaller model with the same tokenizer (checked) that drafts for --speculative");
    cmd->add_option("--kv-cache-mb", a->kv_cache_mb, "KV cache size cap in MiB")
        ->default_val(256)
        ->check(CLI::Range(1, 1 << 20));
    cmd->add_option("--kv-cache-type", a->kv_cache_type,
                    "Storage of the KV cache's cells: f32, or f16 (twice the tokens in the same MiB; logits move by "
                    "about 1e-3)")
        ->default_val("f32")
        ->check(CLI::IsMember({"f32", "f16"}));
    cmd->add_option("-t,--threads", a->threads, "CPU threads (0 = all, up to 8)")->default_val(0);
    cmd->add_option("--device", a->device, "cpu|cuda|metal")->default_val("cpu");
    add_deterministic_flag(cmd);
    cmd->callback([a] { run(*a); });
}

}  // namespace parlance::cli
