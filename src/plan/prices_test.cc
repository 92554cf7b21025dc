#include "plan/prices.h"

#include <gtest/gtest.h>

namespace gpufleet::plan {
namespace {

cost::Offer MakeOffer(std::string cloud, std::string type, std::string gpu, int gpus, std::optional<int64_t> od,
                      std::optional<int64_t> spot, double hazard = 0, uint32_t flags = 0) {
  cost::Offer o;
  o.cloud = std::move(cloud);
  o.region = "r1";
  o.instance_type = std::move(type);
  o.gpu = std::move(gpu);
  o.gpus = gpus;
  o.on_demand_per_hour = od;
  o.spot_per_hour = spot;
  o.spot_hazard_per_hour = hazard;
  o.flags = flags;
  return o;
}

TEST(PricesTest, CheapestPerGpuOfferSetsOnDemandAndSpotAndReservedIsARatio) {
  // Given an 8-GPU offer at $32/h ($4 per GPU) and a 1-GPU offer at $5/h, expect on-demand $4,
  // the cheaper spot per GPU with its hazard, and reserved = $4 x 0.63 for one year.
  cost::OfferTable t;
  t.offers = {MakeOffer("aws", "p4d", "A100", 8, 32'000'000, 16'000'000, 0.05),
              MakeOffer("gcp", "a2-1", "A100", 1, 5'000'000, 1'500'000, 0.1),
              MakeOffer("gcp", "h100", "H100", 1, 9'000'000, std::nullopt)};
  auto p = PricesFromCatalog(t, "A100", ReservedTerm::kOneYear);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->on_demand, 4'000'000);
  EXPECT_EQ(p->on_demand_offer, "aws r1 p4d");
  EXPECT_EQ(p->spot, 1'500'000);
  EXPECT_DOUBLE_EQ(p->spot_interruptions_per_hour, 0.1);
  EXPECT_EQ(p->reserved, 2'520'000);
  auto three = PricesFromCatalog(t, "A100", ReservedTerm::kThreeYear);
  ASSERT_TRUE(three.ok());
  EXPECT_EQ(three->reserved, 1'800'000);
  auto h100 = PricesFromCatalog(t, "H100", ReservedTerm::kOneYear);
  ASSERT_TRUE(h100.ok());
  EXPECT_FALSE(h100->spot.has_value());
}

TEST(PricesTest, SpotOutliersAreLeftOutOfTheSpotPriceAndNamed) {
  // Given at one place an 8-GPU spot price flagged spot-outlier ($8/h: $1 per GPU) and an ordinary
  // one ($16/h: $2 per GPU), expect spot priced from the ordinary one and the outlier named as left
  // out; and given the outlier alone, expect no spot price at all (as select ranks such a price
  // last, a plan does not rest on it).
  cost::OfferTable t;
  t.offers = {MakeOffer("aws", "p4d-cheap", "A100", 8, 32'000'000, 8'000'000, 0.01, cost::kSpotOutlier),
              MakeOffer("aws", "p4d", "A100", 8, 32'000'000, 16'000'000, 0.05)};
  auto p = PricesFromCatalog(t, "A100", ReservedTerm::kOneYear);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->spot, 2'000'000);
  EXPECT_EQ(p->spot_offer, "aws r1 p4d");
  EXPECT_DOUBLE_EQ(p->spot_interruptions_per_hour, 0.05);
  EXPECT_EQ(p->spot_outlier_left_out, 1'000'000);
  EXPECT_EQ(p->spot_outlier_offer, "aws r1 p4d-cheap");

  t.offers.pop_back();
  auto alone = PricesFromCatalog(t, "A100", ReservedTerm::kOneYear);
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();
  EXPECT_FALSE(alone->spot.has_value());
  EXPECT_EQ(alone->spot_outlier_offer, "aws r1 p4d-cheap");
  EXPECT_EQ(alone->on_demand, 4'000'000);
}

TEST(PricesTest, OneYearReservedComesFromTheCatalogWhereAnOfferHasIt) {
  // Given two A100 offers, an 8-GPU one at $32/h with a published 1-year price of $20/h and a
  // 4-GPU one at $18/h with $9/h, expect on-demand from the first ($4 per GPU) and the 1-year
  // price per GPU the cheapest published one ($9 / 4 = $2.25, not the ratio's $4 x 0.63 = $2.52),
  // named as the catalog's AWS price with its offer and its ratio to on-demand; and given the
  // 3-year term, a ratio ($4 x 0.45) as the fallback, for the catalog publishes no 3-year price.
  cost::OfferTable t;
  t.offers = {MakeOffer("aws", "p4d", "A100", 8, 32'000'000, std::nullopt),
              MakeOffer("aws", "p4half", "A100", 4, 18'000'000, std::nullopt)};
  t.offers[0].reserved_1y_per_hour = 20'000'000;
  t.offers[1].reserved_1y_per_hour = 9'000'000;
  auto p = PricesFromCatalog(t, "A100", ReservedTerm::kOneYear);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->on_demand, 4'000'000);
  EXPECT_EQ(p->on_demand_offer, "aws r1 p4d");
  EXPECT_EQ(p->reserved, 2'250'000);
  EXPECT_EQ(p->reserved_source, ReservedSource::kCatalog);
  EXPECT_EQ(p->reserved_offer, "aws r1 p4half");
  EXPECT_DOUBLE_EQ(p->reserved_ratio, 2.25 / 4.0);
  EXPECT_EQ(ReservedSourceText(*p), "catalog (AWS 1-year no-upfront)");
  auto three = PricesFromCatalog(t, "A100", ReservedTerm::kThreeYear);
  ASSERT_TRUE(three.ok());
  EXPECT_EQ(three->reserved, 1'800'000);
  EXPECT_EQ(three->reserved_source, ReservedSource::kRatio);
  EXPECT_EQ(ReservedSourceText(*three), "ratio 0.45 of on-demand");
}

TEST(PricesTest, AGivenRatioOverridesTheCatalogAndModelsWithoutDataFallBack) {
  // Given a catalog 1-year price and a buyer's own ratio (catalog_one_year off), expect the ratio;
  // given a model whose offers publish no reserved price, expect the default ratio.
  cost::OfferTable t;
  t.offers = {MakeOffer("aws", "p4d", "A100", 8, 32'000'000, std::nullopt),
              MakeOffer("aws", "p3", "V100", 8, 24'000'000, std::nullopt)};
  t.offers[0].reserved_1y_per_hour = 20'000'000;
  ReservedRatios own;
  own.one_year = 0.5;
  own.catalog_one_year = false;
  auto p = PricesFromCatalog(t, "A100", ReservedTerm::kOneYear, own);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->reserved, 2'000'000);
  EXPECT_EQ(p->reserved_source, ReservedSource::kRatio);
  EXPECT_EQ(ReservedSourceText(*p), "ratio 0.50 of on-demand");
  auto v100 = PricesFromCatalog(t, "V100", ReservedTerm::kOneYear);
  ASSERT_TRUE(v100.ok());
  EXPECT_EQ(v100->reserved, 1'890'000);  // $3 x 0.63
  EXPECT_EQ(v100->reserved_source, ReservedSource::kRatio);
  EXPECT_TRUE(v100->reserved_offer.empty());
}

TEST(PricesTest, SuspectPricesAreUsedOnlyWhenNothingElseIs) {
  // Given a suspect $1 offer and a normal $3 one, expect $3; with only the suspect one, $1.
  cost::OfferTable t;
  t.offers = {MakeOffer("gcp", "cheap", "A100", 1, 1'000'000, std::nullopt, 0, cost::kSuspectPrice),
              MakeOffer("aws", "normal", "A100", 1, 3'000'000, std::nullopt)};
  EXPECT_EQ(PricesFromCatalog(t, "A100", ReservedTerm::kOneYear)->on_demand, 3'000'000);
  t.offers.pop_back();
  EXPECT_EQ(PricesFromCatalog(t, "A100", ReservedTerm::kOneYear)->on_demand, 1'000'000);
}

TEST(PricesTest, UnknownModelAndBadRatioAreErrors) {
  // Given no offer of the model, expect NotFound; a ratio above 1, InvalidArgument.
  cost::OfferTable t;
  t.offers = {MakeOffer("aws", "p4d", "A100", 8, 32'000'000, std::nullopt)};
  EXPECT_EQ(PricesFromCatalog(t, "B200", ReservedTerm::kOneYear).status().code(), StatusCode::kNotFound);
  ReservedRatios bad;
  bad.one_year = 1.5;
  EXPECT_EQ(PricesFromCatalog(t, "A100", ReservedTerm::kOneYear, bad).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(PricesTest, LocationsAreEachCloudRegionOnceAndOffersAtKeepsOnlyOne) {
  // Given offers in aws r1 (two), gcp r1 and aws r0, expect the places aws r0, aws r1, gcp r1 in
  // that order, and the prices at aws r1 from its two offers only: on-demand and spot never taken
  // from another place.
  cost::OfferTable t;
  t.offers = {MakeOffer("aws", "p4d", "A100", 8, 32'000'000, 16'000'000, 0.05),
              MakeOffer("gcp", "a2", "A100", 1, 2'000'000, 500'000, 0.1),
              MakeOffer("aws", "p4de", "A100", 8, 40'000'000, 8'000'000, 0.02)};
  cost::Offer other = MakeOffer("aws", "p4d", "A100", 8, 24'000'000, std::nullopt);
  other.region = "r0";
  t.offers.push_back(other);
  const std::vector<PriceLocation> places = PriceLocations(t);
  ASSERT_EQ(places.size(), 3u);
  EXPECT_EQ(places[0], (PriceLocation{"aws", "r0"}));
  EXPECT_EQ(places[1], (PriceLocation{"aws", "r1"}));
  EXPECT_EQ(places[2], (PriceLocation{"gcp", "r1"}));
  const cost::OfferTable aws = OffersAt(t, places[1]);
  ASSERT_EQ(aws.offers.size(), 2u);
  auto p = PricesFromCatalog(aws, "A100", ReservedTerm::kOneYear);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->on_demand, 4'000'000);
  EXPECT_EQ(p->spot, 1'000'000);
  EXPECT_DOUBLE_EQ(p->spot_interruptions_per_hour, 0.02);
  EXPECT_TRUE(OffersAt(t, PriceLocation{"azure", "r1"}).offers.empty());
}

TEST(PricesTest, ShippedCatalogPricesTheCommonModels) {
  // Given the shipped offer catalog, expect A100 and H100 priced at every place that offers them
  // with on-demand above reserved and spot below on-demand, and AWS us-east-1's A100 reservation
  // at p4d.24xlarge's published 1-year rate ($13.921094 / 8 GPUs, 0.634 of on-demand).
  auto table = cost::LoadOffersCsv(std::string(GPUFLEET_SOURCE_DIR) + "/data/catalog/offers.csv",
                                   model::GpuCatalog::BuiltIn());
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  int from_catalog = 0;
  for (const PriceLocation& where : PriceLocations(*table)) {
    const cost::OfferTable here = OffersAt(*table, where);
    for (const char* gpu : {"A100", "H100"}) {
      auto p = PricesFromCatalog(here, gpu, ReservedTerm::kOneYear);
      if (!p.ok()) continue;  // not offered here
      const std::string what = std::string(gpu) + " at " + where.cloud + " " + where.region;
      EXPECT_GT(*p->on_demand, p->reserved) << what;
      if (p->spot) {
        EXPECT_LT(*p->spot, *p->on_demand) << what;
      }
      EXPECT_FALSE(p->on_demand_offer.empty()) << what;
      if (p->reserved_source == ReservedSource::kCatalog) ++from_catalog;
    }
  }
  EXPECT_GT(from_catalog, 0);
  auto us_east = PricesFromCatalog(OffersAt(*table, PriceLocation{"aws", "us-east-1"}), "A100", ReservedTerm::kOneYear);
  ASSERT_TRUE(us_east.ok()) << us_east.status().ToString();
  EXPECT_EQ(us_east->reserved, 1'740'137);
  EXPECT_EQ(us_east->reserved_source, ReservedSource::kCatalog);
  EXPECT_EQ(us_east->reserved_offer, "aws us-east-1 p4d.24xlarge");
}

}  // namespace
}  // namespace gpufleet::plan
