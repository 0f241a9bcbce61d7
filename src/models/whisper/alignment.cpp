// Word-level timing from cross-attention with DTW (see alignment.h).
#include "models/whisper/alignment.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/error.h"
#include "text/utf8.h"

namespace parlance::whisper {
namespace {

// NaN compares as the largest value, as torch.sort orders it.
bool nan_last_less(float a, float b) {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
    return a < b;
}

std::string strip(const std::string& s) {
    const char* ws = " \t\n\r\f\v";
    size_t b = s.find_first_not_of(ws);
    if (b == std::string::npos) return "";
    size_t e = s.find_last_not_of(ws);
    return s.substr(b, e - b + 1);
}

// Python's `needle in haystack` for strings (the empty string is in every string). Byte search is
// exact for well-formed UTF-8 on both sides.
bool contains(std::string_view haystack, const std::string& needle) {
    return haystack.find(needle) != std::string_view::npos;
}

constexpr std::string_view kAsciiPunctuation = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
constexpr std::string_view kPrepended = "\"'\u201c\u00bf([{-";
constexpr std::string_view kAppended = "\"'.\u3002,\uff0c!\uff01?\uff1f:\uff1a\u201d)]}\u3001";

// True while more tokens could still complete the text's last character: it ends inside a
// well-formed prefix of a code point. Ill-formed bytes never heal, so they do not hold a group open
// (OpenAI keeps a U+FFFD that the full decoding has too).
bool ends_mid_character(const std::string& s) {
    size_t pos = 0;
    while (pos < s.size()) {
        utf8::Scan sc = utf8::scan(s, pos);
        if (sc.status == utf8::Scan::Status::Incomplete) return true;
        pos += sc.length;
    }
    return false;
}

}  // namespace

std::vector<float> median_filter(std::span<const float> x, int rows, int cols, int width) {
    if (width <= 0 || width % 2 != 1)
        throw Error(ErrorKind::InvalidArgument, "median filter width must be a positive odd number");
    if (rows < 0 || cols < 0 || x.size() != static_cast<size_t>(rows) * cols)
        throw Error(ErrorKind::Internal, "median_filter: size does not match rows * cols");
    const int pad = width / 2;
    std::vector<float> out(x.begin(), x.end());
    if (cols <= pad) return out;
    std::vector<float> padded(static_cast<size_t>(cols) + 2 * pad), window(width);
    for (int r = 0; r < rows; ++r) {
        const float* row = x.data() + static_cast<size_t>(r) * cols;
        for (int i = 0; i < cols + 2 * pad; ++i) {
            int k = i - pad;                      // position in the row, reflected into range
            if (k < 0) k = -k;
            if (k >= cols) k = 2 * (cols - 1) - k;
            padded[i] = row[k];
        }
        for (int c = 0; c < cols; ++c) {
            std::copy(padded.begin() + c, padded.begin() + c + width, window.begin());
            std::nth_element(window.begin(), window.begin() + pad, window.end(), nan_last_less);
            out[static_cast<size_t>(r) * cols + c] = window[pad];
        }
    }
    return out;
}

DtwPath dynamic_time_warping(std::span<const float> matrix, int rows, int cols) {
    if (rows <= 0 || cols <= 0 || matrix.size() != static_cast<size_t>(rows) * cols)
        throw Error(ErrorKind::Internal, "dynamic_time_warping: empty matrix or size mismatch");
    const size_t W = static_cast<size_t>(cols) + 1;
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float> cost((static_cast<size_t>(rows) + 1) * W, inf);
    std::vector<int8_t> trace((static_cast<size_t>(rows) + 1) * W, -1);
    cost[0] = 0.0f;
    for (int j = 1; j <= cols; ++j) {
        for (int i = 1; i <= rows; ++i) {
            const float c0 = cost[(i - 1) * W + (j - 1)];
            const float c1 = cost[(i - 1) * W + j];
            const float c2 = cost[i * W + (j - 1)];
            float c;
            int8_t t;
            if (c0 < c1 && c0 < c2) {
                c = c0, t = 0;
            } else if (c1 < c0 && c1 < c2) {
                c = c1, t = 1;
            } else {
                c = c2, t = 2;
            }
            cost[i * W + j] = static_cast<float>(static_cast<double>(matrix[(i - 1) * cols + (j - 1)]) + c);
            trace[i * W + j] = t;
        }
    }
    // Backtrace from the far corner; the first row only moves left, the first column only up.
    for (int j = 0; j <= cols; ++j) trace[j] = 2;
    for (int i = 0; i <= rows; ++i) trace[i * W] = 1;
    DtwPath path;
    int i = rows, j = cols;
    while (i > 0 || j > 0) {
        path.text.push_back(i - 1);
        path.time.push_back(j - 1);
        switch (trace[i * W + j]) {
            case 0: --i, --j; break;
            case 1: --i; break;
            case 2: --j; break;
            default: throw Error(ErrorKind::Internal, "dynamic time warping: broken trace");
        }
    }
    std::reverse(path.text.begin(), path.text.end());
    std::reverse(path.time.begin(), path.time.end());
    return path;
}

std::vector<float> dtw_row_times(std::span<const std::vector<float>> head_weights, int n_rows, int n_cols,
                                 const AlignmentOptions& o) {
    if (head_weights.empty()) throw Error(ErrorKind::InvalidArgument, "word timestamps need at least one alignment head");
    if (n_rows <= 0 || n_cols <= 0) throw Error(ErrorKind::Internal, "token_timestamps: empty weights");
    for (const auto& w : head_weights)
        if (w.size() != static_cast<size_t>(n_rows) * n_cols)
            throw Error(ErrorKind::Internal, "token_timestamps: weights are not [rows, cols]");
    const int cols = o.num_frames > 0 ? std::clamp(o.num_frames / 2, 1, n_cols) : n_cols;

    // Per head: crop, normalize over tokens, median filter; then the mean over heads.
    std::vector<double> sum(static_cast<size_t>(n_rows) * cols, 0.0);
    std::vector<float> h(static_cast<size_t>(n_rows) * cols);
    for (const auto& w : head_weights) {
        for (int r = 0; r < n_rows; ++r)
            std::copy_n(w.begin() + static_cast<size_t>(r) * n_cols, cols, h.begin() + static_cast<size_t>(r) * cols);
        for (int c = 0; c < cols; ++c) {
            double mean = 0.0;
            for (int r = 0; r < n_rows; ++r) mean += h[static_cast<size_t>(r) * cols + c];
            mean /= n_rows;
            double var = 0.0;
            for (int r = 0; r < n_rows; ++r) {
                double d = h[static_cast<size_t>(r) * cols + c] - mean;
                var += d * d;
            }
            const float mean_f = static_cast<float>(mean);
            const float std_f = static_cast<float>(std::sqrt(var / n_rows));
            for (int r = 0; r < n_rows; ++r) {
                float& v = h[static_cast<size_t>(r) * cols + c];
                v = (v - mean_f) / std_f;
            }
        }
        std::vector<float> f = median_filter(h, n_rows, cols, o.median_filter_width);
        for (size_t k = 0; k < f.size(); ++k) sum[k] += f[k];
    }
    std::vector<float> neg(sum.size());
    const double n_heads = static_cast<double>(head_weights.size());
    for (size_t k = 0; k < sum.size(); ++k) neg[k] = -static_cast<float>(sum[k] / n_heads);

    DtwPath path = dynamic_time_warping(neg, n_rows, cols);
    std::vector<float> times;
    times.reserve(n_rows);
    for (size_t s = 0; s < path.text.size(); ++s)
        if (s == 0 || path.text[s] != path.text[s - 1])
            times.push_back(static_cast<float>(path.time[s] * o.time_precision));
    // The path visits every row exactly once as a jump unless NaN weights (a zero std) break it.
    times.resize(n_rows, times.empty() ? 0.0f : times.back());
    return times;
}

std::vector<float> token_timestamps(std::span<const std::vector<float>> head_weights, int n_rows,
                                    int n_cols, int prompt_length, const AlignmentOptions& o) {
    if (n_rows < 0 || prompt_length < 0) throw Error(ErrorKind::Internal, "token_timestamps: bad sizes");
    std::vector<float> out(static_cast<size_t>(n_rows) + 1, 0.0f);
    const int rows = n_rows - prompt_length;
    if (rows <= 0) return out;
    std::vector<std::vector<float>> generated;
    generated.reserve(head_weights.size());
    for (const auto& w : head_weights) {
        if (w.size() != static_cast<size_t>(n_rows) * n_cols)
            throw Error(ErrorKind::Internal, "token_timestamps: weights are not [rows, cols]");
        generated.emplace_back(w.begin() + static_cast<size_t>(prompt_length) * n_cols, w.end());
    }
    std::vector<float> t = dtw_row_times(generated, rows, n_cols, o);
    std::copy(t.begin(), t.end(), out.begin() + prompt_length);
    out.back() = t.back();
    return out;
}

std::vector<std::pair<int, int>> alignment_heads_or_default(const SpecialTokens& tokens,
                                                            const WhisperConfig& config) {
    if (!tokens.alignment_heads.empty()) return tokens.alignment_heads;
    std::vector<std::pair<int, int>> heads;
    for (int l = config.decoder_layers / 2; l < config.decoder_layers; ++l)
        for (int h = 0; h < config.decoder_heads; ++h) heads.emplace_back(l, h);
    return heads;
}

std::vector<WordTokens> split_words(std::span<const int> tokens,
                                    const std::function<std::string(std::span<const int>)>& decode,
                                    const std::string& language) {
    // Groups of tokens that decode to whole characters.
    std::vector<WordTokens> pieces;
    std::vector<int> current;
    std::vector<size_t> current_idx;
    for (size_t i = 0; i < tokens.size(); ++i) {
        current.push_back(tokens[i]);
        current_idx.push_back(i);
        std::string text = decode(current);
        if (!ends_mid_character(text) || i + 1 == tokens.size()) {
            pieces.push_back({std::move(text), current_idx});
            current.clear();
            current_idx.clear();
        }
    }

    std::vector<WordTokens> words;
    static const char* const kNoSpaces[] = {"zh", "ja", "th", "lo", "my", "yue"};
    const bool no_spaces = std::find(std::begin(kNoSpaces), std::end(kNoSpaces), language) != std::end(kNoSpaces);
    if (no_spaces) {
        words = std::move(pieces);
    } else {
        for (WordTokens& p : pieces) {
            const bool with_space = !p.text.empty() && p.text[0] == ' ';
            const bool punctuation = contains(kAsciiPunctuation, strip(p.text));
            if (with_space || punctuation || words.empty()) {
                words.push_back(std::move(p));
            } else {
                words.back().text += p.text;
                words.back().indices.insert(words.back().indices.end(), p.indices.begin(), p.indices.end());
            }
        }
    }

    // Opening punctuation joins the following word (scanning backwards).
    if (words.size() >= 2) {
        size_t j = words.size() - 1;
        for (size_t i = words.size() - 1; i-- > 0;) {
            WordTokens& prev = words[i];
            WordTokens& next = words[j];
            if (!prev.text.empty() && prev.text[0] == ' ' && contains(kPrepended, strip(prev.text))) {
                next.text = prev.text + next.text;
                next.indices.insert(next.indices.begin(), prev.indices.begin(), prev.indices.end());
                prev.text.clear();
                prev.indices.clear();
            } else {
                j = i;
            }
        }
        // Closing punctuation joins the preceding word.
        size_t a = 0;
        for (size_t b = 1; b < words.size(); ++b) {
            WordTokens& prev = words[a];
            WordTokens& next = words[b];
            if ((prev.text.empty() || prev.text.back() != ' ') && contains(kAppended, next.text)) {
                prev.text += next.text;
                prev.indices.insert(prev.indices.end(), next.indices.begin(), next.indices.end());
                next.text.clear();
                next.indices.clear();
            } else {
                a = b;
            }
        }
    }
    std::erase_if(words, [](const WordTokens& w) { return w.text.empty(); });
    return words;
}

std::vector<Word> timed_words(std::span<const int> tokens, size_t first_position,
                              std::span<const float> timestamps, double time_offset, int eot,
                              const std::function<std::string(std::span<const int>)>& decode,
                              const std::string& language, std::span<const float> token_probs) {
    std::vector<int> text;
    std::vector<size_t> where;  // index into `tokens` of each text token
    for (size_t i = 0; i < tokens.size(); ++i)
        if (tokens[i] < eot) {
            text.push_back(tokens[i]);
            where.push_back(i);
        }
    auto time_at = [&](size_t position) {
        if (timestamps.empty()) return time_offset;
        return time_offset + timestamps[std::min(position, timestamps.size() - 1)];
    };
    std::vector<Word> out;
    for (const WordTokens& w : split_words(text, decode, language)) {
        if (w.indices.empty()) continue;
        const size_t first = where[w.indices.front()], last = where[w.indices.back()];
        Word word;
        word.word = w.text;
        word.start = time_at(first_position + first);
        word.end = std::max(word.start, time_at(first_position + last + 1));
        if (!token_probs.empty()) {
            double p = 0.0;
            for (size_t k : w.indices) p += token_probs[where[k]];
            word.probability = static_cast<float>(p / w.indices.size());
        }
        out.push_back(std::move(word));
    }
    return out;
}

}  // namespace parlance::whisper
