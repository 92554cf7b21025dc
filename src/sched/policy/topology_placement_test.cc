#include "sched/policy/topology_placement.h"

#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "testing/fakes.h"

namespace gpufleet::sched {
namespace {

using model::JobSpec;
using model::MarketPreference;
using model::NodeAssignment;
using model::Placement;
using testing::MakeJob;
using testing::MakeNode;
using Kind = PlaceResult::Kind;

// The positions whose entry is not 0, as a NodeMask (empty for an empty list).
NodeMask Mask(const std::vector<char>& excluded) {
  NodeMask mask;
  if (excluded.empty()) return mask;
  mask.Assign(excluded.size());
  for (size_t i = 0; i < excluded.size(); ++i) {
    if (excluded[i]) mask.Set(i);
  }
  return mask;
}

class TopologyPlacementTest : public ::testing::Test {
 protected:
  NodeId Add(const model::NodeSpec& spec) {
    NodeId id(next_id_++);
    Status s = view_.UpsertNode(id, spec);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return id;
  }
  NodeId AddNvlink(const std::string& name) {
    model::NodeSpec n = MakeNode(name, "A100", 8);
    n.nvlink_domain = {0, 0, 0, 0, 1, 1, 1, 1};
    return Add(n);
  }
  // Books GPUs on a node as a running job would.
  void Use(NodeId node, std::vector<int> gpus, int64_t milli = model::kMilliGpuPerGpu) {
    Placement p;
    p.parts.push_back(NodeAssignment{node, std::move(gpus), milli, 0, 0});
    view_.Allocate(p);
  }
  void Temps(NodeId node, std::vector<int> t) { ASSERT_TRUE(view_.SetTemperatures(node, t).ok()); }
  // `excluded`: per node position, 1 when the job may not use it.
  PlaceResult Place(const JobSpec& job, bool explain = false, const std::vector<char>* excluded = nullptr) {
    NodeMask mask;
    if (excluded) mask = Mask(*excluded);
    PlaceOptions po;
    po.explain = explain;
    po.excluded = excluded ? &mask : nullptr;
    PlaceResult full = placement_.Place(job, view_, po);
    // Asking only whether the job is placed must give the same answer, whatever the case.
    PlaceOptions ask;
    ask.excluded = po.excluded;
    ask.answer_only = true;
    EXPECT_EQ(placement_.Place(job, view_, ask).kind, full.kind) << "answer_only disagrees";
    return full;
  }
  // The single part of a placed one-node job.
  static NodeAssignment Only(const PlaceResult& r) {
    EXPECT_EQ(r.kind, Kind::kPlaced) << r.reason;
    EXPECT_EQ(r.placement.parts.size(), 1u);
    return r.placement.parts.empty() ? NodeAssignment{} : r.placement.parts[0];
  }
  static std::vector<NodeId> NodesOf(const PlaceResult& r) {
    std::vector<NodeId> out;
    for (const auto& p : r.placement.parts) out.push_back(p.node);
    return out;
  }
  static JobSpec Gang(int nodes, int gpus_per_node) {
    JobSpec j = MakeJob(gpus_per_node);
    j.nodes = nodes;
    return j;
  }
  static JobSpec Slice(int64_t milli) {
    JobSpec j = MakeJob(1);
    j.gpu_milli = milli;
    return j;
  }

  ClusterView view_;
  TopologyPlacement placement_;
  int64_t next_id_ = 0;
};

TEST_F(TopologyPlacementTest, FourGpuJobLandsInOneFreeNvlinkDomain) {
  // Given a node with NVLink domains {0,1,2,3} and {4,5,6,7} and GPU 0 busy, expect a 4-GPU job
  // on GPUs 4-7; with GPU 5 busy instead, on GPUs 0-3.
  NodeId n = AddNvlink("n0");
  Use(n, {0});
  NodeAssignment a = Only(Place(MakeJob(4)));
  EXPECT_EQ(a.node, n);
  EXPECT_EQ(a.gpus, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(a.gpu_milli, 1000);

  ClusterView fresh;
  view_ = fresh;
  next_id_ = 0;
  n = AddNvlink("n0");
  Use(n, {5});
  EXPECT_EQ(Only(Place(MakeJob(4))).gpus, (std::vector<int>{0, 1, 2, 3}));
}

TEST_F(TopologyPlacementTest, PicksTheTightestDomainThatHoldsThePart) {
  // Given GPU 0 busy (domain 0 has 3 free, domain 1 has 4), expect a 3-GPU job in domain 0 and
  // a 2-GPU job too, keeping domain 1 whole.
  NodeId n = AddNvlink("n0");
  Use(n, {0});
  EXPECT_EQ(Only(Place(MakeJob(3))).gpus, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(Only(Place(MakeJob(2))).gpus, (std::vector<int>{1, 2}));
}

TEST_F(TopologyPlacementTest, SpansDomainsOnlyWhenNoDomainHoldsThePart) {
  // Given GPUs 0 and 4 busy (3 free per domain), expect a 4-GPU job split over both domains on
  // this node; with another node that has a whole free domain, expect that node instead, though
  // it leaves more GPUs free.
  NodeId n0 = AddNvlink("n0");
  Use(n0, {0, 4});
  EXPECT_EQ(Only(Place(MakeJob(4))).gpus, (std::vector<int>{1, 2, 3, 5}));
  NodeId n1 = AddNvlink("n1");
  NodeAssignment a = Only(Place(MakeJob(4)));
  EXPECT_EQ(a.node, n1);
  EXPECT_EQ(a.gpus, (std::vector<int>{0, 1, 2, 3}));
}

TEST_F(TopologyPlacementTest, DomainsAreTakenInIdOrderOnTiesAndCoolestFirstWithinOne) {
  // Given a node whose NVLink domains are interleaved, {1,5} (domain 0), {3,4,7} (domain 1) and
  // {0,2,6} (domain 2), with temperatures 60 20 30 70 40 20 30 50 °C, expect a 2-GPU job in the
  // tightest domain (0), a 3-GPU job in domain 1 (as tight as domain 2, and first by id), a
  // 4-GPU job over domain 1 and the coolest GPU of domain 2 (largest domains first, ties by id),
  // and with GPU 1 busy, a 2-GPU job on the two coolest GPUs of domain 1.
  model::NodeSpec spec = MakeNode("n0", "A100", 8);
  spec.nvlink_domain = {2, 0, 2, 1, 1, 0, 2, 1};
  NodeId n = Add(spec);
  Temps(n, {60, 20, 30, 70, 40, 20, 30, 50});
  EXPECT_EQ(Only(Place(MakeJob(2))).gpus, (std::vector<int>{1, 5}));
  EXPECT_EQ(Only(Place(MakeJob(3))).gpus, (std::vector<int>{3, 4, 7}));
  EXPECT_EQ(Only(Place(MakeJob(4))).gpus, (std::vector<int>{2, 3, 4, 7}));
  Use(n, {1});
  EXPECT_EQ(Only(Place(MakeJob(2))).gpus, (std::vector<int>{4, 7}));
}

TEST_F(TopologyPlacementTest, BestFitPrefersThePartlyUsedNode) {
  // Given a whole free node first and a node with GPUs 0-3 busy, expect 2- and 4-GPU jobs on the
  // partly used node so the free node stays whole.
  NodeId whole = Add(MakeNode("whole", "A100", 8));
  NodeId partly = Add(MakeNode("partly", "A100", 8));
  Use(partly, {0, 1, 2, 3});
  NodeAssignment two = Only(Place(MakeJob(2)));
  EXPECT_EQ(two.node, partly);
  EXPECT_EQ(two.gpus, (std::vector<int>{4, 5}));
  EXPECT_EQ(Only(Place(MakeJob(4))).node, partly);
  EXPECT_EQ(Only(Place(MakeJob(5))).node, whole);
}

TEST_F(TopologyPlacementTest, FirstFitTakesTheEarliestNodeThatHoldsTheJob) {
  // Given node a with 8 free GPUs and node b with 2 free, expect a 2-GPU job on b by default
  // (best fit keeps a whole) and on a with fit=first (node order decides, as in YARN).
  NodeId a = Add(MakeNode("a", "A100", 8));
  NodeId b = Add(MakeNode("b", "A100", 8));
  Use(b, {0, 1, 2, 3, 4, 5});
  EXPECT_EQ(Only(Place(MakeJob(2))).node, b);
  TopologyPlacement first(TopologyPlacementOptions{80, Fit::kFirst});
  PlaceResult r = first.Place(MakeJob(2), view_, PlaceOptions{});
  EXPECT_EQ(Only(r).node, a);
  EXPECT_EQ(first.Name(), "topology:first-fit");
}

TEST_F(TopologyPlacementTest, OneNodeJobsFindTheNodeTheScanWouldOnABusyOrIdleCluster) {
  // Given 24 nodes (labelled in turn zone a and b; n5 draining, n9 with too few CPUs for the
  // jobs) filled at random, and some nodes excluded at random, expect a first-fit job on the
  // first node in join order with enough free GPUs that is not excluded, draining or short of
  // CPUs, and a best-fit job that needs zone a on the tightest such node of zone a (the earlier
  // on ties), whether few nodes have room (read from the free-GPU index) or many (read in
  // order): the two ways must agree with the rule.
  std::vector<NodeId> ids;
  for (int i = 0; i < 24; ++i) {
    model::NodeSpec n = MakeNode("n" + std::to_string(i), "A100", 8, {i % 2 == 0 ? "zone=a" : "zone=b"});
    n.cpu_milli = i == 9 ? 1000 : 64000;
    ids.push_back(Add(n));
  }
  ASSERT_TRUE(view_.SetHealth(ids[5], NodeHealth::kDraining).ok());
  TopologyPlacement first(TopologyPlacementOptions{80, Fit::kFirst});
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    // Free the cluster, then book a random number of GPUs on each node: most full in the early
    // rounds (few nodes with room), most free in the later ones.
    for (NodeId id : ids) {
      const ClusterView::Node* n = view_.Find(id);
      std::vector<int> busy;
      for (int g = 0; g < 8; ++g) {
        if (n->free_milli[g] < model::kMilliGpuPerGpu) busy.push_back(g);
      }
      if (!busy.empty()) {
        Placement p;
        p.parts.push_back(NodeAssignment{id, busy, model::kMilliGpuPerGpu, 0, 0});
        view_.Release(p);
      }
      const int used = round < 100 ? static_cast<int>(rng() % 9) : static_cast<int>(rng() % 3);
      std::vector<int> gpus;
      for (int g = 0; g < used; ++g) gpus.push_back(g);
      if (!gpus.empty()) Use(id, gpus);
    }
    const int want = 1 + static_cast<int>(rng() % 8);
    std::vector<char> excluded(ids.size(), 0);
    for (size_t i = 0; i < ids.size(); ++i) excluded[i] = rng() % 6 == 0 ? 1 : 0;
    std::optional<NodeId> first_expected, best_expected;
    int best_left = 99;
    for (size_t i = 0; i < ids.size(); ++i) {
      const int free = view_.Find(ids[i])->free_whole;
      if (free < want || excluded[i] || i == 5 || i == 9) continue;
      if (!first_expected) first_expected = ids[i];
      if (i % 2 == 0 && free - want < best_left) {
        best_left = free - want;
        best_expected = ids[i];
      }
    }
    SCOPED_TRACE("round " + std::to_string(round) + ", " + std::to_string(want) + " GPUs");
    JobSpec job = MakeJob(want);
    job.cpu_milli = 2000;
    PlaceOptions po;
    const NodeMask mask = Mask(excluded);
    po.excluded = &mask;
    PlaceResult ff = first.Place(job, view_, po);
    if (first_expected) {
      EXPECT_EQ(Only(ff).node, *first_expected);
    } else {
      EXPECT_EQ(ff.kind, Kind::kWait);
    }
    JobSpec in_a = job;
    in_a.constraints["zone"] = "a";
    PlaceResult bf = Place(in_a, false, &excluded);
    if (best_expected) {
      EXPECT_EQ(Only(bf).node, *best_expected);
    } else {
      EXPECT_EQ(bf.kind, Kind::kWait);
    }
  }
}

TEST_F(TopologyPlacementTest, FirstFitFollowsJoinOrderWhenANodeChangedModel) {
  // Given node x (the first position) joined as an H100 node and later turned into an A100 node,
  // A100's nodes are in join order n1, n2, x. With n1 full, expect a first-fit job on n2, the
  // first in that order, not on x, the first by position.
  NodeId x = Add(MakeNode("x", "H100", 8));
  NodeId n1 = Add(MakeNode("n1", "A100", 8));
  NodeId n2 = Add(MakeNode("n2", "A100", 8));
  ASSERT_TRUE(view_.UpsertNode(x, MakeNode("x", "A100", 8)).ok());
  const int a100 = view_.ModelIndex("A100");
  ASSERT_FALSE(view_.NodesInPositionOrder(a100));
  Use(n1, {0, 1, 2, 3, 4, 5, 6, 7});
  TopologyPlacement first(TopologyPlacementOptions{80, Fit::kFirst});
  EXPECT_EQ(Only(first.Place(MakeJob(4), view_, PlaceOptions{})).node, n2);
}

TEST_F(TopologyPlacementTest, FirstFitGangTakesTheFirstRackThatHoldsIt) {
  // Given racks r0 (nodes 0-3, all free) and r1 (nodes 4-5, free), expect a 2-node gang in the
  // smaller rack r1 by default (the tightest group) and in r0 with fit=first.
  for (int i = 0; i < 6; ++i) {
    model::NodeSpec n = MakeNode("n" + std::to_string(i), "A100", 8);
    n.labels["rack"] = i < 4 ? "r0" : "r1";
    Add(n);
  }
  std::vector<NodeId> best = NodesOf(Place(Gang(2, 8)));
  EXPECT_EQ(best, (std::vector<NodeId>{NodeId(4), NodeId(5)}));
  TopologyPlacement first(TopologyPlacementOptions{80, Fit::kFirst});
  std::vector<NodeId> ff = NodesOf(first.Place(Gang(2, 8), view_, PlaceOptions{}));
  EXPECT_EQ(ff, (std::vector<NodeId>{NodeId(0), NodeId(1)}));
}

TEST_F(TopologyPlacementTest, EqualNodesTieBreakOnTheEarlierNode) {
  // Given two identical free nodes, expect the first one.
  NodeId first = Add(MakeNode("a", "A100", 8));
  Add(MakeNode("b", "A100", 8));
  EXPECT_EQ(Only(Place(MakeJob(3))).node, first);
}

TEST_F(TopologyPlacementTest, AvoidsTheNodeWithHotGpus) {
  // Given two equal nodes where the first runs at 85 C, expect the cool second node; at 79 C the
  // first node is not hot and wins the tie; at exactly 80 C it is hot.
  NodeId hot = Add(MakeNode("hot", "A100", 8));
  NodeId cool = Add(MakeNode("cool", "A100", 8));
  Temps(hot, {85, 85, 85, 85, 85, 85, 85, 85});
  Temps(cool, {50, 50, 50, 50, 50, 50, 50, 50});
  EXPECT_EQ(Only(Place(MakeJob(1))).node, cool);
  Temps(hot, {80, 80, 80, 80, 80, 80, 80, 80});
  EXPECT_EQ(Only(Place(MakeJob(1))).node, cool);
  Temps(hot, {79, 79, 79, 79, 79, 79, 79, 79});
  EXPECT_EQ(Only(Place(MakeJob(1))).node, hot);
}

TEST_F(TopologyPlacementTest, CoolGpusBeatABetterFit) {
  // Given a node whose only 2 free GPUs are hot (a perfect fit) and a cool whole node, expect a
  // 2-GPU job on the cool node.
  NodeId tight = Add(MakeNode("tight", "A100", 8));
  NodeId cool = Add(MakeNode("cool", "A100", 8));
  Use(tight, {0, 1, 2, 3, 4, 5});
  Temps(tight, {30, 30, 30, 30, 30, 30, 85, 85});
  EXPECT_EQ(Only(Place(MakeJob(2))).node, cool);
}

TEST_F(TopologyPlacementTest, WithinANodePicksTheCoolestGpus) {
  // Given one node with varied temperatures, expect a 2-GPU job on the two coolest GPUs and a
  // 3-GPU job on the three coolest, listed in index order.
  NodeId n = Add(MakeNode("n", "A100", 8));
  Temps(n, {90, 85, 40, 60, 50, 70, 80, 30});
  EXPECT_EQ(Only(Place(MakeJob(2))).gpus, (std::vector<int>{2, 7}));
  EXPECT_EQ(Only(Place(MakeJob(3))).gpus, (std::vector<int>{2, 4, 7}));
}

TEST_F(TopologyPlacementTest, HotThresholdOptionChangesWhatCountsAsHot) {
  // Given hot=90 and a first node at 85 C, expect the first node (not hot under that limit),
  // both for a policy built directly and one built from options.
  NodeId warm = Add(MakeNode("warm", "A100", 8));
  NodeId cool = Add(MakeNode("cool", "A100", 8));
  Temps(warm, {85, 85, 85, 85, 85, 85, 85, 85});
  ASSERT_EQ(Only(Place(MakeJob(1))).node, cool);
  TopologyPlacement hot90(TopologyPlacementOptions{90});
  EXPECT_EQ(Only(hot90.Place(MakeJob(1), view_, {})).node, warm);
  Result<std::unique_ptr<PlacementPolicy>> built = MakeTopologyPlacement({{"hot", "90"}});
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  EXPECT_EQ((*built)->Name(), "topology");
  EXPECT_EQ(Only((*built)->Place(MakeJob(1), view_, {})).node, warm);
}

TEST_F(TopologyPlacementTest, PlacementOptionsAreValidated) {
  // Given an out-of-range temperature and an unknown option, expect errors that say why.
  Result<std::unique_ptr<PlacementPolicy>> too_hot = MakeTopologyPlacement({{"hot", "151"}});
  ASSERT_FALSE(too_hot.ok());
  EXPECT_EQ(too_hot.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(MakeTopologyPlacement({{"hot", "warm"}}).ok());
  EXPECT_TRUE(MakeTopologyPlacement({{"hot_c", "70"}}).ok());
  Result<std::unique_ptr<PlacementPolicy>> unknown = MakeTopologyPlacement({{"spread", "1"}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(), "unknown placement option 'spread' (known: hot, fit)");
}

TEST_F(TopologyPlacementTest, ConstraintsSelectNodesByLabel) {
  // Given a us node first and an eu node, expect a region=eu job on the eu node, and to wait
  // (not be infeasible) when the eu node is full.
  Add(MakeNode("us", "A100", 8, {"region=us"}));
  NodeId eu = Add(MakeNode("eu", "A100", 8, {"region=eu", "gdpr=true"}));
  JobSpec job = MakeJob(2);
  job.constraints = {{"region", "eu"}, {"gdpr", "true"}};
  EXPECT_EQ(Only(Place(job)).node, eu);
  Use(eu, {0, 1, 2, 3, 4, 5, 6, 7});
  PlaceResult r = Place(job, true);
  EXPECT_EQ(r.kind, Kind::kWait);
}

TEST_F(TopologyPlacementTest, UnmatchedLabelsAreInfeasibleAndTheReasonNamesThem) {
  // Given no node labelled region=ap, expect infeasible; with explain, a reason that names the
  // labels and the count of such nodes; without explain, no reason text.
  Add(MakeNode("us", "A100", 8, {"region=us"}));
  Add(MakeNode("eu", "A100", 8, {"region=eu"}));
  JobSpec job = MakeJob(2);
  job.constraints = {{"region", "ap"}};
  PlaceResult quiet = Place(job);
  EXPECT_EQ(quiet.kind, Kind::kInfeasible);
  EXPECT_EQ(quiet.reason, "");
  PlaceResult r = Place(job, true);
  EXPECT_EQ(r.kind, Kind::kInfeasible);
  EXPECT_EQ(r.reason, "needs 1 A100 node(s) with 2 GPUs, labels region=ap but only 0 such node(s) exist");
}

TEST_F(TopologyPlacementTest, OnDemandJobsNeverLandOnSpotAndSpotJobsOnlyOnSpot) {
  // Given a spot, an on-demand and a reserved node: a job of any market takes spot first, then
  // reserved, then on-demand; an on-demand job takes reserved, then on-demand, never spot; a
  // spot job only spot (it waits when the spot node is full).
  model::NodeSpec spot_spec = MakeNode("spot", "A100", 8);
  spot_spec.market = model::Market::kSpot;
  NodeId spot = Add(spot_spec);
  NodeId ondemand = Add(MakeNode("od", "A100", 8));
  model::NodeSpec reserved_spec = MakeNode("res", "A100", 8);
  reserved_spec.market = model::Market::kReserved;
  NodeId reserved = Add(reserved_spec);

  JobSpec od = MakeJob(1);
  od.market = MarketPreference::kOnDemand;
  JobSpec sp = MakeJob(1);
  sp.market = MarketPreference::kSpot;
  EXPECT_EQ(Only(Place(od)).node, reserved);
  EXPECT_EQ(Only(Place(sp)).node, spot);
  EXPECT_EQ(Only(Place(MakeJob(1))).node, spot);

  Use(spot, {0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_EQ(Place(sp).kind, Kind::kWait);
  EXPECT_EQ(Only(Place(MakeJob(1))).node, reserved);
  Use(reserved, {0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_EQ(Only(Place(od)).node, ondemand);
  EXPECT_EQ(Only(Place(MakeJob(1))).node, ondemand);
}

TEST_F(TopologyPlacementTest, AnyMarketJobTakesTheTightestNodeOfTheFirstMarketWithRoom) {
  // Given 24 nodes of one model in three markets, interleaved, with GPUs in use in a fixed
  // pseudo-random pattern, and a 1..8-GPU job that may use any market: expect the node a full
  // scan ranks first, as the test computes it: the lowest market rank (spot, reserved,
  // on-demand) among nodes with room, then the fewest free GPUs, then the earlier node; with
  // nodes excluded, the same among the rest.
  const model::Market markets[] = {model::Market::kOnDemand, model::Market::kSpot, model::Market::kReserved};
  std::vector<NodeId> ids;
  std::vector<int> free;
  std::vector<int> rank;
  uint32_t seed = 12345;
  for (int i = 0; i < 24; ++i) {
    model::NodeSpec spec = MakeNode("n" + std::to_string(i), "A100", 8);
    spec.market = markets[i % 3];
    ids.push_back(Add(spec));
    seed = seed * 1103515245u + 12345u;
    const int used = static_cast<int>((seed >> 16) % 9);
    std::vector<int> gpus;
    for (int g = 0; g < used; ++g) gpus.push_back(g);
    if (!gpus.empty()) Use(ids.back(), gpus);
    free.push_back(8 - used);
    rank.push_back(spec.market == model::Market::kSpot ? 0 : spec.market == model::Market::kReserved ? 1 : 2);
  }
  std::vector<char> excluded(24, 0);
  for (int round = 0; round < 2; ++round) {
    for (int g = 1; g <= 8; ++g) {
      int want = -1;
      for (int i = 0; i < 24; ++i) {
        if (excluded[i] || free[i] < g) continue;
        if (want < 0 || std::tie(rank[i], free[i], i) < std::tie(rank[want], free[want], want)) want = i;
      }
      PlaceResult r = Place(MakeJob(g), false, &excluded);
      if (want < 0) {
        EXPECT_EQ(r.kind, Kind::kWait) << g << " GPUs, round " << round;
      } else {
        EXPECT_EQ(Only(r).node, ids[static_cast<size_t>(want)]) << g << " GPUs, round " << round;
      }
    }
    // Exclude every spot node and every fourth node, then ask again.
    for (int i = 0; i < 24; ++i) excluded[i] = rank[i] == 0 || i % 4 == 0 ? 1 : 0;
  }
}

TEST_F(TopologyPlacementTest, OnDemandJobOnASpotOnlyClusterIsInfeasible) {
  // Given only spot nodes, expect an on-demand job infeasible with the market named.
  model::NodeSpec s = MakeNode("spot", "A100", 8);
  s.market = model::Market::kSpot;
  Add(s);
  JobSpec od = MakeJob(1);
  od.market = MarketPreference::kOnDemand;
  PlaceResult r = Place(od, true);
  EXPECT_EQ(r.kind, Kind::kInfeasible);
  EXPECT_EQ(r.reason, "needs 1 A100 node(s) with 1 GPU, market on-demand but only 0 such node(s) exist");
}

TEST_F(TopologyPlacementTest, OrderedAnyOfPrefersTheFirstModelAndFallsBack) {
  // Given an A100 node (joined first) and an H100 node, expect a job asking H100 then A100 on the
  // H100 node, on the A100 node once the H100 node is full, and a job asking A100 first on A100.
  NodeId a100 = Add(MakeNode("a", "A100", 8));
  NodeId h100 = Add(MakeNode("h", "H100", 8));
  JobSpec h_first = MakeJob(2);
  h_first.gpu_models = {"H100", "A100"};
  PlaceResult r = Place(h_first);
  EXPECT_EQ(Only(r).node, h100);
  EXPECT_EQ(r.placement.gpu_model, "H100");
  JobSpec a_first = MakeJob(2);
  a_first.gpu_models = {"A100", "H100"};
  EXPECT_EQ(Only(Place(a_first)).node, a100);

  Use(h100, {0, 1, 2, 3, 4, 5, 6, 7});
  PlaceResult fallback = Place(h_first);
  EXPECT_EQ(Only(fallback).node, a100);
  EXPECT_EQ(fallback.placement.gpu_model, "A100");
}

TEST_F(TopologyPlacementTest, JobNamingNoModelUsesModelsInJoinOrder) {
  // Given an A100 node (joined first) and a 4-GPU H100 node, expect a 4-GPU job with no model on
  // the A100 node: model order comes before best fit.
  NodeId a100 = Add(MakeNode("a", "A100", 8));
  Add(MakeNode("h", "H100", 4));
  PlaceResult r = Place(MakeJob(4));
  EXPECT_EQ(Only(r).node, a100);
  EXPECT_EQ(r.placement.gpu_model, "A100");
}

TEST_F(TopologyPlacementTest, ModelsTheClusterLacksAreSkippedInTheList) {
  // Given only A100 nodes, expect a job asking TPU then A100 placed on A100.
  NodeId a100 = Add(MakeNode("a", "A100", 8));
  JobSpec j = MakeJob(1);
  j.gpu_models = {"TPU", "A100"};
  EXPECT_EQ(Only(Place(j)).node, a100);
}

TEST_F(TopologyPlacementTest, UnknownModelIsInfeasibleAndListsTheClusterModels) {
  // Given A100 and H100 nodes, expect a job asking TPU or B200 infeasible with both the asked and
  // the present models named; on an empty cluster, the reason says there are no GPU nodes.
  PlaceResult empty = Place(MakeJob(1), true);
  EXPECT_EQ(empty.kind, Kind::kInfeasible);
  EXPECT_EQ(empty.reason, "the cluster has no GPU nodes");
  JobSpec cpu_only = MakeJob(1);
  cpu_only.gpus_per_node = 0;
  EXPECT_EQ(Place(cpu_only, true).reason, "the cluster has no nodes") << "a job without GPUs needs no GPU node";
  Add(MakeNode("a", "A100", 8));
  Add(MakeNode("h", "H100", 8));
  JobSpec j = MakeJob(1);
  j.gpu_models = {"TPU", "B200"};
  PlaceResult r = Place(j, true);
  EXPECT_EQ(r.kind, Kind::kInfeasible);
  EXPECT_EQ(r.reason, "no node has GPU model TPU or B200 (the cluster has: A100, H100)");
}

TEST_F(TopologyPlacementTest, TooManyGpusPerNodeIsInfeasibleWithTheLargestNodeNamed) {
  // Given 8-GPU A100 and 4-GPU H100 nodes, expect a 16-GPU-per-node job infeasible with a
  // reason per model.
  Add(MakeNode("a", "A100", 8));
  Add(MakeNode("h", "H100", 4));
  PlaceResult r = Place(MakeJob(16), true);
  EXPECT_EQ(r.kind, Kind::kInfeasible);
  EXPECT_EQ(r.reason,
            "needs 16 GPUs per node but the largest A100 node has 8; "
            "needs 16 GPUs per node but the largest H100 node has 4");
  JobSpec h_only = MakeJob(6);
  h_only.gpu_models = {"H100"};
  EXPECT_EQ(Place(h_only, true).reason, "needs 6 GPUs per node but the largest H100 node has 4");
}

TEST_F(TopologyPlacementTest, TooManyCpusIsInfeasibleWithTheNeedSpelledOut) {
  // Given 96-CPU nodes, expect a job asking 200 CPUs infeasible with CPUs and memory in the
  // reason, and a job asking 8 CPUs and 1 GiB placed with them booked on its part.
  Add(MakeNode("a", "A100", 8));
  JobSpec big = MakeJob(1);
  big.cpu_milli = 200'000;
  PlaceResult r = Place(big, true);
  EXPECT_EQ(r.kind, Kind::kInfeasible);
  EXPECT_EQ(r.reason, "needs 1 A100 node(s) with 1 GPU, 200 CPUs and 0 MiB but only 0 such node(s) exist");
  JobSpec fits = MakeJob(1);
  fits.cpu_milli = 8000;
  fits.mem_mib = 1024;
  NodeAssignment a = Only(Place(fits));
  EXPECT_EQ(a.cpu_milli, 8000);
  EXPECT_EQ(a.mem_mib, 1024);
}

TEST_F(TopologyPlacementTest, NodeWithoutFreeCpusIsSkipped) {
  // Given a first node whose CPUs are all booked (GPUs free) and a second node, expect a job
  // asking CPUs on the second node.
  NodeId a = Add(MakeNode("a", "A100", 8));
  NodeId b = Add(MakeNode("b", "A100", 8));
  Placement cpus;
  cpus.parts.push_back(NodeAssignment{a, {0}, 1000, 96'000, 0});
  view_.Allocate(cpus);
  JobSpec j = MakeJob(1);
  j.cpu_milli = 1000;
  EXPECT_EQ(Only(Place(j)).node, b);
}

TEST_F(TopologyPlacementTest, GangGoesToOneRackEvenWhenNodeOrderInterleavesRacks) {
  // Given nodes joined as r1, r2, r1, r2, expect a 2-node gang on the two r1 nodes, not the
  // first two nodes; with the first r1 node partly busy, on the two r2 nodes.
  NodeId n0 = Add(MakeNode("n0", "A100", 8, {"rack=r1"}));
  NodeId n1 = Add(MakeNode("n1", "A100", 8, {"rack=r2"}));
  NodeId n2 = Add(MakeNode("n2", "A100", 8, {"rack=r1"}));
  NodeId n3 = Add(MakeNode("n3", "A100", 8, {"rack=r2"}));
  PlaceResult r = Place(Gang(2, 8));
  ASSERT_EQ(r.kind, Kind::kPlaced);
  EXPECT_EQ(NodesOf(r), (std::vector<NodeId>{n0, n2}));
  for (const auto& part : r.placement.parts) EXPECT_EQ(part.gpus.size(), 8u);
  Use(n0, {0});
  EXPECT_EQ(NodesOf(Place(Gang(2, 8))), (std::vector<NodeId>{n1, n3}));
}

TEST_F(TopologyPlacementTest, GangTakesTheTightestRackThatHoldsIt) {
  // Given rack r1 with three free nodes and rack r2 with two, expect a 2-node gang on r2.
  Add(MakeNode("a", "A100", 8, {"rack=r1"}));
  Add(MakeNode("b", "A100", 8, {"rack=r1"}));
  Add(MakeNode("c", "A100", 8, {"rack=r1"}));
  NodeId d = Add(MakeNode("d", "A100", 8, {"rack=r2"}));
  NodeId e = Add(MakeNode("e", "A100", 8, {"rack=r2"}));
  EXPECT_EQ(NodesOf(Place(Gang(2, 4))), (std::vector<NodeId>{d, e}));
}

TEST_F(TopologyPlacementTest, GangFallsBackToOneZoneThenToTheFewestRacks) {
  // Given one node per rack, two racks in zone z1, expect a 2-node gang in z1; given no zone
  // with three nodes, expect a 3-node gang to take the rack with two nodes first.
  NodeId a = Add(MakeNode("a", "A100", 8, {"zone=z1", "rack=r1"}));
  Add(MakeNode("b", "A100", 8, {"zone=z2", "rack=r2"}));
  NodeId c = Add(MakeNode("c", "A100", 8, {"zone=z1", "rack=r3"}));
  EXPECT_EQ(NodesOf(Place(Gang(2, 8))), (std::vector<NodeId>{a, c}));

  ClusterView fresh;
  view_ = fresh;
  next_id_ = 0;
  NodeId p = Add(MakeNode("p", "A100", 8, {"zone=z1", "rack=r1"}));
  NodeId q = Add(MakeNode("q", "A100", 8, {"zone=z2", "rack=r2"}));
  NodeId s = Add(MakeNode("s", "A100", 8, {"zone=z2", "rack=r2"}));
  Add(MakeNode("t", "A100", 8, {"zone=z3", "rack=r4"}));
  EXPECT_EQ(NodesOf(Place(Gang(3, 8))), (std::vector<NodeId>{q, s, p}));
}

TEST_F(TopologyPlacementTest, GangWaitsForEnoughFreeNodesAndExplainsIt) {
  // Given two 8-GPU nodes with one partly busy, expect a 2x8 gang to wait with a reason naming
  // how many nodes qualify now.
  NodeId a = Add(MakeNode("a", "A100", 8));
  Add(MakeNode("b", "A100", 8));
  Use(a, {3});
  PlaceResult r = Place(Gang(2, 8), true);
  EXPECT_EQ(r.kind, Kind::kWait);
  EXPECT_EQ(r.reason, "gang waits for 2 A100 nodes with 8 free GPUs each (1 such node(s) now)");
  EXPECT_TRUE(r.placement.parts.empty());
}

TEST_F(TopologyPlacementTest, GangLargerThanTheClusterIsInfeasible) {
  // Given two 8-GPU nodes, expect a 3x8 gang infeasible with the count of such nodes.
  Add(MakeNode("a", "A100", 8));
  Add(MakeNode("b", "A100", 8));
  PlaceResult r = Place(Gang(3, 8), true);
  EXPECT_EQ(r.kind, Kind::kInfeasible);
  EXPECT_EQ(r.reason, "needs 3 A100 node(s) with 8 GPUs but only 2 such node(s) exist");
  // With a 4-GPU node beside them, the count is of the nodes large enough: a 3x4 gang fits, a
  // 3x8 one still never does.
  Add(MakeNode("c", "A100", 4));
  EXPECT_EQ(Place(Gang(3, 4)).kind, Kind::kPlaced);
  PlaceResult wide = Place(Gang(3, 8), true);
  EXPECT_EQ(wide.kind, Kind::kInfeasible);
  EXPECT_EQ(wide.reason, "needs 3 A100 node(s) with 8 GPUs but only 2 such node(s) exist");
}

TEST_F(TopologyPlacementTest, TwoHalfGpuSlicesShareOneGpu) {
  // Given an idle node, expect two 500 milli-GPU slices on the same GPU, each booking 500.
  NodeId n = Add(MakeNode("n", "A100", 8));
  NodeAssignment first = Only(Place(Slice(500)));
  EXPECT_EQ(first.node, n);
  EXPECT_EQ(first.gpus, (std::vector<int>{0}));
  EXPECT_EQ(first.gpu_milli, 500);
  Use(n, first.gpus, first.gpu_milli);
  NodeAssignment second = Only(Place(Slice(500)));
  EXPECT_EQ(second.gpus, (std::vector<int>{0}));
  EXPECT_EQ(second.gpu_milli, 500);
}

TEST_F(TopologyPlacementTest, SliceGoesToTheTightestPartlyUsedGpuItFits) {
  // Given GPU 0 with 500 free, expect a 600 slice on a whole GPU (1), then with GPU 1 at 400
  // free, a 400 slice on GPU 1 (tightest) and a 450 slice on GPU 0.
  NodeId n = Add(MakeNode("n", "A100", 8));
  Use(n, {0}, 500);
  NodeAssignment six = Only(Place(Slice(600)));
  EXPECT_EQ(six.gpus, (std::vector<int>{1}));
  Use(n, six.gpus, 600);
  EXPECT_EQ(Only(Place(Slice(400))).gpus, (std::vector<int>{1}));
  EXPECT_EQ(Only(Place(Slice(450))).gpus, (std::vector<int>{0}));
}

TEST_F(TopologyPlacementTest, SliceNeedingAWholeGpuGoesToTheBusiestNode) {
  // Given a free node first and a node with 6 GPUs busy, expect a slice on the busy node's
  // first free GPU, keeping the free node whole.
  Add(MakeNode("free", "A100", 8));
  NodeId busy = Add(MakeNode("busy", "A100", 8));
  Use(busy, {0, 1, 2, 3, 4, 5});
  NodeAssignment a = Only(Place(Slice(250)));
  EXPECT_EQ(a.node, busy);
  EXPECT_EQ(a.gpus, (std::vector<int>{6}));
}

TEST_F(TopologyPlacementTest, SliceWaitsWhenNoGpuHasEnoughLeft) {
  // Given a 1-GPU node with 500 milli-GPU free, expect a 600 slice to wait, with a reason.
  NodeId n = Add(MakeNode("n", "A100", 1));
  Use(n, {0}, 500);
  PlaceResult r = Place(Slice(600), true);
  EXPECT_EQ(r.kind, Kind::kWait);
  EXPECT_EQ(r.reason, "waiting for a A100 GPU with 600 milli-GPU free");
  EXPECT_EQ(Only(Place(Slice(500))).gpus, (std::vector<int>{0}));
}

TEST_F(TopologyPlacementTest, ExcludedNodesAreNotUsed) {
  // Given two free nodes and the first excluded, expect the second; both excluded, wait; an
  // empty exclusion list excludes nothing.
  NodeId a = Add(MakeNode("a", "A100", 8));
  NodeId b = Add(MakeNode("b", "A100", 8));
  std::vector<char> first = {1, 0};
  EXPECT_EQ(Only(Place(MakeJob(1), false, &first)).node, b);
  std::vector<char> both = {1, 1};
  EXPECT_EQ(Place(MakeJob(1), false, &both).kind, Kind::kWait);
  std::vector<char> none;
  EXPECT_EQ(Only(Place(MakeJob(1), false, &none)).node, a);
}

TEST_F(TopologyPlacementTest, WaitReasonGivesFreeTotalAndLargestBlock) {
  // Given two nodes with 3 free GPUs each, expect a 4-GPU job to wait with the total free and
  // the largest free block; without explain, no text.
  NodeId a = Add(MakeNode("a", "A100", 8));
  NodeId b = Add(MakeNode("b", "A100", 8));
  Use(a, {0, 1, 2, 3, 4});
  Use(b, {0, 1, 2, 3, 4});
  PlaceResult r = Place(MakeJob(4), true);
  EXPECT_EQ(r.kind, Kind::kWait);
  EXPECT_EQ(r.reason, "waiting for 4 free A100 GPUs on one node (6 free in total, largest free block 3)");
  EXPECT_EQ(Place(MakeJob(4)).reason, "");
}

TEST_F(TopologyPlacementTest, DrainingAndDownNodesTakeNoWorkButCountForEver) {
  // Given the only 8-GPU node down and a 4-GPU node draining, expect an 8-GPU job to wait (the
  // node may return) and a 1-GPU job to wait too.
  NodeId big = Add(MakeNode("big", "A100", 8));
  NodeId small = Add(MakeNode("small", "A100", 4));
  ASSERT_TRUE(view_.SetHealth(big, NodeHealth::kDown).ok());
  ASSERT_TRUE(view_.SetHealth(small, NodeHealth::kDraining).ok());
  EXPECT_EQ(Place(MakeJob(8)).kind, Kind::kWait);
  EXPECT_EQ(Place(MakeJob(1)).kind, Kind::kWait);
  ASSERT_TRUE(view_.SetHealth(small, NodeHealth::kUp).ok());
  EXPECT_EQ(Only(Place(MakeJob(1))).node, small);
}

TEST_F(TopologyPlacementTest, NodeThatChangedModelIsNotUsedForItsOldModel) {
  // Given an A100 node re-registered (idle) as a 2-GPU H100 node and a free 8-GPU A100 node,
  // expect a 2-GPU A100 job on the A100 node.
  NodeId changed = Add(MakeNode("x", "A100", 8));
  NodeId a100 = Add(MakeNode("a", "A100", 8));
  ASSERT_TRUE(view_.UpsertNode(changed, MakeNode("x", "H100", 2)).ok());
  JobSpec j = MakeJob(2);
  j.gpu_models = {"A100"};
  PlaceResult r = Place(j);
  EXPECT_EQ(Only(r).node, a100);
}

TEST_F(TopologyPlacementTest, NameIsTopology) {
  // Given the default policy, expect its table name.
  EXPECT_EQ(placement_.Name(), "topology");
}

TEST_F(TopologyPlacementTest, AnEnvironmentGoesOnlyWhereTheNodeSupportsItAndPrefersWarmNodes) {
  // Given three A100 nodes: n0 cannot run pytorch-2.5-cu124 (driver too old), n1 can, n2 can and
  // has it prepared; expect the job on n2 (a warm start), then with n2 full on n1, never on n0.
  model::NodeSpec old = MakeNode("n0", "A100", 8);
  old.environments = {"pytorch-2.1-cu118"};
  model::NodeSpec cold = MakeNode("n1", "A100", 8);
  cold.environments = {"pytorch-2.5-cu124", "pytorch-2.1-cu118"};
  model::NodeSpec warm = cold;
  warm.name = "n2";
  warm.warm_environments = {"pytorch-2.5-cu124"};
  NodeId n0 = Add(old);
  NodeId n1 = Add(cold);
  NodeId n2 = Add(warm);
  JobSpec job = MakeJob(4);
  job.environment = "pytorch-2.5-cu124";
  EXPECT_EQ(Only(Place(job)).node, n2) << "warm first, though n0 and n1 come earlier";
  Use(n2, {0, 1, 2, 3, 4, 5});
  EXPECT_EQ(Only(Place(job)).node, n1) << "then a node that supports it, cold";
  Use(n1, {0, 1, 2, 3, 4, 5});
  PlaceResult r = Place(job, /*explain=*/true);
  EXPECT_NE(r.kind, Kind::kPlaced) << "n0 has 8 free GPUs but cannot run the environment";
  // A job without an environment still goes anywhere.
  EXPECT_EQ(Only(Place(MakeJob(8))).node, n0);
}

TEST_F(TopologyPlacementTest, AnEnvironmentNoNodeSupportsIsNeverPlacedAndSaysSo) {
  model::NodeSpec n = MakeNode("n0", "V100", 8);
  n.environments = {"pytorch-2.5-cu124"};
  Add(n);
  JobSpec job = MakeJob(2);
  job.environment = "pytorch-2.7-cu128";
  PlaceResult r = Place(job, /*explain=*/true);
  EXPECT_EQ(r.kind, Kind::kInfeasible);
  EXPECT_NE(r.reason.find("environment pytorch-2.7-cu128"), std::string::npos) << r.reason;
}

TEST_F(TopologyPlacementTest, AskingOnlyWhetherAJobIsPlacedGivesTheFullAnswersKind) {
  // Random clusters (two models, racks, a down node, markets), random use and random jobs
  // (gangs, slices, exclusions): the cheap answer always equals the full one.
  std::mt19937 rng(11);
  int placed = 0, waiting = 0;
  for (int round = 0; round < 40; ++round) {
    view_ = ClusterView();
    std::vector<NodeId> ids;
    const int nodes = 3 + static_cast<int>(rng() % 10);
    for (int i = 0; i < nodes; ++i) {
      model::NodeSpec n = MakeNode("n" + std::to_string(i), rng() % 3 == 0 ? "H100" : "A100", rng() % 2 ? 8 : 4);
      n.labels[model::kLabelZone] = rng() % 2 ? "z1" : "z2";
      n.labels[model::kLabelRack] = "r" + std::to_string(rng() % 3);
      if (rng() % 4 == 0) n.market = model::Market::kSpot;
      ids.push_back(Add(n));
    }
    if (rng() % 3 == 0) {
      ASSERT_TRUE(view_.SetHealth(ids[rng() % ids.size()], NodeHealth::kDown).ok());
    }
    for (NodeId id : ids) {
      const model::NodeSpec& spec = view_.Find(id)->spec;
      std::vector<int> gpus;
      for (int g = 0; g < spec.gpus; ++g) {
        if (rng() % 2) gpus.push_back(g);
      }
      if (!gpus.empty() && view_.Find(id)->schedulable()) Use(id, gpus, rng() % 4 == 0 ? 500 : model::kMilliGpuPerGpu);
    }
    std::vector<char> excluded(view_.nodes().size(), 0);
    for (char& e : excluded) e = rng() % 5 == 0 ? 1 : 0;
    for (int k = 0; k < 25; ++k) {
      JobSpec job = rng() % 5 == 0 ? Slice(250 * (1 + static_cast<int64_t>(rng() % 4))) : Gang(1 + static_cast<int>(rng() % 3), 1 + static_cast<int>(rng() % 8));
      if (rng() % 4 == 0) job.gpu_models = {"H100"};
      if (rng() % 6 == 0) job.market = MarketPreference::kOnDemand;
      const PlaceResult r = Place(job, false, rng() % 2 ? &excluded : nullptr);  // compares the kinds
      (r.kind == Kind::kPlaced ? placed : waiting) += 1;
    }
  }
  // Both answers came up often enough for the comparison to mean something.
  EXPECT_GT(placed, 100);
  EXPECT_GT(waiting, 100);
}

}  // namespace
}  // namespace gpufleet::sched
