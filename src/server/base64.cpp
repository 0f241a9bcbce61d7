// Base64 through OpenSSL (see base64.h).
#include "server/base64.h"

#include <openssl/evp.h>

namespace parlance::server {

std::string base64_encode(std::span<const uint8_t> bytes) {
    std::string out((bytes.size() + 2) / 3 * 4 + 1, '\0');  // EVP_EncodeBlock writes a final NUL
    const int n =
        EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), bytes.data(), static_cast<int>(bytes.size()));
    out.resize(static_cast<size_t>(n));
    return out;
}

bool base64_decode(std::string_view in, std::string* out) {
    std::string s(in);
    while (s.size() % 4 != 0) s += '=';
    if (s.empty()) {
        out->clear();
        return true;
    }
    out->assign(s.size() / 4 * 3, '\0');
    const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out->data()),
                                  reinterpret_cast<const unsigned char*>(s.data()), static_cast<int>(s.size()));
    if (n < 0) return false;
    size_t pad = 0;
    for (size_t i = s.size(); i > 0 && s[i - 1] == '='; --i) ++pad;
    if (pad > 2) return false;
    out->resize(static_cast<size_t>(n) - pad);
    return true;
}

}  // namespace parlance::server
