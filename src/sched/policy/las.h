// LasPolicy ("las"): Tiresias' discretized two-dimensional least-attained-service (2D-LAS).
//
// Assumptions: job durations are unknown; a job that has had little service is likely short.
// Service is two-dimensional: GPUs x time (GPU-seconds), so a wide job ages as fast as its width.
// Rules:
//  - K queues separated by service thresholds (default 3,250 and 7,200 GPU-seconds, as in
//    Tiresias' simulator; `thresholds=a,b,...`). A job sits in the queue its service has reached;
//    a running job crossing a threshold is demoted at that instant (a timer wakes the scheduler).
//  - Lower queue first; inside a queue, FIFO by submission time (order=submit, the default) or
//    by the instant the job entered the queue (order=entry: arrival, demotion or promotion), as
//    Tiresias' simulator keeps its queues.
//  - Starvation: a waiting job whose wait since it last ran exceeds starve x its last run time
//    (default starve=8; 0 disables) is promoted to the top queue and its service count restarts.
//  - Preemptive: a waiting job may stop running jobs in a strictly lower-priority queue.
// Tie-break: submission order. Default backfill: greedy (skip jobs that do not fit), as Tiresias.
#pragma once

#include <vector>

#include "sched/policy.h"

namespace gpufleet::sched {

enum class LasOrder {
  kSubmit,  // inside a queue, by submission time
  kEntry,   // inside a queue, by when the job entered it (JobView::rank_class_since)
};

struct LasOptions {
  std::vector<int64_t> thresholds_gpu_s = {3250, 7200};
  int64_t starve_factor = 8;
  LasOrder order = LasOrder::kSubmit;
};

class LasPolicy : public QueuePolicy {
 public:
  explicit LasPolicy(LasOptions o = {}) : o_(std::move(o)) {}
  std::string Name() const override { return "las"; }
  RankKey Rank(const JobView& job, const QueueContext& ctx) const override;
  bool MayPreempt(const JobView& waiting, const JobView& running, const QueueContext& ctx) const override;
  bool Preempts() const override { return true; }
  bool PreemptsByClass() const override { return true; }  // MayPreempt compares QueueOf, Rank's k[0]
  PreemptReason PreemptionReason() const override { return PreemptReason::kService; }
  std::optional<Time> NextRankChange(const JobView& job, const QueueContext& ctx) const override;
  bool ResetsServiceOnStart(const JobView& job, const QueueContext& ctx) const override;
  BackfillMode DefaultBackfill() const override { return BackfillMode::kGreedy; }
  std::string DescribeRank(const JobView& job, const QueueContext& ctx) const override;

  int QueueOf(const JobView& job, Time now) const;

 private:
  bool Starving(const JobView& job, Time now) const;
  LasOptions o_;
};

}  // namespace gpufleet::sched
