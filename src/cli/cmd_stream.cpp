// `parlance stream FILE [--realtime | --lockstep]`: a live transcription session over a file, in
// process, the same RealtimeSession /v1/realtime serves: the file goes in as 100 ms appends (paced
// at real time with --realtime; with --lockstep each only after the session's decodes are done;
// else as fast as the session takes it), server VAD finds the speech, and
// each delta is printed as it commits, with the audio time it arrived at; each item's completed
// transcript with its end-of-speech -> completed latency; a summary at the end.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <mutex>
#include <thread>

#include <boost/asio.hpp>
#include <nlohmann/json.hpp>

#include "cli/audio_input.h"
#include "cli/commands.h"
#include "cli/default_model.h"
#include "core/backend.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/lm_speech_model.h"
#include "models/registry.h"
#include "models/voice_activity.h"
#include "server/base64.h"
#include "server/realtime_session.h"

namespace parlance::cli {
namespace {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct StreamArgs {
    std::string file, model, vad_model, language, format = "text";
    bool realtime = false;
    bool lockstep = false;
    bool no_self_speculation = false;
    int threads = 0;
    double redecode_seconds = server::RealtimeOptions{}.redecode_seconds;
    double first_redecode_seconds = server::RealtimeOptions{}.first_redecode_seconds;
    int commit_agreement = CommitPolicy::Options{}.agreement;
    int commit_held_back = CommitPolicy::Options{}.held_back;
    double commit_guard = server::RealtimeOptions{}.commit_guard_seconds;
    double commit_min_probability = server::RealtimeOptions{}.commit_min_probability;
    int silence_ms = 500;
    double audio_window = 0;
    std::string kv_cache_type = "f32";
};

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

void run(StreamArgs& a, GlobalOptions& globals) {
    Logger log(parse_log_level(globals.log_level));
    BackendOptions bo;
    bo.threads = a.threads;
    Backend backend(bo);
    SpeechModelOptions so;
    so.audio_window_seconds = a.audio_window;
    so.kv_cache_type = kv_cache_type_of(a.kv_cache_type);
    auto model = open_speech_model(resolve_model(a.model), backend, so);
    EngineOptions eo;
    eo.cache_slots = std::max(16, 4 * model->default_beam_size());
    std::unique_ptr<SpeechEngine> engine = model->start_engine(eo, log);
    BackendOptions vo;
    vo.threads = 1;
    Backend vad_backend(vo);
    const std::unique_ptr<VoiceActivityModel> vad_model =
        load_voice_activity_model(resolve_vad_model(a.vad_model), vad_backend);
    VoiceActivityModel& vad = *vad_model;
    // Decoded as it is sent: a long file holds a few chunks, not its whole PCM.
    AudioFile file(a.file, 16000, 4 * 3600);
    PcmSource& audio = file.audio();

    server::RealtimeRegistry registry;  // this run's one session and its statistics (outlives them)
    asio::io_context io;
    auto strand = asio::make_strand(io);
    asio::thread_pool workers(2);
    auto guard = asio::make_work_guard(io);
    std::thread io_thread([&] { io.run(); });

    const auto t0 = Clock::now();
    double sent_seconds = 0.0;  // audio given to the session so far
    std::mutex m;
    std::condition_variable cv;
    int open_items = 0, finished_items = 0;
    std::map<std::string, double> speech_end_at;  // item -> wall time its speech_stopped arrived
    std::map<std::string, bool> got_delta;
    std::map<std::string, double> started_audio;  // item -> audio_start_ms / 1000
    std::vector<double> eos_latency, first_delta_lag;
    auto now = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
    server::RealtimeSession::Hooks hooks;
    hooks.send = [&](std::string text) {
        const json e = json::parse(text);
        const std::string type = e["type"];
        std::lock_guard<std::mutex> lock(m);
        const double t = now();
        if (type == "input_audio_buffer.speech_started") {
            ++open_items;
            started_audio[e["item_id"]] = e["audio_start_ms"].get<double>() / 1000.0;
        } else if (type == "input_audio_buffer.speech_stopped" || type == "input_audio_buffer.committed") {
            speech_end_at.emplace(e["item_id"], t);
        } else if (type == "conversation.item.input_audio_transcription.delta") {
            const std::string item = e["item_id"];
            if (!got_delta[item]) {
                got_delta[item] = true;
                // How far the audio had got past the item's start when its first words came out.
                if (a.realtime || a.lockstep) first_delta_lag.push_back(sent_seconds - started_audio[item]);
            }
            std::printf("%8.2f s  %s +%s\n", sent_seconds, item.substr(5, 6).c_str(), e["delta"].dump().c_str());
        } else if (type == "conversation.item.input_audio_transcription.completed") {
            const std::string item = e["item_id"];
            const double lat = speech_end_at.count(item) ? t - speech_end_at[item] : 0.0;
            eos_latency.push_back(lat);
            std::printf("%8.2f s  %s completed in %.3f s after the end of speech: %s\n", sent_seconds,
                        item.substr(5, 6).c_str(), lat, e["transcript"].dump().c_str());
            ++finished_items;
        } else if (type == "error" || type == "conversation.item.input_audio_transcription.failed") {
            std::fprintf(stderr, "%s\n", text.c_str());
        }
        std::fflush(stdout);
        cv.notify_all();
    };
    hooks.post = [&](std::function<void()> fn) { asio::post(strand, std::move(fn)); };
    hooks.work = [&](std::function<void()> fn) { asio::post(workers, std::move(fn)); };
    hooks.close = [](std::string) {};
    server::RealtimeOptions ro;
    ro.redecode_seconds = a.redecode_seconds;
    ro.first_redecode_seconds = a.first_redecode_seconds;
    ro.commit.agreement = a.commit_agreement;
    ro.commit.held_back = a.commit_held_back;
    ro.commit_guard_seconds = a.commit_guard;
    ro.commit_min_probability = a.commit_min_probability;
    ro.self_speculation = !a.no_self_speculation;
    auto session = std::make_shared<server::RealtimeSession>(*engine, &vad, ro, false, hooks, registry);
    auto call = [&](std::function<void()> fn) {  // on the strand, and wait for it
        std::promise<void> done;
        asio::post(strand, [&] {
            fn();
            done.set_value();
        });
        done.get_future().get();
    };
    json update{{"type", "session.update"},
                {"session",
                 {{"type", "transcription"},
                  {"audio",
                   {{"input",
                     {{"format", {{"type", "audio/pcm"}, {"rate", 16000}}},
                      {"transcription", {{"language", a.language}}},
                      {"turn_detection", {{"type", "server_vad"}, {"silence_duration_ms", a.silence_ms}}}}}}}}}};
    call([&] {
        session->start();
        session->on_message(update.dump());
    });
    // 100 ms appends; one second of silence after the file closes its last item. Samples
    // [i, i + kChunk) of the file followed by that silence; false past its end. A decoding error
    // stops the stream and is thrown once the session's threads are down.
    constexpr size_t kChunk = 1600, kTail = 16000;
    std::vector<float> chunk;
    std::exception_ptr failed;
    const auto next_chunk = [&](size_t i) {
        try {
            const size_t have = audio.fill(i + kChunk);
            if (audio.ended() && i >= audio.decoded() + kTail) return false;
            const size_t n = have > i ? have - i : 0;
            chunk.assign(audio.ended() ? std::min(kChunk, audio.decoded() + kTail - i) : kChunk, 0.0f);
            if (n > 0) std::copy_n(audio.view(i, i + n).begin(), n, chunk.begin());
            audio.release(i + n);
            return true;
        } catch (...) {
            failed = std::current_exception();
            return false;
        }
    };
    for (size_t i = 0; next_chunk(i); i += kChunk) {
        const size_t n = chunk.size();
        std::vector<uint8_t> bytes(2 * n);
        for (size_t j = 0; j < n; ++j) {
            const auto v =
                static_cast<int16_t>(std::lround(std::clamp(chunk[j], -1.0f, 32767.0f / 32768.0f) * 32768.0f));
            bytes[2 * j] = static_cast<uint8_t>(v & 0xFF);
            bytes[2 * j + 1] = static_cast<uint8_t>((v >> 8) & 0xFF);
        }
        const std::string msg =
            json{{"type", "input_audio_buffer.append"}, {"audio", server::base64_encode(bytes)}}.dump();
        // As a connection does: no more audio while the session's decodes lag behind.
        for (;;) {
            bool congested = false;
            call([&] { congested = session->congested(); });
            if (!congested) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        call([&] { session->on_message(msg); });
        // Lockstep: every decode the session starts finishes before more audio arrives, as on a
        // machine that always keeps up — each re-decode at its cadence point, whatever this
        // machine's speed, so the transcript is reproducible.
        for (bool busy = a.lockstep; busy;) {
            call([&] { busy = !session->idle(); });
            if (busy) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        {
            std::lock_guard<std::mutex> lock(m);
            sent_seconds = static_cast<double>(i + n) / 16000.0;
        }
        if (a.realtime) std::this_thread::sleep_until(t0 + std::chrono::duration<double>(sent_seconds));
    }
    {
        std::unique_lock<std::mutex> lock(m);
        cv.wait_for(lock, std::chrono::seconds(120), [&] { return finished_items >= open_items; });
    }
    const double wall = now();
    call([&] { session->stop(); });
    guard.reset();
    io.stop();
    io_thread.join();
    workers.join();
    engine->shutdown(false);
    if (failed) std::rethrow_exception(failed);
    std::printf("\n%d items, %.1f s of audio in %.1f s (%s); end of speech -> completed p50 %.3f s, p95 %.3f s",
                finished_items, static_cast<double>(audio.decoded()) / 16000.0, wall,
                a.realtime ? "paced at real time" : (a.lockstep ? "in lockstep" : "as fast as possible"),
                percentile(eos_latency, 0.5), percentile(eos_latency, 0.95));
    if ((a.realtime || a.lockstep) && !first_delta_lag.empty())
        std::printf("; first delta %.2f s (p50) after the item's start", percentile(first_delta_lag, 0.5));
    std::printf("\n");
    const server::RealtimeRegistry::DecodeCounts c = registry.decode_counts();
    if (c.decoder_passes > 0)
        std::printf("%llu decodes, %.2f decoder passes each; self-speculation %s: %llu drafted tokens, %llu accepted\n",
                    static_cast<unsigned long long>(c.decodes),
                    c.decodes ? static_cast<double>(c.decoder_passes) / static_cast<double>(c.decodes) : 0.0,
                    !a.no_self_speculation ? "on" : "off", static_cast<unsigned long long>(c.draft_tokens),
                    static_cast<unsigned long long>(c.draft_accepted));
}

}  // namespace

void register_stream(CLI::App& app, GlobalOptions& globals) {
    auto a = std::make_shared<StreamArgs>();
    auto* cmd = app.add_subcommand("stream",
                                   "Run a live transcription session over a file (as /v1/realtime "
                                   "would) and print each delta as it commits");
    cmd->add_option("file", a->file, "Audio file (any format FFmpeg reads)")->required();
    cmd->add_option("-m,--model", a->model, "Speech model (default: $PARLANCE_MODEL, else the bundled one)");
    cmd->add_option("--audio-window", a->audio_window, kAudioWindowHelp)->type_name("S");
    cmd->add_option("--kv-cache-type", a->kv_cache_type, kKvCacheTypeHelp)
        ->default_val("f32")
        ->check(CLI::IsMember({"f32", "f16"}));
    cmd->add_option("--vad-model", a->vad_model, "silero_vad_v5.onnx (default: $PARLANCE_VAD_MODEL, else setup.sh's)");
    cmd->add_flag("--realtime", a->realtime, "Pace the audio at real time (default: as fast as the session takes it)");
    cmd->add_flag("--lockstep", a->lockstep,
                  "Wait for each decode before the next 100 ms of audio: every re-decode happens at its "
                  "cadence point, as on a machine that always keeps up (reproducible; for evaluations)")
        ->excludes("--realtime");
    cmd->add_option("--language", a->language, "Language code (default: detect)");
    cmd->add_flag("--no-self-speculation", a->no_self_speculation,
                  "Re-decode without the previous hypothesis as a draft (the text is the same; for "
                  "measuring what self-speculation saves)");
    cmd->add_option("--commit-agreement", a->commit_agreement,
                    "Consecutive interim hypotheses that must agree on a word before it is committed")
        ->capture_default_str()
        ->check(CLI::Range(1, 10));
    cmd->add_option("--commit-held-back", a->commit_held_back,
                    "Words at the end of each hypothesis never committed before the item ends")
        ->capture_default_str()
        ->check(CLI::Range(0, 10));
    cmd->add_option("--commit-guard", a->commit_guard,
                    "Seconds before the end of an interim decode's audio within which its words are not "
                    "committed (word timestamps; Whisper models; 0 = off)")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 5.0));
    cmd->add_option("--commit-min-probability", a->commit_min_probability,
                    "Words an interim decode gives a lower probability than this (and the words after them) "
                    "are not committed before the item ends (Whisper and Qwen3-ASR models; 0 = off)")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 1.0));
    cmd->add_option("--redecode-seconds", a->redecode_seconds, "New speech that triggers a re-decode")
        ->capture_default_str();
    cmd->add_option("--first-redecode-seconds", a->first_redecode_seconds,
                    "The re-decode cadence while an item has nothing committed yet (0 = --redecode-seconds)")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 30.0));
    cmd->add_option("--silence-ms", a->silence_ms, "Silence that ends an item (server_vad silence_duration_ms)")
        ->default_val(500);
    cmd->add_option("-t,--threads", a->threads, "CPU threads for the model (0 = all, up to 8)");
    cmd->callback([a, &globals] { run(*a, globals); });
}

}  // namespace parlance::cli
