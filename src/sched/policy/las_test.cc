#include "sched/policy/las.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <tuple>
#include <vector>

#include "testing/harness.h"

namespace gpufleet::sched {
namespace {

using testing::MakeJob;
using testing::MakeNode;
using testing::SchedulerHarness;

Time At(int64_t ms) { return Time::FromMillis(ms); }
Time Sec(int64_t s) { return Time::FromSeconds(s); }
// Optional times as milliseconds, so that failures print numbers.
std::optional<int64_t> Millis(std::optional<Time> t) {
  if (!t) return std::nullopt;
  return t->millis();
}

bool AnyContains(const std::vector<std::string>& lines, const std::string& part) {
  for (const auto& l : lines) {
    if (l.find(part) != std::string::npos) return true;
  }
  return false;
}

class LasTest : public ::testing::Test {
 protected:
  static JobView Running(const model::JobSpec& spec, Time started, int64_t service_gpu_s = 0, int64_t seq = 0) {
    JobView v;
    v.id = JobId(seq);
    v.spec = &spec;
    v.seq = seq;
    v.phase = JobPhase::kRunning;
    v.started_at = started;
    v.las_service_gpu_ms = service_gpu_s * 1000;
    v.attained_gpu_ms = service_gpu_s * 1000;
    return v;
  }
  static JobView Pending(const model::JobSpec& spec, int64_t service_gpu_s = 0, int64_t seq = 0) {
    JobView v;
    v.id = JobId(seq);
    v.spec = &spec;
    v.seq = seq;
    v.las_service_gpu_ms = service_gpu_s * 1000;
    v.attained_gpu_ms = service_gpu_s * 1000;
    return v;
  }
  static QueueContext Ctx(Time now) { return QueueContext{now, nullptr, 0}; }

  LasPolicy las_;  // thresholds 3250, 7200 GPU-s; starve 8
};

TEST_F(LasTest, OneGpuJobChangesQueueExactlyAtEachThreshold) {
  // Given a 1-GPU job running from t=0, expect queue 0 until 3,250 s, queue 1 from exactly
  // 3,250 s, and queue 2 from exactly 7,200 s.
  model::JobSpec spec = MakeJob(1);
  JobView v = Running(spec, Sec(0));
  EXPECT_EQ(las_.QueueOf(v, Sec(0)), 0);
  EXPECT_EQ(las_.QueueOf(v, At(3'249'999)), 0);
  EXPECT_EQ(las_.QueueOf(v, Sec(3250)), 1);
  EXPECT_EQ(las_.QueueOf(v, At(7'199'999)), 1);
  EXPECT_EQ(las_.QueueOf(v, Sec(7200)), 2);
  EXPECT_EQ(las_.QueueOf(v, Sec(1'000'000)), 2);
  EXPECT_EQ(las_.Rank(v, Ctx(Sec(3250))), (RankKey{{1, 0, 0}}));
}

TEST_F(LasTest, ServiceIsGpusTimesTimeSoAWideJobAgesFaster) {
  // Given a 2-GPU job and a half-GPU slice running from t=0, expect the 2-GPU job demoted at
  // 1,625 s (half the time) and the slice at 6,500 s (twice the time).
  model::JobSpec two = MakeJob(2);
  JobView v2 = Running(two, Sec(0));
  EXPECT_EQ(las_.QueueOf(v2, At(1'624'999)), 0);
  EXPECT_EQ(las_.QueueOf(v2, Sec(1625)), 1);
  EXPECT_EQ(las_.QueueOf(v2, Sec(3600)), 2);
  EXPECT_EQ(Millis(las_.NextRankChange(v2, Ctx(Sec(0)))), 1'625'000);
  model::JobSpec slice = MakeJob(1);
  slice.gpu_milli = 500;
  JobView vs = Running(slice, Sec(0));
  EXPECT_EQ(las_.QueueOf(vs, At(6'499'999)), 0);
  EXPECT_EQ(las_.QueueOf(vs, Sec(6500)), 1);
  EXPECT_EQ(Millis(las_.NextRankChange(vs, Ctx(Sec(0)))), 6'500'000);
}

TEST_F(LasTest, NextRankChangeCountsServiceFromEarlierRuns) {
  // Given a 1-GPU job that attained 3,000 GPU-s in earlier runs and restarted at 10,000 s,
  // expect its demotion at 10,250 s; with 5,000 GPU-s attained, at 12,200 s (the next
  // threshold); past every threshold, never.
  model::JobSpec spec = MakeJob(1);
  EXPECT_EQ(Millis(las_.NextRankChange(Running(spec, Sec(10'000), 3000), Ctx(Sec(10'000)))), 10'250'000);
  EXPECT_EQ(Millis(las_.NextRankChange(Running(spec, Sec(10'000), 5000), Ctx(Sec(10'000)))), 12'200'000);
  EXPECT_EQ(Millis(las_.NextRankChange(Running(spec, Sec(10'000), 7200), Ctx(Sec(10'000)))), std::nullopt);
  EXPECT_EQ(las_.QueueOf(Running(spec, Sec(10'000), 5000), Sec(10'000)), 1);
}

TEST_F(LasTest, NextRankChangeOfARunningJobIsAlwaysInTheFuture) {
  // Given a 1-GPU job running from t=0 and asked at 3,250 s (when it has just reached the first
  // threshold), expect the next change at the second threshold, 7,200 s, not 3,250 s again.
  model::JobSpec spec = MakeJob(1);
  JobView v = Running(spec, Sec(0));
  EXPECT_EQ(Millis(las_.NextRankChange(v, Ctx(Sec(3250)))), 7'200'000);
  EXPECT_EQ(Millis(las_.NextRankChange(v, Ctx(Sec(5000)))), 7'200'000);
  EXPECT_EQ(Millis(las_.NextRankChange(v, Ctx(Sec(7200)))), std::nullopt);
}

TEST_F(LasTest, LowerQueueFirstThenFifoWithinAQueue) {
  // Given pending jobs with 0 GPU-s (submitted at 300 s and 200 s) and one with 4,000 GPU-s
  // (submitted at 0 s), expect 200 s, then 300 s, then the one with more service.
  model::JobSpec old_long = MakeJob(1, 0), a = MakeJob(1, 300), b = MakeJob(1, 200);
  QueueContext ctx = Ctx(Sec(1000));
  RankKey r_long = las_.Rank(Pending(old_long, 4000, 0), ctx);
  RankKey r_a = las_.Rank(Pending(a, 0, 1), ctx);
  RankKey r_b = las_.Rank(Pending(b, 0, 2), ctx);
  EXPECT_LT(r_b, r_a);
  EXPECT_LT(r_a, r_long);
  EXPECT_EQ(r_b, (RankKey{{0, 200'000, 0}}));
  EXPECT_EQ(r_long, (RankKey{{1, 0, 0}}));
}

TEST_F(LasTest, MayPreemptOnlyJobsInAStrictlyLowerPriorityQueue) {
  // Given a waiting job with no service, expect it may preempt a running job in queue 1 but
  // not one in queue 0; a waiting job in queue 1 may not preempt a queue-1 job.
  model::JobSpec spec = MakeJob(1);
  QueueContext ctx = Ctx(Sec(4000));
  JobView fresh = Pending(spec, 0, 5);
  JobView demoted = Running(spec, Sec(0), 0, 1);  // 4,000 GPU-s by now: queue 1
  JobView young = Running(spec, Sec(3000), 0, 2);  // 1,000 GPU-s: queue 0
  EXPECT_TRUE(las_.MayPreempt(fresh, demoted, ctx));
  EXPECT_FALSE(las_.MayPreempt(fresh, young, ctx));
  JobView q1 = Pending(spec, 4000, 6);
  EXPECT_FALSE(las_.MayPreempt(q1, demoted, ctx));
  EXPECT_EQ(las_.PreemptionReason(), PreemptReason::kService);
  EXPECT_EQ(las_.DefaultBackfill(), BackfillMode::kGreedy);
}

TEST_F(LasTest, MayPreemptIsExactlyTheComparisonOfQueueClasses) {
  // Given waiting and running jobs in every queue (a starving one among the waiting), expect
  // MayPreempt to say exactly whether the waiting job's rank class is before the running job's,
  // as PreemptsByClass promises (a pass relies on it to skip repeated searches).
  ASSERT_TRUE(las_.PreemptsByClass());
  model::JobSpec one = MakeJob(1), eight = MakeJob(8);
  QueueContext ctx = Ctx(Sec(10'000));
  std::vector<JobView> waiting = {Pending(one, 0, 1), Pending(eight, 4000, 2), Pending(one, 8000, 3)};
  JobView starving = Pending(one, 9000, 4);
  starving.last_run = Duration::Seconds(100);
  starving.queued_since = Sec(1000);  // waited 9,000 s > 8 x 100 s: promoted to queue 0
  waiting.push_back(starving);
  std::vector<JobView> running = {Running(one, Sec(9000), 0, 5), Running(eight, Sec(9900), 3000, 6),
                                  Running(one, Sec(0), 0, 7), Running(eight, Sec(9990), 0, 8)};
  for (const JobView& w : waiting) {
    for (const JobView& r : running) {
      const bool by_class = las_.Rank(w, ctx).k[0] < las_.Rank(r, ctx).k[0];
      EXPECT_EQ(las_.MayPreempt(w, r, ctx), by_class) << "waiting " << w.seq << ", running " << r.seq;
    }
  }
}

TEST_F(LasTest, StarvingJobIsPromotedAfterStarveTimesItsLastRun) {
  // Given a job in queue 2 that last ran 100 s and has waited since 1,000 s, expect it promoted
  // to queue 0 at exactly 1,800 s (8 x 100 s of waiting), with explain words saying so and
  // its service to be reset when it starts; not a millisecond before.
  model::JobSpec spec = MakeJob(1);
  JobView v = Pending(spec, 10'000);
  v.last_run = Duration::Seconds(100);
  v.queued_since = Sec(1000);
  EXPECT_EQ(las_.QueueOf(v, At(1'799'999)), 2);
  EXPECT_FALSE(las_.ResetsServiceOnStart(v, Ctx(At(1'799'999))));
  EXPECT_EQ(Millis(las_.NextRankChange(v, Ctx(Sec(1000)))), 1'800'000);
  EXPECT_EQ(las_.DescribeRank(v, Ctx(Sec(1799))), "queue 3 of 3 (10000 GPU-seconds attained)");

  EXPECT_EQ(las_.QueueOf(v, Sec(1800)), 0);
  EXPECT_EQ(las_.Rank(v, Ctx(Sec(1800))).k[0], 0);
  EXPECT_TRUE(las_.ResetsServiceOnStart(v, Ctx(Sec(1800))));
  EXPECT_EQ(Millis(las_.NextRankChange(v, Ctx(Sec(1800)))), std::nullopt);
  EXPECT_EQ(las_.DescribeRank(v, Ctx(Sec(1800))),
            "queue 1 of 3 (10000 GPU-seconds attained); promoted to the top queue after starving");
}

TEST_F(LasTest, JobsThatNeverRanOrAreRunningDoNotStarve) {
  // Given a pending job that never ran and waited very long, and a running job, expect neither
  // promoted, no starvation timer, and no service reset.
  model::JobSpec spec = MakeJob(1);
  JobView never = Pending(spec, 0);
  never.queued_since = Sec(0);
  EXPECT_EQ(Millis(las_.NextRankChange(never, Ctx(Sec(0)))), std::nullopt);
  EXPECT_FALSE(las_.ResetsServiceOnStart(never, Ctx(Sec(1'000'000))));
  JobView running = Running(spec, Sec(0), 8000);
  running.last_run = Duration::Seconds(1);
  running.queued_since = Sec(0);
  EXPECT_EQ(las_.QueueOf(running, Sec(100)), 2);
  EXPECT_FALSE(las_.ResetsServiceOnStart(running, Ctx(Sec(100))));
}

TEST_F(LasTest, StarveZeroDisablesPromotion) {
  // Given starve=0, expect a long-waiting job to stay in its queue with no timer.
  LasPolicy no_starve(LasOptions{{3250, 7200}, 0});
  model::JobSpec spec = MakeJob(1);
  JobView v = Pending(spec, 10'000);
  v.last_run = Duration::Seconds(1);
  v.queued_since = Sec(0);
  EXPECT_EQ(no_starve.QueueOf(v, Sec(1'000'000)), 2);
  EXPECT_EQ(Millis(no_starve.NextRankChange(v, Ctx(Sec(0)))), std::nullopt);
}

TEST_F(LasTest, CustomThresholdsSetTheQueues) {
  // Given thresholds 100 and 200 GPU-s, expect three queues split there.
  LasPolicy custom(LasOptions{{100, 200}, 8});
  model::JobSpec spec = MakeJob(1);
  JobView v = Running(spec, Sec(0));
  EXPECT_EQ(custom.QueueOf(v, At(99'999)), 0);
  EXPECT_EQ(custom.QueueOf(v, Sec(100)), 1);
  EXPECT_EQ(custom.QueueOf(v, Sec(200)), 2);
  EXPECT_EQ(Millis(custom.NextRankChange(v, Ctx(Sec(0)))), 100'000);
  LasPolicy four(LasOptions{{10, 20, 30}, 8});
  EXPECT_EQ(four.QueueOf(v, Sec(30)), 3);
  EXPECT_EQ(four.DescribeRank(v, Ctx(Sec(25))), "queue 3 of 4 (25 GPU-seconds attained)");
}

TEST_F(LasTest, SchedulerWakesAtTheFirstThreshold) {
  // Given the las policy with default thresholds, expect the scheduler to ask for a wakeup at
  // 3,250 s for a 1-GPU job started at 0, and at 1,625 s once a 2-GPU job also runs.
  SchedulerHarness h("las");
  h.AddNode(MakeNode("n0", "A100", 8));
  EXPECT_EQ(Millis(h.sched().NextWakeup()), std::nullopt);
  h.Submit(MakeJob(1));
  EXPECT_EQ(Millis(h.sched().NextWakeup()), 3'250'000);
  h.Submit(MakeJob(2));
  EXPECT_EQ(Millis(h.sched().NextWakeup()), 1'625'000);
}

TEST_F(LasTest, ThresholdsOptionReachesTheScheduler) {
  // Given thresholds=100,200, expect the first wakeup for a 1-GPU job at 100 s.
  SchedulerHarness h("las", {"thresholds=100,200"});
  h.AddNode(MakeNode("n0", "A100", 8));
  h.clock().Set(Sec(50));
  h.Submit(MakeJob(1));
  EXPECT_EQ(Millis(h.sched().NextWakeup()), 150'000);
}

TEST_F(LasTest, EntryOrderRanksAQueueByWhenJobsEnteredIt) {
  // Given two waiting jobs in queue 2, one submitted at 0 s that entered the queue at 500 s and
  // one submitted at 100 s that entered it at 200 s, expect submit order by default and entry
  // order (the later-submitted job first) with order=entry; the queue still comes first.
  model::JobSpec early = MakeJob(1, 0), later = MakeJob(1, 100), fresh = MakeJob(1, 900);
  JobView e = Pending(early, 8000, 0), l = Pending(later, 8000, 1), f = Pending(fresh, 0, 2);
  e.rank_class_since = Sec(500);
  l.rank_class_since = Sec(200);
  f.rank_class_since = Sec(900);
  LasOptions o;
  o.order = LasOrder::kEntry;
  LasPolicy entry(o);
  EXPECT_LT(las_.Rank(e, Ctx(Sec(1000))), las_.Rank(l, Ctx(Sec(1000))));
  EXPECT_LT(entry.Rank(l, Ctx(Sec(1000))), entry.Rank(e, Ctx(Sec(1000))));
  EXPECT_LT(entry.Rank(f, Ctx(Sec(1000))), entry.Rank(l, Ctx(Sec(1000))));
}

TEST_F(LasTest, SchedulerRecordsWhenAJobEnteredItsQueue) {
  // Given thresholds=1,1000 and a 1-GPU job A running from 0 s, expect A to enter queue 2 at
  // exactly 1 s (its demotion) and a job submitted at 3 s to have entered queue 1 at 3 s.
  SchedulerHarness h("las", {"thresholds=1,1000", "order=entry"});
  h.AddNode(MakeNode("n0", "A100", 1));
  JobId a = h.Submit(MakeJob(1));
  EXPECT_EQ(h.sched().ViewOf(a)->rank_class_since, Sec(0));
  h.AdvanceTo(1);
  EXPECT_EQ(h.sched().ViewOf(a)->rank_class_since, Sec(1));
  h.clock().Set(Sec(3));
  JobId b = h.Submit(MakeJob(1));
  EXPECT_EQ(h.sched().ViewOf(b)->rank_class_since, Sec(3));
}

TEST_F(LasTest, RunningJobIsDemotedAtTheThresholdAndPreemptedByAWaitingJob) {
  // Given a full 1-GPU node running job A from t=0 and job B waiting since 3,000 s (both in
  // queue 0, A first), expect nothing before 3,250 s, and at exactly 3,250 s A demoted and
  // preempted for B with reason attained-service; B then runs and A waits in queue 1.
  SchedulerHarness h("las");
  h.AddNode(MakeNode("n0", "A100", 1));
  JobId a = h.Submit(MakeJob(1));
  h.clock().Set(Sec(3000));
  JobId b = h.Submit(MakeJob(1));
  ASSERT_EQ(h.Phase(b), JobPhase::kPending);
  h.AdvanceTo(3249);
  EXPECT_TRUE(h.sink().Preempted().empty());
  h.AdvanceTo(3250);
  ASSERT_EQ(h.sink().Preempted(), (std::vector<int64_t>{a.value()}));
  EXPECT_EQ(h.sink().actions.back().reason, PreemptReason::kService);
  h.StopAllPreempted();
  EXPECT_EQ(h.Phase(b), JobPhase::kRunning);
  EXPECT_EQ(h.Phase(a), JobPhase::kPending);
  EXPECT_EQ(h.sched().ViewOf(a)->las_service_gpu_ms, 3'250'000);
  EXPECT_EQ(las_.QueueOf(*h.sched().ViewOf(a), Sec(3250)), 1);
  EXPECT_EQ(Millis(h.sched().NextWakeup()), 6'500'000);  // B's own demotion
}

TEST_F(LasTest, NewJobPreemptsAJobInALowerQueueWhenTheClusterIsFull) {
  // Given thresholds=1,2 and a 1-GPU job A that failed after 5 s and restarted (5 GPU-s: the
  // last queue), expect a new job B to preempt A at once with reason attained-service, and to
  // run after A has stopped.
  SchedulerHarness h("las", {"thresholds=1,2"});
  h.AddNode(MakeNode("n0", "A100", 1));
  JobId a = h.Submit(MakeJob(1));
  h.clock().Set(Sec(5));
  ASSERT_TRUE(h.sched().Handle(JobFailed{a, true}).ok());
  ASSERT_EQ(h.Phase(a), JobPhase::kRunning);
  EXPECT_EQ(h.sched().ViewOf(a)->las_service_gpu_ms, 5000);
  EXPECT_EQ(Millis(h.sched().NextWakeup()), std::nullopt);  // past every threshold
  h.clock().Set(Sec(7));
  JobId b = h.Submit(MakeJob(1));
  ASSERT_EQ(h.sink().Preempted(), (std::vector<int64_t>{a.value()}));
  EXPECT_EQ(h.sink().actions.back().reason, PreemptReason::kService);
  h.StopAllPreempted();
  EXPECT_EQ(h.Phase(b), JobPhase::kRunning);
  EXPECT_EQ(h.Phase(a), JobPhase::kPending);
  EXPECT_EQ(h.sched().ViewOf(a)->las_service_gpu_ms, 7000);
  EXPECT_EQ(h.sched().ViewOf(a)->preemptions, 1);
}

TEST_F(LasTest, WaitingJobsInOneQueueAreServedInSubmitOrder) {
  // Given thresholds=1,2, a full 1-GPU node, job A requeued with 5 GPU-s (last queue) and three
  // fresh jobs handed over out of submit order, expect the fresh jobs by submit time, then A
  // although it was submitted first, and no preemption among jobs of one queue.
  SchedulerHarness h("las", {"thresholds=1,2"});
  h.AddNode(MakeNode("n0", "A100", 1));
  JobId a = h.Submit(MakeJob(1));
  JobId w = h.Submit(MakeJob(1));
  h.clock().Set(Sec(5));
  ASSERT_TRUE(h.sched().Handle(JobFailed{a, true}).ok());
  ASSERT_EQ(h.Phase(w), JobPhase::kRunning);  // W (queue 0) ranks before A (queue 2)
  ASSERT_EQ(h.Phase(a), JobPhase::kPending);
  JobId x = h.Submit(MakeJob(1, 30));
  JobId y = h.Submit(MakeJob(1, 10));
  JobId z = h.Submit(MakeJob(1, 20));
  EXPECT_EQ(h.sched().QueueOrder(), (std::vector<JobId>{y, z, x, a}));
  EXPECT_TRUE(h.sink().Preempted().empty());
  h.Finish(w);
  EXPECT_EQ(h.Phase(y), JobPhase::kRunning);
}

TEST_F(LasTest, StarvingJobIsPromotedAheadOfFreshJobsAndItsServiceRestarts) {
  // Given thresholds=1,2, job A that ran 5 s (5 GPU-s: last queue) before its only node went
  // down, and a fresh job C waiting since 10 s, expect C ahead of A until A has waited 8 x 5 s
  // = 40 s (t=45); then A is promoted to the top queue (explain says so), starts first when
  // the node returns, and its LAS service restarts from zero while its attained service stays.
  SchedulerHarness h("las", {"thresholds=1,2"});
  model::NodeSpec spec = MakeNode("n0", "A100", 1);
  NodeId n0 = h.AddNode(spec);
  JobId a = h.Submit(MakeJob(1));
  h.clock().Set(Sec(5));
  h.NodeDown(n0);
  h.Stopped(a);
  ASSERT_EQ(h.Phase(a), JobPhase::kPending);
  EXPECT_EQ(Millis(h.sched().NextWakeup()), 45'000);
  h.clock().Set(Sec(10));
  JobId c = h.Submit(MakeJob(1));
  h.AdvanceTo(44);
  EXPECT_EQ(h.sched().QueueOrder(), (std::vector<JobId>{c, a}));
  EXPECT_FALSE(AnyContains(h.sched().Explain(a).reasons, "promoted"));
  h.AdvanceTo(45);
  EXPECT_EQ(h.sched().QueueOrder(), (std::vector<JobId>{a, c}));
  EXPECT_TRUE(AnyContains(h.sched().Explain(a).reasons, "promoted to the top queue after starving"));
  ASSERT_TRUE(h.sched().Handle(NodeUp{n0, spec}).ok());
  EXPECT_EQ(h.Phase(a), JobPhase::kRunning);
  EXPECT_EQ(h.Phase(c), JobPhase::kPending);
  EXPECT_EQ(h.sched().ViewOf(a)->las_service_gpu_ms, 0);
  EXPECT_EQ(h.sched().ViewOf(a)->attained_gpu_ms, 5000);
}

std::vector<int64_t> Sorted(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// Submits job `id` now as a restarted scheduler would hand it back: with `service_gpu_s` of LAS
// service from earlier runs, which puts it in LAS queue `queue`.
JobId SubmitWithService(SchedulerHarness& h, int64_t id, model::JobSpec spec, int64_t service_gpu_s, int64_t queue) {
  model::JobMemory m;
  m.las_service_gpu_ms = service_gpu_s * 1000;
  m.attained_gpu_ms = m.las_service_gpu_ms;
  m.rank_class = queue;
  m.queued_since = h.clock().Now();
  m.rank_class_since = h.clock().Now();
  spec.submit = h.clock().Now();
  Status s = h.sched().Handle(JobSubmitted{JobId(id), spec, 0, Duration::Zero(), m});
  EXPECT_TRUE(s.ok()) << s.ToString();
  return JobId(id);
}

TEST_F(LasTest, AFailedSearchDoesNotHoldForAJobOfAnEarlierQueue) {
  // Given thresholds=10,20 and a 2-GPU node running C (queue 3) and A (queue 2), and a 2-GPU job
  // W1 of queue 2 that finds no room (it may stop C only), expect a fresh 2-GPU job W0 (queue 1),
  // which may stop both, to preempt C and A at once although a job of its shape just failed.
  SchedulerHarness h("las", {"thresholds=10,20"});
  h.AddNode(MakeNode("n0", "A100", 2));
  JobId c = SubmitWithService(h, 100, MakeJob(1), 20, 2);
  JobId a = SubmitWithService(h, 101, MakeJob(1), 10, 1);
  ASSERT_EQ(h.Phase(c), JobPhase::kRunning);
  ASSERT_EQ(h.Phase(a), JobPhase::kRunning);
  h.clock().Set(Sec(1));
  SubmitWithService(h, 102, MakeJob(2), 10, 1);
  EXPECT_TRUE(h.sink().Preempted().empty());
  h.clock().Set(Sec(2));
  JobId w0 = h.Submit(MakeJob(2));
  EXPECT_EQ(Sorted(h.sink().Preempted()), Sorted({a.value(), c.value()}));
  h.StopAllPreempted();
  EXPECT_EQ(h.Phase(w0), JobPhase::kRunning);
}

TEST_F(LasTest, AJobNeedingPartOfANodePreemptsOnlyWhereItsVictimsLeaveItRoom) {
  // Given thresholds=10,20 and two 4-GPU nodes: one runs A (2 GPUs, queue 2) and C (2 GPUs,
  // queue 3), the other B (3 GPUs, queue 2) and D (1 GPU, queue 3). A 3-GPU job W of queue 2 may stop C
  // and D only, which leave 2 GPUs on one node and 1 on the other: expect no preemption. A 3-GPU job W0 of
  // queue 1 may stop all of them: expect it to preempt on one node only, and start there.
  SchedulerHarness h("las", {"thresholds=10,20"});
  h.AddNode(MakeNode("n0", "A100", 4));
  h.AddNode(MakeNode("n1", "A100", 4));
  // (B first, then D fills its node; A and C share the other.)
  JobId b = SubmitWithService(h, 102, MakeJob(3), 15, 2);
  JobId d = SubmitWithService(h, 103, MakeJob(1), 25, 3);
  JobId a = SubmitWithService(h, 100, MakeJob(2), 15, 2);
  JobId c = SubmitWithService(h, 101, MakeJob(2), 40, 3);
  for (JobId j : {a, b, c, d}) ASSERT_EQ(h.Phase(j), JobPhase::kRunning) << j.value();
  ASSERT_EQ(h.sched().PlacementOf(b)->parts[0].node, h.sched().PlacementOf(d)->parts[0].node);
  ASSERT_EQ(h.sched().PlacementOf(a)->parts[0].node, h.sched().PlacementOf(c)->parts[0].node);
  h.clock().Set(Sec(1));
  JobId w = SubmitWithService(h, 104, MakeJob(3), 10, 2);
  EXPECT_TRUE(h.sink().Preempted().empty());
  EXPECT_EQ(h.Phase(w), JobPhase::kPending);
  h.clock().Set(Sec(2));
  JobId w0 = h.Submit(MakeJob(3));
  std::vector<int64_t> stopped = Sorted(h.sink().Preempted());
  ASSERT_FALSE(stopped.empty());
  const bool on_n0 = stopped == Sorted({a.value(), c.value()});
  const bool on_n1 = stopped == Sorted({b.value(), d.value()});
  EXPECT_TRUE(on_n0 || on_n1) << "victims on both nodes or too few";
  h.StopAllPreempted();
  EXPECT_EQ(h.Phase(w0), JobPhase::kRunning);
  EXPECT_EQ(h.Phase(w), JobPhase::kPending);
}

TEST_F(LasTest, ADemotionGivesVictimsToTheQueueItCrossed) {
  // Given thresholds=10,20, a 2-GPU node running C (queue 3) and A (queue 2 until its service
  // reaches 20 GPU-s at t=10), and a 2-GPU job W of queue 2 that finds no room at t=1, expect
  // nothing until t=10 and then, on the timer alone, W to preempt both C and A.
  SchedulerHarness h("las", {"thresholds=10,20"});
  h.AddNode(MakeNode("n0", "A100", 2));
  JobId c = SubmitWithService(h, 100, MakeJob(1), 20, 2);
  JobId a = SubmitWithService(h, 101, MakeJob(1), 10, 1);
  h.clock().Set(Sec(1));
  JobId w = SubmitWithService(h, 102, MakeJob(2), 10, 1);
  EXPECT_EQ(Millis(h.sched().NextWakeup()), 10'000);
  h.AdvanceTo(9);
  EXPECT_TRUE(h.sink().Preempted().empty());
  h.AdvanceTo(10);
  EXPECT_EQ(Sorted(h.sink().Preempted()), Sorted({a.value(), c.value()}));
  h.StopAllPreempted();
  EXPECT_EQ(h.Phase(w), JobPhase::kRunning);
}

TEST_F(LasTest, AVictimTooYoungToStopBecomesOneWithTime) {
  // Given thresholds=10,70, min_run=1m and a 1-GPU node running A (queue 2 from t=0, queue 3 at
  // t=60), and a fresh job B at t=1 that may stop A but for its age, expect no preemption before
  // t=60 and, at the timer of t=60 (which gives no victims to B's queue by itself), B to preempt
  // A, now old enough.
  SchedulerHarness h("las", {"thresholds=10,70", "min_run=1m"});
  h.AddNode(MakeNode("n0", "A100", 1));
  JobId a = SubmitWithService(h, 100, MakeJob(1), 10, 1);
  ASSERT_EQ(h.Phase(a), JobPhase::kRunning);
  h.clock().Set(Sec(1));
  JobId b = h.Submit(MakeJob(1));
  EXPECT_EQ(Millis(h.sched().NextWakeup()), 60'000);
  h.AdvanceTo(59);
  EXPECT_TRUE(h.sink().Preempted().empty());
  h.AdvanceTo(60);
  EXPECT_EQ(h.sink().Preempted(), (std::vector<int64_t>{a.value()}));
  h.StopAllPreempted();
  EXPECT_EQ(h.Phase(b), JobPhase::kRunning);
}

TEST_F(LasTest, TimersOfJobsThatLeftNeitherWakeTheSchedulerNorAreDue) {
  // Given eight 1-GPU jobs started 10 s apart on an 8-GPU node (demotions due at 3,250 s,
  // 3,260 s, ...), expect the first three finished out of order to take their timers with
  // them: the next wake-up is the fourth job's, and at 3,300 s exactly the fourth to sixth are
  // due, in the order of their timers, each once.
  SchedulerHarness h("las");
  h.AddNode(MakeNode("n0", "A100", 8));
  std::vector<JobId> ids;
  for (int i = 0; i < 8; ++i) {
    h.clock().Set(Sec(10 * i));
    ids.push_back(h.Submit(MakeJob(1)));
  }
  ASSERT_EQ(Millis(h.sched().NextWakeup()), 3'250'000);
  h.clock().Set(Sec(100));
  h.Finish(ids[0]);
  h.Finish(ids[2]);
  EXPECT_EQ(Millis(h.sched().NextWakeup()), 3'260'000);
  h.Finish(ids[1]);
  EXPECT_EQ(Millis(h.sched().NextWakeup()), 3'280'000);
  std::vector<int64_t> due;
  for (JobId id : h.sched().RerankedAt(Sec(3300))) due.push_back(id.value());
  EXPECT_EQ(due, (std::vector<int64_t>{ids[3].value(), ids[4].value(), ids[5].value()}));
  h.AdvanceTo(3300);
  EXPECT_EQ(las_.QueueOf(*h.sched().ViewOf(ids[5]), Sec(3300)), 1);
  EXPECT_EQ(Millis(h.sched().NextWakeup()), 3'310'000);  // the seventh job's
}

TEST_F(LasTest, TimersLeftAfterRandomFinishesComeDueInTimeOrder) {
  // Given 300 jobs of 1, 2, 4 or 8 GPUs started at random seconds on 300 8-GPU nodes (first
  // demotions due at 3,250 s of service, so at start + 3,250 / GPUs), and three quarters of them
  // finished in random order, expect after each finish the next wake-up to be the earliest timer
  // left, and the jobs due by each of several instants to be the ones left with timers due by
  // then, in (time, job) order.
  SchedulerHarness h("las");
  for (int n = 0; n < 300; ++n) h.AddNode(MakeNode("n" + std::to_string(n), "A100", 8));
  std::mt19937 rng(11);
  struct Left {
    int64_t due_ms;
    JobId id;
  };
  std::vector<Left> left;
  std::map<int64_t, std::pair<int64_t, int64_t>> thresholds;  // job -> instants of its demotions
  int64_t now_s = 0;
  for (int i = 0; i < 300; ++i) {
    now_s += static_cast<int64_t>(rng() % 10);
    h.clock().Set(Sec(now_s));
    const int gpus = 1 << (rng() % 4);
    JobId id = h.Submit(MakeJob(gpus));
    ASSERT_EQ(h.Phase(id), JobPhase::kRunning);
    const int64_t first = now_s * 1000 + (3'250'000 + gpus - 1) / gpus;
    left.push_back({first, id});
    thresholds[id.value()] = {first, now_s * 1000 + (7'200'000 + gpus - 1) / gpus};
  }
  auto earliest = [&]() -> std::optional<int64_t> {
    std::optional<int64_t> t;
    for (const Left& l : left) t = t ? std::min(*t, l.due_ms) : l.due_ms;
    return t;
  };
  ASSERT_EQ(Millis(h.sched().NextWakeup()), earliest());
  std::shuffle(left.begin(), left.end(), rng);
  const size_t finish = left.size() * 3 / 4;
  for (size_t k = 0; k < finish; ++k) {
    h.Finish(left.back().id);
    left.pop_back();
    ASSERT_EQ(Millis(h.sched().NextWakeup()), earliest()) << "after " << k + 1 << " finishes";
  }
  std::sort(left.begin(), left.end(), [](const Left& a, const Left& b) {
    return std::tie(a.due_ms, a.id) < std::tie(b.due_ms, b.id);
  });
  for (int64_t at_s : {1000, 2000, 3000, 6000}) {
    std::vector<int64_t> expected, due;
    for (const Left& l : left) {
      if (l.due_ms <= at_s * 1000) expected.push_back(l.id.value());
    }
    for (JobId id : h.sched().RerankedAt(Sec(at_s))) due.push_back(id.value());
    EXPECT_EQ(due, expected) << "due by " << at_s << " s";
  }
  // Then, as the timers fire every 5 s, each job's demotion timer is followed by the next one:
  // the next wake-up is the earliest threshold still ahead.
  for (int64_t t_s = now_s; t_s <= now_s + 7300; t_s += 5) {
    h.AdvanceTo(t_s);
    std::optional<int64_t> next;
    for (const Left& l : left) {
      const auto [first, second] = thresholds[l.id.value()];
      for (int64_t at : {first, second}) {
        if (at > t_s * 1000) next = next ? std::min(*next, at) : at;
      }
    }
    ASSERT_EQ(Millis(h.sched().NextWakeup()), next) << "at " << t_s << " s";
  }
}

TEST_F(LasTest, ThousandsOfTimersSetAndDroppedLeaveTheNextOneExact) {
  // Given job K running from 0 on a 2-GPU node (its demotion due at 3,250 s) and 3,000 jobs run
  // one after another beside it for 0.4 s each (each start sets a later demotion timer, each
  // finish drops it), expect the next wake-up to stay K's throughout, none once K finishes, and
  // for job J started at 5,000 s wake-ups only for J: at 8,250 s, then at 12,200 s.
  SchedulerHarness h("las");
  h.AddNode(MakeNode("n0", "A100", 2));
  JobId k = h.Submit(MakeJob(1));
  for (int i = 0; i < 3000; ++i) {
    h.clock().Set(Sec(i) + Duration::Millis(100));
    JobId id = h.Submit(MakeJob(1));
    ASSERT_EQ(h.Phase(id), JobPhase::kRunning);
    h.clock().Set(Sec(i) + Duration::Millis(500));
    h.Finish(id);
    ASSERT_EQ(Millis(h.sched().NextWakeup()), 3'250'000) << "after job " << i;
  }
  h.Finish(k);
  EXPECT_EQ(Millis(h.sched().NextWakeup()), std::nullopt);
  EXPECT_TRUE(h.sched().RerankedAt(Sec(4000)).empty());
  h.clock().Set(Sec(5000));
  JobId j = h.Submit(MakeJob(1));
  EXPECT_EQ(Millis(h.sched().NextWakeup()), 8'250'000);
  EXPECT_TRUE(h.sched().RerankedAt(Sec(8249)).empty());
  h.AdvanceTo(8250);
  EXPECT_EQ(las_.QueueOf(*h.sched().ViewOf(j), Sec(8250)), 1);
  EXPECT_EQ(Millis(h.sched().NextWakeup()), 12'200'000);
}

TEST_F(LasTest, WorstRankVictimsAreTheBackOfTheQueue) {
  // Given thresholds=10,20, victims=worst-rank and four 2-GPU jobs A-D started at 0 on an 8-GPU
  // node (each in queue 1 from 5 s), expect a new 4-GPU job at 6 s to stop D and C, the back of
  // queue 1, and then to run.
  SchedulerHarness h("las", {"thresholds=10,20", "victims=worst-rank"});
  h.AddNode(MakeNode("n0", "A100", 8));
  std::vector<JobId> abcd;
  for (int i = 0; i < 4; ++i) abcd.push_back(h.Submit(MakeJob(2)));
  h.AdvanceTo(6);
  JobId w = h.Submit(MakeJob(4));
  EXPECT_EQ(h.sink().Preempted(), (std::vector<int64_t>{abcd[3].value(), abcd[2].value()}));
  h.StopAllPreempted();
  EXPECT_EQ(h.Phase(w), JobPhase::kRunning);
  EXPECT_EQ(h.Phase(abcd[0]), JobPhase::kRunning);
}

// Worst-rank victims as plainly stated: on a copy of the view, release the running jobs a fresh
// job (queue 0) may stop (those of later queues that have run `min_run`), worst ranked first,
// until it fits; then, last released first, take
// each back and leave it taken if the job still fits. What stays released, worst first, is
// what the search must stop (nothing when the job fits as things are, or never does).
std::vector<int64_t> PlainWorstRankVictims(SchedulerHarness& h, const std::vector<JobId>& jobs,
                                           const model::JobSpec& w, Duration min_run = Duration::Zero()) {
  const Scheduler& s = h.sched();
  const QueueContext ctx{h.clock().Now(), nullptr, 0};
  std::vector<std::tuple<RankKey, int64_t, JobId>> order;
  for (JobId id : jobs) {
    if (s.PhaseOf(id) != JobPhase::kRunning) continue;
    const JobView* v = s.ViewOf(id);
    if (ctx.now - v->started_at < min_run) continue;  // too young to stop
    const RankKey r = s.policies().queue->Rank(*v, ctx);
    if (r.k[0] > 0) order.emplace_back(r, v->seq, id);
  }
  std::sort(order.rbegin(), order.rend());
  ClusterView copy = s.view();
  auto fits = [&] { return s.policies().placement->Place(w, copy, {}).kind == PlaceResult::Kind::kPlaced; };
  if (fits()) return {};
  std::vector<JobId> chosen;
  for (const auto& [rank, seq, id] : order) {
    copy.Release(*s.PlacementOf(id));
    chosen.push_back(id);
    if (fits()) break;
  }
  if (!fits()) return {};
  for (size_t i = chosen.size(); i-- > 0;) {
    copy.Reacquire(*s.PlacementOf(chosen[i]));
    if (fits()) {
      chosen.erase(chosen.begin() + static_cast<long>(i));
    } else {
      copy.Release(*s.PlacementOf(chosen[i]));
    }
  }
  std::vector<int64_t> out;
  for (JobId id : chosen) out.push_back(id.value());
  return out;
}

TEST_F(LasTest, WorstRankVictimsAreThoseReleasingWorstFirstAndGivingBackWouldStop) {
  // Given random histories on 8-GPU nodes (and one 4-GPU node) of jobs of half a GPU to 8 GPUs
  // and 2-node gangs, with random finishes, under victims=worst-rank (every other history with
  // min_run=60s), expect each fresh job that
  // arrives to an empty queue to stop exactly the jobs PlainWorstRankVictims names, in its order:
  // whole-node jobs (read from the nodes' holders) and jobs of part of a node (the walk) alike.
  int searched = 0, whole_node_searches = 0;
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    const Duration min_run = seed % 2 == 0 ? Duration::Seconds(60) : Duration::Zero();
    std::vector<std::string> options = {"thresholds=200,800,3200", "victims=worst-rank"};
    if (min_run > Duration::Zero()) options.push_back("min_run=60s");
    SchedulerHarness h("las", options);
    for (int i = 0; i < 5; ++i) h.AddNode(MakeNode("n" + std::to_string(i), "A100", 8));
    h.AddNode(MakeNode("small", "A100", 4));
    std::mt19937 rng(seed);
    std::vector<JobId> jobs;
    int64_t t = 0;
    for (int step = 0; step < 120; ++step) {
      t += static_cast<int64_t>(rng() % 90);
      h.AdvanceTo(t);
      if (rng() % 4 == 0) {
        std::vector<JobId> running;
        for (JobId id : jobs) {
          if (h.sched().PhaseOf(id) == JobPhase::kRunning) running.push_back(id);
        }
        if (!running.empty()) h.Finish(running[rng() % running.size()]);
        h.StopAllPreempted();
        continue;
      }
      static constexpr int kWidths[] = {0, 1, 1, 2, 2, 4, 8, 8, 16};  // 0: half a GPU
      const int width = kWidths[rng() % 9];
      model::JobSpec spec = MakeJob(width == 16 ? 8 : std::max(width, 1));
      if (width == 16) spec.nodes = 2;
      if (width == 0) spec.gpu_milli = 500;
      spec.submit = h.clock().Now();
      const bool alone = h.sched().pending_count() == 0 && h.sched().stopping_count() == 0;
      const std::vector<int64_t> expected =
          alone ? PlainWorstRankVictims(h, jobs, spec, min_run) : std::vector<int64_t>{};
      const size_t before = h.sink().Preempted().size();
      jobs.push_back(h.Submit(spec));
      if (alone) {
        const std::vector<int64_t> all = h.sink().Preempted();
        const std::vector<int64_t> got(all.begin() + static_cast<long>(before), all.end());
        EXPECT_EQ(got, expected) << "seed " << seed << ", step " << step << ", " << spec.nodes << " x " << width;
        if (!expected.empty()) {
          ++searched;
          if (width >= 8) ++whole_node_searches;
        }
      }
      h.StopAllPreempted();
    }
  }
  // The histories reach enough searches of both kinds to mean something.
  EXPECT_GT(searched, 180);
  EXPECT_GT(whole_node_searches, 140);
}

// Submits `spec` at second `at` with LAS queue 2's service (thresholds 10,20), running if it fits.
JobId RunInQueue2(SchedulerHarness& h, int64_t id, model::JobSpec spec, int64_t at) {
  h.clock().Set(Sec(at));
  JobId j = SubmitWithService(h, id, std::move(spec), 20, 2);
  EXPECT_EQ(h.Phase(j), JobPhase::kRunning) << "job " << id;
  return j;
}

// Two 8-GPU nodes, each holding half of a gang G (4 GPUs) and a 4-GPU job, A on one and B on the
// other, all in queue 2 and ranked G, A, B; the clock then at 3 s.
struct HalfGangNodes {
  JobId g, a, b;
};
HalfGangNodes RunHalfGangNodes(SchedulerHarness& h) {
  h.AddNode(MakeNode("n0", "A100", 8));
  h.AddNode(MakeNode("n1", "A100", 8));
  model::JobSpec gang = MakeJob(4);
  gang.nodes = 2;
  HalfGangNodes run{RunInQueue2(h, 100, gang, 0), RunInQueue2(h, 101, MakeJob(4), 1),
                    RunInQueue2(h, 102, MakeJob(4), 2)};
  h.clock().Set(Sec(3));
  return run;
}

TEST_F(LasTest, AGangThatIsTheBestHolderOfTwoNodesReadiesBothForAWholeNodeJob) {
  // Given thresholds=10,20, victims=worst-rank and two 8-GPU nodes, each holding half of a gang G
  // and a 4-GPU job (A, then B, both ranked behind G in queue 2), expect a fresh 8-GPU job to
  // stop what releasing B, A and G and giving back what is not needed leaves: G and the job on
  // the node it takes. (Releasing G readies both nodes at once.)
  SchedulerHarness h("las", {"thresholds=10,20", "victims=worst-rank"});
  const HalfGangNodes run = RunHalfGangNodes(h);
  model::JobSpec w = MakeJob(8);
  w.submit = h.clock().Now();
  const std::vector<int64_t> expected = PlainWorstRankVictims(h, {run.g, run.a, run.b}, w);
  ASSERT_EQ(expected.size(), 2u);
  EXPECT_EQ(expected.back(), run.g.value());
  h.Submit(w);
  EXPECT_EQ(h.sink().Preempted(), expected);
}

TEST_F(LasTest, AGangHoldingBothNodesAWholeNodeGangNeedsIsStoppedOnce) {
  // Given thresholds=10,20, victims=worst-rank and two 8-GPU nodes, each holding half of a gang G
  // and a 4-GPU job (A, then B, ranked behind G in queue 2), expect a fresh gang of two 8-GPU
  // parts to stop B, A and G, each once, worst first.
  SchedulerHarness h("las", {"thresholds=10,20", "victims=worst-rank"});
  const HalfGangNodes run = RunHalfGangNodes(h);
  model::JobSpec w = MakeJob(8);
  w.nodes = 2;
  JobId wid = h.Submit(w);
  EXPECT_EQ(h.sink().Preempted(), (std::vector<int64_t>{run.b.value(), run.a.value(), run.g.value()}));
  h.StopAllPreempted();
  EXPECT_EQ(h.Phase(wid), JobPhase::kRunning);
}

TEST_F(LasTest, AGangAloneOnTheNodesItReadiesIsTheOnlyVictimOfAWholeNodeJob) {
  // Given thresholds=10,20, victims=worst-rank and three 8-GPU nodes: Y (8 GPUs) ranked first in
  // queue 2 on one, a gang G of two 8-GPU parts behind it on the other two, expect a fresh 8-GPU
  // job to stop G only (releasing it readies both of G's nodes; either will do), then to run.
  SchedulerHarness h("las", {"thresholds=10,20", "victims=worst-rank"});
  for (int i = 0; i < 3; ++i) h.AddNode(MakeNode("n" + std::to_string(i), "A100", 8));
  JobId y = RunInQueue2(h, 100, MakeJob(8), 0);
  model::JobSpec gang = MakeJob(8);
  gang.nodes = 2;
  JobId g = RunInQueue2(h, 101, gang, 1);
  h.clock().Set(Sec(2));
  model::JobSpec w = MakeJob(8);
  w.submit = h.clock().Now();
  const std::vector<int64_t> expected = PlainWorstRankVictims(h, {y, g}, w);
  EXPECT_EQ(expected, (std::vector<int64_t>{g.value()}));
  JobId wid = h.Submit(w);
  EXPECT_EQ(h.sink().Preempted(), expected);
  h.StopAllPreempted();
  EXPECT_EQ(h.Phase(wid), JobPhase::kRunning);
  EXPECT_EQ(h.Phase(y), JobPhase::kRunning);
}

TEST_F(LasTest, ARestoredJobThatStartsAheadOfTheClockIsNoWorstRankVictimYet) {
  // Given thresholds=10,20, victims=worst-rank and two 8-GPU nodes: R, handed back by a restarted
  // controller with a start 5 s ahead of the scheduler's clock (another machine's clock) and
  // enough service for queue 2, on one, and J (queue 1) on the other, expect a fresh 8-GPU job
  // to stop J: a job has not run the minimum run time (none here) before it has started.
  SchedulerHarness h("las", {"thresholds=10,20", "victims=worst-rank"});
  const NodeId n0 = h.AddNode(MakeNode("n0", "A100", 8));
  h.AddNode(MakeNode("n1", "A100", 8));
  h.clock().Set(Sec(10));
  model::Placement on_n0{"A100", {model::NodeAssignment{n0, {0, 1, 2, 3, 4, 5, 6, 7}}}};
  model::JobMemory m;
  m.las_service_gpu_ms = 1'000'000;
  m.attained_gpu_ms = m.las_service_gpu_ms;
  m.rank_class = 2;
  m.queued_since = h.clock().Now();
  m.rank_class_since = h.clock().Now();
  model::JobSpec r_spec = MakeJob(8);
  ASSERT_TRUE(h.sched().Handle(JobRestored{JobId(100), r_spec, on_n0, Sec(15), 0, Duration::Zero(), m}).ok());
  ASSERT_EQ(h.Phase(JobId(100)), JobPhase::kRunning);
  JobId j = SubmitWithService(h, 101, MakeJob(8), 10, 1);
  ASSERT_EQ(h.Phase(j), JobPhase::kRunning);
  model::JobSpec w = MakeJob(8);
  w.submit = h.clock().Now();
  h.Submit(w);
  EXPECT_EQ(h.sink().Preempted(), (std::vector<int64_t>{j.value()}));
}

TEST_F(LasTest, WorstRankVictimsOfAWholeNodeJobMayBeSlicesOfOneGpu) {
  // Given thresholds=10,20, victims=worst-rank and two 8-GPU nodes: Y (8 GPUs) ranked first in
  // queue 2, then X (6 GPUs) and two half-GPU slices S1, S2 behind it, expect a fresh 8-GPU job
  // to stop what PlainWorstRankVictims names: the node of X and the slices is emptied first, so
  // X and both slices, and not Y, however the slices share their GPUs.
  SchedulerHarness h("las", {"thresholds=10,20", "victims=worst-rank"});
  h.AddNode(MakeNode("n0", "A100", 8));
  h.AddNode(MakeNode("n1", "A100", 8));
  model::JobSpec slice = MakeJob(1);
  slice.gpu_milli = 500;
  JobId y = RunInQueue2(h, 100, MakeJob(8), 0);
  JobId x = RunInQueue2(h, 101, MakeJob(6), 1);
  JobId s1 = RunInQueue2(h, 102, slice, 2);
  JobId s2 = RunInQueue2(h, 103, slice, 3);
  h.clock().Set(Sec(4));
  model::JobSpec w = MakeJob(8);
  w.submit = h.clock().Now();
  const std::vector<int64_t> expected = PlainWorstRankVictims(h, {y, x, s1, s2}, w);
  EXPECT_EQ(expected, (std::vector<int64_t>{s2.value(), s1.value(), x.value()}));
  h.Submit(w);
  EXPECT_EQ(h.sink().Preempted(), expected);
}

TEST_F(LasTest, ARunningJobPastItsThresholdIsAVictimBeforeItsTimerIsDelivered) {
  // Given thresholds=10,20 and a 1-GPU node running A from t=2 (its demotion is due at t=12),
  // and the scheduler not woken at t=12, expect job B, submitted before A (so ranked ahead of it
  // in queue 1) and handed over at t=15, to preempt A: A's service puts it in queue 2 already,
  // though its rank still says queue 1.
  SchedulerHarness h("las", {"thresholds=10,20"});
  h.AddNode(MakeNode("n0", "A100", 1));
  h.clock().Set(Sec(2));
  JobId a = h.Submit(MakeJob(1));
  ASSERT_EQ(h.Phase(a), JobPhase::kRunning);
  ASSERT_EQ(Millis(h.sched().NextWakeup()), 12'000);
  h.clock().Set(Sec(15));
  JobId b = h.Submit(MakeJob(1, 1));
  EXPECT_EQ(h.sink().Preempted(), (std::vector<int64_t>{a.value()}));
  h.StopAllPreempted();
  EXPECT_EQ(h.Phase(b), JobPhase::kRunning);
}

TEST_F(LasTest, AVictimHoldingTheCpusTheJobNeedsIsStopped) {
  // Given thresholds=10,20 and a 2-GPU node running V (queue 3) on one GPU and all its CPUs, and
  // a fresh job W of one GPU and one CPU, expect W to preempt V: the GPU left free is of no use
  // to W while V holds the CPUs, though it has room for W's GPU.
  SchedulerHarness h("las", {"thresholds=10,20"});
  h.AddNode(MakeNode("n0", "A100", 2));
  model::JobSpec hungry = MakeJob(1);
  hungry.cpu_milli = 96'000;
  JobId v = SubmitWithService(h, 100, hungry, 20, 2);
  ASSERT_EQ(h.Phase(v), JobPhase::kRunning);
  h.clock().Set(Sec(1));
  model::JobSpec small = MakeJob(1);
  small.cpu_milli = 1'000;
  JobId w = h.Submit(small);
  EXPECT_EQ(h.sink().Preempted(), (std::vector<int64_t>{v.value()}));
  h.StopAllPreempted();
  EXPECT_EQ(h.Phase(w), JobPhase::kRunning);
}

}  // namespace
}  // namespace gpufleet::sched
