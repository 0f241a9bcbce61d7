// `parlance top [--url URL]... [--once]`: a terminal monitor of running servers, built only on
// what they publish (/metrics and /v1/status): per server the speech engine, the chat model
// (queue, running sequences, batch width, prompt and generated tokens/s, time to first token,
// inter-token and end-to-end latency percentiles over the lifetime and the last --window
// seconds, prefix-cache hit rate, KV occupancy), live sessions and HTTP errors.
#include <curl/curl.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/error.h"

namespace parlance::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct TopArgs {
    std::vector<std::string> urls;
    std::string api_key;
    double interval = 2.0;
    double window = 30.0;
    bool once = false;
};

size_t append(char* data, size_t size, size_t n, void* out) {
    static_cast<std::string*>(out)->append(data, size * n);
    return size * n;
}

// GET url; the body, or an empty optional with `error` set.
std::optional<std::string> http_get(const std::string& url, const std::string& key, std::string& error) {
    CURL* c = curl_easy_init();
    std::string body;
    curl_slist* headers = nullptr;
    if (!key.empty()) headers = curl_slist_append(headers, ("Authorization: Bearer " + key).c_str());
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, append);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 3000L);
    const CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(c);
    if (rc != CURLE_OK) {
        error = curl_easy_strerror(rc);
        return std::nullopt;
    }
    if (status != 200) {
        error = "HTTP " + std::to_string(status) + (status == 401 ? " (give --api-key)" : "");
        return std::nullopt;
    }
    return body;
}

// Prometheus text: "name{labels} value" -> value (comments skipped).
using Series = std::map<std::string, double>;
Series parse_metrics(const std::string& text) {
    Series s;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        const size_t sp = line.rfind(' ');
        if (sp == std::string::npos) continue;
        try {
            s[line.substr(0, sp)] = std::stod(line.substr(sp + 1));
        } catch (...) {
        }
    }
    return s;
}

double get(const Series& s, const std::string& key) {
    auto it = s.find(key);
    return it == s.end() ? 0.0 : it->second;
}

// A histogram's cumulative buckets (upper bound -> count), as of one scrape, minus an earlier one.
std::vector<std::pair<double, double>> buckets(const Series& now, const Series* before, const std::string& name) {
    std::vector<std::pair<double, double>> out;
    const std::string prefix = name + "_bucket{le=\"";
    for (auto it = now.lower_bound(prefix); it != now.end() && it->first.rfind(prefix, 0) == 0; ++it) {
        const std::string le = it->first.substr(prefix.size(), it->first.size() - prefix.size() - 2);
        const double bound = le == "+Inf" ? INFINITY : std::stod(le);
        out.emplace_back(bound, it->second - (before ? get(*before, it->first) : 0.0));
    }
    std::sort(out.begin(), out.end());
    return out;
}

// Prometheus' histogram_quantile: linear within the bucket; NaN without observations.
double quantile(const std::vector<std::pair<double, double>>& b, double q) {
    if (b.empty() || b.back().second <= 0) return NAN;
    const double rank = q * b.back().second;
    double lo = 0, below = 0;
    for (const auto& [bound, count] : b) {
        if (count >= rank) {
            if (std::isinf(bound)) return lo;
            return lo + (bound - lo) * (count > below ? (rank - below) / (count - below) : 0.0);
        }
        lo = bound;
        below = count;
    }
    return lo;
}

std::string seconds(double s) {
    if (std::isnan(s)) return "-";
    char buf[32];
    if (s < 1)
        std::snprintf(buf, sizeof buf, "%.0fms", s * 1000);
    else
        std::snprintf(buf, sizeof buf, "%.2fs", s);
    return buf;
}

std::string num(double v, int decimals = 1) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    return buf;
}

struct Scrape {
    Clock::time_point at;
    Series metrics;
    nlohmann::json status;
    std::string error;
};

// Each server's scrapes, oldest first, kept for the window.
struct Server {
    std::string url;
    std::deque<Scrape> history;
};

Scrape scrape(const std::string& url, const std::string& key) {
    Scrape s;
    s.at = Clock::now();
    auto m = http_get(url + "/metrics", key, s.error);
    if (!m) return s;
    s.metrics = parse_metrics(*m);
    auto st = http_get(url + "/v1/status", key, s.error);
    if (st) s.status = nlohmann::json::parse(*st, nullptr, false);
    return s;
}

// The scrape closest to `window` seconds before the newest (the oldest if none is that old).
const Scrape* window_start(const Server& s, double window) {
    if (s.history.size() < 2) return nullptr;
    const Scrape* pick = &s.history.front();
    for (const Scrape& x : s.history)
        if (std::chrono::duration<double>(s.history.back().at - x.at).count() >= window) pick = &x;
    return pick == &s.history.back() ? nullptr : pick;
}

std::string latency_line(const char* label, const std::string& name, const Series& now, const Series* before) {
    const auto life = buckets(now, nullptr, name);
    std::string line = std::string("    ") + label;
    line.resize(12, ' ');
    line += "p50 " + seconds(quantile(life, 0.5)) + "  p90 " + seconds(quantile(life, 0.9)) + "  p99 " +
            seconds(quantile(life, 0.99));
    if (before) {
        const auto recent = buckets(now, before, name);
        line += "   | recent p50 " + seconds(quantile(recent, 0.5)) + "  p90 " + seconds(quantile(recent, 0.9)) +
                "  p99 " + seconds(quantile(recent, 0.99));
    }
    return line + "\n";
}

std::string draft_acceptance(const Series& m) {
    const double proposed = get(m, "parlance_chat_draft_tokens_total{outcome=\"proposed\"}");
    if (proposed <= 0) return "- (no drafts)";
    return num(100.0 * get(m, "parlance_chat_draft_tokens_total{outcome=\"accepted\"}") / proposed) + "%";
}

std::string frame(const std::vector<Server>& servers, const TopArgs& a) {
    std::ostringstream os;
    os << "parlance top: " << servers.size() << (servers.size() == 1 ? " server" : " servers") << ", every "
       << num(a.interval, 1) << " s; recent = the last " << num(a.window, 0) << " s\n\n";
    for (const Server& s : servers) {
        const Scrape& now = s.history.back();
        os << s.url;
        if (!now.error.empty()) {
            os << "  UNREACHABLE: " << now.error << "\n\n";
            continue;
        }
        const Series& m = now.metrics;
        const nlohmann::json& st = now.status;
        const Scrape* prev = s.history.size() >= 2 ? &s.history[s.history.size() - 2] : nullptr;
        const Scrape* win = window_start(s, a.window);
        const double dt = prev ? std::chrono::duration<double>(now.at - prev->at).count() : 0;
        auto rate = [&](const std::string& key) {
            return prev && dt > 0 ? (get(m, key) - get(prev->metrics, key)) / dt : NAN;
        };
        if (st.is_object()) {
            os << "  " << (st.value("ready", false) ? "ready" : "loading") << ", " << st.value("device", "?") << ", up "
               << num(st.value("uptime_seconds", 0.0) / 60.0, 1) << " min, rss "
               << (st.value("resident_memory_bytes", 0) >> 20) << " MiB";
        }
        os << "\n";
        // Speech.
        os << "  speech  " << (st.is_object() ? st.value("model", "?") : "?") << ": queue "
           << get(m, "parlance_queue_depth") << ", active " << get(m, "parlance_active_requests") << ", live sessions "
           << get(m, "parlance_realtime_sessions") << ", decode "
           << (prev ? num(rate("parlance_decode_tokens_total")) : std::string("-")) << " tok/s, engine busy "
           << (prev ? num(100.0 * rate("parlance_engine_seconds_total{phase=\"busy\"}")) : std::string("-"))
           << "% (forward passes "
           << (prev ? num(100.0 * (rate("parlance_engine_seconds_total{phase=\"encoder\"}") +
                                   rate("parlance_engine_seconds_total{phase=\"decoder_forward\"}")))
                    : std::string("-"))
           << "%)\n";
        // Accelerators (a GPU server's /v1/status lists them).
        if (st.is_object() && st.contains("devices"))
            for (const auto& d : st["devices"]) {
                const double total = d.value("total_bytes", 0.0), free = d.value("free_bytes", 0.0);
                os << "  device  " << d.value("name", "?") << ": memory " << num((total - free) / (1 << 20), 0) << " / "
                   << num(total / (1 << 20), 0) << " MiB used\n";
            }
        // Chat.
        if (st.is_object() && st.contains("chat")) {
            const auto& c = st["chat"];
            const double steps = rate("parlance_chat_steps_total");
            const double sampled = rate("parlance_chat_step_tokens_total{kind=\"sampled\"}");
            const double computed = rate("parlance_chat_step_tokens_total{kind=\"computed\"}");
            os << "  chat    " << c.value("model", "?") << ": queue " << c.value("queue", 0) << ", running "
               << c.value("running_sequences", 0) << ", batch "
               << (prev && steps > 0 ? num(sampled / steps) : std::string("-")) << ", prompt "
               << (prev ? num(computed - sampled) : std::string("-")) << " tok/s, generated "
               << (prev ? num(sampled) : std::string("-")) << " tok/s\n";
            const Series* before = win ? &win->metrics : nullptr;
            os << latency_line("TTFT", "parlance_chat_time_to_first_token_seconds", m, before);
            os << latency_line("ITL", "parlance_chat_inter_token_seconds", m, before);
            os << latency_line("E2E", "parlance_chat_request_seconds", m, before);
            const double prompt = get(m, "parlance_chat_prompt_tokens_total");
            const double cached = get(m, "parlance_chat_cached_prompt_tokens_total");
            const auto& kv = c.value("kv_cache", nlohmann::json::object());
            const double total = kv.value("total_blocks", 0), used = kv.value("used_blocks", 0),
                         cb = kv.value("cached_blocks", 0);
            os << "    prefix cache hit " << (prompt > 0 ? num(100.0 * cached / prompt) : std::string("-")) << "%, KV "
               << (total > 0 ? num(100.0 * used / total) : std::string("-")) << "% used + "
               << (total > 0 ? num(100.0 * cb / total) : std::string("-")) << "% cached, draft acceptance "
               << draft_acceptance(m) << ", requests " << c.value("completed", 0) << " done / "
               << c.value("cancelled", 0) << " cancelled / " << c.value("failed", 0) << " failed\n";
        }
        // HTTP.
        double total = 0, e4 = 0, e5 = 0;
        for (const auto& [k, v] : m) {
            if (k.rfind("parlance_requests_total{", 0) != 0) continue;
            total += v;
            const size_t at = k.find("status=\"");
            if (at == std::string::npos) continue;
            const char cls = k[at + 8];
            if (cls == '4') e4 += v;
            if (cls == '5') e5 += v;
        }
        os << "  http    requests " << total << ", 4xx " << e4 << ", 5xx " << e5 << "\n\n";
    }
    return os.str();
}

void run(const TopArgs& in) {
    TopArgs a = in;
    if (a.urls.empty()) a.urls.push_back("http://127.0.0.1:8000");
    if (a.api_key.empty())
        if (const char* k = std::getenv("PARLANCE_API_KEY")) a.api_key = k;
    if (!(a.interval > 0)) throw Error(ErrorKind::InvalidArgument, "--interval must be > 0 seconds");
    curl_global_init(CURL_GLOBAL_DEFAULT);
    std::vector<Server> servers;
    for (auto url : a.urls) {
        while (!url.empty() && url.back() == '/') url.pop_back();
        servers.push_back({url, {}});
    }
    const auto keep = std::chrono::duration<double>(a.window + 3 * a.interval);
    for (int n = 0;; ++n) {
        for (Server& s : servers) {
            s.history.push_back(scrape(s.url, a.api_key));
            while (s.history.size() > 2 && s.history.back().at - s.history.front().at > keep) s.history.pop_front();
        }
        if (a.once) {
            if (n == 0) {  // rates need two scrapes
                std::this_thread::sleep_for(std::chrono::duration<double>(std::min(a.interval, 1.0)));
                continue;
            }
            std::fputs(frame(servers, a).c_str(), stdout);
            return;
        }
        std::fputs("\x1b[H\x1b[2J", stdout);  // home, clear
        std::fputs(frame(servers, a).c_str(), stdout);
        std::fflush(stdout);
        std::this_thread::sleep_for(std::chrono::duration<double>(a.interval));
    }
}

}  // namespace

void register_top(CLI::App& app, GlobalOptions& /*globals*/) {
    auto a = std::make_shared<TopArgs>();
    auto* cmd = app.add_subcommand(
        "top",
        "Watch running servers: queues, batches, tokens/s, latency percentiles, prefix cache, KV, live sessions,\n"
        "HTTP errors (reads /metrics and /v1/status only). Ctrl-C quits.\n"
        "Example: parlance top --url http://127.0.0.1:8000 --url http://10.0.0.2:8000");
    cmd->add_option("--url", a->urls, "A server's base URL (repeat for several; default http://127.0.0.1:8000)");
    cmd->add_option("--api-key", a->api_key, "The servers' key (default $PARLANCE_API_KEY)");
    cmd->add_option("--interval", a->interval, "Seconds between frames")->default_val(2.0);
    cmd->add_option("--window", a->window, "Seconds of the 'recent' percentiles")->default_val(30.0);
    cmd->add_flag("--once", a->once, "Print one frame (two scrapes, a second apart) and exit: for scripts");
    cmd->callback([a] { run(*a); });
}

}  // namespace parlance::cli
