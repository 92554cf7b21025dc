#include "model/types.h"

#include <string>

#include <gtest/gtest.h>

namespace gpufleet::model {
namespace {

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

class TypesTest : public ::testing::Test {
 protected:
  static NodeSpec GoodNode() {
    NodeSpec n;
    n.name = "node-1";
    n.gpu_model = "A100";
    n.gpus = 8;
    n.cpu_milli = 96'000;
    n.mem_mib = 1'000'000;
    return n;
  }
  static JobSpec GoodJob() {
    JobSpec j;
    j.name = "train";
    j.gpus_per_node = 4;
    j.nodes = 2;
    return j;
  }
};

TEST_F(TypesTest, WellFormedSpecsValidate) {
  // Given a usual node, a CPU-only node, a gang, a GPU slice and a job with every optional
  // field set, expect all to validate.
  EXPECT_TRUE(GoodNode().Validate().ok());
  NodeSpec cpu_only = GoodNode();
  cpu_only.gpus = 0;
  cpu_only.gpu_model = "";
  EXPECT_TRUE(cpu_only.Validate().ok());
  NodeSpec nvlink = GoodNode();
  nvlink.nvlink_domain = {0, 0, 0, 0, 1, 1, 1, 1};
  EXPECT_TRUE(nvlink.Validate().ok());

  EXPECT_TRUE(JobSpec().Validate().ok());
  EXPECT_TRUE(GoodJob().Validate().ok());
  JobSpec slice;
  slice.gpu_milli = 500;
  EXPECT_TRUE(slice.Validate().ok());
  JobSpec full = GoodJob();
  full.gpu_models = {"H100", "A100"};
  full.duration_estimate = Duration::Hours(1);
  full.checkpoint_interval = Duration::Minutes(10);
  full.cpu_milli = 8000;
  full.mem_mib = 64 * 1024;
  EXPECT_TRUE(full.Validate().ok());
}

TEST_F(TypesTest, NodeValidateNamesTheBadField) {
  // Given each broken node field, expect invalid-argument with a message naming it.
  NodeSpec unnamed = GoodNode();
  unnamed.name = "";
  EXPECT_EQ(unnamed.Validate().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(unnamed.Validate().message(), "node name must not be empty");

  NodeSpec negative = GoodNode();
  negative.gpus = -1;
  EXPECT_EQ(negative.Validate().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(negative.Validate().message(), "node node-1: gpus must be between 0 and 64, got -1");

  NodeSpec too_many = GoodNode();
  too_many.gpus = 65;
  EXPECT_EQ(too_many.Validate().message(), "node node-1: gpus must be between 0 and 64, got 65");

  NodeSpec no_model = GoodNode();
  no_model.gpu_model = "";
  EXPECT_EQ(no_model.Validate().message(), "node node-1: gpu model is required when gpus > 0");

  NodeSpec bad_map = GoodNode();
  bad_map.nvlink_domain = {0, 0, 1};
  EXPECT_EQ(bad_map.Validate().message(), "node node-1: nvlink map has 3 entries for 8 GPUs");

  NodeSpec negative_cpu = GoodNode();
  negative_cpu.cpu_milli = -1;
  EXPECT_EQ(negative_cpu.Validate().message(), "node node-1: cpus and memory must not be negative");
  NodeSpec negative_mem = GoodNode();
  negative_mem.mem_mib = -1;
  EXPECT_EQ(negative_mem.Validate().code(), StatusCode::kInvalidArgument);
}

TEST_F(TypesTest, JobValidateRejectsImpossibleShapes) {
  // Given zero or too many nodes, negative or absurd GPU counts, and shares outside (0, 1000],
  // expect invalid-argument errors that name the field and the value.
  JobSpec no_nodes = GoodJob();
  no_nodes.nodes = 0;
  EXPECT_EQ(no_nodes.Validate().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(no_nodes.Validate().message(), "nodes must be between 1 and 4096, got 0");
  JobSpec many_nodes = GoodJob();
  many_nodes.nodes = 4097;
  EXPECT_EQ(many_nodes.Validate().message(), "nodes must be between 1 and 4096, got 4097");

  JobSpec negative = GoodJob();
  negative.gpus_per_node = -1;
  EXPECT_EQ(negative.Validate().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(negative.Validate().message(), "gpus")) << negative.Validate().message();
  EXPECT_TRUE(Contains(negative.Validate().message(), "got -1")) << negative.Validate().message();
  JobSpec absurd = GoodJob();
  absurd.gpus_per_node = 1'000'000;
  EXPECT_EQ(absurd.Validate().code(), StatusCode::kInvalidArgument);

  JobSpec zero_share;
  zero_share.gpu_milli = 0;
  EXPECT_EQ(zero_share.Validate().message(), "gpu share must be in (0, 1000] milli-GPU, got 0");
  JobSpec over_share;
  over_share.gpu_milli = 1001;
  EXPECT_EQ(over_share.Validate().message(), "gpu share must be in (0, 1000] milli-GPU, got 1001");
}

TEST_F(TypesTest, JobValidateRejectsASliceSpreadOverSeveralGpus) {
  // Given a half-GPU share asked on 2 GPUs or on 2 nodes, expect the slice rule's error.
  const std::string msg = "a GPU slice (gpu_milli < 1000) must ask for exactly one GPU on one node";
  JobSpec two_gpus;
  two_gpus.gpu_milli = 500;
  two_gpus.gpus_per_node = 2;
  EXPECT_EQ(two_gpus.Validate().message(), msg);
  JobSpec two_nodes;
  two_nodes.gpu_milli = 500;
  two_nodes.nodes = 2;
  EXPECT_EQ(two_nodes.Validate().message(), msg);
}

TEST_F(TypesTest, JobValidateRejectsBadResourcesTimesAndModels) {
  // Given negative CPUs or memory, a zero estimate, a negative checkpoint interval, an empty
  // model name and a model listed twice, expect each error message.
  JobSpec cpu = GoodJob();
  cpu.cpu_milli = -1;
  EXPECT_EQ(cpu.Validate().message(), "cpus and memory must not be negative");
  JobSpec mem = GoodJob();
  mem.mem_mib = -5;
  EXPECT_EQ(mem.Validate().message(), "cpus and memory must not be negative");

  JobSpec zero_estimate = GoodJob();
  zero_estimate.duration_estimate = Duration::Zero();
  EXPECT_EQ(zero_estimate.Validate().message(), "duration estimate must be positive");
  JobSpec negative_estimate = GoodJob();
  negative_estimate.duration_estimate = Duration::Seconds(-1);
  EXPECT_EQ(negative_estimate.Validate().message(), "duration estimate must be positive");

  JobSpec checkpoint = GoodJob();
  checkpoint.checkpoint_interval = Duration::Seconds(-1);
  EXPECT_EQ(checkpoint.Validate().message(), "checkpoint interval must not be negative");

  JobSpec empty_model = GoodJob();
  empty_model.gpu_models = {"A100", ""};
  EXPECT_EQ(empty_model.Validate().message(), "gpu model names must not be empty");
  JobSpec twice = GoodJob();
  twice.gpu_models = {"A100", "H100", "A100"};
  EXPECT_EQ(twice.Validate().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(twice.Validate().message(), "gpu model 'A100' listed twice");
}

TEST_F(TypesTest, JobDemandIsCountedInMilliGpu) {
  // Given a gang, a single GPU and a slice, expect total GPUs and milli-GPU demand.
  JobSpec gang = GoodJob();  // 2 x 4
  EXPECT_EQ(gang.total_gpus(), 8);
  EXPECT_FALSE(gang.fractional());
  EXPECT_EQ(gang.total_gpu_milli(), 8000);
  JobSpec one;
  EXPECT_EQ(one.total_gpu_milli(), 1000);
  JobSpec slice;
  slice.gpu_milli = 250;
  EXPECT_TRUE(slice.fractional());
  EXPECT_EQ(slice.total_gpu_milli(), 250);
}

TEST_F(TypesTest, PlacementTotalCountsEveryPartAndSlice) {
  // Given a placement of two whole GPUs plus one of one GPU, and a half-GPU slice, expect the
  // milli-GPU totals.
  Placement p;
  p.parts.push_back(NodeAssignment{NodeId(0), {0, 1}, kMilliGpuPerGpu, 0, 0});
  p.parts.push_back(NodeAssignment{NodeId(1), {3}, kMilliGpuPerGpu, 0, 0});
  EXPECT_EQ(p.total_gpu_milli(), 3000);
  Placement slice;
  slice.parts.push_back(NodeAssignment{NodeId(0), {2}, 500, 0, 0});
  EXPECT_EQ(slice.total_gpu_milli(), 500);
  EXPECT_EQ(Placement().total_gpu_milli(), 0);
}

TEST_F(TypesTest, ParseMarketAcceptsTheThreeMarketsAndRoundTrips) {
  // Given each market's name (and "ondemand"), expect the market; MarketName gives it back.
  EXPECT_EQ(*ParseMarket("on-demand"), Market::kOnDemand);
  EXPECT_EQ(*ParseMarket("ondemand"), Market::kOnDemand);
  EXPECT_EQ(*ParseMarket("spot"), Market::kSpot);
  EXPECT_EQ(*ParseMarket("reserved"), Market::kReserved);
  for (Market m : {Market::kOnDemand, Market::kSpot, Market::kReserved}) {
    Result<Market> back = ParseMarket(MarketName(m));
    ASSERT_TRUE(back.ok()) << MarketName(m);
    EXPECT_EQ(*back, m);
  }
  EXPECT_STREQ(MarketName(Market::kOnDemand), "on-demand");
}

TEST_F(TypesTest, ParseMarketRejectsOtherWordsAndListsTheValidOnes) {
  // Given an unknown word, a wrong case and an empty string, expect invalid-argument listing
  // the valid markets.
  Result<Market> bad = ParseMarket("preemptible");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "unknown market 'preemptible' (expected spot, on-demand or reserved)");
  EXPECT_FALSE(ParseMarket("Spot").ok());
  EXPECT_FALSE(ParseMarket("").ok());
}

TEST_F(TypesTest, ParseMarketPreferenceDefaultsToAny) {
  // Given "", "any", "spot" and "on-demand", expect the preferences; others are rejected.
  EXPECT_EQ(*ParseMarketPreference(""), MarketPreference::kAny);
  EXPECT_EQ(*ParseMarketPreference("any"), MarketPreference::kAny);
  EXPECT_EQ(*ParseMarketPreference("spot"), MarketPreference::kSpot);
  EXPECT_EQ(*ParseMarketPreference("on-demand"), MarketPreference::kOnDemand);
  EXPECT_EQ(*ParseMarketPreference("ondemand"), MarketPreference::kOnDemand);
  Result<MarketPreference> bad = ParseMarketPreference("reserved");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "unknown market 'reserved' (expected any, spot or on-demand)");
  for (MarketPreference m : {MarketPreference::kAny, MarketPreference::kSpot, MarketPreference::kOnDemand}) {
    EXPECT_EQ(*ParseMarketPreference(MarketPreferenceName(m)), m);
  }
}

TEST(SplitToFitTest, LargeJobsBecomeTheFewestEqualPartsThatFit) {
  JobSpec a;
  a.gpus_per_node = 16;
  SplitToFit(a, 8);
  EXPECT_EQ(a.nodes, 2);
  EXPECT_EQ(a.gpus_per_node, 8);
  JobSpec b;
  b.gpus_per_node = 12;
  SplitToFit(b, 8);
  EXPECT_EQ(b.nodes, 2);
  EXPECT_EQ(b.gpus_per_node, 6);
  JobSpec c;  // fits already, or nothing to fit to: left alone
  c.gpus_per_node = 8;
  SplitToFit(c, 8);
  SplitToFit(c, 0);
  EXPECT_EQ(c.nodes, 1);
  EXPECT_EQ(c.gpus_per_node, 8);
}

}  // namespace
}  // namespace gpufleet::model
