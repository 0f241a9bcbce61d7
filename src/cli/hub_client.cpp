#include "cli/hub_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace parlance::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// libcurl's global state, initialized once for the process.
void curl_init_once() {
    static const bool done = [] { return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK; }();
    if (!done) throw Error(ErrorKind::Io, "could not initialize libcurl");
}

struct CurlHandle {
    CURL* h = curl_easy_init();
    curl_slist* headers = nullptr;
    ~CurlHandle() {
        if (headers) curl_slist_free_all(headers);
        if (h) curl_easy_cleanup(h);
    }
};

// A GET with redirects followed; the body goes to `sink`. Returns the HTTP status.
long http_get(const std::string& url, const std::string& token, size_t (*sink)(char*, size_t, size_t, void*),
              void* sink_data, curl_xferinfo_callback on_progress = nullptr, void* progress_data = nullptr) {
    curl_init_once();
    CurlHandle c;
    if (!c.h) throw Error(ErrorKind::Io, "could not create a libcurl handle");
    curl_easy_setopt(c.h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c.h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c.h, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(c.h, CURLOPT_CONNECTTIMEOUT, 30L);
    // A stalled transfer (under 1 KB/s for a minute) is an error, not a hang.
    curl_easy_setopt(c.h, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl_easy_setopt(c.h, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(c.h, CURLOPT_USERAGENT, "parlance/" PARLANCE_VERSION);
    curl_easy_setopt(c.h, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(c.h, CURLOPT_WRITEDATA, sink_data);
    if (!token.empty()) {
        c.headers = curl_slist_append(c.headers, ("Authorization: Bearer " + token).c_str());
        curl_easy_setopt(c.h, CURLOPT_HTTPHEADER, c.headers);
    }
    if (on_progress) {
        curl_easy_setopt(c.h, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(c.h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(c.h, CURLOPT_XFERINFODATA, progress_data);
    }
    const CURLcode rc = curl_easy_perform(c.h);
    long status = 0;
    curl_easy_getinfo(c.h, CURLINFO_RESPONSE_CODE, &status);
    if (rc != CURLE_OK && !(rc == CURLE_WRITE_ERROR && status >= 400))
        throw Error(ErrorKind::Io, url + ": " + curl_easy_strerror(rc));
    return status;
}

size_t to_string(char* data, size_t size, size_t n, void* out) {
    auto* s = static_cast<std::string*>(out);
    if (s->size() + size * n > (64u << 20)) return 0;  // a listing is small; refuse a runaway body
    s->append(data, size * n);
    return size * n;
}

size_t to_file(char* data, size_t size, size_t n, void* out) {
    auto* f = static_cast<std::ofstream*>(out);
    f->write(data, static_cast<std::streamsize>(size * n));
    return *f ? size * n : 0;
}

void check_status(long status, const std::string& url, const std::string& what) {
    if (status >= 200 && status < 300) return;
    if (status == 404) throw Error(ErrorKind::NotFound, url + ": " + what + " not found (HTTP 404)");
    if (status == 401 || status == 403)
        throw Error(ErrorKind::InvalidArgument,
                    url + ": HTTP " + std::to_string(status) +
                        ": the repository is gated or private; pass --token or set HF_TOKEN");
    throw Error(ErrorKind::Io, url + ": HTTP " + std::to_string(status));
}

// Files in a listing are paths inside the repository: no absolute paths, no "..".
void check_relative(const std::string& name, const std::string& repo) {
    const fs::path p(name);
    bool ok = !name.empty() && p.is_relative();
    for (const auto& part : p) ok = ok && part != ".." && part != ".";
    if (!ok) throw Error(ErrorKind::Io, repo + ": the hub listed an unsafe file name '" + name + "'");
}

struct ProgressState {
    const PullProgress* callback;
    const std::string* name;
    uint64_t total;
};

int on_progress(void* data, curl_off_t total, curl_off_t now, curl_off_t, curl_off_t) {
    auto* st = static_cast<ProgressState*>(data);
    if (*st->callback)
        (*st->callback)(*st->name, static_cast<uint64_t>(now),
                        st->total ? st->total : static_cast<uint64_t>(total > 0 ? total : 0));
    return 0;
}

}  // namespace

namespace {

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// The file of `files` whose name holds the variant label (-Q8_0. / -f16.), else "".
std::string with_variant(const std::vector<std::string>& files, const std::string& variant) {
    const std::string v = lower(variant);
    for (const std::string& f : files) {
        const std::string n = lower(fs::path(f).filename().string());
        const size_t at = n.rfind(v);
        if (at != std::string::npos && at > 0 && (n[at - 1] == '-' || n[at - 1] == '.' || n[at - 1] == '_') &&
            n.compare(at + v.size(), 5, ".gguf") == 0)
            return f;
    }
    return {};
}

// llama.cpp's layout: model GGUFs and mmproj GGUFs of several variants; one of each.
std::vector<std::string> gguf_pair_to_pull(const std::vector<std::string>& files, const std::string& quant) {
    std::vector<std::string> models, projectors;
    for (const std::string& f : files) {
        if (!f.ends_with(".gguf")) continue;
        (lower(fs::path(f).filename().string()).starts_with("mmproj") ? projectors : models).push_back(f);
    }
    if (models.empty()) return {};
    std::string model;
    if (!quant.empty()) {
        model = with_variant(models, quant);
        if (model.empty()) {
            std::string there;
            for (const std::string& m : models) there += (there.empty() ? "" : ", ") + m;
            throw Error(ErrorKind::NotFound, "no model GGUF of the variant '" + quant + "' (there are: " + there + ")");
        }
    } else {
        model = with_variant(models, "q8_0");
        if (model.empty()) model = with_variant(models, "f16");
        if (model.empty()) model = models.front();
    }
    std::vector<std::string> out = {model};
    if (!projectors.empty()) {
        // The projector of the model's variant (its name's last -LABEL: Q8_0, Q5_K_M), else f16,
        // else the first.
        const std::string stem = fs::path(model).stem().string();
        const size_t dash = stem.rfind('-');
        std::string p = dash == std::string::npos ? "" : with_variant(projectors, stem.substr(dash + 1));
        if (p.empty()) p = with_variant(projectors, "f16");
        if (p.empty()) p = projectors.front();
        out.push_back(p);
    }
    return out;
}

}  // namespace

std::vector<std::string> files_to_pull(const std::vector<std::string>& repository_files, const std::string& quant) {
    static const std::regex wanted(
        R"((config|generation_config|preprocessor_config|tokenizer|tokenizer_config|special_tokens_map|)"
        R"(added_tokens|normalizer|vocab)\.json|merges\.txt|model\.safetensors|model\.safetensors\.index\.json|)"
        R"(model-\d+-of-\d+\.safetensors)");
    std::vector<std::string> out;
    for (const std::string& f : repository_files)
        if (std::regex_match(f, wanted)) out.push_back(f);
    const bool has_weights =
        std::any_of(out.begin(), out.end(), [](const std::string& f) { return f.ends_with(".safetensors"); });
    if (!has_weights) {
        std::vector<std::string> pair = gguf_pair_to_pull(repository_files, quant);
        if (!pair.empty()) return pair;
    }
    return out;
}

PullResult pull_snapshot(const PullOptions& o, const PullProgress& progress) {
    static const std::regex repo_id(R"([A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*)");
    if (!std::regex_match(o.repo, repo_id))
        throw Error(ErrorKind::InvalidArgument, "'" + o.repo + "' is not a repository id (expected ORG/NAME)");
    std::string endpoint = o.endpoint;
    while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();

    // The listing, with sizes (blobs=true), for this revision.
    const std::string api = endpoint + "/api/models/" + o.repo + "/revision/" + o.revision + "?blobs=true";
    std::string body;
    check_status(http_get(api, o.token, to_string, &body), api, "repository " + o.repo + " at revision " + o.revision);
    json listing = json::parse(body, nullptr, false);
    if (!listing.is_object() || !listing.contains("siblings") || !listing["siblings"].is_array())
        throw Error(ErrorKind::Io, api + ": not a model listing (no \"siblings\")");
    PullResult result;
    result.commit = listing.value("sha", o.revision);
    std::map<std::string, uint64_t> sizes;
    std::vector<std::string> names;
    for (const json& s : listing["siblings"]) {
        if (!s.is_object() || !s.contains("rfilename") || !s["rfilename"].is_string()) continue;
        const std::string name = s["rfilename"];
        names.push_back(name);
        if (s.contains("size") && s["size"].is_number_unsigned()) sizes[name] = s["size"].get<uint64_t>();
    }
    std::vector<std::string> chosen;
    try {
        chosen = o.files.empty() ? files_to_pull(names, o.quant) : o.files;
    } catch (const Error& e) {
        throw Error(e.kind(), o.repo + ": " + e.what());
    }
    const bool gguf = !chosen.empty() && chosen.front().ends_with(".gguf");
    if (o.files.empty() && !gguf &&
        (std::find(chosen.begin(), chosen.end(), "config.json") == chosen.end() ||
         std::none_of(chosen.begin(), chosen.end(), [](const std::string& f) { return f.ends_with(".safetensors"); })))
        throw Error(ErrorKind::Unsupported,
                    o.repo +
                        ": no config.json and safetensors weights, and no GGUF files to load (pass --file to "
                        "pick files, e.g. a whisper.cpp .bin)");

    fs::create_directories(o.dir);
    for (const std::string& name : chosen) {
        check_relative(name, o.repo);
        if (!o.files.empty() && std::find(names.begin(), names.end(), name) == names.end())
            throw Error(ErrorKind::NotFound, o.repo + ": no file '" + name + "' at revision " + o.revision);
        const fs::path dest = o.dir / name;
        const auto known = sizes.find(name);
        std::error_code ec;
        if (known != sizes.end() && fs::is_regular_file(dest, ec) && fs::file_size(dest, ec) == known->second) {
            result.files.push_back({name, known->second, false});
            continue;
        }
        if (dest.has_parent_path()) fs::create_directories(dest.parent_path());
        const fs::path part = dest.string() + ".part";
        const std::string url = endpoint + "/" + o.repo + "/resolve/" + o.revision + "/" + name;
        long status = 0;
        {
            std::ofstream out(part, std::ios::binary | std::ios::trunc);
            if (!out) throw Error(ErrorKind::Io, "cannot write " + part.string());
            ProgressState st{&progress, &name, known != sizes.end() ? known->second : 0};
            status = http_get(url, o.token, to_file, &out, on_progress, &st);
            out.close();
            if (!out) throw Error(ErrorKind::Io, "cannot write " + part.string());
        }
        try {
            check_status(status, url, "file " + name);
        } catch (...) {
            fs::remove(part, ec);
            throw;
        }
        const uint64_t got = fs::file_size(part);
        if (known != sizes.end() && got != known->second) {
            fs::remove(part, ec);
            throw Error(ErrorKind::Io, url + ": received " + std::to_string(got) + " bytes, the listing says " +
                                           std::to_string(known->second));
        }
        fs::rename(part, dest);
        result.files.push_back({name, got, true});
    }
    return result;
}

}  // namespace parlance::cli
