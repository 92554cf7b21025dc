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

TEST_F(OfferTest, ASecondRowForTheSameOfferIsAnErrorNamingBothLines) {
  // Given two rows for aws us-east-1 p4d with 8 x A100 (lines 2 and 4), expect an error naming
  // both lines, for readers would otherwise mix one row's on-demand price with the other's spot
  // price; so too for a zone's rows that name one GPU by two of its names (H100, H100-SXM). The same machine type in the same zone with
  // another GPU model or count (GCP attaches several to n1 machines) is another offer.
  auto dup = Parse(
      "aws,us-east-1,,p4d,A100,8,,96,1152,32.77,,,,\n"
      "aws,us-east-2,,p4d,A100,8,,96,1152,32.77,,,,\n"
      "aws,us-east-1,,p4d,A100,8,,96,1152,30.00,,9.0,,\n");
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.status().message().rfind("fixture.csv:4: duplicate offer aws us-east-1 p4d with 8 x A100: line 2 ", 0),
            0u)
      << dup.status().message();
  auto zoned = Parse(
      "gcp,us-central1,us-central1-a,n1-standard-16,H100,2,,16,60,8.0,,,,\n"
      "gcp,us-central1,us-central1-a,n1-standard-16,H100-SXM,2,,16,60,8.0,,,,\n");
  ASSERT_FALSE(zoned.ok());
  EXPECT_NE(zoned.status().message().find("zone us-central1-a"), std::string::npos) << zoned.status().message();
  auto distinct = Parse(
      "gcp,us-central1,us-central1-a,n1-standard-16,H100,2,,16,60,8.0,,,,\n"
      "gcp,us-central1,us-central1-a,n1-standard-16,A100,2,,16,60,6.0,,,,\n"
      "gcp,us-central1,us-central1-a,n1-standard-16,A100,1,,16,60,4.0,,,,\n"
      "gcp,us-central1,us-central1-b,n1-standard-16,A100,1,,16,60,4.0,,,,\n");
  ASSERT_TRUE(distinct.ok()) << distinct.status().message();
  EXPECT_EQ(distinct->offers.size(), 4u);
}

TEST_F(OfferTest, ARowWithMoreOrFewerFieldsThanTheHeaderIsAnError) {
  // Given a row one field short (its values would sit under the wrong columns) and one with an
  // extra field, expect errors naming the line and both counts; and a gpu_count of 0 warned as a
  // machine without GPUs, not as a fractional count.
  auto short_row = Parse("aws,us-east-1,,p4d,A100,8,,96,1152,32.77,,,\n");
  ASSERT_FALSE(short_row.ok());
  EXPECT_EQ(short_row.status().message().rfind("fixture.csv:2: expected 14 fields as in the header, got 13", 0), 0u)
      << short_row.status().message();
  auto long_row = Parse("aws,us-east-1,,p4d,A100,8,,96,1152,32.77,,,,,\naws,us-east-1,,p4d,A100,8,,96,1152,32.77,,,,,,\n");
  ASSERT_FALSE(long_row.ok());
  EXPECT_NE(long_row.status().message().find("got 15"), std::string::npos) << long_row.status().message();
  auto none = Parse("aws,us-east-1,,c5,A100,0,,96,1152,3.0,,,,\n");
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_NE(Warning(*none, "no GPU"), nullptr);
}

TEST_F(OfferTest, ReadsTheReservedPriceColumnWhereTheCatalogHasIt) {
  // Given the current header with reserved_1y_usd_h last, expect a row's 1-year price in exact
  // micro-dollars, a blank cell as no price, and a malformed one as an error naming line and
  // column; given the header of older catalogs without the column, expect the rows to load with
  // no reserved price.
  const std::string header = std::string(kHeader).substr(0, std::string(kHeader).size() - 1) + ",reserved_1y_usd_h\n";
  auto t = ParseOffersCsv(header +
                              "aws,us-east-1,,p4d,A100,8,,96,1152,21.957642,,7.246022,estimated,2,13.921094\n"
                              "aws,us-east-1,,p3,A100,8,,64,488,24.48,,,,,\n",
                          "new.csv", gpus_);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->offers.size(), 2u);
  EXPECT_EQ(t->offers[0].reserved_1y_per_hour, 13'921'094);
  EXPECT_EQ(t->offers[0].spot_per_hour, 7'246'022);
  EXPECT_FALSE(t->offers[1].reserved_1y_per_hour.has_value());
  auto bad = ParseOffersCsv(header + "aws,us-east-1,,p4d,A100,8,,96,1152,21.95,,,,,about 14\n", "new.csv", gpus_);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "new.csv:2: reserved_1y_usd_h: expected USD per hour, got 'about 14'");
  auto old = Parse("aws,us-east-1,,p4d,A100,8,,96,1152,21.95,,,,\n");
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  ASSERT_EQ(old->offers.size(), 1u);
  EXPECT_FALSE(old->offers[0].reserved_1y_per_hour.has_value());
}

TEST_F(OfferTest, UnterminatedQuoteIsAnErrorAndLinesStayPhysicalAfterQuotedNewlines) {
  // Given a quoted instance type holding a line break, expect the bad price on the next row named
  // by its line in the file (4, not 3); given a quote never closed, expect an error naming the
  // line it opens on instead of the rest of the file read as one field.
  auto spanning = Parse("aws,us-east-1,,\"p4d\nlarge\",A100,8,,96,1152,32.77,,,,\n"
                        "aws,us-east-2,,p4d,A100,8,,96,1152,cheap,,,,\n");
  ASSERT_FALSE(spanning.ok());
  EXPECT_EQ(spanning.status().message(), "fixture.csv:4: ondemand_usd_h: expected USD per hour, got 'cheap'");
  auto open = Parse("aws,us-east-1,,p4d,A100,8,,96,1152,32.77,,,,\n"
                    "aws,\"us-east-2,,p4d,A100,8,,96,1152,32.77,,,,\n"
                    "aws,us-west-2,,p4d,A100,8,,96,1152,32.77,,,,\n");
  ASSERT_FALSE(open.ok());
  EXPECT_EQ(open.status().message(),
            "fixture.csv:3: unterminated quoted field (no closing '\"' before the end of the file)");
}

TEST_F(OfferTest, CommentLinesAfterTheHeaderAreSkipped) {
  // Given a '#' line among the rows, expect it skipped, not read as an offer with no GPU count.
  auto t = Parse("# AWS\naws,us-east-1,,p4d,A100,8,,96,1152,32.77,,,,\n# end\n");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->rows_read, 1);
  EXPECT_EQ(t->offers.size(), 1u);
}

TEST_F(OfferTest, ReadsThePricesAsOfLineAndSaysTheAge) {
  // Given a catalog that opens with comment lines, one of them "# prices_as_of: 2026-05-20", expect
  // the date kept, error lines still counted from the top of the file, and the age line computed
  // against the given day; a catalog without the line says its age is unknown.
  auto t = ParseOffersCsv(std::string("# gpu offers\n# prices_as_of: 2026-05-20\n") + kHeader +
                              "aws,us-east-1,,p4d,A100,8,,96,1152,32.77,,,,\n",
                          "dated.csv", gpus_);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->prices_as_of, "2026-05-20");
  ASSERT_EQ(t->offers.size(), 1u);
  const int64_t dec4 = *ParseIsoDate("2026-12-04");
  EXPECT_EQ(CatalogAgeDays(t->prices_as_of, dec4), 198);
  EXPECT_EQ(CatalogAgeLine(t->prices_as_of, dec4), "prices as of 2026-05-20 (198 days old)");
  EXPECT_EQ(CatalogAgeLine(t->prices_as_of, *ParseIsoDate("2026-05-21")), "prices as of 2026-05-20 (1 day old)");
  EXPECT_EQ(CatalogAgeLine(t->prices_as_of, *ParseIsoDate("2026-05-19")),
            "prices as of 2026-05-20 (dated after today)");

  auto undated = Parse("aws,us-east-1,,p4d,A100,8,,96,1152,32.77,,,,\n");
  ASSERT_TRUE(undated.ok());
  EXPECT_EQ(undated->prices_as_of, "");
  EXPECT_FALSE(CatalogAgeDays(undated->prices_as_of, dec4).has_value());
  EXPECT_EQ(CatalogAgeLine(undated->prices_as_of, dec4),
            "prices as of: age unknown (the catalog has no '# prices_as_of:' line)");

  auto bad_row = ParseOffersCsv(std::string("# prices_as_of: 2026-05-20\n") + kHeader +
                                    "aws,us-east-2,,p4d,A100,8,,96,1152,cheap,,,,\n",
                                "dated.csv", gpus_);
  ASSERT_FALSE(bad_row.ok());
  EXPECT_EQ(bad_row.status().message(), "dated.csv:3: ondemand_usd_h: expected USD per hour, got 'cheap'");
  auto bad_date = ParseOffersCsv(std::string("# prices_as_of: 2026-02-30\n") + kHeader, "dated.csv", gpus_);
  ASSERT_FALSE(bad_date.ok());
  EXPECT_EQ(bad_date.status().message(), "dated.csv:1: prices_as_of: expected a date YYYY-MM-DD, got '2026-02-30'");
}

TEST_F(OfferTest, ParsesIsoDatesAsDaysSinceTheEpoch) {
  // Given dates around the epoch and leap days, expect exact day numbers and junk refused.
  EXPECT_EQ(ParseIsoDate("1970-01-01"), 0);
  EXPECT_EQ(ParseIsoDate("2000-03-01"), 11017);
  EXPECT_EQ(*ParseIsoDate("2024-03-01") - *ParseIsoDate("2024-02-28"), 2);
  EXPECT_EQ(*ParseIsoDate("2025-03-01") - *ParseIsoDate("2025-02-28"), 1);
  EXPECT_FALSE(ParseIsoDate("2025-02-29").has_value());
  EXPECT_FALSE(ParseIsoDate("2026-13-01").has_value());
  EXPECT_FALSE(ParseIsoDate("2026-5-20").has_value());
  EXPECT_FALSE(ParseIsoDate("20260520").has_value());
}

TEST_F(OfferTest, FlagsSpotPricesFarBeyondTheUsualDiscount) {
  // Given four spot offers of one cloud and GPU at about 40 % of on-demand (60 % off, the median)
  // and one at 18 % (82 % off: under the 85 % bound but under half the median share), expect only
  // that one flagged; given a group of two whose spot prices are both 90 % off, expect both
  // flagged by the fixed 85 % bound although no median exists; a 70 %-off price in another cloud
  // stays unflagged.
  auto t = Parse(
      "gcp,us-east1,us-east1-b,a3,H100,8,,208,1872,100,,40,quoted,\n"
      "gcp,us-east4,us-east4-a,a3,H100,8,,208,1872,100,,40,quoted,\n"
      "gcp,us-west1,us-west1-a,a3,H100,8,,208,1872,100,,40,quoted,\n"
      "gcp,europe-west4,europe-west4-a,a3,H100,8,,208,1872,100,,39,quoted,\n"
      "gcp,europe-north1,europe-north1-c,a3,H100,8,,208,1872,100,,18,quoted,\n"
      "aws,eu-central-1,,p4de,A100,8,,96,1152,34.29122,,3.429122,estimated,0\n"
      "aws,ap-northeast-1,,p4de,A100,8,,96,1152,37.6223,,3.762230,estimated,0\n"
      "azure,eastus,,ND,H100,8,,96,1900,100,,30,quoted,\n");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->offers.size(), 8u);
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(t->offers[i].has(kSpotOutlier)) << i;
  EXPECT_TRUE(t->offers[4].has(kSpotOutlier));
  EXPECT_TRUE(t->offers[5].has(kSpotOutlier));
  EXPECT_TRUE(t->offers[6].has(kSpotOutlier));
  EXPECT_FALSE(t->offers[7].has(kSpotOutlier));
  // The price itself is kept: the flag ranks it, it does not hide it.
  EXPECT_EQ(t->offers[4].spot_per_hour, 18 * kMicroUsdPerUsd);
  const LoadWarning* w = Warning(*t, "spot price outlier");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->count, 3);
  EXPECT_EQ(w->example, "gcp a3 europe-north1-c spot $18.00/h vs on-demand $100.00/h (82% off; median 60% off)");
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
