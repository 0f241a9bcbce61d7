// Qwen3-ASR's output text: parsing "language X<asr_text>text" and the toolkit's loop guard.
#include <gtest/gtest.h>

#include <string>

#include "models/qwen3_asr/output.h"

namespace parlance::qwen3_asr {
namespace {

std::string repeat(const std::string& s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += s;
    return out;
}

TEST(Qwen3AsrOutput, ParsesTheLanguagePrefixAndNoSpeech) {
    ParsedOutput p = parse_output("language English<asr_text> Hello there. ");
    EXPECT_EQ(p.language, "English");
    EXPECT_EQ(p.transcription, "Hello there.");
    EXPECT_FALSE(p.no_speech);

    p = parse_output("language None<asr_text>");
    EXPECT_TRUE(p.no_speech);
    EXPECT_EQ(p.transcription, "");

    p = parse_output("just text");  // a forced language: the output is the text
    EXPECT_EQ(p.language, "");
    EXPECT_EQ(p.transcription, "just text");
}

TEST(Qwen3AsrOutput, TextWithoutLoopsIsUnchanged) {
    for (const std::string& s :
         {std::string(""), std::string("Hello world."), std::string("language English<asr_text>So so so, no no no."),
          std::string("zzz ") + repeat("a", 20) + "b",  // a run of exactly 20 in a short text
          repeat("abcdefghijklmnopqrstuvwxyz ", 21),    // a unit longer than 20 characters
          repeat("ab", 19) + "x" + repeat("ab", 19)})   // 19 copies are not a loop
        EXPECT_EQ(fix_repetitions(s), s) << s;
}

TEST(Qwen3AsrOutput, RunsOfOneCharacterCollapse) {
    EXPECT_EQ(fix_repetitions(repeat("a", 25) + "b"), "ab");
    EXPECT_EQ(fix_repetitions("Oh" + repeat("!", 21)), "Oh!");
    EXPECT_EQ(fix_repetitions(repeat("好", 30) + "的"), "好的");  // code points, not bytes
    // A run of exactly 20 survives the first pass; the unit pass takes it when it starts at least
    // 40 characters before the end of the text, as the toolkit's does.
    EXPECT_EQ(fix_repetitions(repeat("z", 20) + repeat("y", 20)), "z" + repeat("y", 20));
}

TEST(Qwen3AsrOutput, RepeatedUnitsCollapseToOneCopy) {
    EXPECT_EQ(fix_repetitions(repeat("ha", 25)), "ha");
    EXPECT_EQ(fix_repetitions("I said " + repeat("no ", 30) + "today."), "I said no today.");
    EXPECT_EQ(fix_repetitions(repeat("谢谢你", 21)), "谢谢你");
    // The text after a loop is checked again: a second loop collapses too.
    EXPECT_EQ(fix_repetitions(repeat("ab", 20) + " mid " + repeat("cd", 20)), "ab mid cd");
    EXPECT_EQ(fix_repetitions("language English<asr_text>" + repeat("Thank you. ", 40)),
              "language English<asr_text>Thank you. ");
}

TEST(Qwen3AsrOutput, LoopsAreCollapsedInTheToolkitsOrder) {
    // parse_asr_output: strip, collapse, parse. Stripped, the 40th copy lacks its space, so 39
    // whole copies collapse to one and the last stays (the toolkit's own result).
    const ParsedOutput p = parse_output_fixing_loops("language English<asr_text>" + repeat("Thank you. ", 40));
    EXPECT_EQ(p.language, "English");
    EXPECT_EQ(p.transcription, "Thank you. Thank you.");
    // A run of exactly 20 ending the text with one trailing newline: trimmed first, it is too
    // close to the end for the unit pass (as in the toolkit), so it stays.
    EXPECT_EQ(parse_output_fixing_loops("x<asr_text>" + repeat("x", 20) + repeat("y", 19) + "\n").transcription,
              repeat("x", 20) + repeat("y", 19));
}

}  // namespace
}  // namespace parlance::qwen3_asr
