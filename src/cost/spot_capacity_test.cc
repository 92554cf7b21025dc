#include "cost/spot_capacity.h"

#include <string>

#include <gtest/gtest.h>

namespace gpufleet::cost {
namespace {

const char* kTable =
    "gpu,gpus_per_node,zone,unavailable_fraction,markov_mean_outage_minutes,markov_mean_available_minutes\n"
    "K80,1,us-west-2a,0.07,21.4,276.9\n"
    "all,1,all,0.325,107.0,221.0\n"
    "all,8,all,0.507,62.0,61.0\n"
    "all,all,all,0.416,74.0,104.0\n";

TEST(SpotCapacityTest, ReadsThePooledRowsAndPicksTheNearestNodeSize) {
  // Given per-zone and pooled rows, expect only the pooled ones, in minutes, and a node size
  // matched to the nearest measured one (4 GPUs: a tie between 1 and 8 is 3 vs 4 away: 1 wins).
  auto t = ParseSpotCapacity(kTable, "t.csv");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->size(), 3u);
  EXPECT_EQ(SpotCapacityFor(*t, 1).mean_outage, Duration::Minutes(107));
  EXPECT_EQ(SpotCapacityFor(*t, 1).mean_available, Duration::Minutes(221));
  EXPECT_EQ(SpotCapacityFor(*t, 8).mean_outage, Duration::Minutes(62));
  EXPECT_DOUBLE_EQ(SpotCapacityFor(*t, 8).unavailable_fraction, 0.507);
  EXPECT_EQ(SpotCapacityFor(*t, 4).gpus_per_node, 1);
  EXPECT_EQ(SpotCapacityFor(*t, 5).gpus_per_node, 8);
  EXPECT_EQ(SpotCapacityFor(*t, 16).gpus_per_node, 8);
}

TEST(SpotCapacityTest, BadTablesAreErrorsNamingFileAndLine) {
  EXPECT_NE(ParseSpotCapacity("gpu,zone\nall,all\n", "t.csv").status().message().find("t.csv:1: the header has no column"),
            std::string::npos);
  auto bad = ParseSpotCapacity(
      "gpu,gpus_per_node,zone,unavailable_fraction,markov_mean_outage_minutes,markov_mean_available_minutes\n"
      "all,8,all,0.5,-3,61\n",
      "t.csv");
  EXPECT_NE(bad.status().message().find("t.csv:2: markov_mean_outage_minutes"), std::string::npos)
      << bad.status().message();
  EXPECT_FALSE(ParseSpotCapacity(
                   "gpu,gpus_per_node,zone,unavailable_fraction,markov_mean_outage_minutes,markov_mean_available_minutes\n",
                   "t.csv")
                   .ok());
}

TEST(SpotCapacityTest, CommentLinesAreSkippedButNotInsideAQuotedField) {
  // Given comment lines and a quoted note whose second line starts with '#', expect the note one
  // field (not a comment that breaks the row) and a later bad row named by its line in the file.
  const std::string text =
      "# measured 2020\n"
      "gpu,gpus_per_node,zone,unavailable_fraction,markov_mean_outage_minutes,markov_mean_available_minutes,note\n"
      "all,1,all,0.325,107.0,221.0,\"two\n# lines\"\n"
      "# between rows\n"
      "all,8,all,0.5,-3,61,\n";
  auto bad = ParseSpotCapacity(text, "t.csv");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("t.csv:6: markov_mean_outage_minutes"), std::string::npos)
      << bad.status().message();
  auto t = ParseSpotCapacity(text.substr(0, text.rfind("all,8")), "t.csv");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->size(), 1u);
  EXPECT_EQ(t->front().mean_outage, Duration::Minutes(107));
}

TEST(SpotCapacityTest, TheShippedTableLoads) {
  auto t = LoadSpotCapacity(std::string(GPUFLEET_SOURCE_DIR) + "/data/catalog/spot_availability.csv");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const SpotCapacity& eight = SpotCapacityFor(*t, 8);
  EXPECT_EQ(eight.gpus_per_node, 8);
  EXPECT_GT(eight.unavailable_fraction, 0.0);
  EXPECT_GT(eight.mean_outage, Duration::Zero());
}

}  // namespace
}  // namespace gpufleet::cost
