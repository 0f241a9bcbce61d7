// HF -> whisper.cpp conversion (see convert.h). The layout whisper.cpp's loader reads: magic,
// 11 int32 hparams, mel filters, vocabulary, tensors; its type expectations are enforced here.
#include "models/whisper/convert.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "audio/mel.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/model_files.h"
#include "core/whispercpp_writer.h"
#include "models/whisper/config.h"
#include "models/whisper/tensor_names.h"
#include "text/tokenizer.h"

namespace parlance::whisper {
namespace {

namespace fs = std::filesystem;

std::string shape_str(const std::vector<int64_t>& s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}

// The special tokens whose ids a whisper.cpp file implies from its vocabulary's size, by name;
// check_layout compares a model's with them, openai_ids moves a compact vocabulary's onto them.
struct NamedToken {
    const char* name;
    int SpecialTokens::*id;
};
constexpr NamedToken kLayoutTokens[] = {{"<|endoftext|>", &SpecialTokens::eot},
                                        {"<|startoftranscript|>", &SpecialTokens::sot},
                                        {"<|translate|>", &SpecialTokens::translate},
                                        {"<|transcribe|>", &SpecialTokens::transcribe},
                                        {"<|notimestamps|>", &SpecialTokens::notimestamps}};
// Those whisper.cpp finds itself only in OpenAI's layout (a compact model may lack them).
constexpr NamedToken kOpenAiOnlyTokens[] = {{"<|startoflm|>", &SpecialTokens::startoflm},
                                            {"<|startofprev|>", &SpecialTokens::startofprev},
                                            {"<|nospeech|>", &SpecialTokens::nospeech}};

// whisper.cpp derives every special token from n_vocab; a checkpoint whose generation config
// places them elsewhere would be decoded with the wrong prompt.
void check_layout(const SpecialTokens& hf, const SpecialTokens& layout, const std::string& source) {
    auto same = [&](const char* what, int got, int want) {
        if (got != want)
            throw Error(ErrorKind::Unsupported, source + ": " + what + " is token " + std::to_string(got) +
                                                    ", but whisper.cpp files imply " + std::to_string(want) +
                                                    " from the vocabulary size");
    };
    for (const NamedToken& t : kLayoutTokens) same(t.name, hf.*t.id, layout.*t.id);
    same("<|0.00|>", hf.timestamp_begin, layout.timestamp_begin);
    for (const auto& [code, id] : hf.languages) {
        auto it = layout.languages.find(code);
        same(("<|" + code + "|>").c_str(), id, it == layout.languages.end() ? -1 : it->second);
    }
}

// Where each of a compact vocabulary's ids goes in OpenAI's multilingual layout (51,865 ids):
// text tokens keep their ids, special, language and timestamp tokens take whisper.cpp's.
std::vector<int> openai_ids(const SpecialTokens& ours, int vocab_size, const std::string& source) {
    const SpecialTokens layout = special_tokens_from_layout(kOpenAiVocabMultilingual);
    if (vocab_size >= kOpenAiVocabEn)
        throw Error(ErrorKind::InvalidArgument,
                    source + ": a vocabulary of " + std::to_string(vocab_size) +
                        " tokens is OpenAI's layout already (--openai-ids is for compact ones)");
    if (ours.eot > layout.eot)
        throw Error(ErrorKind::Unsupported, source + ": " + std::to_string(ours.eot) +
                                                " text tokens do not fit below OpenAI's <|endoftext|> (" +
                                                std::to_string(layout.eot) + ")");
    std::vector<int> to(vocab_size, -1);
    for (int id = 0; id < ours.eot; ++id) to[id] = id;
    auto place = [&](const std::string& what, int id, int target) {
        if (id < 0) return;  // the model has no such token
        if (target < 0) throw Error(ErrorKind::Unsupported, source + ": " + what + " has no place in OpenAI's layout");
        to.at(id) = target;
    };
    for (const NamedToken& t : kLayoutTokens) place(t.name, ours.*t.id, layout.*t.id);
    for (const NamedToken& t : kOpenAiOnlyTokens) place(t.name, ours.*t.id, layout.*t.id);
    for (const auto& [code, id] : ours.languages) {
        auto it = layout.languages.find(code);
        place("<|" + code + "|>", id, it == layout.languages.end() ? -1 : it->second);
    }
    const int timestamps = vocab_size - ours.timestamp_begin;
    if (ours.timestamp_begin < 0 || timestamps != kOpenAiVocabMultilingual - layout.timestamp_begin)
        throw Error(ErrorKind::Unsupported, source + ": " + std::to_string(timestamps) +
                                                " timestamp tokens, OpenAI's layout has " +
                                                std::to_string(kOpenAiVocabMultilingual - layout.timestamp_begin));
    for (int k = 0; k < timestamps; ++k) to[ours.timestamp_begin + k] = layout.timestamp_begin + k;
    for (int id = 0; id < vocab_size; ++id)
        if (to[id] < 0)
            throw Error(ErrorKind::Unsupported,
                        source + ": token " + std::to_string(id) + " is neither text, a special token nor a timestamp");
    return to;
}

}  // namespace

WhisperCppConvertResult convert_to_whispercpp(const fs::path& hf_dir, const fs::path& out,
                                              const WhisperCppConvertOptions& options) {
    if (options.dtype != GGML_TYPE_F32 && options.dtype != GGML_TYPE_F16)
        throw Error(ErrorKind::InvalidArgument,
                    std::string("whisper.cpp conversion: dtype ") + dtype_name(options.dtype) + " (use f32 or f16)");
    if (!fs::is_directory(hf_dir))
        throw Error(ErrorKind::InvalidArgument,
                    hf_dir.string() + ": not a directory (conversion reads an HF Whisper snapshot)");
    ModelFiles files = open_model_files(hf_dir);
    if (files.tensors->format() != FileFormat::Safetensors)
        throw Error(ErrorKind::InvalidArgument, hf_dir.string() + ": weights are not safetensors");
    const std::string cfg_name = (hf_dir / "config.json").string();
    if (files.architecture() != "whisper")
        throw Error(ErrorKind::InvalidModel,
                    cfg_name + ": model_type is '" + files.architecture() + "', expected \"whisper\"");
    const WhisperConfig c = WhisperConfig::from_hf(files.config, cfg_name);
    WhisperCppConvertResult result;
    if (c.encoder_ffn != 4 * c.d_model || c.decoder_ffn != 4 * c.d_model)
        result.warnings.push_back(cfg_name + ": encoder_ffn_dim/decoder_ffn_dim are not 4 * d_model (" +
                                  std::to_string(4 * c.d_model) +
                                  "); whisper.cpp assumes 4x and will refuse the file "
                                  "(parlance reads the width from the tensors)");
    const std::string gen_name = (hf_dir / "generation_config.json").string();
    SpecialTokens tokens = special_tokens_from_hf(files.generation_config, c.vocab_size, gen_name);
    if (files.tokenizer_json.empty())
        throw Error(ErrorKind::InvalidModel, hf_dir.string() + ": missing tokenizer.json");
    const Tokenizer tok = Tokenizer::from_json_file(files.tokenizer_json);
    const std::string tok_name = files.tokenizer_json.string();
    std::vector<int> row_of;  // with openai_ids: each token's id in the file
    if (options.openai_ids) {
        name_special_tokens(
            tokens, [&](const std::string& text) { return tok.token_to_id(text); }, tok_name);
        row_of = openai_ids(tokens, c.vocab_size, gen_name);
        result.unused_text_ids = {tokens.eot, special_tokens_from_layout(kOpenAiVocabMultilingual).eot};
        result.warnings.push_back("ids " + std::to_string(result.unused_text_ids.first) + " to " +
                                  std::to_string(result.unused_text_ids.second - 1) +
                                  " are not the model's (zero rows): whisper.cpp must suppress them "
                                  "(a logits filter), or it may decode them");
    } else {
        check_layout(tokens, special_tokens_from_layout(c.vocab_size), gen_name);
    }

    WhisperCppContents w;
    w.hparams.n_vocab = options.openai_ids ? kOpenAiVocabMultilingual : c.vocab_size;
    w.hparams.n_audio_ctx = c.max_source_positions;
    w.hparams.n_audio_state = c.d_model;
    w.hparams.n_audio_head = c.encoder_heads;
    w.hparams.n_audio_layer = c.encoder_layers;
    w.hparams.n_text_ctx = c.max_target_positions;
    w.hparams.n_text_state = c.d_model;
    w.hparams.n_text_head = c.decoder_heads;
    w.hparams.n_text_layer = c.decoder_layers;
    w.hparams.n_mels = c.n_mels;
    w.hparams.ftype = options.dtype == GGML_TYPE_F16 ? 1 : 0;

    // whisper.cpp computes its own log-mel with these filters: the same Slaney bank we use.
    const std::vector<double> filters = whisper_mel_filters(c.n_mels);
    w.n_mel = c.n_mels;
    w.n_fft = kWhisperFreqBins;
    w.mel_filters.assign(filters.begin(), filters.end());

    // The text vocabulary (ids below <|endoftext|>) as raw bytes; whisper.cpp names the special
    // tokens itself from the layout. Its loader keys a map by these bytes and looks up " ".
    auto eot = tok.token_to_id("<|endoftext|>");
    if (!eot || *eot != tokens.eot)
        throw Error(ErrorKind::InvalidModel, tok_name + ": <|endoftext|> is not token " + std::to_string(tokens.eot));
    std::set<std::string> seen;
    for (int id = 0; id < tokens.eot; ++id) {
        std::string bytes = tok.token_bytes(id);
        if (bytes.empty() || tok.is_special(id) || !seen.insert(bytes).second)
            throw Error(ErrorKind::InvalidModel,
                        tok_name + ": text token " + std::to_string(id) + " is empty, special or a duplicate");
        w.vocab.push_back(std::move(bytes));
    }
    if (!seen.count(" "))
        throw Error(ErrorKind::InvalidModel, tok_name + ": no token for \" \" (whisper.cpp requires one)");
    // The text ids the model does not have get names no text can produce, so that every id below
    // <|endoftext|> has a token (parlance's loader requires it; whisper.cpp names missing ones itself).
    for (int id = result.unused_text_ids.first; id < result.unused_text_ids.second; ++id)
        w.vocab.push_back("<|unused_" + std::to_string(id) + "|>");

    // Tensors: validate against the table, then rename and retype.
    const std::vector<TensorName> table = whisper_tensor_names(c);
    const TensorStore& store = *files.tensors;
    std::set<std::string> used;
    const TensorInfo* tok_emb = nullptr;
    for (const TensorName& n : table) {
        const TensorInfo* info = store.find(n.hf);
        if (!info) {
            if (n.optional) continue;
            throw Error(ErrorKind::InvalidModel, store.files().front().string() + ": missing tensor " + n.hf);
        }
        used.insert(n.hf);
        if (info->shape != n.shape)
            throw Error(ErrorKind::InvalidModel, info->file + ": tensor " + n.hf + " has shape " +
                                                     shape_str(info->shape) + ", expected " + shape_str(n.shape) +
                                                     " from the config");
        std::vector<float> values = decode_to_f32(info->data, info->type, info->elements());
        if (n.role == TensorRole::TokEmb) tok_emb = info;
        if (n.role == TensorRole::ProjOut) {
            // Only a tied output projection survives: whisper.cpp multiplies by the embedding.
            std::vector<float> emb = decode_to_f32(tok_emb->data, tok_emb->type, tok_emb->elements());
            if (emb != values)
                throw Error(ErrorKind::Unsupported, info->file +
                                                        ": proj_out.weight differs from the token embedding, which "
                                                        "whisper.cpp files cannot express");
        }
        if (n.cpp.empty()) continue;
        std::vector<int64_t> shape = n.shape;
        if (n.role == TensorRole::TokEmb && options.openai_ids) {
            // Rows move to their OpenAI ids; ids the model lacks stay zero.
            const int64_t d = n.shape[1];
            std::vector<float> moved(static_cast<size_t>(kOpenAiVocabMultilingual) * d, 0.0f);
            for (int id = 0; id < c.vocab_size; ++id)
                std::copy_n(values.begin() + int64_t(id) * d, d, moved.begin() + int64_t(row_of[id]) * d);
            values = std::move(moved);
            shape[0] = kOpenAiVocabMultilingual;
        }
        if (n.role == TensorRole::Conv1B || n.role == TensorRole::Conv2B) shape = {n.shape[0], 1};
        const bool matrix = n.linear || n.role == TensorRole::TokEmb;
        const ggml_type type = matrix ? options.dtype : GGML_TYPE_F32;
        w.tensors.push_back(TensorData::from_f32(n.cpp, shape, values, type));
    }
    for (const TensorInfo& t : store.tensors())
        if (!used.count(t.name))
            throw Error(ErrorKind::InvalidModel,
                        t.file + ": unexpected tensor " + t.name + " (not part of the Whisper layout)");

    write_whispercpp(out, w);
    result.tensors = static_cast<int>(w.tensors.size());
    result.vocab = static_cast<int>(w.vocab.size());
    result.bytes = fs::file_size(out);
    return result;
}

}  // namespace parlance::whisper
