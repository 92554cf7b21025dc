// The alert engine: rules evaluated on the telemetry and state the controller already holds, with
// no Prometheus needed. Pure: each Evaluate gets the time and a snapshot (AlertInput) and returns
// the alerts that changed (fired or resolved), so it runs the same on a fake clock in tests.
//
// An alert is identified by its rule name and labels. While its rule's condition holds it is
// `pending`; once the condition has held for the rule's `for` duration it is `firing`; when the
// condition stops, a firing alert is `resolved` (kept for `keep_resolved` so people see it) and a
// pending one is dropped, as Prometheus does.
//
// Rules (defaults in AlertRules; docs/observability.md):
//   GpuAllocatedIdle   a GPU held by a job runs under idle_util_pct for idle_for
//   GpuHot             a GPU over hot_temp_c for hot_for
//   GpuMemorySwing     a GPU's memory use jumps by more than swing_fraction of its recent peak
//                      within swing_window, swing_count times within swing_period (leak, thrash)
//   NodeSilent         no heartbeat for silent_after
//   JobStalled         a job with a stall_timeout made no progress, wrote no output and kept its
//                      GPUs under idle_util_pct for that long (the watchdog)
//   SpotNotice         the provider announced it takes a node back
//   NodeQuarantined    a node failed its acceptance burn-in and takes no work (docs/nodes.md)
//   NodeStorageFault   a node's agent cannot write its data directory (full, read-only) and takes no work
//   NodeDiskLow        a node's data or environments directory has under disk_low_fraction of its file
//                      system free for disk_low_for (before jobs fail for want of room)
//   BudgetNearlySpent  a team spent budget_fraction of its budget
//   QueueWaitOverSlo   the oldest waiting job has waited longer than queue_wait_slo
//
// Thread-safety: one thread at a time (the controller's monitor calls it under its own lock).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/time.h"

namespace gpufleet::obs {

struct AlertRules {
  bool enabled = true;
  int idle_util_pct = 5;
  Duration idle_for = Duration::Minutes(15);
  int hot_temp_c = 80;
  Duration hot_for = Duration::Minutes(2);
  double swing_fraction = 0.30;
  Duration swing_window = Duration::Minutes(1);
  int swing_count = 3;
  Duration swing_period = Duration::Minutes(10);
  int64_t swing_floor_mib = 1024;  // swings of GPUs using less than this are noise
  Duration silent_after = Duration::Seconds(30);
  double disk_low_fraction = 0.10;
  Duration disk_low_for = Duration::Minutes(5);
  double budget_fraction = 0.80;
  Duration queue_wait_slo = Duration::Hours(1);
  Duration keep_resolved = Duration::Hours(1);
  std::vector<std::string> disabled;  // rule names turned off
};

// The rule names, in the order above.
const std::vector<std::string>& AlertRuleNames();

// Reads rule settings from YAML-like "key: value" text already split into pairs (the controller
// parses the file; see ParseAlertRules in controller/). Unknown keys and bad values are errors
// naming the key.
Status SetAlertRule(AlertRules& rules, const std::string& key, const std::string& value);

struct GpuState {
  std::string node;
  int gpu = 0;
  std::string uuid;
  int util_pct = 0;
  int64_t mem_used_mib = 0;
  int temperature_c = 0;
  int64_t job_id = 0;  // 0: not allocated; of GPU slices sharing the GPU, the lowest job id
  std::string team;
  std::vector<int64_t> sharing{};           // the other jobs holding slices of the GPU, ascending
  std::vector<std::string> sharing_teams{};  // ... and their teams
};
struct NodeState {
  std::string name;
  Duration since_heartbeat;
  bool gone = false;  // released (left the cluster): no alert
  bool lost = false;  // declared lost: its jobs were requeued
  std::optional<Time> spot_notice_at;  // when the provider takes it back
  std::string spot_action;
  std::string quarantined{};  // non-empty: the node failed its burn-in, and why
  bool unheard_since_start = false;  // not heard since the controller started: since_heartbeat counts from then
  std::string storage_fault{};  // non-empty: its agent cannot write its data directory, and why
  struct Disk {
    std::string dir;  // "data" or "environments"
    std::string path;
    int64_t free_bytes = 0;
    int64_t size_bytes = 0;
  };
  std::vector<Disk> disks{};  // the room its agent last reported
};
struct JobActivity {
  int64_t job_id = 0;
  std::string name;
  std::string team;
  Duration stall_timeout;  // zero: the job is not watched
  Time started;            // this attempt's start
  std::optional<Time> last_progress;
  std::optional<Time> last_output;
  std::optional<int64_t> step;
};
struct TeamMoney {
  std::string team;
  double spend_dollars = 0;
  double budget_dollars = 0;  // the hard limit, else the soft one; 0: no budget
  double soft_dollars = 0;    // 0: none
  bool hard_stopped = false;  // the hard limit stopped the team (early, by its stop lead)
};
struct AlertInput {
  std::vector<GpuState> gpus;
  std::vector<NodeState> nodes;
  std::vector<JobActivity> jobs;  // running jobs
  std::vector<TeamMoney> teams;
  std::optional<int64_t> oldest_pending_job;
  Duration oldest_pending_wait;
};

enum class AlertState { kPending, kFiring, kResolved };
const char* AlertStateName(AlertState s);

struct Alert {
  std::string name;
  std::string severity;  // info, warning, critical
  std::map<std::string, std::string> labels;
  std::string message;
  AlertState state = AlertState::kPending;
  Time started;                      // the condition first held
  std::optional<Time> fired;         // it became firing
  std::optional<Time> resolved;
};

class AlertEngine {
 public:
  explicit AlertEngine(AlertRules rules) : rules_(std::move(rules)) {}
  const AlertRules& rules() const { return rules_; }

  // Applies the rules to `in` at `now`; returns the alerts that fired or resolved at this
  // evaluation (to notify), in a stable order.
  std::vector<Alert> Evaluate(Time now, const AlertInput& in);
  // Pending and firing alerts, and resolved ones younger than keep_resolved: firing first, then
  // pending, then resolved; by start time within each.
  std::vector<Alert> Alerts() const;

  // Every alert the engine keeps (pending, firing, resolved), to save across a restart.
  std::vector<Alert> Saved() const;
  // Takes back alerts Saved() gave (a restarted controller): those still true at the next
  // evaluations go on as they were (no second "firing", their start kept), those no longer true
  // resolve and are notified. A firing alert not seen true is kept firing until `settle_until`,
  // while the input fills up again (nodes report their GPUs only once their agents are back).
  void Restore(const std::vector<Alert>& alerts, Time settle_until);

 private:
  struct Condition {
    std::string name;
    std::string severity;
    std::map<std::string, std::string> labels;
    std::string message;
    Duration hold;  // the rule's `for`
  };
  bool On(const std::string& rule) const;
  void Conditions(Time now, const AlertInput& in, std::vector<Condition>& out);

  AlertRules rules_;
  std::map<std::string, Alert> alerts_;  // by key (name + labels)
  std::set<std::string> restored_;       // keys restored firing and not seen true since
  Time settle_until_;
  // GpuMemorySwing: per GPU ("node/gpu"), recent memory samples and the times swings were seen.
  struct GpuHistory {
    std::deque<std::pair<Time, int64_t>> samples;
    std::deque<Time> swings;
    int64_t job_id = 0;
  };
  std::map<std::string, GpuHistory> gpu_history_;
  // JobStalled: per job, its attempt's start and when one of its GPUs was last busy.
  struct JobBusy {
    Time started;
    Time last_busy;
  };
  std::map<int64_t, JobBusy> job_busy_;
};

}  // namespace gpufleet::obs
