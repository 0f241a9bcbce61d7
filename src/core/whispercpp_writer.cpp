// whisper.cpp .bin writer (see whispercpp_writer.h; layout in whispercpp_file.cpp).
#include "core/whispercpp_writer.h"

#include <fstream>

#include "core/error.h"

namespace parlance {

namespace {

void put_i32(std::ofstream& out, int32_t v) { out.write(reinterpret_cast<const char*>(&v), 4); }

}  // namespace

void write_whispercpp(const std::filesystem::path& file, const WhisperCppContents& c) {
    if (c.n_mel < 0 || c.n_fft < 0 ||
        c.mel_filters.size() != static_cast<size_t>(c.n_mel) * static_cast<size_t>(c.n_fft)) {
        throw Error(ErrorKind::InvalidArgument, "mel filters: " + std::to_string(c.mel_filters.size()) +
                                                    " values for " + std::to_string(c.n_mel) + "x" +
                                                    std::to_string(c.n_fft));
    }
    for (const auto& t : c.tensors) {
        t.check();
        if (t.shape.empty() || t.shape.size() > 4) {
            throw Error(ErrorKind::InvalidArgument, "tensor " + t.name + ": needs 1 to 4 dimensions");
        }
    }
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(ErrorKind::Io, file.string() + ": cannot open for writing");
    put_i32(out, 0x67676d6c);
    const WhisperCppHparams& h = c.hparams;
    for (int32_t v : {h.n_vocab, h.n_audio_ctx, h.n_audio_state, h.n_audio_head, h.n_audio_layer, h.n_text_ctx,
                      h.n_text_state, h.n_text_head, h.n_text_layer, h.n_mels, h.ftype}) {
        put_i32(out, v);
    }
    put_i32(out, c.n_mel);
    put_i32(out, c.n_fft);
    out.write(reinterpret_cast<const char*>(c.mel_filters.data()),
              static_cast<std::streamsize>(c.mel_filters.size() * sizeof(float)));
    put_i32(out, static_cast<int32_t>(c.vocab.size()));
    for (const auto& token : c.vocab) {
        put_i32(out, static_cast<int32_t>(token.size()));
        out.write(token.data(), static_cast<std::streamsize>(token.size()));
    }
    for (const auto& t : c.tensors) {
        put_i32(out, static_cast<int32_t>(t.shape.size()));
        put_i32(out, static_cast<int32_t>(t.name.size()));
        put_i32(out, static_cast<int32_t>(t.type));
        for (size_t i = t.shape.size(); i-- > 0;) put_i32(out, static_cast<int32_t>(t.shape[i]));  // ne[0] first
        out.write(t.name.data(), static_cast<std::streamsize>(t.name.size()));
        out.write(reinterpret_cast<const char*>(t.bytes.data()), static_cast<std::streamsize>(t.bytes.size()));
    }
    out.flush();
    if (!out) throw Error(ErrorKind::Io, file.string() + ": write failed");
}

}  // namespace parlance
