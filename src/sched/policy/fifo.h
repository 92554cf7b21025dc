// FifoPolicy ("fifo"): first come, first served.
//
// Assumptions: none about durations. Rule: rank by submission time; a requeued job keeps its
// original place. Tie-break: submission order. With order=gpus (Tiresias' "sjf": smallest job
// first) the rank is the job's GPU count, then its submission time. Never preempts. The registry offers it as
// "fifo" (strict order: backfill off) and "backfill" (EASY, which needs duration estimates to
// let anything pass a blocked head on nodes the head may use).
#pragma once

#include "sched/policy.h"

namespace gpufleet::sched {

class FifoPolicy : public QueuePolicy {
 public:
  explicit FifoPolicy(bool fewest_gpus_first = false) : fewest_gpus_first_(fewest_gpus_first) {}
  std::string Name() const override { return "fifo"; }
  RankKey Rank(const JobView& job, const QueueContext& ctx) const override;

 private:
  bool fewest_gpus_first_;
};

}  // namespace gpufleet::sched
