// Logger implementation.
#include "core/log.h"

#include <chrono>
#include <ctime>

#include "core/error.h"

namespace parlance {

void Logger::write(LogLevel level, const std::string& message) {
    if (!enabled(level) || sink_ == nullptr) return;
    static const char* names[] = {"DEBUG", "INFO", "WARN", "ERROR"};
    auto now = std::chrono::system_clock::now();
    std::time_t t = std::chrono::system_clock::to_time_t(now);
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
    std::tm tm{};
    gmtime_r(&t, &tm);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%H:%M:%S", &tm);
    std::lock_guard<std::mutex> lock(mutex_);
    std::fprintf(sink_, "%s.%03d %-5s %s\n", stamp, static_cast<int>(ms),
                 names[static_cast<int>(level)], message.c_str());
    std::fflush(sink_);
}

Logger& Logger::null() {
    static Logger silent(LogLevel::Off, nullptr);
    return silent;
}

LogLevel parse_log_level(const std::string& name) {
    if (name == "debug") return LogLevel::Debug;
    if (name == "info") return LogLevel::Info;
    if (name == "warn") return LogLevel::Warn;
    if (name == "error") return LogLevel::Error;
    if (name == "off") return LogLevel::Off;
    throw Error(ErrorKind::InvalidArgument, "unknown log level '" + name + "' (debug|info|warn|error|off)");
}

}  // namespace parlance
