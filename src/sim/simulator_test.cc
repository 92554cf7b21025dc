#include "sim/simulator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "sim/result.h"

namespace gpufleet::sim {
namespace {

const model::GpuCatalog& Catalog() { return model::GpuCatalog::BuiltIn(); }

TraceJob Job(const std::string& id, int64_t submit_s, int gpus, int64_t work_s, int priority = 0) {
  TraceJob j;
  j.id = id;
  j.spec.submit = Time::FromSeconds(submit_s);
  j.spec.gpus_per_node = gpus;
  j.spec.priority = priority;
  j.spec.team = "t";
  j.work = Duration::Seconds(work_s);
  return j;
}

int64_t StartS(const JobRecord& r) { return r.first_start->seconds(); }
int64_t FinishS(const JobRecord& r) { return r.finish->seconds(); }

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class SimulatorTest : public ::testing::Test {
 protected:
  Result<SimResult> Run(const std::vector<TraceJob>& jobs, const ClusterSpec& cluster, SimOptions o) {
    return Simulate(jobs, cluster, o, Catalog());
  }
};

TEST_F(SimulatorTest, AJobOfYearsKeepsTheSeriesBoundedAndTheSummaryAsItWas) {
  // Given one job of 10 days after three short ones (a step of 60 s: 14,400 samples), expect a
  // cap of 100 points to keep at most 101 (the cap, then the final sample), in time order, from
  // the first submission to the end, and the same summary as without the cap.
  std::vector<TraceJob> jobs = {Job("a", 0, 1, 60), Job("b", 30, 1, 60), Job("c", 60, 1, 60),
                                Job("long", 90, 2, 10 * 86400)};
  SimOptions o;
  o.sample_step = Duration::Seconds(60);
  auto full = Run(jobs, HomogeneousCluster(8, "A100"), o);
  ASSERT_TRUE(full.ok()) << full.status().message();
  EXPECT_GT(full->series.size(), 14000u);
  o.max_series_points = 100;
  auto capped = Run(jobs, HomogeneousCluster(8, "A100"), o);
  ASSERT_TRUE(capped.ok()) << capped.status().message();
  ASSERT_LE(capped->series.size(), 101u);
  ASSERT_GE(capped->series.size(), 50u);
  EXPECT_EQ(capped->series.front().t, Time::FromSeconds(0));
  EXPECT_EQ(capped->series.back().t, full->series.back().t);
  for (size_t i = 1; i < capped->series.size(); ++i) EXPECT_LT(capped->series[i - 1].t, capped->series[i].t);
  EXPECT_EQ(SummaryToJson(Summarize(*capped)), SummaryToJson(Summarize(*full)));
}

TEST_F(SimulatorTest, AReplayThatCannotProgressStopsWithAnError) {
  // Given a node that fails every few minutes and jobs that checkpoint every 30 minutes (each
  // run stopped before it saves anything), expect the replay to stop with FailedPrecondition
  // once 1,000 runs in a row were wasted, saying why; with a 1-minute checkpoint it finishes.
  std::vector<TraceJob> jobs = {Job("a", 0, 8, 7200), Job("b", 0, 8, 7200)};
  SimOptions o;
  o.node_mtbf_hours = 0.05;
  o.repair_time = Duration::Seconds(10);
  o.checkpoint_interval = Duration::Minutes(30);
  o.max_wasted_runs = 1000;
  auto stuck = Run(jobs, HomogeneousCluster(8, "A100"), o);
  ASSERT_FALSE(stuck.ok());
  EXPECT_EQ(stuck.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(stuck.status().message().find("makes no progress: 1000 runs in a row"), std::string::npos)
      << stuck.status().message();
  o.checkpoint_interval = Duration::Minutes(1);
  auto done = Run(jobs, HomogeneousCluster(8, "A100"), o);
  ASSERT_TRUE(done.ok()) << done.status().message();
  EXPECT_EQ(Summarize(*done).finished, 2);
}

TEST_F(SimulatorTest, ChargesJobsTheirShareOfNodePrices) {
  // Given one 8-GPU node at $16/h (on-demand) and one spot 8-GPU node at $8/h, a 4-GPU job for
  // 2 h and, after it, a 8-GPU job for 1 h, expect: job A pays half of one node for 2 h, job B a
  // whole node for 1 h; the nodes cost their price for the whole run (3 h), the rest is idle.
  ClusterSpec c = HomogeneousCluster(8, "A100", 8, 16'000'000);
  model::NodeSpec spot = c.nodes[0];
  spot.name = "spot-0";
  spot.market = model::Market::kSpot;
  spot.price_micros_per_hour = 8'000'000;
  spot.labels["pool"] = "spot";
  c.nodes.push_back(spot);
  TraceJob a = Job("A", 0, 4, 7200);
  a.spec.market = model::MarketPreference::kOnDemand;  // the on-demand node
  TraceJob b = Job("B", 7200, 8, 3600);
  b.spec.constraints["pool"] = "spot";
  b.spec.team = "u";
  SimOptions o;
  o.policy = "fifo";
  auto r = Run({a, b}, c, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->jobs[0].cost_micros, 16'000'000);  // $16/h x 4/8 x 2 h
  EXPECT_EQ(r->jobs[1].cost_micros, 8'000'000);   // $8/h x 8/8 x 1 h
  EXPECT_EQ(r->cost_micros, 3 * (16'000'000 + 8'000'000));
  EXPECT_EQ(r->cost_by_market_micros.at("spot"), 24'000'000);
  EXPECT_EQ(r->cost_by_market_micros.at("on-demand"), 48'000'000);
  Summary s = Summarize(*r);
  EXPECT_DOUBLE_EQ(s.cost_usd, 72.0);
  EXPECT_DOUBLE_EQ(s.job_cost_usd, 24.0);
  EXPECT_DOUBLE_EQ(s.teams.at("t").cost_usd, 16.0);
  EXPECT_DOUBLE_EQ(s.teams.at("u").cost_usd, 8.0);
  EXPECT_NE(FormatSummaryText(s).find("cost              $72.00 (jobs $24.00, idle $48.00"), std::string::npos)
      << FormatSummaryText(s);
  EXPECT_NE(SummaryToJson(s).find("\"cost_usd\": 72"), std::string::npos) << SummaryToJson(s);
}

TEST_F(SimulatorTest, ReservedUtilisationCountsTheReservedNodesAlone) {
  // Given a reserved 8-GPU node and a spot one, a 4-GPU job for 2 h on the reserved node and,
  // after it, an 8-GPU job for 1 h on spot, expect the reserved node busy 4 GPUs x 2 h of its
  // 8 GPUs x 3 h paid (1/3), the spot node 8 x 1 of 8 x 3, and no reserved figure without one.
  ClusterSpec c = HomogeneousCluster(8, "A100", 8, 16'000'000);
  c.nodes[0].market = model::Market::kReserved;
  model::NodeSpec spot = c.nodes[0];
  spot.name = "spot-0";
  spot.market = model::Market::kSpot;
  spot.labels["pool"] = "spot";
  c.nodes.push_back(spot);
  TraceJob a = Job("A", 0, 4, 7200);
  a.spec.market = model::MarketPreference::kOnDemand;  // not spot: the reserved node
  TraceJob b = Job("B", 7200, 8, 3600);
  b.spec.constraints["pool"] = "spot";
  SimOptions o;
  o.policy = "fifo";
  auto r = Run({a, b}, c, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const int reserved = static_cast<int>(model::Market::kReserved);
  const int spot_market = static_cast<int>(model::Market::kSpot);
  EXPECT_EQ(r->busy_gpu_ms_by_market[reserved], 4 * 2 * 3'600'000);
  EXPECT_EQ(r->paid_gpu_ms_by_market[reserved], 8 * 3 * 3'600'000);
  EXPECT_EQ(r->busy_gpu_ms_by_market[spot_market], 8 * 1 * 3'600'000);
  Summary s = Summarize(*r);
  EXPECT_DOUBLE_EQ(s.reserved_utilisation, 1.0 / 3.0);

  ClusterSpec plain = HomogeneousCluster(1, "A100", 8, 16'000'000);
  auto r2 = Run({Job("C", 0, 4, 3600)}, plain, o);
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  EXPECT_EQ(Summarize(*r2).reserved_utilisation, -1);
}

TEST_F(SimulatorTest, ReservedNodesArePaidWholeUpToTheBillingEndThenOnlyTheGpusInUse) {
  // Given a reserved 8-GPU node at $16/h ($2 per GPU-hour), one 4-GPU job of 3 h from t = 0, and
  // reserved billing that ends at 1 h: the node is paid whole for 1 h ($16), then the job's 4 GPUs
  // for 2 h ($16), $32 in all; busy and paid GPU-time are counted to the end of billing (4 of 8
  // GPU-hours). Without the end: the whole node for 3 h, $48.
  ClusterSpec c = HomogeneousCluster(8, "A100", 8, 16'000'000);
  c.nodes[0].market = model::Market::kReserved;
  SimOptions o;
  o.reserved_billing_end = Time::FromSeconds(3600);
  auto r = Run({Job("A", 0, 4, 3 * 3600)}, c, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const int reserved = static_cast<int>(model::Market::kReserved);
  EXPECT_EQ(r->cost_micros, 32'000'000);
  EXPECT_EQ(r->paid_gpu_ms_by_market[reserved], 8 * 3'600'000);
  EXPECT_EQ(r->busy_gpu_ms_by_market[reserved], 4 * 3'600'000);
  EXPECT_DOUBLE_EQ(Summarize(*r).reserved_utilisation, 0.5);
  ASSERT_TRUE(r->jobs[0].finish.has_value());
  EXPECT_EQ(*r->jobs[0].finish, Time::FromSeconds(3 * 3600));

  o.reserved_billing_end.reset();
  auto whole = Run({Job("A", 0, 4, 3 * 3600)}, c, o);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(whole->cost_micros, 3 * 16'000'000);
}

TEST_F(SimulatorTest, HardBudgetStopsATeamAtItsLimit) {
  // A full 8-GPU node at $8/h and team t's budget of $2: its 1-hour job is stopped after 15
  // minutes and never finishes; team u, without a budget, runs its job to the end.
  ClusterSpec c = HomogeneousCluster(8, "A100", 8, 8'000'000);
  c.team_money["t"].hard_micros = 2'000'000;
  TraceJob a = Job("A", 0, 8, 3600);
  TraceJob b = Job("B", 10, 8, 600);
  b.spec.team = "u";
  SimOptions o;
  o.policy = "fifo";
  auto r = Run({a, b}, c, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->jobs[0].finish.has_value());
  EXPECT_EQ(r->jobs[0].cost_micros, 2'000'000);
  ASSERT_TRUE(r->jobs[1].finish.has_value());
  EXPECT_EQ(FinishS(r->jobs[1]), 900 + 600);
}

TEST_F(SimulatorTest, StrictFifoGoldenSchedule) {
  // Given one 8-GPU node and four jobs, expect the exact strict-FIFO schedule worked out by
  // hand: A 0-100; B and C start at 100 (B 4 GPUs to 150, C 4 GPUs to 130); D waits for C.
  std::vector<TraceJob> jobs = {Job("A", 0, 8, 100), Job("B", 10, 4, 50), Job("C", 20, 4, 30), Job("D", 30, 1, 10)};
  SimOptions o;
  o.policy = "fifo";
  auto r = Run(jobs, HomogeneousCluster(8, "A100"), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->jobs.size(), 4u);
  EXPECT_EQ(StartS(r->jobs[0]), 0);
  EXPECT_EQ(FinishS(r->jobs[0]), 100);
  EXPECT_EQ(StartS(r->jobs[1]), 100);
  EXPECT_EQ(FinishS(r->jobs[1]), 150);
  EXPECT_EQ(StartS(r->jobs[2]), 100);
  EXPECT_EQ(FinishS(r->jobs[2]), 130);
  EXPECT_EQ(StartS(r->jobs[3]), 130);
  EXPECT_EQ(FinishS(r->jobs[3]), 140);
  EXPECT_EQ(r->jobs[3].queued, Duration::Seconds(100));
  // Exact GPU time: 800 + 200 + 120 + 10 GPU-s busy of 8 GPUs x 150 s.
  EXPECT_EQ(r->busy_gpu_ms, 1'130'000);
  EXPECT_EQ(r->online_gpu_ms, 1'200'000);
  EXPECT_NEAR(Summarize(*r).utilisation, 1130.0 / 1200.0, 1e-12);
}

TEST_F(SimulatorTest, LasDoesNotPreemptAJobBelowItsFirstThreshold) {
  // Given the same trace under LAS, expect the same schedule: A (8 GPUs for 100 s = 800 GPU-s)
  // never reaches the first threshold of 3,250 GPU-s, so nobody may preempt it, and D still
  // waits for C because B and C arrived first in the same queue.
  std::vector<TraceJob> jobs = {Job("A", 0, 8, 100), Job("B", 10, 4, 50), Job("C", 20, 4, 30), Job("D", 30, 1, 10)};
  SimOptions o;
  o.policy = "las";
  auto r = Run(jobs, HomogeneousCluster(8, "A100"), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(FinishS(r->jobs[0]), 100);
  EXPECT_EQ(StartS(r->jobs[1]), 100);
  EXPECT_EQ(StartS(r->jobs[2]), 100);
  EXPECT_EQ(StartS(r->jobs[3]), 130);
  EXPECT_EQ(r->jobs[0].preemptions, 0);
}

TEST_F(SimulatorTest, LasPreemptsALongWideJobForANewcomer) {
  // Given an 8-GPU job that runs long enough to pass both thresholds (7,200 GPU-s = 900 s on 8
  // GPUs), expect a 1-GPU job arriving at 1,000 s to preempt it, run at once, and the long job
  // to resume and finish with its total work done (it checkpoints on the preemption signal).
  std::vector<TraceJob> jobs = {Job("long", 0, 8, 2000), Job("short", 1000, 1, 60)};
  SimOptions o;
  o.policy = "las";
  auto r = Run(jobs, HomogeneousCluster(8, "A100"), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->jobs[0].preemptions, 1);
  EXPECT_EQ(StartS(r->jobs[1]), 1000);
  EXPECT_EQ(FinishS(r->jobs[1]), 1060);
  EXPECT_EQ(FinishS(r->jobs[0]), 2060);  // 1,000 s done, stopped 60 s, 1,000 s left
  EXPECT_EQ(r->jobs[0].lost_gpu_ms, 0);
}

TEST_F(SimulatorTest, PreemptionWithoutSignalLosesWorkSinceLastCheckpoint) {
  // Given a low-priority job checkpointing every 100 s and preempted at 250 s by a 10 s
  // high-priority job, expect 50 s of work lost when jobs ignore the signal (finish at 1,060),
  // and none when they checkpoint on it (finish at 1,010).
  std::vector<TraceJob> jobs = {Job("low", 0, 1, 1000, 0), Job("high", 250, 1, 10, 5)};
  jobs[0].spec.checkpoint_interval = Duration::Seconds(100);
  SimOptions o;
  o.policy = "priority";
  o.checkpoint_on_preempt = false;
  auto lossy = Run(jobs, HomogeneousCluster(1, "A100", 1), o);
  ASSERT_TRUE(lossy.ok()) << lossy.status().ToString();
  EXPECT_EQ(FinishS(lossy->jobs[1]), 260);
  EXPECT_EQ(FinishS(lossy->jobs[0]), 1060);
  EXPECT_EQ(lossy->jobs[0].lost_gpu_ms, 50'000);
  o.checkpoint_on_preempt = true;
  auto saved = Run(jobs, HomogeneousCluster(1, "A100", 1), o);
  ASSERT_TRUE(saved.ok());
  EXPECT_EQ(FinishS(saved->jobs[0]), 1010);
  EXPECT_EQ(saved->jobs[0].lost_gpu_ms, 0);
}

TEST_F(SimulatorTest, FasterGpuShortensTheRun) {
  // Given runtimes measured on A100 and a cluster of H100s, expect the job to take
  // work / RelativeSpeed(A100 -> H100) seconds, rounded up to the millisecond.
  std::vector<TraceJob> jobs = {Job("j", 0, 8, 3600)};
  SimOptions o;
  o.reference_gpu = "A100";
  auto r = Run(jobs, HomogeneousCluster(8, "H100"), o);
  ASSERT_TRUE(r.ok());
  double speed = Catalog().RelativeSpeed("A100", "H100", model::Boundness::kBalanced);
  ASSERT_GT(speed, 1.5);
  int64_t expect_ms = static_cast<int64_t>(std::ceil(3'600'000.0 / speed));
  EXPECT_EQ(r->jobs[0].finish->millis(), expect_ms);
  EXPECT_EQ(r->jobs[0].gpu_model, "H100");
}

TEST_F(SimulatorTest, JobLargerThanANodeRunsAsAGang) {
  // Given 16-GPU and 24-GPU jobs on 8-GPU nodes, expect both to run at once on 5 nodes.
  std::vector<TraceJob> jobs = {Job("a", 0, 16, 100), Job("b", 0, 24, 100)};
  auto r = Run(jobs, HomogeneousCluster(40, "A100"), SimOptions{});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(StartS(r->jobs[0]), 0);
  EXPECT_EQ(StartS(r->jobs[1]), 0);
  EXPECT_EQ(r->jobs[1].run_gpu_ms, 24 * 100'000);
}

TEST_F(SimulatorTest, SrtfHandWorkedScheduleWithALongJobNearlyDone) {
  // Given two GPUs, oracle estimates and three 1-GPU jobs — A (1,000 s at 0 s), B (500 s at
  // 900 s), C (200 s at 950 s) — expect the schedule worked out by hand:
  //   A 0-1,000; B 900-950, preempted for C with 450 s left (A has only 50 s left, so it is
  //   not the victim though it started with the most); C 950-1,150; B resumes when A ends,
  //   1,000-1,450.
  std::vector<TraceJob> jobs = {Job("A", 0, 1, 1000), Job("B", 900, 1, 500), Job("C", 950, 1, 200)};
  SimOptions o;
  o.policy = "srtf";
  o.estimates = Estimates::kOracle;
  auto r = Run(jobs, HomogeneousCluster(2, "A100", 2), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(StartS(r->jobs[0]), 0);
  EXPECT_EQ(FinishS(r->jobs[0]), 1000);
  EXPECT_EQ(r->jobs[0].preemptions, 0);
  EXPECT_EQ(StartS(r->jobs[1]), 900);
  EXPECT_EQ(r->jobs[1].preemptions, 1);
  EXPECT_EQ(r->jobs[1].queued, Duration::Seconds(50));
  EXPECT_EQ(FinishS(r->jobs[1]), 1450);
  EXPECT_EQ(StartS(r->jobs[2]), 950);
  EXPECT_EQ(FinishS(r->jobs[2]), 1150);
}

TEST_F(SimulatorTest, RestartOverheadIsBookedApartSoUsedIsWorkPlusLostPlusOverhead) {
  // Given one GPU, a 1-minute restart overhead and a low job (1,000 s, checkpoints every 100 s)
  // stopped twice by 10 s high-priority jobs — at 250 s, and at 290 s while it is still in the
  // overhead of its second run (30 s of 60) — expect, worked out by hand:
  //   run 1: 0-250, run 2: 260-290 (overhead only), run 3: 300 + 60 s overhead + the rest.
  // Saving on the stop signal: nothing lost, overhead 30 + 60 = 90 s, finish 300+60+750 = 1,110,
  // held 250 + 30 + 810 = 1,090 s = 1,000 work + 0 lost + 90 overhead.
  // Ignoring the signal: run 1 keeps 200 s (two checkpoints) and loses 50 s; finish
  // 300+60+800 = 1,160; held 1,140 s = 1,000 + 50 + 90.
  std::vector<TraceJob> jobs = {Job("low", 0, 1, 1000, 0), Job("high1", 250, 1, 10, 5), Job("high2", 290, 1, 10, 5)};
  jobs[0].spec.checkpoint_interval = Duration::Seconds(100);
  SimOptions o;
  o.policy = "priority";
  o.restart_overhead = Duration::Minutes(1);
  auto saved = Run(jobs, HomogeneousCluster(1, "A100", 1), o);
  ASSERT_TRUE(saved.ok()) << saved.status().ToString();
  const JobRecord& s = saved->jobs[0];
  EXPECT_EQ(s.preemptions, 2);
  EXPECT_EQ(FinishS(s), 1110);
  EXPECT_EQ(s.lost_gpu_ms, 0);
  EXPECT_EQ(s.overhead_gpu_ms, 90'000);
  EXPECT_EQ(s.run_gpu_ms, 1'090'000);
  o.checkpoint_on_preempt = false;
  auto lossy = Run(jobs, HomogeneousCluster(1, "A100", 1), o);
  ASSERT_TRUE(lossy.ok()) << lossy.status().ToString();
  const JobRecord& l = lossy->jobs[0];
  EXPECT_EQ(FinishS(l), 1160);
  EXPECT_EQ(l.lost_gpu_ms, 50'000);
  EXPECT_EQ(l.overhead_gpu_ms, 90'000);
  EXPECT_EQ(l.run_gpu_ms, 1'140'000);
  Summary sum = Summarize(*lossy);
  EXPECT_NEAR(sum.gpu_hours_overhead, 90.0 / 3600, 1e-12);
  EXPECT_NE(FormatSummaryText(sum).find("restart overhead  0.0 GPU-hours"), std::string::npos)
      << FormatSummaryText(sum);
  EXPECT_NE(SummaryToJson(sum).find("\"gpu_hours_overhead\": 0.025"), std::string::npos) << SummaryToJson(sum);
}

TEST_F(SimulatorTest, LoadFactorCompressesArrivals) {
  // Given arrivals 0 s and 100 s, expect load factor 2 to submit the second at 50 s.
  std::vector<TraceJob> jobs = {Job("a", 0, 1, 10), Job("b", 100, 1, 10)};
  SimOptions o;
  o.load_factor = 2.0;
  auto r = Run(jobs, HomogeneousCluster(8, "A100"), o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->jobs[1].submit.seconds(), 50);
}

TEST_F(SimulatorTest, InfeasibleJobIsReportedUnfinishedAndTheRunEnds) {
  // Given a job asking for an H100 on an A100 cluster, expect the run to end with that job
  // unfinished and the others done.
  std::vector<TraceJob> jobs = {Job("ok", 0, 1, 10), Job("never", 0, 1, 10)};
  jobs[1].spec.gpu_models = {"H100"};
  auto r = Run(jobs, HomogeneousCluster(8, "A100"), SimOptions{});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->jobs[0].finish.has_value());
  EXPECT_FALSE(r->jobs[1].finish.has_value());
  EXPECT_EQ(r->jobs[0].never_ran, "");
  EXPECT_EQ(r->jobs[1].never_ran, "can never run: no node has GPU model H100 (the cluster has: A100)");
}

TEST_F(SimulatorTest, JobLargerThanTheClusterIsReportedByIdAndLeftOutOfTheAverages) {
  // Given two 8-GPU nodes, two 1-GPU jobs and a 128-GPU job, expect the big job reported as
  // never run with the reason (a gang of 16 nodes where 2 exist), counted apart, and left out
  // of the queueing delay: the two small jobs never wait, so the average is 0 (counting the big
  // job's endless wait would make it a third of the run).
  std::vector<TraceJob> jobs = {Job("a", 0, 1, 100), Job("huge", 0, 128, 100), Job("b", 50, 1, 100)};
  auto r = Run(jobs, HomogeneousCluster(16, "A100"), SimOptions{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->jobs[1].first_start.has_value());
  EXPECT_EQ(r->jobs[1].never_ran,
            "can never run: needs 16 A100 node(s) with 8 GPUs but only 2 such node(s) exist");
  Summary s = Summarize(*r);
  EXPECT_EQ(s.jobs, 3);
  EXPECT_EQ(s.finished, 2);
  ASSERT_EQ(s.never_ran.size(), 1u);
  EXPECT_EQ(s.never_ran[0].id, "huge");
  EXPECT_EQ(s.queue_s.avg, 0.0);
  EXPECT_EQ(s.queue_s.max, 0.0);
  std::string text = FormatSummaryText(s);
  EXPECT_NE(text.find("jobs              3 (2 finished, 1 never ran)"), std::string::npos) << text;
  EXPECT_NE(text.find("1 x can never run: needs 16 A100 node(s) with 8 GPUs but only 2 such node(s) exist: huge"),
            std::string::npos)
      << text;
  std::string json = SummaryToJson(s);
  EXPECT_NE(json.find("\"never_ran\": 1"), std::string::npos) << json;
  EXPECT_NE(json.find("\"id\": \"huge\""), std::string::npos) << json;
}

TEST_F(SimulatorTest, NodeFailuresAreSeededAndEveryJobStillFinishes) {
  // Given node failures (MTBF 2 h, repair 30 min) with a fixed seed, expect failures to hit
  // jobs, every job to finish, and a second run to give the same per-job results.
  std::vector<TraceJob> jobs;
  for (int i = 0; i < 200; ++i) jobs.push_back(Job("j" + std::to_string(i), i * 60, 1 + (i % 4), 1800 + (i % 7) * 600));
  SimOptions o;
  o.policy = "backfill";
  o.node_mtbf_hours = 2;
  o.repair_time = Duration::Minutes(30);
  o.seed = 42;
  auto a = Run(jobs, HomogeneousCluster(32, "A100"), o);
  auto b = Run(jobs, HomogeneousCluster(32, "A100"), o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_GT(a->node_failures, 0);
  int64_t failures = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_TRUE(a->jobs[i].finish.has_value()) << jobs[i].id;
    EXPECT_EQ(a->jobs[i].finish, b->jobs[i].finish);
    failures += a->jobs[i].failures;
  }
  EXPECT_GT(failures, 0);
  EXPECT_EQ(SummaryToJson(Summarize(*a)), SummaryToJson(Summarize(*b)));
}

TEST_F(SimulatorTest, BadInputIsAnErrorNotACrash) {
  // Given an unknown policy, an empty trace or a non-positive load factor, expect errors.
  SimOptions o;
  o.policy = "nope";
  EXPECT_FALSE(Run({Job("a", 0, 1, 1)}, HomogeneousCluster(8, "A100"), o).ok());
  EXPECT_FALSE(Run({}, HomogeneousCluster(8, "A100"), SimOptions{}).ok());
  SimOptions bad_load;
  bad_load.load_factor = 0;
  EXPECT_FALSE(Run({Job("a", 0, 1, 1)}, HomogeneousCluster(8, "A100"), bad_load).ok());
  EXPECT_FALSE(Run({Job("a", 0, 1, 1)}, ClusterSpec{}, SimOptions{}).ok());
}

// The real Philly trace: invariants that must hold for any policy, and the headline result of
// Tiresias (LAS beats FIFO on average JCT on a loaded cluster).
class PhillyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    TraceOptions to;
    auto t = ReadTrace(std::string(GPUFLEET_SOURCE_DIR) + "/data/traces/philly/philly.csv", to);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    trace_ = new Trace(std::move(*t));
  }
  static void TearDownTestSuite() { delete trace_; }

  static void CheckInvariants(const SimResult& r) {
    ASSERT_EQ(r.jobs.size(), trace_->jobs.size());
    int64_t work_gpu_ms = 0, used_gpu_ms = 0;
    for (size_t i = 0; i < r.jobs.size(); ++i) {
      const JobRecord& j = r.jobs[i];
      ASSERT_TRUE(j.finish.has_value()) << "job " << j.id << " never finished";
      ASSERT_TRUE(j.first_start.has_value());
      EXPECT_GE(*j.finish - j.submit, j.work) << "job " << j.id << " finished faster than its duration";
      EXPECT_GE(*j.first_start, j.submit);
      work_gpu_ms += j.work.millis() * j.gpus;
      used_gpu_ms += j.run_gpu_ms - j.lost_gpu_ms;
    }
    // GPU-seconds are conserved: what ran (less what was thrown away) is exactly the work.
    EXPECT_EQ(used_gpu_ms, work_gpu_ms);
    Summary s = Summarize(r);
    EXPECT_EQ(s.finished, static_cast<int64_t>(r.jobs.size()));
    EXPECT_GT(s.utilisation, 0.0);
    EXPECT_LE(s.utilisation, 1.0);
    for (const SeriesPoint& p : r.series) {
      EXPECT_LE(p.busy_gpu_milli, p.total_gpu_milli);
      EXPECT_GE(p.busy_gpu_milli, 0);
    }
  }

  static Trace* trace_;
};

Trace* PhillyTest::trace_ = nullptr;

TEST_F(PhillyTest, FifoKeepsInvariantsAndLasBeatsItOnAverageJct) {
  // Given the 82,247-job Philly trace on a loaded 480-GPU cluster, expect both FIFO and LAS to
  // finish every job once with JCT >= duration, utilisation <= 100 % and GPU-seconds conserved,
  // and LAS to have a lower average JCT than FIFO.
  SimOptions fifo;
  fifo.policy = "fifo";
  auto f = Simulate(trace_->jobs, HomogeneousCluster(480, "A100"), fifo, Catalog());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  CheckInvariants(*f);
  SimOptions las;
  las.policy = "las";
  auto l = Simulate(trace_->jobs, HomogeneousCluster(480, "A100"), las, Catalog());
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  CheckInvariants(*l);
  double fifo_jct = Summarize(*f).jct_s.avg, las_jct = Summarize(*l).jct_s.avg;
  EXPECT_LT(las_jct, fifo_jct) << "LAS " << las_jct << " s vs FIFO " << fifo_jct << " s";
  EXPECT_GT(Summarize(*l).preemptions, 0);
}

TEST_F(PhillyTest, SameInputsGiveByteIdenticalReports) {
  // Given the first 20,000 Philly jobs run twice under backfill, expect identical per-job CSV,
  // series CSV and JSON summary bytes.
  std::vector<TraceJob> part(trace_->jobs.begin(), trace_->jobs.begin() + 20000);
  SimOptions o;
  o.policy = "backfill";
  o.estimates = Estimates::kOracle;
  auto a = Simulate(part, HomogeneousCluster(256, "A100"), o, Catalog());
  auto b = Simulate(part, HomogeneousCluster(256, "A100"), o, Catalog());
  ASSERT_TRUE(a.ok() && b.ok());
  std::string dir = ::testing::TempDir();
  ASSERT_TRUE(WriteJobsCsv(dir + "/a.csv", *a).ok());
  ASSERT_TRUE(WriteJobsCsv(dir + "/b.csv", *b).ok());
  ASSERT_TRUE(WriteSeriesCsv(dir + "/as.csv", *a).ok());
  ASSERT_TRUE(WriteSeriesCsv(dir + "/bs.csv", *b).ok());
  EXPECT_EQ(ReadAll(dir + "/a.csv"), ReadAll(dir + "/b.csv"));
  EXPECT_EQ(ReadAll(dir + "/as.csv"), ReadAll(dir + "/bs.csv"));
  EXPECT_EQ(SummaryToJson(Summarize(*a)), SummaryToJson(Summarize(*b)));
  EXPECT_GT(ReadAll(dir + "/a.csv").size(), 100000u);
}

// An autoscaled pool with no fixed nodes: one offer (8 x A100), or more.
ClusterSpec Pool(std::vector<AutoscaleOffer> offers) {
  ClusterSpec c;
  c.autoscale.offers = std::move(offers);
  c.autoscale.options.idle_duration = Duration::Minutes(10);
  return c;
}

AutoscaleOffer Offer(const std::string& name, model::Market market, int64_t dollars_per_hour,
                     double hazard = 0) {
  AutoscaleOffer o;
  o.name = name;
  o.node = HomogeneousCluster(8, "A100", 8).nodes[0];
  o.node.name = name + "-0";
  o.node.labels = {{"zone", "a"}};
  o.node.market = market;
  o.node.price_micros_per_hour = dollars_per_hour * 1'000'000;
  o.boot_delay = Duration::Minutes(5);
  o.interruptions_per_hour = hazard;
  return o;
}

TEST_F(SimulatorTest, AutoscalerRentsForTheQueueAndReleasesIdleNodes) {
  // Given an empty pool that rents 8 x A100 at $8/h with a 5-minute boot and a 10-minute idle
  // release: A (1 h, at 0) starts at 300 s when its node is up; the node is released at 4500 s
  // (idle since 3900 s); B (30 min, at 7200 s) rents a new node and starts at 7500 s. The pool
  // pays from each rent to its release: 4500 s + (7200..9300 s + 600 s idle tail) = 2 h = $16.
  SimOptions o;
  o.policy = "fifo";
  auto r = Run({Job("A", 0, 8, 3600), Job("B", 7200, 8, 1800)}, Pool({Offer("od", model::Market::kOnDemand, 8)}), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(StartS(r->jobs[0]), 300);
  EXPECT_EQ(FinishS(r->jobs[0]), 3900);
  EXPECT_EQ(StartS(r->jobs[1]), 7500);
  EXPECT_EQ(r->nodes_rented, 2);
  EXPECT_EQ(r->nodes_released, 1);
  EXPECT_EQ(r->cost_micros, 16'000'000);
  EXPECT_EQ(r->jobs[0].cost_micros, 8'000'000);
  Summary s = Summarize(*r);
  EXPECT_NE(FormatSummaryText(s).find("2 nodes rented, 1 released"), std::string::npos) << FormatSummaryText(s);
}

TEST_F(SimulatorTest, ABudgetCapsTheWholeBillOfRentedNodesAndTheRunEndsWhenOnlyHeldJobsAreLeft) {
  // Given an empty pool renting 8 x A100 at $8/h (5-minute boot) and team t with a $1 soft and
  // a $2 hard budget, a 1-GPU job of 2 hours: the team pays the whole node from its rent, so the
  // soft budget is reached at 450 s and the hard one at 900 s (not after 2 hours of the job's
  // own $1/h). The job is stopped, the node released at once, and the run ends there with the
  // job held: the bill is exactly $2, of which the job's GPU $0.17 (10 min) and idle $1.83.
  ClusterSpec c = Pool({Offer("od", model::Market::kOnDemand, 8)});
  c.team_money["t"].hard_micros = 2'000'000;
  c.team_money["t"].soft_micros = 1'000'000;
  SimOptions o;
  o.policy = "fifo";
  auto r = Run({Job("A", 0, 1, 7200)}, c, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(StartS(r->jobs[0]), 300);
  EXPECT_FALSE(r->jobs[0].finish.has_value());
  EXPECT_EQ(r->cost_micros, 2'000'000);
  EXPECT_EQ(r->jobs[0].cost_micros, 166'666);  // $8/h x 1/8 x 600 s
  EXPECT_EQ(r->budget_releases, 1);
  EXPECT_EQ(r->end, Time::FromSeconds(900));
  const TeamBudgetRecord& b = r->budgets.at("t");
  EXPECT_EQ(b.spent_micros, 2'000'000);
  EXPECT_EQ(b.rented_idle_micros, 1'833'333);
  EXPECT_EQ(b.soft_reached, Time::FromSeconds(450));
  EXPECT_EQ(b.hard_stopped, Time::FromSeconds(900));
  EXPECT_EQ(b.held_jobs, 1);
  Summary s = Summarize(*r);
  const std::string text = FormatSummaryText(s);
  EXPECT_NE(text.find("budget t          spent $2.00 (rented nodes idle $1.83); soft $1.00 reached at "
                      "1970-01-01T00:07:30Z; hard $2.00 stopped the team at 1970-01-01T00:15:00Z; 1 jobs held "
                      "at the end"),
            std::string::npos)
      << text;
  EXPECT_NE(SummaryToJson(s).find("\"soft_reached\": \"1970-01-01T00:07:30Z\""), std::string::npos) << SummaryToJson(s);
}

TEST_F(SimulatorTest, AJobHeldByItsTeamsHardBudgetDoesNotHoldUpOtherTeams) {
  // Given a pool of on-demand ($8/h) and spot ($2/h) 8 x A100 offers, team a with a $1 hard
  // budget and a 2-hour on-demand job at 0 (stopped at 450 s, when its rented node has cost $1),
  // and team b's 1-hour spot job of 8 GPUs at 3600 s: under every policy b's job rents a spot node
  // and runs (it used to wait behind a's held job, its nodes rented and released idle for ever),
  // and the run ends with a's job held.
  ClusterSpec c = Pool({Offer("od", model::Market::kOnDemand, 8), Offer("sp", model::Market::kSpot, 2)});
  c.team_money["a"].hard_micros = 1'000'000;
  TraceJob a = Job("a1", 0, 1, 7200);
  a.spec.team = "a";
  a.spec.market = model::MarketPreference::kOnDemand;
  TraceJob b = Job("b1", 3600, 8, 3600);
  b.spec.team = "b";
  b.spec.market = model::MarketPreference::kSpot;
  for (const char* policy : {"fifo", "backfill", "priority", "las", "fair-share"}) {
    SCOPED_TRACE(policy);
    SimOptions o;
    o.policy = policy;
    o.max_unused_rents = 100;
    auto r = Run({a, b}, c, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(r->jobs[1].first_start.has_value());
    EXPECT_EQ(StartS(r->jobs[1]), 3600 + 300);
    EXPECT_EQ(FinishS(r->jobs[1]), 3600 + 300 + 3600);
    EXPECT_FALSE(r->jobs[0].finish.has_value());
    EXPECT_EQ(r->budgets.at("a").held_jobs, 1);
    EXPECT_EQ(r->nodes_rented, 2);
  }
}

TEST_F(SimulatorTest, TheSeriesGoesOnWhileJobsWaitAndNothingRuns) {
  // Given an empty pool (5-minute boot) and one 8-GPU job of 10 hours, sampled each minute, expect
  // samples while the job waits for its node (pending 1, nothing busy) and on through its run,
  // not only the first and the last.
  SimOptions o;
  o.policy = "fifo";
  o.sample_step = Duration::Seconds(60);
  auto r = Run({Job("A", 0, 8, 36000)}, Pool({Offer("od", model::Market::kOnDemand, 8)}), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GE(r->series.size(), 600u);
  ASSERT_GE(r->series.size(), 3u);
  EXPECT_EQ(r->series[1].t, Time::FromSeconds(60));
  EXPECT_EQ(r->series[1].pending_jobs, 1);
  EXPECT_EQ(r->series[1].busy_gpu_milli, 0);
  int64_t busy_points = 0;
  for (const SeriesPoint& p : r->series) busy_points += p.busy_gpu_milli == 8000 ? 1 : 0;
  EXPECT_GE(busy_points, 590);
}

TEST_F(SimulatorTest, RentedNodesReleasedUnusedOverAndOverStopTheReplayWithAnError) {
  // Given a fixed 8-GPU node busy for 10 minutes and an autoscaled pool with a 30-minute boot, a
  // second 8-GPU job at 0 rents a node but starts on the fixed one when it frees: the rented node
  // is released without having held a job. With at most one such release in a row the replay
  // stops saying so; with the default it finishes.
  ClusterSpec c = Pool({Offer("od", model::Market::kOnDemand, 8)});
  c.autoscale.offers[0].boot_delay = Duration::Minutes(30);
  c.nodes = HomogeneousCluster(8, "A100", 8).nodes;
  SimOptions o;
  o.policy = "fifo";
  std::vector<TraceJob> jobs = {Job("A", 0, 8, 600), Job("B", 0, 8, 7200)};
  auto done = Run(jobs, c, o);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(StartS(done->jobs[1]), 600);
  EXPECT_GE(done->nodes_released, 1);
  o.max_unused_rents = 1;
  auto stuck = Run(jobs, c, o);
  ASSERT_FALSE(stuck.ok());
  EXPECT_EQ(stuck.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(stuck.status().message().find("1 rented nodes in a row were released without running a job"),
            std::string::npos)
      << stuck.status().message();
}

TEST_F(SimulatorTest, ASpotOfferOutOfCapacityFallsBackToOnDemand) {
  // Given a $2/h spot offer that almost never has capacity (1 minute with, 1000 hours without, on
  // average) and a $8/h on-demand one, a job of any market tries spot, finds no capacity and runs
  // on on-demand at once (same boot); the same run without the capacity model takes spot.
  std::vector<AutoscaleOffer> offers = {Offer("spot", model::Market::kSpot, 2), Offer("od", model::Market::kOnDemand, 8)};
  SimOptions o;
  o.policy = "fifo";
  auto always = Run({Job("A", 0, 8, 3600)}, Pool(offers), o);
  ASSERT_TRUE(always.ok()) << always.status().ToString();
  EXPECT_EQ(always->jobs[0].cost_micros, 2'000'000);  // an hour on spot
  EXPECT_EQ(always->capacity_misses, 0);
  offers[0].capacity_available = Duration::Minutes(1);
  offers[0].capacity_outage = Duration::Hours(1000);
  auto scarce = Run({Job("A", 0, 8, 3600)}, Pool(offers), o);
  ASSERT_TRUE(scarce.ok()) << scarce.status().ToString();
  EXPECT_EQ(scarce->capacity_misses, 1);
  EXPECT_EQ(StartS(scarce->jobs[0]), 300);
  EXPECT_EQ(scarce->jobs[0].cost_micros, 8'000'000);  // an hour on on-demand
  EXPECT_NE(FormatSummaryText(Summarize(*scarce)).find("1 rents found their offer out of capacity"), std::string::npos);
  // A spot-only job waits for capacity instead (the offer is avoided for the backoff, then tried
  // again), and never rents on-demand.
  TraceJob spot_only = Job("S", 0, 8, 600);
  spot_only.spec.market = model::MarketPreference::kSpot;
  auto waits = Run({spot_only}, Pool(offers), o);
  ASSERT_TRUE(waits.ok()) << waits.status().ToString();
  EXPECT_GE(waits->capacity_misses, 1);
  for (const auto& [market, micros] : waits->cost_by_market_micros) EXPECT_NE(market, "on-demand");
}

TEST_F(SimulatorTest, AJobWhoseOnlyOfferIsOutOfCapacityRentsOnceCapacityReturns) {
  // Given one spot offer whose capacity comes and goes (61 minutes with, 62 without, on average:
  // docs/simulator.md's figures) and nothing else happening, expect every job to run once the
  // offer has capacity again, whatever the seed. (The back-off after a miss was the last thing
  // the replay had to do: it ended with the jobs "never run: the cluster has no GPU nodes".)
  AutoscaleOffer spot = Offer("spot", model::Market::kSpot, 4);
  spot.capacity_available = Duration::Minutes(61);
  spot.capacity_outage = Duration::Minutes(62);
  SimOptions o;
  o.policy = "fifo";
  int missed = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    o.seed = seed;
    auto r = Run({Job("A", 0, 1, 164), Job("B", 30, 8, 147)}, Pool({spot}), o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    missed += r->capacity_misses > 0 ? 1 : 0;
    for (const auto& j : r->jobs) EXPECT_TRUE(j.finish.has_value()) << "seed " << seed << ": job " << j.id << " never ran";
  }
  EXPECT_GT(missed, 0) << "no seed found the offer out of capacity: the case is not tested";
}

TEST_F(SimulatorTest, GangLargerThanANodeRentsAllItsNodesAtOnce) {
  // A 16-GPU job on a pool of 8-GPU offers becomes 2 x 8 and gets both nodes in one rent.
  SimOptions o;
  o.policy = "fifo";
  auto r = Run({Job("G", 0, 16, 600)}, Pool({Offer("od", model::Market::kOnDemand, 8)}), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->jobs[0].finish.has_value());
  EXPECT_EQ(StartS(r->jobs[0]), 300);
  EXPECT_EQ(r->nodes_rented, 2);
}

TEST_F(SimulatorTest, OnDemandJobsNeverLandOnSpot) {
  SimOptions o;
  o.policy = "fifo";
  TraceJob critical = Job("C", 0, 8, 3600);
  critical.spec.market = model::MarketPreference::kOnDemand;
  TraceJob any = Job("A", 0, 8, 3600);
  auto r = Run({critical, any},
               Pool({Offer("spot", model::Market::kSpot, 3), Offer("od", model::Market::kOnDemand, 8)}), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // One node of each: the critical job on on-demand, the other on the cheaper spot node.
  EXPECT_EQ(r->cost_by_market_micros.at("on-demand"), int64_t{8'000'000} * (3900 + 600) / 3600);
  EXPECT_EQ(r->cost_by_market_micros.at("spot"), int64_t{3'000'000} * (3900 + 600) / 3600);
  EXPECT_EQ(r->jobs[0].cost_micros, 8'000'000);
  EXPECT_EQ(r->jobs[1].cost_micros, 3'000'000);
}

TEST_F(SimulatorTest, SpotInterruptionsMoveJobsThatResumeFromTheirCheckpoint) {
  // Spot nodes taken back twice an hour on average; a 10-hour job that saves on the notice.
  // It is interrupted, resumes elsewhere without losing work, falls back to on-demand after two
  // interruptions, and finishes. The run is deterministic for a seed.
  SimOptions o;
  o.policy = "fifo";
  o.seed = 7;
  ClusterSpec pool = Pool({Offer("spot", model::Market::kSpot, 3, 2.0), Offer("od", model::Market::kOnDemand, 8)});
  pool.autoscale.spot_notice = Duration::Minutes(2);
  auto r = Run({Job("L", 0, 8, 10 * 3600)}, pool, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const JobRecord& j = r->jobs[0];
  ASSERT_TRUE(j.finish.has_value());
  EXPECT_GE(r->spot_interruptions, 2);
  EXPECT_EQ(j.reclaims, 2);     // the third run is on on-demand
  EXPECT_EQ(j.preemptions, 0);  // reclaims are the provider's doing, not the scheduler's
  EXPECT_EQ(j.lost_gpu_ms, 0);  // saved on each notice
  EXPECT_GT(r->cost_by_market_micros.at("on-demand"), 0);
  EXPECT_GT(r->cost_by_market_micros.at("spot"), 0);
  auto again = Run({Job("L", 0, 8, 10 * 3600)}, pool, o);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(SummaryToJson(Summarize(*again)), SummaryToJson(Summarize(*r)));
  // Without a checkpoint on the notice, work since the last periodic checkpoint is lost.
  o.checkpoint_on_preempt = false;
  auto lossy = Run({Job("L", 0, 8, 10 * 3600)}, pool, o);
  ASSERT_TRUE(lossy.ok());
  EXPECT_GT(lossy->jobs[0].lost_gpu_ms, 0);
}

TEST_F(SimulatorTest, FixedSpotNodesAreTakenBackAndReturn) {
  // A fixed spot node with interruptions: the job is stopped on each notice and goes on when
  // the node returns after the repair time; it still finishes.
  ClusterSpec c = HomogeneousCluster(8, "A100", 8, 3'000'000);
  c.nodes[0].market = model::Market::kSpot;
  c.interruptions_per_hour = {1.0};
  SimOptions o;
  o.policy = "fifo";
  o.repair_time = Duration::Minutes(30);
  auto r = Run({Job("L", 0, 8, 5 * 3600)}, c, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->jobs[0].finish.has_value());
  EXPECT_GT(r->spot_interruptions, 0);
  EXPECT_EQ(r->jobs[0].reclaims, r->spot_interruptions);
  EXPECT_EQ(r->jobs[0].preemptions, 0);
  EXPECT_EQ(Summarize(*r).preemptions, 0);
  EXPECT_EQ(Summarize(*r).reclaims, r->spot_interruptions);
  EXPECT_GT(FinishS(r->jobs[0]), 5 * 3600);
}

TEST_F(SimulatorTest, NodeFailuresHitRentedNodesToo) {
  // Given an autoscaled pool only (no fixed node), a 20-hour 8-GPU job and --node-mtbf 4 h,
  // expect the rented node to fail (failures are scheduled from its boot), the job to be
  // stopped by it and requeued, a new node rented for it, and the job still to finish.
  SimOptions o;
  o.policy = "fifo";
  o.node_mtbf_hours = 4;
  o.seed = 3;
  auto r = Run({Job("L", 0, 8, 20 * 3600)}, Pool({Offer("od", model::Market::kOnDemand, 8)}), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->jobs[0].finish.has_value());
  EXPECT_GT(r->node_failures, 0);
  EXPECT_EQ(r->jobs[0].failures, r->node_failures);
  EXPECT_EQ(r->nodes_rented, 1 + r->node_failures);
  EXPECT_EQ(r->jobs[0].preemptions, 0);
}

// The first 1,500 Philly jobs on a pool of at most 24 rented 8-GPU A100 nodes (spot taken back
// about every 10 hours, and on-demand), LAS, node failures every 48 h on average, a 2-minute
// restart overhead, seed 11: a slice where failures, reclaims, preemptions and overhead all occur.
Result<Trace> PhillySlice() {
  TraceOptions to;
  to.max_jobs = 1500;
  return ReadTrace(std::string(GPUFLEET_SOURCE_DIR) + "/data/traces/philly/philly.csv", to);
}
ClusterSpec PhillySlicePool() {
  ClusterSpec pool = Pool({Offer("spot", model::Market::kSpot, 3, 0.1), Offer("od", model::Market::kOnDemand, 8)});
  pool.autoscale.limits.max_nodes = 24;
  return pool;
}
SimOptions PhillySliceOptions() {
  SimOptions o;
  o.policy = "las";
  o.node_mtbf_hours = 48;
  o.restart_overhead = Duration::Minutes(2);
  o.seed = 11;
  return o;
}

// A slice of Philly on an autoscaled pool (spot and on-demand), with node failures, spot
// reclaims, restart overhead and LAS preemptions: every GPU-millisecond a job held is its work,
// work it lost, or restart overhead — exactly.
TEST_F(SimulatorTest, PhillySliceBooksBalanceWithFailuresOverheadAndAutoscaling) {
  // Given the first 1,500 Philly jobs on a pool of at most 24 rented 8-GPU nodes (A100, the
  // reference, so speed 1), LAS, --node-mtbf 48 h, a 2-minute restart overhead and spot nodes
  // taken back about every 10 hours, expect failures, reclaims, preemptions, lost work and
  // overhead all to occur, every job to finish, and per job held = work x GPUs + lost +
  // overhead, exactly.
  auto trace = PhillySlice();
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  const ClusterSpec pool = PhillySlicePool();
  const SimOptions o = PhillySliceOptions();
  auto r = Run(trace->jobs, pool, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  int64_t work = 0, lost = 0, overhead = 0, held = 0, failures = 0, reclaims = 0, preemptions = 0;
  for (const JobRecord& j : r->jobs) {
    ASSERT_TRUE(j.finish.has_value()) << j.id << ": " << j.never_ran;
    const int64_t job_work = std::max<int64_t>(j.work.millis(), 1) * j.gpus;  // a 0 s job runs 1 ms
    EXPECT_EQ(j.run_gpu_ms, job_work + j.lost_gpu_ms + j.overhead_gpu_ms) << j.id;
    work += job_work;
    lost += j.lost_gpu_ms;
    overhead += j.overhead_gpu_ms;
    held += j.run_gpu_ms;
    failures += j.failures;
    reclaims += j.reclaims;
    preemptions += j.preemptions;
  }
  EXPECT_EQ(held, work + lost + overhead);
  EXPECT_GT(failures, 0);
  EXPECT_GT(reclaims, 0);
  EXPECT_GT(preemptions, 0);
  EXPECT_GT(lost, 0);
  EXPECT_GT(overhead, 0);
  EXPECT_GT(r->node_failures, 0);
  Summary s = Summarize(*r);
  EXPECT_NEAR(s.gpu_hours_used, (work + lost + overhead) / 3.6e6, 1e-9);
}


// ---- Runs that keep no per-job records ----

void ExpectSamePercentiles(const Percentiles& a, const Percentiles& b, const std::string& what) {
  // Bit for bit, not nearly: the printed figures must not move.
  EXPECT_EQ(a.avg, b.avg) << what;
  EXPECT_EQ(a.p50, b.p50) << what;
  EXPECT_EQ(a.p95, b.p95) << what;
  EXPECT_EQ(a.p99, b.p99) << what;
  EXPECT_EQ(a.max, b.max) << what;
}

// Runs `jobs` keeping per-job records and not; expects the second to keep none and both to give
// the same summary, field by field and byte for byte in every report format.
void ExpectStreamedSummaryEqualsKept(const std::vector<TraceJob>& jobs, const ClusterSpec& cluster, SimOptions o) {
  o.keep_jobs = true;
  auto kept = Simulate(jobs, cluster, o, Catalog());
  o.keep_jobs = false;
  auto streamed = Simulate(jobs, cluster, o, Catalog());
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  ASSERT_TRUE(streamed.ok()) << streamed.status().ToString();
  ASSERT_EQ(kept->jobs.size(), jobs.size());
  EXPECT_TRUE(streamed->jobs.empty());
  EXPECT_EQ(streamed->tally.added, static_cast<int64_t>(jobs.size()));
  Summary a = Summarize(*kept), b = Summarize(*streamed);
  EXPECT_EQ(a.jobs, b.jobs);
  EXPECT_EQ(a.finished, b.finished);
  ASSERT_EQ(a.never_ran.size(), b.never_ran.size());
  for (size_t i = 0; i < a.never_ran.size(); ++i) {
    EXPECT_EQ(a.never_ran[i].id, b.never_ran[i].id);
    EXPECT_EQ(a.never_ran[i].reason, b.never_ran[i].reason);
  }
  ExpectSamePercentiles(a.jct_s, b.jct_s, "jct");
  ExpectSamePercentiles(a.queue_s, b.queue_s, "queue");
  ExpectSamePercentiles(a.slowdown, b.slowdown, "slowdown");
  EXPECT_EQ(a.makespan_s, b.makespan_s);
  EXPECT_EQ(a.utilisation, b.utilisation);
  EXPECT_EQ(a.preemptions, b.preemptions);
  EXPECT_EQ(a.failures, b.failures);
  EXPECT_EQ(a.reclaims, b.reclaims);
  EXPECT_EQ(a.gpu_hours_used, b.gpu_hours_used);
  EXPECT_EQ(a.gpu_hours_lost, b.gpu_hours_lost);
  EXPECT_EQ(a.gpu_hours_overhead, b.gpu_hours_overhead);
  EXPECT_EQ(a.job_cost_usd, b.job_cost_usd);
  ASSERT_EQ(a.teams.size(), b.teams.size());
  for (const auto& [team, t] : a.teams) {
    const TeamShare& u = b.teams.at(team);
    EXPECT_EQ(t.jobs, u.jobs) << team;
    EXPECT_EQ(t.gpu_hours, u.gpu_hours) << team;
    EXPECT_EQ(t.share, u.share) << team;
    EXPECT_EQ(t.avg_jct_s, u.avg_jct_s) << team;
    EXPECT_EQ(t.cost_usd, u.cost_usd) << team;
  }
  EXPECT_EQ(SummaryToJson(a), SummaryToJson(b));
  EXPECT_EQ(FormatSummaryText(a), FormatSummaryText(b));
  EXPECT_EQ(kept->series.size(), streamed->series.size());
  EXPECT_EQ(kept->end, streamed->end);
}

TEST_F(SimulatorTest, StreamedSummaryEqualsTheKeptRecordsSummary) {
  // Given a small trace of three teams under LAS on 8 GPUs, with preemptions, a job larger than
  // the cluster (never runs), jobs listed out of submit order and waits of fractions of a second,
  // expect a run that keeps no per-job records to summarise exactly as one that keeps them.
  std::vector<TraceJob> jobs;
  for (int i = 0; i < 60; ++i) {
    TraceJob j = Job("j" + std::to_string(i), (i * 37) % 500, 1 + i % 4, 30 + (i * 131) % 2000);
    j.spec.team = i % 3 == 0 ? "a" : i % 3 == 1 ? "b" : "c";
    j.work = j.work + Duration::Millis(i * 7);
    jobs.push_back(j);
  }
  jobs.push_back(Job("huge", 100, 64, 60));
  SimOptions o;
  o.policy = "las";
  o.restart_overhead = Duration::Seconds(3);
  ExpectStreamedSummaryEqualsKept(jobs, HomogeneousCluster(8, "A100", 8, 2'000'000), o);
  o.policy = "fifo";
  ExpectStreamedSummaryEqualsKept(jobs, HomogeneousCluster(8, "A100", 8, 2'000'000), o);
}

TEST_F(SimulatorTest, StreamedSummaryEqualsKeptOnPhillyWithFailuresAndAutoscaling) {
  // Given the first 1,500 Philly jobs on an autoscaled pool with node failures, spot reclaims and
  // LAS preemptions, expect the same summary with and without per-job records.
  auto trace = PhillySlice();
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  const ClusterSpec pool = PhillySlicePool();
  const SimOptions o = PhillySliceOptions();
  ExpectStreamedSummaryEqualsKept(trace->jobs, pool, o);
}

// Runs `jobs` twice, with stale finishes moved out of the event queue as early as possible and
// never, and expects the same records, series and summary, and that the first run moved some.
void ExpectSameWithStaleFinishesMovedOut(const std::vector<TraceJob>& jobs, const ClusterSpec& cluster,
                                         SimOptions o) {
  o.stale_events_min = 1;
  auto moved = Simulate(jobs, cluster, o, Catalog());
  o.stale_events_min = std::numeric_limits<int64_t>::max();
  auto kept = Simulate(jobs, cluster, o, Catalog());
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_GT(moved->stale_finishes_moved, 0);
  EXPECT_EQ(kept->stale_finishes_moved, 0);
  ASSERT_EQ(moved->jobs.size(), kept->jobs.size());
  std::string dir = ::testing::TempDir();
  ASSERT_TRUE(WriteJobsCsv(dir + "/moved.csv", *moved).ok());
  ASSERT_TRUE(WriteJobsCsv(dir + "/kept.csv", *kept).ok());
  EXPECT_EQ(ReadAll(dir + "/moved.csv"), ReadAll(dir + "/kept.csv"));
  ASSERT_TRUE(WriteSeriesCsv(dir + "/moved-series.csv", *moved).ok());
  ASSERT_TRUE(WriteSeriesCsv(dir + "/kept-series.csv", *kept).ok());
  EXPECT_EQ(ReadAll(dir + "/moved-series.csv"), ReadAll(dir + "/kept-series.csv"));
  EXPECT_EQ(moved->busy_gpu_ms, kept->busy_gpu_ms);
  EXPECT_EQ(moved->online_gpu_ms, kept->online_gpu_ms);
  for (int m = 0; m < 3; ++m) {
    EXPECT_EQ(moved->busy_gpu_ms_by_market[m], kept->busy_gpu_ms_by_market[m]);
    EXPECT_EQ(moved->paid_gpu_ms_by_market[m], kept->paid_gpu_ms_by_market[m]);
  }
  EXPECT_EQ(SummaryToJson(Summarize(*moved)), SummaryToJson(Summarize(*kept)));
}

TEST_F(SimulatorTest, StaleFinishesLeavingTheEventQueueChangeNothing) {
  // Given LAS runs with many preemptions (so many finishes of stopped runs wait in the event
  // queue), expect a run that takes them out of the queue as bare instants to give the same
  // per-job records, series, GPU-time integrals and summary as one that leaves them in: GPU
  // slices (whose held GPU-time is rounded per interval between instants, so a lost instant
  // would show), and a slice of Philly on an autoscaled pool with failures and spot reclaims.
  std::vector<TraceJob> jobs;
  for (int i = 0; i < 300; ++i) {
    TraceJob j = Job("j" + std::to_string(i), (i * 53) % 3000, 1 + i % 3, 40 + (i * 211) % 5000);
    if (i % 4 == 0) {
      j.spec.gpus_per_node = 1;
      j.spec.gpu_milli = 250 + (i % 3) * 125;
    }
    j.work = j.work + Duration::Millis(i * 13);
    jobs.push_back(j);
  }
  SimOptions o;
  o.policy = "las";
  o.policy_options = {{"thresholds", "60,600"}};
  ExpectSameWithStaleFinishesMovedOut(jobs, HomogeneousCluster(8, "A100", 4, 2'000'000), o);

  auto trace = PhillySlice();
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ExpectSameWithStaleFinishesMovedOut(trace->jobs, PhillySlicePool(), PhillySliceOptions());
}

TEST_F(SimulatorTest, RecordsAreNotKeptWhenNotAskedFor) {
  // Given 3 jobs run with keep_jobs false, expect no per-job records, a tally of all 3, and the
  // summary counting them.
  SimOptions o;
  o.keep_jobs = false;
  auto r = Run({Job("a", 0, 8, 60), Job("b", 0, 8, 60), Job("c", 10, 1, 5)}, HomogeneousCluster(8, "A100"), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->jobs.empty());
  EXPECT_EQ(r->tally.added, 3);
  EXPECT_EQ(r->tally.jct_ms, (std::vector<int64_t>{60'000, 120'000, 115'000}));
  Summary s = Summarize(*r);
  EXPECT_EQ(s.jobs, 3);
  EXPECT_EQ(s.finished, 3);
  EXPECT_DOUBLE_EQ(s.jct_s.max, 120.0);
}

TEST_F(SimulatorTest, JobsListedOutOfSubmitOrderArriveInSubmitOrder) {
  // Given b (submitted at 0) listed after a (submitted at 10) on a 1-GPU cluster, expect b to run
  // first and a to wait for it, whichever order the list has.
  auto r = Run({Job("a", 10, 1, 100), Job("b", 0, 1, 100)}, HomogeneousCluster(1, "A100", 1), SimOptions{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(StartS(r->jobs[1]), 0);
  EXPECT_EQ(StartS(r->jobs[0]), 100);
  EXPECT_EQ(r->jobs[0].queued, Duration::Seconds(90));
}

}  // namespace
}  // namespace gpufleet::sim
