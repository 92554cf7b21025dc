// FairSharePolicy ("fair-share"): guaranteed GPU quotas per team, with borrowing.
//
// Assumptions: each team owns a guaranteed quota of GPUs (cluster spec `teams:` or
// `--policy-opt quota.<team>=N`); capacity a team does not use may be borrowed by others.
// Rules:
//  - Tier 0 first: jobs that fit within their team's unused quota. Tier 1: borrowing jobs.
//  - Inside a tier, the team using the smallest fraction of its quota goes first (teams without
//    a quota count as fully used), then higher priority class, then submission time.
//  - Reclaim: a tier-0 job may preempt a job of a team that is over its quota, only if that team
//    stays at or above its quota afterwards — only borrowed capacity is taken back, never a
//    team's own quota.
// Ranks depend on usage, so the scheduler re-ranks the queue at every pass (using the usage at
// the start of the pass; one queue per team and job size, merged by team share). Tie-break: submission order. Default backfill: EASY.
#pragma once

#include "sched/policy.h"

namespace gpufleet::sched {

class FairSharePolicy : public QueuePolicy {
 public:
  std::string Name() const override { return "fair-share"; }
  RankKey Rank(const JobView& job, const QueueContext& ctx) const override;
  bool MayPreempt(const JobView& waiting, const JobView& running, const QueueContext& ctx) const override;
  // Only a job that fits within its team's unused quota reclaims.
  bool MayPreemptSomeone(const JobView& waiting, const QueueContext& ctx) const override;
  bool Preempts() const override { return true; }
  PreemptReason PreemptionReason() const override { return PreemptReason::kQuotaReclaim; }
  bool RanksDependOnUsage() const override { return true; }
  bool KeepsQuotas() const override { return true; }  // reclaims borrowed GPUs only
  // Usage sets a job's tier and its team's share; the rest (priority, submission) is static.
  std::optional<RankKey> StaticRank(const JobView& job) const override;
  // Tier and share come from the team's usage and the job's size; k[2] is StaticRank's.
  bool RanksAlikeInQueue() const override { return true; }
  std::string DescribeRank(const JobView& job, const QueueContext& ctx) const override;
};

}  // namespace gpufleet::sched
