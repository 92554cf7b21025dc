// Offer selection by expected cost to complete.
//
// A job says how long it runs on a reference GPU ("10h on A100"), its workload class and, where
// it has them, its measured step times per GPU model. For every offer that can hold the job (its
// GPU model, GPUs per node, region, constraints, market, hourly cap), the selector estimates
//   runtime   = reference runtime / speed(reference GPU -> offer GPU)
//               with speed from model::GpuSpeeds::Lookup: the job's step times (`measured`), else
//               the MLPerf table for the class (`mlperf:<class>`), else the datasheet model with
//               the job's profile (`datasheet`); each candidate says which
//   wall time = runtime on on-demand; on spot, the expected time to finish under Poisson
//               interruptions at rate nodes x hazard, with work lost back to the last checkpoint
//               and a restart overhead after each interruption (docs/cost.md has the formula)
//   cost      = job price per hour (instance price x nodes) x expected wall time
// and ranks by expected cost. It also reports what the "cheapest $/h" rule (what a price-only
// ranking such as SkyPilot's picks) would have chosen and what that would cost.
//
// Design: a pure function of the offer table and the job; no clock, no I/O. Spot prices the loader
// flagged as outliers (kSpotOutlier: a discount far beyond the usual, with no capacity signal) rank
// after every other candidate unless the job trusts them; within each part, ties break by
// expected wall time, then $/h, then (cloud, region, zone, instance type, market) in string order,
// so the ranking is deterministic. Money is integer micro-dollars: the one product of a price and
// an expected duration is rounded once per term, never accumulated in floating point.
//
// Thread-safety: stateless; call from any thread.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "cost/offer.h"
#include "model/gpu_catalog.h"
#include "model/gpu_speeds.h"
#include "model/types.h"

namespace gpufleet::cost {

// What the cost layer needs to know about a job.
struct CostJob {
  int gpus_per_node = 1;
  int nodes = 1;
  std::vector<std::string> gpu_types;  // allowed GPU models (any name the catalog knows); empty = any
  std::string reference_gpu;           // the GPU the estimate was measured on
  Duration reference_runtime;          // > 0
  model::Boundness profile = model::Boundness::kBalanced;  // for the datasheet fallback only
  std::string workload_class = model::kDefaultWorkloadClass;  // a class of the speed table
  // Measured speeds that override the table: the job's step times per GPU model, and the hook
  // for a node burn-in's measured speed (model::SpeedOverrides::burn_in_vs_a100; empty today).
  model::SpeedOverrides speed_overrides;
  Duration checkpoint_interval;        // zero: never checkpoints (an interruption loses everything)
  Duration restart_overhead = Duration::Minutes(5);  // per interruption: reboot, reload, warm up
  model::MarketPreference market = model::MarketPreference::kAny;
  std::optional<Duration> deadline;             // on the expected wall time
  std::optional<MicroUsd> max_hourly_cost;      // for the whole job (all nodes)
  std::vector<std::string> regions;             // globs ("europe-*"); empty = any
  std::vector<std::string> clouds;              // empty = any
  model::Labels constraints;                    // offer labels required (geo=eu, cloud=gcp, ...)
  bool allow_suspect_prices = false;            // offers flagged kSuspectPrice are skipped unless set
  bool trust_spot_outliers = false;             // rank kSpotOutlier spot prices like any other
};

struct Candidate {
  Offer offer;
  model::Market market = model::Market::kOnDemand;
  MicroUsd price_per_hour = 0;  // for the whole job: instance price x nodes
  double speed = 1;             // relative to the reference GPU
  std::string speed_source;     // "measured", "mlperf:<class>", "datasheet", ... (model::SpeedEstimate)
  std::string speed_confidence; // the speed table's confidence; empty when no table row was used
  Duration runtime;             // uninterrupted compute time on this GPU
  Duration expected_wall;       // runtime + expected lost work + expected restarts
  double expected_interruptions = 0;
  MicroUsd compute_cost = 0;    // price x runtime
  MicroUsd rework_cost = 0;     // price x expected lost work
  MicroUsd restart_cost = 0;    // price x expected restart time
  MicroUsd expected_cost = 0;   // the sum: what the ranking uses
  int idle_gpus_per_node = 0;   // GPUs paid for but unused (instance larger than the node part)
  bool meets_deadline = true;
  // A spot price flagged kSpotOutlier that the job does not trust: ranked after all others.
  bool untrusted_outlier = false;

  // "2 x gcp a3-highgpu-8g (H100) spot europe-west4-a"
  std::string Describe() const;
};

struct Selection {
  // Feasible candidates, cheapest expected cost first; untrusted spot outliers after all others.
  std::vector<Candidate> ranked;
  // What the cheapest-$/h rule would choose among offers passing the same static filters (GPU,
  // shape, region, cloud, constraints, market, hourly cap; not the deadline, which that rule cannot
  // judge without a runtime model), untrusted spot outliers last as above. nullopt when nothing
  // passes them.
  std::optional<Candidate> cheapest_hourly;
  // cheapest_hourly's expected cost minus the winner's: >= 0 unless the cheapest-$/h pick misses
  // the deadline (then it may be cheaper but is not feasible). 0 when either is missing.
  MicroUsd saving_vs_cheapest_hourly = 0;
  // Why offers were left out: reason -> number of (offer, market) pairs.
  std::map<std::string, int64_t> rejected;
  // One line on why the winner won (or why there is none).
  std::string reason;
};

// Expected wall time to finish `runtime` of work under interruptions at `hazard_per_hour`, with a
// checkpoint every `checkpoint_interval` (zero: none) and `restart` lost after each interruption.
// Exposed for tests and the docs. With zero hazard it returns `runtime`.
struct SpotEstimate {
  double wall_hours = 0;
  double interruptions = 0;
  double restart_hours = 0;  // part of wall_hours spent restarting
};
SpotEstimate ExpectedSpotTime(Duration runtime, double hazard_per_hour, Duration checkpoint_interval,
                              Duration restart);

// Ranks the offers for `job`, with speeds from `speeds` (an empty table: datasheet speeds only).
// InvalidArgument when the job itself is wrong (no GPUs, no runtime, an unknown reference GPU, GPU
// type or workload class, a cloud, region glob or constraint the catalog has no offer for:
// cost/offer_names.h); an empty `ranked` with `rejected` filled when nothing fits.
Result<Selection> SelectOffers(const OfferTable& table, const CostJob& job, const model::GpuCatalog& gpus,
                               const model::GpuSpeeds& speeds);

}  // namespace gpufleet::cost
