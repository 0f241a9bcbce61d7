// Helpers shared by the unit tests: where fixtures and assets live, temporary directories.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace parlance::testing {

// Directory with the assets scripts/setup.sh fetched (vocabularies, recordings, VAD weights).
std::filesystem::path assets_dir();
// tests/fixtures in the source tree (committed reference outputs).
std::filesystem::path fixtures_dir();
// The parlance binary under test.
std::filesystem::path parlance_binary();
// The bundled default model (models/parlance-synth-en in the source tree) and its samples
// (samples/NAME.wav with the reference text in samples/NAME.txt).
std::filesystem::path bundled_model_dir();

// Lower-case words of a text (letters and apostrophes; everything else separates).
std::vector<std::string> words(const std::string& text);
// Fraction of the reference's words that the hypothesis contains (each word counted as often
// as it occurs in both): a content check that tolerates a small model's slips.
double word_recall(const std::string& reference, const std::string& hypothesis);
// A content check that tolerates a small model's slips but not a loop or a hallucination: the
// reference is not empty, at least 80 % of its words are in the hypothesis, and at least 60 % of
// the hypothesis' words are in the reference.
bool words_match(const std::string& reference, const std::string& hypothesis);

// A fresh temporary directory, removed when the object dies.
class TempDir {
public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::filesystem::path& path() const { return path_; }
    std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

private:
    std::filesystem::path path_;
};

// Reads a whole file as bytes; writes bytes to a file (creating parent directories).
std::string read_file(const std::filesystem::path& path);
void write_file(const std::filesystem::path& path, const std::string& bytes);

// 'text' single-quoted for the shell (paths without quotes in them).
std::string quoted(const std::string& text);

// Runs a shell command, returns its exit status; captures stdout+stderr into *output if given.
int run_command(const std::string& command, std::string* output = nullptr);

}  // namespace parlance::testing
