#include "obs/alerts.h"
#include "obs/history.h"

#include <gtest/gtest.h>

namespace gpufleet::obs {
namespace {

// Each rule on a fake timeline: the condition holds, the alert is pending until the rule's
// `for`, fires once, and resolves once the condition stops.
class AlertsTest : public ::testing::Test {
 protected:
  Time t0 = Time::FromSeconds(1'700'000'000);
  Time At(Duration d) const { return t0 + d; }
  static GpuState Gpu(int util, int64_t mem, int temp, int64_t job = 0) {
    return GpuState{"n1", 3, "GPU-x", util, mem, temp, job, job ? "vision" : ""};
  }
  static const Alert* Find(const std::vector<Alert>& alerts, const std::string& name) {
    for (const Alert& a : alerts) {
      if (a.name == name) return &a;
    }
    return nullptr;
  }
};

TEST_F(AlertsTest, AllocatedIdleGpuIsPendingThenFiresAfterFifteenMinutesThenResolves) {
  AlertEngine e{AlertRules{}};
  AlertInput in;
  in.gpus = {Gpu(2, 1000, 40, 12)};
  EXPECT_TRUE(e.Evaluate(At(Duration::Zero()), in).empty());
  ASSERT_NE(Find(e.Alerts(), "GpuAllocatedIdle"), nullptr);
  EXPECT_EQ(Find(e.Alerts(), "GpuAllocatedIdle")->state, AlertState::kPending);
  EXPECT_TRUE(e.Evaluate(At(Duration::Minutes(14)), in).empty());
  auto changed = e.Evaluate(At(Duration::Minutes(15)), in);
  ASSERT_EQ(changed.size(), 1u);
  EXPECT_EQ(changed[0].name, "GpuAllocatedIdle");
  EXPECT_EQ(changed[0].state, AlertState::kFiring);
  EXPECT_EQ(changed[0].labels.at("job_id"), "12");
  EXPECT_EQ(changed[0].labels.at("node"), "n1");
  EXPECT_EQ(changed[0].started, At(Duration::Zero()));
  EXPECT_NE(changed[0].message.find("held by job 12"), std::string::npos) << changed[0].message;
  // Busy again: resolved.
  in.gpus = {Gpu(90, 1000, 40, 12)};
  changed = e.Evaluate(At(Duration::Minutes(16)), in);
  ASSERT_EQ(changed.size(), 1u);
  EXPECT_EQ(changed[0].state, AlertState::kResolved);
  EXPECT_EQ(changed[0].resolved, At(Duration::Minutes(16)));
  // Resolved alerts stay visible for keep_resolved, then go.
  EXPECT_EQ(e.Alerts().size(), 1u);
  e.Evaluate(At(Duration::Minutes(16) + Duration::Hours(1) + Duration::Seconds(1)), in);
  EXPECT_TRUE(e.Alerts().empty());
}

TEST_F(AlertsTest, IdleGpuWithoutAJobIsNoAlertAndAPendingAlertThatStopsIsDropped) {
  AlertEngine e{AlertRules{}};
  AlertInput in;
  in.gpus = {Gpu(0, 0, 30, 0)};
  e.Evaluate(At(Duration::Zero()), in);
  e.Evaluate(At(Duration::Hours(1)), in);
  EXPECT_TRUE(e.Alerts().empty());
  in.gpus = {Gpu(0, 0, 30, 5)};
  e.Evaluate(At(Duration::Hours(1)), in);
  EXPECT_EQ(e.Alerts().size(), 1u);
  in.gpus = {Gpu(50, 0, 30, 5)};
  EXPECT_TRUE(e.Evaluate(At(Duration::Hours(1) + Duration::Minutes(1)), in).empty());  // never fired: nothing to resolve
  EXPECT_TRUE(e.Alerts().empty());
}

TEST_F(AlertsTest, HotGpuFiresAfterTwoMinutesOverTheLimit) {
  AlertEngine e{AlertRules{}};
  AlertInput in;
  in.gpus = {Gpu(100, 1000, 80, 1)};  // at the limit: not over it
  e.Evaluate(At(Duration::Zero()), in);
  EXPECT_EQ(Find(e.Alerts(), "GpuHot"), nullptr);
  in.gpus = {Gpu(100, 1000, 86, 1)};
  e.Evaluate(At(Duration::Seconds(10)), in);
  EXPECT_TRUE(e.Evaluate(At(Duration::Seconds(129)), in).empty());
  auto changed = e.Evaluate(At(Duration::Seconds(130)), in);
  ASSERT_EQ(changed.size(), 1u);
  EXPECT_EQ(changed[0].name, "GpuHot");
  EXPECT_EQ(changed[0].severity, "critical");
  EXPECT_EQ(changed[0].message, "GPU 3 of node n1 is at 86 °C (limit 80 °C); held by job 1");
  in.gpus = {Gpu(100, 1000, 70, 1)};
  changed = e.Evaluate(At(Duration::Seconds(140)), in);
  ASSERT_EQ(changed.size(), 1u);
  EXPECT_EQ(changed[0].state, AlertState::kResolved);
}

TEST_F(AlertsTest, AHotGpuStaysOneAlertWhenTheJobOnItChanges) {
  // Given a GPU over the limit for the whole run, held by job 1, then by no job, then by job 2,
  // expect one alert that fires after two minutes and neither resolves nor fires again when the
  // job changes.
  AlertEngine e{AlertRules{}};
  AlertInput in;
  in.gpus = {Gpu(100, 1000, 90, 1)};
  e.Evaluate(At(Duration::Zero()), in);
  in.gpus = {Gpu(100, 1000, 90, 0)};
  EXPECT_TRUE(e.Evaluate(At(Duration::Seconds(60)), in).empty());
  in.gpus = {Gpu(100, 1000, 90, 2)};
  auto fired = e.Evaluate(At(Duration::Seconds(121)), in);
  ASSERT_EQ(fired.size(), 1u) << "hot_for counted from the first hot sample, across the jobs";
  EXPECT_EQ(fired[0].state, AlertState::kFiring);
  in.gpus = {Gpu(100, 1000, 90, 1)};
  EXPECT_TRUE(e.Evaluate(At(Duration::Seconds(200)), in).empty());
  EXPECT_NE(Find(e.Alerts(), "GpuHot"), nullptr);
}

TEST_F(AlertsTest, MemorySwingFiresOnTheThirdJumpWithinTenMinutes) {
  AlertEngine e{AlertRules{}};
  AlertInput in;
  int64_t low = 20000, high = 70000;
  std::vector<Alert> fired;
  // A sample every 15 s; the memory jumps up or down every minute.
  for (int i = 0; i <= 4 * 4; ++i) {
    bool up = (i / 4) % 2 == 1;
    in.gpus = {Gpu(90, up ? high : low, 60, 7)};
    auto changed = e.Evaluate(At(Duration::Seconds(15 * i)), in);
    fired.insert(fired.end(), changed.begin(), changed.end());
    if (!fired.empty()) break;
  }
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0].name, "GpuMemorySwing");
  // Jumps at 60 s, 120 s and 180 s: it fires at the third.
  EXPECT_EQ(fired[0].fired, At(Duration::Seconds(180)));
  EXPECT_NE(fired[0].message.find("3 times"), std::string::npos) << fired[0].message;
}

TEST_F(AlertsTest, SteadyGrowthAndSmallGpusAreNoSwing) {
  AlertEngine e{AlertRules{}};
  AlertInput in;
  for (int i = 0; i < 60; ++i) {
    in.gpus = {Gpu(90, 10000 + 100 * i, 60, 7)};  // +1% a step
    e.Evaluate(At(Duration::Seconds(15 * i)), in);
  }
  for (int i = 60; i < 120; ++i) {  // a new job: jumps of 0 <-> 800 MiB, under the 1 GiB floor
    in.gpus = {Gpu(90, (i / 4) % 2 ? 800 : 0, 60, 8)};
    e.Evaluate(At(Duration::Seconds(15 * i)), in);
  }
  EXPECT_EQ(Find(e.Alerts(), "GpuMemorySwing"), nullptr);
}

TEST_F(AlertsTest, SilentNodeAndSpotNoticeFireAtOnce) {
  AlertEngine e{AlertRules{}};
  AlertInput in;
  in.nodes = {NodeState{"n1", Duration::Seconds(29), false, false, std::nullopt, ""},
              NodeState{"n2", Duration::Seconds(2), false, false, At(Duration::Minutes(2)), "terminate"}};
  auto changed = e.Evaluate(At(Duration::Zero()), in);
  ASSERT_EQ(changed.size(), 1u);
  EXPECT_EQ(changed[0].name, "SpotNotice");
  EXPECT_EQ(changed[0].labels.at("node"), "n2");
  in.nodes[0].since_heartbeat = Duration::Seconds(31);
  changed = e.Evaluate(At(Duration::Seconds(2)), in);
  ASSERT_EQ(changed.size(), 1u);
  EXPECT_EQ(changed[0].name, "NodeSilent");
  EXPECT_EQ(changed[0].severity, "critical");
  // Declared lost: still silent, and the message says its jobs moved.
  in.nodes[0].since_heartbeat = Duration::Seconds(40);
  in.nodes[0].lost = true;
  EXPECT_TRUE(e.Evaluate(At(Duration::Seconds(3)), in).empty());
  const Alert* silent = Find(e.Alerts(), "NodeSilent");
  ASSERT_NE(silent, nullptr);
  EXPECT_EQ(silent->state, AlertState::kFiring);
  EXPECT_NE(silent->message.find("declared lost and its jobs were requeued"), std::string::npos) << silent->message;
  in.nodes[0].since_heartbeat = Duration::Seconds(1);
  in.nodes[0].lost = false;
  in.nodes[1].gone = true;  // released: its notice no longer matters
  changed = e.Evaluate(At(Duration::Seconds(4)), in);
  EXPECT_EQ(changed.size(), 2u);
  for (const Alert& a : changed) EXPECT_EQ(a.state, AlertState::kResolved) << a.name;
}

TEST_F(AlertsTest, StalledJobNeedsNoProgressNoOutputAndIdleGpusForItsTimeout) {
  AlertEngine e{AlertRules{}};
  JobActivity job{12, "train", "vision", Duration::Minutes(10), At(Duration::Zero()), std::nullopt, std::nullopt, std::nullopt};
  AlertInput in;
  in.jobs = {job};
  in.gpus = {Gpu(95, 1000, 50, 12)};
  e.Evaluate(At(Duration::Zero()), in);
  // The GPU was busy until minute 3, output until minute 5, progress until minute 7.
  in.gpus = {Gpu(95, 1000, 50, 12)};
  e.Evaluate(At(Duration::Minutes(3)), in);
  in.gpus = {Gpu(0, 1000, 50, 12)};
  in.jobs[0].last_output = At(Duration::Minutes(5));
  in.jobs[0].last_progress = At(Duration::Minutes(7));
  in.jobs[0].step = 1200;
  EXPECT_TRUE(e.Evaluate(At(Duration::Minutes(16)), in).empty()) << "7 + 10 > 16";
  auto changed = e.Evaluate(At(Duration::Minutes(17)), in);
  ASSERT_EQ(changed.size(), 1u);
  EXPECT_EQ(changed[0].name, "JobStalled");
  EXPECT_EQ(changed[0].labels.at("job_id"), "12");
  EXPECT_NE(changed[0].message.find("last step 1200"), std::string::npos) << changed[0].message;
  // A restart (a new attempt start) clears it.
  in.jobs[0] = job;
  in.jobs[0].started = At(Duration::Minutes(18));
  changed = e.Evaluate(At(Duration::Minutes(18)), in);
  ASSERT_EQ(changed.size(), 1u);
  EXPECT_EQ(changed[0].state, AlertState::kResolved);
}

TEST_F(AlertsTest, EveryJobHoldingASliceOfABusyGpuCountsAsBusy) {
  // Jobs 12 and 15 hold halves of one GPU that runs at 95 %; neither reports progress or output.
  AlertEngine e{AlertRules{}};
  JobActivity a{12, "a", "vision", Duration::Minutes(10), At(Duration::Zero()), std::nullopt, std::nullopt, std::nullopt};
  JobActivity b{15, "b", "nlp", Duration::Minutes(10), At(Duration::Zero()), std::nullopt, std::nullopt, std::nullopt};
  AlertInput in;
  in.jobs = {a, b};
  GpuState shared = Gpu(95, 1000, 50, 12);
  shared.sharing = {15};
  shared.sharing_teams = {"nlp"};
  in.gpus = {shared};
  for (int m = 0; m <= 30; m += 5) e.Evaluate(At(Duration::Minutes(m)), in);
  EXPECT_EQ(Find(e.Alerts(), "JobStalled"), nullptr);
  // Idle: both stall after their timeout, and the idle alert names both.
  in.gpus[0].util_pct = 0;
  for (int m = 31; m <= 50; ++m) e.Evaluate(At(Duration::Minutes(m)), in);
  int stalled = 0;
  for (const Alert& al : e.Alerts()) stalled += al.name == "JobStalled" ? 1 : 0;
  EXPECT_EQ(stalled, 2);
  const Alert* idle = Find(e.Alerts(), "GpuAllocatedIdle");
  ASSERT_NE(idle, nullptr);
  EXPECT_NE(idle->message.find("held by jobs 12, 15"), std::string::npos) << idle->message;
  EXPECT_EQ(idle->labels.at("job_id"), "12,15");
  EXPECT_EQ(idle->labels.at("team"), "nlp,vision");
}

TEST_F(AlertsTest, JobWithoutStallTimeoutIsNotWatched) {
  AlertEngine e{AlertRules{}};
  AlertInput in;
  in.jobs = {JobActivity{12, "", "", Duration::Zero(), At(Duration::Zero()), std::nullopt, std::nullopt, std::nullopt}};
  e.Evaluate(At(Duration::Hours(5)), in);
  EXPECT_EQ(Find(e.Alerts(), "JobStalled"), nullptr);
}

TEST_F(AlertsTest, BudgetAndQueueWait) {
  AlertEngine e{AlertRules{}};
  AlertInput in;
  in.teams = {TeamMoney{"vision", 79.99, 100}, TeamMoney{"nlp", 5, 0}};
  in.oldest_pending_job = 14;
  in.oldest_pending_wait = Duration::Hours(1);
  EXPECT_TRUE(e.Evaluate(At(Duration::Zero()), in).empty());
  in.teams[0].spend_dollars = 85;
  in.oldest_pending_wait = Duration::Hours(1) + Duration::Minutes(20);
  auto changed = e.Evaluate(At(Duration::Minutes(1)), in);
  ASSERT_EQ(changed.size(), 2u);
  const Alert* budget = Find(changed, "BudgetNearlySpent");
  ASSERT_NE(budget, nullptr);
  EXPECT_EQ(budget->message, "team vision spent $85.00 of its $100.00 budget (85%)");
  const Alert* wait = Find(changed, "QueueWaitOverSlo");
  ASSERT_NE(wait, nullptr);
  EXPECT_NE(wait->message.find("job 14 has waited 1h20m"), std::string::npos) << wait->message;
}

TEST_F(AlertsTest, ABudgetAlertFiresWhenTheHardLimitStoppedTheTeamOrItPassedItsSoftLimit) {
  // Given a team stopped by its hard limit's stop lead at 30 % of it (under budget_fraction), and
  // another past its soft limit at 20 % of its hard one, expect a BudgetNearlySpent alert for
  // each saying which, and none for a team under both.
  AlertEngine e{AlertRules{}};
  AlertInput in;
  in.teams = {TeamMoney{"stopped", 30, 100, 0, true}, TeamMoney{"soft", 20, 100, 10, false},
              TeamMoney{"fine", 5, 100, 10, false}};
  auto changed = e.Evaluate(At(Duration::Zero()), in);
  ASSERT_EQ(changed.size(), 2u);
  std::map<std::string, std::string> by_team;
  for (const Alert& a : changed) by_team[a.labels.at("team")] = a.message;
  EXPECT_EQ(by_team["stopped"],
            "team stopped spent $30.00 of its $100.00 budget (30%): its hard budget stopped it (no new starts; "
            "running jobs stopped with their grace)");
  EXPECT_EQ(by_team["soft"], "team soft spent $20.00 of its $100.00 budget (20%), past its soft budget of $10.00");
  EXPECT_FALSE(by_team.contains("fine"));
}

TEST_F(AlertsTest, SettingsChangeThresholdsAndDisableRules) {
  AlertRules r;
  ASSERT_TRUE(SetAlertRule(r, "hot_temp_c", "85").ok());
  ASSERT_TRUE(SetAlertRule(r, "hot_for", "30s").ok());
  ASSERT_TRUE(SetAlertRule(r, "disabled", "GpuAllocatedIdle, NodeSilent").ok());
  EXPECT_EQ(r.hot_temp_c, 85);
  EXPECT_EQ(r.hot_for, Duration::Seconds(30));
  AlertEngine e{r};
  AlertInput in;
  in.gpus = {Gpu(0, 0, 84, 3)};
  in.nodes = {NodeState{"n1", Duration::Minutes(5), false, false, std::nullopt, ""}};
  e.Evaluate(At(Duration::Zero()), in);
  e.Evaluate(At(Duration::Hours(1)), in);
  EXPECT_TRUE(e.Alerts().empty());
  in.gpus = {Gpu(0, 0, 86, 3)};
  e.Evaluate(At(Duration::Hours(1)), in);
  EXPECT_EQ(e.Evaluate(At(Duration::Hours(1) + Duration::Seconds(30)), in).size(), 1u);

  Status st = SetAlertRule(r, "hot_temp", "85");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("unknown alert setting 'hot_temp'"), std::string::npos);
  EXPECT_NE(SetAlertRule(r, "hot_for", "soon").message().find("hot_for: expected a duration"), std::string::npos);
  EXPECT_NE(SetAlertRule(r, "swing_fraction", "1.5").message().find("fraction"), std::string::npos);
  EXPECT_NE(SetAlertRule(r, "disabled", "GpuWarm").message().find("unknown rule 'GpuWarm'"), std::string::npos);
  EXPECT_FALSE(SetAlertRule(r, "idle_util_pct", "101").ok());
}

TEST_F(AlertsTest, AQuarantinedNodeFiresUntilItPasses) {
  AlertEngine e{AlertRules{}};
  AlertInput in;
  NodeState n{"n1", Duration::Seconds(1), false, false, std::nullopt, "", "failed: GPU 1: 3 uncorrected ECC errors"};
  in.nodes = {n};
  auto changed = e.Evaluate(At(Duration::Zero()), in);
  ASSERT_EQ(e.Alerts().size(), 1u);
  EXPECT_EQ(e.Alerts()[0].name, "NodeQuarantined");
  EXPECT_NE(e.Alerts()[0].message.find("GPU 1: 3 uncorrected ECC errors"), std::string::npos) << e.Alerts()[0].message;
  in.nodes[0].quarantined.clear();
  e.Evaluate(At(Duration::Minutes(1)), in);
  EXPECT_EQ(e.Alerts()[0].state, AlertState::kResolved);
}

TEST_F(AlertsTest, ANodeThatCannotWriteItsDataDirectoryFiresUntilItCan) {
  AlertEngine e{AlertRules{}};
  AlertInput in;
  NodeState n{"n1", Duration::Seconds(1), false, false, std::nullopt, "", ""};
  n.storage_fault = "the node's data directory /d cannot be written (write): No space left on device";
  in.nodes = {n};
  e.Evaluate(At(Duration::Zero()), in);
  ASSERT_EQ(e.Alerts().size(), 1u);
  EXPECT_EQ(e.Alerts()[0].name, "NodeStorageFault");
  EXPECT_EQ(e.Alerts()[0].state, AlertState::kFiring);
  EXPECT_NE(e.Alerts()[0].message.find("node n1 takes no work: the node's data directory /d"), std::string::npos)
      << e.Alerts()[0].message;
  in.nodes[0].storage_fault.clear();
  e.Evaluate(At(Duration::Minutes(1)), in);
  EXPECT_EQ(e.Alerts()[0].state, AlertState::kResolved);
  // Off when disabled by name.
  AlertRules off;
  ASSERT_TRUE(SetAlertRule(off, "disabled", "NodeStorageFault").ok());
  AlertEngine quiet{off};
  in.nodes[0].storage_fault = n.storage_fault;
  quiet.Evaluate(At(Duration::Zero()), in);
  EXPECT_TRUE(quiet.Alerts().empty());
}

TEST_F(AlertsTest, ADiskUnderATenthFreeIsPendingThenFiresAfterItsForAndResolvesOnceFreed) {
  AlertEngine e{AlertRules{}};
  AlertInput in;
  NodeState n{"n1", Duration::Seconds(1), false, false, std::nullopt, "", ""};
  const int64_t gib = int64_t{1} << 30;
  // Data: 4 GiB free of 50 (8 %); environments: 5 of 50 (10 %, not under a tenth).
  n.disks = {{"data", "/var/lib/gpufleet", 4 * gib, 50 * gib}, {"environments", "/envs", 5 * gib, 50 * gib}};
  in.nodes = {n};
  e.Evaluate(At(Duration::Zero()), in);
  ASSERT_EQ(e.Alerts().size(), 1u);
  const Alert a = e.Alerts()[0];
  EXPECT_EQ(a.name, "NodeDiskLow");
  EXPECT_EQ(a.state, AlertState::kPending);
  EXPECT_EQ(a.labels.at("dir"), "data");
  EXPECT_EQ(a.labels.at("node"), "n1");
  EXPECT_EQ(a.message,
            "node n1's data directory /var/lib/gpufleet has 4.0 GiB free of 50.0 GiB (8.0 %, under 10.0 %); jobs there "
            "fail to start or lose their logs once it is full: free some room, or drain the node");
  e.Evaluate(At(Duration::Minutes(4)), in);
  EXPECT_EQ(e.Alerts()[0].state, AlertState::kPending);
  auto changed = e.Evaluate(At(Duration::Minutes(5)), in);
  ASSERT_EQ(changed.size(), 1u);
  EXPECT_EQ(changed[0].state, AlertState::kFiring);
  in.nodes[0].disks[0].free_bytes = 20 * gib;
  e.Evaluate(At(Duration::Minutes(6)), in);
  EXPECT_EQ(e.Alerts()[0].state, AlertState::kResolved);
  // A lost node's last report is stale: no alert. Nor from a disk of no size.
  AlertEngine lost{AlertRules{}};
  in.nodes[0].disks[0].free_bytes = 0;
  in.nodes[0].lost = true;
  lost.Evaluate(At(Duration::Zero()), in);
  EXPECT_TRUE(lost.Alerts().empty());
  in.nodes[0].lost = false;
  in.nodes[0].disks = {{"data", "/d", 0, 0}};
  lost.Evaluate(At(Duration::Minutes(1)), in);
  EXPECT_TRUE(lost.Alerts().empty());
  // Its threshold and wait are settings.
  AlertRules r;
  ASSERT_TRUE(SetAlertRule(r, "disk_low_fraction", "0.5").ok());
  ASSERT_TRUE(SetAlertRule(r, "disk_low_for", "0s").ok());
  EXPECT_NE(SetAlertRule(r, "disk_low_fraction", "5").message().find("disk_low_fraction: expected a fraction in (0, 1]"),
            std::string::npos);
  AlertEngine half{r};
  in.nodes[0].disks = {{"environments", "/envs", 20 * gib, 50 * gib}};
  half.Evaluate(At(Duration::Zero()), in);
  ASSERT_EQ(half.Alerts().size(), 1u);
  EXPECT_EQ(half.Alerts()[0].state, AlertState::kFiring);
  EXPECT_NE(half.Alerts()[0].message.find("environments no longer fit once it is full"), std::string::npos)
      << half.Alerts()[0].message;
}

TEST_F(AlertsTest, DisabledEngineRaisesNothing) {
  AlertRules r;
  r.enabled = false;
  AlertEngine e{r};
  AlertInput in;
  in.gpus = {Gpu(0, 0, 120, 3)};
  in.nodes = {NodeState{"n1", Duration::Hours(1), false, false, At(Duration::Zero()), "terminate"}};
  e.Evaluate(At(Duration::Zero()), in);
  e.Evaluate(At(Duration::Hours(1)), in);
  EXPECT_TRUE(e.Alerts().empty());
}

TEST(TelemetryHistoryTest, KeepsPointsSpacedAndBoundedPerGpu) {
  TelemetryHistory h(Duration::Seconds(15), 4);
  Time t0 = Time::FromSeconds(1'000);
  for (int i = 0; i < 12; ++i) {  // every 5 s: one in three is kept
    h.Record("n1", 0, GpuPoint{t0 + Duration::Seconds(5 * i), static_cast<int16_t>(i), 40, 300, 1000});
  }
  h.Record("n1", 1, GpuPoint{t0, 99, 80, 600, 2000});
  auto pts = h.Range("n1", 0, Time::Epoch(), Time::Max());
  ASSERT_EQ(pts.size(), 4u);
  EXPECT_EQ(pts[0].util_pct, 0);
  EXPECT_EQ(pts[3].util_pct, 9);
  EXPECT_EQ(h.Range("n1", 0, t0 + Duration::Seconds(15), t0 + Duration::Seconds(30)).size(), 2u);
  // The ring holds 4: a fifth drops the oldest.
  h.Record("n1", 0, GpuPoint{t0 + Duration::Seconds(60), 12, 40, 300, 1000});
  pts = h.Range("n1", 0, Time::Epoch(), Time::Max());
  ASSERT_EQ(pts.size(), 4u);
  EXPECT_EQ(pts.front().util_pct, 3);
  EXPECT_EQ(h.Range("n1", 1, Time::Epoch(), Time::Max()).size(), 1u);
  h.Forget("n1");
  EXPECT_TRUE(h.Range("n1", 1, Time::Epoch(), Time::Max()).empty());
  EXPECT_TRUE(h.Range("n2", 0, Time::Epoch(), Time::Max()).empty());
}

}  // namespace
}  // namespace gpufleet::obs
