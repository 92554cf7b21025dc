// FifoPolicy ("fifo"): first come, first served.
//
// Assumptions: none about durations. Rule: rank by submission time; a requeued job keeps its
// original place. Tie-break: submission order. Never preempts. Default backfill: EASY (with
// no estimates it only fills nodes the head job cannot use).
#pragma once

#include "sched/policy.h"

namespace gpufleet::sched {

class FifoPolicy : public QueuePolicy {
 public:
  std::string Name() const override { return "fifo"; }
  RankKey Rank(const JobView& job, const QueueContext& ctx) const override;
};

}  // namespace gpufleet::sched
