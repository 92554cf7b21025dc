#include "sched/policy/fifo.h"

#include <gtest/gtest.h>

#include "testing/harness.h"

namespace gpufleet::sched {
namespace {

using testing::MakeJob;
using testing::MakeNode;
using testing::SchedulerHarness;

std::vector<JobId> Ids(std::initializer_list<JobId> ids) { return ids; }

class FifoTest : public ::testing::Test {
 protected:
  JobView View(const model::JobSpec& spec, int64_t seq) {
    JobView v;
    v.id = JobId(seq);
    v.spec = &spec;
    v.seq = seq;
    return v;
  }

  FifoPolicy policy_;
  QueueContext ctx_{Time::FromSeconds(500), nullptr, 0};
};

TEST_F(FifoTest, RanksBySubmitTimeOnly) {
  // Given jobs submitted at 10 s and 20 s, expect the earlier first whatever its priority,
  // size, team or queue history, and the rank to be the submit time in milliseconds.
  model::JobSpec early = MakeJob(8, 10, "a");
  early.priority = -5;
  model::JobSpec late = MakeJob(1, 20, "b");
  late.priority = 100;
  JobView e = View(early, 7);
  JobView l = View(late, 1);
  l.queued_since = Time::FromSeconds(0);
  e.queued_since = Time::FromSeconds(400);
  e.preemptions = 3;
  EXPECT_LT(policy_.Rank(e, ctx_), policy_.Rank(l, ctx_));
  EXPECT_EQ(policy_.Rank(e, ctx_), (RankKey{{10'000, 0, 0}}));
  EXPECT_EQ(policy_.Rank(l, ctx_), (RankKey{{20'000, 0, 0}}));
}

TEST_F(FifoTest, OrderGpusRanksTheFewestGpusFirstThenBySubmitTime) {
  // Given order=gpus (Tiresias' sjf) and a full 4-GPU node, expect the waiting jobs to start
  // smallest first once it frees (a 1-GPU job submitted last before two 2-GPU jobs, those in
  // submit order), with greedy backfill taking what fits.
  FifoPolicy by_gpus(true);
  model::JobSpec big = MakeJob(8, 10, "a"), small = MakeJob(1, 20, "b");
  EXPECT_LT(by_gpus.Rank(View(small, 2), ctx_), by_gpus.Rank(View(big, 1), ctx_));
  EXPECT_EQ(by_gpus.Rank(View(small, 2), ctx_), (RankKey{{1000, 20'000, 0}}));
  SchedulerHarness h("fifo", {"order=gpus", "backfill=greedy"});
  h.AddNode(MakeNode("n0", "A100", 4));
  JobId busy = h.Submit(MakeJob(4, 0));
  JobId two_a = h.Submit(MakeJob(2, 1));
  JobId two_b = h.Submit(MakeJob(2, 2));
  JobId three = h.Submit(MakeJob(3, 3));
  JobId one = h.Submit(MakeJob(1, 4));
  EXPECT_EQ(h.sched().QueueOrder(), Ids({one, two_a, two_b, three}));
  h.Finish(busy);
  EXPECT_EQ(h.Started(), (std::vector<int64_t>{busy.value(), one.value(), two_a.value()}));
}

TEST_F(FifoTest, RequeuedJobKeepsItsRank) {
  // Given a job that ran, was stopped and requeued later, expect the same rank as when it was
  // first submitted, at any time.
  model::JobSpec spec = MakeJob(1, 10);
  JobView first = View(spec, 0);
  JobView requeued = first;
  requeued.queued_since = Time::FromSeconds(400);
  requeued.last_run = Duration::Seconds(300);
  requeued.run_time = Duration::Seconds(300);
  requeued.attained_gpu_ms = 300'000;
  requeued.preemptions = 1;
  QueueContext later{Time::FromSeconds(99'999), nullptr, 0};
  EXPECT_EQ(policy_.Rank(requeued, later), policy_.Rank(first, ctx_));
}

TEST_F(FifoTest, NeverPreemptsAndDescribesNothing) {
  // Given any waiting and running pair, expect no preemption, no rank change over time and no
  // rank words.
  model::JobSpec w = MakeJob(1, 0);
  model::JobSpec r = MakeJob(1, 100);
  JobView waiting = View(w, 0);
  JobView running = View(r, 1);
  running.phase = JobPhase::kRunning;
  EXPECT_FALSE(policy_.MayPreempt(waiting, running, ctx_));
  EXPECT_EQ(policy_.NextRankChange(running, ctx_), std::nullopt);
  EXPECT_EQ(policy_.NextRankChange(waiting, ctx_), std::nullopt);
  EXPECT_FALSE(policy_.RanksDependOnUsage());
  EXPECT_EQ(policy_.DescribeRank(waiting, ctx_), "");
  EXPECT_EQ(policy_.Name(), "fifo");
}

TEST_F(FifoTest, QueueFollowsTraceSubmitTimesNotArrivalOrder) {
  // Given a full cluster and jobs handed to the scheduler out of submit order (a trace), expect
  // the queue sorted by submit time, equal times in arrival order.
  SchedulerHarness h("fifo");
  h.AddNode(MakeNode("n0", "A100", 1));
  h.clock().Set(Time::FromSeconds(100));
  JobId busy = h.Submit(MakeJob(1, 100));
  JobId at_300 = h.Submit(MakeJob(1, 300));
  JobId at_200 = h.Submit(MakeJob(1, 200));
  JobId at_300_too = h.Submit(MakeJob(1, 300));
  JobId at_150 = h.Submit(MakeJob(1, 150));
  EXPECT_EQ(h.sched().QueueOrder(), Ids({at_150, at_200, at_300, at_300_too}));
  h.Finish(busy);
  EXPECT_EQ(h.Started(), (std::vector<int64_t>{busy.value(), at_150.value()}));
}

TEST_F(FifoTest, RequeuedJobGoesBackToItsPlaceAtTheHead) {
  // Given a job that started first and is requeued after its node fails while later jobs wait,
  // expect it ahead of them in the queue, and first to start when a node frees.
  SchedulerHarness h("fifo");
  NodeId a = h.AddNode(MakeNode("a", "A100", 1));
  h.AddNode(MakeNode("b", "A100", 1));
  JobId first = h.Submit(MakeJob(1));  // t=0, on a
  h.clock().Set(Time::FromSeconds(10));
  JobId other = h.Submit(MakeJob(1));  // t=10, on b
  ASSERT_EQ(h.sched().PlacementOf(first)->parts[0].node, a);
  h.clock().Set(Time::FromSeconds(20));
  JobId w1 = h.Submit(MakeJob(1));
  h.clock().Set(Time::FromSeconds(30));
  JobId w2 = h.Submit(MakeJob(1));
  h.clock().Set(Time::FromSeconds(40));
  h.NodeDown(a);
  h.Stopped(first);
  ASSERT_EQ(h.Phase(first), JobPhase::kPending);
  EXPECT_EQ(h.sched().QueueOrder(), Ids({first, w1, w2}));
  h.Finish(other);
  EXPECT_EQ(h.Phase(first), JobPhase::kRunning);
  EXPECT_EQ(h.Phase(w1), JobPhase::kPending);
  EXPECT_EQ(h.sched().QueueOrder(), Ids({w1, w2}));
}

TEST_F(FifoTest, FailedAndRequeuedJobKeepsItsPlace) {
  // Given a running job that fails with requeue while the cluster is full and a later job
  // waits, expect the failed job to restart before the later one.
  SchedulerHarness h("fifo");
  h.AddNode(MakeNode("a", "A100", 2));
  JobId j1 = h.Submit(MakeJob(1));
  h.clock().Set(Time::FromSeconds(5));
  JobId j2 = h.Submit(MakeJob(1));
  h.clock().Set(Time::FromSeconds(6));
  JobId waiting = h.Submit(MakeJob(2));
  ASSERT_EQ(h.Phase(waiting), JobPhase::kPending);
  h.clock().Set(Time::FromSeconds(9));
  ASSERT_TRUE(h.sched().Handle(JobFailed{j1, true}).ok());
  // j1 ranks ahead of `waiting` and fits in the GPU it freed.
  EXPECT_EQ(h.Phase(j1), JobPhase::kRunning);
  EXPECT_EQ(h.Phase(waiting), JobPhase::kPending);
  EXPECT_EQ(h.Started(), (std::vector<int64_t>{j1.value(), j2.value(), j1.value()}));
  EXPECT_EQ(h.sched().ViewOf(j1)->preemptions, 0);
}

TEST_F(FifoTest, StrictFifoNeverPreemptsForTheHead) {
  // Given a full node and an old job (earlier submit time) arriving late, expect it at the
  // head of the queue but no preemption of the running job.
  SchedulerHarness h("fifo");
  h.AddNode(MakeNode("a", "A100", 4));
  h.clock().Set(Time::FromSeconds(50));
  JobId running = h.Submit(MakeJob(4));
  JobId old = h.Submit(MakeJob(4, 1));
  EXPECT_TRUE(h.sink().Preempted().empty());
  EXPECT_EQ(h.Phase(running), JobPhase::kRunning);
  EXPECT_EQ(h.sched().QueueOrder(), Ids({old}));
}

}  // namespace
}  // namespace gpufleet::sched
