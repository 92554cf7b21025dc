#include "sched/policy/sjf.h"

#include <gtest/gtest.h>

#include "testing/harness.h"

namespace gpufleet::sched {
namespace {

using testing::MakeJob;
using testing::MakeNode;
using testing::SchedulerHarness;

model::JobSpec Est(int64_t estimate_s, int64_t submit_s = 0, int gpus = 1) {
  model::JobSpec j = MakeJob(gpus, submit_s);
  j.duration_estimate = Duration::Seconds(estimate_s);
  return j;
}

class SjfTest : public ::testing::Test {
 protected:
  static JobView View(const model::JobSpec& spec, int64_t seq) {
    JobView v;
    v.id = JobId(seq);
    v.spec = &spec;
    v.seq = seq;
    return v;
  }
  static JobView RunningSince(const model::JobSpec& spec, int64_t seq, int64_t started_s) {
    JobView v = View(spec, seq);
    v.phase = JobPhase::kRunning;
    v.started_at = Time::FromSeconds(started_s);
    return v;
  }
  static QueueContext Ctx(int64_t now_s) { return QueueContext{Time::FromSeconds(now_s), nullptr, 0}; }

  SjfPolicy sjf_{false};
  SjfPolicy srtf_{true};
};

TEST_F(SjfTest, RanksByEstimateThenSubmitTime) {
  // Given estimates of 300 s, 100 s and 100 s (the last submitted earlier), expect the 100 s
  // jobs first, the earlier of them first.
  model::JobSpec a = Est(300, 0), b = Est(100, 50), c = Est(100, 20);
  RankKey ra = sjf_.Rank(View(a, 0), Ctx(100));
  RankKey rb = sjf_.Rank(View(b, 1), Ctx(100));
  RankKey rc = sjf_.Rank(View(c, 2), Ctx(100));
  EXPECT_LT(rc, rb);
  EXPECT_LT(rb, ra);
  EXPECT_EQ(rb, (RankKey{{100'000, 50'000, 0}}));
}

TEST_F(SjfTest, JobsWithoutEstimateGoLast) {
  // Given a job with no estimate submitted first and one with a very long estimate, expect the
  // job without an estimate last; two without estimates in submit order.
  model::JobSpec none = MakeJob(1, 0), none_later = MakeJob(1, 5), long_one = Est(365 * 86400, 10);
  RankKey r_none = sjf_.Rank(View(none, 0), Ctx(0));
  EXPECT_LT(sjf_.Rank(View(long_one, 1), Ctx(0)), r_none);
  EXPECT_LT(r_none, sjf_.Rank(View(none_later, 2), Ctx(0)));
  EXPECT_LT(srtf_.Rank(View(long_one, 1), Ctx(0)), srtf_.Rank(View(none, 0), Ctx(0)));
  EXPECT_EQ(sjf_.DescribeRank(View(none, 0), Ctx(0)), "no duration estimate: ranks after every job with one");
}

TEST_F(SjfTest, SjfRanksByTotalEstimateButSrtfByWhatRemains) {
  // Given a 1,000 s job that has run 900 s (over two runs) and a fresh 300 s job, expect sjf to
  // put the fresh job first and srtf the nearly done one (100 s left).
  model::JobSpec old = Est(1000, 0), fresh = Est(300, 10);
  JobView o = RunningSince(old, 0, 1500);
  o.run_time = Duration::Seconds(400);  // earlier run
  QueueContext ctx = Ctx(2000);         // + 500 s of the current run
  EXPECT_LT(sjf_.Rank(View(fresh, 1), ctx), sjf_.Rank(o, ctx));
  EXPECT_LT(srtf_.Rank(o, ctx), srtf_.Rank(View(fresh, 1), ctx));
  EXPECT_EQ(srtf_.Rank(o, ctx).k[0], 100'000);
  EXPECT_EQ(srtf_.DescribeRank(o, ctx), "remaining estimate 1m40s");
  EXPECT_EQ(sjf_.DescribeRank(o, ctx), "estimate 16m40s");
}

TEST_F(SjfTest, OverrunJobHasZeroRemaining) {
  // Given a job that has run past its estimate, expect srtf to rank it with zero remaining.
  model::JobSpec spec = Est(100);
  EXPECT_EQ(srtf_.Rank(RunningSince(spec, 0, 0), Ctx(500)).k[0], 0);
}

TEST_F(SjfTest, SrtfMayPreemptOnlyLongerRemainingWork) {
  // Given a job with 900 s left running, expect a waiting 500 s job may preempt it and a
  // waiting 950 s job may not; sjf never preempts.
  model::JobSpec running = Est(1000, 0), short_w = Est(500, 50), long_w = Est(950, 50);
  JobView r = RunningSince(running, 0, 0);
  EXPECT_TRUE(srtf_.MayPreempt(View(short_w, 1), r, Ctx(100)));
  EXPECT_FALSE(srtf_.MayPreempt(View(long_w, 2), r, Ctx(100)));
  EXPECT_FALSE(sjf_.MayPreempt(View(short_w, 1), r, Ctx(100)));
  EXPECT_EQ(srtf_.PreemptionReason(), PreemptReason::kPriority);
}

TEST_F(SjfTest, SrtfDoesNotPreemptForEqualRemainingWork) {
  // Given a running job with exactly 500 s left and a waiting 500 s job submitted earlier,
  // expect no preemption: the running job's remaining time is not strictly longer.
  model::JobSpec running = Est(1000, 10), waiting = Est(500, 0);
  JobView r = RunningSince(running, 1, 0);
  EXPECT_FALSE(srtf_.MayPreempt(View(waiting, 2), r, Ctx(500)));
}

TEST_F(SjfTest, BackfillDefaultsAndNames) {
  // Given both variants, expect names sjf/srtf, EASY backfill for sjf and greedy for srtf.
  EXPECT_EQ(sjf_.Name(), "sjf");
  EXPECT_EQ(srtf_.Name(), "srtf");
  EXPECT_EQ(sjf_.DefaultBackfill(), BackfillMode::kEasy);
  EXPECT_EQ(srtf_.DefaultBackfill(), BackfillMode::kGreedy);
}

TEST_F(SjfTest, QueueIsOrderedByEstimateWithUnknownLast) {
  // Given a busy node and waiting jobs of 300 s, no estimate and 100 s, expect the queue
  // 100 s, 300 s, unknown, and the 100 s job to start when the node frees.
  SchedulerHarness h("sjf");
  h.AddNode(MakeNode("n0", "A100", 1));
  JobId busy = h.Submit(Est(10'000));
  JobId j300 = h.Submit(Est(300));
  JobId unknown = h.Submit(MakeJob(1));
  JobId j100 = h.Submit(Est(100));
  EXPECT_EQ(h.sched().QueueOrder(), (std::vector<JobId>{j100, j300, unknown}));
  h.Finish(busy);
  EXPECT_EQ(h.Started(), (std::vector<int64_t>{busy.value(), j100.value()}));
}

TEST_F(SjfTest, SjfNeverPreempts) {
  // Given a 10,000 s job on a full node, expect a 10 s job to wait under sjf.
  SchedulerHarness h("sjf");
  h.AddNode(MakeNode("n0", "A100", 1));
  JobId long_job = h.Submit(Est(10'000));
  h.clock().Set(Time::FromSeconds(100));
  JobId short_job = h.Submit(Est(10));
  EXPECT_TRUE(h.sink().Preempted().empty());
  EXPECT_EQ(h.Phase(long_job), JobPhase::kRunning);
  EXPECT_EQ(h.Phase(short_job), JobPhase::kPending);
}

TEST_F(SjfTest, SrtfPreemptsARunningJobWithLongerRemainingTime) {
  // Given a 1,000 s job running from t=0 on a full node, expect a 500 s job arriving at 100 s
  // to preempt it (900 s left) and start once it has stopped; the victim requeues with 900 s
  // left.
  SchedulerHarness h("srtf");
  h.AddNode(MakeNode("n0", "A100", 1));
  JobId long_job = h.Submit(Est(1000));
  h.clock().Set(Time::FromSeconds(100));
  JobId short_job = h.Submit(Est(500));
  ASSERT_EQ(h.sink().Preempted(), (std::vector<int64_t>{long_job.value()}));
  EXPECT_EQ(h.sink().actions.back().reason, PreemptReason::kPriority);
  h.StopAllPreempted();
  EXPECT_EQ(h.Phase(short_job), JobPhase::kRunning);
  EXPECT_EQ(h.Phase(long_job), JobPhase::kPending);
  EXPECT_EQ(h.sched().ViewOf(long_job)->RemainingEstimate(Time::FromSeconds(100)), Duration::Seconds(900));
}

TEST_F(SjfTest, SrtfDoesNotPreemptAJobNearlyDone) {
  // Given a 1,000 s job that has run 600 s (400 s left), expect a new 500 s job to wait.
  SchedulerHarness h("srtf");
  h.AddNode(MakeNode("n0", "A100", 1));
  JobId long_job = h.Submit(Est(1000));
  h.clock().Set(Time::FromSeconds(600));
  JobId other = h.Submit(Est(500));
  EXPECT_TRUE(h.sink().Preempted().empty());
  EXPECT_EQ(h.Phase(long_job), JobPhase::kRunning);
  EXPECT_EQ(h.Phase(other), JobPhase::kPending);
}

TEST_F(SjfTest, SrtfPreemptsTheJobWithTheMostRemainingTimeNowNotTheOneThatStartedLongest) {
  // Given two GPUs, a 1,000 s job A running since 0 s and a 500 s job B since 900 s, expect a
  // 200 s job C arriving at 950 s to preempt B (450 s left), not to wait behind A: A started
  // with the longest remaining time but has only 50 s left now. Ranks of running jobs move with
  // their service, so the worst running job must be judged at the moment of the decision.
  SchedulerHarness h("srtf");
  h.AddNode(MakeNode("n0", "A100", 2));
  JobId a = h.Submit(Est(1000));
  h.clock().Set(Time::FromSeconds(900));
  JobId b = h.Submit(Est(500, 900));
  h.clock().Set(Time::FromSeconds(950));
  JobId c = h.Submit(Est(200, 950));
  ASSERT_EQ(h.sink().Preempted(), (std::vector<int64_t>{b.value()}));
  h.StopAllPreempted();
  EXPECT_EQ(h.Phase(a), JobPhase::kRunning);
  EXPECT_EQ(h.Phase(c), JobPhase::kRunning);
  EXPECT_EQ(h.Phase(b), JobPhase::kPending);
  EXPECT_EQ(h.sched().ViewOf(b)->RemainingEstimate(Time::FromSeconds(950)), Duration::Seconds(450));
}

TEST_F(SjfTest, SrtfLeavesEveryRunningJobAloneWhenAllHaveLessLeftThanTheNewcomer) {
  // Given the same two running jobs and a 600 s newcomer at 950 s (A has 50 s left, B 450 s),
  // expect no preemption: neither running job has more left than 600 s.
  SchedulerHarness h("srtf");
  h.AddNode(MakeNode("n0", "A100", 2));
  h.Submit(Est(1000));
  h.clock().Set(Time::FromSeconds(900));
  h.Submit(Est(500, 900));
  h.clock().Set(Time::FromSeconds(950));
  JobId c = h.Submit(Est(600, 950));
  EXPECT_TRUE(h.sink().Preempted().empty());
  EXPECT_EQ(h.Phase(c), JobPhase::kPending);
}

}  // namespace
}  // namespace gpufleet::sched
