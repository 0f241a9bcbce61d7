// `parlance pull` against a local server laid out like the Hugging Face hub (the listing at
// /api/models/ORG/NAME/revision/REV, files at /ORG/NAME/resolve/REV/FILE), serving a fixture
// checkpoint: what is fetched, what is skipped, and every failure's message.
#include <atomic>
#include <fstream>
#include <map>
#include <thread>

#include <gtest/gtest.h>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "cli/hub_client.h"
#include "core/error.h"
#include "qwen3_fixture.h"
#include "test_support.h"

namespace parlance {
namespace {

namespace fs = std::filesystem;
namespace http = boost::beast::http;
using boost::asio::ip::tcp;
using nlohmann::json;
using testing::quoted;
using testing::TempDir;

const fs::path kModel = testing::fixtures_dir() / "whisper" / "tiny-en" / "model";

// A one-thread HTTP server: GET TARGET (query dropped) -> the file at root/TARGET, else 404.
// `need_token`: every request without "Authorization: Bearer secret" gets 401.
class FakeHub {
public:
    explicit FakeHub(bool need_token = false)
        : need_token_(need_token), acceptor_(io_, {boost::asio::ip::make_address("127.0.0.1"), 0}) {
        thread_ = std::thread([this] { serve(); });
    }
    ~FakeHub() {
        stop_ = true;
        boost::system::error_code ec;
        tcp::socket poke(io_);
        poke.connect({boost::asio::ip::make_address("127.0.0.1"), port()}, ec);  // wakes accept()
        thread_.join();
    }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(port()); }
    int file_requests() const { return file_requests_; }

    // Publishes a repository: the files of `from` (sizes in the listing, `size_delta` added to
    // model.safetensors' size), plus files parlance must not fetch.
    void publish(const std::string& repo, const fs::path& from, int64_t size_delta = 0) {
        json siblings = json::array();
        for (const auto& e : fs::directory_iterator(from)) {
            const std::string name = e.path().filename().string();
            fs::create_directories(root_ / repo / "resolve" / "main");
            fs::copy_file(e.path(), root_ / repo / "resolve" / "main" / name);
            int64_t size = static_cast<int64_t>(fs::file_size(e.path()));
            if (name == "model.safetensors") size += size_delta;
            siblings.push_back({{"rfilename", name}, {"size", size}});
        }
        siblings.push_back({{"rfilename", "README.md"}, {"size", 10}});
        siblings.push_back({{"rfilename", "pytorch_model.bin"}, {"size", 10}});
        siblings.push_back({{"rfilename", "flax_model.msgpack"}, {"size", 10}});
        testing::write_file(root_ / "api" / "models" / repo / "revision" / "main",
                            json{{"sha", "0123abcd"}, {"siblings", siblings}}.dump());
    }

private:
    unsigned short port() const { return acceptor_.local_endpoint().port(); }
    void serve() {
        while (!stop_) {
            boost::system::error_code ec;
            tcp::socket s(io_);
            acceptor_.accept(s, ec);
            if (ec || stop_) break;
            boost::beast::flat_buffer buf;
            http::request<http::string_body> req;
            http::read(s, buf, req, ec);
            if (ec) continue;
            std::string target(req.target());
            target = target.substr(0, target.find('?'));
            http::response<http::string_body> res;
            res.version(req.version());
            res.keep_alive(false);
            const fs::path file = root_ / target.substr(1);
            if (need_token_ && req[http::field::authorization] != "Bearer secret") {
                res.result(http::status::unauthorized);
            } else if (target.find("..") == std::string::npos && fs::is_regular_file(file)) {
                if (target.find("/resolve/") != std::string::npos) ++file_requests_;
                res.result(http::status::ok);
                res.body() = testing::read_file(file);
            } else {
                res.result(http::status::not_found);
                res.body() = "{\"error\":\"Repository not found\"}";
            }
            res.prepare_payload();
            http::write(s, res, ec);
        }
    }

    TempDir root_dir_;
    const fs::path& root_ = root_dir_.path();
    bool need_token_;
    boost::asio::io_context io_;
    tcp::acceptor acceptor_;
    std::thread thread_;
    std::atomic<bool> stop_{false};
    std::atomic<int> file_requests_{0};
};

int pull(const FakeHub& hub, const std::string& args, std::string* out) {
    return testing::run_command(
        quoted(testing::parlance_binary().string()) + " pull --endpoint " + hub.url() + " " + args + " 2>&1", out);
}

TEST(Pull, FetchesWhatParlanceLoadsThenSkipsWhatIsPresent) {
    FakeHub hub;
    hub.publish("test/tiny-en", kModel);
    TempDir dest;
    std::string out;
    ASSERT_EQ(pull(hub, "test/tiny-en --dir " + quoted(dest.path().string()), &out), 0) << out;
    for (const auto& e : fs::directory_iterator(kModel))
        EXPECT_EQ(testing::read_file(dest / e.path().filename().string()), testing::read_file(e.path()))
            << e.path().filename();
    for (const char* absent : {"README.md", "pytorch_model.bin", "flax_model.msgpack", "model.safetensors.part"})
        EXPECT_FALSE(fs::exists(dest / absent)) << absent;
    EXPECT_NE(out.find("0123abcd"), std::string::npos) << out;
    EXPECT_NE(out.find(dest.path().string()), std::string::npos) << out;  // the folder, for --model
    const int fetched = hub.file_requests();
    EXPECT_EQ(fetched, 6);

    // The pulled folder is a model parlance loads.
    std::string info;
    EXPECT_EQ(
        testing::run_command(
            quoted(testing::parlance_binary().string()) + " info " + quoted(dest.path().string()) + " 2>&1", &info),
        0)
        << info;

    // Again: everything is present with the listed size, nothing is downloaded.
    ASSERT_EQ(pull(hub, "test/tiny-en --dir " + quoted(dest.path().string()), &out), 0) << out;
    EXPECT_EQ(hub.file_requests(), fetched);
    EXPECT_NE(out.find("present model.safetensors"), std::string::npos) << out;
}

TEST(Pull, ExplicitFilesOnly) {
    FakeHub hub;
    hub.publish("test/tiny-en", kModel);
    TempDir dest;
    std::string out;
    ASSERT_EQ(pull(hub, "test/tiny-en -f config.json -f tokenizer.json --dir " + quoted(dest.path().string()), &out), 0)
        << out;
    EXPECT_TRUE(fs::exists(dest / "config.json"));
    EXPECT_TRUE(fs::exists(dest / "tokenizer.json"));
    EXPECT_FALSE(fs::exists(dest / "model.safetensors"));
    EXPECT_NE(pull(hub, "test/tiny-en -f missing.gguf --dir " + quoted(dest.path().string()), &out), 0);
    EXPECT_NE(out.find("missing.gguf"), std::string::npos) << out;
}

TEST(Pull, Failures) {
    FakeHub hub;
    hub.publish("test/short", kModel, /*size_delta=*/1);
    TempDir dest;
    std::string out;

    EXPECT_NE(pull(hub, "test/absent --dir " + quoted(dest.path().string()), &out), 0);
    EXPECT_NE(out.find("not found"), std::string::npos) << out;

    EXPECT_NE(pull(hub, "not-a-repo-id", &out), 0);
    EXPECT_NE(out.find("ORG/NAME"), std::string::npos) << out;

    // The listing promises one byte more than arrives: an error, and no file that looks whole.
    EXPECT_NE(pull(hub, "test/short --dir " + quoted(dest.path().string()), &out), 0);
    EXPECT_NE(out.find("model.safetensors"), std::string::npos) << out;
    EXPECT_FALSE(fs::exists(dest / "model.safetensors"));
    EXPECT_FALSE(fs::exists(dest / "model.safetensors.part"));

    // Nobody listening.
    EXPECT_NE(testing::run_command(quoted(testing::parlance_binary().string()) +
                                       " pull test/short --endpoint http://127.0.0.1:1 --dir " +
                                       quoted(dest.path().string()) + " 2>&1",
                                   &out),
              0);
    EXPECT_NE(out.find("127.0.0.1:1"), std::string::npos) << out;
}

TEST(Pull, GatedRepositoryNeedsAToken) {
    FakeHub hub(/*need_token=*/true);
    hub.publish("test/gated", kModel);
    TempDir dest;
    std::string out;
    EXPECT_NE(pull(hub, "test/gated --dir " + quoted(dest.path().string()), &out), 0);
    EXPECT_NE(out.find("HF_TOKEN"), std::string::npos) << out;
    ASSERT_EQ(
        testing::run_command("HF_TOKEN=secret " + quoted(testing::parlance_binary().string()) + " pull --endpoint " +
                                 hub.url() + " test/gated --dir " + quoted(dest.path().string()) + " 2>&1",
                             &out),
        0)
        << out;
    EXPECT_TRUE(fs::exists(dest / "model.safetensors"));
}

TEST(Pull, WhichFilesParlanceNeeds) {
    const std::vector<std::string> repo = {"config.json",
                                           "generation_config.json",
                                           "tokenizer.json",
                                           "merges.txt",
                                           "vocab.json",
                                           "model.safetensors.index.json",
                                           "model-00001-of-00002.safetensors",
                                           "model-00002-of-00002.safetensors",
                                           "pytorch_model.bin",
                                           "flax_model.msgpack",
                                           "tf_model.h5",
                                           "README.md",
                                           ".gitattributes",
                                           "onnx/encoder_model.onnx",
                                           "ggml-base.bin"};
    const std::vector<std::string> want = {"config.json",
                                           "generation_config.json",
                                           "tokenizer.json",
                                           "merges.txt",
                                           "vocab.json",
                                           "model.safetensors.index.json",
                                           "model-00001-of-00002.safetensors",
                                           "model-00002-of-00002.safetensors"};
    EXPECT_EQ(cli::files_to_pull(repo), want);
}

// A repository of llama.cpp GGUFs (ggml-org/Qwen3-ASR-0.6B-GGUF's layout): one model file and the
// mmproj of the same variant.
TEST(Pull, AGgufRepositoryGivesOneModelAndItsMmproj) {
    const std::vector<std::string> repo = {"README.md",
                                           ".gitattributes",
                                           "Qwen3-ASR-0.6B-f16.gguf",
                                           "Qwen3-ASR-0.6B-Q8_0.gguf",
                                           "mmproj-Qwen3-ASR-0.6B-f16.gguf",
                                           "mmproj-Qwen3-ASR-0.6B-Q8_0.gguf"};
    EXPECT_EQ(cli::files_to_pull(repo),
              (std::vector<std::string>{"Qwen3-ASR-0.6B-Q8_0.gguf", "mmproj-Qwen3-ASR-0.6B-Q8_0.gguf"}));
    EXPECT_EQ(cli::files_to_pull(repo, "F16"),
              (std::vector<std::string>{"Qwen3-ASR-0.6B-f16.gguf", "mmproj-Qwen3-ASR-0.6B-f16.gguf"}));
    // The projector of the model's whole variant label, wherever it is listed.
    EXPECT_EQ(cli::files_to_pull({"m-Q4_0.gguf", "m-Q8_0.gguf", "mmproj-m-Q4_0.gguf", "mmproj-m-Q8_0.gguf"}),
              (std::vector<std::string>{"m-Q8_0.gguf", "mmproj-m-Q8_0.gguf"}));
    EXPECT_EQ(cli::files_to_pull({"m-Q5_K_M.gguf", "mmproj-m-Q4_K_M.gguf", "mmproj-m-Q5_K_M.gguf"}),
              (std::vector<std::string>{"m-Q5_K_M.gguf", "mmproj-m-Q5_K_M.gguf"}));
    // A variant without its own projector takes the f16 one.
    EXPECT_EQ(cli::files_to_pull({"m-Q4_K_M.gguf", "mmproj-m-f16.gguf"}),
              (std::vector<std::string>{"m-Q4_K_M.gguf", "mmproj-m-f16.gguf"}));
    EXPECT_THROW(cli::files_to_pull(repo, "q2_k"), Error);

    // End to end: the pulled folder is a pair parlance loads.
    testing::TempDir pair, published;
    testing::write_qwen3_asr("tiny", pair.path(), /*gguf_pair=*/true);
    for (const char* v : {"Q8_0", "f16"}) {
        fs::copy_file(pair / "model.gguf", published / (std::string("tiny-") + v + ".gguf"));
        fs::copy_file(pair / "mmproj.gguf", published / (std::string("mmproj-tiny-") + v + ".gguf"));
    }
    FakeHub hub;
    hub.publish("test/tiny-gguf", published.path());
    TempDir dest;
    std::string out;
    ASSERT_EQ(pull(hub, "test/tiny-gguf --dir " + quoted(dest.path().string()), &out), 0) << out;
    EXPECT_TRUE(fs::exists(dest / "tiny-Q8_0.gguf"));
    EXPECT_TRUE(fs::exists(dest / "mmproj-tiny-Q8_0.gguf"));
    EXPECT_FALSE(fs::exists(dest / "tiny-f16.gguf"));
    EXPECT_NE(out.find(dest.path().string() + "\n"), std::string::npos) << out;  // the folder, not a file in it
    std::string info;
    EXPECT_EQ(
        testing::run_command(
            quoted(testing::parlance_binary().string()) + " info " + quoted(dest.path().string()) + " 2>&1", &info),
        0)
        << info;
    EXPECT_NE(info.find("qwen3a"), std::string::npos) << info;
}

}  // namespace
}  // namespace parlance
