// Downloads a model snapshot from a Hugging Face compatible hub (huggingface.co, a mirror, or a
// local server) into a folder that `--model` loads: the repository's file list comes from
// GET {endpoint}/api/models/{repo}/revision/{revision}, each file from
// {endpoint}/{repo}/resolve/{revision}/{file}. Only what parlance reads is fetched: configs,
// tokenizer files and safetensors weights (sharded included), or the files named explicitly.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace parlance::cli {

struct PullOptions {
    std::string repo;               // "org/name"
    std::string revision = "main";  // branch, tag or commit
    std::string endpoint = "https://huggingface.co";
    std::string token;               // bearer token for gated or private repositories
    std::filesystem::path dir;       // destination folder
    std::vector<std::string> files;  // exact files to fetch; empty: what parlance loads
    std::string quant;               // GGUF-only repositories: the variant (Q8_0, f16, ...); "" Q8_0 else f16
};

struct PulledFile {
    std::string name;
    uint64_t bytes = 0;
    bool downloaded = false;  // false: already present with the expected size
};

struct PullResult {
    std::string commit;  // the revision's commit, as the hub reports it
    std::vector<PulledFile> files;
};

// Progress of one file: name, bytes so far, total (0 when unknown).
using PullProgress = std::function<void(const std::string&, uint64_t, uint64_t)>;

// Files are written as NAME.part and renamed when complete, so an interrupted pull never leaves
// a truncated file that looks whole; a file already present with the size the hub lists is
// skipped. Throws Error: NotFound (repository, revision or file: 404), InvalidArgument (a bad
// repo id; 401/403, where the message says a token is needed), Io (network, other HTTP
// statuses, a size that differs from the listing, disk), each naming the URL or file.
PullResult pull_snapshot(const PullOptions& options, const PullProgress& progress);

// Which of a repository's files parlance needs: configs, tokenizer, safetensors weights; or, in a
// repository of GGUF files only (llama.cpp's, e.g. ggml-org/Qwen3-ASR-0.6B-GGUF), one model GGUF
// of the `quant` variant (matched case-insensitively in the name; default Q8_0, else f16, else the
// first) and the mmproj-*.gguf of the same variant (else f16, else the first), if any. Throws
// Error(NotFound) when no GGUF has the asked variant, naming the ones there are.
std::vector<std::string> files_to_pull(const std::vector<std::string>& repository_files, const std::string& quant = "");

}  // namespace parlance::cli
