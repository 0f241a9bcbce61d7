// What the engine needs of a decoder language model, whatever its architecture: its vocabulary,
// context, tokenizer, stop tokens, the shape of its KV cache, and one batched step over a
// StepBatch. Architectures implement it in models/<arch>; the engine and the CLI see only this.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/kv_storage.h"
#include "core/step_batch.h"
#include "text/tokenizer.h"

namespace parlance {

class LanguageModel {
public:
    virtual ~LanguageModel() = default;

    virtual std::string architecture() const = 0;  // "qwen3", ...
    virtual int vocab_size() const = 0;            // logits per output row
    virtual int hidden_size() const = 0;           // width of embedding spans
    virtual int max_context() const = 0;           // positions
    virtual KvSpec kv_spec() const = 0;
    virtual const Tokenizer& tokenizer() const = 0;
    // The model's end-of-sequence ids (generation_config.json eos_token_id, else config.json's,
    // else the GGUF's tokenizer.ggml.eos_token_id).
    virtual std::vector<int32_t> stop_ids() const = 0;
    // One step: writes every token's K/V into its cell of `kv`, and returns the logits of
    // batch.outputs, [outputs][vocab] row-major, into `logits`. Not thread-safe (one engine
    // thread); the weights are shared and immutable.
    virtual void forward(const StepBatch& batch, KvStorage& kv, std::vector<float>& logits) = 0;
    // The same step where some rows need only their greedy choice (greedy_rows[i] != 0 for
    // output row i): a model whose logits live on a device may take those rows' argmax there and
    // return it in argmax[i] (>= 0), leaving their logits unread (unspecified) — a step of 256
    // decodes then copies 256 ids instead of 155 MB of logits to the host. argmax empty: every
    // row's logits were read. The default reads every row.
    virtual void forward(const StepBatch& batch, KvStorage& kv, std::vector<float>& logits,
                         const std::vector<uint8_t>& greedy_rows, std::vector<int32_t>& argmax) {
        (void)greedy_rows;
        argmax.clear();
        forward(batch, kv, logits);
    }
    // "f32×10, q8_0×28" and device bytes, for logs and `parlance info`.
    virtual std::string weight_summary() const = 0;
    virtual size_t weight_bytes() const = 0;
};

}  // namespace parlance
