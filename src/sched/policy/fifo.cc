#include "sched/policy/fifo.h"

namespace gpufleet::sched {

RankKey FifoPolicy::Rank(const JobView& job, const QueueContext&) const {
  if (fewest_gpus_first_) return RankKey{{job.spec->total_gpu_milli(), job.spec->submit.millis(), 0}};
  return RankKey{{job.spec->submit.millis(), 0, 0}};
}

}  // namespace gpufleet::sched
