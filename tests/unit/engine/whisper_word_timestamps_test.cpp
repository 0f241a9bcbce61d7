// Word timestamps in a whole transcription (the decodes on the generation engine): every
// segment's words join to its text, in order and inside the audio, with or without the model's
// named alignment heads (a whisper.cpp file names none), and none without the option.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "audio/wav.h"
#include "core/backend.h"
#include "models/whisper/model.h"
#include "models/whisper/runner.h"
#include "test_support.h"
#include "whisper_on_engine.h"

namespace parlance::whisper {
namespace {

TEST(WhisperWordTimestamps, TranscriptionFillsWordsEvenWithoutAlignmentHeads) {
    Backend backend(BackendOptions{"cpu", 2});
    auto model_ = WhisperModel::load(testing::fixtures_dir() / "whisper" / "tiny-en" / "model", backend);
    WhisperRunner runner(model_->config, *model_->weights, backend, 1);
    std::vector<float> pcm = read_wav_file(testing::fixtures_dir() / "audio" / "jfk.wav").samples;
    for (bool named : {true, false}) {
        if (!named) model_->tokens.alignment_heads.clear();  // e.g. a whisper.cpp file
        TranscribeOptions o;
        o.word_timestamps = true;
        o.temperatures = {0.0f};
        o.max_new_tokens = 12;
        o.no_speech_threshold = 2.0f;  // never skip the window
        o.logprob_threshold = -1e9f;
        Transcript t = testing::transcribe_on_engine(*model_, runner, pcm, o);
        size_t n_words = 0;
        for (const Segment& s : t.segments) {
            std::string joined;
            double prev = 0;
            for (const Word& w : s.words) {
                joined += w.word;
                EXPECT_LE(w.start, w.end);
                EXPECT_GE(w.start, prev);
                EXPECT_LE(w.end, t.duration);
                EXPECT_GE(w.probability, 0.0f);
                EXPECT_LE(w.probability, 1.0f);
                prev = w.start;
            }
            EXPECT_EQ(joined, s.text) << "named heads " << named;
            n_words += s.words.size();
        }
        EXPECT_GT(n_words, 0u) << "named heads " << named;
        // Without the option, no words.
        o.word_timestamps = false;
        for (const Segment& s : testing::transcribe_on_engine(*model_, runner, pcm, o).segments)
            EXPECT_TRUE(s.words.empty());
    }
}

}  // namespace
}  // namespace parlance::whisper
