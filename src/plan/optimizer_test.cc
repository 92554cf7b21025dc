#include "plan/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>

namespace gpufleet::plan {
namespace {

constexpr int64_t kUsd = 1'000'000;

// Reserved $0.60, on-demand $1.00 per GPU-hour; spot only where a test offers it.
ModelInput A100(std::vector<double> demand) {
  ModelInput m;
  m.gpu_model = "A100";
  m.demand = std::move(demand);
  m.prices.gpu_model = "A100";
  m.prices.reserved = 600'000;
  m.prices.on_demand = 1'000'000;
  return m;
}

PlanOptions HardSlo(Duration wait, bool cyclic = false) {
  PlanOptions o;
  o.slo_wait = wait;
  o.slo_quantile = 1.0;
  o.cyclic = cyclic;
  return o;
}

double Sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

TEST(OptimizerTest, ConstantDemandIsAllReservedWhenReservedIsCheaper) {
  // Given 10 GPUs busy every hour of a week and reserved cheaper than on-demand, expect R = 10,
  // no burst, cost 10 x $0.60 x 168 and an LP bound equal to it.
  auto plan = SolvePlan({A100(std::vector<double>(168, 10.0))}, HardSlo(Duration::Zero(), true));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const ModelPlan& m = plan->models.at(0);
  EXPECT_EQ(m.reserved_gpus, 10);
  EXPECT_NEAR(Sum(m.on_demand), 0, 1e-6);
  EXPECT_NEAR(Sum(m.spot), 0, 1e-6);
  EXPECT_EQ(plan->total_cost, 10 * 600'000 * 168);
  EXPECT_EQ(plan->lp_bound, plan->total_cost);
  EXPECT_NEAR(plan->gap, 0, 1e-9);
  EXPECT_TRUE(plan->proven_optimal);
  EXPECT_NEAR(m.reserved_utilisation, 1.0, 1e-9);
}

TEST(OptimizerTest, OneHourSpikeGoesToSpotWhileReservedCoversTheBase) {
  // Given 10 GPUs all day and 16 in hour 5, spot at $0.70 for half of the work, expect R = 10 and
  // the 6 extra GPU-hours on spot (cheaper than on-demand even with rework), none on on-demand.
  std::vector<double> d(24, 10.0);
  d[5] = 16;
  ModelInput m = A100(d);
  m.prices.spot = 700'000;
  m.prices.spot_interruptions_per_hour = 0.1;
  PlanOptions o = HardSlo(Duration::Zero());
  auto plan = SolvePlan({m}, o);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const ModelPlan& p = plan->models.at(0);
  EXPECT_EQ(p.reserved_gpus, 10);
  EXPECT_NEAR(p.spot[5], 6, 1e-6);
  EXPECT_NEAR(Sum(p.spot), 6, 1e-6);
  EXPECT_NEAR(Sum(p.on_demand), 0, 1e-6);
  // rework = 0.1/h x (15 min + 5 min) = 1/30.
  EXPECT_NEAR(p.spot_rework, 1.0 / 30, 1e-12);
  EXPECT_EQ(p.spot_cost, std::llround(6 * 700'000 * (1 + 1.0 / 30)));

  // Without spot the spike goes to on-demand.
  m.prices.spot.reset();
  auto od = SolvePlan({m}, o);
  ASSERT_TRUE(od.ok());
  EXPECT_EQ(od->models[0].reserved_gpus, 10);
  EXPECT_NEAR(od->models[0].on_demand[5], 6, 1e-6);
}

TEST(OptimizerTest, ReservedPaysOnlyAboveTheBreakEvenUtilisation) {
  // Given 10 GPUs busy for part of each day, reserved at 0.6 x on-demand, expect no reservation
  // at 50 % utilisation and a full one at 62.5 %.
  auto day = [](int busy_hours) {
    std::vector<double> d(24, 0.0);
    for (int h = 0; h < busy_hours; ++h) d[h] = 10;
    return d;
  };
  auto half = SolvePlan({A100(day(12))}, HardSlo(Duration::Zero(), true));
  ASSERT_TRUE(half.ok()) << half.status().ToString();
  EXPECT_EQ(half->models[0].reserved_gpus, 0);
  EXPECT_EQ(half->total_cost, 120 * kUsd);
  auto most = SolvePlan({A100(day(15))}, HardSlo(Duration::Zero(), true));
  ASSERT_TRUE(most.ok());
  EXPECT_EQ(most->models[0].reserved_gpus, 10);
  EXPECT_EQ(most->total_cost, 10 * 600'000 * 24);
}

TEST(OptimizerTest, LongerSloLetsBacklogShaveASpikeIntoAQuietHour) {
  // Given 10 GPUs, a spike of 14 in hour 2 and a dip to 6 in hour 3, expect: with no wait allowed,
  // 4 on-demand GPU-hours; with a 2-hour SLO the 4 wait one hour for the idle reserved GPUs.
  std::vector<double> d = {10, 10, 14, 6, 10, 10, 10, 10};
  auto strict = SolvePlan({A100(d)}, HardSlo(Duration::Zero()));
  ASSERT_TRUE(strict.ok()) << strict.status().ToString();
  EXPECT_EQ(strict->models[0].reserved_gpus, 10);
  EXPECT_NEAR(strict->models[0].on_demand[2], 4, 1e-6);
  EXPECT_EQ(strict->total_cost, 52 * kUsd);

  auto relaxed = SolvePlan({A100(d)}, HardSlo(Duration::Hours(2)));
  ASSERT_TRUE(relaxed.ok());
  EXPECT_EQ(relaxed->models[0].reserved_gpus, 10);
  EXPECT_NEAR(Sum(relaxed->models[0].on_demand), 0, 1e-6);
  EXPECT_NEAR(relaxed->models[0].backlog[2], 4, 1e-6);
  EXPECT_NEAR(relaxed->models[0].backlog[3], 0, 1e-6);
  EXPECT_EQ(relaxed->total_cost, 48 * kUsd);
}

TEST(OptimizerTest, QuantileSloLetsOnlyItsShareOfWorkWaitLonger) {
  // Given the spike-and-dip day (80 GPU-hours) and no wait allowed for 95 % of the work, expect the
  // 4 late GPU-hours (5 %) to wait; at 99 % only 0.8 may, and 3.2 go to on-demand.
  std::vector<double> d = {10, 10, 14, 6, 10, 10, 10, 10};
  PlanOptions o = HardSlo(Duration::Zero());
  o.slo_quantile = 0.95;
  auto p95 = SolvePlan({A100(d)}, o);
  ASSERT_TRUE(p95.ok()) << p95.status().ToString();
  EXPECT_EQ(p95->total_cost, 48 * kUsd);
  EXPECT_NEAR(p95->models[0].late_gpu_hours, 4, 1e-6);
  o.slo_quantile = 0.99;
  auto p99 = SolvePlan({A100(d)}, o);
  ASSERT_TRUE(p99.ok());
  EXPECT_NEAR(Sum(p99->models[0].on_demand), 3.2, 1e-6);
  EXPECT_EQ(p99->total_cost, 51'200'000);
}

TEST(OptimizerTest, WholeNodeReservationsShowAGapToTheLpBound) {
  // Given 10 GPUs constant and 8-GPU nodes, expect one node reserved plus 2 GPUs on demand
  // ($6.80/h), and the LP bound at the fractional 1.25 nodes ($6.00/h).
  ModelInput m = A100(std::vector<double>(24, 10.0));
  m.reserve_multiple = 8;
  auto plan = SolvePlan({m}, HardSlo(Duration::Zero(), true));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->models[0].reserved_gpus, 8);
  EXPECT_EQ(plan->total_cost, 24 * 6'800'000);
  EXPECT_NEAR(static_cast<double>(plan->lp_bound), 24 * 6'000'000, 1);
  EXPECT_NEAR(plan->gap, 0.8 / 6.8, 1e-6);
}

TEST(OptimizerTest, FixedReservationEvaluatesABaseline) {
  // Given the constant demand and a reservation fixed at 0 (all on-demand), expect 10 x $1 x 24.
  ModelInput m = A100(std::vector<double>(24, 10.0));
  m.fixed_reserved = 0;
  auto plan = SolvePlan({m}, HardSlo(Duration::Zero(), true));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->models[0].reserved_gpus, 0);
  EXPECT_EQ(plan->total_cost, 240 * kUsd);
}

TEST(OptimizerTest, ModelsArePlannedSideBySide) {
  // Given A100 demand of 10 and H100 demand of 4 (H100 reserved at $2, on-demand $3), expect each
  // model's reservation and the total as the sum.
  ModelInput h100 = A100(std::vector<double>(24, 4.0));
  h100.gpu_model = "H100";
  h100.prices.reserved = 2 * kUsd;
  h100.prices.on_demand = 3 * kUsd;
  auto plan = SolvePlan({A100(std::vector<double>(24, 10.0)), h100}, HardSlo(Duration::Zero(), true));
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->models.size(), 2u);
  EXPECT_EQ(plan->models[1].gpu_model, "H100");
  EXPECT_EQ(plan->models[1].reserved_gpus, 4);
  EXPECT_EQ(plan->total_cost, 24 * (10 * 600'000 + 4 * 2 * kUsd));
}

TEST(OptimizerTest, InfeasibleInputsAreClearErrors) {
  // Given no on-demand, no spot and a reservation cap below the demand, expect FailedPrecondition
  // naming the limits; given malformed input, InvalidArgument.
  ModelInput m = A100(std::vector<double>(24, 10.0));
  m.prices.on_demand.reset();
  m.max_reserved = 5;
  auto plan = SolvePlan({m}, HardSlo(Duration::Zero(), true));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(plan.status().message().find("A100: reserved at most 5, no on-demand, no spot"), std::string::npos)
      << plan.status().message();

  EXPECT_EQ(SolvePlan({}, {}).status().code(), StatusCode::kInvalidArgument);
  ModelInput bad = A100({1, -2});
  EXPECT_EQ(SolvePlan({bad}, {}).status().code(), StatusCode::kInvalidArgument);
  ModelInput other = A100({1, 2, 3});
  other.gpu_model = "H100";
  EXPECT_EQ(SolvePlan({A100({1, 2}), other}, {}).status().code(), StatusCode::kInvalidArgument);
  PlanOptions o;
  o.slo_quantile = 0;
  EXPECT_EQ(SolvePlan({A100({1, 2})}, o).status().code(), StatusCode::kInvalidArgument);
}

TEST(OptimizerTest, FrontierCostFallsAsTheSloLoosens) {
  // Given the spike-and-dip day, expect a point per SLO, $52 at 0 h and $48 from 1 h on, and a
  // failed point (not a failed frontier) where the caps make the SLO impossible.
  std::vector<double> d = {10, 10, 14, 6, 10, 10, 10, 10};
  auto points = SolveFrontier({A100(d)}, HardSlo(Duration::Zero()),
                              {Duration::Zero(), Duration::Hours(1), Duration::Hours(4)});
  ASSERT_EQ(points.size(), 3u);
  ASSERT_TRUE(points[0].plan.ok());
  EXPECT_EQ(points[0].plan->total_cost, 52 * kUsd);
  EXPECT_EQ(points[1].plan->total_cost, 48 * kUsd);
  EXPECT_EQ(points[2].plan->total_cost, 48 * kUsd);
  EXPECT_EQ(points[2].slo_wait, Duration::Hours(4));

  ModelInput capped = A100(d);
  capped.prices.on_demand.reset();
  capped.max_reserved = 10;
  auto mixed = SolveFrontier({capped}, HardSlo(Duration::Zero()), {Duration::Zero(), Duration::Hours(2)});
  EXPECT_FALSE(mixed[0].plan.ok());
  EXPECT_TRUE(mixed[1].plan.ok());
}

TEST(OptimizerTest, NoisyWeekOfThreeModelsServesAllWorkWithinTheSlo) {
  // Given a seeded noisy week for three models with 8-GPU nodes, spot and a 2-hour hard SLO,
  // expect a plan in which every hour's books balance, no backlog outlives the SLO, spot stays
  // within its share, and the integer plan is within 5 % of the LP bound.
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> noise(0, 30);
  std::vector<ModelInput> models;
  for (const char* name : {"A100", "H100", "L4"}) {
    std::vector<double> d;
    for (int h = 0; h < 168; ++h) d.push_back((h % 24 >= 9 && h % 24 < 18 ? 60 : 25) + noise(rng));
    ModelInput m = A100(d);
    m.gpu_model = name;
    m.reserve_multiple = 8;
    m.prices.spot = 450'000;
    m.prices.spot_interruptions_per_hour = 0.05;
    models.push_back(m);
  }
  PlanOptions o = HardSlo(Duration::Hours(2), true);
  o.spot_max_share = 0.3;
  auto plan = SolvePlan(models, o);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_LE(plan->gap, 0.05);
  for (size_t mi = 0; mi < models.size(); ++mi) {
    const ModelPlan& p = plan->models[mi];
    const std::vector<double>& d = models[mi].demand;
    EXPECT_EQ(p.reserved_gpus % 8, 0);
    EXPECT_GT(p.reserved_gpus, 0);
    for (int h = 0; h < 168; ++h) {
      const double before = p.backlog[(h + 167) % 168];
      EXPECT_NEAR(before + d[h], p.reserved_used[h] + p.on_demand[h] + p.spot[h] + p.backlog[h], 1e-5) << h;
      EXPECT_LE(p.reserved_used[h], p.reserved_gpus + 1e-6);
      EXPECT_LE(p.spot[h], 0.3 * (before + d[h]) + 1e-6);
      EXPECT_LE(p.backlog[h], d[h] + d[(h + 167) % 168] + 1e-6) << h;
    }
  }
}


TEST(OptimizerTest, SpotOutOfCapacityIsPricedAsItsOnDemandFallback) {
  // Given 10 GPUs every hour, reserved $0.60, on-demand $1.00 and spot $0.10 with no rework: spot
  // out of capacity half the time costs 0.5 x 0.10 + 0.5 x 1.00 = $0.55 per useful hour, under
  // the reservation, so the work goes to spot; out 60 % of the time it costs $0.64 and the
  // reservation wins. The reported spot cost is the blended one.
  ModelInput m = A100(std::vector<double>(24, 10.0));
  m.prices.spot = 100'000;
  PlanOptions o = HardSlo(Duration::Zero(), true);
  o.spot_max_share = 1.0;
  m.prices.spot_unavailable_fraction = 0.5;
  auto half = SolvePlan({m}, o);
  ASSERT_TRUE(half.ok()) << half.status().ToString();
  EXPECT_EQ(half->models[0].reserved_gpus, 0);
  EXPECT_NEAR(Sum(half->models[0].spot), 240, 1e-6);
  EXPECT_EQ(half->total_cost, 240 * 550'000);
  EXPECT_EQ(half->models[0].spot_cost, 240 * 550'000);

  m.prices.spot_unavailable_fraction = 0.6;
  auto most = SolvePlan({m}, o);
  ASSERT_TRUE(most.ok()) << most.status().ToString();
  EXPECT_EQ(most->models[0].reserved_gpus, 10);
  EXPECT_NEAR(Sum(most->models[0].spot), 0, 1e-6);
  EXPECT_EQ(most->total_cost, 240 * 600'000);
}

// V100: reserved $1.00, on-demand $2.00; H100: reserved $2.00, on-demand $4.00, doing 3 V100-hours
// of work per GPU-hour: per unit of V100 work the H100 is the cheaper reservation.
std::vector<ModelInput> V100AndH100(double v100_per_hour, int64_t hours) {
  ModelInput v = A100(std::vector<double>(static_cast<size_t>(hours), v100_per_hour));
  v.gpu_model = v.prices.gpu_model = "V100";
  v.prices.reserved = 1'000'000;
  v.prices.on_demand = 2'000'000;
  ModelInput h = A100(std::vector<double>(static_cast<size_t>(hours), 0.0));
  h.gpu_model = h.prices.gpu_model = "H100";
  h.prices.reserved = 2'000'000;
  h.prices.on_demand = 4'000'000;
  return {v, h};
}

TEST(OptimizerSubstitutionTest, WorkMovesToTheModelCheaperPerUnitOfWork) {
  // Given 10 V100-hours of work every hour and an H100 that does 3 of them per hour at twice the
  // price, expect 3 reserved H100s (9 V100-hours for $6) and 1 reserved V100 for the rest ($1):
  // $7 an hour instead of $10, and the report says which work moved where.
  PlanOptions o = HardSlo(Duration::Zero(), true);
  o.substitutions = {{"V100", "H100", 3.0}};
  auto plan = SolvePlan(V100AndH100(10, 168), o);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const ModelPlan& v = plan->models.at(0);
  const ModelPlan& h = plan->models.at(1);
  EXPECT_EQ(v.reserved_gpus, 1);
  EXPECT_EQ(h.reserved_gpus, 3);
  EXPECT_EQ(plan->total_cost, (1 * 1'000'000 + 3 * 2'000'000) * 168);
  ASSERT_EQ(v.moved_to.size(), 1u);
  EXPECT_EQ(v.moved_to[0].first, "H100");
  EXPECT_NEAR(v.moved_to[0].second, 9.0 * 168, 1e-4);
  EXPECT_NEAR(h.foreign_gpu_hours, 3.0 * 168, 1e-4);
  EXPECT_NEAR(Sum(h.reserved_used), 3.0 * 168, 1e-4);  // the H100s' capacity series hold the moved work
  EXPECT_NEAR(h.reserved_utilisation, 1.0, 1e-6);
  EXPECT_NEAR(Sum(v.reserved_used), 1.0 * 168, 1e-4);
  EXPECT_TRUE(h.moved_to.empty());
}

TEST(OptimizerSubstitutionTest, WithoutSubstitutionEachModelServesItsOwnWork) {
  // The same models without the substitution: all 10 V100s reserved, no H100, nothing moved; and
  // the plan equals the V100 planned alone.
  auto plan = SolvePlan(V100AndH100(10, 168), HardSlo(Duration::Zero(), true));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->models.at(0).reserved_gpus, 10);
  EXPECT_EQ(plan->models.at(1).reserved_gpus, 0);
  EXPECT_TRUE(plan->models.at(0).moved_to.empty());
  EXPECT_EQ(plan->models.at(1).foreign_gpu_hours, 0);
  auto alone = SolvePlan({V100AndH100(10, 168).front()}, HardSlo(Duration::Zero(), true));
  ASSERT_TRUE(alone.ok());
  EXPECT_EQ(plan->total_cost, alone->total_cost);
}

TEST(OptimizerSubstitutionTest, AMoveThatDoesNotPayIsNotMade) {
  // An H100 that does only 1.5 V100-hours per hour at twice the price costs more per unit of
  // work in every market: nothing moves.
  PlanOptions o = HardSlo(Duration::Zero(), true);
  o.substitutions = {{"V100", "H100", 1.5}};
  auto plan = SolvePlan(V100AndH100(10, 168), o);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->models.at(0).reserved_gpus, 10);
  EXPECT_EQ(plan->models.at(1).reserved_gpus, 0);
  EXPECT_TRUE(plan->models.at(0).moved_to.empty());
}

TEST(OptimizerSubstitutionTest, WorkThatMayNotUseSpotDoesNotMoveOntoSpot) {
  // Given an H100 spot price far below everything and V100 work without spot (its input offers
  // none), the moved work uses H100 reserved or on-demand capacity, never H100 spot; work that
  // may use spot takes it.
  std::vector<ModelInput> models = V100AndH100(10, 24);
  models[1].prices.spot = 100'000;
  PlanOptions o = HardSlo(Duration::Zero());
  o.spot_max_share = 1.0;
  o.substitutions = {{"V100", "H100", 3.0}};
  auto plan = SolvePlan(models, o);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_NEAR(Sum(plan->models.at(1).spot), 0, 1e-6);
  EXPECT_GT(plan->models.at(1).foreign_gpu_hours, 0);

  models[0].prices.spot = 900'000;  // now V100 work may use spot: it goes to the H100's
  auto with_spot = SolvePlan(models, o);
  ASSERT_TRUE(with_spot.ok()) << with_spot.status().ToString();
  EXPECT_NEAR(Sum(with_spot->models.at(1).spot), 10.0 * 24 / 3.0, 1e-4);
  EXPECT_LT(with_spot->total_cost, plan->total_cost);
}

TEST(OptimizerSubstitutionTest, BadSubstitutionsAreRefusedNamingThem) {
  const std::vector<ModelInput> models = V100AndH100(10, 24);
  auto refused = [&](Substitution s, const std::string& words) {
    PlanOptions o = HardSlo(Duration::Zero());
    o.substitutions = {s};
    if (s.from == "twice") o.substitutions = {{"V100", "H100", 2}, {"V100", "H100", 3}};
    auto plan = SolvePlan(models, o);
    ASSERT_FALSE(plan.ok()) << words;
    EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(plan.status().message().find(words), std::string::npos) << plan.status().ToString();
  };
  refused({"V100", "A10G", 2}, "not planned (A10G)");
  refused({"V100", "V100", 1}, "is one model");
  refused({"V100", "H100", 0}, "positive number");
  refused({"V100", "H100", std::nan("")}, "positive number");
  refused({"twice", "", 1}, "given twice");
}

}  // namespace
}  // namespace gpufleet::plan
