#include "plan/planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace gpufleet::plan {
namespace {

constexpr int64_t kUsd = 1'000'000;
// Monday 2024-01-01 00:00 UTC.
constexpr Time kMonday = Time::FromSeconds(1'704'067'200);

sim::TraceJob Job(const std::string& id, Time submit, int gpus, Duration work) {
  sim::TraceJob j;
  j.id = id;
  j.spec.name = id;
  j.spec.submit = submit;
  j.spec.gpus_per_node = gpus;
  j.spec.nodes = 1;
  j.work = work;
  return j;
}

// `weeks` of history: a steady base of 16 GPUs (two 8-GPU jobs of one hour, every hour) and, on
// weekdays 10:00-14:00, a burst of 16 GPUs more. Jobs name no GPU model.
std::vector<sim::TraceJob> BaseAndBursts(int weeks) {
  std::vector<sim::TraceJob> jobs;
  for (int h = 0; h < weeks * kHoursPerWeek; ++h) {
    const Time t = kMonday + Duration::Hours(h);
    jobs.push_back(Job("base-a-" + std::to_string(h), t, 8, Duration::Hours(1)));
    jobs.push_back(Job("base-b-" + std::to_string(h), t, 8, Duration::Hours(1)));
    const int day = (h / 24) % 7, hour = h % 24;
    if (day < 5 && hour >= 10 && hour < 14) {
      jobs.push_back(Job("burst-a-" + std::to_string(h), t, 8, Duration::Hours(1)));
      jobs.push_back(Job("burst-b-" + std::to_string(h), t, 8, Duration::Hours(1)));
    }
  }
  return jobs;
}

cost::Offer V100Offer(const std::string& region, int gpus, double on_demand_usd, double spot_usd) {
  cost::Offer o;
  o.cloud = "aws";
  o.region = region;
  o.instance_type = gpus == 8 ? "p3.16xlarge" : "p3.8xlarge";
  o.gpu = "V100";
  o.gpus = gpus;
  o.on_demand_per_hour = static_cast<cost::MicroUsd>(on_demand_usd * kUsd);
  o.spot_per_hour = static_cast<cost::MicroUsd>(spot_usd * kUsd);
  o.spot_hazard_per_hour = 0.01;
  return o;
}

// The shipped catalog's p3.16xlarge in us-east-1, a dearer region, and a cheaper 4-GPU shape
// that an 8-GPU plan must not price from.
cost::OfferTable Catalog() {
  cost::OfferTable t;
  t.offers.push_back(V100Offer("us-east-1", 8, 24.48, 4.1616));
  t.offers.push_back(V100Offer("eu-west-2", 8, 28.712, 24.11808));
  t.offers.push_back(V100Offer("us-east-1", 4, 8.0, 1.0));
  return t;
}

PlannerOptions Options() {
  PlannerOptions o;
  o.default_gpu_model = "V100";
  o.regions = {"us-east-1"};
  o.verify.threads = 2;
  return o;
}

const Scenario* Find(const PlannerReport& r, const std::string& name) {
  for (const Scenario& s : r.verification) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

class PlannerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto r = RunPlanner(BaseAndBursts(2), Catalog(), model::GpuCatalog::BuiltIn(), Options());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    report_ = new PlannerReport(std::move(*r));
  }
  static void TearDownTestSuite() {
    delete report_;
    report_ = nullptr;
  }
  static PlannerReport* report_;
};
PlannerReport* PlannerTest::report_ = nullptr;

TEST_F(PlannerTest, ReservesTheNonSpotHalfOfTheBaseInWholeNodes) {
  // Given 16 GPUs busy every hour, 16 more for 20 hours a week, and half of the work allowed on
  // spot (at 17 % of on-demand), expect one reserved 8-GPU node (the half of the base that may
  // not use spot), kept busy, with the rest on spot or on-demand.
  ASSERT_EQ(report_->models.size(), 1u);
  const ModelReport& m = report_->models[0];
  EXPECT_EQ(m.gpu_model, "V100");
  EXPECT_EQ(m.plan.reserved_gpus, 8);
  EXPECT_EQ(m.reserved_nodes, 1);
  EXPECT_GT(m.plan.reserved_utilisation, 0.95);
  double spot = 0;
  for (double v : m.plan.spot) spot += v;
  EXPECT_GT(spot, 0);
  EXPECT_EQ(report_->history_hours, 2 * kHoursPerWeek);
  EXPECT_EQ(report_->horizon_hours, kHoursPerWeek);
  EXPECT_EQ(report_->jobs_left_out, 0);
}

TEST(PlannerInputTest, WithoutSpotTheWholeBaseIsReserved) {
  // Given the same history and no spot allowed, expect two reserved nodes (the 16-GPU base) and
  // the bursts on on-demand.
  PlannerOptions o = Options();
  o.plan.spot_max_share = 0;
  o.verify.enabled = false;
  auto r = RunPlanner(BaseAndBursts(2), Catalog(), model::GpuCatalog::BuiltIn(), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const ModelPlan& m = r->models.at(0).plan;
  EXPECT_EQ(m.reserved_gpus, 16);
  EXPECT_EQ(r->models[0].reserved_nodes, 2);
  double spot = 0, on_demand = 0;
  for (double v : m.spot) spot += v;
  for (double v : m.on_demand) on_demand += v;
  EXPECT_EQ(spot, 0);
  EXPECT_NEAR(on_demand, 16 * 20, 1.0);
}

TEST_F(PlannerTest, PricesFromTheRegionAndNodeShapeAsked) {
  // Given offers in two regions and a cheaper 4-GPU shape, expect the us-east-1 8-GPU prices:
  // $3.06 on demand per GPU-hour, 63 % of it reserved.
  const GpuPrices& p = report_->models[0].prices;
  EXPECT_EQ(p.on_demand, 3'060'000);
  EXPECT_EQ(p.spot, 520'200);
  EXPECT_EQ(p.reserved, 1'927'800);
}

TEST_F(PlannerTest, ReportsTheBacktestAndTheLpBound) {
  // Given two weeks of a history that repeats exactly, expect a near-zero backtest error, and a
  // MILP cost no lower than its LP bound.
  const ModelReport& m = report_->models[0];
  ASSERT_TRUE(m.backtest.has_value());
  EXPECT_LT(m.backtest->wape, 0.01);
  EXPECT_EQ(m.backtest_test_hours, kHoursPerWeek);
  EXPECT_GE(report_->plan.total_cost, report_->plan.lp_bound);
  EXPECT_GE(report_->plan.gap, 0.0);
  EXPECT_LE(report_->plan.gap, 0.05);
}

TEST_F(PlannerTest, VerificationSimulatesThePlannedReservation) {
  // Given the plan, expect its replay to run on exactly the planned reserved nodes, priced at the
  // reserved rate, and to pay for reserved capacity.
  const Scenario* plan = Find(*report_, "plan");
  ASSERT_NE(plan, nullptr);
  EXPECT_EQ(&report_->verification.front(), plan);
  EXPECT_EQ(plan->reserved_nodes, report_->models[0].reserved_nodes);
  int64_t reserved = 0;
  for (const model::NodeSpec& n : plan->cluster.nodes) {
    ASSERT_EQ(n.market, model::Market::kReserved);
    EXPECT_EQ(n.gpus, 8);
    EXPECT_EQ(n.price_micros_per_hour, 8 * report_->models[0].prices.reserved);
    ++reserved;
  }
  EXPECT_EQ(reserved, 1);
  std::set<model::Market> offered;
  for (const sim::AutoscaleOffer& o : plan->cluster.autoscale.offers) offered.insert(o.node.market);
  EXPECT_EQ(offered, (std::set<model::Market>{model::Market::kOnDemand, model::Market::kSpot}));
  ASSERT_TRUE(plan->summary.cost_by_market_usd.count("reserved"));
  // One node for the whole replay (336 h).
  EXPECT_GE(plan->summary.cost_by_market_usd.at("reserved"), 8 * 1.9278 * 336 - 1);
  EXPECT_GT(plan->summary.cost_by_market_usd.at("reserved"), 0.3 * plan->summary.cost_usd);
  EXPECT_EQ(plan->summary.jobs, static_cast<int64_t>(BaseAndBursts(2).size()));
  EXPECT_EQ(plan->summary.finished, plan->summary.jobs);
  EXPECT_GT(plan->spot_job_share, 0.3);
  EXPECT_LT(plan->spot_job_share, 0.7);
}

TEST_F(PlannerTest, PlanCostsLessThanAllOnDemandAndBaselinesAreComputed) {
  // Given reserved at 63 % of on-demand and a base that keeps it busy, expect the plan's simulated
  // cost under the all-on-demand run's, and every baseline run to completion.
  int baselines = 0;
  for (const Scenario& s : report_->verification) baselines += s.kind == ScenarioKind::kBaseline;
  EXPECT_EQ(baselines, 3);
  const Scenario* plan = Find(*report_, "plan");
  const Scenario* od = Find(*report_, "all on-demand");
  const Scenario* peak = Find(*report_, "all reserved (peak)");
  const Scenario* spot = Find(*report_, "all spot (on-demand fallback)");
  ASSERT_TRUE(plan && od && peak && spot);
  EXPECT_LT(plan->summary.cost_usd, od->summary.cost_usd);
  EXPECT_NEAR(plan->cost_ratio_to_on_demand, plan->summary.cost_usd / od->summary.cost_usd, 1e-12);
  EXPECT_DOUBLE_EQ(od->cost_ratio_to_on_demand, 1.0);
  // All on-demand rents everything; the peak baseline owns 32 GPUs and rents nothing.
  EXPECT_EQ(od->reserved_nodes, 0);
  EXPECT_GT(od->summary.nodes_rented, 0);
  EXPECT_EQ(od->summary.cost_by_market_usd.count("reserved"), 0u);
  EXPECT_EQ(peak->reserved_nodes, 4);
  EXPECT_TRUE(peak->cluster.autoscale.offers.empty());
  EXPECT_EQ(peak->summary.nodes_rented, 0);
  EXPECT_DOUBLE_EQ(spot->spot_job_share, 1.0);
  for (const Scenario& s : report_->verification) {
    EXPECT_EQ(s.summary.finished, s.summary.jobs) << s.name;
    EXPECT_GT(s.summary.cost_usd, 0) << s.name;
  }
}

TEST_F(PlannerTest, OptimiserTriesEverySpotShareUpToTheCapAndKeepsTheCheapest) {
  // Given a cap of 50 % and spot at 17 % of on-demand, expect the shares 0, 25 % and 50 % tried,
  // each a plan, costs falling as spot takes more of the work, and the cap chosen.
  ASSERT_EQ(report_->spot_shares.size(), 3u);
  EXPECT_DOUBLE_EQ(report_->spot_shares[0].share, 0.0);
  EXPECT_DOUBLE_EQ(report_->spot_shares[1].share, 0.25);
  EXPECT_DOUBLE_EQ(report_->spot_shares[2].share, 0.5);
  for (const SpotShareOption& s : report_->spot_shares) ASSERT_TRUE(s.plan.ok()) << s.share;
  EXPECT_GT(report_->spot_shares[0].plan->total_cost, report_->spot_shares[2].plan->total_cost);
  EXPECT_DOUBLE_EQ(report_->spot_share, 0.5);
  EXPECT_EQ(report_->plan.total_cost, report_->spot_shares[2].plan->total_cost);
}

TEST_F(PlannerTest, NeighboursOfThePlanAreReplayed) {
  // Given a plan of one reserved node at spot share 50 %, expect replays with 2 and 3 nodes, with
  // none (-1 and -2 both clamp to 0, replayed once), and the plan of the adjacent share (25 %).
  std::vector<std::string> names;
  for (const Scenario& s : report_->verification) {
    if (s.kind == ScenarioKind::kCandidate) names.push_back(s.name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"plan", "plan, reserved -1", "plan, reserved +1", "plan, reserved +2",
                                             "plan at spot share 25 %"}));
  EXPECT_EQ(Find(*report_, "plan, reserved -1")->reserved_nodes, 0);
  EXPECT_EQ(Find(*report_, "plan, reserved +2")->reserved_nodes, 3);
  EXPECT_DOUBLE_EQ(Find(*report_, "plan at spot share 25 %")->spot_share, 0.25);
}

// The property the recommendation exists for: it meets the SLO, and no replayed baseline that
// meets the SLO is cheaper.
void ExpectNeverBeatenByABaseline(const PlannerReport& r) {
  ASSERT_TRUE(r.recommended.has_value());
  const Scenario& rec = r.verification.at(*r.recommended);
  EXPECT_TRUE(rec.meets_slo) << rec.name;
  int baselines = 0;
  for (const Scenario& s : r.verification) {
    if (s.kind != ScenarioKind::kBaseline) continue;
    ++baselines;
    if (s.meets_slo && s.within_caps) {
      EXPECT_LE(rec.summary.cost_usd, s.summary.cost_usd) << rec.name << " vs " << s.name;
    }
  }
  EXPECT_EQ(baselines, 3);
  EXPECT_TRUE(rec.within_caps) << rec.name;
  for (const Scenario& s : r.verification) {
    if (s.meets_slo && s.within_caps) {
      EXPECT_LE(rec.summary.cost_usd, s.summary.cost_usd) << rec.name << " vs " << s.name;
    }
    EXPECT_EQ(s.meets_slo, s.summary.never_ran.empty() && s.slo_wait_s <= 3600) << s.name;
  }
}

TEST_F(PlannerTest, RecommendationIsNeverDearerThanABaselineThatMeetsTheSlo) {
  // Given the steady base with weekday bursts, expect a recommendation that meets the SLO and
  // costs no more than any replay that also meets it.
  ExpectNeverBeatenByABaseline(*report_);
}

// `weeks` of one- and four-GPU jobs of random length (seeded), arriving mostly in working hours,
// at a rate that halves from the first week to the last: the shape of Philly's decline.
std::vector<sim::TraceJob> DecliningSmallJobs(int weeks) {
  std::vector<sim::TraceJob> jobs;
  uint64_t x = 42;
  auto next = [&]() {  // xorshift64: the same history every run
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  const int hours = weeks * kHoursPerWeek;
  for (int h = 0; h < hours; ++h) {
    const int day = (h / 24) % 7, hour = h % 24;
    const double busy = day < 5 && hour >= 8 && hour < 20 ? 1.0 : 0.3;
    const double rate = 6 * busy * (1.0 - 0.5 * h / hours);
    const int n = static_cast<int>(rate) + (static_cast<double>(next() % 1000) / 1000 < rate - static_cast<int>(rate));
    for (int i = 0; i < n; ++i) {
      const int gpus = next() % 5 == 0 ? 4 : 1;
      const Duration work = Duration::Minutes(10 + static_cast<int64_t>(next() % 300));
      jobs.push_back(Job("j" + std::to_string(h) + "-" + std::to_string(i),
                         kMonday + Duration::Hours(h) + Duration::Minutes(static_cast<int64_t>(next() % 60)), gpus, work));
    }
  }
  return jobs;
}

TEST(PlannerRecommendationTest, NeverDearerThanABaselineOnADecliningHistoryWithFullSpot) {
  // Given three weeks of small jobs whose rate halves, and spot allowed for all the work (the
  // command's default cap), expect a recommendation that no SLO-meeting baseline undercuts.
  PlannerOptions o = Options();
  o.plan.spot_max_share = 1.0;
  auto r = RunPlanner(DecliningSmallJobs(3), Catalog(), model::GpuCatalog::BuiltIn(), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->spot_shares.size(), 5u);
  ExpectNeverBeatenByABaseline(*r);
}

TEST(PlannerRecommendationTest, NoSpotChosenWhenSpotCostsMoreThanOnDemand) {
  // Given spot dearer than on-demand, expect the optimiser to choose no spot (a tie in the
  // optimiser goes to the smaller share) and a recommendation that meets the SLO.
  cost::OfferTable t;
  t.offers.push_back(V100Offer("us-east-1", 8, 24.48, 30.0));
  PlannerOptions o = Options();
  o.plan.spot_max_share = 1.0;
  o.verify.neighbours = false;
  auto r = RunPlanner(BaseAndBursts(2), t, model::GpuCatalog::BuiltIn(), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_DOUBLE_EQ(r->spot_share, 0.0);
  EXPECT_EQ(r->models[0].reserved_nodes, 2);
  EXPECT_DOUBLE_EQ(r->verification.front().spot_job_share, 0.0);
  ExpectNeverBeatenByABaseline(*r);
}

TEST(PlannerRecommendationTest, AllSpotIsNeverRecommendedWhenSpotIsNotAllowed) {
  // Given no spot allowed (--spot-share 0), expect the all-spot baseline replayed and cheaper, but
  // outside the caps, and a recommendation without spot.
  PlannerOptions o = Options();
  o.plan.spot_max_share = 0;
  o.verify.neighbours = false;
  auto r = RunPlanner(BaseAndBursts(2), Catalog(), model::GpuCatalog::BuiltIn(), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Scenario* spot = Find(*r, "all spot (on-demand fallback)");
  ASSERT_NE(spot, nullptr);
  EXPECT_FALSE(spot->within_caps);
  ASSERT_TRUE(r->recommended.has_value());
  const Scenario& rec = r->verification[*r->recommended];
  EXPECT_LT(spot->summary.cost_usd, rec.summary.cost_usd);
  EXPECT_EQ(rec.spot_job_share, 0.0);
  EXPECT_EQ(rec.summary.cost_by_market_usd.count("spot"), 0u);
  ExpectNeverBeatenByABaseline(*r);
}

TEST(PlannerRecommendationTest, NoRecommendationWhenNoReplayMeetsTheSlo) {
  // Given an SLO of zero wait and three-minute boots, expect no replay that rents to meet it and
  // no recommendation unless one reserves enough to never rent.
  PlannerOptions o = Options();
  o.plan.slo_wait = Duration::Zero();
  o.plan.slo_quantile = 1.0;
  o.verify.baselines = false;
  o.verify.neighbours = false;
  auto r = RunPlanner(BaseAndBursts(2), Catalog(), model::GpuCatalog::BuiltIn(), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->verification.size(), 1u);
  EXPECT_FALSE(r->verification[0].meets_slo);
  EXPECT_GT(r->verification[0].slo_wait_s, 0);
  EXPECT_FALSE(r->recommended.has_value());
}

TEST(PlannerPricesTest, EveryMarketIsPricedFromOnePlaceTheCheapestPlan) {
  // Given a cloud with cheap on-demand and no spot ("lam") and one with dear on-demand and cheap
  // spot (aws us-east-1 and a dearer eu-west-2), expect the prices of each place never mixed: the
  // plan's on-demand, spot and reserved all from the place whose plan costs least, every place
  // planned, and the chosen one no dearer than any other.
  cost::OfferTable t = Catalog();
  cost::Offer lam;
  lam.cloud = "lam";
  lam.region = "us-south-1";
  lam.instance_type = "gpu_8x_v100";
  lam.gpu = "V100";
  lam.gpus = 8;
  lam.on_demand_per_hour = 8 * 2'500'000;  // $2.50 per GPU-hour, under AWS's $3.06, no spot
  t.offers.push_back(lam);
  PlannerOptions o = Options();
  o.regions.clear();
  o.verify.enabled = false;
  auto r = RunPlanner(BaseAndBursts(2), t, model::GpuCatalog::BuiltIn(), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->locations.size(), 3u);
  EXPECT_EQ(r->locations[0].cloud, "aws");
  EXPECT_EQ(r->locations[0].region, "eu-west-2");
  const LocationOption& chosen = r->locations.at(r->location);
  const GpuPrices& p = r->models[0].prices;
  EXPECT_EQ(p.cloud, chosen.cloud);
  EXPECT_EQ(p.region, chosen.region);
  EXPECT_EQ(p.on_demand_offer.rfind(chosen.cloud + " " + chosen.region + " ", 0), 0u) << p.on_demand_offer;
  if (p.spot) {
    EXPECT_EQ(p.spot_offer.rfind(chosen.cloud + " " + chosen.region + " ", 0), 0u) << p.spot_offer;
  }
  for (const LocationOption& l : r->locations) {
    ASSERT_TRUE(l.plan.ok()) << l.cloud << " " << l.region;
    EXPECT_LE(chosen.plan->total_cost, l.plan->total_cost) << l.cloud << " " << l.region;
  }
  EXPECT_EQ(r->plan.total_cost, chosen.plan->total_cost);
  // Without spot the cheap on-demand cloud wins; with it, the spot cloud's plan is cheaper.
  EXPECT_EQ(chosen.cloud, "aws");
  o.plan.spot_max_share = 0;
  r = RunPlanner(BaseAndBursts(2), t, model::GpuCatalog::BuiltIn(), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->locations.at(r->location).cloud, "lam");
  EXPECT_EQ(r->models[0].prices.on_demand, 2'500'000);
  EXPECT_FALSE(r->models[0].prices.spot.has_value());
}

TEST_F(PlannerTest, ChartsRenderDemandCostAndNoFrontierWithoutWaits) {
  // Given a report without frontier waits, expect the demand and cost charts only.
  auto charts = RenderPlannerCharts(*report_);
  ASSERT_TRUE(charts.ok()) << charts.status().ToString();
  std::vector<std::string> names;
  for (const auto& [name, svg] : *charts) {
    names.push_back(name);
    EXPECT_EQ(svg.rfind("<svg", 0) == 0 || svg.rfind("<?xml", 0) == 0, true) << name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"demand-V100.svg", "cost-by-market.svg"}));
}

TEST(PlannerInputTest, FrontierAddsACostAgainstSloChart) {
  // Given frontier waits and verification off, expect one frontier point per wait, costs that
  // do not rise as the SLO loosens, and three charts.
  PlannerOptions o = Options();
  o.verify.enabled = false;
  o.frontier_waits = {Duration::Hours(1), Duration::Hours(4), Duration::Hours(24)};
  auto r = RunPlanner(BaseAndBursts(2), Catalog(), model::GpuCatalog::BuiltIn(), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->verification.empty());
  ASSERT_EQ(r->frontier.size(), 3u);
  ASSERT_TRUE(r->frontier[0].plan.ok() && r->frontier[2].plan.ok());
  EXPECT_LE(r->frontier[2].plan->total_cost, r->frontier[0].plan->total_cost);
  auto charts = RenderPlannerCharts(*r);
  ASSERT_TRUE(charts.ok());
  EXPECT_EQ(charts->size(), 3u);
  EXPECT_EQ(charts->back().first, "cost-vs-slo.svg");
}

TEST(PlannerInputTest, HistoryShorterThanAWeekIsRejected) {
  // Given six days of history, expect InvalidArgument saying a week is needed.
  std::vector<sim::TraceJob> jobs;
  for (int h = 0; h < 6 * 24; ++h) jobs.push_back(Job("j" + std::to_string(h), kMonday + Duration::Hours(h), 8, Duration::Hours(1)));
  auto r = RunPlanner(jobs, Catalog(), model::GpuCatalog::BuiltIn(), Options());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("at least one week"), std::string::npos) << r.status().message();
}

TEST(PlannerInputTest, JobsWithoutModelNeedADefault) {
  // Given jobs that name no GPU model and no default, expect an error naming a job and the fix.
  PlannerOptions o = Options();
  o.default_gpu_model.clear();
  auto r = RunPlanner(BaseAndBursts(1), Catalog(), model::GpuCatalog::BuiltIn(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("base-a-0"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("default GPU model"), std::string::npos);
}

TEST(PlannerInputTest, UnknownModelAndUnpricedRegionSayWhat) {
  // Given an unknown GPU name, expect the known ones listed; given a region without offers of
  // the model, expect NotFound naming the region and the node size.
  PlannerOptions o = Options();
  o.gpu_models = {"V1OO"};
  auto r = RunPlanner(BaseAndBursts(1), Catalog(), model::GpuCatalog::BuiltIn(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown GPU model 'V1OO'"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("H100"), std::string::npos);

  o = Options();
  o.regions = {"us-east-1"};
  o.gpus_per_node = 2;
  o.verify.enabled = false;
  r = RunPlanner(BaseAndBursts(1), Catalog(), model::GpuCatalog::BuiltIn(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("us-east-1"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("2 GPUs per instance"), std::string::npos);
  EXPECT_NE(r.status().message().find("try another --cloud, --region or --gpus-per-node"), std::string::npos);
}

TEST(PlannerInputTest, UnknownCloudOrRegionIsAnErrorNamingTheFlagAndTheKnownNames) {
  // Given a catalog on aws in us-east-1 and eu-west-2, expect --cloud awz and --region
  // mars-north-1 to be refused before planning, naming the flag, the value and what the catalog
  // has, not blamed on the GPU model or the node size.
  PlannerOptions o = Options();
  o.verify.enabled = false;
  o.clouds = {"awz"};
  auto r = RunPlanner(BaseAndBursts(1), Catalog(), model::GpuCatalog::BuiltIn(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "--cloud: the catalog has no cloud 'awz' (did you mean 'aws'?); it has aws");

  o.clouds = {"aws"};
  o.regions = {"mars-north-1"};
  r = RunPlanner(BaseAndBursts(1), Catalog(), model::GpuCatalog::BuiltIn(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message().rfind("--region: the catalog has no region 'mars-north-1'", 0), 0u)
      << r.status().message();

  o.regions = {"us-east-2"};
  r = RunPlanner(BaseAndBursts(1), Catalog(), model::GpuCatalog::BuiltIn(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "--region: the catalog has no region 'us-east-2' (did you mean 'us-east-1'?)");
}

TEST(PlannerInputTest, JobsOfOtherModelsAreLeftOutAndCounted) {
  // Given a history of V100 jobs and a few A100 jobs, planning for V100 only, expect the A100
  // jobs counted as left out and only V100 planned.
  std::vector<sim::TraceJob> jobs = BaseAndBursts(1);
  for (int i = 0; i < 3; ++i) {
    sim::TraceJob j = Job("a100-" + std::to_string(i), kMonday + Duration::Hours(i), 8, Duration::Hours(1));
    j.spec.gpu_models = {"A100"};
    jobs.push_back(j);
  }
  PlannerOptions o = Options();
  o.gpu_models = {"V100"};
  o.verify.enabled = false;
  auto r = RunPlanner(jobs, Catalog(), model::GpuCatalog::BuiltIn(), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->jobs_left_out, 3);
  ASSERT_EQ(r->models.size(), 1u);
  EXPECT_EQ(r->models[0].gpu_model, "V100");
}

TEST(PlannerInputTest, JobsLargerThanAPlannedNodeAreLeftOutNamedAndTheReplayEnds) {
  // Given two jobs asking for more CPUs (120 on 8-GPU nodes of 96) or memory per node than a
  // planned node has, and one that fits, expect the two left out, counted and the first named,
  // and every replayed job to finish (a job no node can hold would wait forever).
  std::vector<sim::TraceJob> jobs = BaseAndBursts(1);
  sim::TraceJob cpu = Job("wide-cpu", kMonday + Duration::Hours(30), 8, Duration::Hours(1));
  cpu.spec.cpu_milli = 120'000;
  sim::TraceJob mem = Job("wide-mem", kMonday + Duration::Hours(31), 8, Duration::Hours(1));
  mem.spec.mem_mib = 2'000'000;
  sim::TraceJob fits = Job("fits", kMonday + Duration::Hours(32), 8, Duration::Hours(1));
  fits.spec.cpu_milli = 96'000;
  jobs.insert(jobs.end(), {cpu, mem, fits});
  PlannerOptions o = Options();
  o.verify.baselines = false;
  o.verify.neighbours = false;
  auto r = RunPlanner(jobs, Catalog(), model::GpuCatalog::BuiltIn(), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->jobs_too_large, 2);
  EXPECT_EQ(r->first_too_large, "wide-cpu (120 vCPUs, 0 GiB per node)");
  ASSERT_FALSE(r->verification.empty());
  EXPECT_EQ(r->verification[0].summary.finished, r->verification[0].summary.jobs);
  EXPECT_EQ(r->verification[0].summary.jobs, static_cast<int64_t>(jobs.size()) - 2);
}

TEST(PlannedClusterTest, ReservedNodesAndOffersFollowThePlan) {
  // Given a model report with 3 reserved nodes, expect 3 fixed reserved nodes at the reserved
  // node price, an on-demand offer, and a spot offer only when spot is wanted.
  ModelReport m;
  m.gpu_model = "V100";
  m.reserved_nodes = 3;
  m.prices.reserved = 2 * kUsd;
  m.prices.on_demand = 3 * kUsd;
  m.prices.spot = kUsd / 2;
  m.prices.spot_interruptions_per_hour = 0.02;
  VerifyOptions v;
  sim::ClusterSpec c = PlannedCluster({m}, 8, v, /*with_spot=*/true);
  ASSERT_EQ(c.nodes.size(), 3u);
  EXPECT_EQ(c.nodes[0].price_micros_per_hour, 16 * kUsd);
  EXPECT_EQ(c.total_gpus(), 24);
  ASSERT_EQ(c.autoscale.offers.size(), 2u);
  EXPECT_EQ(c.autoscale.offers[1].node.market, model::Market::kSpot);
  EXPECT_DOUBLE_EQ(c.autoscale.offers[1].interruptions_per_hour, 0.02);
  EXPECT_EQ(c.autoscale.offers[1].boot_delay, Duration::Minutes(3));
  EXPECT_EQ(PlannedCluster({m}, 8, v, /*with_spot=*/false).autoscale.offers.size(), 1u);

  // With one-GPU prices, each market is also rented one GPU at a time, at that price.
  m.single_gpu_prices = m.prices;
  m.single_gpu_prices->on_demand = 3 * kUsd + 1;
  v.single_gpu_nodes = true;
  c = PlannedCluster({m}, 8, v, /*with_spot=*/true);
  ASSERT_EQ(c.autoscale.offers.size(), 4u);
  EXPECT_EQ(c.autoscale.offers[1].node.gpus, 1);
  EXPECT_EQ(c.autoscale.offers[1].node.price_micros_per_hour, 3 * kUsd + 1);
  v.single_gpu_nodes = false;
  EXPECT_EQ(PlannedCluster({m}, 8, v, /*with_spot=*/true).autoscale.offers.size(), 2u);
}

// BaseAndBursts with the "base-a" jobs (8 GPUs every hour) in team "prod", the rest in "research".
std::vector<sim::TraceJob> TwoTeams(int weeks) {
  std::vector<sim::TraceJob> jobs = BaseAndBursts(weeks);
  for (sim::TraceJob& j : jobs) j.spec.team = j.id.rfind("base-a-", 0) == 0 ? "prod" : "research";
  return jobs;
}

TEST(PlannerNoSpotTest, ATeamKeptOffSpotIsPlannedAndReplayedWithoutSpot) {
  // Given two weeks where team "prod" runs 8 GPUs every hour (336 of 752 jobs, 2,688 of 6,016
  // GPU-hours), spot at 17 % of on-demand allowed for all the work, and "prod" kept off spot,
  // expect the report to count prod's jobs and demand; the optimiser to serve at least prod's share
  // of the planned demand from reserved and on-demand (so it reserves prod's 8 GPUs); and no
  // replay to let a prod job on spot: the all-spot baseline allows only the other 416 jobs.
  PlannerOptions o = Options();
  o.plan.spot_max_share = 1.0;
  o.verify.neighbours = false;
  o.no_spot_teams = {"prod"};
  auto r = RunPlanner(TwoTeams(2), Catalog(), model::GpuCatalog::BuiltIn(), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->no_spot_teams, std::vector<std::string>{"prod"});
  EXPECT_EQ(r->no_spot_team_jobs, 336);
  EXPECT_EQ(r->marked_no_spot_jobs, 0);
  const ModelReport& m = r->models.at(0);
  EXPECT_NEAR(m.history_gpu_hours, 6016, 1e-6);
  EXPECT_NEAR(m.no_spot_team_gpu_hours, 2688, 1e-6);
  EXPECT_NEAR(m.no_spot_gpu_hours, 2688, 1e-6);
  double planned = 0, spot = 0, off_spot = 0;
  for (size_t h = 0; h < m.planned_demand.size(); ++h) {
    planned += m.planned_demand[h];
    spot += m.plan.spot[h];
    off_spot += m.plan.reserved_used[h] + m.plan.on_demand[h];
  }
  EXPECT_GE(off_spot, planned * 2688.0 / 6016.0 - 1e-6);
  EXPECT_LE(spot, planned * (1 - 2688.0 / 6016.0) + 1e-6);
  EXPECT_GE(m.plan.reserved_gpus, 8);
  const Scenario* all_spot = Find(*r, "all spot (on-demand fallback)");
  ASSERT_NE(all_spot, nullptr);
  EXPECT_DOUBLE_EQ(all_spot->spot_job_share, 416.0 / 752.0);
  for (const Scenario& s : r->verification) EXPECT_LE(s.spot_job_share, 416.0 / 752.0) << s.name;
}

TEST(PlannerNoSpotTest, EveryTeamKeptOffSpotMeansNoSpotAnywhere) {
  // Given both teams kept off spot while spot is cheap and allowed for all the work, expect no
  // spot in the plan and not a dollar of spot in any replay, the all-spot baseline included.
  PlannerOptions o = Options();
  o.plan.spot_max_share = 1.0;
  o.verify.neighbours = false;
  o.no_spot_teams = {"prod", "research"};
  auto r = RunPlanner(TwoTeams(2), Catalog(), model::GpuCatalog::BuiltIn(), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->no_spot_team_jobs, 752);
  double spot = 0;
  for (double v : r->models.at(0).plan.spot) spot += v;
  EXPECT_EQ(spot, 0.0);
  ASSERT_FALSE(r->verification.empty());
  for (const Scenario& s : r->verification) {
    EXPECT_EQ(s.spot_job_share, 0.0) << s.name;
    auto it = s.summary.cost_by_market_usd.find("spot");
    EXPECT_TRUE(it == s.summary.cost_by_market_usd.end() || it->second == 0.0) << s.name;
  }
}

TEST(PlannerNoSpotTest, ATeamNotInTheHistoryIsAnErrorListingTheTeams) {
  // Given a no-spot team the history never names, expect InvalidArgument naming it and the
  // history's teams.
  PlannerOptions o = Options();
  o.no_spot_teams = {"prod", "prdo"};
  auto r = RunPlanner(TwoTeams(2), Catalog(), model::GpuCatalog::BuiltIn(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "--no-spot-teams: team 'prdo' does not occur in the history (its teams: prod, research)");
}

TEST(PlannerPricesTest, CatalogReservedPricesTheReservationWhereTheOfferHasOne) {
  // Given us-east-1's p3.16xlarge with a published 1-year price of $15.12/h ($1.89 per GPU, not
  // the ratio's $1.9278), expect the plan's reserved price from the catalog, its reservation costed
  // at it, and the replay's reserved nodes priced at it; given --reserved-ratio's override, the
  // ratio.
  cost::OfferTable t = Catalog();
  for (cost::Offer& offer : t.offers) {
    if (offer.region == "us-east-1" && offer.gpus == 8) offer.reserved_1y_per_hour = 15'120'000;
  }
  PlannerOptions o = Options();
  o.verify.baselines = false;
  o.verify.neighbours = false;
  auto r = RunPlanner(BaseAndBursts(2), t, model::GpuCatalog::BuiltIn(), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const ModelReport& m = r->models.at(0);
  EXPECT_EQ(m.prices.reserved, 1'890'000);
  EXPECT_EQ(m.prices.reserved_source, ReservedSource::kCatalog);
  EXPECT_EQ(m.prices.reserved_offer, "aws us-east-1 p3.16xlarge");
  ASSERT_GT(m.plan.reserved_gpus, 0);
  EXPECT_EQ(m.plan.reserved_cost, m.plan.reserved_gpus * 1'890'000 * r->horizon_hours);
  const sim::ClusterSpec c = PlannedCluster(r->models, 8, o.verify, false);
  for (const model::NodeSpec& n : c.nodes) {
    if (n.market == model::Market::kReserved) {
      EXPECT_EQ(n.price_micros_per_hour, 8 * 1'890'000);
    }
  }
  o.ratios.catalog_one_year = false;
  o.verify.enabled = false;
  auto own = RunPlanner(BaseAndBursts(2), t, model::GpuCatalog::BuiltIn(), o);
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  EXPECT_EQ(own->models.at(0).prices.reserved_source, ReservedSource::kRatio);
  EXPECT_EQ(own->models.at(0).prices.reserved, 1'927'800);  // $24.48 / 8 x 0.63
}


// The V100 catalog and an 8 x A100 instance in us-east-1 at $21.96 an hour (AWS p4d.24xlarge,
// cheaper than p3.16xlarge's 8 x V100 at $24.48), for about twice the V100's work per GPU (the
// built-in catalog's balanced speed ratio): one reserved A100 node ($13.83 an hour at the 1-year
// ratio) does the work of the history's 16-GPU V100 base, which two V100 nodes ($30.84) would.
cost::OfferTable CatalogWithA100() {
  cost::OfferTable t = Catalog();
  cost::Offer h = V100Offer("us-east-1", 8, 21.957642, 0);
  h.instance_type = "p4d.24xlarge";
  h.gpu = "A100";
  h.spot_per_hour.reset();
  t.offers.push_back(h);
  return t;
}

TEST(PlannerSubstitutionTest, V100WorkIsPlannedOnA100sWhenThatIsCheaperPerUnitOfWork) {
  // Given a V100 history, no spot, and V100 work allowed on A100 (priced per unit of work below
  // the V100), expect A100 nodes reserved for the V100 base, the V100 work shown as moved at the
  // catalog's speed ratio, a dearer plan without substitution beside it, and a replay in which
  // the planned cluster (A100 reserved nodes) runs every job and meets the SLO.
  PlannerOptions o = Options();
  o.plan.spot_max_share = 0;
  o.substitutes = {{"V100", "A100"}};
  const model::GpuCatalog& catalog = model::GpuCatalog::BuiltIn();
  auto r = RunPlanner(BaseAndBursts(2), CatalogWithA100(), catalog, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->models.size(), 2u);
  const ModelReport& v100 = r->models[0];
  const ModelReport& a100 = r->models[1];
  EXPECT_EQ(v100.gpu_model, "V100");
  EXPECT_EQ(a100.gpu_model, "A100");
  EXPECT_EQ(a100.history_gpu_hours, 0);
  const double ratio = catalog.RelativeSpeed("V100", "A100", model::Boundness::kBalanced);
  ASSERT_GT(ratio, 1.8);
  ASSERT_EQ(a100.substitutes_for.size(), 1u);
  EXPECT_EQ(a100.substitutes_for[0].first, "V100");
  EXPECT_NEAR(a100.substitutes_for[0].second, ratio, 1e-9);
  EXPECT_TRUE(v100.substitutes_for.empty());  // the A100 has no work of its own to move

  EXPECT_EQ(v100.plan.reserved_gpus, 0);
  EXPECT_GE(a100.plan.reserved_gpus, 8);
  ASSERT_EQ(v100.plan.moved_to.size(), 1u);
  EXPECT_EQ(v100.plan.moved_to[0].first, "A100");
  double planned = 0;
  for (double d : v100.planned_demand) planned += d;
  EXPECT_GT(v100.plan.moved_to[0].second, 0.5 * planned);
  // The A100 GPU-hours that did it: the moved work over the ratio.
  EXPECT_NEAR(a100.plan.foreign_gpu_hours, v100.plan.moved_to[0].second / ratio, 1e-3);

  ASSERT_TRUE(r->plan_without_substitution.has_value());
  EXPECT_EQ(r->plan_without_substitution->models.at(0).reserved_gpus, 16);  // the V100 base
  EXPECT_EQ(r->plan_without_substitution->models.at(1).reserved_gpus, 0);
  EXPECT_LT(r->plan.total_cost, r->plan_without_substitution->total_cost);

  const Scenario* plan = Find(*r, "plan");
  const Scenario* alone = Find(*r, "plan without substitution");
  ASSERT_NE(plan, nullptr);
  ASSERT_NE(alone, nullptr);
  int64_t a100_reserved = 0, v100_reserved = 0;
  for (const model::NodeSpec& n : plan->cluster.nodes) {
    if (n.market != model::Market::kReserved) continue;
    (n.gpu_model == "A100" ? a100_reserved : v100_reserved) += n.gpus;
  }
  EXPECT_EQ(a100_reserved, a100.plan.reserved_gpus);
  EXPECT_EQ(v100_reserved, 0);
  EXPECT_EQ(plan->summary.finished, plan->summary.jobs);
  EXPECT_TRUE(plan->meets_slo);
  EXPECT_LT(plan->summary.cost_usd, alone->summary.cost_usd);
  ASSERT_TRUE(r->recommended.has_value());
  const Scenario& rec = r->verification[*r->recommended];
  for (const Scenario& s : r->verification) {
    if (s.meets_slo && s.within_caps) {
      EXPECT_LE(rec.summary.cost_usd, s.summary.cost_usd) << s.name;
    }
  }
}

TEST(PlannerSubstitutionTest, AnySubstitutesOnlyOntoModelsWithAtLeastTheMemory) {
  // With 'any' and V100 (16 GB), A100 (40 GB) planned: V100 work may go to the A100, and the
  // A100 (no work of its own) takes none back. The optimiser alone, no replay.
  PlannerOptions o = Options();
  o.plan.spot_max_share = 0;
  o.gpu_models = {"V100", "A100"};
  o.substitute_any = true;
  o.verify.enabled = false;
  auto r = RunPlanner(BaseAndBursts(2), CatalogWithA100(), model::GpuCatalog::BuiltIn(), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->models.size(), 2u);
  ASSERT_EQ(r->models[1].substitutes_for.size(), 1u);
  EXPECT_EQ(r->models[1].substitutes_for[0].first, "V100");
  EXPECT_TRUE(r->models[0].substitutes_for.empty());
  EXPECT_GT(r->models[1].plan.reserved_gpus, 0);
}

TEST(PlannerOptionsTest, AZeroCheckpointIntervalIsRefused) {
  // Given a checkpoint interval of zero (which the optimiser would price as checkpointing
  // continuously, where a job file without one means never), expect InvalidArgument saying how to
  // plan jobs that never checkpoint.
  PlannerOptions o = Options();
  o.verify.enabled = false;
  o.plan.checkpoint_interval = Duration::Zero();
  auto r = RunPlanner(BaseAndBursts(2), CatalogWithA100(), model::GpuCatalog::BuiltIn(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("never checkpoint"), std::string::npos) << r.status().ToString();
}

TEST(PlannerSubstitutionTest, BadSubstitutionsSayWhatIsWrong) {
  PlannerOptions o = Options();
  o.verify.enabled = false;
  auto refused = [&](std::pair<std::string, std::string> sub, const std::string& words) {
    o.substitutes = {sub};
    auto r = RunPlanner(BaseAndBursts(2), CatalogWithA100(), model::GpuCatalog::BuiltIn(), o);
    ASSERT_FALSE(r.ok()) << words;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(words), std::string::npos) << r.status().ToString();
  };
  refused({"V100", "Z99"}, "--substitute: unknown GPU model 'Z99'");
  refused({"V100", "v100"}, "both sides name V100");
  refused({"H100", "A100"}, "no planned job of the history runs on H100 (its planned models: V100)");
}


TEST(PlannerSpotCapacityTest, StockOutsArePricedAndThePlansSpotJobsFallBack) {
  // Given spot out of capacity in two-hour outages half of the time (a table of one row), spot
  // allowed for all the work: the optimiser prices half of its spot work at on-demand (the report
  // carries the fraction), and in the replay the plan's spot jobs fall back to on-demand after
  // the autoscaler's 30-minute wait instead of waiting out each outage, so the plan meets the
  // one-hour SLO and every job runs.
  PlannerOptions o = Options();
  o.plan.spot_max_share = 1.0;
  o.verify.baselines = false;
  o.verify.neighbours = false;
  cost::SpotCapacity cap;
  cap.gpus_per_node = 8;
  cap.mean_available = Duration::Hours(2);
  cap.mean_outage = Duration::Hours(2);
  cap.unavailable_fraction = 0.5;
  o.verify.spot_capacity = {cap};
  auto r = RunPlanner(BaseAndBursts(2), Catalog(), model::GpuCatalog::BuiltIn(), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_DOUBLE_EQ(r->models[0].prices.spot_unavailable_fraction, 0.5);
  const Scenario* plan = Find(*r, "plan");
  ASSERT_NE(plan, nullptr);
  EXPECT_EQ(plan->summary.finished, plan->summary.jobs);
  EXPECT_TRUE(plan->meets_slo) << plan->slo_wait_s;
  // Every job may use spot (the optimiser's share: 100 %, spot at $1.79 a useful hour against
  // reserved $1.93), so no job is kept on on-demand: what ran there fell back.
  EXPECT_EQ(r->spot_share, 1.0);
  EXPECT_EQ(plan->spot_job_share, 1.0);
  auto od = plan->summary.cost_by_market_usd.find("on-demand");
  ASSERT_NE(od, plan->summary.cost_by_market_usd.end());
  EXPECT_GT(od->second, 0);

  // Without the table the same prices carry no stock-outs.
  o.verify.spot_capacity.clear();
  o.verify.enabled = false;
  auto plain = RunPlanner(BaseAndBursts(2), Catalog(), model::GpuCatalog::BuiltIn(), o);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->models[0].prices.spot_unavailable_fraction, 0);
  EXPECT_LT(plain->plan.total_cost, r->plan.total_cost);
}


TEST(PlannerLineSearchTest, AnEdgeNeighbourIsFollowedUntilItStopsGettingCheaper) {
  // Given two weeks of one 8-GPU job every hour and then a week of six, no spot: the forecast
  // follows the last week and the optimiser reserves about six nodes, but replayed over the three
  // weeks only the first node is busy enough to pay (a one-year reservation breaks even at 63 %
  // busy; the others are busy a third of the time). Expect the search to go on past the -2
  // neighbour, to recommend one reserved node, and to have replayed a step beyond it.
  std::vector<sim::TraceJob> jobs;
  for (int h = 0; h < 3 * kHoursPerWeek; ++h) {
    const int n = h < 2 * kHoursPerWeek ? 1 : 6;
    for (int k = 0; k < n; ++k) {
      jobs.push_back(Job("j-" + std::to_string(h) + "-" + std::to_string(k), kMonday + Duration::Hours(h), 8,
                         Duration::Hours(1)));
    }
  }
  PlannerOptions o = Options();
  o.plan.spot_max_share = 0;
  o.verify.baselines = false;
  auto r = RunPlanner(jobs, Catalog(), model::GpuCatalog::BuiltIn(), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_GE(r->models[0].reserved_nodes, 5);
  ASSERT_NE(Find(*r, "plan, reserved -3"), nullptr);
  ASSERT_TRUE(r->recommended.has_value());
  const Scenario& rec = r->verification[*r->recommended];
  EXPECT_EQ(rec.reserved_nodes, 1) << rec.name;
  // The step past the recommendation was replayed (no reservation: dearer).
  bool beyond = false;
  for (const Scenario& s : r->verification) beyond = beyond || (s.kind == ScenarioKind::kCandidate && s.reserved_nodes == 0);
  EXPECT_TRUE(beyond);
  for (const Scenario& s : r->verification) {
    if (s.meets_slo) {
      EXPECT_LE(rec.summary.cost_usd, s.summary.cost_usd) << s.name;
    }
  }
}

TEST(PlannerSubstitutionTest, JobsOfAModelWithoutSpotStayOffSpotInThePlansReplay) {
  // Given V100 work allowed on A100s and spot offered for the A100 only: the optimiser gives the
  // V100's work no spot (its own model has none), so the plan's replay must not mark V100 jobs
  // spot-tolerant either, whatever spot share was tried: no job of the plan may use spot, and
  // none runs there (before, a share of them was marked spot and ran on A100 spot, unpriced).
  cost::OfferTable t = CatalogWithA100();
  for (cost::Offer& offer : t.offers) {
    if (offer.gpu == "V100") offer.spot_per_hour.reset();
    if (offer.gpu == "A100") offer.spot_per_hour = 2 * kUsd;
  }
  PlannerOptions o = Options();
  o.plan.spot_max_share = 1.0;
  o.substitutes = {{"V100", "A100"}};
  o.verify.baselines = false;
  auto r = RunPlanner(BaseAndBursts(2), t, model::GpuCatalog::BuiltIn(), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_FALSE(r->models[0].prices.spot.has_value());
  ASSERT_TRUE(r->models[1].prices.spot.has_value());
  ASSERT_GT(r->spot_shares.size(), 1u);  // spot shares above 0 were tried (the A100 has spot)
  for (const Scenario& s : r->verification) {
    EXPECT_EQ(s.spot_job_share, 0) << s.name;
    auto spot = s.summary.cost_by_market_usd.find("spot");
    EXPECT_TRUE(spot == s.summary.cost_by_market_usd.end() || spot->second == 0) << s.name;
    EXPECT_EQ(s.summary.finished, s.summary.jobs) << s.name;
  }
}

}  // namespace
}  // namespace gpufleet::plan
