// Word-level timing for Whisper: token timestamps from the cross-attention of the alignment heads
// with dynamic time warping (transformers' WhisperGenerationMixin._extract_token_timestamps, to the
// value), and the grouping of BPE tokens into timed words (OpenAI whisper's split_tokens_on_spaces
// and merge_punctuations). Pure functions of their inputs; thread-safe.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "decoding/transcript.h"
#include "models/whisper/config.h"

namespace parlance::whisper {

// Median of each sliding window of odd `width` along the rows of a row-major [rows, cols] matrix,
// the edges padded by reflection (x[1], x[2], ... mirrored, the edge not repeated), like
// torch.nn.functional.pad(mode="reflect") + unfold + sort. Rows with cols <= width / 2 are returned
// unchanged (transformers does the same). NaN sorts last. Throws Error(InvalidArgument) for an even
// or non-positive width.
std::vector<float> median_filter(std::span<const float> x, int rows, int cols, int width);

// The monotonic path of least total cost through a row-major [rows, cols] cost matrix from (0, 0)
// to (rows-1, cols-1), moving down, right or diagonally. Ties are broken as transformers'
// _dynamic_time_warping does: the diagonal only when strictly cheapest, then "up" (previous row)
// only when strictly cheapest, else "left" (previous column). Costs accumulate in float32 (each
// sum formed in double and rounded, as numpy does with a float32 cost table).
struct DtwPath {
    std::vector<int> text;  // row index of each step, non-decreasing
    std::vector<int> time;  // column index of each step, non-decreasing
};
DtwPath dynamic_time_warping(std::span<const float> cost, int rows, int cols);

struct AlignmentOptions {
    int median_filter_width = 7;   // generation_config / config.json median_filter_width
    double time_precision = 0.02;  // seconds per encoder frame
    // Audio frames (10 ms mel frames) of real signal in the window: the weights are cropped to
    // num_frames / 2 encoder frames before normalizing. 0 = no crop (all n_audio_ctx frames).
    int num_frames = 0;
};

// The DTW core: from the cross-attention weights of the alignment heads, one [n_rows * n_cols]
// row-major matrix per head, per head crop the columns, normalize each column over the rows
// ((w - mean) / std, population std) and median-filter along time; average the heads; run DTW on
// the negated average. Returns, per row, the first column the path gives it times time_precision
// (float32 values, as transformers returns them).
std::vector<float> dtw_row_times(std::span<const std::vector<float>> head_weights, int n_rows, int n_cols,
                                 const AlignmentOptions& options);

// Token timestamps for a whole sequence of L tokens, as transformers 5.17's
// _extract_token_timestamps computes them after generate(). `head_weights` are the weights of the
// positions 0..L-2 (WhisperRunner::cross_attention over the sequence minus its last token: the
// last token is never fed back during generation), n_rows = L - 1; `prompt_length` P is the
// number of decoder input ids. The prompt rows are left out of the DTW (they would pull it); the
// result has L elements: 0 for the P prompt positions, then dtw_row_times of rows P..L-2 (the row
// where generated token k is the input gives token k's start), then the last one again for the
// final token. All zeros when nothing was generated past the first token.
std::vector<float> token_timestamps(std::span<const std::vector<float>> head_weights, int n_rows,
                                    int n_cols, int prompt_length, const AlignmentOptions& options);

// The (layer, head) pairs used for word timing. A model that names none (a generation_config.json
// without alignment_heads, or any whisper.cpp file) falls back to every head of the upper half of
// the decoder layers, OpenAI whisper's own default before per-model heads are set; the timing is
// then rougher but still monotonic. Never empty for a valid config.
std::vector<std::pair<int, int>> alignment_heads_or_default(const SpecialTokens& tokens,
                                                            const WhisperConfig& config);

// One word: its text (with the leading space Whisper puts before words) and the indices of its
// tokens in the token list it was split from.
struct WordTokens {
    std::string text;
    std::vector<size_t> indices;
};

// Splits text tokens into words as OpenAI whisper does: tokens are first grouped until they decode
// to complete UTF-8 (split_tokens_on_unicode); for space-delimited languages those groups are then
// merged into words that start at a leading space or at punctuation (split_tokens_on_spaces); for
// languages written without spaces (zh, ja, th, lo, my, yue) each group is a word. Finally, opening
// punctuation is attached to the following word and closing punctuation to the preceding one
// (merge_punctuations); words left empty are dropped. `decode` turns ids into bytes.
std::vector<WordTokens> split_words(std::span<const int> tokens,
                                    const std::function<std::string(std::span<const int>)>& decode,
                                    const std::string& language);

// Timed words of a segment. `tokens` are the segment's tokens, `first_position` the sequence
// position of tokens[0] in the sequence `timestamps` belongs to (token_timestamps' output for the
// window), `time_offset` the window start in seconds. A word runs from the start of its first token
// to the start of the token after its last. Only text tokens (id < eot) form words. Probability is
// the mean of `token_probs` (aligned with `tokens`) over the word's tokens when given, else 0.
std::vector<Word> timed_words(std::span<const int> tokens, size_t first_position,
                              std::span<const float> timestamps, double time_offset, int eot,
                              const std::function<std::string(std::span<const int>)>& decode,
                              const std::string& language, std::span<const float> token_probs = {});

}  // namespace parlance::whisper
