// Qwen3 weights and step graph (see model.h). The tensor names of both layouts are in
// weight_table(), the one place they are written.
#include "models/qwen3/model.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/graph_ops.h"
#include "core/weight_product.h"

namespace parlance::qwen3 {
namespace {

using nlohmann::json;

std::vector<int32_t> ids_of(const json& j) {
    std::vector<int32_t> out;
    if (j.is_number_integer()) out.push_back(j.get<int32_t>());
    if (j.is_array())
        for (const json& v : j)
            if (v.is_number_integer()) out.push_back(v.get<int32_t>());
    return out;
}

}  // namespace

std::unique_ptr<Qwen3Model> Qwen3Model::load(ModelFiles files, Backend& backend, const Qwen3LoadOptions& options) {
    std::unique_ptr<Qwen3Model> m(new Qwen3Model(backend));
    const bool gguf = files.tensors->format() == FileFormat::Gguf;
    const TensorStore& store = *files.tensors;
    // A GGUF pair's directory holds two files: errors and the tokenizer name the model's.
    const std::filesystem::path gguf_file = gguf ? store.files().front() : std::filesystem::path();
    const std::string source = gguf ? gguf_file.string() : (files.root / "config.json").string();
    if (gguf) {
        m->c_ = Qwen3Config::from_gguf(store.metadata(), source);
        const TensorInfo& emb = store.get("token_embd.weight");
        if (emb.shape.size() != 2 || emb.shape[1] != m->c_.hidden_size)
            throw Error(ErrorKind::InvalidModel, emb.file + ": tensor token_embd.weight is not [vocab, " +
                                                     std::to_string(m->c_.hidden_size) + "]");
        m->c_.vocab_size = static_cast<int>(emb.shape[0]);
        m->c_.tie_word_embeddings = store.find("output.weight") == nullptr;
        m->tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::from_gguf(gguf_file));
        const json& md = store.metadata();
        for (const char* k : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"})
            if (md.contains(k))
                for (int32_t id : ids_of(md[k]))
                    if (std::find(m->stop_ids_.begin(), m->stop_ids_.end(), id) == m->stop_ids_.end())
                        m->stop_ids_.push_back(id);
    } else {
        m->c_ = Qwen3Config::from_hf(options.config ? *options.config : files.config, source);
        if (files.tokenizer_json.empty())
            throw Error(ErrorKind::InvalidModel, files.root.string() + ": tokenizer.json is missing");
        m->tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::from_json_file(files.tokenizer_json));
        if (files.generation_config.is_object() && files.generation_config.contains("eos_token_id"))
            m->stop_ids_ = ids_of(files.generation_config["eos_token_id"]);
        if (m->stop_ids_.empty() && files.config.contains("eos_token_id"))
            m->stop_ids_ = ids_of(files.config["eos_token_id"]);
    }
    for (const std::string& text : options.stop_tokens)
        if (const auto id = m->tokenizer_->token_to_id(text))
            if (std::find(m->stop_ids_.begin(), m->stop_ids_.end(), *id) == m->stop_ids_.end())
                m->stop_ids_.push_back(*id);
    const Qwen3Config& c = m->c_;
    if (m->tokenizer_->vocab_size() > static_cast<size_t>(c.vocab_size))
        throw Error(ErrorKind::InvalidModel, source + ": vocab_size " + std::to_string(c.vocab_size) +
                                                 " is smaller than the tokenizer's " +
                                                 std::to_string(m->tokenizer_->vocab_size()) + " tokens");
    for (int32_t id : m->stop_ids_)
        if (id < 0 || id >= c.vocab_size)
            throw Error(ErrorKind::InvalidModel,
                        source + ": eos_token_id " + std::to_string(id) + " is outside the vocabulary");

    // The weight table: HF names and llama.cpp's GGUF names, shapes from the config.
    const int64_t d = c.hidden_size, q_dim = static_cast<int64_t>(c.num_heads) * c.head_dim, kv = c.kv_dim(),
                  ff = c.intermediate_size, V = c.vocab_size, hd = c.head_dim;
    std::vector<WeightSpec> table;
    m->layers_.resize(c.num_layers);
    auto add = [&](const std::string& hf, const std::string& gg, std::vector<int64_t> shape, WeightKind kind,
                   ggml_tensor** slot, bool optional = false) {
        const std::string name = hf.rfind("model.", 0) == 0 ? options.hf_prefix + hf.substr(6) : hf;
        table.push_back({gguf ? gg : name, std::move(shape), kind, slot, optional});
    };
    add("model.embed_tokens.weight", "token_embd.weight", {V, d}, WeightKind::Embedding, &m->embed_);
    add("model.norm.weight", "output_norm.weight", {d}, WeightKind::Vector, &m->final_norm_);
    if (!c.tie_word_embeddings) add("lm_head.weight", "output.weight", {V, d}, WeightKind::Matrix, &m->output_);
    for (int i = 0; i < c.num_layers; ++i) {
        Layer& l = m->layers_[i];
        const std::string h = "model.layers." + std::to_string(i) + ".", g = "blk." + std::to_string(i) + ".";
        add(h + "input_layernorm.weight", g + "attn_norm.weight", {d}, WeightKind::Vector, &l.attn_norm);
        add(h + "self_attn.q_proj.weight", g + "attn_q.weight", {q_dim, d}, WeightKind::Matrix, &l.q);
        add(h + "self_attn.k_proj.weight", g + "attn_k.weight", {kv, d}, WeightKind::Matrix, &l.k);
        add(h + "self_attn.v_proj.weight", g + "attn_v.weight", {kv, d}, WeightKind::Matrix, &l.v);
        add(h + "self_attn.o_proj.weight", g + "attn_output.weight", {d, q_dim}, WeightKind::Matrix, &l.o);
        add(h + "self_attn.q_norm.weight", g + "attn_q_norm.weight", {hd}, WeightKind::Vector, &l.q_norm);
        add(h + "self_attn.k_norm.weight", g + "attn_k_norm.weight", {hd}, WeightKind::Vector, &l.k_norm);
        add(h + "post_attention_layernorm.weight", g + "ffn_norm.weight", {d}, WeightKind::Vector, &l.mlp_norm);
        add(h + "mlp.gate_proj.weight", g + "ffn_gate.weight", {ff, d}, WeightKind::Matrix, &l.gate);
        add(h + "mlp.up_proj.weight", g + "ffn_up.weight", {ff, d}, WeightKind::Matrix, &l.up);
        add(h + "mlp.down_proj.weight", g + "ffn_down.weight", {d, ff}, WeightKind::Matrix, &l.down);
    }
    // Tied checkpoints sometimes still store the output projection (transformers ignores it);
    // some converters write a rotary table.
    std::vector<std::string> ignored = {"rope_freqs.weight"};
    if (c.tie_word_embeddings) ignored.push_back(gguf ? "output.weight" : "lm_head.weight");
    ignored.insert(ignored.end(), options.foreign_tensors.begin(), options.foreign_tensors.end());
    m->weights_ =
        std::make_unique<WeightSet>(store, table, backend, parse_weight_type(options.quantize), "Qwen3", ignored);
    if (!m->output_) m->output_ = m->embed_;
    m->files_ = std::move(files);
    return m;
}

namespace {
// Shapes kept at once: a server's decode steps move between a few sequence buckets (graph_ops.h)
// and read capacities as sequences come and go.
constexpr size_t kKeptShapes = 4;
}  // namespace

struct Qwen3Model::StepGraph {
    std::vector<uint8_t> meta;  // the context's tensor and graph metadata
    std::unique_ptr<GraphContext> gc;
    StepTensors in;
    ggml_tensor* out = nullptr;
    ggml_tensor* argmax = nullptr;     // [n_out] I32: the rows' greedy ids, where taken on the device
    ggml_tensor* span_rows = nullptr;  // embedding spans (prompt steps of audio models)
    ggml_tensor* span_data = nullptr;
    std::optional<StepShape> shape;  // nullopt: built for its step alone
};

Qwen3Model::Qwen3Model(Backend& backend) : backend_(backend) {}
Qwen3Model::~Qwen3Model() = default;

namespace {
// The metadata buffer of a graph no longer wanted, for the next one (its context freed first).
template <typename Graph>
std::vector<uint8_t> release(std::unique_ptr<Graph>& g) {
    if (!g) return {};
    g->gc.reset();
    std::vector<uint8_t> meta = std::move(g->meta);
    g.reset();
    return meta;
}
}  // namespace

std::unique_ptr<Qwen3Model::StepGraph> Qwen3Model::build_step(const StepBatch& b, const KvStorage& kv,
                                                              const std::optional<StepShape>& shape,
                                                              std::vector<uint8_t> meta) {
    const int64_t n = b.n_tokens(), d = c_.hidden_size, hd = c_.head_dim;
    const int H = c_.num_heads, Hkv = c_.num_kv_heads;
    ++graphs_built_;
    auto step = std::make_unique<StepGraph>();
    step->meta = std::move(meta);
    step->gc = std::make_unique<GraphContext>(
        step->meta, static_cast<size_t>(c_.num_layers) * (80 + paged_attention_nodes(b, kv)) + 512);
    step->shape = shape;
    ggml_context* ctx = step->gc->ctx;
    const Products products = Products::BatchInvariant;  // allocated with batch_invariant in forward()
    step->in = StepTensors::create(ctx, b, kv);
    const StepTensors& in = step->in;

    ggml_tensor* x = ggml_get_rows(ctx, embed_, in.tokens);  // [d, n]
    if (!b.embeddings.empty()) {
        int64_t rows = 0;
        for (const auto& e : b.embeddings) rows += e.rows;
        step->span_rows = ggml_new_tensor_1d(ctx, GGML_TYPE_I64, rows);
        step->span_data = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, d, rows);
        ggml_set_input(step->span_rows);
        ggml_set_input(step->span_data);
        x = ggml_set_rows(ctx, x, step->span_data, step->span_rows);
    }
    const RopeParams rp{c_.rope_theta, c_.rope_freq_scale, 0, true};
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    for (int li = 0; li < c_.num_layers; ++li) {
        const Layer& l = layers_[li];
        ggml_tensor* h = rms_norm(ctx, x, l.attn_norm, c_.rms_norm_eps);
        ggml_tensor* q = ggml_reshape_3d(ctx, linear(ctx, products, h, l.q), hd, H, n);
        ggml_tensor* k = ggml_reshape_3d(ctx, linear(ctx, products, h, l.k), hd, Hkv, n);
        ggml_tensor* v = ggml_reshape_3d(ctx, linear(ctx, products, h, l.v), hd, Hkv, n);
        q = rope(ctx, rms_norm(ctx, q, l.q_norm, c_.rms_norm_eps), in.positions, rp);
        k = rope(ctx, rms_norm(ctx, k, l.k_norm, c_.rms_norm_eps), in.positions, rp);
        ggml_tensor* att = paged_attention(ctx, q, k, v, kv, li, in, scale);
        x = ggml_add(ctx, x, linear(ctx, products, att, l.o));
        h = rms_norm(ctx, x, l.mlp_norm, c_.rms_norm_eps);
        x = ggml_add(ctx, x, swiglu_mlp(ctx, products, h, l.gate, l.up, l.down));
    }
    x = ggml_get_rows(ctx, x, in.outputs);  // [d, n_out]
    x = rms_norm(ctx, x, final_norm_, c_.rms_norm_eps);
    step->out = weight_product(ctx, products, output_, x);  // [V, n_out]
    ggml_set_output(step->out);
    ggml_build_forward_expand(step->gc->graph, step->out);
    // The throughput layout (a GPU's default; on the CPU when PARLANCE_ATTENTION_LAYOUT=padded
    // tests it) takes greedy rows' argmax in the graph.
    if (attention_layout(kv.k(0)) == AttentionLayout::Padded) {
        step->argmax = ggml_argmax(ctx, step->out);
        ggml_set_output(step->argmax);
        ggml_build_forward_expand(step->gc->graph, step->argmax);
    }
    return step;
}

Qwen3Model::StepGraph& Qwen3Model::step_graph(const StepBatch& b, const KvStorage& kv,
                                              const std::optional<StepShape>& shape) {
    // Kept: decode steps (every token an output: one a sequence, or a draft's verified tokens),
    // which recur every step. A prompt's shape rarely recurs, and kept it would push a decode
    // shape out.
    if (!shape || shape->tokens != shape->outputs) {
        once_ = build_step(b, kv, shape, release(once_));
        return *once_;
    }
    auto it = std::find_if(kept_.begin(), kept_.end(), [&](const auto& g) { return g->shape == shape; });
    if (it != kept_.end()) {
        std::rotate(it, it + 1, kept_.end());  // most recently used last
        return *kept_.back();
    }
    std::vector<uint8_t> meta;
    if (kept_.size() >= kKeptShapes) {
        meta = release(kept_.front());
        kept_.erase(kept_.begin());
    }
    kept_.push_back(build_step(b, kv, shape, std::move(meta)));
    return *kept_.back();
}

void Qwen3Model::forward(const StepBatch& b, KvStorage& kv, std::vector<float>& logits) {
    std::vector<int32_t> argmax;
    forward(b, kv, logits, {}, argmax);
}

void Qwen3Model::forward(const StepBatch& b, KvStorage& kv, std::vector<float>& logits,
                         const std::vector<uint8_t>& greedy_rows, std::vector<int32_t>& argmax) {
    const int64_t n = b.n_tokens(), d = c_.hidden_size;
    if (n == 0 || b.outputs.empty()) throw Error(ErrorKind::Internal, "qwen3: an empty step");
    for (int32_t t : b.tokens)
        if (t < 0 || t >= c_.vocab_size) throw Error(ErrorKind::Internal, "qwen3: token id out of range");

    // A decode step in the throughput layout runs filled to a bucket of sequences (graph_ops.h),
    // so its graph is kept, and replayed, while sequences come and go.
    const std::optional<StepBatch> filled = bucketed(b, kv);
    const StepBatch& run = filled ? *filled : b;
    const std::optional<StepShape> shape = reusable_shape(run, kv);
    StepGraph& step = step_graph(run, kv, shape);
    backend_.alloc_graph(*step.gc, /*batch_invariant=*/true);  // unless still placed
    step.in.upload(run);
    if (step.span_rows) {
        std::vector<int64_t> rows;
        for (const auto& e : b.embeddings)
            for (int i = 0; i < e.rows; ++i) rows.push_back(e.row + i);
        ggml_backend_tensor_set(step.span_rows, rows.data(), 0, rows.size() * sizeof(int64_t));
        size_t off = 0;
        for (const auto& e : b.embeddings) {
            const size_t bytes = static_cast<size_t>(e.rows) * d * sizeof(float);
            ggml_backend_tensor_set(step.span_data, e.data, off, bytes);
            off += bytes;
        }
    }
    backend_.compute(step.gc->graph);
    const size_t V = static_cast<size_t>(c_.vocab_size), n_out = b.outputs.size();
    logits.resize(V * n_out);
    argmax.clear();
    if (!step.argmax || greedy_rows.size() != n_out) {
        ggml_backend_tensor_get(step.out, logits.data(), 0, logits.size() * sizeof(float));
        return;
    }
    argmax.resize(n_out);
    ggml_backend_tensor_get(step.argmax, argmax.data(), 0, n_out * sizeof(int32_t));
    // The other rows' logits (and a greedy row's whose argmax failed: NaN or all -inf), in runs.
    const auto needs = [&](size_t i) { return !greedy_rows[i] || argmax[i] < 0; };
    for (size_t i = 0; i < n_out;) {
        if (!needs(i)) {
            ++i;
            continue;
        }
        size_t end = i + 1;
        while (end < n_out && needs(end)) ++end;
        ggml_backend_tensor_get(step.out, logits.data() + i * V, i * V * sizeof(float), (end - i) * V * sizeof(float));
        for (size_t r = i; r < end; ++r) argmax[r] = -1;  // read from the logits
        i = end;
    }
}

}  // namespace parlance::qwen3
