// Options and result of writing a checkpoint in another program's format (models/registry.h
// convert_model; today Whisper to whisper.cpp's ggml .bin).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <ggml.h>

namespace parlance {

struct ConvertOptions {
    // Storage type of the weight matrices, convolution kernels and token embedding: f32 or f16
    // (whisper.cpp's ftype 0 / 1). Vectors, conv biases and positional embeddings are always f32,
    // as whisper.cpp's loader expects.
    ggml_type dtype = GGML_TYPE_F16;
    // A model with a compact vocabulary (trained with its own, smaller one, as ours is) written at
    // OpenAI's multilingual ids, the only layout whisper.cpp can decode: text tokens keep their
    // ids, special and timestamp tokens move to where whisper.cpp looks for them (51,865 rows),
    // and the rows of ids the model does not have are zero. Those rows' logits are 0, not the
    // model's, so whisper.cpp must suppress them (ConvertResult::unused_text_ids; the benchmark
    // anchor does, bench/anchor/whisper_cpp_serial --suppress-ids).
    bool openai_ids = false;
};

struct ConvertResult {
    int tensors = 0;     // tensors written
    int vocab = 0;       // text tokens written (ids below <|endoftext|>)
    uint64_t bytes = 0;  // size of the output file
    // Written, but the target program will not load it as is (e.g. an FFN width other than
    // 4 * d_model, which whisper.cpp's header cannot express). Empty for released shapes.
    std::vector<std::string> warnings;
    // With openai_ids: the text ids [first, last) the model has no token for (none: 0, 0).
    std::pair<int, int> unused_text_ids{0, 0};
};

}  // namespace parlance
