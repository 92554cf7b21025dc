#include "cost/offer_names.h"

#include <gtest/gtest.h>

#include <string>

namespace gpufleet::cost {
namespace {

Offer At(std::string cloud, std::string region, std::string zone = "") {
  Offer o;
  o.cloud = std::move(cloud);
  o.region = std::move(region);
  o.zone = std::move(zone);
  o.instance_type = "x";
  o.gpu = "A100";
  o.gpus = 1;
  return o;
}

class OfferNamesTest : public ::testing::Test {
 protected:
  OfferTable table_ = [] {
    OfferTable t;
    t.offers = {At("aws", "us-east-1"), At("aws", "us-west-2"), At("aws", "ap-northeast-1"),
                At("aws", "ap-northeast-2"), At("gcp", "europe-west4", "europe-west4-a"),
                At("azure", "eastus")};
    return t;
  }();
};

std::string Message(const Status& s) { return s.ok() ? "(ok)" : s.message(); }

TEST_F(OfferNamesTest, UnknownCloudNamesTheNearestAndTheKnownOnes) {
  // Given a catalog on aws, azure and gcp, expect the clouds it has to pass and 'awz' and 'AWS'
  // to be errors suggesting aws and listing all three.
  EXPECT_TRUE(CheckCloud(table_, "gcp").ok());
  EXPECT_EQ(Message(CheckCloud(table_, "awz")),
            "the catalog has no cloud 'awz' (did you mean 'aws'?); it has aws, azure, gcp");
  EXPECT_EQ(Message(CheckCloud(table_, "AWS")),
            "the catalog has no cloud 'AWS' (did you mean 'aws'?); it has aws, azure, gcp");
  EXPECT_EQ(Message(CheckCloud(table_, "mars")), "the catalog has no cloud 'mars'; it has aws, azure, gcp");
}

TEST_F(OfferNamesTest, RegionPatternsMustMatchARegionOrZone) {
  // Given regions and one zone, expect names, zones and globs that match to pass; a typo to
  // suggest the region; a glob that matches nothing to say so and suggest a near glob; a name
  // near nothing to show how each cloud names its regions.
  EXPECT_TRUE(CheckRegionPattern(table_, "us-east-1").ok());
  EXPECT_TRUE(CheckRegionPattern(table_, "europe-west4-a").ok());
  EXPECT_TRUE(CheckRegionPattern(table_, "ap-*").ok());
  EXPECT_EQ(Message(CheckRegionPattern(table_, "us-est-1")),
            "the catalog has no region or zone 'us-est-1' (did you mean 'us-east-1' or 'us-west-2'?)");
  EXPECT_EQ(Message(CheckRegionPattern(table_, "eurpoe-*")),
            "the pattern 'eurpoe-*' matches no region or zone of the catalog (did you mean 'europe-*'?)");
  EXPECT_EQ(Message(CheckRegionPattern(table_, "mars-1")),
            "the catalog has no region or zone 'mars-1'; its clouds name regions like aws 'ap-northeast-1', "
            "azure 'eastus', gcp 'europe-west4' (globs such as 'europe-*' match regions and zones)");
  EXPECT_EQ(Message(CheckRegionPattern(table_, "mars-*")).rfind("the pattern 'mars-*' matches no region or zone", 0),
            0u);
}

TEST_F(OfferNamesTest, PlanRegionsAreRegionsNotZones) {
  // Given plan's exact regions, expect a region to pass, a zone to be refused naming its region,
  // and a typo to suggest the regions one edit away.
  EXPECT_TRUE(CheckRegion(table_, "eastus").ok());
  EXPECT_EQ(Message(CheckRegion(table_, "europe-west4-a")),
            "'europe-west4-a' is a zone of europe-west4; give its region, 'europe-west4'");
  EXPECT_EQ(Message(CheckRegion(table_, "ap-northeast-3")),
            "the catalog has no region 'ap-northeast-3' (did you mean 'ap-northeast-1' or 'ap-northeast-2'?)");
}

TEST_F(OfferNamesTest, ConstraintLabelsAndValuesMustExist) {
  // Given offers labelled cloud, region, zone and geo, expect geo=eu and a glob to pass, geo=EU
  // to suggest eu and list the geos, and an unknown label to list the labels offers have.
  EXPECT_TRUE(CheckLabel(table_, "geo", "eu").ok());
  EXPECT_TRUE(CheckLabel(table_, "region", "us-*").ok());
  EXPECT_EQ(Message(CheckLabel(table_, "geo", "EU")), "no offer has geo 'EU' (did you mean 'eu'?); geo is one of asia, eu, us");
  EXPECT_EQ(Message(CheckLabel(table_, "gep", "eu")),
            "no offer has the label 'gep' (did you mean 'geo'?); offers have cloud, geo, region, zone");
  EXPECT_EQ(Message(CheckLabel(table_, "geo", "mars*")), "the pattern 'mars*' matches no offer's geo; geo is one of asia, eu, us");
}

}  // namespace
}  // namespace gpufleet::cost
