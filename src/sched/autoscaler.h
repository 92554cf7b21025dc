// Autoscaler: what to rent and what to release, decided from the pending queue and the pool.
//
//   Autoscaler scaler(options);
//   ScalePlan plan = scaler.Decide(input);    // input carries `now`; plan.rents, plan.releases
//   scaler.ReportRentFailed("gcp a3 europe-west4-a", now);  // a provider said no
//   if (plan.next_wakeup) ...                 // decide again then, even if nothing happens
//
// A pure policy of the scheduler core: plain values in, decisions out, no clock, no I/O. The
// simulator and the live controller run the same object; providers (static, local, exec) only
// carry the decisions out. The caller builds `RentableOffer`s from the cost layer's catalog
// (sched does not link cost).
//
// Rules, in the order a Decide applies them:
//  1. A booting node past `boot_timeout` is released (not rate-limited, not held by pool min:
//     it is no capacity) and its offer is avoided for `failed_offer_backoff`; the jobs it was
//     rented for are uncovered again and try the next-best offer in the same Decide.
//  2. Pending jobs are walked in the caller's order (queue order). A job is covered — nothing is
//     rented — when booting nodes rented for it are coming, when this object rented for it less
//     than `boot_timeout` ago and no node of that rent has been seen booting yet, or when booting capacity nobody
//     claims holds it: a one-node job fits in the GPUs a booting node (or a node rented earlier
//     in the same Decide) has left after the jobs it was rented for (best fit: packing, so eight
//     1-GPU jobs share one 8-GPU node); a gang is covered by enough untouched booting nodes and
//     idle up nodes of one zone, and when there are too few, those are kept for it (not released
//     while it waits, up to boot_timeout) and only the missing nodes are rented.
//     Never rent twice for the same job.
//  3. An uncovered job gets all the nodes its gang needs from one offer (so one zone): the offer
//     with the lowest expected cost of the job's work among offers with an allowed GPU model,
//     enough GPUs per node, an allowed market and the labels the job's constraints ask for. Expected cost per hour of reference work =
//     price per node x nodes / speed x (1 + interruptions per hour x (checkpoint interval / 2 +
//     restart overhead)), the cost layer's rule (cost/select.h) to first order: a faster GPU
//     that costs more per hour can finish for less, and a spot node that is taken back often
//     pays for the work redone. `market: on-demand` never gets spot and `market: spot` only
//     spot (placement holds them to that); a job of any market falls back to non-spot offers
//     after `spot_fallback_after_preemptions` spot preemptions or `spot_fallback_after_wait`,
//     when the pool has a non-spot offer that holds it (otherwise it goes on with spot).
//     Ties: the job's earlier-listed GPU model, shorter boot estimate, zone, name, offer index.
//  4. A rent must keep the pool within `max_nodes` and `max_gpus` (all nodes count: booting, up,
//     draining) and within `max_rents_per_minute` nodes over the last 60 s (Slurm's ResumeRate).
//     A gang is never split: when it does not fit, the job is held with a reason and later jobs
//     are still considered. A gang larger than the rate itself goes when the window is empty.
//  5. An up node idle (no job and GPU utilisation under the caller's threshold) for
//     `idle_duration` is released, longest idle first (then dearest, then id), while the pool
//     stays at or above `min_nodes` and within `max_releases_per_minute` (SuspendRate). A node
//     whose team's hard budget is spent (PoolNode::budget_spent) goes as soon as it is idle, and
//     at once while booting: every minute of it would be billed over the budget.
//
// A rent's `for_jobs` lists every job it is meant for (the first one chose the offer).
// Output order is deterministic: rents in job order, releases boot timeouts first (by node id),
// then idle nodes in release order.
//
// Thread-safety: none; one thread owns an Autoscaler. Its state is only the rate-limit history,
// recent rents, failed offers and idle nodes kept for gangs, so a replay of the same Decide calls gives the same plans.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/time.h"
#include "model/types.h"

namespace gpufleet::sched {

// A node type the pool may rent (one row of the cost layer's catalog, one market).
struct RentableOffer {
  std::string name;                   // unique; "gcp a3-highgpu-8g spot europe-west4-a"
  std::string gpu_model;              // canonical catalog name
  int gpus_per_node = 0;
  model::Market market = model::Market::kOnDemand;
  int64_t price_micros_per_hour = 0;  // per node
  Duration boot_estimate;
  std::string zone;                   // placement group: a gang's nodes come from one zone
  double speed = 1.0;                 // throughput relative to the jobs' reference GPU (> 0)
  double interruptions_per_hour = 0;  // expected spot interruptions per node-hour
  model::Labels labels;               // the labels its nodes will carry (zone, region, ...)
  int64_t cpu_milli = 0;              // per node; 0: not known, not checked
  int64_t mem_mib = 0;                // per node; 0: not known, not checked
  // The environments (presets) its nodes were seen to run, from a node of it that registered;
  // not known until then. A job whose environment is not among them is not rented for here:
  // every node would stay idle and be released, again and again.
  std::optional<std::vector<std::string>> runs_environments{};
};

// A job the scheduler could not place, as the autoscaler needs to see it.
struct PendingJob {
  JobId id;
  std::string team;  // not used by the policy: the caller bills a rented node to it
  int gpus_per_node = 1;
  int nodes = 1;
  int64_t cpu_milli = 0;  // per node, as placement requires it
  int64_t mem_mib = 0;    // per node
  std::vector<std::string> gpu_models;  // ordered any-of, first preferred; empty = any
  model::MarketPreference market = model::MarketPreference::kAny;
  Time queued_since;
  int spot_preemptions = 0;  // times a spot node was taken from under this job
  Duration checkpoint_interval = Duration::Minutes(30);  // work lost on an interruption: half this
  Duration restart_overhead;                             // paid again after each interruption
  model::Labels constraints;  // labels a node must carry (k=v), as placement requires
  std::string environment{};  // the preset it runs in (empty: the node's own), as placement requires
  // What its team may still add per hour (its budget's max_rate less what it spends per hour now,
  // rented nodes included), in micro-dollars; -1: no cap. A rented node is billed to the team
  // whole, so an offer dearer than this is not rented for it (nodes rented for the team's other
  // jobs in the same plan count against it).
  int64_t max_added_rate_micros = -1;
};

enum class PoolNodeState { kBooting, kUp, kDraining };

struct PoolNode {
  NodeId id;
  model::NodeSpec spec;                // gpu_model, gpus, market, price, labels["zone"]
  PoolNodeState state = PoolNodeState::kUp;
  Time booting_since;                  // when kBooting
  std::optional<Time> idle_since;      // set by the caller only when no job runs on it and its
                                       // GPU utilisation is under the caller's threshold
  std::string offer;                   // RentableOffer::name it came from; empty if not rented
  std::vector<JobId> for_jobs;         // kBooting: the jobs it was rented for
  bool managed = true;                 // false: hand-registered, never released
  // The team this node is billed to has been stopped by its hard budget (TeamSpend::hard_stop):
  // released as soon as it is idle (no idle_duration wait) or, while booting, at once.
  bool budget_spent = false;
  // Takes no work for a fault of its own (its disk has no room; pass it kDraining): it does not
  // hold the pool's floor (min_nodes), so a healthy idle node is not released in its stead.
  bool out_of_service = false;
};

struct PoolLimits {
  int min_nodes = 0;
  int max_nodes = 0;     // 0: no limit
  int64_t max_gpus = 0;  // 0: no limit
};

struct AutoscalerOptions {
  Duration idle_duration = Duration::Minutes(10);
  Duration boot_timeout = Duration::Minutes(15);
  Duration failed_offer_backoff = Duration::Minutes(30);
  int max_rents_per_minute = 0;     // nodes; 0: no limit
  int max_releases_per_minute = 0;  // nodes; 0: no limit
  int spot_fallback_after_preemptions = 2;  // 0: never by count
  Duration spot_fallback_after_wait = Duration::Minutes(30);  // Duration::Max(): never by wait
};

struct ScaleInput {
  Time now;
  std::vector<PendingJob> pending;  // in queue order
  std::vector<PoolNode> nodes;
  std::vector<RentableOffer> offers;
  PoolLimits limits;
};

struct Rent {
  int offer = -1;  // index into ScaleInput::offers
  int count = 0;
  std::string zone;
  std::vector<JobId> for_jobs;
  std::string reason;
  int64_t expected_micros_per_hour = 0;  // the ranking key: expected cost per hour of reference work
};
struct Release {
  NodeId node;
  std::string reason;
  bool budget = false;  // released because its team's hard budget is spent
};
// A job the autoscaler would rent for but may not now, and why.
struct Hold {
  JobId job;
  std::string reason;
};

struct ScalePlan {
  std::vector<Rent> rents;
  std::vector<Release> releases;
  std::vector<Hold> held;
  std::optional<Time> next_wakeup;  // when time alone may change the plan
  // Up nodes idle past idle_duration kept only for min_nodes: the pool's floor, which the caller
  // bills to no team.
  std::vector<NodeId> floor_kept;
};

class Autoscaler {
 public:
  explicit Autoscaler(AutoscalerOptions options);

  // The decision. Records its rents and releases (rate limits, "rented already") in this object.
  ScalePlan Decide(const ScaleInput& input);

  // A provider failed to create an instance of `offer`: avoid it for failed_offer_backoff and
  // let the jobs it was for be rented for again.
  void ReportRentFailed(const std::string& offer, Time now);

  // A node rented for `jobs` went away (interrupted, died) before covering them: they may be
  // rented for again at once.
  void ReportNodeGone(const std::vector<JobId>& jobs);

  const AutoscalerOptions& options() const { return options_; }

 private:
  struct Event {
    Time at;
    int nodes = 0;
  };
  struct Rented {
    Time at;
    std::string offer;
  };

  // Decide's steps, in order, on the working state of one call (autoscaler.cc).
  struct Round;
  void Forget(Time now);
  void ReleaseBootTimeouts(Round& r);
  void CountCoverage(Round& r);
  bool CoverWithPool(Round& r, const PendingJob& job, bool fallen_back);
  void RentFor(Round& r, const PendingJob& job, bool fallen_back);
  void ReleaseIdle(Round& r);
  void Claim(Round& r, const std::vector<NodeId>& ids, JobId job);

  AutoscalerOptions options_;
  std::deque<Event> rent_history_;
  std::deque<Event> release_history_;
  std::map<JobId, Rented> rented_for_;          // jobs rented for, not yet seen booting or timed out
  std::map<std::string, Time> failed_until_;    // offer name -> avoided until
  struct Kept {
    JobId job;
    Time until;
  };
  std::map<NodeId, Kept> kept_for_;             // idle up nodes kept for a pending gang
};

}  // namespace gpufleet::sched
