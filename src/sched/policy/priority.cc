#include "sched/policy/priority.h"

namespace gpufleet::sched {

RankKey PriorityPolicy::Rank(const JobView& job, const QueueContext&) const {
  const int64_t submit = job.spec->submit.millis();
  if (o_.aging > Duration::Zero()) {
    return RankKey{{submit - static_cast<int64_t>(job.spec->priority) * o_.aging.millis(), 0, 0}};
  }
  return RankKey{{-static_cast<int64_t>(job.spec->priority), submit, 0}};
}

bool PriorityPolicy::MayPreempt(const JobView& waiting, const JobView& running, const QueueContext& ctx) const {
  return o_.preempt && waiting.spec->priority > running.spec->priority &&
         Rank(waiting, ctx) < Rank(running, ctx);
}

std::string PriorityPolicy::DescribeRank(const JobView& job, const QueueContext& ctx) const {
  std::string s = "priority class " + std::to_string(job.spec->priority);
  if (o_.aging > Duration::Zero()) {
    s += ", aged one class per " + FormatDuration(o_.aging) + " of waiting (waited " +
         FormatDuration(ctx.now - job.spec->submit) + ")";
  }
  return s;
}

}  // namespace gpufleet::sched
