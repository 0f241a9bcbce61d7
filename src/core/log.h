// A small leveled logger that is passed down explicitly (no process-global logger). Thread-safe:
// one line is written with one call under a mutex. Logs never contain audio or transcript text.
#pragma once

#include <cstdio>
#include <mutex>
#include <sstream>
#include <string>

namespace parlance {

enum class LogLevel { Debug = 0, Info = 1, Warn = 2, Error = 3, Off = 4 };

class Logger {
public:
    explicit Logger(LogLevel level = LogLevel::Info, std::FILE* sink = stderr)
        : level_(level), sink_(sink) {}

    LogLevel level() const { return level_; }
    void set_level(LogLevel level) { level_ = level; }
    bool enabled(LogLevel level) const { return level >= level_; }

    // Writes "<time> <LEVEL> <message>\n" if the level is enabled.
    void write(LogLevel level, const std::string& message);

    template <typename... Args>
    void debug(const Args&... args) { log(LogLevel::Debug, args...); }
    template <typename... Args>
    void info(const Args&... args) { log(LogLevel::Info, args...); }
    template <typename... Args>
    void warn(const Args&... args) { log(LogLevel::Warn, args...); }
    template <typename... Args>
    void error(const Args&... args) { log(LogLevel::Error, args...); }

    // A logger that discards everything (tests, library callers who want silence).
    static Logger& null();

private:
    template <typename... Args>
    void log(LogLevel level, const Args&... args) {
        if (!enabled(level)) return;
        std::ostringstream os;
        (os << ... << args);
        write(level, os.str());
    }

    LogLevel level_;
    std::FILE* sink_;
    std::mutex mutex_;
};

// Parses "debug|info|warn|error|off"; throws Error(InvalidArgument) otherwise.
LogLevel parse_log_level(const std::string& name);

}  // namespace parlance
