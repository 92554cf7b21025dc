#include "common/nesting.h"

#include <chrono>
#include <string>

#include <gtest/gtest.h>

namespace gpufleet {
namespace {

std::string Repeat(std::string_view piece, int times) {
  std::string out;
  out.reserve(piece.size() * static_cast<size_t>(times));
  for (int i = 0; i < times; ++i) out += piece;
  return out;
}

// n keys, each indented under the one before: a block mapping n levels deep.
std::string BlockMapping(int n) {
  std::string out;
  for (int i = 0; i < n - 1; ++i) out += std::string(2 * i, ' ') + "k:\n";
  return out + std::string(2 * (n - 1), ' ') + "k: 1\n";
}

TEST(NestingTest, JsonAtTheLimitPasses) {
  // Given JSON nested exactly kMaxNestingDepth levels, arrays and objects mixed, expect Ok.
  EXPECT_TRUE(CheckNestingDepth(Repeat("[", 64) + Repeat("]", 64), NestingSyntax::kJson).ok());
  EXPECT_TRUE(CheckNestingDepth(Repeat(R"({"a":[)", 32) + "1" + Repeat("]}", 32), NestingSyntax::kJson).ok());
}

TEST(NestingTest, JsonOneLevelPastTheLimitNamesLineAndColumn) {
  // Given 65 levels, expect InvalidArgument naming the 65th bracket.
  Status s = CheckNestingDepth(Repeat("[", 65) + Repeat("]", 65), NestingSyntax::kJson);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "nesting deeper than 64 levels at line 1, column 65");

  // Given the limit crossed on a later line, expect that line and the column within it.
  s = CheckNestingDepth("{\n  \"a\": [[1]]\n}", NestingSyntax::kJson, 2);
  EXPECT_EQ(s.message(), "nesting deeper than 2 levels at line 2, column 9");
}

TEST(NestingTest, JsonBracketsInStringsDoNotCount) {
  // Given brackets and escaped quotes inside strings, expect only the real object to count.
  EXPECT_TRUE(CheckNestingDepth(R"({"run": "[[[[[[{{{{", "x": "\"[[[[\\", "y": "]]]]"})", NestingSyntax::kJson, 1).ok());
  // Given closers inside a string between real openers, expect them not to lower the count.
  Status s = CheckNestingDepth(R"([["]]]]]]", [[1]]])", NestingSyntax::kJson, 3);
  EXPECT_EQ(s.message(), "nesting deeper than 3 levels at line 1, column 14");
}

TEST(NestingTest, JsonUnmatchedClosersDoNotHideDepth) {
  // Given stray closers before deep openers, expect the openers counted from zero.
  Status s = CheckNestingDepth("]]]][[[", NestingSyntax::kJson, 2);
  EXPECT_EQ(s.message(), "nesting deeper than 2 levels at line 1, column 7");
}

TEST(NestingTest, MillionDeepInputIsRefusedQuickly) {
  // Given a million levels in each form, expect InvalidArgument without recursing (a recursive
  // scan would overflow the stack here) and well within a second.
  const std::string flow(1'000'000, '[');
  const std::string dashes = Repeat("- ", 1'000'000) + "x\n";
  const std::string objects = Repeat(R"({"a":)", 1'000'000);
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(CheckNestingDepth(flow, NestingSyntax::kJson).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckNestingDepth(objects, NestingSyntax::kJson).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckNestingDepth(flow, NestingSyntax::kYaml).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckNestingDepth(objects, NestingSyntax::kYaml).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckNestingDepth(dashes, NestingSyntax::kYaml).code(), StatusCode::kInvalidArgument);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(NestingTest, YamlFlowCountsTheMappingAroundIt) {
  // Given "key: [[...]]", expect the mapping and each bracket to be a level: 63 brackets fit in
  // 64 levels, 64 do not, and the error names the 64th bracket.
  EXPECT_TRUE(CheckNestingDepth("key: " + Repeat("[", 63) + Repeat("]", 63) + "\n", NestingSyntax::kYaml).ok());
  Status s = CheckNestingDepth("key: " + Repeat("[", 64) + Repeat("]", 64) + "\n", NestingSyntax::kYaml);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "nesting deeper than 64 levels at line 1, column 69");
}

TEST(NestingTest, YamlBlockNestingByIndentation) {
  // Given mappings nested by indentation, expect 64 levels to pass and the 65th key named.
  EXPECT_TRUE(CheckNestingDepth(BlockMapping(64), NestingSyntax::kYaml).ok());
  Status s = CheckNestingDepth(BlockMapping(65), NestingSyntax::kYaml);
  EXPECT_EQ(s.message(), "nesting deeper than 64 levels at line 65, column 129");
  // Given one-space indentation, expect every step to count just the same.
  std::string narrow;
  for (int i = 0; i < 70; ++i) narrow += std::string(i, ' ') + "k:\n";
  EXPECT_EQ(CheckNestingDepth(narrow, NestingSyntax::kYaml).message(),
            "nesting deeper than 64 levels at line 65, column 65");
}

TEST(NestingTest, YamlColonsInFlowOpenMappings) {
  // Given ':' where a node is expected inside [...] or {...}, expect each to count as the
  // one-pair mapping yaml-cpp builds for it: "[a: b]" is two levels, "[: : : x]" four.
  EXPECT_TRUE(CheckNestingDepth("[a: b, c: d]", NestingSyntax::kYaml, 2).ok());
  EXPECT_EQ(CheckNestingDepth("[a: b, c: d]", NestingSyntax::kYaml, 1).message(),
            "nesting deeper than 1 levels at line 1, column 3");
  EXPECT_TRUE(CheckNestingDepth("{a: b, c: [1]}", NestingSyntax::kYaml, 2).ok());
  EXPECT_EQ(CheckNestingDepth("{a: : b}", NestingSyntax::kYaml, 1).message(),
            "nesting deeper than 1 levels at line 1, column 5");
  EXPECT_TRUE(CheckNestingDepth("[: : : x]", NestingSyntax::kYaml, 4).ok());
  EXPECT_FALSE(CheckNestingDepth("[: : : x]", NestingSyntax::kYaml, 3).ok());
  EXPECT_EQ(CheckNestingDepth("[" + Repeat(": ", 100'000) + "x]", NestingSyntax::kYaml).message(),
            "nesting deeper than 64 levels at line 1, column 128");
}

TEST(NestingTest, YamlColonLinesInPlaceOfANodeOpenMappings) {
  // Given ':' lines at one indentation, each where the node after the '?' or ':' before it
  // belongs (yaml-cpp nests a one-pair mapping for each), expect each to count.
  EXPECT_TRUE(CheckNestingDepth("? \n: x\n", NestingSyntax::kYaml, 2).ok());
  EXPECT_EQ(CheckNestingDepth("? \n: x\n", NestingSyntax::kYaml, 1).message(),
            "nesting deeper than 1 levels at line 2, column 1");
  EXPECT_EQ(CheckNestingDepth(Repeat(":\n", 100'000), NestingSyntax::kYaml).message(),
            "nesting deeper than 64 levels at line 65, column 1");
  // Given ordinary keys and values, expect no extra level.
  EXPECT_TRUE(CheckNestingDepth("a: 1\nb: 2\n? c\n: 3\n", NestingSyntax::kYaml, 1).ok());
}

TEST(NestingTest, YamlCompactSequencesOnOneLineCount) {
  // Given "- - - ..." on one line (each dash opens a sequence), expect the 65th dash named.
  Status s = CheckNestingDepth(Repeat("- ", 100) + "x\n", NestingSyntax::kYaml);
  EXPECT_EQ(s.message(), "nesting deeper than 64 levels at line 1, column 129");
}

TEST(NestingTest, YamlScalarsAndCommentsDoNotCount) {
  // Given brackets in quoted, plain and block scalars and in comments, expect only the mapping
  // (one level) to count.
  const std::string text =
      "a: 'it''s [[[[{{{{'\n"
      "b: \"\\\"[[[[ {{{{\"\n"
      "c: echo [[[[ {{{{ ]]\n"
      "d: |\n"
      "  [[[[[[\n"
      "      {{{{{{\n"
      "e: >-\n"
      "  ]]]] [[[[\n"
      "# [[[[[[[[\n"
      "f: x # [[[[[[\n"
      "g: \"two\n"
      "  lines [[[[[\"\n";
  EXPECT_TRUE(CheckNestingDepth(text, NestingSyntax::kYaml, 1).ok());
}

TEST(NestingTest, YamlQuoteInsidePlainScalarOpensNoString) {
  // Given an apostrophe inside plain text (here and on a continuation line), expect it not to
  // hide the deep flow collection on the next key, which yaml-cpp does read as structure.
  const std::string deep = Repeat("[", 70) + Repeat("]", 70);
  EXPECT_EQ(CheckNestingDepth("a: it's\nb: " + deep + "\nc: 'x'\n", NestingSyntax::kYaml).message(),
            "nesting deeper than 64 levels at line 2, column 67");
  EXPECT_EQ(CheckNestingDepth("a: x\n  'y\nb: " + deep + "\nc: '\n", NestingSyntax::kYaml).message(),
            "nesting deeper than 64 levels at line 3, column 67");
}

TEST(NestingTest, YamlBlockScalarEndsAtLessIndentedLine) {
  // Given a block scalar whose text is indented in many steps, expect none of it to count; and
  // given a deep collection right after it, expect that counted.
  std::string script = "run: |\n";
  for (int i = 0; i < 200; ++i) script += std::string(2 + i, ' ') + "- x: [\n";
  EXPECT_TRUE(CheckNestingDepth(script, NestingSyntax::kYaml).ok());
  Status s = CheckNestingDepth(script + "next: " + Repeat("[", 70) + "\n", NestingSyntax::kYaml);
  EXPECT_EQ(s.message(), "nesting deeper than 64 levels at line 202, column 70");
}

TEST(NestingTest, YamlReadsJsonText) {
  // Given JSON (a job sent as JSON is read as YAML), expect the JSON count, strings skipped.
  const std::string json = R"({"a":{"b":[1,{"c":"]]]]"}]},"d":"x"})";
  EXPECT_TRUE(CheckNestingDepth(json, NestingSyntax::kYaml, 4).ok());
  EXPECT_EQ(CheckNestingDepth(json, NestingSyntax::kYaml, 3).message(),
            "nesting deeper than 3 levels at line 1, column 14");
}

TEST(NestingTest, YamlDocumentsAreCountedApart) {
  // Given several documents, expect each one's block nesting to start again from zero.
  const std::string docs = BlockMapping(40) + "---\n" + BlockMapping(40) + "...\n---\n" + BlockMapping(40);
  EXPECT_TRUE(CheckNestingDepth(docs, NestingSyntax::kYaml).ok());
}

TEST(NestingTest, YamlThatIsNotUtf8IsRefused) {
  // Given UTF-16 text or a NUL byte anywhere (yaml-cpp decodes or garbles such text into other
  // characters than the scan sees), expect InvalidArgument saying where.
  EXPECT_EQ(CheckNestingDepth(std::string("\xFF\xFE" "a\0:\0", 6), NestingSyntax::kYaml).message(),
            "not UTF-8 text: a UTF-16 or UTF-32 byte order mark at line 1, column 1");
  EXPECT_EQ(CheckNestingDepth(std::string("\0a\0:", 4), NestingSyntax::kYaml).message(),
            "a NUL byte at line 1, column 1 (YAML text cannot hold one)");
  EXPECT_EQ(CheckNestingDepth(std::string("a: 1\nb: x\0y\n", 12), NestingSyntax::kYaml).message(),
            "a NUL byte at line 2, column 5 (YAML text cannot hold one)");
  // Given a UTF-8 byte order mark, expect it skipped as yaml-cpp does.
  EXPECT_TRUE(CheckNestingDepth("\xEF\xBB\xBFkey: [1]\n", NestingSyntax::kYaml).ok());
}

}  // namespace
}  // namespace gpufleet
