#include "controller/metrics.h"

#include <algorithm>
#include <map>
#include <set>

#include "controller/monitor.h"
#include "controller/pool.h"
#include "obs/dcgm.h"

namespace gpufleet::controller {

std::string ControllerMetricsText(const MetricsSources& s) {
  obs::Exposition e;
  const Engine& engine = *s.engine;
  const Time now = s.now;

  e.Family("gpufleet_build_info", "gauge", "The controller's version (always 1).");
  e.Sample({{"version", s.version}}, 1);

  // Jobs and the queue.
  // Counted by the engine: copying every queued job for a scrape would cost seconds at 100k.
  const Engine::QueueCounts queue = engine.CountQueue();
  const double pending = static_cast<double>(queue.pending);
  // Since the longest-waiting job last became pending.
  const double oldest = queue.oldest_pending ? std::max(0.0, (now - queue.oldest_pending_since).seconds_f()) : 0;
  e.Family("gpufleet_jobs", "gauge", "Unfinished jobs by state and team.");
  for (const auto& [k, n] : queue.by_state_team) e.Sample({{"state", k.first}, {"team", k.second}}, static_cast<double>(n));
  Engine::Stats stats = engine.stats();
  e.Family("gpufleet_jobs_finished_total", "counter", "Jobs that ended since the controller started, by state and team.");
  for (const auto& [k, n] : stats.finished) e.Sample({{"state", k.first}, {"team", k.second}}, static_cast<double>(n));
  e.Family("gpufleet_queue_length", "gauge", "Jobs waiting to start.");
  e.Sample({}, pending);
  e.Family("gpufleet_queue_oldest_wait_seconds", "gauge", "How long the longest-waiting pending job has waited.");
  e.Sample({}, oldest);

  // Nodes and GPUs.
  std::vector<NodeStatus> nodes = engine.Nodes();
  std::vector<Engine::JobWatch> running = engine.RunningJobs();
  const auto holder = HoldersByGpu(running);
  std::map<std::string, int> node_states{{"up", 0}, {"draining", 0}, {"lost", 0}};
  std::map<std::string, int> gpus_total, gpus_alloc, gpus_idle;
  std::vector<obs::DcgmGpu> dcgm;
  const int idle_pct = s.monitor ? s.monitor->rules().idle_util_pct : 5;
  for (const NodeStatus& n : nodes) {
    const api::NodeRecord& r = n.record;
    if (r.state == api::NodeState::kGone) continue;
    ++node_states[api::NodeStateName(r.state)];
    if (r.state == api::NodeState::kLost) continue;
    const std::string& model = r.spec.gpu_model;
    if (r.spec.gpus > 0) {
      gpus_total[model] += r.spec.gpus;
      gpus_alloc[model] += n.gpus_used;
      gpus_idle[model] += 0;
    }
    for (size_t g = 0; g < r.gpus.size(); ++g) {
      obs::DcgmGpu d;
      d.hostname = r.name;
      d.gpu = r.gpus[g].index;
      d.uuid = r.gpus[g].uuid;
      d.model_name = r.gpus[g].name;
      d.fb_total_mib = r.gpus[g].memory_mib;
      if (g < n.telemetry.size()) {
        d.util_pct = n.telemetry[g].util_pct;
        d.fb_used_mib = n.telemetry[g].mem_used_mib;
        d.temperature_c = n.telemetry[g].temperature_c;
        d.power_w = n.telemetry[g].power_w;
      }
      if (auto h = holder.find({r.id.value(), d.gpu}); h != holder.end()) {
        d.job_id = h->second.job_id;
        d.team = h->second.team;
        d.sharing = h->second.sharing;
        d.sharing_teams = h->second.sharing_teams;
        if (g < n.telemetry.size() && d.util_pct < idle_pct) ++gpus_idle[model];
      }
      dcgm.push_back(std::move(d));
    }
  }
  obs::WriteDcgmSeries(e, dcgm);
  e.Family("gpufleet_gpus", "gauge", "GPUs of the nodes that are up or draining, by model.");
  for (const auto& [m, n] : gpus_total) e.Sample({{"model", m}}, n);
  e.Family("gpufleet_gpus_allocated", "gauge", "GPUs held by jobs, by model.");
  for (const auto& [m, n] : gpus_alloc) e.Sample({{"model", m}}, n);
  e.Family("gpufleet_gpus_allocated_idle", "gauge", "GPUs held by jobs but running under the idle threshold, by model.");
  for (const auto& [m, n] : gpus_idle) e.Sample({{"model", m}}, n);
  e.Family("gpufleet_nodes", "gauge", "Nodes by state.");
  for (const auto& [st, n] : node_states) e.Sample({{"state", st}}, n);
  e.Family("gpufleet_node_heartbeat_age_seconds", "gauge",
           "Time since each node's last heartbeat (since the controller started, for a node not heard from since).");
  for (const NodeStatus& n : nodes) {
    if (n.record.state == api::NodeState::kGone) continue;
    // As the NodeSilent alert and the lost-node clock count it (heartbeats are not stored).
    e.Sample({{"node", n.record.name}}, std::max(0.0, (now - n.last_seen).seconds_f()));
  }
  e.Family("gpufleet_node_spot_notice", "gauge", "1 while the provider's notice that it takes the node back stands.");
  for (const NodeStatus& n : nodes) {
    if (n.record.state == api::NodeState::kGone) continue;
    e.Sample({{"node", n.record.name}}, n.notice ? 1 : 0);
  }
  e.Family("gpufleet_node_quarantined", "gauge", "1 while the node is quarantined by its acceptance burn-in.");
  for (const NodeStatus& n : nodes) {
    if (n.record.state == api::NodeState::kGone) continue;
    e.Sample({{"node", n.record.name}}, n.record.acceptance == "quarantined" ? 1 : 0);
  }
  e.Family("gpufleet_node_storage_fault", "gauge",
           "1 while the node's agent cannot write its data directory (full or read-only); it takes no work.");
  for (const NodeStatus& n : nodes) {
    if (n.record.state == api::NodeState::kGone) continue;
    // (A lost node's last word is stale: NodeSilent speaks for it.)
    e.Sample({{"node", n.record.name}},
             n.storage_fault.empty() || n.record.state == api::NodeState::kLost ? 0 : 1);
  }

  // Room where the agents keep their files (from their last heartbeats; lost and gone nodes' last
  // words are stale and left out).
  e.Family("gpufleet_node_disk_free_bytes", "gauge",
           "Bytes free for the agent where it keeps its files: dir=\"data\" its data directory (job state and "
           "logs), dir=\"environments\" its prepared environments.");
  for (const NodeStatus& n : nodes) {
    if (n.record.state == api::NodeState::kGone || n.record.state == api::NodeState::kLost) continue;
    for (const auto& d : n.disks) e.Sample({{"node", n.record.name}, {"dir", d.dir}}, static_cast<double>(d.free_bytes));
  }
  e.Family("gpufleet_node_disk_size_bytes", "gauge", "The size of the file system under each directory of gpufleet_node_disk_free_bytes.");
  for (const NodeStatus& n : nodes) {
    if (n.record.state == api::NodeState::kGone || n.record.state == api::NodeState::kLost) continue;
    for (const auto& d : n.disks) e.Sample({{"node", n.record.name}, {"dir", d.dir}}, static_cast<double>(d.size_bytes));
  }

  // Running jobs: the watchdog's view.
  e.Family("gpufleet_job_last_activity_age_seconds", "gauge",
           "Time since a running job's last progress report, log output or start, whichever is latest.");
  for (const auto& j : running) {
    Time last = j.started;
    if (j.progress_at) last = std::max(last, *j.progress_at);
    if (j.last_output) last = std::max(last, *j.last_output);
    e.Sample({{"job_id", std::to_string(j.id.value())}, {"team", j.team}}, std::max(0.0, (now - last).seconds_f()));
  }
  e.Family("gpufleet_job_stall_timeout_seconds", "gauge", "The stall_timeout of running jobs that set one.");
  for (const auto& j : running) {
    if (j.watchdog.stall_timeout <= Duration::Zero()) continue;
    e.Sample({{"job_id", std::to_string(j.id.value())}, {"team", j.team}}, j.watchdog.stall_timeout.seconds_f());
  }
  e.Family("gpufleet_job_progress_step", "gauge", "The last step a running job reported (GPUFLEET_PROGRESS).");
  for (const auto& j : running) {
    if (!j.step) continue;
    e.Sample({{"job_id", std::to_string(j.id.value())}, {"team", j.team}}, static_cast<double>(*j.step));
  }

  // Scheduler, store, API.
  engine.pass_seconds().Write(e, "gpufleet_scheduler_pass_duration_seconds", "Time of one scheduling pass.");
  engine.commit_seconds().Write(e, "gpufleet_store_commit_duration_seconds", "Time of one store transaction.");
  engine.environment_seconds().Write(e, "gpufleet_job_environment_seconds",
                                     "Per started part with an environment: time to prepare it on its node (0: warm start).");
  if (s.api) {
    s.api->submit_seconds.Write(e, "gpufleet_submit_duration_seconds",
                                "Time to answer POST /v1/jobs (durable submission), in seconds.");
    s.api->requests.Write(e, "gpufleet_api_requests_total", "API requests by route, method and status code.");
  }

  // Money.
  e.Family("gpufleet_team_spend_dollars", "gauge", "What each team spent (in its budget period; all time without one).");
  std::vector<Engine::TeamCost> costs = engine.TeamCosts();
  for (const auto& t : costs) e.Sample({{"team", t.team}}, static_cast<double>(t.spend.spent_micros) / 1e6);
  auto limit = [](const Engine::TeamCost& t) -> int64_t {
    if (!t.budget) return 0;
    return t.budget->hard_micros > 0 ? t.budget->hard_micros : t.budget->soft_micros;
  };
  e.Family("gpufleet_team_budget_dollars", "gauge", "Each team's budget: its hard limit, else its soft one.");
  for (const auto& t : costs) {
    if (limit(t) > 0) e.Sample({{"team", t.team}}, static_cast<double>(limit(t)) / 1e6);
  }
  e.Family("gpufleet_team_budget_remaining_dollars", "gauge", "What is left of each team's budget (negative: overspent).");
  for (const auto& t : costs) {
    if (limit(t) > 0) e.Sample({{"team", t.team}}, static_cast<double>(limit(t) - t.spend.spent_micros) / 1e6);
  }
  e.Family("gpufleet_spot_interruptions_total", "counter", "Spot interruption notices acted on.");
  e.Sample({}, static_cast<double>(stats.spot_interruptions));
  e.Family("gpufleet_preemptions_total", "counter", "Running jobs stopped to be requeued, by reason.");
  for (const auto& [reason, n] : stats.preemptions) e.Sample({{"reason", reason}}, static_cast<double>(n));
  e.Family("gpufleet_job_restarts_total", "counter", "Runs that ended and went back to the queue (preemption, node loss, error restarts, watchdog).");
  e.Sample({}, static_cast<double>(stats.requeues));

  e.Family("gpufleet_pool_instances", "gauge", "Instances the pool rents now, by offer and market (none without a pool).");
  if (s.pool) {
    std::map<std::pair<std::string, std::string>, int> instances;
    std::map<std::string, std::string> market;
    for (const auto& o : s.pool->config().offers) market[o.name] = model::MarketName(o.market);
    for (const PoolInstance& i : s.pool->Instances()) ++instances[{i.offer, market[i.offer]}];
    for (const auto& [k, n] : instances) e.Sample({{"offer", k.first}, {"market", k.second}}, n);
  }
  if (s.monitor) s.monitor->WriteMetrics(e);
  return e.Text();
}

}  // namespace gpufleet::controller
