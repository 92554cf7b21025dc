#include "obs/exposition.h"
#include "obs/dcgm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>

namespace gpufleet::obs {
namespace {

TEST(ExpositionTest, WritesHelpTypeAndSamplesWithEscapedLabels) {
  Exposition e;
  e.Family("gpufleet_jobs", "gauge", "Unfinished jobs by state and team.");
  e.Sample({{"state", "running"}, {"team", "vi\"s\\ion\n"}}, 3);
  e.Sample({{"state", "pending"}, {"team", ""}}, 0.25);
  EXPECT_EQ(e.Text(),
            "# HELP gpufleet_jobs Unfinished jobs by state and team.\n"
            "# TYPE gpufleet_jobs gauge\n"
            "gpufleet_jobs{state=\"running\",team=\"vi\\\"s\\\\ion\\n\"} 3\n"
            "gpufleet_jobs{state=\"pending\"} 0.25\n");
}

TEST(ExpositionTest, NamesFollowPrometheusRules) {
  EXPECT_TRUE(Exposition::ValidName("DCGM_FI_DEV_GPU_UTIL"));
  EXPECT_TRUE(Exposition::ValidName("a:b_c9"));
  EXPECT_FALSE(Exposition::ValidName("9abc"));
  EXPECT_FALSE(Exposition::ValidName("a-b"));
  EXPECT_FALSE(Exposition::ValidName(""));
  EXPECT_FALSE(Exposition::ValidLabelName("__name__"));
  EXPECT_FALSE(Exposition::ValidLabelName("a:b"));
  EXPECT_TRUE(Exposition::ValidLabelName("UUID"));
}

TEST(ExpositionTest, ValuesReadBackExactly) {
  EXPECT_EQ(Exposition::FormatValue(12), "12");
  EXPECT_EQ(Exposition::FormatValue(-3), "-3");
  EXPECT_EQ(Exposition::FormatValue(0.1), "0.1");
  EXPECT_EQ(Exposition::FormatValue(1.0 / 3), "0.3333333333333333");
  EXPECT_EQ(Exposition::FormatValue(1e300), "1e+300");
  for (double v : {0.1 + 0.2, 1e-9, 123456.789, 2.5e17, -7.25}) {
    EXPECT_EQ(std::strtod(Exposition::FormatValue(v).c_str(), nullptr), v) << v;
  }
  EXPECT_EQ(Exposition::FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(Exposition::FormatValue(std::nan("")), "NaN");
}

TEST(ExpositionTest, SecondFamilyOfOneNameIsAProgrammingError) {
  Exposition e;
  e.Family("x", "gauge", "x");
  EXPECT_DEATH(e.Family("x", "gauge", "again"), "");
}

TEST(HistogramTest, BucketsAreCumulativeWithInfSumAndCount) {
  Histogram h({0.1, 1});
  h.Record(0.05);
  h.Record(0.1);  // on a bound: counts in that bucket (le = less or equal)
  h.Record(0.5);
  h.Record(7);
  Exposition e;
  h.Write(e, "gpufleet_pass_duration_seconds", "Scheduling pass time.");
  EXPECT_EQ(e.Text(),
            "# HELP gpufleet_pass_duration_seconds Scheduling pass time.\n"
            "# TYPE gpufleet_pass_duration_seconds histogram\n"
            "gpufleet_pass_duration_seconds_bucket{le=\"0.1\"} 2\n"
            "gpufleet_pass_duration_seconds_bucket{le=\"1\"} 3\n"
            "gpufleet_pass_duration_seconds_bucket{le=\"+Inf\"} 4\n"
            "gpufleet_pass_duration_seconds_sum 7.65\n"
            "gpufleet_pass_duration_seconds_count 4\n");
}

TEST(CounterVecTest, CountsPerLabelSet) {
  CounterVec c({"route", "code"});
  c.Add({"/v1/jobs", "200"});
  c.Add({"/v1/jobs", "200"});
  c.Add({"/v1/jobs", "404"}, 3);
  EXPECT_EQ(c.Value({"/v1/jobs", "200"}), 2);
  EXPECT_EQ(c.Value({"/v1/jobs", "404"}), 3);
  EXPECT_EQ(c.Value({"/v1/nodes", "200"}), 0);
  Exposition e;
  c.Write(e, "gpufleet_api_requests_total", "Requests.");
  EXPECT_NE(e.Text().find("gpufleet_api_requests_total{route=\"/v1/jobs\",code=\"404\"} 3\n"), std::string::npos);
}

TEST(DcgmTest, AGpuSharedBySlicesNamesEveryJobAndTeamInOneSeries) {
  Exposition e;
  DcgmGpu g{"n1", 2, "GPU-c", "NVIDIA A100", 90, 100, 40000, 50, 100, 12, "vision"};
  g.sharing = {15, 20};
  g.sharing_teams = {"nlp", "vision"};
  WriteDcgmSeries(e, {g});
  EXPECT_NE(e.Text().find("DCGM_FI_DEV_GPU_UTIL{gpu=\"2\",UUID=\"GPU-c\",device=\"nvidia2\",modelName=\"NVIDIA "
                          "A100\",Hostname=\"n1\",job_id=\"12,15,20\",team=\"nlp,vision\"} 90\n"),
            std::string::npos)
      << e.Text();
}

TEST(DcgmTest, SeriesCarryTheDcgmExporterLabelsAndJobLabelsWhenAllocated) {
  Exposition e;
  WriteDcgmSeries(e, {DcgmGpu{"n1", 0, "GPU-a", "NVIDIA H100 80GB HBM3", 97, 70000, 81559, 71, 650.5, 12, "vision"},
                      DcgmGpu{"n1", 1, "GPU-b", "NVIDIA H100 80GB HBM3", 0, 0, 81559, 30, 50, 0, ""}});
  const std::string& t = e.Text();
  EXPECT_NE(t.find("# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"), std::string::npos);
  EXPECT_NE(t.find("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-a\",device=\"nvidia0\",modelName=\"NVIDIA H100 80GB "
                   "HBM3\",Hostname=\"n1\",job_id=\"12\",team=\"vision\"} 97\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("DCGM_FI_DEV_FB_FREE{gpu=\"0\",UUID=\"GPU-a\",device=\"nvidia0\",modelName=\"NVIDIA H100 80GB "
                   "HBM3\",Hostname=\"n1\",job_id=\"12\",team=\"vision\"} 11559\n"),
            std::string::npos);
  EXPECT_NE(t.find("DCGM_FI_DEV_POWER_USAGE{gpu=\"1\",UUID=\"GPU-b\",device=\"nvidia1\",modelName=\"NVIDIA H100 80GB "
                   "HBM3\",Hostname=\"n1\"} 50\n"),
            std::string::npos);
  EXPECT_NE(t.find("DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-a\",device=\"nvidia0\",modelName=\"NVIDIA H100 80GB "
                   "HBM3\",Hostname=\"n1\",job_id=\"12\",team=\"vision\"} 650.5\n"),
            std::string::npos);
}

}  // namespace
}  // namespace gpufleet::obs
