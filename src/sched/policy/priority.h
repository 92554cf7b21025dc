// PriorityPolicy ("priority"): priority classes with optional aging and preemption.
//
// Assumptions: a job's class (JobSpec::priority, larger = more important) says how much it
// matters; waiting should eventually count for something.
// Rules:
//  - Without aging: higher class first, then submission time.
//  - With aging A (e.g. aging=1h): every A of waiting is worth one class, so the queue is ordered
//    by submit - class * A. Ranks do not change with time, so the queue stays sorted.
//  - Preemption (preempt=true, the default): a waiting job may stop running jobs of a strictly
//    lower class, and only those that rank after it (aging can protect an old job).
// Tie-break: submission order. Default backfill: EASY.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "common/status.h"
#include "sched/policy.h"

namespace gpufleet::sched {

struct PriorityOptions {
  Duration aging;  // zero: no aging
  bool preempt = true;
};

class PriorityPolicy : public QueuePolicy {
 public:
  explicit PriorityPolicy(PriorityOptions o = {}) : o_(o) {}
  std::string Name() const override { return "priority"; }
  RankKey Rank(const JobView& job, const QueueContext& ctx) const override;
  bool MayPreempt(const JobView& waiting, const JobView& running, const QueueContext& ctx) const override;
  bool Preempts() const override { return o_.preempt; }
  PreemptReason PreemptionReason() const override { return PreemptReason::kPriority; }
  std::string DescribeRank(const JobView& job, const QueueContext& ctx) const override;

 private:
  PriorityOptions o_;
};

}  // namespace gpufleet::sched
