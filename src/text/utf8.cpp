// Strict UTF-8 scanning (see utf8.h).
#include "text/utf8.h"

namespace parlance::utf8 {

Scan scan(std::string_view text, size_t pos) noexcept {
    const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
    const uint8_t b0 = byte(pos);
    if (b0 < 0x80) return {Scan::Status::Valid, 1, b0};
    size_t need;
    char32_t cp;
    uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 1;
        cp = b0 & 0x1F;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 2;
        cp = b0 & 0x0F;
        if (b0 == 0xE0) lo = 0xA0;  // no overlongs
        if (b0 == 0xED) hi = 0x9F;  // no surrogates
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 3;
        cp = b0 & 0x07;
        if (b0 == 0xF0) lo = 0x90;  // no overlongs
        if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
    } else {
        return {Scan::Status::Invalid, 1, 0};
    }
    for (size_t k = 1; k <= need; ++k) {
        if (pos + k >= text.size()) return {Scan::Status::Incomplete, k, 0};
        const uint8_t b = byte(pos + k);
        const uint8_t l = k == 1 ? lo : 0x80;
        const uint8_t h = k == 1 ? hi : 0xBF;
        if (b < l || b > h) return {Scan::Status::Invalid, k, 0};
        cp = (cp << 6) | (b & 0x3F);
    }
    return {Scan::Status::Valid, need + 1, cp};
}

size_t valid_prefix(std::string_view text) noexcept {
    size_t pos = 0;
    while (pos < text.size()) {
        if (static_cast<uint8_t>(text[pos]) < 0x80) {
            ++pos;
            continue;
        }
        const Scan s = scan(text, pos);
        if (s.status != Scan::Status::Valid) break;
        pos += s.length;
    }
    return pos;
}

void append(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

std::string sanitize(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    size_t pos = 0;
    while (pos < text.size()) {
        const Scan s = scan(text, pos);
        if (s.status == Scan::Status::Valid) {
            out.append(text.substr(pos, s.length));
        } else {
            append(out, U'\uFFFD');
        }
        pos += s.length;
    }
    return out;
}

}  // namespace parlance::utf8
