// The monitor (alerts, watchdog, webhooks), the engine's watchdog inputs and restarts, thermal
// holds and the /metrics text, on a fake clock and an in-memory store.
#include "controller/monitor.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <condition_variable>
#include <fstream>
#include <mutex>
#include <thread>

#include "common/strings.h"
#include "controller/engine_fixture_test.h"
#include "controller/metrics.h"

namespace gpufleet::controller {
namespace {

using api::JobState;

// A webhook receiver on 127.0.0.1 that keeps every JSON body POSTed to /hook; Received() stops it
// and hands them over.
class HookReceiver {
 public:
  HookReceiver() {
    server_.Post("/hook", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      got_.push_back(nlohmann::json::parse(req.body));
      res.status = 200;
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    if (port_ > 0) thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~HookReceiver() { Stop(); }
  bool ok() const { return port_ > 0; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/hook"; }
  std::vector<nlohmann::json> Received() {
    Stop();
    std::lock_guard<std::mutex> lock(mu_);
    return got_;
  }

 private:
  void Stop() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  httplib::Server server_;
  std::mutex mu_;
  std::vector<nlohmann::json> got_;
  int port_ = 0;
  std::thread thread_;
};

class MonitorTest : public EngineFixture {
 protected:
  std::unique_ptr<Engine> MakeEngine() {
    return EngineFixture::MakeEngine("fifo", Duration::Hours(10));  // no node is lost while the clock jumps
  }

  void Beat(Engine& e, NodeId node, std::vector<api::GpuSampleReport> gpus, std::vector<api::PartEvent> events = {},
            std::vector<api::PartActivity> activity = {}, std::vector<api::PartKey> running = {}) {
    api::Heartbeat hb;
    hb.gpus = std::move(gpus);
    hb.events = std::move(events);
    hb.activity = std::move(activity);
    hb.running = std::move(running);
    BeatWith(e, node, std::move(hb));
  }

  static api::PartEvent Event(JobId j, int attempt, api::PartEventKind kind, int code = 0, bool stopped = false) {
    api::PartEvent e;
    e.key = {j, attempt, 0};
    e.kind = kind;
    e.exit_code = code;
    e.stopped = stopped;
    return e;
  }

  static std::vector<api::GpuSampleReport> Gpus(int n, int util, int temp = 40, int64_t mem = 1000) {
    return std::vector<api::GpuSampleReport>(n, api::GpuSampleReport{util, mem, temp, 300});
  }
};

TEST_F(MonitorTest, StalledJobIsFlaggedAndRestartedFromItsCheckpoint) {
  auto e = MakeEngine();
  NodeId n = Register(*e, "node-a", 2);
  JobId id = Submit(*e, "name: train\nresources: {gpus: 1}\nrun: python3 train.py\n"
                        "watchdog: {stall_timeout: 10m, on_stall: restart}\n");
  ASSERT_EQ(StateOf(id), JobState::kStarting);
  Beat(*e, n, Gpus(2, 0), {Event(id, 1, api::PartEventKind::kStarted)}, {}, {{id, 1, 0}});
  ASSERT_EQ(StateOf(id), JobState::kRunning);

  MonitorOptions mo;
  mo.rules.disabled = {"NodeSilent", "GpuAllocatedIdle"};  // the fake clock jumps between heartbeats
  Monitor m(*e, clock_, mo);
  // Progress at minute 2 (step 50): the 10-minute timeout counts from there.
  clock_.Advance(Duration::Minutes(2));
  api::PartActivity act;
  act.key = {id, 1, 0};
  act.progress_age = Duration::Zero();
  act.step = 50;
  act.loss = 0.7;
  Beat(*e, n, Gpus(2, 0), {}, {act}, {{id, 1, 0}});
  auto watch = e->RunningJobs();
  ASSERT_EQ(watch.size(), 1u);
  EXPECT_EQ(watch[0].step, 50);
  EXPECT_EQ(watch[0].progress_at, clock_.Now());
  m.EvaluateOnce();
  clock_.Advance(Duration::Minutes(9));
  m.EvaluateOnce();
  EXPECT_TRUE(m.Alerts().empty());
  EXPECT_EQ(StateOf(id), JobState::kRunning);

  // Minute 12: no progress, no output, GPU idle for 10 minutes: flagged and restarted.
  clock_.Advance(Duration::Minutes(1));
  m.EvaluateOnce();
  auto alerts = m.Alerts();
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].name, "JobStalled");
  EXPECT_EQ(alerts[0].state, obs::AlertState::kFiring);
  EXPECT_NE(alerts[0].message.find("last step 50"), std::string::npos) << alerts[0].message;
  e->Step();  // the engine takes the restart
  EXPECT_EQ(StateOf(id), JobState::kStopping);
  // The agent stops the part (it exits 0 on SIGTERM): requeued, not succeeded; then started again.
  Beat(*e, n, Gpus(2, 0), {Event(id, 1, api::PartEventKind::kExited, 0, true)});
  auto rec = store_.GetJob(id);
  ASSERT_TRUE(rec.ok() && *rec);
  EXPECT_EQ((*rec)->attempt, 2) << (*rec)->reason;
  EXPECT_EQ((*rec)->state, JobState::kStarting);
  auto history = store_.History(id);
  ASSERT_TRUE(history.ok());
  bool requeued = false;
  for (const auto& t : *history) {
    if (t.to == JobState::kPending && t.reason.find("requeued: stalled") != std::string::npos) requeued = true;
  }
  EXPECT_TRUE(requeued);
  EXPECT_EQ(e->stats().requeues, 1);
  // The new attempt has a fresh timeout: the alert resolves.
  m.EvaluateOnce();
  alerts = m.Alerts();
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].state, obs::AlertState::kResolved);
  obs::Exposition ex;
  m.WriteMetrics(ex);
  EXPECT_NE(ex.Text().find("gpufleet_watchdog_restarts_total 1\n"), std::string::npos) << ex.Text();
}

TEST_F(MonitorTest, OutputOrBusyGpusKeepAJobAlive) {
  auto e = MakeEngine();
  NodeId n = Register(*e, "node-a", 1);
  JobId id = Submit(*e, "name: train\nresources: {gpus: 1}\nrun: x\nwatchdog: {stall_timeout: 5m}\n");
  Beat(*e, n, Gpus(1, 0), {Event(id, 1, api::PartEventKind::kStarted)}, {}, {{id, 1, 0}});
  MonitorOptions mo;
  mo.rules.disabled = {"GpuAllocatedIdle"};
  Monitor m(*e, clock_, mo);
  for (int minute = 1; minute <= 20; ++minute) {
    clock_.Advance(Duration::Minutes(1));
    api::PartActivity act;
    act.key = {id, 1, 0};
    if (minute <= 10) act.output_age = Duration::Seconds(3);  // writes output for 10 minutes
    Beat(*e, n, Gpus(1, minute > 10 && minute <= 14 ? 80 : 0), {}, {act}, {{id, 1, 0}});  // then the GPU works 4
    m.EvaluateOnce();
    bool stalled = !m.Alerts().empty();
    EXPECT_EQ(stalled, minute >= 19) << "minute " << minute;  // idle since minute 14, + 5
  }
  EXPECT_EQ(StateOf(id), JobState::kRunning) << "on_stall: alert only flags";
}

TEST_F(MonitorTest, JobsSharingABusyGpuAreBothBusyAndBothNamedInItsSeries) {
  // Given two half-GPU jobs on node-a's one GPU, both watched (10-minute stall timeout, restart),
  // neither reporting progress or output, and the GPU at 90 % for 15 minutes, expect neither
  // flagged as stalled, and the GPU's DCGM series naming both jobs and both teams.
  auto e = MakeEngine();
  NodeId n = Register(*e, "node-a", 1);
  const std::string watched = "resources: {gpus: 0.5}\nrun: x\nwatchdog: {stall_timeout: 10m, on_stall: restart}\n";
  JobId a = Submit(*e, "name: a\nteam: vision\n" + watched);
  JobId b = Submit(*e, "name: b\nteam: nlp\n" + watched);
  Beat(*e, n, Gpus(1, 90), {Event(a, 1, api::PartEventKind::kStarted), Event(b, 1, api::PartEventKind::kStarted)}, {},
       {{a, 1, 0}, {b, 1, 0}});
  ASSERT_EQ(StateOf(a), JobState::kRunning);
  ASSERT_EQ(StateOf(b), JobState::kRunning);
  MonitorOptions mo;
  mo.rules.disabled = {"NodeSilent"};
  Monitor m(*e, clock_, mo);
  for (int minute = 0; minute < 15; ++minute) {
    clock_.Advance(Duration::Minutes(1));
    Beat(*e, n, Gpus(1, 90), {}, {}, {{a, 1, 0}, {b, 1, 0}});
    m.EvaluateOnce();
    e->Step();
  }
  for (const auto& alert : m.Alerts()) EXPECT_NE(alert.name, "JobStalled") << alert.message;
  EXPECT_EQ(StateOf(a), JobState::kRunning);
  EXPECT_EQ(StateOf(b), JobState::kRunning);
  MetricsSources src;
  src.engine = e.get();
  src.now = clock_.Now();
  ApiMetrics api;
  src.api = &api;
  const std::string both = std::to_string(std::min(a.value(), b.value())) + "," + std::to_string(std::max(a.value(), b.value()));
  EXPECT_NE(ControllerMetricsText(src).find("job_id=\"" + both + "\",team=\"nlp,vision\"} 90\n"), std::string::npos)
      << ControllerMetricsText(src);
}

TEST_F(MonitorTest, WebhookGetsAlertmanagerWebhookJsonWhenAnAlertFiresAndResolves) {
  HookReceiver receiver;
  ASSERT_TRUE(receiver.ok());

  auto e = MakeEngine();
  NodeId n = Register(*e, "node-a", 2);
  MonitorOptions mo;
  mo.webhooks = {receiver.url()};
  mo.external_url = "http://127.0.0.1:8470";
  Monitor m(*e, clock_, mo);
  auto hot = Gpus(2, 50);
  hot[1].temperature_c = 91;
  Beat(*e, n, hot);
  m.EvaluateOnce();
  clock_.Advance(Duration::Minutes(2));
  Beat(*e, n, hot);
  m.EvaluateOnce();  // GpuHot fires after 2 minutes
  clock_.Advance(Duration::Seconds(30));
  Beat(*e, n, Gpus(2, 50, 60));
  m.EvaluateOnce();  // and resolves
  const std::vector<nlohmann::json> got = receiver.Received();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0]["version"], "4");
  EXPECT_EQ(got[0]["status"], "firing");
  ASSERT_EQ(got[0]["alerts"].size(), 1u);
  const auto& a = got[0]["alerts"][0];
  EXPECT_EQ(a["status"], "firing");
  EXPECT_EQ(a["labels"]["alertname"], "GpuHot");
  EXPECT_EQ(a["labels"]["severity"], "critical");
  EXPECT_EQ(a["labels"]["node"], "node-a");
  EXPECT_EQ(a["labels"]["gpu"], "1");
  EXPECT_EQ(a["labels"]["UUID"], "GPU-node-a-1");
  EXPECT_EQ(a["startsAt"], FormatIso8601(Time::FromSeconds(1'000'000) + Duration::Minutes(2)));
  EXPECT_NE(a["annotations"]["description"].get<std::string>().find("91 °C"), std::string::npos);
  // One alert: what all share is all of its labels and annotations.
  EXPECT_EQ(got[0]["commonLabels"], a["labels"]);
  EXPECT_EQ(got[0]["commonAnnotations"], a["annotations"]);
  EXPECT_EQ(got[1]["status"], "resolved");
  EXPECT_EQ(got[1]["alerts"][0]["endsAt"], FormatIso8601(Time::FromSeconds(1'000'000) + Duration::Seconds(150)));
  obs::Exposition ex;
  m.WriteMetrics(ex);
  EXPECT_NE(ex.Text().find("gpufleet_alert_notifications_total{result=\"ok\"} 2\n"), std::string::npos) << ex.Text();
}

TEST_F(MonitorTest, AWebhookMessageOfSeveralAlertsCarriesWhatTheyShareAsCommonLabels) {
  HookReceiver receiver;
  ASSERT_TRUE(receiver.ok());
  auto e = MakeEngine();
  NodeId n = Register(*e, "node-a", 2);
  MonitorOptions mo;
  mo.webhooks = {receiver.url()};
  Monitor m(*e, clock_, mo);
  auto hot = Gpus(2, 50);
  hot[0].temperature_c = 91;
  hot[1].temperature_c = 92;
  Beat(*e, n, hot);
  m.EvaluateOnce();
  clock_.Advance(Duration::Minutes(2));
  Beat(*e, n, hot);
  m.EvaluateOnce();  // both GPUs' GpuHot fire in one message
  const std::vector<nlohmann::json> got = receiver.Received();
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0]["alerts"].size(), 2u);
  const nlohmann::json& common = got[0]["commonLabels"];
  EXPECT_EQ(common["alertname"], "GpuHot");
  EXPECT_EQ(common["severity"], "critical");
  EXPECT_EQ(common["node"], "node-a");
  EXPECT_EQ(common["source"], "gpufleet");
  EXPECT_FALSE(common.contains("gpu")) << common.dump();
  EXPECT_FALSE(common.contains("UUID")) << common.dump();
  EXPECT_FALSE(got[0]["commonAnnotations"].contains("description")) << got[0]["commonAnnotations"].dump();
  EXPECT_EQ(got[0]["commonAnnotations"]["summary"], "A GPU is over its temperature limit");
}

TEST_F(MonitorTest, FailedDeliveriesAreRetriedAndCounted) {
  auto e = MakeEngine();
  NodeId n = Register(*e, "node-a", 1);
  MonitorOptions mo;
  // A port nothing listens on: bind one, then close it.
  int port;
  {
    httplib::Server s;
    port = s.bind_to_any_port("127.0.0.1");
  }
  mo.webhooks = {"http://127.0.0.1:" + std::to_string(port) + "/hook"};
  mo.webhook_timeout = Duration::Seconds(1);
  Monitor m(*e, clock_, mo);
  clock_.Advance(Duration::Seconds(1));
  // A silent node fires at once.
  clock_.Advance(Duration::Minutes(1));
  m.EvaluateOnce();
  m.EvaluateOnce();
  obs::Exposition ex;
  m.WriteMetrics(ex);
  EXPECT_NE(ex.Text().find("gpufleet_alert_notifications_total{result=\"failed\"} 2\n"), std::string::npos) << ex.Text();
  (void)n;
}

TEST_F(MonitorTest, RunningMonitorSendsAWebhookAtOnceNotAtTheNextInterval) {
  // Given a started monitor that evaluates once an hour and a node silent for two minutes, expect
  // the NodeSilent webhook as soon as the first evaluation fires it: the sender thread wakes for
  // a queued alert instead of sleeping out its interval.
  httplib::Server receiver;
  std::mutex mu;
  std::condition_variable arrived;
  int got = 0;
  receiver.Post("/hook", [&](const httplib::Request&, httplib::Response& res) {
    {
      std::lock_guard<std::mutex> lock(mu);
      ++got;
    }
    arrived.notify_all();
    res.status = 200;
  });
  int port = receiver.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread t([&] { receiver.listen_after_bind(); });

  auto e = MakeEngine();
  Register(*e, "node-a", 1);
  clock_.Advance(Duration::Minutes(2));
  MonitorOptions mo;
  mo.interval = Duration::Hours(1);
  mo.webhooks = {"http://127.0.0.1:" + std::to_string(port) + "/hook"};
  Monitor m(*e, clock_, mo);
  m.Start();
  bool delivered;
  {
    // A bound for a slow machine, far below the hour the old sender slept.
    std::unique_lock<std::mutex> lock(mu);
    delivered = arrived.wait_for(lock, std::chrono::seconds(60), [&] { return got > 0; });
  }
  m.Stop();
  receiver.stop();
  t.join();
  EXPECT_TRUE(delivered);
  ASSERT_FALSE(m.Alerts().empty());
  EXPECT_EQ(m.Alerts()[0].name, "NodeSilent");
}

TEST_F(MonitorTest, ARestartedControllerCountsANodesSilenceFromItsStart) {
  // Given node-a registered, then five minutes of heartbeats that only the first controller's
  // memory holds before a second one recovers from the store, expect no NodeSilent at the
  // restart, and NodeSilent once the node has said nothing for two minutes after it.
  { Register(*MakeEngine(), "node-a", 1); }
  clock_.Advance(Duration::Minutes(5));
  auto e = MakeEngine();
  ASSERT_TRUE(e->Recover().ok());
  Monitor m(*e, clock_, MonitorOptions{});
  auto silent = [&] {
    for (const auto& a : m.Alerts()) {
      if (a.name == "NodeSilent") return true;
    }
    return false;
  };
  m.EvaluateOnce();
  EXPECT_FALSE(silent());
  clock_.Advance(Duration::Minutes(2));
  m.EvaluateOnce();
  EXPECT_TRUE(silent());
  // Its text and the heartbeat age say what is known: silent since the start, not for longer
  // (its heartbeats before the restart were not stored; the stored time is its registration).
  for (const auto& a : m.Alerts()) {
    if (a.name == "NodeSilent") {
      EXPECT_NE(a.message.find("node node-a has not reported since the controller started 2m00s ago"), std::string::npos)
          << a.message;
    }
  }
  MetricsSources src;
  src.engine = e.get();
  src.now = clock_.Now();
  ApiMetrics api;
  src.api = &api;
  EXPECT_NE(ControllerMetricsText(src).find("gpufleet_node_heartbeat_age_seconds{node=\"node-a\"} 120\n"),
            std::string::npos);
}

TEST_F(MonitorTest, HotGpuTakesNoNewWorkUntilItCoolsAndExplainSaysWhy) {
  auto e = MakeEngine();  // thermal limit 85 °C, resume at 75 °C
  NodeId n = Register(*e, "node-a", 1);
  auto hot = Gpus(1, 0, 90);
  Beat(*e, n, hot);
  JobId id = Submit(*e, "name: a\nresources: {gpus: 1}\nrun: x\n");
  EXPECT_EQ(StateOf(id), JobState::kPending);
  auto why = e->Explain(id);
  ASSERT_TRUE(why.ok());
  std::string text;
  for (const auto& r : why->reasons) text += r + "\n";
  EXPECT_NE(text.find("1 GPU(s) at or over the 85 °C limit take no new work until they cool to 75 °C: node-a GPU 0 (90 °C)"),
            std::string::npos)
      << text;
  Beat(*e, n, Gpus(1, 0, 80));  // cooler, but not cool enough (hysteresis)
  EXPECT_EQ(StateOf(id), JobState::kPending);
  Beat(*e, n, Gpus(1, 0, 75));
  EXPECT_EQ(StateOf(id), JobState::kStarting);
}

TEST_F(MonitorTest, AlertsOutliveARestartAndResolveOnlyOnceTheyEnd) {
  // Given a GpuHot alert firing when the controller stops (its state saved in the store), expect
  // the restarted monitor to show it firing with its start kept, to keep it firing (no second
  // "firing") while it holds, not to resolve it while the input fills up again, and to resolve it
  // once the GPU has cooled and the settle time has passed.
  auto e = MakeEngine();
  NodeId n = Register(*e, "node-a", 1);
  MonitorOptions mo;
  mo.rules.disabled = {"NodeSilent", "GpuAllocatedIdle"};
  mo.store = &store_;
  mo.settle = Duration::Minutes(1);
  Time started;
  {
    Monitor m(*e, clock_, mo);
    m.RestoreAlerts();  // nothing saved yet
    Beat(*e, n, Gpus(1, 0, 90));
    m.EvaluateOnce();
    started = clock_.Now();
    clock_.Advance(Duration::Minutes(3));
    Beat(*e, n, Gpus(1, 0, 90));
    m.EvaluateOnce();
    auto alerts = m.Alerts();
    ASSERT_EQ(alerts.size(), 1u);
    ASSERT_EQ(alerts[0].state, obs::AlertState::kFiring);
  }
  Monitor again(*e, clock_, mo);
  again.RestoreAlerts();
  auto alerts = again.Alerts();
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].name, "GpuHot");
  EXPECT_EQ(alerts[0].state, obs::AlertState::kFiring);
  EXPECT_EQ(alerts[0].started, started) << "the restart reset when the alert began";
  const Time fired = *alerts[0].fired;
  // Still hot: firing as it was.
  clock_.Advance(Duration::Seconds(10));
  Beat(*e, n, Gpus(1, 0, 90));
  again.EvaluateOnce();
  alerts = again.Alerts();
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].state, obs::AlertState::kFiring);
  EXPECT_EQ(*alerts[0].fired, fired) << "the alert fired a second time";
  // A third start, right away, before the GPU reports again: kept firing until the settle time.
  Monitor third(*e, clock_, mo);
  third.RestoreAlerts();
  Beat(*e, n, Gpus(1, 0, 40));
  third.EvaluateOnce();
  EXPECT_EQ(third.Alerts()[0].state, obs::AlertState::kFiring) << "resolved before the input could fill up";
  clock_.Advance(Duration::Minutes(2));
  Beat(*e, n, Gpus(1, 0, 40));
  third.EvaluateOnce();
  alerts = third.Alerts();
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].state, obs::AlertState::kResolved);
}

TEST_F(MonitorTest, MetricsTextHasDcgmAndClusterSeriesWithJobLabels) {
  auto e = MakeEngine();
  NodeId n = Register(*e, "node-a", 2);
  JobId id = Submit(*e, "name: a\nteam: vision\nresources: {gpus: 1}\nrun: x\n");
  Submit(*e, "name: b\nteam: nlp\nresources: {gpus: 2}\nrun: x\n");  // waits: one GPU is taken
  auto gpus = Gpus(2, 3, 50, 2048);
  Beat(*e, n, gpus, {Event(id, 1, api::PartEventKind::kStarted)}, {}, {{id, 1, 0}});
  clock_.Advance(Duration::Seconds(90));
  ApiMetrics api;
  api.requests.Add({"/v1/jobs", "POST", "200"});
  MetricsSources src;
  src.engine = e.get();
  src.api = &api;
  src.version = "1.2.3";
  src.now = clock_.Now();
  std::string t = ControllerMetricsText(src);
  EXPECT_NE(t.find("gpufleet_build_info{version=\"1.2.3\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("gpufleet_jobs{state=\"running\",team=\"vision\"} 1\n"), std::string::npos) << t;
  EXPECT_NE(t.find("gpufleet_jobs{state=\"pending\",team=\"nlp\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("gpufleet_queue_length 1\n"), std::string::npos);
  EXPECT_NE(t.find("gpufleet_queue_oldest_wait_seconds 90\n"), std::string::npos);
  EXPECT_NE(t.find("gpufleet_gpus{model=\"H100\"} 2\n"), std::string::npos);
  EXPECT_NE(t.find("gpufleet_gpus_allocated{model=\"H100\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("gpufleet_gpus_allocated_idle{model=\"H100\"} 1\n"), std::string::npos) << "3% < 5%";
  EXPECT_NE(t.find("gpufleet_nodes{state=\"up\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("gpufleet_node_heartbeat_age_seconds{node=\"node-a\"} 90\n"), std::string::npos);
  EXPECT_NE(t.find("DCGM_FI_DEV_FB_USED{gpu=\"0\",UUID=\"GPU-node-a-0\",device=\"nvidia0\",modelName=\"NVIDIA H100 "
                   "80GB HBM3\",Hostname=\"node-a\",job_id=\"" + std::to_string(id.value()) + "\",team=\"vision\"} 2048\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("DCGM_FI_DEV_GPU_TEMP{gpu=\"1\",UUID=\"GPU-node-a-1\",device=\"nvidia1\",modelName=\"NVIDIA H100 "
                   "80GB HBM3\",Hostname=\"node-a\"} 50\n"),
            std::string::npos);
  EXPECT_NE(t.find("gpufleet_api_requests_total{route=\"/v1/jobs\",method=\"POST\",code=\"200\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("# TYPE gpufleet_scheduler_pass_duration_seconds histogram\n"), std::string::npos);
  EXPECT_NE(t.find("gpufleet_store_commit_duration_seconds_count "), std::string::npos);
  EXPECT_NE(t.find("gpufleet_job_last_activity_age_seconds{job_id=\"" + std::to_string(id.value()) + "\",team=\"vision\"} 90\n"),
            std::string::npos);
}

TEST(AlertRulesFileTest, SettingsAndErrorsWithTheirLine) {
  std::string dir = ::testing::TempDir();
  std::string good = dir + "/rules.yaml", bad = dir + "/bad.yaml";
  { std::ofstream(good) << "hot_temp_c: 88\nidle_for: 30m\ndisabled: [QueueWaitOverSlo, NodeSilent]\n"; }
  auto r = LoadAlertRules(good);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->hot_temp_c, 88);
  EXPECT_EQ(r->idle_for, Duration::Minutes(30));
  EXPECT_EQ(r->disabled, (std::vector<std::string>{"QueueWaitOverSlo", "NodeSilent"}));
  { std::ofstream(bad) << "hot_temp_c: 88\nidle_for: later\n"; }
  r = LoadAlertRules(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("bad.yaml:2:11: idle_for: expected a duration"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(LoadAlertRules(dir + "/none.yaml").status().code(), StatusCode::kNotFound);
}

TEST(AlertRulesFileTest, ErrorsPointAtTheBadValueOrTheUnknownKey) {
  // Given a bad value, expect the line and column of the value, not of its key; given an unknown
  // rule in a list, that entry's; given an unknown setting, its key's.
  const std::string path = ::testing::TempDir() + "/ar.yaml";
  auto error_of = [&](const std::string& text) {
    { std::ofstream(path) << text; }
    auto r = LoadAlertRules(path);
    EXPECT_FALSE(r.ok()) << text;
    return r.ok() ? std::string() : r.status().message();
  };
  EXPECT_EQ(error_of("hot_temp_c: hot\n"), path + ":1:13: hot_temp_c: expected a whole number 0..150, got 'hot'");
  EXPECT_EQ(error_of("idle_for: 30m\ndisabled: [NodeSilent, NodeQuiet]\n"),
            path + ":2:24: disabled: unknown rule 'NodeQuiet'; rules: " + Join(obs::AlertRuleNames(), ", "));
  EXPECT_EQ(error_of("idle_for: 30m\n  # the GPU limit\nhot_temp: 90\n").rfind(path + ":3:1: unknown alert setting 'hot_temp'", 0),
            0u);
  // A setting twice, a silence of 0s, a swing window longer than its period, and a mapping where
  // a list of rules goes.
  EXPECT_EQ(error_of("hot_temp_c: 85\nhot_temp_c: 90\n"), path + ":2:1: hot_temp_c: given twice; keep one");
  EXPECT_NE(error_of("silent_after: 0s\n").find("silent_after: must be longer than 0s"), std::string::npos);
  EXPECT_NE(error_of("swing_window: 1h\nswing_period: 1m\n").find("swing_window (1h00m) is longer than swing_period (1m00s)"),
            std::string::npos);
  EXPECT_NE(error_of("disabled: {a: 1}\n").find("disabled: expected a list of rule names"), std::string::npos);
}

}  // namespace
}  // namespace gpufleet::controller
