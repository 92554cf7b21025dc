// The planner: from a job history to the cheapest reserved / on-demand / spot mix that meets a
// queueing SLO, checked by replaying the history on the planned cluster. It strings together the
// analytic parts (demand.h -> forecast.h -> prices.h -> optimizer.h) and the simulator:
//
//   1. Demand: GPU-hours per hour and GPU model from the history (BuildDemand).
//   2. Forecast: the next `horizon_hours` per model by the method that wins rolling-origin
//      cross-validation against the others and two naive baselines (forecast.h), with every
//      method's WAPE.
//   3. Prices: per GPU-hour from the catalog, restricted to the clouds and regions asked for and to offers
//      whose instance has `gpus_per_node` GPUs, so that reserved, on-demand and spot nodes all
//      have the shape the plan counts in; and from one (cloud, region) for all markets: each place
//      that prices every model is optimised (step 4) and the cheapest plan's place is chosen.
//      Reserved: the catalog's 1-year price where the place has one, else a ratio of on-demand
//      (prices.h).
//   4. Optimise: the spot share and the reservation jointly. For each spot share on a grid of
//      kSpotShareStep from 0 up to the cap `plan.spot_max_share` (a risk limit, not a target),
//      SolvePlan on the forecast (mean, or its upper band) with that share of the work
//      spot-tolerant; the cheapest plan wins (ties: the smaller share). The share is of the work
//      that may use spot: the demand of the no-spot teams and of jobs the history marks on-demand
//      (in the proportion of the history's demand per model) is kept off spot whatever the share.
//      The frontier re-solves the winner's share for other SLO waits.
//   5. Verify: sim::Simulate replays the history on candidate clusters, in parallel threads:
//        plan            the optimiser's choice: its reserved GPUs as fixed nodes (market reserved,
//                        priced at the reserved rate per node), plus autoscaled on-demand and spot
//                        offers; only its spot share of the jobs (chosen by a hash of their id, so
//                        the same jobs every run) may use spot, and those only spot; the rest, and
//                        every job of a no-spot team, run on reserved or on-demand nodes;
//        neighbours      the same with reserved +-1 and +-2 nodes of every model, and the plans of
//                        the adjacent spot shares of the grid (each with its own reservation);
//        without substitution   with --substitute: the optimiser's plan with each model's
//                        work kept on its own GPUs, replayed with each job on its own model;
//      and the baselines:
//        all on-demand   autoscaled on-demand nodes only;
//        all reserved    fixed reserved nodes enough for the history's peak hour (and its
//                        largest job), nothing rented;
//        all spot        autoscaled spot for every job, falling back to on-demand after the
//                        autoscaler's spot_fallback rules.
//      Reserved nodes are paid whole over the history's window (the optimiser pays them over its
//      window too); after it, only the reserved GPUs the draining jobs still hold are paid.
//      The recommendation is the cheapest replay, candidate or baseline, that meets the SLO (the
//      replayed wait at the SLO quantile over jobs at most the SLO wait, and every job run) and
//      keeps to the spot-share cap (so all spot is a baseline to beat only where spot is allowed). The
//      simulated numbers are what a plan is judged by; the optimiser's cost and bound are for the
//      forecast window and a fluid model, which is why its optimum alone is not trusted.
//
// Thread-safety: RunPlanner is reentrant; it starts its own worker threads for the simulations
// and joins them before returning. `progress` is called from those threads, one call at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "cost/offer.h"
#include "cost/spot_capacity.h"
#include "model/gpu_catalog.h"
#include "plan/demand.h"
#include "plan/forecast.h"
#include "plan/optimizer.h"
#include "plan/prices.h"
#include "sim/cluster_spec.h"
#include "sim/result.h"
#include "sim/trace.h"

namespace gpufleet::plan {

// The size of a planned node per GPU, in the replays (about AWS's p3/p4d/g4dn shapes).
inline constexpr int64_t kPlannedCpuMilliPerGpu = 12 * 1000;
inline constexpr int64_t kPlannedMemMibPerGpu = 128 * 1024;

// Spot shares the optimiser tries: 0, this step, twice it, ... below the cap, and the cap.
inline constexpr double kSpotShareStep = 0.25;

enum class PlanBasis {
  kForecastMean,   // expected cost: plan on the forecast
  kForecastUpper,  // cautious: plan on the forecast's upper band
};

struct VerifyOptions {
  bool enabled = true;
  std::string policy = "fifo";
  Duration boot_delay = Duration::Minutes(3);     // of rented nodes
  Duration idle_duration = Duration::Minutes(10); // a rented node idle this long is released
  uint64_t seed = 1;                              // spot interruptions
  int threads = 0;                                // 0: one per hardware thread
  bool baselines = true;
  // Also replay the plan's neighbours (reserved +-1 and +-2 nodes, the adjacent spot shares).
  bool neighbours = true;
  // Also rent one-GPU instances (priced from the catalog's cheapest one-GPU offer of the model,
  // where there is one): the autoscaler rents a whole node per job, so without them a one-GPU job
  // rents an 8-GPU node that later jobs keep busy, and burst capacity is hardly ever released.
  bool single_gpu_nodes = false;
  // Spot capacity in the replay (cost/spot_capacity.h): a spot offer alternates between having
  // capacity and not, with the measured means for its node size; a rent without capacity tries
  // the next offer. Empty: spot capacity is always there.
  std::vector<cost::SpotCapacity> spot_capacity;
};

struct PlannerOptions {
  // GPU models to plan for (catalog names or aliases); empty: every model the history asks for.
  // Jobs of other models are left out of demand and replay, and counted.
  std::vector<std::string> gpu_models;
  std::string default_gpu_model;    // for jobs whose trace names none; required if any does
  std::string reference_gpu_model;  // the model the trace's run times were measured on; empty:
                                    // the default model, else the first planned model
  int64_t horizon_hours = kHoursPerWeek;
  ForecastOptions forecast;
  PlanBasis basis = PlanBasis::kForecastMean;
  ReservedTerm term = ReservedTerm::kOneYear;
  ReservedRatios ratios;
  std::vector<std::string> regions;  // catalog regions to price from; empty: all
  std::vector<std::string> clouds;   // catalog clouds ("aws", "gcp", ...) to price from; empty: all
  // Teams whose jobs may not use spot: their demand is served by reserved and on-demand capacity
  // only, in the optimiser and in the replay (where their jobs ask for market on-demand, as jobs
  // the history itself marks so do). Each must occur in the history (InvalidArgument otherwise).
  std::vector<std::string> no_spot_teams;
  // Substitution between GPU models: (FROM, TO), catalog names or aliases: work the history logs
  // on FROM may also run on TO. TO is planned even where the history never asks for it. The
  // optimiser may serve FROM's work on TO's GPUs, a TO GPU-hour doing the work of
  // speed(TO) / speed(FROM) FROM GPU-hours (GpuCatalog::RelativeSpeed, balanced: the speeds the
  // replay runs at), and the replay lets FROM's jobs run on TO's nodes. With substitute_any,
  // every planned model's work may run on every other planned model with at least its GPU memory.
  std::vector<std::pair<std::string, std::string>> substitutes;
  bool substitute_any = false;
  // The part of the history to plan from and replay: jobs submitted in [from, to); demand is
  // counted over exactly that window (a trace's ramp-up and its cut-off tail are not demand).
  std::optional<Time> from;
  std::optional<Time> to;
  int gpus_per_node = 8;             // reserved blocks and rented nodes
  // SLO, checkpoint interval, solver time limit; spot_max_share is the cap of the spot share the
  // optimiser may choose (0: no spot).
  PlanOptions plan;
  std::vector<Duration> frontier_waits;  // SLO waits of the cost-vs-SLO curve; empty: none
  VerifyOptions verify;
  // Called with (simulated jobs done, total) over all the verification runs.
  std::function<void(int64_t, int64_t)> progress;
};

struct ModelReport {
  std::string gpu_model;
  GpuPrices prices;                        // per GPU-hour
  std::optional<GpuPrices> single_gpu_prices;  // of one-GPU instances, for rented burst nodes
  std::optional<ForecastError> backtest;   // the chosen method's, cross-validated; none with one week
  int64_t backtest_train_hours = 0, backtest_test_hours = 0;  // the longest fit; each fold's test
  int backtest_folds = 0;
  ForecastMethod forecast_method = ForecastMethod::kSeasonalTrend;  // chosen by cross-validation
  std::vector<MethodError> forecast_candidates;  // every method's cross-validated error
  double history_gpu_hours = 0;            // demand over the whole history
  // Of it, the demand that may not use spot (the no-spot teams' and the jobs the history marks
  // on-demand); the optimiser keeps this share of the planned demand off spot.
  double no_spot_gpu_hours = 0;
  double no_spot_team_gpu_hours = 0;       // of which the no-spot teams'
  double peak_gpu_hours_per_hour = 0;      // its busiest hour
  int max_job_gpus = 0;                    // the largest job of this model
  std::vector<double> planned_demand;      // the series the optimiser saw (horizon hours)
  ModelPlan plan;
  int64_t reserved_nodes = 0;              // plan.reserved_gpus / gpus_per_node
  // Models whose work this model's GPUs may take (substitution), with the FROM GPU-hours of work
  // one GPU-hour of this model does.
  std::vector<std::pair<std::string, double>> substitutes_for;
};

// One spot share the optimiser tried, and its plan (per model), or why there is none.
struct SpotShareOption {
  double share = 0;
  Result<Plan> plan;
};

// One (cloud, region) that prices every planned model, and the optimiser's plan there (the
// cheapest over the spot shares), or why there is none.
struct LocationOption {
  std::string cloud, region;
  std::vector<GpuPrices> prices;  // per model, in report order
  Result<Plan> plan;
  double spot_share = 0;
};

enum class ScenarioKind {
  kCandidate,  // the optimiser's plan or one of its neighbours
  kBaseline,   // a simple alternative a buyer could choose without a planner
};

// One replay of the history on one cluster.
struct Scenario {
  // "plan", "plan, reserved +1", "plan at spot share 50 %", "all on-demand", "all reserved (peak)",
  // "all spot (on-demand fallback)"
  std::string name;
  ScenarioKind kind = ScenarioKind::kCandidate;
  sim::ClusterSpec cluster;
  int64_t reserved_nodes = 0;       // fixed nodes with market reserved
  double spot_share = 0;            // planned share of the work on spot (candidates)
  double spot_job_share = 0;        // of the jobs allowed to use spot
  sim::Summary summary;
  double cost_ratio_to_on_demand = 0;  // summary.cost_usd / the all-on-demand run's; 0 without it
  // The replayed queueing wait at the SLO quantile over the jobs that started (nearest rank, as
  // sim::Summary's percentiles), and whether the SLO is met: that wait at most the SLO wait and
  // every job started.
  double slo_wait_s = 0;
  bool meets_slo = false;
  // Whether it keeps to the caps the user set: its spot share at most plan.spot_max_share (a risk
  // limit). A replay outside them is shown, never recommended.
  bool within_caps = true;
};

struct PlannerReport {
  Time history_start;
  int64_t history_hours = 0;
  Time forecast_start;
  int64_t horizon_hours = 0;
  int64_t jobs = 0;           // in the history
  int64_t jobs_left_out = 0;  // of models not planned for
  int64_t jobs_outside_window = 0;  // submitted before `from` or at or after `to`
  // Jobs asking for more CPUs or memory per node than a planned node has (12 vCPUs and 128 GiB
  // per GPU): no replay could run them, so they are left out, the first named.
  int64_t jobs_too_large = 0;
  std::string first_too_large;  // "ID (120 vCPUs, 64 GiB per node)"
  std::vector<std::string> no_spot_teams;  // as asked, in the order given
  int64_t no_spot_team_jobs = 0;    // planned jobs of those teams
  int64_t marked_no_spot_jobs = 0;  // other planned jobs the history marks market on-demand
  int gpus_per_node = 0;
  std::vector<ModelReport> models;
  // Every place priced, and the chosen one (the cheapest plan): all of the plan's prices come
  // from it.
  std::vector<LocationOption> locations;
  size_t location = 0;
  Plan plan;                  // the optimiser's choice: totals, LP bound, gap
  double spot_share = 0;      // the spot share of that plan
  std::vector<SpotShareOption> spot_shares;  // every share tried, ascending
  std::vector<FrontierPoint> frontier;
  // With substitution: the optimiser's plan with every model's work kept on its own model, and
  // its spot share, for comparison (replayed as "plan without substitution").
  std::optional<Plan> plan_without_substitution;
  double spot_share_without_substitution = 0;
  // The plan first, then its neighbours, then the baselines; empty if not verified.
  std::vector<Scenario> verification;
  // Into `verification`: the cheapest replay that meets the SLO within the caps; none when none
  // does (or not verified).
  std::optional<size_t> recommended;
};

// InvalidArgument for bad options or a history under one week; NotFound for a model the catalog
// does not price (with the regions and node size asked for); FailedPrecondition when no plan
// meets the SLO; a simulation's error as it comes.
Result<PlannerReport> RunPlanner(const std::vector<sim::TraceJob>& jobs, const cost::OfferTable& offers,
                                 const model::GpuCatalog& catalog, const PlannerOptions& options);

// The clusters of the replay, for tests and for other front ends: each model's `reserved_nodes`
// as fixed reserved nodes, its on-demand offer, and its spot offer when `with_spot`.
sim::ClusterSpec PlannedCluster(const std::vector<ModelReport>& models, int gpus_per_node,
                                const VerifyOptions& verify, bool with_spot);

// The replayed wait (seconds) at `quantile` of the jobs that started, nearest rank; 0 if none.
double ReplayedWait(const sim::SimResult& result, double quantile);

// Charts of a report as (file name, SVG): demand-<model>.svg (forecast and its band against the
// planned reserved capacity over the horizon), cost-by-market.svg (simulated cost of the plan and
// the baselines, stacked by market; the optimiser's costs when not verified) and
// cost-vs-slo.svg (when the frontier has two or more points that could be met).
Result<std::vector<std::pair<std::string, std::string>>> RenderPlannerCharts(const PlannerReport& report);

}  // namespace gpufleet::plan
