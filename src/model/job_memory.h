// JobMemory: what the scheduler core has learned about a job that neither its spec nor its record
// says — the service its runs got (as least-attained-service counts it, too), how its runs went,
// and the instants its rank depends on. Queue policies order by it (las, srtf), preemption picks
// victims by it (the last checkpoint), so a controller that starts over must get it back to
// rank the queue as the one before it did.
//
// The core exports it (sched::Scheduler::MemoryOf) and takes it back at a restart
// (sched::JobSubmitted / JobRestored::memory); the controller stores it beside each unfinished
// job, in the transaction that records the transition that moved it. A value type: no invariants
// beyond the comments.
#pragma once

#include <cstdint>

#include "common/time.h"

namespace gpufleet::model {

struct JobMemory {
  int64_t attained_gpu_ms = 0;     // GPU-milliseconds of service of the runs that ended
  int64_t las_service_gpu_ms = 0;  // ... as least-attained-service counts it (a promotion resets it)
  Duration run_time;               // wall time of the runs that ended
  Duration last_run;               // length of the last run that ended (zero before the first)
  int64_t preemptions = 0;         // runs a policy's preemption ended
  int64_t spot_reclaims = 0;       // runs cut short because a spot node was reclaimed
  Time queued_since;               // when it last entered the queue
  Time rank_class_since;           // when its rank's class (first component) last changed
  int64_t rank_class = 0;          // that class when this was taken
  // While it holds GPUs: when the current run began and its last checkpoint (zero while it waits).
  Time run_started_at;
  Time last_checkpoint;
  int64_t accrued_micros = 0;      // cost of the runs that ended (micro-dollars)

  bool operator==(const JobMemory&) const = default;
};

}  // namespace gpufleet::model
