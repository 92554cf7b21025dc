#include "plan/prices.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace gpufleet::plan {
namespace {

std::string Describe(const cost::Offer& o) {
  std::string s = o.cloud + " " + o.region;
  if (!o.zone.empty()) s += "/" + o.zone;
  return s + " " + o.instance_type;
}

// Per-GPU price, rounded half-up to a whole micro-dollar.
cost::MicroUsd PerGpu(cost::MicroUsd instance_price, int gpus) { return (instance_price + gpus / 2) / gpus; }

}  // namespace

std::string ReservedSourceText(const GpuPrices& p) {
  if (p.reserved_source == ReservedSource::kCatalog) {
    // The catalog's column is AWS's standard no-upfront rate (data/catalog/SOURCE.md); another
    // cloud's, should a catalog carry one, is named by its cloud.
    return p.reserved_cloud == "aws" ? "catalog (AWS 1-year no-upfront)" : "catalog (" + p.reserved_cloud + " 1-year)";
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "ratio %.2f of on-demand", p.reserved_ratio);
  return buf;
}

std::vector<PriceLocation> PriceLocations(const cost::OfferTable& offers) {
  std::vector<PriceLocation> out;
  for (const cost::Offer& o : offers.offers) {
    PriceLocation l{o.cloud, o.region};
    if (std::find(out.begin(), out.end(), l) == out.end()) out.push_back(std::move(l));
  }
  std::sort(out.begin(), out.end(), [](const PriceLocation& a, const PriceLocation& b) {
    return a.cloud != b.cloud ? a.cloud < b.cloud : a.region < b.region;
  });
  return out;
}

cost::OfferTable OffersAt(const cost::OfferTable& offers, const PriceLocation& where) {
  cost::OfferTable t;
  t.rows_read = offers.rows_read;
  for (const cost::Offer& o : offers.offers) {
    if (o.cloud == where.cloud && o.region == where.region) t.offers.push_back(o);
  }
  return t;
}

Result<GpuPrices> PricesFromCatalog(const cost::OfferTable& offers, const std::string& gpu_model,
                                    ReservedTerm term, const ReservedRatios& ratios) {
  const double ratio = term == ReservedTerm::kOneYear ? ratios.one_year : ratios.three_year;
  if (!(ratio > 0 && ratio <= 1)) {
    return Status::InvalidArgument("reserved price ratio must be in (0, 1], got " + std::to_string(ratio));
  }
  GpuPrices p;
  p.gpu_model = gpu_model;
  std::optional<cost::MicroUsd> suspect_od;
  std::string suspect_offer;
  for (const cost::Offer& o : offers.offers) {
    if (o.gpu != gpu_model || o.gpus <= 0) continue;
    if (o.on_demand_per_hour) {
      const cost::MicroUsd per_gpu = PerGpu(*o.on_demand_per_hour, o.gpus);
      auto& best = o.has(cost::kSuspectPrice) ? suspect_od : p.on_demand;
      std::string& where = o.has(cost::kSuspectPrice) ? suspect_offer : p.on_demand_offer;
      if (!best || per_gpu < *best) {
        best = per_gpu;
        where = Describe(o);
      }
    }
    if (o.spot_per_hour && o.has(cost::kSpotOutlier)) {
      // Too good to plan on: often one zone's leftover or a stale estimate with no capacity behind
      // it. Kept for the report, never priced.
      const cost::MicroUsd per_gpu = PerGpu(*o.spot_per_hour, o.gpus);
      if (!p.spot_outlier_left_out || per_gpu < *p.spot_outlier_left_out) {
        p.spot_outlier_left_out = per_gpu;
        p.spot_outlier_offer = Describe(o);
      }
    } else if (o.spot_per_hour) {
      const cost::MicroUsd per_gpu = PerGpu(*o.spot_per_hour, o.gpus);
      if (!p.spot || per_gpu < *p.spot) {
        p.spot = per_gpu;
        p.spot_interruptions_per_hour = o.spot_hazard_per_hour;
        p.spot_offer = Describe(o);
      }
    }
  }
  if (!p.on_demand && suspect_od) {
    p.on_demand = suspect_od;
    p.on_demand_offer = suspect_offer;
  }
  if (!p.on_demand) {
    return Status::NotFound("no on-demand offer of GPU model '" + gpu_model + "' in the catalog");
  }
  if (term == ReservedTerm::kOneYear && ratios.catalog_one_year) {
    // The cheapest published 1-year price per GPU; the on-demand price stays the market's cheapest,
    // which may be another instance type.
    for (const cost::Offer& o : offers.offers) {
      if (o.gpu != gpu_model || o.gpus <= 0 || !o.reserved_1y_per_hour) continue;
      const cost::MicroUsd per_gpu = PerGpu(*o.reserved_1y_per_hour, o.gpus);
      if (p.reserved_source != ReservedSource::kCatalog || per_gpu < p.reserved) {
        p.reserved = per_gpu;
        p.reserved_source = ReservedSource::kCatalog;
        p.reserved_offer = Describe(o);
        p.reserved_cloud = o.cloud;
      }
    }
  }
  if (p.reserved_source == ReservedSource::kCatalog) {
    p.reserved_ratio = static_cast<double>(p.reserved) / static_cast<double>(*p.on_demand);
  } else {
    p.reserved = std::llround(static_cast<double>(*p.on_demand) * ratio);
    p.reserved_ratio = ratio;
  }
  return p;
}

}  // namespace gpufleet::plan
