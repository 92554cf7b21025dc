// The policy interfaces of the scheduler core. A policy is one narrow interface with one
// decision method, chosen by name from the table in sched/policy/registry.h.
//
// Policies are pure: the same inputs give the same answer. They read no clock (the time comes in
// the context), no global, no store, and no unseeded randomness, so the live controller and the
// simulator get identical decisions from identical histories.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/ids.h"
#include "common/strings.h"
#include "common/time.h"
#include "model/types.h"
#include "sched/action_sink.h"
#include "sched/cluster_view.h"

namespace gpufleet::sched {

enum class JobPhase { kPending, kRunning, kStopping };
const char* JobPhaseName(JobPhase p);

// What a policy may know about a job: its spec and its history in the scheduler.
struct JobView {
  JobId id;
  const model::JobSpec* spec = nullptr;
  JobPhase phase = JobPhase::kPending;
  int64_t seq = 0;            // submission order; the final tie-break everywhere
  Time queued_since;          // when it last entered the queue
  Time started_at;            // when the current (or last) run began
  Duration last_run;          // length of the last finished run (zero before the first)
  Duration run_time;          // wall time run so far, all runs, not counting the current one
  int64_t attained_gpu_ms = 0;  // GPU-milliseconds of service before the current run
  // Service counted by least-attained-service queues; reset when a starving job is promoted.
  int64_t las_service_gpu_ms = 0;
  Time last_checkpoint;       // progress before this survives a stop
  int preemptions = 0;
  // When the first component of the job's rank (its queue class: a LAS queue, a priority tier)
  // last changed, or its submission. Kept by the scheduler for policies that order a queue by
  // entry into it, as Tiresias does.
  Time rank_class_since;

  // Service including the current run up to `now` (GPU-ms; slices count their fraction).
  int64_t AttainedAt(Time now) const;
  int64_t LasServiceAt(Time now) const;
  // Wall time of work that a stop at `now` would throw away.
  Duration WorkAtRisk(Time now) const;
  // Estimated wall time still to run (estimate minus time run), if the job has an estimate.
  std::optional<Duration> RemainingEstimate(Time now) const;
};

// A job's place in the queue: lower sorts first. Ties are broken by submission order.
struct RankKey {
  std::array<int64_t, 3> k{0, 0, 0};
  // Lexicographic, as the default would be; spelled out because queues and indexes compare
  // keys in their hottest loops and the generic array comparison is not inlined as well.
  constexpr std::strong_ordering operator<=>(const RankKey& o) const {
    if (k[0] != o.k[0]) return k[0] <=> o.k[0];
    if (k[1] != o.k[1]) return k[1] <=> o.k[1];
    return k[2] <=> o.k[2];
  }
  constexpr bool operator==(const RankKey& o) const { return k[0] == o.k[0] && k[1] == o.k[1] && k[2] == o.k[2]; }
};

struct TeamUsage {
  int64_t used_milli = 0;   // GPUs held by running jobs of the team
  int64_t quota_milli = 0;  // guaranteed share; 0 = no guarantee
  int64_t stopping_milli = 0;  // of used_milli, GPUs of jobs told to stop (already given up)
};

// Usage per team name. Hashed, not ordered: a fair-share rank looks its team up for every job
// it ranks (millions of times in a long replay), and nothing reads the teams in order. The hash
// is FNV-1a, a few instructions for a short name, and its own type because the standard library
// walks a table of std::hash<std::string> keys comparing every name while it holds at most 20
// entries, as a team table usually does.
struct TeamNameHash {
  size_t operator()(const std::string& name) const noexcept { return static_cast<size_t>(Fnv1a64(name)); }
};
using TeamUsageMap = std::unordered_map<std::string, TeamUsage, TeamNameHash>;

// Everything a queue policy may read besides the job itself.
struct QueueContext {
  Time now;
  const TeamUsageMap* teams = nullptr;
  int64_t cluster_milli = 0;  // schedulable GPU capacity
};

enum class BackfillMode {
  kOff,     // strict order: the first job that cannot start blocks all behind it
  kEasy,    // EASY: the first blocked job gets a reservation; others start if they do not delay it
  kGreedy,  // skip what does not fit (may starve large jobs; used by LAS as in Tiresias)
};
const char* BackfillModeName(BackfillMode m);

// Orders the queue and says who may preempt whom.
class QueuePolicy {
 public:
  virtual ~QueuePolicy() = default;
  virtual std::string Name() const = 0;
  // The decision: where this job stands in the queue now.
  virtual RankKey Rank(const JobView& job, const QueueContext& ctx) const = 0;
  // May a waiting job displace a running one? Must imply Rank(waiting) < Rank(running).
  virtual bool MayPreempt(const JobView& waiting, const JobView& running, const QueueContext& ctx) const {
    return false;
  }
  // False when MayPreempt(waiting, r, ctx) is false for every running job r (whatever else of
  // the usage changes, save that of teams other than the waiting job's): a preemption search
  // then ends before it looks at anyone.
  virtual bool MayPreemptSomeone(const JobView& waiting, const QueueContext& ctx) const { return Preempts(); }
  // True when MayPreempt(waiting, running, ctx) is exactly Rank(waiting, ctx).k[0] <
  // Rank(running, ctx).k[0]: a waiting job may stop exactly the running jobs of later queue
  // classes. Then, while ranks are current and the running set does not change, a preemption
  // search that found no room for one job finds none for a job of the same shape ranked after
  // it (its candidates are a subset), and a pass counts that search as failed without running it.
  virtual bool PreemptsByClass() const { return false; }
  // True when MayPreempt itself keeps teams' guaranteed quotas (it stops only GPUs a team
  // borrowed beyond its quota). Otherwise the scheduler adds that rule to MayPreempt while some
  // team has a quota: a job of one team never stops another team's job that is within its quota.
  virtual bool KeepsQuotas() const { return false; }
  virtual PreemptReason PreemptionReason() const { return PreemptReason::kPriority; }
  // False when MayPreempt is always false: a pass then never looks for victims.
  virtual bool Preempts() const { return false; }
  // When Rank(job) next changes with time alone (a LAS demotion or promotion); nullopt if never.
  virtual std::optional<Time> NextRankChange(const JobView& job, const QueueContext& ctx) const {
    return std::nullopt;
  }
  // True when ranks depend on other jobs (team usage): the scheduler re-ranks the whole queue
  // each pass instead of keeping it sorted.
  virtual bool RanksDependOnUsage() const { return false; }
  // For ranks that depend on usage: the part of the job's rank that usage never changes, when
  // usage moves all pending jobs of one team and one size together (for two of them, Rank(a) <
  // Rank(b) exactly when StaticRank(a) < StaticRank(b), at any usage). The scheduler then keeps
  // one queue per team and job shape in this order and merges their heads by live rank, instead
  // of ranking and sorting the whole queue at each pass; a job's rank (and rank_class_since) is
  // then brought up to date only when the pass reaches its queue's head. nullopt: no such part.
  virtual std::optional<RankKey> StaticRank(const JobView& job) const { return std::nullopt; }
  // With StaticRank: true when, for two pending jobs of one team and one shape ranked with one
  // context, Rank differs only in k[2], which is StaticRank's k[2]. A pass then ranks each
  // (team, shape) queue's head and reads the rest of that queue's ranks from it (usage is the
  // same for all of them) instead of asking Rank for every job it walks.
  virtual bool RanksAlikeInQueue() const { return false; }
  // True when this running job's rank changes continuously with the service it gets, at
  // instants NextRankChange cannot name (srtf: a job's remaining estimate shrinks as it runs).
  // The scheduler then re-ranks such running jobs at each pass before it looks for victims, so
  // that "the worst-ranked running job is the easiest victim" holds with live ranks. Asked when
  // the job starts; the answer must not change while it runs.
  virtual bool RankMovesWithService(const JobView& job) const { return false; }
  // True when starting `job` now should reset its LAS service (a starving job was promoted).
  virtual bool ResetsServiceOnStart(const JobView& job, const QueueContext& ctx) const { return false; }
  virtual BackfillMode DefaultBackfill() const { return BackfillMode::kEasy; }
  // Words for `explain`: why the job stands where it does ("queue 2 of 3: 9,000 GPU-s attained").
  virtual std::string DescribeRank(const JobView& job, const QueueContext& ctx) const { return ""; }
};

// The outcome of asking where a job could run.
struct PlaceResult {
  enum class Kind { kPlaced, kWait, kInfeasible };
  Kind kind = Kind::kWait;
  model::Placement placement;  // when kPlaced
  std::string reason;          // when not placed and PlaceOptions::explain was set
};

struct PlaceOptions {
  bool explain = false;  // build reason strings (costly; only for `explain`)
  // Node positions the job must not use (a reservation's nodes); empty or sized nodes().
  const NodeMask* excluded = nullptr;
  // Only whether the job is placed is wanted: `placement` may be left empty (a what-if asks this
  // many times and builds the placement once). The kind is the same as without it.
  bool answer_only = false;
};

// Chooses GPUs for a job. Answers both "now" (Placed or Wait) and "ever" (Infeasible when no
// node could hold the job even if the cluster were empty).
// For a job of whole GPUs, whether it is placed, and where, depends only on the nodes that could
// hold one of its parts now (schedulable, with at least gpus_per_node whole GPUs free) and on
// nothing else the view holds: a preemption search relies on this to know that a change on other
// nodes leaves the answer, and the nodes it claims, as they were.
class PlacementPolicy {
 public:
  virtual ~PlacementPolicy() = default;
  virtual std::string Name() const = 0;
  virtual PlaceResult Place(const model::JobSpec& job, const ClusterView& view,
                            const PlaceOptions& options) const = 0;
};

// Which of the running jobs a preemption stops first, when several would make room.
enum class VictimOrder {
  kLeastWorkLost,  // least work since the last checkpoint, then lowest class, then newest (default)
  kWorstRank,      // worst-ranked first (the queue's back), then newest: Tiresias' rule
};
const char* VictimOrderName(VictimOrder v);

struct SchedulerOptions {
  BackfillMode backfill = BackfillMode::kEasy;
  bool preemption = true;             // let the queue policy preempt (if it ever does)
  int max_preemption_attempts = 16;   // per pass; each attempt copies the view
  // A job that started less than this ago is not preempted (it would thrash: start, lose the
  // GPUs, start again). Node failures and cancels are not held back.
  Duration min_run_before_preempt;
  VictimOrder victims = VictimOrder::kLeastWorkLost;
  // Split a job asking more GPUs than any node has into a gang of full nodes.
  bool split_large_jobs = true;
  // How long after its jobs are stopped a rented node charged to a team (Scheduler::ChargeNode)
  // takes to be released and stop billing: part of the hard budget's stop lead.
  Duration budget_release_lead;
};

struct Policies {
  std::unique_ptr<QueuePolicy> queue;
  std::unique_ptr<PlacementPolicy> placement;
  SchedulerOptions options;
  std::string Name() const;  // "las+greedy/topology"
};

}  // namespace gpufleet::sched
