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

// What a request holds until the engine is done with it: its audio memory lease, and what the
// decoder's callbacks read (a streamed upload is decoded on the engine's thread).
struct Held {
    AudioBudget::Lease lease;
    bool stream_audio = false;
};

using Finish = std::function<void(std::exception_ptr, Transcript)>;

// Queues the request on the engine (segments handed to on_segment as decided when the form
// streams); `finish` is called on the engine's thread when it ends. Throws what submit throws
// (the queue full: a 429), in which case `finish` is never called.
void run_on_engine(const TranscriptionForm& form, bool translation, TranscriptionRequest req,
                   const TranscriptionContext& c, Finish finish) {
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
    req.on_finished = std::move(finish);
    try {
        c.engine.submit(std::move(req));
    } catch (const Error& e) {
        if (e.kind() == ErrorKind::Overloaded) throw ApiError(429, e.what(), "", "overloaded");
        throw;
    }
}

}  // namespace

void start_transcription(const TranscriptionForm& form, bool translation, std::shared_ptr<const std::string> upload,
                         const TranscriptionContext& c, TranscriptionDone done) {
    const double limit = c.max_audio_seconds;
    auto held = std::make_shared<Held>();
    double audio_seconds = 0.0;
    // A transcript's last touch before it is answered: the language the request named when the
    // model reported none.
    const std::string language = form.stream ? std::string() : form.language;
    auto answer = [done, language](std::exception_ptr error, Transcript t, double seconds) {
        if (!error && t.language.empty()) t.language = language;
        done(std::move(error), std::move(t), seconds);
    };
    try {
        DecodeOptions d;
        d.max_seconds = limit;
        // Called while the decoder opens, here; it captures nothing that ends with this call.
        d.on_start = [budget = &c.audio_budget, cancelled = c.cancelled, chunking = form.chunking.has_value(), held,
                      limit](double declared) {
            // A file that declares its length is decoded as the model reads it; so is any file
            // whose speech server_vad picks out (the VAD reads it front to back, then the speech is
            // read from it again): memory follows a window, not the file.
            held->stream_audio = declared > 0 || chunking;
            const double expected = declared > 0 ? std::min(limit, declared * 1.02 + 1.0) : limit;
            held->lease = budget->acquire(
                pcm_bytes(held->stream_audio ? std::min(expected, kStreamedAudioSeconds) : expected), cancelled.get());
        };
        // Called where the decoding runs: here for a whole file, on the engine's thread for a
        // streamed one (whose lease never grows: the engine must not wait for memory).
        d.on_progress = [held, cancelled = c.cancelled, limit](size_t samples) {
            if (cancelled->load()) throw Error(ErrorKind::Cancelled, "the client went away");
            const size_t need = samples * sizeof(float);
            if (held->stream_audio || need <= held->lease.bytes()) return;
            const size_t want =
                std::min(pcm_bytes(limit), std::max(need + (size_t(16) << 20), held->lease.bytes() * 2));
            if (!held->lease.resize(want, cancelled.get(), std::chrono::seconds(10)))
                throw Error(ErrorKind::Overloaded,
                            "the audio is longer than its file declares and the server's audio memory is full; "
                            "retry shortly");
        };
        std::vector<float> pcm;
        std::shared_ptr<PcmSource> streamed;
        try {
            auto decoder = std::make_unique<AudioStreamDecoder>(
                std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(form.file.data()), form.file.size()), d);
            if (held->stream_audio) {
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
        d.on_start = nullptr;  // the second pass over a file (server_vad's speech) keeps the lease

        if (streamed && form.chunking) {
            auto plan = std::make_shared<SpeechOnly>();
            try {
                *plan = find_speech(*streamed, *c.vad, *form.chunking);
            } catch (const Error& e) {
                if (e.kind() == ErrorKind::Cancelled || e.kind() == ErrorKind::Overloaded) throw;
                throw ApiError::from(e, "file");
            }
            audio_seconds = static_cast<double>(streamed->decoded()) / 16000.0;
            streamed.reset();            // the speech is read from a second pass over the file
            if (plan->pieces.empty()) {  // no speech: nothing to decode
                Transcript t;
                t.task = translation ? "translate" : "transcribe";
                t.duration = audio_seconds;
                if (form.stream) c.start_stream();
                return answer(nullptr, std::move(t), audio_seconds);
            }
            auto decoder = std::make_unique<AudioStreamDecoder>(
                std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(form.file.data()), form.file.size()), d);
            TranscriptionRequest req;
            req.audio = speech_source(std::make_shared<PcmSource>(std::move(decoder), upload), *plan);
            run_on_engine(form, translation, std::move(req), c,
                          [held, plan, answer, audio_seconds](std::exception_ptr error, Transcript t) {
                              if (!error) {
                                  map_to_original(t, *plan);
                                  t.duration = audio_seconds;
                              }
                              answer(std::move(error), std::move(t), audio_seconds);
                          });
        } else if (streamed) {
            TranscriptionRequest req;
            req.audio = streamed;
            audio_seconds = static_cast<double>(streamed->decoded()) / 16000.0;  // if the queue refuses it
            run_on_engine(
                form, translation, std::move(req), c, [held, streamed, answer](std::exception_ptr error, Transcript t) {
                    if (!error) return answer(nullptr, std::move(t), t.duration);
                    try {
                        std::rethrow_exception(error);
                    } catch (const Error& e) {
                        // What reading the rest of the file met (a limit the declaration
                        // hid, bad data) is the client's.
                        if (e.kind() == ErrorKind::InvalidAudio || e.kind() == ErrorKind::TooLarge)
                            error = std::make_exception_ptr(ApiError::from(e, "file"));
                    } catch (...) {
                    }
                    answer(std::move(error), Transcript{}, static_cast<double>(streamed->decoded()) / 16000.0);
                });
        } else {  // a whole file: one that declares no length (chunking always streams)
            held->lease.resize(pcm.size() * sizeof(float), nullptr, std::chrono::milliseconds(0));
            if (pcm.size() < 160)
                throw ApiError(400, "the audio is empty or shorter than 10 ms", "file", "invalid_audio");
            audio_seconds = static_cast<double>(pcm.size()) / 16000.0;
            TranscriptionRequest req;
            req.pcm = std::move(pcm);
            run_on_engine(form, translation, std::move(req), c,
                          [held, answer, audio_seconds](std::exception_ptr error, Transcript t) {
                              answer(std::move(error), std::move(t), audio_seconds);
                          });
        }
    } catch (...) {
        answer(std::current_exception(), Transcript{}, audio_seconds);
    }
}

}  // namespace parlance::server
