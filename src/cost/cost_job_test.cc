#include "cost/cost_job.h"

#include <gtest/gtest.h>

#include <map>

namespace gpufleet::cost {
namespace {

model::JobSpec Spec() {
  model::JobSpec s;
  s.name = "finetune";
  s.gpus_per_node = 8;
  s.nodes = 2;
  s.gpu_models = {"H100", "A100-80GB"};
  s.duration_estimate = Duration::Hours(10);
  s.checkpoint_interval = Duration::Minutes(30);
  s.market = model::MarketPreference::kSpot;
  s.constraints = {{"geo", "eu"}};
  return s;
}

TEST(CostJobForTest, CarriesTheSpecAndEveryHint) {
  // Given a spec and hints with every field set, expect each in the cost job under the cost
  // layer's names, the estimate's GPU canonical.
  model::JobCostHints h;
  h.profile = model::Boundness::kCompute;
  h.estimate_model = "a100";
  h.workload = "training-vision";
  h.step_seconds = {{"A100", 0.42}, {"H100", 0.23}};
  h.deadline = Duration::Hours(24);
  h.max_hourly_cost_micros = 40'500'000;
  h.regions = {"europe-*", "us-east-1"};
  h.clouds = {"gcp"};
  h.restart_overhead = Duration::Minutes(3);
  auto j = CostJobFor(Spec(), h, model::GpuCatalog::BuiltIn());
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(j->gpus_per_node, 8);
  EXPECT_EQ(j->nodes, 2);
  EXPECT_EQ(j->gpu_types, (std::vector<std::string>{"H100", "A100-80GB"}));
  EXPECT_EQ(j->reference_gpu, "A100");
  EXPECT_EQ(j->reference_runtime, Duration::Hours(10));
  EXPECT_EQ(j->profile, model::Boundness::kCompute);
  EXPECT_EQ(j->workload_class, "training-vision");
  EXPECT_EQ(j->speed_overrides.step_seconds, (std::map<std::string, double>{{"A100", 0.42}, {"H100", 0.23}}));
  EXPECT_EQ(j->checkpoint_interval, Duration::Minutes(30));
  EXPECT_EQ(j->restart_overhead, Duration::Minutes(3));
  EXPECT_EQ(j->market, model::MarketPreference::kSpot);
  EXPECT_EQ(j->deadline, Duration::Hours(24));
  EXPECT_EQ(j->max_hourly_cost, 40'500'000);
  EXPECT_EQ(j->regions, (std::vector<std::string>{"europe-*", "us-east-1"}));
  EXPECT_EQ(j->clouds, (std::vector<std::string>{"gcp"}));
  EXPECT_EQ(j->constraints.at("geo"), "eu");
}

TEST(CostJobForTest, DefaultsAreTheReferenceGpuAndTheDefaultClass) {
  // Given an estimate with no GPU, no class and no caps, expect A100, the default class, no
  // hourly cap and the default restart overhead.
  auto j = CostJobFor(Spec(), {}, model::GpuCatalog::BuiltIn());
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(j->reference_gpu, kReferenceGpu);
  EXPECT_EQ(j->workload_class, model::kDefaultWorkloadClass);
  EXPECT_FALSE(j->max_hourly_cost.has_value());
  EXPECT_FALSE(j->deadline.has_value());
  EXPECT_EQ(j->restart_overhead, Duration::Minutes(5));
}

TEST(CostJobForTest, AGpuSliceIsPricedAsOneGpu) {
  model::JobSpec s = Spec();
  s.nodes = 1;
  s.gpus_per_node = 1;
  s.gpu_milli = 250;
  auto j = CostJobFor(s, {}, model::GpuCatalog::BuiltIn());
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(j->gpus_per_node, 1);
  EXPECT_EQ(j->nodes, 1);
}

TEST(CostJobForTest, RefusesWhatCannotBePricedAndSaysWhichField) {
  model::JobSpec none = Spec();
  none.duration_estimate.reset();
  auto a = CostJobFor(none, {}, model::GpuCatalog::BuiltIn());
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(a.status().message().rfind("estimate: missing", 0), 0u) << a.status().message();

  model::JobSpec cpu = Spec();
  cpu.gpus_per_node = 0;
  auto b = CostJobFor(cpu, {}, model::GpuCatalog::BuiltIn());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message().rfind("resources.gpus: a CPU-only job", 0), 0u) << b.status().message();

  model::JobCostHints z80;
  z80.estimate_model = "Z80";
  auto c = CostJobFor(Spec(), z80, model::GpuCatalog::BuiltIn());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "estimate: unknown GPU model 'Z80'");
}

}  // namespace
}  // namespace gpufleet::cost
