#include "model/gpu_speeds.h"

#include <cmath>

#include <gtest/gtest.h>

namespace gpufleet::model {
namespace {

const std::string kSourceDir = GPUFLEET_SOURCE_DIR;

class GpuSpeedsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<GpuCatalog> gpus = GpuCatalog::LoadCsv(kSourceDir + "/data/gpu_specs.csv");
    ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
    gpus_ = std::move(gpus).value();
    Result<GpuSpeeds> speeds = GpuSpeeds::LoadCsv(kSourceDir + "/data/gpu_speeds.csv", gpus_);
    ASSERT_TRUE(speeds.ok()) << speeds.status().ToString();
    speeds_ = std::move(speeds).value();
  }

  SpeedEstimate Lookup(const std::string& ref, const std::string& target, const std::string& cls = "default",
                       const SpeedOverrides* overrides = nullptr) const {
    SpeedQuery q;
    q.reference = ref;
    q.target = target;
    q.workload_class = cls;
    q.overrides = overrides;
    return speeds_.Lookup(q, gpus_);
  }

  GpuCatalog gpus_;
  GpuSpeeds speeds_;
};

TEST_F(GpuSpeedsTest, ShippedTableKnowsItsClasses) {
  // Given data/gpu_speeds.csv, expect its four classes and canonical GPU names.
  EXPECT_EQ(speeds_.Classes(),
            (std::vector<std::string>{"default", "inference-vision", "training-recsys", "training-vision"}));
  ASSERT_NE(speeds_.Row("H100-PCIe", "inference-vision"), nullptr);
  EXPECT_DOUBLE_EQ(speeds_.Row("H100-PCIe", "inference-vision")->ratio_vs_a100, 1.391);
  EXPECT_TRUE(speeds_.Row("A100", "default")->baseline);
  EXPECT_FALSE(speeds_.Row("H100", "default")->baseline);
}

TEST_F(GpuSpeedsTest, H100OverA100DefaultIsTheMeasuredGeomean) {
  // Given the H100's default row 1.899 (geomean of ResNet-50 1.846 and DLRM 1.953) and the A100
  // baseline 1.0, expect 1.899 from the table, not the datasheet's 2.6.
  SpeedEstimate e = Lookup("A100", "H100");
  EXPECT_NEAR(e.ratio, 1.899, 1e-9);
  EXPECT_EQ(e.source, "mlperf:default");
  EXPECT_EQ(e.confidence, "medium");
  EXPECT_GT(gpus_.RelativeSpeed("A100", "H100", Boundness::kBalanced), 2.5);
  // The other way round, and under another name of the same parts.
  EXPECT_NEAR(Lookup("h100-sxm", "A100").ratio, 1 / 1.899, 1e-9);
  EXPECT_NEAR(Lookup("A100-80GB", "H100").ratio, 1.899, 1e-9);
}

TEST_F(GpuSpeedsTest, ClassRowWinsAndTheBaselineHoldsForEveryClass) {
  // Given A100 -> H100 for training-vision, expect the class's row 1.846 under the class's name
  // (the A100 baseline is 1.0 for every class).
  SpeedEstimate e = Lookup("A100", "H100", "training-vision");
  EXPECT_NEAR(e.ratio, 1.846, 1e-9);
  EXPECT_EQ(e.source, "mlperf:training-vision");
  // Both GPUs with inference-vision rows: 2.167 / 1.391.
  e = Lookup("H100-PCIe", "H100", "inference-vision");
  EXPECT_NEAR(e.ratio, 2.167 / 1.391, 1e-9);
  EXPECT_EQ(e.source, "mlperf:inference-vision");
  EXPECT_EQ(e.confidence, "high");
}

TEST_F(GpuSpeedsTest, AGpuWithoutTheClassUsesItsDefaultRow) {
  // Given L4, which has no training-vision row, expect its default row 0.283 and the source
  // saying so, with the default row's low confidence.
  SpeedEstimate e = Lookup("A100", "L4", "training-vision");
  EXPECT_NEAR(e.ratio, 0.283, 1e-9);
  EXPECT_EQ(e.source, "mlperf:default");
  EXPECT_EQ(e.confidence, "low");
  // H100 (training-vision row) against L4 (default row): 0.283 / 1.846, mlperf:default.
  e = Lookup("H100", "L4", "training-vision");
  EXPECT_NEAR(e.ratio, 0.283 / 1.846, 1e-9);
  EXPECT_EQ(e.source, "mlperf:default");
}

TEST_F(GpuSpeedsTest, DatasheetWhenAGpuHasNoRow) {
  // Given T4 and B200, which the table does not have, expect today's datasheet model with the
  // job's profile.
  SpeedQuery q;
  q.reference = "A100";
  q.target = "T4";
  q.profile = Boundness::kMemory;
  SpeedEstimate e = speeds_.Lookup(q, gpus_);
  EXPECT_EQ(e.source, "datasheet");
  EXPECT_DOUBLE_EQ(e.ratio, gpus_.RelativeSpeed("A100", "T4", Boundness::kMemory));
  EXPECT_TRUE(e.confidence.empty());
  e = Lookup("H100", "B200");
  EXPECT_EQ(e.source, "datasheet");
  EXPECT_DOUBLE_EQ(e.ratio, gpus_.RelativeSpeed("H100", "B200", Boundness::kBalanced));
  // An empty table is all datasheet.
  EXPECT_EQ(GpuSpeeds().Lookup(q, gpus_).source, "datasheet");
}

TEST_F(GpuSpeedsTest, StepTimesOnBothGpusAreTheSpeed) {
  // Given step times of 0.42 s on A100 and 0.23 s on H100, expect 0.42 / 0.23 = 1.826, measured.
  SpeedOverrides o;
  o.step_seconds = {{"A100", 0.42}, {"H100", 0.23}};
  SpeedEstimate e = Lookup("A100", "H100", "default", &o);
  EXPECT_NEAR(e.ratio, 0.42 / 0.23, 1e-12);
  EXPECT_EQ(e.source, "measured");
  // A GPU without a step time keeps the table.
  EXPECT_EQ(Lookup("A100", "L4", "default", &o).source, "mlperf:default");
}

TEST_F(GpuSpeedsTest, TargetStepTimeWithoutTheReferenceUsesTheTableForTheReference) {
  // Given step times on H100 (0.23 s) and L4 (1.5 s) but none on the A100 reference, expect the
  // A100's step time estimated through the table from both, geometric mean
  // sqrt(0.23 x 1.899 x 1.5 x 0.283) = 0.43059 s, so H100 = 0.43059 / 0.23 = 1.8721.
  SpeedOverrides o;
  o.step_seconds = {{"H100", 0.23}, {"L4", 1.5}};
  const double ref = std::sqrt(0.23 * 1.899 * 1.5 * 0.283);
  SpeedEstimate h = Lookup("A100", "H100", "default", &o);
  EXPECT_NEAR(h.ratio, ref / 0.23, 1e-9);
  EXPECT_NEAR(h.ratio, 1.8721, 1e-4);
  EXPECT_EQ(h.source, "measured+mlperf:default");
  EXPECT_EQ(h.confidence, "low");
  SpeedEstimate l = Lookup("A100", "L4", "default", &o);
  EXPECT_NEAR(l.ratio, ref / 1.5, 1e-9);
  // The two measured GPUs keep their measured ratio to each other.
  EXPECT_NEAR(h.ratio / l.ratio, 1.5 / 0.23, 1e-9);
  // A step time on the target alone has nothing to compare with: the table's ratio stays.
  SpeedOverrides alone;
  alone.step_seconds = {{"H100", 0.23}};
  SpeedEstimate a = Lookup("A100", "H100", "default", &alone);
  EXPECT_NEAR(a.ratio, 1.899, 1e-9);
  EXPECT_EQ(a.source, "mlperf:default");
}

TEST_F(GpuSpeedsTest, BurnInHookTakesThePlaceOfTheTableRow) {
  // Given a burn-in figure of 2.0 A100s for H100, expect it over the table's 1.899.
  SpeedOverrides o;
  o.burn_in_vs_a100 = {{"H100", 2.0}};
  SpeedEstimate e = Lookup("A100", "H100", "default", &o);
  EXPECT_NEAR(e.ratio, 2.0, 1e-12);
  EXPECT_EQ(e.source, "burn-in");
  e = Lookup("H100-PCIe", "H100", "default", &o);
  EXPECT_NEAR(e.ratio, 2.0 / 1.391, 1e-12);
  EXPECT_EQ(e.source, "burn-in+mlperf:default");
}

TEST_F(GpuSpeedsTest, UnknownWorkloadClassIsAnErrorListingTheKnownOnes) {
  Status s = speeds_.CheckClass("training-nlp");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "unknown workload class 'training-nlp'; known: default, inference-vision, training-recsys, training-vision");
  EXPECT_TRUE(speeds_.CheckClass("default").ok());
  EXPECT_TRUE(GpuSpeeds().CheckClass("default").ok());
}

TEST_F(GpuSpeedsTest, ParseErrorsNameFileAndLine) {
  const std::string header = "gpu,workload_class,ratio_vs_a100,confidence\n";
  auto parse = [&](const std::string& text) { return GpuSpeeds::ParseCsv(text, "speeds.csv", gpus_); };
  EXPECT_EQ(parse(header + "A100,default,1,high\nZ80,default,2,high\n").status().message(),
            "speeds.csv:3: unknown GPU model 'Z80' (data/gpu_specs.csv names the known ones)");
  EXPECT_EQ(parse(header + "H100,default,fast,high\n").status().message(),
            "speeds.csv:2: ratio_vs_a100 must be a positive number, got 'fast'");
  EXPECT_EQ(parse(header + "H100,default,0,high\n").status().message(),
            "speeds.csv:2: ratio_vs_a100 must be a positive number, got '0'");
  EXPECT_EQ(parse(header + "H100,default,1.9,high\nh100-sxm,default,2,low\n").status().message(),
            "speeds.csv:3: a second row for H100 default (the first is on line 2)");
  EXPECT_EQ(parse("gpu,ratio_vs_a100\nH100,2\n").status().message(),
            "speeds.csv:1: the header has no 'workload_class' column");
  EXPECT_EQ(parse(header + "H100,default,2\n").status().message(), "speeds.csv:2: has 3 fields, the header 4");
  EXPECT_EQ(GpuSpeeds::LoadCsv("/nonexistent/speeds.csv", gpus_).status().code(), StatusCode::kNotFound);
}

TEST(ParseStepSecondsTest, ReadsSecondsWithUnits) {
  EXPECT_DOUBLE_EQ(*ParseStepSeconds("0.42s"), 0.42);
  EXPECT_DOUBLE_EQ(*ParseStepSeconds("420ms"), 0.42);
  EXPECT_DOUBLE_EQ(*ParseStepSeconds(" 0.42 "), 0.42);
  EXPECT_DOUBLE_EQ(*ParseStepSeconds("1.5m"), 90);
  EXPECT_DOUBLE_EQ(*ParseStepSeconds("250us"), 0.00025);
  for (const char* bad : {"", "0s", "-1s", "fast", "s", "1x", "nan", "inf"}) {
    EXPECT_FALSE(ParseStepSeconds(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace gpufleet::model
