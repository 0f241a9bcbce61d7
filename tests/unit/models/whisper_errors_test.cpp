// Damaged Whisper checkpoints: each test copies the tiny-en fixture, breaks one thing, and
// asserts the load fails with the right ErrorKind and a message naming the file and the field or
// tensor. Each damage is chosen so that only the check under test catches it with that message.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include <ggml.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/safetensors_writer.h"
#include "core/tensor_store.h"
#include "models/whisper/model.h"
#include "test_support.h"

namespace parlance::whisper {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::TempDir;

class WhisperErrors : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = tmp_ / "model";
        fs::copy(testing::fixtures_dir() / "whisper" / "tiny-en" / "model", dir_);
    }

    json read_json(const std::string& name) { return json::parse(testing::read_file(dir_ / name)); }
    void write_json(const std::string& name, const json& j) { testing::write_file(dir_ / name, j.dump()); }
    void edit_json(const std::string& name, const std::function<void(json&)>& f) {
        json j = read_json(name);
        f(j);
        write_json(name, j);
    }

    // Rewrites model.safetensors through `f`, which edits the list of tensors.
    void edit_tensors(const std::function<void(std::vector<TensorData>&)>& f) {
        std::vector<TensorData> tensors;
        {
            auto store = TensorStore::open(dir_ / "model.safetensors");
            for (const TensorInfo& t : store->tensors())
                tensors.push_back({t.name, t.type, t.shape, std::vector<uint8_t>(t.data, t.data + t.nbytes)});
        }
        f(tensors);
        write_safetensors(dir_ / "model.safetensors", tensors);
    }

    // Loads and returns the error; fails the test when the load succeeds or the kind differs.
    std::string load_error(ErrorKind kind) {
        BackendOptions bo;
        bo.threads = 1;
        Backend backend(bo);
        try {
            WhisperModel::load(dir_, backend);
        } catch (const Error& e) {
            EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(kind)) << e.what();
            return e.what();
        }
        ADD_FAILURE() << "the damaged model loaded";
        return "";
    }

    TempDir tmp_;
    fs::path dir_;
};

#define EXPECT_MENTIONS(msg, text) EXPECT_NE((msg).find(text), std::string::npos) << (msg)

TEST_F(WhisperErrors, IntactCopyLoads) {
    BackendOptions bo;
    bo.threads = 1;
    Backend backend(bo);
    // The copy loads as the fixture is: its config, special tokens, tokenizer and weights.
    const std::unique_ptr<WhisperModel> m = WhisperModel::load(dir_, backend);
    EXPECT_EQ(m->format, FileFormat::Safetensors);
    EXPECT_EQ(m->config.d_model, 32);
    EXPECT_EQ(m->config.encoder_layers, 1);
    EXPECT_EQ(m->config.decoder_layers, 3);
    EXPECT_EQ(m->config.vocab_size, 51864);
    EXPECT_EQ(m->config.n_mels, 80);
    EXPECT_EQ(m->tokens.eot, 50256);
    EXPECT_EQ(m->tokens.sot, 50257);
    EXPECT_EQ(m->tokens.notimestamps, 50362);
    EXPECT_FALSE(m->tokens.multilingual);
    ASSERT_TRUE(m->tokenizer);
    EXPECT_EQ(m->tokenizer->vocab_size(), 51864u);
    EXPECT_EQ(m->tokenizer->decode(m->tokenizer->encode(" And so my fellow Americans")), " And so my fellow Americans");
    ASSERT_TRUE(m->weights);
    EXPECT_EQ(m->weights->enc_layers.size(), 1u);
    EXPECT_EQ(m->weights->dec_layers.size(), 3u);
    ASSERT_NE(m->weights->tok_emb, nullptr);
    EXPECT_EQ(m->weights->tok_emb->ne[0], 32);
    EXPECT_EQ(m->weights->tok_emb->ne[1], 51864);
    EXPECT_GT(m->bytes_on_disk, 0u);
}

TEST_F(WhisperErrors, ModelTypeNotWhisper) {
    edit_json("config.json", [](json& j) { j["model_type"] = "bert"; });
    std::string msg = load_error(ErrorKind::Unsupported);
    EXPECT_MENTIONS(msg, "config.json");
    EXPECT_MENTIONS(msg, "model_type");
    EXPECT_MENTIONS(msg, "bert");
}

TEST_F(WhisperErrors, TokenizerWithMoreTokensThanVocabSize) {
    edit_json("tokenizer.json", [](json& j) {
        j["added_tokens"].push_back({{"id", 51864}, {"content", "<|extra|>"}, {"single_word", false},
                                     {"lstrip", false}, {"rstrip", false}, {"normalized", false},
                                     {"special", true}});
    });
    std::string msg = load_error(ErrorKind::InvalidModel);
    EXPECT_MENTIONS(msg, "tokenizer.json");
    EXPECT_MENTIONS(msg, "51865 tokens");
    EXPECT_MENTIONS(msg, "vocab_size is 51864");
}

TEST_F(WhisperErrors, TokenizerMissingAToken) {
    // <|startoflm|> (50359) is neither checked by name nor derivable like the timestamps.
    edit_json("tokenizer.json", [](json& j) {
        j["model"]["vocab"].erase("<|startoflm|>");
        auto& added = j["added_tokens"];
        for (size_t i = 0; i < added.size(); ++i)
            if (added[i]["content"] == "<|startoflm|>") added.erase(i);
    });
    std::string msg = load_error(ErrorKind::InvalidModel);
    EXPECT_MENTIONS(msg, "tokenizer.json");
    EXPECT_MENTIONS(msg, "no token 50359");
}

TEST_F(WhisperErrors, OlderTokenizerWithoutTimestampsStillLoads) {
    // Snapshots from before the timestamp tokens were added to tokenizer.json: derived.
    edit_json("tokenizer.json", [](json& j) {
        json kept = json::array();
        for (const auto& a : j["added_tokens"])
            if (a["id"].get<int>() < 50363) kept.push_back(a);
        j["added_tokens"] = kept;
        json vocab = json::object();
        for (const auto& [k, v] : j["model"]["vocab"].items())
            if (v.get<int>() < 50363) vocab[k] = v;
        j["model"]["vocab"] = vocab;
    });
    BackendOptions bo;
    bo.threads = 1;
    Backend backend(bo);
    auto m = WhisperModel::load(dir_, backend);
    EXPECT_EQ(m->tokenizer->vocab_size(), 51864u);
    EXPECT_EQ(m->tokenizer->token_to_id("<|30.00|>"), 51863);
}

TEST_F(WhisperErrors, SpecialTokenAtWrongId) {
    // Swap <|nocaptions|> (50361) and <|notimestamps|> (50362).
    edit_json("tokenizer.json", [](json& j) {
        j["model"]["vocab"]["<|nocaptions|>"] = 50362;
        j["model"]["vocab"]["<|notimestamps|>"] = 50361;
        for (auto& a : j["added_tokens"]) {
            if (a["content"] == "<|nocaptions|>") a["content"] = "<|notimestamps|>";
            else if (a["content"] == "<|notimestamps|>") a["content"] = "<|nocaptions|>";
        }
    });
    std::string msg = load_error(ErrorKind::InvalidModel);
    EXPECT_MENTIONS(msg, "tokenizer.json");
    EXPECT_MENTIONS(msg, "<|notimestamps|> to 50361, expected 50362");
}

TEST_F(WhisperErrors, MissingTensor) {
    edit_tensors([](std::vector<TensorData>& t) {
        std::erase_if(t, [](const TensorData& d) { return d.name == "model.decoder.layers.2.fc2.bias"; });
    });
    std::string msg = load_error(ErrorKind::InvalidModel);
    EXPECT_MENTIONS(msg, "model.safetensors");
    EXPECT_MENTIONS(msg, "missing tensor model.decoder.layers.2.fc2.bias");
}

TEST_F(WhisperErrors, TensorWithWrongShape) {
    // Transposed: same bytes, so only the shape check can tell.
    edit_tensors([](std::vector<TensorData>& t) {
        for (auto& d : t)
            if (d.name == "model.encoder.layers.0.fc1.weight") std::swap(d.shape[0], d.shape[1]);
    });
    std::string msg = load_error(ErrorKind::InvalidModel);
    EXPECT_MENTIONS(msg, "model.safetensors");
    EXPECT_MENTIONS(msg, "model.encoder.layers.0.fc1.weight has shape [32, 96], expected [96, 32]");
}

TEST_F(WhisperErrors, UnexpectedExtraTensor) {
    edit_tensors([](std::vector<TensorData>& t) {
        std::vector<float> v(32, 0.5f);
        t.push_back(TensorData::from_f32("model.encoder.layers.0.extra.bias", {32}, v));
    });
    std::string msg = load_error(ErrorKind::InvalidModel);
    EXPECT_MENTIONS(msg, "model.safetensors");
    EXPECT_MENTIONS(msg, "unexpected tensor model.encoder.layers.0.extra.bias");
}

TEST_F(WhisperErrors, TruncatedSafetensors) {
    const fs::path f = dir_ / "model.safetensors";
    fs::resize_file(f, fs::file_size(f) - 1000);
    std::string msg = load_error(ErrorKind::InvalidModel);
    EXPECT_MENTIONS(msg, "model.safetensors");
    EXPECT_MENTIONS(msg, ": tensor model.");  // the tensor whose data was cut off
    EXPECT_MENTIONS(msg, "beyond the data");
}

TEST_F(WhisperErrors, MelBins81) {
    // The tensors still say 80: without the config check the conv1 shape check would fire, with
    // a message about the tensor rather than the field.
    edit_json("config.json", [](json& j) { j["num_mel_bins"] = 81; });
    std::string msg = load_error(ErrorKind::InvalidModel);
    EXPECT_MENTIONS(msg, "config.json");
    EXPECT_MENTIONS(msg, "num_mel_bins = 81");
}

TEST_F(WhisperErrors, DModelNotDivisibleByHeads) {
    // d_model 32, 3 heads: every tensor shape still matches, so only the config check catches it.
    edit_json("config.json", [](json& j) { j["encoder_attention_heads"] = 3; });
    std::string msg = load_error(ErrorKind::InvalidModel);
    EXPECT_MENTIONS(msg, "config.json");
    EXPECT_MENTIONS(msg, "not divisible by encoder_attention_heads 3");
}

}  // namespace
}  // namespace parlance::whisper
