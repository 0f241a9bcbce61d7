// Whisper compute on ggml: the encoder (log-mel -> cross-attention keys/values) and a batched
// decoder step over many sequences. Each sequence ("slot") is a sequence of the paged KV cache
// (core/kv_cache_manager.h): its self-attention K/V live in blocks, a beam reorder forks blocks
// instead of copying a prefix, and one attention call per layer serves every sequence of the step
// (core/graph_ops.h paged_attention); cross-attention runs once per distinct encoded window.
// Holds per-worker state (caches, scratch); the weights are shared and immutable. Not
// thread-safe: one engine thread owns a runner.
#pragma once

#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "core/backend.h"
#include "core/kv_cache_manager.h"
#include "core/kv_storage.h"
#include "models/whisper/config.h"
#include "models/whisper/decoder.h"
#include "models/whisper/weights.h"

namespace parlance::whisper {

// One sequence's share of a decoder step.
struct DecodeItem {
    int slot = 0;                 // its sequence of the paged self-attention cache
    const CrossKv* cross = nullptr;
    std::vector<int> tokens;      // new tokens (the prompt at the first step, then one)
    int n_past = 0;               // tokens already in the slot's cache
};

class WhisperRunner {
public:
    // `max_sequences` slots sharing a cache of `kv_blocks` blocks of kv_block_tokens() tokens
    // (0: as many full-context (n_text_ctx) sequences' worth as slots), taken as tokens arrive.
    WhisperRunner(const WhisperConfig& config, const WhisperWeights& weights, Backend& backend, int max_sequences,
                  int kv_blocks = 0);

    static int kv_block_tokens();
    // Blocks one live hypothesis can hold at most: a full context, plus the partial blocks a
    // beam reorder may copy on write.
    static int blocks_per_hypothesis(const WhisperConfig& config);
    // Bytes of one block (every layer's K and V).
    size_t kv_block_bytes() const;

    const WhisperConfig& config() const { return config_; }
    int n_slots() const { return n_slots_; }
    size_t kv_bytes() const { return self_kv_.bytes(); }
    KvCacheStats kv_stats() const { return pages_.stats(); }
    Backend& backend() { return backend_; }

    // mels: B arrays of [n_mels, n_mel_frames] row-major (exactly 30 s each). Writes each one's
    // cross-attention K/V into crosses[b]. If encoder_out is given, also returns the encoder
    // output of each, [n_audio_ctx, d] row-major.
    void encode(std::span<const std::vector<float>> mels, std::span<CrossKv* const> crosses,
                std::vector<std::vector<float>>* encoder_out = nullptr);

    // One decoder step for all items (decoder.h's decoder_step): appends their tokens to their
    // caches and returns the logits of each item's last token, [items][vocab].
    std::vector<std::vector<float>> decode(std::span<const DecodeItem> items);

    // Makes slot `to` hold the first n tokens of slot `from` (beam search reordering): `to`
    // shares `from`'s blocks; a shared partial block is copied when `to` next writes into it.
    void copy_slot(int from, int to, int n);
    // Returns a slot's blocks to the cache (a finished request).
    void release_slot(int slot);

    // The alignment pass: runs the decoder over `tokens` from position 0 in cache slot `slot`
    // (overwriting whatever it held) against `cross`, and returns the softmaxed cross-attention
    // probabilities of each requested (decoder layer, head), in the order given:
    // [heads][n_tokens * n_audio_ctx], row-major with one row of n_audio_ctx per token (what eager
    // attention in transformers returns for these positions, computed in one pass instead of one
    // step at a time). If `logits` is given, it receives every position's logits [n_tokens][vocab].
    // Throws Error(InvalidArgument) for a head outside the model, Error(TooLarge) past the context.
    std::vector<std::vector<float>> cross_attention(const CrossKv& cross, int slot,
                                                    std::span<const int> tokens,
                                                    std::span<const std::pair<int, int>> heads,
                                                    std::vector<std::vector<float>>* logits = nullptr);

private:
    // What decode() additionally reads back for cross_attention() (one item only).
    struct Capture {
        std::span<const std::pair<int, int>> heads;
        std::vector<std::vector<float>>* weights = nullptr;  // out: [heads][n * n_audio_ctx]
        bool all_logits = false;  // logits of every position instead of the last
    };
    std::vector<std::vector<float>> run_decoder(std::span<const DecodeItem> items, const Capture* capture);

    const WhisperConfig& config_;
    const WhisperWeights& w_;
    Backend& backend_;
    int n_slots_;
    KvCacheManager pages_;   // slot s is sequence s
    KvStorage self_kv_;
    std::vector<uint8_t> graph_buf_;
};

}  // namespace parlance::whisper
