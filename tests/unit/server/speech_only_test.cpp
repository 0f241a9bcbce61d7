// The time mapping of chunking_strategy server_vad (server/speech_only): times in the buffer of
// speech pieces back onto the file's timeline.
#include <gtest/gtest.h>

#include "server/speech_only.h"

namespace parlance::server {
namespace {

TEST(SpeechOnly, TimesMapBackOntoTheFile) {
    SpeechOnly s;
    // Speech at 3.0-5.0 s and 9.5-10.5 s of the file, back to back with a 0.2 s gap.
    s.pieces = {{0.0, 3.0, 2.0}, {2.2, 9.5, 1.0}};
    EXPECT_DOUBLE_EQ(s.original_time(0.0), 3.0);
    EXPECT_DOUBLE_EQ(s.original_time(1.5), 4.5);
    EXPECT_DOUBLE_EQ(s.original_time(2.1), 5.0);  // in the gap: the end of the piece before
    EXPECT_DOUBLE_EQ(s.original_time(2.2), 9.5);
    EXPECT_DOUBLE_EQ(s.original_time(3.0), 10.3);
    EXPECT_DOUBLE_EQ(s.original_time(9.0), 10.5);  // past the end: the last piece's end
    Transcript t;
    Segment a;
    a.start = 0.4;
    a.end = 2.6;  // spans the cut
    a.words = {{"one", 0.4, 1.0, 0.9f}, {"two", 2.3, 2.6, 0.9f}};
    t.segments = {a};
    map_to_original(t, s);
    EXPECT_DOUBLE_EQ(t.segments[0].start, 3.4);
    EXPECT_DOUBLE_EQ(t.segments[0].end, 9.9);
    EXPECT_DOUBLE_EQ(t.segments[0].words[0].end, 4.0);
    EXPECT_DOUBLE_EQ(t.segments[0].words[1].start, 9.6);
}

}  // namespace
}  // namespace parlance::server
