// Oracle baselines for studies: ShortestJobFirst ("sjf") and ShortestRemainingTimeFirst
// ("srtf"). Both read JobSpec::duration_estimate; in the simulator `--estimates oracle` makes it
// the true duration. Jobs without an estimate go last.
//
// sjf: rank by total estimate, non-preemptive, EASY backfill.
// srtf: rank by remaining estimate (estimate minus time run); a waiting job may preempt a
// running one whose remaining time is strictly longer, judged on the remaining times at the
// moment of the decision (running ranks move with service). Greedy backfill.
// Tie-break: submission time, then submission order.
#pragma once

#include "sched/policy.h"

namespace gpufleet::sched {

class SjfPolicy : public QueuePolicy {
 public:
  explicit SjfPolicy(bool remaining) : remaining_(remaining) {}
  std::string Name() const override { return remaining_ ? "srtf" : "sjf"; }
  RankKey Rank(const JobView& job, const QueueContext& ctx) const override;
  bool MayPreempt(const JobView& waiting, const JobView& running, const QueueContext& ctx) const override;
  bool Preempts() const override { return remaining_; }
  // A running job's remaining estimate shrinks as it runs, and no timer marks that.
  bool RankMovesWithService(const JobView& job) const override {
    return remaining_ && job.spec->duration_estimate.has_value();
  }
  PreemptReason PreemptionReason() const override { return PreemptReason::kPriority; }
  BackfillMode DefaultBackfill() const override {
    return remaining_ ? BackfillMode::kGreedy : BackfillMode::kEasy;
  }
  std::string DescribeRank(const JobView& job, const QueueContext& ctx) const override;

 private:
  bool remaining_;
};

}  // namespace gpufleet::sched
