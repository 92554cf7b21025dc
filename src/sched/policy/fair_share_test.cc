#include "sched/policy/fair_share.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "testing/harness.h"

namespace gpufleet::sched {
namespace {

using testing::MakeJob;
using testing::MakeNode;
using testing::SchedulerHarness;

class FairShareTest : public ::testing::Test {
 protected:
  static JobView View(const model::JobSpec& spec, int64_t seq, JobPhase phase = JobPhase::kPending) {
    JobView v;
    v.id = JobId(seq);
    v.spec = &spec;
    v.seq = seq;
    v.phase = phase;
    return v;
  }
  // Usage and quota in whole GPUs.
  void SetTeam(const std::string& team, int64_t used, int64_t quota) {
    teams_[team] = TeamUsage{used * 1000, quota * 1000};
  }
  QueueContext Ctx() const { return QueueContext{Time::FromSeconds(1000), &teams_, 16'000}; }
  // A harness with two 8-GPU nodes and quotas a=8, b=8.
  static std::unique_ptr<SchedulerHarness> TwoNodes(std::vector<std::string> extra = {}) {
    std::vector<std::string> opts = {"quota.a=8", "quota.b=8"};
    opts.insert(opts.end(), extra.begin(), extra.end());
    auto h = std::make_unique<SchedulerHarness>("fair-share", opts);
    h->AddNode(MakeNode("n0", "A100", 8));
    h->AddNode(MakeNode("n1", "A100", 8));
    return h;
  }

  FairSharePolicy policy_;
  TeamUsageMap teams_;
};

TEST_F(FairShareTest, JobsWithinQuotaRankBeforeBorrowingJobs) {
  // Given team a at its quota (8 of 8) and team b idle, expect b's later job (within quota,
  // tier 0) ahead of a's earlier job (borrowing, tier 1).
  SetTeam("a", 8, 8);
  SetTeam("b", 0, 8);
  model::JobSpec a_job = MakeJob(1, 0, "a");
  model::JobSpec b_job = MakeJob(1, 500, "b");
  RankKey ra = policy_.Rank(View(a_job, 0), Ctx());
  RankKey rb = policy_.Rank(View(b_job, 1), Ctx());
  EXPECT_LT(rb, ra);
  EXPECT_EQ(ra.k[0], 1);
  EXPECT_EQ(rb.k[0], 0);
}

TEST_F(FairShareTest, JobThatWouldOverrunItsQuotaBorrows) {
  // Given team a using 6 of 8, expect a 2-GPU job within quota and a 3-GPU job borrowing.
  SetTeam("a", 6, 8);
  model::JobSpec two = MakeJob(2, 0, "a"), three = MakeJob(3, 0, "a");
  EXPECT_EQ(policy_.Rank(View(two, 0), Ctx()).k[0], 0);
  EXPECT_EQ(policy_.Rank(View(three, 1), Ctx()).k[0], 1);
}

TEST_F(FairShareTest, RunningJobsOwnGpusAreNotCountedTwice) {
  // Given team a using 8 of 8 with one running 8-GPU job, expect that job in tier 0 (its own
  // GPUs are the usage) while a pending job of a is in tier 1.
  SetTeam("a", 8, 8);
  model::JobSpec eight = MakeJob(8, 0, "a");
  EXPECT_EQ(policy_.Rank(View(eight, 0, JobPhase::kRunning), Ctx()).k[0], 0);
  EXPECT_EQ(policy_.Rank(View(eight, 1, JobPhase::kPending), Ctx()).k[0], 1);
}

TEST_F(FairShareTest, TeamUsingSmallerFractionOfQuotaGoesFirst) {
  // Given team a using 2 of 8 (25%) and team b 2 of 4 (50%), expect a's job first though
  // b's was submitted earlier; then, with equal fractions, submission time decides.
  SetTeam("a", 2, 8);
  SetTeam("b", 2, 4);
  model::JobSpec a_job = MakeJob(1, 900, "a");
  model::JobSpec b_job = MakeJob(1, 0, "b");
  RankKey ra = policy_.Rank(View(a_job, 0), Ctx());
  RankKey rb = policy_.Rank(View(b_job, 1), Ctx());
  EXPECT_LT(ra, rb);
  EXPECT_EQ(ra.k[1], 250);
  EXPECT_EQ(rb.k[1], 500);
  SetTeam("b", 4, 16);
  EXPECT_LT(policy_.Rank(View(b_job, 1), Ctx()), policy_.Rank(View(a_job, 0), Ctx()));
}

TEST_F(FairShareTest, HigherPriorityClassFirstWithinATeamAndTier) {
  // Given two jobs of one team, the later one of class 3, expect the class-3 job first.
  SetTeam("a", 0, 8);
  model::JobSpec plain = MakeJob(1, 0, "a");
  model::JobSpec urgent = MakeJob(1, 600, "a");
  urgent.priority = 3;
  EXPECT_LT(policy_.Rank(View(urgent, 1), Ctx()), policy_.Rank(View(plain, 0), Ctx()));
}

TEST_F(FairShareTest, PendingJobsOfOneTeamAndSizeRankAlikeSaveTheirStaticPart) {
  // Given teams at, under and over their quota (and one without a quota), and pending jobs of
  // one team and one size with other priorities and submission times: expect every rank to
  // differ from another only in k[2], and k[2] to be StaticRank's (what RanksAlikeInQueue
  // promises, and what a pass reads a queue's ranks by).
  ASSERT_TRUE(policy_.RanksAlikeInQueue());
  SetTeam("under", 2, 8);
  SetTeam("at", 8, 8);
  SetTeam("over", 12, 8);
  SetTeam("none", 3, 0);
  for (const std::string team : {"under", "at", "over", "none", "unknown"}) {
    for (int gpus : {1, 4, 8}) {
      std::vector<model::JobSpec> specs;
      for (int k = 0; k < 6; ++k) {
        specs.push_back(MakeJob(gpus, 10 * (5 - k), team));
        specs.back().priority = k % 3 - 1;
      }
      std::optional<RankKey> first;
      for (size_t k = 0; k < specs.size(); ++k) {
        JobView v = View(specs[k], static_cast<int64_t>(k + 1));
        RankKey r = policy_.Rank(v, Ctx());
        std::optional<RankKey> st = policy_.StaticRank(v);
        ASSERT_TRUE(st.has_value());
        EXPECT_EQ(r.k[2], st->k[2]) << team << " " << gpus << " job " << k;
        if (!first) first = r;
        EXPECT_EQ(r.k[0], first->k[0]) << team << " " << gpus << " job " << k;
        EXPECT_EQ(r.k[1], first->k[1]) << team << " " << gpus << " job " << k;
      }
    }
  }
}

TEST_F(FairShareTest, TeamsWithoutQuotaRankLast) {
  // Given team a over its quota (12 of 8) and team c without a quota and idle, expect a's
  // borrowing job ahead of c's (no quota counts as fully used).
  SetTeam("a", 12, 8);
  model::JobSpec a_job = MakeJob(1, 500, "a");
  model::JobSpec c_job = MakeJob(1, 0, "c");
  RankKey rc = policy_.Rank(View(c_job, 1), Ctx());
  EXPECT_EQ(rc.k[0], 1);
  EXPECT_LT(policy_.Rank(View(a_job, 0), Ctx()), rc);
  model::JobSpec no_team = MakeJob(1, 0, "");
  EXPECT_EQ(policy_.Rank(View(no_team, 2), Ctx()), rc);
}

TEST_F(FairShareTest, MayPreemptOnlyBorrowedCapacityOfAnotherTeam) {
  // Given a within quota and b using 12 of 8, expect a 4-GPU job of a may preempt a 4-GPU job
  // of b (b stays at 8) but not an 8-GPU one (b would fall to 4); a job of the same team, or a
  // borrowing waiting job, never preempts.
  SetTeam("a", 0, 8);
  SetTeam("b", 12, 8);
  model::JobSpec w = MakeJob(4, 100, "a");
  model::JobSpec b4 = MakeJob(4, 0, "b"), b8 = MakeJob(8, 0, "b");
  model::JobSpec a_running = MakeJob(4, 0, "a");
  EXPECT_TRUE(policy_.MayPreempt(View(w, 5), View(b4, 1, JobPhase::kRunning), Ctx()));
  EXPECT_FALSE(policy_.MayPreempt(View(w, 5), View(b8, 2, JobPhase::kRunning), Ctx()));
  EXPECT_FALSE(policy_.MayPreempt(View(w, 5), View(a_running, 3, JobPhase::kRunning), Ctx()));
  model::JobSpec big = MakeJob(9, 100, "a");  // would overrun a's quota
  EXPECT_FALSE(policy_.MayPreempt(View(big, 6), View(b4, 1, JobPhase::kRunning), Ctx()));
  EXPECT_EQ(policy_.PreemptionReason(), PreemptReason::kQuotaReclaim);
  EXPECT_TRUE(policy_.RanksDependOnUsage());
}

TEST_F(FairShareTest, OnlyAJobWithinItsTeamsUnusedQuotaMayPreemptSomeone) {
  // Given a using 4 of 8 and c without quota, expect a 4-GPU job of a may preempt someone, and
  // a 5-GPU job of a (it would overrun the quota) or any job of c may preempt nobody.
  SetTeam("a", 4, 8);
  SetTeam("c", 4, 0);
  model::JobSpec fits = MakeJob(4, 0, "a"), over = MakeJob(5, 0, "a"), c_wait = MakeJob(1, 0, "c");
  EXPECT_TRUE(policy_.MayPreemptSomeone(View(fits, 1), Ctx()));
  EXPECT_FALSE(policy_.MayPreemptSomeone(View(over, 2), Ctx()));
  EXPECT_FALSE(policy_.MayPreemptSomeone(View(c_wait, 3), Ctx()));
}

TEST_F(FairShareTest, TeamWithoutQuotaNeverPreemptsButCanBePreempted) {
  // Given team c without quota running 4 GPUs, expect a within-quota job of a may preempt it,
  // and c's waiting job may preempt nobody.
  SetTeam("a", 0, 8);
  SetTeam("c", 4, 0);
  model::JobSpec a_job = MakeJob(4, 0, "a"), c_run = MakeJob(4, 0, "c"), c_wait = MakeJob(1, 0, "c");
  model::JobSpec a_run = MakeJob(1, 0, "a");
  EXPECT_TRUE(policy_.MayPreempt(View(a_job, 1), View(c_run, 0, JobPhase::kRunning), Ctx()));
  EXPECT_FALSE(policy_.MayPreempt(View(c_wait, 2), View(a_run, 3, JobPhase::kRunning), Ctx()));
}

TEST_F(FairShareTest, DescribeRankExplainsQuotaUse) {
  // Given teams within quota, at quota and without quota, expect the words explain shows.
  SetTeam("a", 3, 8);
  SetTeam("b", 8, 8);
  model::JobSpec a_job = MakeJob(2, 0, "a"), b_job = MakeJob(1, 0, "b"), c_job = MakeJob(1, 0, "");
  EXPECT_EQ(policy_.DescribeRank(View(a_job, 0), Ctx()), "team a uses 3 of its 8 guaranteed GPUs");
  EXPECT_EQ(policy_.DescribeRank(View(b_job, 1), Ctx()),
            "team b uses 8 of its 8 guaranteed GPUs; quota exhausted for this job: it can only borrow "
            "idle capacity");
  EXPECT_EQ(policy_.DescribeRank(View(c_job, 2), Ctx()),
            "team (no team) has no guaranteed quota: it runs only on idle capacity");
}

TEST_F(FairShareTest, TeamBorrowsIdleCapacityWhileOthersAreIdle) {
  // Given quotas a=8, b=8 on 16 GPUs and b idle, expect team a to run 16 GPUs (8 borrowed) and
  // a third 8-GPU job of a to wait without preempting a's own jobs.
  auto h = TwoNodes();
  JobId a1 = h->Submit(MakeJob(8, 0, "a"));
  JobId a2 = h->Submit(MakeJob(8, 0, "a"));
  JobId a3 = h->Submit(MakeJob(8, 0, "a"));
  EXPECT_EQ(h->Phase(a1), JobPhase::kRunning);
  EXPECT_EQ(h->Phase(a2), JobPhase::kRunning);
  EXPECT_EQ(h->Phase(a3), JobPhase::kPending);
  EXPECT_TRUE(h->sink().Preempted().empty());
}

TEST_F(FairShareTest, SmallerQuotaFractionGetsTheFreedGpuFirst) {
  // Given a full 4-GPU node where team a uses 1 of 8 and team b 3 of 8, and waiting jobs of b
  // (earlier) and a (later), expect a's job first in the queue and first to start when a GPU
  // frees, and no preemption (no team is over its quota).
  SchedulerHarness h("fair-share", {"quota.a=8", "quota.b=8"});
  h.AddNode(MakeNode("n0", "A100", 4));
  JobId a1 = h.Submit(MakeJob(1, 0, "a"));
  h.Submit(MakeJob(3, 0, "b"));
  h.clock().Set(Time::FromSeconds(10));
  JobId b2 = h.Submit(MakeJob(1, 0, "b"));
  h.clock().Set(Time::FromSeconds(20));
  JobId a2 = h.Submit(MakeJob(1, 0, "a"));
  EXPECT_EQ(h.sched().QueueOrder(), (std::vector<JobId>{a2, b2}));
  EXPECT_TRUE(h.sink().Preempted().empty());
  h.Finish(a1);
  EXPECT_EQ(h.Phase(a2), JobPhase::kRunning);
  EXPECT_EQ(h.Phase(b2), JobPhase::kPending);
}

TEST_F(FairShareTest, ReclaimPreemptsTheBorrowingJobThatKeepsTheOwnerAtQuota) {
  // Given b running 8 GPUs on n0 and 4 on n1 (12 of its 8) and a running 4 on n1, expect a's
  // new 4-GPU job (within quota) to preempt exactly b's 4-GPU job with reason quota-reclaim,
  // never b's 8-GPU job (b would fall under its quota), and to start once it has stopped.
  auto h = TwoNodes();
  JobId b8 = h->Submit(MakeJob(8, 0, "b"));
  JobId b4 = h->Submit(MakeJob(4, 0, "b"));
  JobId a4 = h->Submit(MakeJob(4, 0, "a"));
  NodeId n0(0), n1(1);
  ASSERT_EQ(h->sched().PlacementOf(b8)->parts[0].node, n0);
  ASSERT_EQ(h->sched().PlacementOf(b4)->parts[0].node, n1);
  ASSERT_EQ(h->sched().PlacementOf(a4)->parts[0].node, n1);
  h->clock().Set(Time::FromSeconds(100));
  JobId a_new = h->Submit(MakeJob(4, 0, "a"));
  ASSERT_EQ(h->sink().Preempted(), (std::vector<int64_t>{b4.value()}));
  EXPECT_EQ(h->sink().actions.back().reason, PreemptReason::kQuotaReclaim);
  EXPECT_EQ(h->Phase(a_new), JobPhase::kPending);
  h->StopAllPreempted();
  EXPECT_EQ(h->Phase(a_new), JobPhase::kRunning);
  EXPECT_EQ(h->sched().PlacementOf(a_new)->parts[0].node, n1);
  EXPECT_EQ(h->Phase(b8), JobPhase::kRunning);
  EXPECT_EQ(h->Phase(b4), JobPhase::kPending);
}

TEST_F(FairShareTest, NeverPreemptsATeamWithinItsOwnQuota) {
  // Given one 8-GPU node fully used by b within its quota (8 of 8), expect a's within-quota job
  // to wait rather than take b's guaranteed GPUs.
  SchedulerHarness h("fair-share", {"quota.a=8", "quota.b=8"});
  h.AddNode(MakeNode("n0", "A100", 8));
  h.Submit(MakeJob(4, 0, "b"));
  h.Submit(MakeJob(4, 0, "b"));
  JobId a = h.Submit(MakeJob(4, 0, "a"));
  EXPECT_TRUE(h.sink().Preempted().empty());
  EXPECT_EQ(h.Phase(a), JobPhase::kPending);
}

TEST_F(FairShareTest, OverQuotaTeamWhoseJobsAreAllLargerThanItsSurplusIsNotPreempted) {
  // Given b running two 6-GPU jobs (12 of 8: each job is more than its 4 borrowed GPUs), expect
  // a's 4-GPU job to wait: preempting either would cut into b's quota.
  auto h = TwoNodes();
  h->Submit(MakeJob(6, 0, "b"));
  h->Submit(MakeJob(6, 0, "b"));
  JobId a = h->Submit(MakeJob(4, 0, "a"));
  EXPECT_TRUE(h->sink().Preempted().empty());
  EXPECT_EQ(h->Phase(a), JobPhase::kPending);
}

TEST_F(FairShareTest, ReclaimNeverTakesMoreThanTheBorrowedGpusInOnePass) {
  // Given b using 10 of its 8 GPUs as five 2-GPU jobs (n0: 3 jobs and 2 free GPUs; n1: 2 jobs
  // and 4 free), expect a's 8-GPU job not to preempt: making room on one node takes two of b's
  // jobs (4 GPUs), which would leave b with 6, under its quota.
  auto h = TwoNodes();
  std::vector<JobId> b;
  for (int i = 0; i < 3; ++i) b.push_back(h->Submit(MakeJob(2, 0, "b")));
  JobId filler = h->Submit(MakeJob(2, 0, "b"));  // fills n0
  b.push_back(h->Submit(MakeJob(2, 0, "b")));    // n1
  b.push_back(h->Submit(MakeJob(2, 0, "b")));    // n1
  ASSERT_EQ(h->sched().PlacementOf(b[4])->parts[0].node, NodeId(1));
  h->Finish(filler);
  JobId a = h->Submit(MakeJob(8, 0, "a"));
  EXPECT_TRUE(h->sink().Preempted().empty());
  EXPECT_EQ(h->Phase(a), JobPhase::kPending);
}

}  // namespace
}  // namespace gpufleet::sched
