// FifoPolicy ("fifo"): first come, first served.
//
// Assumptions: none about durations. Rule: rank by submission time; a requeued job keeps its
// original place. Tie-break: submission order. Never preempts. The registry offers it as
// "fifo" (strict order: backfill off) and "backfill" (EASY, which needs duration estimates to
// let anything pass a blocked head on nodes the head may use).
#pragma once

#include "sched/policy.h"

namespace gpufleet::sched {

class FifoPolicy : public QueuePolicy {
 public:
  std::string Name() const override { return "fifo"; }
  RankKey Rank(const JobView& job, const QueueContext& ctx) const override;
};

}  // namespace gpufleet::sched
