#include "sched/cluster_view.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <set>

#include "testing/fakes.h"

namespace gpufleet::sched {
namespace {

using model::NodeAssignment;
using model::Placement;
using testing::MakeNode;

// A placement of whole GPUs (or one slice) on one node.
Placement On(NodeId node, std::vector<int> gpus, int64_t gpu_milli = model::kMilliGpuPerGpu,
             int64_t cpu_milli = 0, int64_t mem_mib = 0) {
  Placement p;
  p.gpu_model = "A100";
  p.parts.push_back(NodeAssignment{node, std::move(gpus), gpu_milli, cpu_milli, mem_mib});
  return p;
}

class ClusterViewTest : public ::testing::Test {
 protected:
  // Node 0: 8 x A100; node 1: 4 x H100; node 2: 8 x A100.
  void AddThreeNodes() {
    ASSERT_TRUE(view_.UpsertNode(NodeId(0), MakeNode("a0", "A100", 8)).ok());
    ASSERT_TRUE(view_.UpsertNode(NodeId(1), MakeNode("h0", "H100", 4)).ok());
    ASSERT_TRUE(view_.UpsertNode(NodeId(2), MakeNode("a1", "A100", 8)).ok());
    a100_ = view_.ModelIndex("A100");
    h100_ = view_.ModelIndex("H100");
  }

  ClusterView view_;
  int a100_ = -1;
  int h100_ = -1;
};

TEST_F(ClusterViewTest, NewNodesAddTheirGpusToPerModelCounts) {
  // Given two A100 nodes and one H100 node, expect models in join order, node lists per model
  // and every free count at full capacity.
  AddThreeNodes();
  EXPECT_EQ(view_.models(), (std::vector<std::string>{"A100", "H100"}));
  EXPECT_EQ(a100_, 0);
  EXPECT_EQ(h100_, 1);
  EXPECT_EQ(view_.ModelIndex("V100"), -1);
  EXPECT_EQ(view_.NodesOfModel(a100_), (std::vector<int>{0, 2}));
  EXPECT_EQ(view_.NodesOfModel(h100_), (std::vector<int>{1}));
  EXPECT_EQ(view_.FreeWholeGpus(a100_), 16);
  EXPECT_EQ(view_.FreeWholeGpus(h100_), 4);
  EXPECT_EQ(view_.FreeMilli(a100_), 16'000);
  EXPECT_EQ(view_.FreeMilli(h100_), 4'000);
  EXPECT_EQ(view_.FreeMilliAll(), 20'000);
  EXPECT_EQ(view_.SchedulableMilli(), 20'000);
  EXPECT_EQ(view_.OnlineMilli(), 20'000);
  EXPECT_EQ(view_.MaxGpusPerNode(a100_), 8);
  EXPECT_EQ(view_.MaxGpusPerNode(h100_), 4);
  EXPECT_EQ(view_.MinGpusPerNode(a100_), 8);
  EXPECT_EQ(view_.MinGpusPerNode(h100_), 4);
  ASSERT_EQ(view_.nodes().size(), 3u);
  const ClusterView::Node* h = view_.Find(NodeId(1));
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->spec.name, "h0");
  EXPECT_EQ(h->model, h100_);
  EXPECT_EQ(h->free_whole, 4);
  EXPECT_EQ(h->free_milli, (std::vector<int32_t>{1000, 1000, 1000, 1000}));
  EXPECT_EQ(h->free_cpu_milli, 96'000);
  EXPECT_EQ(h->health, NodeHealth::kUp);
  EXPECT_EQ(view_.IndexOf(NodeId(2)), 2);
  EXPECT_EQ(view_.IndexOf(NodeId(9)), -1);
  EXPECT_EQ(view_.Find(NodeId(9)), nullptr);
}

TEST_F(ClusterViewTest, InvalidNodeSpecIsRejectedAndNotAdded) {
  // Given a node whose NVLink map does not match its GPU count, expect invalid-argument and an
  // unchanged view.
  model::NodeSpec bad = MakeNode("bad", "A100", 8);
  bad.nvlink_domain = {0, 1};
  Status s = view_.UpsertNode(NodeId(0), bad);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(view_.nodes().empty());
  EXPECT_TRUE(view_.models().empty());
  EXPECT_EQ(view_.SchedulableMilli(), 0);
}

TEST_F(ClusterViewTest, CpuOnlyNodeHasNoModelAndAddsNoGpus) {
  // Given a node without GPUs, expect no model, no node list entry and no GPU capacity.
  model::NodeSpec cpu = MakeNode("cpu", "", 0);
  ASSERT_TRUE(view_.UpsertNode(NodeId(0), cpu).ok());
  EXPECT_TRUE(view_.models().empty());
  EXPECT_EQ(view_.nodes()[0].model, -1);
  EXPECT_EQ(view_.SchedulableMilli(), 0);
  EXPECT_EQ(view_.OnlineMilli(), 0);
  EXPECT_EQ(view_.FreeMilliAll(), 0);
}

TEST_F(ClusterViewTest, AllocateAndReleaseWholeGpusKeepCountsExact) {
  // Given 3 GPUs allocated on a0 with CPUs and memory, expect the model's and the node's free
  // counts to drop by exactly that, the other model untouched, and a release to restore all.
  AddThreeNodes();
  Placement p = On(NodeId(0), {0, 2, 5}, model::kMilliGpuPerGpu, 4000, 2048);
  ASSERT_TRUE(view_.CanAllocate(p));
  view_.Allocate(p);
  EXPECT_EQ(view_.FreeWholeGpus(a100_), 13);
  EXPECT_EQ(view_.FreeMilli(a100_), 13'000);
  EXPECT_EQ(view_.FreeWholeGpus(h100_), 4);
  EXPECT_EQ(view_.FreeMilliAll(), 17'000);
  EXPECT_EQ(view_.SchedulableMilli(), 20'000);  // capacity, not free
  EXPECT_EQ(view_.OnlineMilli(), 20'000);
  const ClusterView::Node& n = view_.nodes()[0];
  EXPECT_EQ(n.free_whole, 5);
  EXPECT_EQ(n.free_milli, (std::vector<int32_t>{0, 1000, 0, 1000, 1000, 0, 1000, 1000}));
  EXPECT_EQ(n.free_cpu_milli, 92'000);
  EXPECT_EQ(n.free_mem_mib, 1024 * 1024 - 2048);

  view_.Release(p);
  EXPECT_EQ(view_.FreeWholeGpus(a100_), 16);
  EXPECT_EQ(view_.FreeMilli(a100_), 16'000);
  EXPECT_EQ(view_.nodes()[0].free_whole, 8);
  EXPECT_EQ(view_.nodes()[0].free_cpu_milli, 96'000);
  EXPECT_EQ(view_.nodes()[0].free_mem_mib, 1024 * 1024);
}

TEST_F(ClusterViewTest, GangPlacementBooksEveryPart) {
  // Given a placement with parts on two nodes, expect both nodes booked and released.
  AddThreeNodes();
  Placement p = On(NodeId(0), {0, 1, 2, 3});
  p.parts.push_back(NodeAssignment{NodeId(2), {4, 5, 6, 7}, model::kMilliGpuPerGpu, 0, 0});
  view_.Allocate(p);
  EXPECT_EQ(view_.nodes()[0].free_whole, 4);
  EXPECT_EQ(view_.nodes()[2].free_whole, 4);
  EXPECT_EQ(view_.FreeWholeGpus(a100_), 8);
  view_.Release(p);
  EXPECT_EQ(view_.FreeWholeGpus(a100_), 16);
}

TEST_F(ClusterViewTest, SlicesShareOneGpu) {
  // Given two 500 milli-GPU slices on GPU 3, expect the GPU to stop counting as whole after the
  // first, free milli to drop by 500 each, and the GPU to be whole again only when both leave.
  AddThreeNodes();
  Placement s1 = On(NodeId(0), {3}, 500);
  Placement s2 = On(NodeId(0), {3}, 500);
  view_.Allocate(s1);
  EXPECT_EQ(view_.nodes()[0].free_milli[3], 500);
  EXPECT_EQ(view_.nodes()[0].free_whole, 7);
  EXPECT_EQ(view_.FreeWholeGpus(a100_), 15);
  EXPECT_EQ(view_.FreeMilli(a100_), 15'500);
  ASSERT_TRUE(view_.CanAllocate(s2));
  view_.Allocate(s2);
  EXPECT_EQ(view_.nodes()[0].free_milli[3], 0);
  EXPECT_EQ(view_.nodes()[0].free_whole, 7);
  EXPECT_EQ(view_.FreeWholeGpus(a100_), 15);
  EXPECT_EQ(view_.FreeMilli(a100_), 15'000);
  EXPECT_FALSE(view_.CanAllocate(On(NodeId(0), {3}, 1)));

  view_.Release(s1);
  EXPECT_EQ(view_.nodes()[0].free_milli[3], 500);
  EXPECT_EQ(view_.nodes()[0].free_whole, 7);
  EXPECT_EQ(view_.FreeMilli(a100_), 15'500);
  view_.Release(s2);
  EXPECT_EQ(view_.nodes()[0].free_whole, 8);
  EXPECT_EQ(view_.FreeWholeGpus(a100_), 16);
  EXPECT_EQ(view_.FreeMilli(a100_), 16'000);
}

TEST_F(ClusterViewTest, CanAllocateRejectsBusyUnknownAndOversizedRequests) {
  // Given a busy GPU, a slice too big for what is left, an unknown node, a GPU index out of
  // range and more CPUs or memory than free, expect CanAllocate false for each and true for a
  // free GPU.
  AddThreeNodes();
  view_.Allocate(On(NodeId(0), {1}));
  view_.Allocate(On(NodeId(0), {2}, 500));
  EXPECT_FALSE(view_.CanAllocate(On(NodeId(0), {1})));
  EXPECT_FALSE(view_.CanAllocate(On(NodeId(0), {0, 1})));
  EXPECT_FALSE(view_.CanAllocate(On(NodeId(0), {1}, 100)));
  EXPECT_FALSE(view_.CanAllocate(On(NodeId(0), {2}, 600)));
  EXPECT_TRUE(view_.CanAllocate(On(NodeId(0), {2}, 500)));
  EXPECT_FALSE(view_.CanAllocate(On(NodeId(0), {2})));  // a whole GPU on a half-used one
  EXPECT_FALSE(view_.CanAllocate(On(NodeId(7), {0})));
  EXPECT_FALSE(view_.CanAllocate(On(NodeId(1), {4})));
  EXPECT_FALSE(view_.CanAllocate(On(NodeId(1), {-1})));
  EXPECT_FALSE(view_.CanAllocate(On(NodeId(1), {0}, 1000, 96'001, 0)));
  EXPECT_FALSE(view_.CanAllocate(On(NodeId(1), {0}, 1000, 0, 1024 * 1024 + 1)));
  EXPECT_TRUE(view_.CanAllocate(On(NodeId(1), {0}, 1000, 96'000, 1024 * 1024)));
  EXPECT_TRUE(view_.CanAllocate(On(NodeId(0), {0, 3})));
}

TEST_F(ClusterViewTest, DrainingNodeLeavesFreeCountsButStaysOnline) {
  // Given a draining node with one GPU busy, expect its free GPUs and its capacity out of the
  // schedulable counts but still online; undraining brings back exactly what is free.
  AddThreeNodes();
  view_.Allocate(On(NodeId(0), {0}));
  ASSERT_TRUE(view_.SetHealth(NodeId(0), NodeHealth::kDraining).ok());
  EXPECT_EQ(view_.FreeWholeGpus(a100_), 8);
  EXPECT_EQ(view_.FreeMilli(a100_), 8'000);
  EXPECT_EQ(view_.SchedulableMilli(), 12'000);
  EXPECT_EQ(view_.OnlineMilli(), 20'000);
  EXPECT_FALSE(view_.nodes()[0].schedulable());
  // Work on a draining node ends normally: the release must not leak into the counts.
  view_.Release(On(NodeId(0), {0}));
  EXPECT_EQ(view_.FreeWholeGpus(a100_), 8);
  EXPECT_EQ(view_.nodes()[0].free_whole, 8);
  ASSERT_TRUE(view_.SetHealth(NodeId(0), NodeHealth::kUp).ok());
  EXPECT_EQ(view_.FreeWholeGpus(a100_), 16);
  EXPECT_EQ(view_.FreeMilli(a100_), 16'000);
  EXPECT_EQ(view_.SchedulableMilli(), 20'000);
}

TEST_F(ClusterViewTest, DownNodeLeavesEveryCountAndComesBack) {
  // Given a node marked down, expect it out of free, schedulable and online capacity; marking
  // it up restores all three.
  AddThreeNodes();
  ASSERT_TRUE(view_.SetHealth(NodeId(1), NodeHealth::kDown).ok());
  EXPECT_EQ(view_.FreeWholeGpus(h100_), 0);
  EXPECT_EQ(view_.FreeMilli(h100_), 0);
  EXPECT_EQ(view_.SchedulableMilli(), 16'000);
  EXPECT_EQ(view_.OnlineMilli(), 16'000);
  EXPECT_EQ(view_.MaxGpusPerNode(h100_), 4);  // the node may return
  // Setting the same health twice must not count the node twice.
  ASSERT_TRUE(view_.SetHealth(NodeId(1), NodeHealth::kDown).ok());
  EXPECT_EQ(view_.OnlineMilli(), 16'000);
  ASSERT_TRUE(view_.SetHealth(NodeId(1), NodeHealth::kUp).ok());
  EXPECT_EQ(view_.FreeWholeGpus(h100_), 4);
  EXPECT_EQ(view_.SchedulableMilli(), 20'000);
  EXPECT_EQ(view_.OnlineMilli(), 20'000);
  EXPECT_EQ(view_.SetHealth(NodeId(42), NodeHealth::kUp).code(), StatusCode::kNotFound);
}

TEST_F(ClusterViewTest, ReRegisteringANodeKeepsItsAllocations) {
  // Given a node with 2 GPUs, CPUs and memory allocated, expect a NodeUp with the same GPUs
  // (new labels, more CPUs) to keep the allocation and its counts, and free CPUs to follow the
  // new total.
  AddThreeNodes();
  Placement p = On(NodeId(0), {0, 1}, model::kMilliGpuPerGpu, 10'000, 100);
  view_.Allocate(p);
  model::NodeSpec again = MakeNode("a0", "A100", 8, {"rack=r9"});
  again.cpu_milli = 128'000;
  ASSERT_TRUE(view_.UpsertNode(NodeId(0), again).ok());
  ASSERT_EQ(view_.nodes().size(), 3u);
  const ClusterView::Node& n = view_.nodes()[0];
  EXPECT_EQ(n.free_whole, 6);
  EXPECT_EQ(n.free_milli[0], 0);
  EXPECT_EQ(n.free_milli[1], 0);
  EXPECT_EQ(n.free_cpu_milli, 118'000);
  EXPECT_EQ(n.free_mem_mib, 1024 * 1024 - 100);
  EXPECT_EQ(n.spec.labels.at("rack"), "r9");
  EXPECT_EQ(view_.group_name(n.group), "/r9");
  EXPECT_EQ(view_.FreeWholeGpus(a100_), 14);
  EXPECT_EQ(view_.FreeMilli(a100_), 14'000);
  EXPECT_EQ(view_.SchedulableMilli(), 20'000);
  EXPECT_EQ(view_.NodesOfModel(a100_), (std::vector<int>{0, 2}));  // not listed twice
  view_.Release(p);
  EXPECT_EQ(view_.FreeWholeGpus(a100_), 16);
  EXPECT_EQ(view_.nodes()[0].free_cpu_milli, 128'000);
}

TEST_F(ClusterViewTest, ReRegisteringWithOtherGpusWhileBusyFails) {
  // Given a node with a GPU allocated, expect a NodeUp that changes its GPU count to fail with
  // failed-precondition and leave the node and counts as they were.
  AddThreeNodes();
  view_.Allocate(On(NodeId(0), {0}));
  Status s = view_.UpsertNode(NodeId(0), MakeNode("a0", "A100", 4));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "node a0 changed its GPUs while jobs hold them");
  EXPECT_EQ(view_.nodes()[0].spec.gpus, 8);
  EXPECT_EQ(view_.FreeWholeGpus(a100_), 15);
}

TEST_F(ClusterViewTest, ReRegisteringAnIdleNodeWithOtherGpusResetsIt) {
  // Given an idle A100 node re-registered with 4 GPUs, expect 4 free GPUs, new temperatures and
  // capacity counted once.
  AddThreeNodes();
  ASSERT_TRUE(view_.UpsertNode(NodeId(0), MakeNode("a0", "A100", 4)).ok());
  EXPECT_EQ(view_.nodes()[0].free_whole, 4);
  EXPECT_EQ(view_.nodes()[0].free_milli.size(), 4u);
  EXPECT_EQ(view_.nodes()[0].temp_c.size(), 4u);
  EXPECT_EQ(view_.FreeWholeGpus(a100_), 12);
  EXPECT_EQ(view_.SchedulableMilli(), 16'000);
  EXPECT_EQ(view_.OnlineMilli(), 16'000);
}

// The positions in a node set, in order.
std::vector<int> Positions(const NodeMask& mask) {
  std::vector<int> out;
  for (size_t pos = 0; pos < mask.size(); ++pos) {
    if (mask[pos]) out.push_back(static_cast<int>(pos));
  }
  return out;
}

TEST_F(ClusterViewTest, NodeThatChangesModelLeavesItsOldModel) {
  // Given an idle A100 node re-registered as a 2-GPU H100 node, expect it listed under H100
  // only, so that the A100 node list and largest A100 node no longer include it (in its list
  // and in its set of positions).
  AddThreeNodes();
  EXPECT_EQ(Positions(view_.NodeMaskOfModel(a100_)), (std::vector<int>{0, 2}));
  EXPECT_EQ(Positions(view_.NodeMaskOfModel(h100_)), (std::vector<int>{1}));
  ASSERT_TRUE(view_.UpsertNode(NodeId(0), MakeNode("a0", "H100", 2)).ok());
  EXPECT_EQ(view_.NodesOfModel(a100_), (std::vector<int>{2}));
  EXPECT_EQ(view_.NodesOfModel(h100_), (std::vector<int>{1, 0}));
  EXPECT_EQ(Positions(view_.NodeMaskOfModel(a100_)), (std::vector<int>{2}));
  EXPECT_EQ(Positions(view_.NodeMaskOfModel(h100_)), (std::vector<int>{0, 1}));
  EXPECT_EQ(view_.FreeWholeGpus(a100_), 8);
  EXPECT_EQ(view_.FreeWholeGpus(h100_), 6);
  EXPECT_EQ(view_.MaxGpusPerNode(h100_), 4);
  EXPECT_EQ(view_.MinGpusPerNode(h100_), 2);
  // The remaining A100 node has 8 GPUs; a shrunken node must not leave a larger stale maximum.
  ASSERT_TRUE(view_.UpsertNode(NodeId(2), MakeNode("a1", "A100", 2)).ok());
  EXPECT_EQ(view_.MaxGpusPerNode(a100_), 2);
  EXPECT_EQ(view_.MinGpusPerNode(a100_), 2);
  // Grown back, no smaller stale minimum is left either; the H100 model keeps its smallest.
  ASSERT_TRUE(view_.UpsertNode(NodeId(2), MakeNode("a1", "A100", 8)).ok());
  EXPECT_EQ(view_.MinGpusPerNode(a100_), 8);
  ASSERT_TRUE(view_.UpsertNode(NodeId(0), MakeNode("a0", "A100", 8)).ok());
  EXPECT_EQ(view_.MinGpusPerNode(h100_), 4);
  EXPECT_EQ(view_.MinGpusPerNode(a100_), 8);
  // A model whose last node leaves has no smallest node; a CPU-only node counts for no model.
  ASSERT_TRUE(view_.UpsertNode(NodeId(1), MakeNode("h0", "A100", 2)).ok());
  EXPECT_TRUE(view_.NodesOfModel(h100_).empty());
  EXPECT_TRUE(Positions(view_.NodeMaskOfModel(h100_)).empty());
  EXPECT_EQ(Positions(view_.NodeMaskOfModel(a100_)), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(view_.MinGpusPerNode(h100_), std::numeric_limits<int>::max());
  EXPECT_EQ(view_.MinGpusPerNode(a100_), 2);
  ASSERT_TRUE(view_.UpsertNode(NodeId(1), MakeNode("h0", "A100", 0)).ok());
  EXPECT_EQ(view_.MinGpusPerNode(a100_), 8);
  EXPECT_EQ(Positions(view_.NodeMaskOfModel(a100_)), (std::vector<int>{0, 2}));
}

TEST_F(ClusterViewTest, GroupsAreZoneAndRack) {
  // Given nodes in two racks of one zone and a node without labels, expect one group per
  // (zone, rack) in join order, shared by nodes of the same rack.
  ASSERT_TRUE(view_.UpsertNode(NodeId(0), MakeNode("a", "A100", 8, {"zone=z1", "rack=r1"})).ok());
  ASSERT_TRUE(view_.UpsertNode(NodeId(1), MakeNode("b", "A100", 8, {"zone=z1", "rack=r2"})).ok());
  ASSERT_TRUE(view_.UpsertNode(NodeId(2), MakeNode("c", "A100", 8, {"zone=z1", "rack=r1"})).ok());
  ASSERT_TRUE(view_.UpsertNode(NodeId(3), MakeNode("d", "A100", 8)).ok());
  EXPECT_EQ(view_.group_count(), 3);
  EXPECT_EQ(view_.group_name(view_.nodes()[0].group), "z1/r1");
  EXPECT_EQ(view_.group_name(view_.nodes()[1].group), "z1/r2");
  EXPECT_EQ(view_.nodes()[2].group, view_.nodes()[0].group);
  EXPECT_EQ(view_.group_name(view_.nodes()[3].group), "/");
}

TEST_F(ClusterViewTest, SetTemperaturesStoresPerGpuValuesClamped) {
  // Given telemetry for each GPU, expect it stored in GPU order, clamped to [-100, 300].
  AddThreeNodes();
  ASSERT_TRUE(view_.SetTemperatures(NodeId(1), {40, 85, 1000, -500}).ok());
  EXPECT_EQ(view_.nodes()[1].temp_c, (std::vector<int16_t>{40, 85, 300, -100}));
}

TEST_F(ClusterViewTest, SetTemperaturesWithWrongGpuCountIsAnError) {
  // Given telemetry for 3 GPUs of a 4-GPU node, expect invalid-argument naming both counts and
  // the stored temperatures unchanged; an unknown node is not-found.
  AddThreeNodes();
  ASSERT_TRUE(view_.SetTemperatures(NodeId(1), {50, 50, 50, 50}).ok());
  Status s = view_.SetTemperatures(NodeId(1), {90, 90, 90});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "node h0 has 4 GPUs but telemetry reports 3");
  EXPECT_EQ(view_.nodes()[1].temp_c, (std::vector<int16_t>{50, 50, 50, 50}));
  EXPECT_EQ(view_.SetTemperatures(NodeId(9), {}).code(), StatusCode::kNotFound);
}

TEST_F(ClusterViewTest, CopyIsAnIndependentWhatIfWorld) {
  // Given a copy of the view, expect allocations in the copy not to touch the original.
  AddThreeNodes();
  ClusterView whatif = view_;
  whatif.Allocate(On(NodeId(2), {0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(whatif.FreeWholeGpus(a100_), 8);
  EXPECT_EQ(view_.FreeWholeGpus(a100_), 16);
  EXPECT_EQ(view_.nodes()[2].free_whole, 8);
}

TEST_F(ClusterViewTest, NodeHealthNamesAreLowercase) {
  // Given each health, expect its name.
  EXPECT_STREQ(NodeHealthName(NodeHealth::kUp), "up");
  EXPECT_STREQ(NodeHealthName(NodeHealth::kDraining), "draining");
  EXPECT_STREQ(NodeHealthName(NodeHealth::kDown), "down");
}

using ClusterViewDeathTest = ClusterViewTest;

TEST_F(ClusterViewDeathTest, AllocatingABusyGpuIsABug) {
  // Given a GPU already allocated, expect a second Allocate of it to abort.
  AddThreeNodes();
  view_.Allocate(On(NodeId(0), {0}));
  EXPECT_DEATH(view_.Allocate(On(NodeId(0), {0})), "allocation of busy or unknown resources");
}

TEST_F(ClusterViewDeathTest, ReleasingTwiceIsABug) {
  // Given a placement released once, expect a second release to abort.
  AddThreeNodes();
  Placement p = On(NodeId(0), {0});
  view_.Allocate(p);
  view_.Release(p);
  EXPECT_DEATH(view_.Release(p), "double release");
}

TEST_F(ClusterViewTest, HotGpuIsWithheldUntilItCoolsPastTheResumeTemperature) {
  AddThreeNodes();
  view_.SetThermalLimits(85, 75);
  std::vector<int> temps(4, 40);
  temps[2] = 85;  // at the limit: hot
  ASSERT_TRUE(view_.SetTemperatures(NodeId(1), temps).ok());
  const ClusterView::Node* h = view_.Find(NodeId(1));
  EXPECT_EQ(h->free_whole, 3);
  EXPECT_EQ(h->free_milli[2], 0);
  EXPECT_EQ(view_.FreeWholeGpus(h100_), 3);
  EXPECT_FALSE(view_.CanAllocate(On(NodeId(1), {2})));
  // A job already on a GPU that turns hot runs on; what it gives back stays withheld.
  view_.Allocate(On(NodeId(1), {3}));
  temps[3] = 90;
  ASSERT_TRUE(view_.SetTemperatures(NodeId(1), temps).ok());
  view_.Release(On(NodeId(1), {3}));
  EXPECT_EQ(view_.FreeWholeGpus(h100_), 2);
  // Cooler but above the resume temperature: still hot (no flapping at the limit).
  temps[2] = 80;
  temps[3] = 76;
  ASSERT_TRUE(view_.SetTemperatures(NodeId(1), temps).ok());
  EXPECT_EQ(view_.FreeWholeGpus(h100_), 2);
  temps[2] = 75;
  ASSERT_TRUE(view_.SetTemperatures(NodeId(1), temps).ok());
  EXPECT_EQ(view_.FreeWholeGpus(h100_), 3);
  EXPECT_TRUE(view_.CanAllocate(On(NodeId(1), {2})));
  temps[3] = 30;
  ASSERT_TRUE(view_.SetTemperatures(NodeId(1), temps).ok());
  EXPECT_EQ(view_.FreeWholeGpus(h100_), 4);
  EXPECT_EQ(view_.FreeMilli(h100_), 4000);
}

TEST_F(ClusterViewTest, ThermalLimitsOffByDefaultAndTurningThemOffFreesHeldGpus) {
  AddThreeNodes();
  std::vector<int> temps(4, 99);
  ASSERT_TRUE(view_.SetTemperatures(NodeId(1), temps).ok());
  EXPECT_EQ(view_.FreeWholeGpus(h100_), 4) << "the simulator never holds a GPU for heat";
  view_.SetThermalLimits(85, 75);
  EXPECT_EQ(view_.FreeWholeGpus(h100_), 0);
  view_.SetThermalLimits(0, 0);
  EXPECT_EQ(view_.FreeWholeGpus(h100_), 4);
  // A node that registers again with the same GPUs keeps them held until they cool; with other
  // GPUs it starts afresh.
  view_.SetThermalLimits(85, 75);
  EXPECT_EQ(view_.FreeWholeGpus(h100_), 0);
  ASSERT_TRUE(view_.UpsertNode(NodeId(1), MakeNode("h0", "H100", 4)).ok());
  EXPECT_EQ(view_.FreeWholeGpus(h100_), 0);
  ASSERT_TRUE(view_.UpsertNode(NodeId(1), MakeNode("h0", "H100", 2)).ok());
  EXPECT_EQ(view_.FreeWholeGpus(h100_), 2);
}

// The free-GPU index walks nodes in the order of a std::set of (count, position) pairs, under
// random inserts, moves and erases across several words of positions and many counts; on 300
// positions (five words) and on 20,000 (313 words, five summary words), the larger one sparse
// (few positions filed, most words empty, so walks skip whole summary words).
class FreeGpuIndexTest : public ::testing::TestWithParam<int> {};

TEST_P(FreeGpuIndexTest, WalksInTheOrderOfAnOrderedSetOfPairs) {
  FreeGpuIndex index;
  std::set<std::pair<int, int>> reference;
  std::vector<int> filed(GetParam(), -1);  // per position: its count, -1 if not filed
  std::mt19937 rng(7);
  // Masks for walks that pass over positions: none, a random tenth, and nine tenths in runs
  // (whole words and summary words passed over).
  std::vector<NodeMask> masks(3);
  for (NodeMask& m : masks) m.Assign(filed.size());
  for (size_t pos = 0; pos < filed.size(); ++pos) {
    if (rng() % 10 == 0) masks[1].Set(pos);
    if ((pos / 700) % 10 != 3) masks[2].Set(pos);
  }
  auto check = [&](int from) {
    std::vector<std::pair<int, int>> got, want;
    for (auto it = index.From(from); it != index.end(); ++it) got.push_back(*it);
    for (auto it = reference.lower_bound({from, -1}); it != reference.end(); ++it) want.push_back(*it);
    ASSERT_EQ(got, want) << "walk from " << from;
    for (size_t k = 0; k < masks.size(); ++k) {
      std::vector<std::pair<int, int>> got_open, want_open;
      for (auto it = index.From(from, &masks[k]); it != index.end(); ++it) got_open.push_back(*it);
      for (const auto& e : want) {
        if (!masks[k][static_cast<size_t>(e.second)]) want_open.push_back(e);
      }
      ASSERT_EQ(got_open, want_open) << "walk from " << from << " past mask " << k;
    }
    int64_t at_least = 0;
    for (const auto& e : reference) at_least += e.first >= from ? 1 : 0;
    EXPECT_EQ(index.CountAtLeast(from), at_least);
  };
  for (int step = 0; step < 3000; ++step) {
    const int pos = static_cast<int>(rng() % filed.size());
    const int count = static_cast<int>(rng() % 17);
    if (filed[pos] < 0) {
      index.Insert(count, pos);
      reference.insert({count, pos});
      filed[pos] = count;
    } else if (rng() % 3 == 0) {
      index.Erase(filed[pos], pos);
      reference.erase({filed[pos], pos});
      filed[pos] = -1;
    } else {
      index.Move(filed[pos], count, pos);
      reference.erase({filed[pos], pos});
      reference.insert({count, pos});
      filed[pos] = count;
    }
    if (step % 97 == 0) {
      for (int from : {0, 1, 5, 16, 17}) check(from);
    }
  }
  for (int from = 0; from <= 18; ++from) check(from);
  EXPECT_EQ(index.empty(), reference.empty());
  EXPECT_EQ(index.Count(3), static_cast<int64_t>(std::count_if(reference.begin(), reference.end(),
                                                               [](const auto& e) { return e.first == 3; })));
  // Emptied again, step by step, the walks stay those of the set.
  for (size_t pos = 0; pos < filed.size(); ++pos) {
    if (filed[pos] < 0) continue;
    index.Erase(filed[pos], static_cast<int>(pos));
    reference.erase({filed[pos], static_cast<int>(pos)});
    if (pos % 53 == 0) {
      for (int from : {0, 4, 16}) check(from);
    }
  }
  EXPECT_TRUE(index.empty());
  EXPECT_EQ(index.From(0), index.end());
}

INSTANTIATE_TEST_SUITE_P(Sizes, FreeGpuIndexTest, ::testing::Values(300, 20000));

TEST_F(ClusterViewTest, ReacquireUndoesAReleaseOnAGpuThatTurnedHot) {
  // Given a job on GPUs 0-1 of a node whose GPU 0 then turns hot, expect a trial release to free
  // only GPU 1 (GPU 0's share is held), Allocate to refuse taking it back, and Reacquire to put
  // the node and the counts back as they were before the release.
  AddThreeNodes();
  view_.SetThermalLimits(85, 75);
  Placement p = On(NodeId(0), {0, 1});
  view_.Allocate(p);
  ASSERT_TRUE(view_.SetTemperatures(NodeId(0), {90, 40, 40, 40, 40, 40, 40, 40}).ok());
  const ClusterView before = view_;
  view_.StartTrial();
  view_.Release(p);
  EXPECT_EQ(view_.Find(NodeId(0))->free_whole, 7);
  EXPECT_EQ(view_.Find(NodeId(0))->held_milli[0], model::kMilliGpuPerGpu);
  EXPECT_FALSE(view_.CanAllocate(p));
  view_.Reacquire(p);
  const ClusterView::Node& n = *view_.Find(NodeId(0));
  const ClusterView::Node& b = *before.Find(NodeId(0));
  EXPECT_EQ(n.free_whole, b.free_whole);
  EXPECT_EQ(n.free_milli, b.free_milli);
  EXPECT_EQ(n.held_milli, b.held_milli);
  EXPECT_EQ(view_.FreeWholeGpus(a100_), before.FreeWholeGpus(a100_));
  EXPECT_EQ(view_.FreeMilli(a100_), before.FreeMilli(a100_));
  EXPECT_EQ(view_.NodesWithFreeWhole(a100_, 7), before.NodesWithFreeWhole(a100_, 7));
  view_.EndTrial();
  EXPECT_EQ(view_.Find(NodeId(0))->free_milli, b.free_milli);
}

TEST_F(ClusterViewTest, LargeNodeIdsAreFoundBesideSmallOnes) {
  // Ids far beyond the node count live outside the dense table; both kinds are found.
  ASSERT_TRUE(view_.UpsertNode(NodeId(3), MakeNode("a0", "A100", 8)).ok());
  ASSERT_TRUE(view_.UpsertNode(NodeId(int64_t{1} << 40), MakeNode("a1", "A100", 8)).ok());
  ASSERT_TRUE(view_.UpsertNode(NodeId(5), MakeNode("a2", "A100", 8)).ok());
  EXPECT_EQ(view_.IndexOf(NodeId(3)), 0);
  EXPECT_EQ(view_.IndexOf(NodeId(int64_t{1} << 40)), 1);
  EXPECT_EQ(view_.IndexOf(NodeId(5)), 2);
  EXPECT_EQ(view_.IndexOf(NodeId(4)), -1);
  EXPECT_EQ(view_.IndexOf(NodeId(-1)), -1);
  EXPECT_EQ(view_.IndexOf(NodeId((int64_t{1} << 40) + 1)), -1);
  view_.Allocate(On(NodeId(int64_t{1} << 40), {0, 1}));
  EXPECT_EQ(view_.Find(NodeId(int64_t{1} << 40))->free_whole, 6);
  EXPECT_EQ(view_.NodesWithFreeWhole(view_.ModelIndex("A100"), 7), 2);
}

TEST_F(ClusterViewTest, ReleasingAPlacementPartByPartEqualsReleasingItWhole) {
  // Given a two-node job (one GPU of it hot), expect its parts released one by one, in either
  // order, to leave the nodes and counts as one Release does, and ReacquirePart to undo each.
  AddThreeNodes();
  view_.SetThermalLimits(85, 75);
  Placement p = On(NodeId(0), {0, 1});
  p.parts.push_back(On(NodeId(2), {2, 3, 4}).parts[0]);
  view_.Allocate(p);
  ASSERT_TRUE(view_.SetTemperatures(NodeId(2), {40, 40, 90, 40, 40, 40, 40, 40}).ok());
  const ClusterView before = view_;
  ClusterView whole = view_;
  whole.Release(p);
  view_.ReleasePart(p.parts[1]);
  view_.ReleasePart(p.parts[0]);
  for (NodeId id : {NodeId(0), NodeId(2)}) {
    EXPECT_EQ(view_.Find(id)->free_whole, whole.Find(id)->free_whole);
    EXPECT_EQ(view_.Find(id)->free_milli, whole.Find(id)->free_milli);
    EXPECT_EQ(view_.Find(id)->held_milli, whole.Find(id)->held_milli);
  }
  EXPECT_EQ(view_.FreeWholeGpus(a100_), whole.FreeWholeGpus(a100_));
  EXPECT_EQ(view_.NodesWithFreeWhole(a100_, 8), whole.NodesWithFreeWhole(a100_, 8));
  EXPECT_EQ(view_.changes(), whole.changes() + 1);  // one change per call outside a trial
  view_.ReacquirePart(p.parts[0]);
  view_.ReacquirePart(p.parts[1]);
  for (NodeId id : {NodeId(0), NodeId(2)}) {
    EXPECT_EQ(view_.Find(id)->free_whole, before.Find(id)->free_whole);
    EXPECT_EQ(view_.Find(id)->free_milli, before.Find(id)->free_milli);
    EXPECT_EQ(view_.Find(id)->held_milli, before.Find(id)->held_milli);
  }
  EXPECT_EQ(view_.FreeMilli(a100_), before.FreeMilli(a100_));
}

TEST_F(ClusterViewTest, EveryChangeOutsideATrialCountsAndATrialLeavesTheCountAndTheNodes) {
  // A pass trusts an answer read from the view while changes() stays the same: every way of
  // changing the view must count, and a trial (whole or part by part) must leave no trace.
  AddThreeNodes();
  uint64_t last = view_.changes();
  auto counted = [&](const char* what) {
    EXPECT_GT(view_.changes(), last) << what << " did not count as a change";
    last = view_.changes();
  };
  Placement p = On(NodeId(0), {0, 1});
  p.parts.push_back(On(NodeId(2), {4}).parts[0]);
  view_.Allocate(p);
  counted("Allocate");
  view_.Release(p);
  counted("Release");
  view_.Allocate(p);
  counted("Allocate");
  view_.ReleasePart(p.parts[0]);
  counted("ReleasePart");
  view_.ReacquirePart(p.parts[0]);
  counted("ReacquirePart");
  view_.Release(p);
  view_.Reacquire(p);
  counted("Reacquire");
  ASSERT_TRUE(view_.SetTemperatures(NodeId(1), {40, 41, 42, 43}).ok());
  counted("SetTemperatures");
  view_.SetThermalLimits(85, 75);
  counted("SetThermalLimits");
  ASSERT_TRUE(view_.SetHealth(NodeId(1), NodeHealth::kDown).ok());
  counted("SetHealth");
  ASSERT_TRUE(view_.UpsertNode(NodeId(3), MakeNode("a2", "A100", 8)).ok());
  counted("UpsertNode");

  const ClusterView before = view_;
  view_.StartTrial();
  view_.ReleasePart(p.parts[1]);
  view_.ReleasePart(p.parts[0]);
  view_.ReacquirePart(p.parts[1]);
  view_.Release(On(NodeId(2), {}));
  EXPECT_EQ(view_.changes(), last);  // a trial does not count
  view_.EndTrial();
  EXPECT_EQ(view_.changes(), last);
  for (NodeId id : {NodeId(0), NodeId(2)}) {
    EXPECT_EQ(view_.Find(id)->free_milli, before.Find(id)->free_milli);
    EXPECT_EQ(view_.Find(id)->free_whole, before.Find(id)->free_whole);
  }
  EXPECT_EQ(view_.FreeWholeGpus(a100_), before.FreeWholeGpus(a100_));
  EXPECT_EQ(view_.NodesWithFreeWhole(a100_, 8), before.NodesWithFreeWhole(a100_, 8));
}

}  // namespace
}  // namespace gpufleet::sched
