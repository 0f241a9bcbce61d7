// `parlance pull ORG/NAME`: downloads what parlance needs of a Hugging Face model repository
// (configs, tokenizer, safetensors weights; or the files named with --file) into a folder and
// prints that folder's path (or the file's, for one picked .gguf or whisper.cpp .bin), so that
// `--model "$(parlance pull ORG/NAME)"` works. For users with a network; the tests run it
// against a local server laid out like the hub.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/hub_client.h"
#include "core/error.h"

namespace parlance::cli {
namespace {

namespace fs = std::filesystem;

struct PullArgs {
    PullOptions options;
    std::string dir;
};

std::string env_or(const char* name, const std::string& fallback) {
    const char* v = std::getenv(name);
    return v && *v ? std::string(v) : fallback;
}

// ~/.cache/parlance/models/ORG--NAME (@REVISION when not main), or under $PARLANCE_MODELS_DIR.
fs::path default_dir(const PullOptions& o) {
    std::string leaf = o.repo;
    for (size_t p = leaf.find('/'); p != std::string::npos; p = leaf.find('/')) leaf.replace(p, 1, "--");
    if (o.revision != "main") leaf += "@" + o.revision;
    const std::string base = env_or("PARLANCE_MODELS_DIR", "");
    if (!base.empty()) return fs::path(base) / leaf;
    return fs::path(env_or("HOME", ".")) / ".cache" / "parlance" / "models" / leaf;
}

void run(PullArgs& a) {
    PullOptions& o = a.options;
    if (o.endpoint.empty()) o.endpoint = env_or("HF_ENDPOINT", "https://huggingface.co");
    if (o.token.empty()) o.token = env_or("HF_TOKEN", "");
    o.dir = a.dir.empty() ? default_dir(o) : fs::path(a.dir);
    const bool tty = isatty(fileno(stderr));
    std::string shown;
    PullResult r = pull_snapshot(o, [&](const std::string& name, uint64_t now, uint64_t total) {
        if (!tty) return;
        std::string line = "  " + name + "  " + human_bytes(now) + (total ? " / " + human_bytes(total) : std::string());
        if (total) line += "  (" + std::to_string(100 * now / total) + "%)";
        if (line == shown) return;
        shown = line;
        std::fprintf(stderr, "\r%-72s", line.c_str());
    });
    if (tty && !shown.empty()) std::fprintf(stderr, "\n");
    uint64_t fetched = 0, kept = 0;
    for (const PulledFile& f : r.files) {
        (f.downloaded ? fetched : kept) += f.bytes;
        std::fprintf(stderr, "%s %s (%s)\n", f.downloaded ? "fetched" : "present", f.name.c_str(),
                     human_bytes(f.bytes).c_str());
    }
    std::fprintf(stderr, "%s at %s: %zu files, %s downloaded, %s already present\n", o.repo.c_str(), r.commit.c_str(),
                 r.files.size(), human_bytes(fetched).c_str(), human_bytes(kept).c_str());
    // What --model takes: the folder (an HF snapshot, or a GGUF pair: --model finds both), or the
    // single-file checkpoint when that is what was picked.
    fs::path model = o.dir;
    int single = 0;
    for (const PulledFile& f : r.files)
        if (f.name.ends_with(".gguf") || f.name.ends_with(".bin")) {
            model = o.dir / f.name;
            ++single;
        }
    std::printf("%s\n", (single == 1 ? model : o.dir).string().c_str());
}

}  // namespace

void register_pull(CLI::App& app, GlobalOptions&) {
    auto a = std::make_shared<PullArgs>();
    auto* cmd = app.add_subcommand("pull", "Download a model from the Hugging Face hub (or a mirror) for --model");
    cmd->add_option("repo", a->options.repo, "Repository id, e.g. openai/whisper-base.en")->required();
    cmd->add_option("-r,--revision", a->options.revision, "Branch, tag or commit")->capture_default_str();
    cmd->add_option("-d,--dir", a->dir,
                    "Destination folder (default: ~/.cache/parlance/models/ORG--NAME, or under "
                    "$PARLANCE_MODELS_DIR)");
    cmd->add_option("--endpoint", a->options.endpoint, "Hub URL (default: $HF_ENDPOINT, else https://huggingface.co)");
    cmd->add_option("--token", a->options.token, "Access token for gated or private repositories (default: $HF_TOKEN)");
    cmd->add_option("-f,--file", a->options.files,
                    "Fetch exactly these files (repeatable), e.g. a .gguf or whisper.cpp .bin; default: the "
                    "configs, tokenizer and safetensors weights, or in a GGUF-only repository one model GGUF and its "
                    "mmproj (--quant)");
    cmd->add_option("-q,--quant", a->options.quant,
                    "In a repository of llama.cpp GGUFs: the variant to fetch, e.g. Q8_0 or f16 (default Q8_0, else "
                    "f16), with its mmproj-*.gguf of the same variant");
    cmd->footer(
        "\nPrints the folder on stdout: parlance transcribe a.wav --model \"$(parlance pull ORG/NAME)\"\n"
        "Files arrive as NAME.part and are renamed when complete; files already present with the "
        "listed size are skipped.");
    cmd->callback([a] { run(*a); });
}

}  // namespace parlance::cli
