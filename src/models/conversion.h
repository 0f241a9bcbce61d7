// Options and result of writing a checkpoint in another program's format (models/registry.h
// convert_model; today Whisper to whisper.cpp's ggml .bin).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ggml.h>

namespace parlance {

struct ConvertOptions {
    // Storage type of the weight matrices, convolution kernels and token embedding: f32 or f16
    // (whisper.cpp's ftype 0 / 1). Vectors, conv biases and positional embeddings are always f32,
    // as whisper.cpp's loader expects.
    ggml_type dtype = GGML_TYPE_F16;
};

struct ConvertResult {
    int tensors = 0;     // tensors written
    int vocab = 0;       // text tokens written (ids below <|endoftext|>)
    uint64_t bytes = 0;  // size of the output file
    // Written, but the target program will not load it as is (e.g. an FFN width other than
    // 4 * d_model, which whisper.cpp's header cannot express). Empty for released shapes.
    std::vector<std::string> warnings;
};

}  // namespace parlance
