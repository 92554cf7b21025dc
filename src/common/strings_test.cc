#include "common/strings.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace gpufleet {
namespace {

using Strings = std::vector<std::string>;

TEST(StringsTest, SplitKeepsEmptyFields) {
  // Given separators at the ends and side by side, expect every field, empty ones included.
  EXPECT_EQ(Split("a,b,c", ','), (Strings{"a", "b", "c"}));
  EXPECT_EQ(Split("a,,b", ','), (Strings{"a", "", "b"}));
  EXPECT_EQ(Split(",a,", ','), (Strings{"", "a", ""}));
  EXPECT_EQ(Split("", ','), (Strings{""}));
  EXPECT_EQ(Split("no-sep", ','), (Strings{"no-sep"}));
  EXPECT_EQ(Split("k=v", '='), (Strings{"k", "v"}));
}

TEST(StringsTest, FormatBytesUsesBinaryUnitsWithOneDecimal) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1024), "1.0 KiB");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(int64_t{50} << 30), "50.0 GiB");
  // Just under a unit up rounds into it, not to "1024.0 MiB".
  EXPECT_EQ(FormatBytes((int64_t{1} << 30) - 1), "1.0 GiB");
  EXPECT_EQ(FormatBytes(std::numeric_limits<int64_t>::max()), "8.0 EiB");
}

TEST(StringsTest, TrimRemovesSurroundingWhitespaceOnly) {
  // Given spaces, tabs and newlines around and inside, expect only the outer ones removed.
  EXPECT_EQ(Trim("  a b \t\n"), "a b");
  EXPECT_EQ(Trim("\t\r\n "), "");
  EXPECT_EQ(Trim(""), "");
  EXPECT_EQ(Trim("x"), "x");
}

TEST(StringsTest, ToLowerLowersAsciiLetters) {
  // Given mixed case with digits and dashes, expect only letters lowered.
  EXPECT_EQ(ToLower("A100-80GB"), "a100-80gb");
  EXPECT_EQ(ToLower("On-Demand"), "on-demand");
  EXPECT_EQ(ToLower(""), "");
}

TEST(StringsTest, StartsWithComparesThePrefix) {
  // Given prefixes longer, equal, empty and different, expect exact answers.
  EXPECT_TRUE(StartsWith("quota.team", "quota."));
  EXPECT_TRUE(StartsWith("abc", "abc"));
  EXPECT_TRUE(StartsWith("abc", ""));
  EXPECT_FALSE(StartsWith("ab", "abc"));
  EXPECT_FALSE(StartsWith("xabc", "abc"));
}

TEST(StringsTest, JoinPutsTheSeparatorBetweenParts) {
  // Given zero, one and three parts, expect the separator only between parts.
  EXPECT_EQ(Join({}, ", "), "");
  EXPECT_EQ(Join({"a"}, ", "), "a");
  EXPECT_EQ(Join({"a", "b", "c"}, ", "), "a, b, c");
  EXPECT_EQ(Join({"", ""}, "|"), "|");
}

TEST(StringsTest, ParseIntAcceptsWholeIntegers) {
  // Given signed numbers, surrounding spaces and the int64 limits, expect exact values.
  EXPECT_EQ(ParseInt("42"), 42);
  EXPECT_EQ(ParseInt("-7"), -7);
  EXPECT_EQ(ParseInt("+5"), 5);
  EXPECT_EQ(ParseInt("  12 "), 12);
  EXPECT_EQ(ParseInt("0"), 0);
  EXPECT_EQ(ParseInt("007"), 7);
  EXPECT_EQ(ParseInt("9223372036854775807"), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(ParseInt("-9223372036854775808"), std::numeric_limits<int64_t>::min());
}

TEST(StringsTest, ParseIntRejectsJunkAndOverflow) {
  // Given empty input, a lone sign, trailing junk, decimals, hex and values past int64, expect
  // nothing.
  for (const char* bad : {"", "   ", "+", "-", "12a", "a12", "1.5", "1e3", "0x10", "1 2",
                          "9223372036854775808", "-9223372036854775809"}) {
    EXPECT_EQ(ParseInt(bad), std::nullopt) << "'" << bad << "'";
  }
}

TEST(StringsTest, ParseIntRejectsTwoSigns) {
  // Given "+-5" (two signs), expect no number, as for any malformed integer.
  EXPECT_EQ(ParseInt("+-5"), std::nullopt);
}

TEST(StringsTest, ParseDoubleAcceptsFiniteNumbers) {
  // Given decimals, exponents, signs and spaces, expect the exact doubles.
  EXPECT_EQ(ParseDouble("1.5"), 1.5);
  EXPECT_EQ(ParseDouble("-0.25"), -0.25);
  EXPECT_EQ(ParseDouble("3"), 3.0);
  EXPECT_EQ(ParseDouble("1e3"), 1000.0);
  EXPECT_EQ(ParseDouble(" 2.5 "), 2.5);
  EXPECT_EQ(ParseDouble(".5"), 0.5);
}

TEST(StringsTest, ParseDoubleRejectsJunkAndNonFiniteValues) {
  // Given empty input, trailing junk, inf, nan and an overflowing exponent, expect nothing.
  for (const char* bad : {"", " ", "abc", "1.5x", "1.2.3", "inf", "-inf", "nan", "1e400", "--1"}) {
    EXPECT_EQ(ParseDouble(bad), std::nullopt) << "'" << bad << "'";
  }
}

TEST(StringsTest, GlobMatchStarMatchesAnyRun) {
  // Given region patterns with '*', expect matches for any run of characters, empty included.
  EXPECT_TRUE(GlobMatch("europe-*", "europe-west1"));
  EXPECT_TRUE(GlobMatch("europe-*", "europe-"));
  EXPECT_FALSE(GlobMatch("europe-*", "asia-east1"));
  EXPECT_FALSE(GlobMatch("europe-*", "europe"));
  EXPECT_TRUE(GlobMatch("*", ""));
  EXPECT_TRUE(GlobMatch("*", "anything"));
  EXPECT_TRUE(GlobMatch("*-west*", "us-west2"));
  EXPECT_TRUE(GlobMatch("a*b*c", "aXXbYYc"));
  EXPECT_FALSE(GlobMatch("a*b*c", "aXXbYY"));
  EXPECT_TRUE(GlobMatch("*a", "aaa"));  // needs backtracking
  EXPECT_TRUE(GlobMatch("**", "x"));
}

TEST(StringsTest, GlobMatchQuestionMarkMatchesExactlyOneCharacter) {
  // Given '?', expect it to match one character, never zero or two.
  EXPECT_TRUE(GlobMatch("a?c", "abc"));
  EXPECT_FALSE(GlobMatch("a?c", "ac"));
  EXPECT_FALSE(GlobMatch("a?c", "abbc"));
  EXPECT_TRUE(GlobMatch("us-east?", "us-east1"));
}

TEST(StringsTest, GlobMatchWithoutWildcardsIsEquality) {
  // Given plain patterns, expect whole-string, case-sensitive equality.
  EXPECT_TRUE(GlobMatch("", ""));
  EXPECT_FALSE(GlobMatch("", "a"));
  EXPECT_FALSE(GlobMatch("a", ""));
  EXPECT_TRUE(GlobMatch("eu", "eu"));
  EXPECT_FALSE(GlobMatch("eu", "EU"));
  EXPECT_FALSE(GlobMatch("eu", "eu1"));
}

}  // namespace
}  // namespace gpufleet

namespace gpufleet {
namespace {
TEST(EditDistanceTest, CountsInsertionsDeletionsAndSubstitutions) {
  EXPECT_EQ(EditDistance("", ""), 0u);
  EXPECT_EQ(EditDistance("abc", ""), 3u);
  EXPECT_EQ(EditDistance("resources", "resourcse"), 2u);
  EXPECT_EQ(EditDistance("memory_gb", "memory_gib"), 1u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
}

TEST(NearMatchesTest, FindsTyposAndCaseButNotUnrelatedNames) {
  // Given the catalog's clouds and a few regions, expect a one-letter typo and a name in the
  // wrong case to find what was meant, the closest first, and an unrelated name to find nothing.
  const std::vector<std::string> clouds = {"aws", "azure", "gcp", "lambda", "nebius", "oci", "vast"};
  EXPECT_EQ(NearMatches("awz", clouds), std::vector<std::string>{"aws"});
  EXPECT_EQ(NearMatches("AWS", clouds), std::vector<std::string>{"aws"});
  EXPECT_TRUE(NearMatches("mars", clouds).empty());
  // A name equal but for case is the answer alone, though others are one edit away.
  EXPECT_EQ(NearMatches("EU", {"us", "eu", "ca"}), std::vector<std::string>{"eu"});
  // us-east-1 and us-west-1 are one edit away (in `known`'s order), us-east-2 two, eu-west-1 three.
  const std::vector<std::string> regions = {"eu-west-1", "us-east-2", "us-east-1", "us-west-1"};
  EXPECT_EQ(NearMatches("us-est-1", regions), (std::vector<std::string>{"us-east-1", "us-west-1", "us-east-2"}));
  EXPECT_EQ(NearMatches("us-est-1", regions, 1), std::vector<std::string>{"us-east-1"});
  EXPECT_TRUE(NearMatches("mars-1", regions).empty());
}
}  // namespace
}  // namespace gpufleet

namespace gpufleet {
namespace {

TEST(XmlEscapeTest, ReplacesMarkupAndDropsControlCharacters) {
  EXPECT_EQ(XmlEscape("a<b>&\"c'\x01\td\n"), "a&lt;b&gt;&amp;&quot;c&apos;\td\n");
  EXPECT_EQ(XmlEscape(""), "");
}

TEST(FnvTest, MatchesThePublishedTestVectors) {
  // The FNV authors' vectors: "" hashes to the offset basis, "a" and "foobar" to known values.
  EXPECT_EQ(Fnv1a64(""), kFnv1a64Basis);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(Fnv1a64("foobar"), 0x85944171f73967e8ull);
  EXPECT_EQ(Fnv1a32(""), 0x811c9dc5u);
  EXPECT_EQ(Fnv1a32("a"), 0xe40c292cu);
  EXPECT_EQ(Fnv1a32("foobar"), 0xbf9cf968u);
  EXPECT_NE(Fnv1a64("a", 1), Fnv1a64("a"));  // the basis is part of the hash
}

}  // namespace
}  // namespace gpufleet
