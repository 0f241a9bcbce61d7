// The tests' Qwen3 checkpoint writer (see qwen3_fixture.h).
#include "qwen3_fixture.h"

#include <cmath>
#include <fstream>
#include <map>
#include <tuple>

#include "core/dtype.h"
#include "core/error.h"
#include "core/gguf_writer.h"
#include "core/safetensors_writer.h"
#include "core/tensor_data.h"
#include "test_support.h"

namespace parlance::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json read_json(const fs::path& p) {
    std::ifstream in(p);
    return json::parse(in);
}

uint64_t fnv1a64(const std::string& s) {
    uint64_t h = 0xCBF29CE484222325ULL;
    for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ULL;
    return h;
}

struct Param {
    std::string hf, gguf;
    std::vector<int64_t> shape;
    bool norm;
};

// Qwen3ForCausalLM's named_parameters() for a config (lm_head only when untied).
std::vector<Param> params(const json& c) {
    const int64_t d = c["hidden_size"], ff = c["intermediate_size"], V = c["vocab_size"], hd = c["head_dim"];
    const int64_t q = c["num_attention_heads"].get<int64_t>() * hd, kv = c["num_key_value_heads"].get<int64_t>() * hd;
    std::vector<Param> out = {{"model.embed_tokens.weight", "token_embd.weight", {V, d}, false}};
    for (int i = 0; i < c["num_hidden_layers"].get<int>(); ++i) {
        const std::string h = "model.layers." + std::to_string(i) + ".", g = "blk." + std::to_string(i) + ".";
        out.push_back({h + "self_attn.q_proj.weight", g + "attn_q.weight", {q, d}, false});
        out.push_back({h + "self_attn.k_proj.weight", g + "attn_k.weight", {kv, d}, false});
        out.push_back({h + "self_attn.v_proj.weight", g + "attn_v.weight", {kv, d}, false});
        out.push_back({h + "self_attn.o_proj.weight", g + "attn_output.weight", {d, q}, false});
        out.push_back({h + "self_attn.q_norm.weight", g + "attn_q_norm.weight", {hd}, true});
        out.push_back({h + "self_attn.k_norm.weight", g + "attn_k_norm.weight", {hd}, true});
        out.push_back({h + "mlp.gate_proj.weight", g + "ffn_gate.weight", {ff, d}, false});
        out.push_back({h + "mlp.up_proj.weight", g + "ffn_up.weight", {ff, d}, false});
        out.push_back({h + "mlp.down_proj.weight", g + "ffn_down.weight", {d, ff}, false});
        out.push_back({h + "input_layernorm.weight", g + "attn_norm.weight", {d}, true});
        out.push_back({h + "post_attention_layernorm.weight", g + "ffn_norm.weight", {d}, true});
    }
    out.push_back({"model.norm.weight", "output_norm.weight", {d}, true});
    if (!c.value("tie_word_embeddings", false)) out.push_back({"lm_head.weight", "output.weight", {V, d}, false});
    return out;
}

// The vocabulary as llama.cpp's converter lays it out (conversion/base.py get_vocab_base): added
// tokens that are special or look it (<|...|>) control (3), other added ones user-defined (4),
// ids no token has [PADn] unused (5).
void write_gguf_tokenizer(GgufWriter& w, const json& tok, int64_t rows) {
    std::vector<std::string> tokens(rows);
    std::vector<int32_t> types(rows, 5);
    for (int64_t i = 0; i < rows; ++i) tokens[i] = "[PAD" + std::to_string(i) + "]";
    for (const auto& [piece, id] : tok["model"]["vocab"].items()) {
        tokens.at(id.get<int64_t>()) = piece;
        types[id.get<int64_t>()] = 1;
    }
    for (const json& at : tok["added_tokens"]) {
        const std::string c = at["content"];
        const bool looks_special = c.size() >= 4 && c.starts_with("<|") && c.ends_with("|>");
        tokens.at(at["id"].get<int64_t>()) = c;
        types[at["id"].get<int64_t>()] = at.value("special", false) || looks_special ? 3 : 4;
    }
    std::vector<std::string> merges;
    for (const json& m : tok["model"]["merges"])
        merges.push_back(m.is_array() ? m[0].get<std::string>() + " " + m[1].get<std::string>() : m.get<std::string>());
    w.set_strs("tokenizer.ggml.tokens", tokens);
    w.set_i32s("tokenizer.ggml.token_type", types);
    w.set_strs("tokenizer.ggml.merges", merges);
}

// The Qwen3 decoder's dimensions under `arch` ("qwen3", or "qwen3vl" for Qwen3-ASR's text model)
// from an HF text config (an edited config differs from the one the converter ran on).
void set_qwen3_dimensions(GgufWriter& w, const std::string& arch, const json& cfg) {
    w.set_u32(arch + ".block_count", cfg["num_hidden_layers"].get<uint32_t>());
    w.set_u32(arch + ".context_length", cfg["max_position_embeddings"].get<uint32_t>());
    w.set_u32(arch + ".embedding_length", cfg["hidden_size"].get<uint32_t>());
    w.set_u32(arch + ".feed_forward_length", cfg["intermediate_size"].get<uint32_t>());
    w.set_u32(arch + ".attention.head_count", cfg["num_attention_heads"].get<uint32_t>());
    w.set_u32(arch + ".attention.head_count_kv", cfg["num_key_value_heads"].get<uint32_t>());
    w.set_u32(arch + ".attention.key_length", cfg["head_dim"].get<uint32_t>());
    w.set_u32(arch + ".attention.value_length", cfg["head_dim"].get<uint32_t>());
    w.set_f32(arch + ".rope.freq_base", cfg["rope_parameters"]["rope_theta"].get<float>());
}

}  // namespace

uint64_t splitmix64_ref(uint64_t x) {
    x += 0x9E3779B97F4A7C15ULL;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

std::vector<float> synthetic_weight(const std::string& name, const std::vector<int64_t>& shape, uint64_t seed) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    const uint64_t base = fnv1a64(name) ^ seed;
    const bool norm = name.size() >= 11 && name.compare(name.size() - 11, 11, "norm.weight") == 0;
    const int64_t fan_in = shape.back();
    int bits = 0;
    while ((int64_t(1) << (bits + 1)) <= fan_in) ++bits;  // floor(log2(fan_in)) = bit_length - 1
    const float step = std::ldexp(1.0f, -(6 + bits / 2));
    std::vector<float> out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        const int64_t k = static_cast<int64_t>((splitmix64_ref(base + static_cast<uint64_t>(i)) >> 33) % 255) - 127;
        out[i] = norm ? 1.0f + static_cast<float>(k % 33) / 128.0f : static_cast<float>(k) * step;
    }
    return out;
}

void set_gguf_keys(GgufWriter& w, const json& keys) {
    for (const auto& [k, v] : keys.items()) {
        if (k.starts_with("GGUF.")) continue;  // the reader's own (version, counts)
        if (v.is_string())
            w.set_str(k, v.get<std::string>());
        else if (v.is_boolean())
            w.set_bool(k, v.get<bool>());
        else if (v.is_number_integer())
            w.set_u32(k, v.get<uint32_t>());
        else if (v.is_number_float())
            w.set_f32(k, v.get<float>());
        else if (v.is_array() && v.size() <= 16 && (v.empty() || v[0].is_number_integer()))
            w.set_i32s(k, v.get<std::vector<int32_t>>());
    }
}

json qwen3_reference(const std::string& config) {
    return read_json(fixtures_dir() / "qwen3" / config / "reference.json");
}

fs::path write_qwen3(const std::string& config, const fs::path& dir, const Qwen3Checkpoint& how, const json& edit) {
    const fs::path src = fixtures_dir() / "qwen3" / config;
    json cfg = read_json(src / "config.json");
    if (edit.is_object()) cfg.merge_patch(edit);
    const json ref = read_json(src / "reference.json");
    const uint64_t seed = ref["seed"];
    fs::create_directories(dir);
    std::vector<TensorData> tensors;
    for (const Param& p : params(cfg)) {
        std::vector<float> v = synthetic_weight(p.hf, p.shape, seed);
        if (how.rounded_through != GGML_TYPE_COUNT && !p.norm) {
            const TensorData q = TensorData::from_f32(p.hf, p.shape, v, how.rounded_through);
            v = decode_to_f32(q.bytes.data(), how.rounded_through, static_cast<int64_t>(v.size()));
        }
        const ggml_type t = how.gguf && p.norm ? GGML_TYPE_F32 : how.dtype;
        tensors.push_back(TensorData::from_f32(how.gguf ? p.gguf : p.hf, p.shape, v, t));
    }
    if (how.gguf) {
        GgufWriter w;
        // llama.cpp's keys as its converter wrote them for this config (reference.json gguf_layout);
        // arrays (the tokenizer's) are rebuilt from the real tokenizer.json.
        // Only tiny's reference carries the converter's layout; its keys serve every config.
        const json layout = ref.contains("gguf_layout")
                                ? ref["gguf_layout"]
                                : read_json(fixtures_dir() / "qwen3" / "tiny" / "reference.json")["gguf_layout"];
        set_gguf_keys(w, layout["keys"]);
        set_qwen3_dimensions(w, "qwen3", cfg);
        if (how.dtype == GGML_TYPE_F16) w.set_u32("general.file_type", 1);  // llama.cpp's MOSTLY_F16
        if (how.dtype == GGML_TYPE_F32) w.set_u32("general.file_type", 0);
        if (how.dtype == GGML_TYPE_Q8_0) w.set_u32("general.file_type", 7);   // MOSTLY_Q8_0
        if (how.dtype == GGML_TYPE_Q4_K) w.set_u32("general.file_type", 14);  // MOSTLY_Q4_K_S (every matrix q4_K)
        write_gguf_tokenizer(w, read_json(assets_dir() / "qwen3" / "tokenizer.json"), cfg["vocab_size"].get<int64_t>());
        for (TensorData& t : tensors) w.add_tensor(std::move(t));
        w.write(dir / "model.gguf");
        return dir / "model.gguf";
    }
    json c = cfg;
    std::ofstream(dir / "config.json") << c.dump(2);
    std::ofstream(dir / "generation_config.json") << json{{"eos_token_id", ref["eos_token_ids"]}}.dump();
    fs::copy_file(assets_dir() / "qwen3" / "tokenizer.json", dir / "tokenizer.json",
                  fs::copy_options::overwrite_existing);
    fs::copy_file(assets_dir() / "qwen3" / "tokenizer_config.json", dir / "tokenizer_config.json",
                  fs::copy_options::overwrite_existing);
    if (how.shards > 1) {
        write_safetensors_sharded(dir, tensors, static_cast<size_t>(how.shards));
    } else {
        write_safetensors(dir / "model.safetensors", tensors);
    }
    return dir;
}

json qwen3_asr_reference(const std::string& config) {
    return read_json(fixtures_dir() / "qwen3_asr" / config / "reference.json");
}

namespace {

// Qwen3-ASR's added tokens at their published ids, and a reserved placeholder at every other id
// of 151669..151705 (as tools/reference/qwen3_asr_gguf_pair.py: the real tokenizer has no gaps
// there, and transformers renumbers added tokens that leave some).
std::vector<std::tuple<int, std::string, bool>> asr_added_tokens() {
    std::vector<std::tuple<int, std::string, bool>> out;
    const std::map<int, std::pair<std::string, bool>> named = {{151669, {"<|audio_start|>", true}},
                                                               {151670, {"<|audio_end|>", true}},
                                                               {151676, {"<|audio_pad|>", true}},
                                                               {151704, {"<asr_text>", false}},
                                                               {151705, {"<timestamp>", true}}};
    for (int id = 151669; id <= 151705; ++id) {
        const auto it = named.find(id);
        out.emplace_back(id, it != named.end() ? it->second.first : "<|parlance_reserved_" + std::to_string(id) + "|>",
                         it == named.end() || it->second.second);
    }
    return out;
}

// llama.cpp's mmproj name of an HF audio tensor (conversion/qwen3vl.py + gguf-py's tensor map).
std::string mmproj_name(const std::string& hf) {
    const std::string tower = "model.audio_tower.", proj = "model.multi_modal_projector.linear_";
    if (hf.rfind(proj, 0) == 0) return "mm.a.mlp." + hf.substr(proj.size());
    std::string n = hf.substr(tower.size());
    if (n.rfind("conv2d", 0) == 0) return "a.conv2d." + n.substr(6);  // conv2d1.weight -> a.conv2d.1.weight
    if (n.rfind("conv_out", 0) == 0) return "a." + n;
    if (n.rfind("ln_post", 0) == 0) return "a.post_ln" + n.substr(7);
    // layers.N.<part>.<weight|bias>
    const size_t dot = n.find('.', 7);
    const std::string layer = n.substr(7, dot - 7), rest = n.substr(dot + 1);
    static const std::vector<std::pair<std::string, std::string>> parts = {{"self_attn.q_proj", "attn_q"},
                                                                           {"self_attn.k_proj", "attn_k"},
                                                                           {"self_attn.v_proj", "attn_v"},
                                                                           {"self_attn.out_proj", "attn_out"},
                                                                           {"self_attn_layer_norm", "ln1"},
                                                                           {"final_layer_norm", "ln2"},
                                                                           {"fc1", "ffn_up"},
                                                                           {"fc2", "ffn_down"}};
    for (const auto& [from, to] : parts)
        if (rest.rfind(from + ".", 0) == 0) return "a.blk." + layer + "." + to + rest.substr(from.size());
    throw Error(ErrorKind::Internal, "no mmproj name for " + hf);
}

// The converter's sinusoid table (Qwen25AudioModel.generate_extra_tensors): 1500 rows of d.
std::vector<float> converter_positions(int64_t d) {
    const int64_t half = d / 2;
    const double inc = std::log(10000.0) / static_cast<double>(half - 1);
    std::vector<float> out(static_cast<size_t>(1500 * d));
    for (int64_t t = 0; t < 1500; ++t)
        for (int64_t i = 0; i < half; ++i) {
            // float32 as torch computes it there: the product and exp in f32.
            const float inv = std::exp(static_cast<float>(-inc) * static_cast<float>(i));
            out[t * d + i] = std::sin(static_cast<float>(t) * inv);
            out[t * d + half + i] = std::cos(static_cast<float>(t) * inv);
        }
    return out;
}

void write_asr_gguf_pair(const json& cfg, const std::vector<TensorData>& hf_tensors, const json& tok_json,
                         const fs::path& dir, ggml_type text_type) {
    const json layout = qwen3_asr_gguf_layout()["files"];
    const json& a = cfg["audio_config"];
    const json& t = cfg["text_config"];
    // Text model: qwen3vl, bf16 matrices, f32 norms.
    GgufWriter text;
    set_gguf_keys(text, layout["model.gguf"]["keys"]);
    set_qwen3_dimensions(text, "qwen3vl", t);
    text.set_f32("qwen3vl.attention.layer_norm_rms_epsilon", t["rms_norm_eps"].get<float>());
    write_gguf_tokenizer(text, tok_json, t["vocab_size"].get<int64_t>());
    const std::map<std::string, const TensorData*> by_name = [&] {
        std::map<std::string, const TensorData*> m;
        for (const TensorData& td : hf_tensors) m[td.name] = &td;
        return m;
    }();
    auto values = [&](const std::string& name) {
        const TensorData& td = *by_name.at(name);
        return decode_to_f32(td.bytes.data(), td.type, static_cast<int64_t>(td.bytes.size() / 2));  // bf16
    };
    for (const Param& q : params(t)) {
        if (q.hf.rfind("model.", 0) != 0) continue;
        const std::string hf = "model.language_model." + q.hf.substr(6);
        text.add_tensor(TensorData::from_f32(q.gguf, q.shape, values(hf), q.norm ? GGML_TYPE_F32 : text_type));
    }
    text.write(dir / "model.gguf");

    // Projector: clip, f16 matrices and conv kernels, f32 vectors, the converter's position table.
    GgufWriter mm;
    set_gguf_keys(mm, layout["mmproj.gguf"]["keys"]);
    mm.set_u32("clip.audio.projection_dim", t["hidden_size"].get<uint32_t>());
    mm.set_u32("clip.audio.embedding_length", a["d_model"].get<uint32_t>());
    mm.set_u32("clip.audio.feed_forward_length", a["encoder_ffn_dim"].get<uint32_t>());
    mm.set_u32("clip.audio.block_count", a["encoder_layers"].get<uint32_t>());
    mm.set_u32("clip.audio.attention.head_count", a["encoder_attention_heads"].get<uint32_t>());
    mm.set_u32("clip.audio.num_mel_bins", a["num_mel_bins"].get<uint32_t>());
    const int64_t d = a["d_model"];
    mm.add_tensor(TensorData::from_f32("a.position_embd.weight", {1500, d}, converter_positions(d), GGML_TYPE_F32));
    for (const TensorData& td : hf_tensors) {
        if (td.name.rfind("model.language_model.", 0) == 0) continue;
        const std::string name = mmproj_name(td.name);
        std::vector<int64_t> shape = td.shape;
        const bool bias = name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
        if (bias && name.rfind("a.conv2d.", 0) == 0) shape = {shape[0], 1, 1};  // unsqueezed
        const bool vector = bias || shape.size() == 1;
        mm.add_tensor(TensorData::from_f32(name, shape, values(td.name), vector ? GGML_TYPE_F32 : GGML_TYPE_F16));
    }
    mm.write(dir / "mmproj.gguf");
}

}  // namespace

json qwen3_asr_gguf_layout() {
    return read_json(fixtures_dir() / "qwen3_asr" / "gguf_pair_layout.json");
}

fs::path write_qwen3_asr(const std::string& config, const fs::path& dir, bool gguf_pair, const json& edit,
                         ggml_type gguf_text_type) {
    const fs::path src = fixtures_dir() / "qwen3_asr" / config;
    json cfg = read_json(src / "config.json");
    if (edit.is_object()) cfg.merge_patch(edit);
    const uint64_t seed = qwen3_asr_reference(config)["seed"];
    const json& a = cfg["audio_config"];
    const int64_t d = a["d_model"], ch = a["downsample_hidden_size"], ff = a["encoder_ffn_dim"], out = a["output_dim"];
    int64_t freq = a["num_mel_bins"];
    for (int i = 0; i < 3; ++i) freq = (freq + 1) / 2;
    const std::string t = "model.audio_tower.";
    std::vector<std::pair<std::string, std::vector<int64_t>>> p = {
        {t + "conv2d1.weight", {ch, 1, 3, 3}},  {t + "conv2d1.bias", {ch}},
        {t + "conv2d2.weight", {ch, ch, 3, 3}}, {t + "conv2d2.bias", {ch}},
        {t + "conv2d3.weight", {ch, ch, 3, 3}}, {t + "conv2d3.bias", {ch}},
        {t + "conv_out.weight", {d, ch * freq}}};
    for (int i = 0; i < a["encoder_layers"].get<int>(); ++i) {
        const std::string h = t + "layers." + std::to_string(i) + ".";
        for (const char* n : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
            p.push_back({h + "self_attn." + n + ".weight", {d, d}});
            p.push_back({h + "self_attn." + n + ".bias", {d}});
        }
        p.push_back({h + "self_attn_layer_norm.weight", {d}});
        p.push_back({h + "self_attn_layer_norm.bias", {d}});
        p.push_back({h + "fc1.weight", {ff, d}});
        p.push_back({h + "fc1.bias", {ff}});
        p.push_back({h + "fc2.weight", {d, ff}});
        p.push_back({h + "fc2.bias", {d}});
        p.push_back({h + "final_layer_norm.weight", {d}});
        p.push_back({h + "final_layer_norm.bias", {d}});
    }
    p.push_back({t + "ln_post.weight", {d}});
    p.push_back({t + "ln_post.bias", {d}});
    p.push_back({"model.multi_modal_projector.linear_1.weight", {d, d}});
    p.push_back({"model.multi_modal_projector.linear_1.bias", {d}});
    p.push_back({"model.multi_modal_projector.linear_2.weight", {out, d}});
    p.push_back({"model.multi_modal_projector.linear_2.bias", {out}});
    for (const Param& q : params(cfg["text_config"]))  // the decoder, under model.language_model.
        if (q.hf.rfind("model.", 0) == 0) p.push_back({"model.language_model." + q.hf.substr(6), q.shape});
    std::vector<TensorData> tensors;
    for (const auto& [name, shape] : p) {
        std::vector<float> v;
        if (shape.size() == 4) {  // [out, in, kh, kw] drawn as [out, in * kh * kw]
            v = synthetic_weight(name, {shape[0], shape[1] * shape[2] * shape[3]}, seed);
        } else if (name == t + "ln_post.weight") {
            v = synthetic_weight(t + "ln_post.norm.weight", shape, seed);
        } else {
            v = synthetic_weight(name, shape, seed);
        }
        tensors.push_back(TensorData::from_f32(name, shape, v, GGML_TYPE_BF16));
    }
    fs::create_directories(dir);
    // The Qwen3 tokenizer with Qwen3-ASR's own tokens added (ids as the published checkpoints'
    // tokenizer.json has them; <asr_text> is not special: it survives skip_special_tokens).
    json tok = read_json(assets_dir() / "qwen3" / "tokenizer.json");
    for (const auto& [id, content, special] : asr_added_tokens())
        tok["added_tokens"].push_back({{"id", id},
                                       {"content", content},
                                       {"single_word", false},
                                       {"lstrip", false},
                                       {"rstrip", false},
                                       {"normalized", false},
                                       {"special", special}});
    if (gguf_pair) {
        write_asr_gguf_pair(cfg, tensors, tok, dir, gguf_text_type);
        return dir;
    }
    std::ofstream(dir / "config.json") << cfg.dump(2);
    std::ofstream(dir / "tokenizer.json") << tok.dump();
    fs::copy_file(assets_dir() / "qwen3" / "tokenizer_config.json", dir / "tokenizer_config.json",
                  fs::copy_options::overwrite_existing);
    write_safetensors(dir / "model.safetensors", tensors);
    return dir;
}

}  // namespace parlance::testing
