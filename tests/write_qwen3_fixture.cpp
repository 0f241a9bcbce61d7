// Writes the checkpoint of a Qwen3 reference (tests/fixtures/qwen3/<config>) so that
// `parlance parity tests/fixtures/qwen3/<config> --model DIR` can be run by hand:
//   build/tests/write_qwen3_fixture tiny /tmp/qwen3-tiny [--gguf] [--f32|--f16]
#include <cstdio>
#include <string>

#include "qwen3_fixture.h"

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s CONFIG OUT_DIR [--gguf] [--f32|--f16]\n", argv[0]);
        return 2;
    }
    parlance::testing::Qwen3Checkpoint how;
    for (int i = 3; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--gguf") how.gguf = true;
        else if (a == "--f32") how.dtype = GGML_TYPE_F32;
        else if (a == "--f16") how.dtype = GGML_TYPE_F16;
        else {
            std::fprintf(stderr, "unknown option %s\n", a.c_str());
            return 2;
        }
    }
    try {
        std::printf("%s\n", parlance::testing::write_qwen3(argv[1], argv[2], how).string().c_str());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "write_qwen3_fixture: %s\n", e.what());
        return 1;
    }
    return 0;
}
