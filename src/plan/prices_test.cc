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
  // Given the shipped offer catalog, expect A100 and H100 priced with on-demand above reserved
  // and spot below on-demand.
  auto table = cost::LoadOffersCsv(std::string(GPUFLEET_SOURCE_DIR) + "/data/catalog/offers.csv",
                                   model::GpuCatalog::BuiltIn());
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  for (const char* gpu : {"A100", "H100"}) {
    auto p = PricesFromCatalog(*table, gpu, ReservedTerm::kOneYear);
    ASSERT_TRUE(p.ok()) << gpu << ": " << p.status().ToString();
    EXPECT_GT(*p->on_demand, p->reserved) << gpu;
    ASSERT_TRUE(p->spot.has_value()) << gpu;
    EXPECT_LT(*p->spot, *p->on_demand) << gpu;
    EXPECT_FALSE(p->on_demand_offer.empty());
  }
}

}  // namespace
}  // namespace gpufleet::plan
