#include "testing/harness.h"

#include "common/check.h"

namespace gpufleet::testing {

SchedulerHarness::SchedulerHarness(const std::string& policy, std::vector<std::string> options,
                                   Duration budget_release_lead) {
  auto opts = sched::ParsePolicyOptions(options);
  CHECK(opts.ok()) << opts.status().ToString();
  auto cfg = sched::MakePolicies(policy, *opts);
  CHECK(cfg.ok()) << cfg.status().ToString();
  cfg->policies.options.budget_release_lead = budget_release_lead;
  auto quotas = cfg->team_quota_gpus;
  sched_ = std::make_unique<sched::Scheduler>(clock_, view_, std::move(cfg->policies), sink_);
  for (const auto& [team, gpus] : quotas) sched_->SetTeamQuota(team, gpus);
}

NodeId SchedulerHarness::AddNode(const model::NodeSpec& spec) {
  NodeId id(next_node_++);
  Status s = sched_->Handle(sched::NodeUp{id, spec});
  CHECK(s.ok()) << s.ToString();
  return id;
}

JobId SchedulerHarness::Submit(model::JobSpec spec, Duration stop_grace) {
  JobId id(next_job_++);
  if (spec.submit == Time::Epoch()) spec.submit = clock_.Now();
  sched::JobSubmitted e{id, std::move(spec)};
  e.stop_grace = stop_grace;
  Status s = sched_->Handle(e);
  CHECK(s.ok()) << s.ToString();
  return id;
}

void SchedulerHarness::Finish(JobId id) {
  Status s = sched_->Handle(sched::JobFinished{id});
  CHECK(s.ok()) << s.ToString();
}

void SchedulerHarness::Stopped(JobId id) {
  Status s = sched_->Handle(sched::JobStopped{id});
  CHECK(s.ok()) << s.ToString();
}

void SchedulerHarness::StopAllPreempted() {
  std::vector<sched::Event> events;
  for (size_t i = confirmed_preempts_; i < sink_.actions.size(); ++i) {
    if (sink_.actions[i].kind == RecordingSink::Action::Kind::kPreempt) {
      events.push_back(sched::JobStopped{sink_.actions[i].job});
    }
  }
  confirmed_preempts_ = sink_.actions.size();
  if (!events.empty()) {
    Status s = sched_->HandleAll(events);
    CHECK(s.ok()) << s.ToString();
  }
}

void SchedulerHarness::NodeDown(NodeId id) {
  Status s = sched_->Handle(sched::NodeDown{id});
  CHECK(s.ok()) << s.ToString();
}

void SchedulerHarness::AdvanceTo(int64_t seconds) {
  Time target = Time::FromSeconds(seconds);
  while (auto t = sched_->NextWakeup()) {
    if (*t > target) break;
    clock_.Set(std::max(*t, clock_.Now()));
    Timer();
  }
  clock_.Set(target);
}

void SchedulerHarness::Timer() {
  Status s = sched_->Handle(sched::Timer{});
  CHECK(s.ok()) << s.ToString();
}

sched::JobPhase SchedulerHarness::Phase(JobId id) const {
  auto p = sched_->PhaseOf(id);
  CHECK(p.has_value()) << "job " << id << " unknown";
  return *p;
}

}  // namespace gpufleet::testing
