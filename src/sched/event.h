// Events: everything the scheduler core learns about the world. The live controller makes them
// from API calls, agent heartbeats and timers; the simulator from its event queue.
#pragma once

#include <optional>
#include <variant>
#include <vector>

#include "common/ids.h"
#include "model/job_memory.h"
#include "model/types.h"
#include "sched/action_sink.h"

namespace gpufleet::sched {

struct JobSubmitted {
  JobId job;
  model::JobSpec spec;
  int64_t accrued_micros = 0;  // what earlier runs cost (a job requeued before a restart)
  // How long the job may take to exit once asked to stop (its checkpoint grace): a hard budget
  // stops it this long early, so that spend ends at the budget (docs/cost.md#the-stop-lead).
  Duration stop_grace = Duration::Zero();
  // What an earlier scheduler learned about the job (a restart): its service, runs and rank
  // instants. Without it the job starts afresh, queued now.
  std::optional<model::JobMemory> memory = std::nullopt;
};
// A job that is already running in the world, learned when the controller restarts: it takes
// its GPUs at once, without a Start decision. `started_at` is when its current run began.
struct JobRestored {
  JobId job;
  model::JobSpec spec;
  model::Placement placement;
  Time started_at;
  int64_t accrued_micros = 0;  // what its runs cost before `started_at`
  Duration stop_grace = Duration::Zero();  // as JobSubmitted::stop_grace
  // As JobSubmitted::memory; its run_started_at and accrued_micros are not read (`started_at`
  // and `accrued_micros` above say them), its last_checkpoint is when later than `started_at`.
  std::optional<model::JobMemory> memory = std::nullopt;
  // Being stopped, for this reason, when the controller restarted (a preemption in its grace):
  // filed as stopping, its GPUs given up for the quota checks and not searched again, without a
  // second Preempt (its stop was asked for already). Cancels and max_cost stops come as
  // JobCancelled after this instead.
  std::optional<PreemptReason> stopping = std::nullopt;
};
// The job's processes ended successfully.
struct JobFinished {
  JobId job;
};
// The job's processes failed. `requeue` puts it back in the queue (its restart policy allows it).
struct JobFailed {
  JobId job;
  bool requeue = false;
};
// The user cancelled the job. A pending job leaves at once; a running one is stopped (Preempt
// with kCancelled) and leaves when JobStopped arrives.
struct JobCancelled {
  JobId job;
};
// The processes of a job the scheduler asked to stop are gone; its GPUs are free again.
struct JobStopped {
  JobId job;
};
// The job wrote a checkpoint: work before now survives a preemption.
struct JobCheckpointed {
  JobId job;
};
// A node joined or came back. Re-sending NodeUp for a known node updates its spec.
struct NodeUp {
  NodeId node;
  model::NodeSpec spec;
};
// A node was lost: jobs on it are stopped everywhere and requeued.
struct NodeDown {
  NodeId node;
};
// The provider will take the node back soon (a spot interruption notice): it drains, and its
// jobs are stopped with their checkpoint signal and requeued at once. They keep their place in
// their class (their submission order), so they come back ahead of later work.
struct NodeReclaimed {
  NodeId node;
};
// Draining: no new work lands on the node; running work continues. drained=false undrains.
struct NodeDrained {
  NodeId node;
  bool drained = true;
};
// Per-GPU temperatures in whole degrees Celsius, in GPU index order.
struct GpuTelemetry {
  NodeId node;
  std::vector<int> temperature_c;
};
// A wakeup requested through Scheduler::NextWakeup.
struct Timer {};

using Event = std::variant<JobSubmitted, JobRestored, JobFinished, JobFailed, JobCancelled, JobStopped,
                           JobCheckpointed, NodeUp, NodeDown, NodeReclaimed, NodeDrained, GpuTelemetry, Timer>;

}  // namespace gpufleet::sched
