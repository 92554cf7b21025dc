#include "sched/policy/priority.h"

#include <gtest/gtest.h>

#include "testing/harness.h"

namespace gpufleet::sched {
namespace {

using testing::MakeJob;
using testing::MakeNode;
using testing::SchedulerHarness;

model::JobSpec Job(int gpus, int64_t submit_s, int priority) {
  model::JobSpec j = MakeJob(gpus, submit_s);
  j.priority = priority;
  return j;
}

class PriorityTest : public ::testing::Test {
 protected:
  static JobView View(const model::JobSpec& spec, int64_t seq, JobPhase phase = JobPhase::kPending) {
    JobView v;
    v.id = JobId(seq);
    v.spec = &spec;
    v.seq = seq;
    v.phase = phase;
    return v;
  }
  QueueContext ctx_{Time::FromSeconds(10'000), nullptr, 0};
};

TEST_F(PriorityTest, HigherClassRanksFirstThenSubmitTime) {
  // Given classes 0, 5 and 5 (the latter two submitted at 200 s and 100 s), expect class 5 at
  // 100 s, class 5 at 200 s, then class 0 submitted first.
  PriorityPolicy p;
  model::JobSpec low = Job(1, 0, 0), hi_late = Job(1, 200, 5), hi_early = Job(1, 100, 5);
  RankKey r_low = p.Rank(View(low, 0), ctx_);
  RankKey r_late = p.Rank(View(hi_late, 1), ctx_);
  RankKey r_early = p.Rank(View(hi_early, 2), ctx_);
  EXPECT_LT(r_early, r_late);
  EXPECT_LT(r_late, r_low);
  EXPECT_EQ(r_early, (RankKey{{-5, 100'000, 0}}));
  model::JobSpec negative = Job(1, 0, -3);
  EXPECT_LT(r_low, p.Rank(View(negative, 3), ctx_));
}

TEST_F(PriorityTest, AgingMakesAnOldLowClassJobRankFirst) {
  // Given aging=1h, a class-0 job submitted 2h before a class-1 job, expect the class-0 job
  // first; submitted only 30 min before, expect the class-1 job first.
  PriorityPolicy p(PriorityOptions{Duration::Hours(1), true});
  model::JobSpec old_low = Job(1, 0, 0);
  model::JobSpec new_high = Job(1, 7200, 1);
  model::JobSpec recent_low = Job(1, 5400, 0);
  RankKey r_old = p.Rank(View(old_low, 0), ctx_);
  RankKey r_high = p.Rank(View(new_high, 1), ctx_);
  EXPECT_LT(r_old, r_high);
  EXPECT_EQ(r_high, (RankKey{{3'600'000, 0, 0}}));
  EXPECT_LT(r_high, p.Rank(View(recent_low, 2), ctx_));
}

TEST_F(PriorityTest, AgingOneClassPerIntervalTiesExactlyAtTheInterval) {
  // Given aging=1h, a class-0 job submitted exactly 1h before a class-1 job, expect equal
  // ranks (the scheduler then breaks the tie by submission order).
  PriorityPolicy p(PriorityOptions{Duration::Hours(1), true});
  model::JobSpec low = Job(1, 0, 0);
  model::JobSpec high = Job(1, 3600, 1);
  EXPECT_EQ(p.Rank(View(low, 0), ctx_), p.Rank(View(high, 1), ctx_));
}

TEST_F(PriorityTest, MayPreemptOnlyStrictlyLowerClasses) {
  // Given a class-5 waiting job, expect it may preempt class 4 and class -1 but not class 5
  // or class 6.
  PriorityPolicy p;
  model::JobSpec w = Job(1, 100, 5);
  JobView waiting = View(w, 9);
  for (int cls : {4, -1}) {
    model::JobSpec r = Job(1, 0, cls);
    EXPECT_TRUE(p.MayPreempt(waiting, View(r, 1, JobPhase::kRunning), ctx_)) << cls;
  }
  for (int cls : {5, 6}) {
    model::JobSpec r = Job(1, 200, cls);
    EXPECT_FALSE(p.MayPreempt(waiting, View(r, 1, JobPhase::kRunning), ctx_)) << cls;
  }
  EXPECT_EQ(p.PreemptionReason(), PreemptReason::kPriority);
}

TEST_F(PriorityTest, AgingProtectsAnOldLowerClassJobFromPreemption) {
  // Given aging=1h, a running class-0 job submitted 3h before a waiting class-1 job, expect
  // no preemption (the old job ranks first); a running class-0 job submitted 30 min before
  // may be preempted.
  PriorityPolicy p(PriorityOptions{Duration::Hours(1), true});
  model::JobSpec w = Job(1, 3 * 3600, 1);
  model::JobSpec old_r = Job(1, 0, 0);
  model::JobSpec recent_r = Job(1, 3 * 3600 - 1800, 0);
  EXPECT_FALSE(p.MayPreempt(View(w, 2), View(old_r, 0, JobPhase::kRunning), ctx_));
  EXPECT_TRUE(p.MayPreempt(View(w, 2), View(recent_r, 1, JobPhase::kRunning), ctx_));
}

TEST_F(PriorityTest, PreemptFalseDisablesPreemption) {
  // Given preempt=false, expect MayPreempt false even for a much higher class.
  PriorityPolicy p(PriorityOptions{Duration::Zero(), false});
  model::JobSpec w = Job(1, 100, 10), r = Job(1, 0, 0);
  EXPECT_FALSE(p.MayPreempt(View(w, 1), View(r, 0, JobPhase::kRunning), ctx_));
}

TEST_F(PriorityTest, DescribeRankNamesTheClassAndAging) {
  // Given a class-2 job, expect its class in words; with aging=1h and a 2h wait, expect the
  // aging rule and the wait too.
  model::JobSpec j = Job(1, 0, 2);
  QueueContext at_2h{Time::FromSeconds(7200), nullptr, 0};
  EXPECT_EQ(PriorityPolicy().DescribeRank(View(j, 0), at_2h), "priority class 2");
  EXPECT_EQ(PriorityPolicy(PriorityOptions{Duration::Hours(1), true}).DescribeRank(View(j, 0), at_2h),
            "priority class 2, aged one class per 1h00m of waiting (waited 2h00m)");
}

TEST_F(PriorityTest, QueueOrderFollowsClassesThroughTheScheduler) {
  // Given a full node and waiting jobs of classes 1, 3, 3, 2 in that arrival order, expect the
  // queue order 3 (first), 3 (second), 2, 1.
  SchedulerHarness h("priority", {"preempt=false"});
  h.AddNode(MakeNode("n0", "A100", 1));
  JobId busy = h.Submit(Job(1, 0, 9));
  h.clock().Set(Time::FromSeconds(1));
  JobId c1 = h.Submit(Job(1, 0, 1));
  JobId c3a = h.Submit(Job(1, 0, 3));
  h.clock().Set(Time::FromSeconds(2));
  JobId c3b = h.Submit(Job(1, 0, 3));
  JobId c2 = h.Submit(Job(1, 0, 2));
  EXPECT_EQ(h.sched().QueueOrder(), (std::vector<JobId>{c3a, c3b, c2, c1}));
  h.Finish(busy);
  EXPECT_EQ(h.Started(), (std::vector<int64_t>{busy.value(), c3a.value()}));
}

TEST_F(PriorityTest, AgingOptionReordersTheQueueThroughTheScheduler) {
  // Given aging=1h and a full node, a class-0 job submitted 2h before a class-1 job, expect the
  // class-0 job to start first when the node frees.
  SchedulerHarness h("priority", {"aging=1h"});
  h.AddNode(MakeNode("n0", "A100", 1));
  JobId busy = h.Submit(Job(1, 0, 9));
  h.clock().Set(Time::FromSeconds(7200));
  JobId old_low = h.Submit(Job(1, 1, 0));
  JobId new_high = h.Submit(Job(1, 7201, 1));
  EXPECT_EQ(h.sched().QueueOrder(), (std::vector<JobId>{old_low, new_high}));
  h.Finish(busy);
  EXPECT_EQ(h.Phase(old_low), JobPhase::kRunning);
  EXPECT_EQ(h.Phase(new_high), JobPhase::kPending);
}

TEST_F(PriorityTest, PreemptsOnlyJobsOfStrictlyLowerClassForRoom) {
  // Given an 8-GPU node shared by a class-1 and a class-9 job of 4 GPUs each, expect a
  // class-5 job of 4 GPUs to preempt exactly the class-1 job with reason priority, and to start
  // once it has stopped.
  SchedulerHarness h("priority");
  h.AddNode(MakeNode("n0", "A100", 8));
  JobId low = h.Submit(Job(4, 0, 1));
  JobId high = h.Submit(Job(4, 0, 9));
  h.clock().Set(Time::FromSeconds(60));
  JobId mid = h.Submit(Job(4, 0, 5));
  ASSERT_EQ(h.sink().Preempted(), (std::vector<int64_t>{low.value()}));
  EXPECT_EQ(h.sink().actions.back().reason, PreemptReason::kPriority);
  EXPECT_EQ(h.Phase(low), JobPhase::kStopping);
  EXPECT_EQ(h.Phase(mid), JobPhase::kPending);
  h.StopAllPreempted();
  EXPECT_EQ(h.Phase(mid), JobPhase::kRunning);
  EXPECT_EQ(h.Phase(high), JobPhase::kRunning);
  EXPECT_EQ(h.Phase(low), JobPhase::kPending);
  EXPECT_EQ(h.sched().ViewOf(low)->preemptions, 1);
}

TEST_F(PriorityTest, DoesNotPreemptWhenLowerClassesCannotMakeRoom) {
  // Given the same node and a class-5 job that needs all 8 GPUs, expect no preemption at all:
  // only the class-1 job's 4 GPUs may be taken.
  SchedulerHarness h("priority");
  h.AddNode(MakeNode("n0", "A100", 8));
  h.Submit(Job(4, 0, 1));
  h.Submit(Job(4, 0, 9));
  JobId big = h.Submit(Job(8, 0, 5));
  EXPECT_TRUE(h.sink().Preempted().empty());
  EXPECT_EQ(h.Phase(big), JobPhase::kPending);
}

TEST_F(PriorityTest, PreemptFalseOptionKeepsRunningJobs) {
  // Given preempt=false and a full node of class-0 work, expect a class-10 job to wait.
  SchedulerHarness h("priority", {"preempt=false"});
  h.AddNode(MakeNode("n0", "A100", 8));
  JobId low = h.Submit(Job(8, 0, 0));
  JobId urgent = h.Submit(Job(8, 0, 10));
  EXPECT_TRUE(h.sink().Preempted().empty());
  EXPECT_EQ(h.Phase(low), JobPhase::kRunning);
  EXPECT_EQ(h.Phase(urgent), JobPhase::kPending);
}

}  // namespace
}  // namespace gpufleet::sched
