// The harness of the black-box server tests: `parlance serve` as a child process on a free
// loopback port, driven with curl or with raw sockets (for what curl will not send: malformed
// requests, half-closed connections, clients that vanish mid-stream).
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "test_support.h"

namespace parlance::testing {

inline std::string fixture(const std::string& rel) {
    return (fixtures_dir() / rel).string();
}

// curl's form fields for the most common upload: jfk.wav, greedy, OpenAI's model name.
inline const std::string kJfk = "-F file=@" + fixture("audio/jfk.wav");
inline const std::string kFast = " -F temperature=0 -F model=whisper";

// Starts `parlance serve` on a free port and stops it (SIGTERM) on destruction.
class Server {
public:
    explicit Server(const std::string& extra_args = "", const std::string& model = "whisper/tiny-multi/model",
                    int max_new_tokens = 24) {
        log_ = dir_ / "serve.log";
        pid_ = fork();
        if (pid_ == 0) {
            // An empty `model`: none given, the bundled default is used.
            std::string cmd = "exec env -u PARLANCE_MODEL " + parlance_binary().string() +
                              " serve --port 0 --threads 2 --max-new-tokens " + std::to_string(max_new_tokens) +
                              (model.empty() ? std::string() : " --model " + fixture(model)) + " " + extra_args +
                              " > " + log_.string() + " 2>&1";
            execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
            _exit(127);
        }
        for (int i = 0; i < 300 && port_ == 0; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            std::smatch m;
            std::string log = read_log();
            static const std::regex re("listening on (https?)://127.0.0.1:(\\d+)");
            if (std::regex_search(log, m, re)) {
                tls_ = m[1] == "https";
                port_ = std::stoi(m[2]);
            }
            int status = 0;
            if (port_ == 0 && waitpid(pid_, &status, WNOHANG) == pid_) {  // refused before listening
                exited_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
                pid_ = -1;
                return;
            }
        }
        for (int i = 0; i < 300; ++i) {  // ready when /health says ok, or gone (a refused option)
            if (curl(std::string(tls_ ? "-sk " : "-s ") + url("/health")).find("\"ok\"") != std::string::npos) break;
            int status = 0;
            if (waitpid(pid_, &status, WNOHANG) == pid_) {
                exited_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
                pid_ = -1;
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    }
    ~Server() {
        if (pid_ > 0) {
            kill(pid_, SIGTERM);
            int status = 0;
            waitpid(pid_, &status, 0);
        }
    }
    int stop() {  // SIGTERM, returns the exit status
        if (pid_ <= 0) return exited_;
        kill(pid_, SIGTERM);
        int status = 0;
        waitpid(pid_, &status, 0);
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    // A TLS server (--tls-cert) is addressed as localhost, the name its test certificate carries.
    std::string url(const std::string& path) const {
        return (tls_ ? "https://localhost:" : "http://127.0.0.1:") + std::to_string(port_) + path;
    }
    int port() const { return port_; }
    pid_t pid() const { return pid_; }
    void signal(int sig) const {
        if (pid_ > 0) kill(pid_, sig);
    }
    // Waits up to timeout_s for the process to exit; its exit status (128 + signal when killed),
    // or -1 when it is still running.
    int wait_exit(double timeout_s) {
        const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
        while (pid_ > 0 && std::chrono::steady_clock::now() < until) {
            int status = 0;
            if (waitpid(pid_, &status, WNOHANG) == pid_) {
                pid_ = -1;
                exited_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                return exited_;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return pid_ > 0 ? -1 : exited_;
    }
    std::string read_log() const {
        std::ifstream in(log_);
        return std::string(std::istreambuf_iterator<char>(in), {});
    }
    static std::string curl(const std::string& args, int* rc = nullptr) {
        std::string out;
        int r = run_command("curl " + args, &out);
        if (rc) *rc = r;
        return out;
    }
    // POST a form; returns "STATUS\nBODY" split.
    std::pair<int, std::string> post(const std::string& path, const std::string& form_args,
                                     const std::string& headers = "") const {
        std::string out = curl("-s -o - -w '\\n%{http_code}' " + headers + " " + form_args + " " + url(path));
        size_t nl = out.rfind('\n');
        return {std::stoi(out.substr(nl + 1)), out.substr(0, nl)};
    }

private:
    TempDir dir_;
    std::filesystem::path log_;
    pid_t pid_ = -1;
    int exited_ = -1;  // the exit status, when it ended before it was ready
    int port_ = 0;
    bool tls_ = false;
};

// A client on a raw TCP socket.
class RawClient {
public:
    explicit RawClient(int port);
    ~RawClient();
    RawClient(const RawClient&) = delete;
    RawClient& operator=(const RawClient&) = delete;
    bool connected() const { return fd_ >= 0; }
    void send(const std::string& bytes);
    void shutdown_write();  // shutdown(SHUT_WR): a half-close
    // Reads until the server closes (or timeout_s passes); everything received.
    std::string read_all(double timeout_s = 30);
    // Reads until `marker` has arrived (or timeout_s passes); everything received so far.
    std::string read_until(const std::string& marker, double timeout_s = 30);
    // Whether a read saw the server close (or reset) the connection.
    bool peer_closed() const { return peer_closed_; }
    void close();

private:
    int fd_ = -1;
    bool peer_closed_ = false;
    std::string got_;
};

// A final HTTP response (1xx interim responses skipped): status and body.
struct RawResponse {
    int status = 0;
    std::string head;
    std::string body;
};
RawResponse parse_response(const std::string& wire);

// A multipart/form-data POST with the given fields (name, value) and a file part.
std::string multipart_request(const std::string& path, const std::string& file_bytes,
                              const std::vector<std::pair<std::string, std::string>>& fields);

// Peak and current resident memory of a process (VmHWM / VmRSS from /proc), in bytes.
size_t peak_resident_bytes(pid_t pid);
size_t resident_bytes_of(pid_t pid);

}  // namespace parlance::testing
