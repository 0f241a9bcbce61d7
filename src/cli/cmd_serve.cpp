// `parlance serve --model PATH`: loads the model once, serves the OpenAI-compatible API until
// SIGINT/SIGTERM, then drains in-flight requests and exits. One concern, past 500 lines: the
// command's flags (their help is most of it) and how they become the server's models and engines.
#include <algorithm>
#include <csignal>
#include <cstdlib>

#include "cli/commands.h"
#include "cli/default_model.h"
#include "cli/format.h"
#include "core/backend.h"
#include "core/error.h"
#include "core/log.h"
#include "core/model_files.h"
#include "engine/generation_service.h"
#include "engine/lm_speech_model.h"
#include "models/registry.h"
#include "models/voice_activity.h"
#include "server/http_server.h"
#include "text/chat_template.h"
#include "text/schema_check.h"

namespace parlance::cli {
namespace {

// The decoder step's width when --max-batch-tokens / --max-batch-sequences are left to the
// device: on two CPU cores a step of 512 tokens is already ~1 s; a GPU's step is bound by reading
// the weights up to hundreds of tokens, so a wide one takes a burst's prompts in a few steps.
constexpr int kCpuBatchTokens = 512, kGpuBatchTokens = 4096;
constexpr int kCpuBatchSequences = 64, kGpuBatchSequences = 256;

// A decoder step's width (--max-batch-tokens, --max-batch-sequences; 0: the device's default), as
// the speech engine and the chat model both take it.
struct StepWidth {
    int tokens, sequences;
};
StepWidth step_width(const EngineOptions& e, bool gpu) {
    return {e.max_batch_tokens > 0 ? e.max_batch_tokens
            : gpu                  ? kGpuBatchTokens
                                   : kCpuBatchTokens,
            e.max_batch_sequences > 0 ? e.max_batch_sequences
            : gpu                     ? kGpuBatchSequences
                                      : kCpuBatchSequences};
}

struct ServeArgs {
    std::vector<std::string> models;  // PATH or ID=PATH, each --model
    std::string mmproj;
    double audio_window = 0;
    std::string kv_cache_type = "auto";
    server::ServerOptions server;
    EngineOptions engine;
    int threads = 0;
    std::string quantize;
    double max_upload_mb = 25;
    int max_new_tokens = 224;
    int cache_slots = 0;     // 0: from the model's default beam size (run)
    double kv_cache_mb = 0;  // 0: what the slots can hold
    double audio_memory_mb = 2048;
    std::string vad_model;
    std::string chat_model, chat_model_id, chat_quantize;
    double chat_kv_cache_mb = 256;
    std::string chat_kv_cache_type = "f32";
    int chat_max_queue = 32;
    int chat_threads = 0;
    int chat_speculative = 0;
    std::string chat_draft_model;
    double chat_draft_kv_cache_mb = 64;
    SchemaLimits schema_limits;
};

// One --model value: "ID=PATH", or a PATH whose directory or file name (without the extension)
// is its id. A value that is an existing path is a path even when it holds '='.
std::pair<std::string, std::string> model_spec(const std::string& value) {
    namespace fs = std::filesystem;
    const size_t eq = value.find('=');
    std::error_code ec;
    if (eq != std::string::npos && eq > 0 && !fs::exists(value, ec)) {
        if (eq + 1 == value.size())
            throw Error(ErrorKind::InvalidArgument, "--model " + value + ": no path after '=' (ID=PATH)");
        return {value.substr(0, eq), value.substr(eq + 1)};
    }
    fs::path p(value);
    if (p.filename().empty()) p = p.parent_path();  // "dir/"
    return {fs::is_directory(p, ec) ? p.filename().string() : p.stem().string(), value};
}

// One speech model of the server: its own Backend (each engine thread computes on its own),
// the model and its engine.
struct SpeechSide {
    std::string id, path;
    std::unique_ptr<Backend> backend;
    std::unique_ptr<SpeechModel> model;
    std::unique_ptr<SpeechEngine> engine;
    int beams = 1;
    int cache_slots = 0;
    ggml_type kv_type = GGML_TYPE_F32;
};

// The chat side of the server: a language model on its own Backend (its engine thread computes
// while the speech engine's does), its chat template and its generation service.
struct ChatSide {
    std::unique_ptr<Backend> backend;
    std::unique_ptr<LanguageModel> model;
    std::unique_ptr<LanguageModel> draft;  // speculative decoding's draft model (optional)
    std::unique_ptr<ChatTemplate> chat_template;
    std::unique_ptr<GenerationService> service;
    server::GenerationLatency latency;
    server::ChatModel info;
};

std::unique_ptr<ChatSide> load_chat(const ServeArgs& a, Logger& log) {
    auto c = std::make_unique<ChatSide>();
    BackendOptions bo;
    bo.device = a.server.device;
    bo.threads = a.chat_threads > 0 ? a.chat_threads : a.threads;
    c->backend = std::make_unique<Backend>(bo);
    c->model = load_language_model(a.chat_model, *c->backend, {a.chat_quantize});
    c->chat_template = load_chat_template(open_model_files(a.chat_model));
    if (!c->chat_template)
        throw Error(ErrorKind::InvalidModel,
                    a.chat_model +
                        ": the model has no chat template (chat_template.jinja, "
                        "tokenizer_config.json chat_template or GGUF tokenizer.chat_template)");
    if (!(a.chat_kv_cache_mb > 0)) throw Error(ErrorKind::InvalidArgument, "--chat-kv-cache-mb must be > 0");
    GenerationServiceOptions so;
    so.engine.kv_cache_bytes = static_cast<size_t>(a.chat_kv_cache_mb * 1024 * 1024);
    so.engine.kv_type = kv_cache_type_of(a.chat_kv_cache_type);
    // The step's width, as the speech engine's (--max-batch-tokens, --max-batch-sequences): a GPU's
    // step takes 256 sequences (llama.cpp's batched bench still gains from 128 to 256 on an H100).
    const StepWidth width = step_width(a.engine, a.server.device != "cpu");
    so.engine.token_budget = width.tokens;
    so.engine.max_running = width.sequences;
    so.max_queue = a.chat_max_queue;
    if (!a.chat_draft_model.empty()) {
        if (a.chat_speculative <= 0)
            throw Error(ErrorKind::InvalidArgument, "--chat-draft-model needs --chat-speculative N (N > 0)");
        if (!(a.chat_draft_kv_cache_mb > 0))
            throw Error(ErrorKind::InvalidArgument, "--chat-draft-kv-cache-mb must be > 0");
        c->draft = load_language_model(a.chat_draft_model, *c->backend, {a.chat_quantize});
        check_draft_compatible(*c->model, *c->draft);  // refused at start, naming the difference
        so.engine.draft_model = c->draft.get();
        so.engine.speculative_draft = a.chat_speculative;
        so.engine.draft_kv_cache_bytes = static_cast<size_t>(a.chat_draft_kv_cache_mb * 1024 * 1024);
    } else {
        so.engine.speculative_ngram = a.chat_speculative;
    }
    c->service = std::make_unique<GenerationService>(*c->model, *c->backend, so, log);
    c->info.id = a.chat_model_id.empty() ? c->model->architecture() : a.chat_model_id;
    c->info.service = c->service.get();
    c->info.chat_template = c->chat_template.get();
    c->info.tokenizer = &c->model->tokenizer();
    c->info.stop_ids = c->model->stop_ids();
    c->info.max_context = c->model->max_context();
    c->info.latency = &c->latency;
    c->info.schema_limits = a.schema_limits;
    c->info.grammar_vocabulary = std::make_shared<GrammarVocabulary>(
        c->model->tokenizer(), static_cast<size_t>(c->model->vocab_size()), c->model->stop_ids());
    log.info("chat model '", c->info.id, "': ", c->model->architecture(), ", ", c->model->weight_summary(), ", ",
             so.engine.kv_cache_bytes >> 20, " MiB KV cache of ", a.chat_kv_cache_type, " cells, context ",
             c->info.max_context);
    if (c->draft)
        log.info("draft model for speculative decoding: ", a.chat_draft_model, " (", c->draft->weight_summary(), "), ",
                 a.chat_speculative, " tokens per step");
    return c;
}

// One --model value's (id, path), the path resolved as the commands resolve it; "" is the default
// model (PARLANCE_MODEL, else the bundled one).
std::pair<std::string, std::string> resolved_spec(const std::string& value) {
    auto spec = model_spec(value.empty() ? resolve_model("") : value);
    spec.second = resolve_model(spec.second);
    return spec;
}

// `--model` takes any model: a language model among its values serves the chat endpoints (as
// --chat-model, which stays as an alias; its id is the value's, as for a speech model), the rest
// serve the audio ones. One language model at most; with no speech model left, the audio
// endpoints get the default one, as when no --model is given.
void take_language_model(std::vector<std::pair<std::string, std::string>>& specs, ServeArgs& a, Logger& log) {
    for (auto it = specs.begin(); it != specs.end();) {
        const ArchitectureEntry* e = architecture_of(it->second, specs.size() == 1 ? a.mmproj : std::string());
        if (!e || !e->capabilities.generate || e->capabilities.transcribe || e->capabilities.audio_lm) {
            ++it;
            continue;
        }
        if (!a.chat_model.empty())
            throw Error(ErrorKind::InvalidArgument, "serve holds one language model: --model " + it->second + " and " +
                                                        a.chat_model + " are both " + e->name +
                                                        " models (give one of them)");
        a.chat_model = it->second;
        if (a.chat_model_id.empty()) a.chat_model_id = it->first;
        log.info(it->second, ": a ", e->name, " language model, served as '", a.chat_model_id,
                 "' on the chat endpoints (/v1/chat/completions, /v1/completions, /v1/messages, /v1/responses)");
        it = specs.erase(it);
    }
    if (specs.empty()) {
        specs.push_back(resolved_spec(""));
        log.info("no speech model given: the audio endpoints use the default, ", specs.back().second);
    }
}

void run(ServeArgs& a, GlobalOptions& globals) {
    Logger log(parse_log_level(globals.log_level));
    // The models and their ids (the first speech model is the default); --model-id renames the
    // first speech model.
    std::vector<std::pair<std::string, std::string>> specs;
    for (const std::string& m : a.models.empty() ? std::vector<std::string>{""} : a.models)
        specs.push_back(resolved_spec(m));
    take_language_model(specs, a, log);
    if (!a.server.model_id.empty()) specs.front().first = a.server.model_id;
    for (size_t i = 0; i < specs.size(); ++i) {
        if (specs[i].first.empty())
            throw Error(ErrorKind::InvalidArgument, "--model " + specs[i].second + ": an empty model id");
        for (size_t j = 0; j < i; ++j)
            if (specs[i].first == specs[j].first)
                throw Error(ErrorKind::InvalidArgument, "--model: two models with the id '" + specs[i].first + "' (" +
                                                            specs[j].second + ", " + specs[i].second +
                                                            "): name them with --model ID=PATH");
    }
    if (!a.mmproj.empty() && specs.size() > 1)
        throw Error(ErrorKind::InvalidArgument,
                    "--mmproj goes with one --model; with several, give each GGUF pair as its directory");
    a.server.model_id = specs.front().first;
    if (a.server.api_key.empty())
        if (const char* k = std::getenv("PARLANCE_API_KEY")) a.server.api_key = k;
    a.server.max_upload_bytes = static_cast<size_t>(a.max_upload_mb * 1024 * 1024);
    if (!(a.audio_memory_mb > 0)) throw Error(ErrorKind::InvalidArgument, "--audio-memory-mb must be > 0");
    a.server.audio_memory_bytes = static_cast<size_t>(a.audio_memory_mb * 1024 * 1024);
    for (auto [name, v] : {std::pair{"--header-timeout", a.server.header_timeout_seconds},
                           std::pair{"--body-timeout", a.server.body_timeout_seconds}})
        if (!(v > 0)) throw Error(ErrorKind::InvalidArgument, std::string(name) + " must be > 0 seconds");
    if (!(a.server.shutdown_grace_seconds >= 0))
        throw Error(ErrorKind::InvalidArgument, "--shutdown-grace must be >= 0 seconds");
    // Signals are taken by wait_for_signal; block them in every thread we start.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);

    // The HTTP bound on requests in flight is set before the server copies its options (it was
    // set after, so --max-queue never reached it: 429s at 48 requests whatever the flag said).
    a.server.max_pending = a.engine.max_queue;
    server::HttpServer http(a.server, log);
    http.start();
    log.info("listening on ", a.server.tls_cert.empty() ? "http://" : "https://", a.server.host, ":", http.port(),
             " (loading ", specs.size(), specs.size() == 1 ? " model: " : " models, the first ", specs.front().second,
             ")");
    a.engine.max_new_tokens = a.max_new_tokens;
    if (a.engine.max_encode_batch < 0) throw Error(ErrorKind::InvalidArgument, "--encode-batch must be >= 0");
    if (a.engine.max_batch_tokens < 0 || a.engine.max_batch_sequences < 0)
        throw Error(ErrorKind::InvalidArgument, "--max-batch-tokens and --max-batch-sequences must be >= 0");
    if (a.kv_cache_mb < 0) throw Error(ErrorKind::InvalidArgument, "--kv-cache-mb must be >= 0");
    a.engine.kv_cache_bytes = static_cast<size_t>(a.kv_cache_mb * 1024 * 1024);
    std::vector<SpeechSide> speech;
    for (const auto& [id, path] : specs) {
        SpeechSide& sp = speech.emplace_back();
        sp.id = id;
        sp.path = path;
        BackendOptions bo;
        bo.device = a.server.device;
        bo.threads = a.threads;
        sp.backend = std::make_unique<Backend>(bo);
        sp.kv_type = kv_cache_type_of(a.kv_cache_type, a.server.device != "cpu");
        SpeechModelOptions mo{a.quantize, a.mmproj, a.audio_window, sp.kv_type};
        sp.model = open_speech_model(path, *sp.backend, mo);
        // Requests decode with the model's default beam size (clients of the OpenAI API cannot
        // ask for another): room for four of them at once, and never fewer slots than before.
        sp.beams = sp.model->default_beam_size();
        EngineOptions eo = a.engine;
        const bool gpu = a.server.device != "cpu";
        if (gpu && a.kv_cache_mb == 0) {
            // A GPU's cache takes half the memory the weights left free (the rest: step and
            // encoder graphs, other models loaded after this one).
            const Backend::Memory m = sp.backend->device_memory();
            eo.kv_cache_bytes = m.free / 2;
            log.info(path, ": KV cache ", eo.kv_cache_bytes >> 20, " MiB, half of the ", m.free >> 20, " MiB the ",
                     sp.backend->device_name(), " has free (--kv-cache-mb sets it)");
        }
        if (eo.max_encode_batch == 0) eo.max_encode_batch = gpu ? sp.model->gpu_encode_batch() : 1;
        const StepWidth width = step_width(eo, gpu);
        eo.max_batch_tokens = width.tokens;
        eo.max_batch_sequences = width.sequences;
        // On a GPU the model sizes its slots by the memory the KV cache leaves (Whisper's requests
        // each hold a window's cross-attention cache besides).
        size_t spare = 0;
        if (gpu) {
            const size_t free = sp.backend->device_memory().free;  // the KV cache is not allocated yet
            spare = free - std::min(free, eo.kv_cache_bytes);
        }
        eo.cache_slots =
            a.cache_slots > 0 ? a.cache_slots : std::max(gpu ? sp.model->gpu_cache_slots(spare) : 16, 4 * 2 * sp.beams);
        sp.cache_slots = eo.cache_slots;
        if (sp.beams > 1 && eo.cache_slots < 2 * sp.beams)
            throw Error(ErrorKind::InvalidArgument,
                        "--cache-slots " + std::to_string(eo.cache_slots) +
                            " is too few for the model's default beam size " + std::to_string(sp.beams) + " (" + path +
                            ", generation_config.json num_beams): a request takes " + std::to_string(2 * sp.beams));
        sp.engine = sp.model->start_engine(eo, log);
        if (sp.engine->max_beams() < sp.beams)
            throw Error(ErrorKind::InvalidArgument, "--kv-cache-mb " + std::to_string(static_cast<int>(a.kv_cache_mb)) +
                                                        " holds " + std::to_string(sp.engine->max_beams()) +
                                                        " full decoder contexts; a request to " + path +
                                                        " at its default beam size " + std::to_string(sp.beams) +
                                                        " needs " + std::to_string(sp.beams));
    }
    // Live sessions' server_vad: Silero VAD on a backend of its own (one thread), so its small
    // graphs never wait on, or race with, the speech model's.
    std::unique_ptr<Backend> vad_backend;
    std::unique_ptr<VoiceActivityModel> vad;
    std::string vad_path;
    try {
        vad_path = resolve_vad_model(a.vad_model);
    } catch (const Error& e) {
        if (!a.vad_model.empty()) throw;
        log.warn("no VAD model: /v1/realtime sessions need turn_detection null (", e.what(), ")");
    }
    if (!vad_path.empty()) {
        BackendOptions vo;
        vo.threads = 1;
        vad_backend = std::make_unique<Backend>(vo);
        vad = load_voice_activity_model(vad_path, *vad_backend);
        http.set_vad(vad.get());
    }
    std::unique_ptr<ChatSide> chat;
    if (!a.chat_model.empty()) {
        chat = load_chat(a, log);
        for (const SpeechSide& sp : speech)
            if (chat->info.id == sp.id)
                throw Error(ErrorKind::InvalidArgument, "--chat-model-id '" + chat->info.id +
                                                            "' is the id of the speech model " + sp.path + " too");
        http.set_chat(&chat->info);
    }
    if (a.server.device != "cpu") {
        // Each model computes on a Backend of its own on the same device: the first's reports it.
        const Backend* device = speech.front().backend.get();
        http.set_device_memory([device] {
            const Backend::Memory m = device->device_memory();
            return std::vector<server::DeviceMemory>{{device->device_name(), m.free, m.total}};
        });
    }
    std::vector<server::SpeechModelInfo> infos;
    for (const SpeechSide& sp : speech) {
        infos.push_back({sp.id, sp.engine.get(), sp.model->description(), sp.engine->capacity()});
        log.info("ready: '", sp.id, "' = ", infos.back().description, " loaded in ", seconds(sp.model->load_seconds()),
                 " on ", sp.backend->device_name(), ", ", sp.backend->threads(), " threads; beam size ", sp.beams, ", ",
                 sp.cache_slots, " cache slots, ", sp.engine->stats().kv_capacity_bytes >> 20, " MiB KV cache of ",
                 sp.kv_type == GGML_TYPE_F16 ? "f16" : "f32", " cells");
    }
    if (speech.size() > 1)
        log.info(speech.size(), " speech models; whisper-1 and the other OpenAI names mean '", speech.front().id, "'");
    http.set_speech_models(std::move(infos));
    http.wait_for_signal();
    for (SpeechSide& sp : speech) sp.engine->shutdown(true);
    if (chat) chat->service->shutdown(true);
    log.info("stopped");
}

}  // namespace

void register_serve(CLI::App& app, GlobalOptions& globals) {
    auto a = std::make_shared<ServeArgs>();
    auto* cmd = app.add_subcommand(
        "serve",
        "Serve the OpenAI-compatible API (transcriptions, translations, live transcription over /v1/realtime; "
        "chat completions with --chat-model)");
    cmd->add_option("-m,--model", a->models,
                    std::string(kSpeechModelHelp) +
                        ". Repeat for several models: ID=PATH names one (else its directory or file name without the "
                        "extension); a request's `model` picks it, whisper-1 and OpenAI's other names mean the first "
                        "speech model. A language model (Qwen3) serves the chat endpoints, as --chat-model does; "
                        "without a speech model the audio endpoints use the default one");
    cmd->add_option("--mmproj", a->mmproj, kMmprojHelp);
    cmd->add_option("--audio-window", a->audio_window, kAudioWindowHelp)->type_name("S");
    cmd->add_option("--kv-cache-type", a->kv_cache_type,
                    std::string(kKvCacheTypeHelp) +
                        ". Default auto: f16 on a GPU (its batched attention gathers and reads half the bytes), f32 "
                        "on the CPU and under --deterministic")
        ->default_val("auto")
        ->check(CLI::IsMember({"auto", "f32", "f16"}));
    cmd->add_option("--host", a->server.host, "Address to listen on")->default_val("127.0.0.1");
    cmd->add_option("--port", a->server.port, "Port (0 = any free port)")->default_val(8000);
    cmd->add_option("--api-key", a->server.api_key,
                    "Require 'Authorization: Bearer KEY' (or PARLANCE_API_KEY) on /v1/* and /metrics; / (the web "
                    "page, which asks for the key) and /health stay open");
    cmd->add_option("--tls-cert", a->server.tls_cert,
                    "Serve HTTPS and WSS (wss:// for /v1/realtime) on the port with this PEM certificate chain; "
                    "needs --tls-key")
        ->check(CLI::ExistingFile);
    cmd->add_option("--tls-key", a->server.tls_key, "The PEM private key of --tls-cert")->check(CLI::ExistingFile);
    cmd->add_flag("--metrics-public", a->server.metrics_public,
                  "Serve /metrics without the key (for a Prometheus on a trusted network)");
    a->server.model_id.clear();  // the id rule of --model applies unless --model-id is given
    cmd->add_option("--model-id", a->server.model_id,
                    "The first model's id, the name clients send (default: ID of --model ID=PATH, else its directory "
                    "or file name; whisper-1 and whisper are also accepted)");
    cmd->add_option("--max-upload-mb", a->max_upload_mb, "Largest upload")->default_val(25);
    cmd->add_option("--max-audio-seconds", a->server.max_audio_seconds,
                    "Longest audio accepted: a file that declares more is refused before decoding, one that "
                    "does not is stopped when it passes the limit")
        ->default_val(10800);
    cmd->add_option("--audio-memory-mb", a->audio_memory_mb,
                    "Decoded audio all requests hold at once (16 kHz float, 3.7 MiB a minute); a request waits "
                    "for room. Must hold one request at --max-audio-seconds")
        ->default_val(2048);
    cmd->add_option("--header-timeout", a->server.header_timeout_seconds,
                    "Seconds for a request's line and headers, and for an idle keep-alive connection (then 408 "
                    "or close)")
        ->default_val(15);
    cmd->add_option("--body-timeout", a->server.body_timeout_seconds,
                    "Seconds for a request's body once its headers are in (then 408)")
        ->default_val(120);
    cmd->add_option("--vad-model", a->vad_model,
                    "Silero VAD v5 (silero_vad_v5.onnx) for live sessions' server_vad (default: "
                    "$PARLANCE_VAD_MODEL, else where scripts/setup.sh put it; without one, sessions use "
                    "turn_detection null)");
    cmd->add_option("--max-sessions", a->server.max_sessions, "Live /v1/realtime sessions at once (then 429)")
        ->default_val(64);
    cmd->add_option("--realtime-redecode-seconds", a->server.realtime.redecode_seconds,
                    "Live sessions: new speech after which the open item is decoded again (its stable words "
                    "go out as deltas); shorter is quicker text for more compute")
        ->capture_default_str()
        ->check(CLI::Range(0.1, 30.0));
    cmd->add_option("--realtime-first-redecode-seconds", a->server.realtime.first_redecode_seconds,
                    "Live sessions: the re-decode cadence while an item has nothing committed yet (its first "
                    "words sooner, for a few more decodes per item; 0 = --realtime-redecode-seconds)")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 30.0));
    cmd->add_option("--realtime-commit-agreement", a->server.realtime.commit.agreement,
                    "Live sessions: consecutive re-decodes that must agree on a word before it is sent (never "
                    "revised after); more is fewer early mistakes, later text")
        ->capture_default_str()
        ->check(CLI::Range(1, 10));
    cmd->add_option("--realtime-commit-guard", a->server.realtime.commit_guard_seconds,
                    "Live sessions: words an interim re-decode places ending less than this many seconds "
                    "before the end of the audio it heard are not sent yet (the audio may have cut them; "
                    "word timestamps, Whisper models; 0 = off)")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 5.0));
    cmd->add_option("--realtime-commit-min-probability", a->server.realtime.commit_min_probability,
                    "Live sessions: words an interim re-decode gives a lower probability than this (and the "
                    "words after them) are not sent before the item ends (a word's probability: the mean of its "
                    "tokens'; Whisper and Qwen3-ASR models; 0 = off)")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 1.0));
    cmd->add_flag("!--no-realtime-self-speculation", a->server.realtime.self_speculation,
                  "Live sessions: re-decode without the previous hypothesis as a draft (self-speculation "
                  "verifies it in one decoder pass with models on the generation engine, e.g. Qwen3-ASR; "
                  "the text is the same)");
    cmd->add_option("--realtime-max-segment-seconds", a->server.realtime.max_segment_seconds,
                    "Live sessions: an item longer than this is cut at a quiet point")
        ->capture_default_str()
        ->check(CLI::Range(2.0, 30.0));
    cmd->add_option("--shutdown-grace", a->server.shutdown_grace_seconds,
                    "On SIGTERM/SIGINT, seconds in-flight requests may finish; then they are cancelled (503 "
                    "shutting_down) and the server exits. A second signal exits at once")
        ->default_val(30);
    cmd->add_option("--max-queue", a->engine.max_queue,
                    "Speech requests waiting beyond the ones being served (the server holds those its engines run "
                    "at once, up to --cache-slots, those being decoded, and this many; then 429)")
        ->default_val(32);
    cmd->add_option("--cache-slots", a->cache_slots,
                    "Decoder sequences at once: a greedy request holds one, a beam search two per beam "
                    "(default or 0: 16, on a GPU 512 for Qwen3-ASR, or room for 4 requests at the model's default beam "
                    "size when that is more)");
    cmd->add_option(
        "--kv-cache-mb", a->kv_cache_mb,
        "Byte cap of the decoder's paged KV cache in MiB; a request waits until its beams' worst "
        "case (a full context each) fits. Default or 0: on the CPU a full context per two cache slots, on a "
        "GPU half its free memory after loading the model. "
        "Occupancy, prefix hits and evictions are in /metrics (parlance_kv_cache_*)");
    cmd->add_option("--max-new-tokens", a->max_new_tokens, "Decoded tokens per 30 s window (cap)")->default_val(224);
    cmd->add_option("--min-new-tokens", a->engine.min_new_tokens,
                    "End-of-text suppressed until this many tokens per window or piece, whatever a request asks "
                    "(benchmarks of random-weight layouts)")
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--encode-batch", a->engine.max_encode_batch,
                    "Whisper: 30 s windows of different requests encoded in one graph (on the CPU each window's "
                    "result is the same bits either way; on a GPU it may differ in the last bits with what runs "
                    "beside it). Qwen3-ASR: audio pieces encoded between two decoder steps (more admits a burst of "
                    "uploads into the decode batch sooner, and holds the running decodes longer per step), in "
                    "one encoder graph (under --deterministic one graph each). Default or 0: 1 on the CPU; on a GPU 4 "
                    "for Whisper, 32 for Qwen3-ASR")
        ->default_val(0);
    cmd->add_option(
           "--prompt-gather-steps", a->engine.prompt_gather_steps,
           "Qwen3-ASR: while requests decode, new prompts wait up to this many decode-only steps to be computed "
           "together (sooner once they fill half of --max-batch-tokens; a live session's never wait). On "
           "a GPU a step costs about the same for one prompt as for several, and a decode-only step is "
           "replayed from the last one's graph. 0 (the default, for now): each step takes what arrived")
        ->default_val(0)
        ->check(CLI::NonNegativeNumber);
    cmd->add_flag_callback(
        "--serial-encoder", [a] { a->engine.overlap_encoder = false; },
        "Qwen3-ASR on CUDA: run the audio encoder's passes between decoder steps on the engine's thread, as "
        "before the encoder had a stream and a thread of its own (by default they run beside the steps, on the "
        "GPU at the same time); to measure what the overlap gives");
    cmd->add_option("--max-batch-tokens", a->engine.max_batch_tokens,
                    "Qwen3-ASR and the chat model: tokens one decoder step computes at most, decodes and prompt "
                    "chunks together (a "
                    "wider step takes a burst's prompts sooner and holds each decode longer). Default or 0: " +
                        std::to_string(kCpuBatchTokens) + " on the CPU, " + std::to_string(kGpuBatchTokens) +
                        " on a GPU")
        ->default_val(0);
    cmd->add_option("--max-batch-sequences", a->engine.max_batch_sequences,
                    "Qwen3-ASR and the chat model: sequences decoding in one step at most. Default or 0: " +
                        std::to_string(kCpuBatchSequences) + " on the CPU, " + std::to_string(kGpuBatchSequences) +
                        " on a GPU")
        ->default_val(0);
    cmd->add_option("--timeout", a->engine.request_timeout_seconds, "Per-request time limit in seconds (0 = none)")
        ->default_val(600);
    cmd->add_option("-t,--threads", a->threads, "CPU threads for compute (0 = all, up to 8)");
    cmd->add_option("--device", a->server.device, "cpu|cuda|metal")->default_val("cpu");
    add_deterministic_flag(cmd);
    cmd->add_option("--quantize", a->quantize,
                    "Linear weights at load: f32 (full precision) or quantized f16|q8_0|q5_k|q4_k");
    cmd->add_option("--chat-model", a->chat_model,
                    "A language model for POST /v1/chat/completions (HF directory with config.json model_type "
                    "qwen3, or a GGUF); its own chat template renders the messages. --model takes one too");
    cmd->add_option("--chat-model-id", a->chat_model_id,
                    "The `model` chat clients send (default: the architecture, e.g. qwen3; for a language model "
                    "given with --model, its id there)");
    cmd->add_option("--chat-kv-cache-mb", a->chat_kv_cache_mb,
                    "The chat model's paged KV cache in MiB (shared prompt prefixes reuse its blocks)")
        ->default_val(256);
    cmd->add_option("--chat-kv-cache-type", a->chat_kv_cache_type,
                    "Storage of the chat model's KV cells: f32, or f16 (twice the tokens in the same MiB; logits "
                    "move by about 1e-3)")
        ->default_val("f32")
        ->check(CLI::IsMember({"f32", "f16"}));
    cmd->add_option("--chat-max-queue", a->chat_max_queue, "Chat requests waiting to join the batch (then 429)")
        ->default_val(32);
    cmd->add_option("--chat-speculative", a->chat_speculative,
                    "Speculative decoding: up to N draft tokens per step, from --chat-draft-model or else by "
                    "prompt lookup, verified in the same step; outputs are unchanged (0 = off)")
        ->default_val(0)
        ->check(CLI::Range(0, 16));
    cmd->add_option("--chat-draft-model", a->chat_draft_model,
                    "A smaller model of the same family drafting for the chat model (its tokenizer must be "
                    "identical: checked at start); needs --chat-speculative N");
    cmd->add_option("--chat-draft-kv-cache-mb", a->chat_draft_kv_cache_mb, "The draft model's own KV cache in MiB")
        ->default_val(64);
    cmd->add_option("--chat-threads", a->chat_threads, "CPU threads of the chat model (0 = as --threads)")
        ->default_val(0);
    cmd->add_option("--max-stored-responses", a->server.max_stored_responses,
                    "Responses kept in memory for /v1/responses previous_response_id and GET (oldest dropped)")
        ->default_val(1024);
    cmd->add_option("--chat-quantize", a->chat_quantize, "The chat model's weights at load: f32|f16|q8_0|q5_k|q4_k");
    // Structured output: what one request's schemas may ask for, checked before any grammar is
    // built (each bounds the grammar's states, and so its memory and the time to build and use it).
    SchemaLimits& sl = a->schema_limits;
    cmd->add_option("--schema-max-enum-values", sl.max_enum_values,
                    "Enum values in a request's structured-output schemas, in all (each is a grammar state open "
                    "at once)")
        ->default_val(sl.max_enum_values)
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
    cmd->add_option("--schema-max-properties", sl.max_properties,
                    "Object properties in a request's structured-output schemas, in all")
        ->default_val(sl.max_properties)
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
    cmd->add_option("--schema-max-optional-properties", sl.max_optional_properties,
                    "Properties not in their object's required list, in a request's schemas in all (every order "
                    "they may come in is a grammar rule)")
        ->default_val(sl.max_optional_properties)
        ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
    cmd->add_option("--schema-max-repetition", sl.max_repetition,
                    "Repetitions a request's schemas ask for, in all: minLength/maxLength, minItems/maxItems, "
                    "min/maxProperties and a pattern's {m,n} (nested counts multiplied)")
        ->default_val(sl.max_repetition)
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
    cmd->add_option("--schema-max-grammar-bytes", sl.max_grammar_bytes,
                    "Bytes of the grammar (GBNF) a request's schemas become")
        ->default_val(sl.max_grammar_bytes)
        ->check(CLI::Range(size_t{1024}, size_t{1} << 28));
    cmd->add_option("--schema-max-grammar-stacks", sl.max_grammar_stacks,
                    "Parse stacks a structured output's grammar holds at once (each is matched against the "
                    "vocabulary on every step; more at the start is a 400, more later keeps the first ones)")
        ->default_val(sl.max_grammar_stacks)
        ->check(CLI::Range(size_t{1}, size_t{1} << 20));
    cmd->callback([a, &globals] { run(*a, globals); });
}

}  // namespace parlance::cli
