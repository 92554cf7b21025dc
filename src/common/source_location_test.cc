#include "common/source_location.h"

#include <string>

#include <gtest/gtest.h>

#include "common/nesting.h"

namespace gpufleet {
namespace {

struct ZeroBasedMark {  // shaped like yaml-cpp's YAML::Mark
  int pos = 0;
  int line = 0;
  int column = 0;
};

TEST(SourceLocationTest, PrefixNamesFileLineAndColumn) {
  // Given a 1-based position, expect "file:line:column: "; given none, expect the file alone.
  EXPECT_EQ(SourcePrefix("job.yaml", 12, 5), "job.yaml:12:5: ");
  EXPECT_EQ(SourcePrefix("job.yaml", 0, 0), "job.yaml: ");
  // Given a parser's 0-based mark, expect it counted from 1; an unknown mark (-1) names no position.
  EXPECT_EQ(SourcePrefixAt("pool.yaml", ZeroBasedMark{40, 2, 7}), "pool.yaml:3:8: ");
  EXPECT_EQ(SourcePrefixAt("pool.yaml", ZeroBasedMark{-1, -1, -1}), "pool.yaml: ");
}

TEST(SourceLocationTest, NestingErrorsMoveTheirPositionToTheFront) {
  // Given CheckNestingDepth's own errors, expect "file:line:column: what" with the position taken
  // out of the sentence, so every error about a file reads the same way.
  EXPECT_EQ(InSource("c.yaml", CheckNestingDepth("a:\n  b: [[1]]\n", NestingSyntax::kYaml, 2)).message(),
            "c.yaml:2:6: nesting deeper than 2 levels");
  EXPECT_EQ(InSource("c.yaml", CheckNestingDepth(std::string("a: 1\nb: x\0y\n", 12), NestingSyntax::kYaml)).message(),
            "c.yaml:2:5: a NUL byte (YAML text cannot hold one)");
  EXPECT_EQ(InSource("c.yaml", CheckNestingDepth("\xFF\xFE" "a", NestingSyntax::kYaml)).message(),
            "c.yaml:1:1: not UTF-8 text: a UTF-16 or UTF-32 byte order mark");
  // Given a message without a position, expect the file in front.
  Status s = InSource("c.yaml", Status::InvalidArgument("at line two, column one"));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "c.yaml: at line two, column one");
}

}  // namespace
}  // namespace gpufleet
