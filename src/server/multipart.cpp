// multipart/form-data parser (see multipart.h).
#include "server/multipart.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace parlance::server {
namespace {

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
    return s;
}

// Value of `key` in a header's parameters (`form-data; name="file"; filename="a.wav"`).
std::string header_param(std::string_view header, std::string_view key) {
    size_t pos = 0;
    while (pos < header.size()) {
        size_t semi = header.find(';', pos);
        std::string_view item =
            trim(header.substr(pos, semi == std::string_view::npos ? std::string_view::npos : semi - pos));
        pos = semi == std::string_view::npos ? header.size() : semi + 1;
        size_t eq = item.find('=');
        if (eq == std::string_view::npos) continue;
        if (lower(trim(item.substr(0, eq))) != key) continue;
        std::string_view v = trim(item.substr(eq + 1));
        if (v.size() >= 2 && v.front() == '"' && v.back() == '"') {
            std::string out;
            for (size_t i = 1; i + 1 < v.size(); ++i) {
                if (v[i] == '\\' && i + 2 < v.size()) ++i;
                out += v[i];
            }
            return out;
        }
        return std::string(v);
    }
    return "";
}

void fail(const std::string& what) {
    throw Error(ErrorKind::InvalidArgument, "malformed multipart body: " + what);
}

}  // namespace

std::optional<std::string> multipart_boundary(std::string_view content_type) {
    size_t semi = content_type.find(';');
    if (lower(trim(content_type.substr(0, semi))) != "multipart/form-data") return std::nullopt;
    if (semi == std::string_view::npos) return std::nullopt;
    std::string b = header_param(content_type.substr(semi + 1), "boundary");
    if (b.empty() || b.size() > 200) return std::nullopt;
    return b;
}

std::vector<FormPart> parse_multipart(std::string_view body, std::string_view boundary, size_t max_parts) {
    const std::string delim = "--" + std::string(boundary);
    std::vector<FormPart> parts;
    size_t pos = body.find(delim);
    if (pos == std::string_view::npos) fail("no boundary line");
    pos += delim.size();
    for (;;) {
        if (body.substr(pos, 2) == "--") return parts;  // closing delimiter
        if (body.substr(pos, 2) != "\r\n") fail("boundary line not followed by CRLF");
        pos += 2;
        size_t headers_end = body.find("\r\n\r\n", pos);
        if (headers_end == std::string_view::npos) fail("part headers are not terminated");
        FormPart part;
        std::string_view headers = body.substr(pos, headers_end - pos);
        // A part's headers are a few short lines; bytes that are not (a part with no headers, whose
        // data runs until some blank line inside it) make the part malformed, not a missing field.
        constexpr size_t kMaxPartHeaders = 8192;
        if (headers.size() > kMaxPartHeaders) fail("a part's headers are longer than 8 KiB (a part without headers?)");
        size_t hp = 0;
        bool disposition = false;
        while (hp <= headers.size()) {
            size_t eol = headers.find("\r\n", hp);
            std::string_view line =
                headers.substr(hp, eol == std::string_view::npos ? std::string_view::npos : eol - hp);
            hp = eol == std::string_view::npos ? headers.size() + 1 : eol + 2;
            if (line.empty()) continue;
            size_t colon = line.find(':');
            std::string key = colon == std::string_view::npos ? std::string() : lower(trim(line.substr(0, colon)));
            if (key.empty() || key.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-_") != std::string::npos)
                fail(
                    "a part's headers are malformed (each part needs a Content-Disposition header, then a blank line)");
            std::string_view value = trim(line.substr(colon + 1));
            if (key == "content-disposition") {
                disposition = true;
                part.name = header_param(value, "name");
                part.filename = header_param(value, "filename");
            } else if (key == "content-type") {
                part.content_type = std::string(value);
            }
        }
        if (!disposition) fail("a part has no Content-Disposition header");
        size_t data_begin = headers_end + 4;
        size_t next = body.find("\r\n" + delim, data_begin);
        if (next == std::string_view::npos) fail("no closing boundary");
        part.data = body.substr(data_begin, next - data_begin);
        parts.push_back(std::move(part));
        if (parts.size() > max_parts) fail("more than " + std::to_string(max_parts) + " parts");
        pos = next + 2 + delim.size();
    }
}

}  // namespace parlance::server
