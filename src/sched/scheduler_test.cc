#include "sched/scheduler.h"

#include <gtest/gtest.h>

#include "testing/harness.h"

namespace gpufleet::sched {
namespace {

using testing::MakeJob;
using testing::MakeNode;
using testing::SchedulerHarness;

model::JobSpec WithEstimate(model::JobSpec j, int64_t seconds) {
  j.duration_estimate = Duration::Seconds(seconds);
  return j;
}

TEST(SchedulerTest, StrictFifoHeadBlocksJobsBehindIt) {
  // Given one 8-GPU node with 6 GPUs busy and a strict FIFO queue whose head needs 4 GPUs,
  // expect a 1-GPU job behind it to wait too.
  SchedulerHarness h("fifo");
  h.AddNode(MakeNode("n0", "A100", 8));
  JobId busy = h.Submit(MakeJob(6));
  JobId head = h.Submit(MakeJob(4));
  JobId small = h.Submit(MakeJob(1));
  EXPECT_EQ(h.Started(), (std::vector<int64_t>{busy.value()}));
  EXPECT_EQ(h.Phase(head), JobPhase::kPending);
  EXPECT_EQ(h.Phase(small), JobPhase::kPending);
  Explanation e = h.sched().Explain(small);
  EXPECT_EQ(e.position, 2);
  ASSERT_FALSE(e.reasons.empty());
  bool mentions_head = false;
  for (const auto& r : e.reasons) mentions_head |= r.find("behind job " + std::to_string(head.value())) != std::string::npos;
  EXPECT_TRUE(mentions_head);
  // When the busy job finishes, both start in order.
  h.Finish(busy);
  EXPECT_EQ(h.Started(), (std::vector<int64_t>{busy.value(), head.value(), small.value()}));
}

TEST(SchedulerTest, AJobThatNeedsNoGpuStartsWhileEveryGpuIsBusy) {
  // Given one 2-GPU node with both GPUs busy (a job estimated at an hour) and a waiting 1-GPU job,
  // expect a job that asks for no GPU to start at once where the rules let a job behind a waiting
  // head start (the pass used to end when no GPU was free): las (greedy backfill) always, EASY
  // backfill when it ends before the head's reserved start; strict FIFO keeps it behind the head.
  struct Case {
    const char* policy;
    bool starts;
  };
  for (const Case c : {Case{"las", true}, Case{"backfill", true}, Case{"fifo", false}}) {
    SchedulerHarness h(c.policy);
    h.AddNode(MakeNode("n0", "A100", 2));
    JobId busy = h.Submit(WithEstimate(MakeJob(2), 3600));
    JobId gpu = h.Submit(MakeJob(1));
    JobId cpu = h.Submit(WithEstimate(MakeJob(0), 60));
    EXPECT_EQ(h.Phase(busy), JobPhase::kRunning) << c.policy;
    EXPECT_EQ(h.Phase(gpu), JobPhase::kPending) << c.policy;
    EXPECT_EQ(h.Phase(cpu), c.starts ? JobPhase::kRunning : JobPhase::kPending) << c.policy;
    h.Finish(busy);
    EXPECT_EQ(h.Phase(gpu), JobPhase::kRunning) << c.policy;
    EXPECT_EQ(h.Phase(cpu), JobPhase::kRunning) << c.policy;
  }
}

TEST(SchedulerTest, MemoryHandedBackRanksTheQueueAsBefore) {
  // Given `las` with one threshold at 100 GPU-seconds on a one-GPU node: job 1 runs 200 s and is
  // preempted by job 2, and job 3 arrives while job 2 runs. Expect a new scheduler, given job 2
  // as running and jobs 1 and 3 as pending with what the first one remembers of each (MemoryOf),
  // to rank job 3 before job 1 as the first does, and to remember the same. Without the memory,
  // job 1's service would be forgotten and it would rank first.
  SchedulerHarness h("las", {"thresholds=100"});
  h.AddNode(MakeNode("n0", "A100", 1));
  JobId first = h.Submit(MakeJob(1));
  h.AdvanceTo(200);
  JobId second = h.Submit(MakeJob(1));
  h.StopAllPreempted();
  ASSERT_EQ(h.Phase(second), JobPhase::kRunning);
  h.AdvanceTo(220);
  JobId third = h.Submit(MakeJob(1));
  ASSERT_EQ(h.sched().QueueOrder(), (std::vector<JobId>{third, first}));

  SchedulerHarness again("las", {"thresholds=100"});
  again.AddNode(MakeNode("n0", "A100", 1));
  again.clock().Set(h.clock().Now());
  std::vector<Event> events;
  for (JobId id : {first, second, third}) {
    const JobView* v = h.sched().ViewOf(id);
    std::optional<model::JobMemory> m = h.sched().MemoryOf(id);
    ASSERT_TRUE(v && m);
    if (v->phase == JobPhase::kRunning) {
      events.push_back(JobRestored{id, *v->spec, *h.sched().PlacementOf(id), m->run_started_at, m->accrued_micros,
                                   Duration::Zero(), m});
    } else {
      events.push_back(JobSubmitted{id, *v->spec, m->accrued_micros, Duration::Zero(), m});
    }
  }
  ASSERT_TRUE(again.sched().HandleAll(events).ok());
  EXPECT_EQ(again.sched().QueueOrder(), h.sched().QueueOrder());
  for (JobId id : {first, second, third}) EXPECT_EQ(again.sched().MemoryOf(id), h.sched().MemoryOf(id)) << id;
  EXPECT_EQ(h.sched().MemoryOf(first)->las_service_gpu_ms, 200'000);
  EXPECT_EQ(h.sched().MemoryOf(JobId(99)), std::nullopt);
}

TEST(SchedulerTest, EasyBackfillShortJobFillsHoleWithoutDelayingHead) {
  // Given a busy job ending at t=100 and a head job that needs the whole node, expect a job
  // that ends by t=100 to backfill and one that would run past t=100 to wait although a GPU
  // is free.
  SchedulerHarness h("backfill");
  h.AddNode(MakeNode("n0", "A100", 8));
  JobId busy = h.Submit(WithEstimate(MakeJob(5), 100));
  JobId head = h.Submit(WithEstimate(MakeJob(8), 50));
  JobId fits = h.Submit(WithEstimate(MakeJob(2), 100));
  JobId too_long = h.Submit(WithEstimate(MakeJob(1), 101));
  EXPECT_EQ(h.Phase(fits), JobPhase::kRunning);
  EXPECT_EQ(h.Phase(too_long), JobPhase::kPending);
  EXPECT_EQ(h.Phase(head), JobPhase::kPending);
  Explanation e = h.sched().Explain(too_long);
  bool held = false;
  for (const auto& r : e.reasons) held |= r.find("reservation for job " + std::to_string(head.value())) != std::string::npos;
  EXPECT_TRUE(held);
  h.clock().Set(Time::FromSeconds(100));
  h.Finish(busy);
  EXPECT_EQ(h.Phase(head), JobPhase::kPending);  // `fits` still holds 2 GPUs
  h.Finish(fits);
  EXPECT_EQ(h.Phase(head), JobPhase::kRunning);
}

TEST(SchedulerTest, EasyBackfillUsesNodesTheHeadDoesNotNeed) {
  // Given two nodes, the head job reserving node a, expect a job with no estimate to start on
  // node b (it cannot delay the head there).
  SchedulerHarness h("backfill");
  NodeId a = h.AddNode(MakeNode("a", "A100", 8));
  NodeId b = h.AddNode(MakeNode("b", "A100", 8));
  JobId busy_a = h.Submit(WithEstimate(MakeJob(4), 100));
  JobId busy_b = h.Submit(WithEstimate(MakeJob(6), 1000));
  ASSERT_EQ(h.sched().PlacementOf(busy_a)->parts[0].node, a);
  ASSERT_EQ(h.sched().PlacementOf(busy_b)->parts[0].node, b);
  JobId head = h.Submit(MakeJob(8));
  JobId filler = h.Submit(MakeJob(2));  // no estimate
  EXPECT_EQ(h.Phase(head), JobPhase::kPending);
  ASSERT_EQ(h.Phase(filler), JobPhase::kRunning);
  EXPECT_EQ(h.sched().PlacementOf(filler)->parts[0].node, b);
}

TEST(SchedulerTest, GangStartsAllPartsOrNone) {
  // Given three 8-GPU nodes with one partly busy, expect a 3-node gang to wait, then start on
  // all three at once.
  SchedulerHarness h("fifo");
  for (int i = 0; i < 3; ++i) h.AddNode(MakeNode("n" + std::to_string(i), "H100", 8));
  JobId busy = h.Submit(MakeJob(1));
  model::JobSpec gang = MakeJob(8);
  gang.nodes = 3;
  JobId g = h.Submit(gang);
  EXPECT_EQ(h.Phase(g), JobPhase::kPending);
  Explanation e = h.sched().Explain(g);
  bool says_gang = false;
  for (const auto& r : e.reasons) says_gang |= r.find("gang waits for 3") != std::string::npos;
  EXPECT_TRUE(says_gang);
  h.Finish(busy);
  ASSERT_EQ(h.Phase(g), JobPhase::kRunning);
  EXPECT_EQ(h.sched().PlacementOf(g)->parts.size(), 3u);
}

TEST(SchedulerTest, JobLargerThanANodeBecomesAGangOfEqualParts) {
  // Given 8-GPU nodes, expect a 24-GPU request to run as 3 parts of 8, and 12 GPUs as 2 of 6.
  SchedulerHarness h("fifo");
  for (int i = 0; i < 5; ++i) h.AddNode(MakeNode("n" + std::to_string(i), "V100", 8));
  JobId big = h.Submit(MakeJob(24));
  JobId twelve = h.Submit(MakeJob(12));
  ASSERT_EQ(h.Phase(big), JobPhase::kRunning);
  EXPECT_EQ(h.sched().PlacementOf(big)->parts.size(), 3u);
  EXPECT_EQ(h.sched().ViewOf(twelve)->spec->nodes, 2);
  EXPECT_EQ(h.sched().ViewOf(twelve)->spec->gpus_per_node, 6);
}

TEST(SchedulerTest, InfeasibleJobIsExplainedAndDoesNotBlockTheQueue) {
  // Given only A100 nodes, expect an H100-only job to be infeasible with the reason named, and
  // a strict FIFO queue to go on past it.
  SchedulerHarness h("fifo");
  h.AddNode(MakeNode("n0", "A100", 8));
  model::JobSpec h100 = MakeJob(1);
  h100.gpu_models = {"H100"};
  JobId bad = h.Submit(h100);
  JobId ok = h.Submit(MakeJob(1));
  EXPECT_EQ(h.Phase(ok), JobPhase::kRunning);
  Explanation e = h.sched().Explain(bad);
  EXPECT_FALSE(e.ever);
  EXPECT_EQ(e.placement, PlaceResult::Kind::kInfeasible);
  bool named = false;
  for (const auto& r : e.reasons) named |= r.find("no node has GPU model H100") != std::string::npos;
  EXPECT_TRUE(named);
}

TEST(SchedulerTest, AJobStrictOrderHoldsIsNotExplainedAsFittingNow) {
  // Given strict fifo on one 8-GPU node with 6 GPUs taken (a job with a 1-hour estimate), a
  // waiting 4-GPU head and a 1-GPU job behind it: the small job fits, but strict order keeps it.
  // Expect its explain to say so and not "fits now", placement kWait, and no start estimate (the
  // head goes first); the head's estimate is the running job's end.
  SchedulerHarness h("fifo");
  h.AddNode(MakeNode("n0", "H100", 8));
  model::JobSpec big = MakeJob(6);
  big.duration_estimate = Duration::Hours(1);
  h.Submit(big);
  JobId head = h.Submit(MakeJob(4));
  JobId small = h.Submit(MakeJob(1));
  ASSERT_EQ(h.Phase(small), JobPhase::kPending);
  Explanation e = h.sched().Explain(small);
  EXPECT_EQ(e.placement, PlaceResult::Kind::kWait);
  bool strict = false, fits_now = false;
  for (const auto& r : e.reasons) {
    strict |= r.find("strict order: waits behind job " + std::to_string(head.value())) != std::string::npos;
    fits_now |= r.find("fits now") != std::string::npos;
  }
  EXPECT_TRUE(strict);
  EXPECT_FALSE(fits_now);
  EXPECT_FALSE(e.earliest_start.has_value());
  Explanation eh = h.sched().Explain(head);
  ASSERT_TRUE(eh.earliest_start.has_value());
  EXPECT_EQ(*eh.earliest_start, Time::FromSeconds(3600));
  bool bound = false;
  for (const auto& r : eh.reasons) bound |= r.rfind("estimated start ", 0) == 0;
  EXPECT_TRUE(bound);
}

TEST(SchedulerTest, AReservationWhoseJobStartedIsNotExplainedAgain) {
  // Given backfill on one 8-GPU node: A (6 GPUs, 1 h) runs, B (8 GPUs, 1 h) waits with a
  // reservation at 1 h, and C (2 GPUs, 2 h) would delay it, so the reservation holds C. At 1 h A
  // ends and B takes the node: no GPU is free, so the pass ends before C. Expect C's explain not
  // to repeat the reservation of B (running now), and to estimate its start at B's end.
  SchedulerHarness h("backfill");
  h.AddNode(MakeNode("n0", "H100", 8));
  auto job = [](int gpus, Duration est) {
    model::JobSpec s = MakeJob(gpus);
    s.duration_estimate = est;
    return s;
  };
  JobId a = h.Submit(job(6, Duration::Hours(1)));
  JobId b = h.Submit(job(8, Duration::Hours(1)));
  JobId c = h.Submit(job(2, Duration::Hours(2)));
  ASSERT_EQ(h.Phase(c), JobPhase::kPending);
  bool held = false;
  for (const auto& r : h.sched().Explain(c).reasons) held |= r.find("held by a reservation for job") != std::string::npos;
  ASSERT_TRUE(held);
  // The queue's one line for C says the same (HeldBy), and nothing for B, which waits for GPUs.
  EXPECT_EQ(h.sched().HeldBy(c), "held by a reservation for job " + std::to_string(b.value()) + " until " +
                                     FormatIso8601(Time::FromSeconds(3600)));
  EXPECT_EQ(h.sched().HeldBy(b), "");
  h.clock().Set(Time::FromSeconds(3600));
  h.Finish(a);
  ASSERT_EQ(h.Phase(b), JobPhase::kRunning);
  EXPECT_EQ(h.sched().HeldBy(c), "") << "a reservation whose job started holds nothing";
  Explanation e = h.sched().Explain(c);
  for (const auto& r : e.reasons) EXPECT_EQ(r.find("held by a reservation"), std::string::npos) << r;
  ASSERT_TRUE(e.earliest_start.has_value());
  EXPECT_EQ(*e.earliest_start, Time::FromSeconds(7200));
}

TEST(SchedulerTest, AJobSplitToFitIsExplainedAsTheGangItBecame) {
  // Given two 4-GPU nodes and a job asking 5 GPUs on one node (split into 5 nodes of 1 GPU,
  // which only 2 nodes can hold), expect the reason to say what was asked and what it became,
  // not only "needs 5 node(s) with 1 GPU"; a job that is a gang by its own spec says no such thing.
  SchedulerHarness h("fifo");
  h.AddNode(MakeNode("n0", "A100", 4));
  h.AddNode(MakeNode("n1", "A100", 4));
  JobId five = h.Submit(MakeJob(5));
  model::JobSpec gang = MakeJob(1);
  gang.nodes = 3;
  JobId three = h.Submit(gang);
  Explanation e = h.sched().Explain(five);
  EXPECT_FALSE(e.ever);
  std::string why;
  for (const auto& r : e.reasons) why += r + "\n";
  EXPECT_NE(why.find("infeasible: asked for 5 GPUs on one node, more than any node has, so it runs as 5 nodes of 1 "
                     "GPU(s) (split_large_jobs), which needs 5 A100 node(s)"),
            std::string::npos)
      << why;
  Explanation g = h.sched().Explain(three);
  EXPECT_FALSE(g.ever);
  std::string gang_why;
  for (const auto& r : g.reasons) gang_why += r + "\n";
  EXPECT_NE(gang_why.find("infeasible: needs 3 A100 node(s)"), std::string::npos) << gang_why;
}

TEST(SchedulerTest, NodeLossStopsTheWholeGangAndRequeuesIt) {
  // Given a 2-node gang, expect losing one node to stop the job on both and requeue it; when
  // the stop is confirmed it restarts on healthy nodes.
  SchedulerHarness h("fifo");
  NodeId a = h.AddNode(MakeNode("a", "A100", 8));
  h.AddNode(MakeNode("b", "A100", 8));
  h.AddNode(MakeNode("c", "A100", 8));
  model::JobSpec spec = MakeJob(8);
  spec.nodes = 2;
  JobId g = h.Submit(spec);
  ASSERT_EQ(h.Phase(g), JobPhase::kRunning);
  bool on_a = false;
  for (const auto& p : h.sched().PlacementOf(g)->parts) on_a |= p.node == a;
  ASSERT_TRUE(on_a);
  h.NodeDown(a);
  EXPECT_EQ(h.Phase(g), JobPhase::kStopping);
  EXPECT_EQ(h.sink().actions.back().reason, PreemptReason::kNodeFailure);
  h.Stopped(g);
  ASSERT_EQ(h.Phase(g), JobPhase::kRunning);
  for (const auto& p : h.sched().PlacementOf(g)->parts) EXPECT_NE(p.node, a);
  EXPECT_EQ(h.sched().ViewOf(g)->preemptions, 0);  // a failure is not a preemption
}

TEST(SchedulerTest, ReclaimedNodeDrainsAndRequeuesItsJobsInTheirPlace) {
  // Given two 1-GPU nodes, jobs A and B running and a later job C waiting, a spot notice for A's
  // node stops A with reason reclaimed; once A is down it is requeued ahead of C (its submission
  // order) and the node takes no new work.
  testing::SchedulerHarness h("fifo");
  NodeId n0 = h.AddNode(testing::MakeNode("n0", "H100", 1));
  h.AddNode(testing::MakeNode("n1", "H100", 1));
  JobId a = h.Submit(testing::MakeJob(1));
  h.Submit(testing::MakeJob(1));
  JobId c = h.Submit(testing::MakeJob(1));
  ASSERT_EQ(h.sched().running_count(), 2u);
  const model::Placement* pa = h.sched().PlacementOf(a);
  ASSERT_NE(pa, nullptr);
  NodeId on = pa->parts[0].node;
  ASSERT_TRUE(h.sched().Handle(NodeReclaimed{on}).ok());
  EXPECT_EQ(h.sink().actions.back().reason, PreemptReason::kReclaimed);
  EXPECT_EQ(h.sink().actions.back().job, a);
  h.Stopped(a);
  std::vector<JobId> order = h.sched().QueueOrder();
  ASSERT_EQ(order.size(), 2u);
  EXPECT_EQ(order[0], a);
  EXPECT_EQ(order[1], c);
  EXPECT_EQ(h.sched().stats().preemptions, 0);  // not the policy's doing
  EXPECT_FALSE(h.sched().view().Find(on)->schedulable());
  (void)n0;
}

TEST(SchedulerTest, CancelStopsARunningJobAndForgetsIt) {
  // Given a running job, expect cancel to ask for a stop and the job to leave once stopped.
  SchedulerHarness h("fifo");
  h.AddNode(MakeNode("n0", "A100", 1));
  JobId j = h.Submit(MakeJob(1));
  JobId next = h.Submit(MakeJob(1));
  ASSERT_TRUE(h.sched().Handle(JobCancelled{j}).ok());
  EXPECT_EQ(h.sink().actions.back().reason, PreemptReason::kCancelled);
  h.Stopped(j);
  EXPECT_FALSE(h.sched().PhaseOf(j).has_value());
  EXPECT_EQ(h.Phase(next), JobPhase::kRunning);
}

TEST(SchedulerTest, PreemptionPicksTheVictimThatLosesLeastWork) {
  // Given two low-priority jobs that checkpoint every 10 minutes, one 9 minutes past its last
  // checkpoint and one 1 minute past, expect a high-priority job needing one node to preempt
  // the one that loses 1 minute.
  SchedulerHarness h("priority");
  h.AddNode(MakeNode("a", "A100", 8));
  h.AddNode(MakeNode("b", "A100", 8));
  model::JobSpec low = MakeJob(8);
  low.checkpoint_interval = Duration::Minutes(10);
  JobId early = h.Submit(low);  // starts at t=0: at t=19m it is 9 min past a checkpoint
  h.clock().Set(Time::FromSeconds(8 * 60));
  JobId late = h.Submit(low);   // starts at t=8m: at t=19m it is 1 min past one
  h.clock().Set(Time::FromSeconds(19 * 60));
  model::JobSpec high = MakeJob(8);
  high.priority = 10;
  JobId urgent = h.Submit(high);
  EXPECT_EQ(h.sink().Preempted(), (std::vector<int64_t>{late.value()}));
  EXPECT_EQ(h.Phase(urgent), JobPhase::kPending);
  h.StopAllPreempted();
  EXPECT_EQ(h.Phase(urgent), JobPhase::kRunning);
  EXPECT_EQ(h.Phase(early), JobPhase::kRunning);
  EXPECT_EQ(h.Phase(late), JobPhase::kPending);
  EXPECT_EQ(h.sched().ViewOf(late)->preemptions, 1);
}

TEST(SchedulerTest, VictimsStopInOrderOfWorkLostAcrossCheckpointCycles) {
  // Given five low-priority 8-GPU jobs at t=27m, one per node: A, B and E checkpoint every 10
  // minutes from their starts at 0, 5m and 9m (7, 2 and 8 minutes at risk); C never checkpoints
  // (started at 6m: 21 minutes); D checkpoints every 10 minutes from 1m but reported a checkpoint
  // of its own at 26m (1 minute). Expect high-priority 8-GPU jobs submitted one after another
  // to preempt D, B, A, E, C in that order.
  SchedulerHarness h("priority");
  for (const char* name : {"a", "b", "c", "d", "e"}) h.AddNode(MakeNode(name, "A100", 8));
  model::JobSpec every10 = MakeJob(8);
  every10.checkpoint_interval = Duration::Minutes(10);
  JobId a = h.Submit(every10);
  h.clock().Set(Time::FromSeconds(60));
  JobId d = h.Submit(every10);
  h.clock().Set(Time::FromSeconds(5 * 60));
  JobId b = h.Submit(every10);
  h.clock().Set(Time::FromSeconds(6 * 60));
  JobId c = h.Submit(MakeJob(8));
  h.clock().Set(Time::FromSeconds(9 * 60));
  JobId e = h.Submit(every10);
  h.clock().Set(Time::FromSeconds(26 * 60));
  ASSERT_TRUE(h.sched().Handle(JobCheckpointed{d}).ok());
  h.clock().Set(Time::FromSeconds(27 * 60));
  model::JobSpec high = MakeJob(8);
  high.priority = 10;
  for (int i = 0; i < 5; ++i) {
    h.Submit(high);
    h.StopAllPreempted();
  }
  EXPECT_EQ(h.sink().Preempted(), (std::vector<int64_t>{d.value(), b.value(), a.value(), e.value(), c.value()}));
}

TEST(SchedulerTest, WorstRankVictimsStopTheBackOfTheQueueFirst) {
  // Given the same two low jobs, the earlier now of class 0 and the later of class 1, and
  // victims=worst-rank, expect the urgent job to preempt the class-0 job (the worst-ranked)
  // although it loses 9 minutes of work; by default the class-1 job (1 minute) would go.
  for (const std::string& victims : {std::string("worst-rank"), std::string("least-work-lost")}) {
    SchedulerHarness h("priority", {"victims=" + victims});
    h.AddNode(MakeNode("a", "A100", 8));
    h.AddNode(MakeNode("b", "A100", 8));
    model::JobSpec low = MakeJob(8);
    low.checkpoint_interval = Duration::Minutes(10);
    JobId early = h.Submit(low);
    h.clock().Set(Time::FromSeconds(8 * 60));
    low.priority = 1;
    JobId late = h.Submit(low);
    h.clock().Set(Time::FromSeconds(19 * 60));
    model::JobSpec high = MakeJob(8);
    high.priority = 10;
    h.Submit(high);
    JobId expected = victims == "worst-rank" ? early : late;
    EXPECT_EQ(h.sink().Preempted(), (std::vector<int64_t>{expected.value()})) << victims;
  }
}

TEST(SchedulerTest, PreemptsOnlyAsManyVictimsAsNeeded) {
  // Given four 2-GPU low-priority jobs on one 8-GPU node, expect a 4-GPU high-priority job to
  // preempt exactly two of them.
  SchedulerHarness h("priority");
  h.AddNode(MakeNode("a", "A100", 8));
  for (int i = 0; i < 4; ++i) h.Submit(MakeJob(2));
  model::JobSpec high = MakeJob(4);
  high.priority = 5;
  JobId urgent = h.Submit(high);
  EXPECT_EQ(h.sink().Preempted().size(), 2u);
  h.StopAllPreempted();
  EXPECT_EQ(h.Phase(urgent), JobPhase::kRunning);
}

TEST(SchedulerTest, AVictimOnAGpuThatTurnedHotIsJudgedByWhatItWouldFree) {
  // Given one 8-GPU node under a thermal limit of 85 C, job 1 on GPUs 0-3 and job 2 (started
  // later, so the first a search releases) on GPUs 4-7, and GPU 4 at 90 C: a 4-GPU job of a higher
  // class needs room. Releasing job 2 frees only GPUs 5-7 (GPU 4 is held for heat), so the search
  // releases job 1 as well, then gives job 2 back: expect job 1 alone preempted and the urgent job
  // started on GPUs 0-3.
  SchedulerHarness h("priority");
  NodeId node = h.AddNode(MakeNode("a", "A100", 8));
  h.view().SetThermalLimits(85, 75);
  JobId first = h.Submit(MakeJob(4));
  h.clock().Set(Time::FromSeconds(60));
  JobId second = h.Submit(MakeJob(4));
  ASSERT_EQ(h.Started(), (std::vector<int64_t>{first.value(), second.value()}));
  ASSERT_EQ(h.sched().PlacementOf(second)->parts[0].gpus, (std::vector<int>{4, 5, 6, 7}));
  h.clock().Set(Time::FromSeconds(120));
  ASSERT_TRUE(h.sched().Handle(GpuTelemetry{node, {40, 40, 40, 40, 90, 40, 40, 40}}).ok());
  model::JobSpec high = MakeJob(4);
  high.priority = 5;
  JobId urgent = h.Submit(high);
  EXPECT_EQ(h.sink().Preempted(), (std::vector<int64_t>{first.value()}));
  h.StopAllPreempted();
  ASSERT_EQ(h.Phase(urgent), JobPhase::kRunning);
  EXPECT_EQ(h.sched().PlacementOf(urgent)->parts[0].gpus, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(h.Phase(second), JobPhase::kRunning);
}

TEST(SchedulerTest, SamePriorityNeverPreempts) {
  // Given a full node, expect a job of the same class to wait instead of preempting.
  SchedulerHarness h("priority");
  h.AddNode(MakeNode("a", "A100", 8));
  h.Submit(MakeJob(8));
  JobId second = h.Submit(MakeJob(8));
  EXPECT_TRUE(h.sink().Preempted().empty());
  EXPECT_EQ(h.Phase(second), JobPhase::kPending);
}

TEST(SchedulerTest, DrainedNodeTakesNoNewWork) {
  // Given a drained node, expect new jobs to wait and running ones to continue.
  SchedulerHarness h("fifo");
  NodeId a = h.AddNode(MakeNode("a", "A100", 8));
  JobId running = h.Submit(MakeJob(1));
  ASSERT_TRUE(h.sched().Handle(NodeDrained{a, true}).ok());
  JobId waiting = h.Submit(MakeJob(1));
  EXPECT_EQ(h.Phase(running), JobPhase::kRunning);
  EXPECT_EQ(h.Phase(waiting), JobPhase::kPending);
  ASSERT_TRUE(h.sched().Handle(NodeDrained{a, false}).ok());
  EXPECT_EQ(h.Phase(waiting), JobPhase::kRunning);
}

TEST(SchedulerTest, DuplicateSubmitIsRejectedAndChangesNothing) {
  // Given a job id already known, expect a second submit with that id to fail.
  SchedulerHarness h("fifo");
  h.AddNode(MakeNode("a", "A100", 8));
  JobId j = h.Submit(MakeJob(1));
  Status s = h.sched().Handle(JobSubmitted{j, MakeJob(4)});
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(h.sched().ViewOf(j)->spec->gpus_per_node, 1);
}

TEST(SchedulerTest, InvalidSpecIsRejected) {
  // Given a job asking for half a GPU on two nodes, expect an invalid-argument error.
  SchedulerHarness h("fifo");
  model::JobSpec bad = MakeJob(1);
  bad.gpu_milli = 500;
  bad.nodes = 2;
  Status s = h.sched().Handle(JobSubmitted{JobId(99), bad});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(h.sched().PhaseOf(JobId(99)).has_value());
}

}  // namespace
}  // namespace gpufleet::sched

namespace gpufleet::sched {
namespace {

model::NodeSpec PricedNode(const std::string& name, int gpus, int64_t dollars_per_hour) {
  model::NodeSpec n = testing::MakeNode(name, "H100", gpus);
  n.price_micros_per_hour = dollars_per_hour * 1'000'000;
  return n;
}

// An $8/h 8-GPU node, team a's $2 daily hard budget and a full-node job of team a, submitted
// now (it starts at once; the budget stops it 15 minutes later).
JobId FullNodeJobUnderDailyBudget(testing::SchedulerHarness& h) {
  h.AddNode(PricedNode("n0", 8, 8));
  TeamBudget b;
  b.hard_micros = 2'000'000;
  b.period = CalendarPeriod::kDay;
  h.sched().SetTeamBudget("a", b);
  return h.Submit(testing::MakeJob(8, 0, "a"));
}

TEST(BudgetTest, HardBudgetStopsTheTeamAtTheInstantItIsReached) {
  // Given an 8-GPU node at $8/h and team a's hard budget of $2, a full-node job of team a runs
  // for exactly 15 minutes: at 900 s it is stopped (reason budget) and requeued; the team's next
  // job waits with the budget as the reason, while team b's job starts.
  testing::SchedulerHarness h("fifo");
  h.AddNode(PricedNode("n0", 8, 8));
  TeamBudget b;
  b.hard_micros = 2'000'000;
  h.sched().SetTeamBudget("a", b);
  JobId j1 = h.Submit(testing::MakeJob(8, 0, "a"));
  ASSERT_EQ(h.Phase(j1), JobPhase::kRunning);
  ASSERT_EQ(h.sched().NextWakeup(), Time::FromSeconds(900));
  h.AdvanceTo(899);
  EXPECT_EQ(h.Phase(j1), JobPhase::kRunning);
  EXPECT_EQ(h.sched().SpendOf("a").spent_micros, 1'997'777);  // $8/h x 899 s
  h.AdvanceTo(900);
  EXPECT_EQ(h.Phase(j1), JobPhase::kStopping);
  EXPECT_EQ(h.sink().actions.back().reason, PreemptReason::kBudget);
  h.Stopped(j1);
  EXPECT_EQ(h.sched().SpendOf("a").spent_micros, 2'000'000);  // never more than the budget
  EXPECT_TRUE(h.sched().SpendOf("a").over_hard);
  EXPECT_EQ(h.Phase(j1), JobPhase::kPending);
  JobId j2 = h.Submit(testing::MakeJob(1, 900, "a"));
  JobId j3 = h.Submit(testing::MakeJob(1, 900, "b"));
  EXPECT_EQ(h.Phase(j2), JobPhase::kPending);
  EXPECT_EQ(h.Phase(j3), JobPhase::kRunning);
  Explanation e = h.sched().Explain(j2);
  bool said = false;
  for (const auto& r : e.reasons) said = said || r.find("team a has reached its hard budget: spent $2.00 of $2.00") != std::string::npos;
  EXPECT_TRUE(said);
  EXPECT_EQ(e.placement, PlaceResult::Kind::kWait);  // fits, but may not start
  // A new period (or a larger budget) lets the team run again.
  b.hard_micros = 10'000'000;
  h.sched().SetTeamBudget("a", b);
  h.Timer();
  EXPECT_FALSE(h.sched().SpendOf("a").over_hard);
  // j1 is no longer held by the budget but by capacity (j3 holds a GPU); strict FIFO keeps j2
  // behind it.
  EXPECT_EQ(h.Phase(j1), JobPhase::kPending);
  EXPECT_EQ(h.Phase(j2), JobPhase::kPending);
  h.Finish(j3);
  EXPECT_EQ(h.Phase(j1), JobPhase::kRunning);
}

TEST(BudgetTest, DailyBudgetRollsOverAtUtcMidnight) {
  // Given a $2 daily budget on an $8/h node, team a's job is stopped after 15 minutes on day 1,
  // held for the rest of the day, and starts again at midnight, when spend counts from zero.
  testing::SchedulerHarness h("fifo");
  JobId j = FullNodeJobUnderDailyBudget(h);
  h.AdvanceTo(900);
  h.Stopped(j);
  EXPECT_EQ(h.Phase(j), JobPhase::kPending);
  // The scheduler asks to be woken at the next period's start.
  ASSERT_EQ(h.sched().NextWakeup(), Time::FromSeconds(86400));
  h.AdvanceTo(86399);
  EXPECT_EQ(h.Phase(j), JobPhase::kPending);
  h.AdvanceTo(86400);
  EXPECT_EQ(h.Phase(j), JobPhase::kRunning);
  EXPECT_EQ(h.sched().SpendOf("a").spent_micros, 0);
  // Day 2 has its own $2: the job is stopped again 15 minutes after midnight.
  h.AdvanceTo(86400 + 900);
  EXPECT_EQ(h.Phase(j), JobPhase::kStopping);
  EXPECT_EQ(h.sched().SpendOf("a").spent_micros, 2'000'000);
}

TEST(BudgetTest, ABudgetReplacedByOneWithoutLimitsNeitherWakesNorStopsTheTeam) {
  // Given team a's $2 daily hard budget and its full-node job on an $8/h node (a stop due at
  // 900 s), expect a budget without limits or period set in its place to leave no wake-up and
  // the job running past 900 s; and a $10 hard budget set at 2,000 s to wake at 4,500 s, when
  // the team has spent $10.
  testing::SchedulerHarness h("fifo");
  JobId j = FullNodeJobUnderDailyBudget(h);
  ASSERT_EQ(h.sched().NextWakeup(), Time::FromSeconds(900));
  h.sched().SetTeamBudget("a", TeamBudget{});
  EXPECT_FALSE(h.sched().NextWakeup().has_value());
  h.AdvanceTo(2000);
  EXPECT_EQ(h.Phase(j), JobPhase::kRunning);
  TeamBudget ten;
  ten.hard_micros = 10'000'000;
  h.sched().SetTeamBudget("a", ten);
  EXPECT_EQ(h.sched().NextWakeup(), Time::FromSeconds(4500));
  h.AdvanceTo(4500);
  EXPECT_EQ(h.Phase(j), JobPhase::kStopping);
  EXPECT_EQ(h.sink().actions.back().reason, PreemptReason::kBudget);
}

TEST(BudgetTest, ARolloverMissedByAFewMillisecondsIsDueAtOnce) {
  // A live controller may look a little after midnight: the wake-up must then be due now, not
  // at the next midnight.
  testing::SchedulerHarness h("fifo");
  JobId j = FullNodeJobUnderDailyBudget(h);
  h.AdvanceTo(900);
  h.Stopped(j);
  h.clock().Set(Time::FromMillis(86'400'007));
  ASSERT_TRUE(h.sched().NextWakeup().has_value());
  EXPECT_LE(*h.sched().NextWakeup(), h.clock().Now());
  h.Timer();
  EXPECT_EQ(h.Phase(j), JobPhase::kRunning);
}

TEST(BudgetTest, SpendCarriedFromBeforeTheBudgetCounts) {
  // The caller counts $2 of runs that ended this period before the budget was set: with a $2
  // hard budget the team cannot start, and the carried spend is reported.
  testing::SchedulerHarness h("fifo");
  h.AddNode(PricedNode("n0", 8, 8));
  TeamBudget b;
  b.hard_micros = 2'000'000;
  b.carried_micros = 2'000'000;
  h.sched().SetTeamBudget("a", b);
  JobId j = h.Submit(testing::MakeJob(1, 0, "a"));
  EXPECT_EQ(h.Phase(j), JobPhase::kPending);
  EXPECT_EQ(h.sched().SpendOf("a").spent_micros, 2'000'000);
  EXPECT_FALSE(h.sched().BudgetHold(j).empty());
  // Setting the same budget again does not count the carried spend twice.
  h.sched().SetTeamBudget("a", b);
  EXPECT_EQ(h.sched().SpendOf("a").spent_micros, 2'000'000);
}

TEST(BudgetTest, MaxRateKeepsTheTeamsSpendingPerHourWithinItsCap) {
  // Given an 8-GPU node at $8/h ($1 per GPU-hour) and team a capped at $4/h, a 4-GPU job starts
  // ($4/h) and a second one waits until the first ends.
  testing::SchedulerHarness h("fifo");
  h.AddNode(PricedNode("n0", 8, 8));
  TeamBudget b;
  b.max_rate_micros = 4'000'000;
  h.sched().SetTeamBudget("a", b);
  JobId j1 = h.Submit(testing::MakeJob(4, 0, "a"));
  JobId j2 = h.Submit(testing::MakeJob(4, 0, "a"));
  EXPECT_EQ(h.Phase(j1), JobPhase::kRunning);
  EXPECT_EQ(h.Phase(j2), JobPhase::kPending);
  EXPECT_EQ(h.sched().SpendOf("a").rate_micros, 4'000'000);
  Explanation e = h.sched().Explain(j2);
  bool said = false;
  for (const auto& r : e.reasons) said = said || r.find("may spend at most $4.00/h") != std::string::npos;
  EXPECT_TRUE(said);
  h.clock().Set(Time::FromSeconds(3600));
  h.Finish(j1);
  EXPECT_EQ(h.Phase(j2), JobPhase::kRunning);
  EXPECT_EQ(h.sched().CostOf(j2), 0);
  EXPECT_EQ(h.sched().SpendOf("a").spent_micros, 4'000'000);
}

TEST(BudgetTest, JobStopsForGoodAtItsMaxCost) {
  // A full node at $8/h and a job with max_cost $1: it is stopped at 450 s and not requeued.
  testing::SchedulerHarness h("fifo");
  h.AddNode(PricedNode("n0", 8, 8));
  model::JobSpec spec = testing::MakeJob(8, 0, "a");
  spec.max_cost_micros = 1'000'000;
  JobId j = h.Submit(spec);
  ASSERT_EQ(h.sched().NextWakeup(), Time::FromSeconds(450));
  h.AdvanceTo(450);
  EXPECT_EQ(h.sink().actions.back().reason, PreemptReason::kMaxCost);
  EXPECT_EQ(h.sched().CostOf(j), 1'000'000);
  h.Stopped(j);
  EXPECT_FALSE(h.sched().PhaseOf(j).has_value());  // gone, not requeued
  EXPECT_FALSE(h.sched().NextWakeup().has_value());
}

TEST(BudgetTest, ARentedNodeIsBilledWholeToItsTeamFromRentToRelease) {
  // Given an 8-GPU node at $8/h rented for team a at 0 s, booting for 5 minutes, a 1-GPU job of
  // team a on it from 300 s to 1200 s and the node released at 1800 s, expect team a to pay the
  // whole bill, $8/h x 30 min = $4.00: the job $0.25 (1 GPU of 8 for 15 min), the rest ($3.75:
  // the boot, the 7 idle GPUs, the idle tail) as rented-idle cost. Nothing is added after the
  // release.
  testing::SchedulerHarness h("fifo");
  h.sched().ChargeNode("r0", "a", 8'000'000, Time::FromSeconds(0));
  EXPECT_EQ(h.sched().ChargedTeam("r0"), "a");
  h.AdvanceTo(300);
  EXPECT_EQ(h.sched().SpendOf("a").spent_micros, 666'666);  // $8/h x 300 s while booting
  EXPECT_EQ(h.sched().SpendOf("a").rate_micros, 8'000'000);
  h.AddNode(PricedNode("r0", 8, 8));
  JobId j = h.Submit(testing::MakeJob(1, 300, "a"));
  ASSERT_EQ(h.Phase(j), JobPhase::kRunning);
  EXPECT_EQ(h.sched().SpendOf("a").rate_micros, 8'000'000);          // $1 job + $7 idle
  EXPECT_EQ(h.sched().SpendOf("a").rented_idle_rate_micros, 7'000'000);
  h.AdvanceTo(1200);
  h.Finish(j);
  EXPECT_EQ(h.sched().CostOf(j), 0);  // finished jobs are forgotten; their cost is in spend
  h.AdvanceTo(1800);
  h.sched().EndNodeCharge("r0");
  EXPECT_EQ(h.sched().ChargedTeam("r0"), "");
  TeamSpend s = h.sched().SpendOf("a");
  EXPECT_EQ(s.spent_micros, 4'000'000);
  EXPECT_EQ(s.rented_idle_micros, 3'750'000);
  EXPECT_EQ(s.rate_micros, 0);
  h.clock().Set(Time::FromSeconds(3600));
  EXPECT_EQ(h.sched().SpendOf("a").spent_micros, 4'000'000);
}

TEST(BudgetTest, AnotherTeamsJobOnARentedNodePaysItsOwnShare) {
  // Given an 8-GPU $8/h node charged to team a and a 2-GPU job of team b on it for one hour,
  // expect b to pay $2 (its GPUs' share) and a the other $6: together the node's bill.
  testing::SchedulerHarness h("fifo");
  h.sched().ChargeNode("r0", "a", 8'000'000, Time::FromSeconds(0));
  h.AddNode(PricedNode("r0", 8, 8));
  JobId j = h.Submit(testing::MakeJob(2, 0, "b"));
  ASSERT_EQ(h.Phase(j), JobPhase::kRunning);
  h.clock().Set(Time::FromSeconds(3600));
  EXPECT_EQ(h.sched().SpendOf("b").spent_micros, 2'000'000);
  EXPECT_EQ(h.sched().SpendOf("a").spent_micros, 6'000'000);
  EXPECT_EQ(h.sched().SpendOf("a").rented_idle_micros, 6'000'000);
}

// Team a with a hard budget of `hard_micros`, billed from 0 s for the rented node r0 (8 GPUs,
// $8/h), which joins the view unless `add_node` is false.
void RentedForAHardBudget(testing::SchedulerHarness& h, int64_t hard_micros, bool add_node = true) {
  TeamBudget b;
  b.hard_micros = hard_micros;
  h.sched().SetTeamBudget("a", b);
  h.sched().ChargeNode("r0", "a", 8'000'000, Time::FromSeconds(0));
  if (add_node) h.AddNode(PricedNode("r0", 8, 8));
}

TEST(BudgetTest, AHardBudgetCapsTheWholeBillOfARentedNode) {
  // Given team a's $2 hard budget and a 1-GPU job on an 8-GPU $8/h node rented for a, expect the
  // job stopped at 900 s ($8/h x 15 min = $2), not after 2 hours as its own $1/h share would
  // allow, and the team marked hard-stopped so that the pool releases the node.
  testing::SchedulerHarness h("fifo");
  RentedForAHardBudget(h, 2'000'000);
  JobId j = h.Submit(testing::MakeJob(1, 0, "a"));
  ASSERT_EQ(h.Phase(j), JobPhase::kRunning);
  EXPECT_EQ(h.sched().NextWakeup(), Time::FromSeconds(900));
  EXPECT_FALSE(h.sched().SpendOf("a").hard_stop);
  h.AdvanceTo(900);
  EXPECT_EQ(h.Phase(j), JobPhase::kStopping);
  EXPECT_EQ(h.sink().actions.back().reason, PreemptReason::kBudget);
  h.Stopped(j);
  TeamSpend s = h.sched().SpendOf("a");
  EXPECT_EQ(s.spent_micros, 2'000'000);
  EXPECT_TRUE(s.hard_stop);
  h.sched().EndNodeCharge("r0");  // the pool released it
  h.clock().Set(Time::FromSeconds(7200));
  EXPECT_EQ(h.sched().SpendOf("a").spent_micros, 2'000'000);
}

TEST(BudgetTest, AnIdleRentedNodeWakesTheSchedulerWhenItsTeamsBudgetRunsOut) {
  // Given only an idle $8/h node charged to team a with $1 left, expect a wake-up at 450 s, when
  // the team becomes hard-stopped, and none after it.
  testing::SchedulerHarness h("fifo");
  RentedForAHardBudget(h, 1'000'000, /*add_node=*/false);
  EXPECT_EQ(h.sched().NextWakeup(), Time::FromSeconds(450));
  h.AdvanceTo(450);
  EXPECT_TRUE(h.sched().SpendOf("a").hard_stop);
  EXPECT_FALSE(h.sched().NextWakeup().has_value());
}

TEST(BudgetTest, TheStopLeadEndsSpendAtTheBudgetWhenJobsUseTheirWholeGrace) {
  // Given team a's $2 hard budget, an 8-GPU job at $8/h with a 30 s stop grace, expect it asked
  // to stop at 870 s ($8/h x 30 s = $0.0667 early), so that if it exits only when its grace runs
  // out (900 s) the team has spent exactly $2.
  testing::SchedulerHarness h("fifo");
  h.AddNode(PricedNode("n0", 8, 8));
  TeamBudget b;
  b.hard_micros = 2'000'000;
  h.sched().SetTeamBudget("a", b);
  JobId j = h.Submit(testing::MakeJob(8, 0, "a"), Duration::Seconds(30));
  ASSERT_EQ(h.Phase(j), JobPhase::kRunning);
  EXPECT_EQ(h.sched().NextWakeup(), Time::FromSeconds(870));
  h.AdvanceTo(870);
  EXPECT_EQ(h.Phase(j), JobPhase::kStopping);
  h.clock().Set(Time::FromSeconds(900));
  h.Stopped(j);
  EXPECT_EQ(h.sched().SpendOf("a").spent_micros, 2'000'000);
  EXPECT_TRUE(h.sched().SpendOf("a").over_hard);
}

TEST(BudgetTest, TheStopLeadCountsTheReleaseOfRentedNodes) {
  // Given a release lead of 60 s, a $8/h node rented for team a ($2 hard budget) and a full-node
  // job with a 30 s grace, expect the stop at 810 s (90 s early): the job exits at 840 s, the
  // node is released at 900 s, and the bill is exactly $2.
  testing::SchedulerHarness h("fifo", {}, Duration::Seconds(60));
  RentedForAHardBudget(h, 2'000'000);
  JobId j = h.Submit(testing::MakeJob(8, 0, "a"), Duration::Seconds(30));
  ASSERT_EQ(h.Phase(j), JobPhase::kRunning);
  EXPECT_EQ(h.sched().NextWakeup(), Time::FromSeconds(810));
  h.AdvanceTo(810);
  EXPECT_EQ(h.Phase(j), JobPhase::kStopping);
  EXPECT_TRUE(h.sched().SpendOf("a").hard_stop);
  h.clock().Set(Time::FromSeconds(840));
  h.Stopped(j);
  h.clock().Set(Time::FromSeconds(900));
  h.sched().EndNodeCharge("r0");
  EXPECT_EQ(h.sched().SpendOf("a").spent_micros, 2'000'000);
}

TEST(BudgetTest, AJobDoesNotStartWhenItsStopLeadWouldOvershootTheBudget) {
  // Given team a with $0.05 left of a $2 budget, expect an $8/h job with a 30 s grace (which
  // could spend $0.0667 after a stop) held, saying so, and a job without a grace started.
  testing::SchedulerHarness h("fifo");
  h.AddNode(PricedNode("n0", 8, 8));
  TeamBudget b;
  b.hard_micros = 2'000'000;
  b.carried_micros = 1'950'000;
  h.sched().SetTeamBudget("a", b);
  JobId graced = h.Submit(testing::MakeJob(8, 0, "a"), Duration::Seconds(30));
  EXPECT_EQ(h.Phase(graced), JobPhase::kPending);
  EXPECT_NE(h.sched().BudgetHold(graced).find("within its stop lead of its hard budget"), std::string::npos)
      << h.sched().BudgetHold(graced);
  ASSERT_TRUE(h.sched().Handle(JobCancelled{graced}).ok());
  JobId plain = h.Submit(testing::MakeJob(8, 0, "a"));
  EXPECT_EQ(h.Phase(plain), JobPhase::kRunning);
}

TEST(BudgetTest, AStoppedTeamStopsPayingForItsNodeWhenAnotherTeamWorksThere) {
  // Given team a's $1 hard budget and an 8-GPU $8/h node charged to a, with team b's 2-GPU job on
  // it: a is stopped at 600 s ($2/h from b leaves $6/h for a: $1 after 10 minutes); from then the
  // node is billed to b, which keeps working there, and a's spend stays at $1.
  testing::SchedulerHarness h("fifo");
  RentedForAHardBudget(h, 1'000'000);
  JobId j = h.Submit(testing::MakeJob(2, 0, "b"));
  ASSERT_EQ(h.Phase(j), JobPhase::kRunning);
  EXPECT_EQ(h.sched().NextWakeup(), Time::FromSeconds(600));
  h.AdvanceTo(600);
  EXPECT_TRUE(h.sched().SpendOf("a").hard_stop);
  EXPECT_EQ(h.sched().ChargedTeam("r0"), "b");
  h.clock().Set(Time::FromSeconds(4200));
  EXPECT_EQ(h.sched().SpendOf("a").spent_micros, 1'000'000);
  EXPECT_EQ(h.sched().SpendOf("b").spent_micros, 8'333'333);  // $2/h for 70 min + $6/h for 60 min
}

TEST(BudgetTest, AChargeThatComesBackToAStoppedTeamMovesAtOnce) {
  // Given the test above at 600 s (a stopped, its node billed to b), then the node charged to a
  // again (as a restarted controller's pool charges the team that rented it), expect a wake-up
  // at once and the charge back on b, a's spend staying at $1; with no team left to bill (b's job
  // gone and charged again to a), no wake-up at once (nothing to move).
  testing::SchedulerHarness h("fifo");
  RentedForAHardBudget(h, 1'000'000);
  JobId j = h.Submit(testing::MakeJob(2, 0, "b"));
  h.AdvanceTo(600);
  ASSERT_EQ(h.sched().ChargedTeam("r0"), "b");
  h.clock().Set(Time::FromSeconds(700));
  h.sched().ChargeNode("r0", "a", 8'000'000, Time::FromSeconds(700));
  EXPECT_EQ(h.sched().NextWakeup(), Time::FromSeconds(700));
  h.AdvanceTo(700);
  EXPECT_EQ(h.sched().ChargedTeam("r0"), "b");
  h.clock().Set(Time::FromSeconds(4300));
  EXPECT_EQ(h.sched().SpendOf("a").spent_micros, 1'000'000);
  h.Finish(j);
  h.sched().ChargeNode("r0", "a", 8'000'000, Time::FromSeconds(4300));
  auto wake = h.sched().NextWakeup();
  EXPECT_TRUE(!wake || *wake > Time::FromSeconds(4300));
}

TEST(BudgetTest, ABudgetWhosePeriodHoldsTheIdleSpendKeepsIt) {
  // Given team a billed $8 for an $8/h rented node idle from 3600 s to 7200 s (no budget yet),
  // expect a budget set afterwards whose period starts before that ($8 hard, from 0 s) to count
  // the $8 (it is in no job record), so the team is at its limit; a new period from now counts
  // nothing of it.
  testing::SchedulerHarness h("fifo");
  h.clock().Set(Time::FromSeconds(3600));
  h.sched().ChargeNode("r0", "a", 8'000'000, Time::FromSeconds(3600));
  h.clock().Set(Time::FromSeconds(7200));
  h.sched().EndNodeCharge("r0");
  ASSERT_EQ(h.sched().SpendOf("a").spent_micros, 8'000'000);
  TeamBudget b;
  b.hard_micros = 8'000'000;
  b.since = Time::FromSeconds(0);
  h.sched().SetTeamBudget("a", b);
  EXPECT_EQ(h.sched().SpendOf("a").spent_micros, 8'000'000);
  EXPECT_EQ(h.sched().SpendOf("a").rented_idle_micros, 8'000'000);
  b.since = Time::FromSeconds(7200);
  h.sched().SetTeamBudget("a", b);
  EXPECT_EQ(h.sched().SpendOf("a").spent_micros, 0);
}

TEST(BudgetTest, AStoppedTeamStaysStoppedUnderTheSameBudgetAndGoesOnWithALargerOne) {
  // Given team a stopped by its $2 hard budget, expect re-setting the same budget (a new soft
  // limit) to keep it stopped, and a larger hard limit to let its held job start.
  testing::SchedulerHarness h("fifo", {}, Duration::Seconds(60));
  h.AddNode(PricedNode("n0", 8, 8));
  TeamBudget b;
  b.hard_micros = 2'000'000;
  h.sched().SetTeamBudget("a", b);
  h.sched().ChargeNode("r9", "a", 8'000'000, Time::FromSeconds(0));  // a booting node billed to a
  h.AdvanceTo(840);  // $8/h x (840 + 60) s = $2: stopped
  EXPECT_TRUE(h.sched().SpendOf("a").hard_stop);
  h.sched().EndNodeCharge("r9");  // released; $1.87 spent, but a stays stopped
  EXPECT_TRUE(h.sched().SpendOf("a").hard_stop);
  b.soft_micros = 1'000'000;
  h.sched().SetTeamBudget("a", b);
  JobId j = h.Submit(testing::MakeJob(1, 840, "a"));
  EXPECT_EQ(h.Phase(j), JobPhase::kPending);
  EXPECT_NE(h.sched().BudgetHold(j).find("was stopped by its hard budget"), std::string::npos) << h.sched().BudgetHold(j);
  b.hard_micros = 3'000'000;
  h.sched().SetTeamBudget("a", b);
  h.Timer();
  EXPECT_EQ(h.Phase(j), JobPhase::kRunning);
  EXPECT_TRUE(h.sched().BudgetHold(j).empty());
}

TEST(BudgetTest, UnpricedNodesCostNothingAndNeverWakeTheScheduler) {
  testing::SchedulerHarness h("fifo");
  h.AddNode(testing::MakeNode("n0", "H100", 8));
  TeamBudget b;
  b.hard_micros = 1;
  h.sched().SetTeamBudget("a", b);
  JobId j = h.Submit(testing::MakeJob(8, 0, "a"));
  EXPECT_EQ(h.Phase(j), JobPhase::kRunning);
  EXPECT_FALSE(h.sched().NextWakeup().has_value());
  h.clock().Set(Time::FromSeconds(7200));
  EXPECT_EQ(h.sched().SpendOf("a").spent_micros, 0);
}

TEST(SchedulerQuotaTest, WithoutBorrowingATeamNeverHoldsMoreThanItsQuotaAndOthersGoOn) {
  // Given one 8-GPU node, team a with 4 guaranteed GPUs and no borrowing, expect a's jobs to run up
  // to 4 GPUs while the rest of a's wait with the reason, team b's job behind them to start on
  // the idle GPUs (strict fifo included), and a's next job to start when one of a's finishes.
  SchedulerHarness h("fifo");
  h.AddNode(MakeNode("n0", "A100", 8));
  TeamQuota q;
  q.gpus = 4;
  q.borrow = false;
  h.sched().SetTeamQuota("a", q);
  JobId a1 = h.Submit(MakeJob(2, 0, "a"));
  JobId a2 = h.Submit(MakeJob(2, 0, "a"));
  JobId a3 = h.Submit(MakeJob(2, 0, "a"));
  JobId b1 = h.Submit(MakeJob(3, 0, "b"));
  EXPECT_EQ(h.Phase(a1), JobPhase::kRunning);
  EXPECT_EQ(h.Phase(a2), JobPhase::kRunning);
  EXPECT_EQ(h.Phase(a3), JobPhase::kPending);
  EXPECT_EQ(h.Phase(b1), JobPhase::kRunning);
  EXPECT_EQ(h.sched().LoadOf("a").used_milli, 4000);
  EXPECT_EQ(h.sched().LoadOf("a").model_used_milli.at("A100"), 4000);
  EXPECT_EQ(h.sched().LoadOf("a").pending_jobs, 1);
  Explanation e = h.sched().Explain(a3);
  bool said = false;
  for (const auto& r : e.reasons) said |= r.find("quota: team a is over its quota, borrowing not allowed") == 0;
  EXPECT_TRUE(said) << (e.reasons.empty() ? "" : e.reasons[0]);
  EXPECT_NE(h.sched().BudgetHold(a3).find("borrowing not allowed"), std::string::npos);
  EXPECT_TRUE(e.ever) << "a3 starts once a's jobs leave room";
  // A job larger than the quota itself never starts while the quota stays: explain says so.
  JobId a5 = h.Submit(MakeJob(5, 0, "a"));
  Explanation never = h.sched().Explain(a5);
  EXPECT_FALSE(never.ever);
  bool told = false;
  for (const auto& r : never.reasons) told |= r.find("can never start under team a's quota") != std::string::npos;
  EXPECT_TRUE(told) << ::testing::PrintToString(never.reasons);
  h.Finish(a1);
  EXPECT_EQ(h.Phase(a3), JobPhase::kRunning);
  EXPECT_TRUE(h.sched().BudgetHold(a3).empty());
}

TEST(SchedulerQuotaTest, BorrowingTeamsUseIdleGpusAndModelQuotasCountTheirModelOnly) {
  // Given an H100 node and an A100 node, team a with 2 H100s guaranteed and no borrowing, expect
  // a 2-GPU H100 job to run, a second H100 job to wait on the H100 quota, and a job that may run
  // anywhere to wait too (a has no A100 quota); team c (borrowing, 1 GPU guaranteed) takes 4.
  SchedulerHarness h("fifo");
  h.AddNode(MakeNode("h", "H100", 4));
  h.AddNode(MakeNode("x", "A100", 4));
  TeamQuota a;
  a.model_gpus["H100"] = 2;
  a.borrow = false;
  h.sched().SetTeamQuota("a", a);
  TeamQuota c;
  c.gpus = 1;
  h.sched().SetTeamQuota("c", c);
  model::JobSpec h100 = MakeJob(2, 0, "a");
  h100.gpu_models = {"H100"};
  JobId first = h.Submit(h100);
  JobId second = h.Submit(h100);
  JobId anywhere = h.Submit(MakeJob(1, 0, "a"));
  JobId borrow = h.Submit(MakeJob(4, 0, "c"));
  EXPECT_EQ(h.Phase(first), JobPhase::kRunning);
  EXPECT_EQ(h.Phase(second), JobPhase::kPending);
  EXPECT_NE(h.sched().BudgetHold(second).find("over its H100 quota"), std::string::npos) << h.sched().BudgetHold(second);
  EXPECT_EQ(h.Phase(anywhere), JobPhase::kPending);
  EXPECT_EQ(h.Phase(borrow), JobPhase::kRunning);
  EXPECT_EQ(h.sched().QuotaOf("c").gpus, 1);
}

TEST(SchedulerQuotaTest, PreemptionNeverTakesAnotherTeamsGuaranteedGpus) {
  // Given two 4-GPU nodes, teams a and b with 4 guaranteed GPUs each, and b running four 1-GPU
  // jobs (its quota) plus two more borrowed from a's idle share: expect high-priority jobs of
  // team a to preempt b's two borrowed jobs and no more (b keeps its 4), and a job of b itself of
  // a higher priority still to preempt b's own jobs (within a team the policy decides). With every
  // victim order, and under las (a job of a's with less service waits instead of stopping b's
  // guaranteed jobs).
  for (const std::string& victims : {std::string("worst-rank"), std::string("least-work-lost")}) {
    SchedulerHarness h("priority", {"victims=" + victims});
    h.AddNode(MakeNode("n0", "A100", 4));
    h.AddNode(MakeNode("n1", "A100", 4));
    h.sched().SetTeamQuota("a", 4);
    h.sched().SetTeamQuota("b", 4);
    std::vector<JobId> b;
    for (int i = 0; i < 6; ++i) b.push_back(h.Submit(MakeJob(1, 0, "b")));
    ASSERT_EQ(h.sched().LoadOf("b").used_milli, 6000);
    h.clock().Set(Time::FromSeconds(60));
    model::JobSpec high = MakeJob(1, 0, "a");
    high.priority = 1000;
    std::vector<JobId> a;
    for (int i = 0; i < 4; ++i) {  // two on the idle GPUs, two in place of b's borrowed jobs
      a.push_back(h.Submit(high));
      h.StopAllPreempted();
    }
    EXPECT_EQ(h.sink().Preempted().size(), 2u) << victims;
    EXPECT_EQ(h.sched().LoadOf("b").used_milli, 4000) << victims;
    EXPECT_EQ(h.sched().LoadOf("a").used_milli, 4000) << victims;
    // Within team b the policy's own rule holds: b's urgent job stops one of b's own.
    model::JobSpec b_high = MakeJob(1, 0, "b");
    b_high.priority = 1000;
    JobId b_urgent = h.Submit(b_high);
    h.StopAllPreempted();
    EXPECT_EQ(h.sink().Preempted().size(), 3u) << victims;
    EXPECT_EQ(h.Phase(b_urgent), JobPhase::kRunning) << victims;
    // A fifth job of a's waits: b is at its quota.
    a.push_back(h.Submit(high));
    h.StopAllPreempted();
    EXPECT_EQ(h.sink().Preempted().size(), 3u) << victims;
    EXPECT_EQ(h.Phase(a[4]), JobPhase::kPending) << victims;
    bool told = false;
    for (const auto& r : h.sched().Explain(a[4]).reasons) told |= r.find("may not preempt team b's jobs") == 0;
    EXPECT_TRUE(told) << victims << ": " << ::testing::PrintToString(h.sched().Explain(a[4]).reasons);
    // Without quotas the policy alone decides again: a's waiting job stops one of b's.
    h.sched().SetTeamQuota("b", 0);
    h.sched().SetTeamQuota("a", 0);
    h.Timer();
    h.StopAllPreempted();
    EXPECT_EQ(h.Phase(a[4]), JobPhase::kRunning) << victims;
  }
  for (const std::string& policy : {std::string("priority"), std::string("fair-share")}) {
    // Victims still stopping (their processes not yet gone) count as given up: four urgent jobs
    // of b, one after another before any victim has stopped, take a's two borrowed nodes and no
    // more (each search saw a's 8 GPUs while its victims stopped, and all four went).
    SchedulerHarness h(policy);
    for (const char* n : {"n0", "n1", "n2", "n3"}) h.AddNode(MakeNode(n, "A100", 2));
    h.sched().SetTeamQuota("a", 4);
    h.sched().SetTeamQuota("b", 4);
    for (int i = 0; i < 4; ++i) h.Submit(MakeJob(2, 0, "a"));
    ASSERT_EQ(h.sched().LoadOf("a").used_milli, 8000) << policy;
    h.clock().Set(Time::FromSeconds(60));
    model::JobSpec urgent = MakeJob(2, 0, "b");
    urgent.priority = 5;
    for (int i = 0; i < 4; ++i) h.Submit(urgent);
    EXPECT_EQ(h.sink().Preempted().size(), 2u) << policy;
    h.StopAllPreempted();
    EXPECT_EQ(h.sched().LoadOf("a").used_milli, 4000) << policy;
    EXPECT_EQ(h.sched().LoadOf("b").used_milli, 4000) << policy;
  }
  {
    // Two victims of one search: b (quota 4) runs five 1-GPU jobs on one 5-GPU node, one beyond
    // its quota; a 2-GPU urgent job of a's needs two of them and may take only one: it waits.
    SchedulerHarness h("priority");
    h.AddNode(MakeNode("n0", "A100", 5));
    h.sched().SetTeamQuota("a", 1);
    h.sched().SetTeamQuota("b", 4);
    for (int i = 0; i < 5; ++i) h.Submit(MakeJob(1, 0, "b"));
    h.clock().Set(Time::FromSeconds(60));
    model::JobSpec urgent = MakeJob(2, 0, "a");
    urgent.priority = 5;
    JobId waits = h.Submit(urgent);
    EXPECT_TRUE(h.sink().Preempted().empty());
    EXPECT_EQ(h.Phase(waits), JobPhase::kPending);
    // Quotas set, and removed, while a victim is stopping keep the stopping count right.
    model::JobSpec small = MakeJob(1, 0, "a");
    small.priority = 5;
    h.Submit(small);
    ASSERT_EQ(h.sink().Preempted().size(), 1u);
    EXPECT_EQ(h.sched().LoadOf("b").stopping_milli, 1000);
    h.sched().SetTeamQuota("a", 0);
    h.sched().SetTeamQuota("b", 0);
    EXPECT_EQ(h.sched().LoadOf("b").stopping_milli, 0);
    h.sched().SetTeamQuota("b", 4);
    EXPECT_EQ(h.sched().LoadOf("b").stopping_milli, 1000) << "recounted from the jobs stopping";
    h.StopAllPreempted();
    EXPECT_EQ(h.sched().LoadOf("b").stopping_milli, 0);
    EXPECT_TRUE(h.sched().LoadOf("b").model_stopping_milli.empty());
  }
  {
    // A quota for one GPU model is kept on that model: b's urgent A100 job may not stop a's
    // A100 jobs (a's whole A100 quota) although a borrows H100s beyond it.
    SchedulerHarness h("priority");
    h.AddNode(MakeNode("a100", "A100", 4));
    h.AddNode(MakeNode("h100", "H100", 4));
    TeamQuota qa;
    qa.model_gpus["A100"] = 4;
    h.sched().SetTeamQuota("a", qa);
    model::JobSpec on_a100 = MakeJob(2, 0, "a");
    on_a100.gpu_models = {"A100"};
    model::JobSpec on_h100 = MakeJob(2, 0, "a");
    on_h100.gpu_models = {"H100"};
    for (int i = 0; i < 2; ++i) h.Submit(on_a100);
    for (int i = 0; i < 2; ++i) h.Submit(on_h100);
    h.clock().Set(Time::FromSeconds(60));
    model::JobSpec urgent = MakeJob(2, 0, "b");
    urgent.priority = 5;
    urgent.gpu_models = {"A100"};
    JobId waits = h.Submit(urgent);
    EXPECT_TRUE(h.sink().Preempted().empty());
    EXPECT_EQ(h.Phase(waits), JobPhase::kPending);
    // An H100 job of b's may take one of a's borrowed H100 jobs.
    urgent.gpu_models = {"H100"};
    h.Submit(urgent);
    EXPECT_EQ(h.sink().Preempted().size(), 1u);
  }
  {
    SchedulerHarness h("las", {"thresholds=100"});
    h.AddNode(MakeNode("n0", "A100", 2));
    h.sched().SetTeamQuota("a", 1);
    h.sched().SetTeamQuota("b", 1);
    JobId b1 = h.Submit(MakeJob(1, 0, "b"));
    JobId b2 = h.Submit(MakeJob(1, 0, "b"));  // borrowed from a's share
    h.AdvanceTo(300);  // both demoted past 100 GPU-s
    JobId a1 = h.Submit(MakeJob(1, 0, "a"));
    JobId a2 = h.Submit(MakeJob(1, 0, "a"));
    h.StopAllPreempted();
    EXPECT_EQ(h.sink().Preempted().size(), 1u);
    EXPECT_EQ(h.sched().LoadOf("b").used_milli, 1000);
    EXPECT_EQ(h.Phase(a1), JobPhase::kRunning);
    EXPECT_EQ(h.Phase(a2), JobPhase::kPending);
    EXPECT_NE(h.Phase(b1) == JobPhase::kRunning, h.Phase(b2) == JobPhase::kRunning) << "b keeps exactly one";
  }
}

TEST(SchedulerQuotaTest, AJobOfAnyModelStartsUnderAModelQuotaBesideAnAnyModelOne) {
  // Given team a with 1 GPU of any model and 4 H100s guaranteed, no borrowing, and a 2-GPU job
  // that names no model on an idle H100 node, expect it to start under the H100 quota (it waited
  // for good, held by the 1-GPU any-model quota alone).
  SchedulerHarness h("fifo");
  h.AddNode(MakeNode("h", "H100", 4));
  TeamQuota q;
  q.gpus = 1;
  q.model_gpus["H100"] = 4;
  q.borrow = false;
  h.sched().SetTeamQuota("a", q);
  JobId j = h.Submit(MakeJob(2, 0, "a"));
  EXPECT_EQ(h.Phase(j), JobPhase::kRunning) << h.sched().BudgetHold(j);
}

TEST(SchedulerQuotaTest, RunningAndPendingJobLimitsHoldAndRefuse) {
  // Given team a limited to 2 running and 3 pending jobs, expect the third job to wait with the
  // reason while b's runs, AdmissionBlock to refuse what would pass 3 waiting, and an empty
  // quota to lift every limit.
  SchedulerHarness h("fifo");
  h.AddNode(MakeNode("n0", "A100", 8));
  TeamQuota q;
  q.max_running_jobs = 2;
  q.max_pending_jobs = 3;
  h.sched().SetTeamQuota("a", q);
  JobId a1 = h.Submit(MakeJob(1, 0, "a"));
  JobId a2 = h.Submit(MakeJob(1, 0, "a"));
  JobId a3 = h.Submit(MakeJob(1, 0, "a"));
  JobId b1 = h.Submit(MakeJob(1, 0, "b"));
  EXPECT_EQ(h.Phase(a1), JobPhase::kRunning);
  EXPECT_EQ(h.Phase(a2), JobPhase::kRunning);
  EXPECT_EQ(h.Phase(a3), JobPhase::kPending);
  EXPECT_EQ(h.Phase(b1), JobPhase::kRunning);
  EXPECT_NE(h.sched().BudgetHold(a3).find("runs 2 job(s), its limit"), std::string::npos);
  EXPECT_TRUE(h.sched().AdmissionBlock("a", 2).empty());
  EXPECT_NE(h.sched().AdmissionBlock("a", 3).find("team a has 1 job(s) waiting and may have at most 3"),
            std::string::npos);
  EXPECT_TRUE(h.sched().AdmissionBlock("b", 100).empty());
  h.sched().SetTeamQuota("a", TeamQuota{});
  h.Timer();
  EXPECT_EQ(h.Phase(a3), JobPhase::kRunning);
  EXPECT_TRUE(h.sched().AdmissionBlock("a", 1000).empty());
}

TEST(ScalingQueueTest, IsTheQueueInTheShapeTheSchedulerPlacesWithoutHeldJobs) {
  // Given 8-GPU H100 nodes and a hint that 8-GPU nodes may come, a 16-GPU job queues split as
  // 2 x 8 (the shape placement will use), a budget-held job of a spent team is left out, a job
  // whose spot node was reclaimed counts the reclaim and keeps its requeue time, and a job with
  // no checkpoint interval gets the default.
  testing::SchedulerHarness h("fifo");
  NodeId n0 = h.AddNode(PricedNode("n0", 8, 8));
  h.sched().SetNodeSizeHint("H100", 8);
  TeamBudget spent;
  spent.hard_micros = 1;
  spent.carried_micros = 1;
  h.sched().SetTeamBudget("broke", spent);
  model::JobSpec small = testing::MakeJob(8, 0, "a");
  small.checkpoint_interval = Duration::Minutes(10);
  JobId running = h.Submit(small);
  ASSERT_EQ(h.Phase(running), JobPhase::kRunning);
  JobId big = h.Submit(testing::MakeJob(16, 0, "a"));
  JobId held = h.Submit(testing::MakeJob(1, 0, "broke"));
  h.AdvanceTo(60);
  ASSERT_TRUE(h.sched().Handle(NodeReclaimed{n0}).ok());
  h.AdvanceTo(90);
  h.Stopped(running);

  std::vector<PendingJob> q = h.sched().ScalingQueue(Duration::Minutes(4));
  std::vector<int64_t> ids;
  for (const PendingJob& p : q) ids.push_back(p.id.value());
  EXPECT_EQ(std::count(ids.begin(), ids.end(), held.value()), 0);
  ASSERT_EQ(q.size(), 2u);
  const PendingJob& first = q[0].id == big ? q[0] : q[1];
  const PendingJob& again = q[0].id == running ? q[0] : q[1];
  EXPECT_EQ(first.id, big);
  EXPECT_EQ(first.gpus_per_node, 8);
  EXPECT_EQ(first.nodes, 2);
  EXPECT_EQ(first.spot_preemptions, 0);
  EXPECT_EQ(first.checkpoint_interval, PendingJob{}.checkpoint_interval);
  EXPECT_EQ(first.restart_overhead, Duration::Minutes(4));
  EXPECT_EQ(again.id, running);
  EXPECT_EQ(again.spot_preemptions, 1);
  EXPECT_EQ(again.checkpoint_interval, Duration::Minutes(10));
  EXPECT_EQ(again.queued_since, Time::FromSeconds(90));
  EXPECT_EQ(again.team, "a");
}

TEST(SchedulerTest, APassDoesNotAskThePlacementAgainForAShapeThatFailedOnTheSameView) {
  // Given an 8-GPU node with 6 GPUs busy and a waiting 4-GPU job (greedy backfill: no
  // reservation), expect a full pass on the same view (a timer) to make no placement call for it,
  // and a change of the view (a temperature, a node added) to make the pass ask again, and the
  // job start once it fits.
  SchedulerHarness h("fifo", {"backfill=greedy"});
  NodeId n0 = h.AddNode(MakeNode("n0", "A100", 8));
  JobId busy = h.Submit(MakeJob(6));
  JobId waiting = h.Submit(MakeJob(4));
  ASSERT_EQ(h.Phase(busy), JobPhase::kRunning);
  ASSERT_EQ(h.Phase(waiting), JobPhase::kPending);
  int64_t calls = h.sched().stats().placement_calls;
  h.Timer();
  h.Timer();
  EXPECT_EQ(h.sched().stats().placement_calls, calls);  // the same view: the failure stands
  EXPECT_EQ(h.Phase(waiting), JobPhase::kPending);
  ASSERT_TRUE(h.view().SetTemperatures(n0, {50, 50, 50, 50, 50, 50, 50, 50}).ok());
  h.Timer();
  EXPECT_EQ(h.sched().stats().placement_calls, calls + 1);  // asked again, still no room
  EXPECT_EQ(h.Phase(waiting), JobPhase::kPending);
  calls = h.sched().stats().placement_calls;
  h.AddNode(MakeNode("n1", "A100", 4));
  EXPECT_GT(h.sched().stats().placement_calls, calls);
  EXPECT_EQ(h.Phase(waiting), JobPhase::kRunning);
}

}  // namespace
}  // namespace gpufleet::sched
