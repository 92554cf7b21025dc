// Prices per GPU-hour for the planner, by GPU model and market, taken from the offer catalog.
//
// On-demand and spot: the cheapest offer per GPU (instance price / GPUs per instance) among the
// catalog's offers of that model, on-demand skipping prices flagged kSuspectPrice (likely fallback
// SKUs, cost/offer.h) unless every offer is suspect. Spot skips prices flagged kSpotOutlier (a
// discount far beyond the usual for the GPU and cloud, with no capacity signal: the loader's rule,
// the one `offers` marks and `select` ranks last), falling back to the place's ordinary spot price
// or none; the cheapest one left out is named so that reports can say so. Spot carries the
// interruption rate of the offer it came from. Cheapest per GPU, not per job: the planner buys GPU-hours, and the node
// shape only matters through ModelInput::reserve_multiple.
//
// Reserved, 1-year term: the catalog's own price where the clouds publish one (the offer CSV's
// reserved_1y_usd_h: AWS's 1-year standard no-upfront rate, data/catalog/SOURCE.md), the cheapest
// per GPU among the model's offers that carry one. Elsewhere, for the 3-year term, and whenever the
// buyer gives a ratio (ReservedRatios::catalog_one_year false), a reserved GPU-hour is the
// on-demand price x a ratio: the documented fallback. The default ratios are Google Cloud's
// resource-based committed use discounts for GPUs as published on its pricing pages (37 % off for
// 1 year, 55 % off for 3 years: ratios 0.63 and 0.45); AWS's published 1-year no-upfront rates are
// 0.62-0.70 of on-demand for GPU instances, and Azure reservations publish discounts of the same
// order. Set your own contract's ratio where you have one.
//
// One place per plan: a buyer pays one cloud in one region, so the planner prices every market of a
// plan line from offers of a single (cloud, region) (PriceLocations, OffersAt); taking the cheapest
// on-demand of one cloud and the cheapest spot of another prices a fleet nobody can buy.
//
// Thread-safety: free functions over values; no shared state.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "cost/offer.h"

namespace gpufleet::plan {

enum class ReservedTerm { kOneYear, kThreeYear };

struct ReservedRatios {
  double one_year = 0.63;
  double three_year = 0.45;
  // Price a 1-year reservation from the catalog where an offer has a reserved price; false: the
  // ratio everywhere (a buyer's own contract).
  bool catalog_one_year = true;
};

// Where a reserved price comes from.
enum class ReservedSource { kRatio, kCatalog };

struct GpuPrices {
  std::string gpu_model;
  std::string cloud, region;                  // where every price comes from, when one place
  cost::MicroUsd reserved = 0;                // per GPU-hour, paid every hour of the term
  ReservedSource reserved_source = ReservedSource::kRatio;
  double reserved_ratio = 0;                  // reserved / on-demand: the ratio used, or the catalog's
  std::string reserved_offer;                 // kCatalog: the offer it came from, for reports
  std::string reserved_cloud;                 // kCatalog: that offer's cloud
  std::optional<cost::MicroUsd> on_demand;    // per GPU-hour; none: not offered
  std::optional<cost::MicroUsd> spot;         // per GPU-hour; none: not offered
  double spot_interruptions_per_hour = 0;     // of the cheapest spot offer
  // Share of the time spot has no capacity (cost/spot_capacity.h; 0: always there). That share of
  // the spot work is priced at on-demand: it falls back after a wait.
  double spot_unavailable_fraction = 0;
  std::string on_demand_offer;                // "aws us-east-1 p4d.24xlarge", for reports
  std::string spot_offer;
  // The cheapest spot price flagged kSpotOutlier that was left out (per GPU-hour), and its offer;
  // none when no outlier was met.
  std::optional<cost::MicroUsd> spot_outlier_left_out;
  std::string spot_outlier_offer;
};

// For reports: "catalog (AWS 1-year no-upfront)" or "ratio 0.63 of on-demand".
std::string ReservedSourceText(const GpuPrices& prices);

// A cloud and one of its regions.
struct PriceLocation {
  std::string cloud;
  std::string region;
  bool operator==(const PriceLocation&) const = default;
};
// Every (cloud, region) of the table, sorted by cloud, then region.
std::vector<PriceLocation> PriceLocations(const cost::OfferTable& offers);
// The offers of the table at one place.
cost::OfferTable OffersAt(const cost::OfferTable& offers, const PriceLocation& where);

// NotFound when the table has no offer of `gpu_model` (canonical name) with an on-demand price;
// InvalidArgument for a ratio outside (0, 1].
Result<GpuPrices> PricesFromCatalog(const cost::OfferTable& offers, const std::string& gpu_model,
                                    ReservedTerm term, const ReservedRatios& ratios = {});

}  // namespace gpufleet::plan
