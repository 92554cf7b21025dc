#include "sched/policy/fifo.h"

namespace gpufleet::sched {

RankKey FifoPolicy::Rank(const JobView& job, const QueueContext&) const {
  return RankKey{{job.spec->submit.millis(), 0, 0}};
}

}  // namespace gpufleet::sched
