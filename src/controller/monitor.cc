#include "controller/monitor.h"

#include <httplib.h>
#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "common/source_location.h"
#include "common/strings.h"

namespace gpufleet::controller {
namespace {

std::string Fingerprint(const obs::Alert& a) {
  // FNV-1a of the alert's identity, as 16 hex digits (Alertmanager's webhook carries one).
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const std::string& s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ull;
    }
    h ^= 0xff;
    h *= 1099511628211ull;
  };
  mix(a.name);
  for (const auto& [k, v] : a.labels) {
    mix(k);
    mix(v);
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string Summary(const obs::Alert& a) {
  if (a.name == "GpuAllocatedIdle") return "A GPU held by a job is idle";
  if (a.name == "GpuHot") return "A GPU is over its temperature limit";
  if (a.name == "GpuMemorySwing") return "A GPU's memory use keeps swinging";
  if (a.name == "NodeSilent") return "A node stopped reporting";
  if (a.name == "JobStalled") return "A job stopped making progress";
  if (a.name == "SpotNotice") return "A spot node is being reclaimed";
  if (a.name == "NodeQuarantined") return "A node failed its acceptance burn-in";
  if (a.name == "BudgetNearlySpent") return "A team has nearly spent its budget";
  if (a.name == "QueueWaitOverSlo") return "Jobs wait longer than the queue-wait SLO";
  return a.name;
}

}  // namespace

Result<obs::AlertRules> LoadAlertRules(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound(path + ": cannot read the alert rules file");
  std::stringstream text;
  text << in.rdbuf();
  YAML::Node doc;
  try {
    doc = YAML::Load(text.str());
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(SourcePrefixAt(path, e.mark) + e.msg);
  }
  obs::AlertRules rules;
  if (doc.IsNull()) return rules;
  if (!doc.IsMap()) {
    return Status::InvalidArgument(SourcePrefixAt(path, doc.Mark()) +
                                   "expected settings such as 'hot_temp_c: 85', one per line");
  }
  std::set<std::string> seen;
  for (const auto& kv : doc) {
    std::string key = kv.first.as<std::string>("");
    // A setting given twice: which one was meant is not for the controller to guess.
    if (!seen.insert(key).second) {
      return Status::InvalidArgument(SourcePrefixAt(path, kv.first.Mark()) + key +
                                     ": given twice; keep one");
    }
    // Errors point at the value that is wrong, or at the key of an unknown setting.
    std::string value;
    if (kv.second.IsSequence()) {
      std::vector<std::string> items;
      for (const auto& item : kv.second) {
        if (!item.IsScalar()) {
          return Status::InvalidArgument(SourcePrefixAt(path, item.Mark()) + key + ": expected a list of names");
        }
        items.push_back(item.Scalar());
      }
      value = Join(items, ",");
    } else if (kv.second.IsScalar()) {
      value = kv.second.Scalar();
    } else {
      return Status::InvalidArgument(SourcePrefixAt(path, kv.second.Mark()) + key +
                                     (key == "disabled" ? ": expected a list of rule names, e.g. [GpuHot]"
                                                        : ": expected a value"));
    }
    if (Status st = obs::SetAlertRule(rules, key, value); !st.ok()) {
      YAML::Mark at = kv.second.Mark();
      if (StartsWith(st.message(), "unknown alert setting")) {  // SetAlertRule's word for a key it does not know
        at = kv.first.Mark();
      } else if (kv.second.IsSequence()) {
        for (const auto& item : kv.second) {  // the entry that is wrong, if one alone is
          obs::AlertRules scratch;
          if (!obs::SetAlertRule(scratch, key, item.Scalar()).ok()) {
            at = item.Mark();
            break;
          }
        }
      }
      return Status::InvalidArgument(SourcePrefixAt(path, at) + st.message());
    }
  }
  // Settings that make sense alone but not together.
  if (rules.swing_window > rules.swing_period) {
    return Status::InvalidArgument(path + ": swing_window (" + FormatDuration(rules.swing_window) +
                                   ") is longer than swing_period (" + FormatDuration(rules.swing_period) +
                                   "): a swing is counted within the window, the swings within the period");
  }
  return rules;
}

nlohmann::json AlertmanagerAlert(const obs::Alert& a, const std::string& generator_url) {
  nlohmann::json labels = {{"alertname", a.name}, {"severity", a.severity}, {"source", "gpufleet"}};
  for (const auto& [k, v] : a.labels) labels[k] = v;
  nlohmann::json j = {{"labels", labels},
                      {"annotations", {{"summary", Summary(a)}, {"description", a.message}}},
                      {"startsAt", FormatIso8601(a.fired.value_or(a.started))}};
  if (a.resolved) j["endsAt"] = FormatIso8601(*a.resolved);
  if (!generator_url.empty()) j["generatorURL"] = generator_url;
  return j;
}

std::map<std::pair<int64_t, int>, GpuHolders> HoldersByGpu(const std::vector<Engine::JobWatch>& running) {
  std::map<std::pair<int64_t, int>, std::vector<const Engine::JobWatch*>> jobs;
  for (const auto& j : running) {
    for (const auto& part : j.parts) {
      for (int g : part.gpus) jobs[{part.node.value(), g}].push_back(&j);
    }
  }
  std::map<std::pair<int64_t, int>, GpuHolders> out;
  for (auto& [gpu, list] : jobs) {
    std::sort(list.begin(), list.end(), [](const auto* a, const auto* b) { return a->id < b->id; });
    GpuHolders& h = out[gpu];
    h.job_id = list[0]->id.value();
    h.team = list[0]->team;
    for (size_t k = 1; k < list.size(); ++k) {
      h.sharing.push_back(list[k]->id.value());
      h.sharing_teams.push_back(list[k]->team);
    }
  }
  return out;
}

Monitor::Monitor(Engine& engine, const sched::Clock& clock, MonitorOptions options)
    : engine_(engine), clock_(clock), options_(std::move(options)), alerts_(options_.rules) {}

Monitor::~Monitor() { Stop(); }

obs::AlertInput Monitor::Snapshot(Time now) {
  obs::AlertInput in;
  std::vector<Engine::JobWatch> running = engine_.RunningJobs();
  const auto holder = HoldersByGpu(running);
  for (const auto& j : running) {
    obs::JobActivity a;
    a.job_id = j.id.value();
    a.name = j.name;
    a.team = j.team;
    a.stall_timeout = j.watchdog.stall_timeout;
    a.started = j.started;
    a.last_progress = j.progress_at;
    a.last_output = j.last_output;
    a.step = j.step;
    in.jobs.push_back(std::move(a));
  }
  for (const NodeStatus& n : engine_.Nodes()) {
    const api::NodeRecord& r = n.record;
    obs::NodeState ns;
    ns.name = r.name;
    ns.gone = r.state == api::NodeState::kGone;
    ns.lost = r.state == api::NodeState::kLost;
    // (Not the stored last heartbeat: heartbeats are kept in memory, and after a restart the stored
    // one is as old as the node's last registration, which would page for every node at once.)
    ns.since_heartbeat = now - n.last_seen;
    ns.unheard_since_start = !n.heard_since_start;
    if (n.notice) {
      ns.spot_notice_at = n.notice->time;
      ns.spot_action = n.notice->action;
    }
    if (r.acceptance == "quarantined") ns.quarantined = r.acceptance_reason;
    ns.storage_fault = n.storage_fault;
    for (const auto& d : n.disks) ns.disks.push_back({d.dir, d.path, d.free_bytes, d.size_bytes});
    in.nodes.push_back(ns);
    if (ns.gone) history_.Forget(r.name);
    if (ns.gone || ns.lost) continue;  // its telemetry is stale
    for (size_t g = 0; g < n.telemetry.size(); ++g) {
      const api::GpuSampleReport& t = n.telemetry[g];
      obs::GpuState gs;
      gs.node = r.name;
      gs.gpu = g < r.gpus.size() ? r.gpus[g].index : static_cast<int>(g);
      gs.uuid = g < r.gpus.size() ? r.gpus[g].uuid : "";
      gs.util_pct = t.util_pct;
      gs.mem_used_mib = t.mem_used_mib;
      gs.temperature_c = t.temperature_c;
      if (auto h = holder.find({r.id.value(), gs.gpu}); h != holder.end()) {
        gs.job_id = h->second.job_id;
        gs.team = h->second.team;
        gs.sharing = h->second.sharing;
        gs.sharing_teams = h->second.sharing_teams;
      }
      history_.Record(r.name, gs.gpu,
                      obs::GpuPoint{now, static_cast<int16_t>(t.util_pct), static_cast<int16_t>(t.temperature_c), t.power_w,
                                    t.mem_used_mib});
      in.gpus.push_back(std::move(gs));
    }
  }
  for (const auto& t : engine_.TeamCosts()) {
    obs::TeamMoney m;
    m.team = t.team;
    m.spend_dollars = static_cast<double>(t.spend.spent_micros) / 1e6;
    if (t.budget) {
      int64_t limit = t.budget->hard_micros > 0 ? t.budget->hard_micros : t.budget->soft_micros;
      m.budget_dollars = static_cast<double>(limit) / 1e6;
      m.soft_dollars = static_cast<double>(t.budget->soft_micros) / 1e6;
      m.hard_stopped = t.budget->hard_micros > 0 && t.spend.hard_stop;
    }
    in.teams.push_back(std::move(m));
  }
  if (Engine::QueueCounts q = engine_.CountQueue(); q.oldest_pending) {
    in.oldest_pending_job = q.oldest_pending->value();
    in.oldest_pending_wait = now - q.oldest_pending_since;  // since it last became pending
  }
  return in;
}

namespace {

nlohmann::json SavedAlertJson(const obs::Alert& a) {
  nlohmann::json j = {{"name", a.name},   {"severity", a.severity}, {"labels", a.labels},
                      {"message", a.message}, {"state", obs::AlertStateName(a.state)}, {"started_ms", a.started.millis()}};
  if (a.fired) j["fired_ms"] = a.fired->millis();
  if (a.resolved) j["resolved_ms"] = a.resolved->millis();
  return j;
}

std::optional<obs::Alert> SavedAlertFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return std::nullopt;
  try {
    obs::Alert a;
    a.name = j.at("name").get<std::string>();
    a.severity = j.value("severity", "");
    a.labels = j.value("labels", std::map<std::string, std::string>{});
    a.message = j.value("message", "");
    const std::string state = j.at("state").get<std::string>();
    if (state == obs::AlertStateName(obs::AlertState::kFiring)) {
      a.state = obs::AlertState::kFiring;
    } else if (state == obs::AlertStateName(obs::AlertState::kResolved)) {
      a.state = obs::AlertState::kResolved;
    } else {
      a.state = obs::AlertState::kPending;
    }
    a.started = Time::FromMillis(j.at("started_ms").get<int64_t>());
    if (j.contains("fired_ms")) a.fired = Time::FromMillis(j.at("fired_ms").get<int64_t>());
    if (j.contains("resolved_ms")) a.resolved = Time::FromMillis(j.at("resolved_ms").get<int64_t>());
    return a;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

}  // namespace

void Monitor::RestoreAlerts() {
  if (!options_.store) return;
  auto saved = options_.store->GetMeta("alerts");
  if (!saved.ok()) {
    spdlog::warn("alerts: cannot read their saved state: {}", saved.status().message());
    return;
  }
  if (!*saved) return;
  auto j = nlohmann::json::parse(**saved, nullptr, false);
  if (!j.is_array()) {
    spdlog::warn("alerts: their saved state is not a list; starting without it");
    return;
  }
  std::vector<obs::Alert> alerts;
  for (const auto& item : j) {
    if (auto a = SavedAlertFromJson(item)) alerts.push_back(std::move(*a));
  }
  saved_ = **saved;
  MutexLock lock(mu_);
  alerts_.Restore(alerts, clock_.Now() + options_.settle);
  current_ = alerts_.Alerts();
}

void Monitor::SaveAlerts(const std::vector<obs::Alert>& alerts) {
  if (!options_.store) return;
  nlohmann::json list = nlohmann::json::array();
  for (const obs::Alert& a : alerts) list.push_back(SavedAlertJson(a));
  std::string text = list.dump();
  if (text == saved_) return;
  Status st = options_.store->SetMeta("alerts", text);
  if (!st.ok()) {
    spdlog::warn("alerts: cannot save their state: {}", st.message());
    return;
  }
  saved_ = std::move(text);
}

void Monitor::EvaluateOnce() {
  Time now = clock_.Now();
  obs::AlertInput in = Snapshot(now);
  std::vector<obs::Alert> changed, all, saved;
  {
    MutexLock lock(mu_);
    changed = alerts_.Evaluate(now, in);
    all = alerts_.Alerts();
    current_ = all;
    if (options_.store) saved = alerts_.Saved();
  }
  SaveAlerts(saved);
  for (const obs::Alert& a : changed) {
    if (a.state == obs::AlertState::kFiring) {
      spdlog::warn("alert {} firing: {}", a.name, a.message);
    } else if (a.state == obs::AlertState::kResolved) {
      spdlog::info("alert {} resolved: {}", a.name, a.message);
    }
  }
  // Restarts asked for at earlier evaluations that the engine has answered since.
  for (auto it = restarting_.begin(); it != restarting_.end();) {
    if (it->second.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      ++it;
      continue;
    }
    Status st = it->second.get();
    if (st.ok()) {
      MutexLock lock(mu_);
      ++restarts_;
      spdlog::warn("job {} restarted by the watchdog", it->first);
    } else {
      spdlog::warn("watchdog: cannot restart job {}: {}", it->first, st.message());
    }
    it = restarting_.erase(it);
  }
  // The watchdog's restarts: asked for, not waited for (the engine answers at its next step).
  std::vector<Engine::JobWatch> running;
  for (const obs::Alert& a : changed) {
    if (a.name != "JobStalled" || a.state != obs::AlertState::kFiring) continue;
    auto id = ParseInt(a.labels.count("job_id") ? a.labels.at("job_id") : "");
    if (!id) continue;
    if (running.empty()) running = engine_.RunningJobs();
    bool restart = false;
    for (const auto& j : running) {
      if (j.id.value() == *id) restart = j.watchdog.restart_on_stall;
    }
    if (!restart) continue;
    restarting_.emplace_back(*id, engine_.Restart(JobId(*id), "stalled: " + a.message +
                                                                  "; restarting from its checkpoint (watchdog.on_stall: restart)"));
  }
  Notify(changed, all);
}

bool Monitor::Post(const std::string& url, const std::string& body) {
  // scheme://host[:port] and the path.
  auto scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return false;
  auto path_start = url.find('/', scheme_end + 3);
  std::string base = path_start == std::string::npos ? url : url.substr(0, path_start);
  std::string path = path_start == std::string::npos ? "/" : url.substr(path_start);
  httplib::Client c(base);
  time_t secs = static_cast<time_t>(options_.webhook_timeout.seconds());
  c.set_connection_timeout(secs, 0);
  c.set_read_timeout(secs, 0);
  c.set_write_timeout(secs, 0);
  auto res = c.Post(path, body, "application/json");
  bool ok = res && res->status >= 200 && res->status < 300;
  if (!ok) {
    spdlog::warn("alert webhook {}: {}", url,
                 res ? "HTTP " + std::to_string(res->status) : std::string(httplib::to_string(res.error())));
  }
  MutexLock lock(mu_);
  ++(ok ? sent_ok_ : sent_failed_);
  return ok;
}

void Monitor::Notify(const std::vector<obs::Alert>& changed, const std::vector<obs::Alert>& all) {
  if (options_.webhooks.empty()) return;
  std::string generator = options_.external_url.empty() ? "" : options_.external_url + "/#/";  // the overview, with its alerts panel
  std::vector<Outgoing> out;
  for (const std::string& url : options_.webhooks) {
    if (url.ends_with("/api/v2/alerts")) {
      nlohmann::json list = nlohmann::json::array();
      for (const obs::Alert& a : all) {
        if (a.state == obs::AlertState::kFiring) list.push_back(AlertmanagerAlert(a, generator));
      }
      for (const obs::Alert& a : changed) {
        if (a.state == obs::AlertState::kResolved) list.push_back(AlertmanagerAlert(a, generator));
      }
      if (!list.empty()) out.push_back({url, list.dump()});
      continue;
    }
    if (changed.empty()) continue;
    nlohmann::json alerts = nlohmann::json::array();
    bool any_firing = false;
    // What every alert of the message shares, as Alertmanager fills commonLabels and
    // commonAnnotations (receivers' templates read .CommonLabels.alertname and the like).
    nlohmann::json common_labels, common_annotations;
    for (const obs::Alert& a : changed) {
      nlohmann::json j = AlertmanagerAlert(a, generator);
      if (alerts.empty()) {
        common_labels = j["labels"];
        common_annotations = j["annotations"];
      } else {
        for (auto* common : {&common_labels, &common_annotations}) {
          const nlohmann::json& own = common == &common_labels ? j["labels"] : j["annotations"];
          for (auto it = common->begin(); it != common->end();) {
            it = own.contains(it.key()) && own[it.key()] == it.value() ? std::next(it) : common->erase(it);
          }
        }
      }
      j["status"] = a.state == obs::AlertState::kResolved ? "resolved" : "firing";
      j["fingerprint"] = Fingerprint(a);
      if (!j.contains("endsAt")) j["endsAt"] = "0001-01-01T00:00:00Z";
      any_firing = any_firing || a.state == obs::AlertState::kFiring;
      alerts.push_back(std::move(j));
    }
    nlohmann::json payload = {{"version", "4"},
                              {"groupKey", "{}:{source=\"gpufleet\"}"},
                              {"truncatedAlerts", 0},
                              {"status", any_firing ? "firing" : "resolved"},
                              {"receiver", "gpufleet"},
                              {"groupLabels", {{"source", "gpufleet"}}},
                              {"commonLabels", common_labels},
                              {"commonAnnotations", common_annotations},
                              {"externalURL", options_.external_url},
                              {"alerts", alerts}};
    out.push_back({url, payload.dump()});
  }
  {
    MutexLock lock(send_mu_);
    for (Outgoing& o : out) outbox_.push_back(std::move(o));
    while (outbox_.size() > kMaxQueued) outbox_.pop_front();  // the oldest go first
  }
  if (sender_.joinable()) {
    // Through wake_mu_, which the sender holds from testing its predicate until it waits: a
    // notification between the two would be lost, and the alert would wait for the next round.
    { MutexLock lock(wake_mu_); }
    send_cv_.NotifyAll();
  } else {
    Deliver();  // no sender thread (tests): deliver now
  }
}

void Monitor::Deliver() {
  std::deque<Outgoing> batch;
  {
    MutexLock lock(send_mu_);
    batch.swap(outbox_);
  }
  // In order; after a failure, the rest for that URL waits for the next round, so that a receiver
  // that is down costs one timeout per round, not one per message.
  std::set<std::string> down;
  std::deque<Outgoing> kept;
  for (Outgoing& o : batch) {
    if (down.count(o.url) || !Post(o.url, o.body)) {
      down.insert(o.url);
      kept.push_back(std::move(o));
    }
  }
  MutexLock lock(send_mu_);
  for (auto it = kept.rbegin(); it != kept.rend(); ++it) outbox_.push_front(std::move(*it));
  while (outbox_.size() > kMaxQueued) outbox_.pop_front();
}

std::vector<obs::Alert> Monitor::Alerts() const {
  MutexLock lock(mu_);
  return current_;
}

void Monitor::WriteMetrics(obs::Exposition& e) const {
  MutexLock lock(mu_);
  e.Family("gpufleet_alert", "gauge", "Active alerts of the controller's alert engine (1 per alert), as Prometheus' ALERTS.");
  std::map<std::string, int> by_state{{"pending", 0}, {"firing", 0}, {"resolved", 0}};
  for (const obs::Alert& a : current_) {
    ++by_state[obs::AlertStateName(a.state)];
    if (a.state == obs::AlertState::kResolved) continue;
    obs::Labels l{{"alertname", a.name}, {"alertstate", obs::AlertStateName(a.state)}, {"severity", a.severity}};
    for (const auto& [k, v] : a.labels) {
      if (obs::Exposition::ValidLabelName(k) && k != "alertname" && k != "alertstate" && k != "severity") l.emplace_back(k, v);
    }
    e.Sample(l, 1);
  }
  e.Family("gpufleet_alerts", "gauge", "Alerts by state (resolved: within the last keep_resolved).");
  for (const auto& [state, n] : by_state) e.Sample({{"state", state}}, n);
  e.Family("gpufleet_alert_notifications_total", "counter", "Webhook deliveries by result.");
  e.Sample({{"result", "ok"}}, static_cast<double>(sent_ok_));
  e.Sample({{"result", "failed"}}, static_cast<double>(sent_failed_));
  e.Family("gpufleet_watchdog_restarts_total", "counter", "Stalled jobs the watchdog restarted.");
  e.Sample({}, static_cast<double>(restarts_));
}

void Monitor::Start() {
  RestoreAlerts();
  if (!options_.webhooks.empty()) {
    // Deliveries on a thread of their own: a slow or dead receiver never holds up the rules or
    // the watchdog. New alerts go out as soon as Notify queues them; after a failed post what is
    // left waits for the next round (one interval), so that a receiver that is down is not
    // hammered with retries. Lock order: wake_mu_, then send_mu_ (the predicate reads the outbox).
    sender_ = std::thread([this] {
      auto failed_posts = [this] {
        MutexLock stats_lock(mu_);
        return sent_failed_;
      };
      MutexLock lock(wake_mu_);
      while (!stopping_) {
        lock.Unlock();
        const int64_t failed_before = failed_posts();
        Deliver();
        const bool failed = failed_posts() > failed_before;
        lock.Lock();
        send_cv_.WaitFor(wake_mu_, std::chrono::milliseconds(options_.interval.millis()), [this, failed] {
          wake_mu_.AssertHeld();
          if (stopping_) return true;
          if (failed) return false;
          MutexLock outbox_lock(send_mu_);
          return !outbox_.empty();
        });
      }
    });
  }
  thread_ = std::thread([this] {
    MutexLock lock(wake_mu_);
    while (!stopping_) {
      lock.Unlock();
      EvaluateOnce();
      lock.Lock();
      wake_.WaitFor(wake_mu_, std::chrono::milliseconds(options_.interval.millis()), [this] {
        wake_mu_.AssertHeld();
        return stopping_;
      });
    }
  });
}

void Monitor::Stop() {
  {
    MutexLock lock(wake_mu_);
    stopping_ = true;
  }
  wake_.NotifyAll();
  send_cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
  if (sender_.joinable()) sender_.join();
}

}  // namespace gpufleet::controller
