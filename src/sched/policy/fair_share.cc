#include "sched/policy/fair_share.h"

#include <limits>

namespace gpufleet::sched {

namespace {

TeamUsage UsageOf(const std::string& team, const QueueContext& ctx) {
  if (!ctx.teams) return {};
  auto it = ctx.teams->find(team);
  return it == ctx.teams->end() ? TeamUsage{} : it->second;
}

// Usage over quota in per-mille; teams without a quota rank behind every team with one.
int64_t UsagePermille(const TeamUsage& u) {
  if (u.quota_milli <= 0) return std::numeric_limits<int32_t>::max();
  return u.used_milli * 1000 / u.quota_milli;
}

int64_t PrioritySubmit(const JobView& job) {
  int64_t prio_submit = -static_cast<int64_t>(job.spec->priority);
  return prio_submit * (int64_t{1} << 42) + job.spec->submit.millis();
}

}  // namespace

RankKey FairSharePolicy::Rank(const JobView& job, const QueueContext& ctx) const {
  TeamUsage u = UsageOf(job.spec->team, ctx);
  int64_t demand = job.spec->total_gpu_milli();
  // A running job's own GPUs are already in its team's usage.
  int64_t others = job.phase == JobPhase::kPending ? u.used_milli : u.used_milli - demand;
  bool within = u.quota_milli > 0 && others + demand <= u.quota_milli;
  int64_t tier = within ? 0 : 1;
  return RankKey{{tier, UsagePermille(u), PrioritySubmit(job)}};
}

std::optional<RankKey> FairSharePolicy::StaticRank(const JobView& job) const {
  return RankKey{{0, 0, PrioritySubmit(job)}};
}

namespace {

bool WithinQuota(const JobView& waiting, const QueueContext& ctx) {
  TeamUsage w = UsageOf(waiting.spec->team, ctx);
  return w.quota_milli > 0 && w.used_milli + waiting.spec->total_gpu_milli() <= w.quota_milli;
}

}  // namespace

bool FairSharePolicy::MayPreempt(const JobView& waiting, const JobView& running, const QueueContext& ctx) const {
  if (waiting.spec->team == running.spec->team) return false;
  TeamUsage r = UsageOf(running.spec->team, ctx);
  // GPUs of the team's jobs already told to stop count as given back: several searches of one
  // pass would otherwise each take the same borrowed GPUs, and then some of the quota.
  bool only_borrowed = r.used_milli - r.stopping_milli - running.spec->total_gpu_milli() >= r.quota_milli;
  return WithinQuota(waiting, ctx) && only_borrowed;
}

bool FairSharePolicy::MayPreemptSomeone(const JobView& waiting, const QueueContext& ctx) const {
  return WithinQuota(waiting, ctx);
}

std::string FairSharePolicy::DescribeRank(const JobView& job, const QueueContext& ctx) const {
  TeamUsage u = UsageOf(job.spec->team, ctx);
  std::string team = job.spec->team.empty() ? "(no team)" : job.spec->team;
  if (u.quota_milli <= 0) {
    return "team " + team + " has no guaranteed quota: it runs only on idle capacity";
  }
  std::string s = "team " + team + " uses " + std::to_string(u.used_milli / 1000) + " of its " +
                  std::to_string(u.quota_milli / 1000) + " guaranteed GPUs";
  if (u.used_milli + job.spec->total_gpu_milli() > u.quota_milli) {
    s += "; quota exhausted for this job: it can only borrow idle capacity";
  }
  return s;
}

}  // namespace gpufleet::sched
