// HF -> whisper.cpp conversion: the converted file holds what whisper.cpp's loader expects
// (types, conv-bias shapes, vocabulary bytes, mel filters), runs the transformers parity checks
// exactly like the HF checkpoint, and its tokenizer (ranked bytes + layout specials) matches
// tokenizer.json id for id. An f16 conversion stays within a loose encoder error bound.
#include <gtest/gtest.h>

#include <algorithm>

#include "audio/mel.h"
#include "core/error.h"
#include "core/tensor_store.h"
#include "engine/generation_decode_service.h"
#include "models/whisper/convert.h"
#include "models/whisper/model.h"
#include "models/whisper/parity.h"
#include "test_support.h"

namespace parlance::whisper {
namespace {

using testing::TempDir;

std::filesystem::path fixture(const std::string& name) {
    return testing::fixtures_dir() / "whisper" / name;
}

class WhisperConvert : public ::testing::TestWithParam<const char*> {};

TEST_P(WhisperConvert, F32ConversionPassesParity) {
    TempDir tmp;
    const auto bin = tmp / "ggml-model-f32.bin";
    WhisperCppConvertOptions o;
    o.dtype = GGML_TYPE_F32;
    auto r = convert_to_whispercpp(fixture(GetParam()) / "model", bin, o);
    EXPECT_GT(r.tensors, 0);

    ParityOptions po;
    po.backend.threads = 2;
    po.model_override = bin;
    auto report = run_parity(fixture(GetParam()), po, generation_decode_service_factory());
    EXPECT_GE(report.rows.size(), 5u * 6u) << report.table();
    for (const auto& row : report.rows) EXPECT_TRUE(row.pass) << row.clip << " " << row.check << ": " << row.detail;
    std::printf("%s", report.table().c_str());
}

TEST_P(WhisperConvert, TokenizerAndLayoutMatchTheCheckpoint) {
    TempDir tmp;
    const auto bin = tmp / "model.bin";
    convert_to_whispercpp(fixture(GetParam()) / "model", bin, {});
    BackendOptions bo;
    bo.threads = 2;
    Backend backend(bo);
    auto hf = WhisperModel::load(fixture(GetParam()) / "model", backend);
    auto cpp = WhisperModel::load(bin, backend);

    EXPECT_EQ(cpp->config.d_model, hf->config.d_model);
    EXPECT_EQ(cpp->config.encoder_ffn, hf->config.encoder_ffn);
    EXPECT_EQ(cpp->config.decoder_ffn, hf->config.decoder_ffn);
    EXPECT_EQ(cpp->config.n_mels, hf->config.n_mels);
    EXPECT_EQ(cpp->tokens.eot, hf->tokens.eot);
    EXPECT_EQ(cpp->tokens.sot, hf->tokens.sot);
    EXPECT_EQ(cpp->tokens.translate, hf->tokens.translate);
    EXPECT_EQ(cpp->tokens.transcribe, hf->tokens.transcribe);
    EXPECT_EQ(cpp->tokens.notimestamps, hf->tokens.notimestamps);
    EXPECT_EQ(cpp->tokens.timestamp_begin, hf->tokens.timestamp_begin);
    EXPECT_EQ(cpp->tokens.languages, hf->tokens.languages);

    const Tokenizer& a = *hf->tokenizer;
    const Tokenizer& b = *cpp->tokenizer;
    ASSERT_EQ(a.vocab_size(), b.vocab_size());
    // Same bytes for every id; the same special flag below the timestamps. (HF's tokenizer.json
    // marks <|0.00|>.. as non-special added tokens, the layout makes them special: they differ
    // only for prompt text that spells a timestamp, which HF would turn into the token.)
    int mismatches = 0;
    for (int32_t id = 0; id < static_cast<int32_t>(a.vocab_size()); ++id) {
        const bool flag_differs = id < hf->tokens.timestamp_begin && a.is_special(id) != b.is_special(id);
        // The no-speech token is <|nocaptions|> in older files, <|nospeech|> in newer ones.
        const bool alias =
            id == hf->tokens.nospeech && a.token_bytes(id) == "<|nocaptions|>" && b.token_bytes(id) == "<|nospeech|>";
        if ((a.token_bytes(id) != b.token_bytes(id) && !alias) || flag_differs)
            if (++mismatches < 5)
                ADD_FAILURE() << "token " << id << ": " << a.token_bytes(id) << " vs " << b.token_bytes(id);
    }
    EXPECT_EQ(mismatches, 0);
    for (const char* text : {"And so my fellow Americans, ask not what your country can do for you.",
                             "  leading spaces,\ttabs\nand newlines  ", "Ça va? Grüße aus Köln! 東京で会いましょう。",
                             "numbers 1234567 and 3.14159, symbols <|en|> @#$%^&*()", "don't won't it's I'm",
                             "Привет, мир! مرحبا بالعالم 🙂"}) {
        EXPECT_EQ(a.encode(text), b.encode(text)) << text;
        EXPECT_EQ(a.encode(text, true), b.encode(text, true)) << text;
    }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, WhisperConvert, ::testing::Values("tiny-multi", "v3-layout"));

TEST(WhisperConvert, FileHoldsWhatWhisperCppExpects) {
    TempDir tmp;
    const auto bin = tmp / "model.bin";
    auto r = convert_to_whispercpp(fixture("v3-layout") / "model", bin, {});  // default f16
    auto store = TensorStore::open(bin);
    const auto& h = store->metadata().at("hparams");
    EXPECT_EQ(h.at("ftype"), 1);
    EXPECT_EQ(h.at("n_vocab"), 51866);
    EXPECT_EQ(h.at("n_mels"), 128);
    EXPECT_EQ(h.at("n_audio_state"), 40);
    EXPECT_EQ(h.at("n_text_ctx"), 448);
    // Mel filters: our Slaney bank, 128 x 201.
    const auto& mf = store->metadata().at("mel_filters");
    EXPECT_EQ(mf.at("n_mel"), 128);
    EXPECT_EQ(mf.at("n_fft"), 201);
    auto want = whisper_mel_filters(128);
    auto got = mf.at("data").get<std::vector<float>>();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], static_cast<float>(want[i])) << i;
    // Vocabulary: text tokens only (ids below <|endoftext|> = 50257), " " present at 220.
    const auto& vocab = store->vocab_bytes();
    EXPECT_EQ(vocab.size(), 50257u);
    EXPECT_EQ(r.vocab, 50257);
    EXPECT_EQ(vocab.at(220), " ");
    // Types and shapes whisper.cpp's loader allocates.
    auto expect = [&](const char* name, ggml_type type, std::vector<int64_t> shape) {
        const TensorInfo* t = store->find(name);
        ASSERT_NE(t, nullptr) << name;
        EXPECT_EQ(t->type, type) << name;
        EXPECT_EQ(t->shape, shape) << name;
    };
    expect("encoder.conv1.weight", GGML_TYPE_F16, {40, 128, 3});
    expect("encoder.conv1.bias", GGML_TYPE_F32, {40, 1});
    expect("encoder.conv2.bias", GGML_TYPE_F32, {40, 1});
    expect("encoder.positional_embedding", GGML_TYPE_F32, {1500, 40});
    expect("decoder.positional_embedding", GGML_TYPE_F32, {448, 40});
    expect("decoder.token_embedding.weight", GGML_TYPE_F16, {51866, 40});
    expect("encoder.blocks.7.attn.query.weight", GGML_TYPE_F16, {40, 40});
    expect("encoder.blocks.7.attn.query.bias", GGML_TYPE_F32, {40});
    expect("decoder.blocks.3.cross_attn.key.weight", GGML_TYPE_F16, {40, 40});
    expect("decoder.blocks.3.mlp.0.weight", GGML_TYPE_F16, {80, 40});
    expect("decoder.ln.bias", GGML_TYPE_F32, {40});
    EXPECT_EQ(store->find("proj_out.weight"), nullptr);
    // 8 encoder blocks x 15 + 4 decoder blocks x 24 + 11 others (whisper.cpp's count, no proj_out).
    EXPECT_EQ(store->tensors().size(), 8u * 15 + 4u * 24 + 11);
    EXPECT_EQ(r.tensors, static_cast<int>(store->tensors().size()));
    // FFN width 80 = 2 * d_model: written, with a warning that whisper.cpp assumes 4x.
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_NE(r.warnings[0].find("4 * d_model"), std::string::npos);
}

TEST(WhisperConvert, F16EncoderErrorIsSmall) {
    double worst = 0;
    for (const char* name : {"tiny-multi", "v3-layout"}) {
        TempDir tmp;
        const auto bin = tmp / "model-f16.bin";
        WhisperCppConvertOptions o;
        o.dtype = GGML_TYPE_F16;
        convert_to_whispercpp(fixture(name) / "model", bin, o);
        ParityOptions po;
        po.backend.threads = 2;
        po.model_override = bin;
        po.encoder_tolerance = 1e-2;
        po.encoder_only = true;
        auto report = run_parity(fixture(name), po, generation_decode_service_factory());
        int encoders = 0;
        for (const auto& row : report.rows) {
            if (row.check != "encoder") continue;
            ++encoders;
            worst = std::max(worst, row.value);
            EXPECT_TRUE(row.pass) << name << " " << row.clip << ": " << row.detail;
        }
        EXPECT_GE(encoders, 5) << report.table();
    }
    std::printf("f16 conversion: worst encoder relative error %.3e\n", worst);
    EXPECT_GT(worst, 0.0);  // the weights really were rounded
}

TEST(WhisperConvert, RejectsBadRequests) {
    TempDir tmp;
    WhisperCppConvertOptions o;
    o.dtype = GGML_TYPE_Q8_0;
    try {
        convert_to_whispercpp(fixture("tiny-multi") / "model", tmp / "x.bin", o);
        FAIL() << "q8_0 accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    }
    try {
        convert_to_whispercpp(fixture("tiny-multi") / "model" / "model.safetensors", tmp / "x.bin", {});
        FAIL() << "a single file accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
        EXPECT_NE(std::string(e.what()).find("model.safetensors"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace parlance::whisper
