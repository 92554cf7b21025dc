// The capacity planner: how many GPUs of each model to reserve (paid every hour, used or not) and
// how much on-demand and spot to burst to, so that the expected cost over a planning window is
// least while the queueing-delay SLO holds. A mixed-integer program solved with COIN-OR CBC; its
// LP relaxation (CLP) is solved first and reported as a lower bound.
//
// Model, per GPU model m and hour h = 0..H-1 of the window, with d_h the demand in GPU-hours
// arriving in hour h (demand.h, forecast.h):
//   k_m      integer >= 0    reserved blocks; R_m = reserve_multiple x k_m reserved GPUs
//   U_h      >= 0            reserved GPU-hours used,   U_h <= R_m
//   O_h      >= 0            on-demand GPU-hours        (0 where on-demand is not offered)
//   S_h      >= 0            useful spot GPU-hours      (0 where spot is not offered)
//   B_h      >= 0            backlog: work that arrived and is not yet served at the end of h
//   L_h      >= 0            late excess, L_h >= B_h - (d_{h-W+1} + ... + d_h)
// Balance:    B_{h-1} + d_h = U_h + O_h + S_h + B_h  (cyclic: B_{-1} = B_{H-1}, the window is a
//             repeating week; otherwise B_{-1} = 0 and B_{H-1} = 0, all work done by the end).
// SLO:        work is served first come, first served, so what is still queued at the end of h
//             beyond the last W hours' arrivals has waited longer than W = floor(slo_wait in
//             hours); L_h is that amount. slo_quantile = 1: L_h = 0 (no work waits longer).
//             slo_quantile = q < 1: sum_h L_h <= (1 - q) sum_h d_h. sum L counts each late
//             GPU-hour once per hour it stays late, so it bounds the late volume from above: a
//             plan that meets this meets "at most 1 - q of the GPU-hours wait longer than W"
//             (conservative, never optimistic). Always: B_h <= sum of the last max_wait hours'
//             arrivals (no work waits longer than max_wait).
// Spot:       S_h <= spot_max_share x (B_{h-1} + d_h): only that share of the work tolerates
//             preemption. Each useful spot hour costs (1 + rework) spot hours, rework =
//             interruptions/h x (checkpoint_interval / 2 + restart_overhead) in hours. Where spot
//             is out of capacity a share u of the time (GpuPrices::spot_unavailable_fraction), a
//             useful spot hour costs (1 - u) x spot x (1 + rework) + u x on-demand: that share
//             falls back to on-demand.
// Cost:       sum_m R_m x reserved x H + sum_h O_h x on_demand + S_h x spot x (1 + rework),
//             plus 1e-6 $ per backlogged GPU-hour so that idle capacity is not left idle while
//             work waits (it changes no cost by a cent on any sane window).
// Substitution (PlanOptions::substitutions): where model a's work may also run on model b, b's
//             GPUs serve it through their own columns MU/MO/MS_{a->b,h} (b GPU-hours; MU counts
//             against b's reservation, MO and MS are paid at b's prices, MS only where a's work
//             may use spot), and a's balance and spot rows count r x (MU + MO + MS), r = the
//             GPU-hours of a's work that one GPU-hour of b does (the speed ratio b / a). Without
//             substitutions the program is exactly the one above.
// Hours are the granularity: work served within the hour it arrives waits zero hours.
//
// Thread-safety: free functions over values; each call builds its own solver.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "cost/offer.h"
#include "plan/prices.h"

namespace gpufleet::plan {

struct ModelInput {
  std::string gpu_model;
  std::vector<double> demand;  // GPU-hours per hour; every model's the same length
  GpuPrices prices;            // on_demand / spot absent: that market is not used
  int reserve_multiple = 1;    // GPUs per reserved node: reserve whole nodes
  std::optional<int64_t> max_reserved;    // GPUs; a quota or a budget cap
  std::optional<int64_t> fixed_reserved;  // evaluate this reservation (baselines) instead of choosing
};

// Work of model `from` that may also run on model `to` (names of ModelInput::gpu_model).
struct Substitution {
  std::string from, to;
  double work_per_gpu_hour = 1;  // GPU-hours of `from`'s work one GPU-hour of `to` does (> 0)
};

struct PlanOptions {
  Duration slo_wait = Duration::Hours(1);
  double slo_quantile = 0.95;               // in (0, 1]; 1 = every GPU-hour within slo_wait
  Duration max_wait = Duration::Hours(24);  // hard cap on any wait (>= slo_wait)
  double spot_max_share = 0.5;              // of the work queued in an hour, in [0, 1]
  Duration checkpoint_interval = Duration::Minutes(30);
  Duration restart_overhead = Duration::Minutes(5);
  bool cyclic = true;
  double time_limit_s = 60;                 // CBC; the best plan found by then is returned
  std::vector<Substitution> substitutions;  // none: every model's work runs on its own model
};

struct ModelPlan {
  std::string gpu_model;
  int64_t reserved_gpus = 0;
  // Per hour, GPU-hours (spot: useful hours; the bought ones are (1 + spot_rework) x that).
  std::vector<double> reserved_used, on_demand, spot, backlog;
  double late_gpu_hours = 0;  // sum_h L_h
  double spot_rework = 0;
  cost::MicroUsd reserved_cost = 0, on_demand_cost = 0, spot_cost = 0;
  double reserved_utilisation = 0;  // used / paid reserved GPU-hours; 0 without reservation
  // Substitution: the capacity series and costs above include this model's GPUs serving other
  // models' work; `foreign_gpu_hours` is that part (GPU-hours of this model). `moved_to`: this
  // model's work served on another model, in GPU-hours of this model's own work, by model.
  double foreign_gpu_hours = 0;
  std::vector<std::pair<std::string, double>> moved_to;
};

struct Plan {
  std::vector<ModelPlan> models;       // in input order
  int64_t hours = 0;
  cost::MicroUsd total_cost = 0;       // of the integer plan
  cost::MicroUsd lp_bound = 0;         // LP relaxation: no plan costs less
  double gap = 0;                      // (total_cost - lp_bound) / total_cost
  bool proven_optimal = false;         // false: CBC hit the time limit with a feasible plan
};

// InvalidArgument for malformed input (no models, lengths differ, negative or non-finite
// demand, options out of range); FailedPrecondition when no plan meets the SLO with the markets
// and caps given (naming the binding limits); Internal when the solver fails otherwise.
Result<Plan> SolvePlan(const std::vector<ModelInput>& models, const PlanOptions& options);

struct FrontierPoint {
  Duration slo_wait;
  Result<Plan> plan;  // an SLO too tight for the caps is a failed point, not a failed frontier
};
// One plan per SLO wait (other options as given): cost against SLO.
std::vector<FrontierPoint> SolveFrontier(const std::vector<ModelInput>& models, const PlanOptions& options,
                                         const std::vector<Duration>& slo_waits);

}  // namespace gpufleet::plan
