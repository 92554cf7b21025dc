#include "cost/job_yaml.h"

#include <gtest/gtest.h>

namespace gpufleet::cost {
namespace {

class JobYamlTest : public ::testing::Test {
 protected:
  Result<CostJob> Parse(const std::string& yaml) { return ParseCostJobYaml(yaml, "job.yaml", gpus_); }
  const model::GpuCatalog& gpus_ = model::GpuCatalog::BuiltIn();
};

TEST_F(JobYamlTest, ReadsTheCostFieldsAndIgnoresOthers) {
  // Given a job file with every cost field and keys the cost layer does not use, expect the
  // fields read, names canonical, and the other keys ignored.
  auto j = Parse(R"(name: finetune
command: python train.py
resources: {gpus: 8, nodes: 2, gpu_type: [h100, A100-80GB], cpus: 32}
estimate: "10h on a100"
profile: compute
checkpoint: {interval: 30m, restart_overhead: 3m}
market: spot
deadline: 24h
max_hourly_cost: "$40.5"
regions: ["europe-*", us-east-1]
clouds: gcp
constraints: {geo: eu}
)");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(j->gpus_per_node, 8);
  EXPECT_EQ(j->nodes, 2);
  EXPECT_EQ(j->gpu_types, (std::vector<std::string>{"h100", "A100-80GB"}));
  EXPECT_EQ(j->reference_gpu, "A100");
  EXPECT_EQ(j->reference_runtime, Duration::Hours(10));
  EXPECT_EQ(j->profile, model::Boundness::kCompute);
  EXPECT_EQ(j->checkpoint_interval, Duration::Minutes(30));
  EXPECT_EQ(j->restart_overhead, Duration::Minutes(3));
  EXPECT_EQ(j->market, model::MarketPreference::kSpot);
  EXPECT_EQ(j->deadline, Duration::Hours(24));
  EXPECT_EQ(j->max_hourly_cost, 40'500'000);
  EXPECT_EQ(j->regions, (std::vector<std::string>{"europe-*", "us-east-1"}));
  EXPECT_EQ(j->clouds, (std::vector<std::string>{"gcp"}));
  EXPECT_EQ(j->constraints.at("geo"), "eu");
}

TEST_F(JobYamlTest, DefaultsWhenOptionalFieldsAreAbsent) {
  // Given only resources and estimate, expect one node, balanced, no checkpoints, any market.
  auto j = Parse("resources:\n  gpus: 1\nestimate: 2h on T4\n");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(j->nodes, 1);
  EXPECT_EQ(j->profile, model::Boundness::kBalanced);
  EXPECT_EQ(j->checkpoint_interval, Duration::Zero());
  EXPECT_EQ(j->market, model::MarketPreference::kAny);
  EXPECT_FALSE(j->deadline.has_value());
}

TEST_F(JobYamlTest, ErrorsNameFileLineAndField) {
  // Given bad values, expect messages with the file, the 1-based line and the field path.
  auto gpus = Parse("name: x\nresources:\n  gpus: eight\nestimate: 1h on A100\n");
  ASSERT_FALSE(gpus.ok());
  EXPECT_EQ(gpus.status().message(), "job.yaml:3: resources.gpus: must be a positive integer, got 'eight'");
  auto est = Parse("resources: {gpus: 1}\nestimate: ten hours\n");
  ASSERT_FALSE(est.ok());
  EXPECT_NE(est.status().message().find("job.yaml:2: estimate: must read 'DURATION on GPU'"), std::string::npos)
      << est.status().message();
  auto gpu = Parse("resources: {gpus: 1}\nestimate: 1h on Z80\n");
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.status().message(), "job.yaml:2: estimate: unknown GPU model 'Z80'");
  auto market = Parse("resources: {gpus: 1}\nestimate: 1h on A100\nmarket: cheap\n");
  ASSERT_FALSE(market.ok());
  EXPECT_EQ(market.status().message(), "job.yaml:3: market: must be spot, on-demand or any, got 'cheap'");
  auto missing = Parse("estimate: 1h on A100\n");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("resources: is required"), std::string::npos);
  auto yaml = Parse("resources: {gpus: 1\n");
  ASSERT_FALSE(yaml.ok());
  EXPECT_NE(yaml.status().message().find("invalid YAML"), std::string::npos);
}

TEST_F(JobYamlTest, DeeplyNestedFileIsRefusedBeforeParsing) {
  // Given a job file nesting 100,000 flow lists, expect InvalidArgument naming the depth and
  // where it is crossed, not a crash in the recursive YAML parser.
  auto j = Parse("estimate: 10h\nregions: " + std::string(100'000, '[') + "\n");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(j.status().message(), "job.yaml: nesting deeper than 64 levels at line 2, column 73");
}

}  // namespace
}  // namespace gpufleet::cost
