#include "cost/job_yaml.h"

#include <gtest/gtest.h>

#include <map>

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

TEST_F(JobYamlTest, AcceptsTheSubmitFileWithAnEnvironment) {
  // Given a file `gpufleet submit` accepts, naming an environment preset, expect `select` to read
  // its cost fields and not to refuse the environment key.
  auto j = Parse(R"(name: finetune
run: python3 train.py
environment: pytorch-2.5-cu124
resources: {gpus: 8, gpu_type: [H100]}
estimate: "10h on A100"
)");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(j->gpus_per_node, 8);
  EXPECT_EQ(j->gpu_types, (std::vector<std::string>{"H100"}));
  EXPECT_EQ(j->reference_runtime, Duration::Hours(10));
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

TEST_F(JobYamlTest, ReadsWorkloadClassAndStepTimes) {
  // Given a workload class and step times in several units under any GPU name, expect the class
  // kept and the step times in seconds under canonical names; without them, default and none.
  auto j = Parse(R"(resources: {gpus: 8}
estimate: "10h on A100"
workload: training-vision
step_time: {a100: 0.42s, H100-SXM: 230ms, L4: 2}
)");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(j->workload_class, "training-vision");
  EXPECT_EQ(j->speed_overrides.step_seconds,
            (std::map<std::string, double>{{"A100", 0.42}, {"H100", 0.23}, {"L4", 2.0}}));
  auto plain = Parse("resources: {gpus: 1}\nestimate: 1h on A100\n");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->workload_class, "default");
  EXPECT_TRUE(plain->speed_overrides.step_seconds.empty());
}

TEST_F(JobYamlTest, BadWorkloadOrStepTimeSaysWhere) {
  // Given the shipped speed table, an unknown class is refused with the known ones; a step time
  // on an unknown GPU or not a time names its line.
  auto speeds = model::GpuSpeeds::LoadCsv(std::string(GPUFLEET_SOURCE_DIR) + "/data/gpu_speeds.csv", gpus_);
  ASSERT_TRUE(speeds.ok()) << speeds.status().ToString();
  const std::string head = "resources: {gpus: 1}\nestimate: 1h on A100\n";
  auto cls = ParseCostJobYaml(head + "workload: training-nlp\n", "job.yaml", gpus_, &*speeds);
  ASSERT_FALSE(cls.ok());
  EXPECT_EQ(cls.status().message(),
            "job.yaml:3: workload: unknown workload class 'training-nlp'; known: default, inference-vision, "
            "training-recsys, training-vision");
  auto gpu = Parse(head + "step_time:\n  A100: 0.4s\n  Z80: 0.2s\n");
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.status().message(), "job.yaml:5: step_time: unknown GPU model 'Z80'");
  auto bad = Parse(head + "step_time: {H100: fast}\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "job.yaml:3: step_time.H100: must be a positive time per step such as 0.42s or 420ms, got 'fast'");
  auto list = Parse(head + "step_time: [0.4s]\n");
  ASSERT_FALSE(list.ok());
  EXPECT_NE(list.status().message().find("job.yaml:3: step_time: must be a mapping"), std::string::npos);
}

TEST_F(JobYamlTest, DeeplyNestedFileIsRefusedBeforeParsing) {
  // Given a job file nesting 100,000 flow lists, expect InvalidArgument naming the depth and
  // where it is crossed, not a crash in the recursive YAML parser.
  auto j = Parse("estimate: 10h\nregions: " + std::string(100'000, '[') + "\n");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(j.status().message(), "job.yaml:2:73: nesting deeper than 64 levels");
}

}  // namespace
}  // namespace gpufleet::cost
