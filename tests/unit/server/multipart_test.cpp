// multipart/form-data parsing and the transcription form's validation.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/multipart.h"
#include "server/transcription_form.h"

#include <nlohmann/json.hpp>

using namespace parlance::server;

namespace {

std::string body(const std::vector<std::pair<std::string, std::string>>& fields, const std::string& b = "XyZ") {
    std::string out;
    for (const auto& [name, value] : fields) {
        out += "--" + b + "\r\nContent-Disposition: form-data; name=\"" + name + "\"";
        if (name == "file") out += "; filename=\"a.wav\"\r\nContent-Type: audio/wav";
        out += "\r\n\r\n" + value + "\r\n";
    }
    return out + "--" + b + "--\r\n";
}

int status_of(const std::vector<std::pair<std::string, std::string>>& fields, std::string* param = nullptr) {
    std::string b = body(fields);
    try {
        parse_transcription_form(parse_multipart(b, "XyZ"), false);
    } catch (const ApiError& e) {
        if (param) *param = e.param;
        return e.status;
    }
    return 200;
}

}  // namespace

TEST(Multipart, Boundary) {
    EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=abc"), "abc");
    EXPECT_EQ(multipart_boundary("Multipart/Form-Data; charset=x; boundary=\"a b\""), "a b");
    EXPECT_FALSE(multipart_boundary("application/json"));
    EXPECT_FALSE(multipart_boundary("multipart/form-data"));
}

TEST(Multipart, PartsWithBinaryData) {
    std::string data("RIFF\0\r\n--XyQ-almost-a-boundary\r\n", 33);
    std::string b = body({{"file", data}, {"model", "whisper"}});
    auto parts = parse_multipart(b, "XyZ");
    ASSERT_EQ(parts.size(), 2u);
    EXPECT_EQ(parts[0].name, "file");
    EXPECT_EQ(parts[0].filename, "a.wav");
    EXPECT_EQ(parts[0].content_type, "audio/wav");
    EXPECT_EQ(parts[0].data, data);
    EXPECT_EQ(parts[1].data, "whisper");
}

TEST(Multipart, MalformedBodiesAreRejected) {
    for (std::string bad :
         {std::string("no boundary at all"), std::string("--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n"),
          std::string("--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nvalue without end"),
          std::string("--XyZ\r\nX-Other: 1\r\n\r\nv\r\n--XyZ--"), std::string("--XyZjunk")}) {
        EXPECT_THROW(parse_multipart(bad, "XyZ"), parlance::Error) << bad;
    }
    std::string many;
    for (int i = 0; i < 100; ++i) many += "--b\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\nv\r\n";
    many += "--b--";
    EXPECT_THROW(parse_multipart(many, "b", 64), parlance::Error);
}

TEST(TranscriptionForm, ValidFormParses) {
    std::string b = body({{"file", "bytes"},
                          {"model", "whisper-1"},
                          {"response_format", "verbose_json"},
                          {"timestamp_granularities[]", "word"},
                          {"timestamp_granularities[]", "segment"},
                          {"temperature", "0.2"},
                          {"language", "en"},
                          {"prompt", "Hello"}});
    auto f = parse_transcription_form(parse_multipart(b, "XyZ"), false);
    EXPECT_EQ(f.file, "bytes");
    EXPECT_EQ(f.format, parlance::ResponseFormat::VerboseJson);
    EXPECT_TRUE(f.word_timestamps && f.segment_timestamps);
    EXPECT_FLOAT_EQ(f.temperature, 0.2f);
    EXPECT_EQ(f.language, "en");
}

// service_tier, as chat takes it: "flex" makes the upload bulk work, queued behind interactive
// requests and live sessions.
TEST(TranscriptionForm, ServiceTierIsTheSchedulingClass) {
    auto parse = [](const std::string& tier) {
        std::string b = body({{"file", "bytes"}, {"model", "whisper-1"}, {"service_tier", tier}});
        return parse_transcription_form(parse_multipart(b, "XyZ"), false).priority;
    };
    EXPECT_EQ(parse("flex"), parlance::Priority::Bulk);
    EXPECT_EQ(parse("default"), parlance::Priority::Interactive);
    std::string b = body({{"file", "bytes"}, {"model", "whisper-1"}});
    EXPECT_EQ(parse_transcription_form(parse_multipart(b, "XyZ"), false).priority, parlance::Priority::Interactive);
    std::string param;
    EXPECT_EQ(status_of({{"file", "x"}, {"model", "whisper-1"}, {"service_tier", "fast"}}, &param), 400);
    EXPECT_EQ(param, "service_tier");
    EXPECT_EQ(
        status_of({{"file", "x"}, {"model", "whisper-1"}, {"service_tier", "flex"}, {"service_tier", "flex"}}, &param),
        400);
}

TEST(TranscriptionForm, EveryInvalidFieldIsA400NamingIt) {
    std::string p;
    EXPECT_EQ(status_of({{"model", "m"}}, &p), 400);
    EXPECT_EQ(p, "file");
    EXPECT_EQ(status_of({{"file", ""}, {"model", "m"}}, &p), 400);
    EXPECT_EQ(p, "file");
    EXPECT_EQ(status_of({{"file", "x"}}, &p), 400);
    EXPECT_EQ(p, "model");
    EXPECT_EQ(status_of({{"file", "x"}, {"model", "m"}, {"response_format", "xml"}}, &p), 400);
    EXPECT_EQ(p, "response_format");
    EXPECT_EQ(status_of({{"file", "x"}, {"model", "m"}, {"temperature", "2"}}, &p), 400);
    EXPECT_EQ(p, "temperature");
    EXPECT_EQ(status_of({{"file", "x"}, {"model", "m"}, {"temperature", "warm"}}, &p), 400);
    EXPECT_EQ(status_of({{"file", "x"}, {"model", "m"}, {"timestamp_granularities[]", "word"}}, &p), 400);
    EXPECT_EQ(p, "timestamp_granularities[]");
    EXPECT_EQ(
        status_of(
            {{"file", "x"}, {"model", "m"}, {"response_format", "verbose_json"}, {"timestamp_granularities[]", "char"}},
            &p),
        400);
    EXPECT_EQ(status_of({{"file", "x"}, {"model", "m"}, {"stream", "yes"}}, &p), 400);
    EXPECT_EQ(p, "stream");
    EXPECT_EQ(status_of({{"file", "x"}, {"model", "m"}, {"stream", "true"}, {"response_format", "srt"}}, &p), 400);
    EXPECT_EQ(status_of({{"file", "x"}, {"file", "y"}, {"model", "m"}}, &p), 400);
    EXPECT_EQ(status_of({{"file", "x"}, {"model", "m"}, {"bogus", "1"}}, &p), 400);
    EXPECT_EQ(p, "bogus");
    EXPECT_EQ(status_of({{"file", "x"}, {"model", "m"}}), 200);
}

TEST(ApiErrorBody, MapsInternalErrors) {
    EXPECT_EQ(ApiError::from(parlance::Error(parlance::ErrorKind::InvalidAudio, "bad")).status, 400);
    EXPECT_EQ(ApiError::from(parlance::Error(parlance::ErrorKind::TooLarge, "big")).status, 413);
    EXPECT_EQ(ApiError::from(parlance::Error(parlance::ErrorKind::Overloaded, "full")).status, 429);
    auto body = nlohmann::json::parse(ApiError(400, "msg", "file", "c").body());
    EXPECT_EQ(body["error"]["message"], "msg");
    EXPECT_EQ(body["error"]["param"], "file");
    EXPECT_EQ(body["error"]["type"], "invalid_request_error");
    EXPECT_EQ(body["error"]["code"], "c");
}
