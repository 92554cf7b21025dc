#include "sched/autoscaler.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace gpufleet::sched {
namespace {

using model::Market;
using model::MarketPreference;

constexpr int kOdA = 0;    // H100 x8 on-demand, zone a, $30/h
constexpr int kSpotA = 1;  // H100 x8 spot, zone a, $10/h
constexpr int kOdB = 2;    // H100 x8 on-demand, zone b, $28/h
constexpr int kA100 = 3;   // A100 x8 on-demand, zone a, $20/h

class AutoscalerTest : public ::testing::Test {
 protected:
  AutoscalerTest() {
    input_.now = now_;
    input_.offers = {
        {"h100-od-a", "H100", 8, Market::kOnDemand, 30'000'000, Duration::Minutes(5), "a", 1.0, 0, {}},
        {"h100-spot-a", "H100", 8, Market::kSpot, 10'000'000, Duration::Minutes(5), "a", 1.0, 0, {}},
        {"h100-od-b", "H100", 8, Market::kOnDemand, 28'000'000, Duration::Minutes(5), "b", 1.0, 0, {}},
        {"a100-od-a", "A100", 8, Market::kOnDemand, 20'000'000, Duration::Minutes(5), "a", 1.0, 0, {}},
    };
  }

  PendingJob Job(int64_t id, int nodes, int gpus_per_node = 8,
                 MarketPreference market = MarketPreference::kAny) {
    PendingJob j;
    j.id = JobId(id);
    j.nodes = nodes;
    j.gpus_per_node = gpus_per_node;
    j.gpu_models = {"H100"};
    j.market = market;
    j.queued_since = now_ - Duration::Minutes(1);
    return j;
  }

  PoolNode Node(int64_t id, PoolNodeState state, Market market = Market::kOnDemand,
                std::string zone = "a") {
    PoolNode n;
    n.id = NodeId(id);
    n.spec.name = "n" + std::to_string(id);
    n.spec.gpu_model = "H100";
    n.spec.gpus = 8;
    n.spec.market = market;
    n.spec.price_micros_per_hour = 30'000'000;
    n.spec.labels[model::kLabelZone] = zone;
    n.state = state;
    n.booting_since = now_ - Duration::Minutes(1);
    return n;
  }

  PoolNode IdleNode(int64_t id, Duration idle_for) {
    PoolNode n = Node(id, PoolNodeState::kUp);
    n.idle_since = now_ - idle_for;
    return n;
  }

  static std::vector<int64_t> ReleasedIds(const ScalePlan& plan) {
    std::vector<int64_t> ids;
    for (const Release& r : plan.releases) ids.push_back(r.node.value());
    return ids;
  }

  const Time now_ = Time::FromSeconds(100'000);
  AutoscalerOptions options_;
  ScaleInput input_;
};

TEST_F(AutoscalerTest, GangGetsAllItsNodesFromOneOfferInOneZone) {
  // Given a pending 2 x 8 H100 gang that accepts spot, expect one rent of 2 nodes of the
  // cheapest H100 offer (spot in zone a at $10/h per node: $20/h for the gang) for that job.
  Autoscaler scaler(options_);
  input_.pending = {Job(7, 2)};
  ScalePlan plan = scaler.Decide(input_);
  ASSERT_EQ(plan.rents.size(), 1u);
  EXPECT_EQ(plan.rents[0].offer, kSpotA);
  EXPECT_EQ(plan.rents[0].count, 2);
  EXPECT_EQ(plan.rents[0].zone, "a");
  EXPECT_EQ(plan.rents[0].for_jobs, std::vector<JobId>{JobId(7)});
  EXPECT_FALSE(plan.rents[0].reason.empty());
  EXPECT_TRUE(plan.releases.empty());
}

TEST_F(AutoscalerTest, ATeamsHourlyCapLimitsWhatIsRentedForIt) {
  // Given team iota that may add $25/h more and three 8-GPU jobs of it (spot allowed), expect the
  // $10/h spot node rented for the first two ($20/h) and the third held, naming the cap and the
  // cheapest offer; a job of another team is rented for as before. A cap under every offer rents
  // nothing for the team.
  Autoscaler scaler(options_);
  std::vector<PendingJob> jobs;
  for (int64_t id = 1; id <= 3; ++id) {
    PendingJob j = Job(id, 1);
    j.team = "iota";
    j.max_added_rate_micros = 25'000'000;
    jobs.push_back(j);
  }
  PendingJob other = Job(4, 1);
  other.team = "kappa";
  jobs.push_back(other);
  input_.pending = jobs;
  ScalePlan plan = scaler.Decide(input_);
  ASSERT_EQ(plan.rents.size(), 3u);
  for (const Rent& r : plan.rents) EXPECT_EQ(r.offer, kSpotA);
  ASSERT_EQ(plan.held.size(), 1u);
  EXPECT_EQ(plan.held[0].job, JobId(3));
  EXPECT_NE(plan.held[0].reason.find("team iota may add only $5.00/h more"), std::string::npos) << plan.held[0].reason;
  EXPECT_NE(plan.held[0].reason.find("h100-spot-a, costs $10.00/h"), std::string::npos) << plan.held[0].reason;

  Autoscaler capped(options_);
  PendingJob poor = Job(9, 1);
  poor.team = "iota";
  poor.max_added_rate_micros = 0;
  input_.pending = {poor};
  ScalePlan none = capped.Decide(input_);
  EXPECT_TRUE(none.rents.empty());
  ASSERT_EQ(none.held.size(), 1u);
}

TEST_F(AutoscalerTest, HonoursAllowedModelsAndGpusPerNode) {
  // Given a job allowing A100 or H100, expect the A100 offer ($20/h on-demand) when spot is not
  // allowed; given a job needing 16 GPUs per node, expect no rent and a reason.
  Autoscaler scaler(options_);
  PendingJob either = Job(1, 1, 8, MarketPreference::kOnDemand);
  either.gpu_models = {"H100", "A100"};
  PendingJob wide = Job(2, 1, 16);
  input_.pending = {either, wide};
  ScalePlan plan = scaler.Decide(input_);
  ASSERT_EQ(plan.rents.size(), 1u);
  EXPECT_EQ(plan.rents[0].offer, kA100);
  ASSERT_EQ(plan.held.size(), 1u);
  EXPECT_EQ(plan.held[0].job, JobId(2));
}

TEST_F(AutoscalerTest, OffersAndNodesTooSmallInCpusOrMemoryAreNotRentedOrCounted) {
  // Given H100 offers of 96 CPUs and 1 TiB (the A100 offer's size unknown), expect a job asking
  // for 120 CPUs per node held with a reason, not rented a node it could never use (which would
  // be released idle and rented again, forever); a job of 64 CPUs rents as before, and a booting
  // 96-CPU node covers it but not the larger one.
  for (int i : {kOdA, kSpotA, kOdB}) {
    input_.offers[static_cast<size_t>(i)].cpu_milli = 96'000;
    input_.offers[static_cast<size_t>(i)].mem_mib = 1'048'576;
  }
  Autoscaler scaler(options_);
  PendingJob big = Job(1, 1);
  big.cpu_milli = 120'000;
  PendingJob fits = Job(2, 1);
  fits.cpu_milli = 64'000;
  PendingJob heavy = Job(3, 1);
  heavy.mem_mib = 2'000'000;
  input_.pending = {big, fits, heavy};
  ScalePlan plan = scaler.Decide(input_);
  ASSERT_EQ(plan.rents.size(), 1u);
  EXPECT_EQ(plan.rents[0].for_jobs, std::vector<JobId>{JobId(2)});
  ASSERT_EQ(plan.held.size(), 2u);
  EXPECT_EQ(plan.held[0].job, JobId(1));
  EXPECT_NE(plan.held[0].reason.find("CPUs, memory"), std::string::npos) << plan.held[0].reason;
  EXPECT_EQ(plan.held[1].job, JobId(3));

  // A booting 96-CPU node covers the 64-CPU job, not the 120-CPU one.
  PoolNode booting = Node(40, PoolNodeState::kBooting);
  booting.spec.cpu_milli = 96'000;
  input_.nodes = {booting};
  input_.pending = {fits};
  EXPECT_TRUE(Autoscaler(options_).Decide(input_).rents.empty());
  input_.pending = {big};
  ScalePlan none = Autoscaler(options_).Decide(input_);
  EXPECT_TRUE(none.rents.empty());
  ASSERT_EQ(none.held.size(), 1u);
}

TEST_F(AutoscalerTest, BootingCapacityPreventsASecondRental) {
  // Given a job with nodes booting for it, expect no rent. Given a rent just decided whose nodes
  // the caller has not reported yet, expect no second rent for the same job.
  {
    Autoscaler scaler(options_);
    PoolNode booting = Node(1, PoolNodeState::kBooting, Market::kSpot);
    booting.for_jobs = {JobId(7)};
    input_.nodes = {booting};
    input_.pending = {Job(7, 1)};
    ScalePlan plan = scaler.Decide(input_);
    EXPECT_TRUE(plan.rents.empty());
  }
  Autoscaler scaler(options_);
  input_.nodes.clear();
  input_.pending = {Job(7, 1)};
  ASSERT_EQ(scaler.Decide(input_).rents.size(), 1u);
  input_.now = now_ + Duration::Seconds(30);
  EXPECT_TRUE(scaler.Decide(input_).rents.empty());
}

TEST_F(AutoscalerTest, UnclaimedBootingNodesInOneZoneCoverAGang) {
  // Given two unclaimed booting H100 nodes in zone a and one in zone b, expect a 2-node gang to
  // be covered by the zone-a pair, and a second 2-node gang (only zone b left) to get a rent.
  Autoscaler scaler(options_);
  input_.nodes = {Node(1, PoolNodeState::kBooting, Market::kOnDemand, "b"),
                  Node(2, PoolNodeState::kBooting, Market::kOnDemand, "a"),
                  Node(3, PoolNodeState::kBooting, Market::kOnDemand, "a")};
  input_.pending = {Job(7, 2), Job(8, 2)};
  ScalePlan plan = scaler.Decide(input_);
  ASSERT_EQ(plan.rents.size(), 1u);
  EXPECT_EQ(plan.rents[0].for_jobs, std::vector<JobId>{JobId(8)});
}

TEST_F(AutoscalerTest, OnDemandJobNeverGetsSpot) {
  // Given an on-demand job and a spot offer at a third of the price, expect the cheapest
  // on-demand H100 offer (zone b, $28/h), and a booting spot node not to count as its capacity.
  Autoscaler scaler(options_);
  input_.nodes = {Node(1, PoolNodeState::kBooting, Market::kSpot)};
  input_.pending = {Job(7, 1, 8, MarketPreference::kOnDemand)};
  ScalePlan plan = scaler.Decide(input_);
  ASSERT_EQ(plan.rents.size(), 1u);
  EXPECT_EQ(plan.rents[0].offer, kOdB);
  EXPECT_EQ(plan.rents[0].zone, "b");
}

TEST_F(AutoscalerTest, FallsBackToOnDemandAfterNPreemptions) {
  // Given spot_fallback_after_preemptions = 2, expect a job preempted once to get spot and a job
  // preempted twice to get on-demand.
  options_.spot_fallback_after_preemptions = 2;
  Autoscaler scaler(options_);
  PendingJob once = Job(1, 1);
  once.spot_preemptions = 1;
  PendingJob twice = Job(2, 1);
  twice.spot_preemptions = 2;
  input_.pending = {once, twice};
  ScalePlan plan = scaler.Decide(input_);
  ASSERT_EQ(plan.rents.size(), 2u);
  EXPECT_EQ(plan.rents[0].offer, kSpotA);
  EXPECT_EQ(plan.rents[1].offer, kOdB);
}

TEST_F(AutoscalerTest, FallsBackToOnDemandAfterWaiting) {
  // Given spot_fallback_after_wait = 30 min, expect a job of any market waiting 29 min to get
  // spot (and a wakeup when it reaches 30 min), one waiting 30 min to get on-demand, and a
  // spot-only job to get spot however long it waited (placement would not use anything else).
  options_.spot_fallback_after_wait = Duration::Minutes(30);
  Autoscaler scaler(options_);
  PendingJob young = Job(1, 1, 8, MarketPreference::kAny);
  young.queued_since = now_ - Duration::Minutes(29);
  PendingJob old = Job(2, 1, 8, MarketPreference::kAny);
  old.queued_since = now_ - Duration::Minutes(30);
  PendingJob spot_only = Job(3, 1, 8, MarketPreference::kSpot);
  spot_only.queued_since = now_ - Duration::Hours(5);
  input_.pending = {young, old, spot_only};
  ScalePlan plan = scaler.Decide(input_);
  ASSERT_EQ(plan.rents.size(), 3u);
  EXPECT_EQ(plan.rents[0].offer, kSpotA);
  EXPECT_EQ(plan.rents[1].offer, kOdB);
  EXPECT_EQ(plan.rents[2].offer, kSpotA);
  EXPECT_EQ(plan.next_wakeup, now_ + Duration::Minutes(1));
}

TEST_F(AutoscalerTest, AJobWithNoOnDemandOfferToFallBackToGoesOnWithSpot) {
  // Given a pool whose only H100 offer is spot, expect a job of any market preempted past the
  // fallback count, and one waiting past the fallback wait, to get spot again (falling back would
  // leave them waiting for good), with no wakeup for the wait; an on-demand-only job gets nothing.
  options_.spot_fallback_after_preemptions = 2;
  options_.spot_fallback_after_wait = Duration::Minutes(30);
  input_.offers = {input_.offers[kSpotA], input_.offers[kA100]};
  Autoscaler scaler(options_);
  PendingJob preempted = Job(1, 1);
  preempted.spot_preemptions = 5;
  PendingJob waited = Job(2, 1);
  waited.queued_since = now_ - Duration::Hours(3);
  PendingJob young = Job(3, 1);
  PendingJob on_demand = Job(4, 1, 8, MarketPreference::kOnDemand);
  input_.pending = {preempted, waited, young, on_demand};
  ScalePlan plan = scaler.Decide(input_);
  ASSERT_EQ(plan.rents.size(), 3u);
  for (const auto& rent : plan.rents) EXPECT_EQ(rent.offer, 0);  // the spot offer, first in the list
  EXPECT_EQ(plan.rents[0].for_jobs, std::vector<JobId>{JobId(1)});
  EXPECT_EQ(plan.rents[2].for_jobs, std::vector<JobId>{JobId(3)});
  EXPECT_FALSE(plan.next_wakeup.has_value() && *plan.next_wakeup < now_ + Duration::Minutes(29));
}

TEST_F(AutoscalerTest, SmallJobsShareOneRentedNode) {
  // Eight 1-GPU jobs and one 4-GPU job: the first 1-GPU job rents an 8-GPU node, the next seven
  // fill it (one rent, eight jobs), the 4-GPU job rents a second node. On the next Decide the
  // booting nodes cover them all: nothing more is rented. A ninth 1-GPU job then fits in what
  // the 4-GPU job left on the second node.
  Autoscaler scaler(options_);
  for (int i = 1; i <= 8; ++i) input_.pending.push_back(Job(i, 1, 1));
  input_.pending.push_back(Job(9, 1, 4));
  ScalePlan plan = scaler.Decide(input_);
  ASSERT_EQ(plan.rents.size(), 2u);
  EXPECT_EQ(plan.rents[0].count, 1);
  EXPECT_EQ(plan.rents[0].for_jobs.size(), 8u);
  EXPECT_EQ(plan.rents[1].for_jobs, std::vector<JobId>{JobId(9)});

  // The nodes are booting now, tagged with the jobs they were rented for.
  PoolNode a = Node(100, PoolNodeState::kBooting, Market::kSpot);
  a.for_jobs = plan.rents[0].for_jobs;
  PoolNode b = Node(101, PoolNodeState::kBooting, Market::kSpot);
  b.for_jobs = plan.rents[1].for_jobs;
  input_.nodes = {a, b};
  input_.pending.push_back(Job(10, 1, 1));
  ScalePlan next = scaler.Decide(input_);
  EXPECT_TRUE(next.rents.empty());
  EXPECT_TRUE(next.held.empty());
}

TEST_F(AutoscalerTest, GangUsesAnIdleNodeAndRentsOnlyTheRest) {
  // A 2 x 8 gang and one idle 8-GPU node in zone a: one more node is rented in zone a, and the
  // idle node is kept for the gang (not released though idle past idle_duration) while it waits.
  options_.idle_duration = Duration::Minutes(10);
  Autoscaler scaler(options_);
  input_.nodes = {IdleNode(7, Duration::Minutes(20))};
  input_.pending = {Job(1, 2)};
  ScalePlan plan = scaler.Decide(input_);
  ASSERT_EQ(plan.rents.size(), 1u);
  EXPECT_EQ(plan.rents[0].count, 1);
  EXPECT_EQ(plan.rents[0].zone, "a");
  EXPECT_TRUE(plan.releases.empty());
  // Next round: the rented node boots for the gang; the idle node is still kept.
  PoolNode booting = Node(8, PoolNodeState::kBooting, Market::kSpot);
  booting.for_jobs = {JobId(1)};
  input_.nodes.push_back(booting);
  input_.now = now_ + Duration::Minutes(1);
  ScalePlan next = scaler.Decide(input_);
  EXPECT_TRUE(next.rents.empty());
  EXPECT_TRUE(next.releases.empty());
  // Once the gang is no longer pending, the idle node goes.
  input_.pending.clear();
  input_.nodes = {IdleNode(7, Duration::Minutes(22))};
  ScalePlan later = scaler.Decide(input_);
  EXPECT_EQ(ReleasedIds(later), std::vector<int64_t>{7});
}

TEST_F(AutoscalerTest, ConstraintsPickOffersWithTheirLabelsAndHoldTheRest) {
  // A job that asks for zone=b gets the zone-b offer although zone a is cheaper; a job asking
  // for a label no offer carries is held, not rented for (it could never run there).
  for (auto& o : input_.offers) o.labels = {{"zone", o.zone}};
  Autoscaler scaler(options_);
  PendingJob b = Job(1, 1, 8, MarketPreference::kOnDemand);
  b.constraints = {{"zone", "b"}};
  PendingJob nowhere = Job(2, 1, 8);
  nowhere.constraints = {{"rack", "r9"}};
  input_.pending = {b, nowhere};
  ScalePlan plan = scaler.Decide(input_);
  ASSERT_EQ(plan.rents.size(), 1u);
  EXPECT_EQ(plan.rents[0].offer, kOdB);
  ASSERT_EQ(plan.held.size(), 1u);
  EXPECT_EQ(plan.held[0].job, JobId(2));
  EXPECT_NE(plan.held[0].reason.find("labels"), std::string::npos);
}

TEST_F(AutoscalerTest, OffersWhoseNodesWereSeenNotToRunTheEnvironmentAreNotRentedFor) {
  // Given the cheap spot offer's nodes seen to run only pytorch-a and the zone-a on-demand one's
  // pytorch-b, expect a pytorch-b job rented for on the cheapest offer not known to lack it (zone
  // b, not seen yet), and a pytorch-c job, once no H100 offer runs it, held with the offers named.
  input_.offers[kSpotA].runs_environments = std::vector<std::string>{"pytorch-a"};
  input_.offers[kOdA].runs_environments = std::vector<std::string>{"pytorch-b"};
  Autoscaler scaler(options_);
  PendingJob b = Job(1, 1, 8);
  b.environment = "pytorch-b";
  input_.pending = {b};
  ScalePlan plan = scaler.Decide(input_);
  ASSERT_EQ(plan.rents.size(), 1u);
  EXPECT_EQ(plan.rents[0].offer, kOdB);

  input_.offers[kOdB].runs_environments = std::vector<std::string>{"pytorch-a", "pytorch-b"};
  Autoscaler later(options_);
  PendingJob c = Job(2, 1, 8);
  c.environment = "pytorch-c";
  PendingJob none = Job(3, 1, 8);  // no environment: the cheapest offer, as ever
  input_.pending = {c, none};
  plan = later.Decide(input_);
  ASSERT_EQ(plan.rents.size(), 1u);
  EXPECT_EQ(plan.rents[0].offer, kSpotA);
  EXPECT_EQ(plan.rents[0].for_jobs, std::vector<JobId>{JobId(3)});
  ASSERT_EQ(plan.held.size(), 1u);
  EXPECT_EQ(plan.held[0].job, JobId(2));
  EXPECT_NE(plan.held[0].reason.find("(h100-od-a, h100-spot-a, h100-od-b) were seen not to run environment pytorch-c"),
            std::string::npos)
      << plan.held[0].reason;
}

TEST_F(AutoscalerTest, ABootingNodeOfAnOfferThatDoesNotRunTheEnvironmentDoesNotCoverAJob) {
  // Given a node booting from the zone-a on-demand offer, whose nodes were seen to run only
  // pytorch-a, expect a pytorch-b job not counted as covered by it (it would wait a boot for
  // nothing) but rented for elsewhere, and a pytorch-a job covered by it.
  input_.offers[kOdA].runs_environments = std::vector<std::string>{"pytorch-a"};
  PoolNode booting = Node(10, PoolNodeState::kBooting);
  booting.offer = "h100-od-a";
  input_.nodes = {booting};
  PendingJob b = Job(1, 1, 8, MarketPreference::kOnDemand);
  b.environment = "pytorch-b";
  input_.pending = {b};
  Autoscaler scaler(options_);
  ScalePlan plan = scaler.Decide(input_);
  ASSERT_EQ(plan.rents.size(), 1u);
  EXPECT_EQ(plan.rents[0].offer, kOdB);
  PendingJob a = Job(2, 1, 8, MarketPreference::kOnDemand);
  a.environment = "pytorch-a";
  input_.pending = {a};
  Autoscaler other(options_);
  plan = other.Decide(input_);
  EXPECT_TRUE(plan.rents.empty());
}

TEST_F(AutoscalerTest, IdleNodesThatDoNotRunAGangsEnvironmentDoNotCoverIt) {
  // Given two idle up nodes that run only pytorch-a, expect a 2-node pytorch-b gang to rent two
  // nodes rather than wait for those; a pytorch-a gang takes them and rents nothing.
  input_.nodes = {IdleNode(10, Duration::Minutes(1)), IdleNode(11, Duration::Minutes(1))};
  for (PoolNode& n : input_.nodes) n.spec.environments = {"pytorch-a"};
  Autoscaler scaler(options_);
  PendingJob b = Job(1, 2, 8, MarketPreference::kOnDemand);
  b.environment = "pytorch-b";
  input_.pending = {b};
  ScalePlan plan = scaler.Decide(input_);
  ASSERT_EQ(plan.rents.size(), 1u);
  EXPECT_EQ(plan.rents[0].count, 2);
  Autoscaler other(options_);
  b.environment = "pytorch-a";
  input_.pending = {b};
  plan = other.Decide(input_);
  EXPECT_TRUE(plan.rents.empty());
}

TEST_F(AutoscalerTest, MaxNodesAndMaxGpusCapRents) {
  // Given max_nodes 3 and one node up, expect a 2-node gang rented and a 1-node job held (4 > 3).
  // Given max_gpus 16 and one 8-GPU node, expect a 2 x 8 gang held and a 1 x 8 job rented.
  {
    Autoscaler scaler(options_);
    input_.limits.max_nodes = 3;
    input_.nodes = {Node(1, PoolNodeState::kUp)};
    input_.pending = {Job(7, 2), Job(8, 1)};
    ScalePlan plan = scaler.Decide(input_);
    ASSERT_EQ(plan.rents.size(), 1u);
    EXPECT_EQ(plan.rents[0].for_jobs, std::vector<JobId>{JobId(7)});
    ASSERT_EQ(plan.held.size(), 1u);
    EXPECT_EQ(plan.held[0].job, JobId(8));
  }
  Autoscaler scaler(options_);
  input_.limits = {};
  input_.limits.max_gpus = 16;
  input_.pending = {Job(7, 2), Job(8, 1)};
  ScalePlan plan = scaler.Decide(input_);
  ASSERT_EQ(plan.rents.size(), 1u);
  EXPECT_EQ(plan.rents[0].for_jobs, std::vector<JobId>{JobId(8)});
  ASSERT_EQ(plan.held.size(), 1u);
  EXPECT_EQ(plan.held[0].job, JobId(7));
}

TEST_F(AutoscalerTest, RentRateLimitsNodesPerMinute) {
  // Given max_rents_per_minute 2 and three 1-node jobs, expect two rents now, the third held with
  // a wakeup a minute later, and rented then.
  options_.max_rents_per_minute = 2;
  Autoscaler scaler(options_);
  input_.pending = {Job(1, 1), Job(2, 1), Job(3, 1)};
  ScalePlan plan = scaler.Decide(input_);
  ASSERT_EQ(plan.rents.size(), 2u);
  ASSERT_EQ(plan.held.size(), 1u);
  EXPECT_EQ(plan.held[0].job, JobId(3));
  EXPECT_EQ(plan.next_wakeup, now_ + Duration::Minutes(1));

  input_.now = now_ + Duration::Seconds(59);
  EXPECT_TRUE(scaler.Decide(input_).rents.empty());
  input_.now = now_ + Duration::Minutes(1);
  plan = scaler.Decide(input_);
  ASSERT_EQ(plan.rents.size(), 1u);
  EXPECT_EQ(plan.rents[0].for_jobs, std::vector<JobId>{JobId(3)});
}

TEST_F(AutoscalerTest, IdleReleaseWaitsForIdleDuration) {
  // Given idle_duration 10 min, expect a node idle 9 min kept (wakeup in 1 min), one idle 10 min
  // released, a busy node and a hand-registered idle node kept.
  options_.idle_duration = Duration::Minutes(10);
  Autoscaler scaler(options_);
  PoolNode hand = IdleNode(4, Duration::Hours(2));
  hand.managed = false;
  input_.nodes = {IdleNode(1, Duration::Minutes(9)), IdleNode(2, Duration::Minutes(10)),
                  Node(3, PoolNodeState::kUp), hand};
  ScalePlan plan = scaler.Decide(input_);
  EXPECT_EQ(ReleasedIds(plan), std::vector<int64_t>{2});
  EXPECT_EQ(plan.next_wakeup, now_ + Duration::Minutes(1));
}

TEST_F(AutoscalerTest, NodesOfATeamWhoseHardBudgetIsSpentGoAtOnce) {
  // Given idle_duration 10 min, expect a node idle for 1 minute whose team's hard budget is spent
  // released now (and counted as a budget release), a booting one of that team released before
  // it boots (no offer backoff: nothing is wrong with the offer), a busy one kept until its job
  // stops, and another team's node idle for 1 minute kept; min_nodes does not keep them.
  options_.idle_duration = Duration::Minutes(10);
  Autoscaler scaler(options_);
  PoolNode idle = IdleNode(1, Duration::Minutes(1));
  idle.budget_spent = true;
  PoolNode booting = Node(2, PoolNodeState::kBooting);
  booting.booting_since = now_ - Duration::Minutes(1);
  booting.budget_spent = true;
  ASSERT_FALSE(input_.offers.empty());
  booting.offer = input_.offers[0].name;
  PoolNode busy = Node(3, PoolNodeState::kUp);
  busy.budget_spent = true;
  input_.nodes = {idle, booting, busy, IdleNode(4, Duration::Minutes(1))};
  input_.limits.min_nodes = 4;  // not held by min_nodes: every minute would be over the budget
  ScalePlan plan = scaler.Decide(input_);
  EXPECT_EQ(ReleasedIds(plan), (std::vector<int64_t>{2, 1}));
  for (const Release& r : plan.releases) {
    EXPECT_TRUE(r.budget);
    EXPECT_NE(r.reason.find("hard budget"), std::string::npos) << r.reason;
  }
  // The offer was not marked failed: a pending job may still be rented for with it.
  input_.nodes.clear();
  input_.offers.resize(1);
  input_.pending = {Job(7, 1)};
  ScalePlan again = scaler.Decide(input_);
  ASSERT_EQ(again.rents.size(), 1u);
  EXPECT_EQ(again.rents[0].offer, 0);
}

TEST_F(AutoscalerTest, IdleReleaseNeverGoesBelowMinNodes) {
  // Given min_nodes 2 and three nodes idle long enough, expect only the longest idle released.
  Autoscaler scaler(options_);
  input_.limits.min_nodes = 2;
  input_.nodes = {IdleNode(1, Duration::Hours(1)), IdleNode(2, Duration::Hours(3)),
                  IdleNode(3, Duration::Hours(2))};
  ScalePlan plan = scaler.Decide(input_);
  EXPECT_EQ(ReleasedIds(plan), std::vector<int64_t>{2});
  // The two kept are the floor (billed to no team by the pool), longest idle first.
  EXPECT_EQ(plan.floor_kept, (std::vector<NodeId>{NodeId(3), NodeId(1)}));
}

TEST_F(AutoscalerTest, ANodeOutOfServiceDoesNotHoldTheFloor) {
  // Given min_nodes 1, a healthy node idle long enough and a node out of service (its disk has no
  // room: passed as draining), expect the healthy node kept for the floor, not released in the
  // broken one's stead.
  Autoscaler scaler(options_);
  input_.limits.min_nodes = 1;
  PoolNode broken = Node(2, PoolNodeState::kDraining);
  broken.out_of_service = true;
  input_.nodes = {IdleNode(1, Duration::Hours(1)), broken};
  ScalePlan plan = scaler.Decide(input_);
  EXPECT_TRUE(ReleasedIds(plan).empty());
  EXPECT_EQ(plan.floor_kept, (std::vector<NodeId>{NodeId(1)}));
  // A drained node (not out of service) still counts, as before.
  input_.nodes[1].out_of_service = false;
  EXPECT_EQ(ReleasedIds(scaler.Decide(input_)), std::vector<int64_t>{1});
}

TEST_F(AutoscalerTest, ReleaseRateLimitsNodesPerMinute) {
  // Given max_releases_per_minute 1 and two idle nodes, expect one release now and the other a
  // minute later.
  options_.max_releases_per_minute = 1;
  Autoscaler scaler(options_);
  input_.nodes = {IdleNode(1, Duration::Hours(1)), IdleNode(2, Duration::Hours(2))};
  ScalePlan plan = scaler.Decide(input_);
  EXPECT_EQ(ReleasedIds(plan), std::vector<int64_t>{2});
  EXPECT_EQ(plan.next_wakeup, now_ + Duration::Minutes(1));
  EXPECT_TRUE(plan.floor_kept.empty()) << "kept by the release rate, not the floor";
  input_.nodes = {IdleNode(1, Duration::Hours(1))};
  input_.now = now_ + Duration::Minutes(1);
  EXPECT_EQ(ReleasedIds(scaler.Decide(input_)), std::vector<int64_t>{1});
}

TEST_F(AutoscalerTest, BootTimeoutReleasesTheNodeAndTriesTheNextOffer) {
  // Given a spot node booting 16 min for job 7 with a 15 min boot timeout, expect it released and
  // job 7 rented the next-best offer (on-demand zone b, $28/h) in the same plan; the spot offer is
  // avoided for other jobs until the back-off ends.
  options_.boot_timeout = Duration::Minutes(15);
  options_.failed_offer_backoff = Duration::Minutes(30);
  Autoscaler scaler(options_);
  PoolNode stuck = Node(1, PoolNodeState::kBooting, Market::kSpot);
  stuck.booting_since = now_ - Duration::Minutes(16);
  stuck.offer = "h100-spot-a";
  stuck.for_jobs = {JobId(7)};
  input_.nodes = {stuck};
  input_.pending = {Job(7, 1)};
  ScalePlan plan = scaler.Decide(input_);
  EXPECT_EQ(ReleasedIds(plan), std::vector<int64_t>{1});
  ASSERT_EQ(plan.rents.size(), 1u);
  EXPECT_EQ(plan.rents[0].offer, kOdB);

  input_.nodes.clear();
  input_.pending = {Job(8, 1)};
  input_.now = now_ + Duration::Minutes(29);
  ASSERT_EQ(scaler.Decide(input_).rents.at(0).offer, kOdB);
  input_.now = now_ + Duration::Minutes(30);
  PendingJob fresh = Job(9, 1);
  fresh.queued_since = input_.now;  // not waited long enough to fall back from spot
  input_.pending = {fresh};
  EXPECT_EQ(scaler.Decide(input_).rents.at(0).offer, kSpotA);
}

TEST_F(AutoscalerTest, ReportedRentFailureTriesTheNextOffer) {
  // Given a rent of the spot offer that the provider reports as failed, expect the job rented the
  // next-best offer at once rather than waiting out the boot timeout.
  Autoscaler scaler(options_);
  input_.pending = {Job(7, 1)};
  ASSERT_EQ(scaler.Decide(input_).rents.at(0).offer, kSpotA);
  scaler.ReportRentFailed("h100-spot-a", now_);
  EXPECT_EQ(scaler.Decide(input_).rents.at(0).offer, kOdB);
}

TEST_F(AutoscalerTest, OutputOrderIsDeterministic) {
  // Given the same world with nodes listed in another order, expect identical plans: boot
  // timeouts by node id, then idle releases, rents in job order.
  options_.boot_timeout = Duration::Minutes(15);
  PoolNode s1 = Node(5, PoolNodeState::kBooting);
  s1.booting_since = now_ - Duration::Hours(1);
  PoolNode s2 = Node(3, PoolNodeState::kBooting);
  s2.booting_since = now_ - Duration::Hours(1);
  // Idle spot nodes: the on-demand gang cannot use them, so they are released.
  PoolNode i9 = IdleNode(9, Duration::Hours(1));
  i9.spec.market = Market::kSpot;
  PoolNode i4 = IdleNode(4, Duration::Hours(1));
  i4.spec.market = Market::kSpot;
  std::vector<PoolNode> world = {s1, i9, s2, i4};
  input_.pending = {Job(2, 1, 8, MarketPreference::kOnDemand), Job(1, 2, 8, MarketPreference::kOnDemand)};

  Autoscaler a(options_);
  input_.nodes = world;
  ScalePlan pa = a.Decide(input_);
  Autoscaler b(options_);
  std::reverse(world.begin(), world.end());
  input_.nodes = world;
  ScalePlan pb = b.Decide(input_);

  EXPECT_EQ(ReleasedIds(pa), (std::vector<int64_t>{3, 5, 4, 9}));
  EXPECT_EQ(ReleasedIds(pb), ReleasedIds(pa));
  ASSERT_EQ(pa.rents.size(), 2u);
  ASSERT_EQ(pb.rents.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(pa.rents[i].offer, pb.rents[i].offer);
    EXPECT_EQ(pa.rents[i].for_jobs, pb.rents[i].for_jobs);
    EXPECT_EQ(pa.rents[i].reason, pb.rents[i].reason);
  }
  EXPECT_EQ(pa.rents[0].for_jobs, std::vector<JobId>{JobId(2)});
  EXPECT_EQ(pa.rents[1].offer, kOdB);
}

}  // namespace
}  // namespace gpufleet::sched

namespace gpufleet::sched {
namespace {

TEST(AutoscalerCostTest, FasterGpuWinsWhenItFinishesTheWorkForLess) {
  // An A100 at $20/h and an H100 at $30/h that is twice as fast: the H100 does an hour of
  // reference work for $15, so it is rented although its hourly price is higher.
  Autoscaler scaler({});
  ScaleInput in;
  in.now = Time::FromSeconds(1000);
  in.offers = {
      {"a100", "A100", 8, model::Market::kOnDemand, 20'000'000, Duration::Minutes(5), "a", 1.0, 0, {}},
      {"h100", "H100", 8, model::Market::kOnDemand, 30'000'000, Duration::Minutes(5), "a", 2.0, 0, {}},
  };
  PendingJob j;
  j.id = JobId(1);
  j.gpus_per_node = 8;
  j.queued_since = in.now;
  in.pending = {j};
  ScalePlan plan = scaler.Decide(in);
  ASSERT_EQ(plan.rents.size(), 1u);
  EXPECT_EQ(plan.rents[0].offer, 1);
  EXPECT_EQ(plan.rents[0].expected_micros_per_hour, 15'000'000);
}

TEST(AutoscalerCostTest, FrequentSpotInterruptionsCostMoreThanTheyHaveToOffer) {
  // Spot at $10/h taken back 2 times an hour, with 4 h between checkpoints: each interruption
  // redoes 2 h of work, so an hour of work costs $10 x (1 + 2 x 2) = $50 there, more than the
  // $30/h on-demand node. With 6-minute checkpoints spot costs $10 x 1.1 = $11 and wins.
  ScaleInput in;
  in.now = Time::FromSeconds(1000);
  in.offers = {
      {"od", "H100", 8, model::Market::kOnDemand, 30'000'000, Duration::Minutes(5), "a", 1.0, 0, {}},
      {"spot", "H100", 8, model::Market::kSpot, 10'000'000, Duration::Minutes(5), "a", 1.0, 2.0, {}},
  };
  PendingJob j;
  j.id = JobId(1);
  j.gpus_per_node = 8;
  j.queued_since = in.now;
  j.checkpoint_interval = Duration::Hours(4);
  in.pending = {j};
  {
    Autoscaler scaler({});
    ScalePlan plan = scaler.Decide(in);
    ASSERT_EQ(plan.rents.size(), 1u);
    EXPECT_EQ(plan.rents[0].offer, 0);
  }
  in.pending[0].checkpoint_interval = Duration::Minutes(6);
  {
    Autoscaler scaler({});
    ScalePlan plan = scaler.Decide(in);
    ASSERT_EQ(plan.rents.size(), 1u);
    EXPECT_EQ(plan.rents[0].offer, 1);
    EXPECT_EQ(plan.rents[0].expected_micros_per_hour, 11'000'000);
  }
}

}  // namespace
}  // namespace gpufleet::sched
