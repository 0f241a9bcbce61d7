// FFmpeg-based decoding from a memory buffer and libswresample wrappers (PARLANCE_FFMPEG=ON, the
// default). decode_wav_only.cpp replaces this file in builds without FFmpeg.
#include "audio/decode.h"

#if PARLANCE_WITH_FFMPEG

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libavutil/error.h>
#include <libavutil/log.h>
#include <libavutil/opt.h>
#include <libswresample/swresample.h>
}

#include "audio/rate_check.h"
#include "core/error.h"

namespace parlance {
namespace {

using audio_detail::check_rate;

constexpr int kMaxChannels = 64;
// Bounds on what FFmpeg may read to identify the format and its streams before decoding starts.
constexpr int64_t kProbeBytes = 4 << 20;
constexpr int64_t kAnalyzeMicros = 10 * int64_t{AV_TIME_BASE};
constexpr int kIoBufferBytes = 64 << 10;
// Demuxers allowed to parse the input: audio containers only (no playlists, concat, image or
// network formats that could open other resources or burn CPU on non-audio).
constexpr const char* kFormatWhitelist =
    "wav,w64,flac,mp3,mov,mp4,m4a,3gp,ogg,matroska,webm,aac,mpeg,aiff,caf,amr,au,wv,ac3,eac3,opus";

// FFmpeg's log level is process-wide; it is set once, to quiet, the first time we decode.
void silence_ffmpeg_logs() {
    static std::once_flag once;
    std::call_once(once, [] { av_log_set_level(AV_LOG_QUIET); });
}

std::string av_error_text(int code) {
    char buf[AV_ERROR_MAX_STRING_SIZE] = {};
    av_strerror(code, buf, sizeof buf);
    return buf;
}

// The bytes being demuxed, served to FFmpeg through read/seek callbacks.
struct MemoryReader {
    const uint8_t* data = nullptr;
    int64_t size = 0;
    int64_t pos = 0;
    const std::function<void(size_t)>* on_read = nullptr;
    int64_t reported = 0;  // the last offset given to on_read
};

constexpr int64_t kReadReportBytes = int64_t(4) << 20;

int read_packet(void* opaque, uint8_t* buf, int buf_size) {
    auto* r = static_cast<MemoryReader*>(opaque);
    const int64_t left = r->size - r->pos;
    if (left <= 0) return AVERROR_EOF;
    const int n = static_cast<int>(std::min<int64_t>(left, buf_size));
    std::memcpy(buf, r->data + r->pos, static_cast<size_t>(n));
    r->pos += n;
    if (r->on_read && *r->on_read && r->pos >= r->reported + kReadReportBytes) {
        r->reported = r->pos;
        (*r->on_read)(static_cast<size_t>(r->pos));
    }
    return n;
}

int64_t seek(void* opaque, int64_t offset, int whence) {
    auto* r = static_cast<MemoryReader*>(opaque);
    whence &= ~AVSEEK_FORCE;
    if (whence == AVSEEK_SIZE) return r->size;
    int64_t base = 0;
    if (whence == SEEK_CUR)
        base = r->pos;
    else if (whence == SEEK_END)
        base = r->size;
    else if (whence != SEEK_SET)
        return AVERROR(EINVAL);
    const int64_t target = base + offset;
    if (target < 0 || target > r->size) return AVERROR(EINVAL);
    r->pos = target;
    return target;
}

// Refuses every attempt of a demuxer to open another resource (nested files, URLs).
int refuse_io_open(AVFormatContext*, AVIOContext**, const char*, int, AVDictionary**) {
    return AVERROR(EPERM);
}

struct IoDeleter {
    void operator()(AVIOContext* io) const {
        if (!io) return;
        av_freep(&io->buffer);
        avio_context_free(&io);
    }
};
struct FormatDeleter {
    void operator()(AVFormatContext* f) const { avformat_close_input(&f); }
};
struct CodecDeleter {
    void operator()(AVCodecContext* c) const { avcodec_free_context(&c); }
};
struct PacketDeleter {
    void operator()(AVPacket* p) const { av_packet_free(&p); }
};
struct FrameDeleter {
    void operator()(AVFrame* f) const { av_frame_free(&f); }
};
struct SwrDeleter {
    void operator()(SwrContext* s) const { swr_free(&s); }
};
struct DictDeleter {
    void operator()(AVDictionary* d) const { av_dict_free(&d); }
};
using SwrPtr = std::unique_ptr<SwrContext, SwrDeleter>;

// A converter from (format, layout, rate) to mono float at out_rate, channels averaged.
SwrPtr make_swr(const AVChannelLayout& in_layout, AVSampleFormat in_fmt, int in_rate, int out_rate) {
    AVChannelLayout in = {};
    if (in_layout.order == AV_CHANNEL_ORDER_UNSPEC) {
        av_channel_layout_default(&in, in_layout.nb_channels);
    } else if (av_channel_layout_copy(&in, &in_layout) < 0) {
        throw Error(ErrorKind::Internal, "out of memory copying a channel layout");
    }
    AVChannelLayout mono = AV_CHANNEL_LAYOUT_MONO;
    SwrContext* raw = nullptr;
    int rc = swr_alloc_set_opts2(&raw, &mono, AV_SAMPLE_FMT_FLT, out_rate, &in, in_fmt, in_rate, 0, nullptr);
    av_channel_layout_uninit(&in);
    SwrPtr swr(raw);
    if (rc < 0 || !swr) throw Error(ErrorKind::InvalidAudio, "cannot set up resampling: " + av_error_text(rc));
    // The downmix is the plain channel average, set as the matrix itself: swresample's own
    // matrices need a known layout, and files with 9..64 unnamed channels have none.
    const int channels = in_layout.nb_channels;
    if (channels > 1) {
        std::vector<double> average(static_cast<size_t>(channels), 1.0 / channels);
        rc = swr_set_matrix(swr.get(), average.data(), channels);
        if (rc < 0) throw Error(ErrorKind::InvalidAudio, "cannot set up the downmix: " + av_error_text(rc));
    }
    rc = swr_init(swr.get());
    if (rc < 0) throw Error(ErrorKind::InvalidAudio, "cannot set up resampling: " + av_error_text(rc));
    return swr;
}

// Runs swr_convert (input may be null to flush) and appends the output to *out.
void convert_append(SwrContext* swr, const uint8_t** in, int in_samples, std::vector<float>* out) {
    for (;;) {
        const int cap = swr_get_out_samples(swr, in_samples) + 32;
        if (cap <= 0) return;
        const size_t old = out->size();
        out->resize(old + static_cast<size_t>(cap));
        auto* dst = reinterpret_cast<uint8_t*>(out->data() + old);
        const int got = swr_convert(swr, &dst, cap, in, in_samples);
        if (got < 0) {
            out->resize(old);
            throw Error(ErrorKind::InvalidAudio, "resampling failed: " + av_error_text(got));
        }
        out->resize(old + static_cast<size_t>(got));
        // Converting new input needs one call; flushing may take several until nothing comes out.
        if (in != nullptr || got == 0) return;
    }
}

bool same_layout(const AVChannelLayout& a, const AVChannelLayout& b) {
    return av_channel_layout_compare(&a, &b) == 0;
}

// Decoded frames -> mono float at the output rate, enforcing the duration limit as frames arrive.
// The output goes to the vector set by set_output (the caller's piece of the audio).
class FrameSink {
public:
    explicit FrameSink(const DecodeOptions& opts) : opts_(opts) {}
    ~FrameSink() { av_channel_layout_uninit(&layout_); }

    void set_output(std::vector<float>* out) { out_ = out; }

    void add(const AVFrame* frame) {
        const int channels = frame->ch_layout.nb_channels;
        if (channels < 1 || channels > kMaxChannels) {
            throw Error(ErrorKind::InvalidAudio, "audio has " + std::to_string(channels) + " channels (allowed 1.." +
                                                     std::to_string(kMaxChannels) + ")");
        }
        check_rate(frame->sample_rate, "audio sample rate", ErrorKind::InvalidAudio);
        if (frame->nb_samples <= 0) return;
        seconds_ += static_cast<double>(frame->nb_samples) / frame->sample_rate;
        if (seconds_ > opts_.max_seconds) {
            throw Error(ErrorKind::TooLarge, "the audio is longer than the limit of " +
                                                 std::to_string(static_cast<long long>(opts_.max_seconds)) +
                                                 " s (decoding stopped there)");
        }
        const auto fmt = static_cast<AVSampleFormat>(frame->format);
        if (!swr_ || fmt != fmt_ || frame->sample_rate != rate_ || !same_layout(frame->ch_layout, layout_)) {
            // Parameters changed mid-stream (or first frame): drain the old converter, start a new one.
            finish();
            swr_ = make_swr(frame->ch_layout, fmt, frame->sample_rate, opts_.sample_rate);
            fmt_ = fmt;
            rate_ = frame->sample_rate;
            av_channel_layout_uninit(&layout_);
            if (av_channel_layout_copy(&layout_, &frame->ch_layout) < 0) {
                throw Error(ErrorKind::Internal, "out of memory copying a channel layout");
            }
        }
        auto** in = const_cast<const uint8_t**>(frame->extended_data);
        append(in, frame->nb_samples);
    }

    void finish() {
        if (swr_) append(nullptr, 0);
        swr_.reset();
    }

    // Samples output so far.
    size_t total() const { return total_; }

private:
    void append(const uint8_t** in, int samples) {
        const size_t before = out_->size();
        convert_append(swr_.get(), in, samples, out_);
        total_ += out_->size() - before;
        if (opts_.on_progress && total_ >= reported_ + static_cast<size_t>(opts_.sample_rate)) {
            reported_ = total_;
            opts_.on_progress(total_);
        }
    }

    const DecodeOptions& opts_;
    std::vector<float>* out_ = nullptr;
    SwrPtr swr_;
    AVSampleFormat fmt_ = AV_SAMPLE_FMT_NONE;
    int rate_ = 0;
    AVChannelLayout layout_ = {};
    double seconds_ = 0.0;
    size_t total_ = 0;
    size_t reported_ = 0;
};

// The duration the container declares for the stream in seconds, or -1 when it declares none or
// only one FFmpeg estimated from the bit rate (wrong for VBR files; such files are bounded while
// they decode instead).
double container_seconds(const AVFormatContext& fmt, const AVStream& stream) {
    if (fmt.duration_estimation_method == AVFMT_DURATION_FROM_BITRATE) return -1.0;
    if (stream.duration != AV_NOPTS_VALUE && stream.duration > 0 && stream.time_base.den > 0)
        return static_cast<double>(stream.duration) * av_q2d(stream.time_base);
    if (fmt.duration != AV_NOPTS_VALUE && fmt.duration > 0) return static_cast<double>(fmt.duration) / AV_TIME_BASE;
    return -1.0;
}

}  // namespace

struct AudioStreamDecoder::Impl {
    DecodeOptions opts;  // MemoryReader and FrameSink point into it: Impl stays where it was made
    MemoryReader reader;
    std::unique_ptr<AVIOContext, IoDeleter> io;
    std::unique_ptr<AVFormatContext, FormatDeleter> fmt;
    std::unique_ptr<AVCodecContext, CodecDeleter> dec;
    std::unique_ptr<AVPacket, PacketDeleter> packet;
    std::unique_ptr<AVFrame, FrameDeleter> frame;
    std::unique_ptr<FrameSink> sink;
    int stream_index = -1;
    double declared = -1.0;
    size_t expected = 0;
    bool ended = false;

    // Hands the decoder's pending frames to the sink.
    void drain() {
        for (;;) {
            const int r = avcodec_receive_frame(dec.get(), frame.get());
            if (r < 0) return;  // EAGAIN: needs input; EOF: done; errors: skip this packet's output
            sink->add(frame.get());
            av_frame_unref(frame.get());
        }
    }
};

AudioStreamDecoder::AudioStreamDecoder(std::span<const uint8_t> bytes, const DecodeOptions& opts)
    : impl_(std::make_unique<Impl>()) {
    silence_ffmpeg_logs();
    check_rate(opts.sample_rate, "output sample rate", ErrorKind::InvalidArgument);
    if (!(opts.max_seconds > 0.0)) throw Error(ErrorKind::InvalidArgument, "max_seconds must be > 0");
    if (bytes.empty()) throw Error(ErrorKind::InvalidAudio, "audio input is empty");
    Impl& s = *impl_;
    s.opts = opts;

    s.reader = MemoryReader{bytes.data(), static_cast<int64_t>(bytes.size()), 0, &s.opts.on_read, 0};
    auto* io_buffer = static_cast<uint8_t*>(av_malloc(kIoBufferBytes));
    if (!io_buffer) throw Error(ErrorKind::Internal, "out of memory (I/O buffer)");
    s.io.reset(avio_alloc_context(io_buffer, kIoBufferBytes, 0, &s.reader, &read_packet, nullptr, &seek));
    if (!s.io) {
        av_free(io_buffer);
        throw Error(ErrorKind::Internal, "out of memory (I/O context)");
    }

    AVFormatContext* fmt_raw = avformat_alloc_context();
    if (!fmt_raw) throw Error(ErrorKind::Internal, "out of memory (format context)");
    fmt_raw->pb = s.io.get();
    fmt_raw->flags |= AVFMT_FLAG_CUSTOM_IO;
    fmt_raw->probesize = kProbeBytes;
    fmt_raw->max_analyze_duration = kAnalyzeMicros;
    fmt_raw->io_open = &refuse_io_open;
    AVDictionary* dict = nullptr;
    av_dict_set(&dict, "format_whitelist", kFormatWhitelist, 0);
    std::unique_ptr<AVDictionary, DictDeleter> dict_guard(dict);
    int rc = avformat_open_input(&fmt_raw, nullptr, nullptr, &dict);
    dict_guard.release();
    dict_guard.reset(dict);
    if (rc < 0) {  // avformat_open_input frees the context on failure
        throw Error(ErrorKind::InvalidAudio, "unrecognised or unsupported audio format (" + av_error_text(rc) + ")");
    }
    s.fmt.reset(fmt_raw);

    rc = avformat_find_stream_info(s.fmt.get(), nullptr);
    if (rc < 0) throw Error(ErrorKind::InvalidAudio, "cannot read audio stream info (" + av_error_text(rc) + ")");
    const AVCodec* codec = nullptr;
    s.stream_index = av_find_best_stream(s.fmt.get(), AVMEDIA_TYPE_AUDIO, -1, -1, &codec, 0);
    if (s.stream_index == AVERROR_DECODER_NOT_FOUND) {
        throw Error(ErrorKind::InvalidAudio, "no decoder for the audio codec in this file");
    }
    if (s.stream_index < 0 || !codec) throw Error(ErrorKind::InvalidAudio, "file has no audio stream");
    const AVCodecParameters* par = s.fmt->streams[s.stream_index]->codecpar;
    const int channels = par->ch_layout.nb_channels;
    if (channels < 1 || channels > kMaxChannels) {
        throw Error(ErrorKind::InvalidAudio, "audio stream has " + std::to_string(channels) + " channels (allowed 1.." +
                                                 std::to_string(kMaxChannels) + ")");
    }
    check_rate(par->sample_rate, "audio sample rate", ErrorKind::InvalidAudio);
    // A declared duration over the limit is refused here, before a single packet is decoded (a
    // 3 MB FLAC of hours of silence used to be decoded up to the limit first). Half a second of
    // tolerance for containers that round their duration up.
    s.declared = container_seconds(*s.fmt, *s.fmt->streams[s.stream_index]);
    if (s.declared > opts.max_seconds + 0.5) {
        throw Error(ErrorKind::TooLarge, "the file declares " + std::to_string(static_cast<long long>(s.declared)) +
                                             " s of audio, longer than the limit of " +
                                             std::to_string(static_cast<long long>(opts.max_seconds)) + " s");
    }
    if (opts.on_start) opts.on_start(s.declared);
    const double limit_samples = opts.max_seconds * opts.sample_rate;
    const double expected = s.declared > 0
                                ? std::min(limit_samples, s.declared * 1.02 * opts.sample_rate + opts.sample_rate)
                                : limit_samples;
    // The limit plus the resampler's last output, so a buffer of this size never moves.
    s.expected = static_cast<size_t>(std::min(expected, 4.0e9)) + 4096;

    s.dec.reset(avcodec_alloc_context3(codec));
    if (!s.dec) throw Error(ErrorKind::Internal, "out of memory (codec context)");
    rc = avcodec_parameters_to_context(s.dec.get(), par);
    if (rc < 0) throw Error(ErrorKind::InvalidAudio, "bad codec parameters (" + av_error_text(rc) + ")");
    s.dec->thread_count = 1;
    rc = avcodec_open2(s.dec.get(), codec, nullptr);
    if (rc < 0) throw Error(ErrorKind::InvalidAudio, "cannot open the audio decoder (" + av_error_text(rc) + ")");

    s.packet.reset(av_packet_alloc());
    s.frame.reset(av_frame_alloc());
    if (!s.packet || !s.frame) throw Error(ErrorKind::Internal, "out of memory (packet/frame)");
    s.sink = std::make_unique<FrameSink>(s.opts);
}

AudioStreamDecoder::~AudioStreamDecoder() = default;

double AudioStreamDecoder::declared_seconds() const {
    return impl_->declared;
}

size_t AudioStreamDecoder::expected_samples() const {
    return impl_->expected;
}

bool AudioStreamDecoder::decode(size_t min_samples, std::vector<float>* out) {
    Impl& s = *impl_;
    if (s.ended) return false;
    const size_t start = out->size();
    s.sink->set_output(out);
    while (out->size() - start < min_samples) {
        // Read errors (truncation, corruption) end the stream: we keep what decoded so far.
        if (av_read_frame(s.fmt.get(), s.packet.get()) < 0) {
            if (avcodec_send_packet(s.dec.get(), nullptr) >= 0) s.drain();
            s.sink->finish();
            s.ended = true;
            break;
        }
        if (s.packet->stream_index == s.stream_index) {
            if (avcodec_send_packet(s.dec.get(), s.packet.get()) >= 0) s.drain();
        }
        av_packet_unref(s.packet.get());
    }
    // Float sources (float WAV, some decoders) can carry NaN/Inf or overshoot: keep the contract.
    for (size_t i = start; i < out->size(); ++i) {
        float& v = (*out)[i];
        v = std::isfinite(v) ? std::clamp(v, -1.0f, 1.0f) : 0.0f;
    }
    if (s.ended) {
        if (s.sink->total() == 0) throw Error(ErrorKind::InvalidAudio, "no audio samples could be decoded");
        if (static_cast<double>(s.sink->total()) > s.opts.max_seconds * s.opts.sample_rate + 1.0) {
            throw Error(ErrorKind::TooLarge, "the audio is longer than the limit of " +
                                                 std::to_string(static_cast<long long>(s.opts.max_seconds)) + " s");
        }
    }
    return !s.ended;
}

std::vector<float> decode_audio(std::span<const uint8_t> bytes, const DecodeOptions& opts) {
    AudioStreamDecoder decoder(bytes, opts);
    return decode_rest(decoder);
}

struct Resampler::Impl {
    SwrPtr swr;
};

Resampler::Resampler(int from_rate, int to_rate) : impl_(std::make_unique<Impl>()) {
    check_rate(from_rate, "resampler input rate", ErrorKind::InvalidArgument);
    check_rate(to_rate, "resampler output rate", ErrorKind::InvalidArgument);
    AVChannelLayout mono = AV_CHANNEL_LAYOUT_MONO;
    impl_->swr = make_swr(mono, AV_SAMPLE_FMT_FLT, from_rate, to_rate);
}

Resampler::~Resampler() = default;

void Resampler::push(std::span<const float> pcm, std::vector<float>* out) {
    if (pcm.empty()) return;
    if (pcm.size() > static_cast<size_t>(INT32_MAX / 8)) throw Error(ErrorKind::TooLarge, "resampler chunk too large");
    const auto* src = reinterpret_cast<const uint8_t*>(pcm.data());
    convert_append(impl_->swr.get(), &src, static_cast<int>(pcm.size()), out);
}

void Resampler::flush(std::vector<float>* out) {
    convert_append(impl_->swr.get(), nullptr, 0, out);
}

std::vector<float> resample(std::span<const float> pcm, int from_rate, int to_rate) {
    check_rate(from_rate, "resampler input rate", ErrorKind::InvalidArgument);
    check_rate(to_rate, "resampler output rate", ErrorKind::InvalidArgument);
    if (from_rate == to_rate) return {pcm.begin(), pcm.end()};
    Resampler r(from_rate, to_rate);
    std::vector<float> out;
    out.reserve(static_cast<size_t>(static_cast<double>(pcm.size()) * to_rate / from_rate) + 64);
    // Feed in bounded chunks so one swr_convert call never needs a huge output buffer.
    constexpr size_t kChunk = 1 << 16;
    for (size_t i = 0; i < pcm.size(); i += kChunk) r.push(pcm.subspan(i, std::min(kChunk, pcm.size() - i)), &out);
    r.flush(&out);
    return out;
}

}  // namespace parlance

#endif  // PARLANCE_WITH_FFMPEG
