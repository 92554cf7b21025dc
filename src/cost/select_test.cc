#include "cost/select.h"

#include <gtest/gtest.h>

#include <cmath>

namespace gpufleet::cost {
namespace {

constexpr MicroUsd kUsd = kMicroUsdPerUsd;

model::GpuModel Gpu(std::string name, int64_t mem_mib, double mem_bw_gbs, double fp16_tflops) {
  model::GpuModel m;
  m.name = std::move(name);
  m.mem_mib = mem_mib;
  m.mem_bw_gbs = mem_bw_gbs;
  m.fp16_tflops = fp16_tflops;
  return m;
}

// REF and FAST differ only in compute: FAST is 2x on compute-bound work, 1x on memory-bound work.
model::GpuCatalog TestGpus() {
  model::GpuCatalog c;
  c.Add(Gpu("REF", 40960, 1000, 100));
  c.Add(Gpu("FAST", 81920, 1000, 200));
  c.Add(Gpu("OTHER", 40960, 500, 100));  // not in the speed table below
  return c;
}

Offer MakeOffer(std::string cloud, std::string region, std::string type, std::string gpu, int gpus,
                std::optional<MicroUsd> on_demand, std::optional<MicroUsd> spot = std::nullopt,
                double hazard = 0) {
  Offer o;
  o.cloud = std::move(cloud);
  o.region = std::move(region);
  o.instance_type = std::move(type);
  o.gpu = std::move(gpu);
  o.gpus = gpus;
  o.on_demand_per_hour = on_demand;
  o.spot_per_hour = spot;
  o.spot_hazard_per_hour = spot ? hazard : 0;
  return o;
}

CostJob Job(int gpus, Duration runtime, model::Boundness profile = model::Boundness::kCompute) {
  CostJob j;
  j.gpus_per_node = gpus;
  j.reference_gpu = "REF";
  j.reference_runtime = runtime;
  j.profile = profile;
  j.restart_overhead = Duration::Zero();
  return j;
}

class SelectTest : public ::testing::Test {
 protected:
  Selection Select(const std::vector<Offer>& offers, const CostJob& job) {
    OfferTable t;
    t.offers = offers;
    auto s = SelectOffers(t, job, gpus_, speeds_);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? *s : Selection{};
  }
  model::GpuCatalog gpus_ = TestGpus();
  model::GpuSpeeds speeds_;  // empty: datasheet speeds, unless a test loads a table
};

TEST_F(SelectTest, FasterGpuWinsOnCostToCompleteDespiteHigherHourlyPrice) {
  // Given a 10 h compute-bound job on REF, REF at $6/h and FAST (2x) at $10/h, expect FAST to win
  // at $50 (5 h) against REF's $60, and the cheapest-$/h rule to pick REF, $10 dearer.
  std::vector<Offer> offers = {MakeOffer("a", "us-east1", "ref-1", "REF", 1, 6 * kUsd),
                               MakeOffer("b", "us-east1", "fast-1", "FAST", 1, 10 * kUsd)};
  Selection s = Select(offers, Job(1, Duration::Hours(10)));
  ASSERT_EQ(s.ranked.size(), 2u);
  EXPECT_EQ(s.ranked[0].offer.gpu, "FAST");
  EXPECT_EQ(s.ranked[0].runtime, Duration::Hours(5));
  EXPECT_EQ(s.ranked[0].expected_cost, 50 * kUsd);
  EXPECT_EQ(s.ranked[1].expected_cost, 60 * kUsd);
  ASSERT_TRUE(s.cheapest_hourly.has_value());
  EXPECT_EQ(s.cheapest_hourly->offer.gpu, "REF");
  EXPECT_EQ(s.saving_vs_cheapest_hourly, 10 * kUsd);
  EXPECT_NE(s.reason.find("cheapest-$/h rule would pick"), std::string::npos) << s.reason;
}

TEST_F(SelectTest, MemoryBoundJobGainsNothingFromComputeAndTakesTheCheaperGpu) {
  // Given the same offers and a memory-bound job (FAST has REF's bandwidth), expect REF to win at
  // $60 against FAST's $100, and the cheapest-$/h rule to agree.
  std::vector<Offer> offers = {MakeOffer("a", "us-east1", "ref-1", "REF", 1, 6 * kUsd),
                               MakeOffer("b", "us-east1", "fast-1", "FAST", 1, 10 * kUsd)};
  Selection s = Select(offers, Job(1, Duration::Hours(10), model::Boundness::kMemory));
  ASSERT_EQ(s.ranked.size(), 2u);
  EXPECT_EQ(s.ranked[0].offer.gpu, "REF");
  EXPECT_EQ(s.ranked[1].expected_cost, 100 * kUsd);
  EXPECT_EQ(s.saving_vs_cheapest_hourly, 0);
  EXPECT_NE(s.reason.find("picks the same offer"), std::string::npos) << s.reason;
}

TEST_F(SelectTest, ExpectedSpotTimeMatchesTheRenewalFormula) {
  // Given rate 0.1/h and 10 h of work: without checkpoints (e^1 - 1)/0.1 = 17.18 h; with hourly
  // checkpoints 10 (e^0.1 - 1)/0.1 = 10.517 h; with a 30 min restart each segment costs
  // (e^0.1 - 1)(10 + 0.5).
  auto none = ExpectedSpotTime(Duration::Hours(10), 0.1, Duration::Zero(), Duration::Zero());
  EXPECT_NEAR(none.wall_hours, std::expm1(1.0) / 0.1, 1e-9);
  EXPECT_NEAR(none.interruptions, std::expm1(1.0), 1e-9);
  auto hourly = ExpectedSpotTime(Duration::Hours(10), 0.1, Duration::Hours(1), Duration::Zero());
  EXPECT_NEAR(hourly.wall_hours, 10 * std::expm1(0.1) / 0.1, 1e-9);
  auto restart = ExpectedSpotTime(Duration::Hours(10), 0.1, Duration::Hours(1), Duration::Minutes(30));
  EXPECT_NEAR(restart.wall_hours, 10 * std::expm1(0.1) * 10.5, 1e-9);
  EXPECT_NEAR(restart.restart_hours, 10 * std::expm1(0.1) * 0.5, 1e-9);
  // A last partial segment: 2.5 h with 1 h checkpoints = 2 full + 0.5 h.
  auto partial = ExpectedSpotTime(Duration::Minutes(150), 0.1, Duration::Hours(1), Duration::Zero());
  EXPECT_NEAR(partial.wall_hours, (2 * std::expm1(0.1) + std::expm1(0.05)) / 0.1, 1e-9);
  // No hazard: no rework.
  EXPECT_EQ(ExpectedSpotTime(Duration::Hours(3), 0, Duration::Zero(), Duration::Hours(1)).wall_hours, 3.0);
}

TEST_F(SelectTest, SmallHazardReducesToTheLinearReworkRule) {
  // Given a small rate, expect rework ~= hazard x runtime x (interval/2 + restart), the first-order
  // rule of the issue.
  const double lambda = 0.001, t = 10, tau = 0.5, r = 0.1;
  auto e = ExpectedSpotTime(Duration::Hours(10), lambda, Duration::Minutes(30), Duration::Minutes(6));
  EXPECT_NEAR(e.wall_hours - t, lambda * t * (tau / 2 + r), 1e-5);
}

TEST_F(SelectTest, LongJobWithoutCheckpointsPrefersOnDemandButCheckpointingJobPrefersSpot) {
  // Given on-demand at $10/h and spot at $4/h with 0.1 interruptions/h, and a 40 h job: without
  // checkpoints spot expects (e^4 - 1)/0.1 = 536 h ($2,144) so on-demand ($400) wins; with 30 min
  // checkpoints and 5 min restarts spot expects 80 (e^0.05 - 1)(10 + 1/12) = 41.4 h ($165) and wins.
  std::vector<Offer> offers = {MakeOffer("a", "us-east1", "ref-1", "REF", 1, 10 * kUsd, 4 * kUsd, 0.1)};
  CostJob job = Job(1, Duration::Hours(40));
  job.restart_overhead = Duration::Minutes(5);
  Selection no_ckpt = Select(offers, job);
  ASSERT_EQ(no_ckpt.ranked.size(), 2u);
  EXPECT_EQ(no_ckpt.ranked[0].market, model::Market::kOnDemand);
  EXPECT_EQ(no_ckpt.ranked[0].expected_cost, 400 * kUsd);
  EXPECT_NEAR(static_cast<double>(no_ckpt.ranked[1].expected_cost) / kUsd,
              4 * (std::expm1(4.0) * (10 + 5.0 / 60)), 0.01);
  // The cheapest-$/h rule takes spot and pays for it.
  EXPECT_EQ(no_ckpt.cheapest_hourly->market, model::Market::kSpot);
  EXPECT_GT(no_ckpt.saving_vs_cheapest_hourly, 1500 * kUsd);

  job.checkpoint_interval = Duration::Minutes(30);
  Selection ckpt = Select(offers, job);
  ASSERT_EQ(ckpt.ranked.size(), 2u);
  EXPECT_EQ(ckpt.ranked[0].market, model::Market::kSpot);
  const double wall = 80 * std::expm1(0.05) * (10 + 5.0 / 60);
  EXPECT_NEAR(ckpt.ranked[0].expected_wall.hours_f(), wall, 1e-4);
  EXPECT_NEAR(static_cast<double>(ckpt.ranked[0].expected_cost) / kUsd, 4 * wall, 0.01);
  // The breakdown adds up exactly.
  const Candidate& c = ckpt.ranked[0];
  EXPECT_EQ(c.compute_cost + c.rework_cost + c.restart_cost, c.expected_cost);
  EXPECT_EQ(c.compute_cost, 160 * kUsd);
}

TEST_F(SelectTest, ASpotRunThatWouldHardlyEverFinishIsRejectedNotRankedAtANegativeCost) {
  // Given spot at $4/h with 0.5 interruptions/h and an 800-hour job without checkpoints
  // (e^400 - 1 expected restarts: overflows a cost in micro-dollars), expect spot rejected with
  // the reason and on-demand ranked alone at its $8,000; with 30-minute checkpoints spot ranks.
  std::vector<Offer> offers = {MakeOffer("a", "us-east1", "ref-1", "REF", 1, 10 * kUsd, 4 * kUsd, 0.5)};
  CostJob job = Job(1, Duration::Hours(800));
  Selection s = Select(offers, job);
  ASSERT_EQ(s.ranked.size(), 1u);
  EXPECT_EQ(s.ranked[0].market, model::Market::kOnDemand);
  EXPECT_EQ(s.ranked[0].expected_cost, 8000 * kUsd);
  ASSERT_EQ(s.rejected.size(), 1u);
  EXPECT_NE(s.rejected.begin()->first.find("would hardly ever finish on spot"), std::string::npos);
  job.checkpoint_interval = Duration::Minutes(30);
  Selection ckpt = Select(offers, job);
  ASSERT_EQ(ckpt.ranked.size(), 2u);
  for (const Candidate& c : ckpt.ranked) {
    EXPECT_GT(c.expected_cost, 0);
    EXPECT_GT(c.expected_wall, Duration::Hours(799));
  }
}

TEST_F(SelectTest, GangNeedsEnoughGpusPerNodeAndMultipliesPriceAndHazard) {
  // Given a 2 x 8-GPU gang, a 4-GPU offer and an 8-GPU offer, expect the 4-GPU offer rejected, the
  // 8-GPU offer priced x2, and spot rework computed at twice the per-node rate.
  std::vector<Offer> offers = {MakeOffer("a", "us-east1", "ref-4", "REF", 4, 4 * kUsd),
                               MakeOffer("a", "us-east1", "ref-8", "REF", 8, 8 * kUsd, 3 * kUsd, 0.05)};
  CostJob job = Job(8, Duration::Hours(10));
  job.nodes = 2;
  job.checkpoint_interval = Duration::Hours(1);
  Selection s = Select(offers, job);
  ASSERT_EQ(s.ranked.size(), 2u);
  EXPECT_EQ(s.rejected.at("fewer than 8 GPUs per instance"), 1);
  for (const Candidate& c : s.ranked) EXPECT_EQ(c.offer.instance_type, "ref-8");
  const Candidate& spot = s.ranked[0].market == model::Market::kSpot ? s.ranked[0] : s.ranked[1];
  const Candidate& od = s.ranked[0].market == model::Market::kSpot ? s.ranked[1] : s.ranked[0];
  EXPECT_EQ(od.price_per_hour, 16 * kUsd);
  EXPECT_EQ(od.expected_cost, 160 * kUsd);
  EXPECT_EQ(spot.price_per_hour, 6 * kUsd);
  EXPECT_NEAR(spot.expected_wall.hours_f(), 10 * std::expm1(0.1) / 0.1, 1e-4);
  EXPECT_NE(spot.Describe().find("2 x a ref-8"), std::string::npos) << spot.Describe();
}

TEST_F(SelectTest, RegionGlobsCloudsAndConstraintsFilterOffers) {
  // Given offers in Europe and the US on two clouds, expect 'europe-*' to keep the European one,
  // geo=eu the same, and clouds=[b] only cloud b's.
  std::vector<Offer> offers = {MakeOffer("a", "europe-west4", "x", "REF", 1, 5 * kUsd),
                               MakeOffer("a", "us-east1", "x", "REF", 1, 1 * kUsd),
                               MakeOffer("b", "us-west1", "y", "REF", 1, 2 * kUsd)};
  CostJob job = Job(1, Duration::Hours(1));
  job.regions = {"europe-*"};
  Selection eu = Select(offers, job);
  ASSERT_EQ(eu.ranked.size(), 1u);
  EXPECT_EQ(eu.ranked[0].offer.region, "europe-west4");
  EXPECT_EQ(eu.rejected.at("region not allowed"), 2);

  job.regions.clear();
  job.constraints = {{"geo", "eu"}};
  Selection geo = Select(offers, job);
  ASSERT_EQ(geo.ranked.size(), 1u);
  EXPECT_EQ(geo.ranked[0].offer.region, "europe-west4");

  job.constraints.clear();
  job.clouds = {"b"};
  Selection b = Select(offers, job);
  ASSERT_EQ(b.ranked.size(), 1u);
  EXPECT_EQ(b.ranked[0].offer.cloud, "b");
}

TEST_F(SelectTest, UnknownCloudRegionOrConstraintIsAnErrorNotAnEmptyRanking) {
  // Given offers on clouds a and b, expect a cloud, region glob or constraint value no offer has
  // ('c', 'mars-*', geo 'EU') to be InvalidArgument naming the field, the value and a near match
  // where there is one, rather than a ranking in which every offer was rejected.
  OfferTable t;
  t.offers = {MakeOffer("a", "europe-west4", "x", "REF", 1, 5 * kUsd), MakeOffer("b", "us-west1", "y", "REF", 1, 2 * kUsd)};
  CostJob job = Job(1, Duration::Hours(1));
  job.clouds = {"b", "A"};
  auto s = SelectOffers(t, job, gpus_, speeds_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(), "clouds: the catalog has no cloud 'A' (did you mean 'a'?); it has a, b");

  job.clouds.clear();
  job.regions = {"mars-*"};
  s = SelectOffers(t, job, gpus_, speeds_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message().rfind("regions: the pattern 'mars-*' matches no region or zone of the catalog", 0), 0u)
      << s.status().message();

  job.regions.clear();
  job.constraints = {{"geo", "EU"}};
  s = SelectOffers(t, job, gpus_, speeds_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "constraints.geo: no offer has geo 'EU' (did you mean 'eu'?); geo is one of eu, us");
}

TEST_F(SelectTest, DeadlineDropsSlowOffersButCheapestHourlyIgnoresIt) {
  // Given a 10 h compute-bound job with an 8 h deadline, REF at $1/h (10 h) and FAST at $3/h (5 h),
  // expect only FAST ranked and the cheapest-$/h pick to be REF, marked as missing the deadline.
  std::vector<Offer> offers = {MakeOffer("a", "us-east1", "ref", "REF", 1, 1 * kUsd),
                               MakeOffer("a", "us-east1", "fast", "FAST", 1, 3 * kUsd)};
  CostJob job = Job(1, Duration::Hours(10));
  job.deadline = Duration::Hours(8);
  Selection s = Select(offers, job);
  ASSERT_EQ(s.ranked.size(), 1u);
  EXPECT_EQ(s.ranked[0].offer.gpu, "FAST");
  EXPECT_EQ(s.rejected.at("misses the deadline"), 1);
  ASSERT_TRUE(s.cheapest_hourly.has_value());
  EXPECT_EQ(s.cheapest_hourly->offer.gpu, "REF");
  EXPECT_FALSE(s.cheapest_hourly->meets_deadline);
  // REF costs $10 against FAST's $15: cheaper, but too late.
  EXPECT_EQ(s.saving_vs_cheapest_hourly, -5 * kUsd);
  EXPECT_NE(s.reason.find("($5.00 less, but it misses the deadline)"), std::string::npos) << s.reason;
}

TEST_F(SelectTest, HourlyCapMarketGpuTypeAndSuspectPricesFilter) {
  // Given a cap of $5/h, expect the $6/h offer rejected; market on-demand never yields spot;
  // gpu_type [FAST] rejects REF; a suspect price is skipped unless allowed.
  Offer suspect = MakeOffer("a", "us-east1", "fast-cheap", "FAST", 1, 1 * kUsd);
  suspect.flags |= kSuspectPrice;
  std::vector<Offer> offers = {MakeOffer("a", "us-east1", "ref", "REF", 1, 6 * kUsd, 2 * kUsd, 0.01),
                               MakeOffer("a", "us-east1", "fast", "FAST", 1, 4 * kUsd), suspect};
  CostJob job = Job(1, Duration::Hours(1));
  job.max_hourly_cost = 5 * kUsd;
  job.market = model::MarketPreference::kOnDemand;
  Selection s = Select(offers, job);
  ASSERT_EQ(s.ranked.size(), 1u);
  EXPECT_EQ(s.ranked[0].offer.instance_type, "fast");
  EXPECT_EQ(s.rejected.at("over max_hourly_cost"), 1);
  EXPECT_EQ(s.rejected.at("suspect fallback price"), 1);

  job.allow_suspect_prices = true;
  job.gpu_types = {"FAST"};
  Selection t = Select(offers, job);
  ASSERT_EQ(t.ranked.size(), 2u);
  EXPECT_EQ(t.ranked[0].offer.instance_type, "fast-cheap");
  EXPECT_EQ(t.rejected.at("GPU model not allowed"), 1);
}

TEST_F(SelectTest, SpotOutliersRankAfterOtherOffersUnlessTrusted) {
  // Given a spot price flagged as an outlier at $1/h, a normal spot price at $3/h and on-demand at
  // $6/h for a checkpointing job, expect the outlier ranked last (and not the cheapest-$/h pick)
  // although it is cheapest, and first once the job trusts outliers.
  Offer outlier = MakeOffer("a", "us-east1", "one-zone", "REF", 1, 10 * kUsd, 1 * kUsd, 0.001);
  outlier.flags |= kSpotOutlier;
  std::vector<Offer> offers = {outlier, MakeOffer("a", "us-east1", "usual", "REF", 1, 9 * kUsd, 3 * kUsd, 0.001),
                               MakeOffer("b", "us-east1", "od", "REF", 1, 6 * kUsd)};
  CostJob job = Job(1, Duration::Hours(1));
  job.checkpoint_interval = Duration::Minutes(10);
  Selection s = Select(offers, job);
  ASSERT_EQ(s.ranked.size(), 5u);
  EXPECT_EQ(s.ranked[0].offer.instance_type, "usual");
  EXPECT_EQ(s.ranked[0].market, model::Market::kSpot);
  EXPECT_EQ(s.ranked.back().offer.instance_type, "one-zone");
  EXPECT_EQ(s.ranked.back().market, model::Market::kSpot);
  EXPECT_TRUE(s.ranked.back().untrusted_outlier);
  // The outlier's on-demand price is an ordinary price and ranks as usual.
  EXPECT_FALSE(s.ranked[3].untrusted_outlier);
  ASSERT_TRUE(s.cheapest_hourly.has_value());
  EXPECT_EQ(s.cheapest_hourly->offer.instance_type, "usual");
  EXPECT_GE(s.saving_vs_cheapest_hourly, 0);

  job.trust_spot_outliers = true;
  Selection t = Select(offers, job);
  EXPECT_EQ(t.ranked[0].offer.instance_type, "one-zone");
  EXPECT_FALSE(t.ranked[0].untrusted_outlier);
  EXPECT_EQ(t.cheapest_hourly->offer.instance_type, "one-zone");
}

TEST_F(SelectTest, RejectsJobsThatCannotBeCosted) {
  // Given an unknown reference GPU or no runtime, expect InvalidArgument naming the field.
  OfferTable t;
  CostJob job = Job(1, Duration::Hours(1));
  job.reference_gpu = "Z80";
  auto s = SelectOffers(t, job, gpus_, speeds_);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("estimate: unknown GPU model 'Z80'"), std::string::npos);
  job = Job(1, Duration::Zero());
  EXPECT_FALSE(SelectOffers(t, job, gpus_, speeds_).ok());
  job = Job(1, Duration::Hours(1));
  job.gpu_types = {"nope"};
  EXPECT_FALSE(SelectOffers(t, job, gpus_, speeds_).ok());
}

// A measured table for the test GPUs: FAST does 1.5 REFs' worth of work by default (the datasheet
// says 2x compute-bound) and 1.25 on training-vision; OTHER has no row.
class SelectSpeedTest : public SelectTest {
 protected:
  void SetUp() override {
    auto speeds = model::GpuSpeeds::ParseCsv(
        "gpu,workload_class,ratio_vs_a100,confidence,benchmark\n"
        "REF,default,1.000,high,(baseline)\n"
        "FAST,default,1.5,medium,geomean\n"
        "FAST,training-vision,1.25,medium,ResNet-50\n",
        "speeds.csv", gpus_);
    ASSERT_TRUE(speeds.ok()) << speeds.status().ToString();
    speeds_ = std::move(speeds).value();
  }

  const Candidate& Find(const Selection& s, const std::string& gpu) {
    for (const Candidate& c : s.ranked) {
      if (c.offer.gpu == gpu) return c;
    }
    ADD_FAILURE() << "no candidate on " << gpu;
    return s.ranked.front();
  }

  std::vector<Offer> offers_ = {MakeOffer("a", "us-east1", "ref-1", "REF", 1, 6 * kUsd),
                                MakeOffer("b", "us-east1", "fast-1", "FAST", 1, 10 * kUsd),
                                MakeOffer("c", "us-east1", "other-1", "OTHER", 1, 7 * kUsd)};
};

TEST_F(SelectSpeedTest, MeasuredTableReplacesTheDatasheetAndChangesTheWinner) {
  // Given a 10 h compute-bound job on REF, REF at $6/h and FAST at $10/h, expect FAST at the
  // table's 1.5x (6 h 40 m, $66.67) to lose to REF ($60), where the datasheet's 2x made it win;
  // OTHER ($7/h, no row: datasheet 1.0x) costs $70.
  Selection s = Select(offers_, Job(1, Duration::Hours(10)));
  const Candidate& fast = Find(s, "FAST");
  EXPECT_DOUBLE_EQ(fast.speed, 1.5);
  EXPECT_EQ(fast.speed_source, "mlperf:default");
  EXPECT_EQ(fast.speed_confidence, "medium");
  EXPECT_EQ(fast.expected_cost, 66'666'667);
  EXPECT_EQ(Find(s, "REF").speed_source, "mlperf:default");
  EXPECT_EQ(s.ranked[0].offer.gpu, "REF");
  EXPECT_NE(s.reason.find("(mlperf:default)"), std::string::npos) << s.reason;
}

TEST_F(SelectSpeedTest, WorkloadClassPicksItsRow) {
  // Given workload training-vision, expect FAST at 1.25x: 8 h, $80.
  CostJob job = Job(1, Duration::Hours(10));
  job.workload_class = "training-vision";
  Selection s = Select(offers_, job);
  const Candidate& fast = Find(s, "FAST");
  EXPECT_DOUBLE_EQ(fast.speed, 1.25);
  EXPECT_EQ(fast.speed_source, "mlperf:training-vision");
  EXPECT_EQ(fast.expected_cost, 80 * kUsd);
}

TEST_F(SelectSpeedTest, StepTimesOverrideTheTable) {
  // Given step times of 0.42 s on REF and 0.23 s on FAST, expect FAST at 0.42 / 0.23 = 1.826x,
  // measured: 10 h / 1.826 = 5 h 28 m 34 s, $54.76, and FAST wins again.
  CostJob job = Job(1, Duration::Hours(10));
  job.speed_overrides.step_seconds = {{"REF", 0.42}, {"FAST", 0.23}};
  Selection s = Select(offers_, job);
  const Candidate& fast = Find(s, "FAST");
  EXPECT_DOUBLE_EQ(fast.speed, 0.42 / 0.23);
  EXPECT_EQ(fast.speed_source, "measured");
  EXPECT_TRUE(fast.speed_confidence.empty());
  EXPECT_EQ(fast.runtime, Duration::Millis(std::llround(10 * 3'600'000.0 * 0.23 / 0.42)));
  EXPECT_EQ(s.ranked[0].offer.gpu, "FAST");
}

TEST_F(SelectSpeedTest, GpuWithoutRowFallsBackToTheDatasheet) {
  // Given OTHER, absent from the table, with REF's TFLOPS and half its bandwidth, expect the
  // datasheet model: 1.0x compute-bound, 0.5x memory-bound.
  EXPECT_EQ(Find(Select(offers_, Job(1, Duration::Hours(10))), "OTHER").speed_source, "datasheet");
  EXPECT_DOUBLE_EQ(Find(Select(offers_, Job(1, Duration::Hours(10))), "OTHER").speed, 1.0);
  Selection s = Select(offers_, Job(1, Duration::Hours(10), model::Boundness::kMemory));
  const Candidate& mem = Find(s, "OTHER");
  EXPECT_DOUBLE_EQ(mem.speed, 0.5);
  EXPECT_EQ(mem.speed_source, "datasheet");
}

TEST_F(SelectSpeedTest, UnknownWorkloadClassOrStepTimeGpuIsAnError) {
  OfferTable t;
  CostJob job = Job(1, Duration::Hours(1));
  job.workload_class = "training-nlp";
  auto s = SelectOffers(t, job, gpus_, speeds_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "workload: unknown workload class 'training-nlp'; known: default, training-vision");
  job = Job(1, Duration::Hours(1));
  job.speed_overrides.step_seconds = {{"Z80", 0.5}};
  s = SelectOffers(t, job, gpus_, speeds_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "step_time: unknown GPU model 'Z80'");
}

}  // namespace
}  // namespace gpufleet::cost
