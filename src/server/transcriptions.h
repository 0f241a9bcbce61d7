// POST /v1/audio/transcriptions and /v1/audio/translations once the form is parsed and the model
// chosen: the upload's audio opened as the model will read it, server_vad's speech picked out when
// asked, and the engine's transcript. Started on a worker thread, which is free again once the
// request is queued on the engine: the end comes through a callback (no thread waits per request),
// and the connection answers with it (json, text, verbose_json, srt, vtt, or the stream's last event).
//
// Memory: an upload whose container declares its length is decoded on the engine's thread as the
// model reads it, under a lease of kStreamedAudioSeconds of samples; so is one whose speech
// server_vad picks out, after a first pass here in which the VAD reads it front to back (each
// pass holding a few minutes of samples at most). One that declares nothing is decoded whole here
// first, under a lease that grows with it up to --max-audio-seconds, so the limit refuses a
// hostile file before the model spends anything.
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <string>

#include "decoding/transcript.h"
#include "models/speech_model.h"
#include "models/voice_activity.h"
#include "server/audio_budget.h"
#include "server/transcription_form.h"

namespace parlance::server {

// What a request whose upload is decoded as the model reads it holds at most: a 30 s window or
// piece, the decoder's second ahead, and slack (the held bound TranscribeFromFile tests is 32 s).
inline constexpr double kStreamedAudioSeconds = 40.0;

struct TranscriptionContext {
    SpeechEngine& engine;
    AudioBudget& audio_budget;
    double max_audio_seconds = 0.0;
    VoiceActivityModel* vad = nullptr;  // needed when the form asks for chunking_strategy
    std::shared_ptr<std::atomic<bool>> cancelled;
    // A streamed request (form.stream): called once before its first event, then with each
    // segment as the engine decides it (on the engine's thread; must not block).
    std::function<void()> start_stream;
    std::function<void(const Segment&)> on_segment;
};

// How a transcription ends, once: the transcript (error null), or its error — ApiError for what
// the client sent (a 4xx naming `file`, 429 when the engine's queue is full), Error for the rest
// (Cancelled, Overloaded, Timeout, ...). `audio_seconds`: the audio's length as far as it is known
// (metrics), also on an error. Called on the starting thread when the request fails before the
// engine has it, else on the engine's thread: it must not block.
using TranscriptionDone = std::function<void(std::exception_ptr error, Transcript transcript, double audio_seconds)>;

// `upload` owns the request body; form.file views the file part inside it. Decodes (or opens) the
// audio on the calling thread, then queues the request and returns; never throws.
void start_transcription(const TranscriptionForm& form, bool translation, std::shared_ptr<const std::string> upload,
                         const TranscriptionContext& context, TranscriptionDone done);

}  // namespace parlance::server
