// Qwen3 on the generation engine against transformers 5.17 (tests/fixtures/qwen3, made by
// tools/reference/qwen3_reference.py): last-position logits within 1e-3 relative error at f32,
// greedy ids at a fixed length and with a real stop, from HF checkpoints (bf16, f32 sharded,
// f16 computed at f32) and llama.cpp-named GGUF; batched == solo (bit for bit), chunked
// prefill == whole prefill, 64 sequences through a 32-layer layout, the prefix cache, and
// load-time refusals that name the tensor or field.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "core/backend.h"
#include "core/error.h"
#include "core/graph_ops.h"
#include "engine/generation_engine.h"
#include "models/qwen3/model.h"
#include "models/registry.h"
#include "qwen3_fixture.h"
#include "test_support.h"

namespace parlance {
namespace {

using nlohmann::json;
using testing::TempDir;

struct Loaded {
    Backend backend{BackendOptions{"cpu", 0, true}};
    std::unique_ptr<LanguageModel> model;
};

std::unique_ptr<Loaded> load(const std::filesystem::path& path, const std::string& quantize = "") {
    auto l = std::make_unique<Loaded>();
    l->model = load_language_model(path, l->backend, {quantize});
    return l;
}

GenerationRequest greedy(const json& c, const char* which) {
    GenerationRequest r;
    r.prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    const json& g = c[which];
    r.sampling.max_tokens = g["max_new_tokens"];
    r.sampling.min_tokens = g.value("min_new_tokens", 0);
    r.sampling.stop_ids = g["eos_token_ids"].get<std::vector<int32_t>>();
    return r;
}

// One sequence's step: tokens at positions [pos, pos + n) into cells of the same numbers, reading
// cells 0 .. pos + n - 1; the last token's logits.
StepBatch sequence_step(const std::vector<int32_t>& tokens, int pos) {
    StepBatch b;
    const int n = static_cast<int>(tokens.size()), seen = pos + n;
    const int seg = (seen + StepBatch::kSegmentAlign - 1) / StepBatch::kSegmentAlign * StepBatch::kSegmentAlign;
    for (int i = 0; i < n; ++i) {
        b.tokens.push_back(tokens[i]);
        b.positions.push_back(pos + i);
        b.write_cells.push_back(pos + i);
        b.visible.insert(b.visible.end(), {0, pos + i + 1});
    }
    for (int p = 0; p < seg; ++p) b.read_cells.push_back(p < seen ? p : 0);
    b.segments.push_back({0, n, 0, seg});
    b.outputs.push_back(n - 1);
    return b;
}

// Relative error of the prompt's last-position logits against the reference's (every stride-th id
// and the top 10): max |a - b| / max |b|. One model step over the whole prompt in cells 0..n-1.
double logits_error(LanguageModel& m, Backend& backend, const json& c, int stride) {
    KvStorage kv(m.kv_spec(), 256, backend);
    const StepBatch b = sequence_step(c["prompt_ids"].get<std::vector<int32_t>>(), 0);
    std::vector<float> logits;
    m.forward(b, kv, logits);
    // Against transformers run in float64 on the same weights (the exact values).
    const auto strided = c["logits_strided_f64"].get<std::vector<double>>();
    double max_diff = 0, max_ref = 0;
    for (size_t i = 0; i < strided.size(); ++i) {
        max_diff = std::max(max_diff, std::abs(logits[i * stride] - strided[i]));
        max_ref = std::max(max_ref, std::abs(strided[i]));
    }
    if (std::getenv("PARLANCE_DEBUG_LOGITS"))
        std::fprintf(stderr, "%s: max diff %g, max ref %g\n", c["name"].get<std::string>().c_str(), max_diff, max_ref);
    const auto top = c["top10_ids"].get<std::vector<int>>();
    const auto top_v = c["top10_logits_f64"].get<std::vector<double>>();
    for (size_t i = 0; i < top.size(); ++i) max_diff = std::max(max_diff, std::abs(logits[top[i]] - top_v[i]));
    return max_diff / max_ref;
}

void expect_parity(const std::string& config, const std::filesystem::path& model_path, const std::string& quantize = "",
                   bool logits = true) {
    const json ref = testing::qwen3_reference(config);
    auto l = load(model_path, quantize);
    for (const json& c : ref["cases"]) {
        SCOPED_TRACE(config + "/" + c["name"].get<std::string>());
        EXPECT_EQ(l->model->tokenizer().encode(c["text"].get<std::string>()),
                  c["prompt_ids"].get<std::vector<int32_t>>());
        if (logits) {
            EXPECT_LE(logits_error(*l->model, l->backend, c, ref["logit_stride"].get<int>()), 1e-3);
        }
        for (const char* which : {"greedy_fixed", "greedy_stop"}) {
            GenerationEngine e(*l->model, l->backend, {});
            e.submit(greedy(c, which));
            const GenerationResult r = e.run_to_completion().at(0);
            EXPECT_EQ(r.tokens, c[which]["ids"].get<std::vector<int32_t>>()) << which;
            if (std::string(which) == "greedy_stop") {
                EXPECT_EQ(r.state == SeqState::FinishedStop, c[which]["stopped"].get<bool>());
            }
        }
    }
}

TEST(Qwen3Parity, TinyBf16SafetensorsMatchesTransformers) {
    TempDir d;
    expect_parity("tiny", testing::write_qwen3("tiny", d.path()));
}

TEST(Qwen3Parity, Layout06bMatchesTransformers) {
    TempDir d;
    expect_parity("layout-0.6b", testing::write_qwen3("layout-0.6b", d.path()));
}

TEST(Qwen3Parity, ShardedF32AndF16ComputedAtF32) {
    TempDir a, b;
    expect_parity("tiny", testing::write_qwen3("tiny", a.path(), {GGML_TYPE_F32, 3, false}), "", false);
    expect_parity("tiny", testing::write_qwen3("tiny", b.path(), {GGML_TYPE_F16, 1, false}), "f32", false);
}

TEST(Qwen3Parity, LlamaCppGgufMatchesTransformers) {
    TempDir d;
    expect_parity("tiny", testing::write_qwen3("tiny", d.path(), {GGML_TYPE_BF16, 1, true}));
}

// llama.cpp's quantized GGUF files (blocks from ggml's own quantizers, llama.cpp's names and
// keys), q8_0 and q4_K (every matrix), on a layout with rows of 256. Against an f32 file holding
// exactly the values those blocks decode to, the last-position logits differ only by what ggml's
// quantized dot products add (activations rounded to 8 bits); against the unrounded weights,
// by the quantization itself (q4_K: 4.5 bits per weight). A wrong block layout gives noise.
TEST(Qwen3Quantized, GgufQ8_0AndQ4KComputeWhatTheirBlocksHold) {
    const json edit = {{"hidden_size", 256},
                       {"intermediate_size", 512},
                       {"head_dim", 64},
                       {"num_attention_heads", 4},
                       {"num_key_value_heads", 2}};
    TempDir d;
    std::vector<int32_t> prompt;
    auto last_logits = [&](const std::filesystem::path& path) {
        auto l = load(path);
        if (prompt.empty())
            prompt = l->model->tokenizer().encode("The quick brown fox jumps over the lazy dog, again.");
        GenerationRequest r;
        r.prompt = prompt;
        r.sampling.max_tokens = 1;
        std::vector<float> row;
        r.on_logits = [&](std::span<const float> x) { row.assign(x.begin(), x.end()); };
        GenerationEngine e(*l->model, l->backend, {});
        e.submit(r);
        e.run_to_completion();
        return std::make_pair(row, l->model->weight_summary());
    };
    auto compare = [](const std::vector<float>& got, const std::vector<float>& ref) {
        double diff = 0, peak = 0, dot = 0, na = 0, nb = 0;
        for (size_t i = 0; i < ref.size(); ++i) {
            diff = std::max(diff, static_cast<double>(std::abs(got[i] - ref[i])));
            peak = std::max(peak, static_cast<double>(std::abs(ref[i])));
            dot += double(got[i]) * ref[i];
            na += double(got[i]) * got[i];
            nb += double(ref[i]) * ref[i];
        }
        return std::make_pair(diff / peak, dot / std::sqrt(na * nb));
    };
    const auto exact =
        last_logits(testing::write_qwen3("tiny", d.path() / "f32", {GGML_TYPE_F32, 1, true}, edit)).first;
    for (auto [type, name, blocks_rel, blocks_cos, exact_cos] :
         {std::tuple{GGML_TYPE_Q8_0, "q8_0", 0.05, 0.999, 0.999},
          std::tuple{GGML_TYPE_Q4_K, "q4_K", 0.05, 0.999, 0.95}}) {
        SCOPED_TRACE(name);
        const auto [got, summary] = last_logits(testing::write_qwen3("tiny", d.path() / name, {type, 1, true}, edit));
        EXPECT_NE(summary.find(name), std::string::npos) << summary;
        ASSERT_EQ(got.size(), exact.size());
        const auto blocks = last_logits(testing::write_qwen3("tiny", d.path() / (std::string(name) + "-f32"),
                                                             {GGML_TYPE_F32, 1, true, type}, edit))
                                .first;
        const auto [rel_b, cos_b] = compare(got, blocks);
        const auto [rel_e, cos_e] = compare(got, exact);
        std::cout << "[quantized] " << name << ": against its blocks at f32 max relative error " << rel_b << ", cosine "
                  << cos_b << "; against the unrounded weights " << rel_e << ", " << cos_e << "\n";
        EXPECT_LE(rel_b, blocks_rel);
        EXPECT_GE(cos_b, blocks_cos);
        EXPECT_GE(cos_e, exact_cos);
    }
}

// Every prompt of the fixture at once (and twice each, one with a prefix already cached) gives
// the same ids as each alone.
TEST(Qwen3Engine, BatchedEqualsSoloAndChunkedPrefillEqualsWhole) {
    TempDir d;
    const json ref = testing::qwen3_reference("tiny");
    auto l = load(testing::write_qwen3("tiny", d.path()));
    std::vector<std::vector<int32_t>> solo;
    for (const json& c : ref["cases"]) {
        GenerationEngine e(*l->model, l->backend, {});
        e.submit(greedy(c, "greedy_fixed"));
        solo.push_back(e.run_to_completion().at(0).tokens);
    }
    for (int budget : {512, 32, 7}) {
        SCOPED_TRACE("token budget " + std::to_string(budget));
        GenerationEngineOptions o;
        o.token_budget = budget;
        GenerationEngine e(*l->model, l->backend, o);
        for (int rep = 0; rep < 2; ++rep)
            for (const json& c : ref["cases"]) e.submit(greedy(c, "greedy_fixed"));
        const auto results = e.run_to_completion();
        ASSERT_EQ(results.size(), 2 * solo.size());
        for (size_t i = 0; i < results.size(); ++i) EXPECT_EQ(results[i].tokens, solo[i % solo.size()]) << i;
        // The long prompt again, after the others finished: its full blocks come from the
        // prefix cache, and its continuation is unchanged.
        e.submit(greedy(ref["cases"][3], "greedy_fixed"));
        const GenerationResult again = e.run_to_completion().at(0);
        EXPECT_EQ(again.cached_prompt_tokens, 64);
        EXPECT_EQ(again.tokens, solo[3]);
    }
}

// A model keeps its last step's graph for the next step of the same shape (StepShape) and only
// uploads the new inputs. That must never change a logit: decode steps alternating between two
// caches, another graph allocated on the backend between two steps, a cache freed and another
// made in its place (perhaps at its address), and another model's larger graph on the same
// backend all give, bit for bit, what each sequence gives alone on a model of its own.
TEST(Qwen3Engine, AKeptStepGraphGivesEveryStepItsOwnLogits) {
    TempDir d;
    const auto path = testing::write_qwen3("tiny", d.path());
    const std::vector<int32_t> a = {11, 23, 5, 80}, b = {7, 7, 42};
    const std::vector<int32_t> a_next = {3, 9, 14}, b_next = {60, 2, 31};
    // Alone: prefill, then three decodes, on a model and caches of its own.
    auto alone = [&](const std::vector<int32_t>& prompt, const std::vector<int32_t>& next) {
        auto l = load(path);
        KvStorage kv(l->model->kv_spec(), 256, l->backend);
        std::vector<std::vector<float>> out(1 + next.size());
        l->model->forward(sequence_step(prompt, 0), kv, out[0]);
        for (size_t i = 0; i < next.size(); ++i)
            l->model->forward(sequence_step({next[i]}, static_cast<int>(prompt.size() + i)), kv, out[1 + i]);
        return out;
    };
    const auto ref_a = alone(a, a_next), ref_b = alone(b, b_next);

    auto l = load(path);
    LanguageModel& m = *l->model;
    auto kv_a = std::make_unique<KvStorage>(m.kv_spec(), 256, l->backend);
    KvStorage kv_b(m.kv_spec(), 256, l->backend), other(m.kv_spec(), 64, l->backend);
    std::vector<float> logits;
    auto expect_logits = [&](const std::vector<float>& want, const char* what) {
        ASSERT_EQ(logits.size(), want.size()) << what;
        EXPECT_EQ(0, std::memcmp(logits.data(), want.data(), want.size() * sizeof(float))) << what;
    };
    m.forward(sequence_step(a, 0), *kv_a, logits);
    expect_logits(ref_a[0], "a's prompt");
    m.forward(sequence_step(b, 0), kv_b, logits);
    expect_logits(ref_b[0], "b's prompt");
    for (int i = 0; i < 2; ++i) {  // the same shape, the caches in turn
        m.forward(sequence_step({a_next[i]}, static_cast<int>(a.size()) + i), *kv_a, logits);
        expect_logits(ref_a[1 + i], "a's decode");
        m.forward(sequence_step({b_next[i]}, static_cast<int>(b.size()) + i), kv_b, logits);
        expect_logits(ref_b[1 + i], "b's decode");
    }
    // Another graph on the backend between two steps of the same cache.
    m.forward(sequence_step({b_next[2]}, static_cast<int>(b.size()) + 2), kv_b, logits);
    const KvStorage::CellCopy copy{0, 8, 4};
    other.copy_cells({&copy, 1}, l->backend);
    m.forward(sequence_step({b_next[2]}, static_cast<int>(b.size()) + 2), kv_b, logits);
    expect_logits(ref_b[3], "b's decode after another graph's allocation");
    // Another model on the same backend between two steps, its graph larger (a 60-token prompt):
    // the compute buffer grows into new memory and the old is freed (a draft model beside its
    // target does this).
    auto second = load_language_model(path, l->backend, {});
    KvStorage kv_second(second->kv_spec(), 256, l->backend);
    std::vector<int32_t> long_prompt(60);
    for (size_t i = 0; i < long_prompt.size(); ++i) long_prompt[i] = static_cast<int32_t>(3 + 7 * i % 90);
    std::vector<float> second_logits;
    m.forward(sequence_step({b_next[2]}, static_cast<int>(b.size()) + 2), kv_b, logits);
    second->forward(sequence_step(long_prompt, 0), kv_second, second_logits);
    m.forward(sequence_step({b_next[2]}, static_cast<int>(b.size()) + 2), kv_b, logits);
    expect_logits(ref_b[3], "b's decode after a larger graph of another model");
    // a's cache freed, a new one made; a's steps again in it.
    kv_a.reset();
    auto kv_c = std::make_unique<KvStorage>(m.kv_spec(), 256, l->backend);
    m.forward(sequence_step(a, 0), *kv_c, logits);
    expect_logits(ref_a[0], "a's prompt in a new cache");
    for (int i = 0; i < 3; ++i) {
        m.forward(sequence_step({a_next[i]}, static_cast<int>(a.size()) + i), *kv_c, logits);
        expect_logits(ref_a[1 + i], "a's decode in a new cache");
    }
}

// In the throughput layout (a GPU's default; PARLANCE_ATTENTION_LAYOUT=padded on the CPU) a decode
// step is filled to a bucket of sequences (graph_ops.h bucketed), so the graph built for the first
// is kept while sequences join and leave within the bucket: 5, 6, 7 and again 5 sequences run in
// one graph of 8, and every sequence's logits are, bit for bit, its logits alone. A joining
// sequence's prompt (each of another length) is a step of its own shape between two decode steps:
// its graph is built beside the decode graph, which stays (ggml-cuda keeps replaying its CUDA
// graph).
TEST(Qwen3Engine, ADecodeGraphIsKeptWhileSequencesComeAndGo) {
    TempDir d;
    const auto path = testing::write_qwen3("tiny", d.path());
    auto l = load(path);
    LanguageModel& m = *l->model;
    constexpr int kSeqs = 8, kCells = 64;
    KvStorage kv(m.kv_spec(), kSeqs * kCells, l->backend);
    if (attention_layout(kv.k(0)) != AttentionLayout::Padded)
        GTEST_SKIP() << "the throughput layout's (ctest PaddedAttentionLayoutOnCpu.Engine runs it)";
    EXPECT_EQ(sequence_bucket(5), 8);
    EXPECT_EQ(sequence_bucket(17), 24);
    EXPECT_EQ(sequence_bucket(100), 128);
    // Sequence i lives in cells [i * 64, i * 64 + 64); (i, token, position) rows, one per sequence.
    struct Row {
        int seq, token, pos;
    };
    auto step = [&](const std::vector<Row>& rows, int n_tokens_each) {
        StepBatch b;
        for (const Row& r : rows) {
            const int row0 = b.n_tokens(), read = b.n_kv(), base = r.seq * kCells;
            for (int j = 0; j < n_tokens_each; ++j) {
                b.tokens.push_back(r.token + j);
                b.positions.push_back(r.pos + j);
                b.write_cells.push_back(base + r.pos + j);
                b.visible.insert(b.visible.end(), {read, r.pos + j + 1});
            }
            const int seen = r.pos + n_tokens_each;
            for (int c = 0; c < kCells; ++c) b.read_cells.push_back(base + (c < seen ? c : 0));
            b.segments.push_back({row0, n_tokens_each, read, kCells});
            b.outputs.push_back(row0 + n_tokens_each - 1);
        }
        return b;
    };
    const std::vector<std::vector<int>> rounds = {{0, 1, 2, 3, 4}, {0, 1, 2, 3, 4, 5}, {0, 1, 2, 3, 4, 5, 6}, {2, 3, 5, 6, 7}};
    auto token_of = [](int seq, int k) { return (7 * seq + 3 * k) % 90 + 3; };
    // Prompts of different lengths: each prompt step is a graph of its own shape, built once.
    auto prompt_len = [](int seq) { return 2 + seq; };
    // Alone: each sequence's prompt, then its decodes in order, on a model and cache of its own.
    std::vector<std::vector<std::vector<float>>> alone(kSeqs);
    {
        auto a = load(path);
        for (int i = 0; i < kSeqs; ++i) {
            KvStorage own(a->model->kv_spec(), kSeqs * kCells, a->backend);
            std::vector<float> logits;
            a->model->forward(step({{i, 10 + i, 0}}, prompt_len(i)), own, logits);
            int k = 0;
            for (const auto& round : rounds)
                if (std::find(round.begin(), round.end(), i) != round.end()) {
                    a->model->forward(step({{i, token_of(i, k), prompt_len(i) + k}}, 1), own, logits);
                    alone[i].push_back(logits);
                    ++k;
                }
        }
    }
    const auto* qwen3 = dynamic_cast<const qwen3::Qwen3Model*>(&m);
    ASSERT_NE(qwen3, nullptr);
    std::vector<float> logits;
    std::vector<bool> prompted(kSeqs, false);
    std::vector<int> decoded(kSeqs, 0);
    uint64_t built = 0;
    const size_t V = static_cast<size_t>(m.vocab_size());
    for (size_t r = 0; r < rounds.size(); ++r) {
        int prompts = 0;  // the round's joining sequences, each its own one-off step
        for (int i : rounds[r])
            if (!prompted[i]) {
                m.forward(step({{i, 10 + i, 0}}, prompt_len(i)), kv, logits);
                prompted[i] = true;
                ++prompts;
            }
        std::vector<Row> rows;
        for (int i : rounds[r]) rows.push_back({i, token_of(i, decoded[i]), prompt_len(i) + decoded[i]});
        m.forward(step(rows, 1), kv, logits);
        ASSERT_EQ(logits.size(), V * rows.size()) << "the filling rows' logits are not returned";
        if (r > 0) {
            EXPECT_EQ(qwen3->graphs_built(), built + prompts) << "round " << r << ": the decode graph was built again";
        }
        built = qwen3->graphs_built();
        for (size_t j = 0; j < rows.size(); ++j) {
            const int i = rows[j].seq;
            EXPECT_EQ(0, std::memcmp(logits.data() + j * V, alone[i][decoded[i]].data(), V * sizeof(float)))
                << "sequence " << i << ", decode " << decoded[i];
            ++decoded[i];
        }
    }
}

TEST(Qwen3Engine, SixtyFourSequencesThroughThirtyTwoLayers) {
    TempDir d;
    // The 0.6B layout with 32 layers (no reference: this checks that one graph carries 64
    // sequences, with no node-count cliff, and that each equals its solo run).
    auto l = load(testing::write_qwen3("layout-0.6b", d.path(), {}, json{{"num_hidden_layers", 32}}));
    std::vector<GenerationRequest> reqs;
    for (int i = 0; i < 64; ++i) {
        GenerationRequest r;
        for (int k = 0; k <= i % 9; ++k) r.prompt.push_back(1000 + 37 * i + k);
        r.sampling.max_tokens = 4;
        reqs.push_back(r);
    }
    GenerationEngine all(*l->model, l->backend, {});
    for (const auto& r : reqs) all.submit(r);
    const auto results = all.run_to_completion();
    ASSERT_EQ(results.size(), 64u);
    for (int i : {0, 17, 63}) {
        GenerationEngine one(*l->model, l->backend, {});
        one.submit(reqs[i]);
        EXPECT_EQ(one.run_to_completion().at(0).tokens, results[i].tokens) << i;
    }
    EXPECT_EQ(all.stats().kv.used_blocks, 0);
}

// KV memory follows the tokens in use (issue 14): a cache capped at what 8 full-context slots
// would take holds 64 short requests at once, all decoding in the same steps with no preemption,
// where a slot per request would need 8 times that memory. Each still equals its solo run.
TEST(Qwen3Engine, SixtyFourShortRequestsFitTheMemoryOfEightFullContexts) {
    TempDir d;
    auto l = load(testing::write_qwen3("tiny", d.path()));
    LanguageModel& m = *l->model;
    GenerationEngineOptions o;
    o.kv_cache_bytes = size_t(8) * m.max_context() * m.kv_spec().bytes_per_token();
    o.token_budget = 2048;  // every prompt in the first step
    std::vector<GenerationRequest> reqs;
    for (int i = 0; i < 64; ++i) {
        GenerationRequest r;
        for (int k = 0; k < 6 + i % 11; ++k) r.prompt.push_back(2000 + 53 * i + k);
        r.sampling.max_tokens = 12;
        r.sampling.stop_ids = {};  // every request runs its 12 tokens
        reqs.push_back(r);
    }
    GenerationEngine all(m, l->backend, o);
    for (const auto& r : reqs) all.submit(r);
    std::vector<GenerationResult> results;
    int peak_blocks = 0, steps = 0;
    while (all.has_work()) {
        for (auto& r : all.step()) results.push_back(std::move(r));
        peak_blocks = std::max(peak_blocks, all.stats().kv.used_blocks);
        ++steps;
    }
    ASSERT_EQ(results.size(), 64u);
    const GenerationStats st = all.stats();
    EXPECT_EQ(st.preemptions, 0u);
    EXPECT_EQ(steps, 12) << "all 64 decode together: one step per token";
    const int full_context_blocks = (m.max_context() + 15) / 16;
    EXPECT_EQ(st.kv.total_blocks, 8 * full_context_blocks);
    EXPECT_LE(peak_blocks, 64 * 2) << "each request holds the blocks of its 6..16 + 12 tokens";
    std::printf("[ memory   ] 64 requests, peak %d of %d blocks (%.1f MiB of %.1f MiB); 64 full-context slots: %.1f MiB\n",
                peak_blocks, st.kv.total_blocks, peak_blocks * 16.0 * m.kv_spec().bytes_per_token() / 1048576.0,
                st.kv_bytes / 1048576.0, 64.0 * m.max_context() * m.kv_spec().bytes_per_token() / 1048576.0);
    std::sort(results.begin(), results.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
    for (int i : {0, 31, 63}) {
        GenerationEngine one(m, l->backend, {});
        one.submit(reqs[i]);
        EXPECT_EQ(one.run_to_completion().at(0).tokens, results[i].tokens) << i;
    }
}

// An f16 KV cache (--kv-cache-type f16): twice the blocks in the same cap, logits within a small
// distance of the f32 cache's, and batched == solo still bit for bit.
TEST(Qwen3Engine, AnF16CacheHoldsTwiceTheTokensAndStaysCloseAndBatchInvariant) {
    TempDir d;
    const json ref = testing::qwen3_reference("tiny");
    auto l = load(testing::write_qwen3("tiny", d.path()));
    auto run = [&](ggml_type type, const json& c, std::vector<std::vector<float>>* rows) {
        GenerationEngineOptions o;
        o.kv_type = type;
        GenerationEngine e(*l->model, l->backend, o);
        GenerationRequest r = greedy(c, "greedy_fixed");
        if (rows) r.on_logits = [rows](std::span<const float> row) { rows->emplace_back(row.begin(), row.end()); };
        e.submit(std::move(r));
        return std::make_pair(e.run_to_completion().at(0).tokens, e.stats());
    };
    double worst = 0.0;
    for (const json& c : ref["cases"]) {
        std::vector<std::vector<float>> a, b;
        const auto [ta, sa] = run(GGML_TYPE_F32, c, &a);
        const auto [tb, sb] = run(GGML_TYPE_F16, c, &b);
        EXPECT_EQ(sb.kv.total_blocks, 2 * sa.kv.total_blocks);
        EXPECT_LE(sb.kv_bytes, sa.kv_bytes);
        // The rows both runs computed from the same tokens (up to the first token they disagree on).
        size_t same = 0;
        while (same < ta.size() && same < tb.size() && ta[same] == tb[same]) ++same;
        for (size_t i = 0; i <= same && i < a.size() && i < b.size(); ++i) {
            float lo = a[i][0], hi = a[i][0];
            double diff = 0.0;
            for (size_t k = 0; k < a[i].size(); ++k) {
                lo = std::min(lo, a[i][k]);
                hi = std::max(hi, a[i][k]);
                diff = std::max(diff, std::abs(double(a[i][k]) - b[i][k]));
            }
            worst = std::max(worst, diff / std::max(1e-6, double(hi - lo)));
        }
    }
    EXPECT_LE(worst, 5e-3) << "largest logit change relative to the row's range";
    std::printf("[ f16 KV ] largest logit change: %.2e of the row's range\n", worst);

    // Batch invariance holds with f16 cells too.
    std::vector<std::vector<int32_t>> solo;
    for (const json& c : ref["cases"]) solo.push_back(run(GGML_TYPE_F16, c, nullptr).first);
    GenerationEngineOptions o;
    o.kv_type = GGML_TYPE_F16;
    GenerationEngine all(*l->model, l->backend, o);
    for (const json& c : ref["cases"]) all.submit(greedy(c, "greedy_fixed"));
    const auto results = all.run_to_completion();
    for (size_t i = 0; i < results.size(); ++i) EXPECT_EQ(results[i].tokens, solo[i]) << i;
}

TEST(Qwen3Engine, SamplingIsReproducibleFromItsSeed) {
    TempDir d;
    auto l = load(testing::write_qwen3("tiny", d.path()));
    auto run = [&](uint64_t seed, bool crowd) {
        GenerationEngine e(*l->model, l->backend, {});
        GenerationRequest r;
        r.prompt = {785, 3974, 13876};
        r.sampling.max_tokens = 12;
        r.sampling.temperature = 0.8f;
        r.sampling.top_k = 40;
        r.sampling.top_p = 0.95f;
        r.sampling.seed = seed;
        if (crowd)
            for (int i = 0; i < 3; ++i) {
                GenerationRequest o = r;
                o.sampling.seed = 100 + i;
                e.submit(o);
            }
        const SeqId id = e.submit(r);
        for (const auto& res : e.run_to_completion())
            if (res.id == id) return res.tokens;
        return std::vector<int32_t>{};
    };
    EXPECT_EQ(run(5, false), run(5, true));
    EXPECT_NE(run(5, false), run(6, false));
}

TEST(Qwen3Load, RefusalsNameTheFileAndTensorOrField) {
    auto expect_error = [](const std::filesystem::path& p, const std::string& needle) {
        try {
            load(p);
            ADD_FAILURE() << "loaded " << p;
        } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::InvalidModel) << e.what();
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        }
    };
    {
        TempDir d;  // one layer fewer in the config than in the file: an unexpected tensor
        testing::write_qwen3("tiny", d.path());
        json c = json::parse(testing::read_file(d / "config.json"));
        c["num_hidden_layers"] = 1;
        testing::write_file(d / "config.json", c.dump());
        expect_error(d.path(), "unexpected tensor model.layers.1.");
    }
    {
        TempDir d;  // a wider config: every shape is wrong
        testing::write_qwen3("tiny", d.path());
        json c = json::parse(testing::read_file(d / "config.json"));
        c["intermediate_size"] = 96;
        testing::write_file(d / "config.json", c.dump());
        expect_error(d.path(), "expected [96, 16] from the config");
    }
    {
        TempDir d;  // a vocabulary smaller than the tokenizer
        testing::write_qwen3("tiny", d.path(), {}, json{{"vocab_size", 1000}});
        expect_error(d.path(), "smaller than the tokenizer's");
    }
    {
        TempDir d;
        testing::write_qwen3("tiny", d.path(), {}, json{{"num_key_value_heads", 3}});
        expect_error(d.path(), "not a multiple of num_key_value_heads");
    }
}

}  // namespace
}  // namespace parlance
