// Writes a full-size Whisper checkpoint with random weights (speed does not depend on weight
// values, BRIEF §4) in HF layout, then converts it to a whisper.cpp .bin, so that parlance and
// whisper.cpp can be timed on the same bytes.
//
//   make_random_whisper --layout base|small|large-v3-turbo --fixtures tests/fixtures/whisper
//                       --out DIR [--dtype f16|f32] [--seed N]
//
// Writes DIR/<layout>/ (config.json, generation_config.json, tokenizer.json, model.safetensors)
// and DIR/<layout>.bin. The tokenizer and generation config come from the committed transformers
// fixtures whose vocabulary layout matches (tiny-multi: 51865 tokens, v3-layout: 51866), so the
// id layout is the one transformers produced; only the dimensions are replaced.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/safetensors_writer.h"
#include "core/tensor_data.h"
#include "models/whisper/config.h"
#include "models/whisper/convert.h"
#include "models/whisper/tensor_names.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace parlance;
using namespace parlance::whisper;

namespace {

struct Layout {
    const char* name;
    int d, enc_layers, dec_layers, heads, n_mels, vocab;
    const char* fixture;  // the fixture whose tokenizer/generation config has this vocabulary
};

const Layout kLayouts[] = {
    {"base", 512, 6, 6, 8, 80, 51865, "tiny-multi"},
    {"small", 768, 12, 12, 12, 80, 51865, "tiny-multi"},
    {"large-v3-turbo", 1280, 32, 4, 20, 128, 51866, "v3-layout"},
};

// splitmix64: fast, deterministic, no dependence on the standard library's distributions.
struct Rng {
    uint64_t s;
    uint64_t next() {
        uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    // Uniform in [-a, a].
    float uniform(float a) { return a * (static_cast<float>(next() >> 40) / 8388608.0f - 1.0f); }
};

json read_json(const fs::path& p) {
    std::ifstream f(p);
    if (!f) throw Error(ErrorKind::NotFound, p.string() + ": cannot open");
    return json::parse(f);
}

void write_json(const fs::path& p, const json& j) {
    std::ofstream f(p);
    f << j.dump(2) << "\n";
    if (!f) throw Error(ErrorKind::Io, p.string() + ": cannot write");
}

}  // namespace

int main(int argc, char** argv) {
    std::string layout_name, fixtures = "tests/fixtures/whisper", out, dtype = "f16";
    uint64_t seed = 1;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto val = [&]() -> std::string {
            if (i + 1 >= argc) { std::fprintf(stderr, "%s needs a value\n", a.c_str()); std::exit(2); }
            return argv[++i];
        };
        if (a == "--layout") layout_name = val();
        else if (a == "--fixtures") fixtures = val();
        else if (a == "--out") out = val();
        else if (a == "--dtype") dtype = val();
        else if (a == "--seed") seed = std::stoull(val());
        else { std::fprintf(stderr, "unknown argument %s\n", a.c_str()); return 2; }
    }
    const Layout* L = nullptr;
    for (const Layout& l : kLayouts)
        if (layout_name == l.name) L = &l;
    if (!L || out.empty() || (dtype != "f16" && dtype != "f32")) {
        std::fprintf(stderr, "usage: make_random_whisper --layout base|small|large-v3-turbo --out DIR "
                             "[--fixtures tests/fixtures/whisper] [--dtype f16|f32] [--seed N]\n");
        return 2;
    }
    try {
        const fs::path dir = fs::path(out) / L->name;
        const fs::path bin = fs::path(out) / (std::string(L->name) + ".bin");
        const fs::path fix = fs::path(fixtures) / L->fixture / "model";
        fs::create_directories(dir);

        json config = read_json(fix / "config.json");
        if (config.at("vocab_size").get<int>() != L->vocab)
            throw Error(ErrorKind::InvalidModel, (fix / "config.json").string() + ": vocabulary differs");
        config["d_model"] = L->d;
        config["encoder_layers"] = L->enc_layers;
        config["decoder_layers"] = L->dec_layers;
        config["encoder_attention_heads"] = L->heads;
        config["decoder_attention_heads"] = L->heads;
        config["encoder_ffn_dim"] = 4 * L->d;
        config["decoder_ffn_dim"] = 4 * L->d;
        config["num_mel_bins"] = L->n_mels;
        config["num_hidden_layers"] = L->enc_layers;
        config["dtype"] = dtype == "f16" ? "float16" : "float32";
        write_json(dir / "config.json", config);

        json gen = read_json(fix / "generation_config.json");
        json heads = json::array();  // alignment heads: every head of the upper half of the decoder
        for (int l = L->dec_layers / 2; l < L->dec_layers; ++l)
            for (int h = 0; h < L->heads; ++h) heads.push_back({l, h});
        gen["alignment_heads"] = heads;
        write_json(dir / "generation_config.json", gen);
        for (const char* f : {"tokenizer.json", "tokenizer_config.json", "preprocessor_config.json"})
            if (fs::exists(fix / f)) fs::copy_file(fix / f, dir / f, fs::copy_options::overwrite_existing);

        const WhisperConfig c = WhisperConfig::from_hf(config, (dir / "config.json").string());
        const ggml_type type = dtype == "f16" ? GGML_TYPE_F16 : GGML_TYPE_F32;
        Rng rng{seed};
        std::vector<TensorData> tensors;
        uint64_t params = 0;
        for (const TensorName& t : whisper_tensor_names(c)) {
            if (t.optional) continue;  // proj_out: tied to the token embedding
            int64_t n = 1;
            for (int64_t s : t.shape) n *= s;
            std::vector<float> v(static_cast<size_t>(n));
            const std::string& name = t.hf;
            const bool ln_weight = name.find("layer_norm.weight") != std::string::npos;
            const bool bias = name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
            if (ln_weight) {
                for (float& x : v) x = 1.0f + rng.uniform(0.1f);
            } else if (bias) {
                for (float& x : v) x = rng.uniform(0.02f);
            } else {
                // Uniform with the variance of N(0, 1/fan_in): activations stay O(1) through depth.
                const float fan_in = static_cast<float>(t.shape.size() == 1 ? 1 : n / t.shape[0]);
                const float a = std::sqrt(3.0f / fan_in);
                for (float& x : v) x = rng.uniform(a);
            }
            tensors.push_back(TensorData::from_f32(name, t.shape, v, type));
            params += static_cast<uint64_t>(n);
        }
        write_safetensors(dir / "model.safetensors", tensors, {{"format", "pt"}});
        tensors.clear();
        std::fprintf(stderr, "wrote %s: %.1fM parameters (%s)\n", dir.c_str(), params / 1e6, dtype.c_str());

        WhisperCppConvertOptions o;
        o.dtype = type;
        auto r = convert_to_whispercpp(dir, bin, o);
        for (const auto& w : r.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
        std::fprintf(stderr, "wrote %s: %d tensors, %.1f MB\n", bin.c_str(), r.tensors, r.bytes / 1e6);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "make_random_whisper: %s\n", e.what());
        return 1;
    }
    return 0;
}
