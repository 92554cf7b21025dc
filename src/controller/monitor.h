// Monitor: the controller's alert engine and stalled-job watchdog at work.
//
// Every `interval` it takes a snapshot of the engine (nodes with their GPU telemetry, running
// jobs with their progress and output times, team spend, the queue), evaluates the alert rules
// (obs/alerts.h) at the clock's now, restarts the stalled jobs that ask for it (watchdog.on_stall:
// restart), and tells the webhooks what fired and resolved:
//   - a URL ending in /api/v2/alerts is an Alertmanager: it gets every active alert at each
//     evaluation (Alertmanager forgets alerts that are not repeated), and resolved ones once,
//     with their endsAt, in its API's JSON;
//   - any other URL is a receiver of Alertmanager's webhook format (version 4): it gets one POST
//     per evaluation that changed something, with the alerts that fired or resolved.
// Deliveries run on a thread of their own (a dead receiver does not hold up the rules or the
// watchdog); a delivery that fails is tried again at the next rounds (up to 100 messages are
// kept, the oldest dropped first).
//
// Tests call EvaluateOnce on a fake clock; `gpufleet server` runs Start.
#pragma once

#include <atomic>
#include <deque>
#include <future>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "controller/engine.h"
#include "obs/alerts.h"
#include "obs/exposition.h"
#include "obs/history.h"
#include "sched/clock.h"
#include "store/state_store.h"

namespace gpufleet::controller {

struct MonitorOptions {
  obs::AlertRules rules;
  Duration interval = Duration::Seconds(5);
  std::vector<std::string> webhooks;  // http(s)://host:port/path
  std::string external_url;           // the controller's URL, for generatorURL
  Duration webhook_timeout = Duration::Seconds(3);
  // Where the alerts' state is kept across a restart (the setting "alerts"); null: not kept.
  // Restored at Start: alerts still firing go on (no second notification, their start kept), and
  // those that ended meanwhile resolve and are notified once `settle` has passed.
  store::StateStore* store = nullptr;
  Duration settle = Duration::Seconds(60);
};

// Reads an alert rules file: YAML mapping of the settings in obs::SetAlertRule, e.g.
//   hot_temp_c: 85
//   idle_for: 30m
//   disabled: [QueueWaitOverSlo]
// Errors name the file, line and setting.
Result<obs::AlertRules> LoadAlertRules(const std::string& path);

// The Alertmanager JSON of an alert (labels with alertname and severity; annotations summary and
// description; startsAt; endsAt once resolved). Exposed for tests.
nlohmann::json AlertmanagerAlert(const obs::Alert& a, const std::string& generator_url);

// The jobs holding one GPU: the lowest job id first (what labels and alerts are keyed by), and
// the others holding slices of it.
struct GpuHolders {
  int64_t job_id = 0;
  std::string team;
  std::vector<int64_t> sharing;
  std::vector<std::string> sharing_teams;
};
// Who holds each GPU of the running jobs: (node id, GPU index) -> its holders.
std::map<std::pair<int64_t, int>, GpuHolders> HoldersByGpu(const std::vector<Engine::JobWatch>& running);

class Monitor {
 public:
  Monitor(Engine& engine, const sched::Clock& clock, MonitorOptions options);
  ~Monitor();
  Monitor(const Monitor&) = delete;
  Monitor& operator=(const Monitor&) = delete;

  // One evaluation at the clock's now. The watchdog's restarts are handed to the engine, which
  // carries them out at its next step; the evaluation does not wait for them.
  void EvaluateOnce() GF_EXCLUDES(mu_, send_mu_);
  // Takes back the alerts' state a stopped controller saved (MonitorOptions::store), then starts
  // the evaluations and deliveries.
  void Start();
  // The same restore alone (tests drive EvaluateOnce themselves).
  void RestoreAlerts() GF_EXCLUDES(mu_);
  void Stop() GF_EXCLUDES(wake_mu_);

  std::vector<obs::Alert> Alerts() const;
  // Every GPU's recent samples, one point per 15 s for the last 3 hours (recorded at each
  // evaluation): what a job page charts over the job's run.
  const obs::TelemetryHistory& history() const { return history_; }
  const obs::AlertRules& rules() const { return options_.rules; }
  // gpufleet_alert{alertname, alertstate, severity, ...} and gpufleet_alerts{state}, webhook
  // deliveries and watchdog restarts.
  void WriteMetrics(obs::Exposition& e) const;

 private:
  obs::AlertInput Snapshot(Time now);  // also records the GPUs' samples in history_
  void Notify(const std::vector<obs::Alert>& changed, const std::vector<obs::Alert>& all);
  bool Post(const std::string& url, const std::string& body) GF_EXCLUDES(mu_);

  Engine& engine_;
  const sched::Clock& clock_;
  MonitorOptions options_;
  // Lock order: wake_mu_, then send_mu_ (Notify signals the sender under wake_mu_); none is
  // held across a webhook post or an engine call.
  mutable Mutex mu_;
  obs::AlertEngine alerts_ GF_GUARDED_BY(mu_);
  obs::TelemetryHistory history_;  // thread-safe itself
  std::vector<obs::Alert> current_ GF_GUARDED_BY(mu_);
  struct Outgoing {
    std::string url;
    std::string body;
  };
  static constexpr size_t kMaxQueued = 100;
  void Deliver() GF_EXCLUDES(send_mu_, mu_);  // posts what is queued, in order; keeps what failed for the next round
  Mutex send_mu_;
  std::deque<Outgoing> outbox_ GF_GUARDED_BY(send_mu_);
  CondVar send_cv_;  // waits with wake_mu_
  std::thread sender_;
  std::vector<std::pair<int64_t, std::future<Status>>> restarting_;  // evaluation thread only
  std::string saved_;  // the alerts' state as last saved (evaluation thread only)
  void SaveAlerts(const std::vector<obs::Alert>& alerts);  // evaluation thread only
  int64_t sent_ok_ GF_GUARDED_BY(mu_) = 0;
  int64_t sent_failed_ GF_GUARDED_BY(mu_) = 0;
  int64_t restarts_ GF_GUARDED_BY(mu_) = 0;
  std::thread thread_;
  Mutex wake_mu_;
  CondVar wake_;
  bool stopping_ GF_GUARDED_BY(wake_mu_) = false;
};

}  // namespace gpufleet::controller
