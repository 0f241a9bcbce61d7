// The file transcription and translation endpoints' work (see transcriptions.h).
#include "server/transcriptions.h"

#include <algorithm>
#include <chrono>

#include "audio/decode.h"
#include "core/error.h"
#include "server/api_error.h"
#include "server/speech_only.h"

namespace parlance::server {
namespace {

// Decodes on the engine (segments handed to on_segment as decided when the form streams).
Transcript run_on_engine(const TranscriptionForm& form, bool translation, TranscriptionRequest req,
                         const TranscriptionContext& c) {
    req.options.language = form.language;
    req.options.task = translation ? "translate" : "transcribe";
    req.options.initial_prompt = form.prompt;
    if (form.temperature >= 0.0f) req.options.temperatures = {form.temperature};
    req.options.timestamps = true;
    req.options.word_timestamps = form.word_timestamps;
    req.priority = form.priority;
    req.cancelled = c.cancelled;
    if (form.stream) {
        c.start_stream();
        req.on_segment = c.on_segment;
    }
    std::future<Transcript> future;
    try {
        future = c.engine.submit(std::move(req));
    } catch (const Error& e) {
        if (e.kind() == ErrorKind::Overloaded) throw ApiError(429, e.what(), "", "overloaded");
        throw;
    }
    return future.get();
}

}  // namespace

Transcript transcribe_upload(const TranscriptionForm& form, bool translation, std::shared_ptr<const std::string> upload,
                             const TranscriptionContext& c, double& audio_seconds) {
    const double limit = c.max_audio_seconds;
    AudioBudget::Lease lease;
    DecodeOptions d;
    d.max_seconds = limit;
    bool stream_audio = false;
    d.on_start = [&](double declared) {
        // A file that declares its length is decoded as the model reads it; so is any file whose
        // speech server_vad picks out (the VAD reads it front to back, then the speech is read
        // from it again): memory follows a window, not the file.
        stream_audio = declared > 0 || form.chunking;
        const double expected = declared > 0 ? std::min(limit, declared * 1.02 + 1.0) : limit;
        lease = c.audio_budget.acquire(pcm_bytes(stream_audio ? std::min(expected, kStreamedAudioSeconds) : expected),
                                       c.cancelled.get());
    };
    // Called where the decoding runs: here for a whole file, on the engine's thread for a
    // streamed one (whose lease never grows: the engine must not wait for memory).
    d.on_progress = [&lease, &stream_audio, cancelled = c.cancelled, limit](size_t samples) {
        if (cancelled->load()) throw Error(ErrorKind::Cancelled, "the client went away");
        const size_t need = samples * sizeof(float);
        if (stream_audio || need <= lease.bytes()) return;
        const size_t want = std::min(pcm_bytes(limit), std::max(need + (size_t(16) << 20), lease.bytes() * 2));
        if (!lease.resize(want, cancelled.get(), std::chrono::seconds(10)))
            throw Error(ErrorKind::Overloaded,
                        "the audio is longer than its file declares and the server's audio memory is full; "
                        "retry shortly");
    };
    std::vector<float> pcm;
    std::shared_ptr<PcmSource> streamed;
    try {
        auto decoder = std::make_unique<AudioStreamDecoder>(
            std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(form.file.data()), form.file.size()), d);
        if (stream_audio) {
            // The source shares the body: the engine's reads never depend on the connection.
            streamed = std::make_shared<PcmSource>(std::move(decoder), upload);
            if (streamed->fill(160) < 160)
                throw ApiError(400, "the audio is empty or shorter than 10 ms", "file", "invalid_audio");
        } else {
            pcm = decode_rest(*decoder);
        }
    } catch (const Error& e) {
        if (e.kind() == ErrorKind::Cancelled || e.kind() == ErrorKind::Overloaded) throw;
        throw ApiError::from(e, "file");
    }

    Transcript t;
    if (streamed && form.chunking) {
        SpeechOnly plan;
        try {
            plan = find_speech(*streamed, *c.vad, *form.chunking);
        } catch (const Error& e) {
            if (e.kind() == ErrorKind::Cancelled || e.kind() == ErrorKind::Overloaded) throw;
            throw ApiError::from(e, "file");
        }
        audio_seconds = static_cast<double>(streamed->decoded()) / 16000.0;
        streamed.reset();           // the speech is read from a second pass over the file
        if (plan.pieces.empty()) {  // no speech: nothing to decode
            t.task = translation ? "translate" : "transcribe";
            if (form.stream) c.start_stream();
        } else {
            DecodeOptions again = d;
            again.on_start = nullptr;  // the lease is held
            auto decoder = std::make_unique<AudioStreamDecoder>(
                std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(form.file.data()), form.file.size()), again);
            TranscriptionRequest req;
            req.audio = speech_source(std::make_shared<PcmSource>(std::move(decoder), upload), plan);
            t = run_on_engine(form, translation, std::move(req), c);
            map_to_original(t, plan);
        }
        t.duration = audio_seconds;
    } else if (streamed) {
        TranscriptionRequest req;
        req.audio = streamed;
        try {
            t = run_on_engine(form, translation, std::move(req), c);
        } catch (const Error& e) {
            audio_seconds = static_cast<double>(streamed->decoded()) / 16000.0;
            // What reading the rest of the file met (a limit the declaration hid, bad data).
            if (e.kind() == ErrorKind::InvalidAudio || e.kind() == ErrorKind::TooLarge) throw ApiError::from(e, "file");
            throw;
        }
        audio_seconds = t.duration;
    } else {  // a whole file: one that declares no length (chunking always streams)
        lease.resize(pcm.size() * sizeof(float), nullptr, std::chrono::milliseconds(0));
        if (pcm.size() < 160) throw ApiError(400, "the audio is empty or shorter than 10 ms", "file", "invalid_audio");
        audio_seconds = static_cast<double>(pcm.size()) / 16000.0;
        TranscriptionRequest req;
        req.pcm = std::move(pcm);
        t = run_on_engine(form, translation, std::move(req), c);
    }
    if (!form.stream && t.language.empty()) t.language = form.language;
    return t;
}

}  // namespace parlance::server
