// The offer table: what each cloud rents, normalised to one row per (cloud, region, zone, instance
// type, GPU model, GPU count), with on-demand and spot prices in integer micro-dollars per hour and an estimate of how
// often a spot instance is interrupted. Loaded from the CSV that scripts/make_catalog.py writes
// (data/catalog/offers.csv; data/catalog/SOURCE.md describes the columns and docs/cost.md the
// normalisation). Data defects become flags on the offer and counted warnings on the table; the
// library never prints.
//
// Thread-safety: plain values; an OfferTable is immutable after loading and may be shared.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/iso_time.h"  // ParseIsoDate: days since 1970-01-01, as CatalogAgeLine takes them
#include "common/status.h"
#include "model/gpu_catalog.h"
#include "model/types.h"

namespace gpufleet::cost {

// Money is integer micro-dollars (1 USD = 1,000,000), so prices add and compare exactly.
using MicroUsd = int64_t;
inline constexpr MicroUsd kMicroUsdPerUsd = 1'000'000;
// Parses a decimal dollar amount ("33.60609", "0.5", "12") exactly; digits past the sixth decimal
// are rounded half-up. nullopt for anything else (signs, exponents, junk).
std::optional<MicroUsd> ParseUsd(std::string_view s);
// "$1,234.57" with `decimals` (0..6) digits after the point, rounded half-up.
std::string FormatUsd(MicroUsd v, int decimals = 2);

// Defects and provenance an offer carries (bit flags).
enum OfferFlag : uint32_t {
  kSpotEstimated = 1u << 0,      // spot price derived (AWS: on-demand x advisor savings), not quoted
  kSuspectPrice = 1u << 1,       // on-demand GPU price under half of the dearest region's for the
                                 // same instance type: likely a fallback SKU, not a list price
  kSpotAtOrAboveOnDemand = 1u << 2,  // the quoted spot price was >= on-demand: spot dropped
  kHazardDefault = 1u << 3,      // no interruption data: the cloud's documented default is used
  kGpuMemFromSpecs = 1u << 4,    // the catalog row gave no GPU memory: taken from the spec table
  kSpotOutlier = 1u << 5,        // spot discount far beyond the usual for this GPU on this cloud
                                 // (LoadOptions): likely one zone's leftover or a stale estimate,
                                 // with no capacity signal; `select` ranks it last unless trusted
};

struct Offer {
  std::string cloud;          // "aws", "gcp", "azure", "lambda", "nebius", "oci", "vast"
  std::string region;
  std::string zone;           // empty where prices are region-level
  std::string instance_type;
  std::string gpu;            // canonical GpuCatalog name
  int gpus = 0;               // whole GPUs per instance
  int64_t gpu_mem_mib = 0;    // per GPU
  int64_t cpu_milli = 0;      // vCPUs x 1000
  int64_t mem_mib = 0;        // host RAM
  std::optional<MicroUsd> on_demand_per_hour;  // per instance
  std::optional<MicroUsd> spot_per_hour;       // per instance; only when spot is really offered
  // Per instance: the effective hourly rate of a 1-year reservation as the cloud publishes it (AWS:
  // standard, no upfront); none where the catalog has none (data/catalog/SOURCE.md).
  std::optional<MicroUsd> reserved_1y_per_hour;
  // Expected spot interruptions per running instance-hour (a Poisson rate); 0 without spot.
  double spot_hazard_per_hour = 0;
  std::string hazard_source;  // "aws advisor <5%", "default for gcp"
  uint32_t flags = 0;

  bool has(OfferFlag f) const { return (flags & f) != 0; }
  std::optional<MicroUsd> price(model::Market m) const {
    return m == model::Market::kSpot ? spot_per_hour : on_demand_per_hour;
  }
  // region=..., zone=..., cloud=..., geo=eu|us|asia|... (geo from the region's name; "" when the
  // name says nothing): what job constraints match against.
  model::Labels labels() const;
};

// A kind of defect met while loading, with how many rows had it and the first one.
struct LoadWarning {
  std::string kind;     // "unknown GPU model", "spot at or above on-demand", ...
  int64_t count = 0;
  std::string example;  // "offers.csv:123: azure Standard_ND96is_MI300X_v5 eastus2"
};

struct OfferTable {
  std::vector<Offer> offers;
  std::vector<LoadWarning> warnings;  // in the order first seen
  int64_t rows_read = 0;
  // "YYYY-MM-DD" from the catalog's leading "# prices_as_of: YYYY-MM-DD" line; empty when the
  // catalog has none (its age is unknown).
  std::string prices_as_of;
};

struct LoadOptions {
  // An on-demand GPU price (total minus the host VM part) below this share of the dearest region's
  // price for the same cloud and instance type is flagged kSuspectPrice.
  double suspect_price_ratio = 0.5;
  // The spot outlier rule. A spot price's share of its on-demand price (spot / on-demand) is
  // compared with the median share of the spot offers of the same cloud and GPU model; it is an
  // outlier when it is under `spot_outlier_median_ratio` times that median (a 90 % discount where
  // that cloud's usual is 67 %), or, whatever the median, when its discount is at least
  // `spot_outlier_max_discount` (the bound catches a group whose outliers are the majority).
  // The median needs `spot_outlier_min_group` offers; smaller groups use the bound alone.
  double spot_outlier_median_ratio = 0.5;
  double spot_outlier_max_discount = 0.85;
  int spot_outlier_min_group = 3;
};

// Reads the offer CSV (header: cloud,region,zone,instance_type,accelerator,gpu_count,gpu_mem_mib,
// vcpus,ram_gib,ondemand_usd_h,host_usd_h,spot_usd_h,spot_kind,aws_interruption_bucket,
// reserved_1y_usd_h; columns found by name, extra columns ignored; reserved_1y_usd_h may be absent,
// as in catalogs written before it was added). Lines that start with '#' are comments (skipped anywhere);
// "# prices_as_of: YYYY-MM-DD" among them dates the prices (a malformed date is an error). Rows with a GPU the catalog does not know, a fractional
// GPU count or no price are kept out and counted in `warnings`. A malformed number is an error
// naming file, line and column; so is a second row for the same offer (cloud, region, zone,
// instance type, canonical GPU model and GPU count), naming both lines.
Result<OfferTable> LoadOffersCsv(const std::string& path, const model::GpuCatalog& gpus,
                                 const LoadOptions& options = {});
Result<OfferTable> ParseOffersCsv(std::string_view text, const std::string& source_name,
                                  const model::GpuCatalog& gpus, const LoadOptions& options = {});

// "prices as of 2026-05-20 (198 days old)", "... (dated after today)", or "prices as of: age
// unknown (the catalog has no '# prices_as_of:' line)" when `prices_as_of` is empty. `today` is
// days since 1970-01-01 (the caller's clock).
std::string CatalogAgeLine(const std::string& prices_as_of, int64_t today);
// Whole days from `prices_as_of` to `today`; nullopt when the date is missing or malformed.
std::optional<int64_t> CatalogAgeDays(const std::string& prices_as_of, int64_t today);

// The spot interruption model (docs/cost.md, "Spot interruptions"). AWS Spot Advisor bucket 0..4
// ("<5%" .. ">20%" of instances interrupted over the trailing month) -> a rate per hour:
// -ln(1 - p) / 24 h with p the bucket's midpoint (30% for ">20%"), i.e. the share is taken over a
// one-day exposure, the typical life of a GPU spot instance. nullopt for a bucket outside 0..4.
std::optional<double> AwsBucketHazardPerHour(int bucket);
// The rate used where a cloud publishes no interruption data.
double DefaultSpotHazardPerHour(std::string_view cloud);

}  // namespace gpufleet::cost
