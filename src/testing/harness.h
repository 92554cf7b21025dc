// SchedulerHarness: a scheduler core wired to a FakeClock and a RecordingSink, with terse calls
// for the tests of the core and its policies ("given these nodes and jobs, expect these starts").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sched/policy/registry.h"
#include "sched/scheduler.h"
#include "testing/fakes.h"

namespace gpufleet::testing {

class SchedulerHarness {
 public:
  // `policy` and `options` as on the simulator's command line ("las", {"backfill=easy"}).
  // `budget_release_lead`: SchedulerOptions::budget_release_lead.
  explicit SchedulerHarness(const std::string& policy, std::vector<std::string> options = {},
                            Duration budget_release_lead = Duration::Zero());

  NodeId AddNode(const model::NodeSpec& spec);
  // Submits at the clock's current time unless the spec says otherwise (submit != epoch).
  JobId Submit(model::JobSpec spec, Duration stop_grace = Duration::Zero());
  void Finish(JobId id);
  void Stopped(JobId id);  // the world confirms a preempted job is gone
  // Confirms every job that was asked to stop and has not yet been confirmed.
  void StopAllPreempted();
  void NodeDown(NodeId id);
  void AdvanceTo(int64_t seconds);  // fires due timers on the way
  void Timer();

  sched::Scheduler& sched() { return *sched_; }
  RecordingSink& sink() { return sink_; }
  FakeClock& clock() { return clock_; }
  sched::ClusterView& view() { return view_; }
  sched::JobPhase Phase(JobId id) const;
  std::vector<int64_t> Started() const { return sink_.Started(); }

 private:
  FakeClock clock_{Time::FromSeconds(0)};
  sched::ClusterView view_;
  RecordingSink sink_;
  std::unique_ptr<sched::Scheduler> sched_;
  int64_t next_job_ = 1;
  int64_t next_node_ = 0;
  size_t confirmed_preempts_ = 0;
};

}  // namespace gpufleet::testing
