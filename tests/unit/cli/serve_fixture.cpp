// Raw-socket clients and /proc readings for the black-box server tests (see serve_fixture.h).
#include "serve_fixture.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstring>
#include <sstream>

namespace parlance::testing {

RawClient::RawClient(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) close();
}

RawClient::~RawClient() {
    close();
}

void RawClient::close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
}

void RawClient::send(const std::string& bytes) {
    size_t off = 0;
    while (fd_ >= 0 && off < bytes.size()) {
        const ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
        if (n <= 0) return;  // the server closed: what it answered is still readable
        off += static_cast<size_t>(n);
    }
}

void RawClient::shutdown_write() {
    if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
}

std::string RawClient::read_until(const std::string& marker, double timeout_s) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    char buf[65536];
    while (fd_ >= 0 && (marker.empty() || got_.find(marker) == std::string::npos)) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
        if (left.count() <= 0) break;
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
        const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
        if (n <= 0) {  // closed (or reset)
            peer_closed_ = true;
            break;
        }
        got_.append(buf, static_cast<size_t>(n));
    }
    return got_;
}

std::string RawClient::read_all(double timeout_s) {
    return read_until("", timeout_s);
}

RawResponse parse_response(const std::string& wire) {
    RawResponse r;
    size_t pos = 0;
    for (;;) {
        const size_t end = wire.find("\r\n\r\n", pos);
        if (end == std::string::npos || wire.compare(pos, 5, "HTTP/") != 0) return r;
        r.head = wire.substr(pos, end - pos);
        r.status = std::atoi(r.head.c_str() + r.head.find(' ') + 1);
        pos = end + 4;
        if (r.status >= 200) break;  // 1xx: interim, skipped
    }
    r.body = wire.substr(pos);
    return r;
}

std::string multipart_request(const std::string& path, const std::string& file_bytes,
                              const std::vector<std::pair<std::string, std::string>>& fields) {
    const std::string b = "parlanceTestBoundary7";
    std::string body = "--" + b + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n\r\n" +
                       file_bytes + "\r\n";
    for (const auto& [name, value] : fields)
        body += "--" + b + "\r\nContent-Disposition: form-data; name=\"" + name + "\"\r\n\r\n" + value + "\r\n";
    body += "--" + b + "--\r\n";
    return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data; boundary=" + b +
           "\r\nConnection: close\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

namespace {
size_t status_kb(pid_t pid, const std::string& key) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(in, line);)
        if (line.rfind(key + ":", 0) == 0) return std::stoul(line.substr(key.size() + 1)) * 1024;
    return 0;
}
}  // namespace

size_t peak_resident_bytes(pid_t pid) {
    return status_kb(pid, "VmHWM");
}
size_t resident_bytes_of(pid_t pid) {
    return status_kb(pid, "VmRSS");
}

}  // namespace parlance::testing
