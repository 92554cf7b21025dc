// ActionSink: where the scheduler's decisions go. The live controller writes each decision to
// its store and tells the agents; the simulator turns them into future events.
//
// Contract: a Start takes effect at once in the scheduler's own books (the GPUs are allocated
// before Start returns). A Preempt asks the world to stop the job; the GPUs stay allocated until
// the world answers with a JobStopped event, because a real process takes a grace period to
// checkpoint and exit.
#pragma once

#include "common/ids.h"
#include "model/types.h"

namespace gpufleet::sched {

enum class PreemptReason {
  kPriority,      // a job of a higher priority class needs the GPUs
  kQuotaReclaim,  // a team takes back capacity another team borrowed
  kService,       // least-attained-service: the job has had more than its share
  kNodeFailure,   // a node of the job was lost; the other parts must stop too
  kCancelled,     // the user cancelled the job
  kReclaimed,     // the provider is taking the node back (a spot interruption notice)
  kBudget,        // the job's team reached its hard budget (requeued: it waits for budget)
  kMaxCost,       // the job's own cost reached its max_cost (not requeued)
};
const char* PreemptReasonName(PreemptReason r);

class ActionSink {
 public:
  virtual ~ActionSink() = default;
  virtual void Start(JobId job, const model::Placement& placement) = 0;
  virtual void Preempt(JobId job, PreemptReason reason) = 0;
};

}  // namespace gpufleet::sched
