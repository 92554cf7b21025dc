#include "controller/engine.h"

#include "cost/offer.h"

#include <nlohmann/json.hpp>
#include <set>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "api/job_yaml.h"
#include "common/strings.h"

namespace gpufleet::controller {

using api::JobState;

class Engine::Sink : public sched::ActionSink {
 public:
  explicit Sink(Engine& e) : e_(e) {}
  // The scheduler calls its sink only from HandleAll, which the engine runs with mu_ held.
  void Start(JobId job, const model::Placement& placement) override {
    e_.mu_.AssertHeld();
    e_.OnStart(job, placement);
  }
  void Preempt(JobId job, sched::PreemptReason reason) override {
    e_.mu_.AssertHeld();
    e_.OnPreempt(job, reason);
  }

 private:
  Engine& e_;
};

namespace {

std::string ReasonText(sched::PreemptReason r) {
  switch (r) {
    case sched::PreemptReason::kPriority: return "preempted for a job of a higher priority class";
    case sched::PreemptReason::kQuotaReclaim: return "preempted: its team borrowed GPUs another team reclaims";
    case sched::PreemptReason::kService: return "preempted: it has had more than its share of service (LAS)";
    case sched::PreemptReason::kNodeFailure: return "stopped: a node of the job was lost";
    case sched::PreemptReason::kCancelled: return "cancel requested";
    case sched::PreemptReason::kReclaimed: return "stopped: the provider is reclaiming the node (spot interruption notice)";
    case sched::PreemptReason::kBudget: return "stopped: its team reached its hard budget";
    case sched::PreemptReason::kMaxCost: return "stopped: it reached its max_cost";
  }
  return "stopped";
}

std::string GpuList(const std::vector<int>& gpus) {
  std::vector<std::string> s;
  for (int g : gpus) s.push_back(std::to_string(g));
  return Join(s, ",");
}

std::string FailureText(const Engine::PartInfo& part, int index, size_t parts) {
  std::string what = parts > 1 ? "part " + std::to_string(index) + " " : "";
  if (part.exit_code == -1 && part.signal == 0) {
    what += part.message.empty() ? "was lost" : "was lost (" + part.message + ")";
    return what;
  }
  what += part.signal ? "was killed by signal " + std::to_string(part.signal)
                      : "exited with code " + std::to_string(part.exit_code);
  if (!part.message.empty()) what += " (" + part.message + ")";
  return what;
}

}  // namespace

Engine::Engine(const sched::Clock& clock, store::StateStore& store, EngineOptions options)
    : clock_(clock), store_(store), options_(std::move(options)), catalog_(model::GpuCatalog::BuiltIn()) {
  if (options_.epoch.empty()) options_.epoch = std::to_string(clock_.Now().millis());
  if (options_.master_port_span < 1) options_.master_port_span = 1;
  // Ports of gangs that survive a restart are not known again; start each boot elsewhere in the
  // range so a new gang is unlikely to take a port a running one holds.
  next_port_ = static_cast<int>(std::hash<std::string>()(options_.epoch) % static_cast<size_t>(options_.master_port_span));
  auto config = sched::MakePolicies(options_.policy, options_.policy_options);
  if (!config.ok()) {
    // The caller validates the policy first (ValidatePolicy); fall back to the default.
    spdlog::error("policy {}: {}; using backfill", options_.policy, config.status().message());
    config = sched::MakePolicies("backfill", {});
  }
  config->policies.options.budget_release_lead = options_.budget_release_lead;
  sink_ = std::make_unique<Sink>(*this);
  view_.SetThermalLimits(options_.thermal_limit_c, options_.thermal_resume_c);
  scheduler_ = std::make_unique<sched::Scheduler>(clock_, view_, std::move(config->policies), *sink_);
  for (const auto& [team, gpus] : config->team_quota_gpus) scheduler_->SetTeamQuota(team, gpus);
}

Engine::~Engine() = default;

void Engine::SetNodeSizeHints(const std::map<std::string, int>& gpus_by_model) {
  MutexLock lock(mu_);
  for (const auto& [m, gpus] : gpus_by_model) {
    scheduler_->SetNodeSizeHint(m, gpus);
    node_size_hints_[m] = std::max(node_size_hints_[m], gpus);
  }
}

Status Engine::Recover() {
  MutexLock lock(mu_);
  Time now = clock_.Now();
  GF_ASSIGN_OR_RETURN(auto nodes, store_.ListNodes());
  for (auto& n : nodes) {
    node_by_name_[n.name] = n.id.value();
    NodeState st;
    st.rec = n;
    st.last_seen = now;  // a full lost_after to check in again
    if (n.state == api::NodeState::kUp || n.state == api::NodeState::kDraining) {
      // Its jobs keep their GPUs, but nothing new lands there until its agent registers: the
      // agent may never come back (a node of an earlier dev cluster, a machine that died while
      // the controller was down), and a job placed there would wait out lost_after.
      events_.push_back(sched::NodeUp{n.id, n.spec});
      events_.push_back(sched::NodeDrained{n.id, true});
      st.awaiting_agent = true;
    }
    nodes_[n.id.value()] = std::move(st);
  }
  // Team quotas and limits.
  GF_ASSIGN_OR_RETURN(auto saved_quotas, store_.GetMeta("quotas"));
  if (saved_quotas) {
    auto j = nlohmann::json::parse(*saved_quotas, nullptr, false);
    if (j.is_object()) {
      for (auto it = j.begin(); it != j.end(); ++it) {
        if (!it->is_object()) continue;
        sched::TeamQuota q;
        q.gpus = it->value("gpus", int64_t{0});
        if (auto m = it->find("model_gpus"); m != it->end() && m->is_object()) {
          for (auto mm = m->begin(); mm != m->end(); ++mm) {
            if (mm->is_number_integer()) q.model_gpus[mm.key()] = mm->get<int64_t>();
          }
        }
        q.borrow = it->value("borrow", true);
        q.max_running_jobs = it->value("max_running_jobs", int64_t{0});
        q.max_pending_jobs = it->value("max_pending_jobs", int64_t{0});
        quotas_[it.key()] = q;
        scheduler_->SetTeamQuota(it.key(), q);
      }
    }
  }
  // Team budgets.
  GF_ASSIGN_OR_RETURN(auto saved, store_.GetMeta("budgets"));
  if (saved) {
    auto j = nlohmann::json::parse(*saved, nullptr, false);
    if (j.is_object()) {
      for (auto it = j.begin(); it != j.end(); ++it) {
        sched::TeamBudget b;
        b.since = Time::FromMillis(it->value("since_ms", int64_t{0}));
        b.hard_micros = it->value("hard_micros", int64_t{0});
        b.soft_micros = it->value("soft_micros", int64_t{0});
        b.max_rate_micros = it->value("max_rate_micros", int64_t{0});
        b.stop_running = it->value("stop_running", true);
        b.period = ParseCalendarPeriod(it->value("period", std::string("none"))).value_or(CalendarPeriod::kNone);
        budgets_[it.key()] = b;
        // What finished since the period's start counts again after a restart.
        sched::TeamBudget live = b;
        if (live.period != CalendarPeriod::kNone) live.since = std::max(live.since, PeriodStart(clock_.Now(), live.period));
        live.carried_micros = FinishedSpend(it.key(), live.since);
        // Stopped by its hard limit before the restart: stays stopped under the same budget, in the
        // same period (a period that rolled over meanwhile starts afresh).
        const nlohmann::json stopped_in = it->value("hard_stopped_since_ms", nlohmann::json(nullptr));
        live.hard_stopped = stopped_in.is_number_integer() && stopped_in.get<int64_t>() == live.since.millis();
        if (live.hard_stopped) hard_stopped_[it.key()] = live.since;
        scheduler_->SetTeamBudget(it.key(), live);
      }
    }
  }
  // Nodes first, so that restored jobs find their GPUs.
  auto ev = std::move(events_);
  events_.clear();
  GF_RETURN_IF_ERROR(scheduler_->HandleAll(ev));

  GF_ASSIGN_OR_RETURN(ended_cost_, store_.EndedCostByTeam());
  store::JobFilter filter;
  filter.include_terminal = false;
  GF_ASSIGN_OR_RETURN(auto jobs, store_.ListJobs(filter));
  // What the scheduler had learned about each job: its service, runs and rank instants. A job
  // without it (never changed since its submission, or stored before schema version 4) has the
  // memory its record gives: queued since its last transition, nothing run.
  GF_ASSIGN_OR_RETURN(auto stored_memory, store_.ListJobMemory());
  std::map<int64_t, model::JobMemory> memory;
  for (auto& m : stored_memory) memory[m.job.value()] = m.memory;
  std::sort(jobs.begin(), jobs.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  std::vector<sched::Event> restored;
  for (auto& rec : jobs) {
    Job job;
    job.rec = rec;
    job.attempt_started = now;  // the watchdog gives a recovered job a full timeout
    bool placed = rec.placement && (rec.state == JobState::kStarting || rec.state == JobState::kRunning ||
                                    rec.state == JobState::kStopping);
    bool nodes_ok = placed;
    if (placed) {
      for (const auto& part : rec.placement->parts) {
        auto it = nodes_.find(part.node.value());
        if (it == nodes_.end() || it->second.rec.state == api::NodeState::kLost ||
            it->second.rec.state == api::NodeState::kGone) {
          nodes_ok = false;
        }
      }
    }
    if (nodes_ok) {
      for (size_t p = 0; p < rec.placement->parts.size(); ++p) {
        part_nodes_[api::PartKey{rec.id, rec.attempt, static_cast<int>(p)}] = rec.placement->parts[p].node.value();
      }
      job.parts.assign(rec.placement->parts.size(), Part{});
      for (auto& p : job.parts) p.started = rec.state != JobState::kStarting;
      job.master_port = 0;
      if (rec.state == JobState::kStopping) {
        // The stop was asked for before the restart; ask again (agents ignore repeats) and end
        // it as it was meant to end.
        RestoreStopIntent(job);
      }
      // The record's cost was written at its last transition (this run's start, or its stop):
      // the run is counted on from there. With the scheduler's memory of the run, from its
      // start on the cost of the runs before it, as the old controller counted.
      sched::JobRestored back{rec.id, rec.request.spec, *rec.placement, rec.updated, rec.cost_micros,
                              rec.request.checkpoint.grace};
      if (auto m = memory.find(rec.id.value()); m != memory.end()) {
        back.memory = m->second;
        if (m->second.run_started_at != Time() && m->second.run_started_at <= rec.updated) {
          back.started_at = m->second.run_started_at;
          back.accrued_micros = m->second.accrued_micros;
        }
      }
      // A preemption in its grace (a stop that requeues): the core files it as stopping, so that
      // the job it made room for does not stop another for the same room, and quota checks count
      // its GPUs as given up.
      if (job.stop_requested && job.stop_reason != sched::PreemptReason::kCancelled &&
          job.stop_reason != sched::PreemptReason::kMaxCost) {
        back.stopping = job.stop_reason;
      }
      restored.push_back(std::move(back));
      // A stop for a cancel or max_cost ends the job for good: the core hears so at once, before
      // any pass (else it would requeue the job on its exit and start it again, holding GPUs
      // for a job the engine has finished).
      if (job.stop_requested &&
          (job.stop_reason == sched::PreemptReason::kCancelled || job.stop_reason == sched::PreemptReason::kMaxCost)) {
        restored.push_back(sched::JobCancelled{rec.id});
      }
      jobs_[rec.id.value()] = std::move(job);
    } else {
      if (placed && rec.state == JobState::kStopping &&
          (rec.stop_intent == sched::PreemptReasonName(sched::PreemptReason::kCancelled) ||
           rec.stop_intent == sched::PreemptReasonName(sched::PreemptReason::kMaxCost))) {
        // It was being stopped for good, and its nodes are gone with its processes: it ends.
        Job& j = jobs_[rec.id.value()] = std::move(job);
        const bool cancelled = rec.stop_intent == sched::PreemptReasonName(sched::PreemptReason::kCancelled);
        Transition(j, cancelled ? JobState::kCancelled : JobState::kFailed,
                   std::string(cancelled ? "cancelled" : "stopped at its max_cost") +
                       "; its nodes were lost while the controller was down");
        jobs_.erase(rec.id.value());
        continue;
      }
      if (placed) {
        // Its nodes are gone: whatever still runs of it is killed when its agents report.
        Job& j = jobs_[rec.id.value()] = std::move(job);
        Transition(j, JobState::kPending, "requeued: its nodes were lost while the controller was down");
      } else {
        jobs_[rec.id.value()] = std::move(job);
      }
      sched::JobSubmitted back{rec.id, rec.request.spec, rec.cost_micros, rec.request.checkpoint.grace};
      if (auto m = memory.find(rec.id.value()); m != memory.end()) {
        back.memory = m->second;
        back.memory->run_started_at = Time();
        back.memory->last_checkpoint = Time();
      } else {
        back.memory.emplace();
        back.memory->queued_since = rec.updated;
        back.memory->rank_class_since = rec.updated;
      }
      back.memory->accrued_micros = rec.cost_micros;
      if (placed) back.memory->queued_since = now;  // requeued just now (its nodes were lost)
      restored.push_back(std::move(back));
    }
  }
  Status st = scheduler_->HandleAll(restored);
  if (!st.ok()) spdlog::warn("recovery: {}", st.message());

  // What was in flight when the controller stopped. A start that not every part confirmed cannot
  // be completed (its MASTER_PORT and its commands are gone): stop what runs of it and requeue.
  // Agents answer a stop for a part they never started with an exit, so this always ends.
  for (auto& [id, job] : jobs_) {
    if (!job.rec.placement || job.parts.empty()) continue;
    if (job.rec.state == JobState::kStarting) {
      job.stop_requested = true;
      job.stop_reason = sched::PreemptReason::kNodeFailure;
      Transition(job, JobState::kStopping, "the controller restarted while the job was starting");
      SendStop(job, "the controller restarted while the job was starting");
    } else if (job.stop_requested) {
      SendStop(job, "stop requested before the controller restarted");
    }
  }
  spdlog::info("recovered {} nodes and {} unfinished jobs", nodes_.size(), jobs_.size());
  RunScheduler();
  auto updates = std::move(updates_);
  updates_.clear();
  AttachMemory(updates);
  if (!updates.empty()) GF_RETURN_IF_ERROR(store_.Update(updates));
  return Status::Ok();
}

void Engine::AttachMemory(std::vector<store::JobUpdate>& updates) const {
  for (store::JobUpdate& u : updates) u.memory = scheduler_->MemoryOf(u.job.id);
}

std::vector<store::JobMemoryRecord> Engine::TakeChangedMemory(const std::vector<store::JobUpdate>& updates) {
  for (const store::JobUpdate& u : updates) memory_changed_.erase(u.job.id.value());
  std::vector<store::JobMemoryRecord> out;
  for (int64_t id : memory_changed_) {
    if (auto m = scheduler_->MemoryOf(JobId(id))) out.push_back({JobId(id), *m});
  }
  memory_changed_.clear();
  return out;
}

namespace {

std::string CpuText(int64_t milli) {
  std::string s = std::to_string(milli / 1000);
  if (milli % 1000) {
    std::string frac = std::to_string(1000 + milli % 1000).substr(1);
    while (!frac.empty() && frac.back() == '0') frac.pop_back();
    s += "." + frac;
  }
  return s + (milli == 1000 ? " CPU" : " CPUs");
}

std::string MemText(int64_t mib) {
  if (mib >= 1024 && mib % 1024 == 0) return std::to_string(mib / 1024) + " GiB";
  return std::to_string(mib) + " MiB";
}

}  // namespace

// Whether two jobs ask for the same things of a node: every field of the spec that NeverFitsLocked
// reads (all but the name, which only its message names, and those that say nothing of nodes).
bool Engine::SameNeeds(const model::JobSpec& a, const model::JobSpec& b) {
  return a.gpus_per_node == b.gpus_per_node && a.nodes == b.nodes && a.gpu_milli == b.gpu_milli &&
         a.gpu_models == b.gpu_models && a.cpu_milli == b.cpu_milli && a.mem_mib == b.mem_mib &&
         a.constraints == b.constraints && a.market == b.market && a.environment == b.environment;
}

std::string Engine::NeverFitsLocked(const api::JobRequest& job) const {
  const model::JobSpec& spec = job.spec;
  // An environment must be one of the presets, whatever the nodes.
  if (!spec.environment.empty()) {
    if (!options_.environments) {
      return "job '" + spec.name + "' names environment '" + spec.environment +
             "' but this controller has no environment presets (gpufleet server --environments FILE)";
    }
    auto env = options_.environments->Resolve(spec.environment);
    if (!env.ok()) return "job '" + spec.name + "': " + env.status().message();
  }
  // With a pool, what it may rent decides (it holds jobs no offer fits); nodes may be on the way.
  if (!node_size_hints_.empty()) return "";
  std::vector<const api::NodeRecord*> nodes;
  for (const auto& [id, n] : nodes_) {
    if (n.rec.state != api::NodeState::kGone) nodes.push_back(&n.rec);
  }
  if (nodes.empty()) return "";
  const bool wants_gpu = spec.fractional() || spec.gpus_per_node > 0;
  std::string intro = "job '" + spec.name + "' can never run on this cluster: ";
  std::string advice = "; ask for less, or add a node that has it";
  // Narrow the nodes one requirement at a time; the first that leaves none is the reason.
  auto keep = [&](auto&& ok) {
    std::vector<const api::NodeRecord*> left;
    for (const auto* n : nodes) {
      if (ok(n->spec)) left.push_back(n);
    }
    return left;
  };
  auto next = keep([&](const model::NodeSpec& n) {
    if (!wants_gpu) return true;
    if (n.gpus == 0) return false;
    return spec.gpu_models.empty() ||
           std::find(spec.gpu_models.begin(), spec.gpu_models.end(), n.gpu_model) != spec.gpu_models.end();
  });
  if (next.empty()) {
    std::set<std::string> have;
    for (const auto* n : nodes) {
      if (n->spec.gpus > 0) have.insert(n->spec.gpu_model);
    }
    std::vector<std::string> have_list(have.begin(), have.end());
    return intro + "no node has " + (spec.gpu_models.empty() ? std::string("GPUs") : Join(spec.gpu_models, " or ")) +
           " (the nodes have " + (have.empty() ? std::string("no GPUs") : Join(have_list, ", ")) + ")" + advice;
  }
  nodes = std::move(next);
  next = keep([&](const model::NodeSpec& n) {
    switch (spec.market) {
      case model::MarketPreference::kAny: return true;
      case model::MarketPreference::kOnDemand: return n.market != model::Market::kSpot;
      case model::MarketPreference::kSpot: return n.market == model::Market::kSpot;
    }
    return true;
  });
  if (next.empty()) {
    return intro + "no node that has its GPUs is " +
           (spec.market == model::MarketPreference::kSpot ? "a spot node" : "on-demand or reserved") + advice;
  }
  nodes = std::move(next);
  next = keep([&](const model::NodeSpec& n) {
    for (const auto& [k, v] : spec.constraints) {
      auto it = n.labels.find(k);
      if (it == n.labels.end() || it->second != v) return false;
    }
    return true;
  });
  if (next.empty()) {
    std::vector<std::string> kv;
    for (const auto& [k, v] : spec.constraints) kv.push_back(k + "=" + v);
    return intro + "no node that has its GPUs carries the labels " + Join(kv, ",") + advice;
  }
  nodes = std::move(next);
  if (!spec.environment.empty() && options_.environments) {
    next = keep([&](const model::NodeSpec& n) { return n.Supports(spec.environment); });
    if (next.empty()) {
      // Say why for each node (up to a few): the driver or GPU architecture that rules it out.
      const node::Environment* env = options_.environments->Find(spec.environment);
      std::vector<std::string> why;
      for (const auto* n : nodes) {
        if (why.size() == 3) {
          why.push_back("...");
          break;
        }
        why.push_back(n->name + ": " + (env ? node::EnvironmentTable::WhyNot(*env, FactsOf(*n)) : std::string("?")));
      }
      return intro + "no node that has its GPUs can run environment " + spec.environment + " (" + Join(why, "; ") +
             "); pick an environment these nodes support (gpufleet nodes NODE lists them), or upgrade the driver";
    }
    nodes = std::move(next);
  }
  // CPUs and memory: name the best node there is (gpufleet agent --cpus/--memory declare them).
  auto largest = [&](auto field) {
    const api::NodeRecord* best = nodes.front();
    for (const auto* n : nodes) {
      if (field(n->spec) > field(best->spec)) best = n;
    }
    return best;
  };
  next = keep([&](const model::NodeSpec& n) { return n.cpu_milli >= spec.cpu_milli; });
  if (next.empty()) {
    const auto* best = largest([](const model::NodeSpec& n) { return n.cpu_milli; });
    return intro + "it asks " + CpuText(spec.cpu_milli) + " per node (resources.cpus) but the most any node offers " +
           "is " + CpuText(best->spec.cpu_milli) + " (" + best->name + ")" + advice +
           " (gpufleet agent --cpus declares a node's CPUs)";
  }
  nodes = std::move(next);
  next = keep([&](const model::NodeSpec& n) { return n.mem_mib >= spec.mem_mib; });
  if (next.empty()) {
    const auto* best = largest([](const model::NodeSpec& n) { return n.mem_mib; });
    return intro + "it asks " + MemText(spec.mem_mib) + " of memory per node (resources.memory) but the most any " +
           "node offers is " + MemText(best->spec.mem_mib) + " (" + best->name + ")" + advice +
           " (gpufleet agent --memory declares a node's memory)";
  }
  return "";
}

void Engine::Enqueue(Request r) {
  {
    MutexLock lock(inbox_mu_);
    inbox_.push_back(std::move(r));
  }
  inbox_cv_.NotifyOne();
}

std::future<Result<SubmitReply>> Engine::Submit(std::string request_id, std::vector<api::JobRequest> jobs,
                                                std::optional<api::AuditRecord> audit) {
  SubmitReq r{std::move(request_id), std::move(jobs), std::move(audit), {}, {}};
  auto f = r.done.get_future();
  Enqueue(std::move(r));
  return f;
}

std::future<Status> Engine::Cancel(JobId job, std::string by, std::optional<api::AuditRecord> audit) {
  CancelReq r{job, std::move(by), std::move(audit), {}, {}};
  auto f = r.done.get_future();
  Enqueue(std::move(r));
  return f;
}

std::future<Result<CancelManyReply>> Engine::CancelMany(std::vector<JobId> jobs, std::string by,
                                                        std::function<bool(const std::string& team)> may_cancel,
                                                        std::optional<api::AuditRecord> audit,
                                                        CancelManyOptions options) {
  std::sort(jobs.begin(), jobs.end());
  jobs.erase(std::unique(jobs.begin(), jobs.end()), jobs.end());
  CancelManyReq r{std::move(jobs), std::move(by), std::move(may_cancel), std::move(audit), std::move(options), {}, {}};
  auto f = r.done.get_future();
  Enqueue(std::move(r));
  return f;
}

std::vector<std::optional<std::string>> Engine::UnfinishedTeams(const std::vector<JobId>& jobs) const {
  std::vector<std::optional<std::string>> out;
  out.reserve(jobs.size());
  MutexLock lock(mu_);
  for (JobId id : jobs) {
    auto it = jobs_.find(id.value());
    out.push_back(it == jobs_.end() ? std::nullopt : std::optional<std::string>(it->second.rec.request.spec.team));
  }
  return out;
}

std::future<Status> Engine::Drain(const std::string& node, bool drain, std::optional<api::AuditRecord> audit) {
  DrainReq r{node, drain, false, std::move(audit), {}, {}, false};
  auto f = r.done.get_future();
  Enqueue(std::move(r));
  return f;
}

std::future<Status> Engine::CheckNode(const std::string& node, std::optional<api::AuditRecord> audit) {
  DrainReq r{node, true, false, std::move(audit), {}, {}, true};
  auto f = r.done.get_future();
  Enqueue(std::move(r));
  return f;
}

void Engine::RequireBurnIn(const std::string& node) {
  MutexLock lock(burn_in_mu_);
  burn_in_names_.insert(node);
}

bool Engine::TakesWork(const NodeState& n) {
  return n.rec.state == api::NodeState::kUp && !n.awaiting_agent && n.rec.acceptance != "checking" &&
         n.rec.acceptance != "quarantined" && n.storage_fault.empty();
}

void Engine::SetStorageFault(NodeId id, NodeState& n, const std::string& fault) {
  if (fault == n.storage_fault) return;
  const bool before = TakesWork(n);
  if (fault.empty()) {
    spdlog::info("node {}: its agent can keep its files again; it takes work", n.rec.name);
  } else if (n.storage_fault.empty()) {
    spdlog::warn("node {} takes no work: {}", n.rec.name, fault);
  }
  n.storage_fault = fault;
  if (TakesWork(n) != before) events_.push_back(sched::NodeDrained{id, !TakesWork(n)});
}

node::NodeFacts Engine::FactsOf(const api::NodeRecord& rec) const {
  node::NodeFacts f;
  f.driver_version = rec.driver_version;
  f.cuda_version = rec.cuda_version;
  for (const auto& g : rec.gpus) f.compute_capabilities.push_back(g.compute_capability);
  return f;
}

void Engine::SetEnvironments(model::NodeSpec& spec, const api::NodeRecord& rec) const {
  spec.environments.clear();
  spec.warm_environments.clear();
  if (!options_.environments) return;
  spec.environments = options_.environments->Supported(FactsOf(rec));
  for (const auto& e : rec.environments_ready) {
    if (spec.Supports(e)) spec.warm_environments.push_back(e);
  }
}

void Engine::ApplyBurnIn(NodeId id, NodeState& n, model::BurnInReport report) {
  node::JudgeOptions o;
  o.threshold = options_.burn_in_threshold;
  o.gpu = catalog_.Find(n.rec.spec.gpu_model);
  std::vector<const model::BurnInReport*> peers;
  for (const auto& [other_id, other] : nodes_) {
    if (other_id == id.value() || other.rec.acceptance != "passed" || !other.rec.burn_in) continue;
    const model::BurnInReport& b = *other.rec.burn_in;
    if (b.passed && b.path == report.path && other.rec.spec.gpu_model == n.rec.spec.gpu_model) peers.push_back(&b);
  }
  o.fleet = node::FleetMedians(peers);
  report.gpu_model = n.rec.spec.gpu_model;
  report.gpus = n.rec.spec.gpus;
  node::Judge(report, o);
  const bool before = TakesWork(n);
  n.rec.acceptance = report.passed ? "passed" : "quarantined";
  n.rec.acceptance_reason = report.passed ? "" : node::Summary(report);
  if (report.passed) {
    spdlog::info("node {}: burn-in {}", n.rec.name, node::Summary(report));
  } else {
    spdlog::warn("node {} quarantined: burn-in {}", n.rec.name, node::Summary(report));
  }
  n.rec.burn_in = std::move(report);
  if (auto st = store_.UpsertNode(n.rec); !st.ok()) {
    spdlog::error("node {}: storing its burn-in: {}", n.rec.name, st.status().ToString());
  }
  if (TakesWork(n) != before) events_.push_back(sched::NodeDrained{id, !TakesWork(n)});
}

std::future<Status> Engine::HoldUntilRegistered(const std::string& node) {
  DrainReq r{node, true, true, std::nullopt, {}, {}, false};
  auto f = r.done.get_future();
  Enqueue(std::move(r));
  return f;
}

void Engine::ChargeNode(std::string node, std::string team, int64_t price_micros_per_hour, Time since) {
  Enqueue(ChargeReq{std::move(node), std::move(team), price_micros_per_hour, since, false});
}

void Engine::EndNodeCharge(std::string node) { Enqueue(ChargeReq{std::move(node), {}, 0, {}, true}); }

std::future<Status> Engine::Release(std::string node, bool only_if_idle, std::string reason) {
  ReleaseReq r{std::move(node), only_if_idle, std::move(reason), {}, {}};
  auto f = r.done.get_future();
  Enqueue(std::move(r));
  return f;
}

std::future<Result<api::RegisterReply>> Engine::Register(api::RegisterRequest request, std::string token_hash,
                                                         bool by_join_token) {
  return Register(std::move(request), std::move(token_hash), by_join_token, std::nullopt);
}

std::future<Result<api::RegisterReply>> Engine::Register(api::RegisterRequest request, std::string token_hash,
                                                         bool by_join_token, std::optional<api::AuditRecord> audit) {
  RegisterReq r{std::move(request), std::move(token_hash), by_join_token, std::move(audit), {}, {}};
  auto f = r.done.get_future();
  Enqueue(std::move(r));
  return f;
}

std::future<Result<api::HeartbeatReply>> Engine::Heartbeat(NodeId node, api::Heartbeat heartbeat) {
  HeartbeatReq r{node, std::move(heartbeat), {}, {}};
  auto f = r.done.get_future();
  Enqueue(std::move(r));
  return f;
}

std::future<Status> Engine::SetBudget(std::string team, sched::TeamBudget budget,
                                     std::optional<api::AuditRecord> audit) {
  BudgetReq r{std::move(team), budget, std::move(audit), {}, {}};
  auto f = r.done.get_future();
  Enqueue(std::move(r));
  return f;
}

std::future<Status> Engine::SetQuota(std::string team, sched::TeamQuota quota,
                                    std::optional<api::AuditRecord> audit) {
  QuotaReq r{std::move(team), std::move(quota), std::move(audit), {}, {}};
  auto f = r.done.get_future();
  Enqueue(std::move(r));
  return f;
}

std::future<Status> Engine::Restart(JobId job, std::string reason) {
  RestartReq r{job, std::move(reason), {}, {}};
  auto f = r.done.get_future();
  Enqueue(std::move(r));
  return f;
}

void Engine::ApplyRestart(RestartReq& r) {
  auto it = jobs_.find(r.job.value());
  if (it == jobs_.end() || (it->second.rec.state != JobState::kRunning && it->second.rec.state != JobState::kStarting)) {
    r.result = Status::FailedPrecondition("job " + std::to_string(r.job.value()) + " is not running");
    return;
  }
  Job& job = it->second;
  if (job.stop_requested || job.failing || job.cancel_requested || job.restart_requested) {
    r.result = Status::FailedPrecondition("job " + std::to_string(r.job.value()) + " is already stopping");
    return;
  }
  if (job.stall_restarts >= kMaxStallRestarts) {
    r.result = Status::ResourceExhausted("job " + std::to_string(r.job.value()) + " was restarted for stalling " +
                                         std::to_string(job.stall_restarts) + " times already; it is only flagged now");
    return;
  }
  job.restart_requested = true;
  job.restart_text = r.reason;
  Transition(job, JobState::kStopping, r.reason);
  SendStop(job, r.reason);
  MaybeFinishAttempt(job);
  r.result = Status::Ok();
}

namespace {
bool Watched(const api::JobRecord& rec) {
  return rec.state == api::JobState::kRunning || rec.state == api::JobState::kStarting;
}
}  // namespace

std::optional<Engine::JobWatch> Engine::WatchOf(JobId id) const {
  MutexLock lock(mu_);
  auto it = jobs_.find(id.value());
  if (it == jobs_.end() || !Watched(it->second.rec)) return std::nullopt;
  return WatchLocked(it->second);
}

std::vector<Engine::JobWatch> Engine::RunningJobs() const {
  MutexLock lock(mu_);
  std::vector<JobWatch> out;
  for (const auto& [id, job] : jobs_) {
    if (Watched(job.rec)) out.push_back(WatchLocked(job));
  }
  return out;
}

Engine::JobWatch Engine::WatchLocked(const Job& job) const {
  JobWatch w;
  w.id = job.rec.id;
  w.name = job.rec.request.spec.name;
  w.team = job.rec.request.spec.team;
  w.started = job.attempt_started;
  w.watchdog = job.rec.request.watchdog;
  w.last_output = job.last_output;
  w.progress_at = job.progress_at;
  w.step = job.step;
  w.loss = job.loss;
  if (job.rec.placement) w.parts = job.rec.placement->parts;
  return w;
}

Engine::Stats Engine::stats() const {
  MutexLock lock(mu_);
  return stats_;
}

Status Engine::SaveQuotas() {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [team, q] : quotas_) {
    j[team] = {{"gpus", q.gpus},
               {"model_gpus", q.model_gpus},
               {"borrow", q.borrow},
               {"max_running_jobs", q.max_running_jobs},
               {"max_pending_jobs", q.max_pending_jobs}};
  }
  return store_.SetMeta("quotas", j.dump());
}

void Engine::ApplyQuota(QuotaReq& r) {
  auto before = quotas_;
  if (r.quota.empty()) {
    quotas_.erase(r.team);
  } else {
    quotas_[r.team] = r.quota;
  }
  if (r.audit) store_.AttachAudit({*r.audit});  // commits with the quota, or not at all
  Status st = SaveQuotas();
  if (!st.ok()) {
    quotas_ = before;  // nothing changes when it cannot be stored
    r.result = st;
    return;
  }
  scheduler_->SetTeamQuota(r.team, r.quota);
  events_.push_back(sched::Timer{});  // a new pass: the quota may free or hold jobs
  r.result = Status::Ok();
}

std::vector<Engine::TeamQuotaView> Engine::Quotas() const {
  MutexLock lock(mu_);
  std::vector<TeamQuotaView> out;
  for (const std::string& team : scheduler_->Teams()) {
    TeamQuotaView v{team, scheduler_->QuotaOf(team), scheduler_->LoadOf(team)};
    if (v.quota.empty() && v.load.running_jobs == 0 && v.load.pending_jobs == 0) continue;
    out.push_back(std::move(v));
  }
  return out;
}

Status Engine::SaveBudgets() {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [team, b] : budgets_) {
    j[team] = {{"since_ms", b.since.millis()},
               {"hard_micros", b.hard_micros},
               {"soft_micros", b.soft_micros},
               {"max_rate_micros", b.max_rate_micros},
               {"stop_running", b.stop_running},
               {"period", CalendarPeriodName(b.period)},
               {"hard_stopped_since_ms",
                hard_stopped_.contains(team) ? nlohmann::json(hard_stopped_.at(team).millis()) : nlohmann::json(nullptr)}};
  }
  return store_.SetMeta("budgets", j.dump());
}

void Engine::NoteHardStops() {
  // What the core says now; kept (and compared with at the next pass) only once it is saved, so
  // that a failed save is tried again rather than forgotten.
  std::map<std::string, Time> now;
  for (const auto& [team, b] : budgets_) {
    if (const std::optional<Time> in = scheduler_->HardStoppedIn(team)) now[team] = *in;
  }
  if (now == hard_stopped_) return;
  std::swap(now, hard_stopped_);
  if (Status st = SaveBudgets(); !st.ok()) {
    std::swap(now, hard_stopped_);
    spdlog::warn("budgets: cannot save which teams are stopped (tried again at the next pass): {}", st.message());
  }
}

void Engine::ApplyBudget(BudgetReq& r) {
  bool none = r.budget.hard_micros == 0 && r.budget.soft_micros == 0 && r.budget.max_rate_micros == 0;
  auto before = budgets_;
  auto stopped_before = hard_stopped_;
  // Saved with the budget: a stop that the new budget ends (as Scheduler::SetTeamBudget judges:
  // a new start or period, a larger or no hard limit) is not restored after a restart.
  if (auto old = budgets_.find(r.team); old != budgets_.end() &&
      (none || r.budget.since != old->second.since || r.budget.period != old->second.period ||
       r.budget.hard_micros > old->second.hard_micros || r.budget.hard_micros == 0)) {
    hard_stopped_.erase(r.team);
  }
  if (none) {
    budgets_.erase(r.team);
  } else {
    budgets_[r.team] = r.budget;
  }
  if (r.audit) store_.AttachAudit({*r.audit});  // commits with the budget, or not at all
  Status st = SaveBudgets();
  if (!st.ok()) {
    budgets_ = before;  // nothing changes when it cannot be stored
    hard_stopped_ = stopped_before;
    r.result = st;
    return;
  }
  sched::TeamBudget b = r.budget;
  // A rolling budget counts from the start of the current period (as Recover does).
  if (b.period != CalendarPeriod::kNone) b.since = std::max(b.since, PeriodStart(clock_.Now(), b.period));
  b.carried_micros = FinishedSpend(r.team, b.since);
  scheduler_->SetTeamBudget(r.team, b);
  events_.push_back(sched::Timer{});  // a new pass: the budget may free or hold jobs
  r.result = Status::Ok();
}

// What the team's jobs cost in runs that have ended, as their records say, for the records
// changed at or after `since`: a record's cost is written at each transition, so for a running
// job it holds its earlier runs (the scheduler counts the current one from its start), for a
// stopping one its runs up to the stop (the scheduler counts on from there). A job submitted
// before `since` counts only the share of its cost that its closed runs held their GPUs after
// `since` (read from its transitions; its nodes' prices are taken as one rate): a job that ran
// before a budget was set, or before its period began, and is requeued or ends inside it brings
// none of its earlier cost in (a restarted controller counted it whole).
int64_t Engine::FinishedSpend(const std::string& team, Time since) {
  store::JobFilter f;
  f.team = team;
  auto jobs = store_.ListJobs(f);
  if (!jobs.ok()) {
    spdlog::warn("budget of team {}: cannot count past spend: {}", team, jobs.status().message());
    return 0;
  }
  auto holds = [](JobState s) {
    return s == JobState::kStarting || s == JobState::kRunning || s == JobState::kStopping;
  };
  int64_t total = 0;
  for (const api::JobRecord& j : *jobs) {
    if (j.updated < since || j.cost_micros == 0) continue;
    // A record that holds its GPUs now has the current run's cost up to its last transition in
    // it, which the scheduler counts itself (from the run's start): that part is left out below.
    const bool holding = holds(j.state);
    if (j.submitted >= since && !holding) {
      total += j.cost_micros;
      continue;
    }
    auto history = store_.History(j.id);
    if (!history.ok()) {
      spdlog::warn("budget of team {}: job {}'s history: {}; counting its whole cost", team, j.id.value(),
                   history.status().message());
      total += j.cost_micros;
      continue;
    }
    // Closed holding intervals only: an open one (the current run) is not in cost_micros.
    int64_t held = 0, held_after = 0;
    std::optional<Time> from;
    for (const api::Transition& t : *history) {
      const bool was = holds(t.from), is = holds(t.to);
      if (is && !was) from = t.at;
      if (was && !is && from) {  // (starting -> running -> stopping is one run)
        held += (t.at - *from).millis();
        held_after += std::max<int64_t>(0, (t.at - std::max(*from, since)).millis());
        from.reset();
      }
    }
    // The open run, up to the record's last transition, shares the record's cost by its time.
    const int64_t open = from ? std::max<int64_t>(0, (j.updated - *from).millis()) : 0;
    if (held + open <= 0) {
      if (!holding) total += j.cost_micros;
      continue;
    }
    total += static_cast<int64_t>(static_cast<__int128>(j.cost_micros) * held_after / (held + open));
  }
  return total;
}

std::vector<Engine::TeamCost> Engine::TeamCosts() const {
  // Every job's cost, also of jobs that ended (before a restart too): a team without a budget
  // whose jobs have all finished still spent money.
  MutexLock lock(mu_);
  std::set<std::string> teams;
  std::map<std::string, int64_t> all_time = ended_cost_;  // all runs of every job, live ones to now
  for (const auto& [team, b] : budgets_) teams.insert(team);
  for (const auto& [team, cost] : ended_cost_) {
    if (cost > 0) teams.insert(team);
  }
  for (const auto& [id, job] : jobs_) {
    teams.insert(job.rec.request.spec.team);
    all_time[job.rec.request.spec.team] += std::max(job.rec.cost_micros, scheduler_->CostOf(job.rec.id));
  }
  std::vector<TeamCost> out;
  for (const auto& team : teams) {
    TeamCost c;
    c.team = team;
    c.spend = scheduler_->SpendOf(team);
    if (auto it = budgets_.find(team); it != budgets_.end()) {
      c.budget = it->second;
    } else {
      // Without a budget, spend counts from the beginning: the records know what the scheduler
      // (since this controller started) does not.
      c.spend.spent_micros = std::max(c.spend.spent_micros, all_time[team] + c.spend.rented_idle_micros);
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::map<int64_t, int64_t> Engine::LiveJobCosts() const {
  MutexLock lock(mu_);
  std::map<int64_t, int64_t> out;
  for (const auto& [id, job] : jobs_) out[id] = scheduler_->CostOf(job.rec.id);
  return out;
}

bool Engine::Step() {
  Time now = clock_.Now();
  std::vector<Request> batch;
  {
    MutexLock lock(inbox_mu_);
    batch.swap(inbox_);
  }

  // 1. Submissions: one transaction for all of them.
  std::vector<store::Submission> subs;
  std::vector<SubmitReq*> sub_reqs;
  // Per submission: why it is refused (ok: it is not). A refused one still asks the store
  // whether its request id was taken before: a retry of a submission that was taken gets its
  // jobs back, even when the team is now at its limit or the job would not be taken today.
  std::vector<Status> refusals;
  std::map<std::string, int64_t> admitted;  // jobs per team admitted in this batch so far
  for (auto& r : batch) {
    if (auto* s = std::get_if<SubmitReq>(&r)) {
      std::string never, full;
      std::map<std::string, int64_t> adding;
      for (const api::JobRequest& j : s->jobs) ++adding[j.spec.team];
      {
        MutexLock lock(mu_);
        // The tasks of an array differ in name, command and environment, not in what the check
        // reads: check a task only when its needs differ from the last one checked.
        const api::JobRequest* checked = nullptr;
        for (size_t i = 0; i < s->jobs.size() && never.empty(); ++i) {
          if (checked && SameNeeds(checked->spec, s->jobs[i].spec)) continue;
          never = NeverFitsLocked(s->jobs[i]);
          checked = &s->jobs[i];
        }
        // Admission: a team may not queue more jobs than its pending-job limit.
        for (const auto& [team, n] : adding) {
          if (full.empty()) full = scheduler_->AdmissionBlock(team, admitted[team] + n);
        }
      }
      if (!never.empty() || !full.empty()) {
        store::Submission retry;
        retry.request_id = s->request_id;
        retry.only_if_seen = true;
        subs.push_back(std::move(retry));
        sub_reqs.push_back(s);
        refusals.push_back(!never.empty() ? Status::InvalidArgument(never) : Status::ResourceExhausted(full));
        continue;
      }
      for (const auto& [team, n] : adding) admitted[team] += n;
      refusals.push_back(Status::Ok());
      store::Submission sub;
      sub.request_id = s->request_id;
      sub.audit = s->audit;
      sub.jobs.reserve(s->jobs.size());
      for (size_t i = 0; i < s->jobs.size(); ++i) {
        api::JobRecord rec;
        rec.request = std::move(s->jobs[i]);
        rec.request.spec.submit = now;
        rec.request_id = s->request_id;
        rec.array_index = s->jobs.size() > 1 || !rec.request.array_params.empty() ? static_cast<int>(i) : -1;
        rec.state = JobState::kPending;
        rec.reason = "submitted";
        rec.submitted = now;
        rec.updated = now;
        sub.jobs.push_back(std::move(rec));
      }
      subs.push_back(std::move(sub));
      sub_reqs.push_back(s);
    }
  }
  // The store hands the records back in the outcomes, so they are moved, never copied.
  Result<std::vector<store::SubmitOutcome>> outcomes = std::vector<store::SubmitOutcome>{};
  if (!subs.empty()) {
    auto t0 = std::chrono::steady_clock::now();
    outcomes = store_.Submit(std::move(subs));
    commit_seconds_.Record(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }

  std::vector<store::JobUpdate> updates;
  std::vector<store::JobMemoryRecord> changed_memory;
  std::vector<std::pair<NodeId, api::Command>> commands;
  std::vector<api::AuditRecord> step_audit;
  bool did = !batch.empty();
  {
    MutexLock lock(mu_);
    ++counters_.steps;
    if (!sub_reqs.empty()) {
      counters_.store_ok = outcomes.ok();
      if (!outcomes.ok()) {
        ++counters_.store_errors;
        for (size_t i = 0; i < sub_reqs.size(); ++i) {
          sub_reqs[i]->result = Result<SubmitReply>(refusals[i].ok() ? outcomes.status() : refusals[i]);
        }
      } else {
        for (size_t i = 0; i < sub_reqs.size(); ++i) {
          store::SubmitOutcome& o = (*outcomes)[i];
          if (!refusals[i].ok() && o.ids.empty()) {
            sub_reqs[i]->result = Result<SubmitReply>(refusals[i]);
            continue;
          }
          SubmitReply reply;
          reply.ids = o.ids;
          reply.created = o.created;
          reply.names.reserve(o.ids.size());
          // Grown at least twofold: a step may hold many submissions, each reserving its room.
          if (o.created && events_.size() + o.ids.size() > events_.capacity()) {
            events_.reserve(std::max(events_.size() + o.ids.size(), 2 * events_.capacity()));
          }
          for (size_t k = 0; k < o.ids.size() && k < o.jobs.size(); ++k) {
            reply.names.push_back(o.jobs[k].request.spec.name);
            if (!o.created) continue;
            Job job;
            job.rec = std::move(o.jobs[k]);
            job.rec.id = o.ids[k];
            events_.push_back(
                sched::JobSubmitted{job.rec.id, job.rec.request.spec, 0, job.rec.request.checkpoint.grace});
            // New ids are above every id in the table: the hint makes each insert constant time.
            jobs_.insert_or_assign(jobs_.end(), o.ids[k].value(), std::move(job));
            ++counters_.submits;
          }
          sub_reqs[i]->result = Result<SubmitReply>(std::move(reply));
        }
      }
    }
    for (auto& r : batch) {
      std::visit(
          [&](auto& req) {
            mu_.AssertHeld();  // std::visit runs it here, within the lock above
            using T = std::decay_t<decltype(req)>;
            if constexpr (std::is_same_v<T, CancelReq>) ApplyCancel(req);
            if constexpr (std::is_same_v<T, CancelManyReq>) ApplyCancelMany(req);
            if constexpr (std::is_same_v<T, DrainReq>) ApplyDrain(req);
            if constexpr (std::is_same_v<T, ReleaseReq>) ApplyRelease(req);
            if constexpr (std::is_same_v<T, RegisterReq>) ApplyRegister(req);
            if constexpr (std::is_same_v<T, HeartbeatReq>) ApplyHeartbeat(req);
            if constexpr (std::is_same_v<T, BudgetReq>) ApplyBudget(req);
            if constexpr (std::is_same_v<T, QuotaReq>) ApplyQuota(req);
            if constexpr (std::is_same_v<T, RestartReq>) ApplyRestart(req);
            if constexpr (std::is_same_v<T, ChargeReq>) {
              if (req.end) {
                scheduler_->EndNodeCharge(req.node);
              } else {
                scheduler_->ChargeNode(req.node, req.team, req.price_micros_per_hour, req.since);
              }
              did = true;
            }
          },
          r);
    }
    size_t before = events_.size();
    CheckHeartbeats();
    if (events_.size() != before) did = true;
    if (auto wake = scheduler_->NextWakeup(); wake && *wake <= now) {
      for (JobId id : scheduler_->RerankedAt(now)) memory_changed_.insert(id.value());
      events_.push_back(sched::Timer{});
      did = true;
    }
    RunScheduler();
    updates.swap(updates_);
    commands.swap(commands_);
    step_audit.swap(step_audit_);
    AttachMemory(updates);
    changed_memory = TakeChangedMemory(updates);
  }

  // 4. The transitions, in one transaction, before anyone hears of them; the cancels asked for
  // in this step are recorded with them. What an earlier failed commit left goes first.
  if (!unsaved_updates_.empty()) {
    updates.insert(updates.begin(), std::make_move_iterator(unsaved_updates_.begin()),
                   std::make_move_iterator(unsaved_updates_.end()));
    unsaved_updates_.clear();
    commands.insert(commands.begin(), std::make_move_iterator(held_commands_.begin()),
                    std::make_move_iterator(held_commands_.end()));
    held_commands_.clear();
  }
  Status committed = Status::Ok();
  if (!updates.empty()) {
    if (!step_audit.empty()) store_.AttachAudit(step_audit);
    auto t0 = std::chrono::steady_clock::now();
    committed = store_.Update(updates);
    commit_seconds_.Record(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    for (int attempt = 0; !committed.ok() && attempt < 3; ++attempt) {
      if (!step_audit.empty()) store_.AttachAudit(step_audit);
      committed = store_.Update(updates);
    }
    MutexLock lock(mu_);
    counters_.store_ok = committed.ok();
    if (!committed.ok()) {
      ++counters_.store_errors;
      spdlog::error("store: {}; holding {} transition(s) and {} command(s) until the store takes them",
                    committed.message(), updates.size(), commands.size());
    }
  }
  if (!committed.ok()) {
    // Nothing of this step goes out: no agent may start what the disk does not say.
    unsaved_updates_ = std::move(updates);
    held_commands_ = std::move(commands);
    commands.clear();
    for (auto& r : batch) {
      std::visit(
          [&](auto& req) {
            using T = std::decay_t<decltype(req)>;
            // A cancel's change is among the held transitions: its caller hears so. (A submit's
            // jobs were committed in step 1; agents' reports are applied and their transitions
            // held, and drains, budgets and registrations wrote their own records.)
            if constexpr (std::is_same_v<T, CancelReq> || std::is_same_v<T, CancelManyReq>) {
              bool changed = req.result && req.result->ok();
              if constexpr (std::is_same_v<T, CancelManyReq>) changed = changed && !(*req.result)->refused();
              if (changed) {
                // "retry" only where a retry can work (the store unreachable or busy), not for a
                // damaged one, which answers as a submit's write does.
                const std::string why = "the controller's store could not record this change (" + committed.message() + ")";
                req.result = committed.code() == StatusCode::kUnavailable ? Status::Unavailable(why + "; retry")
                                                                          : Status::Internal(why);
              }
            }
            // An agent's events whose transitions are held, not stored, stay unacknowledged: the
            // agent keeps them and sends them again (this controller ignores what it applied
            // already), so a controller that stops before the store takes them (its lease lost
            // with the store) leaves them to the next one, which would otherwise find the part
            // gone and run a job that ended once more.
            if constexpr (std::is_same_v<T, HeartbeatReq>) {
              if (req.result && req.result->ok()) (*req.result)->acked = 0;
            }
          },
          r);
    }
  } else if (!step_audit.empty() && updates.empty()) {
    // A cancel that changed no record yet (the stop is under way): its record alone.
    if (Status st = store_.AppendAudit(step_audit); !st.ok()) spdlog::error("audit: {}", st.message());
  }
  // The scheduler's memory that changed without a transition. Nobody waits on it: a failed
  // write is tried again with the next step's.
  if (!changed_memory.empty()) {
    if (Status st = store_.SaveJobMemory(changed_memory); !st.ok()) {
      spdlog::warn("store: scheduler memory of {} job(s) not saved: {}", changed_memory.size(), st.message());
      MutexLock lock(mu_);
      for (const auto& m : changed_memory) memory_changed_.insert(m.job.value());
    }
  }
  // 5. Commands to the agents, then the answers.
  if (!commands.empty()) {
    MutexLock lock(out_mu_);
    for (auto& [node, cmd] : commands) {
      Outbox& box = outboxes_[node.value()];
      cmd.seq = box.next_seq++;
      box.commands.push_back(std::move(cmd));
    }
    out_cv_.NotifyAll();
  }
  for (auto& r : batch) {
    std::visit(
        [](auto& req) {
          using T = std::decay_t<decltype(req)>;
          if constexpr (!std::is_same_v<T, ChargeReq>) {
            if (req.result) {
              req.done.set_value(std::move(*req.result));
            } else {
              req.done.set_value(Status::Internal("the request was not processed"));
            }
          }
        },
        r);
  }
  return did || !updates.empty();
}

void Engine::RunScheduler() {
  for (int round = 0; round < 100 && !events_.empty(); ++round) {
    std::vector<sched::Event> ev;
    ev.swap(events_);
    auto t0 = std::chrono::steady_clock::now();
    Status st = scheduler_->HandleAll(ev);
    pass_seconds_.Record(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (!st.ok() && st.code() != StatusCode::kNotFound) spdlog::warn("scheduler: {}", st.message());
  }
  if (!budgets_.empty()) NoteHardStops();
}

std::optional<Time> Engine::NextDeadline() const {
  MutexLock lock(mu_);
  std::optional<Time> t = scheduler_->NextWakeup();
  for (const auto& [id, n] : nodes_) {
    if (n.rec.state != api::NodeState::kUp && n.rec.state != api::NodeState::kDraining) continue;
    Time due = n.last_seen + options_.lost_after;
    if (!t || due < *t) t = due;
  }
  return t;
}

void Engine::Run() {
  while (true) {
    {
      MutexLock lock(inbox_mu_);
      if (stopping_) return;
    }
    Step();
    std::optional<Time> deadline = NextDeadline();
    MutexLock lock(inbox_mu_);
    if (stopping_) return;
    if (!inbox_.empty()) continue;
    Duration wait = Duration::Seconds(1);
    if (deadline) {
      Duration until = *deadline - clock_.Now() + Duration::Millis(1);
      if (until < wait) wait = until;
    }
    if (wait <= Duration::Zero()) continue;
    const Duration waited_from = Monotonic();
    inbox_cv_.WaitFor(inbox_mu_, std::chrono::milliseconds(wait.millis()), [&] {
      inbox_mu_.AssertHeld();
      return stopping_ || !inbox_.empty();
    });
    // A wait of at most a second that took far longer: the process was stopped or the machine
    // suspended (a slow step needs no credit: heartbeats queue meanwhile and the next step applies
    // them before it checks).
    const Duration overrun = Monotonic() - waited_from - wait;
    if (overrun > Duration::Seconds(5)) {
      lock.Unlock();
      CreditStall(overrun);
    }
  }
}

void Engine::Stop() {
  {
    MutexLock lock(inbox_mu_);
    stopping_ = true;
  }
  inbox_cv_.NotifyAll();
  WakePollers();
}

void Engine::ReleasePollers() {
  {
    MutexLock lock(inbox_mu_);
    pollers_released_ = true;
  }
  WakePollers();
}

Engine::Counters Engine::counters() const {
  MutexLock lock(mu_);
  return counters_;
}

// --- Requests ----------------------------------------------------------------------------

void Engine::ApplyCancel(CancelReq& r) {
  auto it = jobs_.find(r.job.value());
  if (it == jobs_.end()) {
    auto rec = store_.GetJob(r.job);
    if (!rec.ok()) {
      r.result = rec.status();
    } else if (!*rec) {
      r.result = Status::NotFound("job " + std::to_string(r.job.value()) + " does not exist");
    } else {
      r.result = Status::FailedPrecondition("job " + std::to_string(r.job.value()) + " already " +
                                            api::JobStateName((*rec)->state));
    }
    return;
  }
  CancelUnfinished(it, r.by.empty() ? "" : " by " + r.by);
  if (r.audit) step_audit_.push_back(*r.audit);
  r.result = Status::Ok();
}

bool Engine::CancelUnfinished(std::map<int64_t, Job>::iterator it, const std::string& by) {
  Job& job = it->second;
  switch (job.rec.state) {
    case JobState::kPending:
    case JobState::kPreempted:
      Transition(job, JobState::kCancelled, "cancelled" + by + " while pending");
      events_.push_back(sched::JobCancelled{job.rec.id});
      jobs_.erase(it);
      return true;
    case JobState::kStopping:
      job.cancel_requested = true;
      // Stored as the stop's intent: a controller that restarts before the job exits ends it
      // cancelled, not requeued.
      Transition(job, JobState::kStopping, "cancel requested" + by + " while stopping");
      events_.push_back(sched::JobCancelled{job.rec.id});
      return false;
    default:
      job.cancel_requested = true;
      events_.push_back(sched::JobCancelled{job.rec.id});
      return false;
  }
}

void Engine::ApplyCancelMany(CancelManyReq& r) {
  CancelManyReply reply;
  // Every id is checked before anything changes. Unfinished jobs are in memory; an id that is not
  // ended as the caller found, or is read from the store (ended since, or no such job).
  for (JobId id : r.jobs) {
    auto it = jobs_.find(id.value());
    if (it != jobs_.end()) {
      const std::string& team = it->second.rec.request.spec.team;
      if (r.may_cancel && !r.may_cancel(team)) {
        if (r.options.skip_forbidden) {
          reply.skipped.emplace_back(id, "team " + team);
        } else {
          reply.forbidden.emplace_back(id, team);
        }
      }
      continue;
    }
    if (auto known = r.options.ended.find(id.value()); known != r.options.ended.end()) {
      reply.ended.emplace_back(id, known->second);  // (the caller checked its team)
      continue;
    }
    auto rec = store_.GetJob(id);
    if (!rec.ok()) {
      r.result = rec.status();
      return;
    }
    if (!*rec) {
      reply.missing.push_back(id);
    } else if (r.may_cancel && !r.may_cancel((*rec)->request.spec.team)) {
      if (r.options.skip_forbidden) {
        reply.skipped.emplace_back(id, "team " + (*rec)->request.spec.team);
      } else {
        reply.forbidden.emplace_back(id, (*rec)->request.spec.team);
      }
    } else {
      reply.ended.emplace_back(id, (*rec)->state);
    }
  }
  if (reply.refused()) {
    reply.ended.clear();
    reply.skipped.clear();
    r.result = std::move(reply);
    return;
  }
  const std::string by = r.by.empty() ? "" : " by " + r.by;
  const std::vector<api::JobState>& only = r.options.only;
  for (JobId id : r.jobs) {
    auto it = jobs_.find(id.value());
    if (it == jobs_.end()) continue;  // ended: listed above
    if (r.may_cancel && !r.may_cancel(it->second.rec.request.spec.team)) continue;  // skipped above
    if (!only.empty() && std::find(only.begin(), only.end(), it->second.rec.state) == only.end()) {
      reply.skipped.emplace_back(id, api::JobStateName(it->second.rec.state));
      continue;
    }
    (CancelUnfinished(it, by) ? reply.cancelled : reply.stopping).push_back(id);
  }
  std::sort(reply.skipped.begin(), reply.skipped.end());
  if (r.audit && (!reply.cancelled.empty() || !reply.stopping.empty())) {
    std::vector<int64_t> changed;
    changed.reserve(reply.cancelled.size() + reply.stopping.size());
    for (JobId id : reply.cancelled) changed.push_back(id.value());
    for (JobId id : reply.stopping) changed.push_back(id.value());
    std::sort(changed.begin(), changed.end());
    api::AuditRecord audit = *r.audit;
    audit.object = api::JobsAuditObject(changed);
    step_audit_.push_back(std::move(audit));
  }
  r.result = std::move(reply);
}

void Engine::ApplyDrain(DrainReq& r) {
  auto it = node_by_name_.find(r.node);
  if (it == node_by_name_.end()) {
    r.result = Status::NotFound("no node named '" + r.node + "'");
    return;
  }
  NodeState& n = nodes_[it->second];
  if (n.rec.state == api::NodeState::kLost && !r.check && !r.until_registered) {
    // A lost node may come back (a reboot for maintenance): it comes back drained, or not.
    const bool was_drained = n.rec.drained;
    n.rec.drained = r.drain;
    if (r.audit) store_.AttachAudit({*r.audit});
    auto st = store_.UpsertNode(n.rec);
    if (!st.ok()) n.rec.drained = was_drained;  // refused: nothing changes
    r.result = st.ok() ? Status::Ok() : st.status();
    return;
  }
  if (n.rec.state == api::NodeState::kLost || n.rec.state == api::NodeState::kGone) {
    r.result = Status::FailedPrecondition("node '" + r.node + "' is " + api::NodeStateName(n.rec.state));
    return;
  }
  if (r.until_registered) {
    n.awaiting_agent = true;
    events_.push_back(sched::NodeDrained{n.rec.id, true});
    r.result = Status::Ok();
    return;
  }
  if (r.check) {
    for (const auto& [jid, job] : jobs_) {
      if (!job.rec.placement || (job.rec.state != JobState::kStarting && job.rec.state != JobState::kRunning &&
                                 job.rec.state != JobState::kStopping)) {
        continue;
      }
      for (const auto& part : job.rec.placement->parts) {
        if (part.node == n.rec.id) {
          r.result = Status::FailedPrecondition("node '" + r.node + "' runs job " + std::to_string(jid) +
                                                "; a burn-in would disturb it: drain the node first (gpufleet drain " +
                                                r.node + ") and check it once its jobs are gone");
          return;
        }
      }
    }
    const bool before = TakesWork(n);
    const api::NodeRecord was = n.rec;
    n.rec.acceptance = "checking";
    n.rec.acceptance_reason = "burn-in asked for by an operator";
    if (r.audit) store_.AttachAudit({*r.audit});
    auto st = store_.UpsertNode(n.rec);
    if (!st.ok()) {
      n.rec = was;  // refused: nothing changes (the caller is told it failed)
      r.result = st.status();
      return;
    }
    n.burn_in_request = ++next_burn_in_request_;
    if (before) events_.push_back(sched::NodeDrained{n.rec.id, true});
    r.result = Status::Ok();
    return;
  }
  if (!r.drain && n.notice) {
    // Its provider is taking it back: a job placed there would be stopped at the next heartbeat.
    r.result = Status::FailedPrecondition("node '" + r.node + "' has a spot interruption notice (the provider will " +
                                          n.notice->action + " it at " + FormatIso8601(n.notice->time) +
                                          "): it stays drained until it leaves the cluster");
    return;
  }
  const bool before = TakesWork(n);
  const api::NodeRecord was = n.rec;
  n.rec.state = r.drain ? api::NodeState::kDraining : api::NodeState::kUp;
  n.rec.drained = r.drain;
  if (r.audit) store_.AttachAudit({*r.audit});  // commits with the node's new state, or not at all
  auto st = store_.UpsertNode(n.rec);
  if (!st.ok()) {
    // Refused: the node stays as the store has it (applied here alone, a restart or a takeover
    // would undo it without a word, and the caller was told it failed).
    n.rec = was;
    r.result = st.status();
    return;
  }
  // An undrained node whose agent has not registered since, or that has not passed its burn-in,
  // takes work once it has.
  if (r.drain || TakesWork(n) != before) events_.push_back(sched::NodeDrained{n.rec.id, !TakesWork(n)});
  r.result = Status::Ok();
}

void Engine::ApplyRelease(ReleaseReq& r) {
  auto it = node_by_name_.find(r.node);
  if (it == node_by_name_.end()) {
    r.result = Status::NotFound("no node named '" + r.node + "'");
    return;
  }
  NodeState& n = nodes_[it->second];
  if (n.rec.state == api::NodeState::kGone) {
    r.result = Status::Ok();
    return;
  }
  const NodeId node(it->second);
  for (const auto& [jid, job] : jobs_) {
    if (!job.rec.placement || !r.only_if_idle) continue;
    if (job.rec.state != JobState::kStarting && job.rec.state != JobState::kRunning &&
        job.rec.state != JobState::kStopping) {
      continue;
    }
    for (const auto& part : job.rec.placement->parts) {
      if (part.node == node) {
        r.result = Status::FailedPrecondition("node '" + r.node + "' runs job " + std::to_string(jid));
        return;
      }
    }
  }
  const api::NodeState was = n.rec.state;
  n.rec.state = api::NodeState::kGone;
  auto st = store_.UpsertNode(n.rec);
  if (!st.ok()) {
    // Refused: the node stays (the caller keeps its instance and tries again).
    n.rec.state = was;
    r.result = st.status();
    return;
  }
  spdlog::info("node {} released: {}", r.node, r.reason);
  // Parts still there end with the machine; their jobs are requeued (NodeDown).
  LosePartsOn(node, "node " + r.node + " released: " + r.reason);
  r.result = Status::Ok();
}

void Engine::ApplyRegister(RegisterReq& r) {
  const api::RegisterRequest& req = r.req;
  Time now = clock_.Now();
  // The node routes (/v1/nodes/NAME/drain, ...) take these characters only: a name outside them
  // could register but never be drained or checked.
  if (!api::ValidNodeName(req.name)) {
    r.result = Status::InvalidArgument("register: the node name must be 1-253 letters, digits, '.', '_' or '-', got '" +
                                       req.name + "' (the agent's --name; the default is the host name)");
    return;
  }
  model::NodeSpec spec = req.spec;
  spec.name = req.name;
  if (spec.gpus > 0) {
    const model::GpuModel* m = catalog_.Find(spec.gpu_model);
    if (!m) {
      r.result = Status::InvalidArgument("register: unknown GPU model '" + spec.gpu_model + "'");
      return;
    }
    spec.gpu_model = m->name;
  }
  if (Status st = spec.Validate(); !st.ok()) {
    r.result = Status::InvalidArgument("register: " + st.message());
    return;
  }
  api::NodeRecord rec;
  auto known = node_by_name_.find(req.name);
  if (known != node_by_name_.end()) rec = nodes_[known->second].rec;
  const api::NodeState before = known != node_by_name_.end() ? rec.state : api::NodeState::kUp;
  if (before == api::NodeState::kGone) {
    // Released: its machine is being given back. Coming back under this name would put a node
    // the pool no longer owns into the cluster.
    r.result = Status::FailedPrecondition("node '" + req.name +
                                          "' was released from the cluster; register the machine under a new name");
    return;
  }
  if (known != node_by_name_.end() && r.by_join_token &&
      (before == api::NodeState::kUp || before == api::NodeState::kDraining)) {
    const NodeState& live = nodes_[known->second];
    if (now - live.last_seen < options_.lost_after) {
      // A join token proves only that a machine may join, not that it is this node: taking over a
      // live name would hand its jobs' commands and logs to another machine.
      r.result = Status::FailedPrecondition(
          "node '" + req.name + "' is registered and alive; a join token cannot take over its name (its own agent "
          "re-registers with the agent token it keeps in its data directory). Pick another --name, or wait until "
          "the node is lost (" + FormatDuration(options_.lost_after) + " without a heartbeat)");
      return;
    }
  }
  rec.name = req.name;
  rec.gpus = req.gpus;
  rec.driver_version = req.driver_version;
  rec.cuda_version = req.cuda_version;
  rec.environments_ready = req.environments_ready;
  SetEnvironments(spec, rec);
  rec.spec = spec;
  rec.address = req.address.empty() ? "127.0.0.1" : req.address;
  // Acceptance: a node that must pass a burn-in and has not (or was quarantined) takes no work
  // until a new result is judged. A node that passed keeps its pass across agent restarts.
  bool run_burn_in = false;
  {
    bool required = options_.burn_in_required;
    {
      MutexLock lock(burn_in_mu_);
      required = required || burn_in_names_.count(req.name) > 0;
    }
    if (rec.acceptance == "checking" || (required && rec.acceptance != "passed" && rec.acceptance != "quarantined")) {
      if (!req.running.empty() && rec.acceptance != "checking") {
        // Jobs run there (burn-in turned on for a fleet already at work): the suite would share
        // their GPUs. Check it later: `gpufleet node check` once drained.
        spdlog::warn("node {}: burn-in deferred, {} part(s) run there", req.name, req.running.size());
      } else {
        rec.acceptance = "checking";
        rec.acceptance_reason = "acceptance burn-in running";
        run_burn_in = true;
      }
    }
  }
  // A drained node stays drained when its agent comes back (a restart must not undo a drain),
  // also after it was lost meanwhile (a reboot for maintenance). A spot interruption notice
  // whose time has passed is forgotten: the provider acted on it (a stopped spot machine started
  // again), and it must not keep the node drained, or refuse its undrain, for good. One still
  // ahead stays: the node would otherwise take jobs until its agent repeats it.
  const bool had_notice = known != node_by_name_.end() && nodes_[known->second].notice.has_value() &&
                          nodes_[known->second].notice->time <= now;
  if (had_notice) {
    nodes_[known->second].notice.reset();
    spdlog::info("node {}: registered again; its spot interruption notice is forgotten (its agent repeats one still "
                 "in force)", req.name);
  }
  const bool drained = rec.drained || (before == api::NodeState::kDraining && !had_notice);
  rec.state = drained ? api::NodeState::kDraining : api::NodeState::kUp;
  if (known == node_by_name_.end()) rec.registered = now;
  rec.last_heartbeat = now;
  if (r.audit) store_.AttachAudit({*r.audit});  // commits with the node's record, or not at all
  auto id = store_.UpsertNode(rec);
  if (!id.ok()) {
    r.result = id.status();
    return;
  }
  rec.id = *id;
  if (!r.token_hash.empty()) {
    api::TokenRecord tok;
    tok.hash = r.token_hash;
    tok.kind = api::TokenKind::kAgent;
    tok.subject = req.name;
    tok.role = "agent";
    tok.created = now;
    if (Status st = store_.PutToken(tok); !st.ok()) {
      r.result = st;
      return;
    }
    // Rotation: the node's earlier agent tokens stop working now.
    auto tokens = store_.ListTokens();
    if (!tokens.ok()) {
      r.result = tokens.status();
      return;
    }
    for (api::TokenRecord old : *tokens) {
      if (old.kind != api::TokenKind::kAgent || old.subject != req.name || old.hash == r.token_hash || old.revoked) {
        continue;
      }
      old.revoked = true;
      if (Status st = store_.PutToken(old); !st.ok()) {
        r.result = st;
        return;
      }
    }
  }
  NodeState& n = nodes_[id->value()];
  bool was_up = (n.rec.state == api::NodeState::kUp || n.rec.state == api::NodeState::kDraining) &&
                known != node_by_name_.end();
  n.rec = rec;
  n.last_seen = now;
  n.heard = true;
  n.registered_at = now;
  if (!r.token_hash.empty()) n.token_hash = r.token_hash;
  node_by_name_[req.name] = id->value();
  const bool held = n.awaiting_agent;
  n.awaiting_agent = false;
  // A fault its agent had and no longer reports (freed, then restarted) holds it no more.
  const bool had_fault = !n.storage_fault.empty() && req.storage_fault.empty();
  n.containment = req.containment;
  n.limits = req.limits;
  if (n.storage_fault != req.storage_fault) {
    if (!req.storage_fault.empty()) spdlog::warn("node {} takes no work: {}", req.name, req.storage_fault);
    n.storage_fault = req.storage_fault;
  }
  n.burn_in_request = run_burn_in ? ++next_burn_in_request_ : 0;
  events_.push_back(sched::NodeUp{*id, spec});
  if (!TakesWork(n)) {
    events_.push_back(sched::NodeDrained{*id, true});
  } else if (held || had_notice || had_fault) {
    // Its agent is back, or its notice or storage fault gone: it takes work again.
    events_.push_back(sched::NodeDrained{*id, false});
  }
  spdlog::info("node {} ({}) registered: {} x {}", req.name, id->value(), spec.gpus, spec.gpu_model);

  // Reconcile: what the agent runs against what this controller believes runs there.
  std::set<api::PartKey> reported(req.running.begin(), req.running.end());
  for (const auto& key : req.running) {
    auto it = jobs_.find(key.job.value());
    const bool current = it != jobs_.end() && IsCurrentPart(it->second, key, *id);
    if (!current) {
      KillStray(*id, key, "not a current part of its job");
    } else {
      it->second.parts[key.part].started = true;
    }
  }
  if (was_up) {
    // The agent restarted: parts it no longer reports are gone. Attempts are finished after the
    // walk: finishing one may remove its job from jobs_.
    std::vector<int64_t> finish;
    for (auto& [jid, job] : jobs_) {
      if (!job.rec.placement) continue;
      for (size_t p = 0; p < job.rec.placement->parts.size(); ++p) {
        if (job.rec.placement->parts[p].node != *id || p >= job.parts.size()) continue;
        Part& part = job.parts[p];
        api::PartKey key{job.rec.id, job.rec.attempt, static_cast<int>(p)};
        if (part.started && !part.exited && !reported.count(key)) {
          part.exited = true;
          part.exit_code = -1;
          part.message = "the agent restarted and the part was gone";
          if (!job.stop_requested && !job.failing) {
            // The machine or its agent went down under the job (a crash, a reboot): a node lost
            // for a moment, not the job failing. Stop the other parts and requeue it as for a
            // lost node (restart.on_preemption decides).
            job.stop_requested = true;
            job.stop_reason = sched::PreemptReason::kNodeFailure;
            job.stop_text = "part " + std::to_string(p) + " was lost when its agent restarted";
            Transition(job, JobState::kStopping, job.stop_text);
            SendStop(job, job.stop_text);
          }
          finish.push_back(jid);
        }
      }
    }
    for (int64_t jid : finish) {
      auto it = jobs_.find(jid);
      if (it != jobs_.end()) MaybeFinishAttempt(it->second);
    }
  }
  api::RegisterReply reply;
  reply.node = *id;
  reply.epoch = options_.epoch;
  reply.heartbeat_interval = options_.heartbeat_interval;
  reply.lost_after = options_.lost_after;
  reply.run_burn_in = run_burn_in;
  reply.burn_in_request = n.burn_in_request;
  reply.checkpoint_root = CheckpointRoot();
  r.result = std::move(reply);
}

void Engine::ApplyHeartbeat(HeartbeatReq& r) {
  auto it = nodes_.find(r.node.value());
  api::HeartbeatReply reply;
  reply.epoch = options_.epoch;
  if (it == nodes_.end() || it->second.rec.state == api::NodeState::kLost ||
      it->second.rec.state == api::NodeState::kGone) {
    // Lost nodes re-register: their parts were requeued; what still runs there gets killed.
    reply.reregister = true;
    r.result = reply;
    return;
  }
  NodeState& n = it->second;
  n.last_seen = clock_.Now();
  n.heard = true;
  n.rec.last_heartbeat = n.last_seen;
  if (!r.hb.gpus.empty()) {
    std::vector<int> temps;
    bool changed = r.hb.gpus.size() != n.telemetry.size();
    for (size_t g = 0; g < r.hb.gpus.size(); ++g) {
      temps.push_back(r.hb.gpus[g].temperature_c);
      if (!changed && n.telemetry[g].temperature_c != r.hb.gpus[g].temperature_c) changed = true;
    }
    n.telemetry = r.hb.gpus;
    if (changed && static_cast<int>(temps.size()) == n.rec.spec.gpus) {
      events_.push_back(sched::GpuTelemetry{r.node, temps});
    }
  }
  // The agent's word on its storage before its events (a part that could not start for lack of
  // room names the fault this beat carries) and, when it has room again, after them.
  if (!r.hb.storage_fault.empty()) SetStorageFault(r.node, n, r.hb.storage_fault);
  for (const auto& e : r.hb.events) {
    ApplyPartEvent(r.node, e);
    reply.acked = std::max(reply.acked, e.seq);
  }
  for (const auto& key : r.hb.running) {
    auto jt = jobs_.find(key.job.value());
    if (jt == jobs_.end() || !IsCurrentPart(jt->second, key, r.node)) KillStray(r.node, key, "not a current part of its job");
  }
  for (const auto& a : r.hb.activity) {
    // Only a current part on this node speaks for its job.
    auto jt = jobs_.find(a.key.job.value());
    if (jt == jobs_.end() || jt->second.rec.attempt != a.key.attempt) continue;
    auto pn = part_nodes_.find(a.key);
    if (pn == part_nodes_.end() || pn->second != r.node.value()) continue;
    Job& job = jt->second;
    // Ages by the node's clock become times by ours.
    const Time now = clock_.Now();
    if (a.output_age) {
      Time t = now - *a.output_age;
      if (!job.last_output || t > *job.last_output) job.last_output = t;
    }
    if (a.progress_age) {
      Time t = now - *a.progress_age;
      if (!job.progress_at || t >= *job.progress_at) {
        job.progress_at = t;
        if (a.step) job.step = a.step;
        if (a.loss) job.loss = a.loss;
      }
    }
  }
  SetStorageFault(r.node, n, r.hb.storage_fault);
  n.disks = r.hb.disks;
  if (r.hb.notice) {
    ApplyNotice(r.node, n, *r.hb.notice);
    reply.notice_acked = true;
  }
  if (r.hb.burn_in) {
    // Only the answer to the burn-in the node owes counts; an older or unasked report is
    // acknowledged and dropped.
    if (n.rec.acceptance == "checking" && n.burn_in_request != 0 && r.hb.burn_in->request == n.burn_in_request) {
      n.burn_in_request = 0;
      ApplyBurnIn(r.node, n, std::move(*r.hb.burn_in));
    }
    reply.burn_in_acked = true;
  }
  if (n.rec.acceptance == "checking" && n.burn_in_request != 0) {
    reply.run_burn_in = true;
    reply.burn_in_request = n.burn_in_request;
  }
  if (r.hb.environments_ready && *r.hb.environments_ready != n.rec.environments_ready) {
    n.rec.environments_ready = *r.hb.environments_ready;
    SetEnvironments(n.rec.spec, n.rec);
    if (auto st = store_.UpsertNode(n.rec); !st.ok()) spdlog::error("node {}: {}", n.rec.name, st.status().ToString());
    events_.push_back(sched::NodeUp{r.node, n.rec.spec});
  }
  r.result = reply;
}

// A spot interruption notice: the node drains, and the scheduler stops its jobs with their
// checkpoint signal and requeues them in their place (NodeReclaimed). Agents repeat the notice in
// every heartbeat; it is acted on once, and again only if the node was put back up meanwhile (it
// re-registered with a restarted controller, or someone undrained it).
void Engine::ApplyNotice(NodeId node, NodeState& n, const api::SpotNotice& notice) {
  if (n.notice && n.rec.state == api::NodeState::kDraining) return;
  n.notice = notice;
  Duration left = notice.time - clock_.Now();
  spdlog::warn("node {}: spot interruption notice: the provider will {} it at {} ({}); draining it and requeueing "
               "its jobs",
               n.rec.name, notice.action, FormatIso8601(notice.time),
               left > Duration::Zero() ? "in " + FormatDuration(left) : "now");
  n.rec.state = api::NodeState::kDraining;
  ++stats_.spot_interruptions;
  auto st = store_.UpsertNode(n.rec);
  if (!st.ok()) spdlog::error("store: {}", st.status().message());
  events_.push_back(sched::NodeReclaimed{node});
}

// Whether `key` on `node` is a part of the job's current run: its attempt, a part of its
// placement on that node, while the job has parts at all (starting, running or stopping). A
// pending job's placement and attempt are its last run's, which was lost or stopped: a part of it
// an agent still reports (it was away while the job was requeued, or the controller restarted
// meanwhile) is a stray, and the job has no parts to record it in.
bool Engine::IsCurrentPart(const Job& job, const api::PartKey& key, NodeId node) {
  const bool live = job.rec.state == JobState::kStarting || job.rec.state == JobState::kRunning ||
                    job.rec.state == JobState::kStopping;
  return live && job.rec.attempt == key.attempt && job.rec.placement && key.part >= 0 &&
         key.part < static_cast<int>(job.rec.placement->parts.size()) &&
         key.part < static_cast<int>(job.parts.size()) && job.rec.placement->parts[key.part].node == node;
}

void Engine::ApplyPartEvent(NodeId node, const api::PartEvent& e) {
  auto it = jobs_.find(e.key.job.value());
  if (it == jobs_.end() || !IsCurrentPart(it->second, e.key, node)) {
    if (e.kind == api::PartEventKind::kStarted) KillStray(node, e.key, "not a current part of its job");
    return;
  }
  Job& job = it->second;
  Part& part = job.parts[e.key.part];
  switch (e.kind) {
    case api::PartEventKind::kStarted: {
      if (part.started) return;
      part.started = true;
      part.environment_took = e.environment_took;
      part.environment_warm = e.environment_warm;
      if (e.environment_took) environment_seconds_.Record(e.environment_took->seconds_f());
      bool all = std::all_of(job.parts.begin(), job.parts.end(), [](const Part& p) { return p.started; });
      if (all && job.rec.state == JobState::kStarting) {
        std::string why = job.parts.size() == 1 ? "process started" : "all " + std::to_string(job.parts.size()) + " parts started";
        // The start-up's environment step: warm (prepared on the node already) or how long it took.
        std::optional<Duration> slowest;
        bool all_warm = true;
        for (const Part& p : job.parts) {
          if (!p.environment_took) continue;
          all_warm = all_warm && p.environment_warm;
          if (!slowest || *p.environment_took > *slowest) slowest = p.environment_took;
        }
        if (slowest) {
          const std::string& env = job.rec.request.spec.environment;
          why += all_warm ? "; environment " + env + " was ready (warm start)"
                          : "; environment " + env + " prepared in " + FormatDuration(*slowest) + " (cold start)";
        }
        Transition(job, JobState::kRunning, why);
      }
      return;
    }
    case api::PartEventKind::kCheckpointed:
      // Once per report: an agent sends again what a reply left unacknowledged (a step whose
      // commit failed), and a report applied twice would move the checkpoint to the replay's time.
      if (e.seq != 0 && e.seq <= part.checkpoint_seq) return;
      part.checkpoint_seq = e.seq;
      events_.push_back(sched::JobCheckpointed{job.rec.id});
      memory_changed_.insert(job.rec.id.value());
      return;
    case api::PartEventKind::kExited: {
      if (part.exited) return;
      if (e.node_fault && !job.stop_requested && !job.failing && !job.restart_requested) {
        // The part did not run (a launch that cannot record its part kills it at once): the node
        // cannot keep its own files (its data directory is full). Not the job's failure: requeue
        // it (not counted against its restarts, nor as a stall), and give the node no work until
        // its agent can keep its files again.
        // (The node is held by the storage_fault its heartbeat carries with this event.)
        auto n = nodes_.find(node.value());
        const std::string name = n == nodes_.end() ? "node-" + std::to_string(node.value()) : n->second.rec.name;
        job.restart_requested = true;
        job.rerun_not_stall = true;
        job.restart_text = "node " + name + " could not start it" + (e.message.empty() ? "" : ": " + e.message);
        part.exited = true;  // not stopped again below
        Transition(job, JobState::kStopping, job.restart_text);
        SendStop(job, job.restart_text);
        part.exited = false;
      } else if (e.already_ran && !job.stop_requested && !job.failing && !job.restart_requested) {
        // Nothing ran: the node had run this very part before (this controller's state is older
        // than the node's, a restored backup). Not the job failing: requeue it, and its next
        // attempt is a part the node has not seen.
        // (Back to the queue as a restart is, whatever restart.on_preemption says: nothing was
        // preempted or failed, and it counts as no stall.)
        job.restart_requested = true;
        job.rerun_not_stall = true;
        job.restart_text = e.message.empty() ? "its node had run this part before" : e.message;
        part.exited = true;  // not stopped again below
        Transition(job, JobState::kStopping, job.restart_text);
        SendStop(job, job.restart_text);
        part.exited = false;
      } else if (e.stopped && !job.stop_requested && !job.failing && !job.restart_requested) {
        // Its agent stopped the part on its own: it is shutting down (or fenced itself). The
        // node is leaving, not the job failing: stop the other parts and requeue the job, as for
        // a lost node, and place nothing new there until the agent registers again.
        auto n = nodes_.find(node.value());
        std::string name = n == nodes_.end() ? "node-" + std::to_string(node.value()) : n->second.rec.name;
        // (Not when the stop came before the agent's last registration: it fenced itself while
        // this controller was away, and has registered since; held now, it would stay held with
        // nothing to clear it.)
        const bool before_registering = n != nodes_.end() && e.at < n->second.registered_at;
        if (n != nodes_.end() && !n->second.awaiting_agent && !before_registering) {
          n->second.awaiting_agent = true;
          events_.push_back(sched::NodeDrained{node, true});
        }
        job.stop_requested = true;
        job.stop_reason = sched::PreemptReason::kNodeFailure;
        job.stop_text = "stopped by its agent on " + name + (e.message.empty() ? "" : " (" + e.message + ")");
        part.exited = true;  // not stopped again below
        Transition(job, JobState::kStopping, job.stop_text);
        SendStop(job, job.stop_text);
        part.exited = false;
      }
      part.started = true;
      part.exited = true;
      part.exit_code = e.exit_code;
      part.signal = e.signal;
      part.message = e.message;
      part.stopped = e.stopped;
      part.node_fault = e.node_fault;
      bool failed = (e.exit_code != 0 || e.signal != 0) && !e.node_fault;
      if (failed && !job.stop_requested && !job.failing && !job.restart_requested) {
        job.failing = true;
        std::string what = FailureText(part, e.key.part, job.parts.size());
        job.rec.exit_code = e.exit_code;
        if (job.parts.size() > 1) {
          SendStop(job, what);
          Transition(job, JobState::kStopping, what + "; stopping the other parts");
        }
      }
      MaybeFinishAttempt(job);
      return;
    }
  }
}

void Engine::MaybeFinishAttempt(Job& job) {
  for (const Part& p : job.parts) {
    if (!p.exited) return;
  }
  JobId id = job.rec.id;
  if (job.master_port) ports_in_use_.erase(job.master_port);
  job.master_port = 0;
  // The first part that failed on its own decides (not one that was stopped because of it).
  int failed_index = -1;
  for (int pass = 0; pass < 2 && failed_index < 0; ++pass) {
    for (size_t p = 0; p < job.parts.size(); ++p) {
      const Part& part = job.parts[p];
      // (A part its node could not start is not the job's failure.)
      if ((part.exit_code != 0 || part.signal != 0) && !part.node_fault && (pass == 1 || !part.stopped)) {
        failed_index = static_cast<int>(p);
        break;
      }
    }
  }
  const Part* failed = failed_index >= 0 ? &job.parts[failed_index] : nullptr;
  const api::RestartPolicy& rp = job.rec.request.restart;
  // What the agents said about the parts (a log that could not all be uploaded, a part killed
  // after its grace) stays in the reason, whatever ends the attempt: " (part 1: ...; ...)". The
  // part a failure names says its own (FailureText); a lost part's is the stop's reason already.
  auto notes = [&](int skip, const std::string& said = "") {
    std::string out;
    for (size_t p = 0; p < job.parts.size(); ++p) {
      const Part& part = job.parts[p];
      if (part.message.empty() || static_cast<int>(p) == skip || (part.exit_code == -1 && part.signal == 0)) continue;
      if (!said.empty() && said.find(part.message) != std::string::npos) continue;  // said already
      out += (out.empty() ? " (" : "; ") + (job.parts.size() > 1 ? "part " + std::to_string(p) + ": " : "") + part.message;
    }
    return out.empty() ? out : out + ")";
  };
  // Quick recover exits in a row (below): any other end of an attempt breaks the row.
  const int quick_recovers_before = job.quick_recovers;
  job.quick_recovers = 0;
  if (job.stop_requested && !job.failing) {
    job.restart_requested = false;  // the scheduler's stop (preemption, node loss) decides
    job.rerun_not_stall = false;
    job.restart_text.clear();
    events_.push_back(sched::JobStopped{id});
    if (job.cancel_requested) {
      Transition(job, JobState::kCancelled, "cancelled; its processes have stopped" + notes(-1));
      jobs_.erase(id.value());
      return;
    }
    std::string why = job.stop_text.empty() ? ReasonText(job.stop_reason) : job.stop_text;
    why += notes(-1, why);
    job.stop_text.clear();
    if (job.stop_reason == sched::PreemptReason::kMaxCost) {
      // The core forgets the job after this stop: it does not come back.
      Transition(job, JobState::kFailed, why + " (max_cost " + cost::FormatUsd(job.rec.request.spec.max_cost_micros) + ")");
      jobs_.erase(id.value());
      return;
    }
    if (!rp.on_preemption) {
      Transition(job, JobState::kFailed, why + "; not requeued (restart.on_preemption is false)");
      events_.push_back(sched::JobFailed{id, false});
      jobs_.erase(id.value());
      return;
    }
    Transition(job, JobState::kPreempted, why);
    Transition(job, JobState::kPending, "requeued");
    job.stop_requested = false;
    return;
  }
  if (job.restart_requested) {
    // The watchdog's restart: back to the queue, whatever the stop's exit code; a cancel asked
    // for meanwhile wins.
    job.restart_requested = false;
    job.failing = false;
    if (job.cancel_requested) {
      events_.push_back(sched::JobFailed{id, false});
      Transition(job, JobState::kCancelled, "cancelled; its processes have stopped" + notes(-1));
      jobs_.erase(id.value());
      return;
    }
    if (!job.rerun_not_stall) ++job.stall_restarts;
    job.rerun_not_stall = false;
    events_.push_back(sched::JobFailed{id, true});
    Transition(job, JobState::kPending, "requeued: " + job.restart_text + notes(-1, job.restart_text));
    return;
  }
  if (!failed) {
    job.rec.exit_code = 0;  // before the transition, which records the job
    Transition(job, JobState::kSucceeded,
               (job.parts.size() == 1 ? "exited with code 0" : "every part exited with code 0") + notes(-1));
    events_.push_back(sched::JobFinished{id});
    jobs_.erase(id.value());
    return;
  }
  int code = failed->exit_code;
  std::string what = FailureText(*failed, failed_index, job.parts.size()) + notes(failed_index);
  job.rec.exit_code = code;
  bool recover = std::find(rp.recover_on_exit_codes.begin(), rp.recover_on_exit_codes.end(), code) !=
                 rp.recover_on_exit_codes.end();
  if (recover) {
    // A code that asks to be run again (to resume from a checkpoint) but comes within a minute
    // of every start is a crash loop, not progress: from the tenth in a row it counts against
    // max_restarts_on_errors like any failure (it restarted ten times a second, for ever).
    constexpr Duration kQuickRecover = Duration::Minutes(1);
    constexpr int kQuickRecoverLimit = 10;
    job.quick_recovers = clock_.Now() - job.attempt_started < kQuickRecover ? quick_recovers_before + 1 : 0;
    if (job.quick_recovers >= kQuickRecoverLimit) {
      recover = false;
      what += "; exit code " + std::to_string(code) + " came within a minute of its start " +
              std::to_string(job.quick_recovers) +
              " times in a row: counted as a failure (restart.recover_on_exit_codes requeues a job that exits "
              "after doing some work)";
    }
  }
  if (job.cancel_requested) {
    events_.push_back(sched::JobFailed{id, false});
    Transition(job, JobState::kCancelled, "cancelled; " + what);
    jobs_.erase(id.value());
    return;
  }
  if (recover || job.rec.error_restarts < rp.max_restarts_on_errors) {
    if (!recover) ++job.rec.error_restarts;
    events_.push_back(sched::JobFailed{id, true});
    job.failing = false;
    job.stop_requested = false;
    Transition(job, JobState::kPending,
               what + (recover ? "; requeued (restart.recover_on_exit_codes)"
                               : "; requeued, restart " + std::to_string(job.rec.error_restarts) + " of " +
                                     std::to_string(rp.max_restarts_on_errors)));
    return;
  }
  events_.push_back(sched::JobFailed{id, false});
  Transition(job, JobState::kFailed, what);
  jobs_.erase(id.value());
}

Duration Engine::Monotonic() const {
  if (options_.monotonic) return options_.monotonic();
  struct timespec ts {};
  clock_gettime(CLOCK_BOOTTIME, &ts);  // runs on through a suspend, unlike steady_clock
  return Duration::Millis(static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000);
}

void Engine::CreditStall(Duration stalled) {
  MutexLock lock(mu_);
  spdlog::warn("the controller did not run for {}; its nodes' silence meanwhile is not held against them",
               FormatDuration(stalled));
  stall_credit_ = stall_credit_ + stalled;
}

void Engine::CheckHeartbeats() {
  const Time now = clock_.Now();  // (not the step's start: heartbeats of this step came after it)
  if (stall_credit_ > Duration::Zero()) {
    // Never earlier than a heartbeat already heard, nor later than now.
    for (auto& [nid, n] : nodes_) n.last_seen = std::max(n.last_seen, std::min(now, n.last_seen + stall_credit_));
    stall_credit_ = Duration::Zero();
  }
  for (auto& [nid, n] : nodes_) {
    if (n.rec.state != api::NodeState::kUp && n.rec.state != api::NodeState::kDraining) continue;
    if (now - n.last_seen <= options_.lost_after) continue;
    n.rec.state = api::NodeState::kLost;
    spdlog::warn("node {} lost: no heartbeat for {}", n.rec.name, FormatDuration(now - n.last_seen));
    auto st = store_.UpsertNode(n.rec);
    if (!st.ok()) spdlog::error("store: {}", st.status().message());
    LosePartsOn(NodeId(nid), "node " + n.rec.name + " lost");
  }
}

// The node is gone with whatever ran there: its parts have exited. Running jobs get stopped by
// the scheduler (NodeDown); jobs already stopping may be done now.
void Engine::LosePartsOn(NodeId node, const std::string& why) {
  std::vector<int64_t> done;
  for (auto& [jid, job] : jobs_) {
    if (!job.rec.placement) continue;
    bool hit = false;
    for (size_t p = 0; p < job.rec.placement->parts.size() && p < job.parts.size(); ++p) {
      if (job.rec.placement->parts[p].node == node && !job.parts[p].exited) {
        job.parts[p].exited = true;
        job.parts[p].exit_code = -1;
        job.parts[p].message = why;
        hit = true;
      }
    }
    if (hit && job.failing && !job.stop_requested && !job.cancel_requested) {
      // A part that failed first most likely failed because this node went away (a gang's
      // collectives break at once): the node loss decides. NodeDown makes the scheduler stop
      // the job, and that stop requeues it.
      job.failing = false;
      job.rec.exit_code.reset();
      continue;
    }
    if (hit && (job.stop_requested || job.failing)) done.push_back(jid);
  }
  events_.push_back(sched::NodeDown{node});
  for (int64_t jid : done) {
    auto it = jobs_.find(jid);
    if (it != jobs_.end()) MaybeFinishAttempt(it->second);
  }
}

// --- Scheduler decisions ----------------------------------------------------------------------

void Engine::OnStart(JobId id, const model::Placement& placement) {
  auto it = jobs_.find(id.value());
  if (it == jobs_.end()) {
    spdlog::error("scheduler started unknown job {}", id.value());
    return;
  }
  Job& job = it->second;
  ++counters_.starts;
  job.rec.attempt += 1;
  job.attempt_started = clock_.Now();
  job.last_output.reset();
  job.progress_at.reset();
  job.restart_requested = false;  // a restart overtaken by a preemption or node loss is done
  job.rerun_not_stall = false;
  job.restart_text.clear();
  job.rec.placement = placement;
  job.parts.assign(placement.parts.size(), Part{});
  job.stop_requested = false;
  job.failing = false;
  job.master_port = NextMasterPort();
  Transition(job, JobState::kStarting, "placed on " + PlacementText(placement));

  const api::JobRequest& req = job.rec.request;
  const model::JobSpec& spec = req.spec;
  int nnodes = static_cast<int>(placement.parts.size());
  int nproc = req.process_per_gpu ? std::max<int>(1, static_cast<int>(placement.parts[0].gpus.size())) : 1;
  std::string master_addr = "127.0.0.1";
  if (auto n = nodes_.find(placement.parts[0].node.value()); n != nodes_.end()) master_addr = n->second.rec.address;
  std::string ckpt = req.checkpoint.dir;
  if (ckpt.empty()) ckpt = CheckpointRoot() + "/job-" + std::to_string(id.value());
  for (int p = 0; p < nnodes; ++p) {
    const model::NodeAssignment& a = placement.parts[p];
    part_nodes_[api::PartKey{id, job.rec.attempt, p}] = a.node.value();
    api::StartPart s;
    s.key = {id, job.rec.attempt, p};
    s.argv = req.argv;
    s.workdir = req.workdir;
    s.user = req.user;
    s.gpus = a.gpus;
    s.processes = nproc;
    s.rank_base = p * nproc;
    s.stop_signal = req.checkpoint.signal;
    s.grace = req.checkpoint.grace;
    s.cpu_milli = spec.cpu_milli;
    s.environment = spec.environment;
    s.verify_network = req.verify_network && placement.parts.size() > 1;
    s.mem_mib = spec.mem_mib;
    s.env = req.env;
    auto& env = s.env;
    env["GPUFLEET_JOB_ID"] = std::to_string(id.value());
    env["GPUFLEET_JOB_NAME"] = spec.name;
    env["GPUFLEET_TEAM"] = spec.team;
    env["GPUFLEET_ATTEMPT"] = std::to_string(job.rec.attempt);
    env["GPUFLEET_RESTART_COUNT"] = std::to_string(job.rec.attempt - 1);
    env["GPUFLEET_CHECKPOINT_DIR"] = ckpt;
    env["GPUFLEET_NODE_RANK"] = std::to_string(p);
    env["CUDA_VISIBLE_DEVICES"] = GpuList(a.gpus);
    env["MASTER_ADDR"] = master_addr;
    env["MASTER_PORT"] = std::to_string(job.master_port);
    env["NNODES"] = std::to_string(nnodes);
    env["NODE_RANK"] = std::to_string(p);
    // NPROC_PER_NODE is for torchrun users: the GPUs of each node. WORLD_SIZE, RANK and
    // LOCAL_RANK describe the processes gpufleet itself starts.
    env["NPROC_PER_NODE"] = std::to_string(std::max<size_t>(1, a.gpus.size()));
    env["WORLD_SIZE"] = std::to_string(nnodes * nproc);
    env["RANK"] = std::to_string(p * nproc);
    env["LOCAL_RANK"] = "0";
    api::Command cmd;
    cmd.start = std::move(s);
    commands_.emplace_back(a.node, std::move(cmd));
  }
}

void Engine::OnPreempt(JobId id, sched::PreemptReason reason) {
  auto it = jobs_.find(id.value());
  if (it == jobs_.end()) return;
  Job& job = it->second;
  // Already stopping for a cancel or max_cost, as asked before a controller restart (Recover
  // tells the core of it again, which answers with this): the stop, its reason and its history stand.
  if (reason == sched::PreemptReason::kCancelled && job.rec.state == JobState::kStopping && job.stop_requested &&
      (job.stop_reason == sched::PreemptReason::kCancelled || job.stop_reason == sched::PreemptReason::kMaxCost)) {
    return;
  }
  if (reason != sched::PreemptReason::kCancelled) ++stats_.preemptions[sched::PreemptReasonName(reason)];
  job.stop_requested = true;
  job.stop_reason = reason;
  if (reason == sched::PreemptReason::kCancelled) job.cancel_requested = true;
  if (job.failing) {
    // Already stopping after a failure; the outcome stays a failure (or a cancel).
    MaybeFinishAttempt(job);
    return;
  }
  std::string why = ReasonText(reason);
  if (reason == sched::PreemptReason::kNodeFailure && job.rec.placement) {
    std::vector<std::string> lost;
    for (const auto& part : job.rec.placement->parts) {
      auto n = nodes_.find(part.node.value());
      if (n != nodes_.end() && n->second.rec.state == api::NodeState::kLost &&
          std::find(lost.begin(), lost.end(), n->second.rec.name) == lost.end()) {
        lost.push_back(n->second.rec.name);
      }
    }
    if (!lost.empty()) why = "stopped: node " + Join(lost, ", ") + " was lost";
  }
  Transition(job, JobState::kStopping, why);
  SendStop(job, why);
  MaybeFinishAttempt(job);
}

void Engine::Transition(Job& job, JobState to, std::string reason) {
  api::Transition t;
  t.at = clock_.Now();
  t.from = job.rec.state;
  t.to = to;
  t.reason = reason;
  job.rec.state = to;
  job.rec.reason = std::move(reason);
  job.rec.updated = t.at;
  job.rec.stop_intent = to == JobState::kStopping ? StopIntent(job) : std::string();
  if (to == JobState::kPending && t.from != JobState::kPending) ++stats_.requeues;
  if (api::IsTerminal(to)) ++stats_.finished[{api::JobStateName(to), job.rec.request.spec.team}];
  if (api::IsTerminal(to)) {
    part_nodes_.erase(part_nodes_.lower_bound(api::PartKey{job.rec.id, 0, 0}),
                      part_nodes_.lower_bound(api::PartKey{JobId(job.rec.id.value() + 1), 0, 0}));
  }
  if (scheduler_->PhaseOf(job.rec.id)) job.rec.cost_micros = scheduler_->CostOf(job.rec.id);
  if (api::IsTerminal(to) && job.rec.cost_micros != 0) ended_cost_[job.rec.request.spec.team] += job.rec.cost_micros;
  updates_.push_back({job.rec, std::move(t)});
}

std::string Engine::StopIntent(const Job& job) {
  // In the order MaybeFinishAttempt decides in.
  if (job.stop_requested && !job.failing) {
    return sched::PreemptReasonName(job.cancel_requested ? sched::PreemptReason::kCancelled : job.stop_reason);
  }
  if (job.restart_requested) return "restart";
  if (job.failing) return "failing";
  return "";
}

void Engine::RestoreStopIntent(Job& job) {
  const std::string& intent = job.rec.stop_intent;
  if (intent == "restart") {
    job.restart_requested = true;
    job.restart_text = job.rec.reason;  // the watchdog's words, for the requeue's history line
    return;
  }
  if (intent == "failing") {
    job.failing = true;
    return;
  }
  job.stop_requested = true;
  // A record written before stop intents were kept has none: requeue it (no work is lost).
  job.stop_reason = sched::PreemptReason::kPriority;
  for (auto r : {sched::PreemptReason::kPriority, sched::PreemptReason::kQuotaReclaim, sched::PreemptReason::kService,
                 sched::PreemptReason::kNodeFailure, sched::PreemptReason::kCancelled,
                 sched::PreemptReason::kReclaimed, sched::PreemptReason::kBudget, sched::PreemptReason::kMaxCost}) {
    if (intent == sched::PreemptReasonName(r)) job.stop_reason = r;
  }
  job.cancel_requested = job.stop_reason == sched::PreemptReason::kCancelled;
}

void Engine::SendStop(Job& job, const std::string& reason) {
  if (!job.rec.placement) return;
  for (size_t p = 0; p < job.parts.size(); ++p) {
    if (job.parts[p].exited) continue;
    NodeId node = job.rec.placement->parts[p].node;
    auto n = nodes_.find(node.value());
    if (n == nodes_.end() || n->second.rec.state == api::NodeState::kLost) {
      job.parts[p].exited = true;
      job.parts[p].exit_code = -1;
      job.parts[p].message = "node lost";
      continue;
    }
    api::Command cmd;
    cmd.stop = api::StopPart{{job.rec.id, job.rec.attempt, static_cast<int>(p)},
                             job.rec.request.checkpoint.signal, job.rec.request.checkpoint.grace, reason};
    commands_.emplace_back(node, std::move(cmd));
  }
}

// A stray gets SIGKILL, not the job's checkpoint signal: it is an out-of-date copy (the job was
// requeued while its node was away, or it ended), and a checkpoint it wrote on the way out would
// go into the job's checkpoint directory, which the job's current attempt reads and writes.
void Engine::KillStray(NodeId node, const api::PartKey& key, const std::string& reason) {
  api::Command cmd;
  cmd.stop = api::StopPart{key, SIGKILL, Duration::Zero(), reason};
  commands_.emplace_back(node, std::move(cmd));
}

std::string Engine::PlacementText(const model::Placement& p) const {
  std::vector<std::string> parts;
  for (const auto& a : p.parts) {
    auto n = nodes_.find(a.node.value());
    std::string name = n == nodes_.end() ? "node-" + std::to_string(a.node.value()) : n->second.rec.name;
    parts.push_back(a.gpus.empty() ? name : name + " gpu " + GpuList(a.gpus));
  }
  return Join(parts, "; ");
}

int Engine::NextMasterPort() {
  for (int i = 0; i < options_.master_port_span; ++i) {
    int port = options_.master_port_base + (next_port_++ % options_.master_port_span);
    if (ports_in_use_.insert(port).second) return port;
  }
  return options_.master_port_base;
}

// --- Reads ----------------------------------------------------------------------------------

Result<sched::Explanation> Engine::Explain(JobId job) const {
  MutexLock lock(mu_);
  if (!jobs_.count(job.value())) return Status::NotFound("job " + std::to_string(job.value()) + " is not pending or running");
  sched::Explanation e = scheduler_->Explain(job);
  if (e.phase != sched::JobPhase::kPending) return e;
  // The queue order is one part of the policy the controller runs (--policy backfill orders
  // the queue fifo): name the policy, with its parts.
  const std::string queue_words = " in the " + scheduler_->policies().queue->Name() + " queue";
  if (!e.reasons.empty() && e.reasons[0].size() > queue_words.size() &&
      e.reasons[0].compare(e.reasons[0].size() - queue_words.size(), queue_words.size(), queue_words) == 0) {
    e.reasons[0] = e.reasons[0].substr(0, e.reasons[0].size() - queue_words.size()) + " in the queue of policy " +
                   options_.policy + " (" + scheduler_->policies().Name() + ")";
  }
  // With a pool, a job no node of the cluster fits waits for one the pool rents (NeverFitsLocked
  // took it for that reason): not "never".
  if (!e.ever && e.placement == sched::PlaceResult::Kind::kInfeasible && !node_size_hints_.empty()) {
    const model::JobSpec& want = jobs_.at(job.value()).rec.request.spec;
    bool rentable = false;
    for (const auto& [gpu_model, gpus] : node_size_hints_) {
      (void)gpus;
      rentable = rentable || want.gpu_models.empty() ||
                 std::find(want.gpu_models.begin(), want.gpu_models.end(), gpu_model) != want.gpu_models.end();
    }
    if (rentable) {
      e.ever = true;
      e.placement = sched::PlaceResult::Kind::kWait;
      auto hold = pool_holds_.find(job.value());
      for (std::string& r : e.reasons) {
        if (r.rfind("infeasible: ", 0) == 0) {
          r = "no node of the cluster fits it now (" + r.substr(12) + "); " +
              (hold == pool_holds_.end()
                   ? std::string("the pool rents one for it ('gpufleet pool' shows what it rents)")
                   : "the pool rents none for it: " + hold->second);
        }
      }
    }
  }
  // A pending job that fits may still not start now: a reservation for an earlier job holds it
  // (backfill), strict order keeps it behind a blocked head, or it waits for the jobs it
  // preempts. Only a job nothing holds starts at the next pass.
  if (e.placement == sched::PlaceResult::Kind::kPlaced &&
      std::find(e.reasons.begin(), e.reasons.end(), "fits now: starts at the next scheduling pass") == e.reasons.end()) {
    e.placement = sched::PlaceResult::Kind::kWait;
  }
  // Nodes that take no work for lack of acceptance, and (for a job naming an environment) nodes
  // that cannot run it: say which and why, as the scheduler sees them only as unavailable.
  const model::JobSpec& spec = jobs_.at(job.value()).rec.request.spec;
  const node::Environment* env =
      !spec.environment.empty() && options_.environments ? options_.environments->Find(spec.environment) : nullptr;
  for (const auto& [id, n] : nodes_) {
    if (n.rec.state == api::NodeState::kGone || n.rec.state == api::NodeState::kLost) continue;
    // Nodes that could hold it (their GPUs, of a model it takes): the others are not why it waits.
    const bool could_use = (spec.total_gpu_milli() == 0 || n.rec.spec.gpus > 0) &&
                           (spec.gpu_models.empty() || std::find(spec.gpu_models.begin(), spec.gpu_models.end(),
                                                                 n.rec.spec.gpu_model) != spec.gpu_models.end());
    if (!could_use) continue;
    if (n.rec.acceptance == "quarantined") {
      e.reasons.push_back("node " + n.rec.name + " is quarantined (burn-in " + n.rec.acceptance_reason +
                          "); 'gpufleet node check " + n.rec.name + "' runs it again once fixed");
    } else if (n.rec.acceptance == "checking") {
      e.reasons.push_back("node " + n.rec.name + " is running its acceptance burn-in and takes work once it passes");
    }
    if (!n.storage_fault.empty()) {
      e.reasons.push_back("node " + n.rec.name + " takes no new work: " + n.storage_fault +
                          "; it takes work again once its agent can write there (free some room, or remount it "
                          "writable)");
    }
    // Nodes that could hold it but take no new work: drained by an admin, or reclaimed by their
    // provider (the scheduler sees them only as unavailable).
    if (n.rec.state == api::NodeState::kDraining) {
      e.reasons.push_back(n.notice ? "node " + n.rec.name + " takes no new work: its provider reclaims it (spot "
                                         "interruption notice: " + n.notice->action + " at " +
                                         FormatIso8601(n.notice->time) + ")"
                                   : "node " + n.rec.name + " takes no new work: it is drained ('gpufleet undrain " +
                                         n.rec.name + "' puts it back" +
                                         (n.storage_fault.empty() ? ")" : " once its disk has room again)"));
    }
    if (env && n.rec.spec.gpus > 0 && !n.rec.spec.Supports(spec.environment)) {
      e.reasons.push_back("node " + n.rec.name + " cannot run environment " + spec.environment + ": " +
                          node::EnvironmentTable::WhyNot(*env, FactsOf(n.rec)));
    }
  }
  return e;
}

void Engine::NotePoolHolds(std::map<int64_t, std::string> holds) {
  MutexLock lock(mu_);
  pool_holds_ = std::move(holds);
}

std::vector<sched::PendingJob> Engine::PendingForScaling() const {
  MutexLock lock(mu_);
  return PendingLocked();
}

std::vector<sched::PendingJob> Engine::PendingLocked() const {
  // The scheduler's own view, as the simulator's autoscaler gets it. The live pool has no
  // restart-overhead estimate of its own (the simulator's is --restart-overhead).
  return scheduler_->ScalingQueue(Duration::Zero());
}

std::vector<QueueEntry> Engine::Queue() const { return QueuePage(0, SIZE_MAX).first; }

std::pair<std::vector<QueueEntry>, size_t> Engine::QueuePage(size_t from, size_t limit) const {
  MutexLock lock(mu_);
  std::vector<QueueEntry> out;
  size_t index = 0;
  auto take = [&](const api::JobRecord& rec, int position) {
    if (index >= from && out.size() < limit) out.push_back({rec, position});
    ++index;
  };
  for (const auto& [id, job] : jobs_) {
    if (job.rec.state == JobState::kStarting || job.rec.state == JobState::kRunning ||
        job.rec.state == JobState::kStopping) {
      take(job.rec, 0);
    }
  }
  int pos = 0;
  for (JobId id : scheduler_->QueueOrder()) {
    auto it = jobs_.find(id.value());
    if (it == jobs_.end()) continue;
    const bool shown = index >= from && out.size() < limit;
    take(it->second.rec, ++pos);
    // What holds it beyond its place: its team's budget or quota ("submitted" or "requeued"
    // said nothing of it).
    if (shown) {
      if (std::string hold = scheduler_->BudgetHold(id); !hold.empty()) {
        out.back().job.reason = hold;
      } else if (std::string held = scheduler_->HeldBy(id); !held.empty()) {
        // A reservation or victims stopping: what the queue's "submitted" hid.
        out.back().job.reason = held;
      } else if (node_size_hints_.empty() && scheduler_->NeverPlaceable(id)) {
        // What `explain` says ("can ever run: no"); "submitted" hid it. (With a pool, a node it
        // rents may fit.)
        out.back().job.reason = "can never run on this cluster's nodes ('gpufleet explain " +
                                std::to_string(id.value()) + "' says why)";
      }
    }
  }
  return {std::move(out), index};
}

Engine::QueueCounts Engine::CountQueue() const {
  MutexLock lock(mu_);
  QueueCounts c;
  // A job its team's hard budget holds waits for money, not for the cluster: it is no queue wait.
  std::set<std::string> held;
  for (const auto& [team, b] : budgets_) {
    if (b.hard_micros > 0 && scheduler_->HardStopReached(team)) held.insert(team);
  }
  for (const auto& [id, job] : jobs_) {
    const api::JobRecord& rec = job.rec;
    ++c.by_state_team[{std::string(api::JobStateName(rec.state)), rec.request.spec.team}];
    if (rec.state != JobState::kPending) continue;
    ++c.pending;
    if (!held.empty() && held.contains(rec.request.spec.team)) continue;
    // The earliest wins; of equal instants, the lowest id (jobs_ is in id order).
    if (!c.oldest_pending || rec.updated < c.oldest_pending_since) {
      c.oldest_pending = rec.id;
      c.oldest_pending_since = rec.updated;
    }
  }
  return c;
}

std::vector<NodeStatus> Engine::Nodes() const {
  MutexLock lock(mu_);
  return NodesLocked();
}

Engine::ScalingView Engine::ScalingSnapshot() const {
  MutexLock lock(mu_);
  ScalingView v{PendingLocked(), NodesLocked(), {}, scheduler_->ChargedTeams()};
  for (const auto& [team, b] : budgets_) {
    if (b.hard_micros > 0 && scheduler_->HardStopReached(team)) v.hard_stopped_teams.insert(team);
  }
  return v;
}

std::vector<NodeStatus> Engine::NodesLocked() const {
  std::vector<NodeStatus> out;
  std::map<int64_t, size_t> index;
  for (const auto& [id, n] : nodes_) {
    index[id] = out.size();
    out.push_back({n.rec, 0, n.telemetry, {}, n.notice, n.last_seen, n.heard, n.storage_fault, n.disks,
                   n.containment, n.limits});
  }
  // GPUs in use are counted once however many jobs share them (GPU slices).
  std::vector<std::set<int>> held(out.size());
  for (const auto& [id, job] : jobs_) {
    if (!job.rec.placement || job.rec.state == JobState::kPending) continue;
    for (const auto& a : job.rec.placement->parts) {
      auto it = index.find(a.node.value());
      if (it == index.end()) continue;
      held[it->second].insert(a.gpus.begin(), a.gpus.end());
      out[it->second].jobs.push_back(job.rec.id);
    }
  }
  for (size_t k = 0; k < out.size(); ++k) out[k].gpus_used = static_cast<int>(held[k].size());
  return out;
}

bool Engine::IsCurrentAgentToken(NodeId node, const std::string& token_hash) const {
  MutexLock lock(mu_);
  auto it = nodes_.find(node.value());
  if (it == nodes_.end()) return false;
  return it->second.token_hash.empty() || it->second.token_hash == token_hash;
}

bool Engine::PartOnNode(NodeId node, const api::PartKey& key) const {
  MutexLock lock(mu_);
  auto it = part_nodes_.find(key);
  return it != part_nodes_.end() && it->second == node.value();
}

std::optional<NodeId> Engine::NodeByName(const std::string& name) const {
  MutexLock lock(mu_);
  auto it = node_by_name_.find(name);
  if (it == node_by_name_.end()) return std::nullopt;
  return NodeId(it->second);
}

std::optional<Duration> Engine::LostIn(const std::string& name) const {
  MutexLock lock(mu_);
  auto it = node_by_name_.find(name);
  if (it == node_by_name_.end()) return std::nullopt;
  auto n = nodes_.find(it->second);
  if (n == nodes_.end()) return std::nullopt;
  const NodeState& st = n->second;
  if (st.rec.state != api::NodeState::kUp && st.rec.state != api::NodeState::kDraining) return std::nullopt;
  const Duration left = options_.lost_after - (clock_.Now() - st.last_seen);
  if (left <= Duration::Zero()) return std::nullopt;
  return left;
}

void Engine::WakePollers() {
  // A poller checks stopping_ and pollers_released_ with out_mu_ held and keeps holding it until
  // it waits: taking out_mu_ here means it either saw the change or is waiting for this notify.
  { MutexLock lock(out_mu_); }
  out_cv_.NotifyAll();
}

api::CommandBatch Engine::PollCommands(NodeId node, int64_t after, Duration wait, const std::string& epoch) {
  if (!epoch.empty() && epoch != options_.epoch) {
    after = 0;  // numbers of another controller's commands: they acknowledge none of ours
    wait = Duration::Zero();  // the agent needs the new epoch now, to poll again from 0
  }
  MutexLock lock(out_mu_);
  auto ready = [&] {
    out_mu_.AssertHeld();
    Outbox& box = outboxes_[node.value()];
    while (!box.commands.empty() && box.commands.front().seq <= after) box.commands.pop_front();
    return !box.commands.empty();
  };
  if (!ready() && wait > Duration::Zero()) {
    out_cv_.WaitFor(out_mu_, std::chrono::milliseconds(wait.millis()), [&] {
      MutexLock g(inbox_mu_);
      return stopping_ || pollers_released_ || ready();
    });
  }
  ready();
  api::CommandBatch batch;
  batch.epoch = options_.epoch;
  for (const auto& c : outboxes_[node.value()].commands) batch.commands.push_back(c);
  return batch;
}

}  // namespace gpufleet::controller
