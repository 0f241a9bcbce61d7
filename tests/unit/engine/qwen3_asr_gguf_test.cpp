// llama.cpp's GGUF pair of Qwen3-ASR (a qwen3vl text model + an mmproj with projector qwen3a):
// the tests' writer lays the weights out exactly as the pinned bundle's converter did
// (tests/fixtures/qwen3_asr/gguf_pair_layout.json, recorded on the GPU machine by
// tools/reference/qwen3_asr_gguf_pair.py), and the pair computes what transformers computed for
// the HF form — in both ways of naming it (the directory, or --model TEXT --mmproj MMPROJ).
// Refusals name the file and what is wrong.
#include <gtest/gtest.h>

#include <map>

#include <nlohmann/json.hpp>

#include "core/backend.h"
#include "core/core_test_util.h"
#include "core/error.h"
#include "core/gguf_writer.h"
#include "core/model_files.h"
#include "core/weight_set.h"
#include "engine/audio_lm_parity.h"
#include "engine/lm_speech_model.h"
#include "models/registry.h"
#include "qwen3_fixture.h"
#include "test_support.h"

namespace parlance::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// name -> (ggml ne, type name) of one GGUF file, as the layout records them.
std::map<std::string, std::pair<std::vector<int64_t>, std::string>> tensor_table(const TensorStore& store) {
    std::map<std::string, std::pair<std::vector<int64_t>, std::string>> out;
    for (const TensorInfo& t : store.tensors()) {
        std::vector<int64_t> ne(t.shape.rbegin(), t.shape.rend());
        std::string type = ggml_type_name(t.type);
        for (char& c : type) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        out[t.name] = {ne, type};
    }
    return out;
}

std::map<std::string, std::pair<std::vector<int64_t>, std::string>> tensor_table(const json& recorded) {
    std::map<std::string, std::pair<std::vector<int64_t>, std::string>> out;
    for (const json& t : recorded["tensors"]) out[t["name"]] = {t["ne"].get<std::vector<int64_t>>(), t["type"]};
    return out;
}

// Our writer's pair for the config the converter ran on holds the same keys (the same values,
// but for the token arrays' contents) and the same tensors with the same shapes and types.
TEST(Qwen3AsrGguf, TheWriterLaysOutThePairAsLlamaCppsConverterDid) {
    TempDir dir;
    const json layout = qwen3_asr_gguf_layout();
    ASSERT_EQ(layout["config"], "layout-0.6b");
    write_qwen3_asr("layout-0.6b", dir.path(), /*gguf_pair=*/true);
    for (const char* file : {"model.gguf", "mmproj.gguf"}) {
        SCOPED_TRACE(file);
        const json& rec = layout["files"][file];
        const auto store = TensorStore::open(dir.path() / file);
        EXPECT_EQ(tensor_table(*store), tensor_table(rec));
        for (const auto& [k, v] : rec["keys"].items()) {
            SCOPED_TRACE(k);
            ASSERT_TRUE(store->metadata().contains(k));
            const json& ours = store->metadata()[k];
            if (v.is_object()) {  // a token array, recorded by its length
                EXPECT_EQ(ours.size(), v["array_length"].get<size_t>());
            } else if (v.is_number_float()) {
                EXPECT_FLOAT_EQ(ours.get<float>(), v.get<float>());
            } else {
                EXPECT_EQ(ours, v);
            }
        }
        for (const auto& [k, v] : store->metadata().items()) {
            if (k.starts_with("GGUF.")) continue;
            EXPECT_TRUE(rec["keys"].contains(k)) << "a key the converter did not write: " << k;
        }
    }
}

class Qwen3AsrGgufParity : public ::testing::TestWithParam<std::string> {};

// The same clips, prompts, logits and greedy ids as the HF form's parity (Qwen3AsrParity), from
// the pair: through its directory and through the text file plus --mmproj.
TEST_P(Qwen3AsrGgufParity, ThePairComputesWhatTransformersComputed) {
    TempDir dir;
    write_qwen3_asr(GetParam(), dir.path(), /*gguf_pair=*/true);
    Backend backend(BackendOptions{"cpu", 2, true, false});
    const json ref = qwen3_asr_reference(GetParam());
    for (const bool named : {false, true}) {
        SCOPED_TRACE(named ? "--model model.gguf --mmproj mmproj.gguf" : "--model DIR");
        SpeechModelOptions o;
        if (named) o.mmproj = dir.path() / "mmproj.gguf";
        auto m = load_audio_language_model(named ? dir.path() / "model.gguf" : dir.path(), backend, o);
        EXPECT_NE(m->description().find("GGUF pair"), std::string::npos) << m->description();
        const ParityReport r = run_audio_lm_parity(*m, backend, ref, fixtures_dir() / "audio");
        EXPECT_TRUE(r.all_pass()) << r.table();
        if (!named) continue;
        // The toolkit's checkpoints stop on either end token; the GGUF names only <|im_end|>.
        std::vector<int32_t> stops = m->decoder().stop_ids();
        std::sort(stops.begin(), stops.end());
        EXPECT_EQ(stops, (std::vector<int32_t>{151643, 151645}));
    }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Qwen3AsrGgufParity, ::testing::Values("tiny", "layout-0.6b"), [](const auto& info) {
    return info.param == "tiny" ? std::string("tiny") : std::string("layout_06b");
});

// A copy of `from` with one key replaced (GGUF files are rewritten through our writer).
void copy_gguf_with(const fs::path& from, const fs::path& to, const std::string& key, const std::string& value) {
    const auto store = TensorStore::open(from);
    GgufWriter w;
    json keys = store->metadata();
    keys[key] = value;
    set_gguf_keys(w, keys);
    for (const TensorInfo& t : store->tensors())
        w.add_tensor(TensorData::from_f32(t.name, t.shape, tensor_to_f32(t), t.type));
    w.write(to);
}

TEST(Qwen3AsrGguf, AnIncompletePairIsRefusedNamingWhatIsMissing) {
    TempDir dir;
    write_qwen3_asr("tiny", dir.path(), /*gguf_pair=*/true);
    Backend backend(BackendOptions{"cpu", 1, true, false});
    const fs::path text = dir.path() / "model.gguf", mmproj = dir.path() / "mmproj.gguf";
    // The text model alone: its projector is needed.
    expect_error([&] { open_speech_model(text, backend, {}); }, ErrorKind::InvalidModel,
                 {"model.gguf", "qwen3vl", "--mmproj", "qwen3a"});
    // The projector given as the model.
    expect_error([&] { open_speech_model(mmproj, backend, {}); }, ErrorKind::InvalidModel, {"mmproj.gguf", "--mmproj"});
    // A text model given as the projector.
    expect_error(
        [&] {
            open_speech_model(text, backend, {"", text});
        },
        ErrorKind::InvalidModel, {"model.gguf", "not a multimodal projector"});
    expect_error(
        [&] {
            open_speech_model(text, backend, {"", dir.path() / "absent.gguf"});
        },
        ErrorKind::NotFound, {"absent.gguf"});
    // A projector of another kind.
    TempDir other;
    copy_gguf_with(mmproj, other.path() / "mmproj-vision.gguf", "clip.audio.projector_type", "qwen3vl_merger");
    expect_error(
        [&] {
            open_speech_model(text, backend, {"", other.path() / "mmproj-vision.gguf"});
        },
        ErrorKind::Unsupported, {"mmproj-vision.gguf", "qwen3vl_merger", "qwen3a"});
    // Two model files in one directory: which one is not guessed.
    fs::copy_file(text, dir.path() / "model-q8_0.gguf");
    expect_error([&] { open_speech_model(dir.path(), backend, {}); }, ErrorKind::InvalidModel,
                 {"several model GGUF files", "model-q8_0.gguf", "model.gguf", "--mmproj"});
    // --mmproj beside an HF snapshot.
    TempDir hf;
    write_qwen3_asr("tiny", hf.path());
    expect_error(
        [&] {
            open_speech_model(hf.path(), backend, {"", mmproj});
        },
        ErrorKind::InvalidArgument, {"--mmproj", "not"});
}

}  // namespace
}  // namespace parlance::testing
