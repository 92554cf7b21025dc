#include "cost/offer.h"

#include <gtest/gtest.h>

#include <cmath>

namespace gpufleet::cost {
namespace {

model::GpuModel Gpu(std::string name, int64_t mem_mib, double mem_bw_gbs, double fp16_tflops) {
  model::GpuModel m;
  m.name = std::move(name);
  m.mem_mib = mem_mib;
  m.mem_bw_gbs = mem_bw_gbs;
  m.fp16_tflops = fp16_tflops;
  return m;
}

model::GpuCatalog TestGpus() {
  model::GpuCatalog c;
  model::GpuModel h100 = Gpu("H100", 81920, 3350, 990);
  h100.aliases = {"H100-SXM"};
  c.Add(h100);
  c.Add(Gpu("A100", 40960, 1555, 312));
  return c;
}

const char* kHeader =
    "cloud,region,zone,instance_type,accelerator,gpu_count,gpu_mem_mib,vcpus,ram_gib,ondemand_usd_h,"
    "host_usd_h,spot_usd_h,spot_kind,aws_interruption_bucket\n";

class OfferTest : public ::testing::Test {
 protected:
  Result<OfferTable> Parse(const std::string& rows) {
    return ParseOffersCsv(std::string(kHeader) + rows, "fixture.csv", gpus_);
  }
  const LoadWarning* Warning(const OfferTable& t, const std::string& prefix) {
    for (const auto& w : t.warnings) {
      if (w.kind.rfind(prefix, 0) == 0) return &w;
    }
    return nullptr;
  }
  model::GpuCatalog gpus_ = TestGpus();
};

TEST_F(OfferTest, ParsesDollarsExactlyIntoMicroDollars) {
  // Given decimal prices as catalogs write them, expect exact micro-dollars (rounded half-up
  // past the sixth decimal) and no acceptance of signs or junk.
  EXPECT_EQ(ParseUsd("33.60609"), 33'606'090);
  EXPECT_EQ(ParseUsd("12"), 12'000'000);
  EXPECT_EQ(ParseUsd(".5"), 500'000);
  EXPECT_EQ(ParseUsd("0.1234565"), 123'457);
  EXPECT_EQ(ParseUsd("0.1234564"), 123'456);
  EXPECT_FALSE(ParseUsd("-1").has_value());
  EXPECT_FALSE(ParseUsd("1e3").has_value());
  EXPECT_FALSE(ParseUsd("").has_value());
  EXPECT_FALSE(ParseUsd(".").has_value());
  EXPECT_EQ(FormatUsd(1'234'567'890), "$1,234.57");
  EXPECT_EQ(FormatUsd(-5'000), "-$0.01");
  EXPECT_EQ(FormatUsd(33'606'090, 5), "$33.60609");
}

TEST_F(OfferTest, LoadsRowsWithCanonicalGpuNamesAndUnits) {
  // Given a row naming its GPU by an alias, expect the canonical name, integer units and prices,
  // and a quoted region with commas kept whole.
  auto t = Parse("vast,\"Denmark, DK, EU\",,1x-h100,H100-SXM,8,,32,64.5,20.5,,,,\n");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->offers.size(), 1u);
  const Offer& o = t->offers[0];
  EXPECT_EQ(o.gpu, "H100");
  EXPECT_EQ(o.region, "Denmark, DK, EU");
  EXPECT_EQ(o.gpus, 8);
  EXPECT_EQ(o.gpu_mem_mib, 81920);
  EXPECT_TRUE(o.has(kGpuMemFromSpecs));
  EXPECT_EQ(o.cpu_milli, 32'000);
  EXPECT_EQ(o.mem_mib, 66'048);
  EXPECT_EQ(o.on_demand_per_hour, 20'500'000);
  EXPECT_FALSE(o.spot_per_hour.has_value());
  EXPECT_EQ(o.labels().at("geo"), "eu");
}

TEST_F(OfferTest, KeepsOutUnknownGpusAndFractionalCountsWithCountedWarnings) {
  // Given two rows of an unknown GPU, one unnamed and one GPU partition, expect none loaded and
  // the warnings counted by kind with the first example.
  auto t = Parse(
      "azure,eastus,,ND_MI,MI999,8,,96,1900,30,,,,\n"
      "azure,westus,,ND_MI,MI999,8,,96,1900,30,,,,\n"
      "azure,westus,,ND_X,,8,,96,1900,30,,,,\n"
      "azure,westus,,NV6_A100,A100,0.167,,6,55,0.5,,,,\n"
      "aws,us-east-1,,p4d,A100,8,,96,1152,32.77,,,,\n");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->rows_read, 5);
  ASSERT_EQ(t->offers.size(), 1u);
  const LoadWarning* unknown = Warning(*t, "unknown GPU");
  ASSERT_NE(unknown, nullptr);
  EXPECT_EQ(unknown->count, 3);
  EXPECT_NE(unknown->example.find("fixture.csv:2"), std::string::npos) << unknown->example;
  const LoadWarning* frac = Warning(*t, "fractional");
  ASSERT_NE(frac, nullptr);
  EXPECT_EQ(frac->count, 1);
}

TEST_F(OfferTest, DropsSpotQuotedAtOrAboveOnDemand) {
  // Given spot equal to and above on-demand, expect spot dropped, flagged and warned; a real
  // discount keeps its spot price.
  auto t = Parse(
      "azure,eastus,,ND_H200,H100,8,,96,1900,80,,80,quoted,\n"
      "gcp,us-central1,us-central1-a,a2,A100,1,,12,85,3,,4,quoted,\n"
      "gcp,us-east1,us-east1-b,a2,A100,1,,12,85,3,,1.5,quoted,\n");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->offers.size(), 3u);
  EXPECT_FALSE(t->offers[0].spot_per_hour.has_value());
  EXPECT_TRUE(t->offers[0].has(kSpotAtOrAboveOnDemand));
  EXPECT_FALSE(t->offers[1].spot_per_hour.has_value());
  EXPECT_EQ(t->offers[2].spot_per_hour, 1'500'000);
  EXPECT_FALSE(t->offers[2].has(kSpotAtOrAboveOnDemand));
  ASSERT_NE(Warning(*t, "spot at or above"), nullptr);
  EXPECT_EQ(Warning(*t, "spot at or above")->count, 2);
}

TEST_F(OfferTest, MapsAwsAdvisorBucketsToHazardsAndDefaultsElsewhere) {
  // Given an AWS row with advisor bucket 0 and a GCP spot row with no data, expect the documented
  // conversion -ln(1 - 0.025) / 24h for the first and the cloud default (flagged) for the second.
  auto t = Parse(
      "aws,us-east-1,,p5,H100,8,,192,2048,98.32,,39.3,estimated,0\n"
      "gcp,us-east1,us-east1-b,a2,A100,1,,12,85,3,,1.5,quoted,\n");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const Offer& aws = t->offers[0];
  EXPECT_NEAR(aws.spot_hazard_per_hour, -std::log(0.975) / 24.0, 1e-12);
  EXPECT_TRUE(aws.has(kSpotEstimated));
  EXPECT_FALSE(aws.has(kHazardDefault));
  EXPECT_EQ(aws.hazard_source, "aws advisor <5%");
  const Offer& gcp = t->offers[1];
  EXPECT_DOUBLE_EQ(gcp.spot_hazard_per_hour, DefaultSpotHazardPerHour("gcp"));
  EXPECT_TRUE(gcp.has(kHazardDefault));
  // Buckets rise monotonically and stay inside 0..4.
  for (int b = 1; b <= 4; ++b) EXPECT_GT(*AwsBucketHazardPerHour(b), *AwsBucketHazardPerHour(b - 1));
  EXPECT_FALSE(AwsBucketHazardPerHour(5).has_value());
}

TEST_F(OfferTest, FlagsFallbackPricesOnTheGpuPartOfTheInstance) {
  // Given one instance type in three regions whose GPU parts (total minus host) are 90, 80 and 40,
  // expect only the 40 flagged (under half of 90), although its total (40 + 15 host = 55) is more
  // than half of the dearest total (105): the host part must not hide a fallback GPU price.
  auto t = Parse(
      "gcp,asia-east1,asia-east1-a,a3-highgpu-8g,H100,8,,208,1872,105,15,,,\n"
      "gcp,europe-west4,europe-west4-a,a3-highgpu-8g,H100,8,,208,1872,95,15,,,\n"
      "gcp,us-central1,us-central1-a,a3-highgpu-8g,H100,8,,208,1872,55,15,,,\n");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_FALSE(t->offers[0].has(kSuspectPrice));
  EXPECT_FALSE(t->offers[1].has(kSuspectPrice));
  EXPECT_TRUE(t->offers[2].has(kSuspectPrice));
  ASSERT_NE(Warning(*t, "suspect fallback"), nullptr);
  EXPECT_EQ(Warning(*t, "suspect fallback")->count, 1);
}

TEST_F(OfferTest, MalformedNumbersNameFileLineAndColumn) {
  // Given a price that is not a number on the third line, expect an error that says where.
  auto t = Parse("aws,us-east-1,,p4d,A100,8,,96,1152,32.77,,,,\naws,us-east-2,,p4d,A100,8,,96,1152,cheap,,,,\n");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), "fixture.csv:3: ondemand_usd_h: expected USD per hour, got 'cheap'");
  auto missing = ParseOffersCsv("cloud,region\n", "x.csv", gpus_);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("x.csv:1: missing column"), std::string::npos);
}

TEST_F(OfferTest, GeoLabelsFollowRegionNamesAcrossClouds) {
  // Given region names in each cloud's style, expect the geo label users constrain on.
  auto geo = [](std::string cloud, std::string region) {
    Offer o;
    o.cloud = cloud;
    o.region = region;
    auto l = o.labels();
    return l.count("geo") ? l.at("geo") : std::string();
  };
  EXPECT_EQ(geo("gcp", "europe-west4"), "eu");
  EXPECT_EQ(geo("aws", "eu-central-1"), "eu");
  EXPECT_EQ(geo("azure", "westeurope"), "eu");
  EXPECT_EQ(geo("azure", "eastus2"), "us");
  EXPECT_EQ(geo("aws", "us-east-1"), "us");
  EXPECT_EQ(geo("aws", "ap-south-1"), "asia");
  EXPECT_EQ(geo("vast", "Georgia, US, NA"), "us");
}

}  // namespace
}  // namespace gpufleet::cost
