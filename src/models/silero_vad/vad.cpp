// Silero VAD v5 (see vad.h).
#include "models/silero_vad/vad.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "core/graph_ops.h"
#include "core/weight_product.h"
#include "models/onnx_tensors.h"

namespace parlance::silero_vad {

namespace {
constexpr int kHidden = 128;
constexpr int kGates = 4 * kHidden;  // PyTorch's LSTMCell order: input, forget, cell, output
constexpr int kFrames = 4;           // STFT frames per window
constexpr int kWindowsPerGraph = 4096;

float sigmoid(float x) {
    return 1.0f / (1.0f + std::exp(-x));
}
}  // namespace

// One sample rate's weights: the products in ggml tensors, the recurrence's on the host.
struct SileroVad::Rate {
    int sample_rate = 0;
    int window = 0;                // samples per window
    int context = 0;               // samples carried before each window
    int filter = 0;                // STFT taps
    int bins = 0;                  // filter / 2 + 1
    ggml_tensor* basis = nullptr;  // ne [filter, 2 * bins]
    ggml_tensor* conv_w[4] = {};   // ne [3, C_in, C_out]
    ggml_tensor* conv_b[4] = {};   // ne [C_out]
    ggml_tensor* w_ih = nullptr;   // ne [128, 512]
    ggml_tensor* b_ih = nullptr;   // ne [512]
    std::vector<float> w_hh;       // [512][128]
    std::vector<float> b_hh;       // [512]
    std::vector<float> dec_w;      // [128]
    float dec_b = 0.0f;
    // Host copies until the device buffer exists.
    std::vector<std::pair<ggml_tensor*, std::vector<float>>> pending;
};

namespace {

// The weights of the If branch whose STFT basis has `basis_rows` rows (258 at 16 kHz, 130 at 8 kHz).
void bind_rate(SileroVad::Rate& r, const std::map<std::string, OnnxTensor>& all, int basis_rows, int sample_rate,
               ggml_context* ctx, const std::string& file) {
    const std::string basis_name = "stft.forward_basis_buffer";
    std::string prefix;
    bool found = false;
    for (const auto& [name, t] : all) {
        if (name.size() >= basis_name.size() &&
            name.compare(name.size() - basis_name.size(), basis_name.size(), basis_name) == 0 && !t.shape.empty() &&
            t.shape[0] == basis_rows) {
            prefix = name.substr(0, name.size() - basis_name.size());
            found = true;
        }
    }
    if (!found)
        throw Error(ErrorKind::InvalidModel,
                    file + ": no tensor *" + basis_name + " with " + std::to_string(basis_rows) + " rows (the " +
                        std::to_string(sample_rate) + " Hz branch of Silero VAD v5); is this silero_vad_v5.onnx?");
    auto get = [&](const std::string& suffix, std::vector<int64_t> shape) -> const OnnxTensor& {
        auto it = all.find(prefix + suffix);
        if (it == all.end())
            throw Error(ErrorKind::InvalidModel, file + ": missing tensor " + prefix + suffix + " (Silero VAD v5)");
        if (it->second.shape != shape) {
            std::string want, got;
            for (int64_t d : shape) want += (want.empty() ? "" : ", ") + std::to_string(d);
            for (int64_t d : it->second.shape) got += (got.empty() ? "" : ", ") + std::to_string(d);
            throw Error(ErrorKind::InvalidModel,
                        file + ": tensor " + prefix + suffix + " has shape [" + got + "], expected [" + want + "]");
        }
        return it->second;
    };
    r.sample_rate = sample_rate;
    r.window = sample_rate == 16000 ? 512 : 256;
    r.context = r.window / 8;
    r.filter = (basis_rows - 2);
    r.bins = r.filter / 2 + 1;
    auto tensor = [&](const OnnxTensor& t, std::vector<int64_t> ne) {
        ggml_tensor* x = ne.size() == 1   ? ggml_new_tensor_1d(ctx, GGML_TYPE_F32, ne[0])
                         : ne.size() == 2 ? ggml_new_tensor_2d(ctx, GGML_TYPE_F32, ne[0], ne[1])
                                          : ggml_new_tensor_3d(ctx, GGML_TYPE_F32, ne[0], ne[1], ne[2]);
        r.pending.emplace_back(x, t.values);
        return x;
    };
    r.basis = tensor(get(basis_name, {basis_rows, 1, r.filter}), {r.filter, basis_rows});
    const int64_t channels[5] = {r.bins, 128, 64, 64, 128};
    for (int i = 0; i < 4; ++i) {
        const std::string p = "encoder." + std::to_string(i) + ".reparam_conv.";
        r.conv_w[i] = tensor(get(p + "weight", {channels[i + 1], channels[i], 3}), {3, channels[i], channels[i + 1]});
        r.conv_b[i] = tensor(get(p + "bias", {channels[i + 1]}), {channels[i + 1]});
    }
    r.w_ih = tensor(get("decoder.rnn.weight_ih", {kGates, kHidden}), {kHidden, kGates});
    r.b_ih = tensor(get("decoder.rnn.bias_ih", {kGates}), {kGates});
    r.w_hh = get("decoder.rnn.weight_hh", {kGates, kHidden}).values;
    r.b_hh = get("decoder.rnn.bias_hh", {kGates}).values;
    r.dec_w = get("decoder.decoder.2.weight", {1, kHidden, 1}).values;
    r.dec_b = get("decoder.decoder.2.bias", {1}).values[0];
}

}  // namespace

SileroVad::SileroVad(const std::filesystem::path& onnx_file, Backend& backend)
    : backend_(backend), r16_(std::make_unique<Rate>()), r8_(std::make_unique<Rate>()) {
    const auto all = read_onnx_float_tensors(onnx_file);
    ggml_init_params p{ggml_tensor_overhead() * 64, nullptr, true};
    weights_ctx_ = ggml_init(p);
    try {
        bind_rate(*r16_, all, 258, 16000, weights_ctx_, onnx_file.string());
        bind_rate(*r8_, all, 130, 8000, weights_ctx_, onnx_file.string());
        weights_buf_ = ggml_backend_alloc_ctx_tensors(weights_ctx_, backend_.primary());
        if (!weights_buf_) throw Error(ErrorKind::Internal, "cannot allocate the VAD weights");
    } catch (...) {  // the destructor does not run for a constructor that throws
        ggml_free(weights_ctx_);
        weights_ctx_ = nullptr;
        throw;
    }
    for (Rate* r : {r16_.get(), r8_.get()}) {
        for (auto& [t, v] : r->pending) ggml_backend_tensor_set(t, v.data(), 0, v.size() * sizeof(float));
        r->pending.clear();
    }
}

SileroVad::~SileroVad() {
    if (weights_buf_) ggml_backend_buffer_free(weights_buf_);
    if (weights_ctx_) ggml_free(weights_ctx_);
}

int SileroVad::samples_per_window(int sample_rate) {
    if (sample_rate == 16000) return 512;
    if (sample_rate == 8000) return 256;
    throw Error(ErrorKind::InvalidArgument,
                "Silero VAD runs at 16000 or 8000 Hz, not " + std::to_string(sample_rate) + " (resample first)");
}

const SileroVad::Rate& SileroVad::rate(int sample_rate) const {
    window_samples(sample_rate);
    return sample_rate == 16000 ? *r16_ : *r8_;
}

std::vector<float> SileroVad::encode(const Rate& r, std::span<const float> inputs, int n) {
    const int len = r.context + r.window, pad = r.filter / 4, hop = r.filter / 2;
    // Host: reflect-pad each input on the right (torch's reflect: the edge sample is not
    // repeated) and cut the STFT frames, [filter] per column.
    std::vector<float> frames(static_cast<size_t>(r.filter) * kFrames * n);
    std::vector<float> padded(static_cast<size_t>(len + pad));
    for (int w = 0; w < n; ++w) {
        const float* x = inputs.data() + static_cast<size_t>(w) * len;
        std::copy(x, x + len, padded.begin());
        for (int j = 0; j < pad; ++j) padded[len + j] = x[len - 2 - j];
        for (int f = 0; f < kFrames; ++f)
            std::copy(padded.begin() + f * hop, padded.begin() + f * hop + r.filter,
                      frames.begin() + (static_cast<size_t>(w) * kFrames + f) * r.filter);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    GraphContext gc(graph_buf_, 64);
    ggml_context* ctx = gc.ctx;
    ggml_cgraph* g = gc.graph;
    ggml_tensor* in = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, r.filter, static_cast<int64_t>(kFrames) * n);
    ggml_set_input(in);
    ggml_tensor* spec = f32_product(ctx, r.basis, in);  // [2 * bins, frames]
    ggml_tensor* re = ggml_cont(ctx, ggml_view_2d(ctx, spec, r.bins, spec->ne[1], spec->nb[1], 0));
    ggml_tensor* im = ggml_cont(ctx, ggml_view_2d(ctx, spec, r.bins, spec->ne[1], spec->nb[1], r.bins * sizeof(float)));
    ggml_tensor* x = ggml_sqrt(ctx, ggml_add(ctx, ggml_sqr(ctx, re), ggml_sqr(ctx, im)));  // [bins, 4n]
    const int strides[4] = {1, 2, 2, 1};
    int64_t t = kFrames;
    for (int i = 0; i < 4; ++i) {
        // [C, T * n] (a column per frame) -> [T, C, n] (time innermost, as the convolution reads it).
        x = ggml_cont(ctx, ggml_permute(ctx, ggml_reshape_3d(ctx, x, x->ne[0], t, n), 1, 0, 2, 3));
        x = conv1d(ctx, Products::Fast, r.conv_w[i], x, strides[i], 1);
        t = (t + 2 - 3) / strides[i] + 1;
        x = ggml_relu(ctx, ggml_add(ctx, x, r.conv_b[i]));
    }
    ggml_tensor* gates = ggml_add(ctx, f32_product(ctx, r.w_ih, x), r.b_ih);  // [512, n]
    ggml_set_output(gates);
    ggml_build_forward_expand(g, gates);
    backend_.alloc_graph(g);
    ggml_backend_tensor_set(in, frames.data(), 0, frames.size() * sizeof(float));
    backend_.compute(g);
    std::vector<float> out(static_cast<size_t>(kGates) * n);
    ggml_backend_tensor_get(gates, out.data(), 0, out.size() * sizeof(float));
    return out;
}

float SileroVad::step(const Rate& r, const float* gates_in, std::vector<float>& h, std::vector<float>& c) const {
    float gates[kGates];
    for (int j = 0; j < kGates; ++j) {
        const float* w = r.w_hh.data() + static_cast<size_t>(j) * kHidden;
        float acc = 0.0f;
        for (int k = 0; k < kHidden; ++k) acc += w[k] * h[k];
        gates[j] = gates_in[j] + r.b_hh[j] + acc;
    }
    float out = r.dec_b;
    for (int k = 0; k < kHidden; ++k) {
        const float i = sigmoid(gates[k]), f = sigmoid(gates[kHidden + k]);
        const float g = std::tanh(gates[2 * kHidden + k]), o = sigmoid(gates[3 * kHidden + k]);
        c[k] = f * c[k] + i * g;
        h[k] = o * std::tanh(c[k]);
        out += r.dec_w[k] * std::max(h[k], 0.0f);
    }
    return sigmoid(out);
}

std::vector<float> SileroVad::probabilities(std::span<const float> pcm, int sample_rate) {
    PcmSource audio(pcm);
    return probabilities(audio, sample_rate);
}

std::vector<float> SileroVad::probabilities(PcmSource& audio, int sample_rate) {
    const Rate& r = rate(sample_rate);
    const int len = r.context + r.window;
    std::vector<float> probs;
    std::vector<float> h(kHidden, 0.0f), c(kHidden, 0.0f);
    // Groups of kWindowsPerGraph windows, whatever the audio's length: each group's graph is the
    // whole-recording path's, so every probability is the same.
    for (size_t first = 0;; first += kWindowsPerGraph) {
        const size_t begin = first * r.window;
        const size_t have = audio.fill(begin + static_cast<size_t>(kWindowsPerGraph) * r.window);
        if (have <= begin) break;
        const int n = static_cast<int>(std::min<size_t>(kWindowsPerGraph, (have - begin + r.window - 1) / r.window));
        // Each input: the `context` samples before the window (zeros before the start), then the
        // window (zeros past the end).
        const size_t lo = begin >= static_cast<size_t>(r.context) ? begin - r.context : 0;
        const std::span<const float> pcm = audio.view(lo, have);
        std::vector<float> inputs(static_cast<size_t>(len) * n, 0.0f);
        for (int w = 0; w < n; ++w) {
            const int64_t start = static_cast<int64_t>(begin) + static_cast<int64_t>(w) * r.window - r.context;
            for (int j = 0; j < len; ++j) {
                const int64_t s = start + j;
                if (s >= static_cast<int64_t>(lo) && s < static_cast<int64_t>(have))
                    inputs[static_cast<size_t>(w) * len + j] = pcm[static_cast<size_t>(s) - lo];
            }
        }
        const std::vector<float> gates = encode(r, inputs, n);
        for (int w = 0; w < n; ++w) probs.push_back(step(r, gates.data() + static_cast<size_t>(w) * kGates, h, c));
        // The next group reads only its own windows and the context before them.
        const size_t next = begin + static_cast<size_t>(n) * r.window;
        audio.release(next >= static_cast<size_t>(r.context) ? next - r.context : 0);
        if (have < begin + static_cast<size_t>(kWindowsPerGraph) * r.window) break;
    }
    return probs;
}

std::unique_ptr<VoiceActivityStream> SileroVad::stream(int sample_rate) {
    return std::make_unique<Stream>(*this, sample_rate);
}

SileroVad::Stream::Stream(SileroVad& vad, int sample_rate) : vad_(vad), rate_(sample_rate) {
    samples_per_window(sample_rate);
    reset();
}

void SileroVad::Stream::reset() {
    context_.assign(static_cast<size_t>(vad_.rate(rate_).context), 0.0f);
    h_.assign(kHidden, 0.0f);
    c_.assign(kHidden, 0.0f);
}

float SileroVad::Stream::push(std::span<const float> window) {
    const Rate& r = vad_.rate(rate_);
    if (window.size() != static_cast<size_t>(r.window))
        throw Error(ErrorKind::InvalidArgument, "a VAD window at " + std::to_string(rate_) + " Hz is " +
                                                    std::to_string(r.window) + " samples, not " +
                                                    std::to_string(window.size()));
    std::vector<float> input(context_);
    input.insert(input.end(), window.begin(), window.end());
    const std::vector<float> gates = vad_.encode(r, input, 1);
    std::copy(input.end() - r.context, input.end(), context_.begin());
    return vad_.step(r, gates.data(), h_, c_);
}

}  // namespace parlance::silero_vad
