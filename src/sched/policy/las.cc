#include "sched/policy/las.h"

#include "common/strings.h"

namespace gpufleet::sched {

bool LasPolicy::Starving(const JobView& job, Time now) const {
  if (o_.starve_factor <= 0 || job.phase != JobPhase::kPending) return false;
  if (job.last_run <= Duration::Zero()) return false;
  return now - job.queued_since >= job.last_run * o_.starve_factor;
}

int LasPolicy::QueueOf(const JobView& job, Time now) const {
  if (Starving(job, now)) return 0;
  int64_t service_ms = job.LasServiceAt(now);
  int q = 0;
  for (int64_t t : o_.thresholds_gpu_s) {
    if (service_ms >= t * 1000) ++q;
  }
  return q;
}

RankKey LasPolicy::Rank(const JobView& job, const QueueContext& ctx) const {
  const Time within = o_.order == LasOrder::kEntry ? job.rank_class_since : job.spec->submit;
  return RankKey{{QueueOf(job, ctx.now), within.millis(), 0}};
}

bool LasPolicy::MayPreempt(const JobView& waiting, const JobView& running, const QueueContext& ctx) const {
  return QueueOf(waiting, ctx.now) < QueueOf(running, ctx.now);
}

bool LasPolicy::ResetsServiceOnStart(const JobView& job, const QueueContext& ctx) const {
  return Starving(job, ctx.now);
}

std::optional<Time> LasPolicy::NextRankChange(const JobView& job, const QueueContext& ctx) const {
  if (job.phase == JobPhase::kPending) {
    if (o_.starve_factor <= 0 || job.last_run <= Duration::Zero() || Starving(job, ctx.now)) return std::nullopt;
    return job.queued_since + job.last_run * o_.starve_factor;
  }
  if (job.phase != JobPhase::kRunning) return std::nullopt;
  // The instant the running job's service reaches the next threshold.
  int64_t milli = job.spec->total_gpu_milli();
  if (milli <= 0) return std::nullopt;  // a job of no GPUs attains no GPU service: its rank stays
  int64_t base = job.las_service_gpu_ms;   // service before the current run
  int64_t now_service = job.LasServiceAt(ctx.now);
  for (int64_t t : o_.thresholds_gpu_s) {
    int64_t t_ms = t * 1000;
    if (now_service >= t_ms) continue;  // already crossed: the next change is a later threshold
    int64_t wall_ms = ((t_ms - base) * model::kMilliGpuPerGpu + milli - 1) / milli;
    return job.started_at + Duration::Millis(wall_ms);
  }
  return std::nullopt;
}

std::string LasPolicy::DescribeRank(const JobView& job, const QueueContext& ctx) const {
  int q = QueueOf(job, ctx.now);
  std::string s = "queue " + std::to_string(q + 1) + " of " + std::to_string(o_.thresholds_gpu_s.size() + 1) +
                  " (" + std::to_string(job.LasServiceAt(ctx.now) / 1000) + " GPU-seconds attained)";
  if (Starving(job, ctx.now)) s += "; promoted to the top queue after starving";
  return s;
}

}  // namespace gpufleet::sched
