// Writes the checkpoint of a Qwen3 reference (tests/fixtures/qwen3/<config>) so that
// `parlance parity tests/fixtures/qwen3/<config> --model DIR` can be run by hand:
//   build/tests/write_qwen3_fixture tiny /tmp/qwen3-tiny [--gguf] [--f32|--f16|--q8_0|--q4_k] [--edit JSON]
// and of a Qwen3-ASR reference (tests/fixtures/qwen3_asr/<config>) with an "asr:" prefix:
//   build/tests/write_qwen3_fixture asr:tiny /tmp/qwen3-asr-tiny [--gguf]
// (--gguf: llama.cpp's pair, model.gguf + mmproj.gguf, as the bundle's converter lays it out;
// --f16 / --q8_0 then set the text model's matrices, --edit merges JSON into the config)
// --edit merges JSON into the config first (e.g. the full Qwen3-0.6B widths for benchmarks:
// '{"hidden_size":1024,"intermediate_size":3072}' on layout-0.6b); such a checkpoint has no reference.
#include <cstdio>
#include <string>

#include "qwen3_fixture.h"

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s CONFIG OUT_DIR [--gguf] [--f32|--f16|--q8_0|--q4_k] [--edit JSON]\n", argv[0]);
        return 2;
    }
    parlance::testing::Qwen3Checkpoint how;
    nlohmann::json edit = nullptr;
    for (int i = 3; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--edit" && i + 1 < argc)
            edit = nlohmann::json::parse(argv[++i]);
        else if (a == "--gguf")
            how.gguf = true;
        else if (a == "--f32")
            how.dtype = GGML_TYPE_F32;
        else if (a == "--f16")
            how.dtype = GGML_TYPE_F16;
        else if (a == "--q8_0")
            how.dtype = GGML_TYPE_Q8_0;  // GGUF only (safetensors cannot hold it)
        else if (a == "--q4_k")
            how.dtype = GGML_TYPE_Q4_K;  // GGUF only; rows of 256 (edit the dimensions)
        else {
            std::fprintf(stderr, "unknown option %s\n", a.c_str());
            return 2;
        }
    }
    try {
        const std::string config = argv[1];
        if (config.rfind("asr:", 0) == 0) {
            // --f16 / --q8_0 set the text GGUF's matrices (bf16 otherwise, as the converter's default).
            std::printf("%s\n", parlance::testing::write_qwen3_asr(config.substr(4), argv[2], how.gguf, edit, how.dtype)
                                    .string()
                                    .c_str());
            return 0;
        }
        std::printf("%s\n", parlance::testing::write_qwen3(config, argv[2], how, edit).string().c_str());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "write_qwen3_fixture: %s\n", e.what());
        return 1;
    }
    return 0;
}
