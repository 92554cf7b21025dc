#include "obs/alerts.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/strings.h"

namespace gpufleet::obs {
namespace {

std::string Dollars(double d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "$%.2f", d);
  return buf;
}

// "4.2 %" (one decimal: a disk with 0.04 % left is not "0 %").
std::string FormatPercent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %%", 100 * fraction);
  return buf;
}

std::string Key(const std::string& name, const std::map<std::string, std::string>& labels) {
  std::string k = name;
  for (const auto& [n, v] : labels) k += "\x1f" + n + "=" + v;
  return k;
}

std::string GpuText(const GpuState& g) { return "GPU " + std::to_string(g.gpu) + " of node " + g.node; }

// "job 12", or "jobs 12, 15" for slices of one GPU held by several jobs.
std::string HeldBy(const GpuState& g) {
  std::string s = (g.sharing.empty() ? "job " : "jobs ") + std::to_string(g.job_id);
  for (int64_t id : g.sharing) s += ", " + std::to_string(id);
  return s;
}

std::map<std::string, std::string> GpuLabels(const GpuState& g) {
  std::map<std::string, std::string> l{{"node", g.node}, {"gpu", std::to_string(g.gpu)}};
  if (!g.uuid.empty()) l["UUID"] = g.uuid;
  if (g.job_id != 0) {
    // Every job on a GPU that slices share, as the DCGM series name them ("12,15"; teams sorted
    // and once each), so that a route on a team sees its GPUs however they are shared.
    std::string jobs = std::to_string(g.job_id);
    for (int64_t id : g.sharing) jobs += "," + std::to_string(id);
    l["job_id"] = jobs;
    std::set<std::string> teams;
    if (!g.team.empty()) teams.insert(g.team);
    for (const std::string& t : g.sharing_teams) {
      if (!t.empty()) teams.insert(t);
    }
    std::string team;
    for (const std::string& t : teams) team += (team.empty() ? "" : ",") + t;
    if (!team.empty()) l["team"] = team;
  }
  return l;
}

}  // namespace

const std::vector<std::string>& AlertRuleNames() {
  static const std::vector<std::string> names = {"GpuAllocatedIdle", "GpuHot",      "GpuMemorySwing",    "NodeSilent",
                                                 "JobStalled",       "SpotNotice",  "BudgetNearlySpent", "QueueWaitOverSlo",
                                                 "NodeQuarantined",  "NodeStorageFault", "NodeDiskLow"};
  return names;
}

const char* AlertStateName(AlertState s) {
  switch (s) {
    case AlertState::kPending: return "pending";
    case AlertState::kFiring: return "firing";
    case AlertState::kResolved: return "resolved";
  }
  return "?";
}

Status SetAlertRule(AlertRules& r, const std::string& key, const std::string& value) {
  auto duration = [&](Duration& d) -> Status {
    auto v = ParseDuration(value);
    if (!v) return Status::InvalidArgument(key + ": expected a duration such as 90s, 15m or 1h, got '" + value + "'");
    d = *v;
    return Status::Ok();
  };
  auto integer = [&](auto& out, int64_t lo, int64_t hi) -> Status {
    auto v = ParseInt(value);
    if (!v || *v < lo || *v > hi) {
      return Status::InvalidArgument(key + ": expected a whole number " + std::to_string(lo) + ".." + std::to_string(hi) +
                                     ", got '" + value + "'");
    }
    out = static_cast<std::remove_reference_t<decltype(out)>>(*v);
    return Status::Ok();
  };
  auto fraction = [&](double& out) -> Status {
    auto v = ParseDouble(value);
    if (!v || !(*v > 0) || *v > 1) return Status::InvalidArgument(key + ": expected a fraction in (0, 1], got '" + value + "'");
    out = *v;
    return Status::Ok();
  };
  if (key == "enabled") {
    if (value != "true" && value != "false") return Status::InvalidArgument("enabled: expected true or false, got '" + value + "'");
    r.enabled = value == "true";
    return Status::Ok();
  }
  if (key == "idle_util_pct") return integer(r.idle_util_pct, 0, 100);
  if (key == "idle_for") return duration(r.idle_for);
  if (key == "hot_temp_c") return integer(r.hot_temp_c, 0, 150);
  if (key == "hot_for") return duration(r.hot_for);
  if (key == "swing_fraction") return fraction(r.swing_fraction);
  if (key == "swing_window") {
    GF_RETURN_IF_ERROR(duration(r.swing_window));
    if (r.swing_window <= Duration::Zero()) return Status::InvalidArgument("swing_window: must be longer than 0s");
    return Status::Ok();
  }
  if (key == "swing_count") return integer(r.swing_count, 1, 1000);
  if (key == "swing_period") return duration(r.swing_period);
  if (key == "swing_floor_mib") return integer(r.swing_floor_mib, 0, int64_t{1} << 30);
  if (key == "silent_after") {
    // 0s would call every node silent at every evaluation.
    GF_RETURN_IF_ERROR(duration(r.silent_after));
    if (r.silent_after <= Duration::Zero()) {
      return Status::InvalidArgument("silent_after: must be longer than 0s (a node is silent after this long without a heartbeat)");
    }
    return Status::Ok();
  }
  if (key == "disk_low_fraction") return fraction(r.disk_low_fraction);
  if (key == "disk_low_for") return duration(r.disk_low_for);
  if (key == "budget_fraction") return fraction(r.budget_fraction);
  if (key == "queue_wait_slo") return duration(r.queue_wait_slo);
  if (key == "keep_resolved") return duration(r.keep_resolved);
  if (key == "disabled") {
    for (const std::string& name : Split(value, ',')) {
      std::string n(Trim(name));
      if (n.empty()) continue;
      const auto& all = AlertRuleNames();
      if (std::find(all.begin(), all.end(), n) == all.end()) {
        return Status::InvalidArgument("disabled: unknown rule '" + n + "'; rules: " + Join(all, ", "));
      }
      r.disabled.push_back(n);
    }
    return Status::Ok();
  }
  return Status::InvalidArgument("unknown alert setting '" + key +
                                 "'; settings: enabled, idle_util_pct, idle_for, hot_temp_c, hot_for, swing_fraction, "
                                 "swing_window, swing_count, swing_period, swing_floor_mib, silent_after, "
                                 "disk_low_fraction, disk_low_for, budget_fraction, queue_wait_slo, keep_resolved, disabled");
}

bool AlertEngine::On(const std::string& rule) const {
  return rules_.enabled && std::find(rules_.disabled.begin(), rules_.disabled.end(), rule) == rules_.disabled.end();
}

void AlertEngine::Conditions(Time now, const AlertInput& in, std::vector<Condition>& out) {
  const AlertRules& r = rules_;
  // Per-job GPU activity first: the watchdog needs it, and it must be kept even with the GPU
  // rules off.
  std::map<int64_t, bool> seen_jobs;
  for (const JobActivity& j : in.jobs) {
    auto [it, fresh] = job_busy_.try_emplace(j.job_id, JobBusy{j.started, j.started});
    if (!fresh && it->second.started != j.started) it->second = JobBusy{j.started, j.started};
    seen_jobs[j.job_id] = true;
  }
  for (auto it = job_busy_.begin(); it != job_busy_.end();) {
    it = seen_jobs.count(it->first) ? std::next(it) : job_busy_.erase(it);
  }
  for (const GpuState& g : in.gpus) {
    if (g.job_id == 0 || g.util_pct < r.idle_util_pct) continue;
    // Every job holding a slice of a busy GPU counts as busy (its share cannot be told apart).
    auto mark = [&](int64_t id) {
      auto it = job_busy_.find(id);
      if (it != job_busy_.end()) it->second.last_busy = now;
    };
    mark(g.job_id);
    for (int64_t id : g.sharing) mark(id);
  }

  std::map<std::string, bool> seen_gpus;
  for (const GpuState& g : in.gpus) {
    if (On("GpuAllocatedIdle") && g.job_id != 0 && g.util_pct < r.idle_util_pct) {
      out.push_back({"GpuAllocatedIdle", "warning", GpuLabels(g),
                     GpuText(g) + " is held by " + HeldBy(g) + " but runs at " +
                         std::to_string(g.util_pct) + "% (under " + std::to_string(r.idle_util_pct) + "%)",
                     r.idle_for});
    }
    if (On("GpuHot") && g.temperature_c > r.hot_temp_c) {
      // The GPU's alert, whichever job holds it: a job that ends or starts on a GPU that stays
      // hot neither resolves it nor starts its hot_for again (the job is named in the text).
      std::map<std::string, std::string> labels{{"node", g.node}, {"gpu", std::to_string(g.gpu)}};
      if (!g.uuid.empty()) labels["UUID"] = g.uuid;
      out.push_back({"GpuHot", "critical", std::move(labels),
                     GpuText(g) + " is at " + std::to_string(g.temperature_c) + " °C (limit " +
                         std::to_string(r.hot_temp_c) + " °C)" +
                         (g.job_id != 0 ? "; held by " + HeldBy(g) : std::string()),
                     r.hot_for});
    }
    // Memory swings: one history per GPU, restarted when its job changes.
    std::string key = g.node + "/" + std::to_string(g.gpu);
    seen_gpus[key] = true;
    GpuHistory& h = gpu_history_[key];
    if (h.job_id != g.job_id) h = GpuHistory{{}, {}, g.job_id};
    h.samples.emplace_back(now, g.mem_used_mib);
    while (!h.samples.empty() && now - h.samples.front().first > r.swing_window) h.samples.pop_front();
    int64_t hi = 0, lo = INT64_MAX;
    for (const auto& [t, mib] : h.samples) {
      hi = std::max(hi, mib);
      lo = std::min(lo, mib);
    }
    if (hi >= r.swing_floor_mib && static_cast<double>(hi - lo) > r.swing_fraction * static_cast<double>(hi) &&
        (h.swings.empty() || now - h.swings.back() >= r.swing_window)) {
      h.swings.push_back(now);
      h.samples.erase(h.samples.begin(), h.samples.end() - 1);  // the next swing is a new jump
    }
    while (!h.swings.empty() && now - h.swings.front() > r.swing_period) h.swings.pop_front();
    if (On("GpuMemorySwing") && static_cast<int>(h.swings.size()) >= r.swing_count) {
      out.push_back({"GpuMemorySwing", "warning", GpuLabels(g),
                     GpuText(g) + (g.job_id ? " (" + HeldBy(g) + ")" : std::string()) +
                         ": memory use jumped by more than " + std::to_string(std::lround(r.swing_fraction * 100)) +
                         "% within " + FormatDuration(r.swing_window) + ", " + std::to_string(h.swings.size()) +
                         " times in " + FormatDuration(r.swing_period) + " (now " + std::to_string(g.mem_used_mib) +
                         " MiB): a leak or thrashing",
                     Duration::Zero()});
    }
  }
  for (auto it = gpu_history_.begin(); it != gpu_history_.end();) {
    it = seen_gpus.count(it->first) ? std::next(it) : gpu_history_.erase(it);
  }

  for (const NodeState& n : in.nodes) {
    if (n.gone) continue;
    if (On("NodeSilent") && n.since_heartbeat >= r.silent_after) {
      out.push_back({"NodeSilent", "critical", {{"node", n.name}},
                     "node " + n.name +
                         (n.unheard_since_start ? " has not reported since the controller started " +
                                                      FormatDuration(n.since_heartbeat) + " ago"
                                                : " has not reported for " + FormatDuration(n.since_heartbeat)) +
                         (n.lost ? "; it was declared lost and its jobs were requeued"
                                 : "; its jobs are requeued when it is declared lost"),
                     Duration::Zero()});
    }
    if (On("SpotNotice") && n.spot_notice_at) {
      out.push_back({"SpotNotice", "warning", {{"node", n.name}},
                     "the provider will " + (n.spot_action.empty() ? std::string("terminate") : n.spot_action) +
                         " node " + n.name + " at " + FormatIso8601(*n.spot_notice_at) +
                         "; its jobs checkpoint and move",
                     Duration::Zero()});
    }
    if (On("NodeQuarantined") && !n.quarantined.empty()) {
      out.push_back({"NodeQuarantined", "warning", {{"node", n.name}},
                     "node " + n.name + " failed its acceptance burn-in and takes no work: " + n.quarantined,
                     Duration::Zero()});
    }
    if (On("NodeStorageFault") && !n.storage_fault.empty() && !n.lost) {
      out.push_back({"NodeStorageFault", "warning", {{"node", n.name}},
                     "node " + n.name + " takes no work: " + n.storage_fault +
                         "; jobs it cannot start go back to the queue, and it takes work again once its agent can "
                         "write there",
                     Duration::Zero()});
    }
  }

  if (On("NodeDiskLow")) {
    for (const NodeState& n : in.nodes) {
      if (n.gone || n.lost) continue;  // (a lost node's last word is stale)
      for (const NodeState::Disk& d : n.disks) {
        if (d.size_bytes <= 0) continue;
        const double left = static_cast<double>(d.free_bytes) / static_cast<double>(d.size_bytes);
        if (left >= r.disk_low_fraction) continue;
        const std::string what = d.dir == "data" ? "data directory" : "environments directory";
        out.push_back({"NodeDiskLow", "warning", {{"node", n.name}, {"dir", d.dir}},
                       "node " + n.name + "'s " + what + " " + d.path + " has " + FormatBytes(d.free_bytes) + " free of " +
                           FormatBytes(d.size_bytes) + " (" + FormatPercent(left) + ", under " +
                           FormatPercent(r.disk_low_fraction) + "); " +
                           (d.dir == "data" ? "jobs there fail to start or lose their logs once it is full"
                                            : "environments no longer fit once it is full") +
                           ": free some room, or drain the node",
                       r.disk_low_for});
      }
    }
  }

  if (On("JobStalled")) {
    for (const JobActivity& j : in.jobs) {
      if (j.stall_timeout <= Duration::Zero()) continue;
      Time last = j.started;
      if (j.last_progress) last = std::max(last, *j.last_progress);
      if (j.last_output) last = std::max(last, *j.last_output);
      auto busy = job_busy_.find(j.job_id);
      if (busy != job_busy_.end()) last = std::max(last, busy->second.last_busy);
      if (now - last < j.stall_timeout) continue;
      std::map<std::string, std::string> labels{{"job_id", std::to_string(j.job_id)}};
      if (!j.team.empty()) labels["team"] = j.team;
      std::string what = "job " + std::to_string(j.job_id) + (j.name.empty() ? "" : " (" + j.name + ")");
      out.push_back({"JobStalled", "warning", labels,
                     what + " made no progress, wrote no output and kept its GPUs idle for " +
                         FormatDuration(now - last) + " (stall_timeout " + FormatDuration(j.stall_timeout) + ")" +
                         (j.step ? "; last step " + std::to_string(*j.step) : std::string()),
                     Duration::Zero()});
    }
  }

  if (On("BudgetNearlySpent")) {
    for (const TeamMoney& t : in.teams) {
      if (t.budget_dollars <= 0) continue;
      const std::string spent = "team " + t.team + " spent " + Dollars(t.spend_dollars) + " of its " +
                                Dollars(t.budget_dollars) + " budget (" +
                                std::to_string(std::lround(100 * t.spend_dollars / t.budget_dollars)) + "%)";
      if (t.hard_stopped) {
        // Stopped early by its stop lead, usually well below budget_fraction of the limit.
        out.push_back({"BudgetNearlySpent", "warning", {{"team", t.team}},
                       spent + ": its hard budget stopped it (no new starts; running jobs stopped with their grace)",
                       Duration::Zero()});
      } else if (t.spend_dollars >= r.budget_fraction * t.budget_dollars) {
        out.push_back({"BudgetNearlySpent", "warning", {{"team", t.team}}, spent, Duration::Zero()});
      } else if (t.soft_dollars > 0 && t.spend_dollars >= t.soft_dollars) {
        out.push_back({"BudgetNearlySpent", "warning", {{"team", t.team}},
                       spent + ", past its soft budget of " + Dollars(t.soft_dollars), Duration::Zero()});
      }
    }
  }

  if (On("QueueWaitOverSlo") && in.oldest_pending_job && in.oldest_pending_wait > r.queue_wait_slo) {
    out.push_back({"QueueWaitOverSlo", "warning", {},
                   "job " + std::to_string(*in.oldest_pending_job) + " has waited " +
                       FormatDuration(in.oldest_pending_wait) + " to start (SLO " + FormatDuration(r.queue_wait_slo) + ")",
                   Duration::Zero()});
  }
}

std::vector<Alert> AlertEngine::Evaluate(Time now, const AlertInput& in) {
  std::vector<Condition> conditions;
  Conditions(now, in, conditions);
  std::vector<Alert> changed;
  std::map<std::string, bool> active;
  for (Condition& c : conditions) {
    std::string key = Key(c.name, c.labels);
    if (active[key]) continue;  // the same alert twice in one input: the first counts
    active[key] = true;
    restored_.erase(key);
    auto it = alerts_.find(key);
    if (it == alerts_.end() || it->second.state == AlertState::kResolved) {
      Alert a{c.name, c.severity, c.labels, c.message, AlertState::kPending, now, std::nullopt, std::nullopt};
      it = alerts_.insert_or_assign(key, std::move(a)).first;
    }
    Alert& a = it->second;
    a.message = c.message;
    if (a.state == AlertState::kPending && now - a.started >= c.hold) {
      a.state = AlertState::kFiring;
      a.fired = now;
      changed.push_back(a);
    }
  }
  for (auto it = alerts_.begin(); it != alerts_.end();) {
    Alert& a = it->second;
    if (!active.count(it->first)) {
      if (a.state == AlertState::kPending) {
        it = alerts_.erase(it);
        continue;
      }
      if (a.state == AlertState::kFiring && restored_.count(it->first) && now < settle_until_) {
        ++it;  // restored: its condition may not be in the input yet
        continue;
      }
      restored_.erase(it->first);
      if (a.state == AlertState::kFiring) {
        a.state = AlertState::kResolved;
        a.resolved = now;
        changed.push_back(a);
      } else if (a.resolved && now - *a.resolved > rules_.keep_resolved) {
        it = alerts_.erase(it);
        continue;
      }
    }
    ++it;
  }
  return changed;
}

std::vector<Alert> AlertEngine::Saved() const {
  std::vector<Alert> out;
  for (const auto& [k, a] : alerts_) out.push_back(a);
  return out;
}

void AlertEngine::Restore(const std::vector<Alert>& alerts, Time settle_until) {
  settle_until_ = settle_until;
  for (const Alert& a : alerts) {
    const std::string key = Key(a.name, a.labels);
    alerts_.insert_or_assign(key, a);
    if (a.state == AlertState::kFiring) restored_.insert(key);
  }
}

std::vector<Alert> AlertEngine::Alerts() const {
  std::vector<Alert> out;
  for (const auto& [k, a] : alerts_) out.push_back(a);
  auto rank = [](AlertState s) { return s == AlertState::kFiring ? 0 : s == AlertState::kPending ? 1 : 2; };
  std::stable_sort(out.begin(), out.end(), [&](const Alert& x, const Alert& y) {
    if (rank(x.state) != rank(y.state)) return rank(x.state) < rank(y.state);
    return x.started < y.started;
  });
  return out;
}

}  // namespace gpufleet::obs
