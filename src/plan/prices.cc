#include "plan/prices.h"

#include <algorithm>
#include <cmath>

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
    if (o.spot_per_hour) {
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
  p.reserved = std::llround(static_cast<double>(*p.on_demand) * ratio);
  return p;
}

}  // namespace gpufleet::plan
