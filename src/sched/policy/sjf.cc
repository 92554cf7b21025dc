#include "sched/policy/sjf.h"

#include <limits>

namespace gpufleet::sched {

namespace {
constexpr int64_t kUnknown = std::numeric_limits<int64_t>::max() / 4;
}

RankKey SjfPolicy::Rank(const JobView& job, const QueueContext& ctx) const {
  int64_t key = kUnknown;
  if (job.spec->duration_estimate) {
    key = remaining_ ? job.RemainingEstimate(ctx.now)->millis() : job.spec->duration_estimate->millis();
  }
  return RankKey{{key, job.spec->submit.millis(), 0}};
}

bool SjfPolicy::MayPreempt(const JobView& waiting, const JobView& running, const QueueContext& ctx) const {
  if (!remaining_) return false;
  // Strictly less remaining work; the submit-time tie-break must not cause a preemption.
  return Rank(waiting, ctx).k[0] < Rank(running, ctx).k[0];
}

std::string SjfPolicy::DescribeRank(const JobView& job, const QueueContext& ctx) const {
  if (!job.spec->duration_estimate) return "no duration estimate: ranks after every job with one";
  return (remaining_ ? "remaining estimate " + FormatDuration(*job.RemainingEstimate(ctx.now))
                     : "estimate " + FormatDuration(*job.spec->duration_estimate));
}

}  // namespace gpufleet::sched
