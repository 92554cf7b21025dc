#include "sched/policy/registry.h"

#include <algorithm>

#include "common/strings.h"
#include "sched/policy/fair_share.h"
#include "sched/policy/fifo.h"
#include "sched/policy/las.h"
#include "sched/policy/priority.h"
#include "sched/policy/sjf.h"
#include "sched/policy/topology_placement.h"

namespace gpufleet::sched {

namespace {

Result<bool> FifoOrderGpus(const PolicyOptions& own) {
  auto it = own.find("order");
  if (it == own.end()) return false;
  if (it->second != "submit" && it->second != "gpus") {
    return Status::InvalidArgument("order must be submit or gpus, got '" + it->second + "'");
  }
  return it->second == "gpus";
}

Result<std::unique_ptr<QueuePolicy>> MakeFifo(const PolicyOptions& own) {
  GF_ASSIGN_OR_RETURN(bool fewest_gpus_first, FifoOrderGpus(own));
  return std::unique_ptr<QueuePolicy>(std::make_unique<FifoPolicy>(fewest_gpus_first));
}

Result<std::unique_ptr<QueuePolicy>> MakePriority(const PolicyOptions& own) {
  PriorityOptions prio;
  if (auto it = own.find("aging"); it != own.end()) {
    auto d = ParseDuration(it->second);
    if (!d) return Status::InvalidArgument("aging must be a duration such as 30m or 2h, got '" + it->second + "'");
    prio.aging = *d;
  }
  if (auto it = own.find("preempt"); it != own.end()) prio.preempt = it->second == "true";
  return std::unique_ptr<QueuePolicy>(std::make_unique<PriorityPolicy>(prio));
}

Result<std::unique_ptr<QueuePolicy>> MakeFairShare(const PolicyOptions&) {
  return std::unique_ptr<QueuePolicy>(std::make_unique<FairSharePolicy>());
}

Result<std::unique_ptr<QueuePolicy>> MakeLas(const PolicyOptions& own) {
  LasOptions las;
  if (auto it = own.find("thresholds"); it != own.end()) {
    las.thresholds_gpu_s.clear();
    for (const auto& t : Split(it->second, ',')) {
      auto n = ParseInt(t);
      if (!n || *n <= 0 || (!las.thresholds_gpu_s.empty() && *n <= las.thresholds_gpu_s.back())) {
        return Status::InvalidArgument("thresholds must be increasing positive GPU-seconds, got '" + it->second + "'");
      }
      las.thresholds_gpu_s.push_back(*n);
    }
  }
  if (auto it = own.find("starve"); it != own.end()) {
    auto n = ParseInt(it->second);
    if (!n || *n < 0) return Status::InvalidArgument("starve must be a whole factor >= 0, got '" + it->second + "'");
    las.starve_factor = *n;
  }
  if (auto it = own.find("order"); it != own.end()) {
    if (it->second == "submit") {
      las.order = LasOrder::kSubmit;
    } else if (it->second == "entry") {
      las.order = LasOrder::kEntry;
    } else {
      return Status::InvalidArgument("order must be submit or entry, got '" + it->second + "'");
    }
  }
  return std::unique_ptr<QueuePolicy>(std::make_unique<LasPolicy>(las));
}

Result<std::unique_ptr<QueuePolicy>> MakeSjf(const PolicyOptions&) {
  return std::unique_ptr<QueuePolicy>(std::make_unique<SjfPolicy>(false));
}

Result<std::unique_ptr<QueuePolicy>> MakeSrtf(const PolicyOptions&) {
  return std::unique_ptr<QueuePolicy>(std::make_unique<SjfPolicy>(true));
}

}  // namespace

const std::vector<PolicyInfo>& PolicyTable() {
  static const std::vector<PolicyInfo> table = {
      {"fifo", "first come, first served in strict order (no backfill)", "order=submit|gpus", {"order"}, &MakeFifo,
       BackfillMode::kOff},
      {"backfill", "FIFO with EASY backfill: later jobs start if they do not delay the head", "order=submit|gpus",
       {"order"}, &MakeFifo, BackfillMode::kEasy},
      {"priority", "priority classes, optional aging, preempts lower classes", "aging=DURATION", {"aging"},
       &MakePriority, std::nullopt},
      {"fair-share", "guaranteed GPU quotas per team; borrow idle GPUs; reclaim only borrowed ones",
       "quota.TEAM=GPUS", {}, &MakeFairShare, std::nullopt},
      {"las", "Tiresias 2D least-attained-service: no estimates needed, preemptive",
       "thresholds=GPU_S,GPU_S,... starve=FACTOR order=submit|entry", {"thresholds", "starve", "order"}, &MakeLas,
       std::nullopt},
      {"sjf", "shortest job first by estimate (oracle baseline)", "", {}, &MakeSjf, std::nullopt},
      {"srtf", "shortest remaining time first by estimate, preemptive (oracle baseline)", "", {}, &MakeSrtf,
       std::nullopt},
  };
  return table;
}

namespace {

Result<bool> ParseBool(const std::string& k, const std::string& v) {
  std::string l = ToLower(v);
  if (l == "true" || l == "1" || l == "yes" || l == "on") return true;
  if (l == "false" || l == "0" || l == "no" || l == "off") return false;
  return Status::InvalidArgument(k + " must be true or false, got '" + v + "'");
}

}  // namespace

Result<std::map<std::string, std::string>> ParsePolicyOptions(const std::vector<std::string>& items) {
  std::map<std::string, std::string> out;
  std::string last_key;
  for (const auto& item : items) {
    for (const auto& piece : Split(item, ',')) {
      // "thresholds=1,2" arrives split on ','; glue bare numbers back to the previous key.
      std::string p(Trim(piece));
      if (p.empty()) continue;
      size_t eq = p.find('=');
      if (eq == std::string::npos) {
        if (!last_key.empty() && ParseDouble(p)) {
          // continuation of a list value such as thresholds=3250,7200
          out[last_key] += "," + p;
          continue;
        }
        return Status::InvalidArgument("policy option '" + p + "' is not of the form key=value");
      }
      std::string k(Trim(p.substr(0, eq))), v(Trim(p.substr(eq + 1)));
      if (k.empty()) return Status::InvalidArgument("policy option '" + p + "' has an empty key");
      if (auto had = out.find(k); had != out.end()) {
        // (The last would win, and a run's label would not show which.)
        return Status::InvalidArgument("policy option " + k + " is given twice (" + k + "=" + had->second + " and " + p +
                                       "); give it once");
      }
      out[k] = v;
      last_key = k;
    }
  }
  return out;
}

Result<PolicyConfig> MakePolicies(const std::string& name, const std::map<std::string, std::string>& options) {
  const PolicyInfo* info = nullptr;
  for (const auto& row : PolicyTable()) {
    if (row.name == name) info = &row;
  }
  if (info == nullptr) {
    std::vector<std::string> names;
    for (const auto& row : PolicyTable()) names.push_back(row.name);
    return Status::InvalidArgument("unknown policy '" + name + "' (known: " + Join(names, ", ") + ")");
  }
  PolicyConfig cfg;
  std::map<std::string, std::string> placement_opts;
  std::optional<BackfillMode> backfill;
  std::optional<bool> preempt;
  PolicyOptions own;
  for (const auto& [k, v] : options) {
    if (k == "backfill") {
      if (v == "off" || v == "none") backfill = BackfillMode::kOff;
      else if (v == "easy") backfill = BackfillMode::kEasy;
      else if (v == "greedy") backfill = BackfillMode::kGreedy;
      else return Status::InvalidArgument("backfill must be off, easy or greedy, got '" + v + "'");
    } else if (k == "preempt") {
      GF_ASSIGN_OR_RETURN(bool b, ParseBool(k, v));
      preempt = b;
      own[k] = b ? "true" : "false";  // the priority policy's own preemption of lower classes too
    } else if (k == "max_preempt_attempts") {
      auto n = ParseInt(v);
      if (!n || *n < 0 || *n > 100000) return Status::InvalidArgument("max_preempt_attempts must be 0..100000, got '" + v + "'");
      cfg.policies.options.max_preemption_attempts = static_cast<int>(*n);
    } else if (k == "min_run") {
      auto d = ParseDuration(v);
      if (!d) return Status::InvalidArgument("min_run must be a duration such as 5m, got '" + v + "'");
      cfg.policies.options.min_run_before_preempt = *d;
    } else if (k == "hot" || k == "hot_c" || k == "fit") {
      placement_opts[k] = v;
    } else if (k == "victims") {
      if (v == "least-work-lost") {
        cfg.policies.options.victims = VictimOrder::kLeastWorkLost;
      } else if (v == "worst-rank") {
        cfg.policies.options.victims = VictimOrder::kWorstRank;
      } else {
        return Status::InvalidArgument("victims must be least-work-lost or worst-rank, got '" + v + "'");
      }
    } else if (StartsWith(k, "quota.")) {
      if (k.size() == 6) return Status::InvalidArgument("quota.TEAM needs a team name after 'quota.', e.g. quota.vision=8");
      auto n = ParseInt(v);
      if (!n || *n < 0) return Status::InvalidArgument(k + " must be a whole number of GPUs, got '" + v + "'");
      cfg.team_quota_gpus[k.substr(6)] = *n;
    } else if (std::find(info->own_keys.begin(), info->own_keys.end(), k) != info->own_keys.end()) {
      own[k] = v;
    } else {
      std::string known = "backfill, preempt, max_preempt_attempts, min_run, victims, hot, fit, quota.TEAM";
      if (!info->options.empty()) known += ", " + info->options;
      return Status::InvalidArgument("unknown option '" + k + "' for policy " + name + " (known: " + known + ")");
    }
  }
  GF_ASSIGN_OR_RETURN(cfg.policies.queue, info->make(own));
  cfg.policies.options.backfill = info->backfill ? *info->backfill : cfg.policies.queue->DefaultBackfill();
  if (backfill) cfg.policies.options.backfill = *backfill;
  if (preempt) cfg.policies.options.preemption = *preempt;
  GF_ASSIGN_OR_RETURN(cfg.policies.placement, MakeTopologyPlacement(placement_opts));
  return cfg;
}

}  // namespace gpufleet::sched
